/* ops.h - the GPT-2 kernels, forward and backward (llm.c style).
 *
 * Plain functions over float32 buffers: outputs first, then inputs, then sizes. Every matrix is
 * row-major; weights are in Hugging Face Conv1D layout W[in, out] so a linear layer is
 * y[N,out] = x[N,in] @ W[in,out] + b. Large matmuls go through OpenBLAS cblas_sgemm.
 * Backward functions ACCUMULATE into their gradient outputs (the caller zeroes them once per
 * step), except where a comment says "overwrites". Scratch buffers are passed in; nothing here
 * allocates. No function is thread-unsafe beyond writing its outputs; OpenBLAS threads itself.
 * Precision: fp32 (the default, the PyTorch-exact path). op_set_precision(1) sends the forward
 * matmuls (op_matmul_forward, op_logits_forward) to the CPU's bf16 matrix engine through oneDNN
 * (model/ops_bf16.c, AVX512-BF16 or AMX): x and W rounded to bf16, products and sums in fp32,
 * bias, accumulation and output in fp32; LayerNorm, softmax, GELU, attention and every backward
 * stay fp32. A process-wide switch: set it before a run, not while kernels run.
 */
#ifndef SAELITE_OPS_H
#define SAELITE_OPS_H
#include <stddef.h>

/* out[N,C] = wte[tokens[n]] + wpe[n % T]  (N = B*T). embed/pos (may be NULL) receive the two
 * terms separately for the hook points. */
void op_embed_forward(float *out, float *embed, float *pos, const int *tokens, const float *wte,
                      const float *wpe, int B, int T, int C);
void op_embed_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T,
                       int C);

/* out[N,C] = (x - mean) * rstd * w + b; mean/rstd [N] saved for backward (may be NULL). */
void op_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w,
                          const float *b, float eps, int N, int C);
/* Fused residual + LayerNorm: res[N,C] += add[N,C] (+ add_bias[C] when non-NULL), then
 * out = LN(res). add may be NULL (only the bias is added). */
void op_residual_layernorm_forward(float *out, float *mean, float *rstd, float *res,
                                   const float *add, const float *add_bias, const float *w,
                                   const float *b, float eps, int N, int C);
void op_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                           const float *w, const float *mean, const float *rstd, int N, int C);

/* out[N, OC] (row stride ldo) = x[N,C] @ W[C,OC] (row stride ldw) + bias[OC] (NULL: none).
 * beta 0 overwrites out, 1 accumulates into it. */
void op_matmul_forward(float *out, int ldo, const float *x, const float *W, int ldw,
                       const float *bias, int N, int C, int OC, float beta);
/* dx[N,C] = dx_beta * dx + dout @ W^T (dx_beta 0 overwrites, 1 accumulates);
 * dW[C,OC] (row stride ldw) += x^T @ dout; dbias[OC] += sum_n dout.
 * dout has row stride ldd. Any of dx, dW, dbias may be NULL to skip it. */
void op_matmul_backward(float *dx, float dx_beta, float *dW, int ldw, float *dbias,
                        const float *dout, int ldd, const float *x, const float *W, int N, int C,
                        int OC);

/* GELU variants: 0 = tanh approximation ("gelu_new"), 1 = exact erf ("gelu"). */
enum { OP_GELU_TANH = 0, OP_GELU_ERF = 1 };
/* pre[N,F] += bias[F] (bias may be NULL), then post = gelu(pre). */
void op_bias_gelu_forward(float *post, float *pre, const float *bias, int N, int F, int kind);
/* dpre[n] = gelu'(pre[n]) * dpost[n]  (overwrites) */
void op_gelu_backward(float *dpre, const float *pre, const float *dpost, size_t n, int kind);

/* out[n] = a[n] + b[n] (aliasing out with a or b is fine) */
void op_residual_forward(float *out, const float *a, const float *b, size_t n);
/* x[N,C] += bias[C] */
void op_add_bias(float *x, const float *bias, int N, int C);

/* Causal self-attention, q/k/v/z in [B,T,H,dh] = [B,T,C] layout, att [B,H,T,T].
 * scores: att = q k^T / sqrt(dh), entries above the diagonal set to -inf.
 * softmax: att = softmax over the last axis in place (masked entries become exactly 0).
 * values: z = att @ v. */
void op_attention_scores(float *att, const float *q, const float *k, int B, int T, int C, int H);
void op_attention_softmax(float *att, int B, int T, int H);
void op_attention_values(float *z, const float *att, const float *v, int B, int T, int C, int H);
/* Backward of the three above. datt [B,H,T,T] is scratch. dq/dk/dv are overwritten. */
void op_attention_backward(float *dq, float *dk, float *dv, float *datt, const float *dz,
                           const float *q, const float *k, const float *v, const float *att,
                           int B, int T, int C, int H);

