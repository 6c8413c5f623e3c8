/* render.c - pictures of the toy models and of packings, drawn with reports/report.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "reports/report.h"
#include "toy/toy.h"

#define ROW_H 300
#define INK 0x222222

static int finish(rep_canvas *c, int rc, const char *path, const rep_kv *meta, int nmeta)
{
    if (rc == OK) rc = rep_canvas_status(c);
    if (rc == OK) rc = rep_png_write(c, path, meta, nmeta);
    rep_canvas_free(c);
    return rc;
}

/* Norm bars coloured by superposition (viridis: dark = dedicated, yellow = superposed). */
static void norm_bars(rep_canvas *c, double x, double y, double w, double h, const sup_feature *f,
                      int n)
{
    rep_font tf = rep_font_make(14, 1, rep_rgb(INK), REP_LEFT, REP_TOP);
    rep_font lf = rep_font_make(10, 0, rep_rgb(INK), REP_RIGHT, REP_MIDDLE);
    rep_text(c, x + 4, y + 2, "||W_i||; dark: dedicated, yellow: shared", &tf, w - 8);
    double top = y + 26, bh = (h - 30) / n, lw = 34, maxn = 1.2;
    for (int i = 0; i < n; i++)
        if (f[i].norm > maxn) maxn = f[i].norm;
    for (int i = 0; i < n; i++) {
        char lab[16];
        snprintf(lab, sizeof lab, "%d", i);
        double yy = top + i * bh;
        rep_text(c, x + lw - 4, yy + bh / 2, lab, &lf, lw);
        double t = f[i].superposition; /* 0 dedicated; 1 = as much overlap as its own norm^2 */
        rep_rect(c, x + lw, yy + bh * 0.1, (w - lw - 10) * f[i].norm / maxn, bh * 0.8,
                 rep_cmap(REP_CMAP_VIRIDIS, t > 1 ? 1 : t));
    }
    /* the norm-1 reference */
    double x1 = x + lw + (w - lw - 10) / maxn;
    rep_line(c, x1, top, x1, top + n * bh, rep_rgb(0x888888), 1, 4);
}

/* Feature directions in the plane (m == 2): the pentagon / antipodal pictures. */
static void plane(rep_canvas *c, double x, double y, double w, double h, const sup_model *s,
                  const sup_feature *f)
{
    rep_font tf = rep_font_make(14, 1, rep_rgb(INK), REP_LEFT, REP_TOP);
    rep_font lf = rep_font_make(11, 0, rep_rgb(INK), REP_CENTER, REP_MIDDLE);
    rep_text(c, x + 4, y + 2, "W_i in the 2-d hidden space", &tf, w - 8);
    double cx = x + w / 2, cy = y + 26 + (h - 26) / 2, r = fmin(w, h - 26) / 2 - 16, maxn = 0;
    for (int i = 0; i < s->n; i++)
        if (f[i].norm > maxn) maxn = f[i].norm;
    if (maxn <= 0) maxn = 1;
    rep_line(c, cx - r, cy, cx + r, cy, rep_rgb(0xdddddd), 1, 0);
    rep_line(c, cx, cy - r, cx, cy + r, rep_rgb(0xdddddd), 1, 0);
    for (int i = 0; i < s->n; i++) {
        double px = cx + r * s->W[2 * i] / maxn, py = cy - r * s->W[2 * i + 1] / maxn;
        rep_color col = rep_palette(i);
        rep_line(c, cx, cy, px, py, col, 2.5, 0);
        rep_circle(c, px, py, 4, col);
        char lab[16];
        snprintf(lab, sizeof lab, "%d", i);
        double dx = px - cx, dy = py - cy, d = sqrt(dx * dx + dy * dy);
        if (d > 1) rep_text(c, px + 10 * dx / d, py + 10 * dy / d, lab, &lf, 0);
    }
}

