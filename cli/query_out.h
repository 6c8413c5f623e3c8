/* query_out.h - `saelite query`'s printers: the rows of store_ro_query_limited as an aligned
 * table, CSV (RFC 4180, NULL an empty field) or JSON (an array of row objects per statement;
 * repeated column names get SQLite's ":1" suffixes, invalid UTF-8 becomes U+FFFD, Inf/NaN are
 * printed as null and counted).
 *
 * Usage: a cli_qout with mode and max_width set (the rest zero); cli_qout_row as the query's row
 * callback; cli_qout_finish once, with the query's result. Output goes to stdout; errors are
 * err.h codes with the message set (ERR_IO when stdout fails, ERR_NOMEM). One thread. */
#ifndef SAELITE_CLI_QUERY_OUT_H
#define SAELITE_CLI_QUERY_OUT_H
#include <stddef.h>

enum { CLI_QOUT_TABLE, CLI_QOUT_CSV, CLI_QOUT_JSON };

typedef struct {
    int mode, max_width;
    /* table mode buffers one statement's rows to size the columns */
    int ncols;
    char **cells; /* [nrows+1, ncols] row 0 = names; NULL = SQL NULL */
    int *right;   /* [ncols] right-align (numbers) */
    size_t nrows, cap;
    int stmt;     /* JSON: statements printed so far */
    int json_rows;
    char **keys;  /* JSON: the statement's column names, made unique ([nkeys]) */
    int nkeys;
    long long nonfinite; /* JSON: Inf/NaN numbers printed as null */
} cli_qout;

/* One header (vals NULL) or row of statement stmt; OK, or ERR_IO / ERR_NOMEM, which stops the
 * query (store_ro_query_limited returns it). */
int cli_qout_row(void *user, int stmt, int nc, const char *const *names, const char *const *vals,
                 const int *types);
/* After the query (rc its result, limit_hit whether a limit stopped it): prints what a table
 * buffered (a failed statement's partial rows are dropped), closes the JSON array, flushes
 * stdout. Returns rc, or ERR_IO when stdout failed. */
int cli_qout_finish(cli_qout *q, int rc, int limit_hit);

#endif
