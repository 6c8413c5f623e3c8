/* report_run.c - drive the dashboards and pictures of `saelite report` from the database. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/mem.h"
#include "common/npy.h"
#include "common/progress.h"
#include "reports/dashboard.h"
#include "reports/report_run.h"
#include "sae/metrics.h"
#include "sae/sae.h"
#include "store/store_report.h"
#include "store/store_sae.h"

#define CTX_BEFORE 20
#define CTX_AFTER 12

void rep_run_defaults(rep_run_opts *o)
{
    memset(o, 0, sizeof *o);
    o->contexts = 20;
    o->per_interval = 3;
    o->bands = 5;
    o->threads = 2;
    o->global = 1;
    o->by = REP_BY_DENSITY;
    o->version = "?";
}

typedef struct {
    const rep_run_opts *o;       /* out_dir: the staging folder */
    const char *final_dir;       /* the user's --out */
    const store_rep_dict *dict;
    char **vocab;
    int nvocab;
    const int64_t *feats;
    int nfeats;
    uint64_t build;            /* the running program's checksum: a rebuilt drawing code redraws */
    int next, done, kept; /* done counts the kept ones too */
    pthread_mutex_t mu;
    progress pg; /* updated under mu: one thread at a time */
    int rc;
    char msg[ERR_MSG_MAX];
} job;

/* One context being assembled: token ids of the window, their text and activations. */
typedef struct {
    int n, lo;        /* window length, sequence position of its first token */
    int *ids;
    const char **tok;
    char **own;       /* strings this context owns (fallback text), entries may be NULL */
    float *act;
} ctx_buf;

static void ctx_free(ctx_buf *c)
{
    if (c->own)
        for (int i = 0; i < c->n; i++) mem_free(c->own[i]);
    mem_free(c->own);
    mem_free(c->ids);
    mem_free(c->tok);
    mem_free(c->act);
    memset(c, 0, sizeof *c);
}

static int ctx_build(job *j, store *s, store_rep *r, int64_t feature, int has_all,
                     const store_rep_act *a, const store_rep_act *all, size_t nall, ctx_buf *c,
                     rep_context *out)
{
    int center = 0;
    memset(c, 0, sizeof *c);
    int rc = store_rep_seq_window(r, a->seq_id, a->pos, CTX_BEFORE, CTX_AFTER, &c->ids, &c->n, &center);
    if (rc) return rc;
    c->lo = a->pos - center;
    c->tok = mem_calloc((size_t)c->n, sizeof *c->tok);
    c->own = mem_calloc((size_t)c->n, sizeof *c->own);
    c->act = mem_calloc((size_t)c->n, sizeof *c->act);
    if (!c->tok || !c->own || !c->act) return err_set(ERR_NOMEM, "out of memory");
    char **fallback = NULL;
    for (int i = 0; i < c->n; i++) {
        int id = c->ids[i];
        if (id >= 0 && id < j->nvocab && j->vocab[id]) {
            c->tok[i] = j->vocab[id];
            continue;
        }
        if (id < 0) { /* imported activations without token ids: one dot per position */
            c->tok[i] = "\xc2\xb7";
            continue;
        }
        /* No ana_vocab row: the core tokens table's text, else the id itself. */
        if (!fallback && (rc = store_rep_token_text(s, a->seq_id, c->lo, c->lo + c->n - 1, &fallback)))
            return rc;
        if (fallback && fallback[i]) {
            c->own[i] = fallback[i];
            fallback[i] = NULL;
        } else {
            char b[24];
            snprintf(b, sizeof b, "<%d>", id);
            if (!(c->own[i] = mem_strdup(b))) rc = err_set(ERR_NOMEM, "out of memory");
        }
        c->tok[i] = c->own[i];
    }
    if (fallback) store_rep_vocab_free(fallback, c->n);
    if (rc) return rc;
    /* Activations we know at the window's positions: every stored sample of this feature in
     * the same sequence, plus the complete non-zeros when analyze kept them (--all-acts). */
    for (size_t k = 0; k < nall; k++)
        if (all[k].seq_id == a->seq_id && all[k].pos >= c->lo && all[k].pos < c->lo + c->n)
            c->act[all[k].pos - c->lo] = all[k].value;
    if (has_all) {
        int pos[256], m = 0;
        float val[256];
        if ((rc = store_rep_seq_acts(r, feature, a->seq_id, c->lo, c->lo + c->n - 1, pos, val, 256, &m)))
            return rc;
        for (int k = 0; k < m; k++) c->act[pos[k] - c->lo] = val[k];
    }
    c->act[center] = a->value;
    *out = (rep_context){c->tok, c->act, c->n, center};
    return OK;
}

static const char *vocab_text(job *j, int id, char (*buf)[24], int k)
{
    if (id >= 0 && id < j->nvocab && j->vocab[id]) return j->vocab[id];
    snprintf(buf[k], 24, "<%d>", id);
    return buf[k];
}

/* Everything one dashboard needs, freed by dash_free. */
typedef struct {
    store_rep_act *acts;
    size_t nacts;
    ctx_buf *cb;
    rep_context *ctx;
    int nctx;
    rep_interval iv[16];
    char ivname[16][48];
    double *hlo, *hhi, *hcnt, *edges, *counts;
    size_t nh;
    int *lpt, *lnt;
    double *lpv, *lnv;
    size_t nlp, nln;
    const char *lp_txt[10], *ln_txt[10];
    char lbuf[20][24];
    char (*tags)[16];
    double *tagn;
    size_t ntags;
    const char *tagp[12];
    double tagf[12];
} dash;

static void dash_free(dash *d)
{
    for (int i = 0; i < d->nctx; i++) ctx_free(&d->cb[i]);
    mem_free(d->cb);
    mem_free(d->ctx);
    mem_free(d->acts);
    mem_free(d->hlo); mem_free(d->hhi); mem_free(d->hcnt); mem_free(d->edges); mem_free(d->counts);
    mem_free(d->lpt); mem_free(d->lnt); mem_free(d->lpv); mem_free(d->lnv);
    mem_free(d->tags); mem_free(d->tagn);
}

/* 1 when the dashboard of feature with content key `key` is staged at path already: staged by a
 * killed run whose folder this run took over, or in --out (final_dir), then staged as a second
 * link (over a killed run's stale one, in this run's folder), so publishing moves nothing. */
static int have_picture(const char *path, const char *final_dir, int64_t feature, const char *key)
{
    if (rep_png_has_key(path, "saelite-key", key)) return 1;
    char done[4096];
    if (path_fmt(done, sizeof done, "%s/feature_%lld.png", final_dir, (long long)feature)) {
        err_clear(); /* not reached: the staged path, which is longer, was made */
        return 0;
    }
    if (!rep_png_has_key(done, "saelite-key", key)) return 0;
    unlink(path);
    return link(done, path) == 0;
}

/* Which samples become rows, and their contexts: the top ranks (*ntop of them), then per quantile
 * band (highest band first) the first per_interval ranks, in d->iv (*niv bands). */
