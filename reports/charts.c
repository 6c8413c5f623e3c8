/* charts.c - axes, histogram, bar chart, heat map, line plot, scatter, token activation rows. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "reports/rep_internal.h"

#define INK 0x222222
#define GRID 0xe6e6e6
#define MUTED 0x666666

rep_axes rep_axes_make(const char *title, const char *xlabel, const char *ylabel)
{
    rep_axes a = {title, xlabel, ylabel, 0, 0, NAN, NAN, NAN, NAN};
    return a;
}

/* One axis: data [lo, hi] (log10 of the data on log axes) mapped to pixels [p0, p1]. */
typedef struct {
    double lo, hi;
    int log;
    double p0, p1;
    int counts; /* ticks at whole numbers >= 1 only (rep_axes.y_counts) */
} axis;

static double amap(const axis *a, double v)
{
    if (a->log) {
        if (!(v > 0)) return NAN;
        v = log10(v);
    }
    if (!isfinite(v)) return NAN;
    return a->p0 + (v - a->lo) / (a->hi - a->lo) * (a->p1 - a->p0);
}

/* Data extent accumulator; log axes only take positive values. */
typedef struct { double lo, hi; } extent;
static void ext_init(extent *e) { e->lo = INFINITY; e->hi = -INFINITY; }
static void ext_add(extent *e, double v, int log)
{
    if (log) {
        if (!(v > 0)) return;
        v = log10(v);
    }
    if (!isfinite(v)) return;
    if (v < e->lo) e->lo = v;
    if (v > e->hi) e->hi = v;
}

/* Decide the axis range from the caller's fixed limits or the data extent. pad: fraction of
 * the range added on each automatic side. */
static void axis_range(axis *a, double fmin, double fmax, int log, extent e, double pad)
{
    a->log = log;
    a->counts = 0;
    if (log) {
        fmin = fmin > 0 ? log10(fmin) : NAN;
        fmax = fmax > 0 ? log10(fmax) : NAN;
    }
    double lo = isfinite(fmin) ? fmin : e.lo, hi = isfinite(fmax) ? fmax : e.hi;
    if (!isfinite(lo) || !isfinite(hi)) { lo = log ? 0 : 0; hi = 1; }
    if (hi <= lo) {
        double d = log ? 0.5 : (fabs(lo) > 0 ? fabs(lo) * 0.1 : 0.5);
        lo -= d;
        hi += d;
    }
    double r = hi - lo;
    if (!isfinite(fmin)) lo -= pad * r;
    if (!isfinite(fmax)) hi += pad * r;
    a->lo = lo;
    a->hi = hi;
}

