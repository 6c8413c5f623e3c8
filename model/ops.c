/* ops.c - GPT-2 kernels (see ops.h). */
#include "model/ops.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/par.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define OPS_AVX2 1
#endif

const char *op_blas_core(void)
{
    const char *c = openblas_get_corename();
    return c ? c : "unknown";
}

int op_blas_core_setenv(void)
{
    if (getenv("OPENBLAS_CORETYPE") || strcmp(op_blas_core(), "Prescott") != 0) return 0;
    const char *core = NULL;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init(); /* libgcc's checks include the OS's XCR0 state for AVX and AVX-512 */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        core = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        core = "Haswell";
#endif
    return core && !setenv("OPENBLAS_CORETYPE", core, 1);
}

/* ---- threads for the elementwise kernels -------------------------------------------------
 * In bf16, LayerNorm, bias + GELU and the softmax split their rows over par_for's threads and
 * the attention's per-(batch, head) products split their heads: each row or head is computed by
 * the same code as on one thread, so the bits depend neither on the split nor on which thread
 * takes a range. Before, all of this ran on one core while the other idled between matmuls
 * (GPT-2 small to layer 5 in bf16 on 2 cores: attention 38 of 184 ms per batch, docs/model.md).
 * There OpenBLAS is held at one thread and oneDNN's OpenMP threads sleep between calls, so
 * nothing spins against these threads. fp32 stays on one thread: after each sgemm OpenBLAS's
 * idle workers spin for a while, and against them the threaded loops made the small model's
 * training step 10-15% slower (docs/model.md). Small problems stay on one thread too. */
static int prec_bf16; /* the forward matmuls' precision (op_set_precision) */

static int op_threads(size_t work)
{
    if (!prec_bf16 || work < ((size_t)1 << 17)) return 1;
    return par_threads();
}

/* The row kernels' arguments: out and its per-row aux1/aux2 (LayerNorm's mean, rstd); res, the
 * rows updated in place (the residual; GELU's pre-activations); N rows of C (softmax: rows of
 * [T, T] blocks). */
typedef struct {
    float *out, *aux1, *aux2, *res;
    const float *x, *add, *add_bias, *w, *b;
    float eps;
    int N, C, T, kind;
} rows_args;

/* rows [n0, n1) of n for thread tid of nt */
/* par_for's ranges (rows; heads): a thread that starts late takes fewer (common/par.h) */
enum { ROW_GRAIN = 16, HEAD_GRAIN = 1 };

/* ---- exp and tanh without libm calls in the hot loops ------------------------------------
 * expf via range reduction x = n ln2 + r, |r| <= ln2/2, and a degree-6 polynomial (relative
 * error ~2e-7, same as the AVX2 path which uses the identical coefficients and operation order
 * up to FMA contraction). Inputs below -87 give 0, which softmax and GELU need. */
#define EXP_HI 88.3762626647949f
#define EXP_LO -87.0f
static const float c_log2e = 1.44269504088896341f, c_ln2hi = 0.693359375f,
                   c_ln2lo = -2.12194440e-4f;
static const float ep[7] = {1.0f, 1.0f, 0.5f, 1.6666665e-1f, 4.1666519e-2f, 8.3333880e-3f,
                            1.3981999e-3f};

static inline float exp_s(float x)
{
    if (x < EXP_LO) return 0.0f;
    if (!(x <= EXP_HI)) {
        /* NaN propagates: converting nearbyintf(NaN) to int32 below would be undefined */
        if (x != x) return x;
        x = EXP_HI;
    }
    float n = nearbyintf(x * c_log2e);
    float r = x - n * c_ln2hi;
    r = r - n * c_ln2lo;
    float p = ep[6];
    p = p * r + ep[5];
    p = p * r + ep[4];
    p = p * r + ep[3];
    p = p * r + ep[2];
    p = p * r + ep[1];
    p = p * r + ep[0];
    int32_t bits = ((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &bits, 4);
    return p * s;
}

#ifdef OPS_AVX2
static inline __m256 exp_v(__m256 x)
{
    __m256 lo_mask = _mm256_cmp_ps(x, _mm256_set1_ps(EXP_LO), _CMP_LT_OQ);
    x = _mm256_min_ps(x, _mm256_set1_ps(EXP_HI));
    x = _mm256_max_ps(x, _mm256_set1_ps(EXP_LO - 1.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(c_log2e)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(c_ln2hi), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(c_ln2lo), r);
    __m256 p = _mm256_set1_ps(ep[6]);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ep[5]));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ep[4]));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ep[3]));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ep[2]));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ep[1]));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ep[0]));
    __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 res = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
    return _mm256_andnot_ps(lo_mask, res);
}
#endif

