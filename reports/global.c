/* global.c - pictures of the whole SAE and the index.html linking them. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "reports/dashboard.h"

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* Copy v[n] without NaNs, sorted descending, into a new array. */
static double *sorted_desc(const double *v, int n, int *nout)
{
    double *s = mem_alloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!s) return NULL;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) s[k++] = v[i];
    qsort(s, (size_t)k, sizeof(double), cmp_desc);
    *nout = k;
    return s;
}

static int finish(rep_canvas *c, int rc, const char *path, const rep_kv *meta, int nmeta)
{
    if (rc == OK) rc = rep_png_write(c, path, meta, nmeta);
    rep_canvas_free(c);
    return rc;
}

int rep_plot_density(const char *path, const rep_kv *meta, int nmeta, const char *title,
                     const double *density, int n, double dead_below, double dense_above)
{
    rep_canvas *c;
    int rc = rep_canvas_new(&c, 900, 480, rep_rgb(0xffffff));
    if (rc) return rc;
    int dead = 0, dense = 0, live = 0;
    double lo = INFINITY;
    for (int i = 0; i < n; i++) {
        double d = density[i];
        if (!isfinite(d)) continue;
        if (d <= dead_below) dead++;
        else {
            live++;
            if (d > dense_above) dense++; /* sae/metrics.h: dense is > 0.1, as the caption says */
        }
        if (d > 0 && d < lo) lo = d;
    }
    if (!isfinite(lo)) lo = 1e-6;
    double a = pow(10, floor(log10(lo))), edges[61], counts[60];
    if (lo < a * 1.5) a /= 10; /* keep the rarest features off the axis edge, where "dead" is */
    if (a > 1e-1) a = 1e-1;
    double *vals = mem_alloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!vals) {
        rep_canvas_free(c);
        return err_set(ERR_NOMEM, "%s: out of memory", path);
    }
    for (int i = 0; i < n; i++) vals[i] = density[i] > 0 ? density[i] : NAN;
    rep_bin(vals, (size_t)n, a, 1.0, 60, 1, edges, counts);
    mem_free(vals);
    char name[160];
    snprintf(name, sizeof name, "%d features: %d dead (density <= %g), %d dense (> %g)", n, dead,
             dead_below, dense, dense_above);
    rep_axes ax = rep_axes_make(title ? title : "Feature density", "density (fraction of tokens, log scale)",
                                "features");
    ax.log_x = 1;
    ax.y_counts = 1;
    rep_hist_series hs = {name, counts, rep_rgb(0x1f77b4)};
    char dl[64], hl[64];
    snprintf(dl, sizeof dl, dead_below > 0 ? "%d dead" : "%d dead (density 0: left edge)", dead);
    snprintf(hl, sizeof hl, "%d dense", dense);
    rep_marker mk[2] = {{dead_below > 0 ? dead_below : a, dl, rep_rgb(0xd62728)},
                        {dense_above, hl, rep_rgb(0x9467bd)}};
    rc = rep_histogram(c, 0, 0, 900, 480, &ax, edges, 60, &hs, 1, mk, 2);
    return finish(c, rc, path, meta, nmeta);
}

