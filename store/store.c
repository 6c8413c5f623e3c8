/* store.c - the SQLite store (see store.h for the contract, schema.sql for the tables). */
#include <errno.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <limits.h>
#include <unistd.h>
#if defined(__AVX512BW__)
#include <immintrin.h>
#endif

#include "common/checked.h"
#include "common/err.h"
#include "common/fileio.h"
#include "common/half.h"
#include "common/hash.h"
#include "common/mem.h"
#include "store/sqlfuncs.h"
#include "store/store_internal.h"

#include "schema_sql.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "store.c stores little-endian blobs by copying host floats; add byte swapping for this host"
#endif

#define STORE_APP_ID 0x5341454c /* 'SAEL' */
#define STORE_PAGE_SIZE 65536
#define STORE_WRITEBACK_BYTES (8 << 20) /* bulk: a writeback hint per 8 MB of activations */

/* Hot statements, prepared once per handle. */
enum {
    Q_ACT_FIND, Q_ACT_WRITE, Q_HOOK_BY_ID, Q_SEQ_FIND, Q_SEQ_ADD, Q_SEQ_TOKENS, Q_TOK_ADD,
    Q_TOK_ADD_ROWS, Q_DOC_FIND, Q_DOC_ADD, Q_ACT_OTHER_LEN, Q__COUNT
};
/* Token rows go in TOK_ROWS to a statement (a window of 128 in 4 steps instead of 128), which
 * saves the per-step reset, bindings clear and VDBE entry: a sixth of the demo extract's time in
 * token rows (1.13-1.22 s -> 0.94-1.00 s); the rest is SQLite's B-tree insert per row.
 * Q_TOK_ADD_ROWS holds TOK_ROWS = 2 x 16 rows of TOK_COLS parameters. */
#define TOK_ROWS 32
#define TOK_COLS 7
#define TOK_ROW "(?,?,?,?,?,?,?)"
#define TOK_ROW4 TOK_ROW "," TOK_ROW "," TOK_ROW "," TOK_ROW
#define TOK_ROW16 TOK_ROW4 "," TOK_ROW4 "," TOK_ROW4 "," TOK_ROW4
static const char *const q_sql[Q__COUNT] = {
    [Q_ACT_FIND] = "SELECT id, n_tokens FROM activations WHERE hook_id = ?1 AND sequence_id = ?2",
    [Q_ACT_WRITE] = "INSERT INTO activations (hook_id, sequence_id, n_tokens, data) "
                    "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (hook_id, sequence_id) DO UPDATE SET "
                    "n_tokens = excluded.n_tokens, data = excluded.data",
    [Q_HOOK_BY_ID] = "SELECT id, model_id, name, layer, width, dtype, seq_len FROM hooks WHERE id = ?1",
    [Q_SEQ_FIND] = "SELECT id, tokens FROM sequences WHERE document_id = ?1 AND start = ?2 "
                   "AND n_tokens = ?3 AND bos = ?4",
    [Q_SEQ_ADD] = "INSERT INTO sequences (document_id, start, n_tokens, bos, tokens) "
                  "VALUES (?1, ?2, ?3, ?4, ?5)",
    [Q_SEQ_TOKENS] = "SELECT n_tokens, tokens FROM sequences WHERE id = ?1",
    [Q_TOK_ADD] = "INSERT INTO tokens (sequence_id, position, token_id, text, "
                  "byte_start, byte_end, pos_tag) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [Q_TOK_ADD_ROWS] = "INSERT INTO tokens (sequence_id, position, token_id, text, byte_start, "
                       "byte_end, pos_tag) VALUES " TOK_ROW16 "," TOK_ROW16,
    [Q_DOC_FIND] = "SELECT id, checksum FROM documents WHERE source = ?1 AND ordinal = ?2",
    [Q_DOC_ADD] = "INSERT INTO documents (source, ordinal, name, genre, text, checksum) "
                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    /* sequences' UNIQUE (document_id, start, n_tokens, bos) index finds the windows there */
    [Q_ACT_OTHER_LEN] = "SELECT q.n_tokens, q.id FROM sequences q JOIN activations a ON a.sequence_id = "
                        "q.id AND a.hook_id = ?1 WHERE q.document_id = ?2 AND q.start = ?3 AND "
                        "q.bos = ?4 AND q.n_tokens <> ?5 LIMIT 1",
};

#define HOOK_CACHE 16

struct store {
    sqlite3 *db;
    char *path;
    int readonly, in_tx, bulk;
    int page_size;      /* for a new file: chosen from the rows' blob size (store_open_blobs) */
    int wb_fd;          /* bulk: SQLite's descriptor of the file, for writeback hints (not ours) */
    int64_t wb_pending; /* activation bytes written since the last hint */
    sqlite3_stmt *q[Q__COUNT];
    sqlite3_blob *blob; /* cached read handle on activations.data */
    void *scratch;      /* conversion buffer for f16/bf16 */
    size_t scratch_cap;
    store_hook hooks[HOOK_CACHE];
    int n_hooks;
};

/* ---- SQLite allocations through mem_alloc, so tests can inject out-of-memory --------------- */
/* A 16-byte header keeps the size (xSize) and SQLite's 8-byte alignment. */
static void *sq_malloc(int n)
{
    size_t *p = mem_alloc((size_t)n + 16);
    if (!p) return NULL;
    p[0] = (size_t)n;
    return (char *)p + 16;
}
static void sq_free(void *p)
{
    if (p) mem_free((char *)p - 16);
}
static void *sq_realloc(void *p, int n)
{
    if (!p) return sq_malloc(n);
    size_t *q = mem_realloc((char *)p - 16, (size_t)n + 16);
    if (!q) return NULL;
    q[0] = (size_t)n;
    return (char *)q + 16;
}
static int sq_size(void *p) { return p ? (int)*(size_t *)((char *)p - 16) : 0; }
static int sq_roundup(int n) { return (n + 7) & ~7; }
static int sq_init(void *u) { (void)u; return SQLITE_OK; }
static void sq_shutdown(void *u) { (void)u; }

static pthread_once_t sq_once = PTHREAD_ONCE_INIT;
static int sq_init_rc;
static int64_t sq_max_blob = 1000000000; /* SQLite's default, until sq_setup reads it */
static void sq_setup(void)
{
    static const sqlite3_mem_methods m = {sq_malloc, sq_free,  sq_realloc, sq_size,
                                          sq_roundup, sq_init, sq_shutdown, NULL};
    sqlite3_config(SQLITE_CONFIG_MALLOC, &m); /* fails harmlessly if SQLite was initialised */
    /* No allocation statistics: they take a mutex on every malloc (a measurable cost per row). */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    sq_init_rc = sqlite3_initialize();
    /* the most bytes one value may hold (SQLITE_LIMIT_LENGTH, 1e9 unless SQLite was built
       otherwise): a sequence's activations are one blob (store_hook_size_check) */
    sqlite3 *mem = NULL;
    if (sq_init_rc == SQLITE_OK && sqlite3_open(":memory:", &mem) == SQLITE_OK)
        sq_max_blob = sqlite3_limit(mem, SQLITE_LIMIT_LENGTH, -1);
    sqlite3_close(mem);
}

/* ---- errors and small helpers ------------------------------------------------------------- */
int store_check_file(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "%s: cannot open: %s", path,
                       strerror(errno));
    if (!S_ISREG(sb.st_mode)) return err_set(ERR_IO, "%s: cannot open: not a regular file", path);
    return OK;
}

sqlite3 *store_db(store *s) { return s->db; }
int store_readonly(const store *s) { return s->readonly; }
const char *store_path(const store *s) { return s->path; }

const char *store_lock_hint(sqlite3 *db, int rc)
{
    int ext = db ? sqlite3_extended_errcode(db) : rc;
    if (rc == SQLITE_READONLY_ROLLBACK || ext == SQLITE_READONLY_ROLLBACK)
        return " (an interrupted write left its -journal file, which only a writer can roll back: "
               "run the interrupted saelite command again, or any saelite command that writes to "
               "this database, first)";
    if ((rc & 0xff) == SQLITE_BUSY) /* (SQLITE_LOCKED is a conflict inside one connection) */
        return " (another process is writing to it, e.g. an extract: run this again when it has "
               "finished)";
    return "";
}

int store_sql_error(store *s, int rc, const char *what)
{
    int prim = rc & 0xff, code;
    const char *m = s && s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    if (prim == SQLITE_NOMEM) m = "out of memory";
    else if (s && s->db && (sqlite3_errcode(s->db) & 0xff) != prim) m = sqlite3_errstr(rc);
    switch (prim) {
    case SQLITE_NOMEM: code = ERR_NOMEM; break;
    case SQLITE_IOERR: case SQLITE_FULL: case SQLITE_READONLY: case SQLITE_CANTOPEN:
    case SQLITE_PERM: case SQLITE_LOCKED:
        code = ERR_IO; break;
    case SQLITE_BUSY: code = ERR_BUSY; break; /* another process writes: try again later */
    case SQLITE_CORRUPT: case SQLITE_NOTADB: code = ERR_FORMAT; break;
    default: code = ERR_SQL;
    }
    if (prim == SQLITE_FULL) m = "disk full (database or filesystem)";
    int sys = s && s->db && (prim == SQLITE_IOERR || prim == SQLITE_FULL || prim == SQLITE_CANTOPEN)
                  ? sqlite3_system_errno(s->db) : 0;
    if (!sys && (rc == SQLITE_IOERR_WRITE || rc == SQLITE_IOERR_FSYNC || rc == SQLITE_IOERR_TRUNCATE))
        m = "disk I/O error while writing (disk full, quota or file size limit?)";
    if (sys)
        return err_set(code, "%s: %s: %s (%s)", s->path ? s->path : "database", what, m, strerror(sys));
    return err_set(code, "%s: %s: %s%s", s && s->path ? s->path : "database", what, m,
                   store_lock_hint(s ? s->db : NULL, rc));
}

static int exec_what(store *s, const char *sql, const char *what)
{
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) return store_sql_error(s, rc, what);
    return OK;
}

int store_exec(store *s, const char *sql) { return exec_what(s, sql, "executing SQL"); }

int store_prepare(store *s, const char *sql, sqlite3_stmt **st)
{
    int rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);
    if (rc != SQLITE_OK) {
        *st = NULL;
        return store_sql_error(s, rc, "preparing a query");
    }
    return OK;
}

int store_cache_kib(store *s, int kib)
{
    char sql[48];
    snprintf(sql, sizeof sql, "PRAGMA cache_size = -%d", kib);
    return store_exec(s, sql);
}

int store_query_i64(store *s, const char *sql, int64_t *v)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, sql, &st);
    if (rc) return rc;
    *v = 0;
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) *v = sqlite3_column_int64(st, 0);
    else if (r != SQLITE_DONE) rc = store_sql_error(s, r, "reading");
    sqlite3_finalize(st);
    return rc;
}

