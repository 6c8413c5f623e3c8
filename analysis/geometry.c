/* geometry.c - pairwise decoder angles (the superposition probe) and the random baseline. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "analysis/ana.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/rng.h"

#define GEOM_BLOCK 512 /* rows per sgemm block: 512 x n floats of scratch */

int ana_geometry(const float *W, int n, int d, int nbins, int64_t *hist, int *nearest,
                 float *nearest_cos)
{
    if (n < 1 || d < 1 || nbins < 1)
        return err_set(ERR_ARG, "geometry: bad sizes (n %d, d %d, bins %d)", n, d, nbins);
    float *U = mem_alloc((size_t)n * d * sizeof *U);
    unsigned char *ok = mem_alloc((size_t)n);
    int blk = n < GEOM_BLOCK ? n : GEOM_BLOCK;
    float *G = mem_alloc((size_t)blk * n * sizeof *G);
    if (!U || !ok || !G) {
        mem_free(U);
        mem_free(ok);
        mem_free(G);
        return err_set(ERR_NOMEM, "geometry: out of memory for %d x %d", n, d);
    }
    for (int i = 0; i < n; i++) {
        double ss = 0;
        const float *w = W + (size_t)i * d;
        for (int k = 0; k < d; k++) ss += (double)w[k] * w[k];
        ok[i] = ss > 0;
        float inv = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
        for (int k = 0; k < d; k++) U[(size_t)i * d + k] = w[k] * inv;
    }
    memset(hist, 0, (size_t)nbins * sizeof *hist);
    for (int i = 0; i < n; i++) {
        if (nearest) nearest[i] = -1;
        if (nearest_cos) nearest_cos[i] = 0;
    }
    const double to_bin = nbins / M_PI;
    for (int r0 = 0; r0 < n; r0 += blk) {
        int m = n - r0 < blk ? n - r0 : blk;
        /* G[m,n] = U[r0:r0+m] @ U^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, d, 1.0f, U + (size_t)r0 * d,
                    d, U, d, 0.0f, G, n);
        for (int a = 0; a < m; a++) {
            int i = r0 + a;
            if (!ok[i]) continue;
            const float *g = G + (size_t)a * n;
            int best = -1;
            float bestc = 0;
            for (int j = 0; j < n; j++) {
                if (j == i || !ok[j]) continue;
                float c = g[j];
                if (best < 0 || fabsf(c) > fabsf(bestc)) {
                    best = j;
                    bestc = c;
                }
                if (j > i && c == c) { /* each unordered pair once; NaN has no bin */
                    double cc = c > 1 ? 1 : c < -1 ? -1 : c;
                    int b = (int)(acos(cc) * to_bin);
                    hist[b >= nbins ? nbins - 1 : b]++;
                }
            }
            if (nearest) nearest[i] = best;
            /* two equal rows give 1 + 1 ulp in float: clamped (report refuses a cosine
               outside [-1, 1] as a tampered table, an audit) */
            if (nearest_cos) nearest_cos[i] = bestc > 1 ? 1 : bestc < -1 ? -1 : bestc;
        }
    }
    mem_free(U);
    mem_free(ok);
    mem_free(G);
    return OK;
}

static double uniform_open01(uint64_t *s) /* (0, 1), xorshift64* */
{
    return ((rng_xorshift64s(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

int ana_random_unit(float *W, int n, int d, uint64_t seed)
{
    if (n < 1 || d < 1) return err_set(ERR_ARG, "random directions: bad sizes (%d, %d)", n, d);
    uint64_t s = seed ? seed : 0x243f6a8885a308d3ull;
    for (int i = 0; i < n; i++) {
        float *w = W + (size_t)i * d;
        double ss = 0;
        for (int k = 0; k < d; k += 2) { /* Box-Muller: two normals per draw */
            double u1 = uniform_open01(&s), u2 = uniform_open01(&s);
            double r = sqrt(-2.0 * log(u1));
            w[k] = (float)(r * cos(2 * M_PI * u2));
            if (k + 1 < d) w[k + 1] = (float)(r * sin(2 * M_PI * u2));
        }
        for (int k = 0; k < d; k++) ss += (double)w[k] * w[k];
        float inv = (float)(1.0 / sqrt(ss));
        for (int k = 0; k < d; k++) w[k] *= inv;
    }
    return OK;
}