static double nice_step(double range, int target)
{
    double raw = range / (target > 1 ? target : 1), mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

/* Tick values (in data units, not log) for an axis; returns count (<= cap). */
static int ticks_any(const axis *a, int target, double *t, int cap);

static int ticks(const axis *a, int target, double *t, int cap)
{
    int n = ticks_any(a, target, t, cap), m = 0;
    if (!a->counts) return n;
    double least = a->log ? 1 : 0; /* a linear count axis keeps its 0 */
    for (int i = 0; i < n; i++)
        if (t[i] >= least - 1e-9 && fabs(t[i] - round(t[i])) < 1e-9) t[m++] = round(t[i]);
    /* a range below 2: its one whole count, if it holds one */
    double lo = a->log ? pow(10, a->lo) : a->lo, hi = a->log ? pow(10, a->hi) : a->hi;
    if (m == 0 && cap > 0 && ceil(lo) <= hi && ceil(lo) >= 1) t[m++] = ceil(lo);
    return m;
}

static int ticks_any(const axis *a, int target, double *t, int cap)
{
    int n = 0;
    if (a->log) {
        int d0 = (int)ceil(a->lo - 1e-9), d1 = (int)floor(a->hi + 1e-9);
        int every = 1;
        while ((d1 - d0) / every + 1 > target + 1) every++;
        for (int d = d0; d <= d1 && n < cap; d += every) t[n++] = pow(10, d);
        if (n >= 2) return n;
        /* Less than a decade: 1-2-5 ticks inside it, or, where those are fewer than three
           (L0 7 to 32 had only 10 and 20, an audit), every multiple 1-9 if they fit. */
        n = 0;
        for (int d = (int)floor(a->lo) - 1; d <= (int)ceil(a->hi) && n < cap; d++)
            for (int k = 0; k < 3 && n < cap; k++) {
                double v = (k == 0 ? 1 : k == 1 ? 2 : 5) * pow(10, d), l = log10(v);
                if (l >= a->lo - 1e-9 && l <= a->hi + 1e-9) t[n++] = v;
            }
        if (n >= 3) return n;
        double u[64];
        int m = 0;
        for (int d = (int)floor(a->lo) - 1; d <= (int)ceil(a->hi) && m < 64; d++)
            for (int k = 1; k <= 9 && m < 64; k++) {
                double v = k * pow(10, d), l = log10(v);
                if (l >= a->lo - 1e-9 && l <= a->hi + 1e-9) u[m++] = v;
            }
        if (m > n && m <= target + 1 && m <= cap) {
            memcpy(t, u, sizeof(double) * (size_t)m);
            n = m;
        }
        return n;
    }
    double step = nice_step(a->hi - a->lo, target);
    for (double v = ceil(a->lo / step - 1e-9) * step; v <= a->hi + step * 1e-9 && n < cap; v += step)
        t[n++] = fabs(v) < step * 1e-9 ? 0 : v;
    return n;
}

static void fmt_tick(const axis *a, double v, char *buf, size_t cap)
{
    if (a->log) {
        double l = log10(v);
        if (fabs(l - round(l)) < 1e-9 && (l < -3 || l >= 4)) {
            snprintf(buf, cap, "1e%d", (int)round(l));
            return;
        }
    }
    rep__fmt_tick(v, buf, cap);
}

static double legend_row(rep_canvas *c, double right, double y, double max_w,
                         const char *const *names, const rep_color *cols, int n, int draw);

typedef struct {
    double px, py, pw, ph; /* plot area */
    axis X, Y;
} frame;

/* Lay out and draw title, axes, grid, ticks and labels inside (x, y, w, h); X and Y ranges
 * must be set already (p0/p1 are filled in here). */
static void frame_draw(rep_canvas *c, double x, double y, double w, double h, const rep_axes *ax,
                       frame *fr, int draw_x_ticks, const char *const *names,
                       const rep_color *cols, int nnames)
{
    rep_font title = rep_font_make(14, 1, rep_rgb(INK), REP_LEFT, REP_TOP);
    rep_font lab = rep_font_make(12, 0, rep_rgb(INK), REP_CENTER, REP_TOP);
    rep_font tick = rep_font_make(11, 0, rep_rgb(MUTED), REP_CENTER, REP_TOP);
    /* The legend may use what the title leaves (the title keeps at least 40% of the width). */
    double ttw = ax->title ? rep_text_width(c, ax->title, &title) : 0;
    if (ttw > w * 0.4) ttw = w * 0.4;
    double lmax = w - 30 - ttw;
    double lw = legend_row(c, x + w - 10, y + 2, lmax, names, cols, nnames, 0);
    double top = y + ((ax->title && *ax->title) || lw > 0 ? 24 : 8);
    double left = x + (ax->ylabel && *ax->ylabel ? 20 : 4);
    /* y tick labels decide the left margin */
    double yt[64];
    axis Y = fr->Y;
    Y.p0 = 1;
    Y.p1 = 0;
    int nyt = ticks(&Y, 6, yt, 64);
    double ytw = 0;
    char buf[64];
    for (int i = 0; i < nyt; i++) {
        fmt_tick(&Y, yt[i], buf, sizeof buf);
        double tw = rep_text_width(c, buf, &tick);
        if (tw > ytw) ytw = tw;
    }
    fr->px = left + ytw + 8;
    fr->py = top;
    fr->pw = x + w - 10 - fr->px;
    fr->ph = y + h - (ax->xlabel && *ax->xlabel ? 38 : 22) - top;
    if (fr->pw < 10) fr->pw = 10;
    if (fr->ph < 10) fr->ph = 10;
    fr->X.p0 = fr->px;
    fr->X.p1 = fr->px + fr->pw;
    fr->Y.p0 = fr->py + fr->ph;
    fr->Y.p1 = fr->py;

    if (ax->title) rep_text(c, x + 4, y + 2, ax->title, &title, w - 16 - lw);
    legend_row(c, x + w - 10, y + 2, lmax, names, cols, nnames, 1);
    rep_rect(c, fr->px, fr->py, fr->pw, fr->ph, rep_rgb(0xffffff));
    tick.halign = REP_RIGHT;
    tick.valign = REP_MIDDLE;
    for (int i = 0; i < nyt; i++) {
        double py = amap(&fr->Y, yt[i]);
        rep_line(c, fr->px, py, fr->px + fr->pw, py, rep_rgb(GRID), 1, 0);
        fmt_tick(&fr->Y, yt[i], buf, sizeof buf);
        rep_text(c, fr->px - 4, py, buf, &tick, 0);
    }
    if (draw_x_ticks) {
        double xt[64];
        int nxt = ticks(&fr->X, (int)(fr->pw / 70) > 2 ? (int)(fr->pw / 70) : 2, xt, 64);
        tick.halign = REP_CENTER;
        tick.valign = REP_TOP;
        for (int i = 0; i < nxt; i++) {
            double px = amap(&fr->X, xt[i]);
            rep_line(c, px, fr->py, px, fr->py + fr->ph, rep_rgb(GRID), 1, 0);
            rep_line(c, px, fr->py + fr->ph, px, fr->py + fr->ph + 4, rep_rgb(INK), 1, 0);
            fmt_tick(&fr->X, xt[i], buf, sizeof buf);
            rep_text(c, px, fr->py + fr->ph + 5, buf, &tick, 0);
        }
    }
    rep_line(c, fr->px, fr->py + fr->ph, fr->px + fr->pw, fr->py + fr->ph, rep_rgb(INK), 1, 0);
    rep_line(c, fr->px, fr->py, fr->px, fr->py + fr->ph, rep_rgb(INK), 1, 0);
    if (ax->xlabel && *ax->xlabel)
        rep_text(c, fr->px + fr->pw / 2, y + h - 18, ax->xlabel, &lab, fr->pw);
    if (ax->ylabel && *ax->ylabel) {
        lab.angle = 90;
        rep_text(c, x + 4, fr->py + fr->ph / 2, ax->ylabel, &lab, fr->ph);
    }
}

/* Legend: one horizontal line of swatches and names, right-aligned in the title row, so it
 * never covers data or marker labels. Returns the width used (0 when nothing is named). */
static double legend_row(rep_canvas *c, double right, double y, double max_w,
                         const char *const *names, const rep_color *cols, int n, int draw)
{
    rep_font f = rep_font_make(11, 0, rep_rgb(INK), REP_LEFT, REP_MIDDLE);
    int k = 0;
    for (int i = 0; i < n; i++) k += names[i] && *names[i];
    if (!k) return 0;
    double each = max_w / k - 24; /* each entry gets an equal share when space is short */
    double tot = 0, tw[16];
    for (int i = 0; i < n; i++) {
        tw[i] = 0;
        if (!names[i] || !*names[i]) continue;
        tw[i] = rep_text_width(c, names[i], &f);
        if (tw[i] > each) tw[i] = each > 10 ? each : 10;
        tot += tw[i] + 24;
    }
    if (!draw) return tot;
    double px = right - tot;
    for (int i = 0; i < n; i++) {
        if (!names[i] || !*names[i]) continue;
        rep_color col = cols[i];
        col.a = 1;
        rep_rect(c, px + 4, y + 4, 14, 10, col);
        rep_text(c, px + 22, y + 9, names[i], &f, tw[i]);
        px += tw[i] + 24;
    }
    return tot;
}

static void no_data(rep_canvas *c, const frame *fr)
{
    rep_font f = rep_font_make(13, 0, rep_rgb(0x999999), REP_CENTER, REP_MIDDLE);
    rep_text(c, fr->px + fr->pw / 2, fr->py + fr->ph / 2, "no data", &f, fr->pw);
}

static void clip_to(rep_canvas *c, const frame *fr)
{
    cairo_save(c->cr);
    cairo_rectangle(c->cr, fr->px, fr->py, fr->pw, fr->ph);
    cairo_clip(c->cr);
}

static void unclip(rep_canvas *c) { cairo_restore(c->cr); }

static void markers(rep_canvas *c, const frame *fr, const rep_marker *m, int nm)
{
    rep_font f = rep_font_make(11, 1, rep_rgb(INK), REP_LEFT, REP_TOP);
    for (int i = 0; i < nm; i++) {
        double px = amap(&fr->X, m[i].x);
        if (!isfinite(px) || px < fr->px - 0.5 || px > fr->px + fr->pw + 0.5) continue;
        rep_line(c, px, fr->py, px, fr->py + fr->ph, m[i].color, 1.5, 5);
        if (m[i].label) {
            f.color = m[i].color;
            /* Label to the right of the line unless that runs out of the plot. */
            double tw = rep_text_width(c, m[i].label, &f);
            int right = px + 4 + tw <= fr->px + fr->pw;
            f.halign = right ? REP_LEFT : REP_RIGHT;
            double ly = fr->py + 4 + 16 * (i % 3);
            if (tw > fr->pw / 2) tw = fr->pw / 2;
            rep_rect(c, right ? px + 3 : px - 5 - tw, ly - 1, tw + 2, 15, rep_rgba(0xffffff, 0.8));
            rep_text(c, right ? px + 4 : px - 4, ly, m[i].label, &f, fr->pw / 2);
        }
    }
}

/* ---- histogram -------------------------------------------------------------------------- */
size_t rep_bin(const double *v, size_t n, double lo, double hi, int nbins, int log_bins,
               double *edges, double *counts)
{
    if (nbins <= 0 || !(hi > lo) || (log_bins && !(lo > 0))) return 0;
    double a = log_bins ? log10(lo) : lo, b = log_bins ? log10(hi) : hi;
    for (int i = 0; i <= nbins; i++) {
        double e = a + (b - a) * i / nbins;
        edges[i] = log_bins ? pow(10, e) : e;
    }
    memset(counts, 0, sizeof(double) * (size_t)nbins);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        double x = v[i];
        if (!(x >= lo && x <= hi)) continue;
        double t = log_bins ? log10(x) : x;
        int bi = (int)((t - a) / (b - a) * nbins);
        if (bi >= nbins) bi = nbins - 1;
        if (bi < 0) bi = 0;
        counts[bi] += 1;
        k++;
    }
    return k;
}

