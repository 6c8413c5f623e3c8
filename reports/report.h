/* report.h - pictures: a small drawing API over cairo, charts, PNG files via libpng.
 *
 * Purpose: every picture saelite writes goes through this header; reports/ is the only code
 * that includes cairo.h or png.h. No other module draws pixels.
 *
 * Canvas: a cairo image surface of width x height pixels, 8 bits per channel RGBA, origin at
 * the top-left corner, x to the right and y downwards, units are pixels (fractional coordinates
 * are anti-aliased). A canvas is created filled with an opaque background colour.
 * Ownership: rep_canvas_new allocates, rep_canvas_free releases; charts and text draw into a
 * canvas the caller owns and keep no pointers to the caller's arrays after they return.
 *
 * Text: UTF-8 in DejaVu Sans (cairo's toy font API, resolved by fontconfig). Any byte string is
 * accepted: invalid UTF-8 becomes U+FFFD, control characters become visible symbols (newline
 * "↵", tab "⇥", others U+2400 control pictures), and text wider than max_w is cut at a character
 * boundary and ends with "…", so nothing ever overflows its box.
 *
 * Charts draw inside a rectangle (x, y, w, h) of the canvas: title on top, axes with "nice"
 * ticks (1-2-5 steps, or powers of ten on log axes), labels, legend when series are named.
 * Empty data draws the frame and "no data" rather than failing.
 *
 * PNG: rep_png_write encodes with libpng (not cairo's writer), 8-bit RGB (RGBA if the canvas
 * has transparent pixels), with key/value text chunks (tEXt for ASCII values, iTXt for UTF-8),
 * written to a temporary file in the target directory then renamed: a reader never sees a
 * half-written picture. rep_png_read decodes any PNG libpng reads into RGBA8 plus its text
 * chunks (tests and tools use it).
 *
 * Errors: functions return OK or an err.h code with err_set (ERR_ARG bad sizes, ERR_NOMEM,
 * ERR_IO files, ERR_PNG libpng/cairo failures, ERR_FORMAT for a PNG that does not decode).
 * Thread safety: distinct canvases may be used from different threads at the same time; one
 * canvas is not thread-safe.
 */
#ifndef SAELITE_REPORT_H
#define SAELITE_REPORT_H
#include <stddef.h>
#include <stdint.h>

/* ---- colours -------------------------------------------------------------------------- */
typedef struct { double r, g, b, a; } rep_color; /* components in [0,1], not premultiplied */

rep_color rep_rgb(uint32_t hex);                 /* 0xRRGGBB, opaque */
rep_color rep_rgba(uint32_t hex, double alpha);
rep_color rep_palette(int i);                    /* categorical colour i (10, cycling) */
enum { REP_CMAP_VIRIDIS, REP_CMAP_ACT, REP_CMAP_DIVERGING };
/* Colour map at t in [0,1] (clamped; NaN -> grey). ACT: white -> saturated orange, used for
 * token activations; DIVERGING: blue (0) - white (0.5) - red (1). */
rep_color rep_cmap(int map, double t);

/* ---- canvas ----------------------------------------------------------------------------- */
typedef struct rep_canvas rep_canvas;

int rep_canvas_new(rep_canvas **out, int width, int height, rep_color background);
void rep_canvas_free(rep_canvas *c);
int rep_canvas_width(const rep_canvas *c);
int rep_canvas_height(const rep_canvas *c);
/* Un-premultiplied RGBA8 of pixel (x, y); zeros outside the canvas. */
void rep_canvas_pixel(const rep_canvas *c, int x, int y, uint8_t rgba[4]);
/* OK, or ERR_PNG naming cairo's error when drawing failed (out of memory in cairo, ...). */
int rep_canvas_status(const rep_canvas *c);

/* ---- shapes ----------------------------------------------------------------------------- */
void rep_rect(rep_canvas *c, double x, double y, double w, double h, rep_color fill);
void rep_rect_stroke(rep_canvas *c, double x, double y, double w, double h, rep_color col,
                     double line_width);
