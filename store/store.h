/* store.h - the SQLite store: tokens, documents and hooked activations in one database file.
 *
 * Purpose: the one database every later command reads. The schema is store/schema.sql
 * (documented there and in docs/store.md); this module is the only code that includes sqlite3.h.
 *
 * Versioning: PRAGMA user_version holds STORE_SCHEMA_VERSION and PRAGMA application_id the magic
 * 0x5341454c ('SAEL'). store_open refuses (ERR_VERSION) a database written by a newer saelite,
 * refuses (ERR_FORMAT) an SQLite file that is not a saelite store, and migrates older versions
 * (none exist yet). Extension schema parts of other modules are versioned by name
 * (store_schema_part). A database is input: store_open also refuses (ERR_FORMAT, one line naming
 * the file and the first difference) core tables, or tables of a recorded sae/analysis part, that
 * differ from the schema SQL (missing, a view or virtual table, a missing column or another
 * declared type) and any trigger; connections do not trust the file's schema (trusted_schema off).
 *
 * Foreign keys are not enforced (PRAGMA foreign_keys stays off: per-row cost); REFERENCES clauses
 * document the schema, and code that deletes rows deletes dependent rows itself.
 * Durability: writes happen inside store_begin/store_commit transactions with synchronous=NORMAL,
 * so a kill -9 at any moment leaves the last committed state. Journal: WAL, so readers never
 * block writers (several handles on one file work); after store_set_bulk (extract) a handle uses
 * a rollback journal until it closes and switches the file back to WAL: with large
 * transactions (~32 MB) bulk blob appends then run at dd speed, where WAL writes every byte
 * twice (bench/bench_store.c, docs/store.md). While a bulk writer has the file, other handles
 * block its commits. Page size 65536 for new databases (blob-heavy), 4 MiB page cache.
 *
 * Activations: one blob per (hook, sequence) of T x width values, row-major, little-endian, in
 * the hook's dtype (STORE_F32/F16/BF16). Reads and writes take and return float32; f16/bf16 are
 * converted with round-to-nearest-even. A read that finds a NaN or an infinity fails (ERR_FORMAT,
 * naming the hook, sequence, token and dimension): no reader computes on one.
 *
 * Ownership: arrays returned through pointer-to-pointer arguments are mem_alloc'd and owned by
 * the caller (mem_free). Errors: int codes from common/err.h with a message naming the database.
 * Thread safety: one store handle per thread; handles are not shared.
 */
#ifndef SAELITE_STORE_H
#define SAELITE_STORE_H
#include <stddef.h>
#include <stdint.h>

#define STORE_SCHEMA_VERSION 1

typedef struct store store;

enum { STORE_READONLY = 1, STORE_CREATE = 2 };
enum { STORE_F32 = 0, STORE_F16 = 1, STORE_BF16 = 2 };
enum { STORE_SPLIT_ALL = 0, STORE_SPLIT_TRAIN = 1, STORE_SPLIT_VAL = 2 };

/* Opens (and with STORE_CREATE creates) a database; creates or checks the schema version. */
int store_open(store **out, const char *path, int flags);
/* The same; a file it creates gets the page size store_page_for(blob_bytes) (the size of the
 * activation rows the creator will write; <= 0: the default 65536). An existing file keeps its
 * own. */
int store_open_blobs(store **out, const char *path, int flags, int64_t blob_bytes);
int store_page_for(int64_t blob_bytes);
void store_close(store *s);
/* Remove a database file and its -wal, -shm and -journal companions (missing ones ignored);
 * for callers that recreate a store from scratch (tests, benchmarks, fuzzing). */
void store_remove(const char *path);
const char *store_path(const store *s);
int store_begin(store *s);
int store_commit(store *s);
int store_rollback(store *s); /* no-op when no transaction is open */
/* For writers of large transactions: rollback journal until store_close (see above). Call
 * outside a transaction, after validation (it writes the file header). When another handle has
 * the file open, the file stays in WAL mode (correct, slower). From then on sequences, token rows
 * and activations are written only inside store_begin/store_commit (ERR_ARG otherwise): outside
 * one, every row would be a rollback-journal transaction of its own, three fsyncs each. Every
 * 8 MB of activations it starts the writeback of the file's dirty pages (sync_file_range on
 * SQLite's own descriptor), so that the commits' fdatasyncs find them written. */
