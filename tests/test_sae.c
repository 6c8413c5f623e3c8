/* test_sae.c - SAE kernels (against brute force), finite-difference gradient checks of all four
 * architectures, training on synthetic ground truth, checkpoint/resume bit-identity, SAELens
 * layout round trip, metrics. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/err.h"
#include "common/par.h"
#include "common/fileio.h"
#include "common/half.h"
#include "common/mem.h"
#include "common/npy.h"
#include "harness.h"
#include "tok_fixture.h"
#include "sae/sae.h"
#include "sae/sae_bf16.h"
#include "sae/sae_kernels.h"
#include "sae/sae_run.h"
#include "sae/sae_train.h"
#include "sae/metrics.h"
#include "sae/synth.h"

static void fill_normal(float *x, int64_t n, rng_state *r, float sd)
{
    for (int64_t i = 0; i < n; i++) x[i] = (float)(rng_normal_alt(r) * sd);
}

/* n standard normal values from their own seed */
static void seeded_normal(float *x, int64_t n, uint64_t seed)
{
    rng_state r;
    rng_seed(&r, seed);
    fill_normal(x, n, &r, 1);
}

/* ---- kernels ------------------------------------------------------------------------- */
static void test_topk(void)
{
    enum { B = 7, S = 50, K = 5 };
    rng_state r;
    rng_seed(&r, 1);
    float pre[B * S], val[B * K];
    int idx[B * K];
    fill_normal(pre, B * S, &r, 1);
    pre[3 * S + 10] = pre[3 * S + 11] = 9; /* tie: both must be kept (k=5) */
    sae_k_topk(idx, val, pre, B, S, K, NULL, 0);
    int bad = 0;
    for (int b = 0; b < B; b++) {
        /* brute force: an entry is in the top-k iff fewer than k entries beat it */
        for (int j = 0; j < S; j++) {
            int beat = 0;
            for (int i = 0; i < S; i++)
                beat += pre[b * S + i] > pre[b * S + j] || (pre[b * S + i] == pre[b * S + j] && i < j);
            int in = 0;
            for (int e = 0; e < K; e++) in |= idx[b * K + e] == j;
            if (in != (beat < K)) bad++;
        }
        for (int e = 0; e < K; e++) {
            float want = pre[b * S + idx[b * K + e]];
            if (val[b * K + e] != (want > 0 ? want : 0)) bad++;
        }
    }
    CHECK(bad == 0, "top-k selection differs from brute force in %d places", bad);
    /* candidate-restricted selection (AuxK over dead latents) */
    int cand[] = {1, 4, 9, 16, 25, 36, 49};
    sae_k_topk(idx, val, pre, B, S, 3, cand, 7);
    bad = 0;
    for (int b = 0; b < B; b++)
        for (int e = 0; e < 3; e++) {
            int j = idx[b * 3 + e], ok = 0;
            for (int c = 0; c < 7; c++) ok |= cand[c] == j;
            if (!ok) bad++;
        }
    CHECK(bad == 0, "candidate top-k picked a non-candidate");
}

/* Rows with too few blocks for the block bound (d_sae 1024 at k 32 and 64; a width that is a
 * multiple of 8, not 16) take the exact k-th largest as their bound: the same selection as brute
 * force (ties, all equal, signed zeros, subnormals, all negative, +-inf, rows whose keys all
 * share the bits the bisection decides first), the output in the
 * order of the heap over the entries that reach the row's k-th largest value, and a row with a
 * NaN exactly as the whole row's heap (the candidate form over every index gives that heap). */
static void test_topk_exact(void)
{
    const int shapes[3][2] = {{1024, 64}, {1024, 32}, {520, 20}};
    enum { B = 40 };
    for (int sh = 0; sh < 3; sh++) {
        int S = shapes[sh][0], K = shapes[sh][1];
        float *pre = malloc(sizeof(float) * B * S), *val = malloc(sizeof(float) * B * K);
        float *val2 = malloc(sizeof(float) * K);
        int *idx = malloc(sizeof(int) * B * K), *idx2 = malloc(sizeof(int) * K);
        int *cand = malloc(sizeof(int) * S);
        rng_state r;
        rng_seed(&r, 100 + sh);
        fill_normal(pre, (int64_t)B * S, &r, 1);
        for (int j = 0; j < S; j++) {
            pre[0 * S + j] = 0.25f;                                  /* all equal */
            pre[1 * S + j] = j % 3 ? 0.0f : -0.0f;                   /* signed zeros */
            if (j % 101 == 0) pre[1 * S + j] = -1e-40f;
            pre[2 * S + j] = 1e-42f * (float)(j % 10) - 5e-42f;      /* subnormals */
            pre[3 * S + j] = -1.0f - (float)(j % 37);                /* all negative */
            pre[4 * S + j] = (float)(j % 7);                         /* many ties at the bound */
            /* distinct, all with the same top key bits: the narrowing keeps the whole row */
            pre[8 * S + j] = 1.0f + (float)((j * 389) % S) * 0x1p-23f;
            pre[9 * S + j] = -1.0f - (float)(j % 64) * 0x1p-22f;   /* the same, negative, ties */
        }
        pre[5 * S + 3] = INFINITY;
        pre[5 * S + 9] = -INFINITY;
        pre[6 * S + 2] = NAN; /* NaN rows: the whole row's heap */
        pre[7 * S + S - 1] = NAN;
        sae_k_topk(idx, val, pre, B, S, K, NULL, 0);
        int bad = 0, order = 0, rows = 0, nan_same = 0;
        for (int b = 0; b < B; b++) {
            const float *p = pre + (int64_t)b * S;
            if (b == 6 || b == 7) {
                for (int j = 0; j < S; j++) cand[j] = j;
                sae_k_topk(idx2, val2, p, 1, S, K, cand, S);
                nan_same += !memcmp(idx2, idx + b * K, sizeof(int) * K) &&
                            !memcmp(val2, val + b * K, sizeof(float) * K);
                continue;
            }
            for (int e = 0; e < K; e++) {
                int j = idx[b * K + e], beat = 0;
                for (int i = 0; i < S; i++) beat += p[i] > p[j] || (p[i] == p[j] && i < j);
                if (beat >= K || val[b * K + e] != (p[j] > 0 ? p[j] : 0)) bad++;
                for (int f = 0; f < e; f++) bad += idx[b * K + f] == j;
            }
            float t = p[0]; /* the K-th largest: K entries reach it, fewer exceed it */
            for (int q = 0; q < S; q++) {
                int ge = 0, gt = 0;
                for (int u = 0; u < S; u++) ge += p[u] >= p[q], gt += p[u] > p[q];
                if (ge >= K && gt < K) t = p[q];
            }
            int n = 0;
            for (int j = 0; j < S; j++)
                if (p[j] >= t) cand[n++] = j;
            sae_k_topk(idx2, val2, p, 1, S, K, cand, n);
            order += !memcmp(idx2, idx + b * K, sizeof(int) * K) &&
                     !memcmp(val2, val + b * K, sizeof(float) * K);
            rows++;
        }
        CHECK(bad == 0, "top-k at S %d k %d differs from brute force in %d places", S, K, bad);
        CHECK(order == rows, "top-k at S %d k %d: %d of %d rows in the exact bound's heap order", S,
              K, order, rows);
        CHECK(nan_same == 2, "top-k at S %d k %d: rows with a NaN differ from the row's heap", S, K);
        free(pre), free(val), free(val2), free(idx), free(idx2), free(cand);
    }
}

/* Long rows take the block-bound path: the same selection as brute force: ties, a tail past the
 * last block, a NaN, and enough rows (B x S over 2^20) that the rows are split over threads, each
 * thread's selection running a row ahead of its scan. */
static void test_topk_long(void)
{
    enum { B = 300, S = 4096 + 7, K = 32 };
    rng_state r;
    rng_seed(&r, 11);
    float *pre = malloc(sizeof(float) * B * S), val[B * K];
    int idx[B * K];
    fill_normal(pre, (int64_t)B * S, &r, 1);
    for (int j = 0; j < S; j++) pre[1 * S + j] = 0.5f;           /* all equal: lowest indices */
    for (int j = 0; j < 40; j++) pre[2 * S + 100 + 50 * j] = 7;   /* 40 ties above the rest */
    pre[3 * S + S - 1] = 99;                                      /* the tail past the blocks */
    pre[4 * S + 5] = NAN;
    /* the other rows alternate between two sets of 40 blocks: a row scanned with its
       neighbour's bound and blocks would find 40 entries there and select the wrong ones */
    for (int b = 5; b < B - 4; b++)
        for (int j = 0; j < 40; j++) {
            float *p = pre + (int64_t)b * S + 64 * j;
            if (b % 2) p[35] = 10;
            else p[3] = 20 + 0.01f * j, p[35] = 15;
        }
    /* the last rows test the bound's float order (AVX-512: a bisection over integer keys):
       signed zeros, subnormals of both signs, blocks of NaN or -inf, all-negative */
    for (int j = 0; j < S; j++) {
        float *p = pre + (int64_t)(B - 4) * S;
        p[j] = j % 3 ? 0.0f : -0.0f;
        if (j % 101 == 0) p[j] = -1e-40f;
        p[S + j] = 1e-42f * (float)(j % 10) - 5e-42f;
        p[2 * S + j] = (j / SAE_K_TOPK_BLOCK) % 2 ? NAN : -INFINITY;
        if (j % 300 == 7) p[2 * S + j] = -(float)j;
        p[3 * S + j] = -1.0f - (float)(j % 37);
    }
    sae_k_topk(idx, val, pre, B, S, K, NULL, 0);
    int bad = 0;
    for (int b = 0; b < B; b++) {
        const float *p = pre + (int64_t)b * S;
        for (int e = 0; e < K; e++) {
            int j = idx[b * K + e], beat = 0;
            for (int i = 0; i < S; i++) beat += p[i] > p[j] || (p[i] == p[j] && i < j);
            if (beat >= K || val[b * K + e] != (p[j] > 0 ? p[j] : 0)) bad++;
            for (int f = 0; f < e; f++) bad += idx[b * K + f] == j;
        }
    }
    CHECK(bad == 0, "long-row top-k differs from brute force in %d places", bad);
    int has_tail = 0;
    for (int e = 0; e < K; e++) has_tail |= idx[3 * K + e] == S - 1;
    CHECK(has_tail, "entry past the last full block selected");
    /* the bound is exactly the k-th largest block maximum: the output, order included, is the
       heap over the entries that reach it, in index order (a lower bound would still select
       the right set, but in another order, and the decoder sums in that order) */
    enum { NB = S / SAE_K_TOPK_BLOCK };
    int *cand = malloc(sizeof(int) * S), idx2[K], order = 0, rows = 0;
    float bm[NB], val2[K];
    for (int b = 0; b < B; b++) {
        const float *p = pre + (int64_t)b * S;
        for (int q = 0; q < NB; q++) {
            bm[q] = -INFINITY;
            for (int i = 0; i < SAE_K_TOPK_BLOCK; i++)
                if (p[q * SAE_K_TOPK_BLOCK + i] > bm[q]) bm[q] = p[q * SAE_K_TOPK_BLOCK + i];
        }
        float t = bm[0];
        for (int q = 0; q < NB; q++) { /* the K-th largest: K maxima reach it, fewer exceed it */
            int ge = 0, gt = 0;
            for (int u = 0; u < NB; u++) ge += bm[u] >= bm[q], gt += bm[u] > bm[q];
            if (ge >= K && gt < K) t = bm[q];
        }
        int n = 0;
        for (int j = 0; j < S; j++)
            if (p[j] >= t) cand[n++] = j;
        if (n < K) continue; /* NaNs: the whole row's heap instead */
        sae_k_topk(idx2, val2, p, 1, S, K, cand, n);
        order += !memcmp(idx2, idx + b * K, sizeof idx2) && !memcmp(val2, val + b * K, sizeof val2);
        rows++;
    }
    CHECK(order == rows && rows >= B - 2, "long-row top-k order: %d of %d rows as the exact bound's "
          "candidate heap", order, rows);
    free(cand);
    free(pre);
}

/* The fused forward (block maxima inside the encoder's GEMM blocks, then the selection) picks
 * the same latents in the same order as encode + sae_k_topk: d_sae 4103 in four GEMM blocks
 * (three of 1056 and a shorter one, not a multiple of the 32-latent block), NaN and tied columns. */
static void test_topk_fused(void)
{
    enum { B = 6, S = 4096 + 7, D = 16, K = 32 };
    rng_state r;
    rng_seed(&r, 13);
    float *W = malloc(sizeof(float) * S * D), *x = malloc(sizeof(float) * B * D);
    float *pre = malloc(sizeof(float) * B * S), *pre2 = malloc(sizeof(float) * B * S);
    float *bm = malloc(sizeof(float) * B * (S / SAE_K_TOPK_BLOCK)), be[S], bd[D], xc[B * D];
    float val[B * K], val2[B * K];
    int idx[B * K], idx2[B * K];
    fill_normal(W, (int64_t)S * D, &r, 1);
    fill_normal(x, B * D, &r, 1);
    fill_normal(be, S, &r, 1);
    fill_normal(bd, D, &r, 1);
    be[5] = NAN;
    for (int j = 3000; j < 3040; j++) { /* 40 tied columns above the rest */
        memset(W + (int64_t)j * D, 0, sizeof(float) * D);
        be[j] = 30;
    }
    sae_k_encode(pre, xc, x, W, be, bd, B, D, S);
    sae_k_topk(idx, val, pre, B, S, K, NULL, 0);
    int fused = sae_k_encode_bmax(pre2, bm, xc, x, W, be, bd, B, D, S);
    sae_k_topk_bmax(idx2, val2, pre2, fused ? bm : NULL, B, S, K);
    CHECK(fused == (sae_k_precision() == SAE_PRECISION_FP32));
    CHECK(!memcmp(idx, idx2, sizeof idx) && !memcmp(val, val2, sizeof val),
          "fused top-k differs from encode + sae_k_topk");
    /* AuxK's selection in the same pass: the same as sae_k_topk over the candidates (the NaN
       column and tied ones among them; ka equal to the candidates: all of them, in heap order) */
    enum { NC = 50 };
    int cand[NC], aidx[B * NC], aidx2[B * NC], idx3[B * K];
    float aval[B * NC], aval2[B * NC], val3[B * K];
    for (int e = 0; e < NC; e++) cand[e] = e < 10 ? 1 + e * 2 : 2995 + e;
    for (int ka = 1; ka <= NC; ka += NC - 1) {
        sae_k_topk(aidx, aval, pre, B, S, ka, cand, NC);
        sae_k_topk_bmax_aux(idx3, val3, aidx2, aval2, pre2, fused ? bm : NULL, B, S, K, ka, cand,
                            NC);
        CHECK(!memcmp(idx, idx3, sizeof idx) && !memcmp(val, val3, sizeof val) &&
                  !memcmp(aidx, aidx2, sizeof(int) * B * ka) &&
                  !memcmp(aval, aval2, sizeof(float) * B * ka),
              "top-k with AuxK's selection (ka %d) differs from the two calls", ka);
    }
    /* at this size a row's pre-activations do not depend on the rows encoded with it (4 + 2
       rows give the bits of 6); at 1024 rows against 2048 OpenBLAS can round some differently,
       which is why the trainer's row chunks are fixed by the shape */
    sae_k_encode(pre2, xc, x, W, be, bd, 4, D, S);
    sae_k_encode(pre2 + 4 * (int64_t)S, xc + 4 * D, x + 4 * D, W, be, bd, 2, D, S);
    CHECK(!memcmp(pre, pre2, sizeof(float) * B * S), "encoder rows depend on their chunk");
    free(W), free(x), free(pre), free(pre2), free(bm);
}

/* One pass over the unit rows = remove_parallel + adam + normalize_rows, bit for bit (13 rows:
 * not a multiple of the row group; parameters before and after the rows). */
static void test_adam_unit_rows(void)
{
    enum { S = 13, D = 9, PRE = 7, POST = 5, N = PRE + S * D + POST };
    rng_state r;
    rng_seed(&r, 17);
    float p[2][N], g[2][N], m[2][N], v[2][N];
    fill_normal(p[0], N, &r, 1);
    fill_normal(g[0], N, &r, 1);
    fill_normal(m[0], N, &r, 0.1f);
    fill_normal(v[0], N, &r, 0.1f);
    for (int i = 0; i < N; i++) v[0][i] *= v[0][i];
    sae_k_normalize_rows(p[0] + PRE, S, D);
    memcpy(p[1], p[0], sizeof p[0]), memcpy(g[1], g[0], sizeof g[0]);
    memcpy(m[1], m[0], sizeof m[0]), memcpy(v[1], v[0], sizeof v[0]);
    sae_k_remove_parallel(g[0] + PRE, p[0] + PRE, S, D);
    sae_k_adam(p[0], g[0], m[0], v[0], N, 0.01f, 0.9f, 0.999f, 1e-8f, 3, 1.0f);
    sae_k_normalize_rows(p[0] + PRE, S, D);
    sae_k_adam_unit_rows(p[1], g[1], m[1], v[1], N, PRE, S, D, 0.01f, 0.9f, 0.999f, 1e-8f, 3, 1.0f);
    CHECK(!memcmp(p[0], p[1], sizeof p[0]) && !memcmp(m[0], m[1], sizeof m[0]) &&
              !memcmp(v[0], v[1], sizeof v[0]) && !memcmp(g[0], g[1], sizeof g[0]),
          "sae_k_adam_unit_rows differs from the three kernels");
    /* gradient clipping's factor folded into Adam: the bits of scaling g in a pass first */
    const float gs = 0.3717f;
    float q[4][N], h[4][N], mm[4][N], vv[4][N];
    for (int c = 0; c < 4; c++) {
        memcpy(q[c], p[1], sizeof q[c]), memcpy(mm[c], m[1], sizeof mm[c]);
        memcpy(vv[c], v[1], sizeof vv[c]);
        fill_normal(h[c], N, &r, 1);
        if (c & 1) memcpy(h[c], h[c - 1], sizeof h[c]);
    }
    for (int i = 0; i < N; i++) h[0][i] *= gs, h[2][i] *= gs;
    sae_k_adam(q[0], h[0], mm[0], vv[0], N, 0.01f, 0.9f, 0.999f, 1e-8f, 4, 1.0f);
    sae_k_adam(q[1], h[1], mm[1], vv[1], N, 0.01f, 0.9f, 0.999f, 1e-8f, 4, gs);
    sae_k_adam_unit_rows(q[2], h[2], mm[2], vv[2], N, PRE, S, D, 0.01f, 0.9f, 0.999f, 1e-8f, 4, 1.0f);
    sae_k_adam_unit_rows(q[3], h[3], mm[3], vv[3], N, PRE, S, D, 0.01f, 0.9f, 0.999f, 1e-8f, 4, gs);
    for (int c = 0; c < 4; c += 2)
        CHECK(!memcmp(q[c], q[c + 1], sizeof q[c]) && !memcmp(mm[c], mm[c + 1], sizeof mm[c]) &&
                  !memcmp(vv[c], vv[c + 1], sizeof vv[c]) && !memcmp(h[c], h[c + 1], sizeof h[c]),
              "Adam with gscale differs from a scaling pass first (%s)",
              c ? "unit rows" : "plain");
    CHECK(memcmp(q[0], p[1], sizeof q[0]) != 0, "the scaled Adam step changed nothing");
}

static void test_batchtopk(void)
{
    enum { B = 6, S = 40, K = 3 };
    rng_state r;
    rng_seed(&r, 2);
    float pre[B * S], scratch[B * S], val[B * K + B], thr;
    int idx[B * K + B];
    int64_t ptr[B + 1];
    fill_normal(pre, B * S, &r, 1);
    int64_t nnz = sae_k_batchtopk(ptr, idx, val, B * K + B, &thr, pre, B, S, B * K, scratch);
    CHECK(nnz == B * K, "nnz %lld", (long long)nnz);
    int above = 0;
    for (int i = 0; i < B * S; i++) above += pre[i] >= thr && pre[i] > 0;
    CHECK(above == B * K, "%d entries >= threshold %g", above, thr);
    CHECK(ptr[B] == nnz);
}