static int dash_contexts(job *j, store *s, store_rep *r, int64_t feature, int has_all, dash *d,
                         int *ntop_, int *niv_)
{
    const rep_run_opts *o = j->o;
    int rc = OK;
    /* acts come ordered by kind, interval, rank */
    int ntop = 0, maxband = -1; /* store_rep_acts checked 0 <= interval <= REP_MAX_INTERVAL */
    for (size_t k = 0; k < d->nacts; k++) {
        if (d->acts[k].kind == STORE_REP_TOP) ntop++;
        else if (d->acts[k].interval > maxband) maxband = d->acts[k].interval;
    }
    if (ntop > o->contexts) ntop = o->contexts;
    unsigned char *has = mem_calloc((size_t)maxband + 2, 1);
    if (!has) return err_set(ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < d->nacts; k++)
        if (d->acts[k].kind == STORE_REP_QUANTILE && d->acts[k].interval >= 0) has[d->acts[k].interval] = 1;
    int pick[16], nb = rep_pick_bands(has, maxband + 1, o->bands, pick);
    mem_free(has);
    d->cb = mem_calloc((size_t)(ntop + nb * o->per_interval + 1), sizeof *d->cb);
    d->ctx = mem_calloc((size_t)(ntop + nb * o->per_interval + 1), sizeof *d->ctx);
    if (!d->cb || !d->ctx) return err_set(ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < d->nacts && d->nctx < ntop && !rc; k++)
        if (d->acts[k].kind == STORE_REP_TOP) {
            rc = ctx_build(j, s, r, feature, has_all, &d->acts[k], d->acts, d->nacts, &d->cb[d->nctx],
                           &d->ctx[d->nctx]);
            d->nctx++;
        }
    int niv = 0;
    for (int pi = 0; pi < nb && !rc; pi++) {
        int band = pick[pi];
        rep_interval *iv = &d->iv[niv];
        iv->lo = INFINITY;
        iv->hi = -INFINITY;
        int first = d->nctx, taken = 0;
        for (size_t k = 0; k < d->nacts && !rc; k++) {
            const store_rep_act *a = &d->acts[k];
            if (a->kind != STORE_REP_QUANTILE || a->interval != band) continue;
            if (a->value < iv->lo) iv->lo = a->value;
            if (a->value > iv->hi) iv->hi = a->value;
            if (taken < o->per_interval) {
                rc = ctx_build(j, s, r, feature, has_all, a, d->acts, d->nacts, &d->cb[d->nctx], &d->ctx[d->nctx]);
                d->nctx++;
                taken++;
            }
        }
        if (!taken) continue;
        snprintf(d->ivname[niv], sizeof d->ivname[niv], "Quantile band %d of %d", band + 1, maxband + 1);
        iv->name = d->ivname[niv];
        iv->ctx = &d->ctx[first];
        iv->nctx = taken;
        niv++;
    }
    *ntop_ = ntop;
    *niv_ = niv;
    return rc;
}

/* The histogram's edges and counts from the stored bins (*nbins of them): the stored bins are the
 * non-empty ones of a shared log-spaced grid; zero bins go in the gaps so the edges are
 * contiguous. */
static int dash_hist(store_rep *r, int64_t feature, dash *d, int *nbins_)
{
    int rc;
    *nbins_ = 0;
    if ((rc = store_rep_hist(r, feature, &d->hlo, &d->hhi, &d->hcnt, &d->nh))) return rc;
    int nbins = 0;
    if (d->nh) {
        d->edges = mem_alloc(sizeof(double) * (2 * d->nh + 1));
        d->counts = mem_alloc(sizeof(double) * (2 * d->nh));
        if (!d->edges || !d->counts) return err_set(ERR_NOMEM, "out of memory");
        d->edges[0] = d->hlo[0];
        for (size_t k = 0; k < d->nh; k++) {
            if (d->hlo[k] > d->edges[nbins] * (1 + 1e-9)) { /* gap */
                d->counts[nbins++] = 0;
                d->edges[nbins] = d->hlo[k];
            }
            d->counts[nbins++] = d->hcnt[k];
            d->edges[nbins] = d->hhi[k] > d->edges[nbins - 1] ? d->hhi[k] : d->edges[nbins - 1] * 1.0001;
        }
    }
    *nbins_ = nbins;
    return OK;
}

/* Draws feature's dashboard, or sets *kept when the directory has it already. */
static int render_one(job *j, store *s, store_rep *r, int64_t feature, int *kept)
{
    const rep_run_opts *o = j->o;
    store_rep_feature st;
    int rc = store_rep_feature_get(r, feature, &st);
    if (rc) return rc;
    dash d;
    memset(&d, 0, sizeof d);
    rep_feature f;
    memset(&f, 0, sizeof f);
    int has_all = 0;
    if ((rc = store_rep_acts(r, feature, &d.acts, &d.nacts))) goto out;
    if ((rc = store_rep_has_all(r, feature, &has_all))) goto out;

    int ntop = 0, niv = 0, nbins = 0;
    if ((rc = dash_contexts(j, s, r, feature, has_all, &d, &ntop, &niv))) goto out;
    if ((rc = dash_hist(r, feature, &d, &nbins))) goto out;
    if ((rc = store_rep_logits(r, feature, 1, &d.lpt, &d.lpv, &d.nlp))) goto out;
    if ((rc = store_rep_logits(r, feature, -1, &d.lnt, &d.lnv, &d.nln))) goto out;
    if (d.nlp > 10) d.nlp = 10;
    if (d.nln > 10) d.nln = 10;
    for (size_t k = 0; k < d.nlp; k++) d.lp_txt[k] = vocab_text(j, d.lpt[k], d.lbuf, (int)k);
    for (size_t k = 0; k < d.nln; k++) d.ln_txt[k] = vocab_text(j, d.lnt[k], d.lbuf, 10 + (int)k);
    if ((rc = store_rep_pos(r, feature, &d.tags, &d.tagn, &d.ntags))) goto out;
    double tot = 0;
    for (size_t k = 0; k < d.ntags; k++) tot += d.tagn[k];
    int nt = d.ntags > 12 ? 12 : (int)d.ntags;
    for (int k = 0; k < nt; k++) {
        d.tagp[k] = d.tags[k];
        d.tagf[k] = tot > 0 ? d.tagn[k] / tot : 0;
    }

    char sae[640];
    if (j->dict->transcoder[0])
        snprintf(sae, sizeof sae, "%s %s: %s -> %s, %s split, %lld tokens", j->dict->transcoder,
                 j->dict->name, j->dict->hook_name, j->dict->hook_out, j->dict->split,
                 (long long)j->dict->n_tokens);
    else
        snprintf(sae, sizeof sae, "%s %s at %s, %s split, %lld tokens", j->dict->kind, j->dict->name,
                 j->dict->hook_name, j->dict->split, (long long)j->dict->n_tokens);
    f.feature = feature;
    f.sae = sae;
    f.transcoder_out = j->dict->transcoder[0] ? j->dict->hook_out : NULL;
    f.sampled_only = !has_all;
    f.density = st.density;
    f.max_act = st.max_act;
    f.mean_act = st.mean_act;
    f.best_tag = st.best_tag[0] ? st.best_tag : NULL;
    f.best_tag_precision = st.best_tag_precision;
    f.nearest = st.nearest;
    f.nearest_cos = st.nearest_cos;
    f.top = d.ctx;
    f.ntop = ntop < d.nctx ? ntop : d.nctx;
    f.intervals = d.iv;
    f.nintervals = niv;
    f.hist_edges = d.edges;
    f.hist_counts = d.counts;
    f.hist_bins = nbins;
    f.hist_log_x = 1;
    f.logit_pos = d.lp_txt;
    f.logit_pos_val = d.lpv;
    f.nlogit_pos = (int)d.nlp;
    f.logit_neg = d.ln_txt;
    f.logit_neg_val = d.lnv;
    f.nlogit_neg = (int)d.nln;
    f.tags = d.tagp;
    f.tag_frac = d.tagf;
    f.ntags = nt;

    char path[4096], fid[32], sid[32], did[32], ntok[32], nact[32];
    if ((rc = path_fmt(path, sizeof path, "%s/feature_%lld.png", o->out_dir, (long long)feature)))
        goto out;
    snprintf(fid, sizeof fid, "%lld", (long long)feature);
    snprintf(sid, sizeof sid, "%lld", (long long)j->dict->sae_id);
    snprintf(did, sizeof did, "%lld", (long long)j->dict->id);
    snprintf(ntok, sizeof ntok, "%lld", (long long)j->dict->n_tokens);
    snprintf(nact, sizeof nact, "%lld", (long long)st.n_active);
    /* dict-id and split: which analysis of the SAE the picture shows (serve --report matches
       them; an SAE analysed on two splits has two); dict-tokens and n-active: what that analysis
       counted (one made again keeps its id, and serve showed the older one's picture on it, a
       review; the time it was made would tell them apart too, but two runs' pictures of one
       analysis must be the same bytes) */
    rep_kv meta[12] = {{"Software", "saelite"}, {"saelite-version", o->version}, {"feature", fid},
                       {"sae", j->dict->name}, {"sae-id", sid}, {"hook", j->dict->hook_name},
                       {"database", o->db}, {"dict-id", did}, {"split", j->dict->split},
                       {"dict-tokens", ntok}, {"n-active", nact}, {"saelite-key", NULL}};
    /* The picture's content key: what it draws and its metadata. A dashboard already in the
       directory under the same key is that picture (files are written whole, then renamed), so
       a rerun (after a kill, or with more features) draws only what is missing or changed. */
    uint64_t h[2] = {0, j->build};
    rep_feature_key(&f, h);
    const int nmeta = (int)(sizeof meta / sizeof meta[0]);
    for (int i = 0; i < nmeta - 1; i++) {
        hash_absorb128_str(h, meta[i].key);
        hash_absorb128_str(h, meta[i].value);
    }
    char key[40];
    snprintf(key, sizeof key, "%016llx%016llx", (unsigned long long)h[0], (unsigned long long)h[1]);
    meta[nmeta - 1].value = key;
    *kept = !o->redraw && have_picture(path, j->final_dir, feature, key);
    if (!*kept) rc = rep_feature_dashboard(&f, path, meta, nmeta);
out:
    dash_free(&d);
    if (rc) err_wrap(rc, "feature %lld", (long long)feature);
    return rc;
}