int store_set_bulk(store *s);
/* PRAGMA integrity_check; ERR_FORMAT with the first problem when the file is damaged. */
int store_check(store *s);

/* dtype helpers: name "f32"/"f16"/"bf16" <-> STORE_*; bytes per value. */
const char *store_dtype_name(int dtype);
int store_dtype_parse(const char *name, int *dtype); /* ERR_ARG for unknown names */
int store_dtype_size(int dtype);

/* ---- models, documents, sequences, tokens ------------------------------------------------ */
typedef struct { int64_t id; char name[128]; char path[512]; char checksum[32]; } store_model;
/* Returns the id of the (first) model row with this checksum, inserting it when absent. */
int store_model_add(store *s, const char *name, const char *path, const char *config_json,
                    const char *checksum, int64_t *id);
/* All models, ordered by id. */
int store_model_list(store *s, store_model **models, size_t *n);
/* models.path of the row `saelite import` adds: no model directory, the activations came from a
   .npy file (readers that would load the model say so instead of opening this as a path) */
#define STORE_IMPORT_MODEL_PATH "(imported .npy)"

/* Returns the document (source, ordinal); inserts it when absent. When present with a different
 * checksum, ERR_FORMAT ("the corpus changed since ..."). text may be NULL. */
int store_doc_add(store *s, const char *source, int64_t ordinal, const char *name,
                  const char *genre, const char *text, size_t len, int64_t *id);

/* The source under which the database holds this corpus when it holds none of it under
 * `source` (other[0] = 0 otherwise): the same corpus given by another path, whose documents,
 * windows and tokens a run would store a second time. sums[i]: hash_fnv1a of document i's text,
 * i < n (n >= 1); a source matches when it has document 0 and each of its documents below n has
 * the same text (a source stored further, or not as far, still matches). */
int store_doc_other_source(store *s, const char *source, const uint64_t *sums, int64_t n,
                           char *other, size_t cap);

/* Finds the sequence (document, start, T, bos) or inserts it with its token ids (*inserted = 1;
 * inserted may be NULL). ids NULL: unknown ids (imports), stored as an empty blob. An existing
 * one whose ids differ is ERR_FORMAT. */
int store_seq_add(store *s, int64_t doc_id, int64_t start, int bos, const int *ids, int T,
                  int64_t *id, int *inserted);
/* Token ids of a sequence into ids[T] (T <= *T on input is required; ERR_SHAPE otherwise);
 * ERR_NOTFOUND when the sequence does not exist or has no ids (an import without token ids).
 * Pass ids == NULL to ask T only. */
int store_seq_tokens(store *s, int64_t seq_id, int *ids, int *T);

/* Per-token rows for SQL users. text[i] may be NULL; byte_start/byte_end < 0 store NULL;
 * tags may be NULL (no tags) or hold NULL entries. Rows must not exist yet (add them when
 * store_seq_add reports the sequence as inserted); ERR_SQL otherwise. */
int store_tokens_add(store *s, int64_t seq_id, int T, const int *ids, const char *const *text,
                     const int64_t *byte_start, const int64_t *byte_end, const char *const *tags);
/* Whether the store holds token rows (*tokens) and any of them with a POS tag (*tagged): 0 or 1
 * each (a scan of the tokens when none is tagged). */
int store_tokens_tagged(store *s, int *tokens, int *tagged);
/* *n = the sequences whose document row is gone (a database changed outside saelite: extract
 * finds its sequences by document, so a rerun would store those tokens again). */
int store_orphan_sequences(store *s, int64_t *n);

/* ---- hooks and activations ---------------------------------------------------------------- */
typedef struct {
    int64_t id, model_id;
    char name[128];
    int layer, width, dtype, seq_len;
    int64_t n_seqs, n_tokens; /* activations stored so far */
} store_hook;

/* Returns the hook (model_id, name), creating it when absent. An existing hook with a different
 * width, dtype or seq_len is ERR_SHAPE with a message saying what differs. */
int store_hook_add(store *s, int64_t model_id, const char *name, int layer, int width, int dtype,
                   int seq_len, store_hook *out);
/* By name (when several models have it, the first); ERR_NOTFOUND lists the hooks there are. */
int store_hook_find(store *s, const char *name, store_hook *out);
/* OK when no hook has this name or the one there takes rows of this shape (store_hook_add's
 * ERR_SHAPE otherwise): for checking before outputs elsewhere are written. */