/* A cached statement, reset and unbound, ready for binding. */
static int q_get(store *s, int which, sqlite3_stmt **st)
{
    if (!s->q[which]) {
        int rc = sqlite3_prepare_v3(s->db, q_sql[which], -1, SQLITE_PREPARE_PERSISTENT,
                                    &s->q[which], NULL);
        if (rc != SQLITE_OK) {
            s->q[which] = NULL;
            return store_sql_error(s, rc, "preparing a query");
        }
    }
    *st = s->q[which];
    sqlite3_reset(*st);
    sqlite3_clear_bindings(*st);
    return OK;
}

static void blob_drop(store *s)
{
    if (s->blob) sqlite3_blob_close(s->blob);
    s->blob = NULL;
}

static void hex64(char out[17], uint64_t h) { snprintf(out, 17, "%016llx", (unsigned long long)h); }

/* ---- open / close / transactions ---------------------------------------------------------- */
static int create_schema(store *s)
{
    char sql[128];
    int rc;
    snprintf(sql, sizeof sql, "PRAGMA page_size = %d", s->page_size ? s->page_size : STORE_PAGE_SIZE);
    if ((rc = store_exec(s, sql))) return rc;
    if ((rc = store_exec(s, "BEGIN IMMEDIATE"))) return rc;
    /* Someone else may have created it between our check and the lock. */
    int64_t ntab = 0;
    rc = store_query_i64(s, "SELECT count(*) FROM sqlite_master", &ntab);
    if (!rc && ntab == 0) {
        rc = store_exec(s, schema_sql);
        snprintf(sql, sizeof sql, "PRAGMA user_version = %d; PRAGMA application_id = %d",
                 STORE_SCHEMA_VERSION, STORE_APP_ID);
        if (!rc) rc = store_exec(s, sql);
    }
    if (!rc) rc = store_exec(s, "COMMIT");
    if (rc) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* ---- the schema a database really has ----------------------------------------------------- */
/* A database is input: another program (or damage) may have dropped a table, replaced it by a
 * view, changed its columns or added triggers that run on our writes. Every open compares the
 * core tables, and store_schema_part the part's tables, with a reference made from the same SQL
 * in memory: each table must be a real table with each reference column and its declared type
 * (extra columns are allowed). ERR_FORMAT names the file and the first difference. */
static int verify_tables(store *s, const char *ref_sql, const char *part)
{
    sqlite3 *ref = NULL;
    sqlite3_stmt *st = NULL;
    char why[256] = "", what[96] = "";
    if (part) snprintf(what, sizeof what, "'%s' tables", part);
    else snprintf(what, sizeof what, "core tables");
    int rc = sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_exec(ref, ref_sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(ref, "SELECT m.name, p.name, p.type FROM sqlite_schema m, "
                                     "pragma_table_info(m.name) p WHERE m.type = 'table' "
                                     "ORDER BY m.rowid, p.cid", -1, &st, NULL);
    if (rc != SQLITE_OK) {
        int ret = (rc & 0xff) == SQLITE_NOMEM || !ref
                      ? err_set(ERR_NOMEM, "%s: out of memory", s->path)
                      : err_set(ERR_SQL, "%s: checking the schema: %s", s->path, sqlite3_errmsg(ref));
        sqlite3_close(ref);
        return ret;
    }
    char table[128];
    const char *cols[3] = {NULL, NULL, NULL};
    int bad = 0, r;
    while (!bad && (r = sqlite3_step(st)) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        cols[0] = (const char *)sqlite3_column_text(st, 1);
        cols[1] = (const char *)sqlite3_column_text(st, 2);
        if (!t || !cols[0] || !cols[1]) {
            r = SQLITE_NOMEM;
            break;
        }
        snprintf(table, sizeof table, "%s", t);
        int c = store_sqlfuncs_table_check(s->db, table, cols, why, sizeof why);
        if (c == 1) snprintf(why, sizeof why, "no table '%s'", table);
        if (c == -2) {
            sqlite3_finalize(st);
            sqlite3_close(ref);
            return store_sql_error(s, sqlite3_extended_errcode(s->db), "checking the schema");
        }
        bad = c != 0;
    }
    int ret = OK;
    if (bad)
        ret = err_set(ERR_FORMAT, "%s: the %s do not match saelite's schema: %s (damaged, or changed "
                      "by another program?)", s->path, what, why);
    else if (r != SQLITE_DONE)
        ret = (r & 0xff) == SQLITE_NOMEM ? err_set(ERR_NOMEM, "%s: out of memory", s->path)
                                         : err_set(ERR_SQL, "%s: checking the schema: %s", s->path,
                                                   sqlite3_errmsg(ref));
    sqlite3_finalize(st);
    sqlite3_close(ref);
    if (ret || part) return ret;
    /* saelite makes no triggers; one would run its SQL inside our writes */
    if ((rc = store_prepare(s, "SELECT name, tbl_name FROM main.sqlite_schema WHERE type = 'trigger' "
                               "LIMIT 1", &st)))
        return rc;
    r = sqlite3_step(st);
    if (r == SQLITE_ROW)
        ret = err_set(ERR_FORMAT, "%s: has a trigger '%s' on '%s', which saelite never creates "
                      "(changed by another program?)", s->path, sqlite3_column_text(st, 0),
                      sqlite3_column_text(st, 1));
    else if (r != SQLITE_DONE) ret = store_sql_error(s, r, "reading the schema");
    sqlite3_finalize(st);
    return ret;
}

/* Older schema versions would be upgraded here, one step per version, inside one transaction. */
static int migrate(store *s, int64_t from)
{
    return err_set(ERR_VERSION, "%s: schema version %lld is not supported (this saelite reads %d)",
                   s->path, (long long)from, STORE_SCHEMA_VERSION);
}

static int check_schema(store *s, int flags)
{
    int64_t ver = 0, app = 0, ntab = 0;
    int rc = store_query_i64(s, "SELECT count(*) FROM sqlite_master", &ntab);
    if (rc == ERR_FORMAT)
        return err_set(ERR_FORMAT, "%s: not a database (not an SQLite file, or damaged)", s->path);
    if (rc) return rc;
    if ((rc = store_query_i64(s, "PRAGMA user_version", &ver))) return rc;
    if ((rc = store_query_i64(s, "PRAGMA application_id", &app))) return rc;
    if (ntab == 0 && ver == 0) {
        if (s->readonly || !(flags & STORE_CREATE))
            return err_set(ERR_FORMAT, "%s: empty database (no saelite tables)", s->path);
        if ((rc = create_schema(s))) return rc;
        ver = STORE_SCHEMA_VERSION;
        app = STORE_APP_ID;
    }
    if (app != STORE_APP_ID)
        return err_set(ERR_FORMAT, "%s: an SQLite database, but not a saelite store", s->path);
    if (ver > STORE_SCHEMA_VERSION)
        return err_set(ERR_VERSION,
                       "%s: written by a newer saelite (schema version %lld; this one reads up to %d)",
                       s->path, (long long)ver, STORE_SCHEMA_VERSION);
    if (ver < STORE_SCHEMA_VERSION) {
        if (s->readonly)
            return err_set(ERR_VERSION, "%s: old schema version %lld; open it writable to upgrade",
                           s->path, (long long)ver);
        return migrate(s, ver);
    }
    return verify_tables(s, schema_sql, NULL);
}

int store_page_for(int64_t blob_bytes)
{
    /* A row that fits on a page (up to page - 35 bytes) stays whole on the leaf: rows of 32 KiB
       took a 64 KiB page each, twice their size on disk (an audit: a d-128 bf16 hook). A larger
       row spills into overflow pages that SQLite fills exactly; what is lost is about 1/16 of a
       page per row, so pages near half the row keep that under ~6% while staying large (64 KiB
       pages wrote 256 KiB blobs 2-5x faster than 4 KiB ones: docs/store.md). */
    int p = STORE_PAGE_SIZE;
    while (blob_bytes > 0 && p > 4096 && (int64_t)p > blob_bytes / 2) p /= 2;
    return p;
}

int store_open(store **out, const char *path, int flags) { return store_open_blobs(out, path, flags, 0); }

int store_path_too_long(const char *path, int rc)
{
    sqlite3_vfs *v = sqlite3_vfs_find(NULL);
    char full[2 * PATH_MAX];
    if ((rc & 0xff) != SQLITE_CANTOPEN || !v) return 0;
    /* the length SQLite sees: its own full path, built in a buffer with room (it drops "." and
       "..", and follows symbolic links: "./././.../missing.db" is short, and a short link to a
       long directory is long). Where it cannot build one, the current directory, then the path */
    size_t len = strlen(path);
    full[0] = 0;
    int frc = v->xFullPathname(v, path, (int)sizeof full, full);
    if ((frc & 0xff) == SQLITE_OK) len = strnlen(full, sizeof full);
    else if (path[0] != '/') len += getcwd(full, sizeof full) ? strlen(full) + 1 : PATH_MAX;
    /* the bound leaves room for the journal's name ("-journal", measured on 3.40: 504 bytes
       open, 505 do not) */
    int most = v->mxPathname - 8;
    if (len <= (size_t)most) return 0;
    err_set(ERR_ARG, "%s: cannot open: its full path is %zu bytes long, and SQLite opens a database "
            "only where that is at most %d (move it to a shorter path)", path, len, most);
    return 1;
}

int store_open_blobs(store **out, const char *path, int flags, int64_t blob_bytes)
{
    *out = NULL;
    pthread_once(&sq_once, sq_setup);
    if (sq_init_rc != SQLITE_OK)
        return err_set(ERR_SQL, "%s: cannot initialise SQLite: %s", path, sqlite3_errstr(sq_init_rc));
    struct stat stt;
    if (stat(path, &stt) != 0) {
        if (errno != ENOENT || !(flags & STORE_CREATE) || (flags & STORE_READONLY))
            return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "%s: cannot open: %s", path,
                           strerror(errno));
        /* SQLite retries a failed create read-only and reports that errno: a read-only
           filesystem read "No such file or directory" (an audit); ask the directory instead */
        char dir[4096];
        const char *slash = strrchr(path, '/');
        if (!slash) snprintf(dir, sizeof dir, ".");
        else snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
        if (access(dir, W_OK | X_OK) != 0)
            return err_set(errno == ENOENT ? ERR_NOTFOUND : ERR_IO, "%s: cannot create: %s", path,
                           strerror(errno));
    } else if (!S_ISREG(stt.st_mode))
        return err_set(ERR_IO, "%s: not a regular file", path);
    store *s = mem_calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "%s: out of memory", path);
    s->wb_fd = -1;
    s->path = mem_strdup(path);
    if (!s->path) {
        mem_free(s);
        return err_set(ERR_NOMEM, "%s: out of memory", path);
    }
    s->readonly = (flags & STORE_READONLY) != 0;
    s->page_size = store_page_for(blob_bytes);
    int oflags = s->readonly ? SQLITE_OPEN_READONLY
                             : SQLITE_OPEN_READWRITE | ((flags & STORE_CREATE) ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(path, &s->db, oflags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        if (!s->db) rc = err_set(ERR_NOMEM, "%s: out of memory", path);
        else if (store_path_too_long(path, sqlite3_extended_errcode(s->db))) rc = ERR_ARG;
        else rc = store_sql_error(s, rc, "cannot open");
        store_close(s);
        return rc;
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, 10000);
    /* the file's schema is input: views and triggers may call innocuous functions only, and
     * defensive mode refuses schema tampering through our connection */
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)0);
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)0);
    sqlite3_db_config(s->db, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, (int *)0); /* sqlfuncs.c */
    rc = check_schema(s, flags);
    if (!rc && !s->readonly) {
        /* WAL: readers never block a writer (e.g. sae-train reads activations on one handle and
         * registers the SAE on another). A no-op when the file is in WAL mode already; a file
         * left in rollback mode by a killed bulk writer is switched back when nobody else has
         * it open (best effort, no waiting). */
        sqlite3_busy_timeout(s->db, 0);
        sqlite3_exec(s->db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
        sqlite3_busy_timeout(s->db, 10000);
        rc = store_exec(s, "PRAGMA synchronous = NORMAL");
    }
    /* foreign_keys stays off: the REFERENCES clauses document the schema, this module keeps them,
     * and enforcing them costs a lookup and a statement journal per inserted row. */
    if (!rc) rc = store_cache_kib(s, STORE_CACHE_KIB);
    if (!rc) rc = store_exec(s, "PRAGMA temp_store = MEMORY");
    /* the extension parts recorded in the file, so every command checks what it may read */
    if (!rc) rc = store_sae_verify(s);
    if (!rc) rc = store_ana_verify(s);
    if (!rc) rc = store_graph_verify(s);
    if (!rc) rc = store_eval_verify(s);
    if (!rc) rc = store_sweep_verify(s);
    if (rc) {
        store_close(s);
        return rc;
    }
    *out = s;
    return OK;
}