static void test_decode_sparse(void)
{
    enum { B = 4, S = 12, D = 9, K = 3 };
    rng_state r;
    rng_seed(&r, 3);
    float W[S * D], pre[B * S], val[B * K], xhat[B * D], want[B * D], bd[D];
    int idx[B * K];
    int64_t ptr[B + 1];
    fill_normal(W, S * D, &r, 1);
    fill_normal(pre, B * S, &r, 1);
    fill_normal(bd, D, &r, 1);
    sae_k_topk(idx, val, pre, B, S, K, NULL, 0);
    for (int b = 0; b <= B; b++) ptr[b] = b * K;
    sae_k_decode_sparse(xhat, ptr, idx, val, W, bd, B, D);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < D; i++) {
            double s = bd[i];
            for (int j = 0; j < S; j++) {
                float f = 0;
                for (int e = 0; e < K; e++)
                    if (idx[b * K + e] == j) f = val[b * K + e];
                s += f * W[j * D + i];
            }
            want[b * D + i] = (float)s;
        }
    CHECK_TENSOR(xhat, want, B * D, 1e-5, 1e-5, "sparse decode");
    /* backward: L = sum(R .* xhat) => dW[j] = sum_b f_bj R_b, dval = R_b . W_j */
    float R[B * D], dW[S * D], dWw[S * D], dval[B * K], dvalw[B * K];
    fill_normal(R, B * D, &r, 1);
    memset(dW, 0, sizeof dW);
    memset(dWw, 0, sizeof dWw);
    int64_t tptr[S + 1], tent[B * K];
    int ttok[B * K];
    sae_k_csr_transpose(tptr, tent, ttok, ptr, idx, B, S);
    CHECK(tptr[S] == B * K);
    sae_k_decode_sparse_backward(dW, dval, R, tptr, tent, ttok, val, W, S, D);
    for (int b = 0; b < B; b++)
        for (int e = 0; e < K; e++) {
            int j = idx[b * K + e];
            double dot = 0;
            for (int i = 0; i < D; i++) {
                dWw[j * D + i] += val[b * K + e] * R[b * D + i];
                dot += R[b * D + i] * W[j * D + i];
            }
            /* a ReLU-clipped entry (val 0) passes no gradient */
            dvalw[b * K + e] = val[b * K + e] > 0 ? (float)dot : 0;
        }
    CHECK_TENSOR(dW, dWw, S * D, 1e-5, 1e-5, "sparse decode dW");
    CHECK_TENSOR(dval, dvalw, B * K, 1e-5, 1e-5, "sparse decode dval");
}

/* The backward kernels (both scatters, tiles and walks) against their plain loops: dW_dec, dval
 * (16 partial sums, then the tail), dW_enc and db_enc, every element in token order. dbe0: db_enc's
 * starting values (a latent without entries adds 0 to its own). */
static void check_backward(const char *what, const int64_t *ptr, const int *idx, const float *val,
                           const float *dx, const float *y, const float *W, int B, int S, int D,
                           int K, const float *dbe0)
{
    int64_t *tptr = malloc(sizeof(int64_t) * (S + 1)), *tent = malloc(sizeof(int64_t) * B * K);
    int *ttok = malloc(sizeof(int) * B * K);
    float *dWd = calloc((size_t)S * D, sizeof(float)), *dWdw = calloc((size_t)S * D, sizeof(float));
    float *dWe = calloc((size_t)S * D, sizeof(float)), *dWew = calloc((size_t)S * D, sizeof(float));
    float *dval = malloc(sizeof(float) * B * K), *dvalw = malloc(sizeof(float) * B * K);
    float *dbe = malloc(sizeof(float) * S), *dbew = malloc(sizeof(float) * S);
    memcpy(dbe, dbe0, sizeof(float) * S);
    memcpy(dbew, dbe0, sizeof(float) * S);
    sae_k_csr_transpose(tptr, tent, ttok, ptr, idx, B, S);
    sae_k_decode_sparse_backward(dWd, dval, dx, tptr, tent, ttok, val, W, S, D);
    sae_k_encode_sparse_backward(dWe, dbe, dval, tptr, tent, ttok, y, S, D);
    for (int j = 0; j < S; j++) {
        float gsum = 0;
        for (int64_t q = tptr[j]; q < tptr[j + 1]; q++) {
            int64_t e = tent[q];
            const float *g = dx + (int64_t)ttok[q] * D, *w = W + (int64_t)j * D;
            const float *c = y + (int64_t)ttok[q] * D;
            if (val[e] == 0) {
                dvalw[e] = 0;
                continue;
            }
            float acc[16] = {0}, dot = 0;
            int i = 0;
            for (; i + 16 <= D; i += 16)
                for (int l = 0; l < 16; l++) acc[l] += g[i + l] * w[i + l];
            for (int l = 0; l < 16; l++) dot += acc[l];
            for (; i < D; i++) dot += g[i] * w[i];
            for (i = 0; i < D; i++) dWdw[(int64_t)j * D + i] += val[e] * g[i];
            dvalw[e] = dot;
            if (dot == 0) continue;
            for (i = 0; i < D; i++) dWew[(int64_t)j * D + i] += dot * c[i];
            gsum += dot;
        }
        dbew[j] += gsum;
    }
    CHECK(!memcmp(dWd, dWdw, sizeof(float) * S * D) && !memcmp(dval, dvalw, sizeof(float) * B * K),
          "%s: tiled decoder backward differs from the plain loops", what);
    CHECK(!memcmp(dWe, dWew, sizeof(float) * S * D) && !memcmp(dbe, dbew, sizeof(float) * S),
          "%s: tiled encoder backward differs from the plain loop", what);
    free(tptr), free(tent), free(ttok), free(dWd), free(dWdw), free(dWe), free(dWew), free(dval),
        free(dvalw), free(dbe), free(dbew);
}

/* The decoder's register tiles, the loss pass and the column sums against their plain loops:
 * the same bits (the loss's double sums to rounding), at a width with whole tiles, a 16-float
 * remainder and a scalar tail, and a batch large enough for two threads. */
static void test_decode_tiles_recon(void)
{
    enum { B = 2100, S = 64, D = 512 + 16 + 3, K = 8 };
    rng_state r;
    rng_seed(&r, 29);
    float *W = malloc(sizeof(float) * S * D), *y = malloc(sizeof(float) * B * D);
    float *xh = malloc(sizeof(float) * B * D), *want = malloc(sizeof(float) * B * D);
    float *dx = malloc(sizeof(float) * B * D), bd[D], val[B * K], gb[D], gbw[D];
    int *idx = malloc(sizeof(int) * B * K);
    int64_t *ptr = malloc(sizeof(int64_t) * (B + 1));
    fill_normal(W, S * D, &r, 1);
    fill_normal(y, (int64_t)B * D, &r, 1);
    fill_normal(bd, D, &r, 1);
    fill_normal(val, B * K, &r, 1);
    for (int e = 0; e < B * K; e++) {
        idx[e] = (int)rng_below(&r, S);
        if (e % 5 == 0) val[e] = 0; /* ReLU-clipped entries are skipped */
    }
    for (int b = 0; b <= B; b++) ptr[b] = (int64_t)b * K;
    for (int pass = 0; pass < 2; pass++) { /* with b_dec, then from zero */
        const float *bias = pass ? NULL : bd;
        sae_k_decode_sparse(xh, ptr, idx, val, W, bias, B, D);
        for (int b = 0; b < B; b++) {
            float *o = want + (int64_t)b * D;
            for (int i = 0; i < D; i++) o[i] = bias ? bias[i] : 0;
            for (int e = b * K; e < (b + 1) * K; e++)
                if (val[e] != 0)
                    for (int i = 0; i < D; i++) o[i] += val[e] * W[(int64_t)idx[e] * D + i];
        }
        CHECK(!memcmp(xh, want, sizeof(float) * B * D), "tiled decode differs from the plain loop "
              "(%s b_dec)", bias ? "with" : "without");
    }
    double sse, ss, col[D], colw[D], sw = 0, s2w = 0;
    for (int i = 0; i < D; i++) col[i] = colw[i] = 0.25 * i;
    sae_k_recon_error(dx, &sse, &ss, col, xh, y, 2.0f / B, B, D);
    int bad = 0;
    for (int64_t e = 0; e < (int64_t)B * D; e++) {
        float d = xh[e] - y[e];
        bad += dx[e] != 2.0f / B * d;
        sw += (double)d * d;
        s2w += (double)y[e] * y[e];
        colw[e % D] += y[e];
    }
    CHECK(bad == 0, "recon dx differs in %d places", bad);
    CHECK(!memcmp(col, colw, sizeof col), "recon column sums differ from rows in order");
    CHECK(fabs(sse - sw) <= 1e-12 * sw && fabs(ss - s2w) <= 1e-12 * s2w,
          "recon sums %.17g %.17g, serial %.17g %.17g", sse, ss, sw, s2w);
    for (int i = 0; i < D; i++) gb[i] = gbw[i] = 0.5f * (float)i;
    sae_k_colsum_add(gb, dx, B, D);
    for (int64_t e = 0; e < (int64_t)B * D; e++) gbw[e % D] += dx[e];
    CHECK(!memcmp(gb, gbw, sizeof gb), "colsum_add differs from rows in order");
    float dbe0[S] = {0};
    check_backward("random latents", ptr, idx, val, dx, y, W, B, S, D, K, dbe0);
    free(W), free(y), free(xh), free(want), free(dx), free(idx), free(ptr);
}

/* AuxK's pattern: a few "dead" latents, each selected for every token (some entries ReLU-clipped),
 * the other latents without entries, db_enc starting at -0 and other values: the blocked walk of
 * the scatters (ranges of dense latents) gives the plain loops' bits. */
static void test_backward_dense_latents(void)
{
    enum { B = 1500, S = 400, D = 256 + 16 + 5, K = 40 };
    rng_state r;
    rng_seed(&r, 37);
    float *W = malloc(sizeof(float) * S * D), *y = malloc(sizeof(float) * B * D);
    float *dx = malloc(sizeof(float) * B * D), *val = malloc(sizeof(float) * B * K), dbe0[S];
    int *idx = malloc(sizeof(int) * B * K), dead[K];
    int64_t *ptr = malloc(sizeof(int64_t) * (B + 1));
    fill_normal(W, (int64_t)S * D, &r, 1);
    fill_normal(y, (int64_t)B * D, &r, 1);
    fill_normal(dx, (int64_t)B * D, &r, 1);
    fill_normal(val, B * K, &r, 1);
    for (int j = 0; j < S; j++) dbe0[j] = j % 3 == 0 ? -0.0f : 0.1f * (float)j;
    for (int e = 0; e < K; e++) dead[e] = 7 + 9 * e + (e % 4); /* spread over the index range */
    for (int b = 0; b < B; b++) {
        ptr[b] = (int64_t)b * K;
        for (int e = 0; e < K; e++) { /* every dead latent in every row, in a row-dependent order */
            idx[b * K + e] = dead[(e * 7 + b) % K];
            if (val[b * K + e] < -0.5f) val[b * K + e] = 0;
        }
    }
    ptr[B] = (int64_t)B * K;
    check_backward("dense latents", ptr, idx, val, dx, y, W, B, S, D, K, dbe0);
    free(W), free(y), free(dx), free(val), free(idx), free(ptr);
}

/* The latent-major transpose, split over threads from 64k entries, against a brute-force
 * stable grouping: entries of each latent in token order. */
static void test_csr_transpose_threads(void)
{
    enum { B = 5001, S = 500, K = 32 };
    rng_state r;
    rng_seed(&r, 31);
    int64_t *ptr = malloc(sizeof(int64_t) * (B + 1)), *tptr = malloc(sizeof(int64_t) * (S + 1));
    int64_t *tent = malloc(sizeof(int64_t) * B * K);
    int *idx = malloc(sizeof(int) * B * K), *ttok = malloc(sizeof(int) * B * K);
    ptr[0] = 0;
    for (int b = 0; b < B; b++) { /* rows of 0..K entries, latents skewed to the low ones */
        int n = (int)rng_below(&r, K + 1);
        for (int e = 0; e < n; e++) {
            uint64_t u = rng_below(&r, S);
            idx[ptr[b] + e] = (int)(u * u / S);
        }
        ptr[b + 1] = ptr[b] + n;
    }
    CHECK(ptr[B] >= (1 << 16), "only %lld entries: the threaded path is not reached",
          (long long)ptr[B]);
    for (int fail = 0; fail < 2; fail++) {
    /* fail 1: no worker thread starts (par_fail_threads_after(0); the caller ran part 0 only,
       the other parts' offsets were left unwritten and the merge read them: garbage counts,
       writes out of bounds). On one thread par_run is never reached: skipped, said so. */
    if (fail && par_threads() < 2) {
        SKIP("csr transpose without its worker threads: par_threads() is 1 here");
        break;
    }
    memset(tent, 0xa5, sizeof(int64_t) * B * K);
    par_fail_threads_after(fail ? 0 : -1);
    sae_k_csr_transpose(tptr, tent, ttok, ptr, idx, B, S);
    par_fail_threads_after(-1);
    int bad = tptr[0] != 0 || tptr[S] != ptr[B];
    int64_t q = 0;
    for (int j = 0; j < S; j++) {
        bad += tptr[j] != q;
        for (int b = 0; b < B; b++)
            for (int64_t e = ptr[b]; e < ptr[b + 1]; e++)
                if (idx[e] == j) {
                    bad += q >= ptr[B] || tent[q] != e || ttok[q] != b;
                    q++;
                }
    }
    CHECK(bad == 0, "csr transpose%s differs from the stable grouping in %d places",
          fail ? " (a thread that could not start)" : "", bad);
    }
    free(ptr), free(tptr), free(tent), free(idx), free(ttok);
}

static void test_adam_and_norms(void)
{
    float p[3] = {1, 2, 3}, g[3] = {0.5f, -1, 0}, m[3] = {0}, v[3] = {0};
    sae_k_adam(p, g, m, v, 3, 0.1f, 0.9f, 0.999f, 1e-8f, 1, 1.0f);
    /* first Adam step moves by lr * sign(g) */
    CHECK_NEAR(p[0], 0.9, 1e-5);
    CHECK_NEAR(p[1], 2.1, 1e-5);
    CHECK_NEAR(p[2], 3.0, 1e-6);
    CHECK(g[0] == 0 && g[1] == 0, "Adam must zero the gradient");
    float W[2 * 3] = {3, 0, 4, 0, 0, 2}, dW[2 * 3] = {1, 1, 1, 1, 1, 1};
    sae_k_normalize_rows(W, 2, 3);
    CHECK_NEAR(W[0], 0.6, 1e-6);
    CHECK_NEAR(W[5], 1.0, 1e-6);
    sae_k_remove_parallel(dW, W, 2, 3);
    CHECK_NEAR(dW[0] * W[0] + dW[1] * W[1] + dW[2] * W[2], 0, 1e-6);
    CHECK_NEAR(dW[5], 0, 1e-6);
}

/* ---- finite-difference gradients of the trainer ---------------------------------------- */
static void zero_grad_tc(const sae_params *G, int S, int D, int Do)
{
    memset(G->W_encT, 0, sizeof(float) * S * D);
    memset(G->W_dec, 0, sizeof(float) * S * Do);
    memset(G->b_enc, 0, sizeof(float) * S);
    memset(G->b_dec, 0, sizeof(float) * Do);
    if (G->W_skip) memset(G->W_skip, 0, sizeof(float) * Do * D);
    if (G->log_threshold) memset(G->log_threshold, 0, sizeof(float) * S);
    if (G->r_mag) memset(G->r_mag, 0, sizeof(float) * S);
    if (G->b_mag) memset(G->b_mag, 0, sizeof(float) * S);
}

/* transcoders (tc != 0): d_out Dt, rows [x | y]; zero_grad below is for the SAE shapes */
enum { FD_DO = 5 };
static int fd_do;
static int fd_levels; /* matryoshka: SAE_MAT_SHARED or SAE_MAT_OWN (0: the default) */
static void zero_grad(const sae_params *G, int S, int D) { zero_grad_tc(G, S, D, fd_do ? fd_do : D); }

/* ReLU's and JumpReLU's sparse step (few active latents) against their dense step, which the
 * finite differences check: the same loss, L0 and gradients (JumpReLU's thresholds too) up to
 * the order of float sums; and with more active latents than the sparse form takes, the very
 * same bits (it gives way to the dense one). */
static void test_few_active(void)
{
    enum { D = 16, S = 256, B = 64, DT = 6 };
    for (int run = 0; run < 6; run++) {
        /* relu, jumprelu: SAE and transcoder; gated (no transcoder form): frozen and unfrozen */
        int tc = run % 2, jr = run / 2 == 1, gated = run / 2 == 2, unfrozen = gated && tc;
        if (gated) tc = 0;
        char label[64];
        snprintf(label, sizeof label, "%s %s", gated ? "gated" : jr ? "jumprelu" : "relu",
                 gated ? (unfrozen ? "unfrozen" : "frozen") : tc ? "transcoder" : "sae");
        const int Do = tc ? DT : D, W = tc ? D + DT : D;
        sae_train_config c;
        sae_train_defaults(&c);
        c.arch = gated ? SAE_GATED : jr ? SAE_JUMPRELU : SAE_RELU;
        c.transcoder = tc ? SAE_TRANSCODER : SAE_NOT_TRANSCODER;
        c.d_out = tc ? DT : 0;
        c.d_in = D;
        c.d_sae = S;
        c.batch = B;
        c.total_tokens = 100 * B;
        c.l1 = 0.3;
        c.l1_warmup_frac = 0;
        c.jr_bandwidth = 0.05; /* a window with entries on both sides of the thresholds */
        rng_state r;
        rng_seed(&r, 21);
        static float x[B * (D + DT)];
        fill_normal(x, (int64_t)B * W, &r, 2);
        sae_trainer *t;
        int rc = sae_trainer_new(&t, &c, x, B);
        CHECK(rc == OK, "%s", err_msg());
        if (rc) return;
        sae_params P, G;
        sae_trainer_params(t, &P, &G);
        for (int e = 0; e < S * Do; e++) P.W_dec[e] *= 1.0f + (e % 3);
        if (gated) {
            sae_trainer_test_unfreeze(t, unfrozen);
            for (int j = 0; j < S; j++) {
                P.r_mag[j] = (float)(rng_normal_alt(&r) * 0.3);
                P.b_mag[j] = (float)(rng_normal_alt(&r) * 0.3); /* some magnitudes <= 0 */
            }
        }
        static float g1[2 * S * D + 3 * S + D], g2[2 * S * D + 3 * S + D]; /* DT < D */
        float *groups[6] = {G.W_encT, G.W_dec, G.b_enc, G.b_dec, jr ? G.log_threshold : G.r_mag,
                            G.b_mag};
        int sizes[6] = {S * D, S * Do, S, Do, S, S}, ng = jr ? 5 : gated ? 6 : 4;
        for (int dense_enough = 0; dense_enough < 2; dense_enough++) {
            /* lower every bias until 1/64 .. 1/8 of the pre-activations are positive (or keep
               them all at +1: most positive) */
            sae_step_stats st1, st2;
            double shift = 0;
            for (int tries = 0; tries < 200; tries++, shift += 0.02) {
                for (int j = 0; j < S; j++) P.b_enc[j] = dense_enough ? 1.0f : (float)(-shift);
                sae_trainer_test_reference_steps(t, 1);
                zero_grad_tc(&G, S, D, Do);
                sae_trainer_loss_grad(t, x, &st1);
                /* JumpReLU's window entries count too */
                if (dense_enough || st1.l0 < S / (jr ? 16.0 : 8.0)) break;
            }
            double dens = st1.l0 / S;
            CHECK(dense_enough ? dens > 0.25 : dens > 1.0 / 64 && dens < 1.0 / 8, "%s: density %.4f",
                  label, dens);
            int off = 0;
            for (int q = 0; q < ng; q++) memcpy(g1 + off, groups[q], sizeof(float) * sizes[q]), off += sizes[q];
            sae_trainer_test_reference_steps(t, 0);
            zero_grad_tc(&G, S, D, Do);
            sae_trainer_loss_grad(t, x, &st2);
            off = 0;
            for (int q = 0; q < ng; q++) memcpy(g2 + off, groups[q], sizeof(float) * sizes[q]), off += sizes[q];
            double worst = 0, scale = 0;
            for (int e = 0; e < off; e++) scale = fmax(scale, fabs(g1[e]));
            for (int e = 0; e < off; e++) worst = fmax(worst, fabs(g1[e] - g2[e]) / scale);
            int lt_moved = 0; /* JumpReLU: entries in the window, so the thresholds get a gradient */
            for (int e = off - S; jr && e < off; e++) lt_moved += g1[e] != 0;
            CHECK(!jr || lt_moved > 0, "%s: no threshold gradient", label);
            if (!dense_enough)
                printf("%s at density %.4f: the sparse step's gradients within %.3g of the dense "
                       "step's\n", label, dens, worst);
            if (dense_enough)
                CHECK(!memcmp(g1, g2, sizeof(float) * off) && st1.loss == st2.loss,
                      "%s, dense: the same bits", label);
            else
                CHECK(worst < 1e-5 && fabs(st1.loss - st2.loss) < 1e-6 * fabs(st1.loss) &&
                          st1.l0 == st2.l0 && scale > 0 && memcmp(g1, g2, sizeof(float) * off),
                      "%s, sparse: gradients off by %.3g of their largest, loss %.9g vs %.9g (the "
                      "sparse form must have run: other bits)", label, worst, st1.loss, st2.loss);
        }
        sae_trainer_free(t);
    }
}

