/* cmd_sae_train.c - `saelite sae-train`: flags for sae_train_run (sae/sae_run.h) and its
 * summary. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/dist.h"
#include "common/err.h"
#include "sae/sae_run.h"

CLI_COMMAND(sae_train, "Train a sparse autoencoder (relu, topk, batchtopk, jumprelu, gated, matryoshka) or a (skip) transcoder",
            "saelite sae-train (--db FILE --hook NAME | --npy ACTS.npy | --synth | --synth-spec GEN.json) --out DIR [--arch topk] [--k 32] "
            "[--expansion 8 | --d-sae N] [--tokens N] [--batch 4096] [--lr X] [--resume | --force]")

static void print_result(const sae_run_opts *o, const sae_run_result *r)
{
    if (o->max_norm_ratio > 0)
        printf("dropped %" PRId64 " training tokens above %.2f x the mean token norm\n", r->dropped,
               o->max_norm_ratio);
    double secs = r->seconds;
    if (o->train.transcoder)
        printf("sae-train: %s (%s) %s -> %s, d_in %d d_out %d d_sae %d\n",
               o->train.transcoder == SAE_SKIP_TRANSCODER ? "skip_transcoder" : "transcoder",
               sae_arch_name(r->arch), o->npy_out ? o->npy : o->hook, o->npy_out ? o->npy_out : o->hook_out,
               r->d_in, r->d_out, r->d_sae);
    printf("sae-train: %s d_in %d d_sae %d, %" PRId64 " steps in %.1fs (%.0f tok/s, reading %.0f%%, "
           "checkpoints %.2fs) -> %s\n",
           sae_arch_name(r->arch), r->d_in, r->d_sae, r->steps, secs,
           secs > 0 ? r->steps * (double)r->batch / secs : 0, secs > 0 ? 100 * r->read_seconds / secs : 0,
           r->ckpt_seconds, o->out);
    /* the line above counts this call's steps only (a scale audit: a resumed run said nothing
       of where it had continued from) */
    if (o->resume)
        printf("resumed at step %" PRId64 " of %" PRId64 " (the checkpoint's); the whole run's "
               "training loops took %.1fs\n", r->step - r->steps, r->total_steps, r->total_seconds);
    const sae_metrics_summary *s = &r->eval;
    if (r->eval_tokens > 0)
        printf("eval (%" PRId64 " held-out tokens): mse %.5g  explained variance %.4f  cos %.4f  "
               "l2 ratio %.3f  L0 %.2f  dead %.1f%%  dense %.1f%%\n",
               s->n, s->mse, s->ev, s->cos, s->l2_ratio, s->l0, 100 * s->dead_frac,
               100 * s->dense_frac);
    for (int g = 0; r->eval_tokens > 0 && g < s->n_prefix; g++) /* Matryoshka: first m alone */
        printf("  prefix %d of %d latents: mse %.5g  explained variance %.4f  L0 %.2f\n",
               s->prefix_end[g], r->d_sae, s->prefix_mse[g], s->prefix_ev[g], s->prefix_l0[g]);
    if (o->precision != SAE_PRECISION_FP32) printf("encoder GEMM: %s\n", r->engine);
    if (r->precision_was[0])
        printf("note: the checkpoint's steps ran in %s, this call's in %s: cfg.json records "
               "precision \"mixed\" (the bits of neither an fp32 nor a bf16 run)\n", r->precision_was,
               strcmp(r->precision_was, "bf16") ? "bf16" : "fp32");
    if (r->mmcs >= 0) printf("ground truth: MMCS %.4f, recovered (cos > 0.9) %.1f%%\n", r->mmcs, 100 * r->recovered);
    if (r->grad_clip > 0)
        printf("gradient norm clipped to %g in %" PRId64 " of %" PRId64 " steps\n", r->grad_clip,
               r->clipped, r->steps);
    if (r->sae_id >= 0) printf("registered in %s as SAE id %" PRId64 "\n", o->db, r->sae_id);
    if (r->unfinished_run >= 0)
        printf("note: %s's extract (run %" PRId64 ") is unfinished: this SAE trained on what it had "
               "stored (%" PRId64 " tokens in the training split); rerun that extract to complete "
               "the hook\n", o->hook,
               r->unfinished_run, r->hook_tokens);
    int64_t trained = r->total_steps * r->batch;
    if (r->tokens_asked != trained)
        printf("note: --tokens %" PRId64 " is not a multiple of --batch %d: %" PRId64 " steps, %" PRId64
               " tokens trained\n", r->tokens_asked, r->batch, r->total_steps, trained);
    if (r->train_rows > 0 && trained > r->train_rows)
        printf("note: %" PRId64 " tokens trained are %.2f passes over the training data's %" PRId64
               " tokens: every token was seen about that many times (each pass in a new order)\n",
               trained, (double)trained / (double)r->train_rows, r->train_rows);
    /* at the last step a latent has gone at most trained - batch tokens without firing */
    if (r->auxk && r->dead_window > trained - r->batch)
        printf("note: the dead window (%" PRId64 " tokens) is longer than the run lets a latent go "
               "unfired (%" PRId64 " tokens before its last step): no latent could count as dead, so "
               "AuxK never acted and the log's dead_frac is 0 (set --dead-window)\n", r->dead_window,
               trained - r->batch);
    if (r->unlocked)
        printf("note: %s's filesystem has no flock: this run held no .sae-train.lock, so nothing "
               "kept another sae-train out of the directory\n", o->out);
    if (!r->finished)
        printf("stopped at step %" PRId64 " of %" PRId64 "; continue with --resume\n", r->step,
               r->total_steps);
}