void store_close(store *s)
{
    if (!s) return;
    blob_drop(s);
    for (int i = 0; i < Q__COUNT; i++) sqlite3_finalize(s->q[i]);
    if (s->db) {
        if (s->in_tx) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        if (s->bulk) {
            sqlite3_busy_timeout(s->db, 0);
            sqlite3_exec(s->db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
        }
        sqlite3_close_v2(s->db);
    }
    mem_free(s->scratch);
    mem_free(s->path);
    mem_free(s);
}

int store_set_bulk(store *s)
{
    if (s->readonly || s->bulk) return OK;
    if (s->in_tx) return err_set(ERR_ARG, "%s: store_set_bulk inside a transaction", s->path);
    blob_drop(s);
    sqlite3_stmt *st;
    int rc = store_prepare(s, "PRAGMA journal_mode = DELETE", &st);
    if (rc) return rc;
    /* a short wait: a reader polling the file finishes in milliseconds; a long one keeps us in WAL */
    sqlite3_busy_timeout(s->db, 1000);
    int r = sqlite3_step(st);
    sqlite3_busy_timeout(s->db, 10000);
    const char *mode = r == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
    int ok = mode && !strcmp(mode, "delete");
    sqlite3_finalize(st);
    /* Another handle has the file open (a reader polling the database, sae-train's second
     * handle): SQLite refuses the switch with BUSY, or answers "wal". Stay in WAL then: slower
     * appends, still correct. */
    if ((r & 0xff) == SQLITE_BUSY || (r & 0xff) == SQLITE_LOCKED) return OK;
    if (r != SQLITE_ROW) return store_sql_error(s, r, "switching to the rollback journal");
    s->bulk = ok;
    /* Bulk transactions leave ~32 MB of dirty pages that the commit's fdatasync then writes and
     * waits for, on the writer's thread (0.87 s of the demo extract's main thread). Starting
     * their writeback as they come lets the disk work while the writer computes. */
    s->wb_fd = ok ? file_find_open_fd(s->path) : -1;
    s->wb_pending = 0;
    return OK;
}

int store_begin(store *s)
{
    blob_drop(s);
    int rc = exec_what(s, "BEGIN IMMEDIATE", "starting a transaction");
    if (!rc) s->in_tx = 1;
    return rc;
}

int store_commit(store *s)
{
    blob_drop(s);
    int rc = exec_what(s, "COMMIT", "committing");
    if (!rc) s->in_tx = 0;
    else if (sqlite3_get_autocommit(s->db)) s->in_tx = 0; /* SQLite rolled back itself */
    return rc;
}

int store_rollback(store *s)
{
    blob_drop(s);
    s->n_hooks = 0; /* cached hook rows may have been rolled back */
    if (sqlite3_get_autocommit(s->db)) {
        s->in_tx = 0;
        return OK;
    }
    int rc = sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    s->in_tx = 0;
    return rc == SQLITE_OK ? OK : store_sql_error(s, rc, "rollback");
}

int store_check(store *s)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "PRAGMA integrity_check", &st);
    if (rc) return rc;
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        if (!t || strcmp(t, "ok"))
            rc = err_set(ERR_FORMAT, "%s: integrity check failed: %s", s->path, t ? t : "?");
    } else rc = store_sql_error(s, r, "integrity check");
    sqlite3_finalize(st);
    return rc;
}

/* ---- dtypes ------------------------------------------------------------------------------- */
static const char *const dtype_names[] = {"f32", "f16", "bf16"};

const char *store_dtype_name(int d) { return d >= 0 && d <= 2 ? dtype_names[d] : "?"; }
int store_dtype_size(int d) { return d == STORE_F32 ? 4 : 2; }

int store_dtype_parse(const char *name, int *dtype)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, dtype_names[i])) {
            *dtype = i;
            return OK;
        }
    return err_set(ERR_ARG, "unknown dtype '%s' (want f32, f16 or bf16)", name);
}

static int scratch_reserve(store *s, size_t n)
{
    if (s->scratch_cap >= n) return OK;
    void *p = mem_realloc(s->scratch, n);
    if (!p) return err_set(ERR_NOMEM, "%s: out of memory (%zu bytes)", s->path, n);
    s->scratch = p;
    s->scratch_cap = n;
    return OK;
}

/* ---- models, documents, sequences, tokens ------------------------------------------------- */
static int step_done(store *s, sqlite3_stmt *st, const char *what)
{
    int r = sqlite3_step(st);
    int rc = r == SQLITE_DONE || r == SQLITE_ROW ? OK : store_sql_error(s, r, what);
    sqlite3_reset(st);
    return rc;
}

int store_model_add(store *s, const char *name, const char *path, const char *config_json,
                    const char *checksum, int64_t *id)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT id FROM models WHERE checksum = ?1 ORDER BY id LIMIT 1", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, checksum, -1, SQLITE_STATIC);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) *id = sqlite3_column_int64(st, 0);
    else if (r != SQLITE_DONE) rc = store_sql_error(s, r, "reading models");
    sqlite3_finalize(st);
    if (rc || r == SQLITE_ROW) return rc;
    if ((rc = store_prepare(s, "INSERT INTO models (name, path, config, checksum) VALUES (?1, ?2, ?3, ?4)",
                            &st)))
        return rc;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, path, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, config_json, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, checksum, -1, SQLITE_STATIC);
    rc = step_done(s, st, "adding a model");
    sqlite3_finalize(st);
    if (!rc) *id = sqlite3_last_insert_rowid(s->db);
    return rc;
}

static void copy_text(char *dst, size_t cap, const unsigned char *src)
{
    snprintf(dst, cap, "%s", src ? (const char *)src : "");
}

int store_model_list(store *s, store_model **models, size_t *n)
{
    *models = NULL;
    *n = 0;
    int64_t cnt;
    int rc = store_query_i64(s, "SELECT count(*) FROM models", &cnt);
    if (rc) return rc;
    store_model *m = mem_calloc((size_t)cnt + 1, sizeof *m);
    if (!m) return err_set(ERR_NOMEM, "%s: out of memory", s->path);
    sqlite3_stmt *st;
    if ((rc = store_prepare(s, "SELECT id, name, path, checksum FROM models ORDER BY id", &st))) {
        mem_free(m);
        return rc;
    }
    size_t k = 0;
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW && k < (size_t)cnt) {
        m[k].id = sqlite3_column_int64(st, 0);
        copy_text(m[k].name, sizeof m[k].name, sqlite3_column_text(st, 1));
        copy_text(m[k].path, sizeof m[k].path, sqlite3_column_text(st, 2));
        copy_text(m[k].checksum, sizeof m[k].checksum, sqlite3_column_text(st, 3));
        k++;
    }
    if (r != SQLITE_DONE && r != SQLITE_ROW) rc = store_sql_error(s, r, "reading models");
    sqlite3_finalize(st);
    if (rc) {
        mem_free(m);
        return rc;
    }
    *models = m;
    *n = k;
    return OK;
}

int store_doc_add(store *s, const char *source, int64_t ordinal, const char *name,
                  const char *genre, const char *text, size_t len, int64_t *id)
{
    char sum[17];
    hex64(sum, text ? hash_fnv1a(HASH_FNV1A_INIT, text, len) : 0);
    sqlite3_stmt *st;
    int rc = q_get(s, Q_DOC_FIND, &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, source, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, ordinal);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) {
        *id = sqlite3_column_int64(st, 0);
        const char *old = (const char *)sqlite3_column_text(st, 1);
        if (!old) rc = store_sql_error(s, SQLITE_NOMEM, "reading documents");
        else if (strcmp(old, sum))
            rc = err_set(ERR_FORMAT,
                         "%s: document %lld of %s differs from the one stored (the corpus changed; "
                         "use a new --db)", s->path, (long long)ordinal, source);
        sqlite3_reset(st);
        return rc;
    }
    sqlite3_reset(st);
    if (r != SQLITE_DONE) return store_sql_error(s, r, "reading documents");
    if ((rc = q_get(s, Q_DOC_ADD, &st))) return rc;
    sqlite3_bind_text(st, 1, source, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, ordinal);
    sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
    if (genre && genre[0]) sqlite3_bind_text(st, 4, genre, -1, SQLITE_STATIC);
    if (text) sqlite3_bind_text64(st, 5, text, len, SQLITE_STATIC, SQLITE_UTF8);
    sqlite3_bind_text(st, 6, sum, -1, SQLITE_TRANSIENT);
    if ((rc = step_done(s, st, "adding a document"))) return rc;
    *id = sqlite3_last_insert_rowid(s->db);
    return OK;
}

