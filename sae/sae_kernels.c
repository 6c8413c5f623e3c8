/* sae_kernels.c - see sae_kernels.h. */
/* GCC 12 at -O2 vectorises only loops that need no scalar epilogue, which leaves the gather/
 * scatter loops (trip count d_in) scalar; -O3's cost model vectorises them (measured 2-3x on
 * these kernels). Floating-point semantics are unchanged (no reassociation, no fast-math). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "no-math-errno") /* sqrtf in Adam: errno never read; same results */
#endif
#include "sae/sae_kernels.h"

#include "common/err.h"
#include "common/mem.h"
#include "common/par.h"
#include "common/select.h"
#include "model/ops.h"
#include "sae/sae_bf16.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A vector of floats of the widest ISA the build targets (VF_W lanes), for the kernels whose
 * AVX-512 and AVX2 forms differ only in width. No FMA among them: mul then add, as the plain
 * loops, so every form gives the plain loop's bits. */
#if defined(__AVX512F__)
#define HAVE_VF 1
typedef __m512 vf;
enum { VF_W = 16 };
#define vf_load _mm512_loadu_ps
#define vf_store _mm512_storeu_ps
#define vf_set1 _mm512_set1_ps
#define vf_zero _mm512_setzero_ps
#define vf_add _mm512_add_ps
#define vf_sub _mm512_sub_ps
#define vf_mul _mm512_mul_ps
#define vf_div _mm512_div_ps
#define vf_sqrt _mm512_sqrt_ps
#elif defined(__AVX2__)
#define HAVE_VF 1
typedef __m256 vf;
enum { VF_W = 8 };
#define vf_load _mm256_loadu_ps
#define vf_store _mm256_storeu_ps
#define vf_set1 _mm256_set1_ps
#define vf_zero _mm256_setzero_ps
#define vf_add _mm256_add_ps
#define vf_sub _mm256_sub_ps
#define vf_mul _mm256_mul_ps
#define vf_div _mm256_div_ps
#define vf_sqrt _mm256_sqrt_ps
/* Lanes 4 h .. 4 h + 3 of v widened to doubles (h 0 or 1): the error and row sums keep 8 lanes
 * of doubles as two vectors. */
static inline __m256d half_pd(__m256 v, int h)
{
    return _mm256_cvtps_pd(h ? _mm256_extractf128_ps(v, 1) : _mm256_castps256_ps128(v));
}
#endif

#if defined(__AVX2__) /* AVX-512 builds too */
/* Appends base + i for each of x[0..8) that is >= t, in order; returns how many. A branch per
 * entry that passes, not per entry (the top-k's block and candidate scans). */
static inline int append_ge(int *out, const float *x, __m256 t, int base)
{
    int n = 0;
    for (unsigned m = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x), t, _CMP_GE_OQ));
         m; m &= m - 1)
        out[n++] = base + __builtin_ctz(m);
    return n;
}
#endif

/* The thread count for a kernel of this much work (defined with the sparse kernels below). */
static int n_threads(int64_t work);
/* par_for's ranges: rows of the encoder's prologue, the top-k and the decoder; elements of the
 * elementwise passes; latents of the two gradient scatters (each latent's row in one call, in
 * its serial order); of the order of 100 ranges a call at the bench shapes, so that a thread
 * that starts late takes fewer instead of the other waiting for it at the join (issue 21). */
enum { ROW_GRAIN = 32, ELEM_GRAIN = 1 << 16, LATENT_GRAIN = 32 };
static void block_maxima(float *bm, const float *pr, int nb); /* with the top-k below */
enum { TOPK_BLOCK = SAE_K_TOPK_BLOCK };
_Static_assert(SAE_K_TOPK_BLOCK == 32, "block_maxima's vector forms read 32 floats a block");
/* rows the long-row top-k plans and prefetches ahead of the row it finishes */
enum { TOPK_AHEAD = 2 };
/* kth_largest_bmax keeps the keys of at most this many block maxima in registers/stack */
enum { TOPK_KEYS_MAX = 1024 };
/* ints of topk_part's scratch per thread: S candidates, the block lists of TOPK_AHEAD + 1 row
   plans, and row_bound's block maxima and selection (S / TOPK_BLOCK each) */
#define TOPK_SCRATCH(S) ((int64_t)(S) + (TOPK_AHEAD + 3) * ((S) / TOPK_BLOCK))

typedef struct {
    float *pre, *xc;
    const float *x, *W_encT, *b_enc, *b_dec;
    int B, D, S;
    int bias; /* encode_rows also copies b_enc into pre (the fp32 GEMM accumulates onto it) */
    float *bmax; /* [B, S / TOPK_BLOCK] block maxima for sae_k_topk_bmax, or NULL */
} enc_args;

/* The GEMM is cut into blocks of a fixed number of latents, whatever the thread count: OpenBLAS's
 * result for an entry can depend on the shape of the call, so blocks that depend only on d_sae
 * keep a run bit-identical across thread counts. Column blocks, not row blocks: each call packs
 * its slice of W_enc once (row blocks re-packed all of W_enc per block: 25% slower at d_sae
 * 24576). */
enum { ENC_COLS = 2048 };

/* Latents per GEMM block: ENC_COLS, except that the block count is made even (d_sae 1024 in two
 * blocks of 512, 6144 in four of 1536), so that two threads share the GEMM evenly; a function of
 * d_sae alone, so still bit-identical across thread counts. Before, d_sae <= 2048 was a single
 * block and its GEMM ran on one core (the sweep's d_sae 1024: half the machine idle). Blocks stay
 * multiples of TOPK_BLOCK (the top-k's first pass never straddles two). */
static int enc_cols(int S)
{
    int nblk = (S + ENC_COLS - 1) / ENC_COLS;
    if (nblk % 2 == 0) return ENC_COLS;
    int w = (S + nblk) / (nblk + 1); /* ceil(S / (nblk + 1)) */
    w = (w + TOPK_BLOCK - 1) / TOPK_BLOCK * TOPK_BLOCK;
    return w < S ? w : S;
}

static void encode_rows(void *p, int tid, int64_t b0, int64_t b1)
{
    enc_args *a = p;
    int D = a->D, S = a->S;
    for (int64_t b = b0; b < b1; b++) {
        const float *xr = a->x + (int64_t)b * D;
        float *cr = a->xc + (int64_t)b * D;
        for (int i = 0; i < D; i++) cr[i] = xr[i] - a->b_dec[i];
        if (a->bias) memcpy(a->pre + (int64_t)b * S, a->b_enc, sizeof(float) * S);
    }
}

static void encode_cols(void *p, int tid, int64_t q0, int64_t q1)
{
    enc_args *a = p;
    int W = enc_cols(a->S);
    for (int q = (int)q0; q < (int)q1; q++) {
        int s0 = q * W, s1 = s0 + W < a->S ? s0 + W : a->S;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a->B, s1 - s0, a->D, 1.0f, a->xc,
                    a->D, a->W_encT + (int64_t)s0 * a->D, a->D, 1.0f, a->pre + s0, a->S);
        /* the top-k's first pass over the block while it is still in cache (W is a
           multiple of TOPK_BLOCK: a block of the row never straddles two GEMM blocks) */
        if (a->bmax) {
            int nbr = a->S / TOPK_BLOCK;
            for (int b = 0; b < a->B; b++)
                block_maxima(a->bmax + (int64_t)b * nbr + s0 / TOPK_BLOCK,
                             a->pre + (int64_t)b * a->S + s0, (s1 - s0) / TOPK_BLOCK);
        }
    }
}


/* The encoder GEMM's precision (process-wide; sae_k_set_precision). */
static sae_precision precision = SAE_PRECISION_FP32;
/* Bumped by every sae_k_adam: the bf16 path reuses its converted weights only within one
 * generation (across the row chunks of one batch). */
static uint64_t weights_gen;

int sae_k_set_precision(sae_precision p)
{
    if (p == SAE_PRECISION_AUTO) p = sae_bf16_supported() ? SAE_PRECISION_BF16 : SAE_PRECISION_FP32;
    if (p == SAE_PRECISION_BF16 && !sae_bf16_supported()) return op_bf16_refuse();
    precision = p;
    return OK;
}

sae_precision sae_k_precision(void) { return precision; }

void sae_k_engine(char *buf, int n)
{
    if (precision == SAE_PRECISION_BF16)
        snprintf(buf, n, "bf16 (oneDNN %s, ISA %s)", sae_bf16_impl()[0] ? sae_bf16_impl() : "matmul",
                 sae_bf16_isa());
    else
        snprintf(buf, n, "fp32 (OpenBLAS sgemm)");
}

/* The GEMM is split over our own threads, each calling a single-threaded sgemm, rather than
 * handed to OpenBLAS's pool: the pool's idle workers spin (sched_yield) for a while after
 * each call and took 19% of a 2-thread profile from the sparse kernels that follow; this way
 * a TopK step ran 10-13% faster (docs/sae.md). */
static void encode(float *pre, float *bmax, float *xc, const float *x, const float *W_encT,
                   const float *b_enc, const float *b_dec, int B, int D, int S)
{
    enc_args a = {.pre = pre, .xc = xc, .x = x, .W_encT = W_encT, .b_enc = b_enc, .b_dec = b_dec,
                  .B = B, .D = D, .S = S, .bias = precision != SAE_PRECISION_BF16, .bmax = bmax};
    int nt = n_threads((int64_t)B * S), nb = openblas_get_num_threads();
    int nblk = (S + enc_cols(S) - 1) / enc_cols(S);
    par_for(encode_rows, &a, B, ROW_GRAIN, nt);
    if (!a.bias) {
        if (!sae_bf16_encode(pre, xc, W_encT, b_enc, B, D, S, weights_gen)) return;
        a.bias = 1; /* oneDNN failed (out of memory): this call in fp32 */
        par_for(encode_rows, &a, B, ROW_GRAIN, nt);
    }
    if (nb > 1) openblas_set_num_threads(1); /* also with one thread of ours: same bits */
    par_for(encode_cols, &a, nblk, 1, nt);
    if (nb > 1) openblas_set_num_threads(nb);
}

