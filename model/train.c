/* train.c - data windows, AdamW, schedule, checkpoints (see train.h). */
#include "model/train.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cblas.h>

#include "common/checked.h"
#include "common/err.h"
#include "common/hash.h"
#include "common/mem.h"
#include "common/par.h"
#include "model/safetensors.h"

/* ---- data -------------------------------------------------------------------------------- */
void train_data_init(train_data *d, int eot, double val_frac, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->eot = eot;
    d->val_frac = val_frac;
    d->seed = seed;
}


static int append(int **buf, size_t *n, size_t *cap, const int *ids, size_t k)
{
    if (*n + k > *cap) {
        size_t nc = *cap ? *cap : 1 << 16;
        while (nc < *n + k) nc *= 2;
        int *nb = mem_realloc(*buf, nc * sizeof(int));
        if (!nb) return err_set(ERR_NOMEM, "out of memory for %zu tokens", nc);
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf + *n, ids, k * sizeof(int));
    *n += k;
    return OK;
}

int train_data_add(train_data *d, const int *ids, size_t n)
{
    double u = (double)(hash_mix64(d->ndocs ^ hash_mix64(d->seed)) >> 11) * 0x1.0p-53;
    int val = u < d->val_frac;
    d->ndocs++;
    d->ndocs_val += val;
    int **b = val ? &d->val : &d->train;
    size_t *bn = val ? &d->nval : &d->ntrain, *bc = val ? &d->cap_val : &d->cap_train;
    int rc = append(b, bn, bc, ids, n);
    if (!rc && d->eot >= 0) rc = append(b, bn, bc, &d->eot, 1);
    return rc;
}

void train_data_free(train_data *d)
{
    mem_free(d->train);
    mem_free(d->val);
    memset(d, 0, sizeof *d);
}

double train_unigram_entropy(const train_data *d, int V)
{
    double *cnt = calloc((size_t)V, sizeof *cnt);
    if (!cnt) return NAN;
    double tot = 0;
    for (size_t i = 0; i < d->ntrain; i++)
        if (d->train[i] >= 0 && d->train[i] < V) cnt[d->train[i]]++, tot++;
    for (size_t i = 0; i < d->nval; i++)
        if (d->val[i] >= 0 && d->val[i] < V) cnt[d->val[i]]++, tot++;
    double h = 0;
    for (int i = 0; i < V; i++)
        if (cnt[i] > 0) h -= cnt[i] / tot * log(cnt[i] / tot);
    free(cnt);
    return h;
}

/* ---- options, schedule ------------------------------------------------------------------- */
void train_opts_default(train_opts *o)
{
    *o = (train_opts){.batch = 32, .seq = 128, .steps = 1000, .warmup = 50, .lr = 3e-3,
                      .min_lr_frac = 0.1, .weight_decay = 0.1, .beta1 = 0.9, .beta2 = 0.95,
                      .eps = 1e-8, .clip = 1.0, .seed = 1};
}

double train_lr(const train_opts *o, int64_t s)
{
    if (o->warmup > 0 && s < o->warmup) return o->lr * (double)(s + 1) / o->warmup;
    double lo = o->lr * o->min_lr_frac;
    int64_t span = o->steps - o->warmup;
    if (span <= 0) return o->lr;
    double p = (double)(s - o->warmup) / (double)span;
    if (p > 1) p = 1;
    return lo + 0.5 * (o->lr - lo) * (1.0 + cos(M_PI * p));
}

/* ---- state ------------------------------------------------------------------------------- */
/* Threads split a batch's sequences, one model copy and one OpenBLAS thread each, instead of
 * OpenBLAS splitting every GEMM: the demo model's step (batch 32 x 128) took 324-333 ms that way
 * against 386-419 ms on two OpenBLAS threads (2 cores, AMD EPYC without AVX-512), as extract's
 * two forwards side by side beat one forward on two threads (docs/model.md). Each thread also
 * runs its own LayerNorms, softmaxes and attention, which fp32 otherwise runs on one core. */
