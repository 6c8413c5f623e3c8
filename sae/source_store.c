/* source_store.c - sae_source over the activations of one hook in the store: random sequence
 * order (store_iter) plus a token shuffle buffer (see sae_train.h). The paired mode (transcoders)
 * reads a second hook's activations of the same sequence and yields rows [x | y]. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "extract/extract.h"
#include "sae/sae_train.h"
#include "store/store.h"
#include "store/store_sae.h"

typedef struct {
    store *s;
    store_iter *it;
    int width, seq_len, skip_bos;
    int w_in;         /* paired: the first hook's width (width = w_in + the second's); else width */
    int64_t hook_out; /* paired: the second hook's id, else -1 */
    float *seq_in, *seq_out; /* paired: one sequence of each hook */
    float *seq;       /* [seq_len, width] the sequence being drained */
    int seq_T, seq_pos;
    float *buf;       /* [cap, width] */
    int64_t cap, fill;
    int64_t *bos;     /* sorted ids of sequences starting with BOS */
    size_t nbos;
    double max_ratio, norm_cap; /* drop tokens with norm > norm_cap (= max_ratio * mean norm) */
    int64_t dropped;
    rng_state rng;
    int one_pass, done; /* a held-out source: one pass, then the buffer drains (no repeats) */
} store_src;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Next token row from the sequence stream into dst; new passes reshuffle the sequence order. */
static int stream_next(store_src *m, float *dst)
{
    int passes = 0;
    while (m->seq_pos >= m->seq_T) {
        int64_t sid;
        int rc = store_iter_next(m->it, m->hook_out >= 0 ? m->seq_in : m->seq, &m->seq_T, &sid);
        if (rc) return rc;
        if (m->hook_out >= 0 && m->seq_T > 0) {
            /* the same sequence at the output hook, token by token beside the input */
            int T2 = 0, wo = m->width - m->w_in;
            rc = store_act_read(m->s, m->hook_out, sid, m->seq_out, &T2);
            if (rc) return err_wrap(rc, "paired source: sequence %lld", (long long)sid);
            if (T2 != m->seq_T)
                return err_set(ERR_SHAPE, "paired source: sequence %lld has %d tokens at one hook "
                               "and %d at the other", (long long)sid, m->seq_T, T2);
            for (int t = 0; t < m->seq_T; t++) {
                memcpy(m->seq + (int64_t)t * m->width, m->seq_in + (int64_t)t * m->w_in,
                       sizeof(float) * m->w_in);
                memcpy(m->seq + (int64_t)t * m->width + m->w_in, m->seq_out + (int64_t)t * wo,
                       sizeof(float) * wo);
            }
        }
        if (m->seq_T == 0) {
            if (m->one_pass) { /* dst untouched: the caller drains its buffer */
                m->done = 1;
                return OK;
            }
            if (++passes > 1) return err_set(ERR_NOTFOUND, "activation source: the split is empty");
            store_iter_shuffle(m->it, rng_next(&m->rng));
            continue;
        }
        m->seq_pos = 0;
        if (m->skip_bos && m->nbos && bsearch(&sid, m->bos, m->nbos, sizeof *m->bos, cmp_i64)) m->seq_pos = 1;
    }
    memcpy(dst, m->seq + (int64_t)m->seq_pos * m->width, sizeof(float) * m->width);
    m->seq_pos++;
    return OK;
}

static double row_norm(const float *x, int w)
{
    double ss = 0;
    for (int i = 0; i < w; i++) ss += (double)x[i] * x[i];
    return sqrt(ss);
}

/* stream_next, skipping tokens above the norm cap once it is known */
static int stream_next_kept(store_src *m, float *dst)
{
    for (int64_t tries = 0;; tries++) {
        int rc = stream_next(m, dst);
        if (rc || m->done || m->norm_cap <= 0 || row_norm(dst, m->w_in) <= m->norm_cap) return rc;
        m->dropped++;
        if (tries > 1000000)
            return err_set(ERR_ARG, "activation source: no token below the norm cap %g", m->norm_cap);
    }
}

