#include "common/progress.h"

#include "common/dist.h"

#include <math.h>
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
    /* a slow rate keeps its digits (0.2 step/s printed "0", an audit); counts stay whole */
    snprintf(buf, 16, suf[0] ? "%.2f%s" : a < 100 && v != floor(v) ? "%.3g%s" : "%.0f%s", v, suf);
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
    p->interval = 5;
    const char *every = getenv("SAELITE_PROGRESS_EVERY");
    if (every && atof(every) > 0) p->interval = atof(every);
    const char *force = getenv("SAELITE_PROGRESS");
    if (force && !strcmp(force, "lines")) p->enabled = PROGRESS_LINES;
    else if (force && *force) p->enabled = atoi(force) != 0 ? PROGRESS_TTY : PROGRESS_OFF;
    else p->enabled = isatty(STDERR_FILENO) ? PROGRESS_TTY : PROGRESS_LINES;
    if (!dist_is_root()) p->enabled = PROGRESS_OFF; /* under mpirun rank 0 alone reports */
    if (p->enabled == PROGRESS_LINES) p->last_draw = p->start; /* first line after interval */
}

void progress_begin_at(progress *p, const char *label, double total, const char *unit, double done)
{
    progress_begin(p, label, total, unit);
    p->base = p->done = done;
}

void progress_update(progress *p, double done, const char *status, ...)
{
    p->done = done;
    if (!p->enabled) return;
    double t = now_seconds();
    if (p->enabled == PROGRESS_LINES) {
        if (t - p->last_draw < p->interval) return;
    } else if (t - p->last_draw < 0.125 && (p->total <= 0 || done < p->total)) {
        return;
    }
    p->last_draw = t;
    double el = t - p->start;
    double rate = el > 0 && done > p->base ? (done - p->base) / el : 0;
    char a[16], b[16], r[16], eta[32], extra[256] = "";
    if (status) {
        va_list ap;
        va_start(ap, status);
        vsnprintf(extra, sizeof extra, status, ap);
        va_end(ap);
    }
    /* the same text in both modes: redrawn after \r\033[K on a terminal, one line otherwise */
    char line[512];
    if (p->total > 0) {
        fmt_eta(eta, sizeof eta, rate > 0 ? (p->total - done) / rate : -1);
        snprintf(line, sizeof line, "%s %5.1f%% %s/%s %s  %s %s/s  ETA %s  %s", p->label,
                 100.0 * done / p->total, fmt_si(a, done), fmt_si(b, p->total), p->unit,
                 fmt_si(r, rate), p->unit, eta, extra);
    } else {
        fmt_eta(eta, sizeof eta, el);
        snprintf(line, sizeof line, "%s %s %s  %s %s/s  elapsed %s  %s", p->label,
                 fmt_si(a, done), p->unit, fmt_si(r, rate), p->unit, eta, extra);
    }
    if (p->enabled == PROGRESS_TTY) {
        fprintf(stderr, "\r\033[K%s", line);
    } else {
        size_t n = strlen(line);
        while (n && line[n - 1] == ' ') line[--n] = 0;
        fprintf(stderr, "%s\n", line);
    }
    fflush(stderr);
}

double progress_end(progress *p)
{
    if (p->enabled == PROGRESS_TTY) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
    return now_seconds() - p->start;
}

void progress_notice(void (*fn)(const char *msg, void *user), void *user, const char *fmt, ...)
{
    if (!fn) return;
    char msg[4400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fn(msg, user);
}