void sae_k_encode(float *pre, float *xc, const float *x, const float *W_encT, const float *b_enc,
                  const float *b_dec, int B, int D, int S)
{
    encode(pre, NULL, xc, x, W_encT, b_enc, b_dec, B, D, S);
}

int sae_k_encode_bmax(float *pre, float *bmax, float *xc, const float *x, const float *W_encT,
                      const float *b_enc, const float *b_dec, int B, int D, int S)
{
    /* the bf16 path's GEMM is one oneDNN call: no block to hook into */
    int fused = precision != SAE_PRECISION_BF16;
    encode(pre, fused ? bmax : NULL, xc, x, W_encT, b_enc, b_dec, B, D, S);
    return fused;
}

/* Min-heap on value; among equal values the larger index is "smaller" so it is evicted first,
 * which keeps the lower index on ties. */
static inline int heap_less(float va, int ia, float vb, int ib)
{
    return va < vb || (va == vb && ia > ib);
}

static void heap_down(float *hv, int *hi, int k, int pos)
{
    for (;;) {
        int l = 2 * pos + 1, r = l + 1, m = pos;
        if (l < k && heap_less(hv[l], hi[l], hv[m], hi[m])) m = l;
        if (r < k && heap_less(hv[r], hi[r], hv[m], hi[m])) m = r;
        if (m == pos) return;
        float tv = hv[m];
        hv[m] = hv[pos];
        hv[pos] = tv;
        int ti = hi[m];
        hi[m] = hi[pos];
        hi[pos] = ti;
        pos = m;
    }
}

/* heap_down for a heap without NaNs, where heap_less is a total order and "the smaller child,
 * if smaller than the item" is the same choice as heap_down's: the item stays in registers
 * instead of being swapped at each level (the long-row top-k's candidates, all >= its bound). */
static void heap_down_ordered(float *hv, int *hi, int k, int pos)
{
    float v = hv[pos];
    int ix = hi[pos];
    for (;;) {
        int l = 2 * pos + 1, r = l + 1;
        if (l >= k) break;
        int c = r < k && heap_less(hv[r], hi[r], hv[l], hi[l]) ? r : l;
        if (!heap_less(hv[c], hi[c], v, ix)) break;
        hv[pos] = hv[c];
        hi[pos] = hi[c];
        pos = c;
    }
    hv[pos] = v;
    hi[pos] = ix;
}

/* Heap selection over the candidates (all S latents when cand is NULL) of one row. */
static inline __attribute__((always_inline)) void
topk_heap_with(int *hi, float *hv, const float *pr, int k, const int *cand, int n,
               void (*down)(float *, int *, int, int))
{
    for (int e = 0; e < k; e++) {
        int j = cand ? cand[e] : e;
        hv[e] = pr[j];
        hi[e] = j;
    }
    for (int e = k / 2 - 1; e >= 0; e--) down(hv, hi, k, e);
    for (int e = k; e < n; e++) {
        int j = cand ? cand[e] : e;
        float v = pr[j];
        /* candidates come in increasing index order, so a tie never displaces */
        if (v > hv[0]) {
            hv[0] = v;
            hi[0] = j;
            down(hv, hi, k, 0);
        }
    }
}

static void topk_heap(int *hi, float *hv, const float *pr, int k, const int *cand, int n)
{
    topk_heap_with(hi, hv, pr, k, cand, n, heap_down);
}

/* topk_heap over candidates that hold no NaN (the same heap, the same output) */
static void topk_heap_ordered(int *hi, float *hv, const float *pr, int k, const int *cand, int n)
{
    topk_heap_with(hi, hv, pr, k, cand, n, heap_down_ordered);
}

/* Maxima of the nb blocks of TOPK_BLOCK entries of pr (NaNs never win: an all-NaN block gives
 * -inf). The AVX-512 form takes the same maxima (up to the sign of a zero maximum, which no
 * comparison below can tell apart). */
static void block_maxima(float *bm, const float *pr, int nb)
{
#if defined(__AVX512F__)
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int q = 0; q < nb; q++) {
        const float *p = pr + (int64_t)q * TOPK_BLOCK;
        /* max_ps(a, b) returns b when a is NaN: the accumulator never becomes NaN */
        __m512 m = _mm512_max_ps(_mm512_loadu_ps(p), ninf);
        m = _mm512_max_ps(_mm512_loadu_ps(p + 16), m);
        bm[q] = _mm512_reduce_max_ps(m);
    }
#elif defined(__AVX2__)
    /* The AVX2 form: the same maxima as the AVX-512 one (GCC's -march=znver1 tuning keeps the
       plain loop to 128-bit vectors) */
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int q = 0; q < nb; q++) {
        const float *p = pr + (int64_t)q * TOPK_BLOCK;
        __m256 m = _mm256_max_ps(_mm256_loadu_ps(p), ninf);
        m = _mm256_max_ps(_mm256_loadu_ps(p + 8), m);
        m = _mm256_max_ps(_mm256_loadu_ps(p + 16), m);
        m = _mm256_max_ps(_mm256_loadu_ps(p + 24), m);
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
        bm[q] = _mm_cvtss_f32(h);
    }
#else
    for (int q = 0; q < nb; q++) {
        const float *p = pr + (int64_t)q * TOPK_BLOCK;
        float m = -INFINITY;
        for (int i = 0; i < TOPK_BLOCK; i++) m = p[i] > m ? p[i] : m; /* NaN never wins */
        bm[q] = m;
    }
#endif
}

/* A long row: the k-th largest of its per-block maxima is a lower bound of its k-th largest
 * value (k distinct entries reach it), so only entries >= that bound can be selected; a few
 * times k of them go through the heap instead of all S. Blocks whose maximum is below the bound
 * hold no candidate and are not read again. Same selection, and the same candidate list in the
 * same order, as scanning the whole row; same result as topk_heap over the whole row.
 * In two halves so that a thread can run them TOPK_AHEAD rows apart: row_bound finds the bound
 * and the blocks that reach it and prefetches them; row_finish, TOPK_AHEAD rows later, reads
 * them (two rows: one row's compute no longer covers the fetch). The blocks sit
 * at scattered places in a row far larger than the cache: fetched one after the other, their
 * misses made most of the top-k's time. */
typedef struct {
    float t;
    int nq;
    int *q; /* [nb] the blocks whose maximum reaches t, in increasing order */
} row_plan;

#if defined(__AVX512F__)
/* The k-th largest of the nb (a multiple of 16) block maxima, by bisection over the floats'
 * order-preserving integer keys: 32 rounds of vector compares and counts, with no branch on the
 * data, where sel_kth_smallest's partitions mispredicted (3-4x slower on 128 maxima). The
 * maxima are never NaN (block_maxima); the value returned compares equal to
 * sel_kth_smallest's (of -0 and +0 either may come back; no comparison tells them apart). */
static float kth_largest_bmax(const float *bm, int nb, int k)
{
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u), all = _mm512_set1_epi32(-1);
    __m512i key[TOPK_KEYS_MAX / 16];
    int nv = nb / 16;
    for (int v = 0; v < nv; v++) {
        __m512i b = _mm512_castps_si512(_mm512_loadu_ps(bm + 16 * v));
        /* negative: flip every bit; positive: flip the sign bit */
        __mmask16 neg = _mm512_cmplt_epi32_mask(b, _mm512_setzero_si512());
        key[v] = _mm512_mask_xor_epi32(_mm512_xor_si512(b, sign), neg, b, all);
    }
    uint32_t K = 0;
    for (int bit = 31; bit >= 0; bit--) {
        uint32_t c = K | (1u << bit);
        __m512i cv = _mm512_set1_epi32((int)c);
        int n = 0;
        for (int v = 0; v < nv; v++) n += __builtin_popcount(_mm512_cmpge_epu32_mask(key[v], cv));
        if (n >= k) K = c;
    }
    uint32_t u = (K & 0x80000000u) ? K ^ 0x80000000u : ~K;
    float t;
    memcpy(&t, &u, sizeof t);
    return t;
}
#elif defined(__AVX2__)
/* The same bisection with 8 keys a vector (nb a multiple of 8). AVX2 compares only signed
 * integers, so each key and bound carries its sign bit flipped (key ^ 0x80000000): the signed
 * order of those is the unsigned order of the keys. */
static float kth_largest_bmax(const float *bm, int nb, int k)
{
    const __m256i flip = _mm256_set1_epi32(0x7fffffff);
    __m256i key[TOPK_KEYS_MAX / 8];
    int nv = nb / 8;
    for (int v = 0; v < nv; v++) {
        __m256i b = _mm256_castps_si256(_mm256_loadu_ps(bm + 8 * v));
        /* negative: ~b ^ sign = b ^ 0x7fffffff; positive: b ^ sign ^ sign = b */
        __m256i neg = _mm256_srai_epi32(b, 31);
        key[v] = _mm256_xor_si256(b, _mm256_and_si256(neg, flip));
    }
    uint32_t K = 0;
    for (int bit = 31; bit >= 0; bit--) {
        uint32_t c = K | (1u << bit);
        __m256i cv = _mm256_set1_epi32((int)(c ^ 0x80000000u));
        int below = 0; /* keys under c */
        for (int v = 0; v < nv; v++)
            below += __builtin_popcount(
                (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(cv, key[v]))));
        if (nb - below >= k) K = c;
    }
    uint32_t u = (K & 0x80000000u) ? K ^ 0x80000000u : ~K;
    float t;
    memcpy(&t, &u, sizeof t);
    return t;
}
#endif

/* bmax: the row's block maxima from the encoder, or NULL (computed into bm_buf); sel: [nb]
 * scratch of the selection. Only the plan outlives the call. */
