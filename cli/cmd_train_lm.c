/* cmd_train_lm.c - `saelite train-lm`: flags for train_run (model/train.h), its progress lines
 * and summary. */
#include <math.h>
#include <stdio.h>

#include "cli/cli.h"
#include "common/err.h"
#include "model/train.h"

CLI_COMMAND(train_lm, "Train a small GPT-2-style language model on a corpus",
            "saelite train-lm --corpus FILE --tokenizer DIR [--layers 1 --d-model 128 --heads 4 "
            "--d-mlp 512 --ctx 128] [--batch 32 --steps N --lr 3e-3 --seed S] [--resume | --force] -o DIR")

static void on_event(int ev, const void *result, void *user)
{
    const train_run_result *r = result;
    const train_run_opts *o = user;
    if (ev == TRAIN_EV_CORPUS) {
        printf("corpus: %zu documents (%zu held out), %zu train + %zu held-out tokens, vocab %d, "
               "unigram entropy %.4f nats (tokenized in %.1fs)\n",
               r->ndocs, r->ndocs_val, r->ntrain, r->nval, r->vocab, r->unigram, r->tokenize_seconds);
    } else if (ev == TRAIN_EV_READY) {
        if (r->resume_missing) fprintf(stderr, "saelite train-lm: no checkpoint in %s, starting fresh\n", o->out);
        if (r->resumed_step >= 0) printf("resumed at step %lld\n", (long long)r->resumed_step);
        printf("model: %d layers, d_model %d, %d heads, d_mlp %d, ctx %d, %zu parameters; batch %d x "
               "%d over %d thread%s, %d steps, lr %g\n",
               o->layers, o->d_model, o->heads, r->d_mlp, o->ctx, r->nparams, o->train.batch, o->ctx,
               r->threads, r->threads == 1 ? "" : "s", o->train.steps, o->train.lr);
    } else if (ev == TRAIN_EV_EVAL) {
        printf("step %6lld/%d  train %.4f  val %.4f  lr %.2e  |g| %.2f  %.0f tok/s  %.0fs  eta %.0fs\n",
               (long long)r->step, o->train.steps, r->loss, r->val_loss, r->lr, r->grad_norm,
               r->tok_per_s, r->elapsed, r->eta);
    }
    fflush(stdout);
}

