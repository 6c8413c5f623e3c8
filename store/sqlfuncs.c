/* sqlfuncs.c - SQL functions (token text, context, vector helpers), the read-only query runner,
 * and, compiled with -DSAELITE_SQLITE_EXT, the loadable extension saelite.so. The function part
 * depends on SQLite and the header-only conversions of common/half.h, so the extension needs
 * nothing else from the library. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef SAELITE_SQLITE_EXT
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#else
#include <sqlite3.h>

#include "common/err.h"
#include "common/mem.h"
#endif

#include "common/half.h"
#include "common/hash.h"
#include "store/sqlfuncs.h"

/* ---- helpers ----------------------------------------------------------------------------- */
/* Thread-local nesting depth of the table-reading functions. Their own statements call no
 * functions, so a nested call can only come from the database's schema (a view or trigger named
 * like our tables); SQLITE_DIRECTONLY already refuses those, this is the second line. */
static _Thread_local int fn_depth;

const char *const store_sqlfuncs_tokens_cols[] = {"sequence_id", "INTEGER", "position", "INTEGER",
                                                 "token_id", "INTEGER", "text", "TEXT", NULL};
const char *const store_sqlfuncs_vocab_cols[] = {"token", "INTEGER", "text", "BLOB", NULL};

int store_sqlfuncs_table_check(sqlite3 *db, const char *table, const char *const *cols, char *why,
                               int cap)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, "SELECT type, sql LIKE 'CREATE VIRTUAL%' FROM main.sqlite_schema "
                                    "WHERE name = ?1 COLLATE NOCASE AND type IN ('table', 'view')",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) {
        snprintf(why, (size_t)cap, "cannot read the schema: %s", sqlite3_errmsg(db));
        return -2;
    }
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    int found = rc == SQLITE_ROW, ret = 0;
    const char *type = found ? (const char *)sqlite3_column_text(st, 0) : NULL;
    if (!found && rc != SQLITE_DONE) {
        snprintf(why, (size_t)cap, "cannot read the schema: %s", sqlite3_errmsg(db));
        ret = -2;
    } else if (!found) ret = 1;
    else if (!type) {
        snprintf(why, (size_t)cap, "out of memory");
        ret = -2;
    } else if (strcmp(type, "table")) {
        snprintf(why, (size_t)cap, "'%s' is a %s, not a table", table, type);
        ret = -1;
    } else if (sqlite3_column_int(st, 1)) {
        snprintf(why, (size_t)cap, "'%s' is a virtual table", table);
        ret = -1;
    }
    sqlite3_finalize(st);
    for (int i = 0; ret == 0 && cols[i]; i += 2) {
        const char *decl = NULL;
        rc = sqlite3_table_column_metadata(db, "main", table, cols[i], &decl, NULL, NULL, NULL, NULL);
        if (rc == SQLITE_ERROR) {
            snprintf(why, (size_t)cap, "table '%s' has no column '%s'", table, cols[i]);
            ret = -1;
        } else if (rc != SQLITE_OK) {
            snprintf(why, (size_t)cap, "cannot read the schema: %s", sqlite3_errmsg(db));
            ret = -2;
        } else if (sqlite3_stricmp(decl ? decl : "", cols[i + 1])) {
            snprintf(why, (size_t)cap, "column %s.%s is declared '%s', not '%s'", table, cols[i],
                     decl ? decl : "", cols[i + 1]);
            ret = -1;
        }
    }
    return ret;
}

/* For the table-reading functions: 1 when main.<table> is ours, 0 when absent, -1 with the
 * result set to an error when it is something else. */
static int our_table(sqlite3_context *ctx, const char *fn, const char *table, const char *const *cols)
{
    char why[200], msg[300];
    int r = store_sqlfuncs_table_check(sqlite3_context_db_handle(ctx), table, cols, why, sizeof why);
    if (r == -2 && (sqlite3_errcode(sqlite3_context_db_handle(ctx)) & 0xff) == SQLITE_NOMEM) {
        sqlite3_result_error_nomem(ctx);
        return -1;
    }
    if (r < 0) {
        snprintf(msg, sizeof msg, "%s(): %s %s table: %s", fn, r == -1 ? "not saelite's" : "reading the",
                 table, why);
        sqlite3_result_error(ctx, msg, -1);
        return -1;
    }
    return r == 0;
}

static int enter(sqlite3_context *ctx, const char *fn)
{
    if (fn_depth > 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s(): called from inside a saelite function (a view or "
                                  "trigger in the database?)", fn);
        sqlite3_result_error(ctx, msg, -1);
        return 0;
    }
    fn_depth++;
    return 1;
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
    else if ((rc & 0xff) == SQLITE_NOMEM) sqlite3_result_error_nomem(ctx);
    else sqlite3_result_error(ctx, sqlite3_errmsg(db), -1);
    sqlite3_finalize(st);
}

/* ---- token functions ---------------------------------------------------------------------- */
/* ana_vocab (the whole vocabulary, written by analyze) first, then the store's tokens table
 * (only tokens that occur in the corpus). Tables are read from main only (never a temp table
 * of the same name) and only when they have saelite's layout. */
static void tok_lookup(sqlite3_context *ctx, const char *fn, sqlite3_value *arg, const char *both,
                       const char *vocab, const char *tokens)
{
    if (sqlite3_value_type(arg) == SQLITE_NULL) return sqlite3_result_null(ctx);
    if (!enter(ctx, fn)) return;
    int v = our_table(ctx, fn, "ana_vocab", store_sqlfuncs_vocab_cols);
    int t = v < 0 ? -1 : our_table(ctx, fn, "tokens", store_sqlfuncs_tokens_cols);
    if (v < 0 || t < 0) ; /* error set */
    else if (v && t) lookup(ctx, both, arg);
    else if (v) lookup(ctx, vocab, arg);
    else if (t) lookup(ctx, tokens, arg);
    else sqlite3_result_null(ctx);
    fn_depth--;
}

static void fn_tok_text(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    tok_lookup(ctx, "tok_text", argv[0],
               "SELECT coalesce((SELECT CAST(text AS TEXT) FROM main.ana_vocab WHERE token = ?1), "
               "(SELECT text FROM main.tokens WHERE token_id = ?1 LIMIT 1))",
               "SELECT CAST(text AS TEXT) FROM main.ana_vocab WHERE token = ?1",
               "SELECT text FROM main.tokens WHERE token_id = ?1 LIMIT 1");
}

static void fn_tok_id(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    tok_lookup(ctx, "tok_id", argv[0],
               "SELECT coalesce((SELECT min(token) FROM main.ana_vocab WHERE text = CAST(?1 AS BLOB)), "
               "(SELECT token_id FROM main.tokens WHERE text = ?1 LIMIT 1))",
               "SELECT min(token) FROM main.ana_vocab WHERE text = CAST(?1 AS BLOB)",
               "SELECT token_id FROM main.tokens WHERE text = ?1 LIMIT 1");
}

