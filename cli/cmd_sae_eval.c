/* cmd_sae_eval.c - `saelite sae-eval`: ground-truth recovery and reconstruction metrics. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/eval.h"
#include "cli/cli.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/npy.h"
#include "sae/metrics.h"
#include "sae/sae.h"
#include "sae/synth.h"

CLI_COMMAND(sae_eval, "Evaluate an SAE: ground-truth MMCS, absorption against a known hierarchy, reconstruction",
            "saelite sae-eval --sae DIR [--ground-truth TRUE.npy] [--synth GEN.json [--samples N]] "
            "[--npy ACTS.npy [--npy-out TARGETS.npy]] [--max-tokens N]")

/* The generator of `saelite synth --spec` rebuilt: MMCS against its directions and, when it has
 * a hierarchy, SAEBench's absorption metric beside the generator's own (docs/eval.md, "The
 * synthetic check"). */
static int synth_check(const sae_model *m, const char *spec, double thr, int n)
{
    synth_config c;
    int rc = sae_synth_spec_load(&c, spec);
    if (rc) return rc;
    int Do = sae_out_dim(&m->cfg);
    if (c.d != Do || m->cfg.transcoder)
        return err_set(ERR_SHAPE, "%s: the generator makes %d values, the SAE %s %d", spec, c.d,
                       m->cfg.transcoder ? "is a transcoder writing" : "reads", Do);
    sae_synth *g;
    rc = sae_synth_new(&g, &c);
    double mm = 0, rec = 0;
    if (!rc) rc = sae_mmcs(sae_synth_directions(g), c.n_features, m->W_dec, m->cfg.d_sae, Do, thr,
                           &mm, &rec, NULL);
    sae_synth_free(g);
    if (rc) return rc;
    printf("generator %s: %d features of d %d, MMCS %.4f, recovered (cos > %.2f) %.1f%%\n", spec,
           c.n_features, c.d, mm, thr, 100 * rec);
    if (c.parents < 1 || c.children < 1) {
        printf("absorption: the generator has no hierarchy (synth --parents/--children)\n");
        return OK;
    }
    eval_abs_params p;
    eval_abs_defaults(&p);
    eval_abs_class mean;
    sae_absorption_result ex;
    rc = eval_absorption_synth(m, &c, n, n, &p, &mean, NULL, &ex, NULL);
    if (rc) return rc;
    printf("absorption, %d parents x %d children (child_p %g), %d training and %d fresh test samples:\n",
           c.parents, c.children, c.child_p, n, n);
    printf("  generator (exact): absorption %.4f (the parent's latent silent), partial %.4f (the share "
           "of the parent it does not carry); parent latents' decoder cosine %.3f, carried without a "
           "child %.3f\n", ex.absorption, ex.partial, ex.parent_cos, ex.alone_carried);
    printf("  SAEBench: full-absorption rate %.4f (%+.4f), absorption fraction %.4f, without its 40%% "
           "gate %.4f (%+.4f); %d of %d parents with GT-probe F1 > %.1f, %d split feature(s)\n",
           mean.full_rate, mean.full_rate - ex.absorption, mean.mean_frac, mean.mean_frac_nogate,
           mean.mean_frac_nogate - ex.partial, mean.included, c.parents, p.min_gt_f1, mean.n_split);
    return OK;
}

/* A [rows, D] float array whose first n rows are finite (NaN/Inf would only print 'mse nan'). */
static int check_array(const char *path, const char *rows, const float *x, int nd,
                       const int64_t *sh, int D, const char *width, int64_t n)
{
    if (nd != 2)
        return err_set(ERR_SHAPE, "%s: expected a 2-D array [%s, %d], got %d dims", path, rows, D, nd);
    if (sh[1] != D)
        return err_set(ERR_SHAPE, "%s: expected [%s, %d], got [%lld, %lld] (the SAE's %s is %d)",
                       path, rows, D, (long long)sh[0], (long long)sh[1], width, D);
    return npy_check_finite(path, x, n, D);
}