int store_hook_check(store *s, const char *name, int width, int dtype, int seq_len);
/* ERR_ARG naming PATH and the hook when one sequence of seq_len x width values in dtype is more
 * bytes than SQLite stores in one blob (SQLITE_LIMIT_LENGTH; each sequence is one): no full
 * window could be stored, and readers refuse such a hooks row as damaged (they size a buffer
 * from it). store_hook_add checks it; writers call it before creating files. */
int store_hook_size_check(const char *path, const char *name, int width, int dtype, int seq_len);
int store_hook_list(store *s, store_hook **hooks, size_t *n);

/* Sequence ids having activations for a hook, ascending; split by a deterministic hash of the
 * sequence id: a sequence is in the validation split when hash(id) < val_frac. */
int store_seq_list(store *s, int64_t hook_id, int split, double val_frac, int64_t **ids,
                   size_t *n);
/* 1 when the sequence belongs to the validation split for val_frac. */
int store_seq_is_val(int64_t seq_id, double val_frac);
/* The sequences holding activations of hook_a and none of hook_b: *n of them, the lowest id
 * *first (-1 when there are none). A transcoder reads (hook_a, hook_b) rows of each sequence of
 * hook_a: hooks of two extract runs over other windows (another corpus path, --bos choice) or of
 * two imports share none. */
int store_hook_unpaired(store *s, int64_t hook_a, int64_t hook_b, int64_t *n, int64_t *first);
/* The split every command holds out by default (sae-train, sweep, analyze): one value, so that
 * analyze's validation sequences are ones the SAE did not train on. Since the split is nested
 * (hash < val_frac), a larger fraction would include training sequences: analyze's 0.1 put
 * 24 of 54 (an audit). */
#define STORE_VAL_FRAC_DEFAULT 0.05

/* Writes (or replaces) the activations x[T * width] of (hook, sequence). */
int store_act_write(store *s, int64_t hook_id, int64_t seq_id, const float *x, int T);
/* The first of x[0..n) that a hook of this dtype cannot hold, or -1: a NaN or an infinity, or a
 * finite value the conversion would turn into an infinity (float16 from 65520 on, bfloat16
 * near FLT_MAX). *overflow says which. store_act_write refuses these; an importer calls it
 * before it creates anything. */
int64_t store_act_first_bad(int dtype, const float *x, int64_t n, int *overflow);
/* *exists = 1 when activations of (hook, sequence) are stored. */
int store_act_exists(store *s, int64_t hook_id, int64_t seq_id, int *exists);
/* *T = the rows (tokens) stored for (hook, sequence), 0 when none. */
int store_act_rows(store *s, int64_t hook_id, int64_t seq_id, int *T);
/* A window of (document, start, bos) of another length than T on which the hook has
 * activations: *other_T its length and *other_seq its id, or 0 and -1 when there is none (an
 * extraction with another --max-tokens cut its last window there). */
int store_act_other_len(store *s, int64_t hook_id, int64_t doc_id, int64_t start, int bos, int T,
                        int *other_T, int64_t *other_seq);
/* Deletes the activations of (hook, sequence); the sequence and its token rows stay. */
int store_act_delete(store *s, int64_t hook_id, int64_t seq_id);
/* Deletes the activations of hook over every sequence of document doc_id, then the document's
 * sequences (and their token rows) that no hook holds activations for any more: what an import
 * of the same file held, before it is imported again. */
int store_act_delete_doc(store *s, int64_t hook_id, int64_t doc_id);
/* Reads activations into out[T * width]; *T is set. out must hold hook seq_len * width floats.
 * ERR_NOTFOUND when absent. Uses incremental blob I/O. */
int store_act_read(store *s, int64_t hook_id, int64_t seq_id, float *out, int *T);
/* Absorbs into the content key h (hash_absorb128) the activations of at most `samples` of the
 * sequences seqs[0..n) of a hook, evenly spread (every one when n <= samples): a fingerprint of
 * the stored values for a cache keyed on them (analyze's and eval's checkpoints), cheap next to
 * reading them all. A sequence without activations is an error (ERR_NOTFOUND). */
int store_act_fingerprint(store *s, int64_t hook_id, const int64_t *seqs, size_t n, int samples,
                          uint64_t h[2]);
/* Activation rows of a hook whose sequences come from documents of this source (corpus path). */
int store_count_source_acts(store *s, int64_t hook_id, const char *source, int64_t *n);

