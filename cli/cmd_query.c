/* cmd_query.c - `saelite query`: read-only SQL over a saelite database, printed as an aligned
 * table, CSV or JSON (cli/query_out.h), with the saelite SQL functions available
 * (store/sqlfuncs.h). */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/query_out.h"
#include "common/err.h"
#include "store/sqlfuncs.h"

CLI_COMMAND(query, "Run read-only SQL on a database (table, CSV or JSON output)",
            "saelite query --db FILE [--csv | --json] [--max-width N] [--timeout X] [--max-rows N] \"SQL\"")

int cmd_query(int argc, char **argv)
{
    const char *db = NULL, *pos[1];
    int csv = 0, json = 0, npos = 0, max_width = 60;
    double timeout = 60;
    int64_t max_rows = 0;
    arg_spec spec[] = {
        {"--db", ARG_STR, &db, "database file (opened read-only)", ARG_REQUIRED},
        {"--csv", ARG_FLAG, &csv, "print CSV (RFC 4180; NULL is an empty field)"},
        {"--json", ARG_FLAG, &json, "print a JSON array of row objects per statement"},
        {"--max-width", ARG_INT, &max_width, "cut table cells to N characters (0: never)", ARG_MIN(0)},
        {"--timeout", ARG_FLOAT, &timeout, "stop the query after X seconds (0: no limit)", ARG_MIN(0)},
        {"--max-rows", ARG_I64, &max_rows, "stop when a query yields more than N rows (0: no limit)",
         ARG_MIN(0)},
        {NULL, 0, NULL, NULL},
    };
    int rc = args_parse("query", argc, argv, spec, pos, 1, &npos);
    if (rc) return rc < 0 ? 0 : rc;
    if (npos != 1) return cli_usage_error("query", "give the SQL as one argument");
    if (csv && json) return cli_usage_error("query", "--csv and --json exclude each other");
    cli_qout q = {.mode = csv ? CLI_QOUT_CSV : json ? CLI_QOUT_JSON : CLI_QOUT_TABLE,
                  .max_width = max_width};
    store_query_limits lim = {.timeout_s = timeout, .max_rows = max_rows};
    rc = store_ro_query_limited(db, pos[0], &lim, cli_qout_row, &q);
    rc = cli_qout_finish(&q, rc, lim.hit);
    if (rc == OK && q.nonfinite) /* JSON has no Inf or NaN: said, not only printed as null */
        fprintf(stderr, "saelite query: %lld non-finite number%s (Inf or NaN) printed as null: JSON "
                "has none\n", q.nonfinite, q.nonfinite == 1 ? "" : "s");
    return rc == OK ? 0 : cli_fail("query");
}