/* dash > 0: dashed with that dash length. */
void rep_line(rep_canvas *c, double x0, double y0, double x1, double y1, rep_color col,
              double line_width, double dash);
void rep_polyline(rep_canvas *c, const double *xs, const double *ys, int n, rep_color col,
                  double line_width);
void rep_circle(rep_canvas *c, double cx, double cy, double r, rep_color fill);

/* ---- text ------------------------------------------------------------------------------- */
enum { REP_LEFT, REP_CENTER, REP_RIGHT };               /* halign */
enum { REP_BASELINE, REP_TOP, REP_MIDDLE, REP_BOTTOM }; /* valign (TOP/MIDDLE/BOTTOM use the
                                                           font's ascent/descent, not the ink) */
typedef struct {
    double size;     /* pixels (em size) */
    int bold;
    int mono;        /* DejaVu Sans Mono */
    rep_color color;
    int halign, valign;
    double angle;    /* degrees counter-clockwise about the anchor; 90 = reads bottom to top */
} rep_font;

rep_font rep_font_make(double size, int bold, rep_color color, int halign, int valign);
/* Draw s at anchor (x, y), cut with "…" to at most max_w pixels wide (max_w <= 0: no limit).
 * Returns the width drawn. */
double rep_text(rep_canvas *c, double x, double y, const char *s, const rep_font *f, double max_w);
/* Width s would take (after the same sanitising), without drawing. */
double rep_text_width(rep_canvas *c, const char *s, const rep_font *f);
/* The displayed form of s: sanitised and ellipsised to max_w, into a mem_alloc'd string. */
int rep_text_fit(rep_canvas *c, const char *s, const rep_font *f, double max_w, char **out);
/* (Text is sanitised for display with utf8_for_display, common/utf8.h.) */

/* ---- charts ----------------------------------------------------------------------------- */
/* Axes of a chart. NaN limits (or min >= max) mean automatic from the data. Log axes skip
 * values <= 0. */
typedef struct {
    const char *title, *xlabel, *ylabel;
    int log_x, log_y;
    double xmin, xmax, ymin, ymax;
    int y_counts; /* y counts things: ticks only at whole numbers >= 1 (a "0.1" count tick read as
                     a tenth of a token), and a log y axis starts at 0.5, so a count of 1 keeps
                     a bar (rep_histogram) */
} rep_axes;
rep_axes rep_axes_make(const char *title, const char *xlabel, const char *ylabel);

/* Vertical marker line across a chart at data x, with a short label near its top. */
typedef struct { double x; const char *label; rep_color color; } rep_marker;

/* Histogram from bins: edges[nbins+1] ascending (log-spaced edges pair with ax->log_x), each
 * series has counts[nbins]; several series overlay with transparency. */
typedef struct { const char *name; const double *counts; rep_color color; } rep_hist_series;
int rep_histogram(rep_canvas *c, double x, double y, double w, double h, const rep_axes *ax,
                  const double *edges, int nbins, const rep_hist_series *s, int nseries,
                  const rep_marker *marks, int nmarks);
/* Bin values into nbins bins between lo and hi (log_bins: log-spaced, lo > 0 required).
 * edges[nbins+1], counts[nbins] are written; values outside [lo, hi] or NaN are not counted.
 * Returns the number counted. */
size_t rep_bin(const double *v, size_t n, double lo, double hi, int nbins, int log_bins,
               double *edges, double *counts);

/* Horizontal bar chart: one labelled bar per row from zero (positive to the right in pos
 * colour, negative to the left in neg colour), value printed at the bar's end with value_fmt
 * (printf format for one double, e.g. "%+.2f"; NULL: "%.3g"). Labels are sanitised text. */
int rep_barh(rep_canvas *c, double x, double y, double w, double h, const char *title,
             const char *const *labels, const double *values, int n, rep_color pos,
             rep_color neg, const char *value_fmt);
