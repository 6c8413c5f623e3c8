/* bench_analysis.c - the analysis kernels at the demo's sizes, as ratios to the machine.
 *
 * - geometry: all pairwise angles of 4096 decoder rows of width 768; ratio = bare sgemm time of
 *   the same Gram blocks / ana_geometry time (1.0: the angle histogram and nearest search are free).
 * - logit effects: 256 directions through W_U [50257, 768]; ratio = bare sgemm / ana_logit_effects.
 * - feature statistics: ana_feat_acc_add over 8192 tokens x 4096 latents with 32 active per token
 *   (TopK-like); reported as its time relative to the SAE encoder matmul of the same tokens
 *   (8192 x 768 x 4096 sgemm): the overhead analyze adds per token on top of encoding.
 * Best-of-N wall times; on a shared machine they are noisy. SAELITE_BENCH_QUICK=1: fewer reps.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/ana.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/par.h"
#include "common/progress.h"
#include "model/ops.h"

static float *randn(size_t n, uint64_t seed)
{
    float *x = mem_alloc(n * sizeof *x);
    if (!x) exit(1);
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
    return x;
}

int main(int argc, char **argv)
{
    /* OpenBLAS's own kernels where it does not know the CPU, as saelite runs (cli/main.c) */
    if (argc > 0 && op_blas_core_setenv()) par_restart(argv);
    int reps = getenv("SAELITE_BENCH_QUICK") ? 1 : 3;
    enum { N = 4096, D = 768, V = 50257, NL = 256, TOK = 8192, K = 32, BINS = 90 };

    /* geometry */
    float *W = randn((size_t)N * D, 1);
    float *G = mem_alloc((size_t)512 * N * sizeof *G);
    int64_t hist[BINS];
    int *near = mem_alloc(N * sizeof *near);
    float *ncos = mem_alloc(N * sizeof *ncos);
    double tg = 1e30, ts = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_seconds();
        if (ana_geometry(W, N, D, BINS, hist, near, ncos)) return 1;
        double t1 = now_seconds();
        for (int b = 0; b < N; b += 512)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 512, N, D, 1.0f, W + (size_t)b * D,
                        D, W, D, 0.0f, G, N);
        double t2 = now_seconds();
        if (t1 - t0 < tg) tg = t1 - t0;
        if (t2 - t1 < ts) ts = t2 - t1;
    }
    double gf = 2.0 * N * N * D / 1e9;
    printf("geometry %dx%d: %.3f s (sgemm alone %.3f s, %.1f GFLOP/s); ratio %.2f\n", N, D, tg, ts,
           gf / ts, ts / tg);

    /* logit effects */
    float *WU = randn((size_t)V * D, 2), *out = mem_alloc((size_t)NL * V * sizeof *out);
    float *gamma = randn(D, 3);
    double tl = 1e30, tls = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_seconds();
        if (ana_logit_effects(out, W, NL, D, NULL, D, gamma, WU, V)) return 1;
        double t1 = now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, NL, V, D, 1.0f, W, D, WU, D, 0.0f, out, V);
        double t2 = now_seconds();
        if (t1 - t0 < tl) tl = t1 - t0;
        if (t2 - t1 < tls) tls = t2 - t1;
    }
    printf("logit effects %d x %d -> %d: %.3f s (sgemm alone %.3f s); ratio %.2f\n", NL, D, V, tl,
           tls, tls / tl);

    /* per-feature statistics vs the encoder matmul */
    float *f = mem_calloc((size_t)TOK * N, sizeof *f), *x = randn((size_t)TOK * D, 4);
    float *enc = mem_alloc((size_t)TOK * N * sizeof *enc);
    uint64_t s = 99;
    for (int t = 0; t < TOK; t++)
        for (int k = 0; k < K; k++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            f[(size_t)t * N + s % N] = (float)(1 + (s >> 40) % 1000) / 100.0f;
        }
    double edges[41];
    ana_log_edges(edges, 40, 1e-3, 1e3);
    double ta = 1e30, te = 1e30;
    for (int r = 0; r < reps; r++) {
        ana_feat_acc *acc;
        if (ana_feat_acc_new(&acc, N, 20, 256, edges, 40, 7)) return 1;
        double t0 = now_seconds();
        for (int q = 0; q < TOK / 64; q++) ana_feat_acc_add(acc, f + (size_t)q * 64 * N, 64, q, 0);
        double t1 = now_seconds();
        ana_feat_acc_free(acc);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, TOK, N, D, 1.0f, x, D, W, N, 0.0f,
                    enc, N);
        double t2 = now_seconds();
        if (t1 - t0 < ta) ta = t1 - t0;
        if (t2 - t1 < te) te = t2 - t1;
    }
    printf("feature statistics %d tokens x %d latents (L0 %d): %.3f s = %.2f x the encoder sgemm "
           "(%.3f s); %.0f ktok/s\n", TOK, N, K, ta, ta / te, te, TOK / ta / 1e3);
    mem_free(W);
    mem_free(G);
    mem_free(near);
    mem_free(ncos);
    mem_free(WU);
    mem_free(out);
    mem_free(gamma);
    mem_free(f);
    mem_free(x);
    mem_free(enc);
    return 0;
}