/* An integer argument: an INTEGER, or a REAL that is a whole number in the int64 range; text,
 * blobs and fractions are an error naming the function (they were converted: 'abc' read as 0,
 * 1.9 as 1, an audit). 0 with the error set. */
static int int_arg(sqlite3_context *ctx, const char *fn, int k, sqlite3_value *v, sqlite3_int64 *out)
{
    /* text that is a number counts as that number ('7', as SQLite's own functions take it);
       a whole REAL beyond int64 is that extreme (a position or index that does not exist) */
    int t = sqlite3_value_type(v) == SQLITE_TEXT ? sqlite3_value_numeric_type(v) : sqlite3_value_type(v);
    double d = t == SQLITE_FLOAT ? sqlite3_value_double(v) : 0;
    if (t == SQLITE_INTEGER) *out = sqlite3_value_int64(v);
    else if (t == SQLITE_FLOAT && d == floor(d))
        *out = d >= 9.2233720368547758e18 ? INT64_MAX : d < -9.2233720368547758e18 ? INT64_MIN : (sqlite3_int64)d;
    else {
        char msg[96];
        snprintf(msg, sizeof msg, "%s(): argument %d must be an integer", fn, k);
        sqlite3_result_error(ctx, msg, -1);
        return 0;
    }
    return 1;
}

