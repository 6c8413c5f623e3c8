/* test_store.c - the SQLite store: schema versioning, round trips in every dtype, transactions,
 * the training iterator and its split, context, extension parts, OOM injection. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/half.h"
#include "common/mem.h"
#include "common/utf8.h"
#include "extract/extract.h"
#include "store/store.h"
#include "store/store_ana.h"
#include "store/store_eval.h"
#include "store/sqlfuncs.h"
#include "store/store_internal.h"
#include "store/store_report.h"
#include "store/store_sae.h"
#include "store/store_serve.h"
#include "harness.h"

/* tmpfs when there is one: the OOM sweep creates thousands of databases and fsync dominates. */
static char dir[64] = "/dev/shm/saelite_test_storeXXXXXX";

static const char *tmp(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static float val(int64_t seq, int t, int c)
{
    return (float)((seq * 131 + t * 7 + c) % 1000) * 0.013f - 6.5f;
}

enum { T = 8, W = 12 };

/* ndoc documents with 2 sequences each (the second one T-3 tokens long), one hook, all in one
 * transaction. Values depend on the sequence *ordinal* so a rerun writes the same data. */
static int fill(store *s, const char *hook, int dtype, int ndoc, int64_t *hook_id)
{
    int64_t model;
    int rc = store_begin(s);
    if (rc) return rc;
    rc = store_model_add(s, "tiny", "/models/tiny", "{\"n_layer\":1}", "0123", &model);
    store_hook h;
    if (!rc) rc = store_hook_add(s, model, hook, 0, W, dtype, T, &h);
    if (!rc) *hook_id = h.id;
    int ord = 0;
    for (int d = 0; !rc && d < ndoc; d++) {
        char name[32], text[64];
        snprintf(name, sizeof name, "doc%d", d);
        snprintf(text, sizeof text, "text of document %d", d);
        int64_t doc;
        rc = store_doc_add(s, "corpus.txt", d, name, d % 2 ? "news" : NULL, text, strlen(text), &doc);
        for (int k = 0; !rc && k < 2; k++, ord++) {
            int n = k ? T - 3 : T, ids[T];
            const char *tx[T];
            int64_t bs[T], be[T];
            for (int t = 0; t < n; t++) {
                ids[t] = 100 * d + 10 * k + t;
                tx[t] = t % 2 ? " tok" : "x";
                bs[t] = t;
                be[t] = t + 1;
            }
            int64_t seq;
            rc = store_seq_add(s, doc, k * T, 0, ids, n, &seq, NULL);
            if (!rc) rc = store_tokens_add(s, seq, n, ids, tx, bs, be, NULL);
            float x[T * W];
            for (int t = 0; t < n; t++)
                for (int c = 0; c < W; c++) x[t * W + c] = val(ord, t, c);
            if (!rc) rc = store_act_write(s, h.id, seq, x, n);
        }
    }
    if (rc) {
        store_rollback(s);
        return rc;
    }
    return store_commit(s);
}

static void test_roundtrip(int dtype)
{
    const char *p = tmp("rt.db");
    store_remove(p);
    store *s;
    int rc = store_open(&s, p, STORE_CREATE);
    CHECK(rc == OK, "%s", err_msg());
    if (rc) return;
    int64_t hid = 0;
    rc = fill(s, "blocks.0.mlp.hook_post", dtype, 5, &hid);
    CHECK(rc == OK, "fill: %s", err_msg());
    store_close(s);
    CHECK(store_open(&s, p, STORE_READONLY) == OK, "%s", err_msg());
    store_hook h;
    CHECK(store_hook_find(s, "blocks.0.mlp.hook_post", &h) == OK, "%s", err_msg());
    CHECK(h.width == W && h.dtype == dtype && h.seq_len == T && h.n_seqs == 10 &&
          h.n_tokens == 5 * (2 * T - 3), "hook %d %d %d %lld %lld", h.width, h.dtype, h.seq_len,
          (long long)h.n_seqs, (long long)h.n_tokens);
    rc = store_hook_find(s, "blocks.1.mlp.hook_post", &h);
    CHECK(rc == ERR_NOTFOUND && strstr(err_msg(), "blocks.0.mlp.hook_post"), "%s", err_msg());
    int64_t *ids;
    size_t n;
    CHECK(store_seq_list(s, hid, STORE_SPLIT_ALL, 0, &ids, &n) == OK && n == 10);
    /* Read back in the hook's dtype rounding. */
    double maxerr = 0;
    for (size_t i = 0; i < n; i++) {
        float x[T * W];
        int got = 0;
        rc = store_act_read(s, hid, ids[i], x, &got);
        CHECK(rc == OK && got == (i % 2 ? T - 3 : T), "read %zu: %s", i, err_msg());
        for (int t = 0; t < got; t++)
            for (int c = 0; c < W; c++) {
                float want = val((int64_t)i, t, c);
                if (dtype == STORE_F16) want = half_f16_to_f32(half_f32_to_f16(want));
                if (dtype == STORE_BF16) want = half_bf16_to_f32(half_f32_to_bf16(want));
                double e = fabs((double)x[t * W + c] - want);
                if (e > maxerr) maxerr = e;
            }
        int tok[T], tn = T;
        CHECK(store_seq_tokens(s, ids[i], tok, &tn) == OK && tn == got &&
              tok[1] == (int)(100 * (i / 2) + 10 * (i % 2) + 1));
    }
    CHECK(maxerr == 0, "dtype %s: max error %g after rounding", store_dtype_name(dtype), maxerr);
    mem_free(ids);
    float x[T * W];
    int got;
    CHECK(store_act_read(s, hid, 999, x, &got) == ERR_NOTFOUND);
    int tn = T;
    CHECK(store_seq_tokens(s, 999, NULL, &tn) == ERR_NOTFOUND);
    /* Writes on a read-only handle fail cleanly (values every dtype holds: the write checks them
       first, and x is not initialised by the failed read above) */
    for (int i = 0; i < T * W; i++) x[i] = 0.25f;
    rc = store_act_write(s, hid, 1, x, T);
    CHECK(rc == ERR_IO, "readonly write rc %d: %s", rc, err_msg());
    CHECK(store_check(s) == OK, "%s", err_msg());
    store_close(s);
}

/* A new empty store at p (an old file removed first), or NULL after a failed CHECK. */
static store *fresh_store(const char *p)
{
    store_remove(p);
    store *s;
    if (store_open(&s, p, STORE_CREATE)) {
        CHECK(0, "%s", err_msg());
        return NULL;
    }
    return s;
}

/* What readers refuse is not written: non-finite values (any dtype) and float16 overflow (a
 * value that would be stored as an infinity); 65504, float16's largest, is stored exactly. A
 * blob that holds a NaN anyway (a damaged file) is refused by every read, naming the place. */
static void test_nonfinite(void)
{
    const char *p = tmp("nf.db");
    store *s = fresh_store(p);
    if (!s) return;
    int64_t h16, h32, seq;
    CHECK(fill(s, "h16", STORE_F16, 1, &h16) == OK, "%s", err_msg());
    store_hook h;
    CHECK(store_hook_find(s, "h16", &h) == OK && store_hook_add(s, h.model_id, "h32", 0, W, STORE_F32, T,
                                                                &h) == OK, "%s", err_msg());
    h32 = h.id;
    int64_t *ids;
    size_t n;
    CHECK(store_seq_list(s, h16, STORE_SPLIT_ALL, 0, &ids, &n) == OK && n == 2, "%s", err_msg());
    seq = ids[0];
    int64_t seq2 = ids[1];
    mem_free(ids);
    float x[T * W], y[T * W];
    for (int i = 0; i < T * W; i++) x[i] = 0.5f;
    x[W + 2] = 65504.0f;
    CHECK(store_act_write(s, h16, seq, x, T) == OK, "65504 in f16: %s", err_msg());
    int got;
    CHECK(store_act_read(s, h16, seq, y, &got) == OK && y[W + 2] == 65504.0f, "%s", err_msg());
    x[W + 2] = 65520.0f;
    int rc = store_act_write(s, h16, seq, x, T);
    CHECK(rc == ERR_ARG && strstr(err_msg(), "hook h16") && strstr(err_msg(), "token 1, dimension 2") &&
              strstr(err_msg(), "beyond f16's range; store this hook as bf16 or f32"), "rc %d: %s", rc,
          err_msg());
    /* past the first 32 values (the vector scan's later blocks), the first of two named */
    x[W + 2] = 0.5f;
    x[6 * W + 5] = 70000.0f;
    x[7 * W + 1] = 65520.0f;
    rc = store_act_write(s, h16, seq, x, T);
    CHECK(rc == ERR_ARG && strstr(err_msg(), "token 6, dimension 5"), "rc %d: %s", rc, err_msg());
    x[6 * W + 5] = x[7 * W + 1] = 0.5f;
    /* bfloat16 keeps float's exponent but rounds: FLT_MAX itself becomes an infinity */
    int over;
    float big[2] = {3.38e38f, 3.4028235e38f};
    CHECK(store_act_first_bad(STORE_BF16, big, 2, &over) == 1 && over, "bf16 overflow");
    CHECK(store_act_first_bad(STORE_F32, big, 2, &over) == -1, "f32 holds FLT_MAX");
    CHECK(store_act_first_bad(STORE_F16, big, 1, &over) == 0 && over, "f16 overflow");
    x[W + 2] = 70000.0f;
    CHECK(store_act_write(s, h32, seq, x, T) == OK, "70000 in f32: %s", err_msg());
    x[2 * W + 1] = NAN;
    rc = store_act_write(s, h32, seq, x, T);
    CHECK(rc == ERR_ARG && strstr(err_msg(), "non-finite value (nan) at token 2, dimension 1"), "rc %d: %s",
          rc, err_msg());
    x[W + 2] = 0.5f;
    x[2 * W + 1] = -INFINITY;
    CHECK(store_act_write(s, h16, seq, x, T) == ERR_ARG && strstr(err_msg(), "(-inf)"), "%s", err_msg());
    store_close(s);
    /* a NaN already in a blob: patched in with plain SQL, as a damaged file would have it */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "sqlite3 '%s' \"UPDATE activations SET data = X'%s' || substr(data, 5) "
             "WHERE hook_id = %lld AND sequence_id = %lld\"", p, "0000c07f", (long long)h32, (long long)seq);
    if (system(cmd) != 0) {
        CHECK(0, "sqlite3 patch failed");
        return;
    }
    CHECK(store_open(&s, p, STORE_READONLY) == OK, "%s", err_msg());
    rc = store_act_read(s, h32, seq, y, &got);
    CHECK(rc == ERR_FORMAT && strstr(err_msg(), "hook h32") &&
              strstr(err_msg(), "non-finite value (nan) at token 0, dimension 0"), "rc %d: %s", rc, err_msg());
    CHECK(store_act_read(s, h16, seq, y, &got) == OK, "the other hook's row: %s", err_msg());
    store_close(s);
    /* an f16 infinity in a row stored before writes were checked: an overflow then, said so */
    snprintf(cmd, sizeof cmd, "sqlite3 '%s' \"UPDATE activations SET data = substr(data, 1, 2) || "
             "X'007c' || substr(data, 5) WHERE hook_id = %lld AND sequence_id = %lld\"", p,
             (long long)h16, (long long)seq2);
    if (system(cmd) != 0) {
        CHECK(0, "sqlite3 patch failed");
        return;
    }
    CHECK(store_open(&s, p, STORE_READONLY) == OK, "%s", err_msg());
    rc = store_act_read(s, h16, seq2, y, &got);
    CHECK(rc == ERR_FORMAT && strstr(err_msg(), "inf at token 0, dimension 1: a value beyond f16's range "
                                                "when it was stored"), "rc %d: %s", rc, err_msg());
    store_close(s);
}