int cmd_sae_eval(int argc, char **argv)
{
    const char *cmd = "sae-eval", *dir = NULL, *truth = NULL, *acts = NULL, *acts_out = NULL,
               *gen = NULL;
    int n_synth = 16384;
    double thr = 0.9;
    int64_t max_tokens = 0;
    arg_spec spec[] = {
        {"--sae", ARG_STR, &dir, "SAE directory (SAELens layout)", ARG_REQUIRED},
        {"--ground-truth", ARG_STR, &truth, "true directions [features, d_in] .npy"},
        {"--synth", ARG_STR, &gen,
         "generator spec (`saelite synth --spec`): MMCS against it, and absorption if it has a hierarchy"},
        {"--samples", ARG_INT, &n_synth, "--synth: training and test samples for the absorption probes",
         ARG_RANGE(64, 1 << 20)},
        {"--threshold", ARG_FLOAT, &thr, "cosine for 'recovered'", ARG_RANGE(-1, 1)},
        {"--npy", ARG_STR, &acts, "activations [tokens, d_in] .npy for reconstruction metrics"},
        {"--npy-out", ARG_STR, &acts_out, "transcoders: the target activations [tokens, d_out] of the --npy rows"},
        {"--max-tokens", ARG_I64, &max_tokens, "use at most N rows of --npy (0: all)", ARG_MIN(0)},
        {NULL, 0, NULL, NULL},
    };
    int np = 0;
    int prc = args_parse(cmd, argc, argv, spec, NULL, 0, &np);
    if (prc) return prc < 0 ? 0 : prc;
    if (!truth && !acts && !gen) return cli_usage_error(cmd, "give --ground-truth, --synth and/or --npy");
    sae_model *m;
    if (sae_load(&m, dir)) return cli_fail(cmd);
    int D = m->cfg.d_in, S = m->cfg.d_sae, Do = sae_out_dim(&m->cfg), rc = OK;
    const char *dname = m->cfg.transcoder ? "d_out" : "d_in"; /* the decoder rows' width */
    if (m->cfg.transcoder && acts && !acts_out) {
        sae_free(m);
        return cli_usage_error(cmd, "a transcoder's --npy needs --npy-out (its targets)");
    }
    if (!m->cfg.transcoder && acts_out) {
        sae_free(m);
        return cli_usage_error(cmd, "--npy-out is for transcoders");
    }
    float *data = NULL;
    int nd;
    int64_t sh[NPY_MAX_DIMS];
    printf("sae %s: %s d_in %d d_sae %d", dir, sae_arch_name(m->cfg.arch), D, S);
    if (m->cfg.transcoder)
        printf(" %s d_out %d", m->cfg.transcoder == SAE_SKIP_TRANSCODER ? "skip_transcoder" : "transcoder", Do);
    if (m->cfg.k) printf(" k %d", m->cfg.k);
    printf("\n");
    if (truth) {
        rc = npy_read(truth, &data, &nd, sh);
        if (!rc) rc = check_array(truth, "features", data, nd, sh, Do, dname, sh[0]);
        if (!rc) rc = sae_truth_check(truth, data, sh[0], Do);
        double mm, rec;
        if (!rc) rc = sae_mmcs(data, (int)sh[0], m->W_dec, S, Do, thr, &mm, &rec, NULL);
        if (!rc)
            printf("ground truth %s: %" PRId64 " features, MMCS %.4f, recovered (cos > %.2f) %.1f%%\n",
                   truth, sh[0], mm, thr, 100 * rec);
        mem_free(data);
        data = NULL;
    }
    if (!rc && gen) rc = synth_check(m, gen, thr, n_synth);
    if (!rc && acts) {
        rc = npy_read(acts, &data, &nd, sh);
        int64_t n = !rc && nd == 2 ? sh[0] : 0;
        if (max_tokens > 0 && n > max_tokens) n = max_tokens;
        if (!rc) rc = check_array(acts, "tokens", data, nd, sh, D, "d_in", n);
        if (!rc && acts_out) { /* transcoders: rows become (input, target) pairs */
            float *yd = NULL;
            int64_t sy[NPY_MAX_DIMS];
            rc = npy_read(acts_out, &yd, &nd, sy);
            if (!rc) rc = check_array(acts_out, "tokens", yd, nd, sy, Do, "d_out", sy[0] < n ? sy[0] : n);
            if (!rc && sy[0] < n)
                rc = err_set(ERR_SHAPE, "%s: %" PRId64 " rows, fewer than the %" PRId64 " of %s",
                             acts_out, sy[0], n, acts);
            if (!rc) rc = sae_pairs_join(&data, D, yd, Do, n);
            mem_free(yd);
        }
        sae_metrics acc;
        memset(&acc, 0, sizeof acc);
        if (!rc) rc = sae_metrics_init(&acc, Do, S);
        if (!rc && (rc = sae_metrics_eval(&acc, m, data, n, NULL, NULL)))
            rc = err_wrap(rc, "%s on %s", dir, acts);
        if (!rc) {
            sae_metrics_summary s;
            sae_metrics_summarize(&acc, &s);
            char ev[64];
            if (s.ev_defined) snprintf(ev, sizeof ev, "%.4f", s.ev);
            else snprintf(ev, sizeof ev, "n/a (the rows do not vary)");
            printf("reconstruction on %" PRId64 " tokens of %s: mse %.5g  explained variance %s  "
                   "cos %.4f  l2 ratio %.3f  L0 %.2f  dead %.1f%%  dense %.1f%%\n",
                   s.n, acts, s.mse, ev, s.cos, s.l2_ratio, s.l0, 100 * s.dead_frac,
                   100 * s.dense_frac);
        }
        sae_metrics_free(&acc);
        mem_free(data);
    }
    sae_free(m);
    return rc ? cli_fail(cmd) : 0;
}
