/* cmd_sae_eval.c - `saelite sae-eval`: ground-truth recovery and reconstruction metrics. */
#include <inttypes.h>
#include <stdio.h>

#include "analysis/eval.h"
#include "cli/cli.h"

CLI_COMMAND(sae_eval, "Evaluate an SAE: ground-truth MMCS, absorption against a known hierarchy, reconstruction",
            "saelite sae-eval --sae DIR [--ground-truth TRUE.npy] [--synth GEN.json [--samples N]] "
            "[--npy ACTS.npy [--npy-out TARGETS.npy]] [--max-tokens N]")

/* What finished of the run (r->done), in the order it ran: on a failure the lines of the parts
 * before it come out before the error, as when each was printed as it finished. */
static void print_result(const eval_sae_opts *o, const eval_sae_result *r)
{
    const sae_config *cfg = &r->sae;
    if (!(r->done & EVAL_SAE_LOADED)) return;
    printf("sae %s: %s d_in %d d_sae %d", o->sae, sae_arch_name(cfg->arch), cfg->d_in, cfg->d_sae);
    if (r->trained.arch != cfg->arch) {
        printf(" (trained as %s", sae_arch_name(r->trained.arch));
        if (r->trained.k) printf(" k %d", r->trained.k);
        printf(")");
    }
    if (cfg->transcoder)
        printf(" %s d_out %d",
               cfg->transcoder == SAE_SKIP_TRANSCODER ? "skip_transcoder" : "transcoder",
               sae_out_dim(cfg));
    if (cfg->k) printf(" k %d", cfg->k);
    printf("\n");
    if (r->done & EVAL_SAE_TRUTH)
        printf("ground truth %s: %" PRId64 " features, MMCS %.4f, recovered (cos > %.2f) %.1f%%\n",
               o->truth, r->truth_features, r->truth_mmcs, o->thr, 100 * r->truth_recovered);
    if (r->done & EVAL_SAE_GENERATOR) {
        const synth_config *c = &r->gen;
        printf("generator %s: %d features of d %d, MMCS %.4f, recovered (cos > %.2f) %.1f%%\n",
               o->synth, c->n_features, c->d, r->gen_mmcs, o->thr, 100 * r->gen_recovered);
        if (c->parents < 1 || c->children < 1)
            printf("absorption: the generator has no hierarchy (synth --parents/--children)\n");
    }
    if (r->done & EVAL_SAE_ABSORPTION) {
        const synth_config *c = &r->gen;
        const sae_absorption_result *ex = &r->abs_exact;
        const eval_abs_class *mean = &r->abs_saebench;
        int n = r->abs_samples;
        printf("absorption, %d parents x %d children (child_p %g), %d training and %d fresh test samples:\n",
               c->parents, c->children, c->child_p, n, n);
        printf("  generator (exact): absorption %.4f (the parent's latent silent), partial %.4f (the share "
               "of the parent it does not carry); parent latents' decoder cosine %.3f, carried without a "
               "child %.3f\n", ex->absorption, ex->partial, ex->parent_cos, ex->alone_carried);
        printf("  SAEBench: full-absorption rate %.4f (%+.4f), absorption fraction %.4f, without its 40%% "
               "gate %.4f (%+.4f); %d of %d parents with GT-probe F1 > %.1f, %d split feature(s)\n",
               mean->full_rate, mean->full_rate - ex->absorption, mean->mean_frac,
               mean->mean_frac_nogate, mean->mean_frac_nogate - ex->partial, mean->included,
               c->parents, r->abs_params.min_gt_f1, mean->n_split);
    }
    if (r->done & EVAL_SAE_RECON) {
        const sae_metrics_summary *s = &r->recon;
        char ev[64];
        if (s->ev_defined) snprintf(ev, sizeof ev, "%.4f", s->ev);
        else snprintf(ev, sizeof ev, "n/a (the rows do not vary)");
        printf("reconstruction on %" PRId64 " tokens of %s: mse %.5g  explained variance %s  "
               "cos %.4f  l2 ratio %.3f  L0 %.2f  dead %.1f%%  dense %.1f%%\n",
               s->n, o->acts, s->mse, ev, s->cos, s->l2_ratio, s->l0, 100 * s->dead_frac,
               100 * s->dense_frac);
        for (int g = 0; g < s->n_prefix; g++) { /* Matryoshka: the first m latents alone */
            if (s->ev_defined) snprintf(ev, sizeof ev, "%.4f", s->prefix_ev[g]);
            printf("  prefix %d of %d latents: mse %.5g  explained variance %s  L0 %.2f\n",
                   s->prefix_end[g], cfg->d_sae, s->prefix_mse[g], ev, s->prefix_l0[g]);
        }
    }
}

int cmd_sae_eval(int argc, char **argv)
{
    const char *cmd = "sae-eval";
    eval_sae_opts o;
    eval_sae_defaults(&o);
    arg_spec spec[] = {
        {"--sae", ARG_STR, &o.sae, "SAE directory (SAELens layout)", ARG_REQUIRED},
        {"--ground-truth", ARG_STR, &o.truth, "true directions [features, d_in] .npy"},
        {"--synth", ARG_STR, &o.synth,
         "generator spec (`saelite synth --spec`): MMCS against it, and absorption if it has a hierarchy"},
        {"--samples", ARG_INT, &o.synth_samples, "--synth: training and test samples for the absorption probes",
         ARG_RANGE(64, 1 << 20)},
        {"--threshold", ARG_FLOAT, &o.thr, "cosine for 'recovered'", ARG_RANGE(-1, 1)},
        {"--npy", ARG_STR, &o.acts, "activations [tokens, d_in] .npy for reconstruction metrics"},
        {"--npy-out", ARG_STR, &o.acts_out, "transcoders: the target activations [tokens, d_out] of the --npy rows"},
        {"--max-tokens", ARG_I64, &o.max_tokens, "use at most N rows of --npy (0: all)", ARG_MIN(0)},
        {NULL, 0, NULL, NULL},
    };
    int np = 0;
    int prc = args_parse(cmd, argc, argv, spec, NULL, 0, &np);
    if (prc) return prc < 0 ? 0 : prc;
    if (!o.truth && !o.acts && !o.synth)
        return cli_usage_error(cmd, "give --ground-truth, --synth and/or --npy");
    /* o.stop stays NULL: the command catches no signal (Ctrl-C ends it where it is) */
    eval_sae_result r;
    int rc = eval_sae_run(&o, &r);
    /* the flag combinations only the SAE's configuration can check: usage errors */
    if (r.misuse == EVAL_SAE_NEEDS_TARGETS)
        return cli_usage_error(cmd, "a transcoder's --npy needs --npy-out (its targets)");
    if (r.misuse == EVAL_SAE_TARGETS_UNUSED)
        return cli_usage_error(cmd, "--npy-out is for transcoders");
    print_result(&o, &r);
    return rc ? cli_fail(cmd) : 0;
}