static void test_iter(void)
{
    const char *p = tmp("it.db");
    store *s = fresh_store(p);
    if (!s) return;
    int64_t hid;
    CHECK(fill(s, "h", STORE_F32, 40, &hid) == OK, "%s", err_msg());
    int64_t *tr, *va;
    size_t ntr, nva;
    CHECK(store_seq_list(s, hid, STORE_SPLIT_TRAIN, 0.25, &tr, &ntr) == OK);
    CHECK(store_seq_list(s, hid, STORE_SPLIT_VAL, 0.25, &va, &nva) == OK);
    CHECK(ntr + nva == 80 && nva > 5 && nva < 40, "split %zu/%zu", ntr, nva);
    int overlap = 0;
    for (size_t i = 0; i < ntr; i++)
        for (size_t j = 0; j < nva; j++) overlap += tr[i] == va[j];
    CHECK(overlap == 0);
    for (size_t j = 0; j < nva; j++) CHECK(store_seq_is_val(va[j], 0.25) == 1);
    store_iter *it;
    CHECK(store_iter_open(&it, s, hid, STORE_SPLIT_TRAIN, 0.25, 7) == OK, "%s", err_msg());
    CHECK(store_iter_count(it) == ntr);
    int64_t order1[80], order2[80];
    size_t k = 0;
    int bad = 0;
    for (;;) {
        float x[T * W];
        int got;
        int64_t seq;
        if (store_iter_next(it, x, &got, &seq) != OK || got == 0) break;
        int64_t ord = seq - 1; /* sequence ids are 1.. in insertion order */
        for (int c = 0; c < W; c++) bad += x[(got - 1) * W + c] != val(ord, got - 1, c);
        if (k < 80) order1[k++] = seq;
    }
    CHECK(k == ntr && bad == 0, "iterated %zu of %zu, %d wrong values", k, ntr, bad);
    store_iter_shuffle(it, 8);
    size_t k2 = 0;
    for (;;) {
        float x[T * W];
        int got;
        int64_t seq;
        if (store_iter_next(it, x, &got, &seq) != OK || got == 0) break;
        if (k2 < 80) order2[k2++] = seq;
    }
    int same = 1, sorted = 1;
    for (size_t i = 0; i < k && i < k2; i++) same &= order1[i] == order2[i];
    for (size_t i = 1; i < k; i++) sorted &= order1[i] > order1[i - 1];
    CHECK(k2 == ntr && !same && !sorted, "a new seed gives another random order");
    store_iter_close(it);
    mem_free(tr);
    mem_free(va);

    store_context c;
    CHECK(store_context_get(s, 3, 4, 2, 10, &c) == OK, "%s", err_msg());
    CHECK(c.n == 6 && c.center == 2 && c.ids[2] == 100 + 4 && c.text[2] &&
          !strcmp(c.text[2], "x") && !strcmp(c.text[1], " tok"), "context n=%d", c.n);
    store_context_free(&c);
    CHECK(store_context_get(s, 3, T, 1, 1, &c) == ERR_ARG);
    /* before/after at INT_MAX clip to the sequence (no int overflow, UBSan in test-asan) */
    CHECK(store_context_get(s, 3, 4, 2147483647, 2147483647, &c) == OK && c.n == T && c.center == 4,
          "context INT_MAX: %s", err_msg());
    store_context_free(&c);
    store_close(s);
}

static void test_versions(void)
{
    const char *p = tmp("v.db");
    store_remove(p);
    store *s;
    CHECK(store_open(&s, p, STORE_READONLY) == ERR_NOTFOUND, "missing file");
    CHECK(store_open(&s, p, 0) == ERR_NOTFOUND, "missing file without CREATE");
    CHECK(store_open(&s, p, STORE_CREATE) == OK, "%s", err_msg());
    CHECK(store_schema_part(s, "sae", 1, "CREATE TABLE IF NOT EXISTS saes (id INTEGER PRIMARY KEY)") == OK,
          "%s", err_msg());
    CHECK(store_schema_part(s, "sae", 2, "CREATE TABLE IF NOT EXISTS saes (id INTEGER PRIMARY KEY); "
                                         "CREATE TABLE IF NOT EXISTS sae_log (x)") == OK, "%s", err_msg());
    CHECK(store_schema_part(s, "sae", 1, "SELECT 1") == ERR_VERSION, "older code refuses newer part");
    int64_t cnt = 0;
    CHECK(store_count_rows(s, "saes", &cnt) == OK && cnt == 0);
    CHECK(store_count_rows(s, "no_such_table", &cnt) == OK && cnt == -1);
    CHECK(store_count_rows(s, "x; DROP TABLE models", &cnt) == ERR_ARG);
    CHECK(store_schema_part(s, "bad", 1, "CREATE TABLE nonsense (") == ERR_SQL);
    int64_t v;
    CHECK(store_query_i64(s, "SELECT count(*) FROM schema_parts WHERE name = 'bad'", &v) == OK && v == 0);
    /* A rolled back transaction leaves nothing. */
    int64_t mid;
    CHECK(store_begin(s) == OK && store_model_add(s, "m", "p", "{}", "1", &mid) == OK);
    CHECK(store_rollback(s) == OK);
    CHECK(store_query_i64(s, "SELECT count(*) FROM models", &v) == OK && v == 0);
    /* Width mismatch on an existing hook. */
    store_hook h;
    CHECK(store_model_add(s, "m", "p", "{}", "1", &mid) == OK);
    CHECK(store_hook_add(s, mid, "hk", 0, 16, STORE_F32, 8, &h) == OK);
    int rc = store_hook_add(s, mid, "hk", 0, 32, STORE_F32, 8, &h);
    CHECK(rc == ERR_SHAPE && strstr(err_msg(), "width 16"), "%s", err_msg());
    CHECK(store_hook_add(s, mid, "hk", 0, 16, STORE_BF16, 8, &h) == ERR_SHAPE);
    CHECK(store_exec(s, "PRAGMA user_version = 99") == OK);
    store_close(s);
    rc = store_open(&s, p, 0);
    CHECK(rc == ERR_VERSION && strstr(err_msg(), "newer"), "rc %d: %s", rc, err_msg());
    /* An SQLite file that is not ours. */
    const char *q = tmp("other.db");
    store_remove(q);
    CHECK(store_open(&s, q, STORE_CREATE) == OK);
    CHECK(store_exec(s, "PRAGMA application_id = 7") == OK);
    store_close(s);
    rc = store_open(&s, q, 0);
    CHECK(rc == ERR_FORMAT && strstr(err_msg(), "not a saelite store"), "%s", err_msg());
    /* Not a database at all. */
    const char *g = tmp("garbage.db");
    FILE *f = fopen(g, "wb");
    for (int i = 0; i < 5000; i++) fputc("garbage!"[i % 8], f);
    fclose(f);
    rc = store_open(&s, g, 0);
    CHECK(rc == ERR_FORMAT && strstr(err_msg(), "garbage.db"), "rc %d: %s", rc, err_msg());
    rc = store_open(&s, dir, 0);
    CHECK(rc == ERR_IO, "a directory: %s", err_msg());
    /* A changed document is detected. */
    store_remove(p);
    CHECK(store_open(&s, p, STORE_CREATE) == OK);
    int64_t d1, d2;
    CHECK(store_doc_add(s, "c", 0, "a", NULL, "abc", 3, &d1) == OK);
    CHECK(store_doc_add(s, "c", 0, "a", NULL, "abc", 3, &d2) == OK && d1 == d2);
    CHECK(store_doc_add(s, "c", 0, "a", NULL, "abd", 3, &d2) == ERR_FORMAT);
    int ids[3] = {1, 2, 3}, ids2[3] = {1, 2, 4};
    int64_t s1, s2;
    int ins1 = 0, ins2 = 1;
    CHECK(store_seq_add(s, d1, 0, 1, ids, 3, &s1, &ins1) == OK &&
          store_seq_add(s, d1, 0, 1, ids, 3, &s2, &ins2) == OK && s1 == s2 && ins1 && !ins2);
    CHECK(store_seq_add(s, d1, 0, 1, ids2, 3, &s2, NULL) == ERR_FORMAT);
    store_close(s);
}

/* A database is input (issue 20): each way another program can change the schema under our
 * tables is refused at open with one message naming the file and the difference. */
static int reopen_fails(const char *p, const char *change, const char *want)
{
    store *s;
    store_remove(p);
    if (store_open(&s, p, STORE_CREATE) != OK) return 0;
    int rc = store_sae_init(s);
    if (!rc) rc = store_exec(s, change);
    store_close(s);
    if (rc) {
        fprintf(stderr, "change '%s': %s\n", change, err_msg());
        return 0;
    }
    rc = store_open(&s, p, STORE_READONLY);
    if (rc == OK) store_close(s);
    int ok = rc == ERR_FORMAT && strstr(err_msg(), want) && strstr(err_msg(), p) && !strchr(err_msg(), '\n');
    if (!ok) fprintf(stderr, "change '%s': rc %d: %s (want '%s')\n", change, rc, err_msg(), want);
    return ok;
}