int rep_histogram(rep_canvas *c, double x, double y, double w, double h, const rep_axes *ax,
                  const double *edges, int nbins, const rep_hist_series *s, int nseries,
                  const rep_marker *marks, int nmarks)
{
    if (nbins < 0 || nseries < 0 || (nbins > 0 && !edges))
        return err_set(ERR_ARG, "histogram: bad bins (%d) or series (%d)", nbins, nseries);
    extent ex, ey;
    ext_init(&ex);
    ext_init(&ey);
    int any = 0;
    for (int i = 0; i <= nbins && nbins > 0; i++) ext_add(&ex, edges[i], ax->log_x);
    for (int k = 0; k < nseries; k++)
        for (int i = 0; i < nbins; i++) {
            ext_add(&ey, s[k].counts[i], ax->log_y);
            if (s[k].counts[i] > 0) any = 1;
        }
    for (int i = 0; i < nmarks; i++) ext_add(&ex, marks[i].x, ax->log_x);
    if (!ax->log_y) ext_add(&ey, 0, 0);
    frame fr;
    axis_range(&fr.X, ax->xmin, ax->xmax, ax->log_x, ex, 0.02);
    axis_range(&fr.Y, ax->ymin, ax->ymax, ax->log_y, ey, 0.05);
    if (!ax->log_y && !isfinite(ax->ymin) && ey.lo >= 0) fr.Y.lo = 0;
    /* the whole decade strictly below the smallest count: at floor() a count of exactly 1 (or 10,
       ...) sat on the axis with no height (a feature's five firings, one a bin, drew nothing) */
    if (ax->log_y && !isfinite(ax->ymin) && isfinite(ey.lo)) fr.Y.lo = ceil(ey.lo) - 1;
    /* counts: below 1 only as far as 0.5, with no tick there (the axis read "0.1" counts) */
    if (ax->y_counts && ax->log_y && !isfinite(ax->ymin) && fr.Y.lo < log10(0.5)) fr.Y.lo = log10(0.5);
    fr.Y.counts = ax->y_counts;
    const char *names[16] = {0};
    rep_color cols[16] = {{0}};
    int nl = nseries < 16 ? nseries : 16;
    for (int k = 0; k < nl; k++) {
        names[k] = s[k].name;
        cols[k] = s[k].color;
    }
    frame_draw(c, x, y, w, h, ax, &fr, 1, names, cols, nl);
    if (!any) no_data(c, &fr);
    clip_to(c, &fr);
    double base = fr.py + fr.ph;
    for (int k = 0; k < nseries; k++) {
        rep_color col = s[k].color;
        if (nseries > 1) col.a = 0.55;
        for (int i = 0; i < nbins; i++) {
            double v = s[k].counts[i];
            if (!(v > 0)) continue;
            double x0 = amap(&fr.X, edges[i]), x1 = amap(&fr.X, edges[i + 1]);
            double py = amap(&fr.Y, v);
            if (!isfinite(x0) || !isfinite(x1) || !isfinite(py)) continue;
            double bw = x1 - x0 > 2 ? x1 - x0 - 0.5 : x1 - x0; /* hairline gap between bars */
            rep_rect(c, x0, py, bw < 1 ? 1 : bw, base - py, col);
        }
    }
    unclip(c);
    markers(c, &fr, marks, nmarks);
    return OK;
}

