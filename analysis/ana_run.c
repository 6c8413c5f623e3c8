/* ana_run.c - the analyze pipeline (ana_run.h): shared inputs, the per-dictionary pass,
 * downstream loss with the SAE spliced in through a hook, geometry, logit effects, POS alignment
 * and the writing transaction. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/ana.h"
#include "analysis/ana_dist.h"
#include "analysis/ana_run.h"
#include "analysis/effects.h"
#include "common/dist.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/mem.h"
#include "common/progress.h"
#include "model/gpt2.h"
#include "model/ops.h"
#include "model/tokenizer.h"
#include "sae/metrics.h"
#include "sae/sae.h"
#include "sae/sae_run.h"
#include "sae/sae_train.h"
#include "store/store.h"
#include "store/store_ana.h"

void ana_run_defaults(ana_run_opts *o)
{
    *o = (ana_run_opts){.top_n = 20, .n_intervals = 10, .per_interval = 5, .reservoir = 256,
                        .nbins = 40, .geom_bins = 90, .logit_k = 10, .ce_seqs = 16,
                        .effects_ctx = 64, .val_frac = STORE_VAL_FRAC_DEFAULT, .cos_threshold = 0.5, .hist_lo = 1e-3,
                        .hist_hi = 1e3, .ckpt_secs = 60};
}

static int stopped(const ana_run_opts *o) { return o->stop && *o->stop; }

/* Everything read once from the store and shared by the dictionaries of one run. */
typedef struct {
    store *s;
    store_hook hook;
    int64_t *seq;     /* [nseq] ascending */
    size_t nseq;
    int64_t *off;     /* [nseq+1] token offsets into tok/tag */
    int *tok;         /* [ntok] */
    short *tag;       /* [ntok] index into tag_names, -1 untagged */
    char (*tag_names)[16];
    int ntags, any_tags;
    unsigned char *bos; /* [nseq] 1 when position 0 is a prepended <|endoftext|> */
    gpt2_model *model; /* NULL with --no-model */
    tok_tokenizer *bpe; /* NULL when no tokenizer was found: ana_vocab is not filled */
    const char *model_path;
    char model_sum[17]; /* gpt2_dir_checksum of model_path, once read ("" until then) */
    char sae_model_sum[17]; /* the SAE's cfg.json model_checksum ("" without one or an SAE) */
    int vocab_done;
} shared;

/* One dictionary: an SAE or the identity over the hook's neurons. */
typedef struct {
    const char *kind; /* "sae" / "neurons" */
    char name[256];
    char weights[17]; /* the SAE's weights checksum (sae_weights_checksum), "" for neurons */
    sae_model *sae;   /* NULL for neurons */
    int d_in, d_sae;
    int d_out;        /* decoder width: d_in, or a transcoder's d_out */
    store_hook hook_out; /* transcoders: the hook they reconstruct (id -1 otherwise) */
    float *W_dec;     /* [d_sae,d_out]: the SAE's, or an owned identity */
    int own_dec;
} dict;

static void dict_codes(const dict *d, const float *x, int N, float *f, float *xhat, int *rc)
{
    if (d->sae) {
        if (!*rc) *rc = xhat ? sae_forward(d->sae, x, N, f, xhat) : sae_encode(d->sae, x, N, f);
    } else {
        memcpy(f, x, (size_t)N * d->d_in * sizeof *f);
        if (xhat) memcpy(xhat, x, (size_t)N * d->d_in * sizeof *f);
    }
}

/* ---- shared inputs -------------------------------------------------------------------------- */
static int tag_index(shared *sh, const char *t)
{
    for (int i = 0; i < sh->ntags; i++)
        if (!strcmp(sh->tag_names[i], t)) return i;
    if (sh->ntags >= 512) return -1; /* far more than any tag set; ignore the rest */
    snprintf(sh->tag_names[sh->ntags], 16, "%s", t);
    return sh->ntags++;
}

static int load_shared(shared *sh, const ana_run_opts *o)
{
    int rc = store_seq_list(sh->s, sh->hook.id, o->all ? STORE_SPLIT_ALL : STORE_SPLIT_VAL,
                            o->val_frac, &sh->seq, &sh->nseq);
    if (rc) return rc;
    if (o->max_seqs > 0 && sh->nseq > (size_t)o->max_seqs) sh->nseq = (size_t)o->max_seqs;
    if (sh->nseq == 0)
        return err_set(ERR_NOTFOUND, "%s: hook %s has no stored activations in the %s split "
                       "(try --all)", o->db, sh->hook.name, o->all ? "whole" : "validation");
    size_t cap = sh->nseq * (size_t)sh->hook.seq_len;
    sh->off = mem_alloc((sh->nseq + 1) * sizeof *sh->off);
    sh->tok = mem_alloc((cap + 1) * sizeof *sh->tok);
    sh->tag = mem_alloc((cap + 1) * sizeof *sh->tag);
    sh->tag_names = mem_calloc(512, sizeof *sh->tag_names);
    sh->bos = mem_calloc(sh->nseq + 1, 1);
    char (*tags)[16] = mem_alloc((size_t)sh->hook.seq_len * sizeof *tags);
    if (!sh->off || !sh->tok || !sh->tag || !sh->tag_names || !sh->bos || !tags) {
        mem_free(tags);
        return err_set(ERR_NOMEM, "out of memory for %zu sequences", sh->nseq);
    }
    int64_t n = 0;
    for (size_t i = 0; i < sh->nseq && !rc; i++) {
        int T = sh->hook.seq_len, any = 0;
        sh->off[i] = n;
        rc = store_seq_tokens(sh->s, sh->seq[i], sh->tok + n, &T);
        if (rc == ERR_NOTFOUND) { /* imported activations without token ids: positions only */
            rc = OK;
            T = sh->hook.seq_len;
            for (int t = 0; t < T; t++) sh->tok[n + t] = -1;
        }
        if (!rc) rc = store_ana_seq_tags(sh->s, sh->seq[i], T, tags, &any, NULL);
        store_context c;
        if (!rc) {
            /* the BOS flag is optional: a failure here only leaves it 0; the clear stays inside
               this branch, or it wiped store_seq_tokens' message ("saelite analyze: failed" on
               a damaged token blob, an audit) */
            if (store_context_get(sh->s, sh->seq[i], 0, 0, 0, &c) == OK) {
                sh->bos[i] = (unsigned char)(c.bos != 0);
                store_context_free(&c);
            }
            err_clear();
        }
        for (int t = 0; !rc && t < T; t++) sh->tag[n + t] = (short)(tags[t][0] ? tag_index(sh, tags[t]) : -1);
        if (any) sh->any_tags = 1;
        n += T;
    }
    sh->off[sh->nseq] = n;
    mem_free(tags);
    return rc;
}

static void free_shared(shared *sh)
{
    mem_free(sh->seq);
    mem_free(sh->off);
    mem_free(sh->tok);
    mem_free(sh->tag);
    mem_free(sh->tag_names);
    mem_free(sh->bos);
    gpt2_free(sh->model);
    tok_free(sh->bpe);
    mem_free((void *)sh->model_path);
}

/* index of seq_id in sh->seq (ascending), or -1 */
/* The model's checksum, read once (open_model's check, the effects' key, the ranks' agreement). */
static int model_checksum(shared *sh, const char **out)
{
    int rc = sh->model_sum[0] ? OK : gpt2_dir_checksum(sh->model_path, sh->model_sum);
    *out = sh->model_sum;
    return rc;
}