static void fd_check_tc(sae_arch arch, int tc, const char *label)
{
    enum { D = 8, S = 24, B = 10 };
    const int Do = tc ? FD_DO : D, W = tc ? D + FD_DO : D;
    fd_do = tc ? FD_DO : 0;
    sae_train_config c;
    sae_train_defaults(&c);
    c.arch = arch;
    c.transcoder = tc;
    c.d_out = tc ? FD_DO : 0;
    c.d_in = D;
    c.d_sae = S;
    c.k = 4;
    c.batch = B;
    c.total_tokens = 100 * B;
    c.aux_coef = 0; /* AuxK's target is detached: not a gradient of the total loss */
    c.l1 = arch == SAE_RELU ? 0.3 : 0.05;
    c.l1_warmup_frac = 0;
    c.jr_init_threshold = 0.05;
    /* the point the checks were chosen at (relu's default zero b_dec puts one W_enc probe's
       pre-activation within the difference step of its ReLU kink) */
    c.bdec_init = SAE_BDEC_MEDIAN;
    if (arch == SAE_MATRYOSHKA) {
        c.n_widths = 2;
        c.widths[0] = 8;
        c.widths[1] = 16;
        c.mat_levels = fd_levels;
    }
    rng_state r;
    rng_seed(&r, 7);
    float x[B * (D + FD_DO)];
    fill_normal(x, B * W, &r, 2);
    sae_trainer *t;
    int rc = sae_trainer_new(&t, &c, x, B);
    CHECK(rc == OK, "%s", err_msg());
    if (rc) return;
    sae_params P, G;
    sae_trainer_params(t, &P, &G);
    /* move away from the symmetric init so b_enc and decoder norms matter */
    for (int j = 0; j < S; j++) P.b_enc[j] = (float)(rng_normal_alt(&r) * 0.3);
    if (arch == SAE_RELU || arch == SAE_GATED)
        for (int e = 0; e < S * Do; e++) P.W_dec[e] *= 3.0f + (e % 5);
    if (arch == SAE_GATED)
        for (int j = 0; j < S; j++) {
            P.r_mag[j] = (float)(rng_normal_alt(&r) * 0.3);
            P.b_mag[j] = (float)(rng_normal_alt(&r) * 0.3);
        }
    /* a skip transcoder's W_skip starts at zero: move it so its gradient is exercised */
    if (P.W_skip)
        for (int e = 0; e < Do * D; e++) P.W_skip[e] = (float)(rng_normal_alt(&r) * 0.2);
    /* gated: the auxiliary loss's frozen decoder is no gradient of the total loss; the test
       checks the unfrozen gradients (the frozen ones are checked below) */
    if (arch == SAE_GATED) sae_trainer_test_unfreeze(t, 1);
    sae_step_stats st;
    sae_trainer_loss_grad(t, x, &st);
    double L0 = st.loss;
    static float ga[2 * S * D + 3 * S + D + FD_DO * D];
    float *groups[6] = {G.W_encT, G.W_dec, G.b_enc, G.b_dec, G.r_mag, G.b_mag};
    float *params[6] = {P.W_encT, P.W_dec, P.b_enc, P.b_dec, P.r_mag, P.b_mag};
    int sizes[6] = {S * D, S * Do, S, Do, S, S};
    const char *names[6] = {"W_enc", "W_dec", "b_enc", "b_dec", "r_mag", "b_mag"};
    int ng = arch == SAE_GATED ? 6 : 4;
    if (P.W_skip) {
        groups[4] = G.W_skip, params[4] = P.W_skip, sizes[4] = Do * D, names[4] = "W_skip";
        ng = 5;
    }
    int off = 0;
    for (int q = 0; q < ng; q++) {
        memcpy(ga + off, groups[q], sizeof(float) * sizes[q]);
        off += sizes[q];
    }
    off = 0;
    for (int q = 0; q < ng; q++) {
        int bad = 0, tried = 0;
        double worst = 0;
        for (int e = 0; e < sizes[q]; e += (q < 2 || sizes[q] > S ? 7 : 1)) {
            float keep = params[q][e];
            const float h = 1e-2f;
            double Lp, Lm;
            params[q][e] = keep + h;
            zero_grad(&G, S, D);
            sae_trainer_loss_grad(t, x, &st);
            Lp = st.loss;
            params[q][e] = keep - h;
            zero_grad(&G, S, D);
            sae_trainer_loss_grad(t, x, &st);
            Lm = st.loss;
            params[q][e] = keep;
            double fd = (Lp - Lm) / (2 * h), an = ga[off + e];
            double err = fabs(fd - an) / (1e-2 + fabs(fd) + fabs(an));
            /* a selection change or a ReLU/jump crossed inside [-h, h] makes the difference
               meaningless there; smooth losses give the same central difference at h and h/2 */
            double Lp2, Lm2;
            params[q][e] = keep + h / 2;
            zero_grad(&G, S, D);
            sae_trainer_loss_grad(t, x, &st);
            Lp2 = st.loss;
            params[q][e] = keep - h / 2;
            zero_grad(&G, S, D);
            sae_trainer_loss_grad(t, x, &st);
            Lm2 = st.loss;
            params[q][e] = keep;
            double fd2 = (Lp2 - Lm2) / h;
            if (fabs(fd2 - fd) > 0.003 * (1 + fabs(fd))) continue;
            tried++;
            if (err > worst) worst = err;
            if (err > 2e-2) { /* a kink just outside [-h/2, h/2]: a finer difference settles it */
                const float h3 = h / 16;
                params[q][e] = keep + h3;
                sae_trainer_loss_grad(t, x, &st);
                Lp2 = st.loss;
                params[q][e] = keep - h3;
                sae_trainer_loss_grad(t, x, &st);
                Lm2 = st.loss;
                params[q][e] = keep;
                double fd3 = (Lp2 - Lm2) / (2 * h3);
                if (fabs(fd3 - an) / (1e-2 + fabs(fd3) + fabs(an)) <= 2e-2) continue;
            }
            if (err > 2e-2) { bad++; fprintf(stderr, "  %s %s[%d]: fd %.6g analytic %.6g (L %.6g)\n", label, names[q], e, fd, an, L0); }
        }
        CHECK(bad == 0 && tried > 0, "%s %s: %d of %d finite-difference checks off (worst %.3g)",
              label, names[q], bad, tried, worst);
        off += sizes[q];
    }
    if (arch == SAE_GATED) {
        /* frozen: W_dec's gradient is that of the loss without the auxiliary term */
        sae_trainer_test_unfreeze(t, 0);
        zero_grad(&G, S, D);
        sae_trainer_loss_grad(t, x, &st);
        memcpy(ga, G.W_dec, sizeof(float) * S * D);
        int bad = 0;
        for (int e = 3; e < S * D; e += 11) {
            float keep = P.W_dec[e];
            const float h = 1e-2f;
            P.W_dec[e] = keep + h;
            sae_trainer_loss_grad(t, x, &st);
            double Lp = st.loss - st.aux_loss;
            P.W_dec[e] = keep - h;
            sae_trainer_loss_grad(t, x, &st);
            double Lm = st.loss - st.aux_loss;
            P.W_dec[e] = keep;
            double fd = (Lp - Lm) / (2 * h);
            if (fabs(fd - ga[e]) / (1e-2 + fabs(fd) + fabs(ga[e])) > 2e-2) bad++;
        }
        CHECK(bad == 0, "gated frozen W_dec: %d finite-difference checks off", bad);
    }
    zero_grad(&G, S, D);
    sae_trainer_free(t);
    fd_do = 0;
}

static void fd_check(sae_arch arch, const char *label) { fd_check_tc(arch, 0, label); }


/* ---- training ------------------------------------------------------------------------- */
static sae_train_config small_cfg(sae_arch arch)
{
    sae_train_config c;
    sae_train_defaults(&c);
    c.arch = arch;
    c.d_in = 64;
    c.d_sae = 256;
    c.k = 5;
    c.batch = 1024;
    c.total_tokens = 300000;
    c.lr = 0.002;
    return c;
}

static synth_config small_synth(void)
{
    synth_config sc;
    synth_defaults(&sc);
    sc.d = 64;
    sc.n_features = 128;
    sc.active = 5;
    sc.seed = 11;
    return sc;
}

/* The train loop of the trainer tests: x [16384, row] holds the stream's first rows. A new
 * trainer (or, with ckpt and stop_at < 0, the checkpoint resumed and the stream replayed) runs to
 * the end of its schedule, or to step stop_at > 0 where it checkpoints to ckpt and stops. */
static int train_loop(sae_trainer **t, const sae_train_config *c, sae_source *src, float *x,
                      int64_t stop_at, const char *ckpt)
{
    int rc;
    if (ckpt && stop_at < 0) {
        rc = sae_trainer_resume(t, ckpt);
        if (!rc) rc = sae_source_skip(src, sae_trainer_step_index(*t) * (int64_t)c->batch, c->batch);
    } else rc = sae_trainer_new(t, c, x, 16384);
    CHECK(rc == OK, "%s", err_msg());
    sae_step_stats st;
    while (!rc && sae_trainer_step_index(*t) < sae_trainer_total_steps(*t)) {
        src->next(src, x, c->batch);
        rc = sae_trainer_step(*t, x, &st);
        if (stop_at > 0 && sae_trainer_step_index(*t) == stop_at) {
            rc = sae_trainer_checkpoint(*t, ckpt);
            break;
        }
    }
    return rc;
}

/* Train c on the small synthetic set; returns the exported model, mmcs and rec vs the truth, and
   held-out metrics. */
static sae_model *train_synth(sae_train_config c, double *mmcs, double *rec,
                              sae_metrics_summary *ms, int64_t stop_at, const char *ckpt)
{
    synth_config sc = small_synth();
    sae_source *src;
    sae_synth *g;
    if (sae_source_synth(&src, &sc) || sae_synth_new(&g, &sc)) return NULL;
    float *x = mem_alloc(sizeof(float) * 16384 * c.d_in);
    src->next(src, x, 16384);
    sae_trainer *t = NULL;
    int rc = train_loop(&t, &c, src, x, stop_at, ckpt);
    CHECK(rc == OK, "%s", err_msg());
    sae_model *m = NULL;
    if (!rc) rc = sae_trainer_export(t, NULL, &m);
    if (m && mmcs) sae_mmcs(sae_synth_directions(g), sc.n_features, m->W_dec, c.d_sae, c.d_in, 0.9,
                            mmcs, rec, NULL);
    if (m && ms) {
        sae_metrics acc;
        sae_metrics_init(&acc, c.d_in, c.d_sae);
        sae_synth_sample(g, x, 4096, NULL); /* unseen samples */
        sae_metrics_eval(&acc, m, x, 4096, NULL, NULL);
        sae_metrics_summarize(&acc, ms);
        sae_metrics_free(&acc);
    }
    mem_free(x);
    sae_trainer_free(t);
    sae_synth_free(g);
    sae_source_close(src);
    return m;
}

static void test_ground_truth_small(void)
{
    double mm = 0, rec = 0;
    sae_metrics_summary ms;
    sae_model *m = train_synth(small_cfg(SAE_TOPK), &mm, &rec, &ms, 0, NULL);
    CHECK(m != NULL);
    CHECK(mm >= 0.95 && rec >= 0.9, "topk small ground truth: MMCS %.4f, recovered %.3f", mm, rec);
    CHECK(ms.ev > 0.85 && ms.l0 <= 5.0 && ms.l0 > 3, "topk: ev %.3f L0 %.2f", ms.ev, ms.l0);
    fprintf(stderr, "topk small ground truth: MMCS %.4f recovered %.3f ev %.3f\n", mm, rec, ms.ev);
    sae_free(m);
}

static void test_archs_train(void)
{
    sae_arch archs[5] = {SAE_RELU, SAE_BATCHTOPK, SAE_JUMPRELU, SAE_GATED, SAE_MATRYOSHKA};
    const char *names[5] = {"relu", "batchtopk", "jumprelu", "gated", "matryoshka"};
    for (int a = 0; a < 5; a++) {
        sae_train_config c = small_cfg(archs[a]);
        if (archs[a] == SAE_JUMPRELU) c.total_tokens = 600000;
        if (archs[a] == SAE_GATED) { /* the gate learns its sparsity through the penalty */
            c.total_tokens = 600000;
            c.lr = 0.005;
            c.l1 = 4;
        }
        double mm = 0, rec = 0;
        sae_metrics_summary ms;
        sae_model *m = train_synth(c, &mm, &rec, &ms, 0, NULL);
        CHECK(m != NULL);
        if (!m) continue;
        fprintf(stderr, "%s: MMCS %.3f recovered %.3f ev %.3f L0 %.2f\n", names[a], mm, rec, ms.ev,
                ms.l0);
        CHECK(ms.ev > (archs[a] == SAE_RELU || archs[a] == SAE_GATED ? 0.6 : 0.7) && ms.l0 > 1 &&
                  ms.l0 < 20 && mm > 0.6,
              "%s trains badly: ev %.3f L0 %.2f MMCS %.3f", names[a], ms.ev, ms.l0, mm);
        /* unit decoder rows: MMCS 0.94, EV 0.91, L0 5.5 here; with relu's unconstrained 0.1 rows
           (shrinking, as the frozen auxiliary decoder does not hold them) these settings gave
           MMCS 0.72, EV 0.92, L0 50 */
        if (archs[a] == SAE_GATED)
            CHECK(mm > 0.85 && ms.ev > 0.8, "gated: MMCS %.3f ev %.3f", mm, ms.ev);
        /* issue 22's relu and jumprelu defaults (clipping, lr, zero b_dec, jumprelu beta1 0):
           relu MMCS 0.929, jumprelu 0.992 here */
        if (archs[a] == SAE_RELU) CHECK(mm > 0.88, "relu: MMCS %.3f", mm);
        if (archs[a] == SAE_JUMPRELU) CHECK(mm > 0.95 && ms.ev > 0.85, "jumprelu: MMCS %.3f ev %.3f", mm, ms.ev);
        sae_free(m);
    }
}

/* The default lr: 3.75e-4 / sqrt(d_sae / 16384) for every architecture, and for relu never below
 * the rule's 1.5e-3 at 1024 latents (issue 22); a given lr is kept as given. */
/* a transcoder's [x | y] rows, grown in place: each row x then y, from all n rows or a prefix */
static void test_pairs_join(void)
{
    enum { N = 7, D = 3, DO = 2 };
    for (int n = N; n >= 5; n -= 2) { /* n < N: a prefix (sae-eval --max-tokens) */
        float *x = mem_alloc(sizeof(float) * N * D), y[N * DO];
        for (int i = 0; i < N * D; i++) x[i] = (float)(100 + i);
        for (int i = 0; i < N * DO; i++) y[i] = (float)(-1 - i);
        CHECK(sae_pairs_join(&x, D, y, DO, n) == OK);
        int bad = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < D + DO; j++)
                bad += x[i * (D + DO) + j] != (j < D ? 100 + i * D + j : -1 - (i * DO + j - D));
        CHECK(bad == 0, "pairs join (n %d): %d entries out of place", n, bad);
        mem_free(x);
    }
    float *x = mem_alloc(sizeof(float) * D), y[DO] = {0};
    x[0] = 5;
    mem_fail_at(1);
    int rc = sae_pairs_join(&x, D, y, DO, 1);
    mem_fail_at(0);
    CHECK(rc == ERR_NOMEM && x[0] == 5, "pairs join out of memory: rc %d, the rows kept", rc);
    mem_free(x);
}

static void test_lr_default(void)
{
    enum { D = 8, B = 16, N = 64 };
    static float x[N * D];
    seeded_normal(x, N * D, 5);
    const int widths[4] = {512, 1024, 2048, 4096};
    const double topk_lr[4] = {2.1213203435596424e-3, 1.5e-3, 1.0606601717798212e-3, 7.5e-4};
    const double relu_lr[4] = {2.1213203435596424e-3, 1.5e-3, 1.5e-3, 1.5e-3};
    for (int w = 0; w < 4; w++)
        for (int a = 0; a < 3; a++) {
            sae_train_config c;
            sae_train_defaults(&c);
            c.arch = a == 0 ? SAE_TOPK : a == 1 ? SAE_RELU : SAE_JUMPRELU;
            c.d_in = D;
            c.d_sae = widths[w];
            c.k = 4;
            c.batch = B;
            c.total_tokens = 4 * B;
            c.lr = a == 2 && w == 3 ? 2.5e-4 : 0; /* a given lr below the floor stays */
            sae_trainer *t = NULL;
            CHECK(sae_trainer_new(&t, &c, x, N) == 0, "trainer d_sae %d: %s", widths[w], err_msg());
            if (!t) continue;
            double want = a == 1 ? relu_lr[w] : a == 2 && w == 3 ? 2.5e-4 : topk_lr[w];
            double got = sae_trainer_cfg(t)->lr;
            CHECK(fabs(got - want) <= 1e-12 * want, "%s d_sae %d: lr %.9g, want %.9g",
                  sae_arch_name(c.arch), widths[w], got, want);
            sae_trainer_free(t);
        }
}

/* Gradient-norm clipping: the reported norm is the global norm of the gradient Adam sees
 * (computed here from sae_trainer_loss_grad, unit-norm rows without their parallel part), the
 * step scales the gradient by clip / norm (checked where Adam is linear in it: eps 1e3 makes the
 * first step lr g / (|g| + eps)), and a clip above the norm changes no bit. */