int sup_render(const char *path, sup_model *const *models, const double *sparsity, int ns,
               double importance_decay)
{
    if (ns < 1) return err_set(ERR_ARG, "superpose picture: no models");
    int n = models[0]->n, m = models[0]->m, panels = m == 2 ? 4 : 3;
    int width = 40 + panels * 330, height = 60 + ns * ROW_H;
    rep_canvas *c;
    int rc = rep_canvas_new(&c, width, height, rep_rgb(0xffffff));
    if (rc) return rc;
    double *G = mem_alloc(sizeof(double) * (size_t)n * n);
    float *Gf = mem_alloc(sizeof(float) * (size_t)n * n);
    double *bias = mem_alloc(sizeof(double) * (size_t)n);
    sup_feature *f = mem_alloc(sizeof *f * (size_t)n);
    if (!G || !Gf || !bias || !f) {
        rc = err_set(ERR_NOMEM, "superpose picture: out of memory");
        goto done;
    }
    char title[256];
    snprintf(title, sizeof title,
             "Toy model: %d features (importance %g^i) in %d dimensions; rows: sparsity S", n,
             importance_decay, m);
    rep_font hf = rep_font_make(18, 1, rep_rgb(INK), REP_LEFT, REP_TOP);
    rep_text(c, 20, 14, title, &hf, width - 40);
    for (int k = 0; k < ns && rc == OK; k++) {
        const sup_model *s = models[k];
        double y = 50 + k * ROW_H;
        sup_gram(s, Gf);
        for (int i = 0; i < n * n; i++) G[i] = Gf[i];
        for (int i = 0; i < n; i++) bias[i] = s->b[i];
        sup_features(s, f);
        char t1[128];
        snprintf(t1, sizeof t1, "S = %g: W^T W (%d of %d represented)", sparsity[k],
                 sup_represented(s), n);
        rc = rep_heatmap(c, 20, y, 330, ROW_H - 10, t1, G, n, n, NULL, NULL, -1, 1,
                         REP_CMAP_DIVERGING, NULL);
        if (rc == OK)
            rc = rep_heatmap(c, 360, y, 120, ROW_H - 10, "bias b", bias, n, 1, NULL, NULL, -1, 1,
                             REP_CMAP_DIVERGING, NULL);
        if (rc == OK) norm_bars(c, 500, y, 330, ROW_H - 10, f, n);
        if (rc == OK && m == 2) plane(c, 850, y, 300, ROW_H - 10, s, f);
    }
    char nbuf[16], mbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", n);
    snprintf(mbuf, sizeof mbuf, "%d", m);
    rep_kv meta[3] = {{"Software", "saelite superpose"}, {"n_features", nbuf}, {"n_hidden", mbuf}};
done:
    mem_free(G);
    mem_free(Gf);
    mem_free(bias);
    mem_free(f);
    return finish(c, rc, path, meta, 3);
}

int sup_render_dimensionality(const char *path, sup_model *const *models, const double *sparsity,
                              int ns)
{
    int n = models[0]->n, m = models[0]->m;
    double *xs = mem_alloc(sizeof(double) * (size_t)n * ns), *ys = mem_alloc(sizeof(double) * (size_t)n * ns);
    double *lx = mem_alloc(sizeof(double) * ns), *ly = mem_alloc(sizeof(double) * ns);
    sup_feature *f = mem_alloc(sizeof *f * (size_t)n);
    rep_canvas *c = NULL;
    int rc = OK;
    if (!xs || !ys || !lx || !ly || !f) rc = err_set(ERR_NOMEM, "picture: out of memory");
    if (rc == OK) rc = rep_canvas_new(&c, 900, 520, rep_rgb(0xffffff));
    int np = 0;
    for (int k = 0; rc == OK && k < ns; k++) {
        sup_features(models[k], f);
        for (int i = 0; i < n; i++)
            if (f[i].norm > 0.5) { /* represented features only */
                xs[np] = 1 / (1 - sparsity[k]) * (1 + 0.04 * ((i % 5) - 2)); /* slight jitter */
                ys[np++] = f[i].dimensionality;
            }
        lx[k] = 1 / (1 - sparsity[k]);
        ly[k] = sup_dims_per_feature(models[k]);
    }
    if (rc == OK) {
        char title[160];
        snprintf(title, sizeof title,
                 "Feature dimensionality, %d features in %d dims", n, m);
        rep_axes ax = rep_axes_make(title, "1/(1-S)  (log scale)", "dimensions per feature");
        ax.log_x = 1;
        ax.ymin = 0;
        ax.ymax = 1.1;
        /* reference levels as dotted lines: 60 dots each, evenly spaced on the log axis */
        enum { ND = 60 };
        double fx[ND], lev[4][ND], val[4] = {1, 0.5, 0.4, 1.0 / 3};
        double a = log(lx[0] * 0.8), b = log(lx[ns - 1] * 1.25);
        for (int i = 0; i < ND; i++) {
            fx[i] = exp(a + (b - a) * i / (ND - 1));
            for (int r = 0; r < 4; r++) lev[r][i] = val[r];
        }
        rep_series s[6] = {
            {"1, 1/2, 2/5, 1/3", fx, lev[0], ND,
             rep_rgb(0xaaaaaa), 0},
            {NULL, fx, lev[1], ND, rep_rgb(0xaaaaaa), 0},
            {NULL, fx, lev[2], ND, rep_rgb(0xaaaaaa), 0},
            {NULL, fx, lev[3], ND, rep_rgb(0xaaaaaa), 0},
            {"D_i (represented)", xs, ys, np, rep_palette(0), 0},
            {"m / ||W||_F^2", lx, ly, ns, rep_palette(3), 0},
        };
        rc = rep_scatter(c, 0, 0, 900, 520, &ax, s, 6, 3, 0);
    }
    rep_kv meta[1] = {{"Software", "saelite superpose"}};
    mem_free(xs);
    mem_free(ys);
    mem_free(lx);
    mem_free(ly);
    mem_free(f);
    if (!c) return rc;
    return finish(c, rc, path, meta, 1);
}

