/* graph.c - the attribution-graph picture of `saelite graph` (see dashboard.h), and the command
 * as a library call: ana_graph_run, then the picture, graph.json and graph.png one file group
 * (rep_graph_run, see report_run.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/graph.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "reports/dashboard.h"
#include "reports/report_run.h"

enum { LEFT = 110, TOP = 60, BOTTOM = 70, ROW_H = 130, COL_W = 64 };

int rep_plot_graph(const char *path, const rep_kv *meta, int nmeta, const char *title,
                   const rep_graph_node *nodes, int n, const rep_graph_edge *edges, int ne,
                   int rows, int cols, const char *const *row_labels,
                   const char *const *col_labels)
{
    if (rows < 2 || cols < 1 || rows > 64 || cols > 512 || n < 0 || ne < 0)
        return err_set(ERR_ARG, "graph picture: bad size %d rows x %d columns", rows, cols);
    for (int i = 0; i < n; i++)
        if (nodes[i].row < 0 || nodes[i].row >= rows || nodes[i].col < 0 || nodes[i].col >= cols)
            return err_set(ERR_ARG, "graph picture: node %d at (%d, %d) is outside", i, nodes[i].row,
                           nodes[i].col);
    for (int e = 0; e < ne; e++)
        if (edges[e].src < 0 || edges[e].src >= n || edges[e].dst < 0 || edges[e].dst >= n)
            return err_set(ERR_ARG, "graph picture: edge %d names a node outside 0..%d", e, n - 1);
    double *x = mem_alloc(((size_t)n + 1) * sizeof *x), *y = mem_alloc(((size_t)n + 1) * sizeof *y);
    double *cx0 = mem_alloc(((size_t)cols + 1) * sizeof *cx0);
    int *cnt = mem_calloc((size_t)rows * cols, sizeof *cnt), *seen = mem_calloc((size_t)rows * cols, sizeof *seen);
    if (!x || !y || !cx0 || !cnt || !seen) {
        mem_free(x), mem_free(y), mem_free(cx0), mem_free(cnt), mem_free(seen);
        return err_set(ERR_NOMEM, "graph picture: out of memory");
    }
    for (int i = 0; i < n; i++)
        if (nodes[i].kind != REP_GNODE_LOGIT) cnt[nodes[i].row * cols + nodes[i].col]++;
    /* a column is as wide as its most crowded cell needs (26 px a node), at least COL_W */
    cx0[0] = LEFT;
    for (int c = 0; c < cols; c++) {
        int most = 0;
        for (int r = 0; r < rows; r++) most = cnt[r * cols + c] > most ? cnt[r * cols + c] : most;
        cx0[c + 1] = cx0[c] + (26 * most + 16 > COL_W ? 26 * most + 16 : COL_W);
    }
    for (int i = 0; i < n; i++)
        if (nodes[i].kind == REP_GNODE_LOGIT) cnt[nodes[i].row * cols + nodes[i].col]++;
    const int w = (int)cx0[cols] + 40, h = TOP + ROW_H * rows + BOTTOM;
    for (int i = 0; i < n; i++) {
        const rep_graph_node *q = &nodes[i];
        int c = q->row * cols + q->col, k = seen[c]++;
        double cw = cx0[q->col + 1] - cx0[q->col], cx = cx0[q->col] + cw / 2;
        if (q->kind == REP_GNODE_LOGIT) { /* logits spread about their column, 60 px apart */
            x[i] = cx + 60.0 * (k - (cnt[c] - 1) / 2.0);
            if (x[i] > w - 20) x[i] -= 60.0 * cnt[c]; /* keep them on the canvas */
        } else x[i] = cx0[q->col] + cw * (k + 1.0) / (cnt[c] + 1.0);
        /* alternate the heights in crowded cells so labels overlap less */
        y[i] = TOP + ROW_H * (rows - 1 - q->row + 0.5) + (cnt[c] > 3 ? (k % 2 ? 14 : -14) : 0);
    }
    double wmax = 0;
    for (int e = 0; e < ne; e++)
        if (isfinite(edges[e].weight) && fabs(edges[e].weight) > wmax) wmax = fabs(edges[e].weight);
    if (!(wmax > 0)) wmax = 1;
    rep_canvas *cv;
    int rc = rep_canvas_new(&cv, w, h, rep_rgb(0xffffff));
    if (rc) goto out;
    rep_font tf = rep_font_make(15, 1, rep_rgb(0x222222), REP_LEFT, REP_TOP);
    rep_font rl = rep_font_make(12, 1, rep_rgb(0x555555), REP_LEFT, REP_MIDDLE);
    rep_font cl = rep_font_make(12, 0, rep_rgb(0x222222), REP_CENTER, REP_TOP);
    rep_font nl = rep_font_make(9, 0, rep_rgb(0x333333), REP_CENTER, REP_BOTTOM);
    rep_text(cv, 12, 12, title ? title : "attribution graph", &tf, w - 24);
    for (int r = 0; r < rows; r++) { /* row bands and labels */
        double yy = TOP + ROW_H * (rows - 1 - r);
        if (r % 2) rep_rect(cv, LEFT - 6, yy, cx0[cols] - LEFT + 12, ROW_H, rep_rgb(0xf6f6f6));
        if (row_labels && row_labels[r]) rep_text(cv, 10, yy + ROW_H / 2.0, row_labels[r], &rl, LEFT - 16);
    }
    for (int c = 0; c < cols; c++) {
        double cx = (cx0[c] + cx0[c + 1]) / 2;
        rep_line(cv, cx0[c], TOP, cx0[c], TOP + ROW_H * rows, rep_rgb(0xe4e4e4), 1, 0);
        if (col_labels && col_labels[c])
            rep_text(cv, cx, TOP + ROW_H * rows + 8, col_labels[c], &cl, cx0[c + 1] - cx0[c] - 4);
    }
    for (int e = 0; e < ne; e++) {
        const rep_graph_edge *q = &edges[e];
        if (!isfinite(q->weight) || q->weight == 0) continue;
        double a = fabs(q->weight) / wmax;
        rep_line(cv, x[q->src], y[q->src], x[q->dst], y[q->dst],
                 rep_rgba(q->weight > 0 ? 0xd62728 : 0x1f77b4, 0.25 + 0.55 * a), 0.6 + 5.0 * a, 0);
    }
    static const uint32_t fill[] = {0xff7f0e, 0x7f7f7f, 0x2ca02c, 0x9467bd};
    for (int i = 0; i < n; i++) {
        const rep_graph_node *q = &nodes[i];
        rep_color col = rep_rgb(fill[q->kind >= 0 && q->kind < 4 ? q->kind : 0]);
        if (q->kind == REP_GNODE_FEATURE || q->kind == REP_GNODE_LOGIT) rep_circle(cv, x[i], y[i], 6, col);
        else rep_rect(cv, x[i] - 5.5, y[i] - 5.5, 11, 11, col);
        if (q->label) rep_text(cv, x[i], y[i] - 8, q->label, &nl, q->kind == REP_GNODE_LOGIT ? 58 : 30);
    }
    rc = rep_canvas_status(cv);
    if (!rc) rc = rep_png_write(cv, path, meta, nmeta);
    rep_canvas_free(cv);