/* tanh(u) = sign(u) (1 - e) / (1 + e), e = exp(-2|u|): no cancellation problem for small |u|
 * beyond ~1e-7 absolute, which is what GELU needs (it multiplies by 0.5 x). */
static inline float tanh_s(float u)
{
    float a = fabsf(u), e = exp_s(-2.0f * a), t = (1.0f - e) / (1.0f + e);
    return u < 0 ? -t : t;
}

#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

/* ---- embeddings ----------------------------------------------------------------------- */
void op_embed_forward(float *out, float *embed, float *pos, const int *tokens, const float *wte,
                      const float *wpe, int B, int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t n = (size_t)b * T + t;
            const float *we = wte + (size_t)tokens[n] * C, *pe = wpe + (size_t)t * C;
            float *o = out + n * C;
            if (embed) memcpy(embed + n * C, we, sizeof(float) * C);
            if (pos) memcpy(pos + n * C, pe, sizeof(float) * C);
            for (int i = 0; i < C; i++) o[i] = we[i] + pe[i];
        }
}

void op_embed_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T,
                       int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t n = (size_t)b * T + t;
            const float *d = dout + n * C;
            float *dw = dwte + (size_t)tokens[n] * C, *dp = dwpe + (size_t)t * C;
            for (int i = 0; i < C; i++) {
                dw[i] += d[i];
                dp[i] += d[i];
            }
        }
}

/* ---- LayerNorm ------------------------------------------------------------------------ */
#ifdef OPS_AVX2
static inline float hsum8(__m256 v)
{
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}
#endif

static inline void ln_row(float *o, float *mean, float *rstd, const float *x, const float *w,
                          const float *b, float eps, int C)
{
    /* two-pass mean/variance in float: rows are short (C <= a few thousand) */
    float m = 0, v = 0;
    int i = 0;
#ifdef OPS_AVX2
    __m256 acc = _mm256_setzero_ps();
    for (; i + 8 <= C; i += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + i));
    m = hsum8(acc);
#endif
    for (; i < C; i++) m += x[i];
    m /= (float)C;
    i = 0;
#ifdef OPS_AVX2
    __m256 vm = _mm256_set1_ps(m);
    acc = _mm256_setzero_ps();
    for (; i + 8 <= C; i += 8) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        acc = _mm256_fmadd_ps(d, d, acc);
    }
    v = hsum8(acc);
#endif
    for (; i < C; i++) {
        float d = x[i] - m;
        v += d * d;
    }
    v /= (float)C;
    float s = 1.0f / sqrtf(v + eps);
    i = 0;
#ifdef OPS_AVX2
    __m256 vs = _mm256_set1_ps(s);
    for (; i + 8 <= C; i += 8) {
        __m256 n = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vs);
        _mm256_storeu_ps(o + i, _mm256_fmadd_ps(n, _mm256_loadu_ps(w + i), _mm256_loadu_ps(b + i)));
    }
#endif
    for (; i < C; i++) o[i] = (x[i] - m) * s * w[i] + b[i];
    if (mean) *mean = m;
    if (rstd) *rstd = s;
}

static void ln_part(void *p, int tid, int64_t n0, int64_t n1)
{
    rows_args *a = p;
    int C = a->C;
    for (int64_t n = n0; n < n1; n++)
        ln_row(a->out + (size_t)n * C, a->aux1 ? a->aux1 + n : NULL, a->aux2 ? a->aux2 + n : NULL,
               a->x + (size_t)n * C, a->w, a->b, a->eps, C);
}

void op_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                          const float *b, float eps, int N, int C)
{
    rows_args a = {.out = out, .aux1 = mean, .aux2 = rstd, .x = x, .w = w, .b = b, .eps = eps,
                   .N = N, .C = C};
    par_for(ln_part, &a, N, ROW_GRAIN, op_threads((size_t)N * C));
}