int train_replicas(const gpt2_model *m, int batch)
{
    size_t n;
    gpt2_params((gpt2_model *)m, &n);
    int r = n > ((size_t)64 << 20) ? 1 : par_threads();
    if (r > batch) r = batch;
    if (r > TRAIN_REPLICAS_MAX) r = TRAIN_REPLICAS_MAX;
    return r < 1 ? 1 : r;
}

/* What a step allocates, from gpt2.c's buffers (alloc_acts in train mode and backward_impl):
 * per token, the per-layer activations kept for the backward pass, the logits and their
 * gradient's scratch; per sequence, the attention probabilities of every layer and their
 * gradient; the batch's token/target ids and the held-out losses; per parameter, m's weights,
 * gradient and Adam's two moments, and each copy's weights and gradient. */
double train_memory_bytes(const gpt2_config *c, const train_opts *o, int nrep, size_t nparams)
{
    double N = (double)o->batch * o->seq, L = c->n_layer, C = c->n_embd, F = c->n_inner,
           V = c->vocab_size, T = o->seq;
    double per_tok = C * (8 * L + 12) + F * (2 * L + 2) + V + 4 * L + 3 + 2;
    double att = (double)o->batch * c->n_head * T * T * (L + 1);
    return 4.0 * (N * per_tok + att + (4.0 + 2.0 * (nrep > 1 ? nrep - 1 : 0)) * (double)nparams);
}

int train_memory_check(const gpt2_config *c, const train_opts *o, int nrep, size_t nparams)
{
    /* the model's loops index a batch's tokens with int */
    if ((int64_t)o->batch * o->seq > INT32_MAX)
        return err_set(ERR_ARG, "--batch %d x --ctx %d: %.3g tokens per step, more than the "
                       "model's 2147483647", o->batch, o->seq, (double)o->batch * o->seq);
    /* past the machine's memory the lazy allocations succeed and the kernel kills the job
       while the first step touches them (--batch 100000000 grew to 24 GB), so say it now */
    double need = train_memory_bytes(c, o, nrep, nparams);
    long long phys = mem_physical_bytes();
    if (!(phys > 0 && need > (double)phys)) return OK;
    /* name what is too large: the model's own state, or the batch's activations (an audit: a
       --d-model of 1e6 was blamed on --batch 4) */
    train_opts one = *o;
    one.batch = 1;
    double model = train_memory_bytes(c, &one, 1, nparams); /* one sequence takes one thread */
    if (model > (double)phys)
        return err_set(ERR_ARG, "the model (layers %d, d-model %d, d-mlp %d, vocab %d: %.4g "
                       "parameters) needs %.1f GB for its weights, gradients and Adam state and one "
                       "sequence's activations, more than this machine's %.1f GB of memory (a "
                       "smaller --d-model, --d-mlp or --layers?)", c->n_layer, c->n_embd,
                       c->n_inner, c->vocab_size, (double)nparams, model / 1e9, (double)phys / 1e9);
    return err_set(ERR_ARG, "--batch %d: a step over %d x %d tokens needs %.1f GB (activations "
                   "kept for the backward pass, weights, gradients and Adam state), more than "
                   "this machine's %.1f GB of memory (a smaller --batch, --ctx or --threads?)", o->batch,
                   o->batch, o->seq, need / 1e9, (double)phys / 1e9);
}

