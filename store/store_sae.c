/* store_sae.c - the SAE registry and training log (see store_sae.h, schema_sae.sql). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "store/store_internal.h"
#include "store/store_sae.h"

#include "schema_sae_sql.h" /* generated from store/schema_sae.sql */

int store_sae_init(store *s)
{
    /* version 1 -> 2 */
    int rc = store_add_column(s, "sae_registry", "weights", "TEXT");
    return rc ? rc : store_schema_part(s, "sae", STORE_SAE_VERSION, schema_sae_sql);
}
int store_sae_verify(store *s)
{
    int rc = store_schema_part_verify(s, "sae", STORE_SAE_VERSION, schema_sae_sql);
    /* a version 1 registry (before weights) is checked as it was made, so a damaged or hostile
       one is refused at open as before the upgrade */
    return rc ? rc : store_schema_part_verify_without(s, "sae", 1, schema_sae_sql, "sae_registry",
                                                      "weights");
}

static int step_done(store *s, sqlite3_stmt *st, const char *what)
{
    int r = sqlite3_step(st);
    return r == SQLITE_DONE ? OK : store_sql_error(s, r, what);
}

/* The registry ids of dir however spelt ("d", "./d", "/abs/d/": store_same_dir, as store_sae_get
 * finds them), appended to ids as int64_t: a new registration of the directory replaces them all
 * (an exact match kept the row of another spelling, and with it the eval rows of an SAE the
 * directory no longer holds: a review). */
static int ids_of_dir(store *s, const char *dir, buf *ids)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT id, dir FROM sae_registry", &st);
    if (rc) return rc;
    int r = SQLITE_DONE;
    while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
        const char *d = (const char *)sqlite3_column_text(st, 1);
        int64_t id = sqlite3_column_int64(st, 0);
        if (d && store_same_dir(d, dir)) rc = buf_put(ids, &id, sizeof id);
    }
    if (!rc && r != SQLITE_DONE) rc = store_sql_error(s, r, "reading the SAE registry");
    sqlite3_finalize(st);
    return rc;
}

static int delete_id(store *s, const char *sql, int64_t id, const char *what)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, sql, &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, id);
    rc = step_done(s, st, what);
    sqlite3_finalize(st);
    return rc;
}