static void fn_context(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    for (int i = 0; i < argc; i++)
        if (sqlite3_value_type(argv[i]) == SQLITE_NULL) return sqlite3_result_null(ctx);
    sqlite3_int64 seq, pos, before = 8, after = 4;
    if (!int_arg(ctx, "context", 1, argv[0], &seq) || !int_arg(ctx, "context", 2, argv[1], &pos) ||
        (argc > 2 && !int_arg(ctx, "context", 3, argv[2], &before)) ||
        (argc > 3 && !int_arg(ctx, "context", 4, argv[3], &after)))
        return;
    if (before < 0 || after < 0 || before > 100000 || after > 100000)
        return sqlite3_result_error(ctx, "context(): before/after must be in 0..100000", -1);
    if (!enter(ctx, "context")) return;
    int t = our_table(ctx, "context", "tokens", store_sqlfuncs_tokens_cols);
    if (t <= 0) {
        if (t == 0) sqlite3_result_error(ctx, "context(): the database has no tokens table", -1);
        fn_depth--;
        return;
    }
    sqlite3 *db = sqlite3_context_db_handle(ctx);
    sqlite3_stmt *st;
    int prc = sqlite3_prepare_v2(db,
                                 "SELECT position, text, token_id FROM main.tokens WHERE "
                                 "sequence_id = ?1 AND position BETWEEN ?2 AND ?3 ORDER BY position",
                                 -1, &st, NULL);
    if (prc != SQLITE_OK) {
        if ((prc & 0xff) == SQLITE_NOMEM) sqlite3_result_error_nomem(ctx);
        else sqlite3_result_error(ctx, sqlite3_errmsg(db), -1);
        fn_depth--;
        return;
    }
    /* [pos - before, pos + after] clamped to the int64 range (0 <= before, after <= 100000) */
    sqlite3_int64 lo = pos < INT64_MIN + before ? INT64_MIN : pos - before;
    sqlite3_int64 hi = pos > INT64_MAX - after ? INT64_MAX : pos + after;
    sqlite3_bind_int64(st, 1, seq);
    sqlite3_bind_int64(st, 2, lo);
    sqlite3_bind_int64(st, 3, hi);
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
    fn_depth--;
    int serr = sqlite3_str_errcode(s);
    char *out = sqlite3_str_finish(s);
    if ((rc & 0xff) == SQLITE_NOMEM || serr == SQLITE_NOMEM) sqlite3_result_error_nomem(ctx);
    else if (serr == SQLITE_TOOBIG) sqlite3_result_error_toobig(ctx);
    else if (rc != SQLITE_DONE) sqlite3_result_error(ctx, sqlite3_errmsg(db), -1);
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

static int dtype_arg(sqlite3_context *ctx, const char *fn, sqlite3_value *v, int *dt)
{
    int text = sqlite3_value_type(v) == SQLITE_TEXT;
    const char *s = text ? (const char *)sqlite3_value_text(v) : NULL;
    if (text && !s) { /* SQLite could not allocate (the value is NULL now) */
        sqlite3_result_error_nomem(ctx);
        return 0;
    }
    if (s && !strcmp(s, "f32")) *dt = DT_F32;
    else if (s && !strcmp(s, "f16")) *dt = DT_F16;
    else if (s && !strcmp(s, "bf16")) *dt = DT_BF16;
    else {
        char msg[96];
        snprintf(msg, sizeof msg, "%s(): dtype must be 'f32', 'f16' or 'bf16'", fn);
        sqlite3_result_error(ctx, msg, -1);
        return 0;
    }
    return 1;
}

/* The bytes of a BLOB argument of n bytes (sqlite3_value_bytes, read before), or NULL with the
 * result set to SQLite's out-of-memory error: sqlite3_value_blob returns NULL when it cannot
 * allocate (a zeroblob it cannot expand, under a heap limit), and vec_dot read through that NULL
 * (SIGSEGV, an audit). NULL is also an empty BLOB's pointer, so n == 0 is no error. */
static const unsigned char *blob_arg(sqlite3_context *ctx, sqlite3_value *v, int n)
{
    const unsigned char *p = sqlite3_value_blob(v);
    if (!p && n > 0) sqlite3_result_error_nomem(ctx);
    return p;
}

/* 1 when one of the argc arguments is NULL (the result is then NULL, whatever the others) */
static int any_null(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    for (int i = 0; i < argc; i++)
        if (sqlite3_value_type(argv[i]) == SQLITE_NULL) {
            sqlite3_result_null(ctx);
            return 1;
        }
    return 0;
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
static const char *dt_name(int dt) { return dt == DT_F32 ? "float32" : dt == DT_F16 ? "float16" : "bfloat16"; }

/* The optional dtype after the vectors (argv[k], k < argc), float32 without it; 0: error set. */
static int opt_dtype(sqlite3_context *ctx, const char *fn, int argc, sqlite3_value **argv, int k,
                     int *dt)
{
    *dt = DT_F32;
    return argc <= k || dtype_arg(ctx, fn, argv[k], dt);
}

/* Two BLOBs of whole values of dt and equal, non-zero length; returns the count or -1 (result
 * set). */
static int two_vectors(sqlite3_context *ctx, const char *fn, int argc, sqlite3_value **argv,
                       const unsigned char **a, const unsigned char **b, int *dt)
{
    if (any_null(ctx, argc, argv) || !opt_dtype(ctx, fn, argc, argv, 2, dt)) return -1;
    char msg[96];
    const int w = dt_size(*dt);
    int na = sqlite3_value_bytes(argv[0]), nb = sqlite3_value_bytes(argv[1]);
    if (sqlite3_value_type(argv[0]) != SQLITE_BLOB || sqlite3_value_type(argv[1]) != SQLITE_BLOB)
        snprintf(msg, sizeof msg, "%s() takes two %s BLOBs", fn, dt_name(*dt));
    else if (na % w || nb % w)
        snprintf(msg, sizeof msg, "%s(): a BLOB of %d bytes is no %s vector", fn, na % w ? na : nb,
                 dt_name(*dt));
    else if (na != nb)
        snprintf(msg, sizeof msg, "%s(): the vectors differ in length (%d and %d)", fn, na / w, nb / w);
    else {
        if (!(*a = blob_arg(ctx, argv[0], na)) && na) return -1;
        if (!(*b = blob_arg(ctx, argv[1], nb)) && nb) return -1;
        return na / w;
    }
    sqlite3_result_error(ctx, msg, -1);
    return -1;
}

static void fn_vec_dot(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    const unsigned char *a, *b;
    int dt, n = two_vectors(ctx, "vec_dot", argc, argv, &a, &b, &dt), w = dt_size(dt);
    if (n < 0) return;
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)load_value(a + w * i, dt) * load_value(b + w * i, dt);
    sqlite3_result_double(ctx, s);
}

static void fn_vec_cos(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    const unsigned char *a, *b;
    int dt, n = two_vectors(ctx, "vec_cos", argc, argv, &a, &b, &dt), w = dt_size(dt);
    if (n < 0) return;
    double s = 0, na = 0, nb = 0;
    for (int i = 0; i < n; i++) {
        double x = load_value(a + w * i, dt), y = load_value(b + w * i, dt);
        s += x * y;
        na += x * x;
        nb += y * y;
    }
    if (na == 0 || nb == 0) sqlite3_result_null(ctx); /* undefined for a zero vector */
    else sqlite3_result_double(ctx, s / sqrt(na * nb));
}

static void fn_vec_norm(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    int dt;
    if (any_null(ctx, argc, argv) || !opt_dtype(ctx, "vec_norm", argc, argv, 1, &dt)) return;
    const int w = dt_size(dt);
    if (sqlite3_value_type(argv[0]) != SQLITE_BLOB || sqlite3_value_bytes(argv[0]) % w) {
        char msg[64];
        snprintf(msg, sizeof msg, "vec_norm() takes a %s BLOB", dt_name(dt));
        return sqlite3_result_error(ctx, msg, -1);
    }
    int n = sqlite3_value_bytes(argv[0]) / w;
    const unsigned char *a = blob_arg(ctx, argv[0], n * w);
    if (!a && n) return;
    double s = 0;
    for (int i = 0; i < n; i++) {
        double x = load_value(a + w * i, dt);
        s += x * x;
    }
    sqlite3_result_double(ctx, sqrt(s));
}

/* A BLOB that is whole values of dt, as vec_dot and vec_norm require: vec_len and vec_at had
 * counted 5 bytes as one float32 (an audit). 0 (error set) otherwise. */
static int whole_values(sqlite3_context *ctx, const char *fn, sqlite3_value *v, int dt)
{
    int n = sqlite3_value_bytes(v);
    if (n % dt_size(dt) == 0) return 1;
    char msg[160];
    snprintf(msg, sizeof msg, "%s(): a BLOB of %d bytes is no %s vector", fn, n, dt_name(dt));
    sqlite3_result_error(ctx, msg, -1);
    return 0;
}

/* The arguments of vec_len, vec_at and vec_slice: argv[0] a BLOB of whole values of the dtype
 * in argv[k] (float32 when argc <= k), none NULL. Returns the number of values, or -1 with the
 * result set (NULL, or the error). */
static sqlite3_int64 one_vector(sqlite3_context *ctx, const char *fn, int argc, sqlite3_value **argv,
                                int k, int *dt)
{
    char msg[64];
    if (any_null(ctx, argc, argv) || !opt_dtype(ctx, fn, argc, argv, k, dt)) return -1;
    if (sqlite3_value_type(argv[0]) != SQLITE_BLOB) {
        snprintf(msg, sizeof msg, "%s() takes a BLOB", fn);
        sqlite3_result_error(ctx, msg, -1);
        return -1;
    }
    if (!whole_values(ctx, fn, argv[0], *dt)) return -1;
    return sqlite3_value_bytes(argv[0]) / dt_size(*dt);
}

static void fn_vec_len(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    int dt;
    sqlite3_int64 n = one_vector(ctx, "vec_len", argc, argv, 1, &dt);
    if (n >= 0) sqlite3_result_int64(ctx, n);
}

static void fn_vec_at(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    int dt;
    sqlite3_int64 i, n = one_vector(ctx, "vec_at", argc, argv, 2, &dt);
    if (n < 0 || !int_arg(ctx, "vec_at", 2, argv[1], &i)) return;
    if (i < 0 || i >= n) return sqlite3_result_null(ctx);
    const unsigned char *a = blob_arg(ctx, argv[0], (int)n * dt_size(dt));
    if (!a) return; /* n > i >= 0: not empty */
    sqlite3_result_double(ctx, load_value(a + (size_t)i * dt_size(dt), dt));
}

/* vec_slice(a, start, count [, dtype]): values start .. start + count - 1 of a as a float32
 * BLOB, so that one token's vector of a stored sequence (activations.data) goes into vec_norm,
 * vec_dot or vec_cos; NULL when the range is not inside a, as vec_at's index. */
static void fn_vec_slice(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    int dt;
    sqlite3_int64 i0, cnt, n = one_vector(ctx, "vec_slice", argc, argv, 3, &dt);
    if (n < 0 || !int_arg(ctx, "vec_slice", 2, argv[1], &i0) || !int_arg(ctx, "vec_slice", 3, argv[2], &cnt))
        return;
    if (cnt < 0) return sqlite3_result_error(ctx, "vec_slice(): argument 3 (count) must be >= 0", -1);
    if (i0 < 0 || i0 > n || cnt > n - i0) return sqlite3_result_null(ctx);
    const unsigned char *a = blob_arg(ctx, argv[0], (int)n * dt_size(dt));
    if (!a && n) return;
    unsigned char *out = sqlite3_malloc64(cnt ? (sqlite3_uint64)cnt * 4 : 1);
    if (!out) return sqlite3_result_error_nomem(ctx);
    for (sqlite3_int64 i = 0; i < cnt; i++) {
        float f = load_value(a + (size_t)(i0 + i) * dt_size(dt), dt);
        uint32_t u;
        memcpy(&u, &f, 4);
        for (int b = 0; b < 4; b++) out[4 * i + b] = (unsigned char)(u >> (8 * b)); /* little-endian */
    }
    sqlite3_result_blob64(ctx, out, (sqlite3_uint64)cnt * 4, sqlite3_free);
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
        {"vec_dot", 3, 1, fn_vec_dot},    {"vec_cos", 2, 1, fn_vec_cos},
        {"vec_cos", 3, 1, fn_vec_cos},    {"vec_norm", 1, 1, fn_vec_norm},
        {"vec_norm", 2, 1, fn_vec_norm},  {"vec_len", 1, 1, fn_vec_len},
        {"vec_len", 2, 1, fn_vec_len},    {"vec_at", 2, 1, fn_vec_at},
        {"vec_at", 3, 1, fn_vec_at},      {"vec_slice", 3, 1, fn_vec_slice},
        {"vec_slice", 4, 1, fn_vec_slice},
    };
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++) {
        /* The table lookups read the database: DIRECTONLY, so no view, trigger, CHECK, DEFAULT,
         * index or generated column of a database's schema can run them (a view 'tokens'
         * calling context() would recurse; a trigger would run them on the writer's
         * connection). The vector functions are pure functions of their arguments, so they are
         * DETERMINISTIC and INNOCUOUS (SQLite's advice for side-effect-free functions): a
         * user's own view over vec_cos keeps working with trusted_schema off. */
        int flags = SQLITE_UTF8 | (F[i].det ? SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS : SQLITE_DIRECTONLY);
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
#include "common/buf.h"
#include "store/store_internal.h" /* store_deadline (the runner is not part of the extension) */

void store_deadline_start(store_deadline *d, double limit_s)
{
    clock_gettime(CLOCK_MONOTONIC, &d->t0);
    d->limit = limit_s > 0 ? limit_s : 0;
    d->hit = 0;
}

/* SQLite's progress handler (every few thousand VM steps): non-zero interrupts the statement. */
int store_deadline_check(void *u)
{
    store_deadline *d = u;
    if (d->limit > 0 && !d->hit) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        d->hit = (double)(t.tv_sec - d->t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - d->t0.tv_nsec) >
                 d->limit;
    }
    return d->hit;
}

