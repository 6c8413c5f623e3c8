/* canvas.c - colours, the cairo canvas, shapes and UTF-8 text with ellipsis. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/utf8.h"
#include "reports/rep_internal.h"

/* ---- colours ---------------------------------------------------------------------------- */
rep_color rep_rgba(uint32_t hex, double alpha)
{
    rep_color c = {((hex >> 16) & 255) / 255.0, ((hex >> 8) & 255) / 255.0, (hex & 255) / 255.0,
                   alpha};
    return c;
}

rep_color rep_rgb(uint32_t hex) { return rep_rgba(hex, 1.0); }

rep_color rep_palette(int i)
{
    /* Tableau 10: distinguishable, also for the common colour-vision deficiencies. */
    static const uint32_t pal[10] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
                                     0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf};
    if (i < 0) i = -i;
    return rep_rgb(pal[i % 10]);
}

static rep_color lerp_stops(const double (*st)[3], int n, double t)
{
    double p = t * (n - 1);
    int i = (int)floor(p);
    if (i >= n - 1) i = n - 2;
    double f = p - i;
    rep_color c = {st[i][0] + f * (st[i + 1][0] - st[i][0]), st[i][1] + f * (st[i + 1][1] - st[i][1]),
                   st[i][2] + f * (st[i + 1][2] - st[i][2]), 1.0};
    return c;
}

rep_color rep_cmap(int map, double t)
{
    if (isnan(t)) return rep_rgb(0xbbbbbb);
    if (t < 0) t = 0;
    if (t > 1) t = 1;
    static const double viridis[9][3] = {
        {0.267, 0.005, 0.329}, {0.283, 0.141, 0.458}, {0.254, 0.265, 0.530},
        {0.207, 0.372, 0.553}, {0.164, 0.471, 0.558}, {0.128, 0.567, 0.551},
        {0.135, 0.659, 0.518}, {0.478, 0.821, 0.318}, {0.993, 0.906, 0.144}};
    static const double act[2][3] = {{1.0, 1.0, 1.0}, {0.95, 0.42, 0.05}};
    static const double div[5][3] = {{0.13, 0.40, 0.75}, {0.55, 0.70, 0.88}, {1.0, 1.0, 1.0},
                                     {0.93, 0.60, 0.55}, {0.80, 0.13, 0.15}};
    switch (map) {
    case REP_CMAP_ACT: return lerp_stops(act, 2, t);
    case REP_CMAP_DIVERGING: return lerp_stops(div, 5, t);
    default: return lerp_stops(viridis, 9, t);
    }
}

void rep__set_color(cairo_t *cr, rep_color c) { cairo_set_source_rgba(cr, c.r, c.g, c.b, c.a); }

/* ---- canvas ------------------------------------------------------------------------------ */
int rep_canvas_new(rep_canvas **out, int width, int height, rep_color bg)
{
    *out = NULL;
    if (width <= 0 || height <= 0 || width > 32767 || height > 32767)
        return err_set(ERR_ARG, "canvas size %dx%d out of range (1..32767)", width, height);
    rep_canvas *c = mem_calloc(1, sizeof *c);
    if (!c) return err_set(ERR_NOMEM, "out of memory for a canvas");
    c->surf = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height);
    if (cairo_surface_status(c->surf) != CAIRO_STATUS_SUCCESS) {
        int rc = err_set(ERR_PNG, "cairo: cannot create a %dx%d surface: %s", width, height,
                         cairo_status_to_string(cairo_surface_status(c->surf)));
        cairo_surface_destroy(c->surf);
        mem_free(c);
        return rc;
    }
    c->cr = cairo_create(c->surf);
    c->w = width;
    c->h = height;
    cairo_set_source_rgba(c->cr, bg.r, bg.g, bg.b, bg.a);
    cairo_set_operator(c->cr, CAIRO_OPERATOR_SOURCE);
    cairo_paint(c->cr);
    cairo_set_operator(c->cr, CAIRO_OPERATOR_OVER);
    int rc = rep_canvas_status(c);
    if (rc) {
        rep_canvas_free(c);
        return rc;
    }
    *out = c;
    return OK;
}

void rep_canvas_free(rep_canvas *c)
{
    if (!c) return;
    if (c->cr) cairo_destroy(c->cr);
    if (c->surf) cairo_surface_destroy(c->surf);
    mem_free(c);
}

