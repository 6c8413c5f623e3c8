/* sae_kernels.h - forward/backward kernels of the sparse-autoencoder trainer.
 *
 * Plain functions over float buffers in the style of llm.c: outputs first, one shape comment per
 * argument, backward kernels ACCUMULATE into their gradient outputs (the caller zeroes them).
 * Layouts (row-major): the encoder is kept transposed, W_encT [S,D] (row j = latent j's encoder
 * direction), so that the sparse encoder gradient touches contiguous rows; W_dec [S,D];
 * D = d_in, S = d_sae, B = tokens in the batch.
 * Sparse activations are in CSR form: row b's active latents are idx[ptr[b]..ptr[b+1]) with values
 * val[...]; a value of 0 (ReLU clipped a selected pre-activation) passes no gradient.
 * The only dense matmuls are cblas_sgemm calls (encoder pre-activations; the dense decoder of the
 * ReLU/JumpReLU paths). No allocation, no errors: shapes are the caller's contract.
 * Threads: sae_k_encode (its GEMM in blocks of 2048 latents, or fewer so that the count is even,
 * a function of d_sae alone; one single-threaded sgemm each), sae_k_topk, the sparse kernels and sae_k_adam split large problems over
 * SAELITE_THREADS (default: online cores) threads in a way that leaves every result bit-identical
 * to the serial order.
 * Precision: sae_k_encode's GEMM runs in fp32 (OpenBLAS sgemm, the default) or, after
 * sae_k_set_precision(SAE_PRECISION_BF16), in bf16 with fp32 accumulation on the CPU's matrix
 * engine through oneDNN (sae/sae_bf16.h: only the GEMM's inputs are rounded; everything else,
 * including the other kernels, the master weights and Adam, stays fp32). The bf16 path is
 * deterministic for a fixed OpenMP thread count, not across thread counts.
 * Thread safety: pure functions of their arguments, except that sae_k_encode sets OpenBLAS's
 * process-wide thread count to 1 while it runs (and restores it), and that the precision is
 * process-wide state (set it before starting work, not while kernels run).
 */
#ifndef SAELITE_SAE_KERNELS_H
#define SAELITE_SAE_KERNELS_H
#include <stdint.h>

typedef enum { SAE_PRECISION_FP32, SAE_PRECISION_BF16, SAE_PRECISION_AUTO } sae_precision;

/* Set the encoder GEMM's precision; AUTO resolves to BF16 where the CPU has native bf16 dot
 * products (AVX512-BF16 or AMX, as oneDNN reports it) and SAELITE_NO_BF16 is unset, else FP32.
 * ERR_ARG (message with the reason and a HINT) when BF16 is asked for and not available; the
 * precision is then unchanged. */
int sae_k_set_precision(sae_precision p);
sae_precision sae_k_precision(void); /* the resolved one: FP32 or BF16 */
/* What runs the encoder GEMM, for messages: "fp32 (OpenBLAS sgemm)" or
 * "bf16 (oneDNN brg:avx512_core_amx_bf16, ISA avx512_core_amx)". */
void sae_k_engine(char *buf, int n);

/* xc[B,D] = x - b_dec; pre[B,S] = xc @ W_encT^T + b_enc (one sgemm, or in bf16 one oneDNN matmul;
 * should oneDNN fail, e.g. out of memory, that call runs in fp32). In bf16 a call that continues
 * the previous call's rows (xc == previous xc + previous B*D, same W_encT) reuses that call's
 * bf16 copy of W_encT unless sae_k_adam ran in between: do not change W_encT between the row
 * chunks of one batch. */
void sae_k_encode(float *pre /*[B,S]*/, float *xc /*[B,D]*/, const float *x /*[B,D]*/,
                  const float *W_encT /*[S,D]*/, const float *b_enc /*[S]*/,
                  const float *b_dec /*[D]*/, int B, int D, int S);

/* Per row: the k largest pre-activations (ties: lower index first), ReLU applied; rows get
 * exactly k entries (ptr[b] = b*k), in no particular order (a deterministic function of the
 * row). cand: optional candidate list in increasing order (ncand latents, e.g. the dead ones
 * for AuxK); NULL = all S latents. k <= S (k <= ncand). Rows are split over threads. */
void sae_k_topk(int *idx /*[B*k]*/, float *val /*[B*k]*/, const float *pre /*[B,S]*/, int B, int S,
                int k, const int *cand /*[ncand] or NULL*/, int ncand);

