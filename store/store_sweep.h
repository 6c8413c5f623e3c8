/* store_sweep.h - architecture sweeps (store/schema_sweep.sql, schema part "sweep"): one row per
 * finished run of `saelite sweep`, and the readers its frontiers need, including the metrics of
 * the optional view eval_summary(sae_id, suite, metric, value) that the evaluation suites create.
 *
 * Usage: store_sweep_init once per open store (creates/checks the table); store_sweep_put writes
 * one run (replacing a row with the same (sweep, name)); store_sweep_get / store_sweep_list read
 * them back; store_sweep_eval_* read eval_summary when the database has it.
 * Ownership: rows are plain data (fixed-size strings, cut to fit); lists are mem_alloc'd and
 * freed by the caller with mem_free. Errors: err.h codes naming the database.
 * Thread safety: like the store, one thread per handle.
 */
#ifndef SAELITE_STORE_SWEEP_H
#define SAELITE_STORE_SWEEP_H
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

#define STORE_SWEEP_VERSION 1

typedef struct {
    char sweep[512], name[64], family[96], architecture[32], hook_name[128], hook_out[128];
    char param[8];          /* "k" or "l1" */
    double value;           /* the sparsity setting */
    int d_in, d_out, d_sae; /* d_out 0 stores NULL */
    int64_t tokens, seed;
    char config[1024];      /* the run's settings, JSON */
    char dir[600];
    int64_t sae_id, dict_id; /* < 0 store NULL */
    int64_t eval_tokens, ce_tokens;
    double ev, mse, l0, dead_frac;                            /* NaN stores NULL */
    double ce_clean, ce_sae, ce_zero, ce_score, kl_sae, kl_score;
    double train_seconds, eval_seconds;
} store_sweep_row;

int store_sweep_init(store *s);
int store_sweep_put(store *s, const store_sweep_row *r);
/* *found = 0 (row untouched) when the sweep has no run of that name. */
int store_sweep_get(store *s, const char *sweep, const char *name, store_sweep_row *r, int *found);
/* The key under which the sweep writing into directory out is stored: the recorded spelling of
 * the same directory (store_same_dir: "swv", "./swv" and "/abs/swv/" are one sweep), else out.
 * ERR_ARG when it does not fit key[cap]. */
int store_sweep_key(store *s, const char *out, char *key, size_t cap);
/* Every run of a sweep in id order (*n may be 0; NULL values read as NaN / -1). */
int store_sweep_list(store *s, const char *sweep, store_sweep_row **rows, size_t *n);

/* *yes = 1 when the database has a table or view named eval_summary. */
int store_sweep_has_eval(store *s, int *yes);
/* The distinct metric names of eval_summary, sorted (names[*n][64], mem_alloc'd). */
int store_sweep_eval_metrics(store *s, char (**names)[64], size_t *n);
/* The mean value of a metric over the eval_summary rows of an SAE (suites pooled); NaN when
 * there are none. */
int store_sweep_eval_value(store *s, int64_t sae_id, const char *metric, double *v);

#endif
