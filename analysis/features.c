/* features.c - log-spaced histograms and the per-feature accumulator (density, mean, max,
 * histogram, top-N heap, bottom-k hash sample for quantile-interval samples), and its exact
 * merge (pack on one rank, merge on another). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/ana.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/hash.h"

int ana_log_edges(double *edges, int nbins, double lo, double hi)
{
    if (nbins < 1 || !(lo > 0) || !(hi > lo) || !isfinite(hi))
        return err_set(ERR_ARG, "log histogram: need nbins >= 1 and 0 < lo < hi (got %d, %g, %g)",
                       nbins, lo, hi);
    double r = log(hi / lo);
    for (int b = 0; b <= nbins; b++) edges[b] = lo * exp(r * b / nbins);
    edges[0] = lo; /* exact ends, whatever exp() rounds to */
    edges[nbins] = hi;
    return OK;
}

int ana_bin_index(const double *edges, int nbins, double v)
{
    if (!(v >= edges[1])) return 0; /* also NaN */
    if (v >= edges[nbins - 1]) return nbins - 1;
    int lo = 1, hi = nbins - 1; /* edges[lo] <= v < edges[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v >= edges[mid]) lo = mid;
        else hi = mid;
    }
    return lo;
}

struct ana_feat_acc {
    int d, top_n, res_cap, nbins;
    int64_t n_tokens;
    double *edges;  /* [nbins+1] */
    int64_t *n_active; /* [d] */
    double *sum;       /* [d] */
    float *max;        /* [d] */
    int64_t *hist;     /* [d,nbins] */
    int *n_top;        /* [d] */
    ana_act *top;      /* [d,top_n] min-heap per feature */
    int *n_res;        /* [d] */
    ana_act *res;      /* [d,res_cap] max-heap per feature on (key, seq, pos) */
    uint64_t *res_key; /* [d,res_cap] sample_key of each entry of res */
    uint64_t seed;
};

void ana_feat_acc_free(ana_feat_acc *a)
{
    if (!a) return;
    mem_free(a->edges);
    mem_free(a->n_active);
    mem_free(a->sum);
    mem_free(a->max);
    mem_free(a->hist);
    mem_free(a->n_top);
    mem_free(a->top);
    mem_free(a->n_res);
    mem_free(a->res);
    mem_free(a->res_key);
    mem_free(a);
}

int ana_feat_acc_new(ana_feat_acc **out, int d, int top_n, int reservoir, const double *edges,
                     int nbins, uint64_t seed)
{
    *out = NULL;
    if (d < 1 || top_n < 1 || reservoir < 0 || nbins < 1)
        return err_set(ERR_ARG, "feature statistics: bad sizes (d %d, top %d, reservoir %d, bins %d)",
                       d, top_n, reservoir, nbins);
    ana_feat_acc *a = mem_calloc(1, sizeof *a);
    if (!a) return err_set(ERR_NOMEM, "feature statistics: out of memory");
    a->d = d;
    a->top_n = top_n;
    a->res_cap = reservoir;
    a->nbins = nbins;
    a->seed = seed;
    a->edges = mem_alloc((size_t)(nbins + 1) * sizeof *a->edges);
    a->n_active = mem_calloc((size_t)d, sizeof *a->n_active);
    a->sum = mem_calloc((size_t)d, sizeof *a->sum);
    a->max = mem_calloc((size_t)d, sizeof *a->max);
    a->hist = mem_calloc((size_t)d * nbins, sizeof *a->hist);
    a->n_top = mem_calloc((size_t)d, sizeof *a->n_top);
    a->top = mem_alloc((size_t)d * top_n * sizeof *a->top);
    a->n_res = mem_calloc((size_t)d, sizeof *a->n_res);
    a->res = mem_alloc(((size_t)d * reservoir + 1) * sizeof *a->res);
    a->res_key = mem_alloc(((size_t)d * reservoir + 1) * sizeof *a->res_key);
    if (!a->edges || !a->n_active || !a->sum || !a->max || !a->hist || !a->n_top || !a->top ||
        !a->n_res || !a->res || !a->res_key) {
        ana_feat_acc_free(a);
        /* the top lists and the reservoirs are the large parts: say what sized them */
        return err_set(ERR_NOMEM, "feature statistics: out of memory for %d features x %d top "
                       "activations and %d reservoir samples (%.1f GB; a smaller --top?)", d, top_n,
                       reservoir, ((double)d * top_n * sizeof *a->top +
                                   (double)d * reservoir * (sizeof *a->res + sizeof *a->res_key)) / 1e9);
    }
    memcpy(a->edges, edges, (size_t)(nbins + 1) * sizeof *edges);
    *out = a;
    return OK;
}

