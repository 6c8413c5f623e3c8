/* attribution.c - the attribution heat map of `saelite attribute` (see dashboard.h). */
#include <math.h>

#include "common/err.h"
#include "reports/dashboard.h"

int rep_plot_attribution(const char *path, const rep_kv *meta, int nmeta, const char *title,
                         const double *v, int rows, int cols, const char *const *row_labels,
                         const char *const *col_labels)
{
    if (rows < 1 || cols < 1 || rows > 4096 || cols > 4096)
        return err_set(ERR_ARG, "attribution map: bad size %dx%d", rows, cols);
    /* cells of about 44 x 22 pixels, so token and feature labels fit */
    int w = 200 + 44 * cols, h = 170 + 22 * rows;
    if (w < 700) w = 700;
    if (w > 8000) w = 8000;
    if (h > 8000) h = 8000;
    double amax = 0;
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        if (isfinite(v[i]) && fabs(v[i]) > amax) amax = fabs(v[i]);
    if (!(amax > 0)) amax = 1;
    rep_canvas *c;
    int rc = rep_canvas_new(&c, w, h, rep_rgb(0xffffff));
    if (rc) return rc;
    /* symmetric limits: white is zero, red raises the metric, blue lowers it */
    rc = rep_heatmap(c, 10, 10, w - 20, h - 20, title, v, rows, cols, row_labels, col_labels,
                     -amax, amax, REP_CMAP_DIVERGING, "attribution");
    if (rc == OK) rc = rep_canvas_status(c);
    if (rc == OK) rc = rep_png_write(c, path, meta, nmeta);
    rep_canvas_free(c);
    return rc;
}
