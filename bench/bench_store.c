/* bench_store.c - store write/read throughput against dd-style file I/O on the same filesystem.
 *
 * 1. Settings: page size 4096 vs 65536 x journal WAL vs DELETE (synchronous=NORMAL) x
 *    transactions of 8 or 128 blobs, inserting activation blobs of 128 tokens x 512 f32
 *    (256 KiB, blocks.0.mlp.hook_post of the small model), then reading them back through
 *    incremental blob I/O.
 * 2. dd: the same bytes written with write() in 1 MiB chunks + fdatasync, and read back.
 * 3. The store API as extract and sae-train use it: store_act_write (f32 and bf16) and the
 *    random-order training iterator.
 * Every figure is also printed as a ratio to the dd rate of the same run. Files go to
 * SAELITE_BENCH_DIR (default runs/bench) and are removed afterwards. Size: SAELITE_BENCH_MB
 * (default 96) per case.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/progress.h"
#include "store/store.h"
#include "store/store_internal.h"

enum { T = 128, W = 512, TX = 128 }; /* 32 MiB transactions, as extract groups them */

static char dir[1024];
static double cpu_w, cpu_r; /* CPU-time rates (user+sys) of the last case, MB/s */
static long nblobs;

static void fill(float *x, long k)
{
    for (long i = 0; i < (long)T * W; i++) x[i] = (float)((i * 7 + k * 13) % 1001) * 1e-3f - 0.5f;
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double mb(void) { return (double)nblobs * T * W * 4 / 1e6; }

/* dd-style baseline: write() in 1 MiB chunks, fdatasync, then read() back. */
static int bench_dd(double *wr, double *rd)
{
    char p[1100];
    snprintf(p, sizeof p, "%s/dd.bin", dir);
    size_t chunk = 1 << 20, total = (size_t)nblobs * T * W * 4;
    char *buf = malloc(chunk);
    if (!buf) return 1;
    memset(buf, 0x5a, chunk);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 1;
    double t0 = now_seconds(), c0 = cpu_seconds();
    for (size_t done = 0; done < total; done += chunk)
        if (write(fd, buf, chunk) != (ssize_t)chunk) return 1;
    fdatasync(fd);
    close(fd);
    *wr = (double)total / 1e6 / (now_seconds() - t0);
    cpu_w = (double)total / 1e6 / (cpu_seconds() - c0);
    fd = open(p, O_RDONLY);
    t0 = now_seconds();
    c0 = cpu_seconds();
    while (read(fd, buf, chunk) > 0) {}
    *rd = (double)total / 1e6 / (now_seconds() - t0);
    cpu_r = (double)total / 1e6 / (cpu_seconds() - c0);
    close(fd);
    unlink(p);
    free(buf);
    return 0;
}

/* Raw SQLite with a given page size and journal mode: the activations table of schema.sql. */
static int bench_raw(int page, const char *journal, int tx, double *wr, double *rd)
{
    char p[1100], sql[256];
    snprintf(p, sizeof p, "%s/raw.db", dir);
    store_remove(p);
    sqlite3 *db;
    if (sqlite3_open(p, &db) != SQLITE_OK) return 1;
    snprintf(sql, sizeof sql, "PRAGMA page_size = %d; PRAGMA journal_mode = %s; "
             "PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY", page, journal);
    sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_exec(db, "CREATE TABLE activations (id INTEGER PRIMARY KEY, hook_id INTEGER NOT NULL, "
                     "sequence_id INTEGER NOT NULL, n_tokens INTEGER NOT NULL, data BLOB NOT NULL, "
                     "UNIQUE (hook_id, sequence_id))", NULL, NULL, NULL);
    float *x = malloc(sizeof(float) * T * W);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, "INSERT INTO activations (hook_id, sequence_id, n_tokens, data) "
                           "VALUES (1, ?1, ?2, ?3)", -1, &st, NULL);
    double t0 = now_seconds(), c0 = cpu_seconds();
    int bad = 0;
    for (long k = 0; k < nblobs; k++) {
        if (k % tx == 0) sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
        fill(x, k);
        sqlite3_bind_int64(st, 1, k + 1);
        sqlite3_bind_int(st, 2, T);
        sqlite3_bind_blob(st, 3, x, T * W * 4, SQLITE_STATIC);
        bad |= sqlite3_step(st) != SQLITE_DONE;
        sqlite3_reset(st);
        if (k % tx == tx - 1 || k == nblobs - 1) sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    }
    sqlite3_finalize(st);
    sqlite3_close(db); /* includes the final WAL checkpoint: part of the cost */
    *wr = mb() / (now_seconds() - t0);
    cpu_w = mb() / (cpu_seconds() - c0);
    sqlite3_open(p, &db);
    sqlite3_blob *b = NULL;
    t0 = now_seconds();
    c0 = cpu_seconds();
    for (long k = 0; k < nblobs && !bad; k++) {
        int r = b ? sqlite3_blob_reopen(b, k + 1) : sqlite3_blob_open(db, "main", "activations", "data", k + 1, 0, &b);
        bad |= r != SQLITE_OK || sqlite3_blob_read(b, x, T * W * 4, 0) != SQLITE_OK;
    }
    *rd = mb() / (now_seconds() - t0);
    cpu_r = mb() / (cpu_seconds() - c0);
    if (b) sqlite3_blob_close(b);
    sqlite3_close(db);
    store_remove(p);
    free(x);
    return bad;
}

