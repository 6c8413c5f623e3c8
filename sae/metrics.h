/* metrics.h - SAE quality metrics, defined once (used by sae-train, sae-eval, analyze, report).
 *
 * An accumulator over an evaluated set of N tokens (x raw activations, xhat reconstructions,
 * f latent activations):
 *   mse        = sum ||x - xhat||^2 / (N d_in)            (per element)
 *   ev         = 1 - sum ||x - xhat||^2 / sum ||x - mean(x)||^2   (mean over the set)
 *   cos        = mean over tokens of cos(x, xhat)   (tokens with a zero vector count as 0)
 *   l2_ratio   = mean over tokens of ||xhat|| / ||x||   (tokens with ||x|| = 0 skipped)
 *   l0         = mean number of latents with f > 0 per token
 *   density_j  = fraction of tokens with f_j > 0; log10 density uses log10(density + 1e-10)
 *   dead_frac  = fraction of latents with density 0;  dense_frac = fraction with density > 0.1
 * Matryoshka prefixes (sae_metrics_prefixes; Bussmann et al. 2025, SAELens' matryoshka_batchtopk):
 * for each inner width m (a matryoshka_widths entry below d_sae) the same SAE's codes f, computed
 * once at full width and not again per prefix, decoded with latents j < m only:
 *   xhat_m = f[:, :m] W_dec[:m] + b_dec   (+ the row's mean for a centred SAE, as sae_forward)
 *   prefix mse_m, ev_m as mse and ev with xhat_m (the same variance), l0_m = mean number of the
 *   first m latents with f > 0 (from the fires counts)
 * the reconstructions the Matryoshka loss measures; the full width is mse/ev/l0 above.
 * Sums are in double. Ownership: the accumulator owns its arrays (sae_metrics_free).
 * Thread safety: one accumulator per thread (merge with sae_metrics_merge).
 */
#ifndef SAELITE_METRICS_H
#define SAELITE_METRICS_H
#include <stdint.h>

#include "sae/sae.h"

typedef struct {
    int d_in, d_sae;
    int64_t n, n_nonzero;
    double sse, sum_sq, cos_sum, l2r_sum, l0_sum;
    double *sum_x;   /* [d_in] */
    int64_t *fires;  /* [d_sae] */
    int n_prefix;                          /* Matryoshka's inner prefixes (0: none) */
    int prefix_end[SAE_MAX_WIDTHS];        /* their widths, increasing, each < d_sae */
    double prefix_sse[SAE_MAX_WIDTHS];     /* sum ||x - xhat_m||^2 */
} sae_metrics;

typedef struct {
    int64_t n;
    double mse, ev, cos, l2_ratio, l0, dead_frac, dense_frac;
    int ev_defined; /* the rows vary (variance > 0); else ev is 0 by convention, not a measurement */
    int n_prefix;   /* Matryoshka: the inner prefixes measured (ev as ev_defined says) */
    int prefix_end[SAE_MAX_WIDTHS];
    double prefix_mse[SAE_MAX_WIDTHS], prefix_ev[SAE_MAX_WIDTHS], prefix_l0[SAE_MAX_WIDTHS];
} sae_metrics_summary;

int sae_metrics_init(sae_metrics *m, int d_in, int d_sae);
void sae_metrics_free(sae_metrics *m);
/* A Matryoshka SAE's inner prefixes (its widths below d_sae) into m, before any rows: then
 * sae_metrics_eval_rows (and sae_metrics_eval) also measure each prefix's reconstruction. No
 * prefixes for the other architectures (and for a transcoder, whose rows are pairs). */
void sae_metrics_prefixes(sae_metrics *m, const sae_config *c);
/* f may be NULL (then l0/density are not counted for these rows). */
void sae_metrics_add(sae_metrics *m, const float *x /*[N,d_in]*/, const float *xhat /*[N,d_in]*/,
                     const float *f /*[N,d_sae] or NULL*/, int N);
void sae_metrics_merge(sae_metrics *into, const sae_metrics *from);
void sae_metrics_summarize(const sae_metrics *m, sae_metrics_summary *out);
void sae_metrics_log10_density(const sae_metrics *m, float *out /*[d_sae]*/);

/* The evaluation loop every command shares: n rows are encoded and decoded by the SAE in chunks
 * of SAE_EVAL_CHUNK rows and added to acc (initialised for the SAE's shape). Rows come from
 * x [n,d_in] when x is not NULL, else from next(user, buf, rows), which fills buf [rows,d_in]
 * (e.g. an sae_source). Returns the first error of next, encode or decode. For a transcoder the
 * rows are (input, target) pairs [rows, d_in + d_out] (sae_metrics_eval_pairs). */
enum { SAE_EVAL_CHUNK = 512 };
int sae_metrics_eval(sae_metrics *acc, const sae_model *m, const float *x, int64_t n,
                     int (*next)(void *user, float *buf, int rows), void *user);
/* One step of that loop, for callers that also want the codes (analyze): encode x [n,d_in] into
 * f [n,d_sae], decode into xhat [n,d_in], add the rows to acc (and its prefixes' errors, decoded
 * from the same f; ERR_NOMEM for their row buffer). */
int sae_metrics_eval_rows(sae_metrics *acc, const sae_model *m, const float *x, int n, float *f,
                          float *xhat);
/* Transcoders: rows xy [n, d_in + d_out] are (input, target) pairs (what a paired source yields;
 * sae_metrics_eval takes such rows for a transcoder); x [n,d_in], y and yhat [n,d_out] are
 * scratch; acc (initialised with d_out, d_sae) gets the target against the output. */
int sae_metrics_eval_pairs(sae_metrics *acc, const sae_model *m, const float *xy, int n, float *f,
                           float *x, float *y, float *yhat);

/* Ground-truth recovery (MMCS, Sharkey, Braun & Millidge 2022), the one definition every command
 * uses (sae-train --truth, sae-eval --ground-truth, report --ground-truth):
 *   best_i    = max over learned directions j of cos(truth_i, W_j)   -- the SIGNED cosine
 *   mmcs      = mean over i of best_i;  *recovered = fraction of i with best_i > thr
 * Signed, not |cos|: an SAE's latents are non-negative (ReLU/TopK/JumpReLU), so a decoder row
 * pointing at -truth_i can only add -truth_i and cannot reconstruct a feature that fires
 * positively; it is not a recovery. Rows are normalised in double and compared in float (sgemm);
 * a zero row has cosine 0 with everything. truth [F,d], W [S,d]; best [F] and match [F] (the
 * index j of best_i, the first on ties) may be NULL. ERR_SHAPE when F, S or d < 1. */
int sae_mmcs(const float *truth, int F, const float *W, int S, int d, double thr, double *mmcs,
             double *recovered, float *best);
int sae_mmcs_match(const float *truth, int F, const float *W, int S, int d, double thr,
                   double *mmcs, double *recovered, float *best /*[F] or NULL*/,
                   int *match /*[F] or NULL*/);
/* A ground-truth file's directions [F,d] as every command above reads them: finite, and no row
 * all zeros (its cosine would be 0 with everything: "MMCS 0.0000" for a file of zeros). ERR_FORMAT
 * or ERR_ARG naming path and the row. */
int sae_truth_check(const char *path, const float *truth, int64_t F, int d);
/* C[na, nb] = cosines of the rows of A [na,d] with the rows of B [nb,d], normalised as above. */
int sae_cosines(const float *A, int na, const float *B, int nb, int d, float *C);

#endif
