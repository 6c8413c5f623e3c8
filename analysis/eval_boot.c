/* eval_boot.c - standard errors of eval's headline means by a bootstrap over the test documents
 * (eval.h, docs/eval.md "Standard errors"). A task is kept as per-document sums (rows, sum of
 * values), so a resample is a reweighting of documents: no probe is fitted again, and every task
 * of a replicate sees the same draw (correlated tasks are resampled together). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/eval.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/rng.h"

typedef struct {
    int series, m; /* m documents with rows */
    size_t at;     /* into doc / cnt / sum */
} boot_task;

struct eval_boot {
    int n_docs;
    int *stratum;        /* [n_docs], -1: not resampled (no test rows may name it) */
    boot_task *t;
    int nt, capt;
    int *doc;            /* per task: its documents, ascending */
    double *cnt, *sum;   /* rows and sum of values per (task, document) */
    size_t n, cap;
    double *scr_cnt, *scr_sum; /* [n_docs] scratch of eval_boot_add */
    int *scr_seen;
};

int eval_boot_new(eval_boot **out, int n_docs, const int *stratum)
{
    *out = NULL;
    if (n_docs < 1) return err_set(ERR_ARG, "a bootstrap needs documents (%d)", n_docs);
    eval_boot *b = mem_calloc(1, sizeof *b);
    if (b) {
        b->n_docs = n_docs;
        b->stratum = mem_alloc((size_t)n_docs * sizeof *b->stratum);
        b->scr_cnt = mem_calloc((size_t)n_docs, sizeof *b->scr_cnt);
        b->scr_sum = mem_calloc((size_t)n_docs, sizeof *b->scr_sum);
        b->scr_seen = mem_alloc((size_t)n_docs * sizeof *b->scr_seen);
    }
    if (!b || !b->stratum || !b->scr_cnt || !b->scr_sum || !b->scr_seen) {
        eval_boot_free(b);
        return err_set(ERR_NOMEM, "out of memory for the bootstrap of %d documents", n_docs);
    }
    for (int d = 0; d < n_docs; d++) b->stratum[d] = stratum ? stratum[d] : 0;
    *out = b;
    return OK;
}

void eval_boot_free(eval_boot *b)
{
    if (!b) return;
    mem_free(b->stratum);
    mem_free(b->t);
    mem_free(b->doc);
    mem_free(b->cnt);
    mem_free(b->sum);
    mem_free(b->scr_cnt);
    mem_free(b->scr_sum);
    mem_free(b->scr_seen);
    mem_free(b);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int eval_boot_add(eval_boot *b, int series, const int *doc, const double *v, int n)
{
    if (series < 0) return err_set(ERR_ARG, "bootstrap series %d", series);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(v[i])) continue; /* not counted (an absorption row that is no true positive) */
        int d = doc[i];
        if (d < 0 || d >= b->n_docs || b->stratum[d] < 0) {
            for (int j = 0; j < m; j++) b->scr_cnt[b->scr_seen[j]] = b->scr_sum[b->scr_seen[j]] = 0;
            return err_set(ERR_ARG, "a test row of document %d, outside the %d resampled documents",
                           d, b->n_docs);
        }
        if (b->scr_cnt[d] == 0) b->scr_seen[m++] = d;
        b->scr_cnt[d] += 1;
        b->scr_sum[d] += v[i];
    }
    qsort(b->scr_seen, (size_t)m, sizeof *b->scr_seen, cmp_int); /* the sums' order: fixed */
    int rc = OK;
    if (b->nt == b->capt) {
        int nc = b->capt ? 2 * b->capt : 64;
        boot_task *p = mem_realloc(b->t, (size_t)nc * sizeof *p);
        if (p) b->t = p, b->capt = nc;
        else rc = err_set(ERR_NOMEM, "out of memory for the bootstrap");
    }
    if (!rc && b->n + (size_t)m > b->cap) {
        size_t nc = b->cap ? 2 * b->cap : 4096;
        while (nc < b->n + (size_t)m) nc *= 2;
        int *pd = mem_realloc(b->doc, nc * sizeof *pd);
        if (pd) b->doc = pd;
        double *pc = pd ? mem_realloc(b->cnt, nc * sizeof *pc) : NULL;
        if (pc) b->cnt = pc;
        double *ps = pc ? mem_realloc(b->sum, nc * sizeof *ps) : NULL;
        if (ps) b->sum = ps, b->cap = nc;
        else rc = err_set(ERR_NOMEM, "out of memory for the bootstrap");
    }
    if (!rc && m) { /* a task without a counted row has no value: nothing to keep */
        b->t[b->nt++] = (boot_task){series, m, b->n};
        for (int j = 0; j < m; j++) {
            int d = b->scr_seen[j];
            b->doc[b->n + (size_t)j] = d;
            b->cnt[b->n + (size_t)j] = b->scr_cnt[d];
            b->sum[b->n + (size_t)j] = b->scr_sum[d];
        }
        b->n += (size_t)m;
    }
    for (int j = 0; j < m; j++) b->scr_cnt[b->scr_seen[j]] = b->scr_sum[b->scr_seen[j]] = 0;
    return rc;
}

typedef struct {
    int stratum, doc;
} strat_doc;

static int cmp_strat_doc(const void *a, const void *b)
{
    const strat_doc *x = a, *y = b;
    if (x->stratum != y->stratum) return (x->stratum > y->stratum) - (x->stratum < y->stratum);
    return (x->doc > y->doc) - (x->doc < y->doc);
}