static void test_hostile(void)
{
    const char *p = tmp("h.db");
    CHECK(reopen_fails(p, "DROP TABLE tokens", "no table 'tokens'"));
    CHECK(reopen_fails(p, "DROP TABLE tokens; CREATE VIEW tokens AS SELECT 1 AS sequence_id",
                       "'tokens' is a view, not a table"));
    CHECK(reopen_fails(p, "ALTER TABLE hooks RENAME COLUMN width TO w", "table 'hooks' has no column 'width'"));
    CHECK(reopen_fails(p, "DROP TABLE runs; CREATE TABLE runs (id INTEGER PRIMARY KEY, kind BLOB, "
                          "params TEXT, status TEXT, started TEXT, finished TEXT)",
                       "runs.kind is declared 'BLOB', not 'TEXT'"));
    CHECK(reopen_fails(p, "CREATE TRIGGER tr AFTER INSERT ON models BEGIN DELETE FROM documents; END",
                       "trigger 'tr' on 'models'"));
    CHECK(reopen_fails(p, "DROP TABLE sae_training_log", "'sae' tables do not match saelite's schema: no "
                          "table 'sae_training_log'"));
    /* extra columns are allowed (a newer saelite may add some without a version step) */
    store *s;
    store_remove(p);
    CHECK(store_open(&s, p, STORE_CREATE) == OK);
    CHECK(store_exec(s, "ALTER TABLE tokens ADD COLUMN note TEXT") == OK);
    store_close(s);
    CHECK(store_open(&s, p, STORE_READONLY) == OK, "extra column: %s", err_msg());
    store_close(s);
    /* creating a part over a view of its name fails and records nothing */
    CHECK(store_open(&s, p, 0) == OK);
    CHECK(store_exec(s, "CREATE VIEW sae_registry AS SELECT 1 AS id") == OK);
    int rc = store_sae_init(s);
    CHECK(rc == ERR_FORMAT && strstr(err_msg(), "'sae_registry' is a view"), "rc %d: %s", rc, err_msg());
    int64_t v = -1;
    CHECK(store_query_i64(s, "SELECT count(*) FROM schema_parts WHERE name = 'sae'", &v) == OK && v == 0,
          "part not recorded (%lld)", (long long)v);
    store_close(s);

    /* the SQL functions on a store handle: extremes, a view that recurses, tables not ours */
    store_remove(p);
    CHECK(store_open(&s, p, STORE_CREATE) == OK);
    sqlite3 *db = store_db(s);
    CHECK(store_sqlfuncs_register(db) == SQLITE_OK);
    CHECK(store_exec(s, "INSERT INTO tokens (sequence_id, position, token_id, text) VALUES "
                        "(1, 9223372036854775807, 5, 'max'), (1, -9223372036854775808, 6, 'min'), "
                        "(1, 0, 7, 'zero')") == OK);
    static const struct { const char *sql, *want; } Q[] = {
        {"SELECT context(1, 9223372036854775807, 100000, 100000)", "\xc2\xabmax\xc2\xbb"},
        {"SELECT context(1, -9223372036854775808, 100000, 100000)", "\xc2\xabmin\xc2\xbb"},
        {"SELECT context(1, 9223372036854775806, 0, 100000)", NULL},
        {"SELECT context(-9223372036854775808, 0)", NULL},
        {"SELECT context(1, 0, 100000, 100000)", "\xc2\xabzero\xc2\xbb"},
        {"SELECT vec_at(x'0000803f', 9223372036854775807)", NULL},
        {"SELECT vec_at(x'0000803f', -9223372036854775808, 'f16')", NULL},
        {"SELECT tok_text(9223372036854775807)", NULL},
    };
    for (size_t i = 0; i < sizeof Q / sizeof Q[0]; i++) {
        sqlite3_stmt *st = NULL;
        int r = sqlite3_prepare_v2(db, Q[i].sql, -1, &st, NULL) == SQLITE_OK ? sqlite3_step(st) : -1;
        const char *t = r == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
        CHECK(r == SQLITE_ROW && (Q[i].want ? t && !strcmp(t, Q[i].want) : !t), "%s: rc %d, got '%s'",
              Q[i].sql, r, t ? t : "NULL");
        sqlite3_finalize(st);
    }
    /* a view 'tokens' calling context() was infinite recursion (SIGSEGV); now the schema cannot
     * call our functions, and called directly they refuse a view */
    CHECK(store_exec(s, "DROP TABLE tokens; CREATE VIEW tokens (sequence_id, position, token_id, text) "
                        "AS SELECT 1, 0, 1, context(1, 0)") == OK);
    rc = store_query_i64(s, "SELECT count(*) FROM tokens", &v);
    CHECK(rc == ERR_SQL && strstr(err_msg(), "unsafe use of context()"), "rc %d: %s", rc, err_msg());
    rc = store_query_i64(s, "SELECT context(1, 0) IS NULL", &v);
    CHECK(rc == ERR_SQL && strstr(err_msg(), "not saelite's tokens table: 'tokens' is a view"), "rc %d: %s",
          rc, err_msg());
    char why[200];
    CHECK(store_sqlfuncs_table_check(db, "tokens", store_sqlfuncs_tokens_cols, why, sizeof why) == -1);
    CHECK(store_sqlfuncs_table_check(db, "no_such", store_sqlfuncs_tokens_cols, why, sizeof why) == 1);
    CHECK(store_sqlfuncs_table_check(db, "HOOKS", (const char *const[]){"WIDTH", "integer", NULL}, why,
                                     sizeof why) == 0, "names and types compare without case: %s", why);
    store_close(s);
}

/* The vector functions when SQLite cannot allocate a BLOB argument: sqlite3_value_blob returns
 * NULL for a zeroblob it cannot expand, and vec_dot, vec_cos, vec_at and vec_slice read through
 * it (SIGSEGV; serve's console under its heap cap, an audit). Every allocation of each statement
 * fails once in turn (SQLite's go through mem_alloc once a store was opened): each attempt must
 * give the right answer or SQLITE_NOMEM. */
static void test_sqlfuncs_nomem(void)
{
    static const struct { const char *sql, *want; } Q[] = {
        {"SELECT vec_dot(zeroblob(4000), zeroblob(4000))", "0.0"},
        {"SELECT vec_cos(x'0000803f', zeroblob(4), 'f32')", NULL},
        {"SELECT vec_at(zeroblob(4000), 5, 'f16')", "0.0"},
        {"SELECT hex(vec_slice(zeroblob(4000), 5, 1, 'bf16'))", "00000000"},
        {"SELECT vec_norm(zeroblob(4000))", "0.0"},
        {"SELECT vec_len(zeroblob(4000))", "1000"},
    };
    for (size_t i = 0; i < sizeof Q / sizeof *Q; i++) {
        int nomem = 0, bad = 0, done = 0;
        for (long n = 1; n < 500 && !done && !bad; n++) {
            sqlite3 *db = NULL;
            int rc = sqlite3_open(":memory:", &db); /* before the failures: no OOM sweep of open */
            if (rc == SQLITE_OK) rc = store_sqlfuncs_register(db);
            CHECK(rc == SQLITE_OK, "open: %d", rc);
            sqlite3_stmt *st = NULL;
            mem_fail_at(n);
            rc = sqlite3_prepare_v2(db, Q[i].sql, -1, &st, NULL);
            if (rc == SQLITE_OK) rc = sqlite3_step(st);
            const char *t = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
            if (rc == SQLITE_ROW && (Q[i].want ? t && !strcmp(t, Q[i].want) : !t)) done = 1;
            else if ((rc & 0xff) == SQLITE_NOMEM || (rc == SQLITE_ROW && !t && sqlite3_errcode(db) == SQLITE_NOMEM))
                nomem++; /* the statement, or the test's own conversion of the result to text */
            else {
                bad = 1;
                fprintf(stderr, "%s, allocation %ld failing: rc %d (%s), '%s'\n", Q[i].sql, n, rc,
                        sqlite3_errmsg(db), t ? t : "NULL");
            }
            mem_fail_at(0);
            sqlite3_finalize(st);
            sqlite3_close(db);
        }
        CHECK(done && nomem > 0 && !bad, "%s: %d out-of-memory failures, completed %d, bad %d", Q[i].sql,
              nomem, done, bad);
    }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* serve's SQL console (store_srv_console) on an empty analysis database */
typedef struct { int rows, ncols, header; char names[128]; } con_acc;
static int con_row(void *u, int nc, const char *const *names, const store_val *v)
{
    (void)v;
    con_acc *a = u;
    if (!a->rows++) {
        a->ncols = nc;
        a->names[0] = 0;
        for (int c = 0; c < nc; c++)
            snprintf(a->names + strlen(a->names), sizeof a->names - strlen(a->names), "%s%s", c ? "," : "", names[c]);
    }
    return 0;
}
static int con_cols(void *u, int nc, const char *const *names)
{
    con_acc *a = u;
    a->header++;
    a->ncols = nc;
    a->names[0] = 0;
    for (int c = 0; c < nc; c++)
        snprintf(a->names + strlen(a->names), sizeof a->names - strlen(a->names), "%s%s", c ? "," : "", names[c]);
    return 0;
}

static store_srv *console_db(void)
{
    const char *p = tmp("console.db");
    store *s;
    store_remove(p);
    CHECK(store_open(&s, p, STORE_CREATE) == OK && store_ana_init(s) == OK, "%s", err_msg());
    store_close(s);
    store_srv *srv = NULL;
    CHECK(store_srv_open(&srv, p, 0, NULL) == OK, "store_srv_open: %s", err_msg());
    return srv;
}

static void test_console(void)
{
    store_srv *srv = console_db();
    if (!srv) return;
    con_acc a = {0};
    int trunc = -1;
    /* an empty result still has its column names */
    int rc = store_srv_console(srv, "select 1 as a, 2 as b where 0", 10, 2000, con_row, con_cols, &a, &trunc);
    CHECK(rc == OK && a.rows == 0 && a.header == 1 && a.ncols == 2 && !strcmp(a.names, "a,b") && !trunc,
          "empty result: rc %d (%s), %d rows, header %d, names '%s'", rc, err_msg(), a.rows, a.header, a.names);
    memset(&a, 0, sizeof a);
    rc = store_srv_console(srv, "select 1 as x", 10, 2000, con_row, con_cols, &a, &trunc);
    CHECK(rc == OK && a.rows == 1 && a.header == 0 && !strcmp(a.names, "x"), "one row: header %d, '%s'", a.header, a.names);
    /* a row cap reached, then the time limit: whether more rows exist is unknown, so the answer
       is the time-limit error (as one row fewer gets), not the rows as the whole result */
    static const char CUT[] = "with recursive r(x) as (select 1 union all select x+1 from r) select x "
                              "from r where x <= %d or x = 100000000000";
    char q[200];
    for (int k = 9; k <= 11; k++) {
        snprintf(q, sizeof q, CUT, k);
        memset(&a, 0, sizeof a);
        trunc = -1;
        rc = store_srv_console(srv, q, 10, 200, con_row, NULL, &a, &trunc);
        if (k < 11)
            CHECK(rc == ERR_ABORTED && strstr(err_msg(), "time limit") && !trunc,
                  "x <= %d: rc %d (%s), truncated %d, %d rows", k, rc, err_msg(), trunc, a.rows);
        else
            CHECK(rc == OK && trunc == 1 && a.rows == 10, "x <= 11: rc %d, truncated %d", rc, trunc);
    }
    /* trim with a character set is the console's own, linear one (SQLite's ran 171 s) */
    memset(&a, 0, sizeof a);
    double t0 = now_s();
    rc = store_srv_console(srv, "select length(trim(printf('%.*c',100000,'a'), printf('%.*c',100000,'b')||'a'))",
                           10, 1000, con_row, NULL, &a, &trunc);
    CHECK(rc == OK && a.rows == 1 && now_s() - t0 < 1.0, "console trim: rc %d (%s), %.2f s", rc, err_msg(), now_s() - t0);
    /* json_patch past 1e8 member pairs is refused at once (SQLite's: 1.8 s for 30000 x 30000) */
    t0 = now_s();
    rc = store_srv_console(srv, "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < 29999), "
                           "o(j) AS (SELECT json_group_object('k'||i, i) FROM n) SELECT json_patch(j, j) FROM o",
                           10, 1000, con_row, NULL, &a, &trunc);
    CHECK(rc == ERR_SQL && strstr(err_msg(), "json_patch(): up to 30000 x 30000") && now_s() - t0 < 1.0,
          "console json_patch: rc %d (%s), %.2f s", rc, err_msg(), now_s() - t0);
    memset(&a, 0, sizeof a);
    rc = store_srv_console(srv, "SELECT json_array(json_patch('{\"a\":1}', '{\"b\":2}'))", 10, 1000, con_row, NULL, &a, &trunc);
    CHECK(rc == OK && a.rows == 1, "console json_patch: rc %d (%s)", rc, err_msg());
    store_srv_close(srv);
}

/* serve's "fires on this token" query reads the tokens table only as the fallback of a database
 * without ana_vocab: with the vocabulary there it must not walk the token rows (it scanned all
 * of them on every request, linear in the corpus: 1.1 s per request at 10M tokens, an audit).
 * Counted with SQLite's full-scan step counter, so the test needs no large table. */
static int token_query(store *s, const char *sql, int64_t *fullscan, int *rows)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, sql, &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, 1);
    sqlite3_bind_text(st, 2, "tok", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, 50);
    sqlite3_bind_int64(st, 4, 0);
    int r;
    *rows = 0;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) ++*rows;
    *fullscan = sqlite3_stmt_status(st, SQLITE_STMTSTATUS_FULLSCAN_STEP, 0);
    sqlite3_finalize(st);
    return r == SQLITE_DONE ? OK : store_sql_error(s, r, "token query");
}

