/* buf.c - growable byte buffer (see buf.h). */
#include "common/buf.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"

static int grow(buf *b, size_t extra)
{
    if (b->n + extra + 1 <= b->cap) return OK;
    if (extra > ((size_t)-1 - 256) / 2 - b->n - 1) return err_set(ERR_NOMEM, "buffer too large");
    size_t nc = (b->n + extra + 1) * 2 + 256;
    char *q = mem_realloc(b->p, nc);
    if (!q) return err_set(ERR_NOMEM, "out of memory for a %zu-byte buffer", nc);
    b->p = q;
    b->cap = nc;
    return OK;
}

int buf_put(buf *b, const void *s, size_t n)
{
    if (grow(b, n)) return ERR_NOMEM;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return OK;
}

int buf_str(buf *b, const char *s) { return buf_put(b, s, strlen(s)); }

int buf_printf(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int k = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (k < 0) return err_set(ERR_ARG, "buf_printf: bad format '%s'", fmt);
    if ((size_t)k < sizeof small) return buf_put(b, small, (size_t)k);
    if (grow(b, (size_t)k)) return ERR_NOMEM;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
    return OK;
}

int buf_json(buf *b, const char *s, size_t n, int flags)
{
    size_t n0 = b->n;
    int rc = buf_put(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        rc = buf_put(b, s + run, i - run);
        char e[8];
        int shortform = !(flags & BUF_JSON_CTRL_U);
        if (c == '"') strcpy(e, "\\\"");
        else if (c == '\\') strcpy(e, "\\\\");
        else if (shortform && c == '\n') strcpy(e, "\\n");
        else if (shortform && c == '\t') strcpy(e, "\\t");
        else if (shortform && c == '\r') strcpy(e, "\\r");
        else snprintf(e, sizeof e, "\\u%04x", c);
        if (!rc) rc = buf_str(b, e);
        run = i + 1;
    }
    if (!rc) rc = buf_put(b, s + run, n - run);
    if (!rc) rc = buf_put(b, "\"", 1);
    if (rc) { /* all or nothing */
        b->n = n0;
        if (b->p) b->p[n0] = 0;
    }
    return rc;
}

void buf_reset(buf *b)
{
    b->n = 0;
    if (b->p) b->p[0] = 0;
}

void buf_free(buf *b)
{
    mem_free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

const char *buf_double(char *out, size_t cap, double x)
{
    for (int p = 15; p <= 17; p++) {
        snprintf(out, cap, "%.*g", p, x);
        if (strtod(out, NULL) == x) break;
    }
    return out;
}

static size_t digits(const char *s)
{
    size_t n = 0;
    while (s[n] >= '0' && s[n] <= '9') n++;
    return n;
}

size_t buf_read_double(const char *s, int flags, double *x)
{
    int json = flags & BUF_DECIMAL_JSON;
    size_t n = 0;
    if (s[n] == '-' || (!json && s[n] == '+')) n++;
    size_t whole = digits(s + n), frac = 0;
    n += whole;
    if (s[n] == '.') {
        frac = digits(s + n + 1);
        if (frac || (whole && !json)) n += 1 + frac;
    }
    if (!whole && !(frac && !json)) return 0;
    if (s[n] == 'e' || s[n] == 'E') {
        size_t e = n + 1;
        if (s[e] == '+' || s[e] == '-') e++;
        if (digits(s + e)) n = e + digits(s + e);
    }
    /* strtod reads at least that much; more only where it reads another spelling (0x10) */
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    int overflow = isinf(v) && (flags & BUF_DECIMAL_OVERFLOW);
    if ((size_t)(end - s) != n || (!isfinite(v) && !overflow)) return 0;
    if (errno == ERANGE && fabs(v) > DBL_MIN && !overflow) return 0;
    *x = v;
    return n;
}