static void test_grad_clip(void)
{
    enum { D = 16, S = 32, B = 64 };
    static float x[B * D];
    seeded_normal(x, B * D, 11);
    sae_arch archs[2] = {SAE_RELU, SAE_JUMPRELU};
    for (int a = 0; a < 2; a++) {
        sae_train_config c;
        sae_train_defaults(&c);
        c.arch = archs[a];
        c.d_in = D;
        c.d_sae = S;
        c.batch = B;
        c.total_tokens = 100 * B;
        c.lr = 10; /* a step well above the weights' ulp */
        c.warmup_frac = 0;
        c.decay_frac = 0;
        c.l1_warmup_frac = 0;
        c.adam_eps = 1e3;
        c.grad_clip = -1;
        sae_trainer *t0, *t1, *t2;
        int rc = sae_trainer_new(&t0, &c, x, B);
        CHECK(rc == OK, "%s", err_msg());
        if (rc) return;
        CHECK(sae_trainer_cfg(t0)->grad_clip < 0, "grad_clip -1 should stay off");
        sae_params P, G;
        sae_trainer_params(t0, &P, &G);
        sae_step_stats st;
        sae_trainer_loss_grad(t0, x, &st);
        double nn = 0;
        for (int j = 0; j < S; j++) {
            double gw = 0, ww = 0, gg = 0;
            for (int i = 0; i < D; i++) {
                double g = G.W_dec[j * D + i], w = P.W_dec[j * D + i];
                gg += g * g;
                gw += g * w;
                ww += w * w;
            }
            nn += archs[a] == SAE_JUMPRELU ? gg - gw * gw / ww : gg;
            nn += (double)G.b_enc[j] * G.b_enc[j];
            if (G.log_threshold) nn += (double)G.log_threshold[j] * G.log_threshold[j];
        }
        for (int e = 0; e < S * D; e++) nn += (double)G.W_encT[e] * G.W_encT[e];
        for (int i = 0; i < D; i++) nn += (double)G.b_dec[i] * G.b_dec[i];
        double norm = sqrt(nn);
        static float p0[2 * S * D + 2 * S + D], ga[2 * S * D + 2 * S + D];
        memcpy(p0, P.W_encT, sizeof(float) * S * D);
        memcpy(ga, G.W_encT, sizeof(float) * S * D);
        /* an unclipped step, a clipped one (clip = norm / 4) and one whose clip is not reached,
           each from a fresh trainer (loss_grad left its gradient in t0's buffer) */
        sae_trainer_free(t0);
        rc = sae_trainer_new(&t0, &c, x, B);
        CHECK(rc == OK, "%s", err_msg());
        if (rc) return;
        sae_trainer_step(t0, x, &st);
        c.grad_clip = norm / 4;
        rc = sae_trainer_new(&t1, &c, x, B);
        c.grad_clip = norm * 1.01;
        if (!rc) rc = sae_trainer_new(&t2, &c, x, B);
        CHECK(rc == OK, "%s", err_msg());
        if (rc) {
            sae_trainer_free(t0);
            return;
        }
        sae_step_stats s1, s2;
        sae_trainer_step(t1, x, &s1);
        sae_trainer_step(t2, x, &s2);
        CHECK(fabs(s1.grad_norm - norm) <= 1e-9 * norm && s1.clipped,
              "%s: step's gradient norm %.12g (clipped %d), direct %.12g", sae_arch_name(archs[a]),
              s1.grad_norm, s1.clipped, norm);
        CHECK(!s2.clipped && fabs(s2.grad_norm - norm) <= 1e-9 * norm, "%s: clip above the norm",
              sae_arch_name(archs[a]));
        sae_params P0, P1, P2;
        sae_trainer_params(t0, &P0, NULL);
        sae_trainer_params(t1, &P1, NULL);
        sae_trainer_params(t2, &P2, NULL);
        CHECK(!memcmp(P0.W_encT, P2.W_encT, sizeof(float) * S * D) &&
                  !memcmp(P0.W_dec, P2.W_dec, sizeof(float) * S * D) &&
                  !memcmp(P0.b_enc, P2.b_enc, sizeof(float) * S),
              "%s: a clip above the norm changed the step", sae_arch_name(archs[a]));
        /* W_enc's step, the same element-wise rule in every architecture */
        double f = (norm / 4) / (norm + 1e-6), worst = 0, big = 0;
        for (int e = 0; e < S * D; e++) {
            double d0 = P0.W_encT[e] - p0[e], d1 = P1.W_encT[e] - p0[e];
            double g = ga[e] * f, want = -10 * g / (fabs(g) + 1e3);
            worst = fmax(worst, fabs(d1 - want));
            big = fmax(big, fabs(d0));
        }
        CHECK(big > 0 && worst <= 1e-3 * big * f, "%s: clipped W_enc step off by %.3g (step %.3g)",
              sae_arch_name(archs[a]), worst, big);
        sae_trainer_free(t0);
        sae_trainer_free(t1);
        sae_trainer_free(t2);
    }
}

static int same_model(const sae_model *a, const sae_model *b)
{
    int64_t SD = (int64_t)a->cfg.d_in * a->cfg.d_sae, Do = sae_out_dim(&a->cfg);
    return sae_out_dim(&b->cfg) == Do && !memcmp(a->W_enc, b->W_enc, SD * 4) &&
           !memcmp(a->W_dec, b->W_dec, Do * a->cfg.d_sae * 4) &&
           !memcmp(a->b_enc, b->b_enc, a->cfg.d_sae * 4) &&
           !memcmp(a->b_dec, b->b_dec, Do * 4) &&
           (!a->threshold || !memcmp(a->threshold, b->threshold, a->cfg.d_sae * 4)) &&
           !a->b_mag == !b->b_mag && (!a->b_mag || !memcmp(a->b_mag, b->b_mag, a->cfg.d_sae * 4)) &&
           !a->r_mag == !b->r_mag && (!a->r_mag || !memcmp(a->r_mag, b->r_mag, a->cfg.d_sae * 4));
}

static void test_resume_bit_identical(void)
{
    const char *ckpt = "build/tests/test_sae_ckpt.bin";
    sae_arch archs[4] = {SAE_TOPK, SAE_BATCHTOPK, SAE_MATRYOSHKA, SAE_GATED};
    for (int a = 0; a < 4; a++) {
        sae_train_config c = small_cfg(archs[a]);
        c.total_tokens = 60 * 1024;
        c.dead_window = 4096; /* so AuxK is active during the test */
        sae_model *full = train_synth(c, NULL, NULL, NULL, 0, NULL);
        sae_model *part = train_synth(c, NULL, NULL, NULL, 23, ckpt);
        sae_model *resumed = train_synth(c, NULL, NULL, NULL, -1, ckpt);
        CHECK(full && part && resumed);
        if (full && resumed) {
            CHECK(same_model(full, resumed), "%s: resumed run differs from the uninterrupted one",
                  sae_arch_name(archs[a]));
            CHECK(!same_model(full, part), "interrupted model should differ");
        }
        sae_free(full);
        sae_free(part);
        sae_free(resumed);
    }
    unlink(ckpt);
}

/* Folding: the exported raw-unit model reconstructs x/scale-consistently with the trainer. */
/* sae_trainer_loss_grad before a step must not move BatchTopK's running threshold: it counted
   that batch twice, so the exported threshold depended on who looked at the gradients (audit). */
static void test_batchtopk_threshold_once(void)
{
    sae_train_config c = small_cfg(SAE_BATCHTOPK);
    c.total_tokens = 8 * 1024;
    synth_config sc = small_synth();
    sae_source *src;
    sae_source_synth(&src, &sc);
    float *x = mem_alloc(sizeof(float) * 1024 * 64);
    src->next(src, x, 1024);
    sae_trainer *a, *b;
    sae_trainer_new(&a, &c, x, 1024);
    sae_trainer_new(&b, &c, x, 1024);
    sae_step_stats st;
    for (int s = 0; s < 6; s++) {
        src->next(src, x, 1024);
        for (int e = 0; e < 1024 * 64; e++) x[e] *= 1.0f + 0.2f * (float)(s % 3); /* moving thresholds */
        sae_trainer_loss_grad(a, x, &st);
        sae_params P, G;
        sae_trainer_params(a, &P, &G);
        zero_grad(&G, 256, 64); /* the step accumulates into the gradient buffers */
        sae_trainer_step(a, x, &st);
        sae_trainer_step(b, x, &st);
    }
    sae_model *ma, *mb;
    sae_trainer_export(a, NULL, &ma);
    sae_trainer_export(b, NULL, &mb);
    CHECK(ma->threshold && mb->threshold && ma->threshold[0] == mb->threshold[0],
          "batchtopk threshold %g after loss_grad + step, %g after step alone",
          ma->threshold ? ma->threshold[0] : -1.0, mb->threshold ? mb->threshold[0] : -1.0);
    sae_free(ma);
    sae_free(mb);
    sae_trainer_free(a);
    sae_trainer_free(b);
    sae_source_close(src);
    mem_free(x);
}

static void test_export_fold(void)
{
    /* the last: a batchtopk skip transcoder, rows [x | y] of 16 + 16 floats */
    sae_arch archs[7] = {SAE_RELU, SAE_TOPK, SAE_BATCHTOPK, SAE_JUMPRELU, SAE_GATED, SAE_MATRYOSHKA,
                         SAE_BATCHTOPK};
    for (int a = 0; a < 6; a++) {
        sae_train_config c = small_cfg(archs[a]);
        c.total_tokens = 20 * 1024;
        c.aux_coef = 0;
        synth_config sc = small_synth();
        sae_source *src;
        sae_source_synth(&src, &sc);
        float *x = mem_alloc(sizeof(float) * 1024 * 64);
        src->next(src, x, 1024);
        sae_trainer *t;
        sae_trainer_new(&t, &c, x, 1024);
        sae_step_stats st;
        for (int s = 0; s < 15; s++) {
            src->next(src, x, 1024);
            sae_trainer_step(t, x, &st);
        }
        sae_params P, G;
        sae_trainer_params(t, &P, &G);
        if (archs[a] == SAE_RELU || archs[a] == SAE_GATED) /* unequal decoder norms exercise the norm folding */
            for (int e = 0; e < 256 * 64; e++) P.W_dec[e] *= 1.0f + (e / 64) % 3;
        sae_trainer_loss_grad(t, x, &st);
        memset(G.W_encT, 0, sizeof(float) * 256 * 64); /* keep gradients zero for hygiene */
        memset(G.W_dec, 0, sizeof(float) * 256 * 64);
        memset(G.b_enc, 0, sizeof(float) * 256);
        memset(G.b_dec, 0, sizeof(float) * 64);
        if (G.log_threshold) memset(G.log_threshold, 0, sizeof(float) * 256);
        if (G.r_mag) memset(G.r_mag, 0, sizeof(float) * 256);
        if (G.b_mag) memset(G.b_mag, 0, sizeof(float) * 256);
        sae_model *m;
        sae_trainer_export(t, NULL, &m);
        float *f = mem_alloc(sizeof(float) * 1024 * 256), *xh = mem_alloc(sizeof(float) * 1024 * 64);
        sae_encode(m, x, 1024, f);
        sae_decode(m, f, 1024, xh);
        double sse = 0, s2 = sae_trainer_scale(t) * sae_trainer_scale(t);
        for (int e = 0; e < 1024 * 64; e++) sse += (double)(x[e] - xh[e]) * (x[e] - xh[e]);
        double mse_raw = sse * s2 / (1024.0 * 64);
        if (archs[a] == SAE_BATCHTOPK || archs[a] == SAE_MATRYOSHKA) /* inference uses the running threshold, not the batch's */
            CHECK(fabs(mse_raw - st.mse) < 0.5 * st.mse, "%s fold: %g vs %g",
                  sae_arch_name(archs[a]), mse_raw, st.mse);
        else
            CHECK(fabs(mse_raw - st.mse) < 1e-3 * st.mse + 1e-6, "%s fold: exported mse %g, trainer %g",
                  sae_arch_name(archs[a]), mse_raw, st.mse);
        for (int j = 0; j < 256; j++) {
            double nn = 0;
            for (int i = 0; i < 64; i++) nn += m->W_dec[j * 64 + i] * m->W_dec[j * 64 + i];
            if (fabs(nn - 1) > 1e-4) {
                CHECK(0, "%s: exported decoder row %d has norm^2 %g", sae_arch_name(archs[a]), j, nn);
                break;
            }
        }
        /* SAELens layout round trip */
        char dir[64];
        snprintf(dir, sizeof dir, "build/tests/test_sae_rt_%d", a);
        float dens[256];
        for (int j = 0; j < 256; j++) dens[j] = -(float)j / 100;
        int rc = sae_save_ex(m, dir, "{\"note\":\"test\"}", dens);
        CHECK(rc == OK, "%s", err_msg());
        sae_model *l = NULL;
        rc = sae_load(&l, dir);
        CHECK(rc == OK, "%s", err_msg());
        if (l) {
            CHECK(same_model(m, l), "%s: weights differ after save/load", sae_arch_name(archs[a]));
            sae_arch want = archs[a] == SAE_BATCHTOPK ? SAE_JUMPRELU : archs[a];
            CHECK(l->cfg.arch == want && l->cfg.d_in == 64 && l->cfg.d_sae == 256 &&
                      l->cfg.k == (want == SAE_TOPK ? 5 : 0),
                  "cfg after load: %s k %d", sae_arch_name(l->cfg.arch), l->cfg.k);
            CHECK(l->cfg.n_widths == m->cfg.n_widths &&
                      !memcmp(l->cfg.widths, m->cfg.widths, sizeof l->cfg.widths),
                  "%s: widths after load", sae_arch_name(archs[a]));
            if (want == SAE_MATRYOSHKA)
                CHECK(l->cfg.n_widths == 4 && l->cfg.widths[0] == 32 && l->cfg.widths[3] == 256,
                      "matryoshka default widths: %d levels, first %d", l->cfg.n_widths,
                      l->cfg.widths[0]);
            float *f2 = mem_alloc(sizeof(float) * 1024 * 256);
            sae_encode(l, x, 1024, f2);
            CHECK(!memcmp(f, f2, sizeof(float) * 1024 * 256), "%s: loaded SAE encodes differently",
                  sae_arch_name(archs[a]));
            mem_free(f2);
            float *sp = NULL;
            CHECK(sae_load_sparsity(dir, 256, &sp) == OK && sp && sp[7] == dens[7]);
            mem_free(sp);
        }
        sae_free(l);
        mem_free(f);
        mem_free(xh);
        sae_free(m);
        sae_trainer_free(t);
        sae_source_close(src);
        mem_free(x);
    }
}

/* cfg.json of build/tests/test_sae_bad is standard d_in 4, d_sae 8 plus `extra`: refused with
 * a message holding want */
static void cfg_refused(const char *extra, const char *want)
{
    sae_model *m = NULL;
    FILE *fp = fopen("build/tests/test_sae_bad/cfg.json", "w");
    if (!fp) {
        CHECK(0, "cannot write cfg.json");
        return;
    }
    fprintf(fp, "{\"architecture\":\"standard\",\"d_in\":4,\"d_sae\":8,%s}", extra);
    fclose(fp);
    CHECK(sae_load(&m, "build/tests/test_sae_bad") == ERR_FORMAT && strstr(err_msg(), want),
          "%s: %s", extra, err_msg());
    sae_free(m);
}

static void test_load_errors(void)
{
    const char *dir = "build/tests/test_sae_bad";
    mkdir(dir, 0755);
    FILE *fp = fopen("build/tests/test_sae_bad/cfg.json", "w");
    fputs("{\"architecture\":\"topk\",\"d_in\":4,\"d_sae\":8}", fp);
    fclose(fp);
    sae_model *m = NULL;
    CHECK(sae_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "'k'"), "%s", err_msg());
    fp = fopen("build/tests/test_sae_bad/cfg.json", "w");
    fputs("{\"architecture\":\"standard\",\"d_in\":4,\"d_sae\":8,"
          "\"normalize_activations\":\"expected_average_only_in\"}", fp);
    fclose(fp);
    CHECK(sae_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "normalize_activations") &&
              strstr(err_msg(), "scaling factor is not in the file"), "%s", err_msg());
    /* a per-token mode cannot be folded into the weights: the hint said to (an audit) */
    fp = fopen("build/tests/test_sae_bad/cfg.json", "w");
    fputs("{\"architecture\":\"standard\",\"d_in\":4,\"d_sae\":8,"
          "\"normalize_activations\":\"layer_norm\"}", fp);
    fclose(fp);
    CHECK(sae_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "per-token normalisation") &&
              !strstr(err_msg(), "fold"), "%s", err_msg());
    fp = fopen("build/tests/test_sae_bad/cfg.json", "w");
    fputs("{\"architecture\":\"standard\",\"d_in\":4,\"d_sae\":8}", fp);
    fclose(fp);
    CHECK(sae_load(&m, dir) != OK && strstr(err_msg(), "sae_weights.safetensors"), "%s", err_msg());
    CHECK(m == NULL);
    /* the message quotes the architecture (was read after freeing the JSON, finding B) */
    fp = fopen("build/tests/test_sae_bad/cfg.json", "w");
    fputs("{\"architecture\":\"foo\",\"d_in\":4,\"d_sae\":8}", fp);
    fclose(fp);
    CHECK(sae_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "unsupported architecture 'foo'"),
          "%s", err_msg());
    /* rescale_acts_by_decoder_norm: a TopK-family option, a JSON bool */
    fp = fopen("build/tests/test_sae_bad/cfg.json", "w");
    fputs("{\"architecture\":\"standard\",\"d_in\":4,\"d_sae\":8,"
          "\"rescale_acts_by_decoder_norm\":true}", fp);
    fclose(fp);
    CHECK(sae_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "TopK option"), "%s", err_msg());
    fp = fopen("build/tests/test_sae_bad/cfg.json", "w");
    fputs("{\"architecture\":\"topk\",\"d_in\":4,\"d_sae\":8,\"k\":2,"
          "\"rescale_acts_by_decoder_norm\":\"yes\"}", fp);
    fclose(fp);
    CHECK(sae_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "true or false"), "%s", err_msg());
    /* apply_b_dec_to_input 0 was read as true (SAELens multiplies by it: 0 subtracts nothing) */
    static const char *const abd[] = {"\"apply_b_dec_to_input\":0", "\"apply_b_dec_to_input\":1",
                                      "\"apply_b_dec_to_input\":\"false\"", "\"apply_b_dec_to_input\":[]"};
    for (int i = 0; i < 4; i++) cfg_refused(abd[i], "'apply_b_dec_to_input' must be true or false");
    /* a fractional k is a BatchTopK label only: topk refuses it, and so does a batchtopk file
       without a threshold (read as TopK); tests/data/sae_ref/topk's weights have none */
    fp = fopen("build/tests/test_sae_bad/cfg.json", "w");
    fputs("{\"architecture\":\"topk\",\"d_in\":6,\"d_sae\":10,\"k\":2.5}", fp);
    fclose(fp);
    CHECK(sae_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), "an integer"), "%s", err_msg());
    mkdir("build/tests/test_sae_bad_k", 0755);
    int rc = file_copy_atomic("tests/data/sae_ref/topk/sae_weights.safetensors",
                              "build/tests/test_sae_bad_k/sae_weights.safetensors");
    CHECK(rc == OK, "%s", err_msg());
    fp = fopen("build/tests/test_sae_bad_k/cfg.json", "w");
    fputs("{\"architecture\":\"batchtopk\",\"d_in\":6,\"d_sae\":10,\"k\":2.5}", fp);
    fclose(fp);
    CHECK(!rc && sae_load(&m, "build/tests/test_sae_bad_k") == ERR_FORMAT &&
              strstr(err_msg(), "fractional k"), "%s", err_msg());
    CHECK(m == NULL);
    /* TransformerLens processing that changes the hook's values is refused, not applied to
       values the SAE was not trained on; the flags are JSON bools */
    static const struct { const char *hook, *kw, *want; } tl[] = {
        {"blocks.0.ln1.hook_normalized", "\"fold_ln\":true", "fold_ln"},
        {"blocks.0.attn.hook_z", "\"fold_value_biases\":true", "fold_value_biases"},
        {"blocks.0.attn.hook_q", "\"refactor_factored_attn_matrices\":true", "refactor_factored"},
        {"blocks.0.hook_resid_pre", "\"center_writing_weights\":1", "true or false"},
    };
    for (size_t i = 0; i < sizeof tl / sizeof tl[0]; i++) {
        fp = fopen("build/tests/test_sae_bad/cfg.json", "w");
        fprintf(fp, "{\"architecture\":\"standard\",\"d_in\":4,\"d_sae\":8,\"metadata\":"
                "{\"hook_name\":\"%s\",\"model_from_pretrained_kwargs\":{%s}}}", tl[i].hook, tl[i].kw);
        fclose(fp);
        CHECK(sae_load(&m, dir) == ERR_FORMAT && strstr(err_msg(), tl[i].want), "%s: %s", tl[i].hook,
              err_msg());
    }
    /* model_checksum: 16 hex digits or refused (an empty one or a number turned the model check
       off without a word) */
    static const char *const bad_cs[] = {"\"metadata\":{\"model_checksum\":\"\"}",
                                         "\"metadata\":{\"model_checksum\":123}",
                                         "\"metadata\":{\"model_checksum\":\"zzzzzzzzzzzzzzzz\"}",
                                         "\"metadata\":{\"model_checksum\":\"a95add1b164fd42\"}"};
    for (size_t i = 0; i < sizeof bad_cs / sizeof bad_cs[0]; i++)
        cfg_refused(bad_cs[i], "model_checksum must be 16 hex");
    /* context_size: an int from 0 (1e30 was cast to int unchecked, -5 kept) */
    static const char *const bad_ctx[] = {"\"metadata\":{\"context_size\":1e30}",
                                          "\"metadata\":{\"context_size\":-5}",
                                          "\"metadata\":{\"context_size\":12.5}"};
    for (size_t i = 0; i < sizeof bad_ctx / sizeof bad_ctx[0]; i++)
        cfg_refused(bad_ctx[i], "'context_size' is");
    /* the same flags on hooks they do not change load (then fail on the missing weights) */
    fp = fopen("build/tests/test_sae_bad/cfg.json", "w");
    fputs("{\"architecture\":\"standard\",\"d_in\":4,\"d_sae\":8,\"metadata\":{\"hook_name\":"
          "\"blocks.0.mlp.hook_post\",\"model_from_pretrained_kwargs\":{\"fold_ln\":true,"
          "\"center_writing_weights\":true,\"fold_value_biases\":true}}}", fp);
    fclose(fp);
    CHECK(sae_load(&m, dir) != OK && strstr(err_msg(), "sae_weights.safetensors"), "%s", err_msg());
}

