/* sae_run.h - the `sae-train` pipeline as a library runner.
 *
 * sae_train_run opens the data source (activations of a hook in a store, a 2-D .npy array held
 * in memory, or generated synthetic superposition data) and its held-out counterpart, initialises
 * the trainer from the first rows of the stream (or resumes OUT/checkpoint.bin, refusing a
 * checkpoint whose run had other settings), runs the step / log / checkpoint / stop loop, then
 * evaluates on held-out rows, writes the SAE (SAELens layout: sae_weights.safetensors, cfg.json
 * with a "training" object, sparsity.safetensors), optionally measures ground-truth recovery, and
 * for a store source registers the SAE and this invocation's training-log rows in the store.
 * Files in OUT: checkpoint.bin (atomic), training_log.csv (the log rows as CSV, an export for
 * plotting tools; the store's sae_training_log table holds the same rows).
 * Data order and initialisation depend only on the settings and the seed, so a run stopped
 * (max_steps or *stop) and resumed gives the SAE an uninterrupted run gives, bit for bit.
 * Ownership: opts strings are borrowed; the result is plain data.
 * Errors: err.h codes naming the file; ERR_ABORTED when *stop became non-zero (a checkpoint was
 * written first, the message says how to continue). Without resume, an OUT that holds an SAE
 * (cfg.json, sae_weights.safetensors) or a checkpoint is refused (ERR_ARG) unless force; resume
 * needs OUT/checkpoint.bin; both are checked before anything is opened or created. A run that
 * fails before its first checkpoint removes what it wrote (training_log.csv, truth_out, OUT when
 * it created it); after a checkpoint what is there is kept, for --resume.
 * Ranks (common/dist.h, under mpirun): every rank opens the data (a shared filesystem: the same
 * paths), reads every batch and computes its micro-batches; the trainer's state starts on rank 0
 * and is broadcast; only rank 0 writes (OUT, checkpoints, the log, the SAE files, the registry,
 * truth_out), prints progress and evaluates. Every failure is agreed (dist_check) before the next
 * collective, so all ranks stop together with the failing rank's message.
 * Threads: one run per output directory; the kernels use sae/'s thread pool (SAELITE_THREADS).
 * Progress: common/progress.h lines on stderr; nothing on stdout.
 */
#ifndef SAELITE_SAE_RUN_H
#define SAELITE_SAE_RUN_H
#include <stdint.h>

#include "sae/metrics.h"
#include "sae/sae_kernels.h"
#include "sae/sae_train.h"
#include "sae/synth.h"
#include "store/store_sae.h"

typedef struct {
    /* data: exactly one of db (with hook), npy, synth */
    const char *db;
    const char *npy;
    const char *npy_out;       /* transcoders with npy: the targets [tokens, d_out] .npy, row for row */
    int synth;
    const char *hook;          /* with db: which activations; otherwise metadata only */
    const char *hook_out;      /* transcoders (train.transcoder): the target hook in db */
    int64_t shuffle_tokens;    /* store: token shuffle buffer */
    int keep_bos;              /* store: keep BOS positions */
    double max_norm_ratio;     /* store: drop tokens above this x the mean norm (0 = off) */
    synth_config synth_cfg;    /* synth: the generator (its seed draws the training stream) */
    const char *synth_spec;    /* synth: load synth_cfg from this spec file (`synth --spec`) */
    double val_frac;           /* held-out fraction of sequences / rows */
    int64_t eval_tokens;       /* held-out tokens for the final evaluation (capped by the data) */
    const char *truth;         /* ground-truth directions [F, d_in] .npy: measure MMCS */
    const char *truth_out;     /* synth: write the true directions here */
    const char *out;           /* output directory (created) */
    sae_train_config train;    /* d_in is set from the data; d_sae 0: lround(expansion * d_in) */
    double expansion;
    int checkpoint_every;      /* steps; 0 = at the end only */
    double checkpoint_secs;    /* also once this long after the last checkpoint (rank 0's clock,
                                  agreed); 0 = by steps only */
    int log_every;             /* steps between log rows; 0 = about 100 rows per run */
    int64_t max_steps;         /* stop with a checkpoint after this many steps (0 = no limit) */
    int resume;                /* continue from out/checkpoint.bin */
    int force;                 /* without resume: overwrite an OUT holding an SAE or checkpoint */
    const char *model_name;    /* metadata; NULL/"" = the store's model */
    int context_size;          /* metadata; 0 = the store's sequence length */
    volatile int *stop;        /* polled after every step; may be NULL */
    const char *resume_advice; /* the end of a refused --resume's message (the checkpoint's run
                                  had other settings); NULL: "resume with the same flags" */
    volatile int *ckpt_done;   /* may be NULL: set to 1 on every rank once a checkpoint of this run
                                  is on disk (agreed), for a signal handler's message */
    int micro_batches;         /* leaves per step (sae_train.h, data parallelism): the result
                                  depends on it, not on the world size; 0 = 1 */
    int latent_shards;         /* TopK: ranks that split the latents (= mpirun -np; 0 = 1) */
    int latent_blocks;         /* TopK: latent blocks (sae_train.h): the result depends on it, not
                                  on latent_shards; 0 = latent_shards */
    sae_precision precision;   /* the encoder GEMM (sae_kernels.h): FP32 (default), BF16 (refused
                                  with ERR_ARG where the CPU lacks bf16), AUTO; set for the run,
                                  restored after it. Not part of the checkpoint: a resume may
                                  change it (bit-identical resumes need the same precision) */
} sae_run_opts;