static inline void add_rows(float *r, const float *a, const float *bias, int C)
{
    int i = 0;
#ifdef OPS_AVX2
    for (; i + 8 <= C; i += 8) {
        __m256 x = _mm256_loadu_ps(r + i);
        if (a) x = _mm256_add_ps(x, _mm256_loadu_ps(a + i));
        if (bias) x = _mm256_add_ps(x, _mm256_loadu_ps(bias + i));
        _mm256_storeu_ps(r + i, x);
    }
#endif
    for (; i < C; i++) r[i] = r[i] + (a ? a[i] : 0.0f) + (bias ? bias[i] : 0.0f);
}

static void res_ln_part(void *p, int tid, int64_t n0, int64_t n1)
{
    rows_args *a = p;
    int C = a->C;
    for (int64_t n = n0; n < n1; n++) {
        float *r = a->res + (size_t)n * C;
        if (a->add || a->add_bias)
            add_rows(r, a->add ? a->add + (size_t)n * C : NULL, a->add_bias, C);
        ln_row(a->out + (size_t)n * C, a->aux1 ? a->aux1 + n : NULL, a->aux2 ? a->aux2 + n : NULL,
               r, a->w, a->b, a->eps, C);
    }
}

void op_residual_layernorm_forward(float *out, float *mean, float *rstd, float *res,
                                   const float *add, const float *add_bias, const float *w,
                                   const float *b, float eps, int N, int C)
{
    rows_args a = {.out = out, .aux1 = mean, .aux2 = rstd, .res = res, .add = add,
                   .add_bias = add_bias, .w = w, .b = b, .eps = eps, .N = N, .C = C};
    par_for(res_ln_part, &a, N, ROW_GRAIN, op_threads((size_t)N * C));
}

void op_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                           const float *w, const float *mean, const float *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * C, *xi = x + (size_t)n * C;
        float *dxi = dx + (size_t)n * C;
        float m = mean[n], s = rstd[n];
        float dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int i = 0; i < C; i++) {
            float norm = (xi[i] - m) * s, dnorm = w[i] * d[i];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= (float)C;
        dnorm_norm_mean /= (float)C;
        for (int i = 0; i < C; i++) {
            float norm = (xi[i] - m) * s, dnorm = w[i] * d[i];
            db[i] += d[i];
            dw[i] += norm * d[i];
            dxi[i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
        }
    }
}

/* ---- linear layers -------------------------------------------------------------------- */
void op_add_bias(float *x, const float *bias, int N, int C)
{
    for (int n = 0; n < N; n++) add_rows(x + (size_t)n * C, NULL, bias, C);
}

int op_set_precision(int p)
{
    if (p == OP_PRECISION_AUTO) p = op_bf16_supported() ? OP_PRECISION_BF16 : OP_PRECISION_FP32;
    if (p == OP_PRECISION_BF16 && !op_bf16_supported()) return op_bf16_refuse();
    prec_bf16 = p == OP_PRECISION_BF16;
    return OK;
}

int op_precision_bf16(void) { return prec_bf16; }

void op_matmul_forward(float *out, int ldo, const float *x, const float *W, int ldw,
                       const float *bias, int N, int C, int OC, float beta)
{
    /* bf16: one oneDNN matmul with the bias and the accumulation fused; fp32 if it fails */
    if (prec_bf16 && !op_bf16_matmul(out, ldo, x, W, ldw, 0, bias, N, C, OC, beta)) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, OC, C, 1.0f, x, C, W, ldw, beta, out,
                ldo);
    if (bias)
        for (int n = 0; n < N; n++) add_rows(out + (size_t)n * ldo, NULL, bias, OC);
}

void op_matmul_backward(float *dx, float dx_beta, float *dW, int ldw, float *dbias,
                        const float *dout, int ldd, const float *x, const float *W, int N, int C,
                        int OC)
{
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, C, OC, 1.0f, dout, ldd, W, ldw,
                    dx_beta, dx, C);
    if (dW)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, OC, N, 1.0f, x, C, dout, ldd, 1.0f,
                    dW, ldw);
    if (dbias)
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * ldd;
            for (int i = 0; i < OC; i++) dbias[i] += d[i];
        }
}

/* ---- GELU ----------------------------------------------------------------------------- */
static inline float gelu_s(float x, int kind)
{
    if (kind == OP_GELU_ERF) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    return 0.5f * x * (1.0f + tanh_s(GELU_S * (x + GELU_C * x * x * x)));
}

