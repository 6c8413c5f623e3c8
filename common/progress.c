#include "common/progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *fmt_si(char *buf, double v)
{
    const char *suf = "";
    double a = v < 0 ? -v : v;
    if (a >= 1e9) { v /= 1e9; suf = "G"; }
    else if (a >= 1e6) { v /= 1e6; suf = "M"; }
    else if (a >= 1e3) { v /= 1e3; suf = "k"; }
    snprintf(buf, 16, suf[0] ? "%.2f%s" : "%.0f%s", v, suf);
    return buf;
}

static void fmt_eta(char *buf, size_t n, double s)
{
    if (s < 0 || s > 1e7) { snprintf(buf, n, "--:--"); return; }
    int t = (int)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%02d:%02d", t / 60, t % 60);
}

void progress_begin(progress *p, const char *label, double total, const char *unit)
{
    memset(p, 0, sizeof *p);
    p->label = label;
    p->unit = unit ? unit : "";
    p->total = total;
    p->start = now_seconds();
    const char *force = getenv("SAELITE_PROGRESS");
    if (force && *force) p->enabled = atoi(force) != 0;
    else p->enabled = isatty(STDERR_FILENO);
}

void progress_update(progress *p, double done, const char *status, ...)
{
    p->done = done;
    if (!p->enabled) return;
    double t = now_seconds();
    if (t - p->last_draw < 0.125 && (p->total <= 0 || done < p->total)) return;
    p->last_draw = t;
    double el = t - p->start;
    double rate = el > 0 ? done / el : 0;
    char a[16], b[16], r[16], eta[32], extra[256] = "";
    if (status) {
        va_list ap;
        va_start(ap, status);
        vsnprintf(extra, sizeof extra, status, ap);
        va_end(ap);
    }
    if (p->total > 0) {
        fmt_eta(eta, sizeof eta, rate > 0 ? (p->total - done) / rate : -1);
        fprintf(stderr, "\r\033[K%s %5.1f%% %s/%s %s  %s %s/s  ETA %s  %s", p->label,
                100.0 * done / p->total, fmt_si(a, done), fmt_si(b, p->total), p->unit,
                "", fmt_si(r, rate), eta, extra);
    } else {
        fmt_eta(eta, sizeof eta, el);
        fprintf(stderr, "\r\033[K%s %s %s  %s %s/s  elapsed %s  %s", p->label, fmt_si(a, done),
                p->unit, "", fmt_si(r, rate), eta, extra);
    }
    fflush(stderr);
}

double progress_end(progress *p)
{
    if (p->enabled) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
    return now_seconds() - p->start;
}