/* logits[N,V] = x[N,C] @ wte^T (wte [V,C]) */
void op_logits_forward(float *logits, const float *x, const float *wte, int N, int C, int V);
/* dx[N,C] += dlogits @ wte; dwte[V,C] += dlogits^T @ x */
void op_logits_backward(float *dx, float *dwte, const float *dlogits, const float *x,
                        const float *wte, int N, int C, int V);

/* Per-row softmax cross-entropy. losses[N] (may be NULL) = -log softmax(logits)[target], 0 for
 * target < 0. Returns the sum over counted rows and sets *count. When dlogits_scale != 0 the
 * logits are overwritten by dlogits = (softmax - onehot) * dlogits_scale (rows with target < 0
 * become 0). Targets outside [0,V) must be rejected by the caller. */
double op_crossentropy(float *logits, float *losses, const int *targets, int N, int V,
                       float dlogits_scale, long *count);

/* ---- bf16 forward matmuls (model/ops_bf16.c; the only user of oneDNN besides sae/) ---- */
/* 1 when oneDNN reports native bf16 dot products (avx512_core_bf16 or AMX) and SAELITE_NO_BF16
 * is unset, empty or "0". */
int op_bf16_supported(void);
const char *op_bf16_isa(void);  /* oneDNN's effective ISA: "avx512_core_amx", "avx2", ... */
const char *op_bf16_impl(void); /* the last matmul's implementation, "" before the first */
/* Why op_bf16_supported() is 0, for messages: "disabled by SAELITE_NO_BF16=1", "oneDNN's ISA is
 * avx2, capped by ONEDNN_MAX_CPU_ISA=AVX2", "this CPU has no bf16 dot products (oneDNN's ISA is
 * avx2; bf16 needs avx512_core_bf16 or AMX)"; "" when it is 1. op_bf16_refuse: ERR_ARG,
 * "precision bf16: <why>; HINT: ..." (the one refusal of extract, analyze and sae-train). */
const char *op_bf16_why_not(char *buf, size_t n);
int op_bf16_refuse(void);
/* The forward matmuls' precision: OP_PRECISION_FP32, _BF16 (op_bf16_refuse when
 * op_bf16_supported() is 0; the precision is then unchanged) or _AUTO (bf16 where supported). */
enum { OP_PRECISION_FP32, OP_PRECISION_BF16, OP_PRECISION_AUTO };
int op_set_precision(int p);
int op_precision_bf16(void); /* 1 when the forward matmuls now run in bf16 */
/* out[N,OC] (row stride ldo) = beta * out + bf16(x[N,C]) @ bf16(W) + bias[OC] (NULL: none),
 * products and sums in fp32; W is [C,OC] with row stride ldw, or (trans) [OC,C] with row stride
 * ldw. 0 on success, non-zero when oneDNN could not run it (nothing written then; the caller
 * falls back to fp32). The bf16 copy of W is cached by pointer and shape: weights must not change
 * while cached; op_bf16_forget drops the copies of every W inside [base, base + bytes)
 * (gpt2_free calls it); op_bf16_refresh marks them out of date instead, so that the next call
 * converts W again into the same buffer (weights that change every step, as an SAE's under
 * Adam: no new allocation and no new reorder primitive per step). Calls are serialised by a
 * mutex; oneDNN threads with OpenMP. */
int op_bf16_matmul(float *out, int ldo, const float *x, const float *W, int ldw, int trans,
                   const float *bias, int N, int C, int OC, float beta);
void op_bf16_forget(const void *base, size_t bytes);
void op_bf16_refresh(const void *base, size_t bytes);

/* OpenBLAS, which runs every fp32 matmul, picks its kernels for the CPU when it loads. Debian
 * 12's 0.3.21 does not know newer CPUs (an Intel Xeon of family 6 model 207 here; AMD's family
 * 26) and falls back to its Prescott (SSE3) kernels: sgemm at 36 GFLOP/s on 2 cores of such a
 * Xeon where its SkylakeX kernels run 240-300 (bench/README.md). op_blas_core names the kernels
 * running. op_blas_core_setenv sets OPENBLAS_CORETYPE to the kernels this CPU can run (SkylakeX
 * with AVX-512 F/CD/BW/DQ/VL that the OS enables, else Haswell with AVX2 and FMA) when OpenBLAS
 * fell back to Prescott and the variable is not set, and returns 1 when it set it: OpenBLAS
 * reads it only when it loads, so the caller then restarts (par_restart). A variable the user
 * or machine set is never changed. */
const char *op_blas_core(void);
int op_blas_core_setenv(void);

#endif