/* ---- horizontal bars ---------------------------------------------------------------------- */
void rep_value_text(char *buf, size_t cap, const char *fmt, double v)
{
    snprintf(buf, cap, fmt, v);
    char *e = strchr(buf, 'e');
    if (!e) return;
    char *d = e + 1, *src = d;
    if (*src == '+') src++;
    else if (*src == '-') d++, src++;
    while (*src == '0' && src[1] >= '0' && src[1] <= '9') src++;
    memmove(d, src, strlen(src) + 1);
}

int rep_barh(rep_canvas *c, double x, double y, double w, double h, const char *title,
             const char *const *labels, const double *values, int n, rep_color pos, rep_color neg,
             const char *value_fmt)
{
    if (n < 0) return err_set(ERR_ARG, "bar chart: negative count %d", n);
    rep_font tf = rep_font_make(14, 1, rep_rgb(INK), REP_LEFT, REP_TOP);
    rep_font lf = rep_font_make(12, 0, rep_rgb(INK), REP_RIGHT, REP_MIDDLE);
    rep_font vf = rep_font_make(11, 0, rep_rgb(MUTED), REP_LEFT, REP_MIDDLE);
    double top = y;
    if (title && *title) {
        rep_text(c, x + 4, y + 2, title, &tf, w - 8);
        top += 24;
    }
    double avail = y + h - top - 4;
    if (n == 0 || avail < 4) {
        frame fr = {x, top, w, avail > 10 ? avail : 10};
        no_data(c, &fr);
        return OK;
    }
    double rh = avail / n;
    if (rh > 24) rh = 24;
    double maxp = 0, maxn = 0;
    for (int i = 0; i < n; i++) {
        double v = values[i];
        if (!isfinite(v)) continue;
        if (v > maxp) maxp = v;
        if (-v > maxn) maxn = -v;
    }
    const char *fmt = value_fmt ? value_fmt : "%.3g";
    lf.size = rh < 16 ? (rh - 2 > 8 ? rh - 2 : 8) : 12;
    vf.size = lf.size < 11 ? lf.size : 11;
    /* room for the value text beyond each bar end: 48 px, or the widest value's (1e300 drew as
       "+1e+\u2026", an audit), at most a fifth of the chart */
    double label_w = w * 0.34, vw = 48;
    for (int i = 0; i < n; i++) {
        char buf[64];
        if (!isfinite(values[i])) continue;
        rep_value_text(buf, sizeof buf, fmt, values[i]);
        double tw = rep_text_width(c, buf, &vf) + 4;
        double room = tw < w * 0.2 ? tw : w * 0.2; /* never less than the 48 px of before */
        if (room > vw) vw = room;
    }
    double bx0 = x + label_w + 6, bx1 = x + w - 4, span = bx1 - bx0 - vw * ((maxp > 0) + (maxn > 0));
    if (span < 10) span = 10;
    double tot = maxp + maxn > 0 ? maxp + maxn : 1;
    double zero = bx0 + (maxn > 0 ? vw : 0) + span * (maxn / tot);
    double scale = span / tot;
    for (int i = 0; i < n; i++) {
        double cy = top + rh * (i + 0.5), v = values[i];
        if (labels && labels[i]) rep_text(c, x + label_w, cy, labels[i], &lf, label_w - 4);
        if (!isfinite(v)) continue;
        double bl = fabs(v) * scale, bh = rh * 0.72;
        char buf[64];
        rep_value_text(buf, sizeof buf, fmt, v);
        if (v >= 0) {
            rep_rect(c, zero, cy - bh / 2, bl, bh, pos);
            vf.halign = REP_LEFT;
            rep_text(c, zero + bl + 3, cy, buf, &vf, vw);
        } else {
            rep_rect(c, zero - bl, cy - bh / 2, bl, bh, neg);
            vf.halign = REP_RIGHT;
            rep_text(c, zero - bl - 3, cy, buf, &vf, vw);
        }
    }
    rep_line(c, zero, top, zero, top + rh * n, rep_rgb(INK), 1, 0);
    return OK;
}