/* The store API: writes as extract does (act_write per blob, 8 per transaction), reads as
 * sae-train does (random order iterator). */
static int bench_api(int dtype, double *wr, double *rd)
{
    char p[1100];
    snprintf(p, sizeof p, "%s/api.db", dir);
    store_remove(p);
    store *s;
    int rc = store_open(&s, p, STORE_CREATE);
    if (!rc) rc = store_set_bulk(s);
    float *x = malloc(sizeof(float) * T * W);
    int ids[T];
    for (int t = 0; t < T; t++) ids[t] = t;
    int64_t model, doc, hid;
    store_hook h;
    double t0 = now_seconds(), c0 = cpu_seconds();
    if (!rc) rc = store_begin(s);
    if (!rc) rc = store_model_add(s, "bench", "bench", "{}", "0", &model);
    if (!rc) rc = store_hook_add(s, model, "blocks.0.mlp.hook_post", 0, W, dtype, T, &h);
    if (!rc) rc = store_doc_add(s, "bench", 0, "bench", NULL, NULL, 0, &doc);
    hid = h.id;
    for (long k = 0; !rc && k < nblobs; k++) {
        if (k % TX == 0 && k) rc = store_begin(s);
        int64_t seq;
        fill(x, k);
        if (!rc) rc = store_seq_add(s, doc, k * T, 0, ids, T, &seq, NULL);
        if (!rc) rc = store_act_write(s, hid, seq, x, T);
        if (!rc && (k % TX == TX - 1 || k == nblobs - 1)) rc = store_commit(s);
    }
    store_close(s);
    double secs = now_seconds() - t0;
    double bytes = mb() * store_dtype_size(dtype) / 4;
    *wr = bytes / secs;
    cpu_w = bytes / (cpu_seconds() - c0);
    store_iter *it = NULL;
    if (!rc) rc = store_open(&s, p, STORE_READONLY);
    if (!rc) rc = store_iter_open(&it, s, hid, STORE_SPLIT_ALL, 0, 1);
    t0 = now_seconds();
    c0 = cpu_seconds();
    long n = 0;
    for (int got = 1; !rc && got;) {
        rc = store_iter_next(it, x, &got, NULL);
        n += got > 0;
    }
    *rd = bytes / (now_seconds() - t0);
    cpu_r = bytes / (cpu_seconds() - c0);
    if (!rc && n != nblobs) rc = err_set(ERR_FORMAT, "iterated %ld of %ld", n, nblobs);
    store_iter_close(it);
    if (it || !rc) store_close(s);
    store_remove(p);
    free(x);
    if (rc) fprintf(stderr, "bench_store: %s\n", err_msg());
    return rc;
}

int main(void)
{
    const char *d = getenv("SAELITE_BENCH_DIR");
    snprintf(dir, sizeof dir, "%s", d && *d ? d : "runs/bench");
    mkdir("runs", 0755);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        perror(dir);
        return 1;
    }
    const char *m = getenv("SAELITE_BENCH_MB");
    double want = m ? atof(m) : 96;
    nblobs = (long)(want * 1e6 / (T * W * 4.0));
    if (nblobs < TX) nblobs = TX;
    printf("bench_store: %ld blobs of %d x %d f32 (%.0f MB) per case in %s; wall-clock rates on a "
           "shared machine are noisy\n", nblobs, T, W, mb(), dir);
    double ddw, ddr;
    if (bench_dd(&ddw, &ddr)) {
        perror("dd baseline");
        return 1;
    }
    printf("  (wall MB/s, ratio to dd wall, [MB per CPU second])\n");
    printf("  dd-style write+fdatasync   %6.0f MB/s            [%6.0f]   read %6.0f MB/s            [%6.0f] (page cache)\n",
           ddw, cpu_w, ddr, cpu_r);
    static const struct { int page, tx; const char *mode; } cases[] = {
        {4096, 8, "WAL"}, {4096, 8, "DELETE"}, {65536, 8, "WAL"}, {65536, 8, "DELETE"},
        {65536, 128, "WAL"}, {65536, 128, "DELETE"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double w, r;
        if (bench_raw(cases[i].page, cases[i].mode, cases[i].tx, &w, &r)) {
            fprintf(stderr, "raw sqlite bench failed\n");
            return 1;
        }
        printf("  sqlite %5d %-6s tx %3d %6.0f MB/s = %.2f x dd [%6.0f]   read %6.0f MB/s = %.2f x dd [%6.0f] (blob I/O)\n",
               cases[i].page, cases[i].mode, cases[i].tx, w, w / ddw, cpu_w, r, r / ddr, cpu_r);
    }
    for (int dt = STORE_F32; dt <= STORE_BF16; dt += 2) {
        double w, r;
        if (bench_api(dt, &w, &r)) return 1;
        printf("  store API %-4s tx %3d  %6.0f MB/s = %.2f x dd [%6.0f]   read %6.0f MB/s = %.2f x dd [%6.0f] (random-order iterator)\n",
               store_dtype_name(dt), TX, w, w / ddw, cpu_w, r, r / ddr, cpu_r);
    }
    return 0;
}