/* The feature page's context rows (STORE_SRV_ACTS for dictionary 1, feature 0, 1 token either
 * side) as text, one row per line. */
static int rows_text(store *s, const char *sql, char *out, size_t cap)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, sql, &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, 1);
    sqlite3_bind_int64(st, 2, 0);
    sqlite3_bind_int64(st, 3, 1);
    sqlite3_bind_int64(st, 4, 1);
    size_t len = 0;
    int r;
    out[0] = 0;
    while ((r = sqlite3_step(st)) == SQLITE_ROW && len + 64 < cap)
        len += (size_t)snprintf(out + len, cap - len, "%s %s %s %s %s %s;",
                                (const char *)sqlite3_column_text(st, 0),
                                (const char *)sqlite3_column_text(st, 2),
                                (const char *)sqlite3_column_text(st, 3),
                                (const char *)sqlite3_column_text(st, 4),
                                (const char *)sqlite3_column_text(st, 6),
                                (const char *)sqlite3_column_text(st, 7));
    sqlite3_finalize(st);
    return r == SQLITE_DONE || r == SQLITE_ROW ? OK : store_sql_error(s, r, "feature page rows");
}

/* 1 when the plan of sql names an index with this text in its detail */
static int plan_has(store *s, const char *sql, const char *what)
{
    char q[4096];
    snprintf(q, sizeof q, "EXPLAIN QUERY PLAN %s", sql);
    sqlite3_stmt *st;
    if (store_prepare(s, q, &st)) return 0;
    int found = 0;
    while (sqlite3_step(st) == SQLITE_ROW)
        found |= strstr((const char *)sqlite3_column_text(st, 3), what) != NULL;
    sqlite3_finalize(st);
    return found;
}

/* With analyze --all-acts every non-zero of a feature is an ana_acts row beside its top and
 * quantile examples: the lookups of one kind and the token query must not walk them (serve's
 * index build ran past its 30 s limit and /api/token took 28 s on the demo's 2.5M rows). */
static void test_serve_queries_scale(void)
{
    const char *p = tmp("tokq.db");
    store *s;
    int64_t hid, ntok = 0;
    store_remove(p);
    CHECK(store_open(&s, p, STORE_CREATE) == OK && fill(s, "h", STORE_F32, 200, &hid) == OK &&
          store_ana_init(s) == OK, "%s", err_msg());
    /* one feature fired on token id 201 (" tok" in fill's sequences), and 3000 'all' rows */
    int rc = store_exec(s, "INSERT INTO ana_dicts (id, kind, name, hook_name, d_in, d_sae, split, "
                           "n_seqs, n_tokens, top_n) VALUES (1, 'sae', 'x', 'h', 12, 4, 'val', 1, 1, 1);"
                           "INSERT INTO ana_features (dict_id, feature, n_active, density) VALUES (1, 0, 1, 0.5);"
                           "INSERT INTO ana_acts (dict_id, feature, kind, rank, seq_id, pos, token, value) "
                           "VALUES (1, 0, 'top', 0, 1, 1, 201, 2.5);"
                           "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 2999) "
                           "INSERT INTO ana_acts (dict_id, feature, kind, seq_id, pos, token, value) "
                           "SELECT 1, 0, 'all', 2 + i / 8, i % 8, 7, 1.0 FROM n");
    if (!rc) rc = store_query_i64(s, "SELECT count(*) FROM tokens", &ntok);
    CHECK(rc == OK && ntok > 1000, "token query fixture: %s (%lld token rows)", err_msg(), (long long)ntok);
    store_srv *srv = NULL;
    CHECK(store_srv_open(&srv, p, 0, NULL) == OK, "store_srv_open: %s", err_msg());
    if (!srv || rc) {
        store_srv_close(srv);
        store_close(s);
        return;
    }
    const char *sql = store_srv_sql(srv, STORE_SRV_TOKEN);
    int64_t scan = -1;
    int rows = -1;
    /* no vocabulary: the tokens table is the lookup, and finds the feature */
    rc = token_query(s, sql, &scan, &rows);
    CHECK(rc == OK && rows == 1 && scan >= ntok / 2, "without ana_vocab: rc %d (%s), %d rows, %lld "
          "full-scan steps", rc, err_msg(), rows, (long long)scan);
    rc = store_exec(s, "INSERT INTO ana_vocab (token, text) VALUES (201, CAST(' tok' AS BLOB))");
    if (!rc) rc = token_query(s, sql, &scan, &rows);
    CHECK(rc == OK && rows == 1 && scan < ntok / 2, "with ana_vocab: rc %d (%s), %d rows, %lld full-scan "
          "steps over %lld token rows (the tokens table was scanned)", rc, err_msg(), rows,
          (long long)scan, (long long)ntok);
    CHECK(plan_has(s, sql, "ana_acts_token"), "the token query does not look its tokens up through "
          "ana_acts_token (it walks the dictionary's rows)");
    /* the top examples of a feature: straight to them, not through its 'all' rows */
    static const char TOP[] = "SELECT seq_id, pos FROM ana_acts WHERE dict_id = 1 AND feature = 0 "
                              "AND kind = 'top' ORDER BY rank LIMIT 4";
    CHECK(plan_has(s, TOP, "ana_acts_kind (dict_id=? AND feature=? AND kind=?)"),
          "the top examples are not read through ana_acts_kind");
    /* a damaged table: two quantile rows share a band and a rank at different places. The
       feature page's context rows must come out in one order whichever index the plan takes
       (they interleaved, and the examples split differently, an audit) */
    char with_idx[4096], without_idx[4096];
    rc = store_exec(s, "INSERT INTO ana_acts (dict_id, feature, kind, interval, rank, seq_id, pos, "
                       "token, value) VALUES (1, 0, 'quantile', 0, 0, 3, 2, 7, 0.4), "
                       "(1, 0, 'quantile', 0, 0, 2, 4, 7, 0.6)");
    const char *acts = store_srv_sql(srv, STORE_SRV_ACTS);
    if (!rc) rc = rows_text(s, acts, with_idx, sizeof with_idx);
    int used = plan_has(s, acts, "ana_acts_kind");
    store_srv_close(srv);
    if (!rc) rc = store_exec(s, "DROP INDEX ana_acts_kind");
    if (!rc) rc = rows_text(s, acts, without_idx, sizeof without_idx);
    CHECK(rc == OK && used && !strcmp(with_idx, without_idx) && strlen(with_idx) > 100,
          "feature page rows with the partial index%s and without it differ (%s):\n%s\n%s",
          used ? "" : " (not used)", err_msg(), with_idx, without_idx);
    /* a database analysed before the index gets it from the next analysis */
    int64_t has = -1;
    if (!rc) rc = store_ana_init(s);
    if (!rc) rc = store_query_i64(s, "SELECT count(*) FROM sqlite_master WHERE name = 'ana_acts_kind'", &has);
    CHECK(rc == OK && has == 1, "store_ana_init on an older analysis: rc %d (%s), index %lld", rc,
          err_msg(), (long long)has);
    store_close(s);
}

/* An analysis replaced by the next one of the same name: its ana_acts rows go; where they are
 * most of the table (a re-run --all-acts analysis) the indexes are dropped and made again around
 * the delete, which must leave the same indexes (a user's own too), every other dictionary's
 * rows, and, rolled back, everything as it was. */