/* ---- heat map ------------------------------------------------------------------------------- */
int rep_heatmap(rep_canvas *c, double x, double y, double w, double h, const char *title,
                const double *v, int rows, int cols, const char *const *row_labels,
                const char *const *col_labels, double vmin, double vmax, int cmap,
                const char *cbar_label)
{
    if (rows < 0 || cols < 0 || rows > 32767 || cols > 32767)
        return err_set(ERR_ARG, "heat map: bad size %dx%d", rows, cols);
    rep_font tf = rep_font_make(14, 1, rep_rgb(INK), REP_LEFT, REP_TOP);
    rep_font lf = rep_font_make(11, 0, rep_rgb(INK), REP_RIGHT, REP_MIDDLE);
    double top = y;
    if (title && *title) {
        rep_text(c, x + 4, y + 2, title, &tf, w - 8);
        top += 24;
    }
    if (!(vmin < vmax)) {
        double lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < (size_t)rows * cols; i++)
            if (isfinite(v[i])) {
                if (v[i] < lo) lo = v[i];
                if (v[i] > hi) hi = v[i];
            }
        if (isfinite(vmin)) lo = vmin;
        if (isfinite(vmax)) hi = vmax;
        if (!isfinite(lo)) { lo = 0; hi = 1; }
        if (hi <= lo) hi = lo + 1;
        vmin = lo;
        vmax = hi;
    }
    /* Label bands only when a label fits its cell (>= 8 px); otherwise the axis is unlabelled. */
    double cbw = 70; /* colour bar + its ticks */
    double gw0 = w - cbw - 8, gh0 = y + h - top - 4;
    double rlw = 0, clh = 0;
    if (row_labels && rows > 0 && gh0 / rows >= 8) {
        for (int i = 0; i < rows; i++)
            if (row_labels[i]) {
                double tw = rep_text_width(c, row_labels[i], &lf);
                if (tw > rlw) rlw = tw;
            }
        if (rlw > gw0 * 0.3) rlw = gw0 * 0.3;
        rlw += 6;
    }
    int col_rot = 0;
    if (col_labels && cols > 0 && (gw0 - rlw) / cols >= 8) {
        double cwmax = 0;
        for (int j = 0; j < cols; j++)
            if (col_labels[j]) {
                double tw = rep_text_width(c, col_labels[j], &lf);
                if (tw > cwmax) cwmax = tw;
            }
        col_rot = cwmax > (gw0 - rlw) / cols - 4;
        clh = col_rot ? (cwmax < gh0 * 0.3 ? cwmax : gh0 * 0.3) + 6 : 18;
    }
    double gx = x + rlw, gy = top, gw = gw0 - rlw, gh = gh0 - clh;
    if (rows == 0 || cols == 0 || gw < 2 || gh < 2) {
        frame fr = {gx, gy, gw > 10 ? gw : 10, gh > 10 ? gh : 10};
        no_data(c, &fr);
        return OK;
    }
    /* Draw the cells as a rows x cols image scaled up with nearest-neighbour sampling: one
     * paint instead of rows*cols rectangles, and crisp cell edges. */
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, cols, rows);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(img);
        return err_set(ERR_NOMEM, "heat map: cannot allocate a %dx%d image", cols, rows);
    }
    cairo_surface_flush(img);
    unsigned char *d = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    for (int i = 0; i < rows; i++) {
        uint32_t *row = (uint32_t *)(d + (size_t)i * stride);
        for (int j = 0; j < cols; j++) {
            double val = v[(size_t)i * cols + j];
            rep_color col = rep_cmap(cmap, isfinite(val) ? (val - vmin) / (vmax - vmin) : NAN);
            row[j] = ((uint32_t)lround(col.r * 255) << 16) | ((uint32_t)lround(col.g * 255) << 8) |
                     (uint32_t)lround(col.b * 255);
        }
    }
    cairo_surface_mark_dirty(img);
    cairo_t *cr = c->cr;
    cairo_save(cr);
    cairo_rectangle(cr, gx, gy, gw, gh);
    cairo_clip(cr);
    cairo_translate(cr, gx, gy);
    cairo_scale(cr, gw / cols, gh / rows);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
    rep_rect_stroke(c, gx, gy, gw, gh, rep_rgb(INK), 1);
    if (rlw > 0)
        for (int i = 0; i < rows; i++)
            if (row_labels[i])
                rep_text(c, gx - 4, gy + gh * (i + 0.5) / rows, row_labels[i], &lf, rlw - 6);
    if (clh > 0) {
        if (col_rot) { lf.angle = 90; lf.halign = REP_RIGHT; lf.valign = REP_MIDDLE; }
        else { lf.halign = REP_CENTER; lf.valign = REP_TOP; }
        for (int j = 0; j < cols; j++)
            if (col_labels[j])
                rep_text(c, gx + gw * (j + 0.5) / cols, gy + gh + 3, col_labels[j], &lf,
                         col_rot ? clh - 6 : gw / cols - 2);
    }
    /* Colour bar */
    double cx = x + w - cbw + 6, cw = 14, cy0 = gy, ch = gh;
    int steps = (int)ch;
    for (int i = 0; i < steps; i++)
        rep_rect(c, cx, cy0 + i, cw, 1.5, rep_cmap(cmap, 1.0 - (i + 0.5) / steps));
    rep_rect_stroke(c, cx, cy0, cw, ch, rep_rgb(INK), 1);
    axis A = {vmin, vmax, 0, cy0 + ch, cy0};
    double t[32];
    int nt = ticks(&A, 5, t, 32);
    rep_font tk = rep_font_make(10, 0, rep_rgb(MUTED), REP_LEFT, REP_MIDDLE);
    char buf[64];
    for (int i = 0; i < nt; i++) {
        double py = amap(&A, t[i]);
        rep_line(c, cx + cw, py, cx + cw + 3, py, rep_rgb(INK), 1, 0);
        rep__fmt_tick(t[i], buf, sizeof buf);
        rep_text(c, cx + cw + 5, py, buf, &tk, cbw - cw - 12);
    }
    if (cbar_label && *cbar_label) {
        rep_font cl = rep_font_make(11, 0, rep_rgb(INK), REP_CENTER, REP_BOTTOM);
        cl.angle = 90;
        rep_text(c, x + w - 2, cy0 + ch / 2, cbar_label, &cl, ch);
    }
    return OK;
}

