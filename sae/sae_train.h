/* sae_train.h - training sparse autoencoders (ReLU+L1, TopK+AuxK, BatchTopK, JumpReLU, gated,
 * Matryoshka BatchTopK).
 *
 * The trainer works in a normalised space: inputs are multiplied by a constant scale chosen so
 * the mean input norm of a sample is sqrt(d_in) (SAELens' "expected_average_only_in"); the
 * scale is folded into the weights by sae_trainer_export. Recipe (see docs/sae.md):
 *   loss = sum_i (x - xhat)_i^2 averaged over the batch
 *        + relu:      l1 * sum_j f_j ||W_dec,j||          (decoder unconstrained, norms folded)
 *        + jumprelu:  l1 * sum_j H(pre_j - theta_j)       (L0, straight-through estimators with a
 *                                                          rectangle kernel of width bandwidth)
 *        + topk:      aux_coef / (1 - EV) * ||e - ehat_aux||^2 (AuxK on the top k_aux dead
 *                     latents, e = x - xhat detached; OpenAI's normalised AuxK relative to this
 *                     plain MSE, EV = the previous step's explained variance)
 *        + batchtopk: the same AuxK as topk
 *        + matryoshka: the batchtopk loss (full width, AuxK) + sum over the inner widths m of
 *                     ||x - xhat_m||^2, xhat_m = f[:, :m] W_dec[:m] + b_dec with f the one
 *                     full-width BatchTopK code (mat_levels SAE_MAT_SHARED, the paper's and
 *                     SAELens' current definition) or BatchTopK(pre[:, :m]), a selection of the
 *                     prefix's own with the same k B (SAE_MAT_OWN, SAELens' earlier version)
 *        + gated:     l1 * sum_j relu(pi_j) ||W_dec,j|| + ||x - (relu(pi) W_dec' + b_dec')||^2, pi
 *                     the gate pre-activations, W_dec'/b_dec' the decoder frozen (no gradient);
 *                     f = 1[pi > 0] relu(exp(r_mag) (pi - b_gate) + b_mag), decoder rows unit
 *                     norm (the paper's; only relu leaves them free)
 * Transcoders (transcoder != 0): the rows given to sae_trainer_new/step are (input, target) pairs
 * [x | y] of d_in + d_out floats; the loss is the same with y in place of x as the target, no
 * b_dec subtraction on the input, and skip transcoders add x W_skip^T (W_skip zero at init) to
 * the output. Input and target get separate scales (mean norms sqrt(d_in) and sqrt(d_out)); the
 * encoder rows are their own random unit vectors (d_in != d_out), b_dec the target's median.
 *   Adam (jumprelu and gated beta1 0); lr warm-up over warmup_frac of the steps, linear decay
 *   to 0 over the last decay_frac (topk, batchtopk, matryoshka: b_enc at lr x sqrt(d_in) when normalised, as fast as the others
 *   at mean norm 1); every architecture clips the global gradient norm to grad_clip (1)
 *   before Adam; sparsity coefficient warm-up over l1_warmup_frac; decoder rows unit norm
 *   (except relu) with the gradient component parallel to each row removed before the step; W_enc = W_dec^T
 *   at init; b_dec = geometric median (or mean) of the sample, zero for relu, jumprelu and
 *   gated. A latent is dead when it has not fired for dead_window tokens.
 * Every architecture computes the encoder pre-activations with one dense GEMM (sae_k_encode; the
 * TopK path in row chunks of the batch). TopK and BatchTopK then touch only the selected latents
 * (decoder, decoder gradient, encoder gradient: sparse kernels); relu and jumprelu do the decoder
 * and the gradients as dense cblas_sgemm calls.
 * Threads (sae/sae_kernels.c): within a step, the encoder GEMM (blocks of at most 2048 latents,
 * an even count fixed by d_sae; one single-threaded sgemm each), the per-row top-k, the sparse kernels and Adam are split over
 * saelite's own threads (SAELITE_THREADS, default the online cores, at most 16, read once per
 * process); the other BLAS calls (relu/jumprelu's dense GEMMs, the GEMV of the b_dec gradient)
 * use OpenBLAS's threads.
 * Determinism: a step is a pure function of the trainer state and the batch. The splits over
 * saelite's threads do not depend on their number (results are bit-identical for any
 * SAELITE_THREADS), and OpenBLAS is deterministic for a fixed OpenBLAS thread count, so
 * checkpoint + resume reproduces an uninterrupted run bit for bit.
 * Ownership: the trainer owns all its buffers; sources own theirs. Errors: err.h codes.
 * Thread safety: a trainer or source is used by one thread at a time (its calls start and join
 * their worker threads before returning). Distinct trainers may run on different threads, but
 * sae_k_encode sets OpenBLAS's process-wide thread count to 1 around its GEMM, so concurrent
 * trainers can change each other's OpenBLAS thread count (results stay correct but are then not
 * guaranteed bit for bit).
 */
