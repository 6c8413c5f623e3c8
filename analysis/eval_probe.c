/* eval_probe.c - the building blocks of the evaluations (eval.h): LIBLINEAR probes behind our own
 * types, mean-difference selection, the split by document, balanced one-vs-rest sets, Brown's
 * coarse POS classes and SAEBench's absorption metric. */
#include <linear.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/eval.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/mem.h"
#include "common/progress.h"
#include "common/rng.h"

const int eval_k_values[EVAL_NK] = {1, 2, 5, 10, 20};
const int eval_n_values[EVAL_NN] = {2, 5, 10, 20, 50, 100, 500};

/* ---- sparse rows ------------------------------------------------------------------------------ */
int eval_csr_push(eval_csr *c, const float *row, int width)
{
    if (!c->off) {
        c->off = mem_alloc(sizeof *c->off * 1024);
        if (!c->off) return err_set(ERR_NOMEM, "out of memory for sparse rows");
        c->off[0] = 0;
        c->width = width;
    }
    if (width != c->width) return err_set(ERR_SHAPE, "sparse rows of width %d, not %d", width, c->width);
    /* off holds a multiple of 1024 entries */
    size_t need_off = ((size_t)c->n + 2 + 1023) / 1024 * 1024;
    size_t have_off = ((size_t)c->n + 1 + 1023) / 1024 * 1024;
    if (need_off > have_off) {
        size_t *p = mem_realloc(c->off, need_off * sizeof *p);
        if (!p) return err_set(ERR_NOMEM, "out of memory for sparse rows");
        c->off = p;
    }
    size_t nnz = 0;
    for (int j = 0; j < width; j++) nnz += row[j] != 0;
    size_t at = c->off[c->n];
    if (at + nnz > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < at + nnz) cap *= 2;
        int *pi = mem_realloc(c->idx, cap * sizeof *pi);
        if (pi) c->idx = pi;
        float *pv = pi ? mem_realloc(c->val, cap * sizeof *pv) : NULL;
        if (!pi || !pv) return err_set(ERR_NOMEM, "out of memory for %zu sparse values", cap);
        c->val = pv;
        c->cap = cap;
    }
    for (int j = 0; j < width; j++)
        if (row[j] != 0) {
            c->idx[at] = j;
            c->val[at++] = row[j];
        }
    c->off[++c->n] = at;
    return OK;
}

void eval_csr_free(eval_csr *c)
{
    mem_free(c->off);
    mem_free(c->idx);
    mem_free(c->val);
    memset(c, 0, sizeof *c);
}

static int feats_width(const eval_feats *f) { return f->dense ? f->d : f->sparse->width; }

/* ---- LIBLINEAR ------------------------------------------------------------------------------- */
static void quiet(const char *s) { (void)s; }

void eval_probe_free(eval_probe *p)
{
    mem_free(p->w);
    p->w = NULL;
}

/* Nodes of one row restricted to cols (map[j] = slot or -1; map NULL: all), 1-based indices,
 * then the bias node (index width+1) and the terminator. Returns the count written. */
static int row_nodes(const eval_feats *f, int r, const int *cols, int ncols, const int *map,
                     struct feature_node *out)
{
    int m = 0;
    if (f->dense) {
        const float *x = f->dense + (size_t)r * f->d;
        if (cols)
            for (int j = 0; j < ncols; j++) {
                if (x[cols[j]] != 0) out[m++] = (struct feature_node){j + 1, x[cols[j]]};
            }
        else
            for (int j = 0; j < f->d; j++)
                if (x[j] != 0) out[m++] = (struct feature_node){j + 1, x[j]};
    } else {
        const eval_csr *c = f->sparse;
        /* CSR rows are in ascending column order; with cols, LIBLINEAR wants ascending slots */
        if (!map)
            for (size_t q = c->off[r]; q < c->off[r + 1]; q++)
                out[m++] = (struct feature_node){c->idx[q] + 1, c->val[q]};
        else {
            for (size_t q = c->off[r]; q < c->off[r + 1]; q++)
                if (map[c->idx[q]] >= 0) out[m++] = (struct feature_node){map[c->idx[q]] + 1, c->val[q]};
            for (int a = 1; a < m; a++) /* insertion sort by slot (m <= ncols, small) */
                for (int b = a; b > 0 && out[b - 1].index > out[b].index; b--) {
                    struct feature_node t = out[b];
                    out[b] = out[b - 1];
                    out[b - 1] = t;
                }
        }
    }
    return m;
}

/* ---- the memo of fitted probes ---------------------------------------------------------------- */
typedef struct {
    uint64_t key[2];
    int d;
    int run_only; /* a fit on sparse rows (an SAE's codes): of no use past the journal's run */
    double *w, b;
} memo_entry;

struct eval_memo {
    memo_entry *e;
    int n, cap;
    int64_t hits, fits;
    /* the journal (eval_memo_journal): every fit kept, also on sparse rows, saved to path */
    int all;
    char path[4096], err[512];
    uint64_t key[2];
    double secs, last;
    int saved; /* the journal's file at path was written since eval_memo_journal */
};

int eval_memo_new(eval_memo **out)
{
    *out = mem_calloc(1, sizeof **out);
    return *out ? OK : err_set(ERR_NOMEM, "out of memory for the probe memo");
}

void eval_memo_free(eval_memo *m)
{
    if (!m) return;
    for (int i = 0; i < m->n; i++) mem_free(m->e[i].w);
    mem_free(m->e);
    mem_free(m);
}

void eval_memo_counts(const eval_memo *m, int64_t *hits, int64_t *fits)
{
    *hits = m ? m->hits : 0;
    *fits = m ? m->fits : 0;
}