static long seq_index(const shared *sh, int64_t id)
{
    size_t lo = 0, hi = sh->nseq;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sh->seq[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < sh->nseq && sh->seq[lo] == id ? (long)lo : -1;
}

static int token_at(const shared *sh, int64_t seq, int pos, int *tag)
{
    long i = seq_index(sh, seq);
    if (i < 0 || sh->off[i] + pos >= sh->off[i + 1]) {
        if (tag) *tag = -1;
        return -1;
    }
    if (tag) *tag = sh->tag[sh->off[i] + pos];
    return sh->tok[sh->off[i] + pos];
}

/* ---- downstream loss with the SAE spliced in ---------------------------------------------- */
enum { SPLICE_SAE, SPLICE_ZERO, SPLICE_ERR };

typedef struct {
    const dict *d;
    int mode, rc;
    float *f, *xhat; /* scratch [rows, d_sae], [rows, d_in] */
    int cap_rows;
} splice;

static int splice_hook(const tensor_view *t, void *user)
{
    splice *sp = user;
    int d_in = sp->d->d_in;
    int64_t numel = tensor_numel(t);
    int rows = (int)(numel / d_in);
    if (numel % d_in || rows > sp->cap_rows) {
        sp->rc = err_set(ERR_SHAPE, "hook %s gives %lld values, not rows of %d", t->name,
                         (long long)numel, d_in);
        return 1;
    }
    float *x = t->data; /* hook views are contiguous */
    if (sp->mode == SPLICE_ZERO) {
        memset(x, 0, (size_t)numel * sizeof *x);
        return 0;
    }
    int rc = 0;
    dict_codes(sp->d, x, rows, sp->f, sp->xhat, &rc);
    if (rc) {
        sp->rc = rc;
        return 1;
    }
    for (int64_t i = 0; i < numel; i++)
        x[i] = sp->mode == SPLICE_SAE ? sp->xhat[i] : sp->xhat[i] + (x[i] - sp->xhat[i]);
    return 0;
}

/* A transcoder in place of the MLP: the input hook's rows are captured (left as they are), and
 * the output hook (hook_mlp_out) becomes the transcoder's output of them, or zero, or the output
 * plus the error term (the clean value again). */
typedef struct {
    splice *sp;
    float *xin; /* [cap_rows, d_in] the captured input */
    int rows;
} tc_splice;

static int tc_capture_hook(const tensor_view *t, void *user)
{
    tc_splice *ts = user;
    int d_in = ts->sp->d->d_in;
    int64_t numel = tensor_numel(t);
    if (numel % d_in || numel / d_in > ts->sp->cap_rows) {
        ts->sp->rc = err_set(ERR_SHAPE, "hook %s gives %lld values, not rows of %d", t->name,
                             (long long)numel, d_in);
        return 1;
    }
    ts->rows = (int)(numel / d_in);
    memcpy(ts->xin, t->data, (size_t)numel * sizeof(float));
    return 0;
}

static int tc_replace_hook(const tensor_view *t, void *user)
{
    tc_splice *ts = user;
    splice *sp = ts->sp;
    int d_out = sp->d->d_out;
    int64_t numel = tensor_numel(t);
    float *y = t->data;
    if (ts->rows == 0) {
        /* the target fired before the input in this pass: a transcoder trained on a pair whose
           "output" comes first in the block (sae-train cannot tell from the store), which read
           as "gives 65536 values, not 0 rows of 512" (an audit) */
        sp->rc = err_set(ERR_ARG, "the transcoder's output hook %s runs before its input hook in "
                         "the forward pass: a transcoder maps a hook to a later one (e.g. "
                         "blocks.L.ln2.hook_normalized -> blocks.L.hook_mlp_out)", t->name);
        return 1;
    }
    if (numel != (int64_t)ts->rows * d_out) {
        sp->rc = err_set(ERR_SHAPE, "hook %s gives %lld values, not %d rows of %d", t->name,
                         (long long)numel, ts->rows, d_out);
        return 1;
    }
    int rows = ts->rows;
    ts->rows = 0; /* taken: a later pass must capture its own rows first */
    if (sp->mode == SPLICE_ZERO) {
        memset(y, 0, (size_t)numel * sizeof *y);
        return 0;
    }
    int rc = sae_forward(sp->d->sae, ts->xin, rows, sp->f, sp->xhat);
    if (rc) {
        sp->rc = rc;
        return 1;
    }
    for (int64_t i = 0; i < numel; i++)
        y[i] = sp->mode == SPLICE_SAE ? sp->xhat[i] : sp->xhat[i] + (y[i] - sp->xhat[i]);
    return 0;
}

/* ---- the memo of zero-ablation sums ---- */
typedef struct {
    uint64_t key[2];
    double ce, kl; /* the sequence's CE sum (mean x predicted tokens) and KL sum */
} memo_entry;

struct ana_memo {
    memo_entry *e;
    size_t n, cap;
    int64_t hits;
};

int ana_memo_new(ana_memo **out)
{
    *out = mem_calloc(1, sizeof **out);
    return *out ? OK : err_set(ERR_NOMEM, "out of memory for the downstream memo");
}

void ana_memo_free(ana_memo *m)
{
    if (!m) return;
    mem_free(m->e);
    mem_free(m);
}

void ana_memo_counts(const ana_memo *m, int64_t *hits, int64_t *kept)
{
    *hits = m ? m->hits : 0;
    *kept = m ? (int64_t)m->n : 0;
}

static const memo_entry *memo_find(const ana_memo *m, const uint64_t key[2])
{
    for (size_t i = 0; i < m->n; i++)
        if (m->e[i].key[0] == key[0] && m->e[i].key[1] == key[1]) return &m->e[i];
    return NULL;
}

/* out of memory only means the entry is not kept */
static void memo_keep(ana_memo *m, const uint64_t key[2], double ce, double kl)
{
    if (m->n == m->cap) {
        size_t nc = m->cap ? 2 * m->cap : 256;
        memo_entry *e = mem_realloc(m->e, nc * sizeof *e);
        if (!e) return;
        m->e = e;
        m->cap = nc;
    }
    m->e[m->n++] = (memo_entry){.key = {key[0], key[1]}, .ce = ce, .kl = kl};
}

typedef struct {
    splice sp;
    tc_splice ts;
    ana_memo *memo;
    const char *model_path;
    int no_err;
    int tc, *targets;
    float *clean, *probs; /* [T, V] clean logits and their softmax, reused by the patched passes */
    double *lse;
} ds_work;

/* One sequence of the downstream pass: the clean forward and the three patched ones; CE sums
 * into sums[0..3], KL sums into sums[4..6], predicted tokens into *n. */
static int ds_seq(shared *sh, const dict *d, ds_work *w, size_t i, double *sums, int64_t *n)
{
    gpt2_model *m = sh->model;
    const int V = gpt2_cfg(m)->vocab_size;
    const int *tok = sh->tok + sh->off[i];
    int T = (int)(sh->off[i + 1] - sh->off[i]), rc;
    if (T < 2 || tok[0] < 0) return OK; /* no token ids (an import): nothing to run */
    for (int t = 0; t < T; t++) w->targets[t] = t + 1 < T ? tok[t + 1] : -1;
    double mean;
    gpt2_hook_clear(m);
    if ((rc = gpt2_loss(m, tok, w->targets, 1, T, NULL, &mean))) return rc;
    memcpy(w->clean, gpt2_logits(m), (size_t)T * V * sizeof *w->clean);
    for (int t = 0; t + 1 < T; t++)
        ana_softmax(w->probs + (size_t)t * V, w->clean + (size_t)t * V, V, &w->lse[t]);
    sums[0] += mean * (T - 1);
    for (int mode = SPLICE_SAE; mode <= SPLICE_ERR; mode++) {
        if (mode == SPLICE_ERR && w->no_err) continue;
        uint64_t key[2] = {0, 0}; /* set and used under the same condition */
        if (mode == SPLICE_ZERO && w->memo) {
            uint64_t h[2] = {0x7a65726f2d61626cull, HASH_FNV1A_INIT};
            hash_absorb128_str(h, w->model_path ? w->model_path : "");
            hash_absorb128_str(h, sh->hook.name);
            hash_absorb128_str(h, w->tc ? d->hook_out.name : "");
            hash_absorb128(h, (uint64_t)op_precision_bf16()); /* the forward's matmuls */
            hash_absorb128(h, (uint64_t)T);
            for (int t = 0; t < T; t++) hash_absorb128(h, (uint64_t)(uint32_t)tok[t]);
            key[0] = h[0];
            key[1] = h[1];
            const memo_entry *e = memo_find(w->memo, key);
            if (e) {
                w->memo->hits++;
                sums[1 + mode] += e->ce;
                sums[4 + mode] += e->kl;
                continue;
            }
        }
        gpt2_hook_clear(m);
        w->sp.mode = mode;
        w->sp.rc = 0;
        if (w->tc) { /* capture the input first: hooks run in the order of the forward pass */
            if ((rc = gpt2_hook_add(m, sh->hook.name, tc_capture_hook, &w->ts)) ||
                (rc = gpt2_hook_add(m, d->hook_out.name, tc_replace_hook, &w->ts)))
                return rc;
        } else if ((rc = gpt2_hook_add(m, sh->hook.name, splice_hook, &w->sp)))
            return rc;
        rc = gpt2_loss(m, tok, w->targets, 1, T, NULL, &mean);
        if (w->sp.rc) rc = w->sp.rc;
        if (rc) return rc;
        const float *lg = gpt2_logits(m);
        double ce = mean * (T - 1), kl = 0; /* the sequence's sums: what the memo keeps */
        for (int t = 0; t + 1 < T; t++)
            kl += ana_kl_prepared(w->clean + (size_t)t * V, w->probs + (size_t)t * V, w->lse[t],
                                  lg + (size_t)t * V, V);
        sums[1 + mode] += ce;
        sums[4 + mode] += kl;
        if (mode == SPLICE_ZERO && w->memo) memo_keep(w->memo, key, ce, kl);
    }
    *n += T - 1;
    return OK;
}

/* The downstream pass over this rank's blocks of the first ce_seqs sequences; the sums go
 * through the fixed tree. Collective (rc as in dict_pass). */
static int run_downstream(shared *sh, const dict *d, const ana_run_opts *o, ana_downstream *out, int rc)
{
    memset(out, 0, sizeof *out);
    const int T_max = sh->hook.seq_len, V = gpt2_cfg(sh->model)->vocab_size;
    size_t nuse = sh->nseq < (size_t)o->ce_seqs ? sh->nseq : (size_t)o->ce_seqs;
    ds_work w = {.sp = {.d = d, .cap_rows = T_max}, .tc = d->sae && d->sae->cfg.transcoder,
                 .memo = o->memo, .model_path = sh->model_path, .no_err = o->no_err_pass};
    w.ts.sp = &w.sp;
    ana_tree t = {0};
    int64_t n = 0;
    int b0, b1;
    ana_dist_blocks(&b0, &b1);
    size_t i0 = ana_block_start(nuse, b0);
    if (!rc) {
        w.targets = mem_alloc((size_t)T_max * sizeof *w.targets);
        w.clean = mem_alloc((size_t)T_max * V * sizeof *w.clean);
        w.probs = mem_alloc((size_t)T_max * V * sizeof *w.probs);
        w.lse = mem_alloc((size_t)T_max * sizeof *w.lse);
        w.sp.f = mem_alloc((size_t)T_max * d->d_sae * sizeof *w.sp.f);
        w.sp.xhat = mem_alloc((size_t)T_max * d->d_out * sizeof *w.sp.xhat);
        if (w.tc) w.ts.xin = mem_alloc((size_t)T_max * d->d_in * sizeof *w.ts.xin);
        if (!w.targets || !w.clean || !w.probs || !w.lse || !w.sp.f || !w.sp.xhat || (w.tc && !w.ts.xin))
            rc = err_set(ERR_NOMEM, "out of memory for logits");
    }
    if (!rc) rc = ana_tree_init(&t, 7);
    progress pr;
    progress_begin(&pr, "downstream", (double)(ana_block_start(nuse, b1) - i0), "seq");
    for (int blk = b0; blk < b1 && !rc; blk++) {
        for (size_t i = ana_block_start(nuse, blk); i < ana_block_start(nuse, blk + 1) && !rc; i++) {
            rc = ds_seq(sh, d, &w, i, t.leaf, &n);
            /* the tokens are the database's: a stored id the model cannot take named neither
               (an audit) */
            if (rc == ERR_ARG)
                err_wrap(rc, "%s: hook %s, sequence %lld", o->db, sh->hook.name, (long long)sh->seq[i]);
            if (!rc && stopped(o)) rc = err_set(ERR_ABORTED, "interrupted");
            progress_update(&pr, (double)(i + 1 - i0), NULL);
        }
        if (!rc) ana_tree_push(&t);
    }
    progress_end(&pr);
    gpt2_hook_clear(sh->model);
    const double *tot = NULL;
    rc = ana_agree(rc);
    if (!rc) rc = ana_tree_total(&t, &tot);
    if (!rc) rc = dist_sum_i64(&n, 1);
    out->n = n;
    if (!rc && out->n == 0)
        /* the causes named, not guessed: "(extracted with --ctx 1?)" named a flag a model of
           n_ctx 1 never needed (extract's own line said the same until e56724c) */
        rc = err_set(ERR_ARG, "%s: no sequence of %s has 2 or more tokens for the downstream loss "
                     "(windows of one token: extract --ctx 1 or a model of n_ctx 1, or import "
                     "--seq-len 1); --no-model skips it", o->db, sh->hook.name);
    if (!rc) {
        double dn = (double)out->n;
        out->ce_clean = tot[0] / dn;
        out->ce_sae = tot[1] / dn;
        out->ce_zero = tot[2] / dn;
        out->ce_err = o->no_err_pass ? NAN : tot[3] / dn;
        out->kl_sae = tot[4] / dn;
        out->kl_zero = tot[5] / dn;
        out->kl_err = o->no_err_pass ? NAN : tot[6] / dn;
        out->ce_score = ana_score(out->ce_zero, out->ce_sae, out->ce_clean);
        out->kl_score = ana_score(out->kl_zero, out->kl_sae, 0);
    }
    ana_tree_free(&t);
    mem_free(w.targets);
    mem_free(w.clean);
    mem_free(w.probs);
    mem_free(w.lse);
    mem_free(w.sp.f);
    mem_free(w.ts.xin);
    mem_free(w.sp.xhat);
    return rc;
}

/* ---- the pass's checkpoint (a killed analyze continues) --------------------------------------
 * Every ckpt_secs the pass saves its state at the block boundary it just reached, to
 * DB.analyze-HASH (HASH: the dictionary's identity, kind, name, hook and split; under mpirun one
 * file per rank, -R.N after it); the same command run again continues from there with the bits
 * of an uninterrupted run: at a boundary the float sums are whole in the tree and the feature
 * statistics merge exactly (ana.h). The file goes once the dictionary is written. It opens with a
 * key of what the pass depends on (the hook's id and counts, the SAE's weights checksum, the
 * options, every sequence id and BOS flag): another key, or a file that fails a check, means a
 * fresh start with a notice, never an error (the file is a cache). Layout, host byte order (the
 * binary that wrote it): int64 {magic, key0, key1, nseq, blocks done, tree width n, depth}, the
 * depth partial sums [depth][n] double, int64 {rec.n, rec.n_nonzero}, rec.fires [D] int64, int64
 * packed size, ana_feat_acc_pack's bytes, int64 FNV-1a of everything before it. */
#define CKPT_MAGIC INT64_C(0x3150434b414e41) /* "ANAKCP1" */
enum { CKPT_SAMPLES = 64 }; /* sequences whose stored values the key reads */

typedef struct {
    char path[4096];
    char base[4080];   /* DB.analyze-HASH: path without a rank's suffix */
    uint64_t key[2];
    double secs, last; /* the interval (<= 0: none); when the last one was written */
    size_t resumed_seqs; /* this rank's sequences the checkpoint held */
    /* this run saved or continued from the file at path (eff_ours: at path.effects): a file
       another run left there (other options, or a --checkpoint-secs 0 run) is not where the same
       command continues, and a stop must not name it */
    int ours, eff_ours;
    const ana_run_opts *o;
} pass_ckpt;

/* ---- measured effects (--effects) ------------------------------------------------------------ */
typedef struct {
    int64_t *n;
    double *act, *kl, *dl, *corr; /* [D] */
    int *idx;                     /* [D, 2, k] top tokens, sign +1 then -1 */
    float *val;
    int k, have_direct;
    /* direct path of the hook the decoder writes, for the rank correlation */
    const float *W_dec, *proj, *gamma, *WU;
    int d_dec, C;                 /* decoder rows' width (a transcoder's d_out) */
    int final;                    /* the decoder writes ln_final.hook_normalized */
    float *direct;                /* [V] scratch */
} effects_work;

/* The decoder writes the final LayerNorm's output, which the unembedding reads linearly: its logit
   effects are exact (ana_logit_effects_final). They were skipped as "not on a linear direct path"
   (a user's SAE at ln_final.hook_normalized had no logit effects on its dashboards). */
static int final_normalized(const gpt2_model *m, const char *hook, int d)
{
    return !strcmp(hook, "ln_final.hook_normalized") && d == gpt2_cfg(m)->n_embd;
}

static void effects_work_free(effects_work *e)
{
    mem_free(e->n);
    mem_free(e->act);
    mem_free(e->kl);
    mem_free(e->dl);
    mem_free(e->corr);
    mem_free(e->idx);
    mem_free(e->val);
    mem_free(e->direct);
}

static int effects_feature(int j, int64_t n, const float *md, int V, void *user)
{
    effects_work *e = user;
    int *idx = e->idx + (size_t)j * 2 * e->k;
    float *val = e->val + (size_t)j * 2 * e->k;
    ana_topk(idx, val, md, V, e->k, 1);
    ana_topk(idx + e->k, val + e->k, md, V, e->k, 0);
    e->corr[j] = NAN;
    if (!e->have_direct) return OK;
    int rc = e->final ? ana_logit_effects_final(e->direct, e->W_dec + (size_t)j * e->d_dec, 1,
                                                e->C, e->WU, V)
                      : ana_logit_effects(e->direct, e->W_dec + (size_t)j * e->d_dec, 1, e->d_dec,
                                          e->proj, e->C, e->gamma, e->WU, V);
    if (!rc) e->corr[j] = ana_spearman(e->direct, md, V);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The effects' checkpoint (--effects: 25 s of the demo's 36 s analyze, hours on a large model):
 * beside the pass's file, PATH.effects, keyed on the pass's key and what the effects add (the
 * model's checksum, the forward's precision, --effects-ctx, --effects-seqs, --logit-k); saved at
 * a sequence boundary every ckpt_secs (ana_effects_opts.save). Layout, host byte order: int64
 * {magic, key0, key1, j0, chunk, V, D, sequences done, forwards, rows}, n [D] int64, the sums of
 * act, KL and dloss [D] double, the chunk in progress's delta sums [chunk, V] f32, the callbacks'
 * results so far (corr [D] double, top tokens [D, 2, k] int32 and their values f32), FNV-1a. */
#define EFF_CKPT_MAGIC INT64_C(0x3150434b464645) /* "EFFKCP1" */

typedef struct {
    pass_ckpt *ck;
    char path[4200];
    uint64_t key[2];
    effects_work *e;
    int D;
} eff_ckpt;

static int eff_ckpt_save(const ana_effects_state *st, void *user)
{
    eff_ckpt *ec = user;
    const effects_work *e = ec->e;
    const int D = st->d_sae, cw = (st->j0 + st->chunk < D ? st->j0 + st->chunk : D) - st->j0;
    file_atomic fa;
    int rc = file_atomic_open_plain(&fa, ec->path);
    if (!rc) {
        fa.sync = 1;
        file_sum io = file_sum_start(fa.f);
        int64_t hdr[10] = {EFF_CKPT_MAGIC, (int64_t)ec->key[0], (int64_t)ec->key[1], st->j0, st->chunk,
                           st->V, D, st->seqs_done, st->forwards, st->rows};
        file_sum_put(&io, hdr, sizeof hdr);
        file_sum_put(&io, st->n, (size_t)D * sizeof *st->n);
        file_sum_put(&io, st->sum_act, (size_t)D * sizeof *st->sum_act);
        file_sum_put(&io, st->sum_kl, (size_t)D * sizeof *st->sum_kl);
        file_sum_put(&io, st->sum_dloss, (size_t)D * sizeof *st->sum_dloss);
        file_sum_put(&io, st->acc, (size_t)cw * st->V * sizeof *st->acc);
        file_sum_put(&io, e->corr, (size_t)D * sizeof *e->corr);
        file_sum_put(&io, e->idx, (size_t)D * 2 * e->k * sizeof *e->idx);
        file_sum_put(&io, e->val, (size_t)D * 2 * e->k * sizeof *e->val);
        file_sum_put_end(&io);
        rc = io.bad ? err_set(ERR_IO, "%s: write failed", ec->path) : OK;
        if (rc) file_atomic_abort(&fa);
        else rc = file_atomic_commit(&fa);
    }
    if (!rc) ec->ck->eff_ours = 1;
    if (rc) { /* the run goes on: it is only a cache */
        progress_notice(ec->ck->o->notice, ec->ck->o->user,
                        "no more checkpoints for the effects: %s", err_msg());
        err_clear();
    }
    return rc;
}

static int all_finite(const void *p, size_t n, int is_double)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(is_double ? ((const double *)p)[i] : (double)((const float *)p)[i])) return 0;
    return 1;
}

