/* ana_run.h - the `analyze` pipeline as a library runner: an SAE (or the identity "neurons"
 * dictionary of its hook) over the stored activations, results into the database.
 *
 * ana_run loads the inputs every dictionary shares once (the split's sequences, token ids, POS
 * tags, BOS flags, the model and tokenizer when available), then per dictionary: one pass over
 * the stored activations (sae_metrics + per-feature statistics, top and quantile samples,
 * histograms), the downstream CE/KL pass with the SAE spliced into the model at its hook, decoder
 * geometry against as many random directions, logit effects along the direct path
 * (gpt2_hook_direct_proj), POS alignment, and with `effects` the measured ablation effects
 * (analysis/effects.h) compared with the direct path, all written in one transaction per dictionary
 * (schema_analysis.sql; a rerun of the same dictionary replaces its rows). Nothing is written
 * before the SAE is known to fit the database, and a failing dictionary rolls back.
 * Ownership: opts strings are borrowed; the result is plain data (no pointers to free).
 * Errors: err.h codes with a message naming the file (ERR_ARG, ERR_NOTFOUND, ERR_SHAPE, ERR_IO,
 * ERR_NOMEM; ERR_ABORTED when *stop became non-zero: the dictionary in progress is rolled back,
 * the ones finished stay). Resume: the pass over the activations saves its state beside the
 * database every ckpt_secs, and the same call after a kill continues from it (ana_run.c).
 * Threads: one run per store file at a time; the kernels below use OpenBLAS and sae/'s threads.
 * Under mpirun (common/dist.h) ana_run is collective: every rank calls it with the same options;
 * the ranks split the sequences (analysis/ana_dist.h), rank 0 alone reads the split's tokens and
 * writes, every rank returns the same code (the failing rank's message), and the result is
 * complete on rank 0 only. The tables are the same as one process's, bit for bit.
 * Progress: common/progress.h lines on stderr (terminal or timed), nothing on stdout.
 */
#ifndef SAELITE_ANA_RUN_H
#define SAELITE_ANA_RUN_H
#include <stddef.h>
#include <stdint.h>

#include "sae/metrics.h"

/* The zero-ablation pass's per-sequence CE and KL sums by content (model path, hook, target hook,
 * the forward's precision, the sequence's tokens): every SAE on the same hook of the same model
 * repeats them, so a sweep keeps one memo for all its runs and the pass runs once per sequence
 * and hook. The sums are the same bits either way. Owned by the caller, valid for one model
 * file; one run at a time. */
typedef struct ana_memo ana_memo;
int ana_memo_new(ana_memo **out);
void ana_memo_free(ana_memo *m);
void ana_memo_counts(const ana_memo *m, int64_t *hits, int64_t *kept); /* sequences reused / run */

typedef struct {
    const char *db;        /* store with the activations; written: ana_* tables */
    const char *sae_dir;   /* SAE directory (SAELens layout), or NULL */
    const char *hook;      /* needed with neurons alone, or for an SAE without hook_name */
    const char *model_dir; /* NULL: the model path the database recorded for the hook */
    const char *tok_dir;   /* NULL: the model's directory, if it holds a tokenizer */
    int neurons;           /* also (or only) the identity dictionary of the hook's neurons */
    int all;               /* every stored sequence, not the validation split */
    int all_acts;          /* store every non-zero activation */
    int force;             /* all_acts written also where the filesystem's free space looks too
                              small for them (refused by default, ERR_IO) */
    int no_model;          /* skip downstream loss and logit effects */
    int keep_bos;          /* count prepended <|endoftext|> positions */
    int top_n, n_intervals, per_interval, reservoir, nbins, geom_bins, logit_k, ce_seqs, max_seqs;
    int effects;           /* also measure per-feature ablation effects (SAEs with a model) */
    int effects_ctx;       /* contexts per feature for the effects (<= 0: all) */
    int effects_seqs;      /* sequences of the split the effects use (<= 0: all) */
    double val_frac, cos_threshold, hist_lo, hist_hi;
    int precision;         /* the model forward's matmuls (downstream loss, effects):
                              OP_PRECISION_FP32 (0, the default), _BF16 (ERR_ARG where the CPU has
                              no bf16) or _AUTO (model/ops.h); the SAE's own kernels stay fp32 */
    volatile int *stop;    /* polled per sequence; may be NULL */
    double ckpt_secs;      /* the pass over the activations saves its state this often (seconds;
                              <= 0: never) beside the database, and a rerun with the same inputs
                              and options continues from it (ana_run.c: the file, its key) */
    ana_memo *memo;        /* the downstream pass's zero-ablation sums (may be NULL) */
    int no_err_pass;       /* skip the downstream SAE+error pass (a check that splicing leaves the
                              clean forward; its ce/kl_sae_err are then NaN and not written) */
    /* called with a one-line notice (e.g. the size --all-acts is about to write); may be NULL */
    void (*notice)(const char *msg, void *user);
    void *user;
} ana_run_opts;

