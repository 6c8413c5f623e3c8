/* sqlfuncs.c - SQL functions (token text, context, vector helpers), the read-only query runner,
 * and, compiled with -DSAELITE_SQLITE_EXT, the loadable extension saelite.so. The function part
 * depends on SQLite and the header-only conversions of common/half.h, so the extension needs
 * nothing else from the library. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SAELITE_SQLITE_EXT
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#else
#include <sqlite3.h>

#include "common/err.h"
#include "common/mem.h"
#endif

#include "common/half.h"
#include "store/sqlfuncs.h"

/* ---- helpers ----------------------------------------------------------------------------- */
static int table_exists(sqlite3 *db, const char *name)
{
    sqlite3_stmt *st;
    int yes = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_schema WHERE type='table' AND name=?", -1,
                           &st, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    yes = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return yes;
}

/* Runs a one-row lookup and hands column 0 to the result (NULL when no row). */
static void lookup(sqlite3_context *ctx, const char *sql, sqlite3_value *arg)
{
    sqlite3 *db = sqlite3_context_db_handle(ctx);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_result_error(ctx, sqlite3_errmsg(db), -1);
        return;
    }
    sqlite3_bind_value(st, 1, arg);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) sqlite3_result_value(ctx, sqlite3_column_value(st, 0));
    else if (rc == SQLITE_DONE) sqlite3_result_null(ctx);
    else sqlite3_result_error(ctx, sqlite3_errmsg(db), -1);
    sqlite3_finalize(st);
}

/* ---- token functions ---------------------------------------------------------------------- */
/* ana_vocab (the whole vocabulary, written by analyze) first, then the store's tokens table
 * (only tokens that occur in the corpus). */
static void fn_tok_text(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return sqlite3_result_null(ctx);
    sqlite3 *db = sqlite3_context_db_handle(ctx);
    int v = table_exists(db, "ana_vocab"), t = table_exists(db, "tokens");
    if (v && t)
        lookup(ctx, "SELECT coalesce((SELECT CAST(text AS TEXT) FROM ana_vocab WHERE token = ?1), "
                    "(SELECT text FROM tokens WHERE token_id = ?1 LIMIT 1))", argv[0]);
    else if (v) lookup(ctx, "SELECT CAST(text AS TEXT) FROM ana_vocab WHERE token = ?1", argv[0]);
    else if (t) lookup(ctx, "SELECT text FROM tokens WHERE token_id = ?1 LIMIT 1", argv[0]);
    else sqlite3_result_null(ctx);
}

static void fn_tok_id(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return sqlite3_result_null(ctx);
    sqlite3 *db = sqlite3_context_db_handle(ctx);
    int v = table_exists(db, "ana_vocab"), t = table_exists(db, "tokens");
    if (v && t)
        lookup(ctx, "SELECT coalesce((SELECT min(token) FROM ana_vocab WHERE text = CAST(?1 AS BLOB)), "
                    "(SELECT token_id FROM tokens WHERE text = ?1 LIMIT 1))", argv[0]);
    else if (v) lookup(ctx, "SELECT min(token) FROM ana_vocab WHERE text = CAST(?1 AS BLOB)", argv[0]);
    else if (t) lookup(ctx, "SELECT token_id FROM tokens WHERE text = ?1 LIMIT 1", argv[0]);
    else sqlite3_result_null(ctx);
}