static int64_t acts_digest(store *s, const char *where, int64_t *n)
{
    char sql[256];
    int64_t v = 0;
    snprintf(sql, sizeof sql, "SELECT count(*) FROM ana_acts WHERE %s", where);
    if (store_query_i64(s, sql, n)) return -1;
    snprintf(sql, sizeof sql, "SELECT total(feature * 7 + seq_id * 13 + pos * 17 + token + "
                              "ifnull(rank, 5) * 3 + (kind = 'top') * 11) FROM ana_acts WHERE %s", where);
    return store_query_i64(s, sql, &v) ? -1 : v;
}

static void index_sql(store *s, char *out, size_t cap)
{
    sqlite3_stmt *st;
    size_t len = 0;
    out[0] = 0;
    if (store_prepare(s, "SELECT name || ':' || sql FROM sqlite_master WHERE type = 'index' AND "
                         "tbl_name = 'ana_acts' AND sql IS NOT NULL ORDER BY name", &st))
        return;
    while (sqlite3_step(st) == SQLITE_ROW && len + 2 < cap)
        len += (size_t)snprintf(out + len, cap - len, "%s;", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

/* Dictionary 1 ('a' at hook h, split val) with n 'all' rows of 64 features over 5000 tokens. */
static int acts_fixture(store *s, int n)
{
    char sql[640];
    snprintf(sql, sizeof sql,
             "INSERT INTO ana_dicts (id, kind, name, hook_name, d_in, d_sae, split, n_seqs, n_tokens, "
             "top_n) VALUES (1, 'sae', 'a', 'h', 8, 64, 'val', 10, 10, 4);"
             "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < %d) "
             "INSERT INTO ana_acts (dict_id, feature, kind, seq_id, pos, token, value) "
             "SELECT 1, i %% 64, 'all', i / 128, i %% 128, (i * 7919) %% 5000, (i %% 97) * 0.25 FROM n",
             n - 1);
    return store_exec(s, sql);
}

/* A new database at p with the analysis tables (*s NULL on failure). */
static int new_ana_store(const char *p, store **s)
{
    store_remove(p);
    int rc = store_open(s, p, STORE_CREATE);
    if (!rc && (rc = store_ana_init(*s))) {
        store_close(*s);
        *s = NULL;
    }
    return rc;
}

/* analyze --all-acts prints its size before writing (STORE_ANA_ALL_ROW_BYTES a row): the rows
 * in analyze's order (sequence, position, then 32 of 4096 features each) must take about that
 * much, indexes included (the notice said 40 a row, the table alone; the demo wrote 86, an audit) */
static void test_ana_all_row_bytes(void)
{
    const char *p = tmp("anasize.db");
    store *s;
    int rc = new_ana_store(p, &s);
    store_ana_writer *w = NULL;
    store_ana_dict d = {.kind = "sae", .sae_id = -1, .name = "a", .hook_name = "h", .split = "all",
                        .d_in = 512, .d_sae = 4096, .top_n = 20, .n_seqs = 25, .n_tokens = 3175};
    int64_t id = -1, pages0 = 0, pages1 = 0, psize = 0, nrows = 0;
    if (!rc) rc = store_query_i64(s, "PRAGMA page_size", &psize);
    if (!rc) rc = store_query_i64(s, "PRAGMA page_count", &pages0);
    if (!rc) rc = store_begin(s);
    if (!rc) rc = store_ana_writer_open(&w, s);
    if (!rc) rc = store_ana_dict_begin(w, &d, &id, NULL);
    uint64_t x = 12345;
    for (int q = 0; q < 25 && !rc; q++)
        for (int t = 1; t < 128 && !rc; t++)
            for (int k = 0; k < 32 && !rc; k++, nrows++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                int feature = (int)(x >> 52), token = (int)((x >> 20) % 5000);
                float v = (float)((x >> 11) & 0xfffff) / 65536.0f + 1e-3f;
                rc = store_ana_act(w, id, feature, "all", -1, -1, 1000 + q, t, token, v);
            }
    store_ana_writer_close(w);
    if (!rc) rc = store_commit(s);
    if (!rc) rc = store_query_i64(s, "PRAGMA page_count", &pages1);
    double per_row = nrows ? (double)(pages1 - pages0) * (double)psize / (double)nrows : 0;
    CHECK(rc == OK && per_row > 0.75 * STORE_ANA_ALL_ROW_BYTES && per_row < 1.33 * STORE_ANA_ALL_ROW_BYTES,
          "--all-acts rows take %.1f bytes each, the notice says %d (%s)", per_row,
          STORE_ANA_ALL_ROW_BYTES, rc ? err_msg() : "ok");
    store_close(s);
    store_remove(p);
}

/* report's "the most recent analysis" of 'a', made on val, then all:
 * - NEWEST_AGAIN: a minute apart, then val again now. The replaced analysis keeps its id
 *   (store_ana_dict_begin), which is then smaller than the older 'all' one's, and report took
 *   that older one by its larger id (a review);
 * - NEWEST_SAME_SECOND: val, all, val again within one second (a small database's analyze takes
 *   less). To the second they tied and the id gave 'all'. Started early in a second, so that
 *   they share one;
 * - NEWEST_MIXED: an older saelite's 'all' ("...:05Z", to the second) beside a val made in that
 *   second ("...:05.300Z"): as strings 'Z' > '.' and the older one read as the newest. */
enum { NEWEST_AGAIN, NEWEST_SAME_SECOND, NEWEST_MIXED };
static void test_ana_newest(int mode)
{
    const char *p = tmp("ananew.db");
    store *s;
    int rc = new_ana_store(p, &s);
    store_ana_writer *w = NULL;
    store_ana_dict d = {.kind = "sae", .sae_id = -1, .name = "a", .hook_name = "h", .split = "val",
                        .d_in = 8, .d_sae = 64, .top_n = 4, .n_seqs = 10, .n_tokens = 10};
    int64_t val = -1, all = -1, again = -1;
    const struct timespec ms5 = {0, 5000000};
    struct timespec now;
    if (mode == NEWEST_SAME_SECOND)
        while (clock_gettime(CLOCK_REALTIME, &now) == 0 && now.tv_nsec > 300000000) nanosleep(&ms5, NULL);
    if (!rc) rc = store_ana_writer_open(&w, s);
    if (!rc) rc = store_ana_dict_begin(w, &d, &val, NULL);
    if (mode == NEWEST_SAME_SECOND) nanosleep(&ms5, NULL);
    d.split = "all";
    if (!rc) rc = store_ana_dict_begin(w, &d, &all, NULL);
    if (mode == NEWEST_SAME_SECOND) nanosleep(&ms5, NULL);
    if (!rc && mode != NEWEST_SAME_SECOND)
        rc = store_exec(s, mode == NEWEST_AGAIN
                               ? "UPDATE ana_dicts SET created_at = CASE split WHEN 'val' THEN "
                                 "'2026-01-01T00:00:00Z' ELSE '2026-01-01T00:01:00Z' END"
                               : "UPDATE ana_dicts SET created_at = CASE split WHEN 'val' THEN "
                                 "'2026-01-01T00:00:05.300Z' ELSE '2026-01-01T00:00:05Z' END");
    d.split = "val";
    d.n_seqs = 5;
    if (!rc && mode != NEWEST_MIXED) rc = store_ana_dict_begin(w, &d, &again, NULL);
    store_ana_writer_close(w);
    store_rep_dict out = {0};
    if (!rc) rc = store_rep_dict_find(s, "a", NULL, NULL, NULL, &out);
    int64_t want = mode == NEWEST_MIXED ? val : again;
    CHECK(rc == OK && (mode == NEWEST_MIXED || again == val) && all > val && out.id == want &&
              !strcmp(out.split, "val") && (mode != NEWEST_AGAIN || out.n_seqs == 5),
          "mode %d, the most recent analysis of 'a': rc %d (%s), dictionary %lld (%s, %lld "
          "sequences); val: %lld, made again: %lld, the older one of split all: %lld", mode, rc,
          rc ? err_msg() : "ok", (long long)out.id, out.split, (long long)out.n_seqs,
          (long long)val, (long long)again, (long long)all);
    store_close(s);
    store_remove(p);
}

/* mode 0: saelite's own indexes; 1: a user's index beside them; 2: outside a transaction (the
 * rebuild is refused there: a kill between DROP INDEX and CREATE INDEX kept no index) */
static void test_ana_replace_rebuild(int mode)
{
    const int users_index = mode == 1, notx = mode == 2;
    const char *p = tmp("anarep.db");
    store *s;
    int rebuilds0 = store_ana_acts_rebuilds();
    store_remove(p);
    CHECK(store_open(&s, p, STORE_CREATE) == OK && store_ana_init(s) == OK, "%s", err_msg());
    /* dictionary 1: 150k 'all' rows and some top ones; dictionary 2 (another name): 2000 rows */
    int rc = acts_fixture(s, 150000);
    if (!rc) rc = store_exec(s,
        "INSERT INTO ana_dicts (id, kind, name, hook_name, d_in, d_sae, split, n_seqs, n_tokens, "
        "top_n) VALUES (2, 'sae', 'b', 'h', 8, 64, 'val', 10, 10, 4);"
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 255) "
        "INSERT INTO ana_acts (dict_id, feature, kind, rank, seq_id, pos, token, value) "
        "SELECT 1, i / 4, 'top', i % 4, i, 1, i % 50, 3.0 - i * 0.01 FROM n;"
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 1999) "
        "INSERT INTO ana_acts (dict_id, feature, kind, rank, seq_id, pos, token, value) "
        "SELECT 2, i % 64, CASE WHEN i % 3 THEN 'all' ELSE 'top' END, CASE WHEN i % 3 THEN NULL "
        "ELSE i / 3 END, 1000 + i, i % 128, i % 300, i * 0.5 FROM n;");
    if (!rc && users_index) rc = store_exec(s, "CREATE INDEX users_own ON ana_acts(value) WHERE kind = 'top'");
    char before[2048], after[2048];
    index_sql(s, before, sizeof before);
    int64_t n1 = 0, n2 = 0, n2b = 0, d2 = acts_digest(s, "dict_id = 2", &n2);
    acts_digest(s, "dict_id = 1", &n1);
    CHECK(rc == OK && n1 == 150256 && n2 == 2000 && !strstr(before, "users_own") == !users_index &&
          strstr(before, "ana_acts_kind"), "fixture: %s (%lld + %lld rows; %s)", err_msg(),
          (long long)n1, (long long)n2, before);
    store_ana_dict d = {.kind = "sae", .sae_id = -1, .name = "a", .hook_name = "h", .split = "val",
                        .d_in = 8, .d_sae = 64, .top_n = 4, .n_seqs = 10, .n_tokens = 10};
    for (int commit = notx; !rc && commit < 2; commit++) {
        store_ana_writer *w = NULL;
        int64_t id = -1, replaced = -2, n1b = -1;
        rc = notx ? OK : store_begin(s);
        if (!rc) rc = store_ana_writer_open(&w, s);
        if (!rc) rc = store_ana_dict_begin(w, &d, &id, &replaced);
        store_ana_writer_close(w);
        int64_t d2b = acts_digest(s, "dict_id = 2", &n2b);
        acts_digest(s, "dict_id <> 2", &n1b);
        index_sql(s, after, sizeof after);
        CHECK(rc == OK && replaced == 10 && id == 1 && n1b == 0 && n2b == n2 && d2b == d2 &&
              !strcmp(before, after), "replace (%s): rc %d (%s), id %lld (the replaced one's, 1), replaced %lld, %lld rows "
              "left of dictionary 1, dictionary 2 %lld rows (digest %s); indexes %s (before: %s)",
              commit ? "commit" : "rollback", rc, err_msg(), (long long)id, (long long)replaced, (long long)n1b,
              (long long)n2b, d2b == d2 ? "kept" : "changed", after, before);
        CHECK(plan_has(s, "SELECT count(*) FROM ana_acts WHERE token = 5 AND dict_id = 2",
                       "ana_acts_token"), "the token index is not used after the rebuild");
        if (commit) rc = notx ? OK : store_commit(s);
        else {
            rc = store_rollback(s);
            int64_t m = 0, dg = acts_digest(s, "dict_id = 1", &m);
            (void)dg;
            index_sql(s, after, sizeof after);
            CHECK(rc == OK && m == n1 && !strcmp(before, after), "rolled back: %lld rows of "
                  "dictionary 1 (had %lld), indexes %s", (long long)m, (long long)n1, after);
        }
    }
    CHECK(rc == OK && store_check(s) == OK, "after the commit: %s", err_msg());
    /* the indexes are remade only where they are all saelite's own (twice: rolled back, then
       committed); a user's index keeps the row-by-row delete */
    CHECK(store_ana_acts_rebuilds() - rebuilds0 == (users_index || notx ? 0 : 2),
          "%d index rebuilds with%s a user's index%s", store_ana_acts_rebuilds() - rebuilds0,
          users_index ? "" : "out", notx ? ", outside a transaction" : "");
    store_close(s);
}

