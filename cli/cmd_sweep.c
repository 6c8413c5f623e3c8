/* cmd_sweep.c - `saelite sweep`: flags for sweep_run (sweep/sweep.h), a line per run and the
 * summary (frontier winners at a few L0 values, the L0 each family needs for a given EV). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/buf.h"
#include "common/err.h"
#include "sweep/sweep.h"

CLI_COMMAND(sweep, "Train every architecture at a few sparsities on the same activations, evaluate, draw the frontiers",
            "saelite sweep --db FILE --hook NAME --out DIR [--tc-hook IN --tc-hook-out OUT] "
            "[--families a,b] [--ks 8,16,32,64] [--tokens 1000000] [--d-sae 1024]")

/* "a,b,c" into v[<= SWEEP_MAX_SETTINGS] positive numbers. */
static int parse_list(const char *cmd, const char *flag, const char *s, double *v, int *n)
{
    int bad = args_float_list(s, v, SWEEP_MAX_SETTINGS, n) != OK;
    for (int i = 0; !bad && i < *n; i++) bad = !(v[i] > 0);
    return bad ? cli_usage_error(cmd, "%s: expected up to %d positive numbers a,b,... (got '%s')", flag,
                                 SWEEP_MAX_SETTINGS, s)
               : 0;
}

static void notice(const char *msg, void *user)
{
    (void)user;
    fprintf(stderr, "saelite sweep: %s\n", msg);
}

static void on_run(const store_sweep_row *r, int i, int total, int before, void *user)
{
    (void)user;
    printf("[%d/%d] %-26s %-28s L0 %7.2f  EV %.4f  dead %5.1f%%  CE score %.4f  KL score %.4f",
           i + 1, total, r->name, r->family, r->l0, r->ev, 100 * r->dead_frac, r->ce_score,
           r->kl_score);
    if (before) printf("  (done before)\n");
    else printf("  (train %.0f s, eval %.0f s)\n", r->train_seconds, r->eval_seconds);
    fflush(stdout);
}

/* Distinct family labels of the rows, in row order, filtered to SAEs or transcoder families. */
static int labels(const sweep_result *res, int tc, const char **out, int cap)
{
    int n = 0;
    for (size_t i = 0; i < res->n_rows; i++) {
        const store_sweep_row *r = &res->rows[i];
        int is_tc = r->hook_out[0] || !strncmp(r->family, "topk@", 5);
        if (is_tc != tc) continue;
        int k = 0;
        while (k < n && strcmp(out[k], r->family)) k++;
        if (k == n && n < cap) out[n++] = r->family;
    }
    return n;
}

static void winners(const sweep_result *res, int tc, const char *metric, const char *what)
{
    const char *fam[16];
    int nf = labels(res, tc, fam, 16);
    if (!nf) return;
    static const double l0s[] = {8, 16, 32, 64};
    printf("%s at equal L0 (interpolated in log L0 on each family's frontier):\n", what);
    for (size_t j = 0; j < sizeof l0s / sizeof *l0s; j++) {
        printf("  L0 %3.0f:", l0s[j]);
        int best = -1;
        double bv = -INFINITY, v[16];
        for (int f = 0; f < nf; f++) {
            v[f] = sweep_metric_at_l0(res->rows, res->n_rows, fam[f], metric, l0s[j]);
            if (isfinite(v[f]) && v[f] > bv) bv = v[f], best = f;
        }
        if (best < 0) printf(" (no family reaches it)");
        else printf(" best %s %.4f;", fam[best], bv);
        for (int f = 0; f < nf; f++)
            if (f != best && isfinite(v[f])) printf(" %s %.4f", fam[f], v[f]);
        printf("\n");
    }
}

static void l0_needed(const sweep_result *res)
{
    const char *fam[16];
    int nf = labels(res, 0, fam, 16);
    if (!nf) return;
    /* the demo's dictionaries reach 0.95 at their sparsest runs: the column worth reading is
       above it */
    static const double evs[] = {0.95, 0.97, 0.98, 0.99};
    printf("L0 needed for an explained variance of (interpolated on the front; '<L' when the "
           "sparsest run, at L0 L, is past it; '-' when no run reaches it):\n");
    printf("  %-12s", "family");
    for (size_t j = 0; j < sizeof evs / sizeof *evs; j++) printf("  EV %.2f", evs[j]);
    printf("\n");
    for (int f = 0; f < nf; f++) {
        printf("  %-12s", fam[f]);
        for (size_t j = 0; j < sizeof evs / sizeof *evs; j++) {
            int below = 0;
            double l0 = sweep_l0_at_metric(res->rows, res->n_rows, fam[f], "ev", evs[j], &below);
            if (below) {
                char b[32];
                snprintf(b, sizeof b, "<%.1f", l0);
                printf("  %7s", b);
            } else if (isfinite(l0)) printf("  %7.1f", l0);
            else printf("  %7s", "-");
        }
        printf("\n");
    }
}

