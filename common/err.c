#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"

static _Thread_local char err_buf[ERR_MSG_MAX];

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
 * Backslashes are kept as they are: paths stay readable. unit (optional, cap bytes): 1 where
 * an escape or a character starts in dst. */
static void escape_into(char *dst, size_t cap, const char *src, char *unit)
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
        if (unit) {
            unit[o] = 1;
            memset(unit + o + 1, 0, k - 1);
        }
        memcpy(dst + o, e, k);
        o += k;
        p += step;
    }
    if (unit) unit[o] = 1;
    dst[o] = 0;
}

/* src (raw: escaped here, or esc: already escaped, each byte a unit) into err_buf. One that does
 * not fit keeps its head and its tail with " ... " between, cut between escapes and characters:
 * a message names the file first and the problem last, and a path of a few thousand bytes cut
 * the problem off ("open /long/.../nonexi"). Plain truncation where memory for the copy is
 * short. */
static void put_msg(const char *src, int esc)
{
    static const char mid[] = " ... ";
    size_t n = strlen(src), cap = esc ? n + 1 : 4 * n + 1; /* an escape is 4 bytes at most */
    char *out = cap > sizeof err_buf ? malloc(cap) : NULL, *unit = out ? malloc(cap) : NULL;
    if (!unit) { /* it fits (no copy needed), or no memory: cut at the end as before */
        if (esc) snprintf(err_buf, sizeof err_buf, "%s", src);
        else escape_into(err_buf, sizeof err_buf, src, NULL);
        free(out);
        return;
    }
    if (esc) { /* whole characters (an escape's 4 bytes may be cut: it is not marked here) */
        memcpy(out, src, n + 1);
        for (size_t i = 0; i <= n; i++) unit[i] = ((unsigned char)src[i] & 0xc0) != 0x80;
    } else escape_into(out, cap, src, unit);
    size_t e = strlen(out);
    if (e < sizeof err_buf) memcpy(err_buf, out, e + 1);
    else {
        size_t keep = sizeof err_buf - sizeof mid, h = keep / 2, t = e - (keep - h);
        while (h > 0 && !unit[h]) h--;
        while (t < e && !unit[t]) t++;
        memcpy(err_buf, out, h);
        memcpy(err_buf + h, mid, sizeof mid - 1);
        memcpy(err_buf + h + sizeof mid - 1, out + t, e - t + 1);
    }
    free(out);
    free(unit);
}

/* fmt with ap, on the heap when the stack buffer is too small (NULL: out of memory, use buf) */
static char *format(char *buf, size_t cap, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(buf, cap, fmt, ap);
    char *big = n >= 0 && (size_t)n >= cap ? malloc((size_t)n + 1) : NULL;
    if (big) vsnprintf(big, (size_t)n + 1, fmt, aq);
    va_end(aq);
    return big;
}

int err_set(int code, const char *fmt, ...)
{
    char raw[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    char *big = format(raw, sizeof raw, fmt, ap);
    va_end(ap);
    put_msg(big ? big : raw, 0);
    free(big);
    return code;
}

int err_wrap(int code, const char *fmt, ...)
{
    /* the old message is already escaped; only the new prefix needs it. Escaped whole (on the
       heap when long): cut into a buffer of ERR_MSG_MAX it lost its end silently, before the
       join could keep head and tail (a review) */
    char raw[sizeof err_buf], small[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    char *big = format(raw, sizeof raw, fmt, ap);
    va_end(ap);
    const char *src = big ? big : raw;
    size_t cap = 4 * strlen(src) + 1; /* an escape is 4 bytes at most */
    char *prefix = cap > sizeof small ? malloc(cap) : NULL;
    if (!prefix) cap = sizeof small; /* it fits, or no memory: cut at the end */
    escape_into(prefix ? prefix : small, cap, src, NULL);
    free(big);
    const char *pre = prefix ? prefix : small;
    size_t lp = strlen(pre), lo = strlen(err_buf[0] ? err_buf : err_str(code));
    char *all = malloc(lp + 2 + lo + 1);
    if (!all) { /* no memory for both: the old message says the problem */
        free(prefix);
        if (!err_buf[0]) snprintf(err_buf, sizeof err_buf, "%s", err_str(code));
        return code;
    }
    snprintf(all, lp + 2 + lo + 1, "%s: %s", pre, err_buf[0] ? err_buf : err_str(code));
    free(prefix);
    put_msg(all, 1);
    free(all);
    return code;
}

const char *err_msg(void) { return err_buf; }

void err_replace(const char *from, const char *to)
{
    char *at = from[0] ? strstr(err_buf, from) : NULL;
    if (!at) return;
    size_t lh = (size_t)(at - err_buf), lt = strlen(to), lr = strlen(at + strlen(from));
    char *all = malloc(lh + lt + lr + 1);
    if (!all) return; /* the staging name stays: a longer name could not be put in */
    memcpy(all, err_buf, lh);
    memcpy(all + lh, to, lt);
    memcpy(all + lh + lt, at + strlen(from), lr + 1);
    put_msg(all, 1);
    free(all);
}

const char *err_str(int code)
{
    if (code < 0 || code >= ERR__COUNT || !err_names[code]) return "unknown error";
    return err_names[code];
}

void err_clear(void) { err_buf[0] = 0; }