static void row_bound(row_plan *rp, const float *pr, int S, int k, const float *bmax,
                      float *bm_buf, float *sel)
{
    int nb = S / TOPK_BLOCK;
    const float *bm = bmax;
    if (!bm) {
        block_maxima(bm_buf, pr, nb);
        bm = bm_buf;
    }
    float t;
#if defined(__AVX512F__)
    if (nb % 16 == 0 && nb <= TOPK_KEYS_MAX) t = kth_largest_bmax(bm, nb, k);
    else
#elif defined(__AVX2__)
    if (nb % 8 == 0 && nb <= TOPK_KEYS_MAX) t = kth_largest_bmax(bm, nb, k);
    else
#endif
    {
        memcpy(sel, bm, sizeof(float) * nb); /* the selection reorders its input */
        t = sel_kth_smallest(sel, nb, nb - k);
    }
    int nq = 0, q = 0;
#if defined(__AVX512F__)
    /* the blocks that reach t, 16 maxima at a time (a branch per block mispredicted) */
    const __m512 tv = _mm512_set1_ps(t);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (; q + 16 <= nb; q += 16) {
        __mmask16 m = _mm512_cmp_ps_mask(_mm512_loadu_ps(bm + q), tv, _CMP_GE_OQ);
        _mm512_mask_compressstoreu_epi32(rp->q + nq, m, _mm512_add_epi32(iota, _mm512_set1_epi32(q)));
        nq += __builtin_popcount(m);
    }
#elif defined(__AVX2__)
    const __m256 tv = _mm256_set1_ps(t);
    for (; q + 8 <= nb; q += 8) nq += append_ge(rp->q + nq, bm + q, tv, q);
#endif
    for (; q < nb; q++)
        if (bm[q] >= t) rp->q[nq++] = q;
    for (int e = 0; e < nq; e++) {
        const char *c = (const char *)(pr + (int64_t)rp->q[e] * TOPK_BLOCK);
        __builtin_prefetch(c, 0, 3);
        __builtin_prefetch(c + 64, 0, 3); /* a block is 128 bytes: two lines */
    }
    rp->t = t;
    rp->nq = nq;
}

static void row_finish(int *hi, float *hv, const float *pr, int S, int k, int *cand,
                       const row_plan *rp)
{
    int nb = S / TOPK_BLOCK, n = 0;
    float t = rp->t;
#if defined(__AVX512F__)
    /* the same candidates in the same order, compressed 16 at a time */
    const __m512 tv = _mm512_set1_ps(t);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int e = 0; e < rp->nq; e++) {
        int q = rp->q[e];
        const float *p = pr + (int64_t)q * TOPK_BLOCK;
        for (int h = 0; h < TOPK_BLOCK; h += 16) {
            __mmask16 m = _mm512_cmp_ps_mask(_mm512_loadu_ps(p + h), tv, _CMP_GE_OQ);
            __m512i ix = _mm512_add_epi32(iota, _mm512_set1_epi32(q * TOPK_BLOCK + h));
            _mm512_mask_compressstoreu_epi32(cand + n, m, ix);
            n += __builtin_popcount(m);
        }
    }
#elif defined(__AVX2__)
    const __m256 tv = _mm256_set1_ps(t);
    for (int e = 0; e < rp->nq; e++) {
        int q = rp->q[e];
        const float *p = pr + (int64_t)q * TOPK_BLOCK;
        for (int h = 0; h < TOPK_BLOCK; h += 8) n += append_ge(cand + n, p + h, tv, q * TOPK_BLOCK + h);
    }
#else
    for (int e = 0; e < rp->nq; e++) {
        int q = rp->q[e];
        const float *p = pr + (int64_t)q * TOPK_BLOCK;
        for (int i = 0; i < TOPK_BLOCK; i++)
            if (p[i] >= t) cand[n++] = q * TOPK_BLOCK + i;
    }
#endif
    for (int j = nb * TOPK_BLOCK; j < S; j++)
        if (pr[j] >= t) cand[n++] = j;
    if (n < k) topk_heap(hi, hv, pr, k, NULL, S); /* NaNs: fewer comparable entries than k */
    else topk_heap_ordered(hi, hv, pr, k, cand, n); /* entries >= t: no NaN */
}

/* The AVX-512 form of row_exact decides the key's top EXACT_WIDE_BITS bits by bisection over the
 * whole row, then copies out the keys that share them with it (a few dozen of 1024: the rest are
 * above or below whatever the low bits are) and counts those above once; each later round's
 * count, that count plus the copies' at or above its bound, is the whole row's count. */
enum { EXACT_WIDE_BITS = 12 };

/* The rest of the bisection on the n keys near[] (unsigned form) that share K's top bits, with
 * `above` keys above them all. */
static uint32_t exact_low_bits(uint32_t K, const uint32_t *near, int n, int above, int k)
{
    for (int bit = 31 - EXACT_WIDE_BITS; bit >= 0; bit--) {
        uint32_t c = K | (1u << bit);
        int cnt = above;
        for (int i = 0; i < n; i++) cnt += near[i] >= c;
        if (cnt >= k) K = c;
    }
    return K;
}

#if defined(__AVX2__) /* AVX-512 builds too */
/* A row with too few blocks for the block bound (S / TOPK_BLOCK < 2k: d_sae 1024 at k 32 and
 * 64): the exact k-th largest value t of the row, by the bisection of kth_largest_bmax over
 * the row's own keys (kept in keys[S]; signed compares: each key is the float's order-preserving
 * integer with the sign bit flipped), 8 at a time, the counts in vector lanes. Then the entries
 * >= t, in index order, go through the heap: exactly k of them unless there are ties at t. The
 * heap over the whole row did a branchy insertion per entry above its running minimum (14% of a
 * TopK k 64 step at d_sae 1024). Returns 0 when the row holds a NaN (the caller takes the
 * whole row's heap, whose treatment of NaNs this does not reproduce). S a multiple of 8. */
static int row_exact(int *hi, float *hv, const float *pr, int S, int k, int *cand, int *keys)
{
    const __m256i flip = _mm256_set1_epi32(0x7fffffff);
    __m256 unord = _mm256_setzero_ps();
    for (int i = 0; i < S; i += 8) {
        __m256 v = _mm256_loadu_ps(pr + i);
        unord = _mm256_or_ps(unord, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        __m256i b = _mm256_castps_si256(v);
        _mm256_storeu_si256((__m256i *)(keys + i),
                            _mm256_xor_si256(b, _mm256_and_si256(_mm256_srai_epi32(b, 31), flip)));
    }
    if (_mm256_movemask_ps(unord)) return 0;
    uint32_t K = 0;
#if defined(__AVX512F__)
    if (S % 16 == 0) {
        /* 16 keys a compare, the count in a mask's lanes: half the AVX2 form's instructions */
        for (int bit = 31; bit >= 32 - EXACT_WIDE_BITS; bit--) {
            uint32_t c = K | (1u << bit);
            __m512i cv = _mm512_set1_epi32((int)(c ^ 0x80000000u)), one = _mm512_set1_epi32(1);
            __m512i below0 = _mm512_setzero_si512(), below1 = below0;
            int i = 0;
            for (; i + 32 <= S; i += 32) {
                __mmask16 m0 = _mm512_cmpgt_epi32_mask(cv, _mm512_loadu_si512(keys + i));
                __mmask16 m1 = _mm512_cmpgt_epi32_mask(cv, _mm512_loadu_si512(keys + i + 16));
                below0 = _mm512_mask_add_epi32(below0, m0, below0, one);
                below1 = _mm512_mask_add_epi32(below1, m1, below1, one);
            }
            if (i < S)
                below0 = _mm512_mask_add_epi32(
                    below0, _mm512_cmpgt_epi32_mask(cv, _mm512_loadu_si512(keys + i)), below0, one);
            int below = _mm512_reduce_add_epi32(_mm512_add_epi32(below0, below1));
            if (S - below >= k) K = c;
        }
        /* the low bits among the keys that share the high ones with K (see EXACT_WIDE_BITS);
           compressed in a register and stored whole (a compress to memory is slow on Zen 4) */
        const int sh = 32 - EXACT_WIDE_BITS;
        const __m512i sign = _mm512_set1_epi32((int)0x80000000u), topv = _mm512_set1_epi32((int)(K >> sh));
        uint32_t *near = (uint32_t *)cand;
        int above = 0, n = 0;
        for (int i = 0; i < S; i += 16) {
            __m512i u = _mm512_xor_si512(_mm512_loadu_si512(keys + i), sign);
            __m512i h = _mm512_srli_epi32(u, sh);
            __mmask16 eq = _mm512_cmpeq_epi32_mask(h, topv);
            above += __builtin_popcount(_mm512_cmpgt_epu32_mask(h, topv));
            _mm512_storeu_si512(near + n, _mm512_maskz_compress_epi32(eq, u));
            n += __builtin_popcount(eq);
        }
        K = exact_low_bits(K, near, n, above, k);
    } else
#endif
    {
    for (int bit = 31; bit >= 32 - EXACT_WIDE_BITS; bit--) {
        uint32_t c = K | (1u << bit);
        __m256i cv = _mm256_set1_epi32((int)(c ^ 0x80000000u));
        __m256i below0 = _mm256_setzero_si256(), below1 = below0; /* -1 per key under c */
#define KEYS_UNDER(acc, at)                                                                        \
    acc = _mm256_add_epi32(acc, _mm256_cmpgt_epi32(cv, _mm256_loadu_si256((const __m256i *)(at))))
        int i = 0;
        for (; i + 16 <= S; i += 16) {
            KEYS_UNDER(below0, keys + i);
            KEYS_UNDER(below1, keys + i + 8);
        }
        if (i < S) KEYS_UNDER(below0, keys + i);
#undef KEYS_UNDER
        int lane[8], below = 0;
        _mm256_storeu_si256((__m256i *)lane, _mm256_add_epi32(below0, below1));
        for (int r = 0; r < 8; r++) below -= lane[r];
        if (S - below >= k) K = c;
    }
    /* the narrowing of the AVX-512 form above; the few equal keys appended one by one */
    const int sh = 32 - EXACT_WIDE_BITS;
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u), topv = _mm256_set1_epi32((int)(K >> sh));
    __m256i abv = _mm256_setzero_si256(); /* h and top are below 2^12: signed compares serve */
    uint32_t *near = (uint32_t *)cand;
    int n = 0;
    for (int i = 0; i < S; i += 8) {
        __m256i h = _mm256_srli_epi32(
            _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(keys + i)), sign), sh);
        abv = _mm256_sub_epi32(abv, _mm256_cmpgt_epi32(h, topv));
        for (unsigned m = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(h, topv)));
             m; m &= m - 1)
            near[n++] = (uint32_t)keys[i + __builtin_ctz(m)] ^ 0x80000000u;
    }
    int lane[8], above = 0;
    _mm256_storeu_si256((__m256i *)lane, abv);
    for (int r = 0; r < 8; r++) above += lane[r];
    K = exact_low_bits(K, near, n, above, k);
    }
    uint32_t u = (K & 0x80000000u) ? K ^ 0x80000000u : ~K;
    float t;
    memcpy(&t, &u, sizeof t);
    const __m256 tv = _mm256_set1_ps(t);
    int n = 0;