static void *worker(void *arg)
{
    job *j = arg;
    store *s = NULL;
    store_rep *r = NULL;
    int rc = store_open(&s, j->o->db, STORE_READONLY);
    if (!rc) rc = store_rep_open(&r, s, j->dict->id);
    while (!rc) {
        pthread_mutex_lock(&j->mu);
        int i = j->rc || (j->o->stop && *j->o->stop) ? j->nfeats : j->next++;
        pthread_mutex_unlock(&j->mu);
        if (i >= j->nfeats) break;
        int kept = 0;
        rc = render_one(j, s, r, j->feats[i], &kept);
        pthread_mutex_lock(&j->mu);
        if (!rc) j->done++, j->kept += kept;
        progress_update(&j->pg, j->done, NULL);
        pthread_mutex_unlock(&j->mu);
    }
    if (rc) {
        pthread_mutex_lock(&j->mu);
        if (!j->rc) { /* keep the first error; err_msg() is per thread */
            j->rc = rc;
            snprintf(j->msg, sizeof j->msg, "%s", err_msg());
        }
        pthread_mutex_unlock(&j->mu);
    }
    store_rep_close(r);
    store_close(s);
    return NULL;
}

/* ---- feature selection ------------------------------------------------------------------- */
typedef struct { double key; int64_t n_active, feature; } rank_item;

static double rank_key(const store_rep_feature *f, int by)
{
    double v = by == REP_BY_MAX ? f->max_act : by == REP_BY_ALIGNMENT ? f->best_tag_precision : f->density;
    /* a dead feature (density 0) has no value for any ranking: --top 5000 --by density drew all
       138 dead ones, where the docs and --by max leave them out */
    return isfinite(v) && !(by == REP_BY_DENSITY && v <= 0) ? v : -INFINITY;
}

/* Descending key; ties: more active first, then lower index. */
static int cmp_rank(const void *a, const void *b)
{
    const rank_item *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? 1 : -1;
    if (x->n_active != y->n_active) return x->n_active < y->n_active ? 1 : -1;
    return x->feature < y->feature ? -1 : x->feature > y->feature;
}

/* ---- training log ------------------------------------------------------------------------ */
/* The training curve: tokens, mse, explained variance, l0 and dead fraction per log step, as
 * five arrays in one allocation. Its one source is the sae_training_log table that sae-train
 * --db writes (store_sae_log_find). A CSV is read only when asked for (--training-log FILE) or
 * when the SAE is not registered in this database (trained without --db, or on another one, then
 * analysed here): sae-train's training_log.csv, a header naming the columns
 * (step,tokens,mse,explained_variance,l0,dead_frac,...) then one row per log step. A resumed run
 * appends rows again from its checkpoint: a row whose tokens do not increase replaces the rows it
 * overlaps. */
typedef struct { double *tok, *mse, *ev, *l0, *dead; int n; } train_log;

static void train_log_free(train_log *t)
{
    mem_free(t->tok);
    memset(t, 0, sizeof *t);
}

/* Grows t to hold cap rows, keeping its t->n rows. */
static int train_log_grow(train_log *t, int cap)
{
    double *nb = mem_alloc(sizeof(double) * (size_t)cap * 5);
    if (!nb) return err_set(ERR_NOMEM, "out of memory");
    double *old[5] = {t->tok, t->mse, t->ev, t->l0, t->dead};
    for (int k = 0; k < 5 && t->tok; k++) memcpy(nb + (size_t)k * cap, old[k], sizeof(double) * (size_t)t->n);
    mem_free(t->tok);
    t->tok = nb;
    t->mse = nb + cap;
    t->ev = nb + 2 * (size_t)cap;
    t->l0 = nb + 3 * (size_t)cap;
    t->dead = nb + 4 * (size_t)cap;
    return OK;
}

/* v as the training_log.csv export prints it (%.*g) and train_log_read parses it back: the
 * curve is drawn at that precision (far below a pixel), so the table and a CSV of the same run
 * give the same picture byte for byte. */
/* Rows of the table at the precision of their CSV export (store_sae_log_round). */
static int train_log_from_rows(const store_sae_log_row *r, size_t n, train_log *t)
{
    memset(t, 0, sizeof *t);
    if (n > (size_t)INT32_MAX) return err_set(ERR_SHAPE, "training log: %zu rows", n);
    int rc = train_log_grow(t, n > 0 ? (int)n : 1);
    for (size_t i = 0; !rc && i < n; i++) {
        t->tok[i] = (double)r[i].tokens;
        store_sae_log_row q = r[i];
        store_sae_log_round(&q);
        t->mse[i] = q.mse;
        t->ev[i] = q.ev;
        t->l0[i] = q.l0;
        t->dead[i] = q.dead_frac;
    }
    if (!rc) t->n = (int)n;
    return rc;
}

