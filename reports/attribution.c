/* attribution.c - the attribution heat map of `saelite attribute` (see dashboard.h), and the
 * command as a library call: ana_attr_run, the nodes ranked, the heat map, the CSV, the .npy and
 * the PNG one file group (rep_attr_run, see report_run.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/attribute.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "reports/dashboard.h"
#include "reports/report_run.h"

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

/* ---- `saelite attribute` as a library call (see report_run.h) ------------------------------ */

static int cmp_node(const void *x, const void *y)
{
    const rep_attr_node *p = x, *q = y;
    if (fabs(p->attr) != fabs(q->attr)) return fabs(p->attr) > fabs(q->attr) ? -1 : 1;
    return p->pos != q->pos ? p->pos - q->pos : p->feature - q->feature;
}

/* Every non-zero attribution and error node into r->nodes, by |attribution|. */
static int rank_nodes(rep_attr_result *r)
{
    const ana_attr_result *a = &r->run.r;
    const int T = r->run.T, D = a->d_sae;
    r->nodes = mem_alloc(((size_t)T * D + T) * sizeof *r->nodes);
    if (!r->nodes) return err_set(ERR_NOMEM, "out of memory");
    int nn = 0;
    for (int t = 0; t < T; t++) {
        for (int j = 0; j < D; j++)
            if (a->attr[(size_t)t * D + j] != 0) r->nodes[nn++] = (rep_attr_node){a->attr[(size_t)t * D + j], t, j};
        if (a->err[t] != 0) r->nodes[nn++] = (rep_attr_node){a->err[t], t, -1};
    }
    qsort(r->nodes, (size_t)nn, sizeof *r->nodes, cmp_node);
    r->n_nodes = nn;
    return OK;
}

/* The heat map of the result's rows (top features, then the error nodes) over the tokens. */
static int draw(const char *path, const rep_attr_opts *o, const ana_attr_run_result *res)
{
    int rc = OK;
    char **labels = mem_calloc((size_t)res->n_rows, sizeof *labels);
    for (int k = 0; labels && k < res->n_rows; k++) {
        char s[32];
        if (res->row_feature[k] < 0) snprintf(s, sizeof s, "error");
        else snprintf(s, sizeof s, "f%d", res->row_feature[k]);
        labels[k] = mem_strdup(s);
    }
    char title[256];
    snprintf(title, sizeof title, "attribution to \"%s\"%s%s%s at position %d (%s)", res->target_text,
             res->target_b >= 0 ? " - \"" : "", res->target_b >= 0 ? res->target_b_text : "",
             res->target_b >= 0 ? "\"" : "", res->r.pos,
             o->run.ig_steps ? "integrated gradients" : "gradient x activation");
    rep_kv meta[] = {{"Software", "saelite attribute"}, {"Title", title}};
    if (!labels) rc = err_set(ERR_NOMEM, "out of memory");
    else rc = rep_plot_attribution(path, meta, 2, title, res->rows, res->n_rows, res->T,
                                   (const char *const *)labels, (const char *const *)res->tok_text);
    for (int k = 0; labels && k < res->n_rows; k++) mem_free(labels[k]);
    mem_free(labels);
    return rc;
}

void rep_attr_run_free(rep_attr_result *r)
{
    if (!r) return;
    ana_attr_run_free(&r->run);
    mem_free(r->nodes);
    memset(r, 0, sizeof *r);
}

int rep_attr_run(const rep_attr_opts *o, rep_attr_result *r)
{
    memset(r, 0, sizeof *r);
    /* the CSV, the .npy and the PNG: all or none (a failing PNG left the other two, an audit) */
    file_group g = {0};
    ana_attr_run_opts a = o->run;
    a.csv = file_group_add(&g, o->run.csv);
    a.npy = file_group_add(&g, o->run.npy);
    const char *png = file_group_add(&g, o->png);
    int rc = ana_attr_run(&a, &r->run);
    if (!rc) {
        r->analysed = 1;
        if (!(rc = rank_nodes(r)) && png) rc = draw(png, o, &r->run);
        if (!rc) rc = file_group_commit(&g);
    }
    if (rc) file_group_abort(&g);
    return rc;
}