#if defined(__AVX512F__)
    if (S % 16 == 0) { /* the indices compressed in a register, no branch per entry */
        const __m512 tz = _mm512_set1_ps(t);
        const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        for (int i = 0; i < S; i += 16) {
            __mmask16 ge = _mm512_cmp_ps_mask(_mm512_loadu_ps(pr + i), tz, _CMP_GE_OQ);
            _mm512_storeu_si512(cand + n, _mm512_maskz_compress_epi32(
                                              ge, _mm512_add_epi32(iota, _mm512_set1_epi32(i))));
            n += __builtin_popcount(ge);
        }
    } else
#endif
    for (int i = 0; i < S; i += 8) n += append_ge(cand + n, pr + i, tv, i);
    topk_heap_ordered(hi, hv, pr, k, cand, n); /* n >= k: t is one of the row's values */
    return 1;
}
#else
/* The same bisection in plain C for builds without AVX2 (-march=x86-64): the same t, the same
 * candidates in index order, so the same output order as the vector form on every build. */
static int row_exact(int *hi, float *hv, const float *pr, int S, int k, int *cand, int *keys)
{
    for (int i = 0; i < S; i++) {
        if (pr[i] != pr[i]) return 0;
        uint32_t b;
        memcpy(&b, pr + i, sizeof b);
        /* the vector form's key, XORed with the sign bit: unsigned compares */
        keys[i] = (int)(((b >> 31) ? (b ^ 0x7fffffffu) : b) ^ 0x80000000u);
    }
    uint32_t K = 0;
    for (int bit = 31; bit >= 32 - EXACT_WIDE_BITS; bit--) {
        uint32_t c = K | (1u << bit);
        int below = 0;
        for (int i = 0; i < S; i++) below += (uint32_t)keys[i] < c;
        if (S - below >= k) K = c;
    }
    const int sh = 32 - EXACT_WIDE_BITS;
    uint32_t *near = (uint32_t *)cand;
    int n = 0, above = 0;
    for (int i = 0; i < S; i++) {
        uint32_t h = (uint32_t)keys[i] >> sh;
        above += h > K >> sh;
        if (h == K >> sh) near[n++] = (uint32_t)keys[i];
    }
    K = exact_low_bits(K, near, n, above, k);
    uint32_t u = (K & 0x80000000u) ? K ^ 0x80000000u : ~K;
    float t;
    memcpy(&t, &u, sizeof t);
    n = 0;
    for (int i = 0; i < S; i++)
        if (pr[i] >= t) cand[n++] = i;
    topk_heap_ordered(hi, hv, pr, k, cand, n);
    return 1;
}
#endif

typedef struct {
    int *idx;
    float *val;
    const float *pre, *bmax;
    const int *cand;
    int B, S, k, ncand;
    int *aidx; /* AuxK's selection in the same pass (sae_k_topk_bmax_aux), or NULL */
    float *aval;
    const int *acand;
    int ka, nacand;
    int *scratch; /* per thread TOPK_SCRATCH(S): candidates, the row plans, row_bound's buffers;
                     with exact, 2 S: row_exact's candidates and keys */
    int exact;
} topk_args;

static void topk_part(void *p, int tid, int64_t r0, int64_t r1)
{
    topk_args *a = p;
    int b0 = (int)r0, b1 = (int)r1;
    int S = a->S, k = a->k;
    int nb = S / TOPK_BLOCK;
    int *cand = a->scratch && !a->exact ? a->scratch + (int64_t)tid * TOPK_SCRATCH(S) : NULL;
    /* TOPK_AHEAD + 1 plans: the row being finished and the next ones, being fetched */
    row_plan rp[TOPK_AHEAD + 1];
    for (int i = 0; i <= TOPK_AHEAD; i++) rp[i].q = cand ? cand + S + i * nb : NULL;
    float *bm_buf = cand ? (float *)(cand + S + (TOPK_AHEAD + 1) * nb) : NULL;
    float *sel = bm_buf ? bm_buf + nb : NULL;
    const float *bmax = a->bmax;
#define ROW_BOUND(b)                                                                               \
    row_bound(&rp[(b) % (TOPK_AHEAD + 1)], a->pre + (int64_t)(b) * S, S, k,                        \
              bmax ? bmax + (int64_t)(b) * nb : NULL, bm_buf, sel)
    if (cand)
        for (int b = b0; b < b1 && b < b0 + TOPK_AHEAD; b++) ROW_BOUND(b);
    for (int b = b0; b < b1; b++) {
        const float *pr = a->pre + (int64_t)b * S;
        float *hv = a->val + (int64_t)b * k;
        int *hi = a->idx + (int64_t)b * k;
        if (a->cand) topk_heap(hi, hv, pr, k, a->cand, a->ncand);
        else if (a->exact) {
            int *rc = a->scratch + (int64_t)tid * 2 * S;
            if (!row_exact(hi, hv, pr, S, k, rc, rc + S)) topk_heap(hi, hv, pr, k, NULL, S);
        }
        else if (cand) {
            if (b + TOPK_AHEAD < b1) ROW_BOUND(b + TOPK_AHEAD);
            row_finish(hi, hv, pr, S, k, cand, &rp[b % (TOPK_AHEAD + 1)]);
        } else topk_heap(hi, hv, pr, k, NULL, S);
        for (int e = 0; e < k; e++)
            if (!(hv[e] > 0)) hv[e] = 0; /* ReLU after selection */
        if (a->aidx) { /* while the row is in cache: sae_k_topk over the candidates */
            float *av = a->aval + (int64_t)b * a->ka;
            int *ai = a->aidx + (int64_t)b * a->ka;
            topk_heap(ai, av, pr, a->ka, a->acand, a->nacand);
            for (int e = 0; e < a->ka; e++)
                if (!(av[e] > 0)) av[e] = 0;
        }
    }
#undef ROW_BOUND
}

static void topk(int *idx, float *val, const float *pre, const float *bmax, int B, int S, int k,
                 const int *cand, int ncand, int *aidx, float *aval, int ka, const int *acand,
                 int nacand)
{
    int nt = n_threads((int64_t)B * (cand ? ncand : S)); /* par_for takes at most B */
    topk_args a = {.idx = idx, .val = val, .pre = pre, .bmax = bmax, .cand = cand, .B = B, .S = S,
                   .k = k, .ncand = ncand, .aidx = ka > 0 ? aidx : NULL, .aval = aval, .ka = ka,
                   .acand = acand, .nacand = nacand};
    /* the block bound pays off when the blocks far outnumber k; below that, from k 16 on, the
       exact bound (on 1024 latents at k 16 the heap's few insertions cost less than its 32
       rounds) */
    if (!cand && S / TOPK_BLOCK >= 2 * k) {
        a.scratch = mem_alloc(sizeof(int) * (size_t)nt * TOPK_SCRATCH(S)); /* NULL: heap */
    }
    else if (!cand && k >= 16 && S % 8 == 0) {
        a.scratch = mem_alloc(sizeof(int) * (size_t)nt * 2 * (size_t)S);
        a.exact = a.scratch != NULL;
    }
    par_for(topk_part, &a, B, ROW_GRAIN, nt);
    mem_free(a.scratch);
}

int64_t sae_k_batchtopk_select(int64_t *ptr, int *idx, float *val, int64_t cap, float *minkept,
                               const float *pre, int B, int S, float t)
{
    int64_t nnz = 0;
    float mk = INFINITY;
    ptr[0] = 0;
    for (int b = 0; b < B; b++) {
        const float *pr = pre + (int64_t)b * S;
        for (int j = 0; j < S; j++) {
            float v = pr[j];
            if (v > 0 && v >= t && nnz < cap) {
                idx[nnz] = j;
                val[nnz] = v;
                nnz++;
                if (v < mk) mk = v;
            }
        }
        ptr[b + 1] = nnz;
    }
    *minkept = nnz ? mk : 0;
    return nnz;
}

void sae_k_topk(int *idx, float *val, const float *pre, int B, int S, int k, const int *cand,
                int ncand)
{
    topk(idx, val, pre, NULL, B, S, k, cand, ncand, NULL, NULL, 0, NULL, 0);
}

void sae_k_topk_bmax(int *idx, float *val, const float *pre, const float *bmax, int B, int S,
                     int k)
{
    topk(idx, val, pre, bmax, B, S, k, NULL, 0, NULL, NULL, 0, NULL, 0);
}

void sae_k_topk_bmax_aux(int *idx, float *val, int *aidx, float *aval, const float *pre,
                         const float *bmax, int B, int S, int k, int ka, const int *cand,
                         int ncand)
{
    topk(idx, val, pre, bmax, B, S, k, NULL, 0, aidx, aval, ka, cand, ncand);
}

int64_t sae_k_batchtopk(int64_t *ptr, int *idx, float *val, int64_t cap, float *thr,
                        const float *pre, int B, int S, int64_t kB, float *scratch)
{
    int64_t npos = 0, total = (int64_t)B * S;
    for (int64_t i = 0; i < total; i++)
        if (pre[i] > 0) scratch[npos++] = pre[i];
    float t;
    if (npos == 0) {
        t = INFINITY;
    } else if (npos <= kB) {
        t = 0; /* keep every positive entry */
    } else {
        t = sel_kth_smallest(scratch, npos, npos - kB);
    }
    return sae_k_batchtopk_select(ptr, idx, val, cap, thr, pre, B, S, t);
}

/* The sparse kernels gather rows in an order no hardware prefetcher guesses (latents of a token,
 * tokens of a latent): each prefetches the tile it will read GATHER_AHEAD entries later. Only
 * loads move; no arithmetic changes, so neither do the bits. */
enum { GATHER_AHEAD = 8 };
static inline void prefetch_floats(const float *p, int n)
{
    for (int i = 0; i < n; i += 16) __builtin_prefetch(p + i, 0, 3);
}

