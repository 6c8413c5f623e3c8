/* logits.c - direct-path logit effects of decoder directions, and top-k selection. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/ana.h"
#include "common/err.h"
#include "common/mem.h"

int ana_logit_effects(float *out, const float *dirs, int n, int d, const float *proj, int C,
                      const float *gamma, const float *W_U, int V)
{
    if (n < 1 || d < 1 || C < 1 || V < 1 || (!proj && d != C))
        return err_set(ERR_ARG, "logit effects: width %d does not match the residual width %d "
                                "and no projection was given", d, C);
    float *R = mem_alloc((size_t)n * C * sizeof *R);
    if (!R) return err_set(ERR_NOMEM, "logit effects: out of memory");
    if (proj) /* R[n,C] = dirs[n,d] @ proj[d,C] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, C, d, 1.0f, dirs, d, proj, C,
                    0.0f, R, C);
    else memcpy(R, dirs, (size_t)n * C * sizeof *R);
    for (int i = 0; i < n; i++) {
        float *r = R + (size_t)i * C;
        double mean = 0;
        for (int k = 0; k < C; k++) mean += r[k];
        mean /= C;
        for (int k = 0; k < C; k++) r[k] = (float)(r[k] - mean) * (gamma ? gamma[k] : 1.0f);
    }
    /* out[n,V] = R[n,C] @ W_U^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, V, C, 1.0f, R, C, W_U, C, 0.0f, out, V);
    mem_free(R);
    return OK;
}

int ana_logit_effects_final(float *out, const float *dirs, int n, int C, const float *W_U, int V)
{
    if (n < 1 || C < 1 || V < 1) return err_set(ERR_ARG, "logit effects: empty input");
    /* the hook is the final LayerNorm's output with its weight and bias applied (docs/model.md):
       the unembedding reads it as it is, logits = W_U n; multiplying by gamma once more (as
       until a review) was exact only where gamma is 1, an untrained model's */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, V, C, 1.0f, dirs, C, W_U, C, 0.0f, out, V);
    return OK;
}

/* "a is stronger than b": larger (or smaller) value, lower index on ties. */
static int stronger(float va, int ia, float vb, int ib, int largest)
{
    if (va != vb) return largest ? va > vb : va < vb;
    return ia < ib;
}

int ana_topk(int *idx, float *val, const float *x, int n, int k, int largest)
{
    if (k > n) k = n;
    if (k <= 0) return 0;
    int m = 0; /* idx/val kept sorted strongest first; insertion is O(k) but k is small */
    for (int i = 0; i < n; i++) {
        float v = x[i];
        if (isnan(v)) continue;
        if (m == k && !stronger(v, i, val[k - 1], idx[k - 1], largest)) continue;
        int p = m < k ? m++ : k - 1;
        while (p > 0 && stronger(v, i, val[p - 1], idx[p - 1], largest)) {
            val[p] = val[p - 1];
            idx[p] = idx[p - 1];
            p--;
        }
        val[p] = v;
        idx[p] = i;
    }
    return m;
}
