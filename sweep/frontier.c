/* frontier.c - the sweep's Pareto frontiers as PNGs through reports/report.h: per family a line
 * through the runs on its Pareto front (sweep_pareto) sorted by L0 (log axis), a dot on each,
 * and a hollow ring for each run the front dominates (see sweep.h for the files). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "reports/report.h"
#include "store/store.h"
#include "store/store_sweep.h"
#include "sweep/sweep.h"
#include "sweep/sweep_internal.h"

enum { PANEL_W = 900, PANEL_H = 520, MAX_FAM = 16, MAX_PTS = 64 };

/* Which rows a picture takes. */
enum { ROWS_SAE, ROWS_TC, ROWS_ALL };

static int row_in(const store_sweep_row *r, int which)
{
    int fi = sweep_family_index(r->family);
    if (fi < 0) return 0;
    const sweep_family *f = sweep_family_at(fi);
    int tc = f->transcoder || f->target;
    return which == ROWS_ALL || (which == ROWS_TC) == tc;
}

/* One chart: the rows of `which` with finite L0 and y[i], grouped by family label; each
 * family's front (less L0, and more y, or less with lower_better) joined by a line, the runs it
 * dominates drawn as rings without one (joining them drew a worse frontier than the runs give,
 * an audit). */
static int panel(rep_canvas *c, double x, double y, const char *title, const char *ylabel,
                 const store_sweep_row *rows, size_t n, const double *yv, int which,
                 int lower_better)
{
    static double fx[MAX_FAM][MAX_PTS], fy[MAX_FAM][MAX_PTS], dx[MAX_FAM][MAX_PTS], dy[MAX_FAM][MAX_PTS];
    double l0[MAX_PTS], v[MAX_PTS];
    unsigned char on[MAX_PTS];
    rep_series s[2 * MAX_FAM];
    const char *labels[MAX_FAM];
    int ns = 0;
    for (size_t i = 0; i < n && ns < MAX_FAM; i++) {
        if (!row_in(&rows[i], which) || !(rows[i].l0 > 0) || !isfinite(yv[i])) continue;
        int k = 0;
        while (k < ns && strcmp(labels[k], rows[i].family)) k++;
        if (k < ns) continue; /* the family is drawn already */
        labels[ns++] = rows[i].family;
        int m = 0;
        for (size_t j = i; j < n && m < MAX_PTS; j++) {
            if (strcmp(rows[j].family, rows[i].family) || !row_in(&rows[j], which) ||
                !(rows[j].l0 > 0) || !isfinite(yv[j]))
                continue;
            l0[m] = rows[j].l0;
            v[m++] = yv[j];
        }
        sweep_pareto(l0, v, m, lower_better, on);
        rep_color col = rep_palette(sweep_family_index(rows[i].family));
        rep_series *f = &s[k], *d = &s[MAX_FAM + k];
        *f = (rep_series){rows[i].family, fx[k], fy[k], 0, col, 0, 3.5, 0};
        *d = (rep_series){NULL, dx[k], dy[k], 0, col, 0, 3.5, 1};
        for (int j = 0; j < m; j++) {
            rep_series *t = on[j] ? f : d;
            double *tx = (double *)t->x, *ty = (double *)t->y;
            int q = t->n++;
            /* insertion by L0, so the line runs left to right */
            while (q > 0 && tx[q - 1] > l0[j]) {
                tx[q] = tx[q - 1];
                ty[q] = ty[q - 1];
                q--;
            }
            tx[q] = l0[j];
            ty[q] = v[j];
        }
    }
    /* the fronts first (their names make the legend), then the rings */
    for (int k = 0; k < ns; k++) s[ns + k] = s[MAX_FAM + k];
    char yl[160];
    snprintf(yl, sizeof yl, "%s (%s is better)", ylabel, lower_better ? "lower" : "higher");
    rep_axes ax = rep_axes_make(title, "L0 (active latents per token, log scale)", yl);
    ax.log_x = 1;
    return rep_lineplot(c, x, y, PANEL_W, PANEL_H, &ax, s, 2 * ns);
}

static int write_png(const sweep_opts *o, sweep_result *res, rep_canvas *c, int rc,
                     const char *file)
{
    char path[640];
    if (!rc) rc = path_join(path, sizeof path, o->out, file);
    rep_kv meta[] = {{"Software", "saelite sweep"}, {"Title", file}};
    if (!rc) rc = rep_canvas_status(c);
    if (!rc) rc = rep_png_write(c, path, meta, 2);
    rep_canvas_free(c);
    if (!rc && res->n_png < SWEEP_MAX_PNGS) snprintf(res->png[res->n_png++], sizeof res->png[0], "%s", path);
    return rc;
}

static int count_rows(const sweep_result *res, int which)
{
    int k = 0;
    for (size_t i = 0; i < res->n_rows; i++) k += row_in(&res->rows[i], which);
    return k;
}