/* ---- fonts shared between threads ----------------------------------------------------------
 * cairo 1.16 (Debian 12) has a race in cairo_scaled_font_destroy, fixed upstream in 1.17.2
 * ("fix double free and failed assertions in cairo_scaled_font_destroy"): it drops a font's last
 * reference before taking the font map's lock, so another thread can look the same font up
 * (size, weight, rotation: every dashboard uses the same ones) and start drawing with it in
 * between, and the first thread then aborts on "Assertion `! scaled_font->cache_frozen'
 * failed". report's two drawing threads hit it about once in 40 runs. Every scaled font the
 * text functions use is therefore pinned here with a reference of its own, taken before its first
 * use and kept until rep_cleanup, so no font's count ever falls to zero while threads draw. The
 * fonts are the few sizes and angles the charts use (a few dozen), and cairo kept them cached
 * anyway. */
static pthread_mutex_t pin_mu = PTHREAD_MUTEX_INITIALIZER;
static cairo_scaled_font_t **pins;
static int npins, cap_pins;
static unsigned pin_gen; /* bumped by rep_cleanup (under pin_mu): the threads' memos are stale */

/* Each thread remembers the fonts it saw pinned, so the text calls (a dashboard's ellipsis
   searches make thousands) take the lock only for a font new to the thread. */
enum { PIN_MEMO = 8 };
static _Thread_local cairo_scaled_font_t *memo[PIN_MEMO];
static _Thread_local unsigned memo_gen, memo_next;

/* The scaled font cr's next text call uses, pinned. 0, or -1 when out of memory (the text is
   then drawn unpinned, as before: no worse than cairo itself). */
static int pin_font(cairo_t *cr)
{
    cairo_scaled_font_t *sf = cairo_get_scaled_font(cr); /* cr's reference, valid during the call */
    if (cairo_scaled_font_status(sf) != CAIRO_STATUS_SUCCESS) return 0;
    if (memo_gen == __atomic_load_n(&pin_gen, __ATOMIC_ACQUIRE))
        for (int m = 0; m < PIN_MEMO; m++)
            if (memo[m] == sf) return 0;
    pthread_mutex_lock(&pin_mu);
    if (memo_gen != pin_gen) {
        memset(memo, 0, sizeof memo);
        memo_gen = pin_gen;
    }
    int rc = 0, i = 0;
    while (i < npins && pins[i] != sf) i++;
    if (i == npins) {
        if (npins == cap_pins) {
            int cap = cap_pins ? 2 * cap_pins : 32;
            cairo_scaled_font_t **p = mem_realloc(pins, sizeof *p * (size_t)cap);
            if (p) pins = p, cap_pins = cap;
        }
        if (npins < cap_pins) pins[npins++] = cairo_scaled_font_reference(sf);
        else rc = -1;
    }
    if (!rc) memo[memo_next++ % PIN_MEMO] = sf;
    pthread_mutex_unlock(&pin_mu);
    return rc;
}

int rep_pinned_fonts(void)
{
    pthread_mutex_lock(&pin_mu);
    int n = 0;
    for (int i = 0; i < npins; i++) n += cairo_scaled_font_get_reference_count(pins[i]) >= 1;
    pthread_mutex_unlock(&pin_mu);
    return n;
}

void rep_cleanup(void)
{
    pthread_mutex_lock(&pin_mu);
    for (int i = 0; i < npins; i++) cairo_scaled_font_destroy(pins[i]);
    mem_free(pins);
    pins = NULL;
    npins = cap_pins = 0;
    __atomic_store_n(&pin_gen, pin_gen + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&pin_mu);
    cairo_debug_reset_static_data();
}

/* fontconfig leaks a few hundred bytes while parsing its configuration files the first time
 * cairo resolves a font (FcInitLoadConfigAndFonts; not ours to free). LeakSanitizer asks the
 * program for suppressions through this hook; in builds without it the function is unused. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig.so\n"; }

int rep_canvas_width(const rep_canvas *c) { return c->w; }
int rep_canvas_height(const rep_canvas *c) { return c->h; }

void rep_canvas_pixel(const rep_canvas *c, int x, int y, uint8_t rgba[4])
{
    memset(rgba, 0, 4);
    if (x < 0 || y < 0 || x >= c->w || y >= c->h) return;
    cairo_surface_flush(c->surf);
    const unsigned char *d = cairo_image_surface_get_data(c->surf);
    int stride = cairo_image_surface_get_stride(c->surf);
    uint32_t p;
    memcpy(&p, d + (size_t)y * stride + (size_t)x * 4, 4);
    unsigned a = p >> 24, r = (p >> 16) & 255, g = (p >> 8) & 255, b = p & 255;
    if (a && a != 255) { /* un-premultiply */
        r = (r * 255 + a / 2) / a;
        g = (g * 255 + a / 2) / a;
        b = (b * 255 + a / 2) / a;
    }
    rgba[0] = (uint8_t)r;
    rgba[1] = (uint8_t)g;
    rgba[2] = (uint8_t)b;
    rgba[3] = (uint8_t)a;
}

