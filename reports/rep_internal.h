/* rep_internal.h - shared by the reports/ sources only: the canvas layout and helpers. */
#ifndef SAELITE_REP_INTERNAL_H
#define SAELITE_REP_INTERNAL_H
#include <cairo.h>

#include "reports/report.h"

struct rep_canvas {
    cairo_surface_t *surf;
    cairo_t *cr;
    int w, h;
};

void rep__set_color(cairo_t *cr, rep_color c);
/* Select the font of f on cr (size, weight, family). */
void rep__set_font(cairo_t *cr, const rep_font *f);
/* Format a tick value compactly ("0.001", "1e-05", "2.5k" is not used: plain %g). */
void rep__fmt_tick(double v, char *buf, size_t cap);

#endif