/* Min-heap on value; among equal values the later example is "smaller", so earlier examples
 * survive ties. Examples arrive in (seq, pos) order, so a plain value comparison suffices for
 * insertion (replace only when strictly larger). */
static int act_less(const ana_act *x, const ana_act *y)
{
    if (x->value != y->value) return x->value < y->value;
    if (x->seq != y->seq) return x->seq > y->seq;
    return x->pos > y->pos;
}

static void heap_sift_down(ana_act *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && act_less(&h[l], &h[m])) m = l;
        if (r < n && act_less(&h[r], &h[m])) m = r;
        if (m == i) return;
        ana_act t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void heap_push(ana_act *h, int *n, ana_act x)
{
    int i = (*n)++;
    h[i] = x;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!act_less(&h[i], &h[p])) break;
        ana_act t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

/* The quantile sample: per feature the `reservoir` firing positions with the smallest
 * sample_key, a hash of (seed, feature, seq, pos). The positions' keys are independent uniform
 * draws, so the kept ones are a uniform sample without replacement, and the sample depends only
 * on the set of firing positions: the same whatever order they come in or however they are split
 * (the merge of two samples is the bottom-k of their union). Ties of the 64-bit key (practically
 * never) are broken by (seq, pos), so the order is total. */
static uint64_t sample_key(uint64_t seed, int j, int64_t seq, int32_t pos)
{
    uint64_t k = hash_mix64(seed ^ ((uint64_t)(uint32_t)j << 32 | (uint32_t)pos));
    return hash_mix64(k ^ (uint64_t)seq);
}

/* (key, seq, pos) of entry x is above entry y's: the max-heap's order */
static int key_above(uint64_t kx, const ana_act *x, uint64_t ky, const ana_act *y)
{
    if (kx != ky) return kx > ky;
    if (x->seq != y->seq) return x->seq > y->seq;
    return x->pos > y->pos;
}

static void sample_sift_down(ana_act *h, uint64_t *k, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && key_above(k[l], &h[l], k[m], &h[m])) m = l;
        if (r < n && key_above(k[r], &h[r], k[m], &h[m])) m = r;
        if (m == i) return;
        ana_act t = h[i];
        h[i] = h[m];
        h[m] = t;
        uint64_t u = k[i];
        k[i] = k[m];
        k[m] = u;
        i = m;
    }
}

static void sample_offer(ana_feat_acc *a, int j, ana_act x, uint64_t key)
{
    const int R = a->res_cap;
    ana_act *h = a->res + (size_t)j * R;
    uint64_t *k = a->res_key + (size_t)j * R;
    int n = a->n_res[j];
    if (n < R) { /* sift up */
        int i = n;
        a->n_res[j] = n + 1;
        while (i > 0) {
            int p = (i - 1) / 2;
            if (!key_above(key, &x, k[p], &h[p])) break;
            h[i] = h[p];
            k[i] = k[p];
            i = p;
        }
        h[i] = x;
        k[i] = key;
    } else if (key_above(k[0], &h[0], key, &x)) {
        h[0] = x;
        k[0] = key;
        sample_sift_down(h, k, R, 0);
    }
}

