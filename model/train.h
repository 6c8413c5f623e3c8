/* train.h - language-model training for gpt2_model: data windows, AdamW, schedule, checkpoints.
 *
 * Data: documents (token id arrays) are concatenated into a training and a held-out stream, each
 * document followed by the end-of-text id when there is one. A document goes to the held-out
 * stream when a hash of (its index, seed) falls below val_frac, so the split is deterministic.
 * Training batches are B windows of T+1 tokens at uniformly random offsets (inputs = first T,
 * targets = last T); validation uses fixed consecutive windows of the held-out stream.
 *
 * Optimisation: AdamW (decoupled weight decay on matrices only, not on biases or LayerNorm),
 * linear warm-up then cosine decay to min_lr_frac * lr, global-norm gradient clipping.
 *
 * Checkpoint: DIR/config.json + DIR/model.safetensors (Hugging Face layout, float32, for users
 * and the loader) and DIR/train_state.safetensors (parameters, Adam moments, step, RNG state,
 * options in metadata) written atomically; resuming from the state file continues bit-identically
 * (same thread count: OpenBLAS partitions deterministically for a fixed count).
 * Not thread-safe; one trainer per model.
 */
#ifndef SAELITE_TRAIN_H
#define SAELITE_TRAIN_H
#include <stddef.h>
#include <stdint.h>

#include "model/gpt2.h"

typedef struct {
    int *train, *val;
    size_t ntrain, nval, cap_train, cap_val;
    size_t ndocs, ndocs_val;
    int eot;         /* appended after each document, -1 for none */
    double val_frac; /* fraction of documents held out */
    uint64_t seed;
} train_data;

void train_data_init(train_data *d, int eot, double val_frac, uint64_t seed);
int train_data_add(train_data *d, const int *ids, size_t n); /* one document */
void train_data_free(train_data *d);
/* Unigram entropy (nats) of the token distribution of both streams together (end-of-text
 * markers included), over a vocabulary of V ids. */
double train_unigram_entropy(const train_data *d, int V);

typedef struct {
    int batch, seq, steps, warmup;
    double lr, min_lr_frac, weight_decay, beta1, beta2, eps, clip;
    uint64_t seed;
    int replicas; /* threads a batch is split over (see train_state); 0: train_replicas() */
} train_opts;
void train_opts_default(train_opts *o); /* batch 32, seq 128, AdamW 3e-3 (0.9, 0.95), wd 0.1, clip 1 */

/* Learning rate at step s (0-based). */
double train_lr(const train_opts *o, int64_t s);

enum { TRAIN_REPLICAS_MAX = 16 };

typedef struct {
    gpt2_model *m; /* borrowed */
    train_opts o;
    float *mom, *var;
    int64_t step; /* steps done */
    rng_state rng;
    int *tok, *tgt; /* [B*T] batch buffers */
    /* Data parallelism over threads: rep[1..nrep-1] are gpt2_clone copies of m (owned); each
     * step splits the batch's sequences over m and the copies, one thread each with OpenBLAS on
     * one thread (blas_prev: the count to give back in train_free), and averages their
     * gradients into m's. nrep 1: m alone, OpenBLAS threads as they were. */
    gpt2_model *rep[TRAIN_REPLICAS_MAX];
    int nrep, blas_prev;
    /* the data trained on (train_set_data; "" when not given): saved with the state and
       compared on resume, so another corpus, tokenizer or split is refused */
    char data[96];
} train_state;

/* How many threads train_init splits a batch over: SAELITE_THREADS or the cores (par_threads),
 * at most the batch's sequences and TRAIN_REPLICAS_MAX, and 1 for models over 64M parameters
 * (a copy each; extract's limit for its model copy, where larger ones gained nothing). */
int train_replicas(const gpt2_model *m, int batch);
/* Needs gpt2_train_enable(m) (done here). Sets up o->replicas threads (at most the batch's
 * sequences and TRAIN_REPLICAS_MAX), or train_replicas(m, o->batch) when it is 0; fewer
 * when a copy cannot be allocated. The step's bits depend on that count (the gradient is summed
 * per thread's share, then across them), not on which run or machine computes them. */
int train_init(train_state *s, gpt2_model *m, const train_opts *o);
/* The thread count DIR/train_state.safetensors was trained with (0 for a state from before the
 * record): train_resume refuses another, so a resume without --threads takes it. */
int train_saved_threads(const char *dir, int *n);
/* Bytes a step of batch x seq tokens allocates over nrep threads for a model of nparams
 * parameters (activations, logits, gradients, Adam state, the copies), and the check train_init
 * makes with it: ERR_ARG when that exceeds the machine's physical memory (naming the model's
 * shape when one sequence's step does, else --batch) or a step's tokens exceed INT32_MAX. */
