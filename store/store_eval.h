/* store_eval.h - the evaluation tables (store/schema_eval.sql, schema part "eval", version 1):
 * what `saelite eval` (analysis/eval.h) reads from the core tables and writes.
 *
 * Usage: store_eval_init once per open store (also creates the "sae" part: runs are keyed by
 * sae_registry.id); store_eval_seqs lists the sequences with their document and genre;
 * the SAE's registry row comes from store_sae_get (store_sae.h). Writing, inside one
 * store_begin/store_commit transaction: store_eval_run_begin (removes an earlier run of the same
 * SAE and suite with its rows) -> store_eval_probe / store_eval_absorption / store_eval_ablation /
 * store_eval_metric;
 * roll back on any error.
 * Ownership: strings are copied by SQLite; store_eval_seqs' array is mem_alloc'd (caller frees).
 * Errors: err.h codes (ERR_SQL, ERR_IO, ERR_NOMEM, ERR_NOTFOUND) naming the database.
 * Thread safety: like the store, one thread per handle.
 */
#ifndef SAELITE_STORE_EVAL_H
#define SAELITE_STORE_EVAL_H
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

#define STORE_EVAL_VERSION 1

int store_eval_init(store *s);

typedef struct {
    int64_t seq_id, doc_id;
    int bos, n_tokens;
    char genre[32];  /* documents.genre; "" when NULL (eval: no genre, in no genre task) */
} store_eval_seq;
/* Sequences with activations for the hook, by id. */
int store_eval_seqs(store *s, int64_t hook_id, store_eval_seq **out, size_t *n);

int store_eval_run_begin(store *s, int64_t sae_id, const char *suite, const char *hook_name,
                         const char *config_json, int64_t n_seqs, int64_t *run_id);
/* features: a JSON array text or NULL; NAN accuracies store NULL. */
int store_eval_probe(store *s, int64_t run_id, const char *task, const char *kind,
                     const char *dict, int k, int n_train, int n_test, double train_acc,
                     double test_acc, const char *features);
int store_eval_absorption(store *s, int64_t run_id, const char *parent, double gt_f1,
                          int included, const char *split_features, int n_split, double split_f1,
                          int n_probe_tp, int n_false_neg, double mean_frac, double full_rate);
/* NAN values store NULL. */
int store_eval_ablation(store *s, int64_t run_id, const char *task, int n, double clean_acc,
                        double orig_acc, double ablated_acc, double other_diff, double score);
int store_eval_metric(store *s, int64_t run_id, const char *metric, double value);
/* *n: the evaluations of SAE sae_id whose recorded sample differs from (seed, seqs_per_genre,
 * random baseline) - another eval replaced a sweep's rows. 0 when the tables do not exist. */
int store_eval_runs_other(store *s, int64_t sae_id, uint64_t seed, int seqs_per_genre,
                          int random_sae, int64_t *n);

#endif