void ana_feat_acc_add(ana_feat_acc *a, const float *f, int T, int64_t seq, int pos0)
{
    const int d = a->d, K = a->top_n, R = a->res_cap;
    for (int t = 0; t < T; t++) {
        const float *row = f + (size_t)t * d;
        for (int j = 0; j < d; j++) {
            float v = row[j];
            if (!(v > 0)) continue;
            a->n_active[j]++;
            a->sum[j] += v;
            if (v > a->max[j]) a->max[j] = v;
            a->hist[(size_t)j * a->nbins + ana_bin_index(a->edges, a->nbins, v)]++;
            ana_act x = {v, pos0 + t, seq};
            ana_act *h = a->top + (size_t)j * K;
            if (a->n_top[j] < K) heap_push(h, &a->n_top[j], x);
            else if (v > h[0].value) {
                h[0] = x;
                heap_sift_down(h, K, 0);
            }
            if (R > 0) sample_offer(a, j, x, sample_key(a->seed, j, seq, pos0 + t));
        }
    }
    a->n_tokens += T;
}

int64_t ana_feat_tokens(const ana_feat_acc *a) { return a->n_tokens; }
int64_t ana_feat_active(const ana_feat_acc *a, int j) { return a->n_active[j]; }
double ana_feat_sum(const ana_feat_acc *a, int j) { return a->sum[j]; }
float ana_feat_max(const ana_feat_acc *a, int j) { return a->max[j]; }
const int64_t *ana_feat_hist(const ana_feat_acc *a, int j) { return a->hist + (size_t)j * a->nbins; }

static int cmp_desc(const void *x, const void *y)
{
    const ana_act *p = x, *q = y;
    return act_less(q, p) ? -1 : act_less(p, q) ? 1 : 0;
}

static int cmp_asc(const void *x, const void *y) { return -cmp_desc(x, y); }

int ana_feat_top(const ana_feat_acc *a, int j, ana_act *out)
{
    int n = a->n_top[j];
    memcpy(out, a->top + (size_t)j * a->top_n, (size_t)n * sizeof *out);
    qsort(out, (size_t)n, sizeof *out, cmp_desc);
    return n;
}

int ana_feat_quantiles(const ana_feat_acc *a, int j, int n_intervals, int per_interval,
                       ana_act *out, int *interval)
{
    int n = a->n_res[j];
    if (n == 0 || n_intervals < 1 || per_interval < 1) return 0;
    ana_act *s = mem_alloc((size_t)n * sizeof *s);
    if (!s) return 0;
    memcpy(s, a->res + (size_t)j * a->res_cap, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_asc);
    int w = 0;
    for (int b = 0; b < n_intervals; b++) {
        /* band b is s[lo, hi) */
        int lo = (int)((int64_t)n * b / n_intervals), hi = (int)((int64_t)n * (b + 1) / n_intervals);
        int m = hi - lo;
        if (m <= 0) continue;
        int take = per_interval < m ? per_interval : m;
        for (int i = 0; i < take; i++) {
            /* evenly spaced picks, centred in their sub-band */
            int k = lo + (int)(((int64_t)2 * i + 1) * m / (2 * take));
            out[w] = s[k];
            if (interval) interval[w] = b;
            w++;
        }
    }
    mem_free(s);
    return w;
}

/* ---- exact merge: pack on one rank, merge on another ----------------------------------------
 * Layout (host byte order; both sides run the same binary): int64 header {magic, d, top_n,
 * res_cap, nbins, n_tokens}, n_active [d] int64, max [d] float, hist [d*nbins] int64, n_top [d]
 * and n_res [d] int32, then the top entries and the sample entries of every feature in turn
 * (ana_act each; the sample keys are recomputed from (feature, seq, pos)). */
enum { PACK_MAGIC = 0x53414543 }; /* "SAEC" */

double *ana_feat_sums(ana_feat_acc *a) { return a->sum; }

static int cmp_i64_key(const void *k, const void *e)
{
    int64_t x = *(const int64_t *)k, y = *(const int64_t *)e;
    return x < y ? -1 : x > y;
}