/* The rebuild above runs recorded index SQL, and the file is input: a crafted sqlite_schema row
 * of one of saelite's own indexes with a second statement after its CREATE INDEX must not run it
 * (the rebuild is refused, the rows still go), and the ANALYZE statistics of the remade indexes
 * stay as a row-by-row delete leaves them. */
static void test_ana_replace_hostile(int crafted)
{
    const char *p = tmp("anahost.db");
    store *s;
    int rebuilds0 = store_ana_acts_rebuilds();
    store_remove(p);
    CHECK(store_open(&s, p, STORE_CREATE) == OK && store_ana_init(s) == OK, "%s", err_msg());
    int rc = acts_fixture(s, 120000);
    if (!rc) rc = store_exec(s, "ANALYZE");
    store_close(s);
    CHECK(rc == OK, "fixture: %s", err_msg());
    if (crafted) {
        sqlite3 *db;
        char *em = NULL;
        CHECK(sqlite3_open(p, &db) == SQLITE_OK &&
              sqlite3_exec(db, "PRAGMA writable_schema = 1; UPDATE sqlite_schema SET sql = 'CREATE "
                               "INDEX ana_acts_token ON ana_acts(token, dict_id); CREATE TABLE pwned(a)' "
                               "WHERE name = 'ana_acts_token'", NULL, NULL, &em) == SQLITE_OK,
              "crafting: %s", em ? em : "");
        sqlite3_free(em);
        sqlite3_close(db);
    }
    int64_t stats0 = -1, stats1 = -1, pwned = -1, left = -1;
    CHECK(store_open(&s, p, 0) == OK, "%s", err_msg());
    store_query_i64(s, "SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'ana_acts'", &stats0);
    store_ana_dict d = {.kind = "sae", .sae_id = -1, .name = "a", .hook_name = "h", .split = "val",
                        .d_in = 8, .d_sae = 64, .top_n = 4, .n_seqs = 10, .n_tokens = 10};
    store_ana_writer *w = NULL;
    int64_t id = -1;
    rc = store_begin(s);
    if (!rc) rc = store_ana_writer_open(&w, s);
    if (!rc) rc = store_ana_dict_begin(w, &d, &id, NULL);
    store_ana_writer_close(w);
    if (!rc) rc = store_commit(s);
    store_query_i64(s, "SELECT count(*) FROM sqlite_schema WHERE name = 'pwned'", &pwned);
    store_query_i64(s, "SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'ana_acts'", &stats1);
    store_query_i64(s, "SELECT count(*) FROM ana_acts", &left);
    int rebuilt = store_ana_acts_rebuilds() - rebuilds0;
    CHECK(rc == OK && pwned == 0 && left == 0 && rebuilt == !crafted, "%s: rc %d (%s), pwned %lld, "
          "%lld rows left, %d rebuilds", crafted ? "a crafted index row" : "saelite's own indexes",
          rc, err_msg(), (long long)pwned, (long long)left, rebuilt);
    CHECK(stats0 >= 3 && stats1 == stats0, "sqlite_stat1 rows of ana_acts: %lld before, %lld after",
          (long long)stats0, (long long)stats1);
    store_close(s);
}

/* Every allocation (ours and SQLite's, routed through mem_alloc) fails once in turn: each
 * attempt must fail cleanly or succeed, and the database afterwards holds all or nothing. */
static void test_oom(void)
{
    const char *p = tmp("oom.db");
    int completed = 0, failures = 0, bad = 0;
    long n;
    for (n = 1; n < 20000 && !completed; n += (n < 200 ? 1 : 9)) {
        store_remove(p);
        mem_fail_at(n);
        store *s = NULL;
        int64_t hid;
        int rc = store_open(&s, p, STORE_CREATE);
        if (!rc) rc = fill(s, "h", STORE_BF16, 3, &hid);
        float x[T * W];
        int got;
        if (!rc) rc = store_act_read(s, hid, 2, x, &got);
        store_close(s);
        long used = mem_alloc_count();
        mem_fail_at(0);
        if (rc == OK) {
            if (used < n) completed = 1;
        } else {
            failures++;
            if (rc != ERR_NOMEM && rc != ERR_SQL && rc != ERR_IO) {
                bad++;
                fprintf(stderr, "oom at %ld: unexpected rc %d: %s\n", n, rc, err_msg());
            }
        }
        /* Whatever happened, the file opens, is intact and holds all rows or none. */
        if (access(p, F_OK) == 0 && store_open(&s, p, 0) == OK) {
            int64_t acts = -1;
            if (store_check(s) != OK ||
                store_query_i64(s, "SELECT count(*) FROM activations", &acts) != OK ||
                (acts != 0 && acts != 6)) {
                bad++;
                fprintf(stderr, "oom at %ld: damaged or partial database (%lld rows): %s\n", n,
                        (long long)acts, err_msg());
            }
            store_close(s);
        }
    }
    fprintf(stderr, "oom sweep: %d failures, completed at %ld\n", failures, n);
    CHECK(completed && failures > 50 && bad == 0, "OOM sweep: %d failures, %d bad, completed %d at %ld",
          failures, bad, completed, n);
}

/* Extraction bookkeeping that needs no model. */
static void test_extract_plan(void)
{
    int64_t st[8];
    int len[8];
    CHECK(ext_windows(10, 4, 0, st, len, 8) == 3 && st[2] == 8 && len[0] == 4 && len[2] == 2);
    CHECK(ext_windows(10, 4, 1, st, len, 8) == 4 && st[1] == 3 && len[0] == 4 && len[3] == 2,
          "bos windows hold ctx-1 document tokens");
    CHECK(ext_windows(0, 4, 1, st, len, 8) == 0 && ext_windows(5, 1, 1, NULL, NULL, 0) == 0);
    CHECK(ext_windows(12, 4, 0, NULL, NULL, 0) == 3, "exact multiple, counting only");
    char out[64];
    size_t n = utf8_clean("a\xff\xc3\xa9\xe2\x82", 6, out, sizeof out);
    CHECK(n == 12 && !strcmp(out, "a\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd"), "clean: %s", out);
}

/* store_set_bulk while another handle reads the file (a user polling with sqlite3 during an
 * extract): the writer stays in WAL and keeps working instead of failing with "locked". */
