/* json.c - see json.h. */
#include "common/json.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first key that one object of the tree under j holds twice, or NULL; *nomem on failure. */
static const char *repeated_key(const cJSON *j, int *nomem)
{
    if (!cJSON_IsObject(j) && !cJSON_IsArray(j)) return NULL;
    size_t n = 0;
    for (const cJSON *c = j->child; c; c = c->next) n++;
    if (cJSON_IsObject(j) && n > 1) {
        /* sorted, so an object of 50k tokens costs n log n, not n^2 */
        const char **k = mem_alloc(n * sizeof *k);
        if (!k) {
            *nomem = 1;
            return NULL;
        }
        size_t i = 0;
        for (const cJSON *c = j->child; c; c = c->next) k[i++] = c->string ? c->string : "";
        qsort(k, n, sizeof *k, key_cmp);
        const char *dup = NULL;
        for (i = 1; i < n && !dup; i++)
            if (!strcmp(k[i - 1], k[i])) dup = k[i];
        mem_free(k);
        if (dup) return dup;
    }
    for (const cJSON *c = j->child; c; c = c->next) {
        const char *d = repeated_key(c, nomem);
        if (d || *nomem) return d;
    }
    return NULL;
}

static void line_col(const char *text, const char *at, long *line, long *col)
{
    *line = 1;
    *col = 1;
    for (const char *p = text; p < at; p++) {
        if (*p == '\n') {
            (*line)++;
            *col = 1;
        } else (*col)++;
    }
}

int json_parse_object(const char *path, const char *what, const char *text, size_t len, cJSON **out)
{
    *out = NULL;
    long line, col;
    const char *sep = what ? " (" : "", *w = what ? what : "", *sep2 = what ? ")" : "";
    const char *nul = memchr(text, 0, len);
    if (nul) { /* cJSON stops there: what follows would go unread */
        line_col(text, nul, &line, &col);
        return err_set(ERR_FORMAT, "%s: a NUL byte at line %ld, column %ld%s%s%s", path, line, col,
                       sep, w, sep2);
    }
    /* the escape \u0000 decodes to a NUL inside a C string, which cuts it there: a hook_name
       "blocks.0.mlp.hook_post\u0000junk" was read as the hook before it (an audit). Each
       backslash starts an escape of the character after it (one pass; outside strings a
       backslash is a syntax error anyway). */
    for (const char *p = memchr(text, '\\', len); p; ) {
        size_t left = (size_t)(text + len - p);
        if (left >= 6 && p[1] == 'u' && !memcmp(p + 2, "0000", 4)) {
            line_col(text, p, &line, &col);
            return err_set(ERR_FORMAT, "%s: a \\u0000 (NUL) escape at line %ld, column %ld%s%s%s: "
                           "strings cannot hold NUL", path, line, col, sep, w, sep2);
        }
        p = left > 2 ? memchr(p + 2, '\\', left - 2) : NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        if (!end || end < text || end > text + len) end = text;
        line_col(text, end, &line, &col);
        /* cJSON refuses nesting past CJSON_NESTING_LIMIT where the syntax is fine: say so
           rather than "not valid JSON" at a bracket (a review) */
        int depth = 0, in_str = 0;
        for (const char *p = text; p < end && depth <= CJSON_NESTING_LIMIT; p++) {
            if (in_str) {
                if (*p == '\\') p++;
                else if (*p == '"') in_str = 0;
            } else if (*p == '"') in_str = 1;
            else if (*p == '[' || *p == '{') depth++;
            else if (*p == ']' || *p == '}') depth--;
        }
        if (depth >= CJSON_NESTING_LIMIT)
            return err_set(ERR_FORMAT, "%s: nested more than %d levels deep at line %ld, column "
                           "%ld%s%s%s", path, CJSON_NESTING_LIMIT, line, col, sep, w, sep2);
        return err_set(ERR_FORMAT, "%s: not valid JSON at line %ld, column %ld%s%s%s", path, line,
                       col, sep, w, sep2);
    }
    int rc = OK;
    if (!cJSON_IsObject(root)) {
        rc = err_set(ERR_FORMAT, "%s: not a JSON object%s%s%s", path, sep, w, sep2);
        goto out;
    }
    for (const char *p = end; p && p < text + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
            line_col(text, p, &line, &col);
            rc = err_set(ERR_FORMAT, "%s: text after the JSON object at line %ld, column %ld", path,
                         line, col);
            goto out;
        }
    int nomem = 0;
    const char *dup = repeated_key(root, &nomem);
    if (nomem) rc = err_set(ERR_NOMEM, "%s: out of memory", path);
    else if (dup)
        rc = err_set(ERR_FORMAT, "%s: key \"%.60s\" appears twice in one object (which one is "
                     "meant?)", path, dup);
out:
    if (rc) cJSON_Delete(root);
    else *out = root;
    return rc;
}

int json_read_object_file(const char *path, const char *what, size_t max, cJSON **out)
{
    *out = NULL;
    char *text;
    size_t len;
    int rc = file_read_text(path, max, &text, &len); /* refuses FIFOs and directories at once */
    if (rc) return rc;
    rc = json_parse_object(path, what, text, len, out);
    mem_free(text);
    return rc;
}
