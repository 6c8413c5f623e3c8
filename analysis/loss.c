/* loss.c - downstream metrics: cross-entropy, KL between two logit rows, recovered fraction. */
#include <math.h>

#include "analysis/ana.h"

double ana_logsumexp(const float *x, int V)
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
    double lp = ana_logsumexp(p, V), lq = ana_logsumexp(q, V), kl = 0;
    for (int i = 0; i < V; i++) {
        double a = (double)p[i] - lp; /* log p_i */
        if (a < -745) continue;       /* p_i underflows to 0: contributes 0 */
        kl += exp(a) * (a - ((double)q[i] - lq));
    }
    return kl > 0 ? kl : 0.0; /* rounding can give -1e-17 for identical rows */
}

void ana_softmax(float *probs, const float *logits, int V, double *lse)
{
    double l = ana_logsumexp(logits, V);
    for (int i = 0; i < V; i++) probs[i] = (float)exp((double)logits[i] - l);
    *lse = l;
}

double ana_kl_prepared(const float *logits_p, const float *probs_p, double lse_p,
                       const float *logits_q, int V)
{
    double lq = ana_logsumexp(logits_q, V), kl = 0;
    for (int i = 0; i < V; i++) {
        if (probs_p[i] == 0) continue; /* 0 log 0 = 0 */
        kl += (double)probs_p[i] * (((double)logits_p[i] - lse_p) - ((double)logits_q[i] - lq));
    }
    return kl > 0 ? kl : 0.0;
}

double ana_ce_logits(const float *logits, int V, int target)
{
    return ana_logsumexp(logits, V) - (double)logits[target];
}

double ana_score(double base, double patched, double ref)
{
    double den = base - ref;
    if (den == 0) return NAN;
    return (base - patched) / den;
}
