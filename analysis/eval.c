/* eval.c - `saelite eval` as a library runner (eval.h): the SAE, the split by document, the
 * sampled sequences and positions, one pass over their activations, the sparse-probing and
 * absorption suites and the writing transaction. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/eval.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/progress.h"
#include "common/rng.h"
#include "store/store.h"
#include "store/store_ana.h"
#include "store/store_eval.h"
#include "store/store_sae.h"

void eval_defaults(eval_opts *o)
{
    *o = (eval_opts){.suites = "sparse_probing,absorption", .seed = 42, .test_frac = 0.2,
                     .seqs_per_genre = 150, .train_per_class = 1500, .test_per_class = 500, .C = 1};
}

static int stopped(const eval_opts *o) { return o->stop && *o->stop; }

static int parse_suites(const char *s, int *bits)
{
    *bits = 0;
    char w[64];
    while (s && *s) {
        size_t n = strcspn(s, ",");
        snprintf(w, sizeof w, "%.*s", (int)(n < sizeof w ? n : sizeof w - 1), s);
        if (!strcmp(w, "sparse_probing")) *bits |= EVAL_SUITE_SPARSE_PROBING;
        else if (!strcmp(w, "absorption")) *bits |= EVAL_SUITE_ABSORPTION;
        else if (!strcmp(w, "all")) *bits |= EVAL_SUITE_SPARSE_PROBING | EVAL_SUITE_ABSORPTION;
        else if (!strcmp(w, "scr") || !strcmp(w, "tpp"))
            return err_set(ERR_ARG, "suite '%s' is not available: Brown has no honest pair of "
                           "correlated labels for it (docs/eval.md)", w);
        else if (n) return err_set(ERR_ARG, "unknown suite '%s' (sparse_probing, absorption, all)", w);
        s += n;
        if (*s == ',') s++;
    }
    if (!*bits) return err_set(ERR_ARG, "no suite given");
    return OK;
}

/* A random-weight SAE of the same shape and architecture: decoder rows random unit vectors, the
 * encoder their transpose, b_enc 0, thresholds 0, the trained b_dec. */
static int random_sae(const sae_model *m, uint64_t seed, sae_model **out)
{
    int rc = sae_model_new(out, &m->cfg);
    if (rc) return rc;
    sae_model *r = *out;
    int D = m->cfg.d_sae, d = m->cfg.d_in, dout = sae_out_dim(&m->cfg);
    rng_state g;
    rng_seed(&g, seed ^ 0x52414e44ull);
    for (int j = 0; j < D; j++) {
        float *row = r->W_dec + (size_t)j * dout;
        double nr = 0;
        for (int i = 0; i < dout; i++) {
            row[i] = (float)rng_normal(&g);
            nr += (double)row[i] * row[i];
        }
        for (int i = 0; i < dout; i++) row[i] = (float)(row[i] / sqrt(nr));
    }
    for (int i = 0; i < d; i++)
        for (int j = 0; j < D; j++) r->W_enc[(size_t)i * D + j] = r->W_dec[(size_t)j * dout + i];
    memcpy(r->b_dec, m->b_dec, (size_t)dout * sizeof *r->b_dec);
    return OK;
}

/* ---- shared state -------------------------------------------------------------------------------- */
typedef struct {
    int n;               /* rows */
    float *raw;          /* [n, d] */
    eval_csr sae, rnd;
    int *cls;            /* class per row */
    unsigned char *test; /* 1 = from a test document */
} sample_set;

static void set_free(sample_set *s)
{
    mem_free(s->raw);
    eval_csr_free(&s->sae);
    eval_csr_free(&s->rnd);
    mem_free(s->cls);
    mem_free(s->test);
}

typedef struct {
    const eval_opts *o;
    store *s;
    store_hook hook;
    sae_model *sae, *rnd;
    char sae_dir[4096];
    int64_t sae_id;      /* -1 until known */
    store_eval_seq *seqs;
    size_t nseq;
    char (*genres)[32];
    int ngenres;
    int *chosen;         /* indices into seqs, ascending */
    int nchosen;
    unsigned char *seq_test; /* [nseq] */
    sample_set tok, seq; /* POS tokens; pooled sequences */
    int64_t run_sp, run_abs;
} ctx;