static void gelu_rows(float *post, float *pre, const float *bias, int n0, int n1, int F, int kind)
{
    for (int n = n0; n < n1; n++) {
        float *p = pre + (size_t)n * F, *o = post + (size_t)n * F;
        int i = 0;
#ifdef OPS_AVX2
        if (kind == OP_GELU_TANH) {
            const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f),
                         s = _mm256_set1_ps(GELU_S), c = _mm256_set1_ps(GELU_C),
                         m2 = _mm256_set1_ps(-2.0f), sign = _mm256_set1_ps(-0.0f);
            for (; i + 8 <= F; i += 8) {
                __m256 x = _mm256_loadu_ps(p + i);
                if (bias) x = _mm256_add_ps(x, _mm256_loadu_ps(bias + i));
                _mm256_storeu_ps(p + i, x);
                __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
                __m256 u = _mm256_mul_ps(s, _mm256_fmadd_ps(c, x3, x));
                __m256 a = _mm256_andnot_ps(sign, u);
                __m256 e = exp_v(_mm256_mul_ps(m2, a));
                __m256 t = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
                t = _mm256_or_ps(t, _mm256_and_ps(sign, u)); /* copy sign of u */
                _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(one, t)));
            }
        }
#endif
        for (; i < F; i++) {
            float x = p[i] + (bias ? bias[i] : 0.0f);
            p[i] = x;
            o[i] = gelu_s(x, kind);
        }
    }
}

static void gelu_part(void *p, int tid, int64_t n0, int64_t n1)
{
    rows_args *a = p;
    gelu_rows(a->out, a->res, a->add_bias, (int)n0, (int)n1, a->C, a->kind);
}

void op_bias_gelu_forward(float *post, float *pre, const float *bias, int N, int F, int kind)
{
    rows_args a = {.out = post, .res = pre, .add_bias = bias, .N = N, .C = F, .kind = kind};
    par_for(gelu_part, &a, N, ROW_GRAIN, op_threads((size_t)N * F));
}

void op_gelu_backward(float *dpre, const float *pre, const float *dpost, size_t n, int kind)
{
    size_t i = 0;
#ifdef OPS_AVX2
    if (kind == OP_GELU_TANH) {
        const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f),
                     s = _mm256_set1_ps(GELU_S), c = _mm256_set1_ps(GELU_C),
                     c3 = _mm256_set1_ps(3.0f * GELU_C), m2 = _mm256_set1_ps(-2.0f),
                     sign = _mm256_set1_ps(-0.0f);
        for (; i + 8 <= n; i += 8) {
            __m256 x = _mm256_loadu_ps(pre + i), x2 = _mm256_mul_ps(x, x);
            __m256 u = _mm256_mul_ps(s, _mm256_fmadd_ps(_mm256_mul_ps(c, x2), x, x));
            __m256 e = exp_v(_mm256_mul_ps(m2, _mm256_andnot_ps(sign, u)));
            __m256 t = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
            t = _mm256_or_ps(t, _mm256_and_ps(sign, u));
            __m256 sech2 = _mm256_fnmadd_ps(t, t, one);
            __m256 du = _mm256_mul_ps(s, _mm256_fmadd_ps(c3, x2, one));
            __m256 g = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_mul_ps(half, x), sech2), du,
                                       _mm256_mul_ps(half, _mm256_add_ps(one, t)));
            _mm256_storeu_ps(dpre + i, _mm256_mul_ps(g, _mm256_loadu_ps(dpost + i)));
        }
    }
#endif
    for (; i < n; i++) {
        float x = pre[i], g;
        if (kind == OP_GELU_ERF) {
            float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
            float pdf = 0.3989422804014327f * exp_s(-0.5f * x * x);
            g = cdf + x * pdf;
        } else {
            float u = GELU_S * (x + GELU_C * x * x * x);
            float t = tanh_s(u);
            float sech2 = 1.0f - t * t;
            g = 0.5f * (1.0f + t) + 0.5f * x * sech2 * GELU_S * (1.0f + 3.0f * GELU_C * x * x);
        }
        dpre[i] = g * dpost[i];
    }
}