static void fn_context(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    for (int i = 0; i < argc; i++)
        if (sqlite3_value_type(argv[i]) == SQLITE_NULL) return sqlite3_result_null(ctx);
    sqlite3_int64 seq = sqlite3_value_int64(argv[0]), pos = sqlite3_value_int64(argv[1]);
    sqlite3_int64 before = argc > 2 ? sqlite3_value_int64(argv[2]) : 8;
    sqlite3_int64 after = argc > 3 ? sqlite3_value_int64(argv[3]) : 4;
    if (before < 0 || after < 0 || before > 100000 || after > 100000)
        return sqlite3_result_error(ctx, "context(): before/after must be in 0..100000", -1);
    sqlite3 *db = sqlite3_context_db_handle(ctx);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT position, text, token_id FROM tokens WHERE sequence_id = ?1 "
                           "AND position BETWEEN ?2 AND ?3 ORDER BY position",
                           -1, &st, NULL) != SQLITE_OK) {
        sqlite3_result_error(ctx, "context(): the database has no tokens table", -1);
        return;
    }
    sqlite3_bind_int64(st, 1, seq);
    sqlite3_bind_int64(st, 2, pos - before);
    sqlite3_bind_int64(st, 3, pos + after);
    sqlite3_str *s = sqlite3_str_new(db);
    int rc, found = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        sqlite3_int64 p = sqlite3_column_int64(st, 0);
        const char *t = (const char *)sqlite3_column_text(st, 1);
        if (p == pos) found = 1;
        if (p == pos) sqlite3_str_appendall(s, "\xc2\xab"); /* « */
        if (t) sqlite3_str_appendall(s, t);
        else sqlite3_str_appendf(s, "<%lld>", sqlite3_column_int64(st, 2));
        if (p == pos) sqlite3_str_appendall(s, "\xc2\xbb"); /* » */
    }
    sqlite3_finalize(st);
    char *out = sqlite3_str_finish(s);
    if (rc != SQLITE_DONE) sqlite3_result_error(ctx, sqlite3_errmsg(db), -1);
    else if (!found) sqlite3_result_null(ctx);
    else if (!out) sqlite3_result_error_nomem(ctx);
    else {
        sqlite3_result_text(ctx, out, -1, sqlite3_free);
        return;
    }
    sqlite3_free(out);
}

/* ---- vector functions --------------------------------------------------------------------- */
enum { DT_F32, DT_F16, DT_BF16 };

static int dtype_arg(sqlite3_context *ctx, sqlite3_value *v, int *dt)
{
    const char *s = (const char *)sqlite3_value_text(v);
    if (s && !strcmp(s, "f32")) *dt = DT_F32;
    else if (s && !strcmp(s, "f16")) *dt = DT_F16;
    else if (s && !strcmp(s, "bf16")) *dt = DT_BF16;
    else {
        sqlite3_result_error(ctx, "dtype must be 'f32', 'f16' or 'bf16'", -1);
        return 0;
    }
    return 1;
}

static float load_value(const unsigned char *p, int dt)
{
    if (dt == DT_F32) {
        uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    return dt == DT_F16 ? half_f16_to_f32(h) : half_bf16_to_f32(h);
}

static int dt_size(int dt) { return dt == DT_F32 ? 4 : 2; }

/* Two float32 blobs of equal, non-zero length; returns the count or -1 (result set). */
static int two_vectors(sqlite3_context *ctx, sqlite3_value **argv, const unsigned char **a,
                       const unsigned char **b)
{
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL || sqlite3_value_type(argv[1]) == SQLITE_NULL) {
        sqlite3_result_null(ctx);
        return -1;
    }
    if (sqlite3_value_type(argv[0]) != SQLITE_BLOB || sqlite3_value_type(argv[1]) != SQLITE_BLOB) {
        sqlite3_result_error(ctx, "vector functions take float32 BLOBs", -1);
        return -1;
    }
    int na = sqlite3_value_bytes(argv[0]), nb = sqlite3_value_bytes(argv[1]);
    *a = sqlite3_value_blob(argv[0]);
    *b = sqlite3_value_blob(argv[1]);
    if (na != nb || na % 4) {
        sqlite3_result_error(ctx, "vectors differ in length or are not float32 BLOBs", -1);
        return -1;
    }
    return na / 4;
}

static void fn_vec_dot(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    const unsigned char *a, *b;
    int n = two_vectors(ctx, argv, &a, &b);
    if (n < 0) return;
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)load_value(a + 4 * i, DT_F32) * load_value(b + 4 * i, DT_F32);
    sqlite3_result_double(ctx, s);
}

static void fn_vec_cos(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    const unsigned char *a, *b;
    int n = two_vectors(ctx, argv, &a, &b);
    if (n < 0) return;
    double s = 0, na = 0, nb = 0;
    for (int i = 0; i < n; i++) {
        double x = load_value(a + 4 * i, DT_F32), y = load_value(b + 4 * i, DT_F32);
        s += x * y;
        na += x * x;
        nb += y * y;
    }
    if (na == 0 || nb == 0) sqlite3_result_null(ctx); /* undefined for a zero vector */
    else sqlite3_result_double(ctx, s / sqrt(na * nb));
}