/* ---- line plot and scatter ---------------------------------------------------------------- */
static int xy_frame(rep_canvas *c, double x, double y, double w, double h, const rep_axes *ax,
                    const rep_series *s, int ns, frame *fr, int *any)
{
    if (ns < 0) return err_set(ERR_ARG, "plot: negative series count %d", ns);
    extent ex, ey;
    ext_init(&ex);
    ext_init(&ey);
    *any = 0;
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < s[k].n; i++) {
            double xv = s[k].x ? s[k].x[i] : i;
            if (!isfinite(xv) || !isfinite(s[k].y[i])) continue;
            ext_add(&ex, xv, ax->log_x);
            ext_add(&ey, s[k].y[i], ax->log_y);
            *any = 1;
        }
    axis_range(&fr->X, ax->xmin, ax->xmax, ax->log_x, ex, 0.02);
    axis_range(&fr->Y, ax->ymin, ax->ymax, ax->log_y, ey, 0.06);
    const char *names[16] = {0};
    rep_color cols[16] = {{0}};
    int nl = ns < 16 ? ns : 16;
    for (int k = 0; k < nl; k++) {
        names[k] = s[k].name;
        cols[k] = s[k].color;
    }
    frame_draw(c, x, y, w, h, ax, fr, 1, names, cols, nl);
    if (!*any) no_data(c, fr);
    return OK;
}

