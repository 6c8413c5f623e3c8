/* store_internal.h - for the store module's own .c files (core, SAE registry, analysis and report
 * tables) and for the tests and benchmarks that reach into a handle (docs/architecture.md): the
 * SQLite handle of a store and the conversion of SQLite result codes to err.h codes.
 *
 * store_sql_error(s, rc, what) records "<db path>: <what>: <sqlite message>" with the matching
 * code (ERR_NOMEM for SQLITE_NOMEM, ERR_IO for I/O, disk full, read-only and cannot-open errors,
 * ERR_FORMAT for a damaged or non-database file, ERR_SQL otherwise) and returns it.
 * store_exec runs SQL without results (several statements allowed).
 * store_prepare prepares one statement; on failure it records the error and returns the code.
 * A database is input: store_open compares the core tables (and those of each recorded part)
 * with the schema SQL (real tables, every column, declared types; no triggers) and refuses a
 * database that differs (ERR_FORMAT, one line naming the file and the difference).
 */
#ifndef SAELITE_STORE_INTERNAL_H
#define SAELITE_STORE_INTERNAL_H
#include <sqlite3.h>
#include <time.h>

#include "store/store.h"

/* SQLite's page cache per connection, KiB (PRAGMA cache_size = -N): what every store opens with,
 * and the larger one a writer of many indexed rows takes for its transaction (the analysis
 * tables: random inserts into their token and position indexes otherwise re-read and spill
 * 64 KiB pages from a 64-page cache). */
enum { STORE_CACHE_KIB = 4096, STORE_CACHE_KIB_BULK = 131072 };
/* Sets the connection's page cache to kib KiB (pages are allocated as used). */
int store_cache_kib(store *s, int kib);

sqlite3 *store_db(store *s);
int store_sql_error(store *s, int rc, const char *what);
/* After sqlite3_open_v2(path) failed with rc: 1 (and the message recorded, ERR_ARG) when the
 * reason is a full path longer than SQLite's VFS builds (mxPathname less the journal's suffix:
 * 504 bytes in 3.40), which
 * SQLite reports as "unable to open database file (No such file or directory)" on a path that
 * is there; 0 otherwise (the caller says what SQLite said). */
int store_path_too_long(const char *path, int rc);
/* An existing regular file for a read-only open, said as store_open says it ("PATH: cannot open:
 * No such file or directory" / "...: not a regular file"; SQLite's "unable to open database
 * file" and "disk I/O error" did not say what was wrong): ERR_NOTFOUND, ERR_IO, or OK. */
int store_check_file(const char *path);
int store_exec(store *s, const char *sql);
int store_prepare(store *s, const char *sql, sqlite3_stmt **st);
/* What a user can do about rc on db: "" or a parenthesised hint with a leading space (another
 * process writing; a hot journal a read-only handle cannot roll back). */
const char *store_lock_hint(sqlite3 *db, int rc);
/* *yes: whether the database has a table of that name (an extension part may be absent). */
int store_table_exists(store *s, const char *table, int *yes);
/* *yes = 1 when table has the column col (0 too when there is no such table). */
int store_column_exists(store *s, const char *table, const char *col, int *yes);
/* A column a later version of a schema part added, which CREATE TABLE IF NOT EXISTS cannot add
 * to a table made before: ALTER TABLE table ADD COLUMN col decl, when the table exists without
 * it and the store is writable; else nothing. */
int store_add_column(store *s, const char *table, const char *col, const char *decl);
/* store_schema_part_verify of a part recorded at an older version, made by today's sql less the
 * column col of table (added since): an older database is checked as it was made. */
int store_schema_part_verify_without(store *s, const char *part, int version, const char *sql,
                                     const char *table, const char *col);
/* Runs a prepared statement that yields at most one row with one integer; *v = 0 when no row. */
int store_query_i64(store *s, const char *sql, int64_t *v);
int store_readonly(const store *s);
/* 1 when two recorded directories are one: the same spelling but for trailing '/', or, read from
 * the current directory, the same directory on disk (file_same). */