static int store_next(sae_source *src, float *x, int B)
{
    store_src *m = src->impl;
    int rc = OK;
    while (m->fill < m->cap && !m->done && !rc) {
        rc = stream_next(m, m->buf + m->fill * m->width);
        if (!m->done) m->fill++;
    }
    if (!rc && m->max_ratio > 0 && m->norm_cap <= 0) {
        /* the cap comes from the first full buffer: ratio x its mean token norm; buffered tokens
           above it are replaced */
        double sum = 0;
        for (int64_t r = 0; r < m->fill; r++) sum += row_norm(m->buf + r * m->width, m->w_in);
        m->norm_cap = m->max_ratio * sum / (double)m->fill;
        for (int64_t r = 0; r < m->fill && !rc; r++)
            if (row_norm(m->buf + r * m->width, m->w_in) > m->norm_cap) {
                m->dropped++;
                rc = stream_next_kept(m, m->buf + r * m->width);
            }
    }
    for (int b = 0; b < B && !rc; b++) {
        if (m->fill == 0)
            return err_set(ERR_NOTFOUND, "activation source: the held-out split has fewer tokens "
                           "than asked");
        /* emit a random buffered token and put the next streamed token in its place (one_pass,
           past the split's end: the last buffered token) */
        int64_t r = (int64_t)(rng_next(&m->rng) % (uint64_t)m->fill);
        float *row = m->buf + r * m->width;
        memcpy(x + (int64_t)b * m->width, row, sizeof(float) * m->width);
        if (!m->done) rc = stream_next_kept(m, row);
        if (!rc && m->done && --m->fill != r)
            memcpy(row, m->buf + m->fill * m->width, sizeof(float) * m->width);
    }
    return rc;
}

/* at least the buffered rows; before the first read, unknown (n_rows bounds what is asked) */
static int64_t store_rows_left(sae_source *src)
{
    const store_src *m = src->impl;
    if (m->done) return m->fill;
    return m->fill > 0 ? m->fill : INT64_MAX;
}

static void store_src_close(sae_source *src)
{
    store_src *m = src->impl;
    store_iter_close(m->it);
    store_close(m->s);
    mem_free(m->seq);
    mem_free(m->seq_in);
    mem_free(m->seq_out);
    mem_free(m->buf);
    mem_free(m->bos);
    mem_free(m);
    mem_free(src);
}

int64_t sae_source_store_dropped(const sae_source *src)
{
    return ((const store_src *)src->impl)->dropped;
}

int sae_source_store(sae_source **out, const char *db, const char *hook, int split,
                     double val_frac, uint64_t seed, int64_t shuffle_tokens, int skip_bos,
                     double max_norm_ratio, sae_store_info *info)
{
    return sae_source_store_pair(out, db, hook, NULL, split, val_frac, seed, shuffle_tokens,
                                 skip_bos, max_norm_ratio, info);
}

/* sae_store_pair_check on the two hooks found (sae_source_store_pair has them already) */
static int pair_check(store *s, const char *db, const store_hook *h, const store_hook *ho)
{
    const char *hook = h->name, *hook_out = ho->name;
    int rc = OK;
    if (ho->model_id != h->model_id || ho->seq_len != h->seq_len)
        rc = err_set(ERR_ARG, "%s: hooks %s and %s come from different extracts (model or "
                     "sequence length); store both with one multi-hook extract", db, hook,
                     hook_out);
    int pi = -1, po = -1;
    if (!rc) rc = ext_hook_precision(s, hook, &pi);
    if (!rc) rc = ext_hook_precision(s, hook_out, &po);
    if (!rc && pi >= 0 && po >= 0 && pi != po)
        rc = err_set(ERR_ARG, "%s: hooks %s and %s come from extracts of different precision "
                     "(%s and %s): a transcoder's pairs are of one forward pass; store both "
                     "with one multi-hook extract", db, hook, hook_out, pi ? "bf16" : "fp32",
                     po ? "bf16" : "fp32");
    /* and of the same windows: two extract runs over another corpus path or --bos choice (or
       two imports) passed the checks above, and training failed at its first sequence with
       "no activations of hook H for sequence N", the cause unsaid (a review). One run stopped
       sooner (another --max-tokens, an unfinished extract) stores fewer of the same windows:
       the line named only the first causes for it (a later review) */
    int64_t nu = 0, first = -1;
    if (!rc) rc = store_hook_unpaired(s, h->id, ho->id, &nu, &first);
    if (!rc && nu > 0)
        rc = err_set(ERR_ARG, "%s: %lld of hook %s's %lld sequences hold no activations of %s "
                     "(sequence %lld the first): the two were stored over other windows (extract "
                     "runs with another --corpus path, --bos choice or --max-tokens, one left "
                     "unfinished, or two imports); a transcoder's pairs are of one forward pass; "
                     "store both with one multi-hook extract (imports: the second with "
                     "import --pair-with)", db,
                     (long long)nu, hook, (long long)h->n_seqs, hook_out, (long long)first);
    return rc;
}

int sae_store_pair_check(store *s, const char *db, const char *hook, const char *hook_out)
{
    store_hook h, ho;
    int rc = store_hook_find(s, hook, &h);
    if (!rc) rc = store_hook_find(s, hook_out, &ho);
    return rc ? rc : pair_check(s, db, &h, &ho);
}

