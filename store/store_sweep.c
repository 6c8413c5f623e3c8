/* store_sweep.c - architecture sweep rows and the eval_summary readers (see store_sweep.h,
 * schema_sweep.sql). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "store/store_internal.h"
#include "store/store_sweep.h"

#include "schema_sweep_sql.h" /* generated from store/schema_sweep.sql */

int store_sweep_init(store *s)
{
    return store_schema_part(s, "sweep", STORE_SWEEP_VERSION, schema_sweep_sql);
}
int store_sweep_verify(store *s)
{
    return store_schema_part_verify(s, "sweep", STORE_SWEEP_VERSION, schema_sweep_sql);
}

static void bind_real(sqlite3_stmt *st, int i, double v)
{
    if (isfinite(v)) sqlite3_bind_double(st, i, v);
}

static void bind_id(sqlite3_stmt *st, int i, int64_t v)
{
    if (v >= 0) sqlite3_bind_int64(st, i, v);
}

#define SWEEP_COLS                                                                              \
    "sweep, name, family, architecture, hook_name, hook_out, param, value, d_in, d_out, d_sae, " \
    "tokens, seed, config, dir, sae_id, dict_id, eval_tokens, ev, mse, l0, dead_frac, ce_tokens, " \
    "ce_clean, ce_sae, ce_zero, ce_score, kl_sae, kl_score, train_seconds, eval_seconds"

int store_sweep_put(store *s, const store_sweep_row *r)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "INSERT OR REPLACE INTO sweep_runs (" SWEEP_COLS ") VALUES (?1,?2,"
                              "?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,"
                              "?21,?22,?23,?24,?25,?26,?27,?28,?29,?30,?31)", &st);
    if (rc) return rc;
    const char *txt[] = {r->sweep, r->name, r->family, r->architecture, r->hook_name};
    for (int i = 0; i < 5; i++) sqlite3_bind_text(st, i + 1, txt[i], -1, SQLITE_STATIC);
    if (r->hook_out[0]) sqlite3_bind_text(st, 6, r->hook_out, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, r->param, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 8, r->value);
    sqlite3_bind_int(st, 9, r->d_in);
    if (r->d_out > 0) sqlite3_bind_int(st, 10, r->d_out);
    sqlite3_bind_int(st, 11, r->d_sae);
    sqlite3_bind_int64(st, 12, r->tokens);
    sqlite3_bind_int64(st, 13, r->seed);
    sqlite3_bind_text(st, 14, r->config, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 15, r->dir, -1, SQLITE_STATIC);
    bind_id(st, 16, r->sae_id);
    bind_id(st, 17, r->dict_id);
    bind_id(st, 18, r->eval_tokens);
    const double a[] = {r->ev, r->mse, r->l0, r->dead_frac};
    for (int i = 0; i < 4; i++) bind_real(st, 19 + i, a[i]);
    bind_id(st, 23, r->ce_tokens);
    const double b[] = {r->ce_clean, r->ce_sae, r->ce_zero, r->ce_score, r->kl_sae,
                        r->kl_score, r->train_seconds, r->eval_seconds};
    for (int i = 0; i < 8; i++) bind_real(st, 24 + i, b[i]);
    int q = sqlite3_step(st);
    rc = q == SQLITE_DONE ? OK : store_sql_error(s, q, "writing a sweep run");
    sqlite3_finalize(st);
    return rc;
}