/* The saved effects into *st (its arrays in *buf, the caller's to free) and the callbacks'
 * results into e: 1 when there is a state to continue from (a notice when a file was there but
 * not usable; e is then as run_effects made it). chunk and V: what this run's ana_effects will
 * use; nseq and max_ctx (<= 0: none) its sequences and contexts per feature. Everything is
 * checked against what a run makes before anything is used (a forged file with its checksum
 * recomputed failed every later run, wrote wrong means, or poisoned later checkpoints: an audit). */
static int eff_ckpt_load(eff_ckpt *ec, int chunk, int V, size_t nseq, int64_t max_ctx,
                         ana_effects_state *st, void **buf)
{
    effects_work *e = ec->e;
    const int D = ec->D;
    const size_t nk = (size_t)D * 2 * e->k;
    *buf = NULL;
    int64_t fsize = 0;
    file_sum io;
    const char *why = file_sum_open(ec->path, &io, &fsize);
    if (!why && !io.f) return 0;
    int64_t hdr[10];
    file_sum_get(&io, hdr, sizeof hdr); /* zeros when unreadable */
    if (!why) {
        if (io.bad) why = "cannot be read";
        else if (hdr[0] != EFF_CKPT_MAGIC) why = "is not an effects checkpoint of this build";
        else if ((uint64_t)hdr[1] != ec->key[0] || (uint64_t)hdr[2] != ec->key[1])
            why = "was made with other inputs or options";
        else if (hdr[3] < 0 || hdr[3] >= D || hdr[4] != chunk || hdr[3] % chunk || hdr[5] != V ||
                 hdr[6] != D || hdr[7] < 0 || hdr[7] > (int64_t)nseq || hdr[8] < 0 || hdr[9] < 0)
            why = "is damaged (its counts do not fit this run)";
    }
    const int j1 = why ? 0 : (int)(hdr[3] + chunk < D ? hdr[3] + chunk : D);
    size_t cw = why ? 0 : (size_t)(j1 - hdr[3]);
    size_t bytes = (size_t)D * (sizeof(int64_t) + 4 * sizeof(double)) + cw * V * sizeof(float) +
                   nk * (sizeof(int) + sizeof(float));
    unsigned char *b = NULL;
    if (!why && (int64_t)bytes > fsize) why = "is damaged (cut short)";
    else if (!why && !(b = mem_alloc(bytes))) why = "needs more memory than there is";
    if (!why) {
        int64_t *n = (int64_t *)b;
        double *sa = (double *)(n + D), *skl = sa + D, *sdl = skl + D, *corr = sdl + D;
        float *acc = (float *)(corr + D), *val = acc + cw * V;
        int *idx = (int *)(val + nk);
        file_sum_get(&io, n, (size_t)D * sizeof *n);
        file_sum_get(&io, sa, (size_t)D * sizeof *sa);
        file_sum_get(&io, skl, (size_t)D * sizeof *skl);
        file_sum_get(&io, sdl, (size_t)D * sizeof *sdl);
        file_sum_get(&io, acc, cw * V * sizeof *acc);
        file_sum_get(&io, corr, (size_t)D * sizeof *corr);
        file_sum_get(&io, idx, nk * sizeof *idx);
        file_sum_get(&io, val, nk * sizeof *val);
        if (!file_sum_get_end(&io)) why = "is damaged (its checksum fails)";
        for (size_t q = 0; !why && q < nk; q++)
            if (idx[q] < 0 || idx[q] >= V) why = "is damaged (a token id)";
        for (int j = 0; !why && j < D; j++)
            if (n[j] < 0 || (max_ctx > 0 && n[j] > max_ctx) || (j >= j1 && n[j]) ||
                !(isnan(corr[j]) || fabs(corr[j]) <= 1))
                why = "is damaged (a count or correlation no run makes)";
        if (!why && !(all_finite(sa, (size_t)D * 3, 1) && all_finite(acc, cw * V, 0) && all_finite(val, nk, 0)))
            why = "is damaged (a sum that is not finite)";
        if (!why) {
            memcpy(e->corr, corr, (size_t)D * sizeof *corr);
            memcpy(e->idx, idx, nk * sizeof *idx);
            memcpy(e->val, val, nk * sizeof *val);
            *st = (ana_effects_state){(int)hdr[3], chunk, V, D, hdr[7], acc, n, sa, skl, sdl, hdr[8], hdr[9]};
            *buf = b;
        }
    }
    if (io.f) fclose(io.f);
    if (!why) {
        progress_notice(ec->ck->o->notice, ec->ck->o->user,
                        "continuing the effects from %s (features %lld.., %lld sequences of their "
                        "pass done)", ec->path, (long long)st->j0, (long long)st->seqs_done);
        ec->ck->eff_ours = 1;
        return 1;
    }
    mem_free(b); /* e untouched: its arrays are as run_effects made them */
    progress_notice(ec->ck->o->notice, ec->ck->o->user,
                    "%s %s: starting the effects over", ec->path, why);
    return 0;
}

static int run_effects(shared *sh, const dict *d, const ana_run_opts *o, pass_ckpt *ck,
                       effects_work *e, ana_dict_result *dr)
{
    const gpt2_config *cfg = gpt2_cfg(sh->model);
    const int D = d->d_sae, V = cfg->vocab_size;
    memset(e, 0, sizeof *e);
    e->k = o->logit_k < V ? o->logit_k : V;
    e->n = mem_alloc((size_t)D * sizeof *e->n);
    e->act = mem_alloc((size_t)D * sizeof *e->act);
    e->kl = mem_alloc((size_t)D * sizeof *e->kl);
    e->dl = mem_alloc((size_t)D * sizeof *e->dl);
    e->corr = mem_alloc((size_t)D * sizeof *e->corr);
    /* zeroed: a checkpoint holds every feature's entries, also those not measured yet */
    e->idx = mem_calloc((size_t)D * 2 * e->k, sizeof *e->idx);
    e->val = mem_calloc((size_t)D * 2 * e->k, sizeof *e->val);
    e->direct = mem_alloc((size_t)V * sizeof *e->direct);
    if (!e->n || !e->act || !e->kl || !e->dl || !e->corr || !e->idx || !e->val || !e->direct)
        return err_set(ERR_NOMEM, "out of memory for the effects of %d features", D);
    for (int j = 0; j < D; j++) e->corr[j] = NAN;
    int ok, nd;
    int64_t shp[2];
    /* the direct path from where the decoder writes, as write_logit_effects: a transcoder's
       output hook, its rows d_out wide (the input hook's gave no rank_corr, or read W_dec at
       d_in's stride) */
    const char *dec_hook = d->hook_out.id >= 0 ? d->hook_out.name : sh->hook.name;
    e->proj = gpt2_hook_direct_proj(sh->model, dec_hook, d->d_out, &ok);
    e->final = final_normalized(sh->model, dec_hook, d->d_out);
    e->WU = gpt2_param(sh->model, "lm_head.weight", &nd, shp);
    e->gamma = gpt2_param(sh->model, "ln_f.weight", &nd, shp);
    e->have_direct = (ok || e->final) && e->WU && e->gamma;
    e->W_dec = d->W_dec;
    e->d_dec = d->d_out;
    e->C = cfg->n_embd;
    size_t nseq = o->effects_seqs > 0 && (size_t)o->effects_seqs < sh->nseq ? (size_t)o->effects_seqs : sh->nseq;
    ana_effects_opts eo = {.max_ctx = o->effects_ctx, .stop = o->stop};
    eff_ckpt ec = {.ck = ck, .e = e, .D = D};
    ana_effects_state rs;
    void *rbuf = NULL;
    const char *cs;
    if (ck->path[0] && ck->secs > 0 && path_fmt(ec.path, sizeof ec.path, "%s.effects", ck->path) == OK &&
        model_checksum(sh, &cs) == OK) {
        uint64_t *h = ec.key;
        h[0] = ck->key[0];
        h[1] = ck->key[1];
        hash_absorb128_str(h, cs);
        int64_t w[] = {op_precision_bf16(), o->effects_ctx, (int64_t)nseq, e->k, V};
        for (size_t i = 0; i < sizeof w / sizeof *w; i++) hash_absorb128(h, (uint64_t)w[i]);
        file_remove_dead_temps_plain(ec.path, 0);
        if (eff_ckpt_load(&ec, ana_effects_chunk(V, D, eo.max_acc_bytes), V, nseq, eo.max_ctx, &rs, &rbuf))
            eo.resume = &rs;
        eo.save_secs = ck->secs;
        eo.save = eff_ckpt_save;
        eo.save_user = &ec;
    } else
        err_clear(); /* no checkpoints for the effects: a path too long or a model unread */
    ana_effects_out out = {e->n, e->act, e->kl, e->dl};
    /* BOS positions are left out as in the statistics, unless keep_bos */
    int rc = ana_effects(sh->model, d->sae, sh->hook.name, sh->tok, sh->off,
                         o->keep_bos ? NULL : sh->bos, nseq, &eo, &out, effects_feature, e);
    mem_free(rbuf);
    if (rc) return rc;
    dr->have_effects = 1;
    dr->effects_forwards = out.forwards;
    dr->effects_local = gpt2_hook_position_local(sh->model, sh->hook.name);
    double *c = mem_alloc((size_t)D * sizeof *c);
    if (!c) return err_set(ERR_NOMEM, "out of memory");
    int nc = 0;
    double sum = 0;
    for (int j = 0; j < D; j++) {
        dr->effects_features += e->n[j] > 0;
        dr->effects_contexts += e->n[j];
        if (e->n[j] > 0 && isfinite(e->corr[j])) {
            c[nc++] = e->corr[j];
            sum += e->corr[j];
        }
    }
    qsort(c, (size_t)nc, sizeof *c, cmp_double);
    dr->effects_corr_mean = nc ? sum / nc : NAN;
    dr->effects_corr_median = nc ? (nc % 2 ? c[nc / 2] : (c[nc / 2 - 1] + c[nc / 2]) / 2) : NAN;
    mem_free(c);
    return OK;
}