int cmd_sweep(int argc, char **argv)
{
    const char *cmd = "sweep";
    sweep_opts o;
    sweep_defaults(&o);
    const char *ks_s = NULL, *relu_s = NULL, *gated_s = NULL, *jr_s = NULL;
    int64_t seed = (int64_t)o.seed;
    arg_spec spec[] = {
        {"--db", ARG_STR, &o.db, "store with the activations (rows are added to it)", ARG_REQUIRED},
        {"--hook", ARG_STR, &o.hook, "the SAEs' hook", ARG_REQUIRED},
        {"--tc-hook", ARG_STR, &o.tc_hook, "transcoders: the input hook (e.g. blocks.0.ln2.hook_normalized)"},
        {"--tc-hook-out", ARG_STR, &o.tc_hook_out, "transcoders: the target hook (e.g. blocks.0.hook_mlp_out)"},
        {"--out", ARG_STR, &o.out, "sweep directory: one SAE per run, the frontier PNGs", ARG_REQUIRED},
        {"--model", ARG_STR, &o.model_dir, "model for the CE/KL pass", ARG_DEFAULT("the store's")},
        {"--tokenizer", ARG_STR, &o.tok_dir, "tokenizer directory", ARG_DEFAULT("the model's")},
        {"--families", ARG_STR, &o.families,
         "subset: relu,topk,batchtopk,jumprelu,gated,matryoshka,transcoder,skip_transcoder,target_topk",
         ARG_DEFAULT("all (the transcoder ones with --tc-hook)")},
        {"--ks", ARG_STR, &ks_s, "k values of topk, batchtopk, matryoshka, the transcoders",
         ARG_DEFAULT("8,16,32,64")},
        {"--relu-l1", ARG_STR, &relu_s, "relu L1 coefficients", ARG_DEFAULT("1.25,2.5,5,10")},
        {"--gated-l1", ARG_STR, &gated_s, "gated L1 coefficients", ARG_DEFAULT("2.5,5,10,20")},
        {"--jumprelu-l0", ARG_STR, &jr_s, "jumprelu L0 coefficients", ARG_DEFAULT("0.5,1,2,4")},
        {"--d-sae", ARG_INT, &o.d_sae, "latents of every run (0: --expansion x the run's d_in)", ARG_MIN(0)},
        {"--expansion", ARG_FLOAT, &o.expansion, "with --d-sae 0: d_sae = expansion x the run's d_in", ARG_ABOVE(0)},
        {"--tokens", ARG_I64, &o.tokens, "training tokens per run", ARG_MIN(1)},
        {"--batch", ARG_INT, &o.batch, "tokens per step", ARG_MIN(1)},
        {"--seed", ARG_I64, &seed, "seed of every run", ARG_MIN(0)},
        {"--checkpoint-every", ARG_INT, &o.checkpoint_every, "steps between checkpoints", ARG_MIN(0)},
        {"--val-frac", ARG_FLOAT, &o.val_frac, "held-out fraction of sequences", ARG_ABOVE(0), ARG_BELOW(1)},
        {"--eval-tokens", ARG_I64, &o.eval_tokens, "held-out tokens for EV / L0 / dead", ARG_MIN(1)},
        {"--ce-seqs", ARG_INT, &o.ce_seqs, "held-out sequences for the CE / KL scores", ARG_MIN(1)},
        {"--max-seqs", ARG_INT, &o.max_seqs, "held-out sequences analysed per run (0: all)", ARG_MIN(0)},
        {"--max-runs", ARG_INT, &o.max_runs, "train at most N runs this call (0: all)", ARG_MIN(0)},
        {"--max-steps", ARG_I64, &o.max_steps, "stop the first run after N steps, as a kill would (0: off)", ARG_MIN(0)},
        {"--no-png", ARG_FLAG, &o.no_png, "do not draw the frontiers"},
        {"--eval", ARG_STR, &o.eval_suites,
         "`saelite eval` suites per SAE (sparse_probing,absorption,scr,tpp; none: only the core metrics)",
         ARG_DEFAULT("sparse_probing,absorption")},
        {"--eval-seqs-per-genre", ARG_INT, &o.eval_seqs_per_genre, "the suites' sequences per genre",
         ARG_MIN(1)},
        {NULL, 0, NULL, NULL},
    };
    int np = 0;
    int prc = args_parse(cmd, argc, argv, spec, NULL, 0, &np);
    if (prc) return prc < 0 ? 0 : prc;
    double v[SWEEP_MAX_SETTINGS];
    int n;
    if (ks_s) {
        if ((prc = parse_list(cmd, "--ks", ks_s, v, &n))) return prc;
        for (int i = 0; i < n; i++) {
            if (v[i] != floor(v[i]) || v[i] > 1 << 20) return cli_usage_error(cmd, "--ks: whole numbers");
            o.ks[i] = (int)v[i];
        }
        o.n_ks = n;
    }
    if (relu_s && (prc = parse_list(cmd, "--relu-l1", relu_s, o.relu_l1, &o.n_relu_l1))) return prc;
    if (gated_s && (prc = parse_list(cmd, "--gated-l1", gated_s, o.gated_l1, &o.n_gated_l1))) return prc;
    if (jr_s && (prc = parse_list(cmd, "--jumprelu-l0", jr_s, o.jumprelu_l1, &o.n_jumprelu_l1))) return prc;
    if (!!o.tc_hook != !!o.tc_hook_out) return cli_usage_error(cmd, "--tc-hook and --tc-hook-out go together");
    /* --eval '' ran as --eval none (eval --suite '' is refused) */
    if (o.eval_suites && !o.eval_suites[0])
        return cli_usage_error(cmd, "--eval: no suite given (none: only the core metrics)");
    if (o.eval_suites && !strcmp(o.eval_suites, "none")) o.eval_suites = NULL;
    o.seed = (uint64_t)seed;
    /* a setting given twice is a usage error, exit 2 like the flags' own (it was 1) */
    if (sweep_check_opts(&o)) return cli_usage_error(cmd, "%s", err_msg());
    o.on_run = on_run;
    o.notice = notice;
    cli_catch_signals();
    o.stop = &cli_stop_flag;
    sweep_result res;
    if (sweep_run(&o, &res)) {
        sweep_result_free(&res);
        return cli_fail(cmd);
    }
    printf("sweep %s: %d runs (%d done before, %d trained now) in %.0f s\n", o.out, res.n_runs,
           res.done_before, res.trained, res.seconds);
    if (res.lost)
        printf("%d run%s recorded done no longer had that SAE in %s directory (removed or changed "
               "since) and %s trained again\n", res.lost, res.lost == 1 ? "" : "s",
               res.lost == 1 ? "its" : "their", res.lost == 1 ? "was" : "were");
    if (res.reevaluated)
        printf("%d runs done before were evaluated again: another eval had replaced their suites' "
               "rows with another sample's\n", res.reevaluated);
    if (res.unlocked)
        printf("note: %s's filesystem has no flock: this sweep held no .sweep.lock, so nothing "
               "kept another sweep out of the directory\n", o.out);
    if (res.n_other)
        printf("%d run%s in %s from another grid (other --families or values) %s not drawn or "
               "summarised here\n", res.n_other, res.n_other == 1 ? "" : "s", o.out,
               res.n_other == 1 ? "is" : "are");
    if (!res.finished) {
        if (res.stopped_in[0])
            printf("stopped in %s at step %" PRId64 " of %" PRId64 "; ", res.stopped_in,
                   res.stopped_step, res.stopped_total);
        printf("%d runs left: rerun the same command to continue\n",
               res.n_runs - res.done_before - res.trained);
        sweep_result_free(&res);
        return 0;
    }
    winners(&res, 0, "ev", "explained variance");
    winners(&res, 0, "ce_score", "CE loss score");
    if (o.tc_hook_out) {
        char what[320];
        snprintf(what, sizeof what, "transcoders: CE loss score with %s replaced", o.tc_hook_out);
        winners(&res, 1, "ce_score", what);
    }
    l0_needed(&res);
    for (int i = 0; i < res.n_png; i++) printf("wrote %s\n", res.png[i]);
    if (!res.have_eval)
        printf("no eval_summary view in %s: the sparse-probing and absorption frontiers are not "
               "drawn (%s)\n", o.db, o.eval_suites ? "the database has neither POS tags nor two genres"
                                                   : "--eval none");
    sweep_result_free(&res);
    return 0;
}
