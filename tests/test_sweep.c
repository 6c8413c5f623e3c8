/* test_sweep.c - the sweep's frontier arithmetic (interpolation in log L0, the L0 a metric needs)
 * on hand-made rows, and the sweep_runs table round trip (NULLs, replacement, the eval_summary
 * readers with and without the view). The runner itself: tests/test_sweep.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/mem.h"
#include "store/store.h"
#include "store/store_internal.h"
#include "store/store_sweep.h"
#include "sweep/sweep.h"
#include "harness.h"

static store_sweep_row mk(const char *family, const char *name, double l0, double ev)
{
    store_sweep_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.sweep, sizeof r.sweep, "sw");
    snprintf(r.family, sizeof r.family, "%s", family);
    snprintf(r.name, sizeof r.name, "%s", name);
    snprintf(r.architecture, sizeof r.architecture, "topk");
    snprintf(r.hook_name, sizeof r.hook_name, "h");
    snprintf(r.param, sizeof r.param, "k");
    snprintf(r.config, sizeof r.config, "{}");
    snprintf(r.dir, sizeof r.dir, "sw/%s", name);
    r.l0 = l0;
    r.ev = ev;
    r.mse = r.dead_frac = r.ce_clean = r.ce_sae = r.ce_zero = r.ce_score = r.kl_sae = r.kl_score = NAN;
    r.train_seconds = r.eval_seconds = NAN;
    r.sae_id = r.dict_id = r.ce_tokens = -1;
    r.eval_tokens = 100;
    return r;
}

static void test_interp(void)
{
    /* family a: EV 0.6 at L0 10, 0.8 at L0 40 (given out of order), b: one point */
    store_sweep_row rows[] = {mk("a", "a2", 40, 0.8), mk("b", "b1", 20, 0.7), mk("a", "a1", 10, 0.6),
                              mk("a", "a3", 160, NAN)};
    size_t n = 4;
    /* L0 20 is half way between 10 and 40 in log L0 */
    CHECK_NEAR(sweep_metric_at_l0(rows, n, "a", "ev", 20), 0.7, 1e-12);
    CHECK_NEAR(sweep_metric_at_l0(rows, n, "a", "ev", 10), 0.6, 1e-12);
    CHECK_NEAR(sweep_metric_at_l0(rows, n, "a", "ev", 40), 0.8, 1e-12);
    CHECK(isnan(sweep_metric_at_l0(rows, n, "a", "ev", 80)), "outside the range (the NaN point is left out)");
    /* within 0.5% of an end is the end (a k 64 run measures L0 63.9) */
    CHECK_NEAR(sweep_metric_at_l0(rows, n, "a", "ev", 40.15), 0.8, 1e-12);
    CHECK_NEAR(sweep_metric_at_l0(rows, n, "a", "ev", 9.96), 0.6, 1e-12);
    CHECK(isnan(sweep_metric_at_l0(rows, n, "a", "ev", 40.4)), "1 percent past the end");
    CHECK(isnan(sweep_metric_at_l0(rows, n, "a", "ev", 5)), "below the range");
    CHECK_NEAR(sweep_metric_at_l0(rows, n, "b", "ev", 20), 0.7, 1e-12);
    CHECK(isnan(sweep_metric_at_l0(rows, n, "c", "ev", 20)), "unknown family");
    CHECK(isnan(sweep_metric_at_l0(rows, n, "a", "nope", 20)), "unknown metric");
    CHECK_NEAR(sweep_l0_at_metric(rows, n, "a", "ev", 0.7, NULL), 20, 1e-9);
    CHECK_NEAR(sweep_l0_at_metric(rows, n, "a", "ev", 0.6, NULL), 10, 1e-9);
    CHECK(isnan(sweep_l0_at_metric(rows, n, "a", "ev", 0.9, NULL)), "never reached");
    CHECK_NEAR(sweep_l0_at_metric(rows, n, "b", "ev", 0.7, NULL), 20, 1e-12);
    CHECK_NEAR(sweep_row_metric(&rows[0], "l0"), 40, 0);
    /* the sparsest run already past the target: said apart from "never reached" */
    int below = 0;
    CHECK(isnan(sweep_l0_at_metric(rows, n, "a", "ev", 0.5, NULL)));
    CHECK_NEAR(sweep_l0_at_metric(rows, n, "a", "ev", 0.5, &below), 10, 1e-9);
    CHECK(below == 1);
    CHECK_NEAR(sweep_l0_at_metric(rows, n, "a", "ev", 0.7, &below), 20, 1e-9);
    CHECK(below == 0);
}

/* Dominated runs are no part of a frontier: with (50, 0.7) beaten by (40, 0.8), the front of
 * family a ends at 40 and nothing is interpolated towards the worse run (an audit found the
 * sweep's lines and summary drawn through such runs). */