int train_init(train_state *s, gpt2_model *m, const train_opts *o)
{
    memset(s, 0, sizeof *s);
    if (o->batch < 1 || o->seq < 1 || o->seq > gpt2_cfg(m)->n_ctx || o->steps < 1)
        return err_set(ERR_ARG, "bad training shape: batch %d, seq %d (context %d), steps %d",
                       o->batch, o->seq, gpt2_cfg(m)->n_ctx, o->steps);
    /* out of range, these still train, wrongly: a negative floor or decay drives the weights
       away from the loss, a negative clip scales the gradient by a negative factor */
    if (!(o->lr > 0 && o->warmup >= 0 && o->min_lr_frac >= 0 && o->min_lr_frac <= 1 &&
          o->weight_decay >= 0 && o->clip >= 0 && o->beta1 >= 0 && o->beta1 < 1 &&
          o->beta2 >= 0 && o->beta2 < 1 && o->eps > 0))
        return err_set(ERR_ARG, "bad optimizer options: lr %g (> 0), warmup %d (>= 0), min_lr_frac "
                       "%g ([0, 1]), weight_decay %g (>= 0), clip %g (>= 0), betas %g, %g ([0, 1)), "
                       "eps %g (> 0)", o->lr, o->warmup, o->min_lr_frac, o->weight_decay, o->clip,
                       o->beta1, o->beta2, o->eps);
    size_t n;
    gpt2_params(m, &n);
    int want = train_replicas(m, o->batch);
    if (o->replicas > 0) want = o->replicas < o->batch ? o->replicas : o->batch;
    if (want > TRAIN_REPLICAS_MAX) want = TRAIN_REPLICAS_MAX;
    int rc = train_memory_check(gpt2_cfg(m), o, want, n);
    if (rc) return rc;
    if ((rc = gpt2_train_enable(m))) return rc;
    s->m = m;
    s->o = *o;
    s->mom = mem_calloc(n, sizeof(float));
    s->var = mem_calloc(n, sizeof(float));
    s->tok = mem_alloc(sizeof(int) * (size_t)o->batch * o->seq);
    s->tgt = mem_alloc(sizeof(int) * (size_t)o->batch * o->seq);
    if (!s->mom || !s->var) {
        train_free(s);
        return err_set(ERR_NOMEM, "out of memory for the optimizer state of %zu parameters", n);
    }
    if (!s->tok || !s->tgt) {
        train_free(s);
        return err_set(ERR_NOMEM, "--batch %d: out of memory for the batch's %d x %d token ids",
                       o->batch, o->batch, o->seq);
    }
    /* the sampling stream differs from the init stream of the same seed */
    rng_seed(&s->rng, o->seed ^ 0x5eed5a3b1e5ull);
    s->nrep = 1;
    while (s->nrep < want && !gpt2_clone(&s->rep[s->nrep], m)) {
        if (gpt2_train_enable(s->rep[s->nrep])) {
            gpt2_free(s->rep[s->nrep]);
            s->rep[s->nrep] = NULL;
            break;
        }
        s->nrep++;
    }
    err_clear(); /* fewer copies than wanted is not an error */
    if (s->nrep > 1) {
        s->blas_prev = openblas_get_num_threads();
        openblas_set_num_threads(1);
    }
    return OK;
}

void train_free(train_state *s)
{
    for (int r = 1; r < s->nrep; r++) gpt2_free(s->rep[r]);
    if (s->nrep > 1 && s->blas_prev > 0) openblas_set_num_threads(s->blas_prev);
    mem_free(s->mom);
    mem_free(s->var);
    mem_free(s->tok);
    mem_free(s->tgt);
    memset(s, 0, sizeof *s);
}

void train_set_data(train_state *s, const train_data *d)
{
    uint64_t h = hash_fnv1a(HASH_FNV1A_INIT, d->train, d->ntrain * sizeof(int));
    h = hash_fnv1a(h, d->val, d->nval * sizeof(int));
    snprintf(s->data, sizeof s->data, "train=%zu val=%zu hash=%016" PRIx64, d->ntrain, d->nval, h);
}

double train_clip(float *g, size_t n, double clip)
{
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (double)g[i] * g[i];
    double norm = sqrt(ss);
    if (clip > 0 && norm > clip) {
        float sc = (float)(clip / norm);
        for (size_t i = 0; i < n; i++) g[i] *= sc;
    }
    return norm;
}