static void test_metrics(void)
{
    sae_metrics acc;
    sae_metrics_init(&acc, 2, 3);
    float x[4] = {1, 0, 0, 2}, xh[4] = {1, 0, 0, 1}, f[6] = {1, 0, 0, 2, 0, 0};
    sae_metrics_add(&acc, x, xh, f, 2);
    sae_metrics_summary s;
    sae_metrics_summarize(&acc, &s);
    /* sse 1; mean (0.5, 1); sum ||x - mean||^2 = 0.25*2 + 1*2 = 2.5 */
    CHECK_NEAR(s.mse, 0.25, 1e-12);
    CHECK_NEAR(s.ev, 1 - 1 / 2.5, 1e-12);
    CHECK_NEAR(s.cos, 1.0, 1e-12);
    CHECK_NEAR(s.l2_ratio, 0.75, 1e-12);
    CHECK_NEAR(s.l0, 1.0, 1e-12);
    CHECK_NEAR(s.dead_frac, 2.0 / 3, 1e-12);
    CHECK_NEAR(s.dense_frac, 1.0 / 3, 1e-12);
    sae_metrics_free(&acc);
    float T[4] = {1, 0, 0, 1}, W[6] = {0.6f, 0.8f, 2, 0, 0, -1};
    double mm, rec;
    sae_mmcs(T, 2, W, 3, 2, 0.9, &mm, &rec, NULL);
    CHECK_NEAR(mm, (1.0 + 0.8) / 2, 1e-6);
    CHECK_NEAR(rec, 0.5, 1e-12);
    /* signed: e2's best is row 0 (0.8), not row 2 (-1); the matches and the cosine matrix agree */
    float bst[2];
    int match[2] = {-1, -1};
    CHECK(sae_mmcs_match(T, 2, W, 3, 2, 0.9, &mm, &rec, bst, match) == OK);
    CHECK(match[0] == 1 && match[1] == 0, "matches %d %d", match[0], match[1]);
    CHECK_NEAR(bst[1], 0.8, 1e-6);
    float C[6];
    CHECK(sae_cosines(T, 2, W, 3, 2, C) == OK);
    CHECK_NEAR(C[1], 1.0, 1e-6);
    CHECK_NEAR(C[5], -1.0, 1e-6);
    CHECK(sae_mmcs(T, 0, W, 3, 2, 0.9, &mm, &rec, NULL) == ERR_SHAPE);
}

/* sae_metrics_eval over an array and over a callback gives what encode + decode + add gives. */
static int rows_next(void *user, float *buf, int rows)
{
    const float **p = user;
    memcpy(buf, *p, sizeof(float) * (size_t)rows * 6);
    *p += (size_t)rows * 6;
    return OK;
}

static void test_metrics_eval(void)
{
    sae_config cfg = {.arch = SAE_TOPK, .d_in = 6, .d_sae = 12, .k = 3};
    sae_model *m;
    CHECK(sae_model_new(&m, &cfg) == OK);
    rng_state r;
    rng_seed(&r, 5);
    for (int i = 0; i < 6 * 12; i++) m->W_enc[i] = (float)rng_normal(&r), m->W_dec[i] = (float)rng_normal(&r);
    enum { N = 1100 }; /* more than two chunks */
    float *x = mem_alloc(sizeof(float) * N * 6), *f = mem_alloc(sizeof(float) * N * 12),
          *xh = mem_alloc(sizeof(float) * N * 6);
    for (int i = 0; i < N * 6; i++) x[i] = (float)rng_normal(&r);
    sae_metrics a, b, c;
    sae_metrics_init(&a, 6, 12);
    sae_metrics_init(&b, 6, 12);
    sae_metrics_init(&c, 6, 12);
    CHECK(sae_encode(m, x, N, f) == OK && sae_decode(m, f, N, xh) == OK);
    sae_metrics_add(&a, x, xh, f, N);
    CHECK(sae_metrics_eval(&b, m, x, N, NULL, NULL) == OK);
    const float *p = x;
    CHECK(sae_metrics_eval(&c, m, NULL, N, rows_next, &p) == OK && p == x + N * 6);
    sae_metrics_summary sa, sb, sc;
    sae_metrics_summarize(&a, &sa);
    sae_metrics_summarize(&b, &sb);
    sae_metrics_summarize(&c, &sc);
    CHECK(sa.n == N && sb.n == N && sc.n == N);
    CHECK_NEAR(sb.mse, sa.mse, 1e-9 * sa.mse);
    CHECK_NEAR(sc.ev, sa.ev, 1e-9);
    CHECK(sb.l0 == sa.l0 && sc.l0 == sa.l0 && sa.l0 > 2);
    sae_metrics_free(&a);
    sae_metrics_free(&b);
    sae_metrics_free(&c);
    mem_free(x);
    mem_free(f);
    mem_free(xh);
    sae_free(m);
}

/* Matryoshka prefixes measured (sae_metrics_prefixes): latents 2i and 2i+1 decode to +q_i and
 * -q_i (q an orthonormal basis of R^3), the rows are b_dec + sum_i s_i sigma_i q_i over every sign
 * pattern s, sigma (3, 2, 1): the first 2 latents carry q_0's share 9/14 of the variance, the first
 * 4 latents 13/14; one latent of each pair fires. A TopK SAE has no prefixes. */
static void test_matryoshka_prefixes(void)
{
    const float q[3][3] = {{2.f / 3, 2.f / 3, 1.f / 3}, {2.f / 3, -1.f / 3, -2.f / 3},
                           {1.f / 3, -2.f / 3, 2.f / 3}};
    const float sig[3] = {3, 2, 1}, bd[3] = {1, -2, 0.5f};
    sae_config cfg = {.arch = SAE_MATRYOSHKA, .d_in = 3, .d_sae = 6, .n_widths = 3, .widths = {2, 4, 6}};
    sae_model *m;
    CHECK(sae_model_new(&m, &cfg) == OK);
    for (int j = 0; j < 6; j++)
        for (int i = 0; i < 3; i++) {
            float v = (j % 2 ? -1 : 1) * q[j / 2][i];
            m->W_dec[j * 3 + i] = v;
            m->W_enc[i * 6 + j] = v;
        }
    memcpy(m->b_dec, bd, sizeof bd); /* b_enc and the thresholds 0 */
    enum { REP = 70, N = 8 * REP };  /* more than one chunk of sae_metrics_eval */
    float *x = mem_alloc(sizeof(float) * N * 3);
    for (int r = 0; r < N; r++)
        for (int i = 0; i < 3; i++) {
            double v = bd[i];
            for (int d = 0; d < 3; d++) v += ((r % 8) >> d & 1 ? -1 : 1) * sig[d] * q[d][i];
            x[r * 3 + i] = (float)v;
        }
    sae_metrics a, b, c;
    sae_metrics_init(&a, 3, 6);
    sae_metrics_prefixes(&a, &cfg);
    CHECK(a.n_prefix == 2 && a.prefix_end[0] == 2 && a.prefix_end[1] == 4, "%d prefixes", a.n_prefix);
    CHECK(sae_metrics_eval(&a, m, x, N, NULL, NULL) == OK, "%s", err_msg());
    sae_metrics_summary s;
    sae_metrics_summarize(&a, &s);
    CHECK(s.n_prefix == 2 && s.prefix_end[0] == 2 && s.prefix_end[1] == 4);
    CHECK_NEAR(s.prefix_ev[0], 9.0 / 14, 1e-5);
    CHECK_NEAR(s.prefix_ev[1], 13.0 / 14, 1e-5);
    CHECK_NEAR(s.prefix_mse[0], 5.0 / 3, 1e-5);
    CHECK_NEAR(s.prefix_mse[1], 1.0 / 3, 1e-5);
    CHECK_NEAR(s.prefix_l0[0], 1.0, 1e-12);
    CHECK_NEAR(s.prefix_l0[1], 2.0, 1e-12);
    CHECK_NEAR(s.ev, 1.0, 1e-5);
    CHECK_NEAR(s.l0, 3.0, 1e-12);
    /* widths without d_sae: the same prefixes; two halves merged: the same sums */
    sae_config c2 = cfg;
    c2.n_widths = 2;
    sae_metrics_init(&b, 3, 6);
    sae_metrics_init(&c, 3, 6);
    sae_metrics_prefixes(&b, &c2);
    sae_metrics_prefixes(&c, &c2);
    CHECK(sae_metrics_eval(&b, m, x, N / 2, NULL, NULL) == OK);
    CHECK(sae_metrics_eval(&c, m, x + N / 2 * 3, N - N / 2, NULL, NULL) == OK);
    sae_metrics_merge(&b, &c);
    sae_metrics_summary sb;
    sae_metrics_summarize(&b, &sb);
    CHECK(sb.n_prefix == 2 && sb.n == N);
    CHECK_NEAR(sb.prefix_ev[0], s.prefix_ev[0], 1e-9);
    CHECK_NEAR(sb.prefix_ev[1], s.prefix_ev[1], 1e-9);
    CHECK_NEAR(sb.prefix_l0[1], 2.0, 1e-12);
    sae_metrics_free(&a);
    sae_metrics_free(&b);
    sae_metrics_free(&c);
    /* a prefix as wide as the dictionary decodes what sae_forward decodes, also for a centred SAE
       (whose reconstruction gets each row's mean back): its error is the full width's */
    for (int centred = 0; centred < 2; centred++) {
        sae_config cr = {.arch = SAE_MATRYOSHKA, .d_in = 8, .d_sae = 16, .n_widths = 2,
                         .widths = {4, 16}, .center_input = centred};
        sae_model *mr;
        CHECK(sae_model_new(&mr, &cr) == OK);
        rng_state r;
        rng_seed(&r, 11);
        for (int i = 0; i < 8 * 16; i++)
            mr->W_enc[i] = (float)rng_normal(&r), mr->W_dec[i] = (float)rng_normal(&r);
        for (int i = 0; i < 8; i++) mr->b_dec[i] = (float)rng_normal(&r);
        for (int j = 0; j < 16; j++) mr->threshold[j] = 0.5f;
        float xr[64 * 8];
        for (int i = 0; i < 64 * 8; i++) xr[i] = (float)rng_normal(&r) + 0.3f * (i % 8);
        sae_metrics_init(&a, 8, 16);
        sae_metrics_prefixes(&a, &cr);
        CHECK(a.n_prefix == 1 && a.prefix_end[0] == 4);
        a.prefix_end[a.n_prefix++] = 16; /* white box: the full width as a prefix */
        CHECK(sae_metrics_eval(&a, mr, xr, 64, NULL, NULL) == OK);
        CHECK(a.sse > 0 && a.prefix_sse[0] > 0);
        CHECK_NEAR(a.prefix_sse[1], a.sse, 1e-5 * a.sse);
        sae_metrics_free(&a);
        sae_free(mr);
    }
    /* TopK: no prefixes */
    sae_config ct = {.arch = SAE_TOPK, .d_in = 3, .d_sae = 6, .k = 2};
    sae_metrics_init(&a, 3, 6);
    sae_metrics_prefixes(&a, &ct);
    CHECK(a.n_prefix == 0);
    sae_metrics_free(&a);
    mem_free(x);
    sae_free(m);
}

/* A small synthetic sae-train run: 16 dims, 32 true features, topk k 4 over 32 latents. */
static sae_run_opts tiny_synth_run(int batch, int steps, int64_t eval_tokens, const char *out)
{
    sae_run_opts o;
    sae_run_defaults(&o);
    o.synth = 1;
    o.synth_cfg.d = 16;
    o.synth_cfg.n_features = 32;
    o.train.k = 4;
    o.train.batch = batch;
    o.train.total_tokens = (int64_t)batch * steps;
    o.expansion = 2;
    o.eval_tokens = eval_tokens;
    o.out = out;
    return o;
}

/* The sae-train runner: a run stopped by max_steps or by the stop flag and resumed writes the
 * weights an uninterrupted run writes; bad source combinations are refused. */