int rep_lineplot(rep_canvas *c, double x, double y, double w, double h, const rep_axes *ax,
                 const rep_series *s, int ns)
{
    frame fr;
    int any, rc = xy_frame(c, x, y, w, h, ax, s, ns, &fr, &any);
    if (rc) return rc;
    clip_to(c, &fr);
    for (int k = 0; k < ns; k++) {
        if (s[k].n <= 0) continue;
        double *px = mem_alloc(sizeof(double) * (size_t)s[k].n * 2);
        if (!px) {
            unclip(c);
            return err_set(ERR_NOMEM, "plot: out of memory");
        }
        double *py = px + s[k].n;
        for (int i = 0; i < s[k].n; i++) {
            px[i] = amap(&fr.X, s[k].x ? s[k].x[i] : i);
            py[i] = amap(&fr.Y, s[k].y[i]);
        }
        if (s[k].no_line) {
            double r = s[k].markers > 0 ? s[k].markers : 3;
            for (int i = 0; i < s[k].n; i++)
                if (isfinite(px[i]) && isfinite(py[i])) {
                    rep_circle(c, px[i], py[i], r, s[k].color);
                    rep_circle(c, px[i], py[i], r - 1.5, rep_rgb(0xffffff));
                }
            mem_free(px);
            continue;
        }
        if (s[k].dashed) {
            double dash = 6;
            cairo_set_dash(c->cr, &dash, 1, 0);
        }
        rep_polyline(c, px, py, s[k].n, s[k].color, 2);
        cairo_set_dash(c->cr, NULL, 0, 0);
        if (s[k].n == 1 && !(s[k].markers > 0)) rep_circle(c, px[0], py[0], 3, s[k].color);
        for (int i = 0; s[k].markers > 0 && i < s[k].n; i++)
            if (isfinite(px[i]) && isfinite(py[i])) rep_circle(c, px[i], py[i], s[k].markers, s[k].color);
        mem_free(px);
    }
    unclip(c);
    return OK;
}

