/* cmd_analyze.c - `saelite analyze`: flags for ana_run (analysis/ana_run.h) and its summary. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/ana_run.h"
#include "cli/cli.h"
#include "common/dist.h"
#include "common/err.h"
#include "model/ops.h"

CLI_COMMAND(analyze, "Evaluate an SAE or the neuron basis: metrics, feature tables, POS alignment",
            "saelite analyze --db FILE (--sae DIR [--neurons] | --neurons) [--hook NAME] [--all] "
            "[--all-acts [--force]] [--model DIR | --no-model] [--top N] [--ce-seqs N] "
            "[--effects [--effects-ctx N] [--effects-seqs N]]")

static void notice(const char *msg, void *user)
{
    (void)user;
    fprintf(stderr, "saelite analyze: %s\n", msg);
}

static void print_dict(const ana_dict_result *r, const char *hook, double cos_threshold)
{
    printf("analyze: %s %s at %s: %zu sequences, %lld tokens, %d features in %.1f s (dict id %lld)\n",
           r->kind, r->name, hook, r->n_seqs, (long long)r->n_tokens, r->d_sae, r->seconds,
           (long long)r->dict_id);
    if (r->resumed_seqs)
        printf("  (continued from a checkpoint that held %zu of the sequences)\n", r->resumed_seqs);
    /* a --max-seqs or --val-frac run has the default run's key (dictionary, hook, split) */
    if (r->replaced_seqs >= 0 && r->replaced_seqs != (int64_t)r->n_seqs)
        printf("  (replaced the earlier analysis of %lld sequences under the same key)\n",
               (long long)r->replaced_seqs);
    char ev[48] = "n/a (the rows do not vary)";
    /* %.4f of -9.6e59 is 60 digits: cut to 47, it printed a number 1e14 too small (an audit) */
    if (r->rec.ev_defined) snprintf(ev, sizeof ev, fabs(r->rec.ev) < 1e6 ? "%.4f" : "%.4g", r->rec.ev);
    printf("  l0 %.2f  explained variance %s  mse %.6g  dead %d  dense %d\n", r->rec.l0, ev,
           r->rec.mse, r->dead, r->dense);
    for (int g = 0; g < r->rec.n_prefix; g++) { /* Matryoshka: the first m latents alone */
        double pev = r->rec.prefix_ev[g];
        if (r->rec.ev_defined) snprintf(ev, sizeof ev, fabs(pev) < 1e6 ? "%.4f" : "%.4g", pev);
        printf("  prefix %d of %d: l0 %.2f  explained variance %s  mse %.6g\n",
               r->rec.prefix_end[g], r->d_sae, r->rec.prefix_l0[g], ev, r->rec.prefix_mse[g]);
    }
    if (r->have_downstream)
        printf("  CE clean %.4f  sae %.4f  zero %.4f  sae+error %.4f  ce_loss_score %.4f  "
               "KL sae %.4f  kl_score %.4f\n", r->ds.ce_clean, r->ds.ce_sae, r->ds.ce_zero,
               r->ds.ce_err, r->ds.ce_score, r->ds.kl_sae, r->ds.kl_score);
    /* the SAE plus its error term must give the clean model back: when it does not (a
       reconstruction beyond float's range cancels x in xhat + (x - xhat)), the scores measure
       the overflow, not the SAE (an audit: W_dec x 1e30 stored ce_loss_score -0.70, exit 0) */
    if (r->have_downstream && !(fabs(r->ds.ce_err - r->ds.ce_clean) <= 1e-3))
        fprintf(stderr, "saelite analyze: warning: %s: the SAE plus its error term gives CE %.4f, not "
                "the clean %.4f: its reconstruction loses x in float arithmetic, so ce_loss_score and "
                "kl_score do not measure it\n", r->name, r->ds.ce_err, r->ds.ce_clean);
    if (isnan(r->geom_mean)) /* one feature: no pair to compare (stored as NULL) */
        printf("  geometry: none (a single feature has no pair)\n");
    else
        printf("  geometry: mean max|cos| %.4f (random %.4f), %d features over %.2f (random %d)\n",
               r->geom_mean, r->geom_random_mean, r->geom_over, cos_threshold, r->geom_random_over);
    if (r->pos_n) printf("  POS: mean best-tag precision %.4f over %d features\n", r->pos_mean, r->pos_n);
    printf("  time: pass %.1f s, downstream %.1f s, geometry %.1f s, logit effects and writing %.1f s\n",
           r->t_pass, r->t_downstream, r->t_geometry, r->t_write);
    if (r->have_effects) {
        char corr[96] = "no direct path from this hook (rank_corr NULL)";
        if (!isnan(r->effects_corr_mean))
            snprintf(corr, sizeof corr, "rank correlation with the direct path: mean %.3f, median %.3f",
                     r->effects_corr_mean, r->effects_corr_median);
        printf("  effects: %d features, %lld ablations in %lld forward passes (%s) in %.1f s; %s\n",
               r->effects_features, (long long)r->effects_contexts, (long long)r->effects_forwards,
               r->effects_local ? "packed across positions" : "one ablation per batch row",
               r->t_effects, corr);
    }
    if (r->logit_skipped)
        printf("  logit effects skipped: %s is not on a linear direct path to the logits\n", hook);
}