static void test_train_run(void)
{
    char root[] = "/tmp/saelite_sae_run_XXXXXX";
    if (!mkdtemp(root)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char full[300], part[300], trp[300], a[400], b[400];
    snprintf(full, sizeof full, "%s/full", root);
    snprintf(part, sizeof part, "%s/part", root);
    snprintf(trp, sizeof trp, "%s/truth.npy", root);
    sae_run_opts o = tiny_synth_run(512, 24, 2048, full);
    o.synth_cfg.active = 3;
    o.truth_out = trp;
    sae_run_result r;
    CHECK(sae_train_run(&o, &r) == OK, "%s", err_msg());
    CHECK(r.finished && r.steps == 24 && r.d_sae == 32 && r.eval_tokens == 2048 && r.sae_id == -1);
    o.truth_out = NULL;
    o.truth = trp;
    o.out = part;
    o.max_steps = 10;
    CHECK(sae_train_run(&o, &r) == OK && !r.finished && r.step == 10, "%s", err_msg());
    CHECK(r.mmcs > 0 && r.mmcs <= 1 && r.recovered >= 0 && r.recovered <= 1, "MMCS %g", r.mmcs);
    volatile int stop = 1;
    o.max_steps = 0;
    o.resume = 1;
    o.stop = &stop;
    CHECK(sae_train_run(&o, &r) == ERR_ABORTED && r.step == 11, "stop flag: %s", err_msg());
    o.stop = NULL;
    CHECK(sae_train_run(&o, &r) == OK && r.finished && r.steps == 13, "%s", err_msg());
    snprintf(a, sizeof a, "%s/sae_weights.safetensors", full);
    snprintf(b, sizeof b, "%s/sae_weights.safetensors", part);
    CHECK(fixture_files_equal(a, b), "stopped twice and resumed = uninterrupted");
    snprintf(a, sizeof a, "%s/training_log.csv", full);
    snprintf(b, sizeof b, "%s/training_log.csv", part);
    CHECK(fixture_files_equal(a, b), "the resumed run's log export has every row once");
    o.train.k = 5;
    CHECK(sae_train_run(&o, &r) == ERR_ARG && strstr(err_msg(), "the checkpoint's run had --k 4 (this run 5)"), "resume with other settings: %s", err_msg());
    o.npy = trp;
    CHECK(sae_train_run(&o, &r) == ERR_ARG, "two sources refused");
    snprintf(a, sizeof a, "rm -rf %s", root);
    if (!harness_fail) CHECK(system(a) == 0);
}

/* flock(2) for this program: the kernel's, except that, armed with a directory, the next
 * exclusive attempt first finds there the SAE of a run that finished meanwhile (its weights), as
 * when sae-train was descheduled between its check of OUT and its lock while another run into
 * OUT finished. sae_run.c's call resolves here: libsaelite.a is linked into this program. */
static char flock_finish_dir[400];

int flock(int fd, int op)
{
    if (flock_finish_dir[0] && (op & LOCK_EX)) {
        char p[512];
        snprintf(p, sizeof p, "%s/sae_weights.safetensors", flock_finish_dir);
        FILE *f = fopen(p, "w");
        if (f) fputs("another run's", f), fclose(f);
        flock_finish_dir[0] = 0;
    }
    return (int)syscall(SYS_flock, fd, op);
}

/* OUT is checked again once its lock is held: a run that found OUT empty and took the lock after
 * another run there had finished trained over that SAE without --force, exit 0 */
static void test_train_lock_recheck(void)
{
    char root[] = "/tmp/saelite_sae_lock_XXXXXX";
    if (!mkdtemp(root)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char out[300], w[400], lk[400], cmd[400];
    snprintf(out, sizeof out, "%s/out", root);
    snprintf(w, sizeof w, "%s/sae_weights.safetensors", out);
    snprintf(lk, sizeof lk, "%s/.sae-train.lock", out);
    sae_run_opts o = tiny_synth_run(256, 4, 512, out);
    sae_run_result r;
    snprintf(flock_finish_dir, sizeof flock_finish_dir, "%s", out);
    int rc = sae_train_run(&o, &r);
    flock_finish_dir[0] = 0;
    CHECK(rc == ERR_ARG && strstr(err_msg(), "already holds a trained SAE"),
          "an SAE finished in OUT before the lock was taken is refused: %s",
          rc ? err_msg() : "trained over it, exit 0");
    struct stat sb;
    CHECK(stat(w, &sb) == 0 && sb.st_size == 13, "the other run's weights are kept");
    CHECK(access(lk, F_OK) != 0, "the refused run removes the lock file it made");
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    if (!harness_fail) CHECK(system(cmd) == 0);
}

/* Transcoders on a known map: x from the small synthetic set, y = x M (M [64, 24] random), so the
   true features map to directions d_i M. A TopK transcoder reaches a high explained variance of y;
   a skip transcoder, which can learn M itself, does better at the same k; resume is bit-identical. */
static sae_model *train_tc(int tc, float *xy, int64_t n, int stop_at, const char *ckpt,
                           sae_metrics_summary *ms)
{
    enum { Di = 64, Do = 24 };
    sae_train_config c = small_cfg(SAE_TOPK);
    c.transcoder = tc;
    c.d_out = Do;
    c.k = 5;
    c.total_tokens = 200 * 1024;
    c.lr = 0.005;
    sae_source *src;
    sae_source_mem(&src, xy, n - 4096, Di + Do, 3);
    float *x = mem_alloc(sizeof(float) * 16384 * (Di + Do));
    src->next(src, x, 16384);
    sae_trainer *t = NULL;
    int rc = train_loop(&t, &c, src, x, stop_at, ckpt);
    sae_model *m = NULL;
    if (!rc) rc = sae_trainer_export(t, NULL, &m);
    if (m && ms) { /* the held-out last 4096 pairs */
        sae_metrics acc;
        sae_metrics_init(&acc, Do, c.d_sae);
        sae_metrics_eval(&acc, m, xy + (n - 4096) * (Di + Do), 4096, NULL, NULL);
        sae_metrics_summarize(&acc, ms);
        sae_metrics_free(&acc);
    }
    mem_free(x);
    sae_trainer_free(t);
    sae_source_close(src);
    return m;
}

/* The firing probabilities sum to --active for any decay: the linear bisection's bracket
 * F / decay^F was too wide for steep decays (1e-5 on 32 features gave 21 active instead of 5;
 * once pow underflowed, every feature fired), and a steep one now bisects log a. */
static void test_synth_decay(void)
{
    static const double decays[] = {1, 0.99, 0.5, 0.01, 1e-5, 1e-20, 1e-300};
    static const int feats[] = {32, 512};
    static const double actives[] = {5, 0.5, 31.5};
    for (int di = 0; di < 7; di++)
        for (int fi = 0; fi < 2; fi++)
            for (int ai = 0; ai < 3; ai++) {
                synth_config sc;
                synth_defaults(&sc);
                sc.d = 8;
                sc.n_features = feats[fi];
                sc.active = actives[ai];
                sc.decay = decays[di];
                sc.rank = 0;
                sae_synth *g;
                if (sae_synth_new(&g, &sc) != OK) {
                    CHECK(0, "decay %g: %s", decays[di], err_msg());
                    continue;
                }
                const double *p = sae_synth_probs(g);
                double sum = 0, prev = 2;
                int mono = 1;
                for (int i = 0; i < sc.n_features; i++) {
                    sum += p[i];
                    mono &= p[i] <= prev && p[i] >= 0;
                    prev = p[i];
                }
                CHECK(fabs(sum - sc.active) < 1e-9 * sc.n_features && mono,
                      "decay %g, %d features, active %g: probabilities sum to %.12g", decays[di],
                      sc.n_features, sc.active, sum);
                sae_synth_free(g);
            }
}

/* A spec keeps every value exactly: cJSON's printing wrote seed 9000000000000001 as 9e+15
 * (another generator on rebuild). */
static void test_synth_spec_exact(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/saelite_spec_%d.json", (int)getpid());
    synth_config c, back;
    synth_defaults(&c);
    c.seed = 9000000000000001ULL;
    c.active = 1.0 / 3;
    c.decay = 0.1 + 0.2;
    c.child_p = 0.4;
    CHECK(sae_synth_spec_save(&c, path) == OK, "%s", err_msg());
    CHECK(sae_synth_spec_load(&back, path) == OK, "%s", err_msg());
    CHECK(back.seed == c.seed && back.active == c.active && back.decay == c.decay &&
              back.child_p == c.child_p && back.corr == c.corr && back.d == c.d,
          "seed %llu active %.17g decay %.17g", (unsigned long long)back.seed, back.active, back.decay);
    char *txt = NULL;
    CHECK(file_read_text(path, 4096, &txt, NULL) == OK && txt && strstr(txt, "9000000000000001") &&
              strstr(txt, "\"child_p\":\t0.4"), "%s", txt ? txt : err_msg());
    mem_free(txt);
    unlink(path);
}

/* The trainer refuses, before allocating, a batch whose rows alone pass any machine's memory
 * (--batch 1e8 on 16 inputs passed the check that counted only the parameters, and kept
 * allocating) as it refuses a d_sae too large. */
static void test_trainer_memory_check(void)
{
    sae_train_config c;
    sae_train_defaults(&c);
    c.d_in = 64;
    c.d_sae = 128;
    c.k = 4;
    c.batch = 1 << 30;
    c.total_tokens = (int64_t)1 << 31;
    float x[64] = {1};
    sae_trainer *t = NULL;
    int rc = sae_trainer_new(&t, &c, x, 1);
    CHECK(rc == ERR_ARG && !t && strstr(err_msg(), "with a batch's rows need"), "%d %s", rc, err_msg());
    c.arch = SAE_RELU; /* a dense one: refused too (its batch x d_sae bound comes first) */
    c.k = 0;
    rc = sae_trainer_new(&t, &c, x, 1);
    CHECK(rc != OK && !t, "%d %s", rc, err_msg());
    c.batch = 64; /* and a small batch still builds */
    c.total_tokens = 640;
    rc = sae_trainer_new(&t, &c, x, 1);
    CHECK(rc == OK && t, "%s", err_msg());
    sae_trainer_free(t);
}

static void test_transcoders(void)
{
    enum { Di = 64, Do = 24, N = 40960 };
    synth_config sc = small_synth();
    sae_synth *g;
    CHECK(sae_synth_new(&g, &sc) == OK);
    float *x = mem_alloc(sizeof(float) * N * Di), *xy = mem_alloc(sizeof(float) * N * (Di + Do));
    float M[Di * Do];
    rng_state r;
    rng_seed(&r, 99);
    fill_normal(M, Di * Do, &r, 1.0f / 8);
    sae_synth_sample(g, x, N, NULL);
    for (int b = 0; b < N; b++) {
        memcpy(xy + (int64_t)b * (Di + Do), x + (int64_t)b * Di, sizeof(float) * Di);
        for (int o = 0; o < Do; o++) {
            double v = 0;
            for (int i = 0; i < Di; i++) v += (double)x[(int64_t)b * Di + i] * M[i * Do + o];
            xy[(int64_t)b * (Di + Do) + Di + o] = (float)v;
        }
    }
    sae_metrics_summary plain, skip;
    sae_model *mp = train_tc(SAE_TRANSCODER, xy, N, 0, NULL, &plain);
    sae_model *mk = train_tc(SAE_SKIP_TRANSCODER, xy, N, 0, NULL, &skip);
    CHECK(mp && mk);
    fprintf(stderr, "transcoder: ev %.3f L0 %.2f; skip transcoder: ev %.3f L0 %.2f\n", plain.ev,
            plain.l0, skip.ev, skip.l0);
    CHECK(plain.ev > 0.75 && plain.l0 <= 5.0 + 1e-9, "transcoder ev %.3f L0 %.2f", plain.ev, plain.l0);
    CHECK(skip.ev > plain.ev, "skip transcoder ev %.3f vs %.3f", skip.ev, plain.ev);
    /* raw-unit export and the SAELens layout round trip keep the forward pass */
    if (mk) {
        CHECK(mk->W_skip && mk->cfg.d_out == Do && mk->cfg.transcoder == SAE_SKIP_TRANSCODER);
        const char *dir = "build/tests/test_sae_skip_tc";
        snprintf(mk->cfg.hook_name_out, sizeof mk->cfg.hook_name_out, "blocks.0.hook_mlp_out");
        CHECK(sae_save(mk, dir) == OK, "%s", err_msg());
        sae_model *l = NULL;
        CHECK(sae_load(&l, dir) == OK, "%s", err_msg());
        if (l) {
            CHECK(same_model(mk, l) && !memcmp(mk->W_skip, l->W_skip, sizeof(float) * Do * Di) &&
                      l->cfg.arch == SAE_TOPK && l->cfg.k == 5 &&
                      !strcmp(l->cfg.hook_name_out, "blocks.0.hook_mlp_out"),
                  "skip transcoder round trip");
            float f[4 * 256], y[4 * Do];
            CHECK(sae_decode(l, f, 4, y) == ERR_ARG, "sae_decode refuses a skip transcoder");
            err_clear();
        }
        sae_free(l);
        /* with a threshold it is SAELens' jumprelu_skip_transcoder: SkipTranscoder has no
           threshold and its strict load refused the file (an audit) */
        const int S = mk->cfg.d_sae;
        mk->cfg.arch = SAE_JUMPRELU;
        mk->threshold = mem_alloc(sizeof(float) * S);
        for (int i = 0; mk->threshold && i < S; i++) mk->threshold[i] = 0.01f * (float)(i % 7);
        CHECK(mk->threshold && sae_save(mk, dir) == OK, "%s", err_msg());
        char cfgp[300], *txt = NULL;
        size_t n = 0;
        snprintf(cfgp, sizeof cfgp, "%s/cfg.json", dir);
        CHECK(file_read_text(cfgp, 1 << 20, &txt, &n) == OK &&
              strstr(txt, "\"architecture\":\t\"jumprelu_skip_transcoder\""), "%s", txt ? txt : err_msg());
        mem_free(txt);
        l = NULL;
        CHECK(sae_load(&l, dir) == OK, "%s", err_msg());
        if (l)
            CHECK(l->cfg.arch == SAE_JUMPRELU && l->cfg.transcoder == SAE_SKIP_TRANSCODER && l->W_skip &&
                      !memcmp(l->threshold, mk->threshold, sizeof(float) * S),
                  "jumprelu skip transcoder round trip");
        sae_free(l);
    }
    sae_free(mp);
    sae_free(mk);
    const char *ckpt = "build/tests/test_sae_tc_ckpt.bin";
    sae_model *full = train_tc(SAE_SKIP_TRANSCODER, xy, N, 0, NULL, NULL);
    sae_model *part = train_tc(SAE_SKIP_TRANSCODER, xy, N, 37, ckpt, NULL);
    sae_model *res = train_tc(SAE_SKIP_TRANSCODER, xy, N, -1, ckpt, NULL);
    CHECK(full && res && same_model(full, res) &&
              !memcmp(full->W_skip, res->W_skip, sizeof(float) * Do * Di),
          "skip transcoder: resumed run differs");
    sae_free(full);
    sae_free(part);
    sae_free(res);
    unlink(ckpt);
    mem_free(x);
    mem_free(xy);
    sae_synth_free(g);
}

/* Hierarchical synthetic features: a child never fires without its parent and fires with about
   child_p given it; the codes agree with the samples; the absorption metric on SAEs whose parent
   latents never / always fire gives 1 / 0, and the partial one follows a parent latent that
   carries a known share. */
static void test_hierarchy_absorption(void)
{
    enum { N = 8192 };
    synth_config sc = small_synth();
    sc.rank = 0;
    sc.parents = 4;
    sc.children = 3;
    sc.child_p = 0.5;
    sae_synth *g, *g2;
    int made = sae_synth_new(&g, &sc) == OK && sae_synth_new(&g2, &sc) == OK;
    CHECK(made, "%s", err_msg());
    if (!made) return;
    float *x = mem_alloc(sizeof(float) * N * 64), *x2 = mem_alloc(sizeof(float) * N * 64);
    float *codes = mem_alloc(sizeof(float) * N * 128);
    sae_synth_sample_codes(g, x, N, codes);
    sae_synth_sample(g2, x2, N, NULL);
    CHECK(!memcmp(x, x2, sizeof(float) * N * 64), "codes and plain samples differ");
    int64_t orphans = 0, with_parent = 0, child_on = 0, small = 0;
    for (int b = 0; b < N; b++)
        for (int p = 0; p < 4; p++) {
            const float *c = codes + (int64_t)b * 128 + p * 4;
            small += c[0] > 0 && c[0] < 0.5f;
            for (int k = 1; k < 4; k++) {
                orphans += c[k] > 0 && !(c[0] > 0);
                if (c[0] > 0) with_parent++, child_on += c[k] > 0;
            }
        }
    CHECK(orphans == 0 && small == 0, "%lld children without their parent, %lld small parents",
          (long long)orphans, (long long)small);
    CHECK(with_parent > 1000 && fabs((double)child_on / with_parent - 0.5) < 0.05,
          "child rate given the parent %.3f", (double)child_on / with_parent);
    sae_config cfg = {.arch = SAE_RELU, .d_in = 64, .d_sae = 4};
    sae_model *m;
    CHECK(sae_model_new(&m, &cfg) == OK);
    const float *dirs = sae_synth_directions(g);
    for (int p = 0; p < 4; p++)
        for (int i = 0; i < 64; i++) {
            m->W_dec[p * 64 + i] = dirs[(p * 4) * 64 + i];
            m->W_enc[i * 4 + p] = dirs[(p * 4) * 64 + i];
        }
    sae_absorption_result r;
    for (int p = 0; p < 4; p++) m->b_enc[p] = -1e6f;
    CHECK(sae_absorption(m, &sc, dirs, x, codes, N, &r) == OK && r.absorption == 1 &&
              r.parent_alone == 0 && r.n_parents == 4 && fabs(r.parent_cos - 1) < 1e-5 &&
              r.partial == 1 && r.alone_carried == 0,
          "never firing: absorption %g alone %g partial %g", r.absorption, r.parent_alone, r.partial);
    for (int p = 0; p < 4; p++) m->b_enc[p] = 1e6f;
    CHECK(sae_absorption(m, &sc, dirs, x, codes, N, &r) == OK && r.absorption == 0 &&
              r.parent_alone == 1 && r.partial == 0 && r.alone_carried == 1, "always firing (far above the parent): "
          "absorption %g alone %g partial %g", r.absorption, r.parent_alone, r.partial);
    /* a constant 0.7 along the parent: it carries 0.7 / m_p of it, so the partial absorption is
       the mean of clip(1 - 0.7 / m_p, 0, 1) over the parent + child samples (m_p in [0.5, 1]) */
    memset(m->W_enc, 0, sizeof(float) * 64 * 4);
    for (int p = 0; p < 4; p++) m->b_enc[p] = 0.7f;
    double want = 0, want_alone = 0;
    for (int p = 0; p < 4; p++) {
        double sum = 0, sum_alone = 0;
        int n = 0, n_alone = 0;
        for (int b = 0; b < N; b++) {
            const float *c = codes + (int64_t)b * 128 + p * 4;
            if (!(c[0] > 0)) continue;
            if (c[1] > 0 || c[2] > 0 || c[3] > 0) sum += c[0] > 0.7f ? 1 - 0.7f / c[0] : 0, n++;
            else sum_alone += c[0] > 0.7f ? 0.7f / c[0] : 1, n_alone++;
        }
        want += sum / n / 4;
        want_alone += sum_alone / n_alone / 4;
    }
    CHECK(sae_absorption(m, &sc, dirs, x, codes, N, &r) == OK && r.absorption == 0 && want > 0.05 &&
              fabs(r.partial - want) < 1e-4 && fabs(r.alone_carried - want_alone) < 1e-4,
          "constant 0.7: partial %g, expected %g; alone %g, expected %g", r.partial, want,
          r.alone_carried, want_alone);
    sae_free(m);
    mem_free(x);
    mem_free(x2);
    mem_free(codes);
    sae_synth_free(g);
    sae_synth_free(g2);
}

/* SAELens' equations in numpy (tools/ref/sae_ref.py) on random weights and inputs: the committed
   fixtures load with sae_load and encode/decode to the reference within 1e-5. */
static void test_reference_fixtures(void)
{
    /* topk_rescale, batchtopk_training: SAELens training files (rescale_acts_by_decoder_norm,
       non-unit decoder rows; the latter with a global F64 topk_threshold and k 2.5);
       finetuning_scale: SAELens 3-5's finetuning_scaling_factor */
    const char *cases[] = {"standard", "standard_nobdec", "topk", "jumprelu", "matryoshka", "gated",
                           "gated_nobdec", "transcoder", "jumprelu_transcoder", "skip_transcoder",
                           "topk_rescale", "batchtopk_training", "finetuning_scale",
                           /* model_from_pretrained_kwargs.center_writing_weights: the SAE reads
                              C x (centred along d_in); x_hat adds the mean back */
                           "standard_centered", "gated_centered", "jumprelu_centered_nobdec",
                           "jumprelu_skip_transcoder"};
    const sae_arch want[] = {SAE_RELU, SAE_RELU, SAE_TOPK, SAE_JUMPRELU, SAE_MATRYOSHKA, SAE_GATED,
                             SAE_GATED, SAE_RELU, SAE_JUMPRELU, SAE_RELU, SAE_TOPK, SAE_BATCHTOPK,
                             SAE_RELU, SAE_RELU, SAE_GATED, SAE_JUMPRELU, SAE_JUMPRELU};
    const int want_tc[] = {0, 0, 0, 0, 0, 0, 0, SAE_TRANSCODER, SAE_TRANSCODER, SAE_SKIP_TRANSCODER,
                           0, 0, 0, 0, 0, 0, SAE_SKIP_TRANSCODER};
    for (int c = 0; c < (int)(sizeof cases / sizeof *cases); c++) {
        char dir[256], p[300];
        snprintf(dir, sizeof dir, "tests/data/sae_ref/%s", cases[c]);
        sae_model *m = NULL;
        int rc = sae_load(&m, dir);
        CHECK(rc == OK, "%s: %s", cases[c], err_msg());
        if (rc) continue;
        CHECK(m->cfg.arch == want[c] && m->cfg.transcoder == want_tc[c], "%s loads as %s", cases[c],
              sae_arch_name(m->cfg.arch));
        float *x = NULL, *f = NULL, *xh = NULL;
        int nd;
        int64_t sx[NPY_MAX_DIMS], sf[NPY_MAX_DIMS], sh[NPY_MAX_DIMS];
        snprintf(p, sizeof p, "%s/x.npy", dir);
        rc = npy_read(p, &x, &nd, sx);
        snprintf(p, sizeof p, "%s/f.npy", dir);
        if (!rc) rc = npy_read(p, &f, &nd, sf);
        snprintf(p, sizeof p, "%s/xhat.npy", dir);
        if (!rc) rc = npy_read(p, &xh, &nd, sh);
        CHECK(rc == OK && sf[1] == m->cfg.d_sae && sx[1] == m->cfg.d_in &&
                  sh[1] == sae_out_dim(&m->cfg), "%s fixtures: %s", cases[c], err_msg());
        if (!rc) {
            int N = (int)sx[0], S = m->cfg.d_sae, D = sae_out_dim(&m->cfg);
            float *f2 = mem_alloc(sizeof(float) * N * S), *x2 = mem_alloc(sizeof(float) * N * D);
            float *f3 = mem_alloc(sizeof(float) * N * S);
            sae_encode(m, x, N, f2);
            if (m->W_skip || m->cfg.center_input) sae_forward(m, x, N, f3, x2); /* needs the input */
            else sae_decode(m, f, N, x2);
            CHECK(m->cfg.center_input == (strstr(cases[c], "centered") != NULL), "%s: center_input %d",
                  cases[c], m->cfg.center_input);
            if (m->cfg.center_input) {
                /* scored as SAELens scores it: on C x against its own reconstruction (x_hat
                   minus the mean sae_forward adds back), so EV's variance is C x's */
                sae_metrics acc;
                sae_metrics_summary sm;
                float *f4 = mem_alloc(sizeof(float) * N * S), *x4 = mem_alloc(sizeof(float) * N * D);
                CHECK(sae_metrics_init(&acc, D, S) == OK && sae_metrics_eval_rows(&acc, m, x, N, f4, x4) == OK);
                sae_metrics_summarize(&acc, &sm);
                double sse = 0, var = 0, *mu = calloc((size_t)D, sizeof *mu);
                for (int b = 0; b < N; b++) {
                    double mb = 0;
                    for (int i = 0; i < D; i++) mb += x[b * D + i];
                    mb /= D;
                    for (int i = 0; i < D; i++) {
                        double xc = x[b * D + i] - mb, hc = xh[b * D + i] - mb;
                        sse += (xc - hc) * (xc - hc);
                        mu[i] += xc / N;
                    }
                }
                for (int b = 0; b < N; b++) {
                    double mb = 0;
                    for (int i = 0; i < D; i++) mb += x[b * D + i];
                    mb /= D;
                    for (int i = 0; i < D; i++) var += (x[b * D + i] - mb - mu[i]) * (x[b * D + i] - mb - mu[i]);
                }
                CHECK(fabs(sm.ev - (1 - sse / var)) < 1e-5, "%s: EV %.6f, on C x %.6f", cases[c], sm.ev,
                      1 - sse / var);
                free(mu);
                sae_metrics_free(&acc);
                mem_free(f4);
                mem_free(x4);
            }
            mem_free(f3);
            double ef = 0, ex = 0;
            int64_t nf = 0;
            for (int e = 0; e < N * S; e++) {
                ef = fmax(ef, fabs(f2[e] - f[e]) / (1 + fabs(f[e])));
                nf += f[e] > 0;
            }
            for (int e = 0; e < N * D; e++) ex = fmax(ex, fabs(x2[e] - xh[e]) / (1 + fabs(xh[e])));
            CHECK(ef <= 1e-5 && ex <= 1e-5 && nf > 0 && nf < N * S,
                  "%s: encode off by %.3g, decode by %.3g (%lld active)", cases[c], ef, ex,
                  (long long)nf);
            mem_free(f2);
            mem_free(x2);
        }
        mem_free(x);
        mem_free(f);
        mem_free(xh);
        sae_free(m);
    }
}

/* ---- bf16 (oneDNN) path ----------------------------------------------------------------- */
/* The bf16 GEMM rounds its inputs to bf16 (8 significand bits: relative rounding error at most
 * u = 2^-8 each) and accumulates in fp32. So against the fp32 result, each product x*w is off
 * by at most (2u + u^2)|x w|, and an entry by (2u + u^2 + 2 D 2^-24) sum_i |x_i w_i| (the last
 * term: the two fp32 accumulations, either order). Against a reference that rounds the inputs
 * to bf16 itself and sums in double, only the fp32 accumulation remains: D 2^-24 sum |x~ w~|. */
static void test_bf16_encode(void)
{
    if (!sae_bf16_supported()) {
        SKIP("no bf16 on this CPU (or SAELITE_NO_BF16): the bf16 encoder is not tested");
        return;
    }
    enum { B = 70, D = 96, S = 2100 };
    rng_state r;
    rng_seed(&r, 7);
    float *x = mem_alloc(sizeof(float) * B * D), *W = mem_alloc(sizeof(float) * S * D);
    float *be = mem_alloc(sizeof(float) * S), *bd = mem_alloc(sizeof(float) * D);
    float *p32 = mem_alloc(sizeof(float) * B * S), *p16 = mem_alloc(sizeof(float) * B * S);
    float *p16b = mem_alloc(sizeof(float) * B * S), *xc = mem_alloc(sizeof(float) * B * D);
    fill_normal(x, (int64_t)B * D, &r, 1.0f);
    fill_normal(W, (int64_t)S * D, &r, 0.1f);
    fill_normal(be, S, &r, 0.1f);
    fill_normal(bd, D, &r, 0.1f);
    CHECK(sae_k_set_precision(SAE_PRECISION_FP32) == OK);
    sae_k_encode(p32, xc, x, W, be, bd, B, D, S);
    CHECK(sae_k_set_precision(SAE_PRECISION_BF16) == OK, "%s", err_msg());
    CHECK(sae_k_precision() == SAE_PRECISION_BF16);
    sae_k_encode(p16, xc, x, W, be, bd, B, D, S);
    sae_k_encode(p16b, xc, x, W, be, bd, B, D, S);
    char eng[96];
    sae_k_engine(eng, sizeof eng);
    fprintf(stderr, "bf16 encoder: %s\n", eng);
    CHECK(strstr(eng, "bf16") != NULL, "%s", eng);
    CHECK(sae_k_set_precision(SAE_PRECISION_FP32) == OK);
    CHECK(!memcmp(p16, p16b, sizeof(float) * B * S), "bf16 encoder: two calls differ");
    double u = 1.0 / 256, worst32 = 0, worst16 = 0, maxdiff = 0;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < S; j++) {
            double abs = 0, absr = 0, ref = be[j];
            for (int i = 0; i < D; i++) {
                double c = xc[(int64_t)b * D + i], w = W[(int64_t)j * D + i];
                double cr = half_bf16_to_f32(half_f32_to_bf16((float)c));
                double wr = half_bf16_to_f32(half_f32_to_bf16((float)w));
                abs += fabs(c * w);
                absr += fabs(cr * wr);
                ref += cr * wr;
            }
            double g = p16[(int64_t)b * S + j], f = p32[(int64_t)b * S + j];
            double tol32 = (2 * u + u * u + 2.0 * D / 16777216.0) * abs + 1e-6;
            double tol16 = (double)D / 16777216.0 * absr + 1e-6;
            if (fabs(g - f) / tol32 > worst32) worst32 = fabs(g - f) / tol32;
            if (fabs(g - ref) / tol16 > worst16) worst16 = fabs(g - ref) / tol16;
            if (fabs(g - f) > maxdiff) maxdiff = fabs(g - f);
        }
    CHECK(worst32 <= 1, "bf16 vs fp32: error %.3g x the bound", worst32);
    CHECK(worst16 <= 1, "bf16 vs a bf16-input reference: error %.3g x the bound", worst16);
    CHECK(maxdiff > 0, "the bf16 path gave the fp32 bits: it did not run");
    fprintf(stderr, "bf16 encoder: max |bf16 - fp32| %.3g (%.2f of the bound), vs bf16-input "
                    "reference %.2f of the bound\n", maxdiff, worst32, worst16);
    /* Row chunks: the second half continues the first and may reuse its bf16 weights, but not
       after an Adam step changed them (here: new W, one sae_k_adam on a dummy parameter). */
    int h = B / 2;
    float one = 1, g1 = 1, m1 = 0, v1 = 0;
    CHECK(sae_k_set_precision(SAE_PRECISION_BF16) == OK);
    sae_k_encode(p16, xc, x, W, be, bd, h, D, S);
    for (int64_t e = 0; e < (int64_t)S * D; e++) W[e] = -W[e];
    sae_k_adam(&one, &g1, &m1, &v1, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 1, 1.0f);
    sae_k_encode(p16 + (int64_t)h * S, xc + (int64_t)h * D, x + (int64_t)h * D, W, be, bd, B - h, D, S);
    CHECK(sae_k_set_precision(SAE_PRECISION_FP32) == OK);
    sae_k_encode(p32, xc, x, W, be, bd, B, D, S);
    double worst = 0;
    for (int64_t e = (int64_t)h * S; e < (int64_t)B * S; e++) {
        double d = fabs(p16[e] - p32[e]) / (0.02 * (fabs(p32[e]) + 1));
        if (d > worst) worst = d;
    }
    CHECK(worst <= 1, "bf16 row chunk after an Adam step used stale weights (%.3g)", worst);
    mem_free(x), mem_free(W), mem_free(be), mem_free(bd), mem_free(p32), mem_free(p16);
    mem_free(p16b), mem_free(xc);
}

/* SAELITE_NO_BF16 forces the fallback: bf16 is refused with the reason, auto is fp32. */
static void test_bf16_fallback(void)
{
    const char *old = getenv("SAELITE_NO_BF16");
    char keep[64] = "";
    if (old) snprintf(keep, sizeof keep, "%s", old);
    setenv("SAELITE_NO_BF16", "1", 1);
    CHECK(sae_k_set_precision(SAE_PRECISION_BF16) == ERR_ARG && strstr(err_msg(), "SAELITE_NO_BF16"),
          "bf16 refused: %s", err_msg());
    CHECK(sae_k_precision() == SAE_PRECISION_FP32);
    CHECK(sae_k_set_precision(SAE_PRECISION_AUTO) == OK && sae_k_precision() == SAE_PRECISION_FP32);
    if (old) setenv("SAELITE_NO_BF16", keep, 1);
    else unsetenv("SAELITE_NO_BF16");
    CHECK(sae_k_set_precision(SAE_PRECISION_AUTO) == OK);
    CHECK(sae_k_precision() == (sae_bf16_supported() ? SAE_PRECISION_BF16 : SAE_PRECISION_FP32));
    CHECK(sae_k_set_precision(SAE_PRECISION_FP32) == OK);
}

/* Training in bf16 recovers the ground truth as fp32 does, and a bf16 run stopped and resumed
 * (in bf16) gives the uninterrupted bf16 run's bits. */
static void test_bf16_train(void)
{
    if (!sae_bf16_supported()) {
        SKIP("no bf16 on this CPU (or SAELITE_NO_BF16): bf16 training is not tested");
        return;
    }
    double mm32 = 0, mm16 = 0, rec32 = 0, rec16 = 0;
    sae_metrics_summary ms32, ms16;
    sae_model *a = train_synth(small_cfg(SAE_TOPK), &mm32, &rec32, &ms32, 0, NULL);
    CHECK(sae_k_set_precision(SAE_PRECISION_BF16) == OK);
    sae_model *b = train_synth(small_cfg(SAE_TOPK), &mm16, &rec16, &ms16, 0, NULL);
    CHECK(a && b);
    CHECK(fabs(mm16 - mm32) <= 0.005 && fabs(ms16.ev - ms32.ev) <= 0.005,
          "bf16 training: MMCS %.4f (fp32 %.4f), ev %.4f (fp32 %.4f)", mm16, mm32, ms16.ev, ms32.ev);
    fprintf(stderr, "bf16 small ground truth: MMCS %.4f (fp32 %.4f) recovered %.3f (%.3f) ev %.4f "
                    "(%.4f)\n", mm16, mm32, rec16, rec32, ms16.ev, ms32.ev);
    sae_free(a);
    sae_free(b);
    const char *ckpt = "build/tests/test_sae_bf16_ckpt.bin";
    sae_train_config c = small_cfg(SAE_TOPK);
    c.total_tokens = 60 * 1024;
    c.dead_window = 4096;
    sae_model *full = train_synth(c, NULL, NULL, NULL, 0, NULL);
    sae_model *part = train_synth(c, NULL, NULL, NULL, 23, ckpt);
    sae_model *resumed = train_synth(c, NULL, NULL, NULL, -1, ckpt);
    CHECK(sae_k_set_precision(SAE_PRECISION_FP32) == OK);
    sae_model *full32 = train_synth(c, NULL, NULL, NULL, 0, NULL);
    CHECK(full && part && resumed && full32);
    if (full && resumed && full32) {
        CHECK(same_model(full, resumed), "bf16: resumed run differs from the uninterrupted one");
        CHECK(!same_model(full, full32), "bf16 and fp32 runs should differ");
    }
    sae_free(full), sae_free(part), sae_free(resumed), sae_free(full32);
    unlink(ckpt);
}

/* TopK's encoder in row chunks (B d_sae above 16M floats): bf16 chunks are a multiple of 64
 * rows (500 in fp32, 512 + 488 in bf16 here); every row is encoded, so one step's loss and
 * parameters stay within bf16's error of fp32's, and two bf16 trainers agree bit for bit. */
static void test_bf16_chunks(void)
{
    if (!sae_bf16_supported()) {
        SKIP("no bf16 on this CPU (or SAELITE_NO_BF16): bf16 row chunks are not tested");
        return;
    }
    enum { B = 1000, D = 8, S = 24576 };
    sae_train_config c;
    sae_train_defaults(&c);
    c.arch = SAE_TOPK;
    c.d_in = D;
    c.d_sae = S;
    c.k = 4;
    c.batch = B;
    c.total_tokens = (int64_t)B * 10;
    float *x = mem_alloc(sizeof(float) * B * D);
    rng_state r;
    rng_seed(&r, 11);
    fill_normal(x, B * D, &r, 1);
    sae_trainer *t[3] = {NULL, NULL, NULL};
    sae_step_stats st[3];
    int ok = x != NULL;
    for (int i = 0; ok && i < 3; i++) {
        CHECK(sae_k_set_precision(i ? SAE_PRECISION_BF16 : SAE_PRECISION_FP32) == OK);
        ok = sae_trainer_new(&t[i], &c, x, B) == OK && sae_trainer_step(t[i], x, &st[i]) == OK;
        CHECK(ok, "chunked trainer %d: %s", i, err_msg());
    }
    CHECK(sae_k_set_precision(SAE_PRECISION_FP32) == OK);
    if (ok) {
        sae_params P[3], G;
        for (int i = 0; i < 3; i++) sae_trainer_params(t[i], &P[i], &G);
        CHECK(st[1].loss == st[2].loss && !memcmp(P[1].W_dec, P[2].W_dec, sizeof(float) * S * D),
              "two bf16 chunked steps differ");
        CHECK(fabs(st[1].loss - st[0].loss) <= 0.02 * st[0].loss && st[1].loss != st[0].loss,
              "bf16 chunked step loss %.6g against fp32 %.6g", st[1].loss, st[0].loss);
        CHECK(fabs(st[1].ev - st[0].ev) <= 0.01, "ev %.4f against fp32 %.4f", st[1].ev, st[0].ev);
        /* every row selected its k: a row left out of the chunks has none (and, this early,
           hardly moves the loss) */
        CHECK(fabs(st[0].l0 - 4) < 0.01 && fabs(st[1].l0 - 4) < 0.01, "L0 %.3f (fp32 %.3f), want 4",
              st[1].l0, st[0].l0);
    }
    for (int i = 0; i < 3; i++) sae_trainer_free(t[i]);
    mem_free(x);
}

/* sae_synth_run (the synth command's runner): the files hold exactly the generator's samples and
 * directions, the measured mean is the stream's, the store gets the same rows, a hook of another
 * width is refused before any file is written, and the stop flag ends it with nothing written. */
static void test_synth_run(void)
{
    char dir[64], out[128], truth[128], spec[128], db[128];
    if (!harness_tmpdir(dir, sizeof dir, "synth_run")) return;
    snprintf(out, sizeof out, "%s/a.npy", dir);
    snprintf(truth, sizeof truth, "%s/t.npy", dir);
    snprintf(spec, sizeof spec, "%s/g.json", dir);
    snprintf(db, sizeof db, "%s/s.db", dir);
    synth_config c;
    synth_defaults(&c);
    c.d = 12;
    c.n_features = 40;
    c.active = 3;
    c.seed = 7;
    c.parents = 2;
    c.children = 3;
    const int64_t N = 70000; /* over one 64K block: the blocks must give the one-call stream */
    sae_synth_run_opts o = {.c = c, .tokens = N, .out = out, .truth = truth, .spec_out = spec,
                            .db = db, .hook = "h", .seq_len = 100};
    sae_synth_run_result r;
    int rc = sae_synth_run(&o, &r);
    CHECK(rc == OK, "sae_synth_run: %s", err_msg());
    sae_synth *g = NULL;
    float *want = mem_alloc(sizeof(float) * (size_t)N * c.d), *x = NULL, *t = NULL;
    int *act = mem_alloc(sizeof(int) * (size_t)N), nd = 0;
    int64_t sh[NPY_MAX_DIMS];
    if (rc || !want || !act || sae_synth_new(&g, &c) || sae_synth_sample(g, want, (int)N, act)) {
        CHECK(0, "reference stream");
        goto done;
    }
    double sum = 0;
    for (int64_t i = 0; i < N; i++) sum += act[i];
    CHECK(r.mean_active == sum / N, "mean active %.17g, want %.17g", r.mean_active, sum / N);
    CHECK(npy_read(out, &x, &nd, sh) == OK && nd == 2 && sh[0] == N && sh[1] == c.d &&
          memcmp(x, want, sizeof(float) * (size_t)N * c.d) == 0, "activations = the stream");
    CHECK(npy_read(truth, &t, &nd, sh) == OK && sh[0] == c.n_features &&
          memcmp(t, sae_synth_directions(g), sizeof(float) * c.n_features * c.d) == 0,
          "truth = the generator's directions");
    synth_config back;
    CHECK(sae_synth_spec_load(&back, spec) == OK && back.seed == 7 && back.parents == 2 &&
          back.children == 3 && back.d == 12, "spec read back");
    CHECK(r.rows == N && r.seqs == (N + 99) / 100 && r.held == N, "stored %lld rows in %lld "
          "sequences, hook holds %lld", (long long)r.rows, (long long)r.seqs, (long long)r.held);
    /* another width for the same hook: refused before the files are touched */
    struct stat before, after;
    stat(out, &before);
    sae_synth_run_opts bad = o;
    bad.c.d = 6;
    rc = sae_synth_run(&bad, &r);
    stat(out, &after);
    CHECK(rc != OK && strstr(err_msg(), "width 12, not 6") && before.st_size == after.st_size &&
          before.st_mtim.tv_nsec == after.st_mtim.tv_nsec, "width mismatch refused first: %s",
          err_msg());
    /* stopped while sampling: ERR_ABORTED and no new file */
    char out2[160], truth2[160];
    snprintf(out2, sizeof out2, "%s/b.npy", dir);
    snprintf(truth2, sizeof truth2, "%s/u.npy", dir);
    volatile int stop = 1;
    sae_synth_run_opts st = {.c = c, .tokens = 1000, .out = out2, .truth = truth2, .stop = &stop};
    rc = sae_synth_run(&st, &r);
    CHECK(rc == ERR_ABORTED && access(out2, F_OK) != 0 && access(truth2, F_OK) != 0,
          "stopped: rc %d, %s", rc, err_msg());
done:
    sae_synth_free(g);
    mem_free(want);
    mem_free(act);
    mem_free(x);
    mem_free(t);
    harness_rmtree(dir);
}

/* The runner: opts.precision holds for the run only, is refused with the reason where bf16 is
 * off, and a bf16 run says so (result.engine, cfg.json). */
static void test_bf16_run(void)
{
    char root[] = "/tmp/saelite_sae_bf16_XXXXXX";
    if (!mkdtemp(root)) {
        CHECK(0, "mkdtemp");
        return;
    }
    sae_run_opts o = tiny_synth_run(256, 4, 512, root);
    o.precision = SAE_PRECISION_BF16;
    sae_run_result r;
    setenv("SAELITE_NO_BF16", "1", 1);
    CHECK(sae_train_run(&o, &r) == ERR_ARG && strstr(err_msg(), "bf16"), "refused: %s", err_msg());
    o.precision = SAE_PRECISION_AUTO;
    CHECK(sae_train_run(&o, &r) == OK && strstr(r.engine, "fp32"), "auto without bf16: %s", r.engine);
    unsetenv("SAELITE_NO_BF16");
    if (sae_bf16_supported()) {
        o.precision = SAE_PRECISION_BF16;
        o.force = 1; /* over the auto run's SAE */
        CHECK(sae_train_run(&o, &r) == OK && strstr(r.engine, "bf16"), "%s / %s", err_msg(), r.engine);
        CHECK(sae_k_precision() == SAE_PRECISION_FP32, "the run restores the precision");
        char cfgp[400], js[8192] = "";
        snprintf(cfgp, sizeof cfgp, "%s/cfg.json", root);
        FILE *f = fopen(cfgp, "r");
        if (f) {
            js[fread(js, 1, sizeof js - 1, f)] = 0;
            fclose(f);
        }
        const char *pp = strstr(js, "\"precision\"");
        CHECK(pp && !strncmp(pp + strcspn(pp + 11, "\"") + 11, "\"bf16\"", 6), "cfg.json records bf16");
    } else SKIP("no bf16: the bf16 run is not tested");
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0);
}

