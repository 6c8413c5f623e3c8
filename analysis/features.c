/* features.c - log-spaced histograms and the per-feature accumulator (density, mean, max,
 * histogram, top-N heap, reservoir for quantile-interval samples). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/ana.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/rng.h"

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
    ana_act *res;      /* [d,res_cap] */
    uint64_t rng;
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
    a->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
    a->edges = mem_alloc((size_t)(nbins + 1) * sizeof *a->edges);
    a->n_active = mem_calloc((size_t)d, sizeof *a->n_active);
    a->sum = mem_calloc((size_t)d, sizeof *a->sum);
    a->max = mem_calloc((size_t)d, sizeof *a->max);
    a->hist = mem_calloc((size_t)d * nbins, sizeof *a->hist);
    a->n_top = mem_calloc((size_t)d, sizeof *a->n_top);
    a->top = mem_alloc((size_t)d * top_n * sizeof *a->top);
    a->n_res = mem_calloc((size_t)d, sizeof *a->n_res);
    a->res = mem_alloc(((size_t)d * reservoir + 1) * sizeof *a->res);
    if (!a->edges || !a->n_active || !a->sum || !a->max || !a->hist || !a->n_top || !a->top ||
        !a->n_res || !a->res) {
        ana_feat_acc_free(a);
        return err_set(ERR_NOMEM, "feature statistics: out of memory for %d features", d);
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

void ana_feat_acc_add(ana_feat_acc *a, const float *f, int T, int64_t seq, int pos0)
{
    const int d = a->d, K = a->top_n, R = a->res_cap;
    for (int t = 0; t < T; t++) {
        const float *row = f + (size_t)t * d;
        for (int j = 0; j < d; j++) {
            float v = row[j];
            if (!(v > 0)) continue;
            int64_t n = ++a->n_active[j];
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
            if (R > 0) {
                ana_act *r = a->res + (size_t)j * R;
                if (a->n_res[j] < R) r[a->n_res[j]++] = x;
                else {
                    uint64_t k = rng_xorshift64s(&a->rng) % (uint64_t)n;
                    if (k < (uint64_t)R) r[k] = x;
                }
            }
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