int rep_plot_decoder_angles(const char *path, const rep_kv *meta, int nmeta, const char *title,
                            const double *edges, const double *counts, const double *rand_counts,
                            int nbins, int degrees, int d_in, const double *maxcos, int n)
{
    rep_canvas *c;
    int rc = rep_canvas_new(&c, 1200, 480, rep_rgb(0xffffff));
    if (rc) return rc;
    double *rnd = NULL;
    if (!rand_counts && nbins > 0 && d_in >= 2) {
        /* cos of two independent uniform unit vectors in R^d has density proportional to
         * (1-c^2)^((d-3)/2) on [-1,1]; integrate per bin (Simpson on 8 sub-intervals in log
         * space to stay finite for large d) and scale to the observed total. */
        rnd = mem_calloc((size_t)nbins, sizeof(double));
        if (!rnd) {
            rep_canvas_free(c);
            return err_set(ERR_NOMEM, "%s: out of memory", path);
        }
        double tot = 0, z = 0;
        for (int i = 0; i < nbins; i++) tot += counts[i];
        for (int i = 0; i < nbins; i++) {
            double s = 0;
            for (int k = 0; k <= 16; k++) {
                double x = edges[i] + (edges[i + 1] - edges[i]) * k / 16.0, fx;
                if (degrees) { /* angle density: sin^(d-2) */
                    double sn = sin(x * M_PI / 180.0);
                    fx = sn > 0 ? exp((d_in - 2) * log(sn)) : (d_in == 2 ? 1 : 0);
                } else {
                    double q = 1 - x * x;
                    fx = q > 0 ? exp(0.5 * (d_in - 3) * log(q)) : (d_in == 3 ? 1 : 0);
                }
                s += (k == 0 || k == 16 ? 1 : k % 2 ? 4 : 2) * fx;
            }
            rnd[i] = s * (edges[i + 1] - edges[i]) / 48.0;
            z += rnd[i];
        }
        for (int i = 0; i < nbins; i++) rnd[i] = z > 0 ? rnd[i] * tot / z : 0;
        rand_counts = rnd;
    }
    char rname[64];
    snprintf(rname, sizeof rname, "random unit vectors (d=%d)", d_in);
    rep_hist_series hs[2] = {{"SAE decoder pairs", counts, rep_rgb(0x1f77b4)},
                             {rname, rand_counts, rep_rgb(0xff7f0e)}};
    rep_axes ax = rep_axes_make(title ? title : "Pairwise angles between decoder directions",
                                degrees ? "angle (degrees)" : "cosine", "pairs (log)");
    ax.log_y = 1;
    ax.y_counts = 1;
    ax.ymin = 0.5; /* the random density's far tails are astronomically small: cut below one pair */
    rc = rep_histogram(c, 0, 0, maxcos ? 700 : 1200, 480, &ax, edges, counts ? nbins : 0, hs,
                       counts ? (rand_counts ? 2 : 1) : 0, NULL, 0);
    mem_free(rnd);
    if (rc == OK && maxcos) {
        int k;
        double *s = sorted_desc(maxcos, n, &k);
        if (!s) rc = err_set(ERR_NOMEM, "%s: out of memory", path);
        else {
            rep_series se = {NULL, NULL, s, k, rep_rgb(0x1f77b4), 0};
            rep_axes a2 = rep_axes_make("Max |cos| to any other feature", "features, sorted", "max |cos|");
            a2.ymin = 0;
            a2.ymax = 1;
            rc = rep_lineplot(c, 700, 0, 500, 480, &a2, &se, 1);
            mem_free(s);
        }
    }
    return finish(c, rc, path, meta, nmeta);
}

int rep_plot_training(const char *path, const rep_kv *meta, int nmeta, const char *title,
                      const double *tokens, const double *mse, const double *expl_var,
                      const double *l0, const double *dead_frac, int n)
{
    rep_canvas *c;
    int rc = rep_canvas_new(&c, 1200, 780, rep_rgb(0xffffff));
    if (rc) return rc;
    rep_font tf = rep_font_make(16, 1, rep_rgb(0x222222), REP_LEFT, REP_TOP);
    rep_text(c, 8, 6, title ? title : "Training curves", &tf, 1180);
    struct { const double *y; const char *name; int log; } p[4] = {
        {mse, "MSE (reconstruction)", 1}, {expl_var, "explained variance", 0},
        {l0, "L0 (active features per token)", 0}, {dead_frac, "dead fraction", 0}};
    for (int i = 0; i < 4 && rc == OK; i++) {
        rep_series s = {NULL, tokens, p[i].y, p[i].y ? n : 0, rep_palette(i), 0};
        rep_axes ax = rep_axes_make(p[i].name, "tokens", NULL);
        ax.log_y = p[i].log;
        rc = rep_lineplot(c, (i % 2) * 600, 34 + (i / 2) * 373, 600, 373, &ax, &s, p[i].y ? 1 : 0);
    }
    return finish(c, rc, path, meta, nmeta);
}