/* Flags of another architecture are accepted (a loop passes --k to every one, as the tests do)
 * but said to do nothing: --arch jumprelu --k 32 trained at whatever L0 its --l1 gave, without a
 * word (a helper's audit). Which architecture reads which flag is sae/'s. */
static void note_unused(int argc, char **argv, sae_arch a, const char *arch_s, int tcod)
{
    static const char *const flags[] = {"--k", "--k-aux", "--aux-coef", "--l1",
                                        "--jr-bandwidth", "--jr-threshold", "--jr-lr-mult"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        const char *owners = sae_train_flag_owners(a, tcod, flags[i]);
        const char *by = tcod ? "--activation" : "--arch";
        if (owners && args_given(argc, argv, flags[i]))
            printf("note: %s is for %s; %s %s%s ignores it%s\n", flags[i], owners, by, arch_s,
                   args_given(argc, argv, by) ? "" : " (the default)",
                   !strcmp(flags[i], "--k")    ? " (its sparsity follows --l1)"
                   : !strcmp(flags[i], "--l1") ? " (its sparsity is --k)"
                                               : "");
    }
}

int cmd_sae_train(int argc, char **argv)
{
    const char *cmd = "sae-train";
    sae_run_opts o;
    sae_run_defaults(&o);
    sae_train_config *c = &o.train;
    const char *arch_s = "topk", *bdec_s = NULL, *widths_s = NULL, *levels_s = NULL, *act_s = NULL, *prec_s = "fp32";
    /* flags write into the trainer's and the generator's settings, whose defaults are the
       help's; seeds go through int64 locals (the fields are uint64), and NaN marks lr, clip and
       beta1 as not given */
    int no_norm = 0;
    double lr = NAN, clip = NAN, beta1 = NAN;
    int64_t seed = (int64_t)c->seed, syn_seed = (int64_t)o.synth_cfg.seed;
    const char *syn_spec = NULL;
    o.hook = "";
    o.model_name = "";
    arg_spec spec[] = {
        {"--db", ARG_STR, &o.db, "store with the activations of --hook"},
        {"--shuffle-buffer", ARG_I64, &o.shuffle_tokens, "store: token shuffle buffer", ARG_MIN(1)},
        {"--keep-bos", ARG_FLAG, &o.keep_bos, "store: keep BOS positions (dropped by default)"},
        {"--max-norm-ratio", ARG_FLOAT, &o.max_norm_ratio,
         "store: drop tokens with norm > R x the mean token norm (0: off)", ARG_MIN(0)},
        {"--npy", ARG_STR, &o.npy, "activations [tokens, d_in] (.npy: float32/16/64, or int32/64 exact in float32)"},
        {"--npy-out", ARG_STR, &o.npy_out, "transcoders: the targets [tokens, d_out] of the --npy rows"},
        {"--synth", ARG_FLAG, &o.synth, "train on generated synthetic superposition data"},
        {"--synth-d", ARG_INT, &o.synth_cfg.d, "synthetic: dimension", ARG_MIN(1)},
        {"--synth-features", ARG_INT, &o.synth_cfg.n_features, "synthetic: true features", ARG_MIN(1)},
        {"--synth-active", ARG_FLOAT, &o.synth_cfg.active, "synthetic: mean active features", ARG_ABOVE(0)},
        {"--synth-seed", ARG_I64, &syn_seed, "synthetic: generator seed"},
        {"--synth-spec", ARG_STR, &syn_spec,
         "train on the generator `saelite synth --spec` wrote (hierarchy included; replaces --synth-*)"},
        {"--truth", ARG_STR, &o.truth, "ground-truth directions [F, d_in] .npy: report MMCS"},
        {"--truth-out", ARG_STR, &o.truth_out, "synthetic: write the true directions here"},
        {"--out", ARG_STR, &o.out, "output directory (SAELens layout)", ARG_REQUIRED},
        {"--arch", ARG_STR, &arch_s, "SAE architecture", ARG_CHOICES("relu|topk|batchtopk|jumprelu|gated|matryoshka|transcoder|skip_transcoder")},
        {"--activation", ARG_STR, &act_s, "transcoders: the activation",
         ARG_CHOICES("relu|topk|batchtopk|jumprelu"), ARG_DEFAULT("topk")},
        {"--hook-out", ARG_STR, &o.hook_out, "transcoders: the target hook in --db (stored by the same extract as --hook)"},
        {"--widths", ARG_STR, &widths_s, "matryoshka: nested prefix widths W1,W2,... (d_sae appended)",
         ARG_DEFAULT("d_sae/8,d_sae/4,d_sae/2")},
        {"--levels", ARG_STR, &levels_s,
         "matryoshka: an inner level decodes the full-width code truncated to its prefix (shared, "
         "the paper's) or a BatchTopK of its own inside the prefix (own, SAELens' earlier version)",
         ARG_CHOICES("shared|own"), ARG_DEFAULT("shared")},
        {"--expansion", ARG_FLOAT, &o.expansion, "d_sae = expansion * d_in", ARG_ABOVE(0)},
        {"--d-sae", ARG_INT, &c->d_sae, "latents (overrides --expansion)", ARG_MIN(0),
         ARG_DEFAULT("expansion x d_in")},
        {"--k", ARG_INT, &c->k, "active latents per token, topk/batchtopk", ARG_MIN(1)},
        {"--k-aux", ARG_INT, &c->k_aux, "AuxK latents (--aux-coef 0 turns AuxK off)", ARG_MIN(1),
         ARG_DEFAULT("d_in/2")},
        {"--aux-coef", ARG_FLOAT, &c->aux_coef, "AuxK coefficient", ARG_MIN(0)},
        /* > 0: the trainer reads 0 as "the architecture's default", and a given 0 trained with
           5 (an audit) */
        {"--l1", ARG_FLOAT, &c->l1, "relu/gated: L1 coefficient; jumprelu: L0 coefficient", ARG_ABOVE(0),
         ARG_DEFAULT("5 for relu and gated, 1 for jumprelu")},
        {"--jr-bandwidth", ARG_FLOAT, &c->jr_bandwidth, "jumprelu: STE kernel width, normalised units",
         ARG_ABOVE(0)},
        {"--jr-threshold", ARG_FLOAT, &c->jr_init_threshold, "jumprelu: initial threshold, normalised units",
         ARG_ABOVE(0)},
        {"--jr-lr-mult", ARG_FLOAT, &c->jr_lr_mult, "jumprelu: learning-rate multiplier of the thresholds "
         "(0 keeps them at --jr-threshold)", ARG_MIN(0)},
        {"--lr", ARG_FLOAT, &lr, "learning rate", ARG_ABOVE(0),
         ARG_DEFAULT("3.75e-4 / sqrt(d_sae / 16384); relu at least 1.5e-3")},
        {"--grad-clip", ARG_FLOAT, &clip, "clip the global gradient norm to this (0: off)",
         ARG_MIN(0), ARG_DEFAULT("1")},
        {"--adam-beta1", ARG_FLOAT, &beta1, "Adam's first-moment decay", ARG_MIN(0), ARG_BELOW(1),
         ARG_DEFAULT("0 for jumprelu and gated, 0.9 for the others")},
        {"--batch", ARG_INT, &c->batch, "tokens per step", ARG_MIN(1)},
        {"--tokens", ARG_I64, &c->total_tokens, "training tokens", ARG_MIN(1)},
        {"--seed", ARG_I64, &seed, "seed for init and data order", ARG_MIN(0)},
        {"--bdec-init", ARG_STR, &bdec_s, "decoder bias initialisation", ARG_CHOICES("median|mean|zero"),
         ARG_DEFAULT("zero for relu, jumprelu and gated, median for the others")},
        {"--no-normalize", ARG_FLAG, &no_norm, "do not scale inputs to mean norm sqrt(d_in)"},
        {"--dead-window", ARG_I64, &c->dead_window, "tokens without firing = dead", ARG_MIN(0),
         ARG_DEFAULT("auto")},
        {"--val-frac", ARG_FLOAT, &o.val_frac, "held-out fraction of sequences / --npy rows",
         ARG_MIN(0), ARG_BELOW(1)},
        {"--eval-tokens", ARG_I64, &o.eval_tokens, "tokens for the final evaluation", ARG_MIN(0)},
        {"--checkpoint-every", ARG_INT, &o.checkpoint_every, "steps between checkpoints (0: none by steps; always at the end, on a stop and by --checkpoint-secs)",
         ARG_MIN(0)},
        {"--checkpoint-secs", ARG_FLOAT, &o.checkpoint_secs, "also checkpoint once this many seconds passed "
         "since the last one (0: by steps only)", ARG_MIN(0)},
        {"--log-every", ARG_INT, &o.log_every, "steps between log rows", ARG_MIN(0),
         ARG_DEFAULT("about 100 rows in all")},
        {"--max-steps", ARG_I64, &o.max_steps, "stop (with a checkpoint) after N steps this run (0: no limit)",
         ARG_MIN(0)},
        {"--micro-batches", ARG_INT, &o.micro_batches,
         "leaves per step summed in a fixed tree; `mpirun -np N` (N a power of two dividing it) "
         "splits them: the weights depend on this, not on N", ARG_MIN(1), ARG_MAX(1 << 20)},
        {"--latent-shards", ARG_INT, &o.latent_shards,
         "topk: split the latents over this many ranks (mpirun -np the same; each sees the whole "
         "batch)", ARG_MIN(1), ARG_MAX(1 << 20)},
        {"--latent-blocks", ARG_INT, &o.latent_blocks,
         "topk: latent blocks whose reconstructions are summed in a fixed tree; the weights depend "
         "on this, not on --latent-shards (1: the single pass)", ARG_MIN(1), ARG_MAX(1 << 20),
         ARG_DEFAULT("--latent-shards")},
        {"--precision", ARG_STR, &prec_s,
         "encoder GEMM: fp32, bf16 (matrix engine via oneDNN; needs AVX512-BF16 or AMX), auto",
         ARG_CHOICES("fp32|bf16|auto")},
        {"--resume", ARG_FLAG, &o.resume, "continue from DIR/checkpoint.bin (same flags)"},
        {"--force", ARG_FLAG, &o.force, "start over in a DIR that holds an SAE or a checkpoint "
                                        "(else refused)"},
        {"--hook", ARG_STR, &o.hook, "hook name (with --db: which activations; else metadata)",
         ARG_DEFAULT("")},
        {"--model-name", ARG_STR, &o.model_name, "metadata: model name", ARG_DEFAULT("")},
        {"--context-size", ARG_INT, &o.context_size, "metadata: context size", ARG_MIN(0)},
        {NULL, 0, NULL, NULL},
    };
    o.micro_batches = 1;
    o.latent_shards = 1;
    int np = 0;
    int prc = args_parse(cmd, argc, argv, spec, NULL, 0, &np);
    if (prc) return prc < 0 ? 0 : prc;
    if (!!o.db + !!o.npy + (o.synth || syn_spec) != 1)
        return cli_usage_error(cmd, "give exactly one of --db, --npy, --synth (or --synth-spec)");
    if (o.db && !o.hook[0]) return cli_usage_error(cmd, "--db needs --hook NAME");
    int tcod = !strcmp(arch_s, "transcoder")        ? SAE_TRANSCODER
               : !strcmp(arch_s, "skip_transcoder") ? SAE_SKIP_TRANSCODER
                                                    : SAE_NOT_TRANSCODER;
    if (!tcod && (act_s || o.hook_out))
        return cli_usage_error(cmd, "--activation and --hook-out are for --arch transcoder / skip_transcoder");
    if (tcod && !(o.db && o.hook_out) && !(o.npy && o.npy_out))
        return cli_usage_error(cmd, "a transcoder needs --db, --hook and --hook-out, or --npy and --npy-out");
    if (o.npy_out && !(tcod && o.npy))
        return cli_usage_error(cmd, "--npy-out is for a transcoder trained on --npy");
    c->transcoder = tcod;
    if (tcod) arch_s = act_s ? act_s : "topk";
    /* the choices are declared, so these cannot fail */
    if (sae_arch_parse(arch_s, &c->arch)) return cli_usage_error(cmd, "%s", err_msg());
    c->bdec_init = !bdec_s                   ? SAE_BDEC_DEFAULT
                   : !strcmp(bdec_s, "mean") ? SAE_BDEC_MEAN
                   : !strcmp(bdec_s, "zero") ? SAE_BDEC_ZERO
                                             : SAE_BDEC_MEDIAN;
    o.precision = !strcmp(prec_s, "bf16") ? SAE_PRECISION_BF16
                  : !strcmp(prec_s, "auto") ? SAE_PRECISION_AUTO
                                            : SAE_PRECISION_FP32;
    /* lr stays NaN when not given (a given one is checked > 0 by args_parse) */
    if (widths_s && c->arch != SAE_MATRYOSHKA)
        return cli_usage_error(cmd, "--widths is for --arch matryoshka");
    if (levels_s && c->arch != SAE_MATRYOSHKA)
        return cli_usage_error(cmd, "--levels is for --arch matryoshka");
    if (levels_s) c->mat_levels = !strcmp(levels_s, "own") ? SAE_MAT_OWN : SAE_MAT_SHARED;
    if (widths_s && sae_widths_parse(widths_s, c->widths, &c->n_widths))
        return cli_usage_error(cmd, "--widths: %s", err_msg());

    if (syn_spec) {
        o.synth = 1;
        o.synth_spec = syn_spec;
    }
    o.synth_cfg.seed = (uint64_t)syn_seed; /* a --synth-spec replaces the whole generator */
    c->lr = isnan(lr) ? 0 : lr; /* 0: the trainer's default */
    c->grad_clip = isnan(clip) ? 0 : clip > 0 ? clip : -1; /* 0: the trainer's default */
    if (!isnan(beta1)) c->adam_b1 = beta1; /* else the architecture's */
    c->seed = (uint64_t)seed;
    c->normalize = !no_norm;
    /* once the command line is known good; rank 0 alone, as the summary (under mpirun -np N
       each rank printed it, a review) */
    if (dist_is_root()) note_unused(argc, argv, c->arch, arch_s, tcod);
    cli_catch_signals();
    cli_term_checkpoint(o.resume, o.force);
    o.ckpt_done = &cli_ckpt_done;
    o.stop = &cli_stop_flag;
    sae_run_result res;
    if (sae_train_run(&o, &res)) return cli_fail(cmd);
    if (dist_is_root()) print_result(&o, &res);
    return 0;
}