int eval_boot_se(const eval_boot *b, int n_series, uint64_t seed, int n_boot, double *se)
{
    for (int s = 0; s < n_series; s++) se[s] = NAN;
    if (n_boot < 2 || n_series < 1) return err_set(ERR_ARG, "a bootstrap of %d resamples", n_boot);
    const int D = b->n_docs;
    /* the strata's documents: the split draws its test documents per stratum (genre), so each
       resample keeps every stratum's count (the design's, not a draw's) */
    strat_doc *order = mem_alloc((size_t)D * sizeof *order);
    double *mult = mem_alloc((size_t)D * sizeof *mult);
    double *rep = mem_alloc((size_t)n_boot * n_series * sizeof *rep);
    double *acc = mem_alloc((size_t)n_series * sizeof *acc);
    int *nacc = mem_alloc((size_t)n_series * sizeof *nacc);
    int rc = OK, no = 0;
    if (!order || !mult || !rep || !acc || !nacc) {
        rc = err_set(ERR_NOMEM, "out of memory for the bootstrap");
        goto out;
    }
    for (int d = 0; d < D; d++)
        if (b->stratum[d] >= 0) order[no++] = (strat_doc){b->stratum[d], d};
    /* by stratum, then document */
    qsort(order, (size_t)no, sizeof *order, cmp_strat_doc);
    /* a stratum of one document would be drawn the same in every resample and add no variance
       (a genre of 6 documents has one test document at test_frac 0.2): such strata are drawn as
       one, with the first stratum of several when there is only one of them (collapsed strata) */
    int n1 = 0, first_multi = -1;
    for (int a = 0, e; a < no; a = e) {
        for (e = a; e < no && order[e].stratum == order[a].stratum; e++) {}
        if (e - a == 1) n1++;
        else if (first_multi < 0) first_multi = order[a].stratum;
    }
    for (int a = 0, e; n1 && a < no; a = e) {
        for (e = a; e < no && order[e].stratum == order[a].stratum; e++) {}
        if (e - a == 1) order[a].stratum = n1 == 1 && first_multi >= 0 ? first_multi : -1;
    }
    if (n1) qsort(order, (size_t)no, sizeof *order, cmp_strat_doc);
    rng_state r;
    rng_seed(&r, seed);
    for (int k = 0; no >= 2 && k < n_boot; k++) { /* one document: no variance to estimate */
        for (int d = 0; d < D; d++) mult[d] = 0;
        /* Rao and Wu's rescaled bootstrap with n - 1 draws: a stratum of n documents draws n - 1
           of them with replacement, each draw weighing n / (n - 1). Its variance is the unbiased
           stratified one; n draws of weight 1 (the plain bootstrap) give (n - 1) / n of it, 8-14%
           low in se with the demo's strata of 2-16 test documents (an audit) */
        for (int a = 0; a < no;) {
            int e = a;
            while (e < no && order[e].stratum == order[a].stratum) e++;
            const double wt = (double)(e - a) / (double)(e - a - 1);
            for (int i = a + 1; i < e; i++) mult[order[a + (int)rng_below(&r, (uint64_t)(e - a))].doc] += wt;
            a = e;
        }
        for (int s = 0; s < n_series; s++) acc[s] = 0, nacc[s] = 0;
        for (int t = 0; t < b->nt; t++) {
            const boot_task *tk = &b->t[t];
            if (tk->series >= n_series) continue;
            double num = 0, den = 0;
            for (int j = 0; j < tk->m; j++) {
                double w = mult[b->doc[tk->at + (size_t)j]];
                num += w * b->sum[tk->at + (size_t)j];
                den += w * b->cnt[tk->at + (size_t)j];
            }
            if (den > 0) { /* a task none of whose documents was drawn sits this resample out */
                acc[tk->series] += num / den;
                nacc[tk->series]++;
            }
        }
        for (int s = 0; s < n_series; s++) rep[(size_t)k * n_series + s] = nacc[s] ? acc[s] / nacc[s] : NAN;
    }
    for (int s = 0; no >= 2 && s < n_series; s++) { /* the replicates' sd (two passes) */
        double mean = 0;
        int n = 0;
        for (int k = 0; k < n_boot; k++) {
            double x = rep[(size_t)k * n_series + s];
            if (!isnan(x)) mean += x, n++;
        }
        if (n < 2) continue;
        mean /= n;
        double ss = 0;
        for (int k = 0; k < n_boot; k++) {
            double x = rep[(size_t)k * n_series + s];
            if (!isnan(x)) ss += (x - mean) * (x - mean);
        }
        se[s] = sqrt(ss / (n - 1));
    }
    /* a series whose rows are all in one document (one among several test documents, the others
       without a sampled sequence): every replicate that drew it read the same value, and the se
       read 0 where nothing is known. The draw stays over every test document (mult: scratch) */
    for (int s = 0; no >= 2 && s < n_series; s++) {
        int first = -1, two = 0;
        for (int t = 0; !two && t < b->nt; t++)
            for (int j = 0; b->t[t].series == s && j < b->t[t].m; j++) {
                int d = b->doc[b->t[t].at + (size_t)j];
                if (first < 0) first = d;
                else if (d != first) two = 1;
            }
        if (!two) se[s] = NAN;
    }
out:
    mem_free(order);
    mem_free(mult);
    mem_free(rep);
    mem_free(acc);
    mem_free(nacc);
    return rc;
}
