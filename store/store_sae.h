/* store_sae.h - the SAE registry and training log (store/schema_sae.sql, schema part "sae").
 *
 * Usage: store_sae_init once per open store; store_sae_register inside a transaction replaces
 * any earlier row for the same directory (its log goes with it) and returns the new id;
 * store_sae_log adds training-log rows; store_sae_log_find reads them back (the one reader of
 * the training curve: `report` draws it from here). store_sae_get finds a row by id or by
 * directory.
 * Ownership: strings are copied by SQLite. Errors: err.h codes naming the database.
 * Thread safety: like the store, one thread per handle.
 */
#ifndef SAELITE_STORE_SAE_H
#define SAELITE_STORE_SAE_H
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

#define STORE_SAE_VERSION 2

typedef struct {
    const char *dir, *architecture, *hook_name, *model_name, *config_json;
    const char *weights;  /* the weights file's checksum (sae_weights_checksum); NULL stores NULL */
    int d_in, d_sae, k;   /* k <= 0 stores NULL */
    int64_t hook_id;      /* < 0 stores NULL */
    int64_t tokens, eval_tokens;
    double eval_mse, eval_ev, eval_cos, eval_l2_ratio, eval_l0, eval_dead, eval_dense, seconds;
} store_sae_row;

typedef struct {
    int64_t step, tokens;
    double mse, ev, l0, dead_frac, lr, loss;
} store_sae_log_row;

int store_sae_init(store *s);
int store_sae_register(store *s, const store_sae_row *r, int64_t *id);
int store_sae_log(store *s, int64_t sae_id, const store_sae_log_row *rows, size_t n);
/* The training log of registry id `id` (id >= 0), else of the latest SAE registered for
 * directory `dir` (a trailing '/' on either side is ignored): *sae_id, and *rows [*n] in step
 * order (mem_alloc'd; NULL values read as NaN; *n may be 0). ERR_NOTFOUND when no such SAE is
 * registered or the database has no SAE tables. */
int store_sae_log_find(store *s, int64_t id, const char *dir, int64_t *sae_id,
                       store_sae_log_row **rows, size_t *n);
/* The training log's CSV export (sae-train's OUT/training_log.csv), defined once: the header
 * line, one row per call (into buf[cap], NUL-terminated; ERR_ARG when it does not fit), and a row
 * rounded to the precision the export prints (what a reader of the CSV sees: the report draws the
 * table's rows through it, so a curve from the table equals one from the CSV). */
extern const char store_sae_log_csv_header[];
int store_sae_log_csv_row(char *buf, size_t cap, const store_sae_log_row *r);
void store_sae_log_round(store_sae_log_row *r);
/* One registry row: what a loaded SAE directory is checked against (sae_check_registered). */
typedef struct {
    int64_t id;
    char dir[4096];            /* as recorded: absolute, or relative to where it was registered */
    char architecture[32];     /* the training architecture (sae_arch_name) */
    char hook_name[256];
    char model_name[256];      /* "" when NULL */
    int d_in, d_sae, k;        /* k 0 when NULL */
    char weights[17];          /* the weights' checksum as registered; "" when NULL */
} store_sae_entry;
/* The registry row of id (id >= 0), else the latest row for directory dir: the same spelling (a
 * trailing '/' ignored) or, read from the current directory, the same directory on disk
 * (file_same: "x", "./x" and "/abs/x" are one SAE). ERR_NOTFOUND (naming the database) when there
 * is no such row or no registry; ERR_ARG when a recorded directory does not fit out->dir. */
int store_sae_get(store *s, int64_t id, const char *dir, store_sae_entry *out);

/* Ids of the sequences whose position 0 is a BOS token, ascending (mem_alloc'd). */
int store_sae_bos_seqs(store *s, int64_t **ids, size_t *n);

#endif
