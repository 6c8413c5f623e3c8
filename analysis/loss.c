/* loss.c - downstream metrics: cross-entropy, KL between two logit rows, recovered fraction. */
#include <math.h>

#include "analysis/ana.h"

static double logsumexp(const float *x, int V)
{
    double m = -INFINITY;
    for (int i = 0; i < V; i++)
        if (x[i] > m) m = x[i];
    double s = 0;
    for (int i = 0; i < V; i++) s += exp((double)x[i] - m);
    return m + log(s);
}

double ana_kl_logits(const float *p, const float *q, int V)
{
    double lp = logsumexp(p, V), lq = logsumexp(q, V), kl = 0;
    for (int i = 0; i < V; i++) {
        double a = (double)p[i] - lp; /* log p_i */
        if (a < -745) continue;       /* p_i underflows to 0: contributes 0 */
        kl += exp(a) * (a - ((double)q[i] - lq));
    }
    return kl > 0 ? kl : 0.0; /* rounding can give -1e-17 for identical rows */
}

double ana_ce_logits(const float *logits, int V, int target)
{
    return logsumexp(logits, V) - (double)logits[target];
}

double ana_score(double base, double patched, double ref)
{
    double den = base - ref;
    if (den == 0) return NAN;
    return (base - patched) / den;
}

/* ---- reconstruction metrics ------------------------------------------------------------- */
#include <string.h>

#include "common/err.h"
#include "common/mem.h"

int ana_recon_init(ana_recon *r, int d_in)
{
    memset(r, 0, sizeof *r);
    if (d_in < 1) return err_set(ERR_ARG, "reconstruction metrics: width %d", d_in);
    r->d = d_in;
    r->sum_x = mem_calloc((size_t)d_in, sizeof *r->sum_x);
    return r->sum_x ? OK : err_set(ERR_NOMEM, "reconstruction metrics: out of memory");
}

void ana_recon_free(ana_recon *r)
{
    mem_free(r->sum_x);
    r->sum_x = NULL;
}

void ana_recon_add(ana_recon *r, const float *x, const float *xhat, const float *f, int N, int d_sae)
{
    const int d = r->d;
    for (int i = 0; i < N; i++) {
        const float *a = x + (size_t)i * d, *b = xhat + (size_t)i * d;
        double e = 0, xx = 0, hh = 0, xh = 0;
        for (int k = 0; k < d; k++) {
            double dx = (double)a[k] - b[k];
            e += dx * dx;
            xx += (double)a[k] * a[k];
            hh += (double)b[k] * b[k];
            xh += (double)a[k] * b[k];
            r->sum_x[k] += a[k];
        }
        r->sse += e;
        r->sumsq += xx;
        if (xx > 0 && hh > 0) {
            r->cos_sum += xh / sqrt(xx * hh);
            r->n_cos++;
        }
        if (xx > 0) {
            r->ratio_sum += sqrt(hh / xx);
            r->n_ratio++;
        }
        if (f) {
            const float *g = f + (size_t)i * d_sae;
            int64_t nz = 0;
            for (int j = 0; j < d_sae; j++) nz += g[j] > 0;
            r->l0_sum += (double)nz;
        }
    }
    r->n += N;
}

void ana_recon_result(const ana_recon *r, ana_recon_metrics *m)
{
    double n = (double)r->n, mean_sq = 0;
    for (int k = 0; k < r->d; k++) mean_sq += r->sum_x[k] * r->sum_x[k];
    double sst = r->n ? r->sumsq - mean_sq / n : 0; /* sum ||x - mean||^2 */
    m->mse = r->n ? r->sse / (n * r->d) : NAN;
    m->explained_variance = sst > 0 ? 1.0 - r->sse / sst : NAN;
    m->cosine = r->n_cos ? r->cos_sum / (double)r->n_cos : NAN;
    m->l2_ratio = r->n_ratio ? r->ratio_sum / (double)r->n_ratio : NAN;
    m->l0 = r->n ? r->l0_sum / n : NAN;
}
