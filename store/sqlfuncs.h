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
 * store_ro_query opens the database read-only (SQLITE_OPEN_READONLY and PRAGMA query_only),
 * registers the functions, prepares every statement of sql first and refuses (ERR_ARG, nothing
 * run) when one of them could write; then runs them in order, calling row_fn once per statement
 * with vals == NULL (the header: column names) and once per result row. Values come as text
 * (SQLite's rendering; BLOBs as "<blob N bytes>"), NULL entries for SQL NULL, with their types.
 * A non-zero return from row_fn stops with ERR_ABORTED. Errors: ERR_IO (cannot open),
 * ERR_SQL (malformed SQL, runtime errors) naming the database. Thread safety: reentrant.
 */
#ifndef SAELITE_SQLFUNCS_H
#define SAELITE_SQLFUNCS_H

struct sqlite3;

/* Registers the functions on one connection; returns an SQLite result code. */
int store_sqlfuncs_register(struct sqlite3 *db);

enum { STORE_Q_INT = 1, STORE_Q_FLOAT, STORE_Q_TEXT, STORE_Q_BLOB, STORE_Q_NULL };

typedef int (*store_row_fn)(void *user, int stmt_no, int ncols, const char *const *names,
                            const char *const *vals, const int *types);
int store_ro_query(const char *db_path, const char *sql, store_row_fn row_fn, void *user);

#endif