/* A bar's value text: v by fmt (one double conversion), its exponent without '+' and leading
 * zeros ("+1e300", "-2.5e-7"); the chart makes room for the widest, up to a fifth of its width. */
void rep_value_text(char *buf, size_t cap, const char *fmt, double v);

/* Heat map of v[rows*cols] (row-major), colour map cmap over [vmin, vmax] (NaN limits: data
 * range), with row/column labels (either may be NULL) and a colour bar titled cbar_label. */
int rep_heatmap(rep_canvas *c, double x, double y, double w, double h, const char *title,
                const double *v, int rows, int cols, const char *const *row_labels,
                const char *const *col_labels, double vmin, double vmax, int cmap,
                const char *cbar_label);

/* Line plot / scatter of several series (x may be NULL: 0, 1, 2, ...). dashed: dashed line;
 * markers > 0: the line plot also draws a dot of that radius at every point; no_line: the line
 * plot draws only hollow rings of radius markers (3 if 0), no line. Named series get a legend.
 * The scatter draws dots of radius r; diagonal != 0 adds y = x. */
typedef struct {
    const char *name;
    const double *x, *y;
    int n;
    rep_color color;
    int dashed;
    double markers;
    int no_line;
} rep_series;
int rep_lineplot(rep_canvas *c, double x, double y, double w, double h, const rep_axes *ax,
                 const rep_series *s, int nseries);
int rep_scatter(rep_canvas *c, double x, double y, double w, double h, const rep_axes *ax,
                const rep_series *s, int nseries, double r, int diagonal);

/* Token activation rows: each row is a context drawn as token text on backgrounds whose
 * colour intensity (REP_CMAP_ACT) is act / act_max. The marked token (mark >= 0) gets a dark
 * outline and the row is scrolled so it is visible (about a third from the left). label is
 * drawn right-aligned in the first label_w pixels (e.g. the row's max activation). Tokens are
 * sanitised (a newline shows as "↵") and clipped at the right edge. */
typedef struct {
    const char *const *tokens;
    const float *acts;
    int n;
    int mark;
    const char *label;
} rep_token_row;
int rep_token_rows(rep_canvas *c, double x, double y, double w, double row_h, double label_w,
                   const rep_token_row *rows, int nrows, double act_max);

/* Release cairo's process-wide caches (fonts resolved through fontconfig). Call once at exit,
 * after every canvas is freed and while no other thread draws, so leak checkers (the ASan
 * build) see a clean exit. Drawing again afterwards still works. */
void rep_cleanup(void);
/* How many of cairo's scaled fonts the text functions hold a reference to (canvas.c pins each
 * one before its first use, against a race in cairo 1.16's font cache between threads; released
 * by rep_cleanup). For the tests. */
int rep_pinned_fonts(void);

/* ---- PNG ---------------------------------------------------------------------------------- */
typedef struct { const char *key, *value; } rep_kv; /* key: 1-79 Latin-1 characters */

int rep_png_write(const rep_canvas *c, const char *path, const rep_kv *meta, int nmeta);
/* Decoded picture: rgba[h*w*4], meta[nmeta] (keys and values owned by the struct). */
typedef struct {
    int width, height;
    uint8_t *rgba;
    rep_kv *meta;
    int nmeta;
} rep_image;
int rep_png_read(const char *path, rep_image *out);
/* The size and the text chunks before the image data (where rep_png_write puts meta) only:
 * rgba stays NULL, nothing is decoded. */
int rep_png_read_meta(const char *path, rep_image *out);
/* 1 when path is a regular file (not a link, FIFO or device: never followed or waited on), ends
 * as rep_png_write ends a file (so not cut short), and its text chunk key before the image data
 * is want; else 0 (no file, another value, unreadable: nothing to report). What report asks
 * before drawing a dashboard again; the image data itself is not decoded. */
int rep_png_has_key(const char *path, const char *key, const char *want);
void rep_image_free(rep_image *img);
/* Value of key in img's metadata, or NULL. */
const char *rep_image_meta(const rep_image *img, const char *key);

#endif