int store_doc_other_source(store *s, const char *source, const uint64_t *sums, int64_t n,
                           char *other, size_t cap)
{
    char sum[17];
    other[0] = 0;
    if (n < 1) return OK;
    hex64(sum, sums[0]);
    sqlite3_stmt *st, *docs;
    /* candidates open with the same document; the first whose stored documents all agree wins */
    int rc = store_prepare(s, "SELECT source FROM documents WHERE ordinal = 0 AND checksum = ?2 "
                           "AND source != ?1 AND NOT EXISTS (SELECT 1 FROM documents WHERE source "
                           "= ?1) ORDER BY id", &st);
    if (rc) return rc;
    rc = store_prepare(s, "SELECT ordinal, checksum FROM documents WHERE source = ?1 AND ordinal "
                       "< ?2", &docs);
    if (rc) {
        sqlite3_finalize(st);
        return rc;
    }
    sqlite3_bind_text(st, 1, source, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, sum, -1, SQLITE_TRANSIENT);
    int r;
    while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
        const char *o = (const char *)sqlite3_column_text(st, 0);
        if (!o) continue;
        sqlite3_bind_text(docs, 1, o, -1, SQLITE_STATIC);
        sqlite3_bind_int64(docs, 2, n);
        int same = 1, d;
        while (same && (d = sqlite3_step(docs)) == SQLITE_ROW) {
            int64_t i = sqlite3_column_int64(docs, 0);
            const char *c = (const char *)sqlite3_column_text(docs, 1);
            hex64(sum, i >= 0 ? sums[i] : 0);
            same = i >= 0 && c && !strcmp(c, sum);
        }
        if (same && d != SQLITE_DONE) rc = store_sql_error(s, d, "reading documents");
        else if (same) snprintf(other, cap, "%s", o);
        sqlite3_reset(docs);
        if (other[0]) break;
    }
    if (!rc && !other[0] && r != SQLITE_DONE) rc = store_sql_error(s, r, "reading documents");
    sqlite3_finalize(docs);
    sqlite3_finalize(st);
    return rc;
}

/* The bulk writer's contract (store_set_bulk): its rows go in inside a transaction. */
static int bulk_tx_check(const store *s, const char *what)
{
    if (s->bulk && sqlite3_get_autocommit(s->db))
        return err_set(ERR_ARG, "%s: %s outside a transaction in bulk mode (a journal and three "
                       "fsyncs per row)", s->path, what);
    return OK;
}

int store_seq_add(store *s, int64_t doc_id, int64_t start, int bos, const int *ids, int T,
                  int64_t *id, int *inserted)
{
    if (inserted) *inserted = 0;
    sqlite3_stmt *st;
    int rc = q_get(s, Q_SEQ_FIND, &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, doc_id);
    sqlite3_bind_int64(st, 2, start);
    sqlite3_bind_int(st, 3, T);
    sqlite3_bind_int(st, 4, bos);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) {
        *id = sqlite3_column_int64(st, 0);
        const void *b = sqlite3_column_blob(st, 1);
        int nb = sqlite3_column_bytes(st, 1);
        if (!ids ? nb != 0 : nb != (int64_t)T * 4 || !b || memcmp(b, ids, (size_t)T * 4))
            rc = err_set(ERR_FORMAT, "%s: sequence %lld holds other tokens than this run produced "
                         "(different tokenizer or corpus?)", s->path, (long long)*id);
        sqlite3_reset(st);
        return rc;
    }
    sqlite3_reset(st);
    if (r != SQLITE_DONE) return store_sql_error(s, r, "reading sequences");
    if ((rc = bulk_tx_check(s, "adding a sequence")) || (rc = q_get(s, Q_SEQ_ADD, &st))) return rc;
    sqlite3_bind_int64(st, 1, doc_id);
    sqlite3_bind_int64(st, 2, start);
    sqlite3_bind_int(st, 3, T);
    sqlite3_bind_int(st, 4, bos);
    sqlite3_bind_blob(st, 5, ids ? (const void *)ids : "", ids ? T * 4 : 0, SQLITE_STATIC);
    if ((rc = step_done(s, st, "adding a sequence"))) return rc;
    *id = sqlite3_last_insert_rowid(s->db);
    if (inserted) *inserted = 1;
    return OK;
}

int store_seq_tokens(store *s, int64_t seq_id, int *ids, int *T)
{
    sqlite3_stmt *st;
    int rc = q_get(s, Q_SEQ_TOKENS, &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, seq_id);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) {
        int n = sqlite3_column_int(st, 0);
        const void *b = sqlite3_column_blob(st, 1);
        int nb = sqlite3_column_bytes(st, 1);
        if (nb == 0 && n > 0)
            rc = err_set(ERR_NOTFOUND, "%s: sequence %lld has no token ids (imported without "
                         "--tokens)", s->path, (long long)seq_id);
        else if (nb != (int64_t)n * 4 || (n && !b)) /* n comes from the file: no int overflow */
            rc = !b && n ? store_sql_error(s, SQLITE_NOMEM, "reading sequences")
                         : err_set(ERR_FORMAT, "%s: sequence %lld: token blob has %d bytes, "
                                        "want %lld", s->path, (long long)seq_id, nb,
                                        (long long)n * 4);
        else if (ids && n > *T)
            rc = err_set(ERR_SHAPE, "sequence %lld has %d tokens, buffer holds %d",
                         (long long)seq_id, n, *T);
        else {
            if (ids) memcpy(ids, b, (size_t)n * 4);
            *T = n;
        }
    } else if (r == SQLITE_DONE)
        rc = err_set(ERR_NOTFOUND, "%s: no sequence %lld", s->path, (long long)seq_id);
    else rc = store_sql_error(s, r, "reading sequences");
    sqlite3_reset(st);
    return rc;
}

int store_tokens_add(store *s, int64_t seq_id, int T, const int *ids, const char *const *text,
                     const int64_t *byte_start, const int64_t *byte_end, const char *const *tags)
{
    sqlite3_stmt *st;
    int rc = bulk_tx_check(s, "adding tokens");
    for (int i = 0; !rc && i < T;) {
        int n = T - i >= TOK_ROWS ? TOK_ROWS : 1;
        if ((rc = q_get(s, n > 1 ? Q_TOK_ADD_ROWS : Q_TOK_ADD, &st))) return rc;
        for (int r = 0; r < n; r++, i++) {
            int c = r * TOK_COLS;
            sqlite3_bind_int64(st, c + 1, seq_id);
            sqlite3_bind_int(st, c + 2, i);
            sqlite3_bind_int(st, c + 3, ids[i]);
            if (text && text[i]) sqlite3_bind_text(st, c + 4, text[i], -1, SQLITE_STATIC);
            if (byte_start && byte_start[i] >= 0) sqlite3_bind_int64(st, c + 5, byte_start[i]);
            if (byte_end && byte_end[i] >= 0) sqlite3_bind_int64(st, c + 6, byte_end[i]);
            if (tags && tags[i]) sqlite3_bind_text(st, c + 7, tags[i], -1, SQLITE_STATIC);
        }
        rc = step_done(s, st, "adding tokens");
    }
    return rc;
}

/* ---- hooks -------------------------------------------------------------------------------- */
/* A hooks row; ERR_FORMAT when its sizes are outside what saelite writes (the file is input:
 * callers size buffers from width and seq_len). */
#define STORE_MAX_DIM (1 << 24)
/* The most bytes of one sequence's blob: SQLITE_LIMIT_LENGTH bounds the whole activations
 * record, so 64 bytes stay free for its header and integer columns (33 at most). */
static int64_t seq_bytes_max(void) { return sq_max_blob - 64; }
static int hook_row(store *s, sqlite3_stmt *st, store_hook *h)
{
    memset(h, 0, sizeof *h);
    h->id = sqlite3_column_int64(st, 0);
    h->model_id = sqlite3_column_int64(st, 1);
    copy_text(h->name, sizeof h->name, sqlite3_column_text(st, 2));
    h->layer = sqlite3_column_int(st, 3);
    const char *dt = (const char *)sqlite3_column_text(st, 5);
    int64_t width = sqlite3_column_int64(st, 4), seq_len = sqlite3_column_int64(st, 6);
    if (width < 1 || width > STORE_MAX_DIM || seq_len < 1 || seq_len > STORE_MAX_DIM || !dt ||
        store_dtype_parse(dt, &h->dtype))
        return err_set(ERR_FORMAT, "%s: hook %lld ('%s') has width %lld, seq_len %lld, dtype '%s' "
                       "(want 1..%d, 1..%d, f32|f16|bf16: damaged?)", s->path, (long long)h->id,
                       h->name, (long long)width, (long long)seq_len, dt ? dt : "", STORE_MAX_DIM,
                       STORE_MAX_DIM);
    /* readers size a sequence's buffer from the row: a forged seq_len of 16M at width 512 read
       "shuffle buffer of 2872 tokens: out of memory". No row store_hook_add writes holds more
       than one blob can store (both within 2^24, so no overflow) */
    int64_t bytes = width * seq_len * store_dtype_size(h->dtype);
    if (bytes > seq_bytes_max())
        return err_set(ERR_FORMAT, "%s: hook %lld ('%s') has seq_len %lld x width %lld: a sequence of "
                       "%lld bytes in %s, more than SQLite stores in one value (%lld: damaged?)",
                       s->path, (long long)h->id, h->name, (long long)seq_len, (long long)width,
                       (long long)bytes, dt, (long long)seq_bytes_max());
    h->width = (int)width;
    h->seq_len = (int)seq_len;
    return OK;
}

static int hook_counts(store *s, store_hook *h)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT count(*), coalesce(sum(n_tokens), 0) FROM activations "
                              "WHERE hook_id = ?1", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, h->id);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) {
        h->n_seqs = sqlite3_column_int64(st, 0);
        h->n_tokens = sqlite3_column_int64(st, 1);
    } else rc = store_sql_error(s, r, "counting activations");
    sqlite3_finalize(st);
    return rc;
}

/* Hook row by id, cached (width/dtype are needed on every activation read/write). */
static int hook_get(store *s, int64_t hook_id, store_hook **out)
{
    for (int i = 0; i < s->n_hooks; i++)
        if (s->hooks[i].id == hook_id) {
            *out = &s->hooks[i];
            return OK;
        }
    sqlite3_stmt *st;
    int rc = q_get(s, Q_HOOK_BY_ID, &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, hook_id);
    int r = sqlite3_step(st);
    store_hook h;
    int hr = r == SQLITE_ROW ? hook_row(s, st, &h) : OK;
    sqlite3_reset(st);
    if (hr) return hr;
    if (r == SQLITE_DONE) return err_set(ERR_NOTFOUND, "%s: no hook with id %lld", s->path, (long long)hook_id);
    if (r != SQLITE_ROW) return store_sql_error(s, r, "reading hooks");
    if (s->n_hooks == HOOK_CACHE) s->n_hooks = 0;
    s->hooks[s->n_hooks] = h;
    *out = &s->hooks[s->n_hooks++];
    return OK;
}