#ifndef SAELITE_SAE_TRAIN_H
#define SAELITE_SAE_TRAIN_H
#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"

#include "sae/sae.h"

/* SAE_BDEC_DEFAULT: zero for relu, jumprelu and gated (their recipes'; issue 22), else the median */
enum { SAE_BDEC_ZERO, SAE_BDEC_MEAN, SAE_BDEC_MEDIAN, SAE_BDEC_DEFAULT };

typedef struct {
    sae_arch arch;
    int d_in, d_sae, k;
    int k_aux;            /* AuxK latents; 0 = d_in/2 */
    double aux_coef;      /* default 1/32 */
    double l1;            /* relu: L1 coefficient (5); jumprelu: L0 coefficient (1) */
    double lr;            /* 0 = 3.75e-4 / sqrt(d_sae / 16384), relu at least 1.5e-3 */
    int batch;            /* tokens per step */
    int64_t total_tokens; /* sets the number of steps (schedule) */
    uint64_t seed;
    double warmup_frac;    /* default 0.01 of the steps (at most 1000 steps) */
    double decay_frac;     /* default 0.2 */
    double l1_warmup_frac; /* default 0.05 */
    int64_t dead_window;   /* tokens; 0 = clamp(total/30 (k-sparse) or /10, 100k, 10M) */
    int bdec_init;         /* SAE_BDEC_*; default SAE_BDEC_DEFAULT */
    int normalize;         /* 1 (default): scale inputs to mean norm sqrt(d_in) */
    double jr_bandwidth;   /* default 0.5 (normalised units) */
    double jr_init_threshold; /* default 0.5 */
    double jr_lr_mult;     /* jumprelu: learning-rate multiplier of the thresholds (default 10) */
    double adam_b1, adam_b2, adam_eps; /* b1 < 0: jumprelu 0 (its paper's), others 0.9; 0.999, 1e-8 */
    /* fields added after the first checkpoint version (older checkpoints read them as 0) */
    int n_widths;                /* matryoshka: prefix widths (d_sae appended when missing) */
    int widths[SAE_MAX_WIDTHS];
    int transcoder;              /* SAE_TRANSCODER / SAE_SKIP_TRANSCODER (arch: the activation) */
    int d_out;                   /* transcoders: target width */
    /* clip the global gradient norm (every parameter, after removing the unit-norm decoder rows'
       parallel part) to this before Adam, as torch.nn.utils.clip_grad_norm_; 0: the default
       (1, the relu and jumprelu recipes' value), < 0: off. Checkpoints from before
       the field resume with it off. */
    double grad_clip;
    /* matryoshka: what an inner level m decodes. SAE_MAT_SHARED: the one full-width BatchTopK
       code truncated to its first m latents (Bussmann et al.'s code, SAELens' current
       matryoshka_batchtopk_sae.py, dictionary_learning); SAE_MAT_OWN: a BatchTopK of its own
       inside the prefix, with the same k x batch budget (SAELens' earlier version). 0: the
       default (SAE_MAT_SHARED); checkpoints from before the field resume with SAE_MAT_OWN,
       what they ran. Other architectures: 0. */
    int mat_levels;
} sae_train_config;