void op_residual_forward(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* max of a row, vectorised (exact: max is order-independent) */
static float row_max(const float *l, int V)
{
    float mx = -INFINITY;
    int i = 0;
#ifdef OPS_AVX2
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (; i + 8 <= V; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(l + i));
    float tmp[8];
    _mm256_storeu_ps(tmp, vm);
    for (int j = 0; j < 8; j++) mx = tmp[j] > mx ? tmp[j] : mx;
#endif
    for (; i < V; i++) mx = l[i] > mx ? l[i] : mx;
    return mx;
}

/* out[i] = exp(l[i] - mx) * scale (out may alias l); returns the sum of exp(l[i] - mx) */
static double row_exp(float *out, const float *l, int V, float mx, float scale, int store)
{
    double sum = 0;
    int i = 0;
#ifdef OPS_AVX2
    __m256 vm = _mm256_set1_ps(mx), vs = _mm256_set1_ps(scale), acc = _mm256_setzero_ps();
    for (; i + 8 <= V; i += 8) {
        __m256 e = exp_v(_mm256_sub_ps(_mm256_loadu_ps(l + i), vm));
        acc = _mm256_add_ps(acc, e);
        if (store) _mm256_storeu_ps(out + i, _mm256_mul_ps(e, vs));
    }
    float tmp[8];
    _mm256_storeu_ps(tmp, acc);
    for (int j = 0; j < 8; j++) sum += tmp[j];
#endif
    for (; i < V; i++) {
        float e = exp_s(l[i] - mx);
        sum += e;
        if (store) out[i] = e * scale;
    }
    return sum;
}

/* ---- attention ------------------------------------------------------------------------ */
/* heads [h0, h1) of the B*H (batch, head) pairs */
static void scores_heads(float *att, const float *q, const float *k, int h0, int h1, int T, int C,
                         int H)
{
    int dh = C / H;
    float scale = 1.0f / sqrtf((float)dh);
    for (int bh = h0; bh < h1; bh++) {
        int b = bh / H, h = bh % H;
        float *a = att + (size_t)bh * T * T;
        const float *qb = q + (size_t)b * T * C + h * dh, *kb = k + (size_t)b * T * C + h * dh;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, dh, scale, qb, C, kb, C, 0.0f,
                    a, T);
        for (int t = 0; t < T; t++)
            for (int u = t + 1; u < T; u++) a[(size_t)t * T + u] = -INFINITY;
    }
}

static void values_heads(float *z, const float *att, const float *v, int h0, int h1, int T, int C,
                         int H)
{
    int dh = C / H;
    for (int bh = h0; bh < h1; bh++) {
        int b = bh / H, h = bh % H;
        const float *a = att + (size_t)bh * T * T;
        const float *vb = v + (size_t)b * T * C + h * dh;
        float *zb = z + (size_t)b * T * C + h * dh;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, dh, T, 1.0f, a, T, vb, C, 0.0f,
                    zb, C);
    }
}

typedef struct {
    float *out;
    const float *a, *b;
    int BH, T, C, H, values;
} heads_args;

static void heads_part(void *p, int tid, int64_t h0, int64_t h1)
{
    heads_args *a = p;
    if (a->values) values_heads(a->out, a->a, a->b, (int)h0, (int)h1, a->T, a->C, a->H);
    else scores_heads(a->out, a->a, a->b, (int)h0, (int)h1, a->T, a->C, a->H);
}

/* fp32: one call per head as always, each spread over OpenBLAS's threads (its bits depend on
 * that count, so the fp32 path keeps them); bf16: the heads over our threads, one OpenBLAS
 * thread per call (as extract already holds it in bf16). */
static void attention_heads(heads_args *a)
{
    int nt = op_threads((size_t)a->BH * a->T * a->T); /* 1 in fp32 */
    if (nt > a->BH) nt = a->BH;
    int nb = prec_bf16 ? openblas_get_num_threads() : 1; /* any nt: the same bits */
    if (nb > 1) openblas_set_num_threads(1);
    par_for(heads_part, a, a->BH, HEAD_GRAIN, nt);
    if (nb > 1) openblas_set_num_threads(nb);
}

void op_attention_scores(float *att, const float *q, const float *k, int B, int T, int C, int H)
{
    heads_args a = {.out = att, .a = q, .b = k, .BH = B * H, .T = T, .C = C, .H = H};
    attention_heads(&a);
}