int cmd_train_lm(int argc, char **argv)
{
    train_run_opts o;
    train_run_defaults(&o);
    int64_t seed = 1;
    arg_spec spec[] = {
        {"--corpus", ARG_STR, &o.corpus, "JSONL or blank-line-separated text (corpus_open)",
         ARG_REQUIRED},
        {"--tokenizer", ARG_STR, &o.tok_dir, "tokenizer directory (encoder.json + vocab.bpe)",
         ARG_REQUIRED},
        {"--layers", ARG_INT, &o.layers, "blocks", ARG_MIN(1)},
        {"--d-model", ARG_INT, &o.d_model, "residual width (a multiple of --heads)", ARG_MIN(1)},
        {"--heads", ARG_INT, &o.heads, "attention heads", ARG_MIN(1)},
        {"--d-mlp", ARG_INT, &o.d_mlp, "MLP width (0: the default)", ARG_MIN(0), ARG_DEFAULT("4 x d-model")},
        {"--ctx", ARG_INT, &o.ctx, "context length = training window", ARG_MIN(2)},
        {"--batch", ARG_INT, &o.train.batch, "sequences per step", ARG_MIN(1)},
        {"--steps", ARG_INT, &o.train.steps, "optimisation steps", ARG_MIN(1)},
        {"--lr", ARG_FLOAT, &o.train.lr, "peak learning rate", ARG_ABOVE(0)},
        {"--warmup", ARG_INT, &o.train.warmup,
         "linear warm-up steps (more than --steps: the rate stays below --lr, as in llm.c)", ARG_MIN(0)},
        {"--min-lr-frac", ARG_FLOAT, &o.train.min_lr_frac, "cosine floor as a fraction of --lr",
         ARG_RANGE(0, 1)},
        {"--weight-decay", ARG_FLOAT, &o.train.weight_decay, "AdamW decay on matrices", ARG_MIN(0)},
        {"--clip", ARG_FLOAT, &o.train.clip, "global gradient-norm clip (0: off)", ARG_MIN(0)},
        {"--seed", ARG_I64, &seed, "seed for init and sampling", ARG_MIN(0)},
        {"--val-frac", ARG_FLOAT, &o.val_frac, "fraction of documents held out", ARG_ABOVE(0),
         ARG_BELOW(1)},
        {"--eval-every", ARG_INT, &o.eval_every, "validation every N steps", ARG_MIN(1)},
        {"--eval-windows", ARG_INT, &o.eval_windows, "held-out windows per validation", ARG_MIN(1)},
        {"--checkpoint-every", ARG_INT, &o.checkpoint_every, "checkpoint every N steps", ARG_MIN(1)},
        {"--checkpoint-secs", ARG_FLOAT, &o.checkpoint_secs, "also checkpoint once this many seconds "
         "passed since the last one (0: by steps only)", ARG_MIN(0)},
        {"--max-time", ARG_FLOAT, &o.max_seconds, "stop (with a checkpoint) after this many seconds (0: no limit)",
         ARG_MIN(0)},
        {"--threads", ARG_INT, &o.train.replicas,
         "threads a batch's sequences are split over, a model copy each (the step's bits depend "
         "on it)", ARG_RANGE(1, TRAIN_REPLICAS_MAX),
         ARG_DEFAULT("cores, at most the batch; on --resume the run's own")},
        {"--resume", ARG_FLAG, &o.resume, "continue from DIR/train_state.safetensors"},
        {"--force", ARG_FLAG, &o.force, "start over in a DIR that holds a model or a training "
                                        "state (else refused)"},
        {"-o", ARG_STR, &o.out, "output directory", ARG_REQUIRED},
        {"--out", ARG_STR, &o.out, "same as -o"},
        {NULL, 0, NULL, NULL}};
    int rc = args_parse(argv[0], argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc < 0 ? 0 : rc;
    if (o.d_model % o.heads)
        return cli_usage_error(argv[0], "--d-model %d is not a multiple of --heads %d", o.d_model, o.heads);
    o.train.seed = (uint64_t)seed;
    cli_catch_signals();
    o.stop = &cli_stop_flag;
    o.on_event = on_event;
    o.user = &o;
    train_run_result r;
    if (train_run(&o, &r)) return cli_fail(argv[0]);
    if (r.stopped) /* on stderr, as every command's stop (it went to stdout only, an audit) */
        fprintf(stderr, "saelite train-lm: stopped at step %lld (%s); resume with --resume\n",
                (long long)r.step, r.interrupted ? "interrupted" : "--max-time reached");
    if (r.steps_run == 0 && !r.stopped) {
        printf("already finished at step %lld; nothing to train: held-out loss %.4f, unigram "
               "entropy %.4f (%.3f nats %s); %s unchanged\n", (long long)r.step, r.val_loss,
               r.unigram, fabs(r.unigram - r.val_loss), r.val_loss <= r.unigram ? "below" : "above",
               o.out);
        return 0;
    }
    /* the rate is the training steps' own (held-out evaluations and checkpoints left out) */
    printf("trained %lld steps in %.1fs (%.0f tok/s while training): train loss %.4f, held-out loss %.4f, unigram "
           "entropy %.4f (%.3f nats %s); wrote %s\n",
           (long long)r.steps_run, r.seconds, r.tok_per_s, r.loss, r.val_loss, r.unigram,
           fabs(r.unigram - r.val_loss), r.val_loss <= r.unigram ? "below" : "above", o.out);
    return r.interrupted ? 130 : 0;
}