int store_same_dir(const char *a, const char *b);
/* When the part is recorded at exactly this version, checks that its tables (made by sql) are
 * there with their columns and types (ERR_FORMAT naming the first difference); else OK.
 * store_open runs it for the parts below (store_sae.c, store_ana.c, store_graph.c, store_eval.c, store_sweep.c). */
int store_schema_part_verify(store *s, const char *part, int version, const char *sql);
int store_sae_verify(store *s);
int store_ana_verify(store *s);
/* How many times this process replaced an analysis by dropping and remaking ana_acts's indexes
 * (store_ana.c; for the tests). */
int store_ana_acts_rebuilds(void);
/* Which analysis is that of an SAE, by its weights (ana_dicts.weights): weights, the checksum of
 * its sae_weights.safetensors; sae_hook and d_sae, its cfg.json's hook and width (NULL, 0: any);
 * hook and split, the caller's own filters (NULL: any). */
typedef struct {
    const char *weights, *sae_hook, *hook, *split;
    int64_t d_sae;
} store_ana_want;
/* Given named, the analysis found by the SAE's name or path (-1: none), *id is: named when it
 * recorded these weights or none (NULL: from before the column); else the newest kind 'sae'
 * analysis that recorded them within the filters; else -1, and stale[] the value named recorded
 * ("not a checksum" for a value that is none; stale "" when there was no named). Without the
 * column (analysis version 3) *id = named. db is a connection to the store at path (report's, or
 * one of serve's, which the caller holds). */
/* ana_dicts newest first, as an ORDER BY: a replaced analysis keeps its id (store_ana_dict_begin),
 * so a larger id no longer means a newer analysis (report's "the most recent" took another split's
 * older analysis over the one just made again, a review); created_at does (to the millisecond
 * since store_ana_dict_begin sets it: to the second, three analyses within one tied), and the id
 * within one */
/* created_at read to the millisecond: an analysis an older saelite made has "...:05Z", which as a
 * string sorts after "...:05.300Z" ('Z' > '.') and took the newer one's place in that second */
/* the one spelling of an analysis's time to the millisecond: written (x 'now'), read (a column) */
#define STORE_ANA_MS(x) "strftime('%Y-%m-%dT%H:%M:%fZ', " x ")"
#define STORE_ANA_CREATED STORE_ANA_MS("created_at")
#define STORE_ANA_NEWEST STORE_ANA_CREATED " DESC, id DESC"
int store_ana_by_weights(sqlite3 *db, const char *path, const store_ana_want *w, int64_t named,
                         int64_t *id, char stale[17]);
int store_graph_verify(store *s);
int store_eval_verify(store *s);
/* Deletes the eval rows (every suite's) of registry row sae_id, where the eval tables exist:
 * store_sae_register, which replaces that row with a new SAE's (store_eval.c). */
int store_eval_forget_sae(store *s, int64_t sae_id);
int store_sweep_verify(store *s);

/* A wall-clock limit for one query, through SQLite's progress handler: the one used by
 * store_ro_query_limited (`saelite query --timeout`) and the serve console (store_serve.c).
 * store_deadline_start(d, seconds) (<= 0: no limit), then
 * sqlite3_progress_handler(db, N, store_deadline_check, d): it returns non-zero (SQLite stops the
 * statement with SQLITE_INTERRUPT) once the time is up, and d->hit says so. */
typedef struct {
    struct timespec t0;
    double limit; /* seconds, 0: none */
    int hit;
} store_deadline;
void store_deadline_start(store_deadline *d, double limit_s);
int store_deadline_check(void *d);
/* Replaces LIKE and GLOB on db (like/2, like/3, glob/2) by the same matching that asks dl (may
 * be NULL: never) every few thousand characters and stops a statement past it with
 * SQLITE_INTERRUPT: SQLite's own cannot be stopped inside one call (sqlfuncs.c). */
int store_like_register(sqlite3 *db, store_deadline *dl);
/* The same for the other built-ins whose one call can outlast any deadline: trim, ltrim and
 * rtrim with a character set (trim/2 etc.; SQLite's compare every character of the set at each
 * step), with SQLite's results (sqlfuncs.c). */
int store_slow_builtins_register(sqlite3 *db, store_deadline *dl);

#endif