/* A stored hook takes more rows of its own width, dtype and window length only. */
static int hook_fits(store *s, const store_hook *h, int width, int dtype, int seq_len)
{
    if (h->width != width)
        return err_set(ERR_SHAPE, "%s: hook %s is stored with width %d, not %d (a different "
                       "model?)", s->path, h->name, h->width, width);
    if (h->dtype != dtype)
        return err_set(ERR_SHAPE, "%s: hook %s is stored as %s, not %s (use the same --dtype "
                       "or a new --db)", s->path, h->name, store_dtype_name(h->dtype),
                       store_dtype_name(dtype));
    if (h->seq_len != seq_len)
        return err_set(ERR_SHAPE, "%s: hook %s is stored with sequence length %d, not %d (use "
                       "the same --ctx for extract, --seq-len for import, or a new --db)", s->path,
                       h->name, h->seq_len, seq_len);
    return OK;
}

int store_hook_check(store *s, const char *name, int width, int dtype, int seq_len)
{
    store_hook h;
    int rc = store_hook_find(s, name, &h);
    if (rc == ERR_NOTFOUND) {
        err_clear();
        return OK;
    }
    return rc ? rc : hook_fits(s, &h, width, dtype, seq_len);
}

int store_hook_size_check(const char *path, const char *name, int width, int dtype, int seq_len)
{
    pthread_once(&sq_once, sq_setup);
    if (width < 1 || width > STORE_MAX_DIM || seq_len < 1 || seq_len > STORE_MAX_DIM)
        return err_set(ERR_ARG, "%s: hook %s: width %d, %d tokens a sequence (want 1..%d each)", path,
                       name, width, seq_len, STORE_MAX_DIM);
    /* (a full window of exactly 1e9 bytes bound, then failed at its step: a review) */
    int64_t bytes = (int64_t)seq_len * width * store_dtype_size(dtype);
    if (bytes <= seq_bytes_max()) return OK;
    return err_set(ERR_ARG, "%s: hook %s: a sequence of %d tokens x width %d in %s is %lld bytes, "
                   "more than SQLite stores in one value (%lld): fewer tokens a sequence%s", path,
                   name, seq_len, width, store_dtype_name(dtype), (long long)bytes,
                   (long long)seq_bytes_max(),
                   dtype == STORE_F32 ? ", or a 2-byte --dtype" : "");
}

int store_hook_add(store *s, int64_t model_id, const char *name, int layer, int width, int dtype,
                   int seq_len, store_hook *out)
{
    if (strlen(name) >= sizeof out->name)
        return err_set(ERR_ARG, "hook name too long: %s", name);
    int rc = store_hook_size_check(s->path, name, width, dtype, seq_len);
    if (rc) return rc;
    sqlite3_stmt *st;
    rc = store_prepare(s, "SELECT id, model_id, name, layer, width, dtype, seq_len FROM hooks "
                          "WHERE model_id = ?1 AND name = ?2", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, model_id);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    int r = sqlite3_step(st);
    int hr = r == SQLITE_ROW ? hook_row(s, st, out) : OK;
    sqlite3_finalize(st);
    if (hr) return hr;
    if (r == SQLITE_ROW) {
        if ((rc = hook_fits(s, out, width, dtype, seq_len))) return rc;
        return hook_counts(s, out);
    }
    if (r != SQLITE_DONE) return store_sql_error(s, r, "reading hooks");
    if ((rc = store_prepare(s, "INSERT INTO hooks (model_id, name, layer, width, dtype, seq_len) "
                               "VALUES (?1, ?2, ?3, ?4, ?5, ?6)", &st)))
        return rc;
    sqlite3_bind_int64(st, 1, model_id);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, layer);
    sqlite3_bind_int(st, 4, width);
    sqlite3_bind_text(st, 5, store_dtype_name(dtype), -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 6, seq_len);
    rc = step_done(s, st, "adding a hook");
    sqlite3_finalize(st);
    if (rc) return rc;
    memset(out, 0, sizeof *out);
    out->id = sqlite3_last_insert_rowid(s->db);
    out->model_id = model_id;
    snprintf(out->name, sizeof out->name, "%s", name);
    out->layer = layer;
    out->width = width;
    out->dtype = dtype;
    out->seq_len = seq_len;
    return OK;
}

int store_hook_list(store *s, store_hook **hooks, size_t *n)
{
    *hooks = NULL;
    *n = 0;
    int64_t cnt;
    int rc = store_query_i64(s, "SELECT count(*) FROM hooks", &cnt);
    if (rc) return rc;
    store_hook *h = mem_calloc((size_t)cnt + 1, sizeof *h);
    if (!h) return err_set(ERR_NOMEM, "%s: out of memory", s->path);
    sqlite3_stmt *st;
    if ((rc = store_prepare(s, "SELECT id, model_id, name, layer, width, dtype, seq_len FROM hooks "
                               "ORDER BY id", &st))) {
        mem_free(h);
        return rc;
    }
    size_t k = 0;
    int r;
    while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW && k < (size_t)cnt) rc = hook_row(s, st, &h[k++]);
    if (!rc && r != SQLITE_DONE && r != SQLITE_ROW) rc = store_sql_error(s, r, "reading hooks");
    sqlite3_finalize(st);
    for (size_t i = 0; !rc && i < k; i++) rc = hook_counts(s, &h[i]);
    if (rc) {
        mem_free(h);
        return rc;
    }
    *hooks = h;
    *n = k;
    return OK;
}

int store_hook_find(store *s, const char *name, store_hook *out)
{
    store_hook *h;
    size_t n;
    int rc = store_hook_list(s, &h, &n);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(h[i].name, name)) {
            *out = h[i];
            mem_free(h);
            return OK;
        }
    char list[512] = "";
    size_t len = 0;
    for (size_t i = 0; i < n && len + 1 < sizeof list; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", h[i].name);
    mem_free(h);
    return err_set(ERR_NOTFOUND, "%s: no hook '%s' (stored hooks: %s)", s->path, name,
                   n ? list : "none");
}

/* ---- activations -------------------------------------------------------------------------- */
int store_seq_is_val(int64_t seq_id, double val_frac)
{
    uint64_t x = (uint64_t)seq_id ^ 0x5ae11e5ae11eULL;
    double u = (double)(hash_splitmix64(&x) >> 11) * 0x1.0p-53;
    return u < val_frac;
}

static int in_split(int64_t seq, int split, double val_frac)
{
    if (split == STORE_SPLIT_ALL) return 1;
    int v = store_seq_is_val(seq, val_frac);
    return split == STORE_SPLIT_VAL ? v : !v;
}

int store_seq_list(store *s, int64_t hook_id, int split, double val_frac, int64_t **ids,
                   size_t *n)
{
    *ids = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT sequence_id FROM activations WHERE hook_id = ?1 "
                              "ORDER BY sequence_id", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, hook_id);
    size_t cap = 0, k = 0;
    int64_t *v = NULL;
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        if (!in_split(id, split, val_frac)) continue;
        if (k == cap) {
            cap = cap ? cap * 2 : 256;
            int64_t *nv = mem_realloc(v, cap * sizeof *v);
            if (!nv) {
                rc = err_set(ERR_NOMEM, "%s: out of memory", s->path);
                break;
            }
            v = nv;
        }
        v[k++] = id;
    }
    if (!rc && r != SQLITE_DONE) rc = store_sql_error(s, r, "listing sequences");
    sqlite3_finalize(st);
    if (rc) {
        mem_free(v);
        return rc;
    }
    *ids = v;
    *n = k;
    return OK;
}

int store_hook_unpaired(store *s, int64_t hook_a, int64_t hook_b, int64_t *n, int64_t *first)
{
    *n = 0;
    *first = -1;
    sqlite3_stmt *st;
    /* both sides on the (hook_id, sequence_id) index: one probe per sequence of hook_a */
    int rc = store_prepare(s, "SELECT count(*), min(a.sequence_id) FROM activations a WHERE "
                              "a.hook_id = ?1 AND NOT EXISTS (SELECT 1 FROM activations b WHERE "
                              "b.hook_id = ?2 AND b.sequence_id = a.sequence_id)", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, hook_a);
    sqlite3_bind_int64(st, 2, hook_b);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) {
        *n = sqlite3_column_int64(st, 0);
        if (*n > 0) *first = sqlite3_column_int64(st, 1);
    } else rc = store_sql_error(s, r, "pairing two hooks' sequences");
    sqlite3_finalize(st);
    return rc;
}

/* A stored 16-bit value that is an infinity or a NaN (its exponent field all ones): what
 * common/half.h's conversions give for a non-finite input or a finite one past the type's range. */
static inline uint16_t half_exp_mask(int dtype) { return dtype == STORE_F16 ? 0x7c00u : 0x7f80u; }

static inline int half_bad(int dtype, uint16_t v)
{
    return (v & half_exp_mask(dtype)) == half_exp_mask(dtype);
}

/* The first of o[0..n) that half_bad refuses, or -1: 32 values at a time with AVX-512BW (the
 * one-by-one loop, a branch per value, was 0.5 s of the demo extract's 1.7 GB), then that
 * block's values in order for the index. */
static int64_t half_first_bad(int dtype, const uint16_t *o, size_t n)
{
    size_t i = 0;
#if defined(__AVX512BW__)
    const __m512i m = _mm512_set1_epi16((short)half_exp_mask(dtype));
    for (; i + 32 <= n; i += 32)
        if (_mm512_cmpeq_epi16_mask(_mm512_and_si512(_mm512_loadu_si512(o + i), m), m)) break;
#endif
    for (; i < n; i++)
        if (half_bad(dtype, o[i])) return (int64_t)i;
    return -1;
}

int64_t store_act_first_bad(int dtype, const float *x, int64_t n, int *overflow)
{
    *overflow = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return i;
        if (dtype != STORE_F32 &&
            half_bad(dtype, dtype == STORE_F16 ? half_f32_to_f16(x[i]) : half_f32_to_bf16(x[i]))) {
            *overflow = 1;
            return i;
        }
    }
    return -1;
}

enum { BAD_WRITE, BAD_OVERFLOW, BAD_READ };

/* The one message for an activation a hook cannot hold: refused on write (non-finite), beyond
 * the hook's dtype (finite, overflow), or found in a stored row (read). */
static int bad_value(const store *s, int code, const store_hook *h, int64_t seq, const float *x,
                     int64_t i, int how)
{
    int t = (int)(i / h->width), j = (int)(i % h->width);
    const char *dt = store_dtype_name(h->dtype), *wider = h->dtype == STORE_F16 ? "bf16 or f32" : "f32";
    if (how == BAD_OVERFLOW)
        return err_set(code, "%s: hook %s, sequence %lld: %g at token %d, dimension %d is beyond "
                       "%s's range; store this hook as %s (--dtype)", s->path, h->name,
                       (long long)seq, (double)x[i], t, j, dt, wider);
    if (how == BAD_READ && h->dtype != STORE_F32 && isinf(x[i]))
        /* written before writes were checked: a conversion overflow, not damage */
        return err_set(code, "%s: hook %s, sequence %lld: %g at token %d, dimension %d: a value "
                       "beyond %s's range when it was stored; extract this hook again with "
                       "--dtype %s", s->path, h->name, (long long)seq, (double)x[i], t, j, dt, wider);
    return err_set(code, "%s: hook %s, sequence %lld: non-finite value (%g) at token %d, "
                   "dimension %d", s->path, h->name, (long long)seq, isnan(x[i]) ? NAN : (double)x[i], t, j);
}

