/* args.c - flag parsing and shared CLI helpers (error printing, signals). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/mem.h"

const char *cli_usage_of(const char *cmd); /* main.c */

volatile int cli_stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    if (cli_stop_flag) _exit(130); /* second Ctrl-C: stop now */
    cli_stop_flag = 1;
}

void cli_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int cli_interrupted(void) { return cli_stop_flag; }

int cli_fail(const char *cmd)
{
    const char *m = err_msg();
    fprintf(stderr, "saelite %s: %s\n", cmd, m[0] ? m : "failed");
    return 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "saelite %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see 'saelite %s --help')\n", cmd);
    return 2;
}

void args_help(const char *cmd, const arg_spec *spec)
{
    const char *u = cli_usage_of(cmd);
    printf("usage: %s\n", u ? u : cmd);
    if (spec && spec[0].name) printf("\noptions:\n");
    for (const arg_spec *s = spec; s && s->name; s++) {
        const char *meta = s->kind == ARG_FLAG ? "" : s->kind == ARG_STR ? " STR"
                         : s->kind == ARG_FLOAT ? " X" : " N";
        char left[64];
        snprintf(left, sizeof left, "%s%s", s->name, meta);
        printf("  %-22s %s\n", left, s->help ? s->help : "");
    }
}

static int parse_value(const char *cmd, const arg_spec *s, const char *v)
{
    char *end;
    errno = 0;
    switch (s->kind) {
    case ARG_STR:
        *(const char **)s->dst = v;
        return 0;
    case ARG_INT: {
        long x = strtol(v, &end, 10);
        if (end == v || *end || errno || x < -2147483647L || x > 2147483647L)
            return cli_usage_error(cmd, "%s expects an integer, got '%s'", s->name, v);
        *(int *)s->dst = (int)x;
        return 0;
    }
    case ARG_I64: {
        /* accept 1e6 / 10M / 2k style sizes as well as plain integers */
        double x = strtod(v, &end);
        double mul = 1;
        if (end != v && (*end == 'k' || *end == 'K')) { mul = 1e3; end++; }
        else if (end != v && (*end == 'M' || *end == 'm')) { mul = 1e6; end++; }
        else if (end != v && (*end == 'G' || *end == 'g')) { mul = 1e9; end++; }
        x *= mul;
        if (end == v || *end || errno || !isfinite(x) || x != floor(x) || fabs(x) > 9e18)
            return cli_usage_error(cmd, "%s expects an integer, got '%s'", s->name, v);
        *(int64_t *)s->dst = (int64_t)x;
        return 0;
    }
    case ARG_FLOAT: {
        double x = strtod(v, &end);
        if (end == v || *end || errno || !isfinite(x))
            return cli_usage_error(cmd, "%s expects a finite number, got '%s'", s->name, v);
        *(double *)s->dst = x;
        return 0;
    }
    case ARG_FLAG:
        break;
    }
    return cli_usage_error(cmd, "%s takes no value", s->name);
}

int args_parse(const char *cmd, int argc, char **argv, const arg_spec *spec, const char **pos,
               int max_pos, int *npos)
{
    int np = 0, only_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            args_help(cmd, spec);
            return -1;
        }
        if (!only_pos && !strcmp(a, "--")) { only_pos = 1; continue; }
        if (only_pos || a[0] != '-' || a[1] == 0 || (a[1] >= '0' && a[1] <= '9')) {
            if (np >= max_pos)
                return cli_usage_error(cmd, "unexpected argument '%s'", a);
            pos[np++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        const arg_spec *s = NULL;
        int negate = 0;
        for (const arg_spec *t = spec; t && t->name; t++) {
            if (strlen(t->name) == nl && !strncmp(t->name, a, nl)) { s = t; break; }
            if (t->kind == ARG_FLAG && !strncmp(a, "--no-", 5) && strlen(t->name) == nl - 3 &&
                !strncmp(t->name + 2, a + 5, nl - 5)) { s = t; negate = 1; break; }
        }
        if (!s) return cli_usage_error(cmd, "unknown option '%.*s'", (int)nl, a);
        if (s->kind == ARG_FLAG) {
            if (eq) return cli_usage_error(cmd, "%s takes no value", s->name);
            *(int *)s->dst = !negate;
            continue;
        }
        const char *v;
        if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else return cli_usage_error(cmd, "%s needs a value", s->name);
        int rc = parse_value(cmd, s, v);
        if (rc) return rc;
    }
    if (npos) *npos = np;
    return 0;
}

int args_int_list(const char *s, int **out, int *n)
{
    int cap = 16, cnt = 0;
    int *v = mem_alloc(sizeof(int) * (size_t)cap);
    if (!v) return err_set(ERR_NOMEM, "out of memory");
    const char *p = s;
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b;
        if (end == p || a < 0) goto bad;
        p = end;
        b = a;
        if (*p == '-') {
            b = strtol(p + 1, &end, 10);
            if (end == p + 1 || b < a) goto bad;
            p = end;
        }
        if (b - a > 10000000) goto bad;
        for (long x = a; x <= b; x++) {
            if (cnt == cap) {
                int *nv = mem_realloc(v, sizeof(int) * (size_t)(cap *= 2));
                if (!nv) { mem_free(v); return err_set(ERR_NOMEM, "out of memory"); }
                v = nv;
            }
            v[cnt++] = (int)x;
        }
        if (*p == ',') p++;
        else if (*p) goto bad;
    }
    if (cnt == 0) goto bad;
    *out = v;
    *n = cnt;
    return OK;
bad:
    mem_free(v);
    return err_set(ERR_ARG, "bad list '%s' (want e.g. 0,5,7-9)", s);
}