enum { SAE_MAT_SHARED = 1, SAE_MAT_OWN = 2 };

void sae_train_defaults(sae_train_config *c);
/* The architectures that read a training flag of one family ("--k", "--k-aux", "--aux-coef":
 * the k-sparse ones with AuxK; "--l1": the penalised ones; "--jr-bandwidth", "--jr-threshold",
 * "--jr-lr-mult": jumprelu), as words ("topk, batchtopk and matryoshka"; for a transcoder, whose
 * activation a is, its activations' names), when a is not one of them; NULL when a reads it or
 * flag is no family's. */
const char *sae_train_flag_owners(sae_arch a, int transcoder, const char *flag);
/* Field-by-field equality (resume checks the flags against the checkpoint's run). _diff returns
 * 1 and names the first difference in why ("--k 32 (this run 16)"), else 0. */
int sae_train_config_equal(const sae_train_config *a, const sae_train_config *b);
int sae_train_config_diff(const sae_train_config *a, const sae_train_config *b, char *why, size_t n);

typedef struct {
    int64_t step, tokens;
    double mse;       /* per element: sum (x - xhat)^2 / (batch d_in), normalised space */
    double ev;        /* explained variance of the batch */
    double l0;        /* mean active latents per token */
    double dead_frac; /* dead latents / d_sae after the step */
    double lr, sparsity_coef, aux_loss, loss;
    double grad_norm; /* with grad_clip: the global gradient norm before clipping (else 0) */
    int clipped;      /* the gradient was scaled down to grad_clip */
} sae_step_stats;

typedef struct sae_trainer sae_trainer;

/* sample [n,d_in] raw activations for the input scale and the b_dec init (n >= 1). */
int sae_trainer_new(sae_trainer **out, const sae_train_config *c, const float *sample, int64_t n);
void sae_trainer_free(sae_trainer *t);
const sae_train_config *sae_trainer_cfg(const sae_trainer *t);
int64_t sae_trainer_total_steps(const sae_trainer *t);
int64_t sae_trainer_step_index(const sae_trainer *t); /* steps done */
int64_t sae_trainer_dead_window(const sae_trainer *t); /* tokens, the default resolved */
double sae_trainer_scale(const sae_trainer *t);
/* One step on x [batch, d_in] raw activations. st may be NULL. Under mpirun it is collective
 * and every rank returns the same code: a failure on one rank (an allocation) is agreed before
 * the step's first collective (dist_check: every rank gets "rank R: " and its message). */
int sae_trainer_step(sae_trainer *t, const float *x, sae_step_stats *st);
/* Current weights in raw units, normalisation and (relu) decoder norms folded in. meta supplies
 * hook_name/model_name/context_size (may be NULL). */
int sae_trainer_export(const sae_trainer *t, const sae_config *meta, sae_model **out);
/* Fires per latent over the last dead_window tokens is not kept; this is tokens since each
 * latent last fired [d_sae] (read-only view). */
const int64_t *sae_trainer_since_fired(const sae_trainer *t);
/* Data parallelism (common/dist.h; docs/scale.md). A step's batch is cut into m micro-batches
 * (leaves) of batch/m consecutive rows, each leaf's gradient computed from zero, the leaves summed
 * in one fixed binary tree, normalisations and the batch-global selections (BatchTopK, Matryoshka)
 * over the whole batch. Under mpirun rank r of N computes leaves [r m/N, (r+1) m/N) of the batch
 * every rank is given (the same rows on every rank), and the sums go across ranks with
 * dist_sum_f32, so the trained weights depend on m, never on N. m = 1 (the default) on one rank
 * is the single-pass step (today's bytes); m > 1 changes the float summation order (other bits,
 * the same model). m must be a power of two dividing batch, N a power of two dividing m
 * (sae_micro_batches_check: ERR_ARG naming the problem). m is kept in the checkpoint. With N > 1
 * the optimiser is sharded (ZeRO-1): the latent gradients are summed only into each rank's part
 * of the latents (dist_sum_part_f32), each rank runs Adam on its part, and the parameters are
 * copied back to every rank (dist_gather_part_f32): every rank then holds all parameters, but
 * the Adam moments of a latent only where it is in the rank's part; sae_trainer_gather brings
 * them to rank 0 before a checkpoint. When every rank is on one node, sae_trainer_bcast moves g
 * and p into node-shared windows (dist_shm_new): the parts are summed from the other ranks'
 * gradients in place and p is one copy that each rank's Adam writes its part of (no allgather);
 * elsewhere the messages of dist_sum_part_f32 / dist_gather_part_f32. The same bits either way. */