/* ---- threads for the sparse kernels ----
 * OpenBLAS spreads the sgemm over all cores; the gather/scatter kernels would otherwise run on
 * one. Work is split so that results depend neither on the thread count nor on which thread
 * runs what (par_for hands out ranges dynamically): decode by token rows, the two gradient
 * scatters by latent (one call does every update of row j, in the serial order), so runs stay
 * bit-identical. */
static int n_threads(int64_t work)
{
    return work < (1 << 20) ? 1 : par_threads(); /* small problems: thread start-up would dominate */
}

typedef struct {
    float *out, *dW, *dval, *db;
    const float *in, *val, *W, *b_dec, *base;
    const int64_t *ptr;
    const int *idx;
    int B, D;
} sp_args;

#ifdef HAVE_VF
enum { DEC_TILE = 8 }; /* vectors a row tile keeps in registers */

/* One row of the decoder, DEC_TILE vectors at a time: each tile accumulates over the row's
 * entries in registers and is stored once. Per element the same products added in the same
 * order as the plain loop (mul then add, no FMA), so the same bits. Returns the columns done (a
 * multiple of VF_W DEC_TILE); decode_part's plain loop does the rest. */
static int decode_row_tiles(float *o, const int64_t *ptr, const int *idx, const float *val,
                            const float *W, const float *b_dec, int b, int D)
{
    int i = 0;
    for (; i + VF_W * DEC_TILE <= D; i += VF_W * DEC_TILE) {
        vf acc[DEC_TILE];
        for (int r = 0; r < DEC_TILE; r++)
            acc[r] = b_dec ? vf_load(b_dec + i + VF_W * r) : vf_zero();
        for (int64_t e = ptr[b]; e < ptr[b + 1]; e++) {
            if (e + GATHER_AHEAD < ptr[b + 1])
                prefetch_floats(W + (int64_t)idx[e + GATHER_AHEAD] * D + i, VF_W * DEC_TILE);
            float v = val[e];
            if (v == 0) continue;
            const float *w = W + (int64_t)idx[e] * D + i;
            vf vv = vf_set1(v);
            for (int r = 0; r < DEC_TILE; r++)
                acc[r] = vf_add(acc[r], vf_mul(vv, vf_load(w + VF_W * r)));
        }
        for (int r = 0; r < DEC_TILE; r++) vf_store(o + i + VF_W * r, acc[r]);
    }
    return i;
}
#endif

static void decode_part(void *p, int tid, int64_t b0, int64_t b1)
{
    sp_args *a = p;
    int D = a->D;
    for (int b = (int)b0; b < (int)b1; b++) {
        float *o = a->out + (int64_t)b * D;
        const float *start = a->base ? a->base + (int64_t)b * D : a->b_dec; /* or zeros */
        int i0 = 0;
#ifdef HAVE_VF
        i0 = decode_row_tiles(o, a->ptr, a->idx, a->val, a->W, start, b, D);
        if (i0 == D) continue;
#endif
        if (start) memmove(o + i0, start + i0, sizeof(float) * (D - i0));
        else memset(o + i0, 0, sizeof(float) * (D - i0));
        for (int64_t e = a->ptr[b]; e < a->ptr[b + 1]; e++) {
            float v = a->val[e];
            if (v == 0) continue;
            const float *w = a->W + (int64_t)a->idx[e] * D;
            for (int i = i0; i < D; i++) o[i] += v * w[i];
        }
    }
}

void sae_k_decode_sparse(float *xhat, const int64_t *ptr, const int *idx, const float *val,
                         const float *W_dec, const float *b_dec, int B, int D)
{
    sp_args a = {.out = xhat, .val = val, .W = W_dec, .b_dec = b_dec, .ptr = ptr, .idx = idx,
                 .B = B, .D = D};
    par_for(decode_part, &a, B, ROW_GRAIN, n_threads(ptr[B] * (int64_t)D));
}

void sae_k_decode_sparse_from(float *xhat, const int64_t *ptr, const int *idx, const float *val,
                              const float *W_dec, const float *base, int B, int D)
{
    sp_args a = {.out = xhat, .val = val, .W = W_dec, .base = base, .ptr = ptr, .idx = idx,
                 .B = B, .D = D};
    par_for(decode_part, &a, B, ROW_GRAIN, n_threads(ptr[B] * (int64_t)D));
}

typedef struct {
    float *out;
    const float *in;
    float a;
    int64_t n;
} scale_args;

static void scale_part(void *p, int tid, int64_t i0, int64_t i1)
{
    scale_args *s = p;
    for (int64_t i = i0; i < i1; i++) s->out[i] = s->in[i] * s->a;
}

void sae_k_scale(float *out, const float *in, float a, int64_t n)
{
    scale_args s = {.out = out, .in = in, .a = a, .n = n};
    par_for(scale_part, &s, n, ELEM_GRAIN, n_threads(n));
}

void sae_k_row_sums(double *gg, double *gw, double *ww, const float *g, const float *w, int64_t u)
{
    double lg[8] = {0}, lgw[8] = {0}, lw[8] = {0};
    int64_t e = 0;
#if defined(__AVX512F__)
    __m512d vg = _mm512_setzero_pd(), vgw = vg, vw = vg;
    for (; e + 8 <= u; e += 8) {
        __m512d gd = _mm512_cvtps_pd(_mm256_loadu_ps(g + e));
        vg = _mm512_add_pd(vg, _mm512_mul_pd(gd, gd));
        if (gw) {
            __m512d wd = _mm512_cvtps_pd(_mm256_loadu_ps(w + e));
            vgw = _mm512_add_pd(vgw, _mm512_mul_pd(gd, wd));
            vw = _mm512_add_pd(vw, _mm512_mul_pd(wd, wd));
        }
    }
    _mm512_storeu_pd(lg, vg);
    _mm512_storeu_pd(lgw, vgw);
    _mm512_storeu_pd(lw, vw);
#elif defined(__AVX2__)
    __m256d vg[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()}, vgw[2] = {vg[0], vg[0]},
            vw[2] = {vg[0], vg[0]};
    for (; e + 8 <= u; e += 8) {
        __m256 g8 = _mm256_loadu_ps(g + e), w8 = gw ? _mm256_loadu_ps(w + e) : g8;
        for (int h = 0; h < 2; h++) {
            __m256d gd = half_pd(g8, h);
            vg[h] = _mm256_add_pd(vg[h], _mm256_mul_pd(gd, gd));
            if (gw) {
                __m256d wd = half_pd(w8, h);
                vgw[h] = _mm256_add_pd(vgw[h], _mm256_mul_pd(gd, wd));
                vw[h] = _mm256_add_pd(vw[h], _mm256_mul_pd(wd, wd));
            }
        }
    }
    for (int h = 0; h < 2; h++) {
        _mm256_storeu_pd(lg + 4 * h, vg[h]);
        _mm256_storeu_pd(lgw + 4 * h, vgw[h]);
        _mm256_storeu_pd(lw + 4 * h, vw[h]);
    }
#endif
    for (; e < u; e++) { /* the same lanes */
        lg[e % 8] += (double)g[e] * g[e];
        if (gw) {
            lgw[e % 8] += (double)g[e] * w[e];
            lw[e % 8] += (double)w[e] * w[e];
        }
    }
    *gg = 0;
    for (int l = 0; l < 8; l++) *gg += lg[l];
    if (!gw) return;
    *gw = *ww = 0;
    for (int l = 0; l < 8; l++) *gw += lgw[l], *ww += lw[l];
}

enum { REC_ROWS = 64 }; /* rows of one partial sum of sae_k_recon_error */

typedef struct {
    float *dx, *out;
    double *part, *col;
    const float *xh, *y, *a;
    float scale;
    int B, D;
} rec_args;

static void recon_part(void *p, int tid, int64_t q0, int64_t q1)
{
    rec_args *a = p;
    int D = a->D;
    for (int q = (int)q0; q < (int)q1; q++) {
        int64_t e0 = (int64_t)q * REC_ROWS * D, e1 = e0 + (int64_t)REC_ROWS * D, e = e0;
        if (e1 > (int64_t)a->B * D) e1 = (int64_t)a->B * D;
        double lse[8] = {0}, lss[8] = {0};
#if defined(__AVX512F__)
        __m512d vse = _mm512_setzero_pd(), vss = _mm512_setzero_pd();
        const __m256 sc = _mm256_set1_ps(a->scale);
        for (; e + 8 <= e1; e += 8) {
            __m256 y = _mm256_loadu_ps(a->y + e), d = _mm256_sub_ps(_mm256_loadu_ps(a->xh + e), y);
            _mm256_storeu_ps(a->dx + e, _mm256_mul_ps(sc, d));
            __m512d dd = _mm512_cvtps_pd(d), yd = _mm512_cvtps_pd(y);
            vse = _mm512_add_pd(vse, _mm512_mul_pd(dd, dd));
            vss = _mm512_add_pd(vss, _mm512_mul_pd(yd, yd));
        }
        _mm512_storeu_pd(lse, vse);
        _mm512_storeu_pd(lss, vss);
#elif defined(__AVX2__)
        __m256d vse[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()}, vss[2] = {vse[0], vse[0]};
        const __m256 sc = _mm256_set1_ps(a->scale);
        for (; e + 8 <= e1; e += 8) {
            __m256 y = _mm256_loadu_ps(a->y + e), d = _mm256_sub_ps(_mm256_loadu_ps(a->xh + e), y);
            _mm256_storeu_ps(a->dx + e, _mm256_mul_ps(sc, d));
            for (int h = 0; h < 2; h++) {
                __m256d dd = half_pd(d, h), yd = half_pd(y, h);
                vse[h] = _mm256_add_pd(vse[h], _mm256_mul_pd(dd, dd));
                vss[h] = _mm256_add_pd(vss[h], _mm256_mul_pd(yd, yd));
            }
        }
        for (int h = 0; h < 2; h++) {
            _mm256_storeu_pd(lse + 4 * h, vse[h]);
            _mm256_storeu_pd(lss + 4 * h, vss[h]);
        }
#endif
        for (; e < e1; e++) { /* the same lanes: entry e in lane (e - e0) % 8 */
            float y = a->y[e], d = a->xh[e] - y;
            a->dx[e] = a->scale * d;
            lse[(e - e0) % 8] += (double)d * d;
            lss[(e - e0) % 8] += (double)y * y;
        }
        double se = 0, ss = 0;
        for (int l = 0; l < 8; l++) se += lse[l], ss += lss[l];
        a->part[2 * q] = se;
        a->part[2 * q + 1] = ss;
    }
}