int rep_canvas_status(const rep_canvas *c)
{
    cairo_status_t st = cairo_status(c->cr);
    if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_status(c->surf);
    if (st != CAIRO_STATUS_SUCCESS)
        return err_set(ERR_PNG, "cairo drawing failed: %s", cairo_status_to_string(st));
    return OK;
}

/* ---- shapes ------------------------------------------------------------------------------ */
void rep_rect(rep_canvas *c, double x, double y, double w, double h, rep_color fill)
{
    if (!(w > 0 && h > 0)) return;
    rep__set_color(c->cr, fill);
    cairo_rectangle(c->cr, x, y, w, h);
    cairo_fill(c->cr);
}

void rep_rect_stroke(rep_canvas *c, double x, double y, double w, double h, rep_color col,
                     double lw)
{
    rep__set_color(c->cr, col);
    cairo_set_line_width(c->cr, lw);
    cairo_rectangle(c->cr, x, y, w, h);
    cairo_stroke(c->cr);
}

void rep_line(rep_canvas *c, double x0, double y0, double x1, double y1, rep_color col, double lw,
              double dash)
{
    if (!isfinite(x0) || !isfinite(y0) || !isfinite(x1) || !isfinite(y1)) return;
    rep__set_color(c->cr, col);
    cairo_set_line_width(c->cr, lw);
    if (dash > 0) cairo_set_dash(c->cr, &dash, 1, 0);
    cairo_move_to(c->cr, x0, y0);
    cairo_line_to(c->cr, x1, y1);
    cairo_stroke(c->cr);
    if (dash > 0) cairo_set_dash(c->cr, NULL, 0, 0);
}

void rep_polyline(rep_canvas *c, const double *xs, const double *ys, int n, rep_color col,
                  double lw)
{
    rep__set_color(c->cr, col);
    cairo_set_line_width(c->cr, lw);
    cairo_set_line_join(c->cr, CAIRO_LINE_JOIN_ROUND);
    int pen = 0; /* non-finite points break the line */
    for (int i = 0; i < n; i++) {
        if (!isfinite(xs[i]) || !isfinite(ys[i])) {
            pen = 0;
            continue;
        }
        if (pen) cairo_line_to(c->cr, xs[i], ys[i]);
        else cairo_move_to(c->cr, xs[i], ys[i]);
        pen = 1;
    }
    cairo_stroke(c->cr);
}

void rep_circle(rep_canvas *c, double cx, double cy, double r, rep_color fill)
{
    if (!isfinite(cx) || !isfinite(cy)) return;
    rep__set_color(c->cr, fill);
    cairo_new_sub_path(c->cr);
    cairo_arc(c->cr, cx, cy, r, 0, 2 * M_PI);
    cairo_fill(c->cr);
}

/* ---- text -------------------------------------------------------------------------------- */
rep_font rep_font_make(double size, int bold, rep_color color, int halign, int valign)
{
    rep_font f = {size, bold, 0, color, halign, valign, 0};
    return f;
}

void rep__set_font(cairo_t *cr, const rep_font *f)
{
    cairo_select_font_face(cr, f->mono ? "DejaVu Sans Mono" : "DejaVu Sans",
                           CAIRO_FONT_SLANT_NORMAL,
                           f->bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, f->size > 0 ? f->size : 12);
}

static double advance(cairo_t *cr, const char *s)
{
    cairo_text_extents_t e;
    pin_font(cr);
    cairo_text_extents(cr, s, &e);
    return e.x_advance;
}

/* Widths within this much of max_w fit: callers derive max_w from a measured width by
 * arithmetic ((w + 2 pad) - 2 pad), and the rounding of that (7.0000000000000009 came back as
 * 7.0) must not cut text to "…" or nothing. A millionth of a pixel never shows. */
#define FIT_SLACK 1e-6

/* Sanitise s and cut it to max_w with "…" (font already selected on cr). Returns a
 * mem_alloc'd string or NULL when out of memory; *wout gets its width. */
