/* progress.h - progress reporting for long commands.
 *
 * A progress line (label, done/total, rate, ETA, and a caller-supplied status such as the
 * current loss) is redrawn on stderr at most ~8 times a second, and only when stderr is a
 * terminal, so logs and pipes stay clean. progress_end() clears the line; the command then
 * prints its own summary. Set SAELITE_PROGRESS=1 to force the line on (e.g. under `script`),
 * =0 to force it off. Not thread-safe: one reporter per thread.
 */
#ifndef SAELITE_PROGRESS_H
#define SAELITE_PROGRESS_H

typedef struct {
    const char *label; /* e.g. "extract" */
    const char *unit;  /* e.g. "tok" */
    double total;      /* 0 = unknown (no ETA) */
    double start;      /* monotonic seconds at begin */
    double last_draw;
    double done;
    int enabled;
} progress;

void progress_begin(progress *p, const char *label, double total, const char *unit);
/* done: absolute count so far. status: optional printf-style extra text (may be NULL). */
void progress_update(progress *p, double done, const char *status, ...)
    __attribute__((format(printf, 3, 4)));
/* Clear the line. Returns elapsed seconds. */
double progress_end(progress *p);

/* Monotonic wall clock in seconds. */
double now_seconds(void);
/* Format a count with a k/M/G suffix into buf (size >= 16). */
const char *fmt_si(char *buf, double v);

#endif