void train_adamw(train_state *s, double lr)
{
    int nt;
    const gpt2_tensor *tab = gpt2_param_table(s->m, &nt);
    float *p = gpt2_params(s->m, NULL), *g = gpt2_grads(s->m);
    const train_opts *o = &s->o;
    double t = (double)(s->step + 1);
    float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->eps;
    float c1 = (float)(1.0 / (1.0 - pow(o->beta1, t))), c2 = (float)(1.0 / (1.0 - pow(o->beta2, t)));
    float flr = (float)lr;
    for (int i = 0; i < nt; i++) {
        float wd = tab[i].decay ? (float)o->weight_decay : 0.0f;
        size_t a = tab[i].offset, e = a + tab[i].numel;
        for (size_t j = a; j < e; j++) {
            float mj = b1 * s->mom[j] + (1.0f - b1) * g[j];
            float vj = b2 * s->var[j] + (1.0f - b2) * g[j] * g[j];
            s->mom[j] = mj;
            s->var[j] = vj;
            float mh = mj * c1, vh = vj * c2;
            p[j] -= flr * (mh / (sqrtf(vh) + eps) + wd * p[j]);
        }
    }
}

static void sample_batch(train_state *s, const train_data *d)
{
    int B = s->o.batch, T = s->o.seq;
    uint64_t span = (uint64_t)(d->ntrain - (size_t)T); /* start in [0, ntrain - T - 1] */
    for (int b = 0; b < B; b++) {
        size_t st = (size_t)(rng_next(&s->rng) % span);
        memcpy(s->tok + (size_t)b * T, d->train + st, sizeof(int) * (size_t)T);
        memcpy(s->tgt + (size_t)b * T, d->train + st + 1, sizeof(int) * (size_t)T);
    }
}

/* ---- the batch over the model and its copies ------------------------------------------- */
/* Thread r's sequences of a batch of B: [B r / nrep, B (r + 1) / nrep). */
static void rep_range(int B, int nrep, int r, int *b0, int *b1)
{
    *b0 = (int)((int64_t)B * r / nrep);
    *b1 = (int)((int64_t)B * (r + 1) / nrep);
}

static gpt2_model *rep_model(train_state *s, int r) { return r ? s->rep[r] : s->m; }

/* The copies take m's current parameters (after the optimizer step, or a resume). */
static void rep_sync(train_state *s)
{
    size_t n;
    const float *p = gpt2_params(s->m, &n);
    for (int r = 1; r < s->nrep; r++) memcpy(gpt2_params(s->rep[r], NULL), p, sizeof(float) * n);
}

typedef struct {
    train_state *s;
    int B, T, mode; /* 0: forward_backward; 1: loss per token into lpt */
    float *lpt;
    double mean[TRAIN_REPLICAS_MAX];
    int rc[TRAIN_REPLICAS_MAX];
    char msg[TRAIN_REPLICAS_MAX][160]; /* err_msg is per thread */
} rep_args;

/* model r computes share r; a thread takes shares [nrep tid / nt, nrep (tid + 1) / nt), one
 * each unless par_run could not start them all */
static void rep_part(void *p, int tid, int nt)
{
    rep_args *a = p;
    int nrep = a->s->nrep;
    for (int r = nrep * tid / nt; r < nrep * (tid + 1) / nt; r++) {
        int b0, b1;
        rep_range(a->B, nrep, r, &b0, &b1);
        size_t off = (size_t)b0 * a->T;
        gpt2_model *m = rep_model(a->s, r);
        a->mean[r] = 0;
        a->rc[r] = OK;
        if (b1 > b0)
            a->rc[r] = a->mode ? gpt2_loss(m, a->s->tok + off, a->s->tgt + off, b1 - b0, a->T,
                                           a->lpt + off, &a->mean[r])
                               : gpt2_forward_backward(m, a->s->tok + off, a->s->tgt + off,
                                                       b1 - b0, a->T, &a->mean[r]);
        if (a->rc[r]) snprintf(a->msg[r], sizeof a->msg[r], "%s", err_msg());
    }
}