int sae_micro_batches_check(int batch, int m);
/* The rows [*r0, *r0 + *n) of a step's batch this rank reads (its leaves' rows); the others may
 * be left unfilled in the x given to sae_trainer_step. */
void sae_trainer_rows(const sae_trainer *t, int *r0, int *n);
/* ERR_ARG for m > 1 once latent blocks are set (sae_latent_blocks_check's message). */
int sae_trainer_set_micro_batches(sae_trainer *t, int m);
int sae_trainer_micro_batches(const sae_trainer *t);
/* Latent blocks (TopK only; docs/scale.md): the d_sae latents are cut into lb blocks (a power
 * of two dividing d_sae); each block's encoder, per-row top-k candidates, reconstruction and
 * backward are computed separately, the global top-k is selected from the blocks' candidates
 * (ties: lower latent first), and the blocks' reconstructions and b_dec gradients are summed in
 * one fixed binary tree. Under mpirun with N = shards ranks (N a power of two dividing lb) rank
 * s computes and updates only blocks [s lb/N, (s+1) lb/N) (every rank sees the whole batch;
 * the top levels of the tree go across ranks with dist_sum_f32), so the weights depend on lb,
 * never on N. lb = 1 (the default) is the single pass (today's bytes). Not with micro-batches
 * > 1. sae_latent_blocks_check: ERR_ARG naming the problem (another architecture, micro-batches,
 * lb or shards not powers of two, shards not dividing lb, a world size other than shards).
 * lb is kept in the checkpoint. Every rank holds full-size parameter arrays; only its own
 * latents are current there, and sae_trainer_gather (collective) brings every rank's latents
 * (parameters and Adam moments) to rank 0 before it checkpoints or exports (data parallel:
 * the moments; see the micro-batches above). */
int sae_latent_blocks_check(const sae_train_config *c, int mb, int lb, int shards);
/* A new lb after steps (a resumed trainer, a test) drops the block buffers sized for the old one;
 * the next step allocates them for lb. */
int sae_trainer_set_latent_blocks(sae_trainer *t, int lb);
int sae_trainer_latent_blocks(const sae_trainer *t);
int sae_trainer_gather(sae_trainer *t);
/* The same for the parameters alone (what sae_trainer_export reads). Both do nothing when rank 0
 * already holds every latent of this step (a gather or sae_trainer_bcast at this step). */
int sae_trainer_gather_params(sae_trainer *t);
/* Rank 0's state (parameters, Adam moments, counters, scales, step) to every rank. */
int sae_trainer_bcast(sae_trainer *t);
/* Whole trainer state to one file, atomically (temp + rename); resume reads it back. */
int sae_trainer_checkpoint(const sae_trainer *t, const char *path);
int sae_trainer_resume(sae_trainer **out, const char *path);
/* Trainer internals for the gradient tests: the normalised-space parameters (W_encT [S,D],
 * W_dec [S,D], b_enc [S], b_dec [D], log_threshold [S] or NULL) and their gradients after
 * sae_trainer_loss_grad, which computes loss and gradients without an optimiser step. It leaves
 * the gradients in place: a sae_trainer_step after it adds its own to them (the kernels
 * accumulate), so a test that steps afterwards zeroes them first. */