static int train_log_read(const char *path, train_log *t)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "r");
    if (!f) return err_set(ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb; /* a directory read as an "empty training log" (an audit) */
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return err_set(ERR_IO, "%s: is a directory, not a training log", path);
    }
    /* whole lines: fgets into 4096 bytes cut a long row in two, each read as a row (an audit) */
    char *line = NULL;
    size_t lcap = 0;
    int col[5] = {-1, -1, -1, -1, -1}, ncol = 0, rc = OK, cap = 0, lineno = 1;
    static const char *const names[5] = {"tokens", "mse", "explained_variance", "l0", "dead_frac"};
    if (getline(&line, &lcap, f) < 0) {
        free(line);
        fclose(f);
        return err_set(ERR_FORMAT, "%s: empty training log", path);
    }
    for (char *tok = strtok(line, ",\r\n"); tok; tok = strtok(NULL, ",\r\n"), ncol++)
        for (int k = 0; k < 5; k++)
            if (!strcmp(tok, names[k])) col[k] = ncol;
    if (col[0] < 0) {
        free(line);
        fclose(f);
        return err_set(ERR_FORMAT, "%s: line 1: no 'tokens' column", path);
    }
    while (getline(&line, &lcap, f) >= 0) {
        lineno++;
        double v[64];
        int nv = 0;
        char *p = line;
        int bad = 0; /* a field that is not a number (the columns drawn) */
        while (nv < 64) {
            char *end;
            v[nv++] = strtod(p, &end);
            if (end == p) v[nv - 1] = NAN;
            for (int k = 0; k < 5; k++)
                if (col[k] == nv - 1 && (end == p || !strchr(",\r\n", *end))) bad = nv;
            p = strchr(end, ',');
            if (!p) break;
            p++;
        }
        if (nv <= col[0] || !isfinite(v[col[0]])) {
            if (line[0] == '\n' || line[0] == 0) continue;
            rc = err_set(ERR_FORMAT, "%s: line %d: no tokens value", path, lineno);
            break;
        }
        /* a row cut short or with extra fields, a drawn column that is not a number, and values
           no run can log were drawn ("L0 -32", "explained variance 5.000"; an audit) */
        if (nv != ncol || bad) {
            rc = bad ? err_set(ERR_FORMAT, "%s: line %d: column %d is not a number", path, lineno, bad)
                     : err_set(ERR_FORMAT, "%s: line %d: %d fields where the header has %d", path,
                               lineno, nv, ncol);
            break;
        }
        double mse = col[1] >= 0 ? v[col[1]] : 0, ev = col[2] >= 0 ? v[col[2]] : 0,
               l0 = col[3] >= 0 ? v[col[3]] : 0, dead = col[4] >= 0 ? v[col[4]] : 0;
        if (mse < 0 || ev > 1 || l0 < 0 || dead < 0 || dead > 1) { /* NaN passes: a logged NaN */
            rc = err_set(ERR_FORMAT, "%s: line %d: a value out of range (mse >= 0, explained "
                         "variance <= 1, l0 >= 0, dead_frac in [0, 1])", path, lineno);
            break;
        }
        while (t->n > 0 && t->tok[t->n - 1] >= v[col[0]]) t->n--; /* resumed: replace */
        if (t->n == cap) {
            if ((rc = train_log_grow(t, cap ? cap * 2 : 256))) break;
            cap = cap ? cap * 2 : 256;
        }
        double *dst[5] = {t->tok, t->mse, t->ev, t->l0, t->dead};
        for (int k = 0; k < 5; k++) dst[k][t->n] = col[k] >= 0 && col[k] < nv ? v[col[k]] : NAN;
        t->n++;
    }
    free(line);
    fclose(f);
    if (!rc && t->n == 0) rc = err_set(ERR_FORMAT, "%s: no log rows after the header", path);
    if (rc) train_log_free(t);
    return rc;
}

/* ERR_BUSY when a sae-train holds dir's lock (sae_run.c): it rewrites training_log.csv as it
 * goes and registers new weights at the end, so what report read there would mix two SAEs (an
 * audit drew the old analysis with the new run's curves and registry id, exit 0). */
static int refuse_if_training(const char *dir)
{
    if (!file_dir_lock_held(dir, ".sae-train.lock")) return OK;
    return err_set(ERR_BUSY, "%s: sae-train is writing into this directory (it holds "
                   ".sae-train.lock); run report when it has finished", dir);
}

/* The training curve of dict into *t and where it came from into from[cap] ("" and an empty
 * *t: none found): the registry's table, else the CSV named by --training-log or in the SAE's
 * directory (see above). */
static int train_log_load(const rep_run_opts *o, store *s, const store_rep_dict *dict,
                          const char *weights, train_log *t, char *from, size_t cap)
{
    memset(t, 0, sizeof *t);
    from[0] = 0;
    if (!o->training_log) {
        int64_t sid = -1;
        store_sae_log_row *rows = NULL;
        size_t n = 0;
        /* by directory only when the directory's weights are unknown: store_rep_dict_find
           already took the registry row of the same weights as dict->sae_id, and the newest
           registration of the directory may be a later run's */
        int rc = ERR_NOTFOUND;
        if (dict->sae_id >= 0 || !weights[0])
            rc = store_sae_log_find(s, dict->sae_id, dict->name, &sid, &rows, &n);
        if (rc == ERR_NOTFOUND && dict->sae_id >= 0 && !weights[0]) /* registered elsewhere */
            rc = store_sae_log_find(s, -1, dict->name, &sid, &rows, &n);
        if (rc == OK && n > 0) {
            rc = train_log_from_rows(rows, n, t);
            mem_free(rows);
            snprintf(from, cap, "%.300s (sae_training_log of SAE id %lld)", store_path(s), (long long)sid);
            return rc;
        }
        mem_free(rows);
        if (rc != OK && rc != ERR_NOTFOUND) return rc;
        err_clear();
    }
    char lp[4096];
    const char *log = o->training_log;
    struct stat sb;
    if (!log) {
        snprintf(lp, sizeof lp, "%s/training_log.csv", dict->name);
        if (stat(lp, &sb) != 0) return OK;
        log = lp;
    }
    snprintf(from, cap, "%.300s", log);
    int rc = train_log_read(log, t);
    /* the directory's CSV is the run that wrote the weights report started from only while
       they are still there: a sae-train started since rewrites both */
    if (o->training_log || !weights[0]) return rc;
    int busy = refuse_if_training(dict->name);
    if (busy) {
        train_log_free(t);
        return busy;
    }
    char now[17];
    if (sae_weights_checksum(dict->name, now) || strcmp(now, weights)) {
        train_log_free(t); /* another SAE's curve: none rather than the wrong one */
        memset(t, 0, sizeof *t);
        from[0] = 0;
        err_clear();
        return OK;
    }
    return rc;
}

/* ---- pictures of the whole dictionary ---------------------------------------------------- */
/* What every global picture shares: the options, the database and dictionary, the PNG text
 * chunks, the feature rows, two scratch arrays of nf doubles and the index being filled. */
typedef struct {
    const rep_run_opts *o;
    store *s;
    const store_rep_dict *dict;
    const store_rep_feature *fs;
    size_t nf;
    rep_kv meta[6];
    double *v, *w;         /* scratch, nf each */
    rep_index_entry *idx;
    int *nidx;
    char (*cap)[512];
    const char *weights; /* the checksum of --sae's weights when report started ("": unknown) */
} global_ctx;

/* Add file to the index; returns its caption buffer (512 bytes) for the caller to fill. */
static char *global_entry(global_ctx *g, const char *file)
{
    int i = (*g->nidx)++;
    g->idx[i].file = file;
    g->idx[i].caption = g->cap[i];
    return g->cap[i];
}

/* density.png: the log10 density histogram of every feature. */
static int picture_density(global_ctx *g)
{
    const store_rep_dict *dict = g->dict;
    char path[4096], title[384];
    int dead = 0, dense = 0, rc;
    for (size_t i = 0; i < g->nf; i++) {
        g->v[i] = g->fs[i].density;
        dead += !(g->fs[i].density > 0);
        dense += g->fs[i].density > 0.1;
    }
    if ((rc = path_join(path, sizeof path, g->o->out_dir, "density.png"))) return rc;
    snprintf(title, sizeof title, "Feature density: %s", dict->name);
    if ((rc = rep_plot_density(path, g->meta, 6, title, g->v, (int)g->nf, 0, 0.1))) return rc;
    snprintf(global_entry(g, "density.png"), 512, "Feature density (log10) of %zu features: %d dead "
             "(never active on the %lld analysed tokens), %d dense (active on more than 10%% of tokens).",
             g->nf, dead, (long long)dict->n_tokens, dense);
    return OK;
}

/* decoder_angles.png: the decoder geometry analyze stored (decoder against random directions)
 * and each feature's max |cos| to another feature. */