out:
    mem_free(x), mem_free(y), mem_free(cx0), mem_free(cnt), mem_free(seen);
    return rc;
}

/* ---- `saelite graph` as a library call (see report_run.h) ---------------------------------- */

/* The pruned graph's nodes and edges as the picture's (embeddings at the bottom, a row per block,
 * the logits at the top), drawn into path. */
static int draw(const char *path, const ana_graph_run_opts *o, const ana_graph_run_result *res)
{
    const ana_graph *g = &res->g;
    const int rows = g->n_layers + 2;
    int *map = mem_alloc((size_t)g->n * sizeof *map);
    rep_graph_node *nodes = mem_calloc((size_t)g->n, sizeof *nodes);
    rep_graph_edge *edges = mem_alloc(((size_t)g->n_edges_kept + 1) * sizeof *edges);
    char **labels = mem_calloc((size_t)g->n, sizeof *labels), **rl = mem_calloc((size_t)rows, sizeof *rl);
    int rc = OK, nn = 0, ne = 0;
    if (!map || !nodes || !edges || !labels || !rl) rc = err_set(ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < g->n; i++) {
        const ana_graph_node *q = &g->nodes[i];
        map[i] = -1;
        if (!q->kept) continue;
        char s[96];
        switch (q->kind) {
        case ANA_NODE_FEATURE: snprintf(s, sizeof s, "%d", q->id); break;
        case ANA_NODE_ERROR: snprintf(s, sizeof s, "err"); break;
        case ANA_NODE_EMBED: s[0] = 0; break;
        default: snprintf(s, sizeof s, "%s %.2f", res->logit_text[i - (g->n - g->n_logits)], q->activation);
        }
        labels[nn] = s[0] ? mem_strdup(s) : NULL;
        int row = q->kind == ANA_NODE_EMBED ? 0 : q->kind == ANA_NODE_LOGIT ? rows - 1 : q->layer + 1;
        nodes[nn] = (rep_graph_node){q->kind, row, q->pos, labels[nn]};
        map[i] = nn++;
    }
    for (int t = 0; !rc && t < g->n; t++)
        for (int s = 0; s < g->n; s++)
            if (g->edge_kept[(size_t)t * g->n + s] && map[s] >= 0 && map[t] >= 0)
                edges[ne++] = (rep_graph_edge){map[s], map[t], g->adj[(size_t)t * g->n + s]};
    for (int r = 0; !rc && r < rows; r++) {
        char s[32];
        if (r == 0) snprintf(s, sizeof s, "embeddings");
        else if (r == rows - 1) snprintf(s, sizeof s, "logits");
        else snprintf(s, sizeof s, "block %d", r - 1);
        if (!(rl[r] = mem_strdup(s))) rc = err_set(ERR_NOMEM, "out of memory");
    }
    if (!rc) {
        char title[512];
        snprintf(title, sizeof title, "attribution graph (%d of %d nodes, %lld of %lld edges; node %.2f, "
                 "edge %.2f): \"%.300s\"", g->n_kept, g->n, (long long)g->n_edges_kept,
                 (long long)g->n_edges, o->node_threshold, o->edge_threshold, o->text);
        rep_kv meta[] = {{"Software", "saelite graph"}, {"Title", title}};
        rc = rep_plot_graph(path, meta, 2, title, nodes, nn, edges, ne, rows, res->T,
                            (const char *const *)rl, (const char *const *)res->tok_text);
    }
    for (int i = 0; labels && i < g->n; i++) mem_free(labels[i]);
    for (int r = 0; rl && r < rows; r++) mem_free(rl[r]);
    mem_free(labels);
    mem_free(rl);
    mem_free(map);
    mem_free(nodes);
    mem_free(edges);
    return rc;
}