/* ---- LIKE and GLOB that a deadline can stop ----------------------------------------------
 * SQLite's own LIKE and GLOB run inside one VM opcode, which the progress handler never
 * interrupts, and some patterns cost string x pattern: `SELECT printf('%.*c', 1000000, 'a') LIKE
 * '%' || printf('%.*c', 40000, 'a') || 'b'` took 34 s here. These are the same matching rules
 * (SQLite 3.40's func.c: ASCII-only case folding for LIKE, ESCAPE, GLOB's [...] sets, a '%' or
 * '*' that searches for the next pattern character and recurses, UTF-8 read leniently as
 * SQLite reads it, the LIKE_PATTERN_LENGTH limit and its messages), written anew with a step
 * count: every LIKE_CHECK_STEPS characters compared they ask the deadline, and past it the
 * statement fails with SQLITE_INTERRUPT as the progress handler would have stopped it.
 * tests/test_query.sh compares them with SQLite's own on thousands of generated cases. */
enum { LM_MATCH = 0, LM_NOMATCH = 1, LM_NOWILD = 2, LM_STOP = 3 };
enum { LIKE_CHECK_STEPS = 1 << 14 };

/* The rules of one of like/2, like/3, glob/2 (the functions' user data), copied per call: the
 * call's ESCAPE may switch a wildcard off, and steps counts its characters. */
typedef struct {
    uint32_t all, one, set; /* '%' or '*', '_' or '?', '[' (GLOB; 0 for LIKE) */
    int nocase;
    int blobs_fail;         /* the library's LIKE_DOESNT_MATCH_BLOBS */
    store_deadline *dl;     /* NULL: never stopped */
    unsigned steps;
} like_match;

/* One character of UTF-8 as SQLite reads it: a lead byte keeps the bits after its leading ones
 * (5 of 110xxxxx, 4 of 1110xxxx, ..., 0 of 1111111x) and takes every continuation byte after it;
 * overlong forms, surrogates and U+FFFE/FFFF read as U+FFFD; a byte below 0xc0 (ASCII, or a
 * stray continuation byte) is itself. */
static inline uint32_t like_utf8(const unsigned char **pz)
{
    uint32_t c = *(*pz)++;
    if (c < 0xc0) return c;
    int ones = 2;
    while (ones < 8 && (c << ones) & 0x80) ones++;
    c &= 0x7fu >> ones;
    while ((**pz & 0xc0) == 0x80) c = (c << 6) + (0x3f & *(*pz)++);
    if (c < 0x80 || (c & 0xfffff800) == 0xd800 || (c & 0xfffffffe) == 0xfffe) c = 0xfffd;
    return c;
}

static uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static inline int like_tick(like_match *m)
{
    if (++m->steps % LIKE_CHECK_STEPS || !m->dl) return 0;
    return store_deadline_check(m->dl);
}