/* Column groups [g0, g1) of 16 floats (a line: ranges never share one), each column summed over
 * the rows in order. */
enum { COL_GROUP = 16, COL_GRAIN = 4 };

static void col_part(void *p, int tid, int64_t g0, int64_t g1)
{
    rec_args *a = p;
    int c0 = (int)g0 * COL_GROUP, c1 = (int)g1 * COL_GROUP < a->D ? (int)g1 * COL_GROUP : a->D;
    for (int b = 0; b < a->B; b++) {
        const float *row = a->a + (int64_t)b * a->D;
        if (a->col)
            for (int c = c0; c < c1; c++) a->col[c] += row[c];
        else
            for (int c = c0; c < c1; c++) a->out[c] += row[c];
    }
}

enum { REC_ROUND = 64 }; /* blocks whose partial sums one round keeps (on the stack) */

void sae_k_recon_error(float *dx, double *sse, double *ss, double *col, const float *xhat,
                       const float *y, float scale, int B, int D)
{
    int nt = n_threads((int64_t)B * D);
    double se = 0, s2 = 0;
    /* rounds of REC_ROUND blocks, their partial sums added in block order: the same sums for
       any thread count, and no allocation */
    for (int r0 = 0; r0 < B; r0 += REC_ROUND * REC_ROWS) {
        int n = B - r0 < REC_ROUND * REC_ROWS ? B - r0 : REC_ROUND * REC_ROWS;
        int nq = (n + REC_ROWS - 1) / REC_ROWS;
        double part[2 * REC_ROUND];
        int64_t o = (int64_t)r0 * D;
        rec_args a = {.dx = dx + o, .part = part, .xh = xhat + o, .y = y + o, .scale = scale,
                      .B = n, .D = D};
        par_for(recon_part, &a, nq, 1, nt);
        for (int q = 0; q < nq; q++) se += part[2 * q], s2 += part[2 * q + 1];
    }
    *sse = se;
    *ss = s2;
    rec_args c = {.col = col, .a = y, .B = B, .D = D};
    par_for(col_part, &c, (D + COL_GROUP - 1) / COL_GROUP, COL_GRAIN, nt);
}

void sae_k_colsum_add(float *out, const float *a, int R, int C)
{
    rec_args c = {.out = out, .a = a, .B = R, .D = C};
    par_for(col_part, &c, (C + COL_GROUP - 1) / COL_GROUP, COL_GRAIN, n_threads((int64_t)R * C));
}

typedef struct {
    int64_t *tent, *off; /* off: [nt][S] counts, then each thread's next slot per latent */
    int *ttok;
    const int64_t *ptr;
    const int *idx;
    int B, S, pass;
} csr_args;

/* pass 0: count the latents of this thread's tokens; pass 1: place its entries. Threads own
 * consecutive token ranges and their slots follow each other in token order, so the result is
 * the serial stable counting sort's for any thread count. */
static void csr_part(void *p, int tid, int nt)
{
    csr_args *a = p;
    int b0 = (int)((int64_t)a->B * tid / nt), b1 = (int)((int64_t)a->B * (tid + 1) / nt);
    int64_t *off = a->off + (int64_t)tid * a->S;
    if (a->pass == 0) {
        memset(off, 0, sizeof(int64_t) * (size_t)a->S);
        for (int64_t e = a->ptr[b0]; e < a->ptr[b1]; e++) off[a->idx[e]]++;
        return;
    }
    for (int b = b0; b < b1; b++)
        for (int64_t e = a->ptr[b]; e < a->ptr[b + 1]; e++) {
            int64_t q = off[a->idx[e]]++;
            a->tent[q] = e;
            a->ttok[q] = b;
        }
}

void sae_k_csr_transpose(int64_t *tptr, int64_t *tent, int *ttok, const int64_t *ptr,
                         const int *idx, int B, int S)
{
    int64_t nnz = ptr[B];
    /* scattered writes: two threads pay from ~64k entries (a 4096 x 32 batch: 0.65 -> 0.4 ms) */
    int nt = nnz < (1 << 16) ? 1 : par_threads();
    if (nt > B) nt = B > 0 ? B : 1;
    csr_args a = {.tent = tent, .ttok = ttok, .ptr = ptr, .idx = idx, .B = B, .S = S};
    a.off = nt > 1 ? mem_alloc(sizeof(int64_t) * (size_t)nt * S) : NULL;
    if (!a.off) nt = 1;
    if (nt == 1) { /* stable counting sort: within a latent, entries stay in token order */
        memset(tptr, 0, sizeof(int64_t) * ((size_t)S + 1));
        for (int64_t e = 0; e < nnz; e++) tptr[idx[e] + 1]++;
        for (int j = 0; j < S; j++) tptr[j + 1] += tptr[j];
        for (int b = 0; b < B; b++)
            for (int64_t e = ptr[b]; e < ptr[b + 1]; e++) {
                int64_t q = tptr[idx[e]]++;
                tent[q] = e;
                ttok[q] = b;
            }
        for (int j = S; j > 0; j--) tptr[j] = tptr[j - 1];
        tptr[0] = 0;
        return;
    }
    par_run(csr_part, &a, nt);
    int64_t base = 0;
    for (int j = 0; j < S; j++) { /* latent j's slots: thread 0's tokens first, then 1's, ... */
        tptr[j] = base;
        for (int t = 0; t < nt; t++) {
            int64_t c = a.off[(int64_t)t * S + j];
            a.off[(int64_t)t * S + j] = base;
            base += c;
        }
    }
    tptr[S] = base;
    a.pass = 1;
    par_run(csr_part, &a, nt);
    mem_free(a.off);
}

typedef struct {
    float *dW, *dval, *db;
    const float *in, *val, *W;
    const int64_t *tptr, *tent;
    const int *ttok;
    const int *lat; /* the latents with entries, increasing (NULL: every latent, 0 .. S-1) */
    int S, D;
} tr_args;

/* The r-th latent of the scatters' walk. */
static inline int64_t walk_latent(const tr_args *a, int64_t r) { return a->lat ? a->lat[r] : r; }

/* The latents with at least one entry, increasing, in *lat (NULL when out of memory: then the
 * walk takes every latent, as before); *n their count. A latent without entries still gets
 * db[j] += 0 (what the whole walk did), so the bits of db do not change either. */
static int *entry_latents(const int64_t *tptr, int S, int64_t *n, float *db)
{
    int *lat = mem_alloc(sizeof(int) * (size_t)(S > 0 ? S : 1));
    *n = lat ? 0 : S;
    for (int j = 0; lat && j < S; j++)
        if (tptr[j + 1] > tptr[j]) lat[(*n)++] = j;
        else if (db) db[j] += 0.0f;
    return lat;
}

#if defined(__AVX512F__)
enum { BWD_GROUP = 64 }; /* tokens whose dot products a tile pass carries (4 KB of vectors) */

/* Vectors [v0, v0 + NV) of latent j's rows for the tokens [q0, q1) of its list: dW_dec's and
 * the dot products' partial sums stay in registers across the tokens (dacc: each token's 16
 * lanes, carried from the previous tile). Per element and per lane the same operations in the
 * same order as the plain loops of decode_bwd_part (mul then add, tokens in list order). */
static inline __attribute__((always_inline)) void
dec_bwd_tile(const tr_args *a, float *dw, const float *w, int64_t q0, int64_t q1, int v0, int NV,
             __m512 *dacc, int first)
{
    __m512 acc[8], wt[8];
    for (int r = 0; r < NV; r++) {
        acc[r] = _mm512_loadu_ps(dw + 16 * (v0 + r));
        wt[r] = _mm512_loadu_ps(w + 16 * (v0 + r));
    }
    for (int64_t q = q0; q < q1; q++) {
        if (q + GATHER_AHEAD < q1)
            prefetch_floats(a->in + (int64_t)a->ttok[q + GATHER_AHEAD] * a->D + 16 * v0, 16 * NV);
        float v = a->val[a->tent[q]];
        if (v == 0) continue;
        const float *g = a->in + (int64_t)a->ttok[q] * a->D + 16 * v0;
        __m512 vv = _mm512_set1_ps(v), d = first ? _mm512_setzero_ps() : dacc[q - q0];
        for (int r = 0; r < NV; r++) {
            __m512 gr = _mm512_loadu_ps(g + 16 * r);
            d = _mm512_add_ps(d, _mm512_mul_ps(gr, wt[r]));
            acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(vv, gr));
        }
        dacc[q - q0] = d;
    }
    for (int r = 0; r < NV; r++) _mm512_storeu_ps(dw + 16 * (v0 + r), acc[r]);
}
#elif defined(__AVX2__)
/* The AVX2 form, a token at a time: the dot product's 16 lanes (as the plain loop's acc[16]) in
 * two vectors, the low one summing elements 16 v .. 16 v + 7, then the row update. Tiles of the
 * AVX-512 kind ran slower here (57 against 29-39 ms a step on the small bench shape): 16 vector
 * registers do not hold a tile's gradient, weights and dot products. Returns the dot product. */
static inline float dec_bwd_token(float *dw, const float *w, const float *g, float v, int D)
{
    __m256 dl = _mm256_setzero_ps(), dh = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= D; i += 16) {
        dl = _mm256_add_ps(dl, _mm256_mul_ps(_mm256_loadu_ps(g + i), _mm256_loadu_ps(w + i)));
        dh = _mm256_add_ps(dh, _mm256_mul_ps(_mm256_loadu_ps(g + i + 8), _mm256_loadu_ps(w + i + 8)));
    }
    float lane[16], dot = 0;
    _mm256_storeu_ps(lane, dl);
    _mm256_storeu_ps(lane + 8, dh);
    for (int r = 0; r < 16; r++) dot += lane[r];
    for (; i < D; i++) dot += g[i] * w[i];
    __m256 vv = _mm256_set1_ps(v);
    for (i = 0; i + 8 <= D; i += 8)
        _mm256_storeu_ps(dw + i, _mm256_add_ps(_mm256_loadu_ps(dw + i),
                                               _mm256_mul_ps(vv, _mm256_loadu_ps(g + i))));
    for (; i < D; i++) dw[i] += v * g[i];
    return dot;
}
#endif