static uint64_t dbits(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

/* The key of a LIBLINEAR problem: everything train() reads (the nodes field by field, since a
 * node's padding bytes are not set). */
static void memo_key(uint64_t key[2], const struct problem *prob, const struct parameter *par)
{
    uint64_t h[2] = {0x736165206c697465ull, HASH_FNV1A_INIT};
    hash_absorb128(h, (uint64_t)prob->l);
    hash_absorb128(h, (uint64_t)prob->n);
    hash_absorb128(h, dbits(prob->bias));
    hash_absorb128(h, (uint64_t)par->solver_type);
    hash_absorb128(h, dbits(par->eps));
    hash_absorb128(h, dbits(par->C));
    for (int i = 0; i < prob->l; i++) {
        hash_absorb128(h, dbits(prob->y[i]));
        for (const struct feature_node *x = prob->x[i];; x++) {
            hash_absorb128(h, (uint64_t)(uint32_t)x->index);
            if (x->index == -1) break;
            hash_absorb128(h, dbits(x->value));
        }
    }
    key[0] = h[0];
    key[1] = h[1];
}

static const memo_entry *memo_find(const eval_memo *m, const uint64_t key[2])
{
    for (int i = 0; i < m->n; i++)
        if (m->e[i].key[0] == key[0] && m->e[i].key[1] == key[1]) return &m->e[i];
    return NULL;
}

/* Appends e (the memo takes its weights); 0 when out of memory (e's weights are then freed). */
static int memo_push(eval_memo *m, memo_entry e)
{
    if (m->n == m->cap) {
        int nc = m->cap ? 2 * m->cap : 64;
        memo_entry *ne = mem_realloc(m->e, (size_t)nc * sizeof *ne);
        if (!ne) {
            mem_free(e.w);
            return 0;
        }
        m->e = ne;
        m->cap = nc;
    }
    m->e[m->n++] = e;
    return 1;
}

/* Keeps a copy of the probe; out of memory only means it is not kept. */
static void memo_keep(eval_memo *m, const uint64_t key[2], const eval_probe *p, int run_only)
{
    double *w = mem_alloc((size_t)(p->d ? p->d : 1) * sizeof *w);
    if (!w) return;
    memcpy(w, p->w, (size_t)p->d * sizeof *w);
    memo_push(m, (memo_entry){.key = {key[0], key[1]}, .d = p->d, .run_only = run_only, .w = w,
                              .b = p->b});
}

/* ---- the journal: the memo's fits in a file beside the database (a killed eval continues) ------
 * Layout, host byte order: int64 {magic, key0, key1, n}, then per entry uint64 {key0, key1},
 * int64 d, double b, double w[d]; last the FNV-1a (file_sum). */
#define MEMO_MAGIC INT64_C(0x3142525050564c45) /* "ELVPPRB1" */
enum { MEMO_MAX_D = 1 << 24 };

static int memo_save(const eval_memo *m)
{
    file_atomic fa;
    int rc = file_atomic_open_plain(&fa, m->path);
    if (rc) return rc;
    fa.sync = 1;
    file_sum io = file_sum_start(fa.f);
    int64_t hdr[4] = {MEMO_MAGIC, (int64_t)m->key[0], (int64_t)m->key[1], m->n};
    file_sum_put(&io, hdr, sizeof hdr);
    for (int i = 0; i < m->n; i++) {
        const memo_entry *e = &m->e[i];
        int64_t d = e->d;
        file_sum_put(&io, e->key, sizeof e->key);
        file_sum_put(&io, &d, sizeof d);
        file_sum_put(&io, &e->b, sizeof e->b);
        file_sum_put(&io, e->w, (size_t)e->d * sizeof *e->w);
    }
    file_sum_put_end(&io);
    if (io.bad) {
        file_atomic_abort(&fa);
        return err_set(ERR_IO, "%s: write failed", m->path);
    }
    return file_atomic_commit(&fa);
}

int eval_memo_journal(eval_memo *m, const char *path, const uint64_t key[2], double secs)
{
    if (snprintf(m->path, sizeof m->path, "%s", path) >= (int)sizeof m->path)
        return err_set(ERR_ARG, "%s: path too long", path);
    m->all = 1;
    m->key[0] = key[0];
    m->key[1] = key[1];
    m->secs = secs;
    m->last = now_seconds();
    m->err[0] = 0;
    m->saved = 0;
    return OK;
}

const char *eval_memo_journal_error(const eval_memo *m) { return m && m->err[0] ? m->err : NULL; }
int eval_memo_journal_saved(const eval_memo *m) { return m && m->saved; }

void eval_memo_journal_end(eval_memo *m)
{
    m->all = 0;
    m->secs = 0;
    m->path[0] = m->err[0] = 0;
    /* the fits on an SAE's codes go: a sweep's memo would carry (and every later run's file
       write) all earlier SAEs' (an audit); those on the raw rows serve the next SAE */
    int k = 0;
    for (int i = 0; i < m->n; i++) {
        if (m->e[i].run_only) mem_free(m->e[i].w);
        else m->e[k++] = m->e[i];
    }
    m->n = k;
}

/* Saves when the interval has passed; a failed save stops the saves (its message kept). */
static void memo_tick(eval_memo *m)
{
    if (!m->all || !(m->secs > 0) || now_seconds() - m->last < m->secs) return;
    if (memo_save(m)) {
        snprintf(m->err, sizeof m->err, "%s", err_msg());
        err_clear();
        m->secs = 0;
    }
    else m->saved = 1;
    m->last = now_seconds();
}

int eval_memo_resume(eval_memo *m, const char *path, const uint64_t key[2], const char **why)
{
    *why = NULL;
    file_sum io;
    int64_t fsize = 0;
    const char *bad = file_sum_open(path, &io, &fsize);
    if (!bad && !io.f) return 0;
    int64_t hdr[4] = {0};
    file_sum_get(&io, hdr, sizeof hdr);
    if (!bad) {
        if (io.bad) bad = "cannot be read";
        else if (hdr[0] != MEMO_MAGIC) bad = "is not an eval probe file of this build";
        else if ((uint64_t)hdr[1] != key[0] || (uint64_t)hdr[2] != key[1])
            bad = "was made with other inputs or options";
        else if (hdr[3] < 0 || hdr[3] > fsize / 32 || hdr[3] > INT32_MAX)
            bad = "is damaged (its count does not fit its size)";
    }
    /* read whole first, kept only when every entry and the checksum hold */
    int n = bad ? 0 : (int)hdr[3], got = 0;
    memo_entry *e = n ? mem_calloc((size_t)n, sizeof *e) : NULL;
    if (n && !e) bad = "needs more memory than there is";
    for (int i = 0; !bad && i < n; i++) {
        int64_t d = 0;
        file_sum_get(&io, e[i].key, sizeof e[i].key);
        file_sum_get(&io, &d, sizeof d);
        file_sum_get(&io, &e[i].b, sizeof e[i].b);
        if (io.bad || d < 1 || d > MEMO_MAX_D || d > fsize / 8) {
            bad = "is damaged (an entry's size)";
            break;
        }
        e[i].d = (int)d;
        if (!(e[i].w = mem_alloc((size_t)d * sizeof *e[i].w))) {
            bad = "needs more memory than there is";
            break;
        }
        got = i + 1;
        file_sum_get(&io, e[i].w, (size_t)d * sizeof *e[i].w);
        int finite = isfinite(e[i].b);
        for (int64_t j = 0; finite && j < d; j++) finite = isfinite(e[i].w[j]);
        if (io.bad) bad = "is damaged (cut short)";
        else if (!finite) bad = "is damaged (a weight that is not finite)";
    }
    if (!bad && !file_sum_get_end(&io)) bad = "is damaged (its checksum fails)";
    if (io.f) fclose(io.f);
    int kept = 0;
    for (int i = 0; i < got; i++) {
        e[i].run_only = 1; /* which were on raw rows is not recorded: all go with the run */
        if (!bad && !memo_find(m, e[i].key)) kept += memo_push(m, e[i]);
        else mem_free(e[i].w);
    }
    mem_free(e);
    *why = bad;
    return bad ? 0 : kept;
}

typedef struct {
    int *map; /* [width] column -> slot, or NULL */
    int width, n_in;
} colmap;

static int colmap_make(colmap *cm, const eval_feats *f, const int *cols, int ncols)
{
    cm->width = feats_width(f);
    cm->n_in = cols ? ncols : cm->width;
    cm->map = NULL;
    if (!cols || f->dense) return OK;
    cm->map = mem_alloc((size_t)cm->width * sizeof *cm->map);
    if (!cm->map) return err_set(ERR_NOMEM, "out of memory for a column map");
    for (int j = 0; j < cm->width; j++) cm->map[j] = -1;
    for (int j = 0; j < ncols; j++) {
        if (cols[j] < 0 || cols[j] >= cm->width) {
            mem_free(cm->map);
            return err_set(ERR_ARG, "probe column %d outside 0..%d", cols[j], cm->width - 1);
        }
        cm->map[cols[j]] = j;
    }
    return OK;
}

int eval_logreg(const eval_feats *f, const int *rows, const unsigned char *y, int n,
                const int *cols, int ncols, double C, int l1, eval_probe *out)
{
    memset(out, 0, sizeof *out);
    if (f->stop && *f->stop) return err_set(ERR_ABORTED, "interrupted");
    if (n < 2 || !(C > 0)) return err_set(ERR_ARG, "logistic regression needs >= 2 rows and C > 0");
    int npos = 0;
    for (int i = 0; i < n; i++) npos += y[i] != 0;
    if (npos == 0 || npos == n)
        return err_set(ERR_ARG, "logistic regression needs both classes (%d of %d positive)", npos, n);
    colmap cm;
    int rc = colmap_make(&cm, f, cols, ncols);
    if (rc) return rc;
    const int D = cm.n_in;
    size_t nodes = 0;
    for (int i = 0; i < n; i++) {
        if (f->dense) nodes += (size_t)D + 2;
        else nodes += (cols ? (size_t)ncols : f->sparse->off[rows[i] + 1] - f->sparse->off[rows[i]]) + 2;
    }
    struct feature_node *space = mem_alloc(nodes * sizeof *space);
    struct feature_node **x = mem_alloc((size_t)n * sizeof *x);
    double *yy = mem_alloc((size_t)n * sizeof *yy);
    out->w = mem_calloc((size_t)D, sizeof *out->w);
    if (!space || !x || !yy || !out->w) {
        rc = err_set(ERR_NOMEM, "out of memory for a probe on %d rows", n);
        goto done;
    }
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        x[i] = space + at;
        int m = row_nodes(f, rows[i], cols, ncols, cm.map, space + at);
        space[at + m] = (struct feature_node){D + 1, 1.0}; /* the bias feature */
        space[at + m + 1] = (struct feature_node){-1, 0};
        at += (size_t)m + 2;
        yy[i] = y[i] ? 1 : -1;
    }
    struct problem prob = {.l = n, .n = D + 1, .y = yy, .x = x, .bias = 1};
    struct parameter par = {.solver_type = l1 ? L1R_LR : L2R_LR, .eps = f->eps > 0 ? f->eps : 0.001, .C = C};
    set_print_string_function(quiet);
    const char *why = check_parameter(&prob, &par);
    if (why) {
        rc = err_set(ERR_ARG, "LIBLINEAR refused the probe: %s", why);
        goto done;
    }
    eval_memo *memo = f->memo && (f->dense || f->memo->all) ? f->memo : NULL;
    uint64_t key[2];
    if (memo) {
        memo_key(key, &prob, &par);
        const memo_entry *e = memo_find(memo, key);
        if (e && e->d == D) {
            memo->hits++;
            memcpy(out->w, e->w, (size_t)D * sizeof *out->w);
            out->b = e->b;
            out->d = D;
            goto done;
        }
        memo->fits++;
    }
    /* LIBLINEAR's L1 solver shuffles its coordinates with the C library's rand(), whose state
       is the process's: without a seed per fit, a probe depended on how many fits (and memo
       hits, which skip train) came before it in the process, so a sweep continued after a
       kill scored an SAE differently from an uninterrupted one (absorption 0.151 against
       0.132). Every fit starts from the same state, as the first fit of a process does. */
    srand(1);
    struct model *mdl = train(&prob, &par);
    if (!mdl) {
        rc = err_set(ERR_NOMEM, "LIBLINEAR failed to train a probe on %d rows", n);
        goto done;
    }
    /* binary models keep one weight vector for label[0]: flip it when label[0] is -1 */
    double sgn = mdl->label[0] == 1 ? 1 : -1;
    for (int j = 0; j < D; j++) out->w[j] = sgn * mdl->w[j];
    out->b = sgn * mdl->w[D] * mdl->bias;
    out->d = D;
    free_and_destroy_model(&mdl);
    if (memo) {
        memo_keep(memo, key, out, !f->dense);
        memo_tick(memo);
    }
done:
    mem_free(space);
    mem_free(x);
    mem_free(yy);
    mem_free(cm.map);
    if (rc) eval_probe_free(out);
    return rc;
}

