/* effects.h - measured causal effects of SAE features: ablate a feature where it fires and
 * record what happens to the next-token distribution there.
 *
 * For every context (sequence, position t) where feature j fires (f_j > 0 at t, t has a next
 * token, t not a prepended <|endoftext|>), the hook row at t becomes x_t - f_j(x_t) W_dec[j]
 * (the delta-form ablation: the SAE's error term is kept, no other feature moves), and at the
 * same position t:
 *   kl      KL(p_clean || p_ablated) of the next-token distribution (nats)
 *   dloss   CE_ablated - CE_clean of the actual next token (nats; > 0: the feature helped)
 *   delta   log p_clean(v) - log p_ablated(v) for every token v: what the feature adds to each
 *           token's log-probability (positive = promoted, the sign convention of ana_logits)
 * Means over the feature's contexts are reported; at most max_ctx contexts per feature, taken in
 * sequence order. A transcoder's codes come from its input hook (`hook`) and the ablation is at
 * its output hook (cfg.hook_name_out, rows of d_out): its decoder writes there.
 * Batching: the sequence is run B rows at a time (gpt2_forward with batch B), each row carrying
 * its own ablations. When the hook is position-local (gpt2_hook_position_local: nothing after it
 * mixes positions, e.g. mlp.hook_post of the last block), the change at t reaches only the logits
 * at t, so one row ablates a different feature at every position at once: row r ablates the r-th
 * pending (feature, t) pair of each position, and a sequence needs as many rows as the most
 * features firing at one position (k for a TopK SAE). Otherwise a row carries one ablation (the
 * positions before t are unaffected, so it is still exact, only slower). The clean forward runs
 * once per sequence and feature chunk. The per-feature mean delta vectors are accumulated for a
 * chunk of features at a time (at most max_acc_bytes of floats; one chunk for the demo's
 * 4096 x 4096), each chunk one pass over the sequences.
 * Ownership: the caller owns all arrays; out arrays are [d_sae]. Errors: err.h codes (ERR_SHAPE
 * hook width, ERR_ABORTED when *stop was raised, ERR_NOMEM, forward-pass errors).
 * Threads: uses the model (one thread) and OpenBLAS inside the forward pass.
 */
#ifndef SAELITE_ANA_EFFECTS_H
#define SAELITE_ANA_EFFECTS_H
#include <stddef.h>
#include <stdint.h>

#include "model/gpt2.h"
#include "sae/sae.h"

/* The state of a run between two sequences, for a caller's checkpoint (analyze's): the chunk in
 * progress [j0, j0 + chunk) and the sequences of it done, its delta sums acc [chunk, V], the
 * per-feature counts and sums [d_sae] so far (every chunk before j0 finished: its callbacks ran).
 * The arrays belong to the run (valid during the save call only). */
typedef struct {
    int j0, chunk, V, d_sae;
    int64_t seqs_done;
    const float *acc;
    const int64_t *n;
    const double *sum_act, *sum_kl, *sum_dloss;
    int64_t forwards, rows;
} ana_effects_state;

typedef struct {
    int max_ctx;          /* contexts per feature (<= 0: all) */
    int batch;            /* rows per forward pass (<= 0: 8) */
    size_t max_acc_bytes; /* delta accumulators per chunk (0: 512 MB) */
    volatile int *stop;   /* polled per sequence; may be NULL */
    /* resume: a state saved by an earlier run with the same inputs and options (NULL: from the
       start); ERR_ARG when its shape does not fit. save: called every save_secs (> 0) at a
       sequence boundary, and once after the last sequence of a chunk when that interval has
       passed; a failure is the caller's to handle (returned non-OK: no more saves). */
    const ana_effects_state *resume;
    double save_secs;
    int (*save)(const ana_effects_state *st, void *user);
    void *save_user;
} ana_effects_opts;

typedef struct {
    int64_t *n;      /* [d_sae] contexts measured */
    double *mean_act; /* [d_sae] mean f_j over them (NaN when n = 0), likewise: */
    double *kl;      /* [d_sae] mean KL */
    double *dloss;   /* [d_sae] mean change in loss */
    int64_t forwards, rows; /* forward passes and batch rows run (for the timing note) */
} ana_effects_out;

/* Features per chunk for a vocabulary of V, d_sae features and max_acc_bytes (0: 512 MB). */
int ana_effects_chunk(int V, int d_sae, size_t max_acc_bytes);

/* Called once per feature with n > 0 when its chunk is done: mean delta [V] (borrowed). */
typedef int (*ana_effects_fn)(int feature, int64_t n, const float *mean_delta, int V, void *user);

/* Sequences: tok[off[i] .. off[i+1]) for i < nseq (ids in the model's vocabulary; a sequence
 * whose first id is < 0 has no token ids and is skipped), bos[i] != 0 when position 0 is a
 * prepended <|endoftext|> (bos may be NULL). */
int ana_effects(gpt2_model *m, const sae_model *s, const char *hook, const int *tok,
                const int64_t *off, const unsigned char *bos, size_t nseq,
                const ana_effects_opts *o, ana_effects_out *out, ana_effects_fn cb, void *user);

/* Spearman rank correlation of a [n] and b [n] (average ranks for ties), NaN when either is
 * constant or n < 2. */
double ana_spearman(const float *a, const float *b, int n);

#endif