int cmd_analyze(int argc, char **argv)
{
    ana_run_opts o;
    ana_run_defaults(&o);
    const char *prec = "fp32";
    /* the effects' sizes start as "not given" (INT_MIN), so that one given without --effects is
       refused (it was accepted and did nothing); --help prints the real defaults */
    int ctx_def = o.effects_ctx, seqs_def = o.effects_seqs;
    char ctx_txt[16], seqs_txt[16];
    snprintf(ctx_txt, sizeof ctx_txt, "%d", ctx_def);
    snprintf(seqs_txt, sizeof seqs_txt, "%d", seqs_def);
    o.effects_ctx = o.effects_seqs = INT_MIN;
    arg_spec spec[] = {
        {"--db", ARG_STR, &o.db, "database with stored activations (written: analysis tables)",
         ARG_REQUIRED},
        {"--sae", ARG_STR, &o.sae_dir, "SAE directory (SAELens layout), or its id in the database's SAE registry"},
        {"--neurons", ARG_FLAG, &o.neurons, "also (or only) analyse the hook's neuron basis"},
        {"--hook", ARG_STR, &o.hook, "hook (needed for --neurons alone, or an SAE without hook_name)"},
        {"--all", ARG_FLAG, &o.all, "use every stored sequence, not the validation split"},
        {"--val-frac", ARG_FLOAT, &o.val_frac, "validation fraction of the split: sae-train's held-out sequences at the same value "
         "(a larger one includes sequences it trained on)", ARG_ABOVE(0),
         ARG_BELOW(1)},
        {"--keep-bos", ARG_FLAG, &o.keep_bos, "count the prepended <|endoftext|> positions in the statistics"},
        {"--all-acts", ARG_FLAG, &o.all_acts, "store every non-zero activation (size printed first; refused "
         "where the database's filesystem has too little room for them)"},
        {"--force", ARG_FLAG, &o.force, "write --all-acts's rows also where the free space looks too small"},
        {"--model", ARG_STR, &o.model_dir, "model directory",
         ARG_DEFAULT("the one the database recorded")},
        {"--tokenizer", ARG_STR, &o.tok_dir, "tokenizer directory for token texts",
         ARG_DEFAULT("the model's")},
        {"--no-model", ARG_FLAG, &o.no_model, "skip the downstream loss metrics and logit effects"},
        {"--top", ARG_INT, &o.top_n, "top activations kept per feature", ARG_MIN(1)},
        {"--quantiles", ARG_INT, &o.n_intervals, "quantile intervals sampled per feature", ARG_MIN(1)},
        {"--per-quantile", ARG_INT, &o.per_interval, "samples per quantile interval", ARG_MIN(1)},
        {"--bins", ARG_INT, &o.nbins, "log-spaced activation histogram bins", ARG_MIN(1)},
        {"--logit-k", ARG_INT, &o.logit_k, "top positive/negative logit tokens kept", ARG_MIN(1)},
        {"--ce-seqs", ARG_INT, &o.ce_seqs, "sequences for the downstream loss", ARG_MIN(1)},
        {"--max-seqs", ARG_INT, &o.max_seqs, "analyse at most N sequences (0: all)", ARG_MIN(0)},
        {"--effects", ARG_FLAG, &o.effects,
         "measure each feature's ablation effect where it fires (KL, loss, tokens; needs the model)"},
        {"--effects-ctx", ARG_INT, &o.effects_ctx, "contexts per feature for --effects (0: all)",
         ARG_MIN(0), ARG_DEFAULT(ctx_txt)},
        {"--effects-seqs", ARG_INT, &o.effects_seqs, "sequences for --effects (0: all analysed)",
         ARG_MIN(0), ARG_DEFAULT(seqs_txt)},
        {"--cos-threshold", ARG_FLOAT, &o.cos_threshold, "geometry: count max|cos| above this"},
        {"--checkpoint-secs", ARG_FLOAT, &o.ckpt_secs, "save the pass's state this often beside "
         "the database; the same command run again after a kill continues from it (0: never)",
         ARG_MIN(0)},
        {"--precision", ARG_STR, &prec,
         "the model's matmuls (downstream loss, effects): fp32, bf16 (oneDNN; needs AVX512-BF16 "
         "or AMX), auto", ARG_CHOICES("fp32|bf16|auto")},
        {NULL, 0, NULL, NULL},
    };
    const char *pos[1];
    int npos = 0;
    int rc = args_parse("analyze", argc, argv, spec, pos, 0, &npos);
    if (rc) return rc < 0 ? 0 : rc;
    if (!o.sae_dir && !o.neurons) return cli_usage_error("analyze", "give --sae DIR and/or --neurons");
    if (!o.sae_dir && !o.hook) return cli_usage_error("analyze", "--neurons without --sae needs --hook NAME");
    if (o.effects && (!o.sae_dir || o.no_model))
        return cli_usage_error("analyze", "--effects needs --sae and the model (not --no-model)");
    /* flags that only shape another one's work: alone they did nothing, silently */
    if (!o.effects && (o.effects_ctx != INT_MIN || o.effects_seqs != INT_MIN))
        return cli_usage_error("analyze", "%s applies to --effects only",
                               o.effects_ctx != INT_MIN ? "--effects-ctx" : "--effects-seqs");
    if (o.force && !o.all_acts) return cli_usage_error("analyze", "--force applies to --all-acts only");
    if (o.effects_ctx == INT_MIN) o.effects_ctx = ctx_def;
    if (o.effects_seqs == INT_MIN) o.effects_seqs = seqs_def;
    o.precision = !strcmp(prec, "bf16") ? OP_PRECISION_BF16
                  : !strcmp(prec, "auto") ? OP_PRECISION_AUTO
                                          : OP_PRECISION_FP32;
    cli_catch_signals();
    cli_term_hint("each dictionary is written in one transaction: the database holds the ones "
                  "finished before; run the same command again (it continues the pass from its "
                  "last checkpoint, on the same world size)");
    o.stop = &cli_stop_flag;
    o.notice = notice;

    ana_run_result res;
    rc = ana_run(&o, &res);
    /* dictionaries finished before a failure are in the database: say so (under mpirun rank 0
       alone, which wrote them) */
    for (int i = 0; i < res.n_dicts && dist_is_root(); i++) {
        print_dict(&res.dict[i], res.hook, o.cos_threshold);
        if (res.dict[i].have_downstream && o.precision != OP_PRECISION_FP32)
            printf("  model matmuls: %s\n", res.matmuls);
    }
    if (res.n_dicts && res.unfinished_run >= 0 && dist_is_root())
        printf("note: %s's extract (run %lld) is unfinished: these results use the %lld tokens it "
               "stored so far; rerun that extract to complete the hook\n", res.hook,
               (long long)res.unfinished_run, (long long)res.hook_tokens);
    return rc ? cli_fail("analyze") : 0;
}