double eval_probe_score(const eval_probe *p, const eval_feats *f, int row)
{
    double s = p->b;
    if (f->dense) {
        const float *x = f->dense + (size_t)row * f->d;
        for (int j = 0; j < p->d; j++) s += p->w[j] * x[j];
    } else {
        const eval_csr *c = f->sparse;
        for (size_t q = c->off[row]; q < c->off[row + 1]; q++) s += p->w[c->idx[q]] * c->val[q];
    }
    return s;
}

void eval_scores(const eval_probe *p, const eval_feats *f, const int *rows, int n,
                 const int *cols, int ncols, double *score)
{
    if (!cols) {
        for (int i = 0; i < n; i++) score[i] = eval_probe_score(p, f, rows[i]);
        return;
    }
    for (int i = 0; i < n; i++) {
        double s = p->b;
        int r = rows[i];
        if (f->dense)
            for (int j = 0; j < ncols; j++) s += p->w[j] * f->dense[(size_t)r * f->d + cols[j]];
        else {
            const eval_csr *c = f->sparse;
            for (int j = 0; j < ncols; j++) { /* ncols <= 20: a binary search per column */
                size_t lo = c->off[r], hi = c->off[r + 1];
                while (lo < hi) {
                    size_t mid = (lo + hi) / 2;
                    if (c->idx[mid] < cols[j]) lo = mid + 1;
                    else hi = mid;
                }
                if (lo < c->off[r + 1] && c->idx[lo] == cols[j]) s += p->w[j] * c->val[lo];
            }
        }
        score[i] = s;
    }
}

