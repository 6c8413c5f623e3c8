#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
};

int err_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    return code;
}

int err_wrap(int code, const char *fmt, ...)
{
    char old[sizeof err_buf], prefix[512];
    va_list ap;
    memcpy(old, err_buf, sizeof old);
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    snprintf(err_buf, sizeof err_buf, "%s: %s", prefix, old[0] ? old : err_str(code));
    return code;
}

const char *err_msg(void) { return err_buf; }

const char *err_str(int code)
{
    if (code < 0 || code >= ERR__COUNT || !err_names[code]) return "unknown error";
    return err_names[code];
}

void err_clear(void) { err_buf[0] = 0; }
