/* err.h - one error mechanism for all of saelite.
 *
 * Contract: every fallible function returns an int code from err_code (OK == 0).
 * On failure it records a one-line, human-readable message with err_set(), which
 * returns the code so callers write `return err_set(ERR_IO, "open %s: %s", p, strerror(errno));`.
 * err_msg() returns the last message of the calling thread (thread-local storage,
 * valid until the next err_set on that thread). Only cli/ prints messages or exits.
 * Foreign errors (errno, sqlite rc, libpng longjmp) are converted at module boundaries.
 */
#ifndef SAELITE_ERR_H
#define SAELITE_ERR_H

enum err_code {
    OK = 0,
    ERR_NOMEM,    /* allocation failed */
    ERR_IO,       /* open/read/write/rename failed, disk full */
    ERR_FORMAT,   /* a file's contents are malformed */
    ERR_SHAPE,    /* tensor shapes or widths do not match */
    ERR_ARG,      /* invalid argument or flag value */
    ERR_SQL,      /* SQLite reported an error */
    ERR_PNG,      /* libpng/cairo reported an error */
    ERR_ABORTED,  /* a hook or the user asked to stop */
    ERR_NOTFOUND, /* a named thing (tensor, hook, SAE, file) does not exist */
    ERR_VERSION,  /* a file or database of an unsupported version */
    ERR_BUSY,     /* a shared resource is in use; try again (serve's SQL console) */
    ERR__COUNT
};

/* Messages fit in ERR_MSG_MAX bytes with the NUL: room for two PATH_MAX paths and the problem.
 * A longer one keeps its head and its tail with " ... " between (it named the file first and
 * the problem last, and a cut at the end lost the problem). */
#define ERR_MSG_MAX 8192

/* Record a printf-style message and return code (at most ERR_MSG_MAX bytes, above). Control
 * characters (< 0x20, 0x7f) in the formatted text are escaped (\n, \r, \t, \xHH), so a message
 * quoting a name read from a file stays one line; err_wrap escapes its prefix likewise. */
int err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepend context to the current message ("loading X: <old message>"), return code. */
int err_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Last message recorded on this thread ("" if none). */
const char *err_msg(void);
/* In the last message, the first `from` becomes `to` (a staging file's name becomes the one the
 * user gave); to is not escaped. */
void err_replace(const char *from, const char *to);
/* Static name of a code, e.g. "I/O error". */
const char *err_str(int code);
/* Forget the last message. */
void err_clear(void);

#endif