static int picture_decoder_angles(global_ctx *g)
{
    const store_rep_dict *dict = g->dict;
    char path[4096], title[384];
    double *w = g->w;
    double *dlo = NULL, *dhi = NULL, *dc = NULL, *rlo = NULL, *rhi = NULL, *rcnt = NULL;
    size_t nd = 0, nr = 0;
    int rc;
    if ((rc = store_rep_geometry(g->s, dict->id, "decoder", &dlo, &dhi, &dc, &nd))) return rc;
    rc = store_rep_geometry(g->s, dict->id, "random", &rlo, &rhi, &rcnt, &nr);
    int nmc = 0;
    for (size_t i = 0; i < g->nf; i++)
        if (isfinite(g->fs[i].nearest_cos)) w[nmc++] = fabs(g->fs[i].nearest_cos);
    if (!rc && (nd || nmc)) {
        /* Both sources share one grid of equal-width bins, but empty bins may be missing:
         * rebuild the full grid from the bin width and place each stored row in it. */
        double width = nd ? dhi[0] - dlo[0] : 1, start = INFINITY, stop = -INFINITY;
        for (size_t i = 0; i < nd; i++) { start = fmin(start, dlo[i]); stop = fmax(stop, dhi[i]); }
        for (size_t i = 0; i < nr; i++) { start = fmin(start, rlo[i]); stop = fmax(stop, rhi[i]); }
        /* in double: a bin width of 1e-12 degrees made lround's result overflow int, and the
           negative count slipped past the guard into "out of memory" */
        double ngd = nd && width > 0 ? round((stop - start) / width) : 0;
        if (!(ngd <= 100000)) {
            rc = err_set(ERR_FORMAT, "%s: ana_geometry: bin width %.3g degrees over %.6g..%.6g gives %.3g "
                         "bins (more than 100000)", store_path(g->s), width, start, stop, ngd);
            goto done;
        }
        int ng = (int)ngd;
        double *edges = mem_alloc(sizeof(double) * (size_t)(3 * ng + 1));
        if (!edges) rc = err_set(ERR_NOMEM, "out of memory");
        else {
            double *gd = edges + ng + 1, *gr = gd + ng;
            for (int i = 0; i <= ng; i++) edges[i] = start + width * i;
            for (int i = 0; i < ng; i++) gd[i] = gr[i] = 0;
            for (size_t i = 0; i < nd; i++) {
                long b = lround((dlo[i] - start) / width);
                if (b >= 0 && b < ng) gd[b] += dc[i];
            }
            for (size_t i = 0; i < nr; i++) {
                long b = lround((rlo[i] - start) / width);
                if (b >= 0 && b < ng) gr[b] += rcnt[i];
            }
            rc = path_join(path, sizeof path, g->o->out_dir, "decoder_angles.png");
            snprintf(title, sizeof title, "Decoder angles: %s", dict->name);
            if (!rc) rc = rep_plot_decoder_angles(path, g->meta, 6, title, ng ? edges : NULL, ng ? gd : NULL,
                                         nr ? gr : NULL, ng, 1, dict->d_in, nmc ? w : NULL, nmc);
            mem_free(edges);
            if (!rc) {
                double m = 0;
                for (int i = 0; i < nmc; i++) m += w[i];
                snprintf(global_entry(g, "decoder_angles.png"), 512, "Angles between decoder directions "
                         "against random unit vectors in %d dimensions (%s), and each feature's max |cos| "
                         "to another feature (mean %.3f).", dict->d_in,
                         nr ? "measured by analyze" : "exact distribution", nmc ? m / nmc : NAN);
            }
        }
    }
done:
    mem_free(dlo); mem_free(dhi); mem_free(dc); mem_free(rlo); mem_free(rhi); mem_free(rcnt);
    return rc;
}

/* pos_precision.png: SAE features' best POS-tag precision against the neuron basis at the same
 * hook (when analyze --neurons stored it). Nothing for a neuron dictionary or without tags. */
