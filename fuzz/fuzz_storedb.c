/* fuzz_storedb - a database file is input (issue 20): store_open read-only on arbitrary bytes,
 * then what `info` and `export` read (summary, models, hooks, parts, runs, a sequence's context
 * and activations), and the SQL functions through the read-only query runner with limits.
 * Invariants: no crash or sanitizer report (the hostile-view recursion was a stack overflow);
 * errors carry a one-line message; once store_open has accepted a file, reading the core tables
 * never fails with "no such table/column" (the schema check let a foreign layout through), and
 * the functions never fail that way either (they check the tables they read).
 * Seeds: fuzz/make-storedb-seeds.sh (512-byte pages keep a store at 12-26 KB; see storedb.flags). */
#include <unistd.h>

#include "common/mem.h"
#include "fuzz/fuzz.h"
#include "store/sqlfuncs.h"
#include "store/store.h"

static void storedb_read_ok(int rc, const char *what)
{
    fuzz_check_err(rc, what);
    if (rc == ERR_SQL && (strstr(err_msg(), "no such table") || strstr(err_msg(), "no such column")))
        fuzz_fail("%s on a store that store_open accepted: %s", what, err_msg());
}

static int storedb_row(void *u, int k, int nc, const char *const *names, const char *const *vals,
                       const int *types)
{
    (void)u, (void)k, (void)names, (void)types;
    for (int c = 0; vals && c < nc; c++)
        if (vals[c] && types[c] == STORE_Q_NULL) fuzz_fail("a NULL column with a value");
    return OK;
}

static int fuzz_storedb(const uint8_t *data, size_t n)
{
    char path[256];
    snprintf(path, sizeof path, "%s/f.db", fuzz_tmpdir());
    store_remove(path);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) fuzz_fail("cannot write %s", path);
    store *s = NULL;
    int rc = store_open(&s, path, STORE_READONLY), opened = rc == OK;
    fuzz_check_err(rc, "store_open");
    if (opened) {
        store_summary sm;
        storedb_read_ok(store_summary_get(s, &sm), "store_summary_get");
        store_model *ms = NULL;
        size_t nm = 0, nh = 0, nseq = 0;
        storedb_read_ok(store_model_list(s, &ms, &nm), "store_model_list");
        mem_free(ms);
        char parts[8][64];
        int vers[8], np = 0;
        storedb_read_ok(store_part_list(s, parts, vers, 8, &np), "store_part_list");
        int64_t done = 0, running = 0, cnt = 0;
        storedb_read_ok(store_run_counts(s, &done, &running), "store_run_counts");
        storedb_read_ok(store_count_rows(s, "sae_registry", &cnt), "store_count_rows");
        store_hook *hs = NULL;
        rc = store_hook_list(s, &hs, &nh);
        storedb_read_ok(rc, "store_hook_list");
        int64_t *ids = NULL;
        if (!rc && nh) {
            if (hs[0].width < 1 || hs[0].seq_len < 1)
                fuzz_fail("a hook of width %d, seq_len %d", hs[0].width, hs[0].seq_len);
            rc = store_seq_list(s, hs[0].id, STORE_SPLIT_ALL, 0.1, &ids, &nseq);
            storedb_read_ok(rc, "store_seq_list");
        }
        if (!rc && nseq) {
            store_context c;
            rc = store_context_get(s, ids[0], 0, 2, 2147483647, &c);
            storedb_read_ok(rc, "store_context_get");
            if (!rc) store_context_free(&c);
            size_t cells = (size_t)hs[0].seq_len * (size_t)hs[0].width;
            float *x = cells <= ((size_t)1 << 20) ? mem_alloc(cells * sizeof *x) : NULL;
            int T = 0;
            if (x) fuzz_check_err(store_act_read(s, hs[0].id, ids[0], x, &T), "store_act_read");
            mem_free(x);
        }
        mem_free(ids);
        mem_free(hs);
        store_close(s);
    }
    /* the SQL functions: calls without a FROM never fail with "no such table" */
    store_query_limits lim = {.timeout_s = 2, .max_rows = 200};
    rc = store_ro_query_limited(path, "SELECT tok_text(1), tok_id('the'), context(1, 1), "
                                "context(1, 9223372036854775807, 100000, 100000), "
                                "context(-9223372036854775808, -9223372036854775808, 3, 3)",
                                &lim, storedb_row, NULL);
    if (opened) storedb_read_ok(rc, "the SQL functions");
    else fuzz_check_err(rc, "the SQL functions");
    rc = store_ro_query_limited(path, "SELECT tok_text(token_id), tok_id(text), "
                                "context(sequence_id, position, 2, 2) FROM tokens LIMIT 64; "
                                "SELECT count(*) FROM tokens",
                                &lim, storedb_row, NULL);
    if (opened) storedb_read_ok(rc, "the SQL functions over tokens");
    else fuzz_check_err(rc, "the SQL functions over tokens");
    store_remove(path);
    fuzz_guard();
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) { return fuzz_storedb(data, n); }
#endif