int store_act_write(store *s, int64_t hook_id, int64_t seq_id, const float *x, int T)
{
    store_hook *h;
    int rc = hook_get(s, hook_id, &h);
    if (rc) return rc;
    if (T <= 0 || T > h->seq_len)
        return err_set(ERR_SHAPE, "%s: %d tokens for hook %s (sequence length %d)", s->path, T,
                       h->name, h->seq_len);
    size_t n = (size_t)T * (size_t)h->width;
    int dtype = h->dtype;
    const void *data = x;
    size_t nbytes = n * (size_t)store_dtype_size(dtype);
    /* what the readers refuse (blob_read) is not written: checked on the converted values, so
       each value is converted once (an all-ones exponent: non-finite in, or past the range) */
    int64_t bad = -1;
    if (dtype != STORE_F32) {
        if ((rc = scratch_reserve(s, nbytes))) return rc;
        uint16_t *o = s->scratch;
        if (dtype == STORE_F16) half_f32_to_f16_n(o, x, n);
        else half_f32_to_bf16_n(o, x, n);
        data = o;
        bad = half_first_bad(dtype, o, n);
    } else {
        bad = ck_first_nonfinite(x, (int64_t)n);
    }
    if (bad >= 0)
        return bad_value(s, ERR_ARG, h, seq_id, x, bad, isfinite(x[bad]) ? BAD_OVERFLOW : BAD_WRITE);
    blob_drop(s);
    sqlite3_stmt *st;
    if ((rc = bulk_tx_check(s, "writing activations")) || (rc = q_get(s, Q_ACT_WRITE, &st)))
        return rc;
    sqlite3_bind_int64(st, 1, hook_id);
    sqlite3_bind_int64(st, 2, seq_id);
    sqlite3_bind_int(st, 3, T);
    /* SQLITE_TOOBIG left the blob NULL and read "NOT NULL constraint failed" (a review);
       store_hook_size_check keeps saelite's writers below the limit */
    if (sqlite3_bind_blob64(st, 4, data, nbytes, SQLITE_STATIC) != SQLITE_OK) {
        sqlite3_clear_bindings(st);
        return err_set(ERR_ARG, "%s: writing activations: a sequence of %llu bytes is more than "
                       "SQLite stores in one value (%lld)", s->path, (unsigned long long)nbytes,
                       (long long)sq_max_blob);
    }
    rc = step_done(s, st, "writing activations");
    if (!rc && s->wb_fd >= 0 && (s->wb_pending += (int64_t)nbytes) >= STORE_WRITEBACK_BYTES) {
        s->wb_pending = 0;
        file_writeback_start(s->wb_fd);
    }
    sqlite3_clear_bindings(st);
    return rc;
}

/* The activations row of (hook, sequence): *found, and its n_tokens in *T (0 when none). */
static int act_find(store *s, int64_t hook_id, int64_t seq_id, int *found, int *T)
{
    sqlite3_stmt *st;
    int rc = q_get(s, Q_ACT_FIND, &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, hook_id);
    sqlite3_bind_int64(st, 2, seq_id);
    int r = sqlite3_step(st);
    *found = r == SQLITE_ROW;
    *T = r == SQLITE_ROW ? sqlite3_column_int(st, 1) : 0;
    sqlite3_reset(st);
    if (r != SQLITE_ROW && r != SQLITE_DONE) return store_sql_error(s, r, "reading activations");
    return OK;
}

int store_act_exists(store *s, int64_t hook_id, int64_t seq_id, int *exists)
{
    int T;
    return act_find(s, hook_id, seq_id, exists, &T);
}

int store_act_rows(store *s, int64_t hook_id, int64_t seq_id, int *T)
{
    int found;
    return act_find(s, hook_id, seq_id, &found, T);
}

int store_act_other_len(store *s, int64_t hook_id, int64_t doc_id, int64_t start, int bos, int T,
                        int *other_T, int64_t *other_seq)
{
    sqlite3_stmt *st;
    int rc = q_get(s, Q_ACT_OTHER_LEN, &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, hook_id);
    sqlite3_bind_int64(st, 2, doc_id);
    sqlite3_bind_int64(st, 3, start);
    sqlite3_bind_int(st, 4, bos);
    sqlite3_bind_int(st, 5, T);
    int r = sqlite3_step(st);
    *other_T = r == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    *other_seq = r == SQLITE_ROW ? sqlite3_column_int64(st, 1) : -1;
    sqlite3_reset(st);
    if (r != SQLITE_ROW && r != SQLITE_DONE) return store_sql_error(s, r, "reading sequences");
    return OK;
}

int store_act_delete(store *s, int64_t hook_id, int64_t seq_id)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "DELETE FROM activations WHERE hook_id = ?1 AND sequence_id = ?2", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, hook_id);
    sqlite3_bind_int64(st, 2, seq_id);
    int r = sqlite3_step(st);
    sqlite3_finalize(st);
    return r == SQLITE_DONE ? OK : store_sql_error(s, r, "deleting activations");
}

int store_act_delete_doc(store *s, int64_t hook_id, int64_t doc_id)
{
    static const char *const sql[3] = {
        "DELETE FROM activations WHERE hook_id = ?1 AND sequence_id IN (SELECT id FROM sequences "
        "WHERE document_id = ?2)",
        "DELETE FROM tokens WHERE sequence_id IN (SELECT id FROM sequences WHERE document_id = ?2 "
        "AND id NOT IN (SELECT sequence_id FROM activations))",
        "DELETE FROM sequences WHERE document_id = ?2 AND id NOT IN (SELECT sequence_id FROM "
        "activations)"};
    int rc = OK;
    for (int i = 0; i < 3 && !rc; i++) {
        sqlite3_stmt *st;
        if ((rc = store_prepare(s, sql[i], &st))) break;
        sqlite3_bind_int64(st, 1, hook_id);
        sqlite3_bind_int64(st, 2, doc_id);
        int r = sqlite3_step(st);
        sqlite3_finalize(st);
        if (r != SQLITE_DONE) rc = store_sql_error(s, r, "deleting an earlier import");
    }
    return rc;
}

/* The activations of one (hook, sequence) row as float32 into out [T, width]. Non-finite values
 * are refused here, where every reader (sae-train's source, analyze, eval, export) gets them,
 * naming the place: a NaN read on would only show up later as a NaN loss or a "mse nan". */
static int blob_read(store *s, sqlite3_blob **bp, const store_hook *h, int64_t rowid, int64_t seq,
                     int T, float *out)
{
    int r;
    if (*bp) {
        r = sqlite3_blob_reopen(*bp, rowid);
        if (r != SQLITE_OK) {
            sqlite3_blob_close(*bp);
            *bp = NULL;
        }
    }
    if (!*bp) {
        r = sqlite3_blob_open(s->db, "main", "activations", "data", rowid, 0, bp);
        if (r != SQLITE_OK) {
            int rc = store_sql_error(s, r, "opening an activation blob");
            if (*bp) sqlite3_blob_close(*bp);
            *bp = NULL;
            return rc;
        }
    }
    size_t n = (size_t)T * (size_t)h->width;
    size_t nbytes = n * (size_t)store_dtype_size(h->dtype);
    if ((size_t)sqlite3_blob_bytes(*bp) != nbytes)
        return err_set(ERR_FORMAT, "%s: activation row %lld has %d bytes, want %zu (%d x %d %s)",
                       s->path, (long long)rowid, sqlite3_blob_bytes(*bp), nbytes, T, h->width,
                       store_dtype_name(h->dtype));
    if (h->dtype == STORE_F32) {
        r = sqlite3_blob_read(*bp, out, (int)nbytes, 0);
        if (r != SQLITE_OK) return store_sql_error(s, r, "reading an activation blob");
    } else {
        int rc = scratch_reserve(s, nbytes);
        if (rc) return rc;
        uint16_t *half = s->scratch;
        r = sqlite3_blob_read(*bp, half, (int)nbytes, 0);
        if (r != SQLITE_OK) return store_sql_error(s, r, "reading an activation blob");
        if (h->dtype == STORE_F16) half_f16_to_f32_n(out, half, n);
        else half_bf16_to_f32_n(out, half, n);
    }
    int64_t bad = ck_first_nonfinite(out, (int64_t)n);
    return bad < 0 ? OK : bad_value(s, ERR_FORMAT, h, seq, out, bad, BAD_READ);
}

int store_act_read(store *s, int64_t hook_id, int64_t seq_id, float *out, int *T)
{
    store_hook *h;
    int rc = hook_get(s, hook_id, &h);
    if (rc) return rc;
    sqlite3_stmt *st;
    if ((rc = q_get(s, Q_ACT_FIND, &st))) return rc;
    sqlite3_bind_int64(st, 1, hook_id);
    sqlite3_bind_int64(st, 2, seq_id);
    int r = sqlite3_step(st);
    int64_t rowid = 0;
    int n = 0;
    if (r == SQLITE_ROW) {
        rowid = sqlite3_column_int64(st, 0);
        n = sqlite3_column_int(st, 1);
    }
    sqlite3_reset(st);
    if (r == SQLITE_DONE)
        return err_set(ERR_NOTFOUND, "%s: no activations of hook %s for sequence %lld", s->path,
                       h->name, (long long)seq_id);
    if (r != SQLITE_ROW) return store_sql_error(s, r, "reading activations");
    if (n <= 0 || n > h->seq_len)
        return err_set(ERR_FORMAT, "%s: activation row %lld has %d tokens (sequence length %d)",
                       s->path, (long long)rowid, n, h->seq_len);
    store_hook hc = *h; /* the cache slot could move if blob_read's errors re-enter hook_get */
    if ((rc = blob_read(s, &s->blob, &hc, rowid, seq_id, n, out))) return rc;
    *T = n;
    return OK;
}

int store_act_fingerprint(store *s, int64_t hook_id, const int64_t *seqs, size_t n, int samples,
                          uint64_t h[2])
{
    store_hook *hk;
    int rc = hook_get(s, hook_id, &hk);
    if (rc || !n || samples < 1) return rc;
    float *buf = mem_alloc((size_t)hk->seq_len * hk->width * sizeof *buf);
    if (!buf) return err_set(ERR_NOMEM, "out of memory");
    const int width = hk->width;
    size_t m = n < (size_t)samples ? n : (size_t)samples;
    for (size_t q = 0; q < m && !rc; q++) {
        size_t i = m == 1 ? 0 : q * (n - 1) / (m - 1); /* the first and the last among them */
        int T = 0;
        if ((rc = store_act_read(s, hook_id, seqs[i], buf, &T))) break;
        hash_absorb128(h, (uint64_t)seqs[i]);
        hash_absorb128(h, hash_fnv1a(HASH_FNV1A_INIT, buf, (size_t)T * width * sizeof *buf));
    }
    mem_free(buf);
    return rc;
}