/* ---- training iterator -------------------------------------------------------------------- */
/* Streams the activation blobs of one hook in a random (seeded) order of sequences, restricted
 * to a split. Each pass visits every sequence once; store_iter_next returns OK with *T = 0 at
 * the end of a pass; store_iter_shuffle starts a new pass with a new order. */
typedef struct store_iter store_iter;
int store_iter_open(store_iter **out, store *s, int64_t hook_id, int split, double val_frac,
                    uint64_t seed);
/* out must hold seq_len * width floats; *T tokens were written; seq_id may be NULL. */
int store_iter_next(store_iter *it, float *out, int *T, int64_t *seq_id);
void store_iter_shuffle(store_iter *it, uint64_t seed);
size_t store_iter_count(const store_iter *it); /* sequences per pass */
int64_t store_iter_tokens(const store_iter *it); /* tokens per pass */
/* how many of the pass's sequences are in ids[n] (sorted ascending): with the BOS sequences'
   ids, the tokens a pass yields once each BOS position is skipped */
size_t store_iter_count_in(const store_iter *it, const int64_t *ids, size_t n);
void store_iter_close(store_iter *it);

/* ---- context ------------------------------------------------------------------------------ */
/* Tokens [pos - before, pos + after] of a sequence, clipped to it. text entries are owned by the
 * context (NULL when the store has no token text: imports without a tokenizer). */
typedef struct {
    int n, center;      /* center: index of pos within the arrays */
    int *ids;
    char **text;
    int64_t document_id;
    int64_t doc_start;  /* document token index of sequence position 0 (after BOS) */
    int bos;
} store_context;
int store_context_get(store *s, int64_t seq_id, int pos, int before, int after,
                      store_context *out);
void store_context_free(store_context *c);

/* ---- runs, extension parts, summary ------------------------------------------------------- */
/* Finds a run of this kind with exactly these params (JSON text) or inserts one ('running'). */
int store_run_begin(store *s, const char *kind, const char *params, int64_t *run_id,
                    int *was_done);
int store_run_done(store *s, int64_t run_id);
/* The largest ids of models, hooks and runs (0 when empty): taken before a run's setup adds
 * rows, so that a run refused before it stored anything can take them back. */
typedef struct { int64_t model, hook, run; } store_mark;
int store_mark_take(store *s, store_mark *m);
/* Undo a setup that stored nothing, in one transaction: removes the given rows only where they
 * are newer than the mark (this run added them) and nothing refers to them: hooks without
 * activations, the run, the model without hooks. Rows of other runs are left alone. */
int store_mark_undo(store *s, const store_mark *m, int64_t model_id, const int64_t *hook_ids,
                    int n_hooks, int64_t run_id);
/* The runs of a kind, in id order: ids[n] and params[n] (the JSON as stored), mem_alloc'd; free
 * with store_run_list_free. */
int store_run_list(store *s, const char *kind, int64_t **ids, char ***params, size_t *n);
/* The newest extract run of hook that is not done (running now in another process, or killed)
 * into *run_id, else -1: what reads the hook sees only the tokens stored so far. */
int store_hook_unfinished(store *s, const char *hook, int64_t *run_id);
void store_run_list_free(int64_t *ids, char **params, size_t n);

/* Extension tables (see api.md): runs sql (CREATE TABLE IF NOT EXISTS ...) and records the
 * part version; a newer recorded version than `version` is ERR_VERSION. On a read-only store
 * only the version check is done. */
int store_schema_part(store *s, const char *part, int version, const char *sql);

typedef struct {
    int64_t n_models, n_documents, n_sequences, n_tokens, n_hooks, n_activations;
    int64_t act_bytes, file_bytes;
    int version;
} store_summary;
int store_summary_get(store *s, store_summary *out);
/* *bytes = the database's free pages (freelist x page size), as this handle's transaction sees
 * them: what a write reuses before the file grows (rows a transaction deleted count). */
int store_free_page_bytes(store *s, int64_t *bytes);

/* Extension parts recorded (name, version), at most cap. */
int store_part_list(store *s, char (*names)[64], int *versions, int cap, int *n);
int store_run_counts(store *s, int64_t *done, int64_t *running);
/* Rows of a table, or *n = -1 when the table does not exist (e.g. an extension part's). */
int store_count_rows(store *s, const char *table, int64_t *n);

#endif