double eval_accuracy(const double *score, const unsigned char *y, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++) ok += (score[i] > 0) == (y[i] != 0);
    return n ? (double)ok / n : NAN;
}

double eval_f1(const double *score, const unsigned char *y, int n)
{
    int tp = 0, fp = 0, fn = 0;
    for (int i = 0; i < n; i++) {
        int p = score[i] > 0, t = y[i] != 0;
        tp += p && t;
        fp += p && !t;
        fn += !p && t;
    }
    return tp ? 2.0 * tp / (2.0 * tp + fp + fn) : 0;
}

/* Keeps the k largest values seen so far in best[0..*have) descending, their ids in cols. */
static void topk_insert(double *best, int *cols, int *have, int k, double v, int id)
{
    if (*have == k && !(v > best[k - 1])) return;
    int at = *have < k ? (*have)++ : k - 1;
    while (at > 0 && v > best[at - 1]) {
        best[at] = best[at - 1];
        cols[at] = cols[at - 1];
        at--;
    }
    best[at] = v;
    cols[at] = id;
}

/* ---- selection -------------------------------------------------------------------------------- */
int eval_top_mean_diff(const eval_feats *f, const int *rows, const unsigned char *y, int n,
                       int k, int *cols)
{
    int W = feats_width(f);
    if (k < 1 || k > W) return err_set(ERR_ARG, "top %d of %d columns", k, W);
    double *sp = mem_calloc((size_t)W, sizeof *sp), *sn = mem_calloc((size_t)W, sizeof *sn);
    if (!sp || !sn) {
        mem_free(sp);
        mem_free(sn);
        return err_set(ERR_NOMEM, "out of memory for mean differences");
    }
    int np = 0, nn = 0;
    for (int i = 0; i < n; i++) {
        double *acc = y[i] ? sp : sn;
        if (y[i]) np++;
        else nn++;
        int r = rows[i];
        if (f->dense)
            for (int j = 0; j < W; j++) acc[j] += f->dense[(size_t)r * f->d + j];
        else
            for (size_t q = f->sparse->off[r]; q < f->sparse->off[r + 1]; q++)
                acc[f->sparse->idx[q]] += f->sparse->val[q];
    }
    double *best = mem_alloc((size_t)k * sizeof *best);
    if (!best) {
        mem_free(sp);
        mem_free(sn);
        return err_set(ERR_NOMEM, "out of memory");
    }
    int have = 0;
    for (int j = 0; j < W; j++) {
        topk_insert(best, cols, &have, k, fabs((np ? sp[j] / np : 0) - (nn ? sn[j] / nn : 0)), j);
    }
    mem_free(best);
    mem_free(sp);
    mem_free(sn);
    return OK;
}

/* ---- split and sampling ------------------------------------------------------------------------ */
int eval_sets_big_enough(int train_pos, int train_neg, int test_pos, int test_neg)
{
    return train_pos >= EVAL_MIN_TRAIN_POS && train_neg >= EVAL_MIN_TRAIN_POS &&
           test_pos >= EVAL_MIN_TEST_POS && test_neg >= EVAL_MIN_TEST_POS;
}

double eval_scr_score(double ablated, double orig, double clean, int n_test)
{
    /* accuracies are multiples of 1 / n_test: compare in examples, with half an example of
       slack for rounding, so a gap of exactly one example is not enough */
    if (!(n_test > 0) || !((clean - orig) * n_test > 1.5)) return NAN;
    return (ablated - orig) / (clean - orig);
}

double eval_mean_of_means(const double *sum, const int *n, int ndatasets)
{
    double s = 0;
    int m = 0;
    for (int i = 0; i < ndatasets; i++)
        if (n[i] > 0) {
            s += sum[i] / n[i];
            m++;
        }
    return m ? s / m : NAN;
}

void eval_shuffle(int *a, int n, rng_state *r)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint64_t)i + 1);
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

typedef struct {
    int64_t doc;
    int group;
    int i;
} doc_ref;

static int cmp_doc_ref(const void *a, const void *b)
{
    const doc_ref *x = a, *y = b;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    return x->doc < y->doc ? -1 : x->doc > y->doc;
}

