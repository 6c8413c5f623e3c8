/* query_out.c - `saelite query`'s printers (cli/query_out.h): an aligned table (buffered per
 * statement to size its columns), CSV or JSON, fed row by row by store_ro_query_limited. */
#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

#include "cli/query_out.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/utf8.h"
#include "store/sqlfuncs.h"


static void keys_free(cli_qout *q)
{
    for (int i = 0; i < q->nkeys; i++) mem_free(q->keys[i]);
    mem_free(q->keys);
    q->keys = NULL;
    q->nkeys = 0;
}

static int key_taken(const cli_qout *q, int c, const char *k)
{
    for (int i = 0; i < c; i++)
        if (!strcmp(q->keys[i], k)) return 1;
    return 0;
}

/* JSON object keys: a name that repeats an earlier one gets ":1", ":2", ... as SQLite names the
 * columns of CREATE TABLE ... AS SELECT (a JSON reader keeps one value per key: `SELECT 1 AS a,
 * 2 AS a` lost the first). */
static int keys_make(cli_qout *q, int nc, const char *const *names)
{
    keys_free(q);
    q->keys = mem_calloc((size_t)nc + 1, sizeof *q->keys);
    if (!q->keys) return ERR_NOMEM;
    for (int c = 0; c < nc; c++) {
        const char *base = names[c] ? names[c] : "";
        buf b = {0};
        int rc = buf_str(&b, base);
        for (unsigned n = 1; !rc && key_taken(q, c, b.p ? b.p : ""); n++) {
            buf_reset(&b);
            rc = buf_printf(&b, "%s:%u", base, n);
        }
        q->keys[c] = rc ? NULL : b.p ? b.p : mem_strdup(""); /* the buffer's bytes, kept */
        if (!q->keys[c]) {
            buf_free(&b);
            return ERR_NOMEM;
        }
        q->nkeys = c + 1;
    }
    return OK;
}

/* The columns s takes on a terminal, counting code points while the total stays within limit;
 * *end (may be NULL) the byte where it stopped. wcwidth in a UTF-8 locale (2 for CJK, 0 for
 * combining marks; column widths counted code points, so '漢字' misaligned its table, an
 * audit), 1 where it knows none. s is a cell: valid UTF-8 without controls. */
static size_t text_columns(const char *s, size_t limit, size_t *end)
{
    static locale_t loc;
    static int tried;
    if (!tried) {
        tried = 1;
        loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    }
    locale_t old = loc ? uselocale(loc) : (locale_t)0;
    size_t w = 0, n = strlen(s), i = 0;
    while (i < n) {
        uint32_t cp = '?';
        size_t l = utf8_decode((const unsigned char *)s + i, n - i, &cp);
        int cw = loc ? wcwidth((wchar_t)cp) : 1;
        if (cw < 0) cw = 1;
        if (w + (size_t)cw > limit) break;
        w += (size_t)cw;
        i += l ? l : 1;
    }
    if (loc) uselocale(old);
    if (end) *end = i;
    return w;
}

/* Table cells: what a terminal would act on instead of showing, escaped (utf8_for_terminal:
 * only \n \t \r were, and ESC sequences reached the terminal, an audit), and a cell wider than
 * max_width columns cut with "…". */
static char *table_cell(const char *v, int max_width)
{
    if (!v) return mem_strdup("NULL");
    size_t n = strlen(v), cap = 4 * n + 8;
    char *o = mem_alloc(cap);
    if (!o) return NULL;
    utf8_for_terminal(v, n, o, cap);
    if (max_width > 0 && text_columns(o, SIZE_MAX, NULL) > (size_t)max_width) {
        size_t i;
        text_columns(o, (size_t)(max_width > 1 ? max_width - 1 : 0), &i);
        memcpy(o + i, "\xe2\x80\xa6", 4); /* … and its NUL */
    }
    return o;
}

static void table_flush(cli_qout *q)
{
    if (!q->cells) return;
    int nc = q->ncols;
    size_t *w = mem_calloc((size_t)nc + 1, sizeof *w);
    if (w) {
        for (size_t r = 0; r <= q->nrows; r++)
            for (int c = 0; c < nc; c++) {
                size_t x = text_columns(q->cells[r * nc + c] ? q->cells[r * nc + c] : "", SIZE_MAX, NULL);
                if (x > w[c]) w[c] = x;
            }
        for (size_t r = 0; r <= q->nrows; r++) {
            for (int c = 0; c < nc; c++) {
                const char *s = q->cells[r * nc + c] ? q->cells[r * nc + c] : "";
                int pad = (int)(w[c] - text_columns(s, SIZE_MAX, NULL));
                if (r > 0 && q->right[c]) printf("%*s%s", pad, "", s);
                else printf("%s%*s", s, c + 1 < nc ? pad : 0, "");
                printf(c + 1 < nc ? "  " : "\n");
            }
            if (r == 0) {
                for (int c = 0; c < nc; c++) {
                    for (size_t i = 0; i < w[c]; i++) putchar('-');
                    printf(c + 1 < nc ? "  " : "\n");
                }
            }
        }
        printf("(%zu row%s)\n", q->nrows, q->nrows == 1 ? "" : "s");
    }
    mem_free(w);
    for (size_t i = 0; i < (q->nrows + 1) * (size_t)nc; i++) mem_free(q->cells[i]);
    mem_free(q->cells);
    mem_free(q->right);
    q->cells = NULL;
    q->right = NULL;
    q->nrows = q->cap = 0;
}