int store_sae_register(store *s, const store_sae_row *r, int64_t *id)
{
    buf ids = {0};
    int rc = ids_of_dir(s, r->dir, &ids);
    const int64_t *old = (const int64_t *)(void *)ids.p; /* mem_alloc'd: aligned */
    size_t nold = ids.n / sizeof *old;
    /* the log rows of an earlier registration of this directory go too (explicitly, so this
       works whether or not foreign keys are enforced on the connection), and its eval rows:
       they are the replaced SAE's (left under an id no registry row names, an audit; the new
       row's id is a new one, below) */
    for (size_t i = 0; !rc && i < nold; i++) {
        rc = delete_id(s, "DELETE FROM sae_training_log WHERE sae_id = ?1", old[i],
                       "replacing an SAE's training log");
        if (!rc) rc = store_eval_forget_sae(s, old[i]);
    }
    /* the new row's id is past every id the table holds now, the replaced row's included: the
       default rowid (max + 1 after the delete) gave a re-registered directory that held the
       largest id that same id again, so the eval rows of the SAE it replaced became the new
       one's, and a sweep's row took the new SAE for the one it had trained (an audit) */
    int64_t max_id = 0;
    if (!rc) rc = store_query_i64(s, "SELECT coalesce(max(id), 0) FROM sae_registry", &max_id);
    /* max + 1 overflowed there (undefined; INT64_MIN in practice: a negative id, which the lookups
       take for "by directory") */
    if (!rc && max_id == INT64_MAX)
        rc = err_set(ERR_FORMAT, "%s: sae_registry holds id %" PRId64 ", the largest an id can be: "
                     "no id past it for %s", store_path(s), max_id, r->dir);
    for (size_t i = 0; !rc && i < nold; i++)
        rc = delete_id(s, "DELETE FROM sae_registry WHERE id = ?1", old[i], "replacing an SAE");
    buf_free(&ids);
    if (rc) return rc;
    sqlite3_stmt *st;
    rc = store_prepare(s,
                       "INSERT INTO sae_registry (dir, architecture, d_in, d_sae, k, hook_name, "
                       "model_name, hook_id, tokens, config, eval_tokens, eval_mse, eval_ev, "
                       "eval_cos, eval_l2_ratio, eval_l0, eval_dead, eval_dense, seconds, weights, "
                       "id) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,"
                       "?19,?20,?21)",
                       &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 21, max_id + 1);
    sqlite3_bind_text(st, 1, r->dir, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->architecture, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, r->d_in);
    sqlite3_bind_int(st, 4, r->d_sae);
    if (r->k > 0) sqlite3_bind_int(st, 5, r->k);
    sqlite3_bind_text(st, 6, r->hook_name ? r->hook_name : "", -1, SQLITE_STATIC);
    if (r->model_name) sqlite3_bind_text(st, 7, r->model_name, -1, SQLITE_STATIC);
    if (r->hook_id >= 0) sqlite3_bind_int64(st, 8, r->hook_id);
    sqlite3_bind_int64(st, 9, r->tokens);
    sqlite3_bind_text(st, 10, r->config_json ? r->config_json : "{}", -1, SQLITE_STATIC);
    if (r->eval_tokens > 0) {
        sqlite3_bind_int64(st, 11, r->eval_tokens);
        sqlite3_bind_double(st, 12, r->eval_mse);
        sqlite3_bind_double(st, 13, r->eval_ev);
        sqlite3_bind_double(st, 14, r->eval_cos);
        sqlite3_bind_double(st, 15, r->eval_l2_ratio);
        sqlite3_bind_double(st, 16, r->eval_l0);
        sqlite3_bind_double(st, 17, r->eval_dead);
        sqlite3_bind_double(st, 18, r->eval_dense);
    }
    sqlite3_bind_double(st, 19, r->seconds);
    if (r->weights) sqlite3_bind_text(st, 20, r->weights, -1, SQLITE_STATIC);
    rc = step_done(s, st, "registering an SAE");
    sqlite3_finalize(st);
    if (rc) return rc;
    *id = sqlite3_last_insert_rowid(store_db(s));
    return OK;
}

int store_sae_log(store *s, int64_t sae_id, const store_sae_log_row *rows, size_t n)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "INSERT OR REPLACE INTO sae_training_log (sae_id, step, tokens, mse, "
                              "ev, l0, dead_frac, lr, loss) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)",
                           &st);
    if (rc) return rc;
    for (size_t i = 0; !rc && i < n; i++) {
        const store_sae_log_row *r = &rows[i];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, sae_id);
        sqlite3_bind_int64(st, 2, r->step);
        sqlite3_bind_int64(st, 3, r->tokens);
        sqlite3_bind_double(st, 4, r->mse);
        sqlite3_bind_double(st, 5, r->ev);
        sqlite3_bind_double(st, 6, r->l0);
        sqlite3_bind_double(st, 7, r->dead_frac);
        sqlite3_bind_double(st, 8, r->lr);
        sqlite3_bind_double(st, 9, r->loss);
        rc = step_done(s, st, "writing the SAE training log");
    }
    sqlite3_finalize(st);
    return rc;
}

static int copy_col(store *s, sqlite3_stmt *st, int c, char *dst, size_t cap, const char *what)
{
    const char *v = (const char *)sqlite3_column_text(st, c);
    if (snprintf(dst, cap, "%s", v ? v : "") >= (int)cap)
        return err_set(ERR_ARG, "%s: the SAE registry's %s '%.64s...' is longer than %zu bytes",
                       store_path(s), what, v, cap - 1);
    return OK;
}