int eval_split_docs(const int64_t *doc, const int *group, size_t n, double test_frac,
                    uint64_t seed, unsigned char *is_test)
{
    if (!(test_frac > 0 && test_frac < 1)) return err_set(ERR_ARG, "test fraction must be in (0, 1)");
    doc_ref *d = mem_alloc((n + 1) * sizeof *d);
    int *perm = mem_alloc((n + 1) * sizeof *perm);
    if (!d || !perm) {
        mem_free(d);
        mem_free(perm);
        return err_set(ERR_NOMEM, "out of memory for %zu documents", n);
    }
    for (size_t i = 0; i < n; i++) d[i] = (doc_ref){doc[i], group[i], (int)i};
    qsort(d, n, sizeof *d, cmp_doc_ref);
    rng_state r;
    rng_seed(&r, seed ^ 0x5350u); /* the split's own stream */
    for (size_t a = 0; a < n;) {
        size_t b = a;
        while (b < n && d[b].group == d[a].group) b++;
        int ng = (int)(b - a);
        for (int i = 0; i < ng; i++) perm[i] = i;
        eval_shuffle(perm, ng, &r);
        int nt = ng < 2 ? 0 : (int)lround(test_frac * ng);
        if (ng >= 2 && nt < 1) nt = 1;
        if (nt >= ng) nt = ng - 1;
        for (int i = 0; i < ng; i++) is_test[d[a + perm[i]].i] = i < nt;
        a = b;
    }
    mem_free(d);
    mem_free(perm);
    return OK;
}

int eval_balance(const int *cls, int n_all, int c, int n_classes, int max_pos, uint64_t seed,
                 int *rows, unsigned char *y, int *n)
{
    *n = 0;
    if (n_classes < 2) return err_set(ERR_ARG, "one-vs-rest needs >= 2 classes");
    int *cnt = mem_calloc((size_t)n_classes, sizeof *cnt);
    int *idx = mem_alloc(((size_t)n_all + 1) * sizeof *idx);
    int *start = mem_calloc((size_t)n_classes + 1, sizeof *start);
    if (!cnt || !idx || !start) {
        mem_free(cnt);
        mem_free(idx);
        mem_free(start);
        return err_set(ERR_NOMEM, "out of memory for a balanced set");
    }
    for (int i = 0; i < n_all; i++)
        if (cls[i] >= 0 && cls[i] < n_classes) cnt[cls[i]]++;
    for (int k = 0; k < n_classes; k++) start[k + 1] = start[k] + cnt[k];
    int *fill = mem_alloc((size_t)n_classes * sizeof *fill);
    if (!fill) {
        mem_free(cnt);
        mem_free(idx);
        mem_free(start);
        return err_set(ERR_NOMEM, "out of memory for a balanced set");
    }
    memcpy(fill, start, (size_t)n_classes * sizeof *fill);
    for (int i = 0; i < n_all; i++)
        if (cls[i] >= 0 && cls[i] < n_classes) idx[fill[cls[i]]++] = i;
    rng_state r;
    rng_seed(&r, seed);
    for (int k = 0; k < n_classes; k++) eval_shuffle(idx + start[k], cnt[k], &r);
    int npos = cnt[c] < max_pos ? cnt[c] : max_pos;
    int per = (npos + n_classes - 2) / (n_classes - 1);
    int m = 0;
    for (int k = 0; k < n_classes; k++) {
        if (k == c) continue;
        for (int i = 0; i < per && i < cnt[k] && m < npos; i++) {
            rows[npos + m] = idx[start[k] + i];
            m++;
        }
    }
    if (m < npos) npos = m; /* too few negatives: cut the positives to match */
    for (int i = 0; i < npos; i++) rows[i] = idx[start[c] + i];
    /* negatives were written after the original npos: move them next to the kept positives */
    int orig = cnt[c] < max_pos ? cnt[c] : max_pos;
    memmove(rows + npos, rows + orig, (size_t)m * sizeof *rows);
    if (m > npos) m = npos;
    int tot = npos + m;
    for (int i = 0; i < tot; i++) y[i] = i < npos;
    for (int i = tot - 1; i > 0; i--) { /* shuffle rows and labels together */
        int j = (int)rng_below(&r, (uint64_t)i + 1);
        int t = rows[i];
        rows[i] = rows[j];
        rows[j] = t;
        unsigned char u = y[i];
        y[i] = y[j];
        y[j] = u;
    }
    *n = tot;
    mem_free(cnt);
    mem_free(idx);
    mem_free(start);
    mem_free(fill);
    return OK;
}

/* ---- Brown coarse classes ---------------------------------------------------------------------- */
const char *const eval_pos_names[EVAL_NPOS] = {"noun", "verb", "auxiliary", "adjective", "adverb",
                                               "determiner", "preposition", "pronoun",
                                               "conjunction", "number"};

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

int eval_pos_class(const char *tag)
{
    char t[16];
    if (!tag || !tag[0]) return -1;
    if (starts(tag, "fw-") || starts(tag, "FW-")) return -1; /* foreign words */
    size_t n = 0;
    for (; tag[n] && tag[n] != '-' && tag[n] != '+' && n + 1 < sizeof t; n++)
        t[n] = (char)(tag[n] >= 'A' && tag[n] <= 'Z' ? tag[n] + 32 : tag[n]);
    t[n] = 0;
    if (!n) return -1;
    if (starts(t, "nn") || starts(t, "np")) return 0;
    if (starts(t, "vb")) return 1;
    if (starts(t, "be") || starts(t, "hv") || starts(t, "do") || starts(t, "md")) return 2;
    if (starts(t, "jj")) return 3;
    if (starts(t, "rb") || !strcmp(t, "rn") || !strcmp(t, "ql")) return 4;
    if (!strcmp(t, "at") || starts(t, "dt") || !strcmp(t, "ap") || starts(t, "ab")) return 5;
    if (!strcmp(t, "in")) return 6;
    if (starts(t, "pp") || starts(t, "pn") || starts(t, "wp")) return 7;
    if (!strcmp(t, "cc") || !strcmp(t, "cs")) return 8;
    if (starts(t, "cd") || !strcmp(t, "od")) return 9;
    return -1;
}