/* Latent j's entries [qa, qb) of its list, in list order: dW_dec's row j += val * in row of each
 * entry's token; dval[entry] = in row . W_dec row j (0 where val is 0). (unused: bwd_walk's
 * per-latent sum, which only the encoder's scatter keeps.) */
static void dec_bwd_latent(const tr_args *a, int64_t j, int64_t qa, int64_t qb, float *unused)
{
    int D = a->D;
    const float *w = a->W + (int64_t)j * D;
    float *dw = a->dW + (int64_t)j * D;
#if defined(__AVX512F__)
    /* tokens in groups, the row in tiles of 8 vectors: see dec_bwd_tile */
    int nv = D / 16;
    for (int64_t q0 = qa; q0 < qb; q0 += BWD_GROUP) {
        int64_t q1 = qb - q0 < BWD_GROUP ? qb : q0 + BWD_GROUP;
        __m512 dacc[BWD_GROUP];
        int v0 = 0;
        for (; v0 + 8 <= nv; v0 += 8) dec_bwd_tile(a, dw, w, q0, q1, v0, 8, dacc, v0 == 0);
        if (v0 < nv) dec_bwd_tile(a, dw, w, q0, q1, v0, nv - v0, dacc, v0 == 0);
        for (int64_t q = q0; q < q1; q++) {
            int64_t e = a->tent[q];
            float v = a->val[e];
            if (v == 0) { /* ReLU-clipped: no gradient */
                a->dval[e] = 0;
                continue;
            }
            const float *g = a->in + (int64_t)a->ttok[q] * D;
            float lane[16] = {0}, dot = 0;
            if (nv) _mm512_storeu_ps(lane, dacc[q - q0]);
            for (int r = 0; r < 16; r++) dot += lane[r];
            for (int i = 16 * nv; i < D; i++) dot += g[i] * w[i];
            for (int i = 16 * nv; i < D; i++) dw[i] += v * g[i];
            a->dval[e] = dot;
        }
    }
#elif defined(__AVX2__)
    for (int64_t q = qa; q < qb; q++) {
        if (q + GATHER_AHEAD / 2 < qb) /* whole rows: half as far ahead */
            prefetch_floats(a->in + (int64_t)a->ttok[q + GATHER_AHEAD / 2] * D, D);
        int64_t e = a->tent[q];
        float v = a->val[e];
        a->dval[e] = v == 0 ? 0 : dec_bwd_token(dw, w, a->in + (int64_t)a->ttok[q] * D, v, D);
    }
#else
    for (int64_t q = qa; q < qb; q++) {
        int64_t e = a->tent[q];
        const float *g = a->in + (int64_t)a->ttok[q] * D;
        float v = a->val[e];
        if (v == 0) { /* ReLU-clipped: no gradient (adding 0 * g would change no bit) */
            a->dval[e] = 0;
            continue;
        }
        /* 16 partial sums so the dot product vectorises without reassociation flags; the
           update is a separate plain loop (fused, neither vectorised: 4x slower) */
        float acc[16] = {0};
        int i = 0;
        for (; i + 16 <= D; i += 16)
            for (int r = 0; r < 16; r++) acc[r] += g[i + r] * w[i + r];
        float dot = 0;
        for (int r = 0; r < 16; r++) dot += acc[r];
        for (; i < D; i++) dot += g[i] * w[i];
        for (i = 0; i < D; i++) dw[i] += v * g[i];
        a->dval[e] = dot;
    }
#endif
}

/* The gradient scatters walk latent by latent: each latent's tokens are a few random rows of
 * `in` (dxhat, xc) that no cache keeps between latents. AuxK's latents are the other kind: the
 * dead latents, each among the top k_aux of most tokens (at d_sae 24576 with 100-250 dead, every
 * dead latent for every token), so each re-read all of `in` (12.6 MB at batch 4096, d_in 768)
 * from L3 or memory. A range of the walk (the latents with entries only, so that the dead ones
 * share ranges) whose latents average BWD_DENSE entries or more walks their lists together
 * instead, a block of tokens (BWD_BLOCK_BYTES of `in`, kept in L2) at a time: every latent takes
 * its entries inside the block, then the next block. Each latent still visits its entries in
 * list order, so the bits are those of the latent-at-a-time walk. */
enum { BWD_DENSE = 256, BWD_BLOCK_BYTES = 1 << 18 };

/* Latents [r0, r1) of the walk, at most LATENT_GRAIN (par_for's ranges). */
static void bwd_walk(const tr_args *a, int64_t r0, int64_t r1,
                     void (*latent)(const tr_args *, int64_t j, int64_t qa, int64_t qb, float *acc),
                     float *acc /* [r1 - r0] per-latent sums for `latent`, or NULL */)
{
    int64_t n = 0;
    for (int64_t r = r0; r < r1; r++) {
        int64_t j = walk_latent(a, r);
        n += a->tptr[j + 1] - a->tptr[j];
    }
    if (n < (int64_t)BWD_DENSE * (r1 - r0)) {
        for (int64_t r = r0; r < r1; r++) {
            int64_t j = walk_latent(a, r);
            latent(a, j, a->tptr[j], a->tptr[j + 1], acc ? acc + (r - r0) : NULL);
        }
        return;
    }
    int64_t cur[LATENT_GRAIN];
    for (int64_t r = r0; r < r1; r++) cur[r - r0] = a->tptr[walk_latent(a, r)];
    int rows = BWD_BLOCK_BYTES / (int)sizeof(float) / a->D;
    if (rows < 16) rows = 16;
    for (int64_t t1 = rows, left = 1; left; t1 += rows) {
        left = 0;
        for (int64_t r = r0; r < r1; r++) {
            int64_t j = walk_latent(a, r), q = cur[r - r0], qe = a->tptr[j + 1], qb = q;
            while (qb < qe && a->ttok[qb] < t1) qb++;
            if (qb > q) latent(a, j, q, qb, acc ? acc + (r - r0) : NULL);
            cur[r - r0] = qb;
            left |= qb < qe;
        }
    }
}

static void decode_bwd_part(void *p, int tid, int64_t r0, int64_t r1)
{
    bwd_walk(p, r0, r1, dec_bwd_latent, NULL);
}

void sae_k_decode_sparse_backward(float *dW_dec, float *dval, const float *dxhat,
                                  const int64_t *tptr, const int64_t *tent, const int *ttok,
                                  const float *val, const float *W_dec, int S, int D)
{
    int64_t n;
    int *lat = entry_latents(tptr, S, &n, NULL);
    tr_args a = {.dW = dW_dec, .dval = dval, .in = dxhat, .val = val, .W = W_dec, .tptr = tptr,
                 .tent = tent, .ttok = ttok, .lat = lat, .S = S, .D = D};
    par_for(decode_bwd_part, &a, n, LATENT_GRAIN, n_threads((tptr[S] - tptr[0]) * (int64_t)D));
    mem_free(lat);
}

#ifdef HAVE_VF
/* Vectors [v0, v0 + NV) (NV at most 8) of latent j's encoder gradient row over its tokens, in
 * registers (per element the same mul and add in the same token order as the plain loop). */
static inline __attribute__((always_inline)) void
enc_bwd_tile(const tr_args *a, float *dw, int64_t q0, int64_t q1, int v0, int NV)
{
    vf acc[8];
    for (int r = 0; r < NV; r++) acc[r] = vf_load(dw + VF_W * (v0 + r));
    for (int64_t q = q0; q < q1; q++) {
        if (q + GATHER_AHEAD < q1) /* the tile of a token ahead: random rows, no prefetcher */
            prefetch_floats(a->in + (int64_t)a->ttok[q + GATHER_AHEAD] * a->D + VF_W * v0, VF_W * NV);
        float g = a->val[a->tent[q]];
        if (g == 0) continue;
        const float *c = a->in + (int64_t)a->ttok[q] * a->D + VF_W * v0;
        vf gv = vf_set1(g);
        for (int r = 0; r < NV; r++) acc[r] = vf_add(acc[r], vf_mul(gv, vf_load(c + VF_W * r)));
    }
    for (int r = 0; r < NV; r++) vf_store(dw + VF_W * (v0 + r), acc[r]);
}
#endif

/* Latent j's entries [qa, qb), in list order: dW_encT's row j += dpre * xc row of each entry's
 * token; *gsum += dpre (b_enc's gradient, added once the whole list is done). */
static void enc_bwd_latent(const tr_args *a, int64_t j, int64_t qa, int64_t qb, float *gsum)
{
    int D = a->D;
    float *dw = a->dW + (int64_t)j * D;
    int i0 = 0;
#ifdef HAVE_VF
    int nv = D / VF_W, v0 = 0;
    for (; v0 + 8 <= nv; v0 += 8) enc_bwd_tile(a, dw, qa, qb, v0, 8);
    if (v0 < nv) enc_bwd_tile(a, dw, qa, qb, v0, nv - v0);
    i0 = VF_W * nv;
#endif
    for (int64_t q = qa; q < qb; q++) {
        float g = a->val[a->tent[q]];
        if (g == 0) continue;
        const float *c = a->in + (int64_t)a->ttok[q] * D;
        for (int i = i0; i < D; i++) dw[i] += g * c[i];
        *gsum += g;
    }
}

static void encode_bwd_part(void *p, int tid, int64_t r0, int64_t r1)
{
    tr_args *a = p;
    float gsum[LATENT_GRAIN] = {0};
    bwd_walk(a, r0, r1, enc_bwd_latent, gsum);
    for (int64_t r = r0; r < r1; r++) a->db[walk_latent(a, r)] += gsum[r - r0];
}