/* The fused form of sae_k_encode + sae_k_topk (TopK's forward): sae_k_encode that also writes,
 * while each GEMM block is in cache, the maxima of the row's blocks of SAE_K_TOPK_BLOCK
 * pre-activations (NaNs skipped) into bmax, the first pass of sae_k_topk's selection; returns 1
 * when it did (the fp32 path), 0 when bmax was not written (bf16: one oneDNN call). Then
 * sae_k_topk_bmax(..., bmax, ...) selects exactly what sae_k_topk(..., NULL, 0) would, reading
 * only the blocks that can hold a selected entry (bmax NULL: it takes the maxima itself). */
enum { SAE_K_TOPK_BLOCK = 32 };
int sae_k_encode_bmax(float *pre /*[B,S]*/, float *bmax /*[B, S / SAE_K_TOPK_BLOCK]*/,
                      float *xc /*[B,D]*/, const float *x /*[B,D]*/, const float *W_encT /*[S,D]*/,
                      const float *b_enc /*[S]*/, const float *b_dec /*[D]*/, int B, int D, int S);
void sae_k_topk_bmax(int *idx /*[B*k]*/, float *val /*[B*k]*/, const float *pre /*[B,S]*/,
                     const float *bmax /*[B, S / SAE_K_TOPK_BLOCK] or NULL*/, int B, int S, int k);
/* sae_k_topk_bmax and AuxK's sae_k_topk(aidx, aval, pre, B, S, ka, cand, ncand) in one pass over
 * the rows, each row's candidates read while the row is still in cache (the same selections;
 * ka 0: no AuxK). */
void sae_k_topk_bmax_aux(int *idx /*[B*k]*/, float *val /*[B*k]*/, int *aidx /*[B*ka]*/,
                         float *aval /*[B*ka]*/, const float *pre /*[B,S]*/,
                         const float *bmax /*[B, S / SAE_K_TOPK_BLOCK] or NULL*/, int B, int S,
                         int k, int ka, const int *cand /*[ncand]*/, int ncand);

/* Global top (kB) of relu(pre) over the whole batch (BatchTopK). Writes CSR (ptr[B+1], idx, val of
 * capacity cap) of entries >= the selected threshold and > 0; returns the number of entries (ties
 * can add a few beyond kB; never more than cap) and the threshold (smallest kept value, 0 if
 * none) in *thr. scratch: B*S floats. */
int64_t sae_k_batchtopk(int64_t *ptr /*[B+1]*/, int *idx, float *val, int64_t cap, float *thr,
                        const float *pre /*[B,S]*/, int B, int S, int64_t kB, float *scratch);

/* The selection half of sae_k_batchtopk for a given threshold t (a global one, computed over
 * the rows of several calls or ranks): CSR of entries >= t and > 0; *minkept the smallest kept
 * value (0 if none); returns the number of entries. */
int64_t sae_k_batchtopk_select(int64_t *ptr /*[B+1]*/, int *idx, float *val, int64_t cap,
                               float *minkept, const float *pre /*[B,S]*/, int B, int S, float t);

/* xhat[B,D] = (b_dec or 0) + sum over active (j, v) of v * W_dec[j]. */
void sae_k_decode_sparse(float *xhat /*[B,D]*/, const int64_t *ptr /*[B+1]*/, const int *idx,
                         const float *val, const float *W_dec /*[S,D]*/,
                         const float *b_dec /*[D] or NULL*/, int B, int D);

/* xhat[b] = base[b] + sum over active (j, v) of v * W_dec[j]: a decode continued from rows
 * already decoded (base may be xhat). Adds in the same order as sae_k_decode_sparse, so decoding
 * a pattern's entries in two consecutive parts gives the bits of one decode of all of them. */
void sae_k_decode_sparse_from(float *xhat /*[B,D]*/, const int64_t *ptr /*[B+1]*/, const int *idx,
                              const float *val, const float *W_dec /*[S,D]*/,
                              const float *base /*[B,D]*/, int B, int D);

/* out[n] = a * in[n] (the input's scaling; elementwise over threads: the serial bits). */
void sae_k_scale(float *out, const float *in, float a, int64_t n);

/* Sums over one row of u floats in double: *gg = g.g and, with gw, *gw = g.w and *ww = w.w
 * (gradient clipping's per-latent norms; gw NULL: w and ww are not read). Each in 8 lanes
 * (element e in lane e % 8, in element order), then the lanes in order: a fixed order for any
 * thread count or split (one serial chain per row was 2 ms of a 40 ms step: its adds' latency). */
void sae_k_row_sums(double *gg, double *gw, double *ww, const float *g /*[u]*/,
                    const float *w /*[u] or NULL*/, int64_t u);