static int genre_index(ctx *c, const char *g)
{
    for (int i = 0; i < c->ngenres; i++)
        if (!strcmp(c->genres[i], g)) return i;
    if (c->ngenres >= 64) return -1;
    snprintf(c->genres[c->ngenres], 32, "%s", g);
    return c->ngenres++;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* Genres, the split by document, and the sampled sequences. */
static int plan_sequences(ctx *c, eval_result *res)
{
    const eval_opts *o = c->o;
    int rc = store_eval_seqs(c->s, c->hook.id, &c->seqs, &c->nseq);
    if (rc) return rc;
    if (!c->nseq) return err_set(ERR_NOTFOUND, "%s: hook %s has no stored activations", o->db, c->hook.name);
    c->genres = mem_calloc(64, sizeof *c->genres);
    int *grp = mem_alloc(c->nseq * sizeof *grp);
    int64_t *docs = mem_alloc(c->nseq * sizeof *docs);
    c->seq_test = mem_alloc(c->nseq);
    int *dgrp = mem_alloc(c->nseq * sizeof *dgrp);
    unsigned char *dtest = mem_alloc(c->nseq);
    if (!c->genres || !grp || !docs || !c->seq_test || !dgrp || !dtest) {
        rc = err_set(ERR_NOMEM, "out of memory for %zu sequences", c->nseq);
        goto out;
    }
    for (size_t i = 0; i < c->nseq; i++) {
        grp[i] = genre_index(c, c->seqs[i].genre);
        docs[i] = c->seqs[i].doc_id;
    }
    qsort(docs, c->nseq, sizeof *docs, cmp_i64);
    size_t nd = 0;
    for (size_t i = 0; i < c->nseq; i++)
        if (!nd || docs[nd - 1] != docs[i]) docs[nd++] = docs[i];
    for (size_t i = 0; i < c->nseq; i++) { /* a document's genre: that of its sequences */
        int64_t *p = bsearch(&c->seqs[i].doc_id, docs, nd, sizeof *docs, cmp_i64);
        dgrp[p - docs] = grp[i];
    }
    if ((rc = eval_split_docs(docs, dgrp, nd, o->test_frac, o->seed, dtest))) goto out;
    for (size_t i = 0; i < nd; i++) {
        if (dtest[i]) res->n_test_docs++;
        else res->n_train_docs++;
    }
    for (size_t i = 0; i < c->nseq; i++) {
        int64_t *p = bsearch(&c->seqs[i].doc_id, docs, nd, sizeof *docs, cmp_i64);
        c->seq_test[i] = dtest[p - docs];
    }
    /* up to seqs_per_genre sequences of each genre, a seeded choice */
    c->chosen = mem_alloc(c->nseq * sizeof *c->chosen);
    int *perm = mem_alloc(c->nseq * sizeof *perm);
    if (!c->chosen || !perm) {
        mem_free(perm);
        rc = err_set(ERR_NOMEM, "out of memory");
        goto out;
    }
    rng_state r;
    rng_seed(&r, o->seed ^ 0x53455153ull);
    for (int g = 0; g < c->ngenres; g++) {
        int n = 0;
        for (size_t i = 0; i < c->nseq; i++)
            if (grp[i] == g) perm[n++] = (int)i;
        for (int i = n - 1; i > 0; i--) {
            int j = (int)rng_below(&r, (uint64_t)i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int i = 0; i < n && i < o->seqs_per_genre; i++) c->chosen[c->nchosen++] = perm[i];
    }
    qsort(c->chosen, (size_t)c->nchosen, sizeof *c->chosen, cmp_int);
    mem_free(perm);
    c->seq.cls = mem_alloc((size_t)c->nchosen * sizeof *c->seq.cls);
    c->seq.test = mem_alloc((size_t)c->nchosen);
    if (!c->seq.cls || !c->seq.test) {
        rc = err_set(ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int i = 0; i < c->nchosen; i++) {
        c->seq.cls[i] = grp[c->chosen[i]];
        c->seq.test[i] = c->seq_test[c->chosen[i]];
    }
    c->seq.n = c->nchosen;
out:
    mem_free(grp);
    mem_free(docs);
    mem_free(dgrp);
    mem_free(dtest);
    return rc;
}

typedef struct {
    int ci, pos;
} cand;

/* The POS token positions: per (class, split), a seeded choice of at most the pool size.
 * mark[off[ci] + pos] = class * 2 + test for a chosen position, else -1. */
static int plan_tokens(ctx *c, int **mark_out, int64_t **off_out)
{
    const eval_opts *o = c->o;
    int64_t *off = mem_alloc(((size_t)c->nchosen + 1) * sizeof *off);
    if (!off) return err_set(ERR_NOMEM, "out of memory");
    off[0] = 0;
    for (int i = 0; i < c->nchosen; i++) off[i + 1] = off[i] + c->seqs[c->chosen[i]].n_tokens;
    int *mark = mem_alloc(((size_t)off[c->nchosen] + 1) * sizeof *mark);
    cand *cd[EVAL_NPOS * 2] = {0};
    int nc[EVAL_NPOS * 2] = {0}, cc[EVAL_NPOS * 2] = {0};
    char (*tags)[16] = mem_alloc((size_t)c->hook.seq_len * sizeof *tags);
    int rc = mark && tags ? OK : err_set(ERR_NOMEM, "out of memory");
    for (int64_t q = 0; !rc && q < off[c->nchosen]; q++) mark[q] = -1;
    for (int i = 0; !rc && i < c->nchosen; i++) {
        const store_eval_seq *sq = &c->seqs[c->chosen[i]];
        int any = 0, T = sq->n_tokens;
        if (T > c->hook.seq_len) T = c->hook.seq_len;
        if ((rc = store_ana_seq_tags(c->s, sq->seq_id, T, tags, &any))) break;
        for (int t = sq->bos ? 1 : 0; any && t < T; t++) {
            int k = eval_pos_class(tags[t]);
            if (k < 0) continue;
            int b = k * 2 + c->seq_test[c->chosen[i]];
            if (nc[b] == cc[b]) {
                cc[b] = cc[b] ? 2 * cc[b] : 1024;
                cand *p = mem_realloc(cd[b], (size_t)cc[b] * sizeof *p);
                if (!p) {
                    rc = err_set(ERR_NOMEM, "out of memory for token candidates");
                    break;
                }
                cd[b] = p;
            }
            cd[b][nc[b]++] = (cand){i, t};
        }
        if (!rc && stopped(o)) rc = err_set(ERR_ABORTED, "interrupted");
    }
    rng_state r;
    rng_seed(&r, o->seed ^ 0x544f4b53ull);
    for (int b = 0; !rc && b < EVAL_NPOS * 2; b++) {
        int cap = b % 2 ? o->test_per_class : o->train_per_class;
        int take = nc[b] < cap ? nc[b] : cap;
        for (int i = 0; i < take; i++) { /* partial Fisher-Yates: the first take are the choice */
            int j = i + (int)rng_below(&r, (uint64_t)(nc[b] - i));
            cand t = cd[b][i];
            cd[b][i] = cd[b][j];
            cd[b][j] = t;
            mark[off[cd[b][i].ci] + cd[b][i].pos] = b;
        }
    }
    for (int b = 0; b < EVAL_NPOS * 2; b++) mem_free(cd[b]);
    mem_free(tags);
    if (rc) {
        mem_free(mark);
        mem_free(off);
        return rc;
    }
    *mark_out = mark;
    *off_out = off;
    return OK;
}

/* One pass over the chosen sequences: pooled rows for the genre tasks, token rows for POS. */
static int read_pass(ctx *c, const int *mark, const int64_t *off)
{
    const int d = c->hook.width, D = c->sae->cfg.d_sae, Tm = c->hook.seq_len;
    int64_t ntok = 0;
    for (int64_t q = 0; q < off[c->nchosen]; q++) ntok += mark[q] >= 0;
    c->tok.raw = mem_alloc(((size_t)ntok + 1) * d * sizeof *c->tok.raw);
    c->tok.cls = mem_alloc(((size_t)ntok + 1) * sizeof *c->tok.cls);
    c->tok.test = mem_alloc((size_t)ntok + 1);
    c->seq.raw = mem_alloc(((size_t)c->nchosen + 1) * d * sizeof *c->seq.raw);
    float *x = mem_alloc((size_t)Tm * d * sizeof *x);
    float *f = mem_alloc((size_t)Tm * D * sizeof *f), *g = mem_alloc((size_t)Tm * D * sizeof *g);
    float *pf = mem_alloc((size_t)D * sizeof *pf), *pg = mem_alloc((size_t)D * sizeof *pg);
    int rc = c->tok.raw && c->tok.cls && c->tok.test && c->seq.raw && x && f && g && pf && pg
                 ? OK : err_set(ERR_NOMEM, "out of memory for %lld token rows", (long long)ntok);
    progress pr;
    progress_begin(&pr, "eval read", (double)c->nchosen, "seq");
    for (int i = 0; !rc && i < c->nchosen; i++) {
        const store_eval_seq *sq = &c->seqs[c->chosen[i]];
        int T = 0;
        if ((rc = store_act_read(c->s, c->hook.id, sq->seq_id, x, &T))) break;
        if ((rc = sae_encode(c->sae, x, T, f)) || (rc = sae_encode(c->rnd, x, T, g))) break;
        int t0 = sq->bos && T > 1 ? 1 : 0; /* BOS masked, as SAEBench pools */
        float *pr_raw = c->seq.raw + (size_t)i * d;
        memset(pr_raw, 0, (size_t)d * sizeof *pr_raw);
        memset(pf, 0, (size_t)D * sizeof *pf);
        memset(pg, 0, (size_t)D * sizeof *pg);
        for (int t = t0; t < T; t++) {
            for (int j = 0; j < d; j++) pr_raw[j] += x[(size_t)t * d + j];
            for (int j = 0; j < D; j++) {
                pf[j] += f[(size_t)t * D + j];
                pg[j] += g[(size_t)t * D + j];
            }
            int b = t < off[i + 1] - off[i] ? mark[off[i] + t] : -1;
            if (b < 0) continue;
            int row = c->tok.n++;
            memcpy(c->tok.raw + (size_t)row * d, x + (size_t)t * d, (size_t)d * sizeof *x);
            c->tok.cls[row] = b / 2;
            c->tok.test[row] = (unsigned char)(b % 2);
            if ((rc = eval_csr_push(&c->tok.sae, f + (size_t)t * D, D)) ||
                (rc = eval_csr_push(&c->tok.rnd, g + (size_t)t * D, D)))
                break;
        }
        double inv = T > t0 ? 1.0 / (T - t0) : 0;
        for (int j = 0; j < d; j++) pr_raw[j] = (float)(pr_raw[j] * inv);
        for (int j = 0; j < D; j++) {
            pf[j] = (float)(pf[j] * inv);
            pg[j] = (float)(pg[j] * inv);
        }
        if (!rc) rc = eval_csr_push(&c->seq.sae, pf, D);
        if (!rc) rc = eval_csr_push(&c->seq.rnd, pg, D);
        if (!rc && stopped(c->o)) rc = err_set(ERR_ABORTED, "interrupted");
        progress_update(&pr, (double)(i + 1), "%d token rows", c->tok.n);
    }
    progress_end(&pr);
    mem_free(x);
    mem_free(f);
    mem_free(g);
    mem_free(pf);
    mem_free(pg);
    return rc;
}

/* ---- the suites ---------------------------------------------------------------------------- */
typedef struct {
    int *rows;
    unsigned char *y;
    int n;
} labelled;

static void lab_free(labelled *l)
{
    mem_free(l->rows);
    mem_free(l->y);
}

/* The balanced one-vs-rest train and test sets of class k in a sample set. */
static int task_sets(const sample_set *s, int k, int nclasses, int max_tr, int max_te,
                     uint64_t seed, labelled *tr, labelled *te)
{
    int *cls = mem_alloc(((size_t)s->n + 1) * sizeof *cls);
    tr->rows = mem_alloc(((size_t)s->n + 1) * 2 * sizeof *tr->rows);
    tr->y = mem_alloc(((size_t)s->n + 1) * 2);
    te->rows = mem_alloc(((size_t)s->n + 1) * 2 * sizeof *te->rows);
    te->y = mem_alloc(((size_t)s->n + 1) * 2);
    int rc = cls && tr->rows && tr->y && te->rows && te->y ? OK : err_set(ERR_NOMEM, "out of memory");
    for (int pass = 0; !rc && pass < 2; pass++) {
        for (int i = 0; i < s->n; i++) cls[i] = s->test[i] == pass ? s->cls[i] : -1;
        labelled *l = pass ? te : tr;
        rc = eval_balance(cls, s->n, k, nclasses, pass ? max_te : max_tr, seed + (uint64_t)pass,
                          l->rows, l->y, &l->n);
    }
    mem_free(cls);
    return rc;
}

static int json_ints(buf *b, const int *v, int n)
{
    buf_reset(b);
    int rc = buf_str(b, "[");
    for (int i = 0; !rc && i < n; i++) rc = buf_printf(b, "%s%d", i ? "," : "", v[i]);
    if (!rc) rc = buf_str(b, "]");
    return rc;
}

typedef struct {
    double sum[3][EVAL_NK], sum_kind[2][3][EVAL_NK], full, full_kind[2];
    int n, n_kind[2];
} sp_acc;

static int probe_task(ctx *c, const sample_set *s, int kind, const char *task, const labelled *tr,
                      const labelled *te, sp_acc *acc, buf *b)
{
    const int d = c->hook.width;
    const char *dict_names[3] = {"sae", "random_sae", "neurons"};
    eval_feats feats[3] = {{.sparse = &s->sae}, {.sparse = &s->rnd}, {.dense = s->raw, .d = d}};
    double *sc = mem_alloc(((size_t)tr->n + te->n + 1) * sizeof *sc);
    if (!sc) return err_set(ERR_NOMEM, "out of memory");
    int rc = OK, cols[20];
    const char *kn = kind ? "genre" : "pos";
    for (int di = 0; !rc && di < 3; di++) {
        int W = di < 2 ? c->sae->cfg.d_sae : d, kmax = W < 20 ? W : 20;
        if ((rc = eval_top_mean_diff(&feats[di], tr->rows, tr->y, tr->n, kmax, cols))) break;
        for (int ki = 0; !rc && ki < EVAL_NK; ki++) {
            int k = eval_k_values[ki] < kmax ? eval_k_values[ki] : kmax;
            eval_probe p;
            if ((rc = eval_logreg(&feats[di], tr->rows, tr->y, tr->n, cols, k, c->o->C, 0, &p))) break;
            eval_scores(&p, &feats[di], tr->rows, tr->n, cols, k, sc);
            double tra = eval_accuracy(sc, tr->y, tr->n);
            eval_scores(&p, &feats[di], te->rows, te->n, cols, k, sc);
            double tea = eval_accuracy(sc, te->y, te->n);
            eval_probe_free(&p);
            acc->sum[di][ki] += tea;
            acc->sum_kind[kind][di][ki] += tea;
            if (!(rc = json_ints(b, cols, k)))
                rc = store_eval_probe(c->s, c->run_sp, task, kn, dict_names[di], k, tr->n, te->n,
                                      tra, tea, b->p);
        }
    }
    if (!rc) { /* the full hook activations */
        eval_probe p;
        rc = eval_logreg(&feats[2], tr->rows, tr->y, tr->n, NULL, 0, c->o->C, 0, &p);
        if (!rc) {
            eval_scores(&p, &feats[2], tr->rows, tr->n, NULL, 0, sc);
            double tra = eval_accuracy(sc, tr->y, tr->n);
            eval_scores(&p, &feats[2], te->rows, te->n, NULL, 0, sc);
            double tea = eval_accuracy(sc, te->y, te->n);
            eval_probe_free(&p);
            acc->full += tea;
            acc->full_kind[kind] += tea;
            rc = store_eval_probe(c->s, c->run_sp, task, kn, "full", d, tr->n, te->n, tra, tea, NULL);
        }
    }
    if (!rc) {
        acc->n++;
        acc->n_kind[kind]++;
    }
    mem_free(sc);
    return rc;
}

static int usable(const labelled *tr, const labelled *te)
{
    int ptr = 0, pte = 0;
    for (int i = 0; i < tr->n; i++) ptr += tr->y[i];
    for (int i = 0; i < te->n; i++) pte += te->y[i];
    return ptr >= 2 && ptr < tr->n && pte >= 1 && pte < te->n;
}

/* metric fmt names one with "%d" for k (metric_k) or none (metric) */
static int metric_k(ctx *c, int64_t run, const char *fmt, int k, double v)
{
    char name[96];
    snprintf(name, sizeof name, fmt, k);
    return store_eval_metric(c->s, run, name, v);
}

static int metric(ctx *c, int64_t run, const char *name, double v)
{
    return store_eval_metric(c->s, run, name, v);
}

static int run_sparse_probing(ctx *c, eval_result *res)
{
    sp_acc acc;
    memset(&acc, 0, sizeof acc);
    buf b = {0};
    int rc = OK;
    char task[96];
    progress pr;
    progress_begin(&pr, "eval probes", EVAL_NPOS + c->ngenres, "task");
    for (int kind = 0; !rc && kind < 2; kind++) {
        const sample_set *s = kind ? &c->seq : &c->tok;
        int ncls = kind ? c->ngenres : EVAL_NPOS;
        if (ncls < 2) continue; /* one genre (or none recorded): no genre tasks */
        for (int k = 0; !rc && k < ncls; k++) {
            labelled tr = {0}, te = {0};
            int cap = c->o->train_per_class, capt = c->o->test_per_class;
            rc = task_sets(s, k, ncls, cap, capt, c->o->seed + 7919u * (uint64_t)(kind * 64 + k), &tr, &te);
            snprintf(task, sizeof task, "%s:%s", kind ? "genre" : "pos",
                     kind ? c->genres[k] : eval_pos_names[k]);
            if (!rc && usable(&tr, &te)) rc = probe_task(c, s, kind, task, &tr, &te, &acc, &b);
            lab_free(&tr);
            lab_free(&te);
            if (!rc && stopped(c->o)) rc = err_set(ERR_ABORTED, "interrupted");
            progress_update(&pr, kind * EVAL_NPOS + k + 1, "%s", task);
        }
    }
    progress_end(&pr);
    if (!rc && acc.n == 0) rc = err_set(ERR_NOTFOUND, "%s: no probing task has train and test rows "
                                        "(no POS tags and a single genre?)", c->o->db);
    res->n_tasks = acc.n;
    res->n_pos_tasks = acc.n_kind[0];
    res->n_genre_tasks = acc.n_kind[1];
    for (int ki = 0; !rc && ki < EVAL_NK; ki++) {
        int k = eval_k_values[ki];
        res->sae_acc[ki] = acc.sum[0][ki] / acc.n;
        res->rnd_acc[ki] = acc.sum[1][ki] / acc.n;
        res->neuron_acc[ki] = acc.sum[2][ki] / acc.n;
        rc = metric_k(c, c->run_sp, "sparse_probing_top%d_acc", k, res->sae_acc[ki]);
        if (!rc) rc = metric_k(c, c->run_sp, "sparse_probing_random_top%d_acc", k, res->rnd_acc[ki]);
        if (!rc) rc = metric_k(c, c->run_sp, "sparse_probing_neurons_top%d_acc", k, res->neuron_acc[ki]);
        for (int kind = 0; !rc && kind < 2; kind++)
            if (acc.n_kind[kind])
                rc = metric_k(c, c->run_sp, kind ? "sparse_probing_genre_top%d_acc" : "sparse_probing_pos_top%d_acc",
                            k, acc.sum_kind[kind][0][ki] / acc.n_kind[kind]);
    }
    if (!rc) {
        res->full_acc = acc.full / acc.n;
        rc = metric(c, c->run_sp, "sparse_probing_full_acc", res->full_acc);
    }
    if (!rc) rc = metric(c, c->run_sp, "sparse_probing_n_tasks", acc.n);
    buf_free(&b);
    return rc;
}

static int run_absorption(ctx *c, eval_result *res)
{
    eval_abs_params p;
    eval_abs_defaults(&p);
    p.C = c->o->C;
    buf b = {0};
    int rc = OK;
    double sf = 0, sr = 0, ss = 0;
    eval_feats f = {.dense = c->tok.raw, .d = c->hook.width, .sparse = &c->tok.sae};
    for (int k = 0; !rc && k < EVAL_NPOS; k++) {
        labelled tr = {0}, te = {0};
        rc = task_sets(&c->tok, k, EVAL_NPOS, c->o->train_per_class, c->o->test_per_class,
                       c->o->seed + 7919u * (uint64_t)k, &tr, &te);
        if (!rc && usable(&tr, &te)) {
            eval_abs_class r;
            res->abs_parents++;
            rc = eval_absorption_class(&f, tr.rows, tr.y, tr.n, &f, te.rows, te.y, NULL, te.n,
                                       c->sae->W_dec, c->sae->cfg.d_sae, &p, &r);
            if (!rc) rc = json_ints(&b, r.split, r.n_split);
            if (!rc)
                rc = store_eval_absorption(c->s, c->run_abs, eval_pos_names[k], r.gt_f1, r.included,
                                           b.p, r.n_split, r.split_f1, r.n_tp, r.n_fn,
                                           r.mean_frac, r.full_rate);
            if (!rc && r.included) {
                res->abs_included++;
                sf += r.mean_frac;
                sr += r.full_rate;
                ss += r.n_split;
            }
        }
        lab_free(&tr);
        lab_free(&te);
        if (!rc && stopped(c->o)) rc = err_set(ERR_ABORTED, "interrupted");
    }
    int n = res->abs_included;
    res->abs_mean_frac = n ? sf / n : NAN;
    res->abs_full_rate = n ? sr / n : NAN;
    res->abs_mean_split = n ? ss / n : NAN;
    if (!rc) rc = metric(c, c->run_abs, "absorption_mean_frac", res->abs_mean_frac);
    if (!rc) rc = metric(c, c->run_abs, "absorption_full_rate", res->abs_full_rate);
    if (!rc) rc = metric(c, c->run_abs, "absorption_mean_split", res->abs_mean_split);
    if (!rc) rc = metric(c, c->run_abs, "absorption_n_parents", n);
    buf_free(&b);
    return rc;
}

/* ---- the runner ------------------------------------------------------------------------------ */
static int is_id(const char *s) { return s[0] && strspn(s, "0123456789") == strlen(s); }

/* The SAE: a directory, or a registry id of the database (a relative directory recorded there is
 * tried from here, then from the database's directory). */
static int resolve_sae(ctx *c)
{
    const eval_opts *o = c->o;
    struct stat st;
    c->sae_id = -1;
    snprintf(c->sae_dir, sizeof c->sae_dir, "%s", o->sae);
    if (stat(o->sae, &st) != 0 && is_id(o->sae)) {
        int64_t id = strtoll(o->sae, NULL, 10);
        int64_t n = -1;
        int rc = store_count_rows(c->s, "sae_registry", &n);
        if (!rc && n < 0) rc = err_set(ERR_NOTFOUND, "%s: no SAE registry, so '%s' is no SAE id", o->db, o->sae);
        if (!rc) rc = store_sae_dir(c->s, id, c->sae_dir, sizeof c->sae_dir);
        if (rc) return rc;
        const char *slash = strrchr(o->db, '/');
        if (c->sae_dir[0] != '/' && stat(c->sae_dir, &st) != 0 && slash) {
            char alt[4096];
            if (path_fmt(alt, sizeof alt, "%.*s/%s", (int)(slash - o->db), o->db, c->sae_dir) == OK &&
                stat(alt, &st) == 0)
                snprintf(c->sae_dir, sizeof c->sae_dir, "%s", alt);
        }
        c->sae_id = id;
    }
    return sae_load(&c->sae, c->sae_dir);
}

static int register_sae(ctx *c, eval_result *res)
{
    if (c->sae_id >= 0) return OK;
    int rc = store_eval_sae_find(c->s, c->sae_dir, &c->sae_id);
    if (rc != ERR_NOTFOUND) return rc;
    err_clear();
    const sae_config *cf = &c->sae->cfg;
    store_sae_row row = {.dir = c->sae_dir, .architecture = sae_arch_name(cf->arch),
                         .hook_name = c->hook.name, .model_name = cf->model_name[0] ? cf->model_name : NULL,
                         .config_json = "{}", .d_in = cf->d_in, .d_sae = cf->d_sae, .k = cf->k,
                         .hook_id = c->hook.id};
    rc = store_sae_register(c->s, &row, &c->sae_id);
    if (!rc) res->registered = 1;
    return rc;
}

static int config_json(const ctx *c, buf *b)
{
    const eval_opts *o = c->o;
    eval_abs_params p;
    eval_abs_defaults(&p);
    return buf_printf(b, "{\"seed\":%llu,\"test_frac\":%g,\"seqs_per_genre\":%d,\"train_per_class\":%d,"
                      "\"test_per_class\":%d,\"C\":%g,\"k\":[1,2,5,10,20],\"solver\":\"liblinear "
                      "L2R_LR, bias as a regularised feature\",\"absorption\":{\"min_gt_f1\":%g,"
                      "\"max_k\":%d,\"f1_jump\":%g,\"l1_decay\":%g}}",
                      (unsigned long long)o->seed, o->test_frac, o->seqs_per_genre,
                      o->train_per_class, o->test_per_class, o->C, p.min_gt_f1, p.max_k, p.f1_jump,
                      p.l1_decay);
}

int eval_run(const eval_opts *o, eval_result *res)
{
    memset(res, 0, sizeof *res);
    double t0 = now_seconds();
    if (!o->db || !o->sae) return err_set(ERR_ARG, "eval: needs a database and an SAE");
    if (!(o->test_frac > 0 && o->test_frac < 1) || o->seqs_per_genre < 1 || o->train_per_class < 2 ||
        o->test_per_class < 1 || !(o->C > 0))
        return err_set(ERR_ARG, "eval: test_frac in (0, 1), counts >= 1, C > 0");
    int bits;
    int rc = parse_suites(o->suites, &bits);
    if (rc) return rc;
    ctx c = {.o = o, .run_sp = -1, .run_abs = -1};
    int *mark = NULL;
    int64_t *off = NULL;
    buf cfg = {0};
    int in_tx = 0;
    if ((rc = store_open(&c.s, o->db, 0))) goto out;
    if ((rc = resolve_sae(&c))) goto out;
    if (c.sae->cfg.transcoder) {
        rc = err_set(ERR_ARG, "%s: a transcoder; the evaluations need an SAE of its input hook", c.sae_dir);
        goto out;
    }
    if (!c.sae->cfg.hook_name[0]) {
        rc = err_set(ERR_ARG, "%s: the SAE's cfg.json names no hook_name", c.sae_dir);
        goto out;
    }
    if ((rc = store_hook_find(c.s, c.sae->cfg.hook_name, &c.hook))) goto out;
    snprintf(res->hook, sizeof res->hook, "%s", c.hook.name);
    if (c.hook.width != c.sae->cfg.d_in) {
        rc = err_set(ERR_SHAPE, "%s: the SAE reads %d values per token but %s stores %d at %s",
                     c.sae_dir, c.sae->cfg.d_in, o->db, c.hook.width, c.hook.name);
        goto out;
    }
    if ((rc = random_sae(c.sae, o->seed, &c.rnd))) goto out;
    if ((rc = plan_sequences(&c, res))) goto out;
    if ((rc = plan_tokens(&c, &mark, &off))) goto out;
    double t1 = now_seconds();
    if ((rc = read_pass(&c, mark, off))) goto out;
    res->n_seqs = (size_t)c.nchosen;
    res->t_read = now_seconds() - t1;
    if ((bits & EVAL_SUITE_ABSORPTION) && c.tok.n == 0) {
        rc = err_set(ERR_NOTFOUND, "%s: no POS-tagged tokens for the absorption suite", o->db);
        goto out;
    }
    /* everything is in memory: now the tables, in one transaction */
    if ((rc = config_json(&c, &cfg))) goto out;
    if ((rc = store_eval_init(c.s)) || (rc = store_begin(c.s))) goto out;
    in_tx = 1;
    if ((rc = register_sae(&c, res))) goto out;
    res->sae_id = c.sae_id;
    if (bits & EVAL_SUITE_SPARSE_PROBING) {
        double ts = now_seconds();
        if ((rc = store_eval_run_begin(c.s, c.sae_id, "sparse_probing", c.hook.name, cfg.p,
                                       c.nchosen, &c.run_sp)) ||
            (rc = run_sparse_probing(&c, res)))
            goto out;
        res->t_probe = now_seconds() - ts;
    }
    if (bits & EVAL_SUITE_ABSORPTION) {
        double ts = now_seconds();
        if ((rc = store_eval_run_begin(c.s, c.sae_id, "absorption", c.hook.name, cfg.p,
                                       c.nchosen, &c.run_abs)) ||
            (rc = run_absorption(&c, res)))
            goto out;
        res->t_absorb = now_seconds() - ts;
    }
    res->suites = bits;
    res->seconds = now_seconds() - t0;
    for (int i = 0; i < 2; i++) {
        int64_t run = i ? c.run_abs : c.run_sp;
        if (run >= 0 && (rc = metric(&c, run, "seconds", res->seconds))) goto out;
    }
    rc = store_commit(c.s);
    in_tx = 0;
out:
    if (in_tx) store_rollback(c.s);
    if (rc) res->suites = 0;
    buf_free(&cfg);
    mem_free(mark);
    mem_free(off);
    set_free(&c.tok);
    set_free(&c.seq);
    mem_free(c.seqs);
    mem_free(c.genres);
    mem_free(c.chosen);
    mem_free(c.seq_test);
    sae_free(c.sae);
    sae_free(c.rnd);
    store_close(c.s);
    return rc;
}