/* The defaults `saelite sae-train` documents (topk, k 32, 8x, 10M tokens, batch 4096, ...). */
void sae_run_defaults(sae_run_opts *o);
/* *d_sae = lround(expansion x d_in); ERR_ARG naming both when that is not 1..2^30 (it went
 * through int and wrapped: 268435458 x 16 gave 32). */
int sae_run_d_sae(double expansion, int d_in, int *d_sae);

typedef struct {
    sae_arch arch;
    int d_in, d_sae, batch;
    int d_out;                 /* transcoders: the target width (0 for SAEs) */
    int64_t steps;             /* steps this invocation ran */
    int64_t step, total_steps; /* where the run stands / its schedule */
    int64_t tokens_asked;      /* --tokens: total_steps x batch of them are trained (the rest of a
                                  last partial batch is not) */
    int64_t dead_window;       /* tokens without firing after which a latent counts as dead */
    int auxk;                  /* AuxK is on (k-sparse architectures, aux_coef > 0) */
    int64_t unfinished_run;    /* --db: the hook's extract run that is not done (running or
                                  killed), or -1; hook_tokens: what the hook held when read */
    int64_t hook_tokens;
    int64_t train_rows;        /* rows one pass over the training data yields (-1: generated,
                                  unbounded); --tokens above it repeats the data */
    int finished;              /* step == total_steps (then registered); a max_steps stop also
                                  writes the SAE of the step reached */
    double seconds, read_seconds; /* the training loop (checkpoints included); reading batches */
    double total_seconds;         /* the training loops of every call of the run: with --resume,
                                     the checkpoint's record plus this call's seconds */
    double ckpt_seconds;          /* ... of it gathering and writing checkpoints */
    int64_t eval_tokens;       /* 0: no held-out data, eval is not filled */
    sae_metrics_summary eval;
    double mmcs, recovered;    /* -1 without truth */
    int64_t dropped;           /* store: tokens dropped for their norm */
    double grad_clip;          /* the run's gradient-norm clip (<= 0: off) */
    int64_t clipped;           /* steps of this invocation whose gradient it scaled down */
    int64_t sae_id;            /* registry id in the store, -1 when not registered */
    char engine[96];           /* what ran the encoder GEMM (sae_k_engine), e.g. "bf16 (oneDNN
                                  brg:avx512_core_amx_bf16, ISA avx512_core_amx)" */
    char precision[8];         /* the run's steps so far: "fp32", "bf16", or "mixed" once a
                                  --resume changed it (cfg.json "precision" unless fp32) */
    char precision_was[8];     /* that resume: the checkpoint's precision; "" otherwise */
    int unlocked;              /* OUT's filesystem has no flock: ran without .sae-train.lock */
} sae_run_result;

int sae_train_run(const sae_run_opts *o, sae_run_result *res);

/* Evaluate an SAE on n rows from a source (sae_metrics_eval over src->next). */
int sae_eval_source(const sae_model *m, sae_source *src, int64_t n, sae_metrics *acc);

/* An SAE argument (--sae) that names a registry id of the database s (file db): all digits and no
 * such path here. Then *by_id = 1 and *r is the row, whose directory exists (a relative one is
 * taken from the current directory, as sae-train recorded it); otherwise *by_id = 0 and OK. The
 * caller loads r->dir and checks it with sae_check_registered. ERR_ARG (out of range) or
 * ERR_NOTFOUND (no registry, no such id, the directory is gone) naming db. */
int sae_registry_arg(store *s, const char *db, const char *arg, store_sae_entry *r, int *by_id);
/* The rule sae_registry_arg applies: arg is all digits and no such path exists here. */
int sae_registry_arg_is_id(const char *arg);

/* Whether the SAE loaded from dir is the one registry row r (of database db) describes: d_in,
 * d_sae, the architecture (a BatchTopK SAE is saved as JumpReLU, or TopK without a threshold), k
 * (TopK), hook_name and model_name (when both name one). ERR_ARG naming dir and every field that
 * differs, with both values: a directory that now holds another SAE must not be scored under the
 * old row's id. */
int sae_check_registered(const sae_model *m, const char *dir, const store_sae_entry *r,
                         const char *db);
/* Whether hook h of store s (database db) comes from the model the SAE in dir was trained on:
 * ERR_ARG naming both checksums when the SAE's cfg.json records one (sae-train --db writes it)
 * and differs from the model's that extract recorded; OK when either is unknown (SAELens files
 * name models by hub names, which a database does not hold). */
int sae_check_hook_model(const sae_model *m, const char *dir, store *s, const store_hook *h,
                         const char *db);

#endif