static char *fit(cairo_t *cr, const char *s, double max_w, double *wout)
{
    size_t len = strlen(s), cap = len * 4 + 8; /* worst case: every byte -> a 4-byte escape */
    char *t = mem_alloc(cap);
    if (!t) return NULL;
    size_t tl = utf8_for_display(s, len, t, cap);
    double w = advance(cr, t);
    if (max_w > 0 && w > max_w + FIT_SLACK) {
        static const char ell[] = "\xe2\x80\xa6"; /* … */
        /* Binary search over character boundaries for the longest prefix + "…" that fits. */
        size_t *bounds = mem_alloc(sizeof(size_t) * (tl + 1));
        char *buf = mem_alloc(tl + sizeof ell);
        if (!bounds || !buf) {
            mem_free(bounds); mem_free(buf); mem_free(t);
            return NULL;
        }
        size_t nb = 0;
        for (size_t i = 0; i < tl;) {
            bounds[nb++] = i;
            size_t k = utf8_len((const unsigned char *)t + i, tl - i);
            i += k ? k : 1; /* t is sanitised: k > 0 */
        }
        /* bounds[k] = byte offset of character k; prefix of k characters ends at bounds[k]. */
        bounds[nb] = tl;
        size_t lo = 0, hi = nb; /* prefix lengths in characters; lo always fits (or is 0) */
        double wlo = 0;
        while (lo < hi) {
            size_t mid = (lo + hi + 1) / 2;
            memcpy(buf, t, bounds[mid]);
            memcpy(buf + bounds[mid], ell, sizeof ell);
            double wm = advance(cr, buf);
            if (wm <= max_w + FIT_SLACK) { lo = mid; wlo = wm; }
            else hi = mid - 1;
        }
        if (lo == 0) {
            /* Not even "x…" fits: show just "…" if that fits, else nothing. */
            double we = advance(cr, ell);
            if (we <= max_w + FIT_SLACK) { memcpy(t, ell, sizeof ell); w = we; }
            else { t[0] = 0; w = 0; }
        } else {
            memcpy(t, buf, bounds[lo]);
            memcpy(t + bounds[lo], ell, sizeof ell);
            w = wlo;
        }
        mem_free(bounds);
        mem_free(buf);
    }
    *wout = w;
    return t;
}

int rep_text_fit(rep_canvas *c, const char *s, const rep_font *f, double max_w, char **out)
{
    rep__set_font(c->cr, f);
    double w;
    *out = fit(c->cr, s ? s : "", max_w, &w);
    return *out ? OK : err_set(ERR_NOMEM, "out of memory for text");
}

double rep_text_width(rep_canvas *c, const char *s, const rep_font *f)
{
    rep__set_font(c->cr, f);
    double w = 0;
    char *t = fit(c->cr, s ? s : "", 0, &w);
    mem_free(t);
    return w;
}

double rep_text(rep_canvas *c, double x, double y, const char *s, const rep_font *f, double max_w)
{
    if (!s || !*s || !isfinite(x) || !isfinite(y)) return 0;
    cairo_t *cr = c->cr;
    rep__set_font(cr, f);
    double w = 0;
    char *t = fit(cr, s, max_w, &w);
    if (!t) return 0;
    cairo_font_extents_t fe;
    pin_font(cr);
    cairo_font_extents(cr, &fe);
    double dx = f->halign == REP_CENTER ? -w / 2 : f->halign == REP_RIGHT ? -w : 0;
    double dy = 0;
    switch (f->valign) {
    case REP_TOP: dy = fe.ascent; break;
    case REP_MIDDLE: dy = (fe.ascent - fe.descent) / 2; break;
    case REP_BOTTOM: dy = -fe.descent; break;
    default: break;
    }
    cairo_save(cr);
    cairo_translate(cr, x, y);
    if (f->angle != 0) cairo_rotate(cr, -f->angle * M_PI / 180.0);
    rep__set_color(cr, f->color);
    cairo_move_to(cr, dx, dy);
    pin_font(cr); /* the rotation gives another scaled font than the one measured */
    cairo_show_text(cr, t);
    cairo_new_path(cr);
    cairo_restore(cr);
    mem_free(t);
    return w;
}

void rep__fmt_tick(double v, char *buf, size_t cap)
{
    if (v == 0) { snprintf(buf, cap, "0"); return; }
    double a = fabs(v);
    /* Large round numbers read better with SI suffixes (tokens: 200k, 1.5M). */
    if (a >= 1e9) snprintf(buf, cap, "%gG", v / 1e9);
    else if (a >= 1e6) snprintf(buf, cap, "%gM", v / 1e6);
    else if (a >= 1e4) snprintf(buf, cap, "%gk", v / 1e3);
    else if (a >= 1e-3) snprintf(buf, cap, "%g", v);
    else snprintf(buf, cap, "%.0e", v);
}