int rep_scatter(rep_canvas *c, double x, double y, double w, double h, const rep_axes *ax,
                const rep_series *s, int ns, double r, int diagonal)
{
    frame fr;
    int any, rc = xy_frame(c, x, y, w, h, ax, s, ns, &fr, &any);
    if (rc) return rc;
    clip_to(c, &fr);
    if (diagonal) {
        double lo = fr.X.lo > fr.Y.lo ? fr.X.lo : fr.Y.lo, hi = fr.X.hi < fr.Y.hi ? fr.X.hi : fr.Y.hi;
        if (fr.X.log == fr.Y.log && hi > lo) {
            double a = fr.X.log ? pow(10, lo) : lo, b = fr.X.log ? pow(10, hi) : hi;
            rep_line(c, amap(&fr.X, a), amap(&fr.Y, a), amap(&fr.X, b), amap(&fr.Y, b),
                     rep_rgb(0x999999), 1, 4);
        }
    }
    for (int k = 0; k < ns; k++) {
        rep_color col = s[k].color;
        if (s[k].n > 200) col.a = 0.6; /* dense clouds: overlap shows as darker */
        for (int i = 0; i < s[k].n; i++)
            rep_circle(c, amap(&fr.X, s[k].x ? s[k].x[i] : i), amap(&fr.Y, s[k].y[i]), r, col);
    }
    unclip(c);
    return OK;
}

/* ---- token activation rows ----------------------------------------------------------------- */
int rep_token_rows(rep_canvas *c, double x, double y, double w, double row_h, double label_w,
                   const rep_token_row *rows, int nrows, double act_max)
{
    if (nrows < 0 || row_h <= 0) return err_set(ERR_ARG, "token rows: bad count or height");
    rep_font lf = rep_font_make(11, 0, rep_rgb(MUTED), REP_RIGHT, REP_MIDDLE);
    rep_font tf = rep_font_make(row_h * 0.6 < 13 ? row_h * 0.6 : 13, 0, rep_rgb(0x111111),
                                REP_LEFT, REP_MIDDLE);
    rep_font ef = tf;
    ef.color = rep_rgb(0x999999);
    /* Tokens sit edge to edge (a word break is the token's own leading space), so sub-word
     * pieces read as one word; 0.5 px keeps neighbouring glyphs apart. */
    double pad = 0.5, x0 = x + label_w + 6, avail = x + w - x0;
    if (avail < 20) return OK;
    double ell_w = rep_text_width(c, "\xe2\x80\xa6", &ef) + 3;
    double *tw = NULL;
    int tw_cap = 0;
    for (int r = 0; r < nrows; r++) {
        const rep_token_row *row = &rows[r];
        double cy = y + row_h * (r + 0.5), top = y + row_h * r + 1, bh = row_h - 2;
        if (row->label) rep_text(c, x + label_w, cy, row->label, &lf, label_w);
        if (row->n <= 0 || !row->tokens) continue;
        if (row->n > tw_cap) {
            mem_free(tw);
            tw_cap = row->n;
            tw = mem_alloc(sizeof(double) * (size_t)tw_cap);
            if (!tw) return err_set(ERR_NOMEM, "token rows: out of memory");
        }
        for (int i = 0; i < row->n; i++)
            tw[i] = rep_text_width(c, row->tokens[i] ? row->tokens[i] : "", &tf) + 2 * pad;
        /* Scroll so the marked token sits about a third in, when the row is too long. */
        int start = 0;
        if (row->mark >= 0 && row->mark < row->n) {
            double acc = tw[row->mark];
            start = row->mark;
            while (start > 0 && acc + tw[start - 1] < avail / 3) acc += tw[--start];
        }
        double px = x0;
        if (start > 0) {
            rep_text(c, px, cy, "\xe2\x80\xa6", &ef, 0);
            px += ell_w;
        }
        for (int i = start; i < row->n; i++) {
            double room = x + w - px, cw = tw[i];
            int last = 0;
            if (cw > room) { /* clip the token that crosses the edge, then stop */
                cw = room;
                last = 1;
                if (cw < 6) break;
            }
            float a = row->acts ? row->acts[i] : 0;
            if (a > 0 && act_max > 0) rep_rect(c, px, top, cw, bh, rep_cmap(REP_CMAP_ACT, a / act_max));
            if (row->tokens[i]) rep_text(c, px + pad, cy, row->tokens[i], &tf, cw - 2 * pad);
            if (i == row->mark) rep_rect_stroke(c, px + 0.75, top + 0.75, cw - 1.5, bh - 1.5,
                                                rep_rgb(0x111111), 1.5);
            px += cw;
            if (last) break;
        }
    }
    mem_free(tw);
    return OK;
}