int pack_render(const char *path, int count, int dim, const int64_t *hist_random,
                const int64_t *hist_opt, int nbins, double range_lo, double range_hi)
{
    /* Show the span of both histograms in bins of about 0.5 degree. */
    int lo = nbins, hi = -1;
    for (int b = 0; b < nbins; b++)
        if (hist_random[b] || hist_opt[b]) {
            if (b < lo) lo = b;
            hi = b;
        }
    if (hi < 0) return err_set(ERR_ARG, "pack picture: empty histograms");
    double bw = 180.0 / nbins;
    int group = (int)(0.5 / bw + 0.5);
    if (group < 1) group = 1;
    int nb = (hi - lo) / group + 1;
    double *edges = mem_alloc(sizeof(double) * (nb + 1)), *cr = mem_alloc(sizeof(double) * nb),
           *co = mem_alloc(sizeof(double) * nb);
    rep_canvas *c = NULL;
    int rc = OK;
    if (!edges || !cr || !co) rc = err_set(ERR_NOMEM, "pack picture: out of memory");
    if (rc == OK) rc = rep_canvas_new(&c, 1000, 520, rep_rgb(0xffffff));
    if (rc == OK) {
        for (int k = 0; k <= nb; k++) edges[k] = (lo + k * group) * bw;
        for (int k = 0; k < nb; k++) {
            cr[k] = co[k] = 0;
            for (int b = lo + k * group; b < lo + (k + 1) * group && b < nbins; b++) {
                cr[k] += (double)hist_random[b];
                co[k] += (double)hist_opt[b];
            }
        }
        char title[160];
        snprintf(title, sizeof title, "Pairwise angles of %d unit vectors in %d dimensions", count,
                 dim);
        rep_axes ax = rep_axes_make(title, "angle between pair (degrees)", "pairs");
        rep_hist_series s[2] = {{"random", cr, rep_palette(0)}, {"optimized", co, rep_palette(1)}};
        double w = pack_welch_bound(count, dim);
        double wa = w > 0 ? acos(w) * 180 / M_PI : 90;
        rep_marker mk[4] = {{range_lo, "", rep_rgb(0x2ca02c)},
                            {range_hi, "claimed range", rep_rgb(0x2ca02c)},
                            {wa, "Welch", rep_rgb(0x888888)},
                            {180 - wa, "", rep_rgb(0x888888)}};
        rc = rep_histogram(c, 0, 0, 1000, 520, &ax, edges, nb, s, 2, mk, w > 0 ? 4 : 2);
    }
    char cb[16], db[16];
    snprintf(cb, sizeof cb, "%d", count);
    snprintf(db, sizeof db, "%d", dim);
    rep_kv meta[3] = {{"Software", "saelite pack"}, {"count", cb}, {"dim", db}};
    mem_free(edges);
    mem_free(cr);
    mem_free(co);
    if (!c) return rc;
    return finish(c, rc, path, meta, 3);
}