static void fn_vec_norm(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return sqlite3_result_null(ctx);
    if (sqlite3_value_type(argv[0]) != SQLITE_BLOB || sqlite3_value_bytes(argv[0]) % 4)
        return sqlite3_result_error(ctx, "vec_norm() takes a float32 BLOB", -1);
    const unsigned char *a = sqlite3_value_blob(argv[0]);
    int n = sqlite3_value_bytes(argv[0]) / 4;
    double s = 0;
    for (int i = 0; i < n; i++) {
        double x = load_value(a + 4 * i, DT_F32);
        s += x * x;
    }
    sqlite3_result_double(ctx, sqrt(s));
}

static void fn_vec_len(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    int dt = DT_F32;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return sqlite3_result_null(ctx);
    if (argc > 1 && !dtype_arg(ctx, argv[1], &dt)) return;
    if (sqlite3_value_type(argv[0]) != SQLITE_BLOB)
        return sqlite3_result_error(ctx, "vec_len() takes a BLOB", -1);
    sqlite3_result_int64(ctx, sqlite3_value_bytes(argv[0]) / dt_size(dt));
}

static void fn_vec_at(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    int dt = DT_F32;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL || sqlite3_value_type(argv[1]) == SQLITE_NULL)
        return sqlite3_result_null(ctx);
    if (argc > 2 && !dtype_arg(ctx, argv[2], &dt)) return;
    if (sqlite3_value_type(argv[0]) != SQLITE_BLOB)
        return sqlite3_result_error(ctx, "vec_at() takes a BLOB", -1);
    sqlite3_int64 i = sqlite3_value_int64(argv[1]);
    sqlite3_int64 n = sqlite3_value_bytes(argv[0]) / dt_size(dt);
    if (i < 0 || i >= n) return sqlite3_result_null(ctx);
    const unsigned char *a = sqlite3_value_blob(argv[0]);
    sqlite3_result_double(ctx, load_value(a + (size_t)i * dt_size(dt), dt));
}

int store_sqlfuncs_register(sqlite3 *db)
{
    static const struct {
        const char *name;
        int nargs, det;
        void (*fn)(sqlite3_context *, int, sqlite3_value **);
    } F[] = {
        {"tok_text", 1, 0, fn_tok_text},  {"tok_id", 1, 0, fn_tok_id},
        {"context", 2, 0, fn_context},    {"context", 3, 0, fn_context},
        {"context", 4, 0, fn_context},    {"vec_dot", 2, 1, fn_vec_dot},
        {"vec_cos", 2, 1, fn_vec_cos},    {"vec_norm", 1, 1, fn_vec_norm},
        {"vec_len", 1, 1, fn_vec_len},    {"vec_len", 2, 1, fn_vec_len},
        {"vec_at", 2, 1, fn_vec_at},      {"vec_at", 3, 1, fn_vec_at},
    };
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++) {
        /* the table lookups read the database, so only the vector ones are deterministic */
        int flags = SQLITE_UTF8 | (F[i].det ? SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS : 0);
        int rc = sqlite3_create_function(db, F[i].name, F[i].nargs, flags, NULL, F[i].fn, NULL, NULL);
        if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
}

