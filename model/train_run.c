/* train_run.c - the train-lm pipeline (train.h): corpus, model, tokenizer copy, the step loop
 * with validation, checkpoints, a time limit and a stop flag. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/progress.h"
#include "corpus/corpus.h"
#include "model/gpt2.h"
#include "model/params.h"
#include "model/tokenizer.h"
#include "model/train.h"

void train_run_defaults(train_run_opts *o)
{
    *o = (train_run_opts){.layers = 1, .d_model = 128, .heads = 4, .ctx = 128, .val_frac = 0.05,
                          .eval_every = 100, .eval_windows = 128, .checkpoint_every = 500,
                          .checkpoint_secs = 600};
    train_opts_default(&o->train);
}

/* Copy the tokenizer files next to the model so the output directory is self-contained. */
static int copy_tokenizer(const char *tokdir, const char *out)
{
    const char *pairs[2][2] = {{"encoder.json", "vocab.bpe"}, {"vocab.json", "merges.txt"}};
    for (int i = 0; i < 2; i++) {
        char a[4096], b[4096];
        int rc = path_join(a, sizeof a, tokdir, pairs[i][0]);
        if (!rc) rc = path_join(b, sizeof b, tokdir, pairs[i][1]);
        if (rc) return rc;
        if (access(a, R_OK) || access(b, R_OK)) continue;
        for (int j = 0; j < 2; j++) {
            char s[4096], d[4096];
            rc = path_join(s, sizeof s, tokdir, pairs[i][j]);
            if (!rc) rc = path_join(d, sizeof d, out, pairs[i][j]);
            if (!rc && strcmp(s, d)) rc = file_copy_atomic(s, d);
            if (rc) return rc;
        }
        return OK;
    }
    return err_set(ERR_NOTFOUND, "%s: no encoder.json+vocab.bpe or vocab.json+merges.txt to copy",
                   tokdir);
}