static int write_effects(const dict *d, const effects_work *e, store_ana_writer *w, int64_t id)
{
    int rc = OK;
    for (int j = 0; j < d->d_sae && !rc; j++) {
        if (!e->n[j]) continue;
        rc = store_ana_effect(w, id, j, e->n[j], e->act[j], e->kl[j], e->dl[j], e->corr[j]);
        for (int sgn = 0; sgn < 2 && !rc; sgn++)
            for (int r = 0; r < e->k && !rc; r++) {
                size_t at = ((size_t)j * 2 + sgn) * e->k + r;
                rc = store_ana_effect_logit(w, id, j, sgn ? -1 : 1, r, e->idx[at], e->val[at]);
            }
    }
    return rc;
}

/* ---- one dictionary ------------------------------------------------------------------------ */
/* What the pass and the geometry leave for the writers. */
typedef struct {
    double *edges;           /* [nbins+1] histogram edges */
    ana_feat_acc *acc;       /* per-feature statistics and samples */
    sae_metrics rec;         /* reconstruction metrics */
    int64_t *geo, *geo_rand; /* [geom_bins] angle histograms: decoder, random directions */
    int *nearest, *rnear;    /* [D] nearest other direction (-1: none) */
    float *ncos, *rcos;      /* [D] its signed cosine */
} dict_work;

static void dict_work_free(dict_work *w)
{
    ana_feat_acc_free(w->acc);
    sae_metrics_free(&w->rec);
    mem_free(w->edges);
    mem_free(w->geo);
    mem_free(w->geo_rand);
    mem_free(w->nearest);
    mem_free(w->rnear);
    mem_free(w->ncos);
    mem_free(w->rcos);
}

static int dict_work_init(dict_work *w, const dict *d, const ana_run_opts *o)
{
    const int D = d->d_sae;
    memset(w, 0, sizeof *w);
    w->edges = mem_alloc((size_t)(o->nbins + 1) * sizeof *w->edges);
    w->geo = mem_calloc((size_t)o->geom_bins, sizeof *w->geo);
    w->geo_rand = mem_calloc((size_t)o->geom_bins, sizeof *w->geo_rand);
    w->nearest = mem_alloc((size_t)D * sizeof *w->nearest);
    w->rnear = mem_alloc((size_t)D * sizeof *w->rnear);
    w->ncos = mem_alloc((size_t)D * sizeof *w->ncos);
    w->rcos = mem_alloc((size_t)D * sizeof *w->rcos);
    if (!w->edges || !w->geo || !w->geo_rand || !w->nearest || !w->rnear || !w->ncos || !w->rcos)
        return err_set(ERR_NOMEM, "out of memory for %d features", D);
    int rc = ana_log_edges(w->edges, o->nbins, o->hist_lo, o->hist_hi);
    if (!rc) rc = ana_feat_acc_new(&w->acc, D, o->top_n, o->reservoir, w->edges, o->nbins, 0x5ae1u);
    if (!rc) rc = sae_metrics_init(&w->rec, d->d_out, D);
    if (!rc && d->sae) sae_metrics_prefixes(&w->rec, &d->sae->cfg); /* Matryoshka's */
    return rc;
}

/* Path and key of dictionary d's checkpoint; ck->secs 0 when there is none to keep. */
static int ckpt_setup(pass_ckpt *ck, const shared *sh, const dict *d, const ana_run_opts *o)
{
    memset(ck, 0, sizeof *ck);
    ck->o = o;
    /* the names first, also without checkpoints: a finished run removes an earlier run's files
       (a --checkpoint-secs 0 run after a killed one left them, an audit) */
    const char *split = o->all ? (o->keep_bos ? "all+bos" : "all") : (o->keep_bos ? "val+bos" : "val");
    uint64_t id[2] = {0x616e612d636b7074ull, HASH_FNV1A_INIT}, *h = ck->key;
    hash_absorb128_str(id, d->kind);
    hash_absorb128_str(id, d->name);
    hash_absorb128_str(id, sh->hook.name);
    hash_absorb128_str(id, split);
    int rc = path_fmt(ck->base, sizeof ck->base, "%s.analyze-%016llx", o->db,
                      (unsigned long long)(id[0] ^ id[1]));
    if (!rc && dist_size() > 1)
        rc = path_fmt(ck->path, sizeof ck->path, "%s-%d.%d", ck->base, dist_rank(), dist_size());
    else if (!rc)
        rc = path_fmt(ck->path, sizeof ck->path, "%s", ck->base);
    if (rc) { /* no checkpoint, no failure: say so */
        ck->path[0] = ck->base[0] = 0;
        if (o->ckpt_secs > 0)
            progress_notice(o->notice, o->user, "no checkpoints for this pass: %s", err_msg());
        err_clear();
        return OK;
    }
    file_remove_dead_temps_plain(ck->path, 0);
    if (!(o->ckpt_secs > 0)) return OK;
    char sae_sum[17] = "";
    if (d->sae && (rc = sae_files_checksum(d->name, sae_sum))) return rc;
    h[0] = id[0];
    h[1] = id[1];
    hash_absorb128_str(h, sae_sum);
    hash_absorb128_str(h, d->hook_out.id >= 0 ? d->hook_out.name : "");
    int64_t w[] = {sh->hook.id, sh->hook.n_seqs, sh->hook.n_tokens, sh->hook.width, sh->hook.seq_len,
                   sh->hook.dtype, d->hook_out.id, d->hook_out.id >= 0 ? d->hook_out.n_tokens : 0,
                   d->d_in, d->d_sae, d->d_out, o->top_n, o->reservoir, o->nbins, o->keep_bos,
                   o->all, o->max_seqs, dist_rank(), dist_size(), ANA_BLOCKS, (int64_t)sh->nseq};
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) hash_absorb128(h, (uint64_t)w[i]);
    double f[] = {o->hist_lo, o->hist_hi, o->val_frac};
    for (size_t i = 0; i < 3; i++) {
        uint64_t b;
        memcpy(&b, &f[i], sizeof b);
        hash_absorb128(h, b);
    }
    for (size_t i = 0; i < sh->nseq; i++) {
        hash_absorb128(h, (uint64_t)sh->seq[i]);
        hash_absorb128(h, sh->bos[i]);
    }
    /* the stored values too, sampled: a database made again with the same shapes (another
       model's activations under the same ids) had taken the old checkpoint (an audit) */
    rc = store_act_fingerprint(sh->s, sh->hook.id, sh->seq, sh->nseq, CKPT_SAMPLES, h);
    if (!rc && d->hook_out.id >= 0)
        rc = store_act_fingerprint(sh->s, d->hook_out.id, sh->seq, sh->nseq, CKPT_SAMPLES, h);
    if (rc) return rc;
    ck->secs = o->ckpt_secs;
    return OK;
}

/* The checkpoint files there are for this dictionary, "" for none: the pass's and the
 * effects' beside it, where this run saved or continued from them (a file another run left
 * under other options was named as where the same command continues, right after that command
 * refused it: a review). */
static const char *ckpt_files(const pass_ckpt *ck, char *out, size_t cap)
{
    char pass[4200] = "", eff[4200] = "";
    int64_t have[2] = {ck->ours && ck->path[0] && access(ck->path, F_OK) == 0,
                       ck->eff_ours && ck->path[0] &&
                           path_fmt(eff, sizeof eff, "%s.effects", ck->path) == OK && access(eff, F_OK) == 0};
    /* every rank is here with the same code (ana_agree) and rank 0 prints the line, but each
       rank saves on its own clock: rank 1's file alone was there, rank 0 said "starts again",
       and the rerun continued 1086 of rank 1's 1563 sequences from it (a review). So any rank's
       file counts, named with R for the rank (the effects are rank 0's alone) */
    if (dist_max_i64(have, 2)) have[0] = have[1] = 0;
    if (dist_size() > 1 && path_fmt(pass, sizeof pass, "%s-R.%d", ck->base, dist_size())) have[0] = 0;
    out[0] = 0;
    if (have[0] || have[1])
        snprintf(out, cap, "%s%s%s%s", have[0] ? (dist_size() > 1 ? pass : ck->path) : "",
                 have[0] && have[1] ? " and " : "", have[1] ? eff : "",
                 dist_size() > 1 ? " (one per rank that saved one; on the same world size)" : "");
    return out;
}

/* A failure after a checkpoint (a full disk while writing) says the checkpoint is kept: the
 * rerun continues from it (the message named the database alone, and a user cleaning up for
 * room could take the file for litter). Collective, as stop_advice. */