void sae_k_encode_sparse_backward(float *dW_encT, float *db_enc, const float *dpre,
                                  const int64_t *tptr, const int64_t *tent, const int *ttok,
                                  const float *xc, int S, int D)
{
    int64_t n;
    int *lat = entry_latents(tptr, S, &n, db_enc);
    tr_args a = {.dW = dW_encT, .db = db_enc, .in = xc, .val = dpre, .tptr = tptr, .tent = tent,
                 .ttok = ttok, .lat = lat, .S = S, .D = D};
    par_for(encode_bwd_part, &a, n, LATENT_GRAIN, n_threads((tptr[S] - tptr[0]) * (int64_t)D));
    mem_free(lat);
}

/* One OpenBLAS thread: waking its pool for a GEMV of a few million MACs left its workers
 * spinning (sched_yield) through the kernels that follow; a GEMV's result does not depend on the
 * thread count (each output entry is one thread's dot product). */
void sae_k_bdec_from_enc(float *db_dec, const float *g, const float *W_encT, int D, int S)
{
    int nb = openblas_get_num_threads();
    if (nb > 1) openblas_set_num_threads(1);
    cblas_sgemv(CblasRowMajor, CblasTrans, S, D, -1.0f, W_encT, D, g, 1, 1.0f, db_dec, 1);
    if (nb > 1) openblas_set_num_threads(nb);
}

void sae_k_remove_parallel(float *dW, const float *W, int S, int D)
{
    for (int j = 0; j < S; j++) {
        float *g = dW + (int64_t)j * D;
        const float *w = W + (int64_t)j * D;
        float dot = 0;
        for (int i = 0; i < D; i++) dot += g[i] * w[i];
        for (int i = 0; i < D; i++) g[i] -= dot * w[i];
    }
}

void sae_k_normalize_rows(float *W, int S, int D)
{
    for (int j = 0; j < S; j++) {
        float *w = W + (int64_t)j * D;
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)w[i] * w[i];
        if (ss <= 0) continue;
        float inv = (float)(1.0 / sqrt(ss));
        for (int i = 0; i < D; i++) w[i] *= inv;
    }
}

typedef struct {
    float *p, *g, *m, *v;
    int64_t n, r0; /* unit rows: p[r0 .. r0 + S*D) (S 0: none) */
    int S, D;
    float b1, b2, eps, step, ib2;
    float gs; /* the gradient's scale (gradient clipping; 1: as is) */
} adam_args;

static void adam_range(const adam_args *a, int64_t i0, int64_t i1)
{
    float *p = a->p, *g = a->g, *m = a->m, *v = a->v, b1 = a->b1, b2 = a->b2, eps = a->eps;
    float step = a->step, ib2 = a->ib2, gs = a->gs;
    int64_t i = i0;
#ifdef HAVE_VF
    /* The same operations in the same order as the loop below (no FMA: C11 mode contracts
       nothing, and IEEE sqrt and division round the same in a vector), VF_W at a time: the
       scalar loop was bound by its divisions and square roots, not by memory (7.5 ms of a 110 ms
       step); GCC keeps sqrtf a call there, so it does not vectorise it itself */
    const vf vb1 = vf_set1(b1), vc1 = vf_set1(1 - b1), vb2 = vf_set1(b2), vc2 = vf_set1(1 - b2),
             veps = vf_set1(eps), vstep = vf_set1(step), vib2 = vf_set1(ib2), vgs = vf_set1(gs),
             zero = vf_zero();
    for (; i + VF_W <= i1; i += VF_W) {
        vf gi = vf_mul(vf_load(g + i), vgs);
        vf mi = vf_add(vf_mul(vb1, vf_load(m + i)), vf_mul(vc1, gi));
        vf vi = vf_add(vf_mul(vb2, vf_load(v + i)), vf_mul(vf_mul(vc2, gi), gi));
        vf_store(m + i, mi);
        vf_store(v + i, vi);
        vf den = vf_add(vf_sqrt(vf_mul(vi, vib2)), veps);
        vf upd = vf_div(vf_mul(vstep, mi), den);
        vf_store(p + i, vf_sub(vf_load(p + i), upd));
        vf_store(g + i, zero);
    }
#endif
    for (; i < i1; i++) {
        float gi = g[i] * gs; /* x 1.0f is exact: unclipped steps keep their bits */
        float mi = b1 * m[i] + (1 - b1) * gi;
        float vi = b2 * v[i] + (1 - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] -= step * mi / (sqrtf(vi * ib2) + eps);
        g[i] = 0;
    }
}

static void adam_part(void *arg, int tid, int64_t i0, int64_t i1)
{
    adam_range(arg, i0, i1);
}

void sae_k_adam(float *p, float *g, float *m, float *v, int64_t n, float lr, float b1, float b2,
                float eps, int64_t t, float gscale)
{
    __atomic_add_fetch(&weights_gen, 1, __ATOMIC_RELAXED);
    float bc1 = (float)(1.0 - pow(b1, (double)t)), bc2 = (float)(1.0 - pow(b2, (double)t));
    adam_args a = {.p = p, .g = g, .m = m, .v = v, .n = n, .b1 = b1, .b2 = b2, .eps = eps,
                   .step = lr / bc1, .ib2 = 1.0f / bc2, .gs = gscale};
    par_for(adam_part, &a, n, ELEM_GRAIN, n_threads(n)); /* elementwise: any split, same bits */
}

enum { ROW_GROUP = 8 };

/* Rows [j0, j1) of the unit-row block, ROW_GROUP rows at a time: each row's dot product and
 * squared norm are the serial sums of sae_k_remove_parallel and sae_k_normalize_rows (same
 * order, same bits); interleaving the rows' sums only lets their additions overlap. */
static void unit_rows(const adam_args *a, int j0, int j1)
{
    int D = a->D;
    for (int j = j0; j < j1; j += ROW_GROUP) {
        int nr = j1 - j < ROW_GROUP ? j1 - j : ROW_GROUP;
        int64_t o = a->r0 + (int64_t)j * D;
        float *w = a->p + o, *gr = a->g + o;
        if (a->gs != 1.0f) /* scaled here, in cache, as a separate pass would have before the dot */
            for (int64_t i = 0; i < (int64_t)nr * D; i++) gr[i] *= a->gs;
        float dot[ROW_GROUP] = {0};
        for (int i = 0; i < D; i++)
            for (int r = 0; r < nr; r++) dot[r] += gr[(int64_t)r * D + i] * w[(int64_t)r * D + i];
        for (int r = 0; r < nr; r++) {
            float *g = gr + (int64_t)r * D;
            const float *wr = w + (int64_t)r * D;
            for (int i = 0; i < D; i++) g[i] -= dot[r] * wr[i];
        }
        adam_args u = *a;
        u.gs = 1.0f;
        adam_range(&u, o, o + (int64_t)nr * D);
        double ss[ROW_GROUP] = {0};
        for (int i = 0; i < D; i++)
            for (int r = 0; r < nr; r++)
                ss[r] += (double)w[(int64_t)r * D + i] * w[(int64_t)r * D + i];
        for (int r = 0; r < nr; r++) {
            if (ss[r] <= 0) continue;
            float inv = (float)(1.0 / sqrt(ss[r]));
            float *wr = w + (int64_t)r * D;
            for (int i = 0; i < D; i++) wr[i] *= inv;
        }
    }
}

/* The ranges of sae_k_adam_unit_rows: the elements before the unit rows in ranges of
 * ELEM_GRAIN, the rows in ranges of ROWS_GRAIN groups, the elements after them in ranges of
 * ELEM_GRAIN, numbered in that order (par_for over the range numbers). */
enum { ROWS_GRAIN = 4 };
typedef struct {
    int64_t nhead, ngroups, nrow, ntail; /* ranges of each part (ngroups: row groups in all) */
} rows_plan;

static rows_plan rows_plan_of(const adam_args *a)
{
    rows_plan q;
    int64_t tail = a->n - a->r0 - (int64_t)a->S * a->D;
    q.nhead = (a->r0 + ELEM_GRAIN - 1) / ELEM_GRAIN;
    q.ngroups = (a->S + ROW_GROUP - 1) / ROW_GROUP;
    q.nrow = (q.ngroups + ROWS_GRAIN - 1) / ROWS_GRAIN;
    q.ntail = (tail + ELEM_GRAIN - 1) / ELEM_GRAIN;
    return q;
}

static void adam_rows_part(void *arg, int tid, int64_t c0, int64_t c1)
{
    adam_args *a = arg;
    rows_plan q = rows_plan_of(a);
    int64_t e1 = a->r0 + (int64_t)a->S * a->D;
    for (int64_t c = c0; c < c1; c++) {
        if (c < q.nhead) {
            int64_t i0 = c * ELEM_GRAIN;
            adam_range(a, i0, a->r0 - i0 < ELEM_GRAIN ? a->r0 : i0 + ELEM_GRAIN);
        } else if (c < q.nhead + q.nrow) {
            int64_t g0 = (c - q.nhead) * ROWS_GRAIN;
            int64_t g1 = q.ngroups - g0 < ROWS_GRAIN ? q.ngroups : g0 + ROWS_GRAIN;
            int j1 = (int)(g1 * ROW_GROUP);
            unit_rows(a, (int)(g0 * ROW_GROUP), j1 < a->S ? j1 : a->S);
        } else {
            int64_t i0 = e1 + (c - q.nhead - q.nrow) * ELEM_GRAIN;
            adam_range(a, i0, a->n - i0 < ELEM_GRAIN ? a->n : i0 + ELEM_GRAIN);
        }
    }
}

void sae_k_adam_unit_rows(float *p, float *g, float *m, float *v, int64_t n, int64_t r0, int S,
                          int D, float lr, float b1, float b2, float eps, int64_t t, float gscale)
{
    __atomic_add_fetch(&weights_gen, 1, __ATOMIC_RELAXED);
    float bc1 = (float)(1.0 - pow(b1, (double)t)), bc2 = (float)(1.0 - pow(b2, (double)t));
    adam_args a = {.p = p, .g = g, .m = m, .v = v, .n = n, .r0 = r0, .S = S, .D = D, .b1 = b1,
                   .b2 = b2, .eps = eps, .step = lr / bc1, .ib2 = 1.0f / bc2, .gs = gscale};
    rows_plan q = rows_plan_of(&a);
    /* row- and elementwise: the same bits for any split */
    par_for(adam_rows_part, &a, q.nhead + q.nrow + q.ntail, 1, n_threads(n));
}