typedef struct {
    float *g[TRAIN_REPLICAS_MAX]; /* thread r's gradient; g[0] is m's, which receives the mean */
    float w[TRAIN_REPLICAS_MAX];
    int nrep;
    size_t n;
} avg_args;

/* m's gradient = sum over threads r (in order) of w_r g_r, split by index: the same bits for
 * any number of threads doing the sum */
static void avg_part(void *p, int tid, int nt)
{
    avg_args *a = p;
    size_t j0 = a->n * (size_t)tid / (size_t)nt, j1 = a->n * (size_t)(tid + 1) / (size_t)nt;
    for (size_t j = j0; j < j1; j++) {
        float acc = a->w[0] * a->g[0][j];
        for (int r = 1; r < a->nrep; r++) acc += a->w[r] * a->g[r][j];
        a->g[0][j] = acc;
    }
}

/* Run the batch in s->tok/s->tgt (B sequences of T) over the threads; mode 0 leaves the mean
 * loss's gradient in m's and returns the mean loss in *mean; mode 1 fills lpt [B,T]. */
static int rep_run(train_state *s, int B, int T, int mode, float *lpt, double *mean)
{
    if (s->nrep == 1)
        return mode ? gpt2_loss(s->m, s->tok, s->tgt, B, T, lpt, mean)
                    : gpt2_forward_backward(s->m, s->tok, s->tgt, B, T, mean);
    rep_sync(s);
    rep_args a = {.s = s, .B = B, .T = T, .mode = mode, .lpt = lpt};
    par_run(rep_part, &a, s->nrep);
    for (int r = 0; r < s->nrep; r++)
        if (a.rc[r]) return err_set(a.rc[r], "%s", a.msg[r]);
    if (mode) return OK;
    /* every target of a training batch counts, so a thread's share of the mean is its share of
       the sequences */
    avg_args g = {.nrep = s->nrep};
    gpt2_params(s->m, &g.n);
    for (int r = 0; r < s->nrep; r++) g.g[r] = gpt2_grads(rep_model(s, r));
    double l = 0;
    for (int r = 0; r < s->nrep; r++) {
        int b0, b1;
        rep_range(B, s->nrep, r, &b0, &b1);
        g.w[r] = (float)((double)(b1 - b0) / B);
        l += (double)g.w[r] * a.mean[r];
    }
    par_run(avg_part, &g, g.n >= ((size_t)1 << 16) ? s->nrep : 1);
    *mean = l;
    return OK;
}

int train_step(train_state *s, const train_data *d, double *loss, double *grad_norm, double *lr)
{
    if (d->ntrain < (size_t)s->o.seq + 1)
        return err_set(ERR_ARG, "training stream has %zu tokens, fewer than one window of %d",
                       d->ntrain, s->o.seq + 1);
    sample_batch(s, d);
    double l;
    int rc = rep_run(s, s->o.batch, s->o.seq, 0, NULL, &l);
    if (rc) return rc;
    size_t n;
    gpt2_params(s->m, &n);
    double norm = train_clip(gpt2_grads(s->m), n, s->o.clip);
    double r = train_lr(&s->o, s->step);
    train_adamw(s, r);
    s->step++;
    if (loss) *loss = l;
    if (grad_norm) *grad_norm = norm;
    if (lr) *lr = r;
    if (!isfinite(l))
        return err_set(ERR_ARG, "loss became %g at step %" PRId64 " (start again with --force and a "
                       "lower --lr; --resume keeps the run's options)", l, s->step);
    return OK;
}