static int like_cmp(const unsigned char *p, const unsigned char *s, like_match *m, uint32_t esc)
{
    const unsigned char *escaped = NULL; /* just past an escaped pattern character */
    uint32_t c, c2;
    while ((c = like_utf8(&p)) != 0) {
        if (like_tick(m)) return LM_STOP;
        if (c == m->all) {
            /* a run of '%' and '_': each '_' takes one character */
            while ((c = like_utf8(&p)) == m->all || (c == m->one && m->one != 0))
                if (c == m->one && like_utf8(&s) == 0) return LM_NOWILD;
            if (c == 0) return LM_MATCH;
            if (c == esc) {
                if (m->set == 0) {
                    if ((c = like_utf8(&p)) == 0) return LM_NOWILD;
                } else { /* '*' then a set: try every position */
                    while (*s) {
                        int r = like_cmp(p - 1, s, m, esc);
                        if (r != LM_NOMATCH) return r;
                        if (*s++ >= 0xc0) /* the next character */
                            while ((*s & 0xc0) == 0x80) s++;
                        if (like_tick(m)) return LM_STOP;
                    }
                    return LM_NOWILD;
                }
            }
            /* c is the next literal: find it, then match the rest from just past it */
            if (c < 0x80) {
                char stop[3] = {(char)c, 0, 0};
                if (m->nocase) {
                    stop[0] = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
                    stop[1] = (char)ascii_lower(c);
                }
                for (;;) {
                    s += strcspn((const char *)s, stop);
                    if (*s == 0) break;
                    s++;
                    int r = like_cmp(p, s, m, esc);
                    if (r != LM_NOMATCH) return r;
                    if (like_tick(m)) return LM_STOP;
                }
            } else {
                while ((c2 = like_utf8(&s)) != 0) {
                    if (c2 != c) continue;
                    int r = like_cmp(p, s, m, esc);
                    if (r != LM_NOMATCH) return r;
                    if (like_tick(m)) return LM_STOP;
                }
            }
            return LM_NOWILD;
        }
        if (c == esc) {
            if (m->set == 0) { /* LIKE's escape: the next pattern character is literal */
                if ((c = like_utf8(&p)) == 0) return LM_NOMATCH;
                escaped = p;
            } else { /* GLOB's [...]: one string character in (or, with ^, not in) the set */
                uint32_t prev = 0;
                int seen = 0, invert = 0;
                if ((c = like_utf8(&s)) == 0) return LM_NOMATCH;
                c2 = like_utf8(&p);
                if (c2 == '^') {
                    invert = 1;
                    c2 = like_utf8(&p);
                }
                if (c2 == ']') { /* a ']' first is a member */
                    if (c == ']') seen = 1;
                    c2 = like_utf8(&p);
                }
                while (c2 && c2 != ']') {
                    if (c2 == '-' && p[0] != ']' && p[0] != 0 && prev > 0) { /* a range */
                        c2 = like_utf8(&p);
                        if (c >= prev && c <= c2) seen = 1;
                        prev = 0;
                    } else {
                        if (c == c2) seen = 1;
                        prev = c2;
                    }
                    c2 = like_utf8(&p);
                }
                if (c2 == 0 || (seen ^ invert) == 0) return LM_NOMATCH;
                continue;
            }
        }
        c2 = like_utf8(&s);
        if (c == c2) continue;
        if (m->nocase && c < 0x80 && c2 < 0x80 && ascii_lower(c) == ascii_lower(c2)) continue;
        if (c == m->one && p != escaped && c2 != 0) continue;
        return LM_NOMATCH;
    }
    return *s == 0 ? LM_MATCH : LM_NOMATCH;
}

/* like(P, S [, E]) and glob(P, S): S LIKE P [ESCAPE E], S GLOB P */
static void fn_like(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    like_match m = *(const like_match *)sqlite3_user_data(ctx);
    if (m.blobs_fail && (sqlite3_value_type(argv[0]) == SQLITE_BLOB ||
                           sqlite3_value_type(argv[1]) == SQLITE_BLOB)) {
        sqlite3_result_int(ctx, 0); /* built with LIKE_DOESNT_MATCH_BLOBS (Debian's is) */
        return;
    }
    int tp = sqlite3_value_type(argv[0]), ts = sqlite3_value_type(argv[1]);
    const unsigned char *pat = sqlite3_value_text(argv[0]), *str = sqlite3_value_text(argv[1]);
    /* NULL text of a non-NULL value: SQLite could not allocate (a zeroblob, a conversion; the
       value reads as NULL afterwards, so the types are taken first) */
    if ((!pat && tp != SQLITE_NULL) || (!str && ts != SQLITE_NULL)) {
        sqlite3_result_error_nomem(ctx);
        return;
    }
    int np = sqlite3_value_bytes(argv[0]);
    if (np > sqlite3_limit(sqlite3_context_db_handle(ctx), SQLITE_LIMIT_LIKE_PATTERN_LENGTH, -1)) {
        sqlite3_result_error(ctx, "LIKE or GLOB pattern too complex", -1);
        return;
    }
    uint32_t esc = m.set;
    if (argc == 3) {
        int te = sqlite3_value_type(argv[2]);
        const unsigned char *e = sqlite3_value_text(argv[2]);
        if (!e) {
            if (te != SQLITE_NULL) sqlite3_result_error_nomem(ctx);
            return;
        }
        /* one character: a lead byte and its continuation bytes, then the end */
        const unsigned char *q = e;
        if (*q) {
            if (*q++ >= 0xc0)
                while ((*q & 0xc0) == 0x80) q++;
        }
        if (!*e || *q) {
            sqlite3_result_error(ctx, "ESCAPE expression must be a single character", -1);
            return;
        }
        esc = like_utf8(&e);
        if (esc == m.all) m.all = 0;
        if (esc == m.one) m.one = 0;
    }
    if (!pat || !str) return;
    int r = like_cmp(pat, str, &m, esc);
    if (r == LM_STOP) {
        sqlite3_result_error(ctx, "interrupted", -1);
        sqlite3_result_error_code(ctx, SQLITE_INTERRUPT);
    } else
        sqlite3_result_int(ctx, r == LM_MATCH);
}