static void col_text(char *dst, size_t cap, sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

static double col_real(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

static int64_t col_id(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, i);
}

static void read_row(sqlite3_stmt *st, store_sweep_row *r)
{
    memset(r, 0, sizeof *r);
    col_text(r->sweep, sizeof r->sweep, st, 0);
    col_text(r->name, sizeof r->name, st, 1);
    col_text(r->family, sizeof r->family, st, 2);
    col_text(r->architecture, sizeof r->architecture, st, 3);
    col_text(r->hook_name, sizeof r->hook_name, st, 4);
    col_text(r->hook_out, sizeof r->hook_out, st, 5);
    col_text(r->param, sizeof r->param, st, 6);
    r->value = sqlite3_column_double(st, 7);
    r->d_in = sqlite3_column_int(st, 8);
    r->d_out = sqlite3_column_int(st, 9);
    r->d_sae = sqlite3_column_int(st, 10);
    r->tokens = sqlite3_column_int64(st, 11);
    r->seed = sqlite3_column_int64(st, 12);
    col_text(r->config, sizeof r->config, st, 13);
    col_text(r->dir, sizeof r->dir, st, 14);
    r->sae_id = col_id(st, 15);
    r->dict_id = col_id(st, 16);
    r->eval_tokens = col_id(st, 17);
    double *a[] = {&r->ev, &r->mse, &r->l0, &r->dead_frac};
    for (int i = 0; i < 4; i++) *a[i] = col_real(st, 18 + i);
    r->ce_tokens = col_id(st, 22);
    double *b[] = {&r->ce_clean, &r->ce_sae, &r->ce_zero, &r->ce_score, &r->kl_sae,
                   &r->kl_score, &r->train_seconds, &r->eval_seconds};
    for (int i = 0; i < 8; i++) *b[i] = col_real(st, 23 + i);
}

int store_sweep_get(store *s, const char *sweep, const char *name, store_sweep_row *r, int *found)
{
    *found = 0;
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT " SWEEP_COLS " FROM sweep_runs WHERE sweep = ?1 AND name = ?2",
                           &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, sweep, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    int q = sqlite3_step(st);
    if (q == SQLITE_ROW) {
        read_row(st, r);
        *found = 1;
    } else if (q != SQLITE_DONE) rc = store_sql_error(s, q, "reading a sweep run");
    sqlite3_finalize(st);
    return rc;
}

int store_sweep_key(store *s, const char *out, char *key, size_t cap)
{
    const char *use = out;
    int64_t nrows = -1;
    int rc = store_count_rows(s, "sweep_runs", &nrows);
    if (!rc && nrows < 0 && snprintf(key, cap, "%s", out) >= (int)cap) /* no sweep stored yet */
        rc = err_set(ERR_ARG, "--out '%.64s...' is longer than %zu bytes", out, cap - 1);
    if (rc || nrows < 0) return rc;
    sqlite3_stmt *st;
    if ((rc = store_prepare(s, "SELECT DISTINCT sweep FROM sweep_runs ORDER BY sweep", &st))) return rc;
    int q;
    while ((q = sqlite3_step(st)) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        if (k && store_same_dir(k, out)) {
            use = k;
            break;
        }
    }
    if (q != SQLITE_ROW && q != SQLITE_DONE) rc = store_sql_error(s, q, "reading sweep runs");
    if (!rc && snprintf(key, cap, "%s", use) >= (int)cap)
        rc = err_set(ERR_ARG, "%s: the sweep's directory '%.64s...' is longer than %zu bytes",
                     store_path(s), use, cap - 1);
    sqlite3_finalize(st);
    return rc;
}

int store_sweep_list(store *s, const char *sweep, store_sweep_row **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT " SWEEP_COLS " FROM sweep_runs WHERE sweep = ?1 ORDER BY id",
                           &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, sweep, -1, SQLITE_STATIC);
    size_t cap = 0;
    int q;
    while ((q = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            store_sweep_row *g = mem_realloc(*rows, nc * sizeof *g);
            if (!g) {
                rc = err_set(ERR_NOMEM, "out of memory reading sweep runs");
                break;
            }
            *rows = g;
            cap = nc;
        }
        read_row(st, &(*rows)[(*n)++]);
    }
    if (!rc && q != SQLITE_DONE) rc = store_sql_error(s, q, "reading sweep runs");
    sqlite3_finalize(st);
    if (rc) {
        mem_free(*rows);
        *rows = NULL;
        *n = 0;
    }
    return rc;
}

int store_sweep_has_eval(store *s, int *yes)
{
    int64_t n = 0;
    int rc = store_query_i64(s, "SELECT count(*) FROM sqlite_master WHERE name = 'eval_summary' "
                                "AND type IN ('table', 'view')", &n);
    *yes = !rc && n > 0;
    return rc;
}

int store_sweep_eval_metrics(store *s, char (**names)[64], size_t *n)
{
    *names = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT DISTINCT metric FROM eval_summary WHERE metric IS NOT NULL "
                              "ORDER BY metric", &st);
    if (rc) return rc;
    size_t cap = 0;
    int q;
    while ((q = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            char(*g)[64] = mem_realloc(*names, nc * sizeof *g);
            if (!g) {
                rc = err_set(ERR_NOMEM, "out of memory reading eval_summary");
                break;
            }
            *names = g;
            cap = nc;
        }
        col_text((*names)[(*n)++], 64, st, 0);
    }
    if (!rc && q != SQLITE_DONE) rc = store_sql_error(s, q, "reading eval_summary");
    sqlite3_finalize(st);
    if (rc) {
        mem_free(*names);
        *names = NULL;
        *n = 0;
    }
    return rc;
}

int store_sweep_eval_value(store *s, int64_t sae_id, const char *metric, double *v)
{
    *v = NAN;
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT avg(value) FROM eval_summary WHERE sae_id = ?1 AND metric = ?2",
                           &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, sae_id);
    sqlite3_bind_text(st, 2, metric, -1, SQLITE_STATIC);
    int q = sqlite3_step(st);
    if (q == SQLITE_ROW) *v = col_real(st, 0);
    else if (q != SQLITE_DONE) rc = store_sql_error(s, q, "reading eval_summary");
    sqlite3_finalize(st);
    return rc;
}
