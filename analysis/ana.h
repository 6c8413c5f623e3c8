/* ana.h - analysis kernels: pure functions over arrays used by `saelite analyze`.
 *
 * Nothing here touches files or the database; ana_run (ana_run.h) reads the activations, runs
 * the SAE and hands the arrays in. Layouts are row-major float32 unless stated; shapes are given per argument.
 * Ownership: callers own every buffer; ana_feat_acc owns its own storage (ana_feat_acc_free).
 * Errors: fallible functions return err.h codes (ERR_ARG for bad sizes, ERR_NOMEM).
 * Thread safety: functions are reentrant; one ana_feat_acc must not be used by two threads.
 * Determinism: random choices use the caller's seed (xorshift64* for directions, a hash for the
 * quantile samples), so reruns give the same rows.
 */
#ifndef SAELITE_ANA_H
#define SAELITE_ANA_H
#include <stddef.h>
#include <stdint.h>

/* ---- histograms ----------------------------------------------------------------------- */
/* Log-spaced edges: edges[b] = lo * (hi/lo)^(b/nbins), b = 0..nbins. Needs 0 < lo < hi. */
int ana_log_edges(double *edges /*[nbins+1]*/, int nbins, double lo, double hi);
/* Bin of v among ascending edges[0..nbins]: values below edges[0] go to bin 0, values at or
 * above edges[nbins] to bin nbins-1 (clamped, so no activation is lost). */
int ana_bin_index(const double *edges /*[nbins+1]*/, int nbins, double v);

/* ---- per-feature statistics, top-N and quantile samples ------------------------------- */
typedef struct {
    float value;
    int32_t pos;  /* token position in the sequence */
    int64_t seq;  /* sequence id */
} ana_act;

typedef struct ana_feat_acc ana_feat_acc;
/* d features; keep the top_n largest activations per feature and a uniform sample of
 * `reservoir` active positions per feature (from which quantile samples are drawn): the ones
 * with the smallest hash of (seed, feature, seq, pos), a bottom-k sample that does not depend on
 * the order the positions come in, so accumulators of disjoint sequences merge into exactly the
 * sample of the whole; histogram over edges[0..nbins] (copied). */
int ana_feat_acc_new(ana_feat_acc **out, int d, int top_n, int reservoir, const double *edges,
                     int nbins, uint64_t seed);
void ana_feat_acc_free(ana_feat_acc *a);
/* Feed the feature activations of T positions of sequence seq: row t of f [T,d] is position
 * pos0 + t. Only values > 0 count as active (SAE latents are non-negative; for raw neurons this
 * means "fires"). */
void ana_feat_acc_add(ana_feat_acc *a, const float *f /*[T,d]*/, int T, int64_t seq, int pos0);
int64_t ana_feat_tokens(const ana_feat_acc *a);              /* positions fed so far */
int64_t ana_feat_active(const ana_feat_acc *a, int feature); /* positions with value > 0 */
double ana_feat_sum(const ana_feat_acc *a, int feature);     /* sum of active values */
float ana_feat_max(const ana_feat_acc *a, int feature);      /* 0 when never active */
const int64_t *ana_feat_hist(const ana_feat_acc *a, int feature); /* [nbins] */
/* Top activations of a feature, largest first (ties: earlier seq/pos first). Returns the count
 * (<= top_n) written to out. */
int ana_feat_top(const ana_feat_acc *a, int feature, ana_act *out /*[top_n]*/);
/* Exact merge across processes (analyze under mpirun). ana_feat_acc_pack writes everything but
 * the per-feature sums (positions fed, counts, maxima, histograms, top lists, samples) into buf
 * of ana_feat_acc_packed_size bytes; ana_feat_acc_merge_packed adds such a buffer from an
 * accumulator of the same shape and seed into a: counts and histograms add, maxima take the
 * larger, top lists keep the top_n of the union (ties: earlier seq/pos), samples the bottom-k of
 * the union. Merging the accumulators of disjoint sets of sequences, in any order, gives exactly
 * what one accumulator fed with all of them holds. The sums (doubles) are the caller's: their
 * bits depend on the order of additions (ana_run adds them in a fixed tree); ana_feat_sums gives
 * the [d] array to read and set. ERR_FORMAT when the buffer does not fit a. */
size_t ana_feat_acc_packed_size(const ana_feat_acc *a);
void ana_feat_acc_pack(const ana_feat_acc *a, void *buf);
int ana_feat_acc_merge_packed(ana_feat_acc *a, const void *buf, size_t bytes);
double *ana_feat_sums(ana_feat_acc *a);
/* 1 when every kept entry (top lists and samples) is at a position below max_pos of a sequence
 * among seqs[0..nseq) (ascending): what the feed of those sequences could keep (a buffer merged
 * from a file, analyze's checkpoint, is checked with it). */
int ana_feat_acc_entries_within(const ana_feat_acc *a, const int64_t *seqs, size_t nseq, int max_pos);
/* Back to what ana_feat_acc_new made (nothing fed). */
void ana_feat_acc_reset(ana_feat_acc *a);
/* Quantile-interval samples: the sample sorted by value is cut into n_intervals bands of
 * equal count (band 0 lowest), and per_interval evenly spaced examples are taken from each band.
 * Writes up to n_intervals*per_interval entries, ascending in value, band index in interval[].
 * Returns the count. */