int rep_plot_recovery(const char *path, const rep_kv *meta, int nmeta, const char *title,
                      const double *cos, int n_true, int n_sae, const double *best_cos,
                      int n_best)
{
    rep_canvas *c;
    int rc = rep_canvas_new(&c, 1200, 560, rep_rgb(0xffffff));
    if (rc) return rc;
    double split = cos ? 640 : 0;
    if (cos) {
        /* Order SAE columns by the true feature they match best (the largest signed cosine, as
         * in sae/metrics.h's MMCS), so a good recovery shows as a diagonal. */
        int *order = mem_alloc(sizeof(int) * (size_t)(n_sae > 0 ? n_sae : 1));
        double *v = mem_alloc(sizeof(double) * (size_t)n_true * n_sae + 1);
        double *key = mem_alloc(sizeof(double) * (size_t)(n_sae > 0 ? n_sae : 1));
        if (!order || !v || !key) rc = err_set(ERR_NOMEM, "%s: out of memory", path);
        else {
            for (int j = 0; j < n_sae; j++) {
                int bi = 0;
                double bv = -2;
                for (int i = 0; i < n_true; i++) {
                    double a = cos[(size_t)i * n_sae + j];
                    if (a > bv) { bv = a; bi = i; }
                }
                key[j] = bi - bv * 0.5; /* by best true feature, stronger matches first */
                order[j] = j;
            }
            for (int j = 1; j < n_sae; j++) { /* insertion sort: n_sae is small for pictures */
                int o = order[j], k = j - 1;
                while (k >= 0 && key[order[k]] > key[o]) { order[k + 1] = order[k]; k--; }
                order[k + 1] = o;
            }
            for (int i = 0; i < n_true; i++)
                for (int j = 0; j < n_sae; j++) v[(size_t)i * n_sae + j] = cos[(size_t)i * n_sae + order[j]];
            rc = rep_heatmap(c, 0, 0, split, 560, "cos(true feature, SAE feature), SAE columns reordered",
                             v, n_true, n_sae, NULL, NULL, -1, 1, REP_CMAP_DIVERGING, "cosine");
        }
        mem_free(order);
        mem_free(v);
        mem_free(key);
    }
    if (rc == OK) {
        int k = 0;
        double *s = best_cos ? sorted_desc(best_cos, n_best, &k) : NULL;
        if (best_cos && !s) rc = err_set(ERR_NOMEM, "%s: out of memory", path);
        else {
            int good = 0;
            for (int i = 0; i < k; i++) good += s[i] > 0.9;
            char name[96];
            snprintf(name, sizeof name, "%d of %d true features recovered at cos > 0.9", good, k);
            rep_series se = {name, NULL, s, k, rep_rgb(0x2ca02c), 0};
            rep_axes ax = rep_axes_make(title ? title : "Recovered vs true features", "true features, sorted",
                                        "best cos with an SAE feature");
            ax.ymin = 0;
            ax.ymax = 1.02;
            rc = rep_lineplot(c, split, 0, 1200 - split, 560, &ax, &se, 1);
        }
        mem_free(s);
    }
    return finish(c, rc, path, meta, nmeta);
}