static int picture_pos_precision(global_ctx *g)
{
    const store_rep_dict *dict = g->dict;
    char path[4096];
    double *v = g->v;
    int np = 0, rc;
    for (size_t i = 0; i < g->nf; i++)
        if (g->fs[i].best_tag[0] && isfinite(g->fs[i].best_tag_precision)) v[np++] = g->fs[i].best_tag_precision;
    if (np == 0 || !strcmp(dict->kind, "neurons")) return OK;
    store_rep_dict nd2;
    store_rep_feature *nfs = NULL;
    size_t nn = 0;
    double *nv = NULL;
    int nnp = 0;
    if (store_rep_dict_neurons_for(g->s, dict, &nd2) == OK) {
        if ((rc = store_rep_features(g->s, nd2.id, &nfs, &nn))) return rc;
        nv = mem_alloc(sizeof(double) * (nn ? nn : 1));
        if (!nv) {
            mem_free(nfs);
            return err_set(ERR_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < nn; i++)
            if (nfs[i].best_tag[0] && isfinite(nfs[i].best_tag_precision)) nv[nnp++] = nfs[i].best_tag_precision;
    }
    err_clear();
    rc = path_join(path, sizeof path, g->o->out_dir, "pos_precision.png");
    if (!rc) rc = rep_plot_pos_compare(path, g->meta, 6, "Best POS-tag precision",
                              v, np, nnp ? nv : NULL, nnp, dict->top_n);
    mem_free(nfs);
    mem_free(nv);
    if (rc) return rc;
    snprintf(global_entry(g, "pos_precision.png"), 512, "Best part-of-speech tag precision: %d SAE features%s.",
             np, nnp ? " against the model's neurons at the same hook" : " (no neuron-basis analysis "
                   "in the database: run analyze --neurons for the comparison)");
    return OK;
}

/* recovery.png: recovered against true features (synthetic data, --ground-truth). */
static int picture_recovery(global_ctx *g)
{
    const rep_run_opts *o = g->o;
    const store_rep_dict *dict = g->dict;
    char path[4096];
    float *T = NULL, *D = NULL, *C = NULL;
    int nd3 = 0, rc;
    int64_t sh[NPY_MAX_DIMS];
    if ((rc = npy_read(o->ground_truth, &T, &nd3, sh))) return rc;
    int nt = (int)sh[0], din = nd3 == 2 ? (int)sh[1] : -1;
    if (nd3 != 2 || din != dict->d_in || nt < 1) {
        char shs[200];
        npy_shape_str(shs, sizeof shs, nd3, sh);
        mem_free(T);
        return err_set(ERR_SHAPE, "%s: ground truth must be [n_features >= 1, %d], got shape %s",
                       o->ground_truth, dict->d_in, shs);
    }
    if ((rc = sae_truth_check(o->ground_truth, T, nt, din)) ||
        (rc = store_rep_decoder(g->s, dict->id, dict->d_sae, dict->d_in, &D))) {
        mem_free(T);
        return rc;
    }
    int ns = dict->d_sae;
    int rows = nt < 48 ? nt : 48;
    float *bestf = mem_alloc(sizeof(float) * (size_t)(nt > 0 ? nt : 1));
    double *best = mem_alloc(sizeof(double) * (size_t)(nt > 0 ? nt : 1));
    int *arg = mem_alloc(sizeof(int) * (size_t)(nt > 0 ? nt : 1));
    float *Dm = mem_alloc(sizeof(float) * (size_t)(rows > 0 ? rows : 1) * din);
    C = mem_alloc(sizeof(float) * (size_t)(rows > 0 ? rows : 1) * (rows > 0 ? rows : 1));
    double *sub = mem_alloc(sizeof(double) * (size_t)(rows > 0 ? rows : 1) * (rows > 0 ? rows : 1));
    double mmcs = NAN, frac = 0;
    if (!bestf || !best || !arg || !Dm || !C || !sub) rc = err_set(ERR_NOMEM, "out of memory");
    /* MMCS and each true feature's best SAE feature: the one definition (sae/metrics.h) */
    else rc = sae_mmcs_match(T, nt, D, ns, din, 0.9, &mmcs, &frac, bestf, arg);
    /* heat map: the first `rows` true features against their best SAE features */
    if (!rc && rows > 0) {
        for (int k = 0; k < rows; k++)
            memcpy(Dm + (size_t)k * din, D + (size_t)arg[k] * din, sizeof(float) * (size_t)din);
        rc = sae_cosines(T, rows, Dm, rows, din, C);
    }
    if (!rc) {
        int good = 0;
        for (int i = 0; i < nt; i++) {
            best[i] = bestf[i];
            good += bestf[i] > 0.9; /* as sae_mmcs counts *recovered */
        }
        for (size_t i = 0; i < (size_t)rows * rows; i++) sub[i] = C[i];
        rc = path_join(path, sizeof path, o->out_dir, "recovery.png");
        if (!rc) rc = rep_plot_recovery(path, g->meta, 6, "Best cos per true feature",
                               sub, rows, rows, best, nt);
        if (!rc)
            snprintf(global_entry(g, "recovery.png"), 512, "Synthetic ground truth (%.300s): MMCS %.3f, %d of "
                     "%d true features recovered at cos > 0.9. Left: the first %d true features against "
                     "their best SAE features.", o->ground_truth, mmcs, good, nt, rows);
    }
    mem_free(bestf); mem_free(Dm);
    mem_free(T); mem_free(D); mem_free(C); mem_free(best); mem_free(arg); mem_free(sub);
    return rc;
}

/* training.png: the training curves, when a training log is found (train_log_load). */
static int picture_training(global_ctx *g)
{
    const store_rep_dict *dict = g->dict;
    char path[4096], title[384];
    train_log t;
    char from[512];
    int rc;
    if ((rc = train_log_load(g->o, g->s, dict, g->weights, &t, from, sizeof from))) return rc;
    if (!from[0]) return OK;
    rc = path_join(path, sizeof path, g->o->out_dir, "training.png");
    snprintf(title, sizeof title, "Training curves: %s", dict->name);
    if (!rc) rc = rep_plot_training(path, g->meta, 6, title, t.tok, t.mse, t.ev, t.l0, t.dead, t.n);
    if (!rc)
        snprintf(global_entry(g, "training.png"), 512, "Training curves from %.320s (%d log rows): MSE, "
                 "explained variance, L0 and dead fraction against tokens seen; last explained variance "
                 "%.3f, L0 %.1f.", from, t.n, t.n ? t.ev[t.n - 1] : NAN, t.n ? t.l0[t.n - 1] : NAN);
    train_log_free(&t);
    return rc;
}

/* The pictures of the whole dictionary, in this order (each added to idx[*nidx..] with its
 * caption in cap[]): density, decoder angles, POS precision, recovery, training curves. */
static int global_pictures(const rep_run_opts *o, store *s, const store_rep_dict *dict,
                           const store_rep_feature *fs, size_t nf, rep_index_entry *idx, int *nidx,
                           char (*cap)[512], const char *weights)
{
    char sid[32];
    snprintf(sid, sizeof sid, "%lld", (long long)dict->sae_id);
    global_ctx g = {o, s, dict, fs, nf,
                    {{"Software", "saelite"}, {"saelite-version", o->version}, {"sae", dict->name},
                     {"sae-id", sid}, {"hook", dict->hook_name}, {"database", o->db}},
                    NULL, NULL, idx, nidx, cap, weights};
    g.v = mem_alloc(sizeof(double) * (nf ? nf : 1) * 2);
    if (!g.v) return err_set(ERR_NOMEM, "out of memory");
    g.w = g.v + nf;
    int rc = picture_density(&g);
    if (!rc) rc = picture_decoder_angles(&g);
    if (!rc) rc = picture_pos_precision(&g);
    if (!rc && o->ground_truth) rc = picture_recovery(&g);
    if (!rc) rc = picture_training(&g);
    mem_free(g.v);
    return rc;
}

/* The features to draw into *sel[*nsel] (the caller frees *sel, also on an error): the explicit
 * --features list (each must exist, duplicates drawn once) or the top N by o->by. */
static int select_features(const rep_run_opts *o, const store_rep_dict *dict, const store_rep_feature *fs,
                           size_t nf, int64_t **sel, int *nsel)
{
    *nsel = 0;
    if (o->features) {
        int64_t *sl = *sel = mem_alloc(sizeof(int64_t) * (size_t)(o->nfeatures > 0 ? o->nfeatures : 1));
        if (!sl) return err_set(ERR_NOMEM, "out of memory");
        for (int i = 0; i < o->nfeatures; i++) {
            int f = o->features[i];
            /* features are stored for every index 0..d_sae-1, ordered */
            size_t lo = 0, hi = nf;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (fs[mid].feature < f) lo = mid + 1;
                else hi = mid;
            }
            if (lo >= nf || fs[lo].feature != f) /* the range analysed, only when it is one */
                return err_set(ERR_NOTFOUND, "%s: feature %d is not in the analysis of '%s' (%zu features%s%lld..%lld)",
                               o->db, f, dict->name, nf, fs[nf - 1].feature - fs[0].feature + 1 == (int64_t)nf ? ": " : " in ",
                               (long long)fs[0].feature, (long long)fs[nf - 1].feature);
            int dup = 0;
            for (int k = 0; k < *nsel; k++) dup |= sl[k] == f;
            if (!dup) sl[(*nsel)++] = f;
        }
        return OK;
    }
    int n = o->top > 0 ? o->top : 20;
    int64_t *sl = *sel = mem_alloc(sizeof(int64_t) * nf);
    rank_item *ri = mem_alloc(sizeof(rank_item) * nf);
    if (!sl || !ri) {
        mem_free(ri);
        return err_set(ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < nf; i++)
        ri[i] = (rank_item){rank_key(&fs[i], o->by), fs[i].n_active, fs[i].feature};
    qsort(ri, nf, sizeof *ri, cmp_rank);
    int m = n < (int)nf ? n : (int)nf;
    /* ranking by max or alignment leaves out features that have no value for it */
    while (m > 0 && !isfinite(ri[m - 1].key)) m--;
    for (int i = 0; i < m; i++) sl[i] = ri[i].feature;
    *nsel = m;
    mem_free(ri);
    return OK;
}

/* Every picture and index.html is drawn into DIR/.saelite-report.tmp.PID and moved into DIR
 * only when the whole run succeeded: a run that failed half way (a tampered feature after the
 * global pictures) replaced the four global pictures with its own beside the old index.html and
 * dashboards (audit). */
#define STAGE_PREFIX ".saelite-report.tmp."
/* the endings of what a run writes (their temps NAME.tmp.PID are a killed run's leftovers) */
static const char *const STAGED[] = {".png", "index.html"};

/* Create the output directory (an existing one is fine) and check it is one. */
/* A report that failed in a directory it created leaves nothing: everything in it is this
 * run's (pictures, pages; no subdirectories), so its files and then the directory go. */
static void remove_made_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4200];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            path_join(p, sizeof p, dir, e->d_name) == OK)
            unlink(p);
    closedir(d);
    rmdir(dir);
}

/* The output directory; *made = 1 when this run created it. The temporary files of a run killed
 * inside an atomic write (NAME.png.tmp.PID, index.html.tmp.PID) go: a rerun kept them beside its
 * complete pictures (audit). */
