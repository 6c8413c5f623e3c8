/* progress.h - progress reporting for long commands.
 *
 * A progress line (label, done/total, rate, ETA, and a caller-supplied status such as the
 * current loss) goes to stderr in one of three modes, chosen by progress_begin:
 *   PROGRESS_TTY    stderr is a terminal: the line is redrawn in place (\r) at most ~8 times a
 *                   second; progress_end() clears it and the command prints its own summary.
 *   PROGRESS_LINES  stderr is a file or pipe: one plain line (no \r, no escapes) every
 *                   `interval` seconds (5 by default), the first one interval seconds after
 *                   begin, so `make demo > log 2>&1` shows progress and a short command prints
 *                   nothing; progress_end() prints nothing.
 *   PROGRESS_OFF    nothing.
 * SAELITE_PROGRESS=1 forces the redrawn line (e.g. under `script`), =lines the plain lines,
 * =0 turns it off (the test runner does: its checks read stderr). SAELITE_PROGRESS_EVERY=S sets
 * the plain lines' interval in seconds. stdout is never touched. Not thread-safe: one reporter
 * per thread.
 */
#ifndef SAELITE_PROGRESS_H
#define SAELITE_PROGRESS_H

enum { PROGRESS_OFF = 0, PROGRESS_TTY = 1, PROGRESS_LINES = 2 };

typedef struct {
    const char *label; /* e.g. "extract" */
    const char *unit;  /* e.g. "tok" */
    double total;      /* 0 = unknown (no ETA) */
    double start;      /* monotonic seconds at begin */
    double last_draw;
    double done;
    double base;       /* done before this run (a resume): left out of the rate and the ETA's */
    int enabled;       /* PROGRESS_OFF, _TTY or _LINES */
    double interval;   /* seconds between plain lines (PROGRESS_LINES); may be set after begin */
} progress;

void progress_begin(progress *p, const char *label, double total, const char *unit);
/* progress_begin for work of which `done` was already done (a resumed run): the percentage
 * counts it, the rate and the ETA only what this run does (a resume at 85% read 676k tok/s, ETA
 * 00:00, for a 17.9k tok/s run with 3 s to go). */
void progress_begin_at(progress *p, const char *label, double total, const char *unit, double done);
/* done: absolute count so far. status: optional printf-style extra text (may be NULL). */
void progress_update(progress *p, double done, const char *status, ...)
    __attribute__((format(printf, 3, 4)));
/* Clear the line (PROGRESS_TTY). Returns elapsed seconds. */
double progress_end(progress *p);

/* A one-line notice for a runner's caller (continuing from a checkpoint, or why not): formatted
 * (up to 4 KB) and handed to fn(msg, user); nothing when fn is NULL. Runners take such a callback
 * in their options, and only the caller prints. */
void progress_notice(void (*fn)(const char *msg, void *user), void *user, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Monotonic wall clock in seconds. */
double now_seconds(void);
/* Format a count with a k/M/G suffix into buf (size >= 16). */
const char *fmt_si(char *buf, double v);

#endif