static void test_bulk_shared(void)
{
    const char *p = tmp("bulk.db");
    store_remove(p);
    store *a = NULL, *b = NULL;
    CHECK(store_open(&a, p, STORE_CREATE) == OK, "%s", err_msg());
    CHECK(store_open(&b, p, STORE_READONLY) == OK, "%s", err_msg());
    if (!a || !b) goto out;
    sqlite3_stmt *st = NULL;
    /* an open read transaction on b, as a running SELECT has */
    CHECK(sqlite3_exec(store_db(b), "BEGIN", NULL, NULL, NULL) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(store_db(b), "SELECT count(*) FROM runs", -1, &st, NULL) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK(store_set_bulk(a) == OK, "%s", err_msg());
    char mode[16] = "";
    sqlite3_stmt *jm = NULL;
    if (sqlite3_prepare_v2(store_db(a), "PRAGMA journal_mode", -1, &jm, NULL) == SQLITE_OK &&
        sqlite3_step(jm) == SQLITE_ROW)
        snprintf(mode, sizeof mode, "%s", (const char *)sqlite3_column_text(jm, 0));
    sqlite3_finalize(jm);
    CHECK(!strcmp(mode, "wal"), "stays in WAL while another handle reads: %s", mode);
    int64_t hook;
    CHECK(fill(a, "blocks.0.hook_resid_pre", STORE_F32, 2, &hook) == OK, "%s", err_msg());
    sqlite3_finalize(st);
    sqlite3_exec(store_db(b), "COMMIT", NULL, NULL, NULL);
    int64_t n = 0;
    CHECK(store_count_rows(b, "activations", &n) == OK && n == 4, "n %lld: %s", (long long)n,
          err_msg());
out:
    store_close(b);
    store_close(a);
}

/* A bulk writer (alone on the file, so in rollback-journal mode) writes its rows inside
 * transactions: a row outside one is refused, not written as a transaction of its own (extract
 * once wrote every activation row after a commit that way: 1,100 transactions on the demo). */
static void test_bulk_tx(void)
{
    store *s = fresh_store(tmp("bulktx.db"));
    if (!s) return;
    CHECK(store_set_bulk(s) == OK, "%s", err_msg());
    int64_t hook = 0, seq = 0, n = -1;
    CHECK(fill(s, "blocks.0.hook_resid_pre", STORE_BF16, 1, &hook) == OK, "%s", err_msg());
    int ids[T];
    const char *tx[T];
    float x[T * W];
    for (int t = 0; t < T; t++) {
        ids[t] = t;
        tx[t] = "a";
    }
    for (int i = 0; i < T * W; i++) x[i] = 0.25f * (float)(i % 7);
    CHECK(store_seq_add(s, 1, 7 * T, 0, ids, T, &seq, NULL) == ERR_ARG &&
          strstr(err_msg(), "outside a transaction"), "sequence outside a transaction: %s",
          err_msg());
    CHECK(store_begin(s) == OK, "%s", err_msg());
    CHECK(store_seq_add(s, 1, 7 * T, 0, ids, T, &seq, NULL) == OK, "%s", err_msg());
    CHECK(store_tokens_add(s, seq, T, ids, tx, NULL, NULL, NULL) == OK, "%s", err_msg());
    CHECK(store_act_write(s, hook, seq, x, T) == OK, "%s", err_msg());
    CHECK(store_commit(s) == OK, "%s", err_msg());
    CHECK(store_act_write(s, hook, seq, x, T) == ERR_ARG &&
          strstr(err_msg(), "writing activations outside a transaction"), "%s", err_msg());
    CHECK(store_tokens_add(s, seq, T, ids, tx, NULL, NULL, NULL) == ERR_ARG, "%s", err_msg());
    CHECK(store_count_rows(s, "activations", &n) == OK && n == 3, "rows %lld", (long long)n);
    store_close(s);
}

/* Token rows of a long window: the rows go in 32 to a statement with single rows after them, so
 * every column of every row, NULLs included, must read back where it was put. */
static void test_tokens_long(void)
{
    store *s = fresh_store(tmp("toklong.db"));
    if (!s) return;
    enum { L = 77 };
    int ids[L];
    const char *tx[L], *tg[L];
    char txt[L][16];
    int64_t bs[L], be[L], doc = 0, seq = 0;
    for (int i = 0; i < L; i++) {
        ids[i] = 1000 + 3 * i;
        snprintf(txt[i], sizeof txt[i], "t%d", i);
        tx[i] = i % 5 == 4 ? NULL : txt[i];
        tg[i] = i % 3 ? "nn" : NULL;
        bs[i] = i % 7 == 6 ? -1 : 10 * i;
        be[i] = 10 * i + 9;
    }
    CHECK(store_begin(s) == OK, "%s", err_msg());
    CHECK(store_doc_add(s, "c.txt", 0, "d", NULL, "x", 1, &doc) == OK, "%s", err_msg());
    CHECK(store_seq_add(s, doc, 0, 0, ids, L, &seq, NULL) == OK, "%s", err_msg());
    CHECK(store_tokens_add(s, seq, L, ids, tx, bs, be, tg) == OK, "%s", err_msg());
    CHECK(store_commit(s) == OK, "%s", err_msg());
    sqlite3_stmt *st = NULL;
    CHECK(sqlite3_prepare_v2(store_db(s), "SELECT position, token_id, text, byte_start, byte_end, "
                             "pos_tag FROM tokens WHERE sequence_id = ?1 ORDER BY position", -1,
                             &st, NULL) == SQLITE_OK);
    sqlite3_bind_int64(st, 1, seq);
    int n = 0, bad = 0;
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        int i = sqlite3_column_int(st, 0);
        const char *t = (const char *)sqlite3_column_text(st, 2), *g = (const char *)sqlite3_column_text(st, 5);
        bad += i != n || sqlite3_column_int(st, 1) != ids[i] || (tx[i] ? !t || strcmp(t, tx[i]) : t != NULL) ||
               (bs[i] < 0 ? sqlite3_column_type(st, 3) != SQLITE_NULL : sqlite3_column_int64(st, 3) != bs[i]) ||
               sqlite3_column_int64(st, 4) != be[i] || (tg[i] ? !g || strcmp(g, tg[i]) : g != NULL);
        n++;
    }
    sqlite3_finalize(st);
    CHECK(n == L && bad == 0, "%d rows read back, %d differ", n, bad);
    store_close(s);
}

/* store_ana_seq_tags' cont: a word's BPE pieces after its first (eval's tense counts words) */
static void test_seq_tags_words(void)
{
    store *s = fresh_store(tmp("tagwords.db"));
    if (!s) return;
    enum { L = 9 };
    int ids[L] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const char *tx[L] = {"The", " jury", " jo", "ined", ",", " said", " said", "ed", "x"};
    const char *tg[L] = {"at", "nn", "vbd", "vbd", ",", "vbd", "vbd", "nn", "nn"};
    int64_t bs[L] = {0, 3, 8, 11, 15, 16, 21, 26, -1}, be[L] = {3, 8, 11, 15, 16, 21, 26, 28, 29};
    int64_t doc = 0, seq = 0;
    CHECK(store_begin(s) == OK && store_doc_add(s, "c.txt", 0, "d", NULL, "x", 1, &doc) == OK &&
          store_seq_add(s, doc, 0, 0, ids, L, &seq, NULL) == OK &&
          store_tokens_add(s, seq, L, ids, tx, bs, be, tg) == OK && store_commit(s) == OK, "%s", err_msg());
    char tags[L][16];
    unsigned char cont[L];
    int any = 0;
    CHECK(store_ana_seq_tags(s, seq, L, tags, &any, cont) == OK && any, "%s", err_msg());
    static const unsigned char want[L] = {0, 0, 0, 1, 0, 0, 0, 0, 0};
    CHECK(!memcmp(cont, want, L) && !strcmp(tags[3], "vbd"), "cont %d%d%d%d%d%d%d%d%d", cont[0], cont[1],
          cont[2], cont[3], cont[4], cont[5], cont[6], cont[7], cont[8]);
    store_close(s);
}

/* The SAE registry and its training log: written by sae-train --db, read back by the report. */
static void test_sae_log(void)
{
    const char *p = tmp("sae.db");
    store_remove(p);
    store *s;
    CHECK(store_open(&s, p, STORE_CREATE) == OK, "%s", err_msg());
    int64_t sid = -1;
    store_sae_log_row *rows = NULL;
    size_t n = 9;
    CHECK(store_sae_log_find(s, -1, "x", &sid, &rows, &n) == ERR_NOTFOUND && !rows && n == 0,
          "no SAE tables yet");
    CHECK(store_sae_init(s) == OK, "%s", err_msg());
    store_sae_row r = {.dir = "runs/a", .architecture = "topk", .d_in = 4, .d_sae = 8, .hook_id = -1};
    store_sae_log_row lg[3] = {{10, 100, 0.5, 0.1, 3, 0, 1e-3, 1}, {20, 200, 0.25, NAN, 2, 0.5, 1e-3, 1},
                               {5, 50, 1, 0, 4, 0, 1e-3, 1}};
    int64_t a = -1, b = -1;
    CHECK(store_sae_register(s, &r, &a) == OK && store_sae_log(s, a, lg, 3) == OK, "%s", err_msg());
    r.dir = "runs/b";
    CHECK(store_sae_register(s, &r, &b) == OK && store_sae_log(s, b, lg, 1) == OK, "%s", err_msg());
    CHECK(store_sae_log_find(s, -1, "runs/a/", &sid, &rows, &n) == OK, "%s", err_msg());
    CHECK(sid == a && n == 3 && rows[0].step == 5 && rows[2].tokens == 200 && isnan(rows[2].ev) &&
          rows[1].mse == 0.5, "by directory, in step order, NULL as NaN");
    mem_free(rows);
    CHECK(store_sae_log_find(s, b, NULL, &sid, &rows, &n) == OK && sid == b && n == 1, "%s", err_msg());
    mem_free(rows);
    CHECK(store_sae_log_find(s, -1, "runs/c", &sid, &rows, &n) == ERR_NOTFOUND &&
          strstr(err_msg(), "runs/c"), "%s", err_msg());
    CHECK(store_sae_log_find(s, 99, NULL, &sid, &rows, &n) == ERR_NOTFOUND);
    /* registering the directory again replaces its log, and its eval rows go (they are the
       replaced SAE's: they stayed under an id no registry row names, an audit); runs/b's stay */
    int64_t ra = -1, rb = -1, left = -1;
    CHECK(store_eval_init(s) == OK && store_eval_run_begin(s, a, "scr", "h", "{}", 4, &ra) == OK &&
          store_eval_metric(s, ra, "m", 0.5) == OK && store_eval_run_begin(s, b, "scr", "h", "{}", 4, &rb) == OK &&
          store_eval_metric(s, rb, "m", 0.25) == OK, "%s", err_msg());
    r.dir = "runs/a";
    CHECK(store_sae_register(s, &r, &a) == OK && store_sae_log(s, a, lg + 2, 1) == OK, "%s", err_msg());
    CHECK(store_sae_log_find(s, -1, "runs/a", &sid, &rows, &n) == OK && sid == a && n == 1, "%s", err_msg());
    mem_free(rows);
    CHECK(store_query_i64(s, "SELECT count(*) FROM eval_runs", &left) == OK && left == 1, "%lld eval runs left", (long long)left);
    CHECK(store_query_i64(s, "SELECT count(*) FROM eval_metrics", &left) == OK && left == 1, "%lld eval metrics left", (long long)left);
    char q[128];
    snprintf(q, sizeof q, "SELECT count(*) FROM eval_runs WHERE sae_id = %lld", (long long)b);
    CHECK(store_query_i64(s, q, &left) == OK && left == 1, "runs/b's eval run is gone");
    /* the same directory spelt another way ("runs/a/"): its rows go too, eval rows included (an
       exact match kept them, under a row naming a directory that holds another SAE now) */
    int64_t a2 = -1, ra2 = -1;
    CHECK(store_eval_run_begin(s, a, "scr", "h", "{}", 4, &ra2) == OK && store_eval_metric(s, ra2, "m", 0.5) == OK,
          "%s", err_msg());
    r.dir = "runs/a/";
    CHECK(store_sae_register(s, &r, &a2) == OK && a2 > a, "%s", err_msg());
    CHECK(store_query_i64(s, "SELECT count(*) FROM sae_registry WHERE dir IN ('runs/a', 'runs/a/')", &left) == OK &&
          left == 1, "%lld registry rows for runs/a", (long long)left);
    snprintf(q, sizeof q, "SELECT count(*) FROM eval_runs WHERE sae_id = %lld", (long long)a);
    CHECK(store_query_i64(s, q, &left) == OK && left == 0, "the eval run of runs/a's replaced SAE is left");
    snprintf(q, sizeof q, "SELECT count(*) FROM eval_runs WHERE sae_id = %lld", (long long)b);
    CHECK(store_query_i64(s, q, &left) == OK && left == 1, "runs/b's eval run is gone");
    CHECK(store_query_i64(s, "SELECT count(*) FROM sae_training_log WHERE sae_id NOT IN (SELECT id FROM sae_registry)",
                          &left) == OK && left == 0, "%lld log rows of no registry row", (long long)left);
    /* the largest id there can be: no id past it (max + 1 overflowed to a negative id) */
    CHECK(store_exec(s, "DELETE FROM sae_training_log WHERE sae_id = (SELECT id FROM sae_registry "
                        "WHERE dir = 'runs/b'); UPDATE sae_registry SET id = 9223372036854775807 "
                        "WHERE dir = 'runs/b'") == OK, "%s", err_msg());
    r.dir = "runs/c";
    int64_t c = 0;
    CHECK(store_sae_register(s, &r, &c) == ERR_FORMAT && strstr(err_msg(), "largest"), "%s", err_msg());
    int64_t neg = -1;
    CHECK(store_query_i64(s, "SELECT count(*) FROM sae_registry WHERE id < 0", &neg) == OK && neg == 0,
          "a negative id was registered");
    store_close(s);
    store_remove(p);
}