int ana_feat_acc_entries_within(const ana_feat_acc *a, const int64_t *seqs, size_t nseq, int max_pos)
{
    for (int j = 0; j < a->d; j++)
        for (int pass = 0; pass < 2; pass++) {
            const ana_act *e = pass ? a->res + (size_t)j * a->res_cap : a->top + (size_t)j * a->top_n;
            int n = pass ? a->n_res[j] : a->n_top[j];
            for (int i = 0; i < n; i++)
                if (e[i].pos >= max_pos || !bsearch(&e[i].seq, seqs, nseq, sizeof *seqs, cmp_i64_key))
                    return 0;
        }
    return 1;
}

void ana_feat_acc_reset(ana_feat_acc *a)
{
    const size_t d = (size_t)a->d;
    a->n_tokens = 0;
    memset(a->n_active, 0, d * sizeof *a->n_active);
    memset(a->sum, 0, d * sizeof *a->sum);
    memset(a->max, 0, d * sizeof *a->max);
    memset(a->hist, 0, d * a->nbins * sizeof *a->hist);
    memset(a->n_top, 0, d * sizeof *a->n_top);
    memset(a->n_res, 0, d * sizeof *a->n_res);
}

static size_t count_entries(const int *n, int d)
{
    size_t s = 0;
    for (int j = 0; j < d; j++) s += (size_t)n[j];
    return s;
}

size_t ana_feat_acc_packed_size(const ana_feat_acc *a)
{
    size_t d = (size_t)a->d;
    return 6 * sizeof(int64_t) + d * (sizeof(int64_t) + sizeof(float) + 2 * sizeof(int32_t)) +
           d * a->nbins * sizeof(int64_t) +
           (count_entries(a->n_top, a->d) + count_entries(a->n_res, a->d)) * sizeof(ana_act);
}

static unsigned char *put(unsigned char *p, const void *src, size_t n)
{
    memcpy(p, src, n);
    return p + n;
}

void ana_feat_acc_pack(const ana_feat_acc *a, void *buf)
{
    const size_t d = (size_t)a->d;
    int64_t hdr[6] = {PACK_MAGIC, a->d, a->top_n, a->res_cap, a->nbins, a->n_tokens};
    unsigned char *p = put(buf, hdr, sizeof hdr);
    p = put(p, a->n_active, d * sizeof *a->n_active);
    p = put(p, a->max, d * sizeof *a->max);
    p = put(p, a->hist, d * a->nbins * sizeof *a->hist);
    for (size_t j = 0; j < d; j++) p = put(p, &(int32_t){a->n_top[j]}, sizeof(int32_t));
    for (size_t j = 0; j < d; j++) p = put(p, &(int32_t){a->n_res[j]}, sizeof(int32_t));
    for (size_t j = 0; j < d; j++)
        p = put(p, a->top + j * a->top_n, (size_t)a->n_top[j] * sizeof *a->top);
    for (size_t j = 0; j < d; j++)
        p = put(p, a->res + j * a->res_cap, (size_t)a->n_res[j] * sizeof *a->res);
}

/* top-N of the union: x replaces the heap's smallest when it is larger in the total order */
static void top_offer(ana_feat_acc *a, int j, ana_act x)
{
    ana_act *h = a->top + (size_t)j * a->top_n;
    if (a->n_top[j] < a->top_n) heap_push(h, &a->n_top[j], x);
    else if (act_less(&h[0], &x)) {
        h[0] = x;
        heap_sift_down(h, a->top_n, 0);
    }
}