/* ---- training iterator -------------------------------------------------------------------- */
typedef struct { int64_t rowid, seq; int T; } iter_row;

struct store_iter {
    store *s;
    store_hook h;
    iter_row *rows;
    size_t n, pos, *order;
    int64_t tokens;
    sqlite3_blob *blob;
};

int store_iter_open(store_iter **out, store *s, int64_t hook_id, int split, double val_frac,
                    uint64_t seed)
{
    *out = NULL;
    store_hook *h;
    int rc = hook_get(s, hook_id, &h);
    if (rc) return rc;
    store_iter *it = mem_calloc(1, sizeof *it);
    if (!it) return err_set(ERR_NOMEM, "%s: out of memory", s->path);
    it->s = s;
    it->h = *h;
    sqlite3_stmt *st;
    if ((rc = store_prepare(s, "SELECT id, sequence_id, n_tokens FROM activations WHERE hook_id = ?1 "
                               "ORDER BY sequence_id", &st))) {
        mem_free(it);
        return rc;
    }
    sqlite3_bind_int64(st, 1, hook_id);
    size_t cap = 0;
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        iter_row row = {sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
                        sqlite3_column_int(st, 2)};
        if (!in_split(row.seq, split, val_frac)) continue;
        if (row.T <= 0 || row.T > it->h.seq_len) {
            rc = err_set(ERR_FORMAT, "%s: activation row %lld has %d tokens (sequence length %d)",
                         s->path, (long long)row.rowid, row.T, it->h.seq_len);
            break;
        }
        if (it->n == cap) {
            cap = cap ? cap * 2 : 256;
            iter_row *nr = mem_realloc(it->rows, cap * sizeof *nr);
            if (!nr) {
                rc = err_set(ERR_NOMEM, "%s: out of memory", s->path);
                break;
            }
            it->rows = nr;
        }
        it->rows[it->n++] = row;
        it->tokens += row.T;
    }
    if (!rc && r != SQLITE_DONE) rc = store_sql_error(s, r, "listing activations");
    sqlite3_finalize(st);
    if (!rc && !(it->order = mem_alloc((it->n + 1) * sizeof *it->order)))
        rc = err_set(ERR_NOMEM, "%s: out of memory", s->path);
    if (rc) {
        store_iter_close(it);
        return rc;
    }
    store_iter_shuffle(it, seed);
    *out = it;
    return OK;
}

void store_iter_shuffle(store_iter *it, uint64_t seed)
{
    uint64_t x = seed;
    for (size_t i = 0; i < it->n; i++) it->order[i] = i;
    for (size_t i = it->n; i > 1; i--) {
        size_t j = (size_t)(hash_splitmix64(&x) % i);
        size_t t = it->order[i - 1];
        it->order[i - 1] = it->order[j];
        it->order[j] = t;
    }
    it->pos = 0;
}

int store_iter_next(store_iter *it, float *out, int *T, int64_t *seq_id)
{
    *T = 0;
    if (it->pos >= it->n) return OK;
    const iter_row *row = &it->rows[it->order[it->pos]];
    int rc = blob_read(it->s, &it->blob, &it->h, row->rowid, row->seq, row->T, out);
    if (rc) return rc;
    it->pos++;
    *T = row->T;
    if (seq_id) *seq_id = row->seq;
    return OK;
}

size_t store_iter_count(const store_iter *it) { return it->n; }
int64_t store_iter_tokens(const store_iter *it) { return it->tokens; }

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

size_t store_iter_count_in(const store_iter *it, const int64_t *ids, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < it->n && n; i++)
        k += bsearch(&it->rows[i].seq, ids, n, sizeof *ids, cmp_i64) != NULL;
    return k;
}

void store_iter_close(store_iter *it)
{
    if (!it) return;
    if (it->blob) sqlite3_blob_close(it->blob);
    mem_free(it->rows);
    mem_free(it->order);
    mem_free(it);
}

/* ---- context ------------------------------------------------------------------------------ */
void store_context_free(store_context *c)
{
    if (!c) return;
    if (c->text)
        for (int i = 0; i < c->n; i++) mem_free(c->text[i]);
    mem_free(c->text);
    mem_free(c->ids);
    memset(c, 0, sizeof *c);
}

int store_context_get(store *s, int64_t seq_id, int pos, int before, int after,
                      store_context *out)
{
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT n_tokens, tokens, document_id, start, bos FROM sequences "
                              "WHERE id = ?1", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, seq_id);
    int r = sqlite3_step(st);
    if (r != SQLITE_ROW) {
        sqlite3_finalize(st);
        if (r == SQLITE_DONE)
            return err_set(ERR_NOTFOUND, "%s: no sequence %lld", s->path, (long long)seq_id);
        return store_sql_error(s, r, "reading sequences");
    }
    int T = sqlite3_column_int(st, 0);
    const int *ids = sqlite3_column_blob(st, 1);
    int nb = sqlite3_column_bytes(st, 1);
    int blob_ok = T > 0 && ids && (int64_t)nb == (int64_t)T * 4; /* T comes from the file */
    if (pos < 0 || pos >= T || before < 0 || after < 0 || !blob_ok) {
        sqlite3_finalize(st);
        if (!blob_ok)
            return err_set(ERR_FORMAT, "%s: sequence %lld: bad token blob", s->path, (long long)seq_id);
        return err_set(ERR_ARG, "%s: position %d outside sequence %lld of %d tokens", s->path,
                       pos, (long long)seq_id, T);
    }
    int lo = before >= pos ? 0 : pos - before; /* no int overflow for any before, after >= 0 */
    int hi = after >= T - 1 - pos ? T - 1 : pos + after;
    out->n = hi - lo + 1;
    out->center = pos - lo;
    out->document_id = sqlite3_column_int64(st, 2);
    out->doc_start = sqlite3_column_int64(st, 3);
    out->bos = sqlite3_column_int(st, 4);
    out->ids = mem_alloc((size_t)out->n * sizeof *out->ids);
    out->text = mem_calloc((size_t)out->n, sizeof *out->text);
    if (!out->ids || !out->text) {
        sqlite3_finalize(st);
        store_context_free(out);
        return err_set(ERR_NOMEM, "%s: out of memory", s->path);
    }
    memcpy(out->ids, ids + lo, (size_t)out->n * sizeof *out->ids);
    sqlite3_finalize(st);
    if ((rc = store_prepare(s, "SELECT position, text FROM tokens WHERE sequence_id = ?1 AND "
                               "position BETWEEN ?2 AND ?3", &st))) {
        store_context_free(out);
        return rc;
    }
    sqlite3_bind_int64(st, 1, seq_id);
    sqlite3_bind_int(st, 2, lo);
    sqlite3_bind_int(st, 3, hi);
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        int p = sqlite3_column_int(st, 0);
        const char *t = (const char *)sqlite3_column_text(st, 1);
        if (!t || p < lo || p > hi) continue;
        if (!(out->text[p - lo] = mem_strdup(t))) {
            rc = err_set(ERR_NOMEM, "%s: out of memory", s->path);
            break;
        }
    }
    if (!rc && r != SQLITE_DONE) rc = store_sql_error(s, r, "reading tokens");
    sqlite3_finalize(st);
    if (rc) store_context_free(out);
    return rc;
}

/* ---- runs, schema parts, summary ---------------------------------------------------------- */
int store_run_begin(store *s, const char *kind, const char *params, int64_t *run_id, int *was_done)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT id, status FROM runs WHERE kind = ?1 AND params = ?2 "
                              "ORDER BY id LIMIT 1", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, params, -1, SQLITE_STATIC);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) {
        *run_id = sqlite3_column_int64(st, 0);
        const char *status = (const char *)sqlite3_column_text(st, 1);
        *was_done = status && !strcmp(status, "done");
    } else if (r != SQLITE_DONE) rc = store_sql_error(s, r, "reading runs");
    sqlite3_finalize(st);
    if (rc || r == SQLITE_ROW) return rc;
    if ((rc = store_prepare(s, "INSERT INTO runs (kind, params, status) VALUES (?1, ?2, 'running')", &st)))
        return rc;
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, params, -1, SQLITE_STATIC);
    rc = step_done(s, st, "adding a run");
    sqlite3_finalize(st);
    if (rc) return rc;
    *run_id = sqlite3_last_insert_rowid(s->db);
    *was_done = 0;
    return OK;
}

int store_mark_take(store *s, store_mark *m)
{
    int rc = store_query_i64(s, "SELECT ifnull(max(id), 0) FROM models", &m->model);
    if (!rc) rc = store_query_i64(s, "SELECT ifnull(max(id), 0) FROM hooks", &m->hook);
    if (!rc) rc = store_query_i64(s, "SELECT ifnull(max(id), 0) FROM runs", &m->run);
    return rc;
}

static int delete_if(store *s, const char *sql, int64_t id)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, sql, &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, id);
    rc = step_done(s, st, "taking back a refused run's setup");
    sqlite3_finalize(st);
    return rc;
}

int store_mark_undo(store *s, const store_mark *m, int64_t model_id, const int64_t *hook_ids,
                    int n_hooks, int64_t run_id)
{
    int rc = store_begin(s);
    for (int i = 0; !rc && i < n_hooks; i++)
        if (hook_ids[i] > m->hook)
            rc = delete_if(s, "DELETE FROM hooks WHERE id = ?1 AND NOT EXISTS "
                              "(SELECT 1 FROM activations WHERE hook_id = ?1)", hook_ids[i]);
    if (!rc && run_id > m->run) rc = delete_if(s, "DELETE FROM runs WHERE id = ?1", run_id);
    if (!rc && model_id > m->model)
        rc = delete_if(s, "DELETE FROM models WHERE id = ?1 AND NOT EXISTS "
                          "(SELECT 1 FROM hooks WHERE model_id = ?1)", model_id);
    if (!rc) rc = store_commit(s);
    if (rc) store_rollback(s);
    return rc;
}

int store_hook_unfinished(store *s, const char *hook, int64_t *run_id)
{
    *run_id = -1;
    sqlite3_stmt *st;
    /* params.hooks is the comma-separated list the run extracts */
    /* a later finished run of the hook completed it (a rerun with other params, e.g. --batch,
       is a new row that skips the stored windows; the killed one stays 'running') */
    int rc = store_prepare(s, "SELECT id FROM runs r WHERE kind = 'extract' AND status <> 'done' AND "
                              "json_valid(params) AND instr(',' || json_extract(params, '$.hooks') "
                              "|| ',', ',' || ?1 || ',') > 0 AND NOT EXISTS (SELECT 1 FROM runs d "
                              "WHERE d.kind = 'extract' AND d.status = 'done' AND d.id > r.id AND "
                              "json_valid(d.params) AND instr(',' || json_extract(d.params, "
                              "'$.hooks') || ',', ',' || ?1 || ',') > 0) ORDER BY id DESC LIMIT 1", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, hook, -1, SQLITE_STATIC);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) *run_id = sqlite3_column_int64(st, 0);
    else if (r != SQLITE_DONE) rc = store_sql_error(s, r, "reading runs");
    sqlite3_finalize(st);
    return rc;
}