double train_memory_bytes(const gpt2_config *c, const train_opts *o, int nrep, size_t nparams);
int train_memory_check(const gpt2_config *c, const train_opts *o, int nrep, size_t nparams);
void train_free(train_state *s);
/* Record which data the run trains on: the token counts and a hash of both streams (so the
 * corpus, the tokenizer and the split are covered). Call before train_save / train_resume. */
void train_set_data(train_state *s, const train_data *d);
/* One optimisation step on a fresh random batch; outputs may be NULL. */
int train_step(train_state *s, const train_data *d, double *loss, double *grad_norm, double *lr);
/* Mean loss over up to max_windows consecutive held-out windows of seq tokens (the last one may
 * be shorter), evaluated in batches of `batch`. ERR_ARG when the held-out stream is too short. */
int train_eval(train_state *s, const train_data *d, int max_windows, double *val_loss,
               long *ntokens);
/* AdamW update of the model parameters from its gradients (already clipped), exposed for tests. */
void train_adamw(train_state *s, double lr);
/* Scale gradients to global norm <= clip (clip <= 0: no clipping); returns the norm before. */
double train_clip(float *g, size_t n, double clip);

/* Checkpoint to dir (see above) / restore from dir/train_state.safetensors into a state whose
 * model has the same shape; options that change the trajectory must match, and the data record
 * (train_set_data) when both the file and the state have one (ERR_ARG otherwise; files from
 * before the record resume unchecked). */
int train_save(const train_state *s, const char *dir);
int train_resume(train_state *s, const char *dir);

/* ---- the train-lm pipeline ---------------------------------------------------------------- */
/* train_run tokenizes a corpus (corpus_open: JSONL or blank-line separated text) with the
 * tokenizer in tok_dir, splits its documents, creates the model (or resumes out/ when resume is
 * set and out/train_state.safetensors exists, refusing other shapes; without resume an out/ that
 * holds a model or a training state is refused unless force), copies the tokenizer files
 * into out/ (so the directory is self-contained), then trains with validation every eval_every
 * steps and checkpoints every checkpoint_every steps or checkpoint_secs seconds, at the end, at
 * max_seconds and when *stop becomes non-zero (then it returns OK with stopped set: the
 * checkpoint is the result). Temp files a killed run left in out/ are removed. The callback,
 * when given, sees the result as it fills: TRAIN_EV_CORPUS after tokenizing, TRAIN_EV_READY
 * before the first step, TRAIN_EV_EVAL after every validation. */
typedef struct {
    const char *corpus, *tok_dir, *out;
    int layers, d_model, heads, d_mlp, ctx; /* d_mlp 0 = 4 * d_model; ctx is the window */
    train_opts train;                         /* seq is set from ctx */
    double val_frac;
    int eval_every, eval_windows, checkpoint_every;
    double checkpoint_secs;                   /* also once this long after the last save (0: off) */
    double max_seconds;                       /* 0 = no limit */
    int resume;
    int force;                                /* without resume: overwrite an OUT holding a model */
    volatile int *stop;                       /* polled after every step; may be NULL */
    void (*on_event)(int event, const void *result, void *user);
    void *user;
} train_run_opts;

enum { TRAIN_EV_CORPUS, TRAIN_EV_READY, TRAIN_EV_EVAL };

typedef struct {
    /* corpus */
    size_t ndocs, ndocs_val, ntrain, nval;
    int vocab;
    double unigram, tokenize_seconds;
    /* model */
    int resume_missing;       /* resume was asked but out/ has no checkpoint: fresh start */
    int64_t resumed_step;     /* -1 for a fresh model */
    size_t nparams;
    int d_mlp;
    int threads;              /* a batch's sequences split over them (train_state.nrep) */
    /* progress, at the latest validation */
    int64_t step;
    double loss, val_loss, lr, grad_norm, tok_per_s, elapsed, eta;
    /* end */
    int stopped;              /* by *stop or max_seconds, with a checkpoint */
    int interrupted;          /* by *stop */
    int64_t steps_run;        /* 0: a resumed run was already finished (val_loss: its model's) */
    double seconds;
} train_run_result;

/* Defaults of `saelite train-lm`: 1 layer, d_model 128, 4 heads, ctx 128, eval every 100 steps on
 * 128 windows, checkpoint every 500, val_frac 0.05, train_opts_default. */
void train_run_defaults(train_run_opts *o);
int train_run(const train_run_opts *o, train_run_result *r);

#endif
