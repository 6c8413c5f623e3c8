/* sqlfuncs.h - saelite's SQL functions, and the read-only query runner behind `saelite query`.
 *
 * Functions (documented with examples in docs/analysis.md); NULL in -> NULL out:
 *   tok_text(id)               token text: ana_vocab (filled by analyze), else the store's tokens table
 *   tok_id(text)               token id of an exact token text (e.g. ' dog'), or NULL
 *   context(seq, pos [, before [, after]])
 *                              the tokens around (seq, pos) (default 8 before, 4 after), the one at
 *                              pos marked as «tok»; needs the store's tokens table
 *   vec_dot(a, b), vec_cos(a, b), vec_norm(a)
 *                              over float32 little-endian BLOBs of equal length (ana_decoder.vec)
 *   vec_len(a [, dtype])       number of values in a BLOB ('f32' default, 'f16', 'bf16')
 *   vec_at(a, i [, dtype])     element i (0-based) of a BLOB, e.g. of activations.data with the
 *                              hook's dtype; NULL when i is out of range
 * The same file builds the loadable extension ./saelite.so (entry sqlite3_saelite_init, compiled
 * with -DSAELITE_SQLITE_EXT): sqlite3 db ".load ./saelite".
 *
 * A database is input: the table-reading functions (tok_text, tok_id, context) are
 * SQLITE_DIRECTONLY (callable from a statement, never from a view, trigger, CHECK, DEFAULT, index
 * or generated column of the database), the pure vec_* functions SQLITE_INNOCUOUS; tok_text, tok_id
 * and context read main.tokens / main.ana_vocab only when each is a real table with saelite's
 * columns and declared types (store_sqlfuncs_table_check), else they fail with an error naming
 * what differs; a nested call (only possible through the schema) is an error, never recursion.
 * Integer arguments are clamped or range-checked before any arithmetic (INT64_MIN/MAX are safe).
 *
 * store_ro_query opens the database read-only (SQLITE_OPEN_READONLY and PRAGMA query_only),
 * registers the functions, prepares every statement of sql first and refuses (ERR_ARG, nothing
 * run) when one of them could write; then runs them in order, calling row_fn once per statement
 * with vals == NULL (the header: column names) and once per result row. Values come as text
 * (SQLite's rendering; BLOBs as "<blob N bytes>"), NULL entries for SQL NULL, with their types.
 * row_fn returns OK, or an err.h code with its message set (err_set), which stops the query and is
 * returned as is. Errors: ERR_IO (cannot open, not a regular file), ERR_FORMAT (not a database,
 * damaged), ERR_NOMEM (SQLite or the runner out of memory), ERR_SQL (malformed SQL, runtime
 * errors), all naming the database. The connection does not trust the database's schema
 * (SQLITE_DBCONFIG_TRUSTED_SCHEMA off, DEFENSIVE on).
 * store_ro_query_limited adds limits (lim may be NULL: none): after timeout_s seconds of wall time
 * (SQLite's progress handler) or when a row beyond max_rows total arrives, it stops with
 * ERR_ABORTED, "query stopped after 60 s (--timeout)" / "... after N rows (--max-rows)", and sets
 * lim->hit (the rows already passed to row_fn are complete rows). Thread safety: reentrant.
 */
#ifndef SAELITE_SQLFUNCS_H
#define SAELITE_SQLFUNCS_H

struct sqlite3;

/* Registers the functions on one connection; returns an SQLite result code. */
int store_sqlfuncs_register(struct sqlite3 *db);

/* 0 when main.<table> is a real (not virtual) table having every column of cols (a NULL-ended
 * list of name, declared type pairs; extra columns allowed), 1 when no table or view of that name
 * exists, -1 otherwise with the reason in why[cap] (a view, a missing column, another type); -2
 * when SQLite failed (out of memory, a damaged schema: sqlite3_errcode(db) has the code). */
int store_sqlfuncs_table_check(struct sqlite3 *db, const char *table, const char *const *cols,
                               char *why, int cap);
/* The columns the functions read: of the store's tokens table, and of the analysis ana_vocab. */
extern const char *const store_sqlfuncs_tokens_cols[];
extern const char *const store_sqlfuncs_vocab_cols[];

enum { STORE_Q_INT = 1, STORE_Q_FLOAT, STORE_Q_TEXT, STORE_Q_BLOB, STORE_Q_NULL };

typedef int (*store_row_fn)(void *user, int stmt_no, int ncols, const char *const *names,
                            const char *const *vals, const int *types);
int store_ro_query(const char *db_path, const char *sql, store_row_fn row_fn, void *user);

enum { STORE_Q_HIT_TIME = 1, STORE_Q_HIT_ROWS = 2 };
typedef struct {
    double timeout_s;  /* stop after this many seconds (0: no limit) */
    long long max_rows; /* stop when more rows than this come, over all statements (0: no limit) */
    int hit;           /* out: STORE_Q_HIT_TIME or STORE_Q_HIT_ROWS when a limit stopped it */
} store_query_limits;
int store_ro_query_limited(const char *db_path, const char *sql, store_query_limits *lim,
                           store_row_fn row_fn, void *user);

#endif