/* Matryoshka with the shared code: the one-pass backward of every level against the levels
 * scattered one by one (the reference form, which the finite differences check at a small
 * size): the same loss to the bit (the reconstructions are decoded alike), every gradient within
 * float summation order, and other bits (so the one-pass form ran). Four levels, uneven widths,
 * two leaves, AuxK on. */
static void test_matryoshka_once(void)
{
    enum { D = 136, S = 160, B = 96 }; /* D: decode tiles (AVX2 64, AVX-512 128) + a tail */
    sae_train_config c;
    sae_train_defaults(&c);
    c.arch = SAE_MATRYOSHKA;
    c.d_in = D;
    c.d_sae = S;
    c.k = 12;
    c.batch = B;
    c.total_tokens = 100 * B;
    c.dead_window = 1;
    c.n_widths = 3;
    c.widths[0] = 13;
    c.widths[1] = 40;
    c.widths[2] = 101;
    rng_state r;
    rng_seed(&r, 5);
    static float x[B * D];
    fill_normal(x, B * D, &r, 1.5);
    sae_trainer *t;
    int rc = sae_trainer_new(&t, &c, x, B);
    if (!rc) rc = sae_trainer_set_micro_batches(t, 2);
    CHECK(rc == OK, "%s", err_msg());
    if (rc) return;
    sae_params P, G;
    sae_trainer_params(t, &P, &G);
    sae_step_stats st;
    for (int step = 0; step < 3; step++) sae_trainer_step(t, x, &st); /* some dead latents */
    static float g[2][2 * S * D + S + D];
    sae_step_stats s2[2];
    float *groups[4] = {G.W_encT, G.W_dec, G.b_enc, G.b_dec};
    int sizes[4] = {S * D, S * D, S, D}, n = 0;
    for (int ref = 0; ref < 2; ref++) {
        sae_trainer_test_reference_steps(t, ref);
        zero_grad(&G, S, D);
        sae_trainer_loss_grad(t, x, &s2[ref]);
        n = 0;
        for (int q = 0; q < 4; q++) memcpy(g[ref] + n, groups[q], sizeof(float) * sizes[q]), n += sizes[q];
    }
    sae_trainer_test_reference_steps(t, 0);
    double worst = 0, scale = 0;
    int lo_rows = 0; /* W_dec rows of the first group with a gradient: the levels reached them */
    for (int e = 0; e < n; e++) scale = fmax(scale, fabs(g[1][e]));
    for (int e = 0; e < n; e++) worst = fmax(worst, fabs(g[0][e] - g[1][e]) / scale);
    for (int j = 0; j < 13; j++) lo_rows += G.W_dec[j * D] != 0;
    printf("matryoshka, 4 levels: the one-pass backward's gradients within %.3g of the per-level "
           "form's\n", worst);
    CHECK(worst < 1e-5 && scale > 0 && memcmp(g[0], g[1], sizeof(float) * n) && lo_rows > 0,
          "matryoshka one-pass backward: gradients off by %.3g of their largest (bits must "
          "differ)", worst);
    CHECK(s2[0].loss == s2[1].loss && s2[0].l0 == s2[1].l0 && s2[0].aux_loss == s2[1].aux_loss,
          "matryoshka one-pass backward: loss %.9g vs %.9g", s2[0].loss, s2[1].loss);
    sae_trainer_free(t);
}