static int kept_advice(const pass_ckpt *ck, int rc)
{
    char files[8700], msg[ERR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", err_msg());
    if (!ckpt_files(ck, files, sizeof files)[0]) return err_set(rc, "%s", msg);
    return err_set(rc, "%s; the same command continues from %s", msg, files);
}

/* A stop says what the same command does next, from the files there are (it said "interrupted"
 * alone, an audit; eval says as much): the pass's checkpoint and the effects' beside it.
 * Collective (every rank's files count). */
static int stop_advice(const pass_ckpt *ck, const ana_run_opts *o)
{
    char files[8700];
    ckpt_files(ck, files, sizeof files);
    err_clear();
    if (files[0])
        return err_set(ERR_ABORTED, "interrupted; the same command continues from %s", files);
    if (o->ckpt_secs > 0)
        return err_set(ERR_ABORTED, "interrupted before the first checkpoint (every %g s, "
                       "--checkpoint-secs); the same command starts again", o->ckpt_secs);
    return err_set(ERR_ABORTED, "interrupted; the same command starts again (--checkpoint-secs 0 "
                   "keeps no checkpoints)");
}

/* The state after blocks_done blocks (this rank's first b0 .. blocks_done - 1 pushed). */
static int ckpt_save(pass_ckpt *ck, size_t nseq, int blocks_done, const ana_tree *t, const dict_work *w)
{
    const int D = w->rec.d_sae;
    size_t pbytes = ana_feat_acc_packed_size(w->acc);
    void *packed = mem_alloc(pbytes ? pbytes : 1);
    if (!packed) return err_set(ERR_NOMEM, "out of memory for the checkpoint (%zu bytes)", pbytes);
    ana_feat_acc_pack(w->acc, packed);
    file_atomic fa;
    int rc = file_atomic_open_plain(&fa, ck->path);
    if (!rc) {
        fa.sync = 1;
        file_sum io = file_sum_start(fa.f);
        int64_t hdr[7] = {CKPT_MAGIC, (int64_t)ck->key[0], (int64_t)ck->key[1], (int64_t)nseq,
                          blocks_done, t->n, t->depth};
        file_sum_put(&io, hdr, sizeof hdr);
        for (int i = 0; i < t->depth; i++) file_sum_put(&io, t->stk[i], (size_t)t->n * sizeof(double));
        int64_t cnt[2] = {w->rec.n, w->rec.n_nonzero}, pb = (int64_t)pbytes;
        file_sum_put(&io, cnt, sizeof cnt);
        file_sum_put(&io, w->rec.fires, (size_t)D * sizeof *w->rec.fires);
        file_sum_put(&io, &pb, sizeof pb);
        file_sum_put(&io, packed, pbytes);
        file_sum_put_end(&io);
        rc = io.bad ? err_set(ERR_IO, "%s: write failed", ck->path) : OK;
        if (rc) file_atomic_abort(&fa);
        else rc = file_atomic_commit(&fa);
    }
    if (!rc) ck->ours = 1;
    mem_free(packed);
    return rc;
}

/* The dictionary is written: this rank's checkpoints go, and on rank 0 those of every other
 * world size (a run killed under -np 4 and done by one process left four files, an audit). */
static void ckpt_remove(const pass_ckpt *ck)
{
    char p[4200];
    unlink(ck->path);
    snprintf(p, sizeof p, "%s.effects", ck->path);
    unlink(p);
    if (!dist_is_root()) return;
    file_remove_dead_temps_plain(ck->base, 1); /* a killed save's, of any rank or world size */
    for (int n = 1; n <= ANA_BLOCKS; n *= 2)
        for (int r = 0; r < n; r++) {
            if (n == 1) snprintf(p, sizeof p, "%s", ck->base);
            else snprintf(p, sizeof p, "%s-%d.%d", ck->base, r, n);
            if (strcmp(p, ck->path)) unlink(p);
            size_t l = strlen(p);
            snprintf(p + l, sizeof p - l, ".effects");
            unlink(p);
        }
}

/* ck->path's state into t and w (both fresh), when it is this pass's: returns the blocks done
 * (b0 when there is nothing to resume; a notice when a file was there but not usable). */
static int ckpt_load(pass_ckpt *ck, const char *kind, const int64_t *seqs, size_t nseq, int seq_len,
                     int b0, int b1, ana_tree *t, dict_work *w)
{
    const ana_run_opts *o = ck->o;
    int64_t fsize = 0;
    if (!(ck->secs > 0)) return b0;
    file_sum io;
    const char *why = file_sum_open(ck->path, &io, &fsize);
    if (!why && !io.f) return b0;
    void *packed = NULL;
    int64_t hdr[7];
    file_sum_get(&io, hdr, sizeof hdr); /* zeros when unreadable */
    int done = (int)hdr[4], depth = (int)hdr[6];
    const int D = w->rec.d_sae;
    if (!why) {
        if (io.bad) why = "cannot be read";
        else if (hdr[0] != CKPT_MAGIC) why = "is not an analyze checkpoint of this build";
        else if ((uint64_t)hdr[1] != ck->key[0] || (uint64_t)hdr[2] != ck->key[1] || hdr[3] != (int64_t)nseq)
            why = "was made with other inputs or options";
        else if (hdr[4] <= b0 || hdr[4] > b1 || hdr[5] != t->n ||
                 depth != __builtin_popcount((unsigned)(done - b0)))
            why = "is damaged (its block count or sums do not fit this pass)";
    }
    if (!why) {
        /* the tree after done - b0 pushes: a partial sum per one bit of the count, high first */
        int bits = done - b0;
        for (int i = 0, lvl = 30; i < depth; i++) {
            while (!(bits >> lvl & 1)) lvl--;
            t->level[i] = lvl--;
            file_sum_get(&io, t->stk[i], (size_t)t->n * sizeof(double));
        }
        t->depth = depth;
        for (int i = 0; i < depth && !why; i++)
            for (int64_t q = 0; q < t->n; q++)
                if (!isfinite(t->stk[i][q])) {
                    why = "is damaged (a sum that is not finite)";
                    break;
                }
        int64_t cnt[2] = {0, 0}, pb = 0;
        if (!why) {
            file_sum_get(&io, cnt, sizeof cnt);
            file_sum_get(&io, w->rec.fires, (size_t)D * sizeof *w->rec.fires);
            file_sum_get(&io, &pb, sizeof pb);
            w->rec.n = cnt[0];
            w->rec.n_nonzero = cnt[1];
            for (int j = 0; j < D && !why; j++)
                if (w->rec.fires[j] < 0) why = "is damaged (a count below 0)";
            if (cnt[0] < 0 || cnt[1] < 0) why = "is damaged (a count below 0)";
        }
        if (!why && (io.bad || pb < 0 || pb > fsize)) why = "is damaged (cut short)";
        if (!why && !(packed = mem_alloc(pb ? (size_t)pb : 1))) why = "needs more memory than there is";
        if (!why) {
            file_sum_get(&io, packed, (size_t)pb);
            if (!file_sum_get_end(&io)) why = "is damaged (its checksum fails)";
            else if (ana_feat_acc_merge_packed(w->acc, packed, (size_t)pb)) {
                why = "is damaged (its feature statistics do not fit)";
                err_clear();
            } else if (!ana_feat_acc_entries_within(w->acc, seqs + ana_block_start(nseq, b0),
                                                    ana_block_start(nseq, done) - ana_block_start(nseq, b0),
                                                    seq_len)) {
                why = "is damaged (an example outside the sequences it covers)";
                ana_feat_acc_reset(w->acc);
            }
        }
    }
    if (io.f) fclose(io.f);
    mem_free(packed);
    if (!why) {
        ck->resumed_seqs = ana_block_start(nseq, done) - ana_block_start(nseq, b0);
        ck->ours = 1;
        progress_notice(o->notice, o->user, "continuing the %s pass from %s (%zu of %zu sequences done)",
                        kind, ck->path, ck->resumed_seqs,
                        ana_block_start(nseq, b1) - ana_block_start(nseq, b0));
        return done;
    }
    /* start over from zero: the tree, the counts and the statistics as they were made */
    for (int i = 0; i < 16 && t->stk[i]; i++) memset(t->stk[i], 0, (size_t)t->n * sizeof(double));
    t->depth = 0;
    w->rec.n = w->rec.n_nonzero = 0;
    memset(w->rec.fires, 0, (size_t)D * sizeof *w->rec.fires);
    progress_notice(o->notice, o->user, "%s %s: starting the %s pass over", ck->path, why, kind);
    return b0;
}

/* 1. the pass over the stored activations: metrics and per-feature statistics */
typedef struct {
    float *x, *xhat, *f, *y; /* [T, d_in], [T, d_out], [T, D], [T, d_out] (transcoders) */
} pass_buf;

/* One sequence (index i of the split) into the metrics and the feature statistics. */
static int pass_seq(const shared *sh, const dict *d, const ana_run_opts *o, dict_work *w,
                    size_t i, const pass_buf *b)
{
    const int d_in = d->d_in, Tm = sh->hook.seq_len, d_out = d->d_out;
    int T = Tm, rc;
    if ((rc = store_act_read(sh->s, sh->hook.id, sh->seq[i], b->x, &T))) return rc;
    /* the prepended <|endoftext|> is not text: its (often huge) activation would dominate
       the metrics and the top lists, so it is left out unless keep_bos */
    int b0 = sh->bos[i] && !o->keep_bos && T > 0;
    const float *xs = b->x + (size_t)b0 * d_in, *fs = xs;
    if (d->hook_out.id >= 0) { /* a transcoder: its output against the same tokens at the output hook */
        int T2 = Tm;
        if ((rc = store_act_read(sh->s, d->hook_out.id, sh->seq[i], b->y, &T2))) return rc;
        if (T2 != T)
            return err_set(ERR_SHAPE, "sequence %lld: %d tokens at %s, %d at %s",
                           (long long)sh->seq[i], T, sh->hook.name, T2, d->hook_out.name);
        if ((rc = sae_forward(d->sae, xs, T - b0, b->f, b->xhat))) return rc;
        sae_metrics_add(&w->rec, b->y + (size_t)b0 * d_out, b->xhat, b->f, T - b0);
        fs = b->f;
    } else if (d->sae) {
        if ((rc = sae_metrics_eval_rows(&w->rec, d->sae, xs, T - b0, b->f, b->xhat)))
            return err_wrap(rc, "%s on %s, sequence %lld", d->name, sh->hook.name, (long long)sh->seq[i]);
        fs = b->f;
    } else {
        sae_metrics_add(&w->rec, xs, xs, xs, T - b0); /* the identity: codes = input */
    }
    ana_feat_acc_add(w->acc, fs, T - b0, sh->seq[i], b0);
    return OK;
}

/* The float sums of the pass, block by block into the fixed tree (ana_dist.h): the metrics'
 * five scalars, a Matryoshka SAE's prefix errors [n_prefix], their column sums [d_out] and the
 * per-feature sums of activations [D]. */
enum { PASS_SCALARS = 5 };

static void take_block_sums(dict_work *w, double *leaf, int d_out, int D)
{
    sae_metrics *m = &w->rec;
    double *fs = ana_feat_sums(w->acc);
    double s[PASS_SCALARS] = {m->sse, m->sum_sq, m->cos_sum, m->l2r_sum, m->l0_sum};
    const int P = m->n_prefix;
    memcpy(leaf, s, sizeof s);
    memcpy(leaf + PASS_SCALARS, m->prefix_sse, (size_t)P * sizeof *leaf);
    memcpy(leaf + PASS_SCALARS + P, m->sum_x, (size_t)d_out * sizeof *leaf);
    memcpy(leaf + PASS_SCALARS + P + d_out, fs, (size_t)D * sizeof *leaf);
    m->sse = m->sum_sq = m->cos_sum = m->l2r_sum = m->l0_sum = 0;
    memset(m->prefix_sse, 0, sizeof m->prefix_sse);
    memset(m->sum_x, 0, (size_t)d_out * sizeof *m->sum_x);
    memset(fs, 0, (size_t)D * sizeof *fs);
}

static void put_total_sums(dict_work *w, const double *tot, int d_out, int D)
{
    sae_metrics *m = &w->rec;
    const int P = m->n_prefix;
    m->sse = tot[0];
    m->sum_sq = tot[1];
    m->cos_sum = tot[2];
    m->l2r_sum = tot[3];
    m->l0_sum = tot[4];
    memcpy(m->prefix_sse, tot + PASS_SCALARS, (size_t)P * sizeof *tot);
    memcpy(m->sum_x, tot + PASS_SCALARS + P, (size_t)d_out * sizeof *m->sum_x);
    memcpy(ana_feat_sums(w->acc), tot + PASS_SCALARS + P + d_out, (size_t)D * sizeof *tot);
}

/* The statistics of every rank into one: the float sums through the tree, the metrics' integer
 * counts summed on every rank, the feature statistics merged on rank 0. */
static int reduce_pass(dict_work *w, ana_tree *t, int d_out, int D)
{
    const double *tot;
    int rc = ana_tree_total(t, &tot);
    if (!rc) put_total_sums(w, tot, d_out, D);
    int64_t cnt[2] = {w->rec.n, w->rec.n_nonzero};
    if (!rc && dist_size() > 1 && !(rc = dist_sum_i64(cnt, 2))) {
        w->rec.n = cnt[0];
        w->rec.n_nonzero = cnt[1];
        rc = dist_sum_i64(w->rec.fires, D);
    }
    if (!rc) rc = ana_gather_acc(w->acc);
    return rc;
}

/* The pass over this rank's blocks of the split, from ck's checkpoint when it has one and saving
 * one every ck->secs; collective (rc: the caller's so far, passed on when not OK; every rank
 * returns the same code). */
static int dict_pass(shared *sh, const dict *d, const ana_run_opts *o, dict_work *w, pass_ckpt *ck,
                     int rc)
{
    const int d_in = d->d_in, D = d->d_sae, Tm = sh->hook.seq_len, d_out = d->d_out;
    const int tc = d->hook_out.id >= 0;
    pass_buf b = {0};
    ana_tree t = {0};
    int b0, b1;
    ana_dist_blocks(&b0, &b1);
    size_t i0 = ana_block_start(sh->nseq, b0);
    if (!rc) {
        b.x = mem_alloc((size_t)Tm * d_in * sizeof *b.x);
        b.xhat = mem_alloc((size_t)Tm * d_out * sizeof *b.xhat);
        b.f = mem_alloc((size_t)Tm * D * sizeof *b.f);
        b.y = tc ? mem_alloc((size_t)Tm * d_out * sizeof *b.y) : NULL;
        rc = !b.x || !b.xhat || !b.f || (tc && !b.y) ? err_set(ERR_NOMEM, "out of memory for %d features", D) : OK;
    }
    if (!rc) rc = ana_tree_init(&t, PASS_SCALARS + w->rec.n_prefix + d_out + D);
    int start = rc ? b0 : ckpt_load(ck, d->kind, sh->seq, sh->nseq, Tm, b0, b1, &t, w);
    progress pr;
    progress_begin_at(&pr, d->kind, (double)(ana_block_start(sh->nseq, b1) - i0), "seq",
                      (double)(ana_block_start(sh->nseq, start) - i0));
    ck->last = now_seconds();
    for (int blk = start; blk < b1 && !rc; blk++) {
        for (size_t i = ana_block_start(sh->nseq, blk); i < ana_block_start(sh->nseq, blk + 1) && !rc; i++) {
            rc = pass_seq(sh, d, o, w, i, &b);
            if (!rc && stopped(o)) rc = err_set(ERR_ABORTED, "interrupted");
            progress_update(&pr, (double)(i + 1 - i0), NULL);
        }
        if (rc) break;
        take_block_sums(w, t.leaf, d_out, D);
        ana_tree_push(&t);
        /* the last block's too: a kill in the downstream pass or the effects keeps the pass */
        if (ck->secs > 0 && now_seconds() - ck->last >= ck->secs) {
            if (ckpt_save(ck, sh->nseq, blk + 1, &t, w)) { /* the run goes on: it is only a cache */
                progress_notice(o->notice, o->user, "no more checkpoints for this pass: %s", err_msg());
                err_clear();
                ck->secs = 0;
            }
            ck->last = now_seconds();
        }
    }
    progress_end(&pr);
    mem_free(b.x);
    mem_free(b.xhat);
    mem_free(b.f);
    mem_free(b.y);
    /* every rank's failure is agreed before the reductions, and theirs after */
    rc = ana_agree(rc);
    if (!rc) rc = ana_agree(reduce_pass(w, &t, d_out, D));
    ana_tree_free(&t);
    return rc;
}

/* 3. geometry: decoder directions and as many random unit vectors of the same width */
static int dict_geometry(const dict *d, const ana_run_opts *o, dict_work *w)
{
    const int D = d->d_sae, d_in = d->d_out; /* the decoder's width */
    int rc = ana_geometry(d->W_dec, D, d_in, o->geom_bins, w->geo, w->nearest, w->ncos);
    if (rc) return rc;
    float *R = mem_alloc((size_t)D * d_in * sizeof *R);
    if (!R) return err_set(ERR_NOMEM, "out of memory for random directions");
    rc = ana_random_unit(R, D, d_in, 0xd1ec7u);
    if (!rc) rc = ana_geometry(R, D, d_in, o->geom_bins, w->geo_rand, w->rnear, w->rcos);
    mem_free(R);
    return rc;
}

/* The whole vocabulary, so tok_text() names logit-effect tokens absent from the corpus. */
static int write_vocab(const shared *sh, store_ana_writer *w)
{
    int V = tok_vocab_size(sh->bpe), rc = OK;
    for (int t = 0; t < V && !rc; t++) {
        size_t len;
        const char *b = tok_token_bytes(sh->bpe, t, &len);
        if (b) rc = store_ana_vocab(w, t, b, len);
    }
    return rc;
}

/* Per-feature rows: top and quantile activations, POS counts, histogram, statistics, decoder
 * row. Fills the dead/dense counts and the POS summary of dr. */
static int write_features(const shared *sh, const dict *d, const ana_run_opts *o,
                          const dict_work *dw, store_ana_writer *w, int64_t id, ana_dict_result *dr)
{
    const int D = d->d_sae, d_in = d->d_out; /* the decoder rows' width */
    int64_t *tag_counts = mem_alloc((size_t)D * (sh->ntags + 1) * sizeof *tag_counts);
    ana_act *acts = mem_alloc((size_t)(o->top_n + o->n_intervals * o->per_interval + 1) * sizeof *acts);
    int *ivl = mem_alloc((size_t)(o->n_intervals * o->per_interval + 1) * sizeof *ivl);
    int *tags = mem_alloc((size_t)(o->top_n + 1) * sizeof *tags);
    int rc = !tag_counts || !acts || !ivl || !tags ? err_set(ERR_NOMEM, "out of memory for %d features", D) : OK;
    int64_t ntok = ana_feat_tokens(dw->acc);
    double prec_sum = 0;
    /* its own phase: 4096 features' rows took 6-10 s after the last ETA had run out (an audit) */
    progress pr;
    progress_begin(&pr, "writing", (double)D, "feature");
    for (int j = 0; j < D && !rc; j++) {
        if (j % 64 == 0) progress_update(&pr, (double)j, NULL);
        int64_t na = ana_feat_active(dw->acc, j);
        double density = ntok ? (double)na / (double)ntok : 0;
        dr->dead += na == 0;
        dr->dense += density > 0.1;
        int nt = ana_feat_top(dw->acc, j, acts);
        for (int r = 0; r < nt && !rc; r++) {
            int tk = token_at(sh, acts[r].seq, acts[r].pos, &tags[r]);
            rc = store_ana_act(w, id, j, "top", -1, r, acts[r].seq, acts[r].pos, tk, acts[r].value);
        }
        int best_tag = -1;
        double best_prec = NAN;
        if (!rc && sh->any_tags && nt > 0) {
            int64_t *cnt = tag_counts + (size_t)j * (sh->ntags + 1);
            double p;
            best_tag = ana_tag_dist(cnt, sh->ntags, tags, nt, &p);
            if (best_tag >= 0) {
                best_prec = p;
                prec_sum += p;
                dr->pos_n++;
                for (int t = 0; t < sh->ntags && !rc; t++)
                    if (cnt[t]) rc = store_ana_pos(w, id, j, sh->tag_names[t], cnt[t]);
            }
        }
        int nq = rc ? 0 : ana_feat_quantiles(dw->acc, j, o->n_intervals, o->per_interval, acts, ivl);
        int rank = 0;
        for (int q = 0; q < nq && !rc; q++) {
            rank = q > 0 && ivl[q] == ivl[q - 1] ? rank + 1 : 0;
            int tk = token_at(sh, acts[q].seq, acts[q].pos, NULL);
            rc = store_ana_act(w, id, j, "quantile", ivl[q], rank, acts[q].seq, acts[q].pos, tk,
                               acts[q].value);
        }
        const int64_t *h = ana_feat_hist(dw->acc, j);
        for (int b = 0; b < o->nbins && !rc; b++)
            if (h[b]) rc = store_ana_hist(w, id, j, b, dw->edges[b], dw->edges[b + 1], h[b]);
        if (!rc)
            rc = store_ana_feature(w, id, j, na, density, na ? ana_feat_sum(dw->acc, j) / (double)na : NAN,
                                   na ? (double)ana_feat_max(dw->acc, j) : NAN, dw->nearest[j],
                                   dw->ncos[j], best_tag >= 0 ? sh->tag_names[best_tag] : NULL,
                                   best_prec);
        if (!rc) rc = store_ana_decoder(w, id, j, d->W_dec + (size_t)j * d_in, d_in);
    }
    progress_end(&pr);
    dr->pos_mean = dr->pos_n ? prec_sum / dr->pos_n : NAN;
    mem_free(tag_counts);
    mem_free(acts);
    mem_free(ivl);
    mem_free(tags);
    return rc;
}

/* --all-acts is refused before its first row where the rows cannot fit (it wrote for minutes and
 * then failed on a full disk). They pass through the write-ahead log and then into the
 * database, which reuses its free pages first (an analysis this one replaces has freed its rows'
 * pages in this transaction): the peak is about twice their size (46.6 MB for 21 MB of rows,
 * measured), and the log goes when the command ends. */
static int all_acts_room(const shared *sh, const ana_run_opts *o, int64_t rows)
{
    double est = rows * (double)STORE_ANA_ALL_ROW_BYTES;
    int64_t fs_free = 0, reuse = 0;
    int rc = file_free_bytes(o->db, &fs_free);
    if (!rc) rc = store_free_page_bytes(sh->s, &reuse);
    if (rc) return rc;
    double need = est + (est > (double)reuse ? est - (double)reuse : 0);
    if (need <= (double)fs_free) return OK;
    /* tenths of a MB: whole ones read "needs about 3 MB ... but only 3 MB are free" (3.5, 3.3) */
    return err_set(ERR_IO, "%s: --all-acts needs about %.1f MB while it writes (%lld rows, about "
                   "%.1f MB, also held in the write-ahead log until the commit) but only %.1f MB "
                   "are free on its filesystem (--force to try anyway)", o->db, need / 1e6,
                   (long long)rows, est / 1e6, (double)fs_free / 1e6);
}

/* all_acts: every non-zero, in a second pass now that the count is known */
static int write_all_acts(const shared *sh, const dict *d, const ana_run_opts *o,
                          const dict_work *dw, store_ana_writer *w, int64_t id, ana_dict_result *dr)
{
    const int D = d->d_sae, Tm = sh->hook.seq_len;
    int64_t total = 0;
    for (int j = 0; j < D; j++) total += ana_feat_active(dw->acc, j);
    dr->all_acts_rows = total;
    if (o->notice) {
        char msg[160];
        snprintf(msg, sizeof msg, "--all-acts writes %lld activation rows (about %.0f MB)",
                 (long long)total, total * (double)STORE_ANA_ALL_ROW_BYTES / 1e6);
        o->notice(msg, o->user);
    }
    if (!o->force) {
        int rc = all_acts_room(sh, o, total);
        if (rc) return rc;
    }
    float *x = mem_alloc((size_t)Tm * d->d_in * sizeof *x);
    float *f = mem_alloc((size_t)Tm * D * sizeof *f);
    int rc = !x || !f ? err_set(ERR_NOMEM, "out of memory for %d features", D) : OK;
    progress pr;
    progress_begin(&pr, "all-acts", (double)sh->nseq, "seq");
    for (size_t i = 0; i < sh->nseq && !rc; i++) {
        int T = Tm;
        if ((rc = store_act_read(sh->s, sh->hook.id, sh->seq[i], x, &T))) break;
        /* the same rows in the same call as the statistics pass (pass_seq: from b0), so a
           value here is the bits of its top or quantile row (encoding the BOS row too moved the
           GEMM's row blocks: 1 ulp apart, and `value = max_act` missed, an audit) */
        int b0 = sh->bos[i] && !o->keep_bos && T > 0;
        dict_codes(d, x + (size_t)b0 * d->d_in, T - b0, f, NULL, &rc);
        for (int t = b0; t < T && !rc; t++)
            for (int j = 0; j < D && !rc; j++) {
                float v = f[(size_t)(t - b0) * D + j];
                if (v > 0)
                    rc = store_ana_act(w, id, j, "all", -1, -1, sh->seq[i], t,
                                       sh->tok[sh->off[i] + t], v);
            }
        if (!rc && stopped(o)) rc = err_set(ERR_ABORTED, "interrupted");
        progress_update(&pr, (double)(i + 1), NULL);
    }
    progress_end(&pr);
    mem_free(x);
    mem_free(f);
    return rc;
}

/* Geometry histograms, and the mean max|cos| / counts over the threshold into dr. */
static int write_geometry(const ana_run_opts *o, const dict_work *dw, int D, store_ana_writer *w,
                          int64_t id, ana_dict_result *dr)
{
    double mac = 0, rmac = 0;
    int nmac = 0, rc = OK;
    for (int j = 0; j < D; j++) {
        if (dw->nearest[j] >= 0) {
            mac += fabs(dw->ncos[j]);
            nmac++;
            dr->geom_over += fabs(dw->ncos[j]) > o->cos_threshold;
        }
        if (dw->rnear[j] >= 0) {
            rmac += fabs(dw->rcos[j]);
            dr->geom_random_over += fabs(dw->rcos[j]) > o->cos_threshold;
        }
    }
    dr->geom_mean = nmac ? mac / nmac : NAN;
    dr->geom_random_mean = D > 1 ? rmac / D : NAN;
    for (int b = 0; b < o->geom_bins && !rc; b++) {
        double lo = 180.0 * b / o->geom_bins, hi = 180.0 * (b + 1) / o->geom_bins;
        rc = store_ana_geometry(w, id, "decoder", b, lo, hi, dw->geo[b]);
        if (!rc) rc = store_ana_geometry(w, id, "random", b, lo, hi, dw->geo_rand[b]);
    }
    return rc;
}

/* Logit effects along the direct path: top and bottom logit_k tokens per feature. Sets
 * dr->logit_skipped when the hook has no linear direct path to the logits. */
static int write_logit_effects(const shared *sh, const dict *d, const ana_run_opts *o,
                               store_ana_writer *w, int64_t id, ana_dict_result *dr)
{
    const gpt2_config *cfg = gpt2_cfg(sh->model);
    /* the decoder writes to the output hook (a transcoder's hook_out) */
    const int D = d->d_sae, d_in = d->d_out;
    int ok, nd;
    int64_t shp[2];
    const char *dec_hook = d->hook_out.id >= 0 ? d->hook_out.name : sh->hook.name;
    const float *proj = gpt2_hook_direct_proj(sh->model, dec_hook, d_in, &ok);
    const int final = final_normalized(sh->model, dec_hook, d_in);
    const float *WU = gpt2_param(sh->model, "lm_head.weight", &nd, shp);
    const float *gamma = gpt2_param(sh->model, "ln_f.weight", &nd, shp);
    if (!(ok || final) || !WU || !gamma) {
        dr->logit_skipped = 1;
        return OK;
    }
    int V = cfg->vocab_size, blk = 128, k = o->logit_k < V ? o->logit_k : V;
    float *logits = mem_alloc((size_t)blk * V * sizeof *logits);
    int *lidx = mem_alloc((size_t)k * sizeof *lidx);
    float *lval = mem_alloc((size_t)k * sizeof *lval);
    int rc = !logits || !lidx || !lval ? err_set(ERR_NOMEM, "out of memory for logit effects") : OK;
    for (int j0 = 0; j0 < D && !rc; j0 += blk) {
        int nb = D - j0 < blk ? D - j0 : blk;
        rc = final ? ana_logit_effects_final(logits, d->W_dec + (size_t)j0 * d_in, nb, d_in, WU, V)
                   : ana_logit_effects(logits, d->W_dec + (size_t)j0 * d_in, nb, d_in, proj,
                                       cfg->n_embd, gamma, WU, V);
        for (int a = 0; a < nb && !rc; a++)
            for (int sign = 1; sign >= -1 && !rc; sign -= 2) {
                int n = ana_topk(lidx, lval, logits + (size_t)a * V, V, k, sign > 0);
                for (int r = 0; r < n && !rc; r++)
                    rc = store_ana_logit(w, id, j0 + a, sign, r, lidx[r], lval[r]);
            }
    }
    mem_free(logits);
    mem_free(lidx);
    mem_free(lval);
    return rc;
}

static int write_metrics(const ana_run_opts *o, const ana_dict_result *dr, store_ana_writer *w, int64_t id)
{
    const sae_metrics_summary *rm = &dr->rec;
    const ana_downstream *ds = &dr->ds;
    struct { const char *name; double v; } M[] = {
        /* rows that do not vary: 0/0, no measurement (NULL; it was stored as 0, an audit) */
        {"mse", rm->mse}, {"explained_variance", rm->ev_defined ? rm->ev : NAN}, {"cosine", rm->cos},
        {"l2_ratio", rm->l2_ratio}, {"l0", rm->l0}, {"dead_frac", rm->dead_frac},
        {"dense_frac", rm->dense_frac},
        {"geom_max_abs_cos_mean", dr->geom_mean},
        {"geom_random_max_abs_cos_mean", dr->geom_random_mean},
        {"geom_threshold", o->cos_threshold}, {"geom_n_over", dr->geom_over},
        {"geom_random_n_over", dr->geom_random_over},
    };
    int rc = OK;
    for (size_t i = 0; i < sizeof M / sizeof M[0] && !rc; i++) rc = store_ana_metric(w, id, M[i].name, M[i].v);
    /* a Matryoshka SAE's inner prefixes, by their end: matryoshka_prefix_128_ev, _mse, _l0 */
    for (int g = 0; g < rm->n_prefix && !rc; g++) {
        const char *suf[3] = {"ev", "mse", "l0"};
        double v[3] = {rm->ev_defined ? rm->prefix_ev[g] : NAN, rm->prefix_mse[g],
                       rm->prefix_l0[g]};
        for (int q = 0; q < 3 && !rc; q++) {
            char name[64];
            snprintf(name, sizeof name, "matryoshka_prefix_%d_%s", rm->prefix_end[g], suf[q]);
            rc = store_ana_metric(w, id, name, v[q]);
        }
    }
    if (!rc && dr->pos_n) rc = store_ana_metric(w, id, "pos_precision_mean", dr->pos_mean);
    if (!rc && dr->pos_n) rc = store_ana_metric(w, id, "pos_n_features", dr->pos_n);
    if (!rc && dr->have_downstream) {
        struct { const char *name; double v; } C[] = {
            {"ce_clean", ds->ce_clean}, {"ce_sae", ds->ce_sae}, {"ce_zero", ds->ce_zero},
            {"ce_sae_err", ds->ce_err}, {"ce_loss_score", ds->ce_score},
            {"kl_sae", ds->kl_sae}, {"kl_zero", ds->kl_zero}, {"kl_sae_err", ds->kl_err},
            {"kl_score", ds->kl_score}, {"ce_tokens", (double)ds->n},
        };
        for (size_t i = 0; i < sizeof C / sizeof C[0] && !rc; i++)
            if (!isnan(C[i].v) || strstr(C[i].name, "_err") == NULL) /* no_err_pass: not measured */
                rc = store_ana_metric(w, id, C[i].name, C[i].v);
        /* the forward's matmuls in bf16 (no row for fp32, as before) */
        if (!rc && op_precision_bf16()) rc = store_ana_metric(w, id, "model_bf16", 1.0);
    }
    return rc;
}

/* Rank 0's part after the reductions: the effects, the geometry and everything written in one
 * transaction (rolled back on failure). t0/t_ds: when the dictionary and its downstream pass
 * ended. */
static int finish_dict(shared *sh, dict *d, const ana_run_opts *o, pass_ckpt *ck,
                       int64_t sae_id, dict_work *dw, ana_dict_result *dr, double t0, double t_ds)
{
    effects_work ew = {0};
    store_ana_writer *w = NULL;
    int tx = 0, rc = OK;
    if (o->effects && d->sae && sh->model) rc = run_effects(sh, d, o, ck, &ew, dr);
    double t_eff = now_seconds();
    dr->t_effects = t_eff - t_ds;
    if (!rc) rc = dict_geometry(d, o, dw);
    double t_geo = now_seconds();
    sae_metrics_summarize(&dw->rec, &dr->rec);

    /* 4. write everything in one transaction */
    int64_t id = 0, ntok = ana_feat_tokens(dw->acc);
    if (!rc && !(rc = store_begin(sh->s))) tx = 1;
    /* the analysis tables are made in the same transaction as their first rows: an analyze that
       fails before (a NaN in the stored activations, a stop) leaves the database as it was */
    if (!rc) rc = store_ana_init(sh->s);
    if (!rc) rc = store_ana_writer_open(&w, sh->s);
    store_ana_dict dd = {.kind = d->kind, .sae_id = sae_id, .name = d->name,
                         /* "+bos" (--keep-bos): another analysis of the same sequences, not a
                            rerun of the default one (which replaced it without a word) */
                         .hook_name = sh->hook.name,
                         .split = o->all ? (o->keep_bos ? "all+bos" : "all")
                                         : (o->keep_bos ? "val+bos" : "val"),
                         .d_in = d->d_in, .d_sae = d->d_sae, .top_n = o->top_n,
                         .n_seqs = (int64_t)sh->nseq, .n_tokens = ntok,
                         .weights = d->sae ? d->weights : NULL};
    dr->replaced_seqs = -1;
    if (!rc) rc = store_ana_dict_begin(w, &dd, &id, &dr->replaced_seqs);
    if (!rc && sh->bpe && !sh->vocab_done) rc = write_vocab(sh, w);
    if (!rc) rc = write_features(sh, d, o, dw, w, id, dr);
    if (!rc && o->all_acts) rc = write_all_acts(sh, d, o, dw, w, id, dr);
    if (!rc) rc = write_geometry(o, dw, d->d_sae, w, id, dr);
    if (!rc && sh->model) rc = write_logit_effects(sh, d, o, w, id, dr);
    if (!rc && dr->have_effects) rc = write_effects(d, &ew, w, id);
    if (!rc) rc = write_metrics(o, dr, w, id);
    double secs = now_seconds() - t0;
    if (!rc) rc = store_ana_dict_seconds(w, id, secs);
    store_ana_writer_close(w);
    if (!rc) rc = store_commit(sh->s);
    if (rc && tx) store_rollback(sh->s);
    if (!rc) {
        if (sh->bpe) sh->vocab_done = 1;
        dr->dict_id = id;
        dr->n_tokens = ntok;
        dr->seconds = secs;
        dr->t_geometry = t_geo - t_eff;
        dr->t_write = t0 + secs - t_geo;
    }
    effects_work_free(&ew);
    return rc;
}

/* Everything about one dictionary. Collective: every rank computes its share of the pass and
 * of the downstream pass, the statistics reduce to rank 0, which alone runs the effects and the
 * geometry and writes; every rank returns rank 0's outcome. */
static int analyze_dict(shared *sh, dict *d, const ana_run_opts *o, int64_t sae_id, ana_dict_result *dr)
{
    memset(dr, 0, sizeof *dr);
    double t0 = now_seconds();
    dict_work dw;
    pass_ckpt ck = {0};
    int rc = dict_work_init(&dw, d, o);
    if (!rc) rc = ckpt_setup(&ck, sh, d, o);
    rc = dict_pass(sh, d, o, &dw, &ck, rc);
    double t_pass = now_seconds();
    /* 2. downstream loss (SAEs only: the identity dictionary reproduces the clean pass); every
       rank holds the model exactly when it runs */
    if (!rc && d->sae && sh->model) {
        rc = run_downstream(sh, d, o, &dr->ds, rc);
        dr->have_downstream = !rc;
    }
    double t_ds = now_seconds();
    if (!rc && dist_is_root()) rc = finish_dict(sh, d, o, &ck, sae_id, &dw, dr, t0, t_ds);
    rc = ana_agree(rc);
    if (rc == ERR_ABORTED) rc = stop_advice(&ck, o);
    else if (rc) rc = kept_advice(&ck, rc);
    if (!rc && ck.path[0]) ckpt_remove(&ck); /* written: nothing left to continue */
    /* the sequences every rank's checkpoint held (rank 0's alone read "145 of the sequences"
       where 542 of 600 were continued, an audit); every rank is here with the same rc */
    int64_t resumed = (int64_t)ck.resumed_seqs;
    if (!rc) rc = dist_sum_i64(&resumed, 1);
    if (!rc) {
        dr->kind = d->kind;
        dr->resumed_seqs = (size_t)resumed;
        snprintf(dr->name, sizeof dr->name, "%s", d->name);
        dr->n_seqs = sh->nseq;
        dr->d_sae = d->d_sae;
        dr->t_pass = t_pass - t0;
        dr->t_downstream = t_ds - t_pass;
    }
    dict_work_free(&dw);
    return rc;
}

/* The model directory: --model, else the path the database recorded for the hook's model.
 * skip: how the caller's user does without the model (analyze: " (--no-model skips them)"),
 * "" where it cannot (the sweep). */
#define NO_MODEL_HINT " (--no-model skips them)"
static int open_model(shared *sh, const ana_run_opts *o, const char *skip)
{
    const char *dir = o->model_dir, *want = NULL;
    store_model *ms = NULL;
    size_t nm = 0;
    int rc = store_model_list(sh->s, &ms, &nm);
    if (rc) return rc;
    for (size_t i = 0; i < nm; i++)
        if (ms[i].id == sh->hook.model_id) want = ms[i].checksum;
    if (!dir) {
        for (size_t i = 0; i < nm; i++)
            if (ms[i].id == sh->hook.model_id) dir = ms[i].path;
        /* an imported hook's row names no directory: it was opened as one ("(imported
           .npy)/config.json: cannot open", a user's run) */
        int imported = dir && !strcmp(dir, STORE_IMPORT_MODEL_PATH);
        if (!dir || imported) {
            mem_free(ms);
            return err_set(ERR_NOTFOUND, "%s: no model recorded for hook %s%s; give --model DIR%s",
                           o->db, sh->hook.name, imported ? " (imported from .npy)" : "",
                           skip[0] ? " or --no-model" : "");
        }
    }
    /* a relative path recorded by extract is relative to where extract ran; when it does not
       resolve from here, try it relative to the database's directory */
    char alt[4096];
    const char *recorded = dir;
    if (!o->model_dir && dir[0] != '/') {
        char probe[4096];
        const char *slash = strrchr(o->db, '/');
        rc = path_join(probe, sizeof probe, dir, "config.json");
        if (!rc && access(probe, R_OK) != 0 && slash) {
            rc = path_fmt(alt, sizeof alt, "%.*s/%s", (int)(slash - o->db), o->db, dir);
            dir = alt;
        }
        if (rc) {
            mem_free(ms);
            return rc;
        }
    }
    sh->model_path = mem_strdup(dir);
    /* the downstream metrics splice the SAE into the model that made the activations: another
       model of the same width (or the recorded directory's weights since replaced) gave a CE
       loss score of -6.2 instead of 0.996, exit 0 (an audit); extract records its checksum */
    const char *cs;
    if (want && want[0] && (rc = model_checksum(sh, &cs)) == OK && strcmp(cs, want))
        rc = err_set(ERR_ARG, "%s: checksum %s, but %s's hook %s was extracted from a model with "
                     "checksum %s; give that model (--model)%s", dir, cs, o->db, sh->hook.name,
                     want, skip[0] ? " or skip the model metrics (--no-model)" : "");
    else if (rc && !o->model_dir && dir != recorded)
        /* the recorded path named as recorded, the place tried beside the database after it:
           "the model demo/runs/demo/model recorded" named a path no database holds (a user's run) */
        err_wrap(rc, "the model %s recorded for hook %s (not found from here, nor as %s; give "
                 "--model DIR%s)", recorded, sh->hook.name, dir, skip[0] ? " or --no-model" : "");
    else if (rc && !o->model_dir) /* the path came from the database: say so (an audit) */
        err_wrap(rc, "the model %s recorded for hook %s (give --model DIR%s)", dir, sh->hook.name,
                 skip[0] ? " or --no-model" : "");
    /* and the SAE's own record: a database without its models row (forged, or written by
       another tool) left nothing to compare, and another model of the same shape scored the SAE,
       exit 0 (an audit) */
    if (!rc && sh->sae_model_sum[0] && (rc = model_checksum(sh, &cs)) == OK &&
        strcmp(cs, sh->sae_model_sum))
        rc = err_set(ERR_ARG, "%s: checksum %s, but the SAE was trained on activations of a model "
                     "with checksum %s; give that model (--model)%s", dir, cs, sh->sae_model_sum,
                     skip[0] ? " or skip the model metrics (--no-model)" : "");
    if (rc) {
        mem_free(ms);
        return rc;
    }
    rc = gpt2_load(&sh->model, dir);
    if (rc) err_wrap(rc, "loading the model for the downstream metrics%s", skip);
    int layer, width;
    if (!rc && gpt2_hook_info(sh->model, sh->hook.name, &layer, &width) == OK && width != sh->hook.width)
        rc = err_set(ERR_SHAPE, "%s: hook %s is %d wide in the model but %d in %s", dir,
                     sh->hook.name, width, sh->hook.width, o->db);
    mem_free(ms);
    return rc;
}

static int check_opts(const ana_run_opts *o)
{
    int rc = ana_dist_check_world();
    if (rc) return rc;
    if (!o->db) return err_set(ERR_ARG, "analyze: no database given");
    if (!o->sae_dir && !o->neurons) return err_set(ERR_ARG, "analyze: give an SAE directory and/or neurons");
    if (!o->sae_dir && !o->hook) return err_set(ERR_ARG, "analyze: the neuron basis alone needs a hook name");
    if (o->top_n < 1 || o->n_intervals < 1 || o->per_interval < 1 || o->reservoir < 1 || o->nbins < 1 ||
        o->geom_bins < 1 || o->logit_k < 1 || o->ce_seqs < 1 || o->max_seqs < 0 ||
        !(o->val_frac > 0 && o->val_frac < 1) || !(o->hist_lo > 0 && o->hist_lo < o->hist_hi))
        return err_set(ERR_ARG, "analyze: counts must be >= 1, val_frac in (0, 1), 0 < hist_lo < hist_hi");
    return OK;
}

/* The SAE in dir (--sae, or the directory its registry id names), loaded and checked against
 * the options. */
static int open_sae(const ana_run_opts *o, const char *dir, dict *sd)
{
    int rc = sae_load(&sd->sae, dir);
    if (!rc) rc = sae_weights_checksum(dir, sd->weights); /* report finds the analysis by it */
    if (rc) return rc;
    sd->d_in = sd->sae->cfg.d_in;
    sd->d_out = sae_out_dim(&sd->sae->cfg);
    sd->d_sae = sd->sae->cfg.d_sae;
    sd->W_dec = sd->sae->W_dec;
    /* the directory names the analysis (report --sae finds it by that name) */
    if (snprintf(sd->name, sizeof sd->name, "%s", dir) >= (int)sizeof sd->name)
        return err_set(ERR_ARG, "%.64s...: the SAE directory's name is too long", dir);
    if (o->hook && sd->sae->cfg.hook_name[0] && strcmp(o->hook, sd->sae->cfg.hook_name))
        return err_set(ERR_ARG, "%s: the SAE was trained on %s, not --hook %s", dir,
                       sd->sae->cfg.hook_name, o->hook);
    return OK;
}

/* Every rank: the SAE, the store (rank 0 read-write, the others read-only), the hook and the
 * shapes; the ranks but 0 the model when they need it. --sae is a directory, or a registry id
 * of the database (the store is opened first then, and the SAE found in the row's directory
 * must be the one the row describes). */
static int open_inputs(const ana_run_opts *o, shared *sh, dict *sd, dict *nd, ana_run_result *res)
{
    const int root = dist_is_root();
    int rc = OK, by_id = o->sae_dir && sae_registry_arg_is_id(o->sae_dir);
    if (o->sae_dir && !by_id && (rc = open_sae(o, o->sae_dir, sd))) return rc;
    if (by_id) { /* the registry first: the store opens before the SAE */
        store_sae_entry reg;
        if ((rc = store_open(&sh->s, o->db, root ? 0 : STORE_READONLY))) return rc;
        if ((rc = sae_registry_arg(sh->s, o->db, o->sae_dir, &reg, &by_id))) return rc;
        if (!by_id) rc = open_sae(o, o->sae_dir, sd); /* a directory of that name meanwhile */
        else if (!(rc = open_sae(o, reg.dir, sd)))
            rc = sae_check_registered(sd->sae, reg.dir, &reg, o->db);
        if (rc) return rc;
    }
    const char *dir = sd->sae ? sd->name : NULL;
    /* an SAE trained from an exported .npy may not name its hook: then --hook says it */
    const char *hook = sd->sae && sd->sae->cfg.hook_name[0] ? sd->sae->cfg.hook_name : o->hook;
    if (!hook) return err_set(ERR_ARG, "%s: the SAE's cfg.json names no hook_name; give --hook NAME", dir);
    if (!sh->s && (rc = store_open(&sh->s, o->db, root ? 0 : STORE_READONLY))) return rc;
    if ((rc = store_hook_find(sh->s, hook, &sh->hook))) return rc;
    if (sd->sae && (rc = sae_check_hook_model(sd->sae, dir, sh->s, &sh->hook, o->db))) return rc;
    if (sd->sae) snprintf(sh->sae_model_sum, sizeof sh->sae_model_sum, "%.16s", sd->sae->cfg.model_checksum);
    snprintf(res->hook, sizeof res->hook, "%s", sh->hook.name);
    res->hook_tokens = sh->hook.n_tokens;
    if ((rc = store_hook_unfinished(sh->s, sh->hook.name, &res->unfinished_run))) return rc;
    if (sd->sae && sd->d_in != sh->hook.width)
        return err_set(ERR_SHAPE, "%s: the SAE reads %d values per token but %s stores %d at %s",
                       dir, sd->d_in, o->db, sh->hook.width, hook);
    sd->hook_out.id = nd->hook_out.id = -1;
    if (sd->sae && sd->sae->cfg.transcoder) { /* its target: the output hook of the same extract */
        const char *ho = sd->sae->cfg.hook_name_out;
        if (!ho[0]) return err_set(ERR_ARG, "%s: the transcoder's cfg.json names no hook_name_out", dir);
        if ((rc = store_hook_find(sh->s, ho, &sd->hook_out))) return rc;
        /* pairs of one forward pass, as sae-train's: another extract's rows (another precision,
           model or length) were measured silently, or failed on a sequence's missing rows */
        if ((rc = sae_store_pair_check(sh->s, o->db, sh->hook.name, ho))) return rc;
        if (sd->hook_out.width != sd->d_out)
            return err_set(ERR_SHAPE, "%s: the transcoder writes %d values per token but %s stores %d "
                           "at %s", dir, sd->d_out, o->db, sd->hook_out.width, ho);
    }
    /* the other ranks need the model for an SAE's downstream pass only */
    if (!root && !o->no_model && sd->sae) return open_model(sh, o, NO_MODEL_HINT);
    return OK;
}

/* Rank 0, once every rank has opened its inputs: the split's tokens and tags, the model and the
 * tokenizer (the analysis tables come with the first write, in its transaction). */
static int root_inputs(const ana_run_opts *o, shared *sh)
{
    int rc;
    if ((rc = load_shared(sh, o))) return rc;
    if (!o->no_model && (rc = open_model(sh, o, NO_MODEL_HINT))) return rc;
    if (o->tok_dir) return tok_load(&sh->bpe, o->tok_dir);
    if (sh->model_path && tok_load(&sh->bpe, sh->model_path) != OK) {
        sh->bpe = NULL; /* optional: token texts then come from the store's tokens table */
        err_clear();
    }
    return OK;
}

/* Rank 0's split (sequence ids, token offsets, token ids, BOS flags) to every rank: read once.
 * Collective; rc: rank 0's root_inputs (OK elsewhere). */
static int share_inputs(shared *sh, int rc)
{
    if (dist_size() == 1) return rc;
    if ((rc = ana_agree(rc))) return rc;
    int64_t hdr[2] = {(int64_t)sh->nseq, sh->off ? sh->off[sh->nseq] : 0};
    if ((rc = dist_bcast(hdr, sizeof hdr))) return rc;
    if (!dist_is_root()) {
        sh->nseq = (size_t)hdr[0];
        sh->seq = mem_alloc((sh->nseq + 1) * sizeof *sh->seq);
        sh->off = mem_alloc((sh->nseq + 1) * sizeof *sh->off);
        sh->tok = mem_alloc(((size_t)hdr[1] + 1) * sizeof *sh->tok);
        sh->bos = mem_alloc(sh->nseq + 1);
        if (!sh->seq || !sh->off || !sh->tok || !sh->bos)
            rc = err_set(ERR_NOMEM, "out of memory for %zu sequences", sh->nseq);
    }
    rc = ana_agree(rc);
    if (!rc) rc = dist_bcast(sh->seq, sh->nseq * sizeof *sh->seq);
    if (!rc) rc = dist_bcast(sh->off, (sh->nseq + 1) * sizeof *sh->off);
    if (!rc) rc = dist_bcast(sh->tok, (size_t)hdr[1] * sizeof *sh->tok);
    if (!rc) rc = dist_bcast(sh->bos, sh->nseq);
    return rc;
}

/* The SAE's analysis, then the neurons'. Collective. */
static int run_dicts(const ana_run_opts *o, shared *sh, dict *sd, dict *nd, ana_run_result *res)
{
    int rc = OK;
    if (sd->sae && (rc = analyze_dict(sh, sd, o, -1, &res->dict[0]))) return rc;
    if (sd->sae) res->n_dicts = 1;
    if (!o->neurons) return OK;
    nd->d_in = nd->d_sae = nd->d_out = sh->hook.width;
    snprintf(nd->name, sizeof nd->name, "neurons@%s", sh->hook.name);
    nd->W_dec = mem_calloc((size_t)nd->d_in * nd->d_in, sizeof *nd->W_dec);
    if (!nd->W_dec) rc = err_set(ERR_NOMEM, "out of memory for the identity dictionary");
    else
        for (int i = 0; i < nd->d_in; i++) nd->W_dec[(size_t)i * nd->d_in + i] = 1;
    if ((rc = ana_agree(rc))) return rc;
    rc = analyze_dict(sh, nd, o, -1, &res->dict[res->n_dicts]);
    if (!rc) res->n_dicts++;
    return rc;
}

int ana_check_model(const ana_run_opts *o, const char *hook)
{
    shared sh = {0};
    int rc = store_open(&sh.s, o->db, STORE_READONLY);
    if (!rc) rc = store_hook_find(sh.s, hook, &sh.hook);
    if (!rc) rc = open_model(&sh, o, "");
    if (!rc && o->tok_dir) rc = tok_load(&sh.bpe, o->tok_dir);
    free_shared(&sh);
    store_close(sh.s);
    return rc;
}

/* Under mpirun, every rank's inputs are rank 0's: the SAE's shape and weights and the hook's
 * shape (phase 0), the model's files (phase 1, once rank 0 has opened it). Another SAE width on
 * one rank hung the job in a collective; another SAE or model behind the same path analysed
 * with exit 0 (an audit). Collective. */
static int same_inputs(const ana_run_opts *o, shared *sh, const dict *sd, int phase)
{
    struct {
        int64_t d_in, d_sae, width, n_tokens;
        char sae_sum[17], model_sum[17];
    } f;
    memset(&f, 0, sizeof f);
    int rc = OK;
    if (phase == 0) {
        f.d_in = sd->d_in;
        f.d_sae = sd->d_sae;
        f.width = sh->hook.width;
        f.n_tokens = sh->hook.n_tokens;
        memcpy(f.sae_sum, sd->weights, sizeof f.sae_sum); /* open_sae took it ("" for neurons) */
        return dist_same(rc, &f, sizeof f, "the SAE (its shape or weights) or the stored hook");
    }
    const char *cs;
    if (sd->sae && !o->no_model && sh->model_path && !(rc = model_checksum(sh, &cs)))
        memcpy(f.model_sum, cs, sizeof f.model_sum);
    return dist_same(rc, &f, sizeof f, "the model's files");
}

int ana_run(const ana_run_opts *opts, ana_run_result *res)
{
    ana_run_opts o = *opts;
    memset(res, 0, sizeof *res);
    res->unfinished_run = -1;
    /* under mpirun every rank opens its inputs and all agree before any work, so a world size,
       a flag or a file that does not fit stops every rank with one message */
    int rc = check_opts(&o);
    int prev_bf16 = op_precision_bf16();
    if (!rc) rc = op_set_precision(o.precision);
    /* which precision produced the CE/KL numbers: said and stored (neither was, an audit) */
    char why[160];
    if (op_precision_bf16()) snprintf(res->matmuls, sizeof res->matmuls, "bf16 (oneDNN, ISA %s)", op_bf16_isa());
    else if (o.precision == OP_PRECISION_AUTO) /* the fallback says why, as extract's does */
        snprintf(res->matmuls, sizeof res->matmuls, "fp32 (no bf16: %.80s)", op_bf16_why_not(why, sizeof why));
    else snprintf(res->matmuls, sizeof res->matmuls, "fp32 (OpenBLAS %s)", op_blas_core());
    shared sh = {0};
    dict sd = {.kind = "sae"}, nd = {.kind = "neurons"};
    if (!rc) rc = open_inputs(&o, &sh, &sd, &nd, res);
    rc = ana_agree(rc);
    if (!rc && dist_size() > 1) rc = same_inputs(&o, &sh, &sd, 0);
    if (!rc) rc = share_inputs(&sh, dist_is_root() ? root_inputs(&o, &sh) : OK);
    if (!rc && dist_size() > 1) rc = same_inputs(&o, &sh, &sd, 1);
    if (!rc) rc = run_dicts(&o, &sh, &sd, &nd, res);
    mem_free(nd.W_dec);
    sae_free(sd.sae);
    free_shared(&sh);
    /* the readers close before rank 0, the writer: the last connection to close checkpoints
       the WAL into the file and removes it. Rank 0 closing while a reader still had the file
       left the whole analysis in DB-wal (an audit, 1 run in 4 under mpirun -np 2): a copy of
       the .db alone had none of it. */
    if (!dist_is_root()) {
        store_close(sh.s);
        sh.s = NULL;
    }
    if (dist_size() > 1) { /* not ana_agree: its dist_check would clear an agreed error's
                              "shared" mark, and every rank would print it */
        int r2 = ana_barrier();
        if (!rc) rc = r2;
    }
    store_close(sh.s);
    op_set_precision(prev_bf16 ? OP_PRECISION_BF16 : OP_PRECISION_FP32);
    return rc;
}