int sae_source_store_pair(sae_source **out, const char *db, const char *hook, const char *hook_out,
                          int split, double val_frac, uint64_t seed, int64_t shuffle_tokens,
                          int skip_bos, double max_norm_ratio, sae_store_info *info)
{
    *out = NULL;
    store_src *m = mem_calloc(1, sizeof *m);
    sae_source *src = mem_calloc(1, sizeof *src);
    if (!m || !src) {
        mem_free(m);
        mem_free(src);
        return err_set(ERR_NOMEM, "activation source: out of memory");
    }
    src->impl = m;
    src->next = store_next;
    src->close = store_src_close;
    if (split == STORE_SPLIT_VAL) src->rows_left = store_rows_left;
    store_hook h, ho;
    m->hook_out = -1;
    int rc = store_open(&m->s, db, STORE_READONLY);
    if (!rc) rc = store_hook_find(m->s, hook, &h);
    if (!rc && hook_out) {
        rc = store_hook_find(m->s, hook_out, &ho);
        if (!rc) rc = pair_check(m->s, db, &h, &ho);
    }
    if (!rc) rc = store_iter_open(&m->it, m->s, h.id, split, val_frac, seed);
    if (!rc && skip_bos) rc = store_sae_bos_seqs(m->s, &m->bos, &m->nbos);
    if (!rc) {
        m->w_in = h.width;
        m->width = h.width + (hook_out ? ho.width : 0);
        m->hook_out = hook_out ? ho.id : -1;
        m->seq_len = h.seq_len;
        m->skip_bos = skip_bos;
        m->max_ratio = max_norm_ratio;
        /* the held-out split is read for evaluation: each token once, never a second pass (it
           wrapped when the split was smaller than the tokens asked plus the buffer, so tokens
           counted twice and others never, an audit) */
        m->one_pass = split == STORE_SPLIT_VAL;
        int64_t avail = store_iter_tokens(m->it);
        /* the BOS positions skipped are those of the sequences that have one (n_rows below):
           counting one per sequence refused every store of 1-token sequences without BOS
           (import --seq-len 1: "no activations in the training split", a user's run) */
        if (avail <= (skip_bos ? (int64_t)store_iter_count_in(m->it, m->bos, m->nbos) : 0))
            rc = err_set(ERR_NOTFOUND, "%s: hook %s has no activations in the %s split", db, hook,
                         split == STORE_SPLIT_VAL ? "validation" : "training");
        m->cap = shuffle_tokens < 1 ? 1 : shuffle_tokens;
        if (!rc && m->cap > avail) m->cap = avail; /* a small store fits in the buffer whole */
        rng_seed(&m->rng, seed ^ 0xb0ffe4ULL);
        m->seq = mem_alloc(sizeof(float) * (size_t)h.seq_len * m->width);
        m->buf = mem_alloc(sizeof(float) * (size_t)m->cap * m->width);
        if (hook_out) {
            m->seq_in = mem_alloc(sizeof(float) * (size_t)h.seq_len * h.width);
            m->seq_out = mem_alloc(sizeof(float) * (size_t)h.seq_len * ho.width);
            if (!rc && (!m->seq_in || !m->seq_out)) rc = err_set(ERR_NOMEM, "%s: out of memory", db);
        }
        if (!rc && (!m->seq || !m->buf)) rc = err_set(ERR_NOMEM, "%s: shuffle buffer of %lld tokens: out of memory", db, (long long)m->cap);
        if (!rc && info) {
            memset(info, 0, sizeof *info);
            info->hook_id = h.id;
            info->width = h.width;
            info->width_out = hook_out ? ho.width : 0;
            info->seq_len = h.seq_len;
            info->tokens = avail;
            info->seqs = (int64_t)store_iter_count(m->it);
            store_model *models = NULL;
            size_t nm = 0;
            if (store_model_list(m->s, &models, &nm) == OK)
                for (size_t i = 0; i < nm; i++)
                    if (models[i].id == h.model_id) {
                        snprintf(info->model_name, sizeof info->model_name, "%s", models[i].name);
                        snprintf(info->model_checksum, sizeof info->model_checksum, "%s",
                                 models[i].checksum);
                    }
            mem_free(models);
            info->unfinished_run = -1;
            rc = store_hook_unfinished(m->s, hook, &info->unfinished_run);
            if (!rc && hook_out && info->unfinished_run < 0) /* a transcoder's target too */
                rc = store_hook_unfinished(m->s, hook_out, &info->unfinished_run);
        }
    }
    if (rc) {
        store_src_close(src);
        return rc;
    }
    src->d_in = m->width;
    /* the rows a pass yields: the BOS positions skipped are not (eval_tokens claimed them) */
    src->n_rows = store_iter_tokens(m->it) -
                  (int64_t)(skip_bos ? store_iter_count_in(m->it, m->bos, m->nbos) : 0);
    *out = src;
    return OK;
}