/* Micro-batches (the data-parallel leaves): the same step cut into 4 leaves summed in a tree
 * gives the same loss and gradients up to float summation order, and the same selections
 * exactly (BatchTopK's global radix threshold = the single pass's quickselect one); the checks
 * of the count. */
static void test_micro_batches(void)
{
    /* the last: a batchtopk skip transcoder, rows [x | y] of 16 + 16 floats */
    sae_arch archs[7] = {SAE_RELU, SAE_TOPK, SAE_BATCHTOPK, SAE_JUMPRELU, SAE_GATED, SAE_MATRYOSHKA,
                         SAE_BATCHTOPK};
    enum { MB_B = 256, MB_D = 32, MB_S = 128 };
    static float x[MB_B * MB_D];
    rng_state r;
    rng_seed(&r, 77);
    fill_normal(x, MB_B * MB_D, &r, 1);
    for (int a = 0; a < 7; a++) {
        sae_train_config c;
        sae_train_defaults(&c);
        c.arch = archs[a];
        c.d_in = MB_D;
        if (a == 6) {
            c.transcoder = SAE_SKIP_TRANSCODER;
            c.d_in = MB_D / 2;
            c.d_out = MB_D / 2;
        }
        int Din = c.d_in, Dout = c.transcoder ? c.d_out : c.d_in;
        c.d_sae = MB_S;
        c.k = 4;
        c.batch = MB_B;
        c.total_tokens = 100 * MB_B;
        c.dead_window = 1; /* AuxK on from the first step */
        if (c.arch == SAE_MATRYOSHKA) {
            c.n_widths = 2;
            c.widths[0] = 32;
            c.widths[1] = 64;
        }
        /* two steps (then AuxK has dead latents), the state copied through a checkpoint */
        const char *ck = "build/tests/test_sae_mb.bin";
        sae_trainer *t1 = NULL, *t4 = NULL;
        sae_step_stats s1, s4;
        int rc = sae_trainer_new(&t1, &c, x, MB_B);
        for (int step = 0; !rc && step < 2; step++) rc = sae_trainer_step(t1, x, &s1);
        if (!rc) rc = sae_trainer_checkpoint(t1, ck);
        if (!rc) rc = sae_trainer_resume(&t4, ck);
        if (!rc) rc = sae_trainer_set_micro_batches(t4, 4);
        CHECK(rc == OK, "%s: %s", sae_arch_name(c.arch), err_msg());
        if (!rc) { /* the count is kept in the checkpoint */
            sae_trainer *t5 = NULL;
            rc = sae_trainer_checkpoint(t4, ck);
            if (!rc) rc = sae_trainer_resume(&t5, ck);
            CHECK(rc == OK && sae_trainer_micro_batches(t5) == 4, "micro-batches after resume");
            sae_trainer_free(t5);
        }
        unlink(ck);
        if (rc) {
            sae_trainer_free(t1);
            sae_trainer_free(t4);
            continue;
        }
        rc = sae_trainer_loss_grad(t1, x, &s1);
        CHECK(rc == OK, "%s", err_msg());
        rc = sae_trainer_loss_grad(t4, x, &s4);
        CHECK(rc == OK, "%s", err_msg());
        CHECK(fabs(s1.loss - s4.loss) <= 1e-3 * fabs(s1.loss), "%s: loss %.9g vs %.9g with 4 leaves",
              sae_arch_name(c.arch), s1.loss, s4.loss);
        if (c.arch == SAE_BATCHTOPK || c.arch == SAE_MATRYOSHKA || c.arch == SAE_TOPK)
            CHECK(s1.l0 == s4.l0, "%s: L0 %.6f vs %.6f with 4 leaves (the selection must not "
                  "depend on the leaves)", sae_arch_name(c.arch), s1.l0, s4.l0);
        sae_params G1, G4;
        sae_trainer_params(t1, NULL, &G1);
        sae_trainer_params(t4, NULL, &G4);
        char lab[64];
        snprintf(lab, sizeof lab, "%s W_dec grad, 4 leaves", sae_arch_name(c.arch));
        CHECK_TENSOR(G4.W_dec, G1.W_dec, MB_S * Dout, 1e-5, 1e-3, lab);
        snprintf(lab, sizeof lab, "%s W_enc grad, 4 leaves", sae_arch_name(c.arch));
        CHECK_TENSOR(G4.W_encT, G1.W_encT, MB_S * Din, 1e-5, 1e-3, lab);
        snprintf(lab, sizeof lab, "%s b_dec grad, 4 leaves", sae_arch_name(c.arch));
        CHECK_TENSOR(G4.b_dec, G1.b_dec, Dout, 1e-5, 1e-3, lab);
        if (G1.W_skip) {
            snprintf(lab, sizeof lab, "skip transcoder W_skip grad, 4 leaves");
            CHECK_TENSOR(G4.W_skip, G1.W_skip, Din * Dout, 1e-5, 1e-3, lab);
        }
        sae_trainer_free(t1);
        sae_trainer_free(t4);
    }
    /* the count: a power of two dividing the batch */
    sae_train_config c = small_cfg(SAE_TOPK);
    sae_trainer *t = NULL;
    int rc = sae_trainer_new(&t, &c, x, 64);
    CHECK(rc == OK);
    if (!rc) {
        CHECK(sae_trainer_set_micro_batches(t, 3) == ERR_ARG && strstr(err_msg(), "power of two"),
              "3 micro-batches: %s", err_msg());
        CHECK(sae_trainer_set_micro_batches(t, 2048) == ERR_ARG && strstr(err_msg(), "--batch 1024"),
              "2048 micro-batches of a batch of 1024: %s", err_msg());
        CHECK(sae_trainer_set_micro_batches(t, 8) == OK && sae_trainer_micro_batches(t) == 8);
    }
    sae_trainer_free(t);
}

enum { LB_B = 256, LB_D = 32, LB_S = 512 };

/* The latent-block tests' batch (Gaussian rows from seed) and TopK config: d_sae 512 over
 * d_in 32, k 4, AuxK on from the first step (dead_window 1). */
static void latent_blocks_setup(float *x /*[LB_B * LB_D]*/, uint64_t seed, sae_train_config *c)
{
    rng_state r;
    rng_seed(&r, seed);
    fill_normal(x, LB_B * LB_D, &r, 1);
    sae_train_defaults(c);
    c->arch = SAE_TOPK;
    c->d_in = LB_D;
    c->d_sae = LB_S;
    c->k = 4;
    c->batch = LB_B;
    c->total_tokens = 100 * LB_B;
    c->dead_window = 1;
}

/* Latent blocks (sae_train.h): the same selection (L0, the set of active latents: the gradients)
 * as the single pass, the sums only reordered; AuxK on (dead_window 1); blocks narrower than k
 * (d_sae 512 over 256 blocks of 2); the count kept in the checkpoint; other archs refused. */
static void test_latent_blocks(void)
{
    static float x[LB_B * LB_D];
    sae_train_config c;
    latent_blocks_setup(x, 78, &c);
    const int Ls[3] = {2, 8, 256};
    const char *ck = "build/tests/test_sae_lb.bin";
    for (int li = 0; li < 3; li++) {
        sae_trainer *t1 = NULL, *tl = NULL;
        sae_step_stats s1, sl;
        int rc = sae_trainer_new(&t1, &c, x, LB_B);
        for (int step = 0; !rc && step < 2; step++) rc = sae_trainer_step(t1, x, &s1);
        if (!rc) rc = sae_trainer_checkpoint(t1, ck);
        if (!rc) rc = sae_trainer_resume(&tl, ck);
        if (!rc) rc = sae_trainer_set_latent_blocks(tl, Ls[li]);
        if (!rc) rc = sae_trainer_checkpoint(tl, ck); /* the count survives a checkpoint */
        sae_trainer_free(tl);
        tl = NULL;
        if (!rc) rc = sae_trainer_resume(&tl, ck);
        unlink(ck);
        CHECK(rc == OK && sae_trainer_latent_blocks(tl) == Ls[li], "L %d: %s", Ls[li], err_msg());
        if (!rc) rc = sae_trainer_loss_grad(t1, x, &s1);
        if (!rc) rc = sae_trainer_loss_grad(tl, x, &sl);
        CHECK(rc == OK, "%s", err_msg());
        if (!rc) {
            CHECK(s1.l0 == sl.l0 && s1.aux_loss > 0, "L %d: L0 %.6f vs %.6f, aux %.6g", Ls[li], s1.l0,
                  sl.l0, s1.aux_loss);
            CHECK(fabs(s1.loss - sl.loss) <= 1e-5 * fabs(s1.loss) &&
                      fabs(s1.aux_loss - sl.aux_loss) <= 1e-4 * fabs(s1.aux_loss),
                  "L %d: loss %.9g vs %.9g, aux %.9g vs %.9g", Ls[li], s1.loss, sl.loss,
                  s1.aux_loss, sl.aux_loss);
            sae_params G1, Gl;
            sae_trainer_params(t1, NULL, &G1);
            sae_trainer_params(tl, NULL, &Gl);
            char lab[64];
            snprintf(lab, sizeof lab, "W_dec grad, %d latent blocks", Ls[li]);
            CHECK_TENSOR(Gl.W_dec, G1.W_dec, LB_S * LB_D, 1e-5, 1e-3, lab);
            snprintf(lab, sizeof lab, "W_enc grad, %d latent blocks", Ls[li]);
            CHECK_TENSOR(Gl.W_encT, G1.W_encT, LB_S * LB_D, 1e-5, 1e-3, lab);
            snprintf(lab, sizeof lab, "b_enc grad, %d latent blocks", Ls[li]);
            CHECK_TENSOR(Gl.b_enc, G1.b_enc, LB_S, 1e-5, 1e-3, lab);
            snprintf(lab, sizeof lab, "b_dec grad, %d latent blocks", Ls[li]);
            CHECK_TENSOR(Gl.b_dec, G1.b_dec, LB_D, 1e-5, 1e-3, lab);
        }
        sae_trainer_free(t1);
        sae_trainer_free(tl);
    }
    sae_trainer *t = NULL;
    int rc = sae_trainer_new(&t, &c, x, 64);
    CHECK(rc == OK);
    if (!rc) {
        CHECK(sae_trainer_set_latent_blocks(t, 1024) == ERR_ARG && strstr(err_msg(), "multiple"),
              "1024 blocks of 512 latents: %s", err_msg());
        CHECK(sae_trainer_set_latent_blocks(t, 3) == ERR_ARG && strstr(err_msg(), "power of two"),
              "3 blocks: %s", err_msg());
    }
    sae_trainer_free(t);
    c.arch = SAE_BATCHTOPK;
    rc = sae_trainer_new(&t, &c, x, 64);
    CHECK(rc == OK && sae_trainer_set_latent_blocks(t, 2) == ERR_ARG &&
              strstr(err_msg(), "--arch topk"), "batchtopk with latent blocks: %s", err_msg());
    sae_trainer_free(t);
}

/* Latent blocks changed after a step (the buffers were sized for the old count), micro-batches
 * after latent blocks (refused: each leaf would add the whole batch's gradient), and every
 * allocation of a step failing in turn (the trainer retries cleanly: the same loss as without
 * the failure; under test-asan LeakSanitizer checks that nothing of the failed try is left). */
static void test_latent_blocks_state(void)
{
    static float x[LB_B * LB_D];
    sae_train_config c;
    latent_blocks_setup(x, 79, &c);
    /* L a -> step -> L b, against a trainer resumed from that step and given L b */
    const int from[2] = {2, 256}, to[2] = {256, 2};
    const char *ck = "build/tests/test_sae_lbs.bin";
    for (int i = 0; i < 2; i++) {
        sae_trainer *t = NULL, *tr = NULL;
        sae_step_stats st, sr;
        int rc = sae_trainer_new(&t, &c, x, LB_B);
        if (!rc) rc = sae_trainer_set_latent_blocks(t, from[i]);
        if (!rc) rc = sae_trainer_step(t, x, &st);
        if (!rc) rc = sae_trainer_checkpoint(t, ck);
        if (!rc) rc = sae_trainer_resume(&tr, ck);
        unlink(ck);
        if (!rc) rc = sae_trainer_set_latent_blocks(t, to[i]);
        if (!rc) rc = sae_trainer_set_latent_blocks(tr, to[i]);
        if (!rc) rc = sae_trainer_step(t, x, &st);
        if (!rc) rc = sae_trainer_step(tr, x, &sr);
        CHECK(rc == OK && st.loss == sr.loss && st.l0 == sr.l0 && st.aux_loss == sr.aux_loss,
              "L %d -> step -> L %d: loss %.9g vs %.9g (resumed), L0 %.3f vs %.3f: %s", from[i],
              to[i], st.loss, sr.loss, st.l0, sr.l0, rc ? err_msg() : "");
        sae_trainer_free(t);
        sae_trainer_free(tr);
    }
    sae_trainer *t = NULL;
    int rc = sae_trainer_new(&t, &c, x, LB_B);
    if (!rc) rc = sae_trainer_set_latent_blocks(t, 2);
    CHECK(rc == OK && sae_trainer_set_micro_batches(t, 2) == ERR_ARG &&
              strstr(err_msg(), "not implemented") && sae_trainer_micro_batches(t) == 1,
          "micro-batches after latent blocks: %s", err_msg());
    CHECK(rc == OK && sae_trainer_set_micro_batches(t, 1) == OK);
    sae_trainer_free(t);
    /* phase 0: the first step's allocations (the block buffers, the candidates); phase 1: the
       second's (the candidates grow for AuxK's once latents are dead) */
    for (int ph = 0; ph < 2; ph++) {
        sae_step_stats ref, s;
        long n = 0;
        t = NULL;
        rc = sae_trainer_new(&t, &c, x, LB_B);
        if (!rc) rc = sae_trainer_set_latent_blocks(t, 4);
        mem_fail_at(0);
        if (!rc) rc = sae_trainer_step(t, x, &ref);
        if (!rc && ph) {
            mem_fail_at(0);
            rc = sae_trainer_step(t, x, &ref);
        }
        n = mem_alloc_count();
        if (!rc && !ph) rc = sae_trainer_loss_grad(t, x, &ref);
        CHECK(rc == OK && n > 0 && (ph == 0 || ref.aux_loss > 0), "phase %d reference: %s", ph,
              err_msg());
        sae_trainer_free(t);
        int nfail = 0, bad = 0;
        for (long k = 1; !rc && k <= n; k++) {
            t = NULL;
            int r2 = sae_trainer_new(&t, &c, x, LB_B);
            if (!r2) r2 = sae_trainer_set_latent_blocks(t, 4);
            if (!r2 && ph) r2 = sae_trainer_step(t, x, &s);
            if (r2) {
                bad++;
                sae_trainer_free(t);
                continue;
            }
            mem_fail_at(k);
            r2 = sae_trainer_step(t, x, &s);
            mem_fail_at(0);
            if (r2 == ERR_NOMEM) {
                nfail++;
                r2 = sae_trainer_step(t, x, &s); /* the retry */
            }
            if (!r2 && !ph) r2 = sae_trainer_loss_grad(t, x, &s);
            if (r2 || s.loss != ref.loss || s.l0 != ref.l0 || s.aux_loss != ref.aux_loss) bad++;
            sae_trainer_free(t);
        }
        CHECK(nfail > 0 && bad == 0, "phase %d: %d of %ld allocations failed the step; %d retries "
              "went wrong", ph, nfail, n, bad);
    }
}

int main(void)
{
    test_topk();
    test_topk_long();
    test_topk_exact();
    test_topk_fused();
    test_adam_unit_rows();
    test_batchtopk();
    test_decode_sparse();
    test_decode_tiles_recon();
    test_backward_dense_latents();
    test_csr_transpose_threads();
    test_train_lock_recheck();
    test_adam_and_norms();
    fd_check(SAE_RELU, "relu");
    test_few_active();
    test_matryoshka_once();
    fd_check(SAE_TOPK, "topk");
    fd_check(SAE_BATCHTOPK, "batchtopk");
    fd_check(SAE_JUMPRELU, "jumprelu");
    test_reference_fixtures();
    test_synth_decay();
    test_synth_spec_exact();
    test_trainer_memory_check();
    test_transcoders();
    test_hierarchy_absorption();
    fd_check(SAE_GATED, "gated");
    fd_check(SAE_MATRYOSHKA, "matryoshka (shared code)");
    fd_levels = SAE_MAT_OWN;
    fd_check(SAE_MATRYOSHKA, "matryoshka (own selection per level)");
    fd_levels = 0;
    fd_check_tc(SAE_RELU, SAE_TRANSCODER, "relu transcoder");
    fd_check_tc(SAE_TOPK, SAE_TRANSCODER, "topk transcoder");
    fd_check_tc(SAE_BATCHTOPK, SAE_SKIP_TRANSCODER, "batchtopk skip transcoder");
    fd_check_tc(SAE_JUMPRELU, SAE_SKIP_TRANSCODER, "jumprelu skip transcoder");
    test_metrics();
    test_load_errors();
    test_export_fold();
    test_batchtopk_threshold_once();
    test_micro_batches();
    test_latent_blocks();
    test_latent_blocks_state();
    test_resume_bit_identical();
    test_ground_truth_small();
    test_archs_train();
    test_pairs_join();
    test_lr_default();
    test_grad_clip();
    test_metrics_eval();
    test_matryoshka_prefixes();
    test_train_run();
    test_bf16_fallback();
    test_bf16_encode();
    test_bf16_train();
    test_bf16_chunks();
    test_bf16_run();
    test_synth_run();
    return harness_report("test_sae");
}