int store_sae_get(store *s, int64_t id, const char *dir, store_sae_entry *out)
{
    memset(out, 0, sizeof *out);
    int64_t nreg = -1;
    int rc = store_count_rows(s, "sae_registry", &nreg);
    if (rc) return rc;
    if (nreg < 0)
        return err_set(ERR_NOTFOUND, "%s: no SAE registry (no SAE was trained or evaluated on it)",
                       store_path(s));
    sqlite3_stmt *st;
    int has = 0; /* a version 1 registry read without an upgrade has no weights column */
    if ((rc = store_column_exists(s, "sae_registry", "weights", &has))) return rc;
    /* by directory: every row, newest first, since the same directory can be spelt many ways
       and only the filesystem can tell (file_same) */
    char sql[320];
    snprintf(sql, sizeof sql, "SELECT id, dir, architecture, hook_name, coalesce(model_name, ''), d_in, "
             "d_sae, coalesce(k, 0), %s FROM sae_registry WHERE ?1 < 0 OR id = ?1 ORDER BY id DESC",
             has ? "coalesce(weights, '')" : "''");
    if ((rc = store_prepare(s, sql, &st))) return rc;
    sqlite3_bind_int64(st, 1, id);
    int r, found = 0;
    while (!found && (r = sqlite3_step(st)) == SQLITE_ROW) {
        const char *d = (const char *)sqlite3_column_text(st, 1);
        if (id < 0 && (!d || !dir || !store_same_dir(d, dir))) continue;
        found = 1;
        out->id = sqlite3_column_int64(st, 0);
        rc = copy_col(s, st, 1, out->dir, sizeof out->dir, "directory");
        if (!rc) rc = copy_col(s, st, 2, out->architecture, sizeof out->architecture, "architecture");
        if (!rc) rc = copy_col(s, st, 3, out->hook_name, sizeof out->hook_name, "hook_name");
        if (!rc) rc = copy_col(s, st, 4, out->model_name, sizeof out->model_name, "model_name");
        out->d_in = sqlite3_column_int(st, 5);
        out->d_sae = sqlite3_column_int(st, 6);
        out->k = sqlite3_column_int(st, 7);
        if (!rc) rc = copy_col(s, st, 8, out->weights, sizeof out->weights, "weights checksum");
    }
    if (!found && r != SQLITE_DONE) rc = store_sql_error(s, r, "reading the SAE registry");
    sqlite3_finalize(st);
    if (rc || found) return rc;
    if (id >= 0)
        return err_set(ERR_NOTFOUND, "%s: no SAE with id %lld in the registry", store_path(s),
                       (long long)id);
    return err_set(ERR_NOTFOUND, "%s: no SAE registered for directory '%s'", store_path(s),
                   dir ? dir : "");
}

static double col_real_or_nan(sqlite3_stmt *st, int c)
{
    return sqlite3_column_type(st, c) == SQLITE_NULL ? NAN : sqlite3_column_double(st, c);
}