int ana_feat_acc_merge_packed(ana_feat_acc *a, const void *buf, size_t bytes)
{
    const size_t d = (size_t)a->d;
    const unsigned char *p = buf, *end = p + bytes;
    int64_t hdr[6];
    size_t fixed = sizeof hdr + d * (sizeof(int64_t) + sizeof(float) + 2 * sizeof(int32_t)) +
                   d * a->nbins * sizeof(int64_t);
    if (bytes < fixed) return err_set(ERR_FORMAT, "feature statistics to merge: %zu bytes, too short", bytes);
    memcpy(hdr, p, sizeof hdr);
    p += sizeof hdr;
    if (hdr[0] != PACK_MAGIC || hdr[1] != a->d || hdr[2] != a->top_n || hdr[3] != a->res_cap ||
        hdr[4] != a->nbins)
        return err_set(ERR_FORMAT, "feature statistics to merge: shape (%lld features, top %lld, "
                       "sample %lld, %lld bins) differs from (%d, %d, %d, %d)", (long long)hdr[1],
                       (long long)hdr[2], (long long)hdr[3], (long long)hdr[4], a->d, a->top_n,
                       a->res_cap, a->nbins);
    const unsigned char *act = p, *mx = act + d * sizeof(int64_t), *hist = mx + d * sizeof(float);
    const unsigned char *nt = hist + d * a->nbins * sizeof(int64_t), *nr = nt + d * sizeof(int32_t);
    const unsigned char *ent = nr + d * sizeof(int32_t);
    size_t total = 0;
    for (size_t j = 0; j < d; j++) {
        int32_t t, r;
        memcpy(&t, nt + j * sizeof t, sizeof t);
        memcpy(&r, nr + j * sizeof r, sizeof r);
        if (t < 0 || t > a->top_n || r < 0 || r > a->res_cap)
            return err_set(ERR_FORMAT, "feature statistics to merge: feature %zu holds %d top and "
                           "%d sampled entries", j, (int)t, (int)r);
        total += (size_t)t + (size_t)r;
    }
    if ((size_t)(end - ent) != total * sizeof(ana_act))
        return err_set(ERR_FORMAT, "feature statistics to merge: %zu bytes, want %zu", bytes,
                       (size_t)(ent - (const unsigned char *)buf) + total * sizeof(ana_act));
    /* what a feed can make: counts >= 0, maxima >= 0 and kept values > 0 (only active positions
       are kept; never NaN), positions and sequence ids >= 0 (a buffer from a file, analyze's
       checkpoint, is checked before anything is added) */
    int bad = hdr[5] < 0;
    for (size_t j = 0; j < d && !bad; j++) {
        int64_t n;
        float m;
        memcpy(&n, act + j * sizeof n, sizeof n);
        memcpy(&m, mx + j * sizeof m, sizeof m);
        bad = n < 0 || n > hdr[5] || !(m >= 0);
    }
    for (size_t i = 0; i < d * a->nbins && !bad; i++) {
        int64_t h;
        memcpy(&h, hist + i * sizeof h, sizeof h);
        bad = h < 0;
    }
    for (size_t e = 0; e < total && !bad; e++) {
        ana_act x;
        memcpy(&x, ent + e * sizeof x, sizeof x);
        bad = !(x.value > 0) || x.pos < 0 || x.seq < 0;
    }
    if (bad) return err_set(ERR_FORMAT, "feature statistics to merge: a count, maximum or kept entry "
                            "no feed can make");
    a->n_tokens += hdr[5];
    for (size_t j = 0; j < d; j++) {
        int64_t n;
        float m;
        memcpy(&n, act + j * sizeof n, sizeof n);
        memcpy(&m, mx + j * sizeof m, sizeof m);
        a->n_active[j] += n;
        if (m > a->max[j]) a->max[j] = m;
    }
    for (size_t i = 0; i < d * a->nbins; i++) {
        int64_t h;
        memcpy(&h, hist + i * sizeof h, sizeof h);
        a->hist[i] += h;
    }
    for (int pass = 0; pass < 2; pass++)
        for (size_t j = 0; j < d; j++) {
            int32_t n;
            memcpy(&n, (pass ? nr : nt) + j * sizeof n, sizeof n);
            for (int32_t i = 0; i < n; i++, ent += sizeof(ana_act)) {
                ana_act x;
                memcpy(&x, ent, sizeof x);
                if (pass == 0) top_offer(a, (int)j, x);
                else sample_offer(a, (int)j, x, sample_key(a->seed, (int)j, x.seq, x.pos));
            }
        }
    return OK;
}