typedef struct {
    float *W_encT, *W_dec, *b_enc, *b_dec, *log_threshold;
    float *r_mag, *b_mag; /* gated only (b_enc is b_gate), else NULL */
    float *W_skip;        /* skip transcoders: [d_out,d_in], else NULL (W_dec [S,d_out] and
                             b_dec [d_out] for transcoders) */
} sae_params;
void sae_trainer_params(sae_trainer *t, sae_params *p, sae_params *grad);
int sae_trainer_loss_grad(sae_trainer *t, const float *x, sae_step_stats *st);
/* Gated: on = 1 lets the auxiliary loss's gradient reach the decoder too (it is frozen in
 * training), so the finite-difference test can check every gradient against the total loss. */
void sae_trainer_test_unfreeze(sae_trainer *t, int on);
/* on = 1 keeps every step in its reference form, which the tests compare the fast one with:
 * ReLU, JumpReLU and gated dense (three GEMMs; otherwise sparse while few latents are active),
 * Matryoshka's shared levels decoded backward one level at a time (otherwise one pass for all). */
void sae_trainer_test_reference_steps(sae_trainer *t, int on);

/* Per-phase wall time of the steps (for bench/bench_sae.c): with secs non-NULL every later
 * sae_trainer_step adds the seconds of each phase to secs[phase] (the caller zeroes it; NULL
 * stops). Costs a clock read per phase; results are unchanged. */
enum {
    SAE_PROF_INPUT,    /* scaling the batch, the dead list */
    SAE_PROF_ENCODE,   /* xc = x - b_dec and the encoder GEMM */
    SAE_PROF_TOPK,     /* per-row top-k (TopK) or the batch threshold (BatchTopK) */
    SAE_PROF_AUXSEL,   /* AuxK's top-k_aux over the dead latents */
    SAE_PROF_DECODE,   /* sparse decoder forward, loss, b_dec gradient */
    SAE_PROF_DEC_BWD,  /* CSR transpose and the decoder backward */
    SAE_PROF_ENC_BWD,  /* encoder backward (sparse) */
    SAE_PROF_AUX,      /* AuxK decoder forward and both backwards */
    SAE_PROF_OTHER,    /* the dense architectures' forward/backward, matryoshka levels, b_dec */
    SAE_PROF_ADAM,     /* Adam, with the decoder rows' parallel gradient removed and the rows
                          renormalised in the same pass */
    SAE_PROF_DEAD,     /* dead-latent counters */
    SAE_PROF_N
};
void sae_trainer_profile(sae_trainer *t, double *secs /*[SAE_PROF_N] or NULL*/);
const char *sae_prof_name(int phase);

/* ---- batch sources -------------------------------------------------------------------- */
/* A source yields batches of raw activation rows. next() fills x [B,d_in]; it loops over its data
 * forever (new shuffle each pass) or generates. Deterministic for a given seed, so a resumed run
 * replays it with sae_source_skip. */
typedef struct sae_source sae_source;
struct sae_source {
    int d_in;
    int64_t n_rows; /* rows available (-1 = generated, unbounded) */
    int (*next)(sae_source *s, float *x, int B);
    /* Optional (NULL: the source cannot skip rows): advances the stream by B rows exactly as
       next does but fills only rows [r0, r0+n) of x (the rows of one rank, see
       sae_trainer_rows); the other rows of x are left as they are. */
    int (*next_rows)(sae_source *s, float *x, int B, int r0, int n);
    /* Optional (NULL: never runs dry): rows next can still yield for sure, 0 once drained (a
       held-out store source reads its split once; with --max-norm-ratio fewer than n_rows). */
    int64_t (*rows_left)(sae_source *s);
    void (*close)(sae_source *s);
    void *impl;
};
/* The next B rows of s, of which only [r0, r0+n) need to be filled: next_rows where the source
 * has it (in-memory and .npy rows), else next (every row: generated and store sources are one
 * sequential stream whose rows cannot be skipped without computing them). */