int store_sae_log_find(store *s, int64_t id, const char *dir, int64_t *sae_id,
                       store_sae_log_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    *sae_id = -1;
    int64_t nreg = -1, nlog = -1;
    int rc = store_count_rows(s, "sae_registry", &nreg);
    if (!rc) rc = store_count_rows(s, "sae_training_log", &nlog);
    if (rc) return rc;
    if (nreg < 0 || nlog < 0)
        return err_set(ERR_NOTFOUND, "%s: no SAE registry (no SAE was trained with --db on it)",
                       store_path(s));
    sqlite3_stmt *st;
    /* a directory matches with or without a trailing slash; the latest registration wins */
    if ((rc = store_prepare(s, "SELECT id FROM sae_registry WHERE (?1 >= 0 AND id = ?1) OR "
                               "(?1 < 0 AND (dir = ?2 OR rtrim(dir, '/') = rtrim(?2, '/'))) "
                               "ORDER BY id DESC LIMIT 1", &st)))
        return rc;
    sqlite3_bind_int64(st, 1, id);
    if (dir) sqlite3_bind_text(st, 2, dir, -1, SQLITE_STATIC);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) *sae_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (r == SQLITE_DONE) {
        if (id >= 0)
            return err_set(ERR_NOTFOUND, "%s: no SAE with id %lld in the registry", store_path(s),
                           (long long)id);
        return err_set(ERR_NOTFOUND, "%s: no SAE registered for directory '%s'", store_path(s),
                       dir ? dir : "");
    }
    if (r != SQLITE_ROW) return store_sql_error(s, r, "reading the SAE registry");
    if ((rc = store_prepare(s, "SELECT step, tokens, mse, ev, l0, dead_frac, lr, loss FROM "
                               "sae_training_log WHERE sae_id = ?1 ORDER BY step", &st)))
        return rc;
    sqlite3_bind_int64(st, 1, *sae_id);
    size_t cap = 0;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            store_sae_log_row *p = mem_realloc(*rows, cap * sizeof *p);
            if (!p) {
                rc = err_set(ERR_NOMEM, "%s: out of memory", store_path(s));
                break;
            }
            *rows = p;
        }
        store_sae_log_row *o = &(*rows)[(*n)++];
        o->step = sqlite3_column_int64(st, 0);
        o->tokens = sqlite3_column_int64(st, 1);
        o->mse = col_real_or_nan(st, 2);
        o->ev = col_real_or_nan(st, 3);
        o->l0 = col_real_or_nan(st, 4);
        o->dead_frac = col_real_or_nan(st, 5);
        o->lr = col_real_or_nan(st, 6);
        o->loss = col_real_or_nan(st, 7);
    }
    if (!rc && r != SQLITE_DONE) rc = store_sql_error(s, r, "reading the SAE training log");
    sqlite3_finalize(st);
    if (rc) {
        mem_free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return rc;
}

int store_sae_bos_seqs(store *s, int64_t **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT id FROM sequences WHERE bos != 0 ORDER BY id", &st);
    if (rc) return rc;
    size_t cap = 0;
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 1024;
            int64_t *p = mem_realloc(*ids, cap * sizeof *p);
            if (!p) {
                sqlite3_finalize(st);
                mem_free(*ids);
                *ids = NULL;
                return err_set(ERR_NOMEM, "%s: out of memory", store_path(s));
            }
            *ids = p;
        }
        (*ids)[(*n)++] = sqlite3_column_int64(st, 0);
    }
    if (r != SQLITE_DONE) {
        rc = store_sql_error(s, r, "reading sequences");
        mem_free(*ids);
        *ids = NULL;
        *n = 0;
    }
    sqlite3_finalize(st);
    return rc;
}

const char store_sae_log_csv_header[] = "step,tokens,mse,explained_variance,l0,dead_frac,lr,loss\n";

int store_sae_log_csv_row(char *buf, size_t cap, const store_sae_log_row *r)
{
    int n = snprintf(buf, cap, "%" PRId64 ",%" PRId64 ",%.6g,%.6g,%.4g,%.4g,%.4g,%.6g\n", r->step,
                     r->tokens, r->mse, r->ev, r->l0, r->dead_frac, r->lr, r->loss);
    if (n < 0 || (size_t)n >= cap) return err_set(ERR_ARG, "training log row does not fit %zu bytes", cap);
    return OK;
}

void store_sae_log_round(store_sae_log_row *r)
{
    char b[256];
    if (store_sae_log_csv_row(b, sizeof b, r)) return;
    double *f[6] = {&r->mse, &r->ev, &r->l0, &r->dead_frac, &r->lr, &r->loss};
    char *p = strchr(b, ',');
    p = p ? strchr(p + 1, ',') : NULL;
    for (int i = 0; i < 6 && p; i++) {
        *f[i] = strtod(p + 1, &p);
        if (*p != ',') break;
    }
}