static int core_png(const sweep_opts *o, sweep_result *res, double *yv, const char *metric,
                    const char *file, const char *title, const char *ylabel)
{
    if (!count_rows(res, ROWS_SAE)) return OK;
    for (size_t i = 0; i < res->n_rows; i++) yv[i] = sweep_row_metric(&res->rows[i], metric);
    rep_canvas *c;
    int rc = rep_canvas_new(&c, PANEL_W, PANEL_H, rep_rgb(0xffffff));
    if (rc) return rc;
    rc = panel(c, 0, 0, title, ylabel, res->rows, res->n_rows, yv, ROWS_SAE,
               sweep_metric_lower_better(metric));
    return write_png(o, res, c, rc, file);
}

static int transcoder_png(const sweep_opts *o, sweep_result *res, double *yv)
{
    if (!count_rows(res, ROWS_TC)) return OK;
    rep_canvas *c;
    int rc = rep_canvas_new(&c, 2 * PANEL_W, PANEL_H, rep_rgb(0xffffff));
    if (rc) return rc;
    for (size_t i = 0; i < res->n_rows; i++) yv[i] = res->rows[i].ce_score;
    char title[320];
    snprintf(title, sizeof title, "CE loss score (%s replaced)",
             o->tc_hook_out ? o->tc_hook_out : "the target");
    rc = panel(c, 0, 0, title,
               "CE loss score", res->rows, res->n_rows, yv, ROWS_TC, 0);
    for (size_t i = 0; i < res->n_rows; i++) yv[i] = res->rows[i].ev;
    if (!rc)
        rc = panel(c, PANEL_W, 0, "EV of the target (held out)",
                   "explained variance", res->rows, res->n_rows, yv, ROWS_TC, 0);
    return write_png(o, res, c, rc, "frontier_transcoders.png");
}

/* The eval_summary metrics worth a frontier: the suites' headline numbers (the others are
 * per-dataset splits, baselines that do not depend on the SAE, counts and timings, and would
 * crowd the picture list). */
static int headline_metric(const char *m)
{
    static const char *const keep[] = {"sparse_probing_top1_acc", "sparse_probing_top5_acc",
                                       "absorption_mean_frac", "absorption_full_rate",
                                       "scr_metric_threshold_20", "tpp_threshold_20_total_metric"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (!strcmp(m, keep[i])) return 1;
    return 0;
}

/* frontier_<metric>.png for every headline metric of eval_summary that some run has. */
static int eval_pngs(const sweep_opts *o, sweep_result *res, double *yv)
{
    store *s;
    int rc = store_open(&s, o->db, STORE_READONLY);
    char(*names)[64] = NULL;
    size_t nm = 0;
    if (!rc) rc = store_sweep_eval_metrics(s, &names, &nm);
    for (size_t m = 0; m < nm && !rc; m++) {
        if (!headline_metric(names[m])) continue;
        int any = 0;
        for (size_t i = 0; i < res->n_rows && !rc; i++) {
            yv[i] = NAN;
            if (res->rows[i].sae_id >= 0)
                rc = store_sweep_eval_value(s, res->rows[i].sae_id, names[m], &yv[i]);
            any |= isfinite(yv[i]);
        }
        if (rc || !any) continue;
        char file[128], title[160];
        size_t k = 0;
        k += (size_t)snprintf(file, sizeof file, "frontier_");
        for (const char *p = names[m]; *p && k + 5 < sizeof file; p++)
            file[k++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ? *p : '_';
        snprintf(file + k, sizeof file - k, ".png");
        snprintf(title, sizeof title, "%s", names[m]);
        rep_canvas *c;
        if ((rc = rep_canvas_new(&c, PANEL_W, PANEL_H, rep_rgb(0xffffff)))) break;
        rc = panel(c, 0, 0, title, names[m], res->rows, res->n_rows, yv, ROWS_ALL,
                   sweep_metric_lower_better(names[m]));
        rc = write_png(o, res, c, rc, file);
    }
    mem_free(names);
    store_close(s);
    return rc;
}

int sweep_draw(const sweep_opts *o, sweep_result *res)
{
    if (!res->n_rows) return OK;
    double *yv = mem_alloc(res->n_rows * sizeof *yv);
    if (!yv) return err_set(ERR_NOMEM, "out of memory for the frontiers");
    int rc = core_png(o, res, yv, "ev", "frontier_ev.png", "Explained variance (held out)",
                      "explained variance");
    if (!rc)
        rc = core_png(o, res, yv, "ce_score", "frontier_ce.png",
                      "CE loss score (SAE spliced in)", "CE loss score");
    if (!rc) rc = transcoder_png(o, res, yv);
    if (!rc && res->have_eval) rc = eval_pngs(o, res, yv);
    mem_free(yv);
    return rc ? err_wrap(rc, "drawing the frontiers") : OK;
}