int store_like_register(sqlite3 *db, store_deadline *dl)
{
    static const struct { const char *name; int argc; like_match in; } fns[] = {
        {"like", 2, {.all = '%', .one = '_', .nocase = 1}},
        {"like", 3, {.all = '%', .one = '_', .nocase = 1}},
        {"glob", 2, {.all = '*', .one = '?', .set = '['}},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        like_match *in = sqlite3_malloc(sizeof *in);
        if (!in) return SQLITE_NOMEM;
        *in = fns[i].in;
        in->dl = dl;
        in->blobs_fail = sqlite3_compileoption_used("LIKE_DOESNT_MATCH_BLOBS");
        int rc = sqlite3_create_function_v2(db, fns[i].name, fns[i].argc,
                                            SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                            in, fn_like, NULL, NULL, sqlite3_free);
        if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
}

/* ---- trim, ltrim, rtrim with a character set that a deadline can stop ---------------------
 * SQLite's trim(X, Y) compares every character of Y at each step, inside one opcode: trim of
 * 100000 'a' by 100000 'b' and an 'a' ran 171 s (an ASan build) past the console's 2 s limit,
 * with every other console request refused meanwhile. These have SQLite 3.40's rules (func.c
 * trimFunc): X and Y as text; Y up to its first NUL split into "characters" (a byte below 0xc0,
 * or a lead byte with the continuation bytes after it, however many); from the left (ltrim,
 * trim) and then the right (rtrim, trim) the first character of Y, in Y's order, that X starts
 * (ends) with is removed, until none does; the result is TEXT; SQLite's "string or blob too
 * big" for a Y of more characters than SQLITE_LIMIT_LENGTH / 12 (its allocation). Y's
 * characters go into a hash table (the first of equal ones kept, so the order rule holds), and
 * at each step only the few characters X can start or end with there are looked up: linear in
 * X and Y but for X with long runs of continuation bytes, and every TRIM_CHECK_STEPS bytes
 * the deadline is asked. tests/test_query.sh compares them with SQLite's own. */
enum { TRIM_CHECK_STEPS = 1 << 14 };

typedef struct {
    const unsigned char **z; /* the distinct characters of Y, at first occurrence */
    unsigned *n;             /* their lengths */
    int64_t *slot;           /* open addressing: index into z, -1 empty */
    unsigned *lens;          /* open addressing: the lengths of Y's characters, 0 empty */
    uint64_t mask;
    store_deadline *dl;
    unsigned steps;
} trim_set;

/* common/hash.h's FNV-1a: only the table's slots depend on it, never a result */
static uint64_t trim_hash(const unsigned char *z, size_t n) { return hash_fnv1a(HASH_FNV1A_INIT, z, n); }

static int trim_tick(trim_set *t, size_t bytes)
{
    unsigned before = t->steps;
    t->steps += (unsigned)(bytes < TRIM_CHECK_STEPS ? bytes : TRIM_CHECK_STEPS);
    if (t->steps / TRIM_CHECK_STEPS == before / TRIM_CHECK_STEPS || !t->dl) return 0;
    return store_deadline_check(t->dl);
}

/* The index (order in Y) of the character z[0..n) of hash h, or INT64_MAX when Y has none. */
static int64_t trim_find(const trim_set *t, const unsigned char *z, size_t n, uint64_t h)
{
    for (h &= t->mask;; h = (h + 1) & t->mask) {
        int64_t k = t->slot[h];
        if (k < 0) return INT64_MAX;
        if (t->n[k] == n && !memcmp(t->z[k], z, n)) return k;
    }
}

static int trim_has_len(const trim_set *t, size_t n)
{
    for (uint64_t h = (n * 0x9e3779b97f4a7c15u) >> 7 & t->mask;; h = (h + 1) & t->mask) {
        if (t->lens[h] == n) return 1;
        if (!t->lens[h]) return 0;
    }
}

static void fn_trim(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    /* types first: a conversion that cannot allocate leaves the value NULL */
    int tx = sqlite3_value_type(argv[0]), ty = sqlite3_value_type(argv[1]);
    if (tx == SQLITE_NULL) return;
    const unsigned char *x = sqlite3_value_text(argv[0]);
    if (!x) return sqlite3_result_error_nomem(ctx);
    size_t nx = (size_t)sqlite3_value_bytes(argv[0]);
    if (ty == SQLITE_NULL) return;
    const unsigned char *y = sqlite3_value_text(argv[1]);
    if (!y) return sqlite3_result_error_nomem(ctx);
    int64_t ny = 0; /* characters of Y */
    for (const unsigned char *q = y; *q; ny++)
        if (*q++ >= 0xc0)
            while ((*q & 0xc0) == 0x80) q++;
    int flags = (int)(intptr_t)((void **)sqlite3_user_data(ctx))[1];
    trim_set t = {.dl = ((store_deadline **)sqlite3_user_data(ctx))[0]};
    int stopped = 0;
    if (ny > 0) {
        if (ny * 12 > sqlite3_limit(sqlite3_context_db_handle(ctx), SQLITE_LIMIT_LENGTH, -1))
            return sqlite3_result_error_toobig(ctx); /* as SQLite's allocation of ny * 12 bytes */
        uint64_t cap = 2;
        while (cap < (uint64_t)ny * 2) cap *= 2;
        t.mask = cap - 1;
        t.z = sqlite3_malloc64((sqlite3_uint64)ny * sizeof *t.z);
        t.n = sqlite3_malloc64((sqlite3_uint64)ny * sizeof *t.n);
        t.slot = sqlite3_malloc64(cap * sizeof *t.slot);
        t.lens = sqlite3_malloc64(cap * sizeof *t.lens);
        if (!t.z || !t.n || !t.slot || !t.lens) {
            sqlite3_free(t.z);
            sqlite3_free(t.n);
            sqlite3_free(t.slot);
            sqlite3_free(t.lens);
            return sqlite3_result_error_nomem(ctx);
        }
        memset(t.slot, 0xff, cap * sizeof *t.slot);
        memset(t.lens, 0, cap * sizeof *t.lens);
        int64_t nd = 0;
        for (const unsigned char *q = y; *q && !stopped;) {
            const unsigned char *c = q;
            if (*q++ >= 0xc0)
                while ((*q & 0xc0) == 0x80) q++;
            size_t n = (size_t)(q - c);
            uint64_t h = trim_hash(c, n) & t.mask;
            for (; t.slot[h] >= 0; h = (h + 1) & t.mask)
                if (t.n[t.slot[h]] == n && !memcmp(t.z[t.slot[h]], c, n)) break;
            if (t.slot[h] < 0) { /* a later equal character would never be the first match */
                t.z[nd] = c;
                t.n[nd] = (unsigned)n;
                t.slot[h] = nd++;
                if (!trim_has_len(&t, n)) {
                    uint64_t g = (n * 0x9e3779b97f4a7c15u) >> 7 & t.mask;
                    while (t.lens[g]) g = (g + 1) & t.mask;
                    t.lens[g] = (unsigned)n;
                }
            }
            stopped = trim_tick(&t, n);
        }
        /* from the left: X starts with one byte below 0xc0, or a lead byte and 0..all of the
           continuation bytes after it; the first in Y's order of those in Y goes */
        while ((flags & 1) && nx > 0 && !stopped) {
            size_t run = 1;
            if (x[0] >= 0xc0)
                while (run < nx && (x[run] & 0xc0) == 0x80) run++;
            int64_t best = INT64_MAX;
            size_t len = 0;
            uint64_t h = trim_hash(x, 0);
            for (size_t n = 1; n <= run && !stopped; n++) {
                h = hash_fnv1a(h, x + n - 1, 1); /* trim_hash(x, n), extended */
                int64_t k = trim_find(&t, x, n, h);
                if (k < best) best = k, len = n;
                stopped = trim_tick(&t, n);
            }
            if (stopped || best == INT64_MAX) break;
            x += len;
            nx -= len;
        }
        /* from the right: X ends with its last byte, or with a lead byte and every
           (continuation) byte after it */
        size_t b = nx; /* where the run of continuation bytes at the end starts (cached: it
                          stays while single bytes are taken off the end) */
        while ((flags & 2) && nx > 0 && !stopped) {
            if (b >= nx - 1) {
                b = nx - 1;
                while (b > 0 && (x[b] & 0xc0) == 0x80) b--;
                stopped = trim_tick(&t, nx - b);
            }
            int64_t best = trim_find(&t, x + nx - 1, 1, trim_hash(x + nx - 1, 1)), k;
            size_t len = 1;
            /* the longer candidate only when Y has a character of its length */
            if (b < nx - 1 && x[b] >= 0xc0 && trim_has_len(&t, nx - b)) {
                if ((k = trim_find(&t, x + b, nx - b, trim_hash(x + b, nx - b))) < best)
                    best = k, len = nx - b;
                stopped |= trim_tick(&t, nx - b);
            }
            if (best == INT64_MAX) break;
            nx -= len;
        }
        sqlite3_free(t.z);
        sqlite3_free(t.n);
        sqlite3_free(t.slot);
        sqlite3_free(t.lens);
    }
    if (stopped) {
        sqlite3_result_error(ctx, "interrupted", -1);
        sqlite3_result_error_code(ctx, SQLITE_INTERRUPT);
    } else
        sqlite3_result_text64(ctx, (const char *)x, nx, SQLITE_TRANSIENT, SQLITE_UTF8);
}

/* ---- json_patch under a deadline -----------------------------------------------------------
 * SQLite's json_patch looks each member of the patch up in the target object by a linear scan,
 * inside one opcode: json_patch(o, o) of a 30000-member object took 1.8 s (4.1 s in an ASan
 * build), 80000 members 14 s under `query --timeout 1`. Its exact rules (keys compared as
 * written, escapes included; duplicate keys; nulls removed from what is added; the output's
 * form) are not small to write anew, so this is SQLite's own json_patch, run on a private
 * in-memory connection where saelite has not replaced it, when the work is bounded: the
 * members of the target times those of the patch (the ':' outside strings, an upper bound of
 * the pairs the merge compares) at most JSON_PATCH_PAIRS, about 0.2 s; past that it is refused
 * with the reason. Without a deadline (query --timeout 0) every size runs. */
enum { JSON_PATCH_PAIRS = 100000000 };

typedef struct {
    store_deadline *dl;
    sqlite3 *aux;      /* the private connection */
    sqlite3_stmt *st;  /* SELECT json_patch(?1, ?2) there */
} jpatch;

static void jpatch_free(void *p)
{
    jpatch *j = p;
    sqlite3_finalize(j->st);
    sqlite3_close(j->aux);
    sqlite3_free(j);
}

/* An upper bound of the object members in JSON text z: the ':' outside strings. */
static int64_t json_members(const unsigned char *z, int n)
{
    int64_t k = 0;
    for (int i = 0, str = 0; i < n; i++) {
        if (str && z[i] == '\\') i++;
        else if (z[i] == '"') str = !str;
        else if (!str && z[i] == ':') k++;
    }
    return k;
}

static void fn_json_patch(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    jpatch *j = sqlite3_user_data(ctx);
    if (j->dl && j->dl->limit > 0) {
        int t0 = sqlite3_value_type(argv[0]), t1 = sqlite3_value_type(argv[1]);
        const unsigned char *a = sqlite3_value_text(argv[0]), *b = sqlite3_value_text(argv[1]);
        if ((!a && t0 != SQLITE_NULL) || (!b && t1 != SQLITE_NULL))
            return sqlite3_result_error_nomem(ctx);
        int64_t ma = a ? json_members(a, sqlite3_value_bytes(argv[0])) : 0;
        int64_t mb = b ? json_members(b, sqlite3_value_bytes(argv[1])) : 0;
        if (ma * mb > JSON_PATCH_PAIRS) {
            char msg[300];
            snprintf(msg, sizeof msg, "json_patch(): up to %lld x %lld object members to compare is past "
                     "this connection's time limit (SQLite's merge compares each pair in one step "
                     "that the limit cannot stop; at most %d pairs)", (long long)ma, (long long)mb,
                     JSON_PATCH_PAIRS);
            return sqlite3_result_error(ctx, msg, -1);
        }
    }
    sqlite3_limit(j->aux, SQLITE_LIMIT_LENGTH,
                  sqlite3_limit(sqlite3_context_db_handle(ctx), SQLITE_LIMIT_LENGTH, -1));
    sqlite3_bind_value(j->st, 1, argv[0]);
    sqlite3_bind_value(j->st, 2, argv[1]);
    int rc = sqlite3_step(j->st);
    if (rc == SQLITE_ROW) sqlite3_result_value(ctx, sqlite3_column_value(j->st, 0)); /* subtype too */
    else if ((rc & 0xff) == SQLITE_NOMEM) sqlite3_result_error_nomem(ctx);
    else if ((rc & 0xff) == SQLITE_TOOBIG) sqlite3_result_error_toobig(ctx);
    else sqlite3_result_error(ctx, sqlite3_errmsg(j->aux), -1);
    sqlite3_reset(j->st);
    sqlite3_clear_bindings(j->st);
}

static int jpatch_register(sqlite3 *db, store_deadline *dl)
{
    jpatch *j = sqlite3_malloc(sizeof *j);
    if (!j) return SQLITE_NOMEM;
    *j = (jpatch){.dl = dl};
    int rc = sqlite3_open_v2(":memory:", &j->aux, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(j->aux, "SELECT json_patch(?1, ?2)", -1, &j->st, NULL);
    if (rc != SQLITE_OK) {
        jpatch_free(j);
        return rc == SQLITE_ERROR ? SQLITE_OK : rc; /* a library without JSON: nothing to replace */
    }
    /* the callback runs on db's thread; the private connection is db's alone */
    return sqlite3_create_function_v2(db, "json_patch", 2,
                                      SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, j,
                                      fn_json_patch, NULL, NULL, jpatch_free);
}

int store_slow_builtins_register(sqlite3 *db, store_deadline *dl)
{
    static const struct { const char *name; intptr_t flags; } fns[] = {
        {"ltrim", 1}, {"rtrim", 2}, {"trim", 3},
    };
    int jrc = jpatch_register(db, dl);
    if (jrc != SQLITE_OK) return jrc;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        void **u = sqlite3_malloc(2 * sizeof *u); /* the deadline and the sides to trim */
        if (!u) return SQLITE_NOMEM;
        u[0] = dl;
        u[1] = (void *)fns[i].flags;
        int rc = sqlite3_create_function_v2(db, fns[i].name, 2,
                                            SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                            u, fn_trim, NULL, NULL, sqlite3_free);
        if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
}

/* An SQLite failure of the query as an err.h code with a message naming the database. */
static int q_fail(const char *path, sqlite3 *db, int rc)
{
    switch (rc & 0xff) {
    case SQLITE_NOMEM: return err_set(ERR_NOMEM, "%s: out of memory running the query", path);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return err_set(ERR_FORMAT, "%s: %s", path, sqlite3_errmsg(db));
    default: return err_set(ERR_SQL, "%s: SQL error: %s%s", path, sqlite3_errmsg(db), store_lock_hint(db, rc));
    }
}

int store_ro_query(const char *db_path, const char *sql, store_row_fn row_fn, void *user)
{
    return store_ro_query_limited(db_path, sql, NULL, row_fn, user);
}

/* query's authorizer: ATTACH and DETACH refused (and noted in *u, for the message) */
static int q_authorize(void *u, int action, const char *a, const char *b, const char *c,
                       const char *d)
{
    (void)a; (void)b; (void)c; (void)d;
    if (action != SQLITE_ATTACH && action != SQLITE_DETACH) return SQLITE_OK;
    *(int *)u = 1;
    return SQLITE_DENY;
}

/* Opens db_path for query: read-only, query_only, defensive, an untrusted schema, saelite's
 * functions and the deadline clk (limit 0: none) on its progress handler. On failure nothing is
 * left open. */
static int ro_open(const char *db_path, sqlite3 **dbp, store_deadline *clk)
{
    *dbp = NULL;
    int rc = store_check_file(db_path);
    if (rc) return rc;
    sqlite3 *db = NULL;
    rc = sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL);
    if (rc != SQLITE_OK) {
        int ret = db && store_path_too_long(db_path, rc)
                      ? ERR_ARG
                      : err_set(db ? ERR_IO : ERR_NOMEM, "%s: cannot open: %s", db_path,
                                db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return ret;
    }
    sqlite3_busy_timeout(db, 5000);
    /* The schema is the database's, not ours: views and triggers may only call innocuous
     * functions (ours that read tables are DIRECTONLY anyway), and defensive mode refuses schema tampering. */
    sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)0);
    sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)0);
    /* Debian's SQLite has fts3_tokenizer(): its one-argument form returns a code pointer, its
       two-argument form installs one (a known path to running code; an audit) */
    sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, (int *)0);
    if (clk->limit > 0) sqlite3_progress_handler(db, 1000, store_deadline_check, clk);
    /* query_only blocks writes even where the read-only open would not (e.g. temp tables) */
    if ((rc = sqlite3_exec(db, "PRAGMA query_only = 1", NULL, NULL, NULL)) != SQLITE_OK ||
        (rc = store_sqlfuncs_register(db)) != SQLITE_OK ||
        (rc = store_like_register(db, clk->limit > 0 ? clk : NULL)) != SQLITE_OK ||
        (rc = store_slow_builtins_register(db, clk->limit > 0 ? clk : NULL)) != SQLITE_OK) {
        int ret = q_fail(db_path, db, rc);
        sqlite3_close(db);
        return ret;
    }
    *dbp = db;
    return OK;
}