int ana_feat_quantiles(const ana_feat_acc *a, int feature, int n_intervals, int per_interval,
                       ana_act *out, int *interval);

/* ---- dictionary geometry (superposition probe) ---------------------------------------- */
/* Angles between all unordered pairs of rows of W [n,d] (rows normalised internally; zero rows
 * are skipped), histogrammed into nbins equal bins over [0, 180] degrees (hist is zeroed first).
 * nearest/nearest_cos (may be NULL): for each row the other row with the largest |cos| and that
 * signed cosine (-1 / 0 when there is none). Uses cblas_sgemm in row blocks. */
int ana_geometry(const float *W /*[n,d]*/, int n, int d, int nbins, int64_t *hist /*[nbins]*/,
                 int *nearest /*[n]*/, float *nearest_cos /*[n]*/);
/* n random unit vectors in R^d (Gaussian directions): the baseline for ana_geometry. */
int ana_random_unit(float *W /*[n,d]*/, int n, int d, uint64_t seed);

/* ---- logit effects along the direct path ---------------------------------------------- */
/* out[i,:] = W_U @ (gamma * centre(dirs[i] @ proj)):
 *   dirs [n,d]   decoder directions in the hook's space;
 *   proj [d,C]   the linear map from the hook's space to the residual stream (HF Conv1D layout,
 *                e.g. h.L.mlp.c_proj.weight for mlp.hook_post), or NULL when d == C already;
 *   gamma [C]    ln_f.weight, or NULL;
 *   W_U [V,C]    unembedding (lm_head.weight == wte.weight for GPT-2).
 * The final LayerNorm is approximated by its linear part at a fixed scale: the direction is
 * mean-centred and multiplied by gamma; the division by the residual's standard deviation is
 * a positive per-position factor and is dropped, and ln_f.bias is the same for every feature and
 * is dropped. So values rank tokens correctly per feature and are in logits per unit activation
 * up to 1/sigma. Works in blocks of rows; out must hold n*V floats. */
int ana_logit_effects(float *out /*[n,V]*/, const float *dirs /*[n,d]*/, int n, int d,
                      const float *proj /*[d,C] or NULL*/, int C, const float *gamma /*[C]*/,
                      const float *W_U /*[V,C]*/, int V);
/* The same for directions in the final LayerNorm's output space (ln_final.hook_normalized, its
 * weight and bias already applied): out = W_U . d, exact (the unembedding reads that space as it
 * is; no gamma, no centring, no 1/sigma), the logit change per unit activation. */
int ana_logit_effects_final(float *out /*[n,V]*/, const float *dirs /*[n,C]*/, int n, int C,
                            const float *W_U /*[V,C]*/, int V);
/* Indices and values of the k largest (largest != 0) or smallest entries of x [n], strongest
 * first (ties: lower index first). k is clamped to n; returns the count written. */
int ana_topk(int *idx, float *val, const float *x, int n, int k, int largest);

/* ---- part-of-speech alignment --------------------------------------------------------- */
/* Tag of each token from tagged byte spans: token i covers bytes [tok_start[i], tok_start[i+1])
 * (the last one up to text_len); it takes the tag of the span containing its first non-space
 * byte, or -1. text may be NULL (then the first byte is used). Spans must be sorted by start and
 * not overlap. */
void ana_token_tags(int *out /*[n_tok]*/, const size_t *tok_start /*[n_tok]*/, int n_tok,
                    const char *text, size_t text_len, const size_t *span_start,
                    const size_t *span_end, const int *span_tag, int n_spans);
/* Tag distribution over n examples (tags[i] in [0,ntags) or -1 = untagged, ignored): counts is
 * zeroed and filled; returns the most frequent tag (lowest index on ties) or -1 when none is
 * tagged; *precision = counts[best] / tagged examples (0 when none). */
int ana_tag_dist(int64_t *counts /*[ntags]*/, int ntags, const int *tags, int n, double *precision);

/* ---- downstream loss metrics ---------------------------------------------------------- */
/* KL(p || q) in nats between softmax(logits_p) and softmax(logits_q), one row of V logits,
 * computed in double with log-sum-exp. */
double ana_kl_logits(const float *logits_p /*[V]*/, const float *logits_q /*[V]*/, int V);
/* The same KL with the clean side prepared once per position and reused for several patched
 * rows: probs_p = softmax(logits_p) and lse_p = logsumexp(logits_p) from ana_softmax. */
void ana_softmax(float *probs /*[V]*/, const float *logits /*[V]*/, int V, double *lse);
double ana_kl_prepared(const float *logits_p /*[V]*/, const float *probs_p /*[V]*/, double lse_p,
                       const float *logits_q /*[V]*/, int V);
/* log sum_i exp(x_i), in double with the maximum taken out. */
double ana_logsumexp(const float *x /*[V]*/, int V);
/* Cross-entropy (nats) of target under softmax(logits). */
double ana_ce_logits(const float *logits /*[V]*/, int V, int target);
/* Recovered fraction (base - patched) / (base - ref): ce_loss_score = ana_score(ce_zero, ce_sae,
 * ce_clean), kl_score = ana_score(kl_zero, kl_sae, 0). NaN when base == ref. */
double ana_score(double base, double patched, double ref);

#endif
