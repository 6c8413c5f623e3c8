#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "common/utf8.h"

static _Thread_local char err_buf[1024];

static const char *const err_names[ERR__COUNT] = {
    [OK] = "ok",
    [ERR_NOMEM] = "out of memory",
    [ERR_IO] = "I/O error",
    [ERR_FORMAT] = "bad file format",
    [ERR_SHAPE] = "shape mismatch",
    [ERR_ARG] = "invalid argument",
    [ERR_SQL] = "database error",
    [ERR_PNG] = "image error",
    [ERR_ABORTED] = "aborted",
    [ERR_NOTFOUND] = "not found",
    [ERR_VERSION] = "unsupported version",
    [ERR_BUSY] = "busy",
};

/* Copy src into dst (capacity cap) with control characters escaped, so a message quoting a
 * name read from a file (a tensor name with a newline, say) stays one line and cannot forge
 * log lines. Bytes that are not UTF-8, and C1 controls (U+0080..U+009F, 0x9b is a terminal's
 * CSI), are escaped as \xNN too: a damaged schema's name printed raw bytes to the terminal.
 * Backslashes are kept as they are: paths stay readable. */
static void escape_into(char *dst, size_t cap, const char *src)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, n = strlen(src);
    const unsigned char *p = (const unsigned char *)src, *end = p + n;
    while (p < end) {
        char e[5];
        size_t k = 0, step = 1;
        uint32_t cp = 0;
        size_t u = *p >= 0x80 ? utf8_decode(p, (size_t)(end - p), &cp) : 0;
        if (*p == '\n') { e[0] = '\\'; e[1] = 'n'; k = 2; }
        else if (*p == '\r') { e[0] = '\\'; e[1] = 'r'; k = 2; }
        else if (*p == '\t') { e[0] = '\\'; e[1] = 't'; k = 2; }
        else if (*p < 0x20 || *p == 0x7f || (*p >= 0x80 && (!u || cp < 0xa0))) {
            e[0] = '\\'; e[1] = 'x'; e[2] = hex[*p >> 4]; e[3] = hex[*p & 15]; k = 4;
        } else if (u) { memcpy(e, p, u); k = step = u; }
        else { e[0] = (char)*p; k = 1; }
        if (o + k >= cap) break; /* truncate, never split an escape or a character */
        memcpy(dst + o, e, k);
        o += k;
        p += step;
    }
    dst[o] = 0;
}

int err_set(int code, const char *fmt, ...)
{
    char raw[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    escape_into(err_buf, sizeof err_buf, raw);
    return code;
}

int err_wrap(int code, const char *fmt, ...)
{
    /* the old message is already escaped; only the new prefix needs it */
    char old[sizeof err_buf], raw[512], prefix[512];
    va_list ap;
    memcpy(old, err_buf, sizeof old);
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    escape_into(prefix, sizeof prefix, raw);
    snprintf(err_buf, sizeof err_buf, "%s: %s", prefix, old[0] ? old : err_str(code));
    return code;
}

const char *err_msg(void) { return err_buf; }

void err_replace(const char *from, const char *to)
{
    char *at = from[0] ? strstr(err_buf, from) : NULL;
    if (!at) return;
    char rest[sizeof err_buf];
    snprintf(rest, sizeof rest, "%s", at + strlen(from));
    snprintf(at, sizeof err_buf - (size_t)(at - err_buf), "%s%s", to, rest);
}

const char *err_str(int code)
{
    if (code < 0 || code >= ERR__COUNT || !err_names[code]) return "unknown error";
    return err_names[code];
}

void err_clear(void) { err_buf[0] = 0; }