static void csv_field(const char *v)
{
    if (!v) return; /* NULL: empty field */
    if (!*v) { /* the empty string: "" (as sqlite3 -csv), so a one-column row of it is no blank
                  line, which CSV readers skip (an audit lost two of three rows) */
        fputs("\"\"", stdout);
        return;
    }
    if (!strpbrk(v, ",\"\n\r")) {
        fputs(v, stdout);
        return;
    }
    putchar('"');
    for (; *v; v++) {
        if (*v == '"') putchar('"');
        putchar(*v);
    }
    putchar('"');
}

/* v as a JSON string literal on stdout (common/buf.h's escaping). JSON text is UTF-8: bytes that
 * are not (a blob cast to text) become U+FFFD, as utf8_clean writes them. ERR_NOMEM. */
static int json_string(const char *v)
{
    size_t n = strlen(v);
    char *clean = NULL;
    if (utf8_valid_prefix((const unsigned char *)v, n) != n) {
        if (!(clean = mem_alloc(3 * n + 1))) return ERR_NOMEM;
        n = utf8_clean(v, n, clean, 3 * n + 1);
    }
    buf b = {0};
    int rc = buf_json(&b, clean ? clean : v, n, 0);
    if (!rc) fwrite(b.p, 1, b.n, stdout);
    buf_free(&b);
    mem_free(clean);
    return rc;
}

static int json_number_ok(const char *v)
{
    /* SQLite renders inf as "Inf" and may give "-nan": not JSON numbers */
    return v && strpbrk(v, "0123456789") && !strpbrk(v, "IiNn");
}

static int out_error(void)
{
    return err_set(ERR_IO, "cannot write the output");
}

static int nomem(void) { return err_set(ERR_NOMEM, "out of memory (buffering the table: try --csv)"); }

int cli_qout_row(void *user, int stmt, int nc, const char *const *names, const char *const *vals,
                  const int *types)
{
    cli_qout *q = user;
    if (q->mode == CLI_QOUT_CSV) {
        if (!vals && stmt > 0) putchar('\n'); /* blank line between statements */
        for (int c = 0; c < nc; c++) {
            if (c) putchar(',');
            csv_field(vals ? vals[c] : names[c]);
        }
        putchar('\n');
        return ferror(stdout) ? out_error() : OK;
    }
    if (q->mode == CLI_QOUT_JSON) {
        if (!vals) {
            if (stmt > 0) printf("\n]\n");
            printf("[");
            q->json_rows = 0;
            q->stmt = stmt + 1;
            return keys_make(q, nc, names) ? nomem() : OK;
        }
        printf(q->json_rows++ ? ",\n  {" : "\n  {");
        for (int c = 0; c < nc; c++) {
            if (c) printf(", ");
            if (json_string(c < q->nkeys ? q->keys[c] : names[c])) return nomem();
            printf(": ");
            if (types[c] == STORE_Q_NULL) printf("null");
            else if (types[c] == STORE_Q_INT || types[c] == STORE_Q_FLOAT) {
                int okn = json_number_ok(vals[c]);
                q->nonfinite += !okn;
                fputs(okn ? vals[c] : "null", stdout);
            } else if (json_string(vals[c])) return nomem();
        }
        putchar('}');
        return ferror(stdout) ? out_error() : OK;
    }
    /* table */
    if (!vals) {
        table_flush(q);
        if (stmt > 0) putchar('\n');
        q->ncols = nc;
        q->cap = 64;
        q->cells = mem_calloc(q->cap * (size_t)(nc ? nc : 1), sizeof *q->cells);
        q->right = mem_calloc((size_t)nc + 1, sizeof *q->right);
        if (!q->cells || !q->right) return nomem();
        for (int c = 0; c < nc; c++) q->right[c] = 1;
        for (int c = 0; c < nc; c++)
            if (!(q->cells[c] = table_cell(names[c], 0))) return nomem();
        return ferror(stdout) ? out_error() : OK;
    }
    if (q->nrows + 2 > q->cap) {
        size_t ncap = q->cap * 2;
        char **nc2 = mem_realloc(q->cells, ncap * (size_t)nc * sizeof *nc2);
        if (!nc2) return nomem();
        q->cells = nc2;
        q->cap = ncap;
    }
    q->nrows++;
    for (int c = 0; c < nc; c++) {
        /* a column is right-aligned when every non-NULL value in it is a number */
        if (types[c] != STORE_Q_INT && types[c] != STORE_Q_FLOAT && types[c] != STORE_Q_NULL)
            q->right[c] = 0;
        if (!(q->cells[q->nrows * nc + c] = table_cell(vals[c], q->max_width))) return nomem();
    }
    return OK;
}

int cli_qout_finish(cli_qout *q, int rc, int limit_hit)
{
    if (q->mode == CLI_QOUT_TABLE) {
        /* a limit keeps the complete rows before it (as CSV and JSON have printed them) */
        if (rc == OK || limit_hit) table_flush(q);
        else { /* drop the partial statement's rows */
            for (size_t i = 0; q->cells && i < (q->nrows + 1) * (size_t)q->ncols; i++) mem_free(q->cells[i]);
            mem_free(q->cells);
            mem_free(q->right);
            q->cells = NULL;
            q->right = NULL;
        }
    }
    if (q->mode == CLI_QOUT_JSON && q->stmt) printf("\n]\n");
    keys_free(q);
    if (fflush(stdout) != 0 && rc == OK) rc = err_set(ERR_IO, "cannot write the output");
    return rc;
}
