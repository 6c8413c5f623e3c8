/* sae_bf16.h - the bf16 path of the SAE encoder GEMM: a oneDNN matmul with bf16 inputs and
 * fp32 accumulation (the CPU's matrix engine: AMX tiles or AVX512-BF16 dot products).
 *
 * Internal to sae/: sae_kernels.c dispatches to it when the precision is bf16 (sae_kernels.h,
 * sae_k_set_precision). The matmul, the ISA query and SAELITE_NO_BF16 are the model's
 * (model/ops.h, op_bf16_*: model/ops_bf16.c is the only includer of oneDNN's dnnl.h).
 * What is rounded: the inputs of the GEMM only (xc and W_encT to bf16, round to nearest even, by
 * oneDNN's reorders); products and sums are fp32, the bias is added in fp32, the output is fp32.
 * The master weights, their gradients and Adam stay fp32 (the caller's buffers).
 * Cache: the bf16 copy of W_encT lives in the model's weight cache; it is reused for the row
 * chunks of one batch and converted again, into the same buffer, for the next (see
 * sae_bf16_encode and op_bf16_refresh); the primitives are cached per shape there. Calls are
 * serialised.
 * Threads: oneDNN's OpenMP runtime (OMP_NUM_THREADS, default the online cores).
 * Determinism: for a fixed shape and OpenMP thread count a call is a pure function of its inputs
 * (oneDNN's CPU matmul does not split the K reduction for these shapes; tests/test_sae.c checks
 * two runs for identical bits).
 * Errors: sae_bf16_encode returns non-zero when oneDNN could not build or run the primitive
 * (out of memory); nothing is printed, the caller falls back to fp32.
 */
#ifndef SAELITE_SAE_BF16_H
#define SAELITE_SAE_BF16_H
#include <stdint.h>

/* 1 when oneDNN reports a CPU ISA with native bf16 dot products (avx512_core_bf16 or AMX) and
 * the environment does not set SAELITE_NO_BF16 to a non-empty value other than "0" (read on
 * every call; sae_k_set_precision asks once per run). */
int sae_bf16_supported(void);

/* The ISA oneDNN dispatches to on this CPU ("avx512_core_amx", "avx512_core_bf16",
 * "avx2", ...), whether or not bf16 is supported. */
const char *sae_bf16_isa(void);

/* The implementation of the last matmul primitive built (oneDNN's name, e.g.
 * "brg:avx512_core_amx_bf16"), "" before the first. */
const char *sae_bf16_impl(void);

/* pre[B,S] = bf16(xc) @ bf16(W_encT)^T + b_enc, products and sums in fp32. 0 on success.
 * wgen: the caller's generation of the weights (it changes whenever W_encT may have). The bf16
 * copy of W_encT is reused, not converted again, when this call continues the rows of the
 * previous one (xc == previous xc + previous B*D: the trainer's row chunks of one batch) with
 * the same W_encT pointer, shape and wgen. */
int sae_bf16_encode(float *pre /*[B,S]*/, const float *xc /*[B,D]*/,
                    const float *W_encT /*[S,D]*/, const float *b_enc /*[S]*/, int B, int D,
                    int S, uint64_t wgen);

#endif