static int load_corpus(train_data *d, const char *path, tok_tokenizer *tok)
{
    corpus_reader *r;
    int rc = corpus_open(&r, path, NULL);
    if (rc) return rc;
    corpus_doc *doc;
    progress pg;
    progress_begin(&pg, "tokenize", 0, "doc");
    while ((rc = corpus_next(r, &doc)) == OK && doc) {
        int *ids = NULL;
        size_t n = 0;
        rc = tok_encode(tok, doc->text, doc->len, 0, &ids, NULL, &n);
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

static void emit(const train_run_opts *o, int ev, const train_run_result *r)
{
    if (o->on_event) o->on_event(ev, r, o->user);
}

/* A fresh model of the requested shape, or the checkpoint in out/ when resuming (same shape). */
static int open_model(const train_run_opts *o, int V, gpt2_model **m, int *resuming,
                      train_run_result *r)
{
    char statep[4096];
    int rc = path_join(statep, sizeof statep, o->out, "train_state.safetensors");
    if (rc) return rc;
    *resuming = o->resume && access(statep, R_OK) == 0;
    r->resume_missing = o->resume && !*resuming;
    if (!*resuming) {
        gpt2_config c = {o->layers, o->heads, o->d_model, o->ctx, V, r->d_mlp, 1e-5f};
        return gpt2_create(m, &c, o->train.seed);
    }
    if ((rc = gpt2_load(m, o->out))) return rc;
    const gpt2_config *c = gpt2_cfg(*m);
    if (c->n_layer != o->layers || c->n_embd != o->d_model || c->n_head != o->heads ||
        c->n_ctx != o->ctx || c->n_inner != r->d_mlp || c->vocab_size != V)
        return err_set(ERR_ARG, "%s: checkpoint shape (layers %d, d-model %d, heads %d, d-mlp %d, "
                                "ctx %d, vocab %d) differs from the flags",
                       o->out, c->n_layer, c->n_embd, c->n_head, c->n_inner, c->n_ctx, c->vocab_size);
    return OK;
}

/* Before anything is read or created: OUT must be a directory or missing, and without resume an
 * OUT holding a model or a training state is refused unless force (a rerun without --resume
 * silently replaced a finished model). */
/* What train-lm writes in OUT (the checkpoint, the config and the tokenizer copies). */
static const char *const outputs[] = {"model.safetensors", "train_state.safetensors",
                                      "config.json", "encoder.json", "vocab.bpe", "vocab.json",
                                      "merges.txt"};

static int check_out(const train_run_opts *o)
{
    /* the corpus must not be a file train-lm writes (a corpus named encoder.json in OUT was
       replaced by the tokenizer's copy, exit 0) */
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) {
        char p[4096];
        int rc = path_join(p, sizeof p, o->out, outputs[i]);
        if (rc) return rc;
        if (file_same(p, o->corpus))
            return err_set(ERR_ARG, "%s: the corpus is %s, which train-lm writes; move it out of %s",
                           o->corpus, outputs[i], o->out);
    }
    struct stat sb;
    if (stat(o->out, &sb) != 0) return OK;
    if (!S_ISDIR(sb.st_mode)) return err_set(ERR_IO, "%s: exists and is not a directory", o->out);
    if (o->resume || o->force) return OK;
    static const char *const held[] = {"train_state.safetensors", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        char p[4096];
        int rc = path_join(p, sizeof p, o->out, held[i]);
        if (rc) return rc;
        if (access(p, F_OK) == 0)
            return err_set(ERR_ARG, "%s already holds %s (%s): --resume continues its run, --force "
                                    "overwrites it", o->out,
                           i == 0 ? "a training state" : "a model", held[i]);
    }
    return OK;
}

/* Before a fresh run's first checkpoint: the previous run's files in OUT go (--force, or a
 * --resume that found no state), then the tokenizer is copied. Not earlier: a run that failed
 * before its first checkpoint left the old model beside the new tokenizer (an audit: `forward`
 * then read ids past the old model's vocabulary). Files that are the tokenizer's own (OUT is the
 * tokenizer's directory) stay. A resumed run only refreshes the tokenizer copy. The old files
 * go first, not after the new ones are written: a kill in between then leaves no model, where
 * the other order would leave the new tokenizer beside the old model, which reads wrong ids
 * without a word (a review weighed both). */
static int first_save(const train_run_opts *o, int fresh)
{
    for (size_t i = 0; fresh && i < sizeof outputs / sizeof *outputs; i++) {
        char p[4096], src[4096];
        int rc = path_join(p, sizeof p, o->out, outputs[i]);
        if (!rc) rc = path_join(src, sizeof src, o->tok_dir, outputs[i]);
        if (rc) return rc;
        if (!file_same(p, src) && unlink(p) && errno != ENOENT)
            return err_set(ERR_IO, "%s: cannot remove the previous run's file: %s", p, strerror(errno));
    }
    return copy_tokenizer(o->tok_dir, o->out);
}

/* The step loop: validation, checkpoints, time limit and stop flag. */
static int run_steps(const train_run_opts *o, train_state *s, const train_data *d,
                     train_run_result *r, int fresh)
{
    int saved = 0;
    const int steps = o->train.steps;
    int64_t first = s->step;
    progress pg; /* a resume starts at its step: it counted from 0 of all steps (9.5% at 57%) */
    progress_begin_at(&pg, "train-lm", (double)steps, "step", (double)first);
    double start = now_seconds(), last_save = start, train_time = 0, val = NAN, last_loss = NAN;
    long tokens_done = 0;
    int rc = OK;
    while (!rc && s->step < steps) {
        double ts = now_seconds(), loss, gn, lr;
        if ((rc = train_step(s, d, &loss, &gn, &lr))) break;
        train_time += now_seconds() - ts;
        tokens_done += (long)o->train.batch * o->ctx;
        last_loss = loss;
        double tps = tokens_done / (train_time > 0 ? train_time : 1e-9);
        int last = s->step == steps;
        if (s->step % o->eval_every == 0 || last) {
            if ((rc = train_eval(s, d, o->eval_windows, &val, NULL))) break;
            /* before this step's checkpoint: a diverged model must not be the one kept */
            if (!isfinite(val)) {
                rc = err_set(ERR_ARG, "held-out loss became %g at step %lld (start again with "
                             "--force and a lower --lr; --resume keeps the run's options)", val,
                             (long long)s->step);
                break;
            }
            double el = now_seconds() - start;
            r->step = s->step;
            r->loss = loss;
            r->val_loss = val;
            r->lr = lr;
            r->grad_norm = gn;
            r->tok_per_s = tps;
            r->elapsed = el;
            r->eta = el / (double)(s->step - first) * (double)(steps - s->step);
            emit(o, TRAIN_EV_EVAL, r);
        }
        if (isnan(val)) /* no validation yet (it read "val nan", an audit) */
            progress_update(&pg, (double)s->step, "loss %.3f %.0f tok/s", loss, tps);
        else progress_update(&pg, (double)s->step, "loss %.3f val %.3f %.0f tok/s", loss, val, tps);
        int interrupted = o->stop && *o->stop;
        int timeout = o->max_seconds > 0 && now_seconds() - start >= o->max_seconds;
        /* also by the clock: 500 steps of a GPT-2-sized model are hours a kill -9 would lose */
        int due = o->checkpoint_secs > 0 && now_seconds() - last_save >= o->checkpoint_secs;
        if (s->step % o->checkpoint_every == 0 || last || interrupted || timeout || due) {
            if (!saved && !(rc = first_save(o, fresh))) saved = 1;
            if (!rc) rc = train_save(s, o->out);
            last_save = now_seconds();
        }
        if (!rc && (interrupted || timeout)) {
            r->stopped = 1;
            r->interrupted = interrupted;
            break;
        }
    }
    progress_end(&pg);
    r->seconds = now_seconds() - start;
    r->steps_run = s->step - first;
    r->loss = last_loss;
    r->tok_per_s = tokens_done / (train_time > 0 ? train_time : 1e-9);
    r->step = s->step;
    /* a stop between validations: the held-out loss of the checkpoint that was written; a
       resumed run that was already finished: that of its model (the train loss is not kept) */
    if (!rc && (r->stopped || r->steps_run == 0)) rc = train_eval(s, d, o->eval_windows, &val, NULL);
    r->val_loss = val;
    return rc;
}

int train_run(const train_run_opts *o, train_run_result *r)
{
    memset(r, 0, sizeof *r);
    r->resumed_step = -1;
    if (!o->corpus || !o->tok_dir || !o->out)
        return err_set(ERR_ARG, "train-lm: a corpus, a tokenizer and an output directory are needed");
    if (o->resume && o->force)
        return err_set(ERR_ARG, "--resume continues the run in %s and --force starts it over: give "
                       "one", o->out);
    if (o->layers < 1 || o->d_model < 1 || o->heads < 1 || o->d_model % o->heads || o->ctx < 2 ||
        o->d_mlp < 0 || o->eval_every < 1 || o->checkpoint_every < 1 || o->eval_windows < 1 ||
        !(o->checkpoint_secs >= 0) || !(o->val_frac > 0 && o->val_frac < 1))
        return err_set(ERR_ARG, "train-lm: bad shape or schedule");
    train_opts to = o->train;
    to.seq = o->ctx;
    int64_t d4 = 4 * (int64_t)o->d_model; /* int64: near INT_MAX it overflowed before the check */
    r->d_mlp = o->d_mlp ? o->d_mlp : d4 > INT_MAX ? INT_MAX : (int)d4;
    tok_tokenizer *tok = NULL;
    gpt2_model *m = NULL;
    train_data d;
    train_state s;
    memset(&s, 0, sizeof s);
    train_data_init(&d, -1, o->val_frac, to.seed);
    char made[4096] = ""; /* the outermost directory of OUT this run created */
    int rc = check_out(o), resuming = 0;
    if (!rc) rc = tok_load(&tok, o->tok_dir);
    if (rc) goto out;
    r->vocab = tok_vocab_size(tok);
    d.eot = tok_eot(tok);
    {
        /* before the corpus is read and OUT made: train_init checks again with the threads */
        gpt2_config c = {o->layers, o->heads, o->d_model, o->ctx, r->vocab, r->d_mlp, 1e-5f};
        params_shape ps = {.n_layer = o->layers, .n_embd = o->d_model, .n_head = o->heads,
                           .n_inner = r->d_mlp, .vocab = r->vocab, .n_ctx = o->ctx, .tied = 1,
                           .stored = -1}; /* gpt2_create ties the unembedding */
        params_count pc;
        if ((rc = params_compute(&ps, &pc))) goto out;
        if ((rc = train_memory_check(&c, &to, 1, (size_t)pc.total))) goto out;
    }
    double t0 = now_seconds();
    if ((rc = load_corpus(&d, o->corpus, tok))) goto out;
    r->tokenize_seconds = now_seconds() - t0;
    r->unigram = train_unigram_entropy(&d, r->vocab);
    r->ndocs = d.ndocs;
    r->ndocs_val = d.ndocs_val;
    r->ntrain = d.ntrain;
    r->nval = d.nval;
    emit(o, TRAIN_EV_CORPUS, r);
    if (d.ntrain < (size_t)o->ctx + 1) { /* a window of ctx inputs and its ctx targets */
        rc = err_set(ERR_ARG, "%s: only %zu training tokens, fewer than one window of %d", o->corpus,
                     d.ntrain, o->ctx + 1);
        goto out;
    }
    if (d.nval < 2) {
        rc = err_set(ERR_ARG, "%s: no held-out documents among %zu (--val-frac %g); give more "
                              "documents or a larger --val-frac", o->corpus, d.ndocs, o->val_frac);
        goto out;
    }
    if ((rc = open_model(o, r->vocab, &m, &resuming, r))) goto out;
    /* without --threads a resume takes the run's own count (the cores of the machine that
       started it), which train_resume requires */
    if (resuming && to.replicas <= 0) {
        int nt = 0;
        if ((rc = train_saved_threads(o->out, &nt))) goto out;
        if (nt > 0) to.replicas = nt;
    }
    if ((rc = train_init(&s, m, &to))) goto out;
    train_set_data(&s, &d);
    if (resuming && (rc = train_resume(&s, o->out))) goto out;
    if (resuming) r->resumed_step = s.step;
    if ((rc = file_mkdir_p_created(o->out, made, sizeof made))) goto out;
    file_remove_temps(o->out, outputs, sizeof outputs / sizeof *outputs);
    gpt2_params(m, &r->nparams);
    r->threads = s.nrep;
    emit(o, TRAIN_EV_READY, r);
    rc = run_steps(o, &s, &d, r, !resuming);
out:
    if (rc && !resuming && made[0]) {
        /* failed before its first checkpoint (no model.safetensors): nothing to resume from, so
         * the directory this run created goes, with the tokenizer copies in it */
        char p[4096];
        if (path_join(p, sizeof p, o->out, "model.safetensors") == OK && access(p, F_OK) != 0) {
            for (size_t i = 0; i < sizeof outputs / sizeof *outputs; i++)
                if (path_join(p, sizeof p, o->out, outputs[i]) == OK) unlink(p);
            file_rmdir_upto(o->out, made);
        }
    }
    train_free(&s);
    gpt2_free(m);
    train_data_free(&d);
    tok_free(tok);
    return rc;
}