int rep_plot_pos_compare(const char *path, const rep_kv *meta, int nmeta, const char *title,
                         const double *sae_prec, int n_sae, const double *neuron_prec, int n_neuron,
                         int top_n)
{
    rep_canvas *c;
    int rc = rep_canvas_new(&c, 1200, 480, rep_rgb(0xffffff));
    if (rc) return rc;
    /* A precision over n top examples is a multiple of 1/n: fixed 0.04 bins put two such values in
     * some bins and none in others (a comb), so bins centre on k/n where n is known and small. */
    enum { MAX_BINS = 101 };
    int nbin = top_n >= 2 && top_n < MAX_BINS ? top_n + 1 : 25;
    double lo = nbin == 25 ? 0 : -0.5 / top_n, hi = nbin == 25 ? 1 : 1 + 0.5 / top_n;
    double e[MAX_BINS + 1], ca[MAX_BINS], cb[MAX_BINS];
    rep_bin(sae_prec, (size_t)(sae_prec ? n_sae : 0), lo, hi, nbin, 0, e, ca);
    rep_bin(neuron_prec, (size_t)(neuron_prec ? n_neuron : 0), lo, hi, nbin, 0, e, cb);
    /* Fractions, not counts: the SAE usually has many more features than the hook has neurons. */
    double ta = 0, tb = 0;
    for (int i = 0; i < nbin; i++) { ta += ca[i]; tb += cb[i]; }
    for (int i = 0; i < nbin; i++) {
        ca[i] = ta > 0 ? ca[i] / ta : 0;
        cb[i] = tb > 0 ? cb[i] / tb : 0;
    }
    int ka = 0, kb = 0;
    double *sa = sae_prec ? sorted_desc(sae_prec, n_sae, &ka) : NULL;
    double *sb = neuron_prec ? sorted_desc(neuron_prec, n_neuron, &kb) : NULL;
    double meda = ka ? sa[ka / 2] : NAN, medb = kb ? sb[kb / 2] : NAN;
    char na[96], nb[96];
    snprintf(na, sizeof na, "SAE (%d, median %.2f)", ka, meda);
    snprintf(nb, sizeof nb, "neurons (%d, median %.2f)", kb, medb);
    rep_hist_series hs[2] = {{na, ca, rep_rgb(0x1f77b4)}, {nb, cb, rep_rgb(0xff7f0e)}};
    rep_axes ax = rep_axes_make(title ? title : "Best POS-tag precision", "precision of the best tag",
                                "fraction of units");
    ax.xmin = lo;
    ax.xmax = hi;
    rc = rep_histogram(c, 0, 0, 700, 480, &ax, e, nbin, hs, 2, NULL, 0);
    if (rc == OK) {
        /* Sorted curves on a common 0..1 x (rank / n) so different counts compare. */
        double *xa = mem_alloc(sizeof(double) * (size_t)(ka + kb + 1));
        if (!xa) rc = err_set(ERR_NOMEM, "%s: out of memory", path);
        else {
            double *xb = xa + ka;
            for (int i = 0; i < ka; i++) xa[i] = (i + 0.5) / ka;
            for (int i = 0; i < kb; i++) xb[i] = (i + 0.5) / kb;
            rep_series s[2] = {{"SAE", xa, sa, ka, rep_rgb(0x1f77b4), 0},
                               {"neurons", xb, sb, kb, rep_rgb(0xff7f0e), 1}};
            rep_axes a2 = rep_axes_make("Sorted precision", "fraction of units (sorted)", "precision");
            a2.ymin = 0;
            a2.ymax = 1;
            a2.xmin = 0;
            a2.xmax = 1;
            rc = rep_lineplot(c, 700, 0, 500, 480, &a2, s, 2);
            mem_free(xa);
        }
    }
    mem_free(sa);
    mem_free(sb);
    return finish(c, rc, path, meta, nmeta);
}

static void html_esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

int rep_write_index(const char *dir, const char *title, const char *intro,
                    const rep_index_entry *e, int n)
{
    size_t dl = strlen(dir);
    char *path = mem_alloc(dl + 32);
    if (!path) return err_set(ERR_NOMEM, "out of memory");
    snprintf(path, dl + 32, "%s/index.html", dir);
    file_atomic out;
    int rc = file_atomic_open(&out, path);
    mem_free(path);
    if (rc) return rc;
    FILE *f = out.f;
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>", f);
    html_esc(f, title);
    fputs("</title>\n<style>body{font-family:'DejaVu Sans',sans-serif;margin:2em;color:#222}"
          "figure{margin:0 0 2.5em 0}img{max-width:100%;border:1px solid #ddd}"
          "figcaption{margin-top:.4em;color:#444}</style></head>\n<body>\n<h1>", f);
    html_esc(f, title);
    fputs("</h1>\n", f);
    if (intro) {
        fputs("<p>", f);
        html_esc(f, intro);
        fputs("</p>\n", f);
    }
    for (int i = 0; i < n; i++) {
        fputs("<figure><a href=\"", f);
        html_esc(f, e[i].file);
        fputs("\"><img loading=\"lazy\" src=\"", f);
        html_esc(f, e[i].file);
        fputs("\" alt=\"", f);
        html_esc(f, e[i].caption);
        fputs("\"></a><figcaption>", f);
        html_esc(f, e[i].caption);
        fputs("</figcaption></figure>\n", f);
    }
    fputs("</body></html>\n", f);
    return file_atomic_commit(&out);
}