static void test_pareto(void)
{
    store_sweep_row rows[] = {mk("a", "a1", 10, 0.6), mk("a", "a2", 40, 0.8), mk("a", "a5", 50, 0.7),
                              mk("a", "a6", 20, 0.55)};
    size_t n = 4;
    CHECK(isnan(sweep_metric_at_l0(rows, n, "a", "ev", 45)), "past the front's last run");
    CHECK_NEAR(sweep_metric_at_l0(rows, n, "a", "ev", 20), 0.7, 1e-12); /* not 0.55 */
    double l0[] = {10, 40, 50, 20, 40, 10, NAN, 5}, y[] = {0.6, 0.8, 0.7, 0.55, 0.8, 0.6, 0.9, NAN};
    unsigned char on[8];
    CHECK(sweep_pareto(l0, y, 8, 0, on) == 2 && on[0] && on[1] && !on[2] && !on[3] && !on[4] && !on[5] &&
          !on[6] && !on[7], "higher better: %d%d%d%d%d%d%d%d", on[0], on[1], on[2], on[3], on[4], on[5],
          on[6], on[7]);
    /* lower better (absorption): (10, 0.6) beats (20, 0.55)? no: 0.55 is lower, so both stay;
       (40, 0.8) and (50, 0.7) lose to (20, 0.55) */
    CHECK(sweep_pareto(l0, y, 6, 1, on) == 2 && on[0] && on[3] && !on[1] && !on[2] && !on[4] && !on[5]);
    CHECK(sweep_metric_lower_better("absorption_mean_frac") && sweep_metric_lower_better("absorption_full_rate") &&
          sweep_metric_lower_better("absorption_mean_frac_nogate") && sweep_metric_lower_better("mse") &&
          !sweep_metric_lower_better("ev") && !sweep_metric_lower_better("sparse_probing_top1_acc") &&
          !sweep_metric_lower_better("scr_metric_threshold_20"));
}

static void test_table(void)
{
    char dir[] = "/tmp/saelite_test_sweepXXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[128];
    snprintf(path, sizeof path, "%s/s.db", dir);
    store *s;
    int rc = store_open(&s, path, STORE_CREATE);
    CHECK(rc == OK, "open: %s", err_msg());
    if (rc) return;
    CHECK(store_sweep_init(s) == OK, "init: %s", err_msg());
    store_sweep_row a = mk("topk", "topk_k8", 8, 0.9), b = mk("relu", "relu_l15", 30.5, 0.85), g;
    a.sae_id = 3;
    a.ce_score = 0.97;
    a.d_out = 0;
    snprintf(b.hook_out, sizeof b.hook_out, "out");
    b.d_out = 16;
    CHECK(store_sweep_put(s, &a) == OK && store_sweep_put(s, &b) == OK, "put: %s", err_msg());
    int found = 0;
    CHECK(store_sweep_get(s, "sw", "topk_k8", &g, &found) == OK && found, "get");
    CHECK(g.sae_id == 3 && g.dict_id == -1 && g.l0 == 8 && g.ce_score == 0.97 && isnan(g.kl_score) &&
          !g.hook_out[0] && g.d_out == 0, "round trip with NULLs");
    CHECK(store_sweep_get(s, "sw", "nope", &g, &found) == OK && !found, "missing run");
    CHECK(store_sweep_get(s, "other", "topk_k8", &g, &found) == OK && !found, "other sweep");
    a.ev = 0.95;
    CHECK(store_sweep_put(s, &a) == OK, "replace");
    store_sweep_row *rows;
    size_t n;
    CHECK(store_sweep_list(s, "sw", &rows, &n) == OK && n == 2, "list");
    if (n == 2) CHECK(!strcmp(rows[0].name, "relu_l15") && !strcmp(rows[1].name, "topk_k8") &&
                      rows[1].ev == 0.95 && !strcmp(rows[0].hook_out, "out") && rows[0].d_out == 16,
                      "replaced row moves to the end, values kept");
    mem_free(rows);
    int have = 1;
    CHECK(store_sweep_has_eval(s, &have) == OK && !have, "no eval_summary");
    CHECK(store_exec(s, "CREATE TABLE e (sae_id INTEGER, suite TEXT, metric TEXT, value REAL); "
                        "INSERT INTO e VALUES (3, 'p', 'acc', 0.5), (3, 'q', 'acc', 0.7), (3, 'p', 'abs', 0.1);"
                        "CREATE VIEW eval_summary AS SELECT * FROM e") == OK, "view: %s", err_msg());
    CHECK(store_sweep_has_eval(s, &have) == OK && have, "eval_summary found");
    char(*names)[64];
    CHECK(store_sweep_eval_metrics(s, &names, &n) == OK && n == 2, "metrics");
    if (n == 2) CHECK(!strcmp(names[0], "abs") && !strcmp(names[1], "acc"), "sorted");
    mem_free(names);
    double v;
    CHECK(store_sweep_eval_value(s, 3, "acc", &v) == OK && fabs(v - 0.6) < 1e-12, "mean over suites");
    CHECK(store_sweep_eval_value(s, 4, "acc", &v) == OK && isnan(v), "no value");
    store_close(s);
    /* a recorded part is checked at open: a changed table is refused */
    CHECK(store_open(&s, path, 0) == OK, "reopen");
    store_exec(s, "ALTER TABLE sweep_runs DROP COLUMN kl_score");
    store_close(s);
    CHECK(store_open(&s, path, 0) != OK && strstr(err_msg(), "sweep"), "altered part refused: %s", err_msg());
    store_remove(path);
    rmdir(dir);
}

int main(void)
{
    test_interp();
    test_pareto();
    test_table();
    return harness_report("test_sweep");
}