/* Another process changing the schema between query's prepare and its first step: SQLite
 * prepares the statement again, which freed the column names read before (a use after free in
 * serve, an audit) and left query's header naming the old columns. The row callback of the first
 * statement plays the other process through a second connection. */
typedef struct {
    store *w;
    const char *change;
    char header[64];
    int rows;
} schema_q;

static int schema_row(void *u, int k, int nc, const char *const *names, const char *const *vals,
                      const int *types)
{
    (void)types;
    schema_q *q = u;
    if (!vals && k == 1) {
        q->header[0] = 0;
        for (int c = 0; c < nc; c++)
            snprintf(q->header + strlen(q->header), sizeof q->header - strlen(q->header), "%s%s",
                     c ? "," : "", names[c]);
    }
    if (vals && k == 0 && q->change) return store_exec(q->w, q->change);
    if (vals && k == 1) q->rows++;
    return OK;
}

static void test_query_schema_change(void)
{
    static const char *changes[] = {NULL, "CREATE TABLE other (x)", "ALTER TABLE t ADD COLUMN b",
                                    "ALTER TABLE t RENAME COLUMN a TO z"};
    for (int i = 0; i < 4; i++) {
        const char *p = tmp("schema.db");
        store_remove(p);
        store *s;
        CHECK(store_open(&s, p, STORE_CREATE) == OK, "%s", err_msg());
        CHECK(store_exec(s, "CREATE TABLE t (a); INSERT INTO t VALUES (1), (2)") == OK, "%s", err_msg());
        schema_q q = {.w = s, .change = changes[i]};
        int rc = store_ro_query(p, "SELECT 1; SELECT * FROM t", schema_row, &q);
        if (i < 2) /* nothing the second statement reads changed: its rows, under its header */
            CHECK(rc == OK && !strcmp(q.header, "a") && q.rows == 2, "change %d: rc %d %s, header '%s', "
                  "%d rows", i, rc, err_msg(), q.header, q.rows);
        else /* a column more, or one renamed: the header printed names the statement no longer has */
            CHECK(rc == ERR_ARG && strstr(err_msg(), "schema changed") && q.rows == 0,
                  "change %d: rc %d '%s', header '%s', %d rows", i, rc, err_msg(), q.header, q.rows);
        store_close(s);
    }
}

/* A new file's pages fit its rows: 32 KiB rows (128 tokens x 128 bf16) each took a whole
 * 64 KiB page, twice the data on disk (an audit); on the pages store_page_for picks the file
 * stays near the data. Rows of 128 KiB and more keep 64 KiB pages (the bench's choice). */
static void test_page_size(void)
{
    CHECK(store_page_for(0) == 65536 && store_page_for(256 << 10) == 65536 &&
          store_page_for(128 << 10) == 65536 && store_page_for(64 << 10) == 32768 &&
          store_page_for(32 << 10) == 16384 && store_page_for(100) == 4096,
          "pages %d %d %d %d", store_page_for(128 << 10), store_page_for(64 << 10),
          store_page_for(32 << 10), store_page_for(100));
    enum { TT = 128, WW = 128, NSEQ = 96 };
    for (int v = 0; v < 2; v++) {
        const char *p = tmp(v ? "pg_fit.db" : "pg_64k.db");
        store_remove(p);
        store *s;
        int64_t blob = (int64_t)TT * WW * 2;
        if (store_open_blobs(&s, p, STORE_CREATE, v ? blob : 0)) {
            CHECK(0, "%s", err_msg());
            return;
        }
        int64_t model, doc, seq;
        store_hook h;
        static float x[TT * WW];
        static int ids[TT];
        int rc = store_begin(s);
        if (!rc) rc = store_model_add(s, "tiny", "/m", "{}", "01", &model);
        if (!rc) rc = store_hook_add(s, model, "h", 0, WW, STORE_BF16, TT, &h);
        if (!rc) rc = store_doc_add(s, "c.txt", 0, "d", NULL, "text", 4, &doc);
        for (int q = 0; !rc && q < NSEQ; q++) {
            for (int t = 0; t < TT; t++) ids[t] = q * TT + t;
            for (int i = 0; i < TT * WW; i++) x[i] = (float)((i * 7 + q) % 97) / 97.0f;
            rc = store_seq_add(s, doc, q * TT, 0, ids, TT, &seq, NULL);
            if (!rc) rc = store_act_write(s, h.id, seq, x, TT);
        }
        if (!rc) rc = store_commit(s);
        CHECK(rc == OK, "%s", err_msg());
        store_close(s);
        struct stat st;
        double ratio = stat(p, &st) == 0 ? (double)st.st_size / ((double)NSEQ * blob) : 0;
        if (v) CHECK(ratio > 1 && ratio < 1.25, "32 KiB rows on fitted pages: file %.2f x the data", ratio);
        else CHECK(ratio > 1.8, "32 KiB rows on 64 KiB pages: file %.2f x the data (the case fixed)", ratio);
        store_remove(p);
    }
}

/* A sequence is one blob: the hooks row is refused when a full one is more bytes than SQLite
 * stores in one value (1e9 by default) less its record's few other bytes, by dtype, not by value count (a 2^28-value cap refused
 * bf16 rows of 268-500M values that store and read, a review). */
static void test_hook_size(void)
{
    /* the record's slack: 1e9 - 64 bytes at most */
    CHECK(store_hook_size_check("x.db", "h", 1000, STORE_BF16, 499999) == OK, "%s", err_msg());
    CHECK(store_hook_size_check("x.db", "h", 1000, STORE_F16, 500000) == ERR_ARG &&
              strstr(err_msg(), "x.db: hook h: a sequence of 500000 tokens x width 1000 in f16 is "
                                "1000000000 bytes, more than SQLite stores in one value (999999936)"),
          "%s", err_msg());
    CHECK(store_hook_size_check("x.db", "h", 1000, STORE_F32, 249999) == OK, "%s", err_msg());
    CHECK(store_hook_size_check("x.db", "h", 1000, STORE_F32, 250000) == ERR_ARG &&
              strstr(err_msg(), "or a 2-byte --dtype"), "%s", err_msg());
    /* no int overflow at the limits, and the limits themselves */
    CHECK(store_hook_size_check("x.db", "h", 1 << 24, STORE_F32, 1 << 24) == ERR_ARG &&
              strstr(err_msg(), "1125899906842624 bytes"), "%s", err_msg());
    CHECK(store_hook_size_check("x.db", "h", (1 << 24) + 1, STORE_F32, 1) == ERR_ARG &&
              strstr(err_msg(), "want 1..16777216 each"), "%s", err_msg());
    CHECK(store_hook_size_check("x.db", "h", 8, STORE_F32, 0) == ERR_ARG, "%s", err_msg());
    CHECK(store_hook_size_check("x.db", "h", -8, STORE_F32, -8) == ERR_ARG, "%s", err_msg());
    /* store_hook_add refuses it before the row is written */
    char p[600];
    snprintf(p, sizeof p, "%s/hsize.db", dir);
    store *s;
    int64_t m;
    store_hook h;
    CHECK(store_open(&s, p, STORE_CREATE) == OK, "%s", err_msg());
    CHECK(store_model_add(s, "m", "{}", "{}", "", &m) == OK, "%s", err_msg());
    CHECK(store_hook_add(s, m, "big", 0, 1000, STORE_F32, 250000, &h) == ERR_ARG, "%s", err_msg());
    CHECK(store_hook_add(s, m, "ok", 0, 1000, STORE_BF16, 499999, &h) == OK, "%s", err_msg());
    int64_t n = -1;
    CHECK(store_query_i64(s, "SELECT count(*) FROM hooks", &n) == OK && n == 1, "%lld", (long long)n);
    store_close(s);
}

int main(void)
{
    if (access("/dev/shm", W_OK) != 0) snprintf(dir, sizeof dir, "/tmp/saelite_test_storeXXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_roundtrip(STORE_F32);
    test_roundtrip(STORE_F16);
    test_roundtrip(STORE_BF16);
    test_iter();
    test_nonfinite();
    test_versions();
    test_hostile();
    test_sqlfuncs_nomem();
    test_console();
    test_oom();
    test_extract_plan();
    test_bulk_shared();
    test_bulk_tx();
    test_tokens_long();
    test_seq_tags_words();
    test_sae_log();
    test_query_schema_change();
    test_page_size();
    test_hook_size();
    test_serve_queries_scale();
    test_ana_all_row_bytes();
    test_ana_newest(NEWEST_AGAIN);
    test_ana_newest(NEWEST_SAME_SECOND);
    test_ana_newest(NEWEST_MIXED);
    test_ana_replace_rebuild(0);
    test_ana_replace_rebuild(1);
    test_ana_replace_rebuild(2);
    test_ana_replace_hostile(0);
    test_ana_replace_hostile(1);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return harness_report("test_store");
}