int store_run_list(store *s, const char *kind, int64_t **ids, char ***params, size_t *n)
{
    *ids = NULL;
    *params = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT id, params FROM runs WHERE kind = ?1 ORDER BY id", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    size_t cap = 0;
    int r;
    while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            size_t nc = cap ? 2 * cap : 8;
            int64_t *ni = mem_realloc(*ids, nc * sizeof **ids);
            if (ni) *ids = ni;
            char **np = ni ? mem_realloc(*params, nc * sizeof **params) : NULL;
            if (np) *params = np;
            if (!ni || !np) {
                rc = err_set(ERR_NOMEM, "%s: out of memory reading runs", s->path);
                break;
            }
            cap = nc;
        }
        const char *p = (const char *)sqlite3_column_text(st, 1);
        (*ids)[*n] = sqlite3_column_int64(st, 0);
        if (!((*params)[*n] = mem_strdup(p ? p : ""))) rc = err_set(ERR_NOMEM, "out of memory");
        else (*n)++;
    }
    if (!rc && r != SQLITE_DONE) rc = store_sql_error(s, r, "reading runs");
    sqlite3_finalize(st);
    if (rc) {
        store_run_list_free(*ids, *params, *n);
        *ids = NULL;
        *params = NULL;
        *n = 0;
    }
    return rc;
}

void store_run_list_free(int64_t *ids, char **params, size_t n)
{
    for (size_t i = 0; params && i < n; i++) mem_free(params[i]);
    mem_free(params);
    mem_free(ids);
}

int store_run_done(store *s, int64_t run_id)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "UPDATE runs SET status = 'done', finished = datetime('now') "
                              "WHERE id = ?1", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    rc = step_done(s, st, "finishing a run");
    sqlite3_finalize(st);
    return rc;
}

int store_schema_part(store *s, const char *part, int version, const char *sql)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT version FROM schema_parts WHERE name = ?1", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, part, -1, SQLITE_STATIC);
    int r = sqlite3_step(st);
    int64_t have = -1;
    if (r == SQLITE_ROW) have = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (r != SQLITE_ROW && r != SQLITE_DONE) return store_sql_error(s, r, "reading schema_parts");
    if (have > version)
        return err_set(ERR_VERSION, "%s: the '%s' tables were written by a newer saelite (version "
                       "%lld; this one knows %d)", s->path, part, (long long)have, version);
    if (s->readonly || have == version) return OK; /* store_open verified a recorded part */
    int own_tx = sqlite3_get_autocommit(s->db);
    if (own_tx && (rc = store_exec(s, "BEGIN IMMEDIATE"))) return rc;
    rc = store_exec(s, sql);
    if (!rc) rc = store_prepare(s, "INSERT INTO schema_parts (name, version) VALUES (?1, ?2) "
                                   "ON CONFLICT (name) DO UPDATE SET version = excluded.version", &st);
    if (!rc) {
        sqlite3_bind_text(st, 1, part, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, version);
        rc = step_done(s, st, "recording a schema part");
        sqlite3_finalize(st);
    }
    /* CREATE TABLE IF NOT EXISTS keeps whatever has the name: check it is ours before commit */
    int vrc = rc ? OK : verify_tables(s, sql, part);
    if (vrc) rc = vrc;
    if (own_tx) {
        if (!rc) rc = store_exec(s, "COMMIT");
        if (rc) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    }
    if (rc && !vrc) err_wrap(rc, "creating the '%s' tables", part);
    return rc;
}

int store_schema_part_verify(store *s, const char *part, int version, const char *sql)
{
    int64_t have = -1;
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT version FROM schema_parts WHERE name = ?1", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, part, -1, SQLITE_STATIC);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) have = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (r != SQLITE_ROW && r != SQLITE_DONE) return store_sql_error(s, r, "reading schema_parts");
    /* absent: readers find no tables; older or newer: the part's own open upgrades or refuses */
    return have == version ? verify_tables(s, sql, part) : OK;
}

int store_summary_get(store *s, store_summary *o)
{
    memset(o, 0, sizeof *o);
    static const char *const q[] = {
        "SELECT count(*) FROM models", "SELECT count(*) FROM documents",
        "SELECT count(*) FROM sequences", "SELECT coalesce(sum(n_tokens), 0) FROM sequences",
        "SELECT count(*) FROM hooks", "SELECT count(*) FROM activations",
        "SELECT coalesce(sum(length(data)), 0) FROM activations",
    };
    int64_t *dst[] = {&o->n_models, &o->n_documents, &o->n_sequences, &o->n_tokens,
                      &o->n_hooks, &o->n_activations, &o->act_bytes};
    int rc = OK;
    for (size_t i = 0; !rc && i < sizeof q / sizeof q[0]; i++) rc = store_query_i64(s, q[i], dst[i]);
    int64_t pc = 0, ps = 0, v = 0;
    if (!rc) rc = store_query_i64(s, "PRAGMA page_count", &pc);
    if (!rc) rc = store_query_i64(s, "PRAGMA page_size", &ps);
    if (!rc) rc = store_query_i64(s, "PRAGMA user_version", &v);
    o->file_bytes = pc * ps;
    o->version = (int)v;
    return rc;
}

int store_free_page_bytes(store *s, int64_t *bytes)
{
    int64_t n = 0, ps = 0;
    int rc = store_query_i64(s, "PRAGMA freelist_count", &n);
    if (!rc) rc = store_query_i64(s, "PRAGMA page_size", &ps);
    *bytes = rc ? 0 : n * ps;
    return rc;
}

int store_count_source_acts(store *s, int64_t hook_id, const char *source, int64_t *n)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT count(*) FROM activations a JOIN sequences q ON q.id = "
                              "a.sequence_id JOIN documents d ON d.id = q.document_id WHERE "
                              "a.hook_id = ?1 AND d.source = ?2", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, hook_id);
    sqlite3_bind_text(st, 2, source, -1, SQLITE_STATIC);
    int r = sqlite3_step(st);
    *n = 0;
    if (r == SQLITE_ROW) *n = sqlite3_column_int64(st, 0);
    else rc = store_sql_error(s, r, "counting activations");
    sqlite3_finalize(st);
    return rc;
}

int store_part_list(store *s, char (*names)[64], int *versions, int cap, int *n)
{
    *n = 0;
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT name, version FROM schema_parts ORDER BY name", &st);
    if (rc) return rc;
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW)
        if (*n < cap) {
            copy_text(names[*n], 64, sqlite3_column_text(st, 0));
            versions[(*n)++] = sqlite3_column_int(st, 1);
        }
    if (r != SQLITE_DONE) rc = store_sql_error(s, r, "reading schema_parts");
    sqlite3_finalize(st);
    return rc;
}

int store_run_counts(store *s, int64_t *done, int64_t *running)
{
    int rc = store_query_i64(s, "SELECT count(*) FROM runs WHERE status = 'done'", done);
    if (!rc) rc = store_query_i64(s, "SELECT count(*) FROM runs WHERE status <> 'done'", running);
    return rc;
}

int store_tokens_tagged(store *s, int *tokens, int *tagged)
{
    int64_t a = 0, b = 0;
    int rc = store_query_i64(s, "SELECT EXISTS (SELECT 1 FROM tokens)", &a);
    if (!rc) rc = store_query_i64(s, "SELECT EXISTS (SELECT 1 FROM tokens WHERE pos_tag IS NOT NULL)", &b);
    *tokens = a > 0;
    *tagged = b > 0;
    return rc;
}

int store_orphan_sequences(store *s, int64_t *n)
{
    return store_query_i64(s, "SELECT count(*) FROM sequences WHERE document_id NOT IN "
                              "(SELECT id FROM documents)", n);
}

int store_column_exists(store *s, const char *table, const char *col, int *yes)
{
    *yes = 0;
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, col, -1, SQLITE_STATIC);
    int r = sqlite3_step(st);
    *yes = r == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
    if (r != SQLITE_ROW) rc = store_sql_error(s, r, "reading the schema");
    sqlite3_finalize(st);
    return rc;
}

int store_add_column(store *s, const char *table, const char *col, const char *decl)
{
    int tab = 0, has = 1;
    if (store_readonly(s)) return OK;
    int rc = store_table_exists(s, table, &tab);
    if (!rc && tab) rc = store_column_exists(s, table, col, &has);
    if (rc || !tab || has) return rc;
    char sql[256];
    if (snprintf(sql, sizeof sql, "ALTER TABLE %s ADD COLUMN %s %s", table, col, decl) >= (int)sizeof sql)
        return err_set(ERR_ARG, "store_add_column: names too long");
    return store_exec(s, sql);
}

int store_schema_part_verify_without(store *s, const char *part, int version, const char *sql,
                                     const char *table, const char *col)
{
    char drop[256];
    if (snprintf(drop, sizeof drop, ";\nALTER TABLE %s DROP COLUMN %s;", table, col) >= (int)sizeof drop)
        return err_set(ERR_ARG, "store_schema_part_verify_without: names too long");
    size_t n = strlen(sql), d = strlen(drop);
    char *old = mem_alloc(n + d + 1);
    if (!old) return err_set(ERR_NOMEM, "out of memory");
    memcpy(old, sql, n);
    memcpy(old + n, drop, d + 1);
    int rc = store_schema_part_verify(s, part, version, old);
    mem_free(old);
    return rc;
}

int store_table_exists(store *s, const char *table, int *yes)
{
    *yes = 0;
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    int r = sqlite3_step(st);
    *yes = r == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
    if (r != SQLITE_ROW) rc = store_sql_error(s, r, "reading the schema");
    sqlite3_finalize(st);
    return rc;
}

int store_count_rows(store *s, const char *table, int64_t *n)
{
    *n = -1;
    for (const char *c = table; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return err_set(ERR_ARG, "bad table name '%s'", table);
    int exists, rc = store_table_exists(s, table, &exists);
    if (rc || !exists) return rc;
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\"", table);
    return store_query_i64(s, sql, n);
}

void store_remove(const char *path)
{
    static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
    char b[4200];
    for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++)
        if (path_fmt(b, sizeof b, "%s%s", path, suffix[i]) == OK) unlink(b);
    err_clear();
}

int store_same_dir(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    while (na > 1 && a[na - 1] == '/') na--;
    while (nb > 1 && b[nb - 1] == '/') nb--;
    return (na == nb && !memcmp(a, b, na)) || file_same(a, b);
}