typedef struct { double v; int i; } ranked;
static int cmp_ranked(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->i - y->i;
}

/* The kept features and error nodes counted, and ranked by influence into r->ranked. */
static int rank_nodes(rep_graph_result *r)
{
    const ana_graph *g = &r->run.g;
    ranked *rk = mem_alloc((size_t)g->n * sizeof *rk);
    r->ranked = mem_alloc((size_t)g->n * sizeof *r->ranked);
    if (!rk || !r->ranked) {
        mem_free(rk);
        mem_free(r->ranked);
        r->ranked = NULL;
        return err_set(ERR_NOMEM, "out of memory");
    }
    int nr = 0;
    for (int i = 0; i < g->n; i++) {
        const ana_graph_node *q = &g->nodes[i];
        r->n_kept_features += q->kept && q->kind == ANA_NODE_FEATURE;
        r->n_kept_errors += q->kept && q->kind == ANA_NODE_ERROR;
        if (q->kept && (q->kind == ANA_NODE_FEATURE || q->kind == ANA_NODE_ERROR))
            rk[nr++] = (ranked){q->influence, i};
    }
    qsort(rk, (size_t)nr, sizeof *rk, cmp_ranked);
    for (int k = 0; k < nr; k++) r->ranked[k] = rk[k].i;
    r->n_ranked = nr;
    mem_free(rk);
    return OK;
}

void rep_graph_run_free(rep_graph_result *r)
{
    if (!r) return;
    ana_graph_run_free(&r->run);
    mem_free(r->ranked);
    memset(r, 0, sizeof *r);
    r->run.graph_id = -1;
}

int rep_graph_run(const ana_graph_run_opts *o, rep_graph_result *r)
{
    memset(r, 0, sizeof *r);
    r->run.graph_id = -1;
    /* graph.json and graph.png: both or neither (a failed picture left the JSON, an audit) */
    ana_graph_run_opts a = *o;
    file_group fg = {0};
    char jpath[4096], ppath[4096];
    const char *pw = NULL;
    int rc;
    a.json_out = NULL;
    if (o->out_dir) {
        if ((rc = path_join(jpath, sizeof jpath, o->out_dir, "graph.json")) ||
            (rc = path_join(ppath, sizeof ppath, o->out_dir, "graph.png")))
            return rc;
        a.json_out = file_group_add(&fg, jpath);
        pw = file_group_add(&fg, ppath);
    }
    if ((rc = ana_graph_run(&a, &r->run))) {
        r->run.graph_id = -1; /* freed: no rows the caller may name */
        file_group_abort(&fg);
        return rc;
    }
    r->analysed = 1;
    /* the rows in db are committed by now: a failing picture keeps them (and run.graph_id) */
    if (!(rc = rank_nodes(r)) && o->out_dir && !(rc = draw(pw, o, &r->run))) rc = file_group_commit(&fg);
    if (rc) file_group_abort(&fg);
    return rc;
}