#ifdef SAELITE_SQLITE_EXT
#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_saelite_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi)
{
    SQLITE_EXTENSION_INIT2(pApi);
    int rc = store_sqlfuncs_register(db);
    if (rc != SQLITE_OK && pzErrMsg) *pzErrMsg = sqlite3_mprintf("saelite: cannot register functions");
    return rc;
}
#else
/* ---- the read-only query runner ----------------------------------------------------------- */
int store_ro_query(const char *db_path, const char *sql, store_row_fn row_fn, void *user)
{
    sqlite3 *db = NULL;
    enum { MAXST = 256 };
    sqlite3_stmt *st[MAXST];
    int nst = 0, ret = OK;
    int rc = sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL);
    if (rc != SQLITE_OK) {
        ret = err_set(ERR_IO, "%s: cannot open: %s", db_path, db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return ret;
    }
    sqlite3_busy_timeout(db, 5000);
    /* query_only blocks writes even where the read-only open would not (e.g. temp tables) */
    if ((rc = sqlite3_exec(db, "PRAGMA query_only = 1", NULL, NULL, NULL)) != SQLITE_OK ||
        (rc = store_sqlfuncs_register(db)) != SQLITE_OK) {
        ret = err_set(ERR_SQL, "%s: %s", db_path, sqlite3_errmsg(db));
        goto done;
    }
    /* Prepare everything first: a write anywhere refuses the whole input before anything runs. */
    const char *p = sql;
    while (p && *p) {
        sqlite3_stmt *s = NULL;
        const char *tail = NULL;
        rc = sqlite3_prepare_v2(db, p, -1, &s, &tail);
        if (rc != SQLITE_OK) {
            ret = err_set(ERR_SQL, "%s: SQL error: %s", db_path, sqlite3_errmsg(db));
            goto done;
        }
        p = tail;
        if (!s) continue; /* whitespace or a comment */
        if (nst == MAXST) {
            sqlite3_finalize(s);
            ret = err_set(ERR_ARG, "%s: more than %d statements in one query", db_path, MAXST);
            goto done;
        }
        st[nst++] = s;
        if (!sqlite3_stmt_readonly(s)) {
            const char *txt = sqlite3_sql(s);
            ret = err_set(ERR_ARG, "%s: refusing a statement that would modify the database "
                                   "(query is read-only): %.80s", db_path, txt ? txt : "");
            goto done;
        }
    }
    if (nst == 0) {
        ret = err_set(ERR_ARG, "%s: no SQL statement given", db_path);
        goto done;
    }
    for (int k = 0; k < nst && ret == OK; k++) {
        int nc = sqlite3_column_count(st[k]);
        const char **names = mem_calloc((size_t)nc + 1, sizeof *names);
        const char **vals = mem_calloc((size_t)nc + 1, sizeof *vals);
        int *types = mem_calloc((size_t)nc + 1, sizeof *types);
        char **blobtxt = mem_calloc((size_t)nc + 1, sizeof *blobtxt);
        if (!names || !vals || !types || !blobtxt) ret = err_set(ERR_NOMEM, "out of memory");
        for (int c = 0; c < nc && ret == OK; c++) {
            names[c] = sqlite3_column_name(st[k], c);
            blobtxt[c] = mem_alloc(48);
            if (!blobtxt[c]) ret = err_set(ERR_NOMEM, "out of memory");
        }
        if (ret == OK && row_fn(user, k, nc, names, NULL, NULL))
            ret = err_set(ERR_ABORTED, "output stopped");
        while (ret == OK && (rc = sqlite3_step(st[k])) == SQLITE_ROW) {
            for (int c = 0; c < nc; c++) {
                switch (sqlite3_column_type(st[k], c)) {
                case SQLITE_INTEGER: types[c] = STORE_Q_INT; break;
                case SQLITE_FLOAT: types[c] = STORE_Q_FLOAT; break;
                case SQLITE_TEXT: types[c] = STORE_Q_TEXT; break;
                case SQLITE_BLOB: types[c] = STORE_Q_BLOB; break;
                default: types[c] = STORE_Q_NULL;
                }
                if (types[c] == STORE_Q_BLOB) {
                    snprintf(blobtxt[c], 48, "<blob %d bytes>", sqlite3_column_bytes(st[k], c));
                    vals[c] = blobtxt[c];
                } else if (types[c] == STORE_Q_NULL) vals[c] = NULL;
                else vals[c] = (const char *)sqlite3_column_text(st[k], c);
            }
            if (row_fn(user, k, nc, names, vals, types))
                ret = err_set(ERR_ABORTED, "output stopped");
        }
        if (ret == OK && rc != SQLITE_DONE)
            ret = err_set(ERR_SQL, "%s: SQL error: %s", db_path, sqlite3_errmsg(db));
        if (blobtxt)
            for (int c = 0; c < nc; c++) mem_free(blobtxt[c]);
        mem_free(blobtxt);
        mem_free(names);
        mem_free(vals);
        mem_free(types);
    }
done:
    for (int k = 0; k < nst; k++) sqlite3_finalize(st[k]);
    sqlite3_close(db);
    return ret;
}
#endif