static void base_tag(const char *tag, char *t, size_t cap)
{
    size_t n = 0;
    for (; tag[n] && tag[n] != '-' && tag[n] != '+' && tag[n] != '*' && n + 1 < cap; n++)
        t[n] = (char)(tag[n] >= 'A' && tag[n] <= 'Z' ? tag[n] + 32 : tag[n]);
    t[n] = 0;
}

int eval_tense(const char *tag)
{
    static const char *const past[] = {"vbd", "bed", "bedz", "hvd", "dod"};
    static const char *const pres[] = {"vbz", "bez", "bem", "ber", "hvz", "doz"};
    char t[16];
    if (!tag || !tag[0] || starts(tag, "fw-")) return -1;
    /* each part of a contraction (it's pps+bez, I'd ppss+hvd): the finite verb may be the
       second (an audit: 1,516 present and 185 past verbs were not counted) */
    for (const char *p = tag; p; p = strchr(p, '+') ? strchr(p, '+') + 1 : NULL) {
        base_tag(p, t, sizeof t);
        for (size_t i = 0; i < sizeof past / sizeof *past; i++)
            if (!strcmp(t, past[i])) return 1;
        for (size_t i = 0; i < sizeof pres / sizeof *pres; i++)
            if (!strcmp(t, pres[i])) return 0;
    }
    return -1;
}

int eval_imaginative(const char *g)
{
    static const char *const imag[] = {"fiction", "mystery", "science_fiction", "adventure",
                                       "romance", "humor"};
    static const char *const info[] = {"news", "editorial", "reviews", "religion", "hobbies",
                                       "lore", "belles_lettres", "government", "learned"};
    for (size_t i = 0; i < sizeof imag / sizeof *imag; i++)
        if (!strcmp(g, imag[i])) return 1;
    for (size_t i = 0; i < sizeof info / sizeof *info; i++)
        if (!strcmp(g, info[i])) return 0;
    return -1;
}

/* ---- absorption ------------------------------------------------------------------------------- */
void eval_abs_defaults(eval_abs_params *p)
{
    *p = (eval_abs_params){.min_gt_f1 = 0.6, .max_k = 10, .f1_jump = 0.03, .l1_decay = 0.01, .C = 1,
                           .prop = 0.4};
}

/* Columns ranked by the L1 probe's weight (descending, positive weights first), then the rest
 * by mean difference, max_k in all. */
static int rank_latents(const eval_feats *tr, const int *rows, const unsigned char *y, int n,
                        const eval_abs_params *p, int *cols)
{
    eval_probe l1;
    int rc = eval_logreg(tr, rows, y, n, NULL, 0, 1.0 / (p->l1_decay * n), 1, &l1);
    if (rc) return rc;
    int have = 0;
    double *bw = mem_alloc((size_t)p->max_k * sizeof *bw);
    if (!bw) {
        eval_probe_free(&l1);
        return err_set(ERR_NOMEM, "out of memory");
    }
    for (int j = 0; j < l1.d; j++) {
        if (l1.w[j] > 0) topk_insert(bw, cols, &have, p->max_k, l1.w[j], j);
    }
    mem_free(bw);
    eval_probe_free(&l1);
    if (have < p->max_k) { /* fewer positive weights than max_k: fill by mean difference */
        int W = feats_width(tr);
        int *md = mem_alloc((size_t)W * sizeof *md);
        if (!md) return err_set(ERR_NOMEM, "out of memory");
        int want = p->max_k + have < W ? p->max_k + have : W;
        rc = eval_top_mean_diff(tr, rows, y, n, want, md);
        for (int i = 0; !rc && i < want && have < p->max_k; i++) {
            int dup = 0;
            for (int q = 0; q < have; q++) dup |= cols[q] == md[i];
            if (!dup) cols[have++] = md[i];
        }
        mem_free(md);
    }
    return rc;
}

static double dotf(const float *a, const double *b, int d)
{
    double s = 0;
    for (int i = 0; i < d; i++) s += a[i] * b[i];
    return s;
}

typedef struct {
    int id;
    double proj;
} feat_proj;

/* SAEBench's absorption fraction of one sample (feature_absorption_calculator.py): 0 where the
 * split features account for the probe projection P or the absorbers carry less than prop of it,
 * 1 where the split features are silent, else the absorbed share. */
static double abs_fraction(double P, double main_proj, double A, double prop)
{
    if (main_proj >= P || A / P < prop) return 0;
    if (main_proj <= 0) return 1;
    double ab = fmin(A, P - main_proj), frac = ab / (ab + main_proj);
    return frac < 0 ? 0 : frac > 1 ? 1 : frac;
}