static int make_out_dir(const char *dir, int *made)
{
    if (mkdir(dir, 0777) == 0) *made = 1;
    else if (errno != EEXIST)
        return err_set(ERR_IO, "%s: cannot create the output directory: %s", dir, strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return err_set(ERR_IO, "%s: not a directory", dir);
    file_remove_temps_ending(dir, STAGED, 2);
    return OK;
}

/* 1 when dir holds regular files only (what a run stages; a folder or link there would stop
 * every run that took the folder over: an audit) */
static int only_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    char p[4200];
    struct stat sb;
    int ok = 1;
    while (ok && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            ok = path_join(p, sizeof p, dir, e->d_name) == OK && lstat(p, &sb) == 0 && S_ISREG(sb.st_mode);
    closedir(d);
    return ok;
}

/* This run's staging folder `stage` in dir. The staging folder of a killed or interrupted run
 * (its process gone) holds the dashboards it finished, each whole: the first one found becomes
 * this run's (renamed), so that its dashboards are kept where their keys match; the others go.
 * One named with this process's id is a dead run's too (ids repeat: a container's first process
 * is always 1). A live run's stay: a second report into the same directory removed them, and the
 * first failed (an audit). Only a folder of regular files is taken over. */
static int make_stage(const char *dir, const char *stage)
{
    int adopted = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[4200], own[32];
    size_t pl = strlen(STAGE_PREFIX);
    struct stat sb;
    snprintf(own, sizeof own, "%ld", (long)getpid());
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, STAGE_PREFIX, pl)) continue;
        int mine = !strcmp(e->d_name + pl, own);
        if (mine && adopted) continue; /* the folder just renamed into place */
        if ((!mine && !file_pid_gone(e->d_name + pl)) || path_join(p, sizeof p, dir, e->d_name) != OK)
            continue;
        int dir_here = lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
        if (!adopted && dir_here && only_files(p) && (mine || rename(p, stage) == 0)) {
            file_remove_temps_ending(stage, STAGED, 2);
            adopted = 1;
        } else if (dir_here) remove_made_dir(p); /* its files; the folder too when nothing else */
        else unlink(p); /* a link by that name: removed itself, the folder it names untouched */
    }
    if (d) closedir(d);
    if (!adopted && mkdir(stage, 0777) != 0)
        return err_set(ERR_IO, "%s: cannot create: %s%s", stage, strerror(errno),
                       errno == EEXIST ? " (an earlier run's staging folder that holds more than "
                                         "pictures: remove it)" : "");
    return OK;
}

/* Move the files of a finished run (idx[nidx] and index.html) from the staging folder into dir. */
static int publish(const char *stage, const char *dir, const rep_index_entry *idx, int nidx)
{
    char from[4200], to[4200];
    for (int i = 0; i <= nidx; i++) {
        const char *name = i < nidx ? idx[i].file : "index.html";
        int rc = path_join(from, sizeof from, stage, name);
        if (!rc) rc = path_join(to, sizeof to, dir, name);
        if (rc) return rc;
        if (rename(from, to) != 0)
            return err_set(ERR_IO, "%s: cannot move into %s: %s", from, dir, strerror(errno));
    }
    return OK;
}

/* Draw the dashboards of sel[nsel] on o->threads threads (the calling one included); counts
 * and time into res. */
static int run_dashboards(const rep_run_opts *o, const char *final_dir, const store_rep_dict *dict,
                          char **vocab, int nvocab, const int64_t *sel, int nsel, rep_run_result *res)
{
    double t1 = now_seconds();
    job j;
    memset(&j, 0, sizeof j);
    j.o = o;
    j.final_dir = final_dir;
    /* the drawing code is part of a picture's content: the program's bytes (4 MB, a few ms) key
       it, so a rebuilt saelite of the same version draws again; unreadable: the version only */
    if (file_fnv1a("/proc/self/exe", &j.build)) {
        j.build = 0;
        err_clear();
    }
    j.dict = dict;
    j.vocab = vocab;
    j.nvocab = nvocab;
    j.feats = sel;
    j.nfeats = nsel;
    pthread_mutex_init(&j.mu, NULL);
    /* 1024 dashboards took 10 s with nothing on stderr (audit) */
    progress_begin(&j.pg, "report", nsel, "dashboard");
    int nth = o->threads < 1 ? 1 : o->threads > 64 ? 64 : o->threads;
    if (nth > nsel) nth = nsel > 0 ? nsel : 1;
    pthread_t th[64];
    int started = 0;
    for (int i = 1; i < nth; i++) {
        if (pthread_create(&th[i], NULL, worker, &j) != 0) break;
        started++;
    }
    worker(&j); /* the calling thread works too */
    for (int i = 1; i <= started; i++) pthread_join(th[i], NULL);
    progress_end(&j.pg);
    pthread_mutex_destroy(&j.mu);
    res->dashboards = j.done;
    res->kept = j.kept;
    res->dashboard_seconds = now_seconds() - t1;
    if (j.rc) return err_set(j.rc, "%s", j.msg);
    if (o->stop && *o->stop)
        return err_set(ERR_ABORTED, "interrupted after %d dashboards (kept for the same command: it "
                       "draws the rest)", j.done);
    return OK;
}

/* Index entries for the dashboards of sel[nsel] at idx[*nidx..]; their file names are
 * mem_strdup'd (the caller frees them). */
static int dashboard_entries(const rep_run_opts *o, const store_rep_feature *fs, size_t nf,
                             const int64_t *sel, int nsel, rep_index_entry *idx, char (*cap)[512], int *nidx)
{
    for (int i = 0; i < nsel; i++) {
        static const char *const byname[] = {"density", "max activation", "POS alignment"};
        char file[64];
        snprintf(file, sizeof file, "feature_%lld.png", (long long)sel[i]);
        const store_rep_feature *f = NULL;
        for (size_t k = 0; k < nf && !f; k++)
            if (fs[k].feature == sel[i]) f = &fs[k];
        char *fcopy = mem_strdup(file);
        if (!fcopy) return err_set(ERR_NOMEM, "out of memory");
        int n = *nidx;
        idx[n].file = fcopy;
        /* a dead feature has no maximum (ana_features stores NULL): say so, not "nan" */
        char mx[48];
        if (f && f->n_active > 0 && isfinite(f->max_act)) snprintf(mx, sizeof mx, "max activation %.3g", f->max_act);
        else snprintf(mx, sizeof mx, "%s", f ? "dead: never active" : "not analysed");
        snprintf(cap[n], 512, "Feature %lld: density %.3g, %s%s%s%s%s", (long long)sel[i],
                 f ? f->density : NAN, mx, f && f->best_tag[0] ? ", best POS " : "",
                 f && f->best_tag[0] ? f->best_tag : "", o->features ? "" : "; ranked by ",
                 o->features ? "" : byname[o->by < 0 || o->by > 2 ? 0 : o->by]);
        idx[n].caption = cap[n];
        (*nidx)++;
    }
    return OK;
}

/* index.html: the title and introduction of dict, then every entry. */
static int write_index(const rep_run_opts *o, const store_rep_dict *dict, const rep_index_entry *idx, int nidx)
{
    char title[400], intro[900];
    snprintf(title, sizeof title, "saelite report: %s", dict->name);
    if (dict->transcoder[0])
        snprintf(intro, sizeof intro, "%s '%s' from %s to %s: %d features, d_in %d, analysed on the %s "
                 "split (%lld sequences, %lld tokens) of %s. Each dashboard's contexts are the input "
                 "side, its logit effects (the decoder through the unembedding) the output side. Click "
                 "a picture for full size.", dict->transcoder, dict->name, dict->hook_name,
                 dict->hook_out, dict->d_sae, dict->d_in, dict->split, (long long)dict->n_seqs,
                 (long long)dict->n_tokens, o->db);
    else
        snprintf(intro, sizeof intro, "%s dictionary '%s' at %s: %d features, d_in %d, analysed on the %s split "
                 "(%lld sequences, %lld tokens) of %s. Click a picture for full size.", dict->kind, dict->name,
                 dict->hook_name, dict->d_sae, dict->d_in, dict->split, (long long)dict->n_seqs,
                 (long long)dict->n_tokens, o->db);
    return rep_write_index(o->out_dir, title, intro, idx, nidx);
}

/* The facts of the analysis the pictures rest on, as analyze writes them: a positive width, size
 * and token count (the density caption divides by n_tokens, the decoder-angle reference uses
 * d_in), and feature ids in 0..d_sae-1 (feature 99999 of a 4096-feature SAE was drawn, and
 * counted in density.png). The per-feature values are checked as they are read (store_report.c). */