int sae_source_next_rows(sae_source *s, float *x, int B, int r0, int n);
/* All rows of a 2-D float .npy file (held in memory), in a fresh random order every pass. */
int sae_source_npy(sae_source **out, const char *path, uint64_t seed);
/* In-memory rows (borrowed; must outlive the source), shuffled the same way. */
int sae_source_mem(sae_source **out, const float *x, int64_t n, int d_in, uint64_t seed);
/* Only the listed rows of x (rows copied; NULL = 0..n-1). */
int sae_source_mem_rows(sae_source **out, const float *x, const int64_t *rows, int64_t n,
                        int d_in, uint64_t seed);
/* Hand x's ownership (mem_alloc'd) to a memory source: freed when it closes. */
void sae_source_adopt(sae_source *s, float *data);
/* Train c->total_tokens on src: its first n_init rows (>= 1) are the trainer's sample (input
 * scale, b_dec init), then c->batch rows per step; the exported model (no meta) in *out, the
 * last step's stats in *last (may be NULL). For tests, benches and small experiments: the
 * pipeline's runner (sae/sae_run.h) adds checkpoints, resumption and progress. */
int sae_train_source(const sae_train_config *c, sae_source *src, int64_t n_init, sae_model **out,
                     sae_step_stats *last);
/* Activations of `hook` in the store db (opened read-only, owned by the source), split
 * STORE_SPLIT_TRAIN/VAL/ALL by store_seq_list's hash with val_frac. Sequences come in a seeded
 * random order (a new one each pass); their tokens go through a buffer of shuffle_tokens rows
 * from which each output row is drawn uniformly at random and replaced by the next streamed token.
 * A batch thus mixes tokens of roughly shuffle_tokens / seq_len sequences; tokens of one sequence
 * stay in the buffer for ~shuffle_tokens draws, so two neighbouring tokens land in the same batch
 * with probability ~batch / shuffle_tokens. skip_bos drops position 0 of sequences that start
 * with BOS. max_norm_ratio > 0 also drops tokens whose norm exceeds that multiple of the mean
 * token norm of the first full buffer (other high-norm outliers). info (may be NULL) receives the
 * hook's id/width/seq_len/model name. */
typedef struct {
    int64_t hook_id, tokens, seqs;
    int width, seq_len;
    int width_out; /* paired sources: the second hook's width */
    char model_name[128];
    char model_checksum[32]; /* the hook's model's, as extract recorded it ("" if none) */
    int64_t unfinished_run;  /* the hook's extract run that is not done (running or killed), or -1 */
} sae_store_info;
int sae_source_store(sae_source **out, const char *db, const char *hook, int split,
                     double val_frac, uint64_t seed, int64_t shuffle_tokens, int skip_bos,
                     double max_norm_ratio, sae_store_info *info);
/* Paired mode (transcoders): rows [x | y] of width + width_out floats, x from hook and y from
 * hook_out at the same (sequence, position); both hooks must come from one extract (same model
 * and sequence length, the same sequences). The order, split and BOS rule follow hook; the norm
 * cap looks at x. */
int sae_source_store_pair(sae_source **out, const char *db, const char *hook, const char *hook_out,
                          int split, double val_frac, uint64_t seed, int64_t shuffle_tokens,
                          int skip_bos, double max_norm_ratio, sae_store_info *info);
/* A transcoder's (hook, hook_out) in an open store: both of one extract (model, sequence length
 * and precision), as sae_source_store_pair needs them and analyze measures them; db names the
 * file in the error. */
struct store;
int sae_store_pair_check(struct store *s, const char *db, const char *hook, const char *hook_out);
/* Tokens a store source has dropped for their norm so far. */
int64_t sae_source_store_dropped(const sae_source *src);
int sae_source_skip(sae_source *s, int64_t rows, int B);
void sae_source_close(sae_source *s);

/* The trainer, sources and synth draw from common/rng.h (rng_normal_alt for normals). */

/* Geometric median (Weiszfeld iterations) of x [n,d] into out [d]. */
int sae_geometric_median(float *out, const float *x, int64_t n, int d, int iters);

#endif