int eval_absorption_class(const eval_feats *train, const int *tr_rows, const unsigned char *tr_y,
                          int n_tr, const eval_feats *test, const int *te_rows,
                          const unsigned char *te_y, const unsigned char *count, int n_te,
                          const float *W_dec, int d_sae, const eval_abs_params *p,
                          eval_abs_class *out, const eval_abs_rows *rows)
{
    memset(out, 0, sizeof *out);
    double *const rf[3] = {rows ? rows->frac : NULL, rows ? rows->frac_nogate : NULL,
                           rows ? rows->full : NULL};
    for (int a = 0; a < 3; a++)
        for (int i = 0; rf[a] && i < n_te; i++) rf[a][i] = NAN;
    if (p->max_k < 1 || p->max_k > 32) return err_set(ERR_ARG, "absorption max_k must be in 1..32");
    const int d = train->d;
    /* the probes solved to 1e-6, not LIBLINEAR's 0.001: the metric's hard cut-offs (cosine 0.1,
       the 0.4 proportion, the F1 jump) turned a ground-truth direction 1e-4 off the optimum
       (cosine 0.99986) into a parent's fraction 0.160 against 0.349 (an audit) */
    eval_feats trc = {.sparse = train->sparse, .memo = train->memo, .stop = train->stop, .eps = 1e-6},
               tec = {.sparse = test->sparse};
    eval_feats trr = {.dense = train->dense, .d = d, .memo = train->memo, .stop = train->stop, .eps = 1e-6};
    eval_feats ter = {.dense = test->dense, .d = d};
    eval_probe gt = {0}, kp = {0};
    double *s_gt = mem_alloc((size_t)n_te * sizeof *s_gt), *s_k = mem_alloc((size_t)n_te * sizeof *s_k);
    double *cosv = mem_alloc((size_t)d_sae * sizeof *cosv);
    int cols[32], best_cols[32];
    int rc = s_gt && s_k && cosv ? OK : err_set(ERR_NOMEM, "out of memory for absorption");
    /* 1. the ground-truth probe on the raw activations */
    if (!rc) rc = eval_logreg(&trr, tr_rows, tr_y, n_tr, NULL, 0, p->C, 0, &gt);
    if (!rc) {
        eval_scores(&gt, &ter, te_rows, n_te, NULL, 0, s_gt);
        out->gt_f1 = eval_f1(s_gt, te_y, n_te);
        out->included = out->gt_f1 > p->min_gt_f1;
    }
    /* 2. k-sparse probing: latents ranked by the L1 probe, the F1-jump rule for split features */
    if (!rc) rc = rank_latents(&trc, tr_rows, tr_y, n_tr, p, cols);
    /* split features (SAEBench's add_feature_splits_to_metrics_df): k grows while each k's F1
       beats the previous accepted k's by more than f1_jump, and stops at the first k that does
       not (k = 1 always counts) */
    double best = -100;
    for (int k = 1; !rc && k <= p->max_k; k++) {
        eval_probe q;
        rc = eval_logreg(&trc, tr_rows, tr_y, n_tr, cols, k, p->C, 0, &q);
        if (rc) break;
        eval_scores(&q, &tec, te_rows, n_te, cols, k, s_k);
        double f1 = eval_f1(s_k, te_y, n_te);
        if (!(f1 > best + p->f1_jump)) {
            eval_probe_free(&q);
            break;
        }
        best = f1;
        out->n_split = k;
        memcpy(best_cols, cols, (size_t)k * sizeof *cols);
        eval_probe_free(&kp);
        kp = q;
        out->split_f1 = f1;
    }
    if (!rc) {
        memcpy(out->split, best_cols, (size_t)out->n_split * sizeof *best_cols);
        eval_scores(&kp, &tec, te_rows, out->n_split > 0 ? n_te : 0, best_cols, out->n_split, s_k);
    }
    /* 3. the metric on every probe true positive (SAEBench's calculator runs on all of them; the
       fraction is 0 where the split features account for the probe projection) */
    double pn = 0;
    if (!rc) {
        for (int j = 0; j < d; j++) pn += gt.w[j] * gt.w[j];
        pn = sqrt(pn);
        if (!(pn > 0)) rc = err_set(ERR_ARG, "the ground-truth probe has no direction");
    }
    for (int f = 0; !rc && f < d_sae; f++) {
        const float *wd = W_dec + (size_t)f * d;
        double nr = 0;
        for (int j = 0; j < d; j++) nr += (double)wd[j] * wd[j];
        cosv[f] = nr > 0 ? dotf(wd, gt.w, d) / (sqrt(nr) * pn) : 0;
    }
    const double EPS = 1e-8, cos_frac = 0.1, cos_full = 0.025, prop = p->prop;
    double sum_frac = 0, sum_frac_nogate = 0;
    int n_full = 0;
    for (int i = 0; !rc && i < n_te; i++) {
        if (!te_y[i] || !(s_gt[i] > 0) || (count && !count[i])) continue;
        out->n_tp++;
        out->n_fn += !(s_k[i] > 0); /* the k-sparse probe's misses: reported, not a filter */
        int r = te_rows[i];
        double P = dotf(test->dense + (size_t)r * d, gt.w, d) / pn;
        double main_proj = 0;
        int main_fired = 0;
        feat_proj top3[3] = {{-1, 0}, {-1, 0}, {-1, 0}}, top = {-1, -INFINITY};
        const eval_csr *c = test->sparse;
        for (size_t q = c->off[r]; q < c->off[r + 1]; q++) {
            int f = c->idx[q];
            double a = c->val[q], pr = a * cosv[f];
            int is_main = 0;
            for (int s = 0; s < out->n_split; s++) is_main |= best_cols[s] == f;
            if (is_main) {
                main_proj += pr;
                if (fabs(a) >= EPS) main_fired = 1;
                continue;
            }
            if (pr > top.proj) top = (feat_proj){f, pr};
            if (cosv[f] >= cos_frac && pr > 0) {
                int at = 3;
                while (at > 0 && (top3[at - 1].id < 0 || pr > top3[at - 1].proj)) at--;
                if (at < 3) {
                    for (int s = 2; s > at; s--) top3[s] = top3[s - 1];
                    top3[at] = (feat_proj){f, pr};
                }
            }
        }
        /* the top-projecting latent over all latents: silent ones project 0 */
        if (top.id < 0 || top.proj < 0) top.proj = 0;
        double A = 0;
        for (int s = 0; s < 3; s++)
            if (top3[s].id >= 0) A += top3[s].proj;
        double frac = abs_fraction(P, main_proj, A, prop), frac0 = abs_fraction(P, main_proj, A, 0);
        sum_frac += frac;
        sum_frac_nogate += frac0;
        int full = !main_fired && top.id >= 0 && cosv[top.id] >= cos_full && P >= 0 &&
                   top.proj / P >= prop;
        n_full += full;
        if (rf[0]) rf[0][i] = frac;
        if (rf[1]) rf[1][i] = frac0;
        if (rf[2]) rf[2][i] = full;
    }
    if (!rc && out->n_tp > 0) {
        out->mean_frac = sum_frac / out->n_tp;
        out->mean_frac_nogate = sum_frac_nogate / out->n_tp;
        out->full_rate = (double)n_full / out->n_tp;
    }
    eval_probe_free(&gt);
    eval_probe_free(&kp);
    mem_free(s_gt);
    mem_free(s_k);
    mem_free(cosv);
    return rc;
}