int train_eval(train_state *s, const train_data *d, int max_windows, double *val_loss,
               long *ntokens)
{
    int B = s->o.batch, T = s->o.seq;
    if (d->nval < 2) return err_set(ERR_ARG, "held-out stream is empty (raise --val-frac?)");
    double sum = 0;
    long cnt = 0;
    size_t pos = 0;
    int w = 0;
    float *lpt = mem_alloc(sizeof(float) * (size_t)B * T);
    if (!lpt) return err_set(ERR_NOMEM, "out of memory");
    while (w < max_windows && pos + 1 < d->nval) {
        int b = 0;
        for (; b < B && w < max_windows && pos + 1 < d->nval; b++, w++) {
            size_t len = d->nval - 1 - pos;
            if (len > (size_t)T) len = (size_t)T;
            for (int t = 0; t < T; t++) {
                int in = (size_t)t < len;
                s->tok[(size_t)b * T + t] = in ? d->val[pos + t] : 0;
                s->tgt[(size_t)b * T + t] = in ? d->val[pos + t + 1] : -1;
            }
            pos += len;
        }
        double mean;
        int rc = rep_run(s, b, T, 1, lpt, &mean);
        if (rc) {
            mem_free(lpt);
            return rc;
        }
        for (size_t i = 0; i < (size_t)b * T; i++)
            if (s->tgt[i] >= 0) {
                sum += lpt[i];
                cnt++;
            }
    }
    mem_free(lpt);
    *val_loss = cnt ? sum / (double)cnt : 0;
    if (ntokens) *ntokens = cnt;
    return OK;
}

/* ---- checkpoints -------------------------------------------------------------------------- */
static void opts_string(const train_opts *o, char *buf, size_t n)
{
    snprintf(buf, n, "batch=%d seq=%d steps=%d warmup=%d lr=%.17g min_lr_frac=%.17g wd=%.17g "
             "b1=%.17g b2=%.17g eps=%.17g clip=%.17g seed=%" PRIu64,
             o->batch, o->seq, o->steps, o->warmup, o->lr, o->min_lr_frac, o->weight_decay,
             o->beta1, o->beta2, o->eps, o->clip, o->seed);
}

int train_save(const train_state *s, const char *dir)
{
    int rc = gpt2_save(s->m, dir, ST_F32, 0);
    if (rc) return rc;
    size_t n;
    float *p = gpt2_params(s->m, &n);
    st_out outs[3] = {{"params", ST_F32, 1, {(int64_t)n}, p},
                      {"adam_m", ST_F32, 1, {(int64_t)n}, s->mom},
                      {"adam_v", ST_F32, 1, {(int64_t)n}, s->var}};
    char step[32], rng[80], opts[512], threads[16];
    snprintf(step, sizeof step, "%" PRId64, s->step);
    snprintf(threads, sizeof threads, "%d", s->nrep);
    snprintf(rng, sizeof rng, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64,
             s->rng.s[0], s->rng.s[1], s->rng.s[2], s->rng.s[3]);
    opts_string(&s->o, opts, sizeof opts);
    /* the thread count apart from opts, so that states from before it still resume */
    const char *meta[] = {"step", step, "rng", rng, "opts", opts, "threads", threads,
                          s->data[0] ? "data" : NULL, s->data, NULL};
    char path[4096];
    snprintf(path, sizeof path, "%s/train_state.safetensors", dir);
    return st_write(path, outs, 3, meta);
}

/* The "threads" record of a state (0 when the state predates it); ERR_FORMAT when malformed. */
static int saved_threads(st_file *f, const char *path, int *n)
{
    const char *t = st_metadata(f, "threads");
    *n = 0;
    if (!t) return OK;
    char *end;
    long v = strtol(t, &end, 10);
    if (*end || end == t || v < 1 || v > TRAIN_REPLICAS_MAX)
        return err_set(ERR_FORMAT, "%s: bad threads record '%s'", path, t);
    *n = (int)v;
    return OK;
}

int train_saved_threads(const char *dir, int *n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/train_state.safetensors", dir);
    st_file *f;
    int rc = st_open(&f, path);
    if (rc) return rc;
    rc = saved_threads(f, path, n);
    st_close(f);
    return rc;
}