/* The defaults `saelite analyze` documents (top 20, 10 quantiles x 5, 40 bins, ...). */
void ana_run_defaults(ana_run_opts *o);

typedef struct {
    double ce_clean, ce_sae, ce_zero, ce_err; /* mean next-token CE: clean, SAE, zero, SAE+error */
    double kl_sae, kl_zero, kl_err;           /* mean KL(clean || patched) in nats */
    double ce_score, kl_score;                /* ana_score: 1 = as clean, 0 = as zero-ablated */
    int64_t n;                                /* predicted tokens */
} ana_downstream;

typedef struct {
    const char *kind;       /* "sae" / "neurons" (static strings) */
    char name[256];         /* the SAE directory as given, or neurons@HOOK */
    int64_t dict_id;        /* ana_dicts.id */
    size_t n_seqs;
    int64_t n_tokens;       /* positions in the statistics (BOS left out unless keep_bos) */
    int d_sae;
    sae_metrics_summary rec;
    int dead, dense;        /* features never active / active on > 10% of tokens */
    int have_downstream;    /* SAEs with a model only */
    ana_downstream ds;
    double geom_mean, geom_random_mean; /* mean max|cos| of the decoder and of random directions */
    int geom_over, geom_random_over;    /* features with max|cos| > cos_threshold */
    int pos_n;              /* features with a best tag */
    double pos_mean;        /* their mean best-tag precision (NaN when pos_n == 0) */
    int64_t all_acts_rows;  /* rows written by all_acts */
    int64_t replaced_seqs;  /* n_seqs of the earlier analysis of the same key it replaced, -1: none */
    size_t resumed_seqs;    /* sequences of the pass the checkpoints held (every rank's) */
    int logit_skipped;      /* a model was loaded but the hook has no linear direct path */
    int have_effects;       /* --effects ran: ana_effects / ana_effect_logits rows */
    int effects_features;   /* features with at least one measured context */
    int64_t effects_contexts, effects_forwards; /* (feature, position) ablations; forward passes */
    int effects_local;      /* the hook is position-local: ablations packed across positions */
    double effects_corr_mean, effects_corr_median; /* Spearman rank_corr over features (NaN: none) */
    double t_effects;
    double seconds, t_pass, t_downstream, t_geometry, t_write;
} ana_dict_result;

typedef struct {
    char hook[128];
    int64_t unfinished_run; /* the hook's extract run that is not done (running or killed), or -1 */
    int64_t hook_tokens;    /* the hook's stored tokens when it was read */
    int n_dicts;            /* 1 or 2: the SAE first, then the neurons */
    ana_dict_result dict[2];
    char matmuls[128];      /* the model forward's matmuls: "fp32 (OpenBLAS Haswell)", "fp32 (no bf16:
                               why)" for auto, or "bf16 (oneDNN, ISA ...)"; with bf16 the
                               downstream metrics add model_bf16 = 1 */
} ana_run_result;

int ana_run(const ana_run_opts *o, ana_run_result *res);

/* What ana_run's downstream pass will need for an SAE on `hook`, checked before a caller writes
 * anything (the sweep, before its first run): o->db's hook, the model (o->model_dir or the one
 * the database recorded: it loads, its checksum is extract's, the hook's width fits) and
 * o->tok_dir when given. Loads the model once and frees it. One process (not collective).
 * Errors: ana_run's messages for the same problems, without the advice of analyze's --no-model. */
int ana_check_model(const ana_run_opts *o, const char *hook);

#endif