static int check_analysis(const rep_run_opts *o, const store_rep_dict *dict, const store_rep_feature *fs, size_t nf)
{
    if (dict->d_in < 1 || dict->d_sae < 1 || dict->n_tokens < 1 || dict->n_seqs < 1)
        return err_set(ERR_FORMAT, "%s: ana_dicts: analysis %lld of '%s': d_in %d, d_sae %d, n_seqs %lld, "
                       "n_tokens %lld (each must be >= 1)", o->db, (long long)dict->id, dict->name, dict->d_in,
                       dict->d_sae, (long long)dict->n_seqs, (long long)dict->n_tokens);
    for (size_t i = 0; i < nf; i++)
        if (fs[i].feature < 0 || fs[i].feature >= dict->d_sae)
            return err_set(ERR_FORMAT, "%s: ana_features: feature %lld is outside 0..%d (d_sae %d of '%s')",
                           o->db, (long long)fs[i].feature, dict->d_sae - 1, dict->d_sae, dict->name);
    return OK;
}

/* The phases: open the database, find the dictionary and its features, select the features to
 * draw, make the output directory, the global pictures, the dashboards, index.html. */
int rep_run(const rep_run_opts *o, rep_run_result *res)
{
    int made_dir = 0; /* this run created out_dir */
    char stage[4200] = ""; /* the staging folder, once made */
    rep_run_opts so;
    const char *out_dir = o->out_dir;
    memset(res, 0, sizeof *res);
    double t0 = now_seconds();
    if (!o->db || !o->sae || !o->out_dir) return err_set(ERR_ARG, "--db, --sae and --out are required");
    if (o->contexts < 1 || o->contexts > 200 || o->per_interval < 0 || o->per_interval > 50 ||
        o->bands < 0 || o->bands > 16)
        return err_set(ERR_ARG, "contexts must be 1..200, rows per interval 0..50, bands 0..16");
    store *s = NULL;
    int rc = store_open(&s, o->db, STORE_READONLY);
    if (rc) return rc;
    store_rep_dict dict;
    store_rep_feature *fs = NULL;
    size_t nf = 0;
    int64_t *sel = NULL;
    int nsel = 0;
    char **vocab = NULL;
    int nvocab = 0;
    rep_index_entry *idx = NULL;
    char(*cap)[512] = NULL;
    int nidx = 0, nglobal = 0; /* idx[nglobal..nidx) hold mem_strdup'd file names */
    /* --sae DIR holding an SAE: its weights (at its hook and width) find their analysis from any
       directory, and keep an analysis of other weights under the same name from being drawn as
       this SAE's. Report reads neither file otherwise: one it cannot read is not an error. */
    store_rep_sae wsae = {"", "", 0};
    char wfile[4096];
    struct stat wst;
    if ((rc = refuse_if_training(o->sae))) goto out;
    if (!path_join(wfile, sizeof wfile, o->sae, "sae_weights.safetensors") &&
        !stat(wfile, &wst) && S_ISREG(wst.st_mode) && sae_weights_checksum(o->sae, wsae.weights))
        wsae.weights[0] = 0;
    sae_config wcfg;
    if (wsae.weights[0] && sae_load_config(o->sae, &wcfg) == OK) {
        snprintf(wsae.hook, sizeof wsae.hook, "%s", wcfg.hook_name);
        wsae.d_sae = wcfg.d_sae;
    }
    err_clear();
    const store_rep_sae *weights = wsae.weights[0] ? &wsae : NULL;
    if ((rc = store_rep_dict_find(s, o->sae, weights, o->hook, o->split, &dict))) goto out;
    snprintf(res->dict_name, sizeof res->dict_name, "%s", dict.name);
    if ((rc = store_rep_features(s, dict.id, &fs, &nf))) goto out;
    if (nf == 0) {
        rc = err_set(ERR_FORMAT, "%s: the analysis of '%s' has no feature rows", o->db, dict.name);
        goto out;
    }
    if ((rc = check_analysis(o, &dict, fs, nf))) goto out;
    if ((rc = select_features(o, &dict, fs, nf, &sel, &nsel))) goto out;
    if (!o->features) {
        int want = o->top > 0 ? o->top : 20;
        res->unranked = (want < (int)nf ? want : (int)nf) - nsel;
    }
    if ((rc = make_out_dir(o->out_dir, &made_dir))) goto out;
    if ((rc = path_fmt(stage, sizeof stage, "%s/" STAGE_PREFIX "%ld", o->out_dir, (long)getpid()))) goto out;
    if ((rc = make_stage(o->out_dir, stage))) {
        stage[0] = 0;
        goto out;
    }
    so = *o;
    so.out_dir = stage;
    o = &so; /* from here on everything is written into the staging folder */
    if ((rc = store_rep_vocab(s, &vocab, &nvocab))) goto out;

    int nidx_cap = nsel + 8;
    idx = mem_calloc((size_t)nidx_cap, sizeof *idx);
    cap = mem_calloc((size_t)nidx_cap, sizeof *cap);
    if (!idx || !cap) { rc = err_set(ERR_NOMEM, "out of memory"); goto out; }
    if (o->global) {
        rc = global_pictures(o, s, &dict, fs, nf, idx, &nidx, cap, wsae.weights);
        res->pictures = nglobal = nidx; /* their file names are literals */
        if (rc) goto out;
    }
    if ((rc = run_dashboards(o, out_dir, &dict, vocab, nvocab, sel, nsel, res))) {
        if (rc == ERR_ABORTED) { /* interrupted: its dashboards stay staged for the next run */
            stage[0] = 0;
            goto out;
        }
        /* each worker reads on its own handle, so an analyze that replaced this analysis
           meanwhile shows as a feature "not analysed" (an audit ran report beside analyze):
           name the real cause */
        char why[ERR_MSG_MAX];
        snprintf(why, sizeof why, "%s", err_msg());
        store_rep_dict now;
        int r2 = store_rep_dict_find(s, o->sae, weights, o->hook, o->split, &now);
        if (r2 || now.id != dict.id)
            rc = err_set(ERR_IO, "%s: the analysis of '%s' changed while report was reading it "
                         "(another analyze replaced it): run report again", o->db, dict.name);
        else err_set(rc, "%s", why);
        goto out;
    }
    if ((rc = dashboard_entries(o, fs, nf, sel, nsel, idx, cap, &nidx))) goto out;
    if ((rc = write_index(o, &dict, idx, nidx))) goto out;
    rc = publish(stage, out_dir, idx, nidx);
out:
    if (rc && stage[0]) err_replace(stage, out_dir); /* the user's folder, not the staging one */
    for (int i = nglobal; idx && i < nidx; i++) mem_free((char *)idx[i].file);
    res->seconds = now_seconds() - t0;
    mem_free(idx);
    mem_free(cap);
    store_rep_vocab_free(vocab, nvocab);
    mem_free(sel);
    mem_free(fs);
    store_close(s);
    if (stage[0]) remove_made_dir(stage); /* empty after publish; the failed run's files otherwise */
    if (rc && made_dir) remove_made_dir(out_dir);
    return rc;
}

/* analyze samples 10 bands by default: show `want` of the bands that hold samples, evenly spread,
 * highest first (spread over all the bands, a rare feature whose samples sat in bands 1, 3, 5, 7,
 * 9 showed 2 of its 5: bands 9, 7, 4, 2, 0 were asked for). */
int rep_pick_bands(const unsigned char *has, int nbands, int want, int pick[16])
{
    int nhave = 0;
    for (int b = 0; b < nbands; b++) nhave += has[b] != 0;
    int nb = nhave < want ? nhave : want;
    if (nb > 16) nb = 16;
    for (int i = 0; i < nb; i++) {
        int j = nb > 1 ? (int)lround((double)i * (nhave - 1) / (nb - 1)) : 0; /* j-th from the top */
        for (int b = nbands - 1; b >= 0; b--)
            if (has[b] && j-- == 0) {
                pick[i] = b;
                break;
            }
    }
    return nb < 0 ? 0 : nb;
}