/* ---- the synthetic check ---------------------------------------------------------------------- */
static int synth_set(const sae_model *m, const synth_config *c, int n, float **x, float **codes,
                     eval_csr *f)
{
    sae_synth *g = NULL;
    *x = mem_alloc((size_t)n * c->d * sizeof **x);
    *codes = mem_alloc((size_t)n * c->n_features * sizeof **codes);
    float *fr = mem_alloc((size_t)256 * m->cfg.d_sae * sizeof *fr);
    int rc = *x && *codes && fr ? sae_synth_new(&g, c) : err_set(ERR_NOMEM, "out of memory");
    if (!rc) rc = sae_synth_sample_codes(g, *x, n, *codes);
    for (int a = 0; !rc && a < n; a += 256) {
        int b = n - a < 256 ? n - a : 256;
        rc = sae_encode(m, *x + (size_t)a * c->d, b, fr);
        for (int i = 0; !rc && i < b; i++) rc = eval_csr_push(f, fr + (size_t)i * m->cfg.d_sae, m->cfg.d_sae);
    }
    sae_synth_free(g);
    mem_free(fr);
    return rc;
}

int eval_absorption_synth(const sae_model *m, const synth_config *c, int n_train, int n_test,
                          const eval_abs_params *p, eval_abs_class *mean, eval_abs_class *per,
                          sae_absorption_result *exact, float *sample_frac)
{
    memset(mean, 0, sizeof *mean);
    for (int64_t i = 0; sample_frac && c->parents > 0 && i < (int64_t)n_test * c->parents; i++)
        sample_frac[i] = NAN;
    if (per) memset(per, 0, (size_t)(c->parents > 0 ? c->parents : 0) * sizeof *per);
    if (c->parents < 1 || c->children < 1) return err_set(ERR_ARG, "the synthetic check needs parents and children");
    if (m->cfg.d_in != c->d || m->cfg.transcoder) return err_set(ERR_SHAPE, "the SAE reads %d values, the generator makes %d", m->cfg.d_in, c->d);
    synth_config ct = *c;
    ct.sample_seed = (c->sample_seed ? c->sample_seed : c->seed) ^ 0x7e57ull;
    float *xtr = NULL, *ctr = NULL, *xte = NULL, *cte = NULL;
    eval_csr ftr = {0}, fte = {0};
    int ntot = n_train > n_test ? n_train : n_test;
    int *cls = mem_alloc((size_t)ntot * sizeof *cls);
    int *rtr = mem_alloc((size_t)2 * n_train * sizeof *rtr), *rte = mem_alloc((size_t)2 * n_test * sizeof *rte);
    unsigned char *ytr = mem_alloc((size_t)2 * n_train), *yte = mem_alloc((size_t)2 * n_test);
    unsigned char *cnt = mem_alloc((size_t)2 * n_test);
    double *rf = sample_frac ? mem_alloc((size_t)2 * n_test * sizeof *rf) : NULL;
    int rc = cls && rtr && rte && ytr && yte && cnt && (rf || !sample_frac) ? OK : err_set(ERR_NOMEM, "out of memory");
    if (!rc) rc = synth_set(m, c, n_train, &xtr, &ctr, &ftr);
    if (!rc) rc = synth_set(m, &ct, n_test, &xte, &cte, &fte);
    const int F = c->n_features, G = 1 + c->children;
    int used = 0;
    for (int g = 0; !rc && g < c->parents; g++) {
        int par = g * G, ntr, nte;
        for (int i = 0; i < n_train; i++) cls[i] = ctr[(size_t)i * F + par] > 0;
        rc = eval_balance(cls, n_train, 1, 2, n_train, c->seed + 1000u + (uint64_t)g, rtr, ytr, &ntr);
        for (int i = 0; !rc && i < n_test; i++) cls[i] = cte[(size_t)i * F + par] > 0;
        if (!rc) rc = eval_balance(cls, n_test, 1, 2, n_test, c->seed + 2000u + (uint64_t)g, rte, yte, &nte);
        for (int i = 0; !rc && i < nte; i++) {
            int any = 0;
            for (int ch = 1; ch < G; ch++) any |= cte[(size_t)rte[i] * F + par + ch] > 0;
            cnt[i] = (unsigned char)any;
        }
        if (rc || ntr < 4 || nte < 4) continue;
        eval_feats tr = {.dense = xtr, .d = c->d, .sparse = &ftr};
        eval_feats te = {.dense = xte, .d = c->d, .sparse = &fte};
        eval_abs_class r;
        eval_abs_rows rows = {.frac = rf};
        rc = eval_absorption_class(&tr, rtr, ytr, ntr, &te, rte, yte, cnt, nte, m->W_dec, m->cfg.d_sae, p, &r,
                                   &rows);
        if (rc) break;
        for (int i = 0; rf && i < nte; i++)
            if (!isnan(rf[i])) sample_frac[(size_t)rte[i] * c->parents + g] = (float)rf[i];
        if (per) per[g] = r;
        mean->gt_f1 += r.gt_f1;
        mean->split_f1 += r.split_f1;
        mean->n_split += r.n_split;
        mean->n_tp += r.n_tp;
        mean->n_fn += r.n_fn;
        mean->mean_frac += r.mean_frac;
        mean->mean_frac_nogate += r.mean_frac_nogate;
        mean->full_rate += r.full_rate;
        mean->included += r.included;
        used++;
    }
    if (!rc && used) {
        mean->gt_f1 /= used;
        mean->split_f1 /= used;
        mean->mean_frac /= used;
        mean->mean_frac_nogate /= used;
        mean->full_rate /= used;
        mean->n_split = (int)lround((double)mean->n_split / used);
    }
    if (!rc && exact) { /* the generator's own measure, on the same test samples */
        sae_synth *g = NULL;
        rc = sae_synth_new(&g, c);
        if (!rc) rc = sae_absorption(m, c, sae_synth_directions(g), xte, cte, n_test, exact);
        sae_synth_free(g);
    }
    mem_free(xtr);
    mem_free(ctr);
    mem_free(xte);
    mem_free(cte);
    eval_csr_free(&ftr);
    eval_csr_free(&fte);
    mem_free(cls);
    mem_free(rtr);
    mem_free(rte);
    mem_free(ytr);
    mem_free(yte);
    mem_free(cnt);
    mem_free(rf);
    return rc;
}