int train_resume(train_state *s, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/train_state.safetensors", dir);
    st_file *f;
    int rc = st_open(&f, path);
    if (rc) return rc;
    size_t n;
    float *p = gpt2_params(s->m, &n);
    int64_t shp[1] = {(int64_t)n};
    const char *step = st_metadata(f, "step"), *rng = st_metadata(f, "rng"),
               *opts = st_metadata(f, "opts");
    char want[512];
    opts_string(&s->o, want, sizeof want);
    if (!step || !rng || !opts || strlen(rng) != 64) {
        rc = err_set(ERR_FORMAT, "%s: missing step/rng/opts metadata", path);
        goto out;
    }
    if (strcmp(opts, want)) {
        rc = err_set(ERR_ARG, "%s: the run was started with different options (%s; now %s)", path,
                     opts, want);
        goto out;
    }
    /* the step's bits depend on the split over threads: another count (another machine's
       cores, or a copy that could not be allocated) went on silently (an audit) */
    int nt;
    if ((rc = saved_threads(f, path, &nt))) goto out;
    if (nt && nt != s->nrep) {
        rc = err_set(ERR_ARG, "%s: the run was split over %d thread%s, this one over %d: resume "
                     "with --threads %d (a step's bits depend on the split)", path, nt,
                     nt == 1 ? "" : "s", s->nrep, nt);
        goto out;
    }
    const char *data = st_metadata(f, "data");
    if (data && s->data[0] && strcmp(data, s->data)) {
        rc = err_set(ERR_ARG, "%s: the run was trained on other data (%s; now %s): another corpus, "
                     "tokenizer or --val-frac", path, data, s->data);
        goto out;
    }
    if ((rc = st_load_f32(f, "params", 1, shp, p)) || (rc = st_load_f32(f, "adam_m", 1, shp, s->mom)) ||
        (rc = st_load_f32(f, "adam_v", 1, shp, s->var)))
        goto out;
    /* a run whose loss turned non-finite stops before it saves: such values are damage, and
       resuming on them would only end in "loss became nan" with the blame on --lr */
    static const char *const names[3] = {"params", "adam_m", "adam_v"};
    for (int a = 0; a < 3; a++) {
        const float *x = a == 0 ? p : a == 1 ? s->mom : s->var;
        int64_t bad = ck_first_nonfinite(x, (int64_t)n);
        if (bad < 0 && a == 2) bad = ck_first_negative(x, (int64_t)n);
        if (bad >= 0) {
            rc = err_set(ERR_FORMAT, "%s: tensor '%s' has %g at index %lld: the file is damaged "
                         "(resume from an earlier copy, or train anew without --resume)", path,
                         names[a], (double)x[bad], (long long)bad);
            goto out;
        }
    }
    char *end;
    errno = 0;
    s->step = strtoll(step, &end, 10);
    /* a step past the run's own --steps (or beyond int64) resumed as "already finished", exit 0
       (an audit: the file is damaged) */
    if (*end || errno || !isdigit((unsigned char)step[0]) || s->step < 0 || s->step > s->o.steps) {
        rc = err_set(ERR_FORMAT, "%s: bad step '%s' (the run has %d steps): the file is damaged",
                     path, step, s->o.steps);
        goto out;
    }
    uint64_t any = 0;
    for (int i = 0; i < 4; i++) {
        char part[17];
        memcpy(part, rng + 16 * i, 16);
        part[16] = 0;
        int hex = 1; /* strtoull takes a sign and blanks too */
        for (int k = 0; k < 16; k++) hex &= isxdigit((unsigned char)part[k]) != 0;
        s->rng.s[i] = strtoull(part, &end, 16);
        any |= s->rng.s[i];
        if (*end || !hex) {
            rc = err_set(ERR_FORMAT, "%s: bad rng state: the file is damaged", path);
            goto out;
        }
    }
    /* xoshiro256** never leaves the all-zero state: every batch was window 0 (an audit) */
    if (!any) {
        rc = err_set(ERR_FORMAT, "%s: an all-zero rng state: the file is damaged", path);
        goto out;
    }
out:
    st_close(f);
    return rc;
}