static void softmax_part(void *p, int tid, int64_t r0, int64_t r1)
{
    rows_args *ar = p;
    int T = ar->T;
    float *att = ar->out;
    for (size_t r = (size_t)r0; r < (size_t)r1; r++) {
        float *a = att + r * T;
        int t = (int)(r % (size_t)T); /* row index inside its [T,T] block: valid cols 0..t */
        float mx = row_max(a, t + 1);
        if (mx == -INFINITY) mx = 0; /* a hook masked the whole row: all zeros below */
        double sum = row_exp(a, a, t + 1, mx, 1.0f, 1);
        float inv = sum > 0 ? (float)(1.0 / sum) : 0.0f;
        int u = 0;
#ifdef OPS_AVX2
        __m256 vi = _mm256_set1_ps(inv);
        for (; u + 8 <= t + 1; u += 8) _mm256_storeu_ps(a + u, _mm256_mul_ps(_mm256_loadu_ps(a + u), vi));
#endif
        for (; u <= t; u++) a[u] *= inv;
        if (t + 1 < T) memset(a + t + 1, 0, sizeof(float) * (size_t)(T - t - 1));
    }
}

void op_attention_softmax(float *att, int B, int T, int H)
{
    rows_args a = {.out = att, .N = B * H * T, .T = T};
    par_for(softmax_part, &a, (int64_t)B * H * T, ROW_GRAIN * 4, op_threads((size_t)B * H * T * T / 2));
}

void op_attention_values(float *z, const float *att, const float *v, int B, int T, int C, int H)
{
    heads_args a = {.out = z, .a = att, .b = v, .BH = B * H, .T = T, .C = C, .H = H, .values = 1};
    attention_heads(&a);
}

void op_attention_backward(float *dq, float *dk, float *dv, float *datt, const float *dz,
                           const float *q, const float *k, const float *v, const float *att,
                           int B, int T, int C, int H)
{
    int dh = C / H;
    float scale = 1.0f / sqrtf((float)dh);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t off = (size_t)b * T * C + h * dh;
            const float *a = att + ((size_t)b * H + h) * T * T;
            float *da = datt + ((size_t)b * H + h) * T * T;
            /* z = a v: da = dz v^T, dv += a^T dz */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, dh, 1.0f, dz + off, C,
                        v + off, C, 0.0f, da, T);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, dh, T, 1.0f, a, T, dz + off, C,
                        0.0f, dv + off, C);
            /* softmax backward; masked entries have a == 0 so their gradient is 0 */
            for (int t = 0; t < T; t++) {
                float *dr = da + (size_t)t * T;
                const float *ar = a + (size_t)t * T;
                float dot = 0;
                for (int u = 0; u <= t; u++) dot += ar[u] * dr[u];
                for (int u = 0; u <= t; u++) dr[u] = ar[u] * (dr[u] - dot) * scale;
                for (int u = t + 1; u < T; u++) dr[u] = 0;
            }
            /* s = q k^T * scale: dq += ds k, dk += ds^T q (scale folded into ds above) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, dh, T, 1.0f, da, T, k + off, C,
                        0.0f, dq + off, C);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, dh, T, 1.0f, da, T, q + off, C,
                        0.0f, dk + off, C);
        }
}

/* ---- unembedding and loss ------------------------------------------------------------- */
void op_logits_forward(float *logits, const float *x, const float *wte, int N, int C, int V)
{
    if (prec_bf16 && !op_bf16_matmul(logits, V, x, wte, C, 1, NULL, N, C, V, 0.0f)) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, V, C, 1.0f, x, C, wte, C, 0.0f, logits,
                V);
}

void op_logits_backward(float *dx, float *dwte, const float *dlogits, const float *x,
                        const float *wte, int N, int C, int V)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, V, 1.0f, dlogits, V, wte, C, 1.0f,
                dx, C);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, N, 1.0f, dlogits, V, x, C, 1.0f,
                dwte, C);
}

double op_crossentropy(float *logits, float *losses, const int *targets, int N, int V,
                       float dlogits_scale, long *count)
{
    double total = 0;
    long cnt = 0;
    for (int n = 0; n < N; n++) {
        float *l = logits + (size_t)n * V;
        int tg = targets[n];
        if (tg < 0) {
            if (losses) losses[n] = 0;
            if (dlogits_scale != 0) memset(l, 0, sizeof(float) * V);
            continue;
        }
        float mx = row_max(l, V);
        double sum = row_exp(NULL, l, V, mx, 1.0f, 0);
        float lt = l[tg];
        float loss = (float)((double)mx + log(sum) - (double)lt);
        if (losses) losses[n] = loss;
        total += loss;
        cnt++;
        if (dlogits_scale != 0) {
            row_exp(l, l, V, mx, (float)(1.0 / sum) * dlogits_scale, 1);
            l[tg] -= dlogits_scale;
        }
    }
    if (count) *count = cnt;
    return total;
}
