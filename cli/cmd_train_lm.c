/* cmd_train_lm.c - `saelite train-lm`: train a GPT-2-style model on a corpus. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/progress.h"
#include "corpus/corpus.h"
#include "model/gpt2.h"
#include "model/tokenizer.h"
#include "model/train.h"

CLI_COMMAND(train_lm, "Train a small GPT-2-style language model on a corpus",
            "saelite train-lm --corpus FILE --tokenizer DIR [--layers 1 --d-model 128 --heads 4 "
            "--d-mlp 512 --ctx 128] [--batch 32 --steps N --lr 3e-3 --seed S] [--resume] -o DIR")

/* Copy the tokenizer files next to the model so the output directory is self-contained. */
static int copy_file(const char *src, const char *dst)
{
    FILE *in = fopen(src, "rb");
    if (!in) return err_set(ERR_IO, "%s: cannot open: %s", src, strerror(errno));
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", dst, (int)getpid());
    FILE *out = fopen(tmp, "wb");
    if (!out) {
        fclose(in);
        return err_set(ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    }
    char buf[1 << 16];
    size_t k;
    int bad = 0;
    while ((k = fread(buf, 1, sizeof buf, in)) > 0) bad |= fwrite(buf, 1, k, out) != k;
    bad |= ferror(in);
    fclose(in);
    bad |= fclose(out) != 0;
    if (bad || rename(tmp, dst)) {
        unlink(tmp);
        return err_set(ERR_IO, "%s: cannot write", dst);
    }
    return OK;
}

static int copy_tokenizer(const char *tokdir, const char *out)
{
    const char *pairs[2][2] = {{"encoder.json", "vocab.bpe"}, {"vocab.json", "merges.txt"}};
    for (int i = 0; i < 2; i++) {
        char a[4096], b[4096];
        snprintf(a, sizeof a, "%s/%s", tokdir, pairs[i][0]);
        snprintf(b, sizeof b, "%s/%s", tokdir, pairs[i][1]);
        if (access(a, R_OK) || access(b, R_OK)) continue;
        for (int j = 0; j < 2; j++) {
            char s[4096], d[4096];
            snprintf(s, sizeof s, "%s/%s", tokdir, pairs[i][j]);
            snprintf(d, sizeof d, "%s/%s", out, pairs[i][j]);
            if (!strcmp(s, d)) continue;
            int rc = copy_file(s, d);
            if (rc) return rc;
        }
        return OK;
    }
    return err_set(ERR_NOTFOUND, "%s: no encoder.json+vocab.bpe or vocab.json+merges.txt to copy",
                   tokdir);
}

/* A run killed inside an atomic write leaves its temp file (NAME.tmp.PID) behind; the renamed
 * files are intact, so the leftovers are only clutter: remove them when the directory is reused. */
static void remove_stale_temps(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        static const char *const outputs[] = {"model.safetensors", "train_state.safetensors",
                                              "config.json", "encoder.json", "vocab.bpe",
                                              "vocab.json", "merges.txt"};
        int ours = 0;
        for (size_t i = 0; i < sizeof outputs / sizeof *outputs; i++) {
            size_t n = strlen(outputs[i]);
            ours |= !strncmp(e->d_name, outputs[i], n) && !strncmp(e->d_name + n, ".tmp.", 5);
        }
        if (!ours) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

static int mkdir_p(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *c = p + 1; *c; c++)
        if (*c == '/') {
            *c = 0;
            if (mkdir(p, 0777) && errno != EEXIST)
                return err_set(ERR_IO, "%s: cannot create directory: %s", p, strerror(errno));
            *c = '/';
        }
    if (mkdir(p, 0777) && errno != EEXIST)
        return err_set(ERR_IO, "%s: cannot create directory: %s", p, strerror(errno));
    return OK;
}

static int load_corpus(train_data *d, const char *path, tok_tokenizer *tok, size_t *nchars)
{
    corpus_reader *r;
    int rc = corpus_open(&r, path, NULL);
    if (rc) return rc;
    corpus_doc *doc;
    *nchars = 0;
    progress pg;
    progress_begin(&pg, "tokenize", 0, "doc");
    while ((rc = corpus_next(r, &doc)) == OK && doc) {
        int *ids = NULL;
        size_t n = 0;
        rc = tok_encode(tok, doc->text, doc->len, 0, &ids, NULL, &n);
        *nchars += doc->len;
        corpus_doc_free(doc);
        if (!rc && n) rc = train_data_add(d, ids, n);
        mem_free(ids);
        if (rc) break;
        progress_update(&pg, (double)d->ndocs, NULL);
    }
    progress_end(&pg);
    corpus_close(r);
    return rc;
}

int cmd_train_lm(int argc, char **argv)
{
    const char *corpus = NULL, *tokdir = NULL, *out = NULL;
    int layers = 1, dmodel = 128, heads = 4, dmlp = 0, ctx = 128, resume = 0;
    int eval_every = 100, eval_windows = 128, ckpt_every = 500;
    double val_frac = 0.05, max_time = 0;
    int64_t seed = 1;
    train_opts o;
    train_opts_default(&o);
    arg_spec spec[] = {
        {"--corpus", ARG_STR, &corpus, "JSONL or blank-line-separated text (corpus_open)"},
        {"--tokenizer", ARG_STR, &tokdir, "tokenizer directory (encoder.json + vocab.bpe)"},
        {"--layers", ARG_INT, &layers, "blocks (default 1)"},
        {"--d-model", ARG_INT, &dmodel, "residual width (default 128)"},
        {"--heads", ARG_INT, &heads, "attention heads (default 4)"},
        {"--d-mlp", ARG_INT, &dmlp, "MLP width (default 4*d-model)"},
        {"--ctx", ARG_INT, &ctx, "context length = training window (default 128)"},
        {"--batch", ARG_INT, &o.batch, "sequences per step (default 32)"},
        {"--steps", ARG_INT, &o.steps, "optimisation steps (default 1000)"},
        {"--lr", ARG_FLOAT, &o.lr, "peak learning rate (default 3e-3)"},
        {"--warmup", ARG_INT, &o.warmup, "linear warm-up steps (default 50)"},
        {"--min-lr-frac", ARG_FLOAT, &o.min_lr_frac, "cosine floor as a fraction of --lr (0.1)"},
        {"--weight-decay", ARG_FLOAT, &o.weight_decay, "AdamW decay on matrices (default 0.1)"},
        {"--clip", ARG_FLOAT, &o.clip, "global gradient-norm clip, 0 = off (default 1)"},
        {"--seed", ARG_I64, &seed, "seed for init and sampling (default 1)"},
        {"--val-frac", ARG_FLOAT, &val_frac, "fraction of documents held out (default 0.05)"},
        {"--eval-every", ARG_INT, &eval_every, "validation every N steps (default 100)"},
        {"--eval-windows", ARG_INT, &eval_windows, "held-out windows per validation (128)"},
        {"--checkpoint-every", ARG_INT, &ckpt_every, "checkpoint every N steps (default 500)"},
        {"--max-time", ARG_FLOAT, &max_time, "stop (with a checkpoint) after this many seconds"},
        {"--resume", ARG_FLAG, &resume, "continue from DIR/train_state.safetensors"},
        {"-o", ARG_STR, &out, "output directory"},
        {"--out", ARG_STR, &out, "output directory"},
        {NULL, 0, NULL, NULL}};
    int rc = args_parse(argv[0], argc, argv, spec, NULL, 0, NULL);
    if (rc) return rc;
    if (!corpus || !tokdir || !out)
        return cli_usage_error(argv[0], "--corpus, --tokenizer and -o are required");
    if (layers < 1 || dmodel < 1 || heads < 1 || dmodel % heads || ctx < 2 || dmlp < 0)
        return cli_usage_error(argv[0], "bad shape: --d-model must be a multiple of --heads");
    if (o.batch < 1 || o.steps < 1 || o.warmup < 0 || !(o.lr > 0) || eval_every < 1 ||
        ckpt_every < 1 || !(val_frac > 0 && val_frac < 1))
        return cli_usage_error(argv[0], "--batch/--steps/--lr/--eval-every/--checkpoint-every must "
                                        "be positive and --val-frac in (0,1)");
    o.seq = ctx;
    o.seed = (uint64_t)seed;
    cli_catch_signals();

    tok_tokenizer *tok = NULL;
    gpt2_model *m = NULL;
    train_data d;
    train_state s;
    memset(&s, 0, sizeof s);
    train_data_init(&d, -1, val_frac, o.seed);
    if (tok_load(&tok, tokdir)) goto fail;
    int V = tok_vocab_size(tok);
    d.eot = tok_eot(tok);
    double t0 = now_seconds();
    size_t nchars;
    if (load_corpus(&d, corpus, tok, &nchars)) goto fail;
    double ttok = now_seconds() - t0;
    double unigram = train_unigram_entropy(&d, V);
    printf("corpus: %zu documents (%zu held out), %zu train + %zu held-out tokens, vocab %d, "
           "unigram entropy %.4f nats (tokenized in %.1fs)\n",
           d.ndocs, d.ndocs_val, d.ntrain, d.nval, V, unigram, ttok);
    if (d.ntrain < (size_t)ctx + 2) {
        err_set(ERR_ARG, "%s: only %zu training tokens, fewer than one window of %d", corpus,
                d.ntrain, ctx + 1);
        goto fail;
    }
    if (d.nval < 2) {
        err_set(ERR_ARG, "%s: no held-out documents among %zu (--val-frac %g); give more documents "
                         "or a larger --val-frac",
                corpus, d.ndocs, val_frac);
        goto fail;
    }
    char statep[4096];
    snprintf(statep, sizeof statep, "%s/train_state.safetensors", out);
    int resuming = resume && access(statep, R_OK) == 0;
    if (resume && !resuming) fprintf(stderr, "saelite train-lm: no checkpoint in %s, starting fresh\n", out);
    if (resuming) {
        if (gpt2_load(&m, out)) goto fail;
        const gpt2_config *c = gpt2_cfg(m);
        if (c->n_layer != layers || c->n_embd != dmodel || c->n_head != heads || c->n_ctx != ctx ||
            c->n_inner != (dmlp ? dmlp : 4 * dmodel) || c->vocab_size != V) {
            err_set(ERR_ARG, "%s: checkpoint shape (layers %d, d-model %d, heads %d, d-mlp %d, "
                             "ctx %d, vocab %d) differs from the flags",
                    out, c->n_layer, c->n_embd, c->n_head, c->n_inner, c->n_ctx, c->vocab_size);
            goto fail;
        }
    } else {
        gpt2_config c = {layers, heads, dmodel, ctx, V, dmlp ? dmlp : 4 * dmodel, 1e-5f};
        if (gpt2_create(&m, &c, o.seed)) goto fail;
    }
    if (train_init(&s, m, &o)) goto fail;
    if (resuming) {
        if (train_resume(&s, out)) goto fail;
        printf("resumed at step %lld\n", (long long)s.step);
    }
    if (mkdir_p(out)) goto fail;
    remove_stale_temps(out);
    if (copy_tokenizer(tokdir, out)) goto fail;
    size_t nparams;
    gpt2_params(m, &nparams);
    printf("model: %d layers, d_model %d, %d heads, d_mlp %d, ctx %d, %zu parameters; batch %d x "
           "%d, %d steps, lr %g\n",
           layers, dmodel, heads, dmlp ? dmlp : 4 * dmodel, ctx, nparams, o.batch, ctx, o.steps,
           o.lr);
    progress pg;
    progress_begin(&pg, "train-lm", (double)o.steps, "step");
    double start = now_seconds(), train_time = 0, val = NAN, last_loss = NAN;
    long tokens_done = 0;
    int64_t first = s.step;
    int stopped = 0;
    while (s.step < o.steps) {
        double ts = now_seconds(), loss, gn, lr;
        if (train_step(&s, &d, &loss, &gn, &lr)) goto fail;
        train_time += now_seconds() - ts;
        tokens_done += (long)o.batch * ctx;
        last_loss = loss;
        double tps = tokens_done / (train_time > 0 ? train_time : 1e-9);
        int last = s.step == o.steps;
        if (s.step % eval_every == 0 || last) {
            if (train_eval(&s, &d, eval_windows, &val, NULL)) goto fail;
            double el = now_seconds() - start;
            double eta = el / (double)(s.step - first) * (double)(o.steps - s.step);
            printf("step %6lld/%d  train %.4f  val %.4f  lr %.2e  |g| %.2f  %.0f tok/s  %.0fs  "
                   "eta %.0fs\n",
                   (long long)s.step, o.steps, loss, val, lr, gn, tps, el, eta);
            fflush(stdout);
        }
        progress_update(&pg, (double)(s.step - first), "loss %.3f val %.3f %.0f tok/s", loss, val, tps);
        int timeout = max_time > 0 && now_seconds() - start >= max_time;
        if (s.step % ckpt_every == 0 || last || cli_interrupted() || timeout) {
            if (train_save(&s, out)) goto fail;
        }
        if (cli_interrupted() || timeout) {
            stopped = 1;
            break;
        }
    }
    progress_end(&pg);
    double el = now_seconds() - start;
    if (stopped) {
        if (train_eval(&s, &d, eval_windows, &val, NULL)) goto fail;
        printf("stopped at step %lld (%s); resume with --resume\n", (long long)s.step,
               cli_interrupted() ? "interrupted" : "--max-time reached");
    }
    printf("trained %lld steps in %.1fs (%.0f tok/s): train loss %.4f, held-out loss %.4f, unigram "
           "entropy %.4f (%.3f nats below); wrote %s\n",
           (long long)(s.step - first), el, tokens_done / (train_time > 0 ? train_time : 1e-9),
           last_loss, val, unigram, unigram - val, out);
    train_free(&s);
    gpt2_free(m);
    train_data_free(&d);
    tok_free(tok);
    return stopped && cli_interrupted() ? 130 : 0;
fail:
    rc = cli_fail(argv[0]);
    train_free(&s);
    gpt2_free(m);
    train_data_free(&d);
    tok_free(tok);
    return rc;
}