int store_ro_query_limited(const char *db_path, const char *sql, store_query_limits *lim,
                           store_row_fn row_fn, void *user)
{
    sqlite3 *db = NULL;
    enum { MAXST = 256 };
    sqlite3_stmt *st[MAXST];
    int nst = 0, ret = OK;
    long long rows = 0, max_rows = lim && lim->max_rows > 0 ? lim->max_rows : 0;
    store_deadline clk;
    store_deadline_start(&clk, lim ? lim->timeout_s : 0);
    if (lim) lim->hit = 0;
    int rc;
    if ((ret = ro_open(db_path, &db, &clk))) return ret;
    /* Prepare everything first: a write anywhere refuses the whole input before anything runs.
       So an ATTACH could never be used (the next statement is prepared before it runs: "no such
       table: a.t", an audit): refused with the reason */
    int attach = 0;
    sqlite3_set_authorizer(db, q_authorize, &attach);
    const char *p = sql;
    while (p && *p) {
        sqlite3_stmt *s = NULL;
        const char *tail = NULL;
        rc = sqlite3_prepare_v2(db, p, -1, &s, &tail);
        if (rc != SQLITE_OK && attach) {
            ret = err_set(ERR_ARG, "%s: ATTACH and DETACH are not supported by query (every "
                          "statement is prepared before the first runs, so an attached database "
                          "is never there); use sqlite3 %s with '.load ./saelite'", db_path, db_path);
            goto done;
        }
        if (rc != SQLITE_OK) {
            ret = q_fail(db_path, db, rc);
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
        /* an unterminated comment (or nothing but blanks) prepares to no statement */
        ret = *sql && !sqlite3_complete(sql) && strspn(sql, " \t\r\n\f\v;") < strlen(sql)
                  ? err_set(ERR_ARG, "%s: incomplete SQL (an unterminated comment?)", db_path)
                  : err_set(ERR_ARG, "%s: no SQL statement given", db_path);
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
            /* copies: a schema change by another process makes the first step prepare the
               statement again, which frees the names read before it */
            const char *nm = sqlite3_column_name(st[k], c);
            names[c] = nm ? mem_strdup(nm) : NULL;
            blobtxt[c] = mem_alloc(48);
            if (!names[c] || !blobtxt[c]) ret = err_set(ERR_NOMEM, "out of memory");
        }
        if (ret == OK) ret = row_fn(user, k, nc, names, NULL, NULL);
        long long rows0 = rows; /* rows counts over all statements */
        while (ret == OK && (rc = sqlite3_step(st[k])) == SQLITE_ROW) {
            if (max_rows && rows == max_rows) {
                if (lim) lim->hit = STORE_Q_HIT_ROWS;
                ret = err_set(ERR_ABORTED, "%s: query stopped after %lld row%s (--max-rows)", db_path,
                              rows, rows == 1 ? "" : "s");
                break;
            }
            rows++;
            int changed = sqlite3_column_count(st[k]) != nc;
            for (int c = 0; !changed && rows == rows0 + 1 && c < nc; c++) {
                const char *nm = sqlite3_column_name(st[k], c);
                changed = !nm || strcmp(nm, names[c]);
            }
            if (changed) { /* the header printed the old statement's names */
                ret = err_set(ERR_ARG, "%s: the schema changed while the query started (another "
                              "process); run it again", db_path);
                break;
            }
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
                else if (types[c] == STORE_Q_FLOAT && isfinite(sqlite3_column_double(st[k], c))) {
                    /* the fewest digits that read back exactly (SQLite's text has 15: 0.1+0.2
                       read back as 0.3, DBL_MAX as inf, an audit), a REAL kept a REAL ("1.0") */
                    buf_double(blobtxt[c], 44, sqlite3_column_double(st[k], c));
                    if (!strpbrk(blobtxt[c], ".e")) strcat(blobtxt[c], ".0");
                    vals[c] = blobtxt[c];
                } else if (!(vals[c] = (const char *)sqlite3_column_text(st[k], c))) {
                    ret = err_set(ERR_NOMEM, "%s: out of memory running the query", db_path);
                    break;
                }
            }
            if (ret == OK) ret = row_fn(user, k, nc, names, vals, types);
        }
        if (ret == OK && rc != SQLITE_DONE) {
            if (clk.hit) {
                if (lim) lim->hit = STORE_Q_HIT_TIME;
                ret = err_set(ERR_ABORTED, "%s: query stopped after %g s (--timeout)", db_path,
                              clk.limit);
            } else ret = q_fail(db_path, db, rc);
        }
        if (blobtxt)
            for (int c = 0; c < nc; c++) mem_free(blobtxt[c]);
        if (names)
            for (int c = 0; c < nc; c++) mem_free((char *)names[c]);
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