/* The reconstruction loss's pass: dx[B,D] = scale (xhat - y); *sse = sum (xhat - y)^2 and
 * *ss = sum y^2, in double, summed within fixed blocks of rows (8 lanes, then the lanes in
 * order) and then the blocks in order, so the sums do not depend on the thread count;
 * col[D] += the column sums of y (double, rows in order). */
void sae_k_recon_error(float *dx /*[B,D]*/, double *sse, double *ss, double *col /*[D]*/,
                       const float *xhat /*[B,D]*/, const float *y /*[B,D]*/, float scale, int B,
                       int D);

/* out[C] += the column sums of a[R,C], rows in order (threads split the columns: the same bits
 * as the serial loop). */
void sae_k_colsum_add(float *out /*[C]*/, const float *a /*[R,C]*/, int R, int C);

/* Transpose of a CSR pattern, grouped by latent: the entries of latent j are
 * tent[tptr[j]..tptr[j+1]) (indices into idx/val), in token order, with their token in ttok.
 * The gradient scatters walk this form so each gradient row is read and written once per step
 * instead of once per selecting token. */
void sae_k_csr_transpose(int64_t *tptr /*[S+1]*/, int64_t *tent /*[nnz]*/, int *ttok /*[nnz]*/,
                         const int64_t *ptr /*[B+1]*/, const int *idx, int B, int S);

/* Backward of the sparse decoder given dxhat: dW_dec[j] += v * dxhat[b] for each active entry,
 * dval[e] = dxhat[b] . W_dec[j] (overwritten, not accumulated); entries with v == 0 (ReLU
 * clipped) are skipped with dval[e] = 0. Pattern in transposed form; for a range of latents
 * [j0, j0 + S) of a larger pattern pass tptr + j0, dW_dec + j0 D and W_dec + j0 D (tent stays
 * an index into the whole dval/val). */
void sae_k_decode_sparse_backward(float *dW_dec /*[S,D]*/, float *dval /*[nnz]*/,
                                  const float *dxhat /*[B,D]*/, const int64_t *tptr,
                                  const int64_t *tent, const int *ttok, const float *val /*[nnz]*/,
                                  const float *W_dec /*[S,D]*/, int S, int D);

/* Backward of the encoder for sparse dpre (the same pattern, transposed): dW_encT[j] += dpre *
 * xc[b], db_enc[j] += dpre. (The b_dec gradient through xc = x - b_dec is -db_enc_step @ W_encT;
 * the trainer computes it with one gemv, see sae_k_bdec_from_enc.) */
void sae_k_encode_sparse_backward(float *dW_encT /*[S,D]*/, float *db_enc /*[S]*/,
                                  const float *dpre /*[nnz]*/, const int64_t *tptr,
                                  const int64_t *tent, const int *ttok, const float *xc /*[B,D]*/,
                                  int S, int D);

/* db_dec[D] -= g[S] @ W_encT[S,D]: the gradient through xc = x - b_dec given g = sum_b dpre[b]. */
void sae_k_bdec_from_enc(float *db_dec /*[D]*/, const float *g /*[S]*/, const float *W_encT,
                         int D, int S);

/* Remove from each decoder-row gradient its component parallel to the (unit-norm) row:
 * dW[j] -= (dW[j] . W[j]) W[j]. */
void sae_k_remove_parallel(float *dW /*[S,D]*/, const float *W /*[S,D]*/, int S, int D);

/* Scale each row of W to unit L2 norm (rows of norm 0 are left alone). */
void sae_k_normalize_rows(float *W /*[S,D]*/, int S, int D);

/* One Adam step on n parameters with bias correction for step t (1-based) on the gradient
 * g x gscale (gradient clipping folded in: the bits of scaling g in a pass of its own first;
 * 1: g as is); the gradient is zeroed afterwards (so the next step's backward can accumulate
 * into it). */
void sae_k_adam(float *p, float *g, float *m, float *v, int64_t n, float lr, float b1, float b2,
                float eps, int64_t t, float gscale);

/* g scaled by gscale, sae_k_remove_parallel on the S rows of D at p + r0 (gradient g + r0),
 * then sae_k_adam on all n parameters, then sae_k_normalize_rows on those rows: the same bits as
 * the separate calls, in one pass over the rows while they are in cache (r0 + S*D <= n). */
void sae_k_adam_unit_rows(float *p, float *g, float *m, float *v, int64_t n, int64_t r0, int S,
                          int D, float lr, float b1, float b2, float eps, int64_t t, float gscale);

#endif
