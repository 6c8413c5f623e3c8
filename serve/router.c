/* router.c - srv_handle: routing, argument checks and the JSON of every endpoint (serve.h,
 * docs/serve.md). Each endpoint's numbers come from the named queries of store/store_serve.h. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/utf8.h"
#include "serve/serve.h"
#include "serve/serve_internal.h"
#include "store/store_serve.h"

#include "serve_assets.h" /* generated from serve/assets/ */

static const struct {
    const char *path, *type;
    const unsigned char *data;
    const unsigned int *len;
} ASSETS[] = {
    {"/app.js", "text/javascript; charset=utf-8", app_js, &app_js_len},
    {"/app.css", "text/css; charset=utf-8", app_css, &app_css_len},
    {"/favicon.svg", "image/svg+xml", favicon_svg, &favicon_svg_len},
};

/* ---- responses ---------------------------------------------------------------------------- */
static int respond_text(srv_response *out, int status, const char *type, char *owned, size_t len)
{
    out->status = status;
    out->type = type;
    out->owned = owned;
    out->data = (const unsigned char *)owned;
    out->len = len;
    return OK;
}

static int respond_json(srv_response *out, int status, cJSON *j)
{
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!s) return ERR_NOMEM;
    size_t n = strlen(s);
    char *o = mem_alloc(n + 1);
    if (!o) {
        cJSON_free(s);
        return ERR_NOMEM;
    }
    memcpy(o, s, n + 1);
    cJSON_free(s);
    return respond_text(out, status, "application/json; charset=utf-8", o, n);
}

int srv_error(srv_response *out, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char clean[3 * sizeof msg + 1];
    utf8_clean(msg, strlen(msg), clean, sizeof clean);
    cJSON *j = cJSON_CreateObject();
    if (!j || !cJSON_AddStringToObject(j, "error", clean) ||
        !cJSON_AddNumberToObject(j, "status", status)) {
        cJSON_Delete(j);
        /* the static fallback: still JSON */
        static const char nomem[] = "{\"error\":\"out of memory\",\"status\":503}";
        out->status = 503;
        out->type = "application/json; charset=utf-8";
        out->data = (const unsigned char *)nomem;
        out->len = sizeof nomem - 1;
        out->owned = NULL;
        return OK;
    }
    return respond_json(out, status, j);
}

void srv_response_free(srv_response *r)
{
    if (r && r->owned) mem_free(r->owned);
    if (r) r->owned = NULL;
}

/* A store or library error as JSON: 400 for bad input the store refused, 500 otherwise (an
 * ERR_SQL from the server's own queries is the server's failure, e.g. a damaged database; the
 * console's, the user's SQL, is mapped to 400 by api_sql). */
static int fail(srv_response *out, int rc)
{
    int status = rc == ERR_ARG ? 400 : rc == ERR_NOTFOUND ? 404 : rc == ERR_ABORTED ? 408
               : rc == ERR_BUSY ? 503 : 500;
    return srv_error(out, status, "%s", err_msg());
}

/* ---- values and rows ---------------------------------------------------------------------- */
/* Text as valid UTF-8 (token texts can hold any bytes): cJSON string, NULL on no memory. */
cJSON *srv_json_str(const char *s, size_t n)
{
    char small[256];
    char *o = 3 * n + 1 <= sizeof small ? small : mem_alloc(3 * n + 1);
    if (!o) return NULL;
    utf8_clean(s, n, o, 3 * n + 1);
    cJSON *j = cJSON_CreateString(o);
    if (o != small) mem_free(o);
    return j;
}

/* s under key as valid UTF-8: for request text and file names echoed in a response. */
static void add_clean(cJSON *j, const char *key, const char *s)
{
    cJSON *x = srv_json_str(s, strlen(s));
    if (x) cJSON_AddItemToObject(j, key, x);
}

/* cJSON prints a number as a double, with 15 digits when those read back within a relative
 * DBL_EPSILON: an integer past 2^53 lost its last digits (9007199254740993 went out as
 * 9.00719925474099e+15) and a double could come back one ulp off (the feature API's 15-digit
 * top values). These print the exact text. */
cJSON *srv_json_int(int64_t i)
{
    char b[24];
    snprintf(b, sizeof b, "%lld", (long long)i);
    return cJSON_CreateRaw(b);
}

/* The shortest of 15, 16 or 17 significant digits that reads back as x itself (buf_double). JSON has no
 * infinity: +-Inf is the object {"real": "inf"} / {"real": "-inf"} (no other value is an
 * object, so a reader can tell it from text); NaN, which SQLite stores as NULL, is null. */
cJSON *srv_json_num(double x)
{
    if (isnan(x)) return cJSON_CreateNull();
    if (!isfinite(x)) {
        cJSON *o = cJSON_CreateObject();
        if (o && !cJSON_AddStringToObject(o, "real", x > 0 ? "inf" : "-inf")) {
            cJSON_Delete(o);
            return NULL;
        }
        return o;
    }
    char b[40];
    return cJSON_CreateRaw(buf_double(b, sizeof b, x));
}

static cJSON *val_json(const store_val *v)
{
    switch (v->type) {
    case STORE_Q_INT: return srv_json_int(v->i);
    case STORE_Q_FLOAT: return srv_json_num(v->f);
    case STORE_Q_TEXT: return srv_json_str(v->s, v->n);
    case STORE_Q_BLOB: {
        char t[64];
        snprintf(t, sizeof t, "<blob %zu bytes>", v->n);
        return cJSON_CreateString(t);
    }
    default: return cJSON_CreateNull();
    }
}

/* A column joined with char(31) (top_tokens) as an array of strings. */
static cJSON *split_json(const store_val *v)
{
    cJSON *a = cJSON_CreateArray();
    if (!a || v->type != STORE_Q_TEXT) return a;
    const char *p = v->s, *end = v->s + v->n;
    while (p <= end) {
        const char *q = memchr(p, 31, (size_t)(end - p));
        if (!q) q = end;
        cJSON *s = srv_json_str(p, (size_t)(q - p));
        if (!s) break;
        cJSON_AddItemToArray(a, s);
        p = q + 1;
    }
    return a;
}

/* Row callback: one object per row appended to the array user points to. */
static int rows_obj(void *user, int nc, const char *const *names, const store_val *v)
{
    cJSON *arr = user, *o = cJSON_CreateObject();
    if (!o) return 1;
    for (int c = 0; c < nc; c++) {
        cJSON *x = !strcmp(names[c], "top_tokens") ? split_json(&v[c]) : val_json(&v[c]);
        if (!x) {
            cJSON_Delete(o);
            return 1;
        }
        cJSON_AddItemToObject(o, names[c], x);
    }
    cJSON_AddItemToArray(arr, o);
    return 0;
}

/* Runs query q into a new array added to parent under key. */
static int query_into(srv_ctx *c, cJSON *parent, const char *key, int q, const store_val *p, int np)
{
    cJSON *arr = cJSON_AddArrayToObject(parent, key);
    if (!arr) return err_set(ERR_NOMEM, "out of memory");
    return store_srv_query(c->st, q, p, np, rows_obj, arr);
}

/* Query q's first row as an object under key (null when no row). *found = rows > 0. */
static int query_one(srv_ctx *c, cJSON *parent, const char *key, int q, const store_val *p,
                     int np, int *found)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return err_set(ERR_NOMEM, "out of memory");
    int rc = store_srv_query(c->st, q, p, np, rows_obj, arr);
    cJSON *first = cJSON_DetachItemFromArray(arr, 0);
    cJSON_Delete(arr);
    if (found) *found = first != NULL;
    if (!first) first = cJSON_CreateNull();
    cJSON_AddItemToObject(parent, key, first);
    return rc;
}

static store_val V_INT(int64_t i) { return (store_val){.type = STORE_Q_INT, .i = i}; }
static store_val V_F(double f) { return (store_val){.type = STORE_Q_FLOAT, .f = f}; }
static store_val V_STR(const char *s) { return (store_val){.type = STORE_Q_TEXT, .s = s, .n = strlen(s)}; }
static store_val V_NULL(void) { return (store_val){.type = STORE_Q_NULL}; }

/* ---- arguments ---------------------------------------------------------------------------- */
/* 1 when k is one of the names in allowed ("a|b|c"). */
static int in_list(const char *allowed, const char *k)
{
    size_t n = strlen(k);
    for (const char *p = allowed; *p && n;) {
        const char *e = strchr(p, '|');
        size_t m = e ? (size_t)(e - p) : strlen(p);
        if (m == n && !memcmp(p, k, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

/* Every argument must be one the endpoint knows (allowed: "a|b|c"), and appear once. */
static int check_args(const srv_request *rq, const char *allowed, srv_response *out)
{
    for (int i = 0; i < rq->nargs; i++) {
        const char *k = rq->args[i].key;
        if (!in_list(allowed, k)) {
            srv_error(out, 400, "unknown argument '%.60s' (this endpoint takes %s)", k,
                      *allowed ? allowed : "none");
            return 0;
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(rq->args[j].key, k)) {
                srv_error(out, 400, "argument '%.60s' given twice", k);
                return 0;
            }
    }
    return 1;
}

static const char *arg(const srv_request *rq, const char *key)
{
    for (int i = 0; i < rq->nargs; i++)
        if (!strcmp(rq->args[i].key, key)) return rq->args[i].value;
    return NULL;
}

int srv_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *v)
{
    if (!s || !*s || strlen(s) > 20) return 0;
    errno = 0;
    char *end;
    long long x = strtoll(s, &end, 10);
    if (errno || *end || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) || x < lo || x > hi) return 0;
    *v = x;
    return 1;
}

/* An integer of a URL (path id or argument): srv_parse_int, in its one spelling: no leading
 * zero ("0" itself is fine) and no "-0", so /api/dict/01 is not a second name of /api/dict/1
 * (a report file named feature_0N.png was already refused, /report/1/0N.png was served). */
static int url_int(const char *s, int64_t lo, int64_t hi, int64_t *v)
{
    const char *d = s && s[0] == '-' ? s + 1 : s;
    if (!s || (d[0] == '0' && (d[1] || d != s))) return 0;
    return srv_parse_int(s, lo, hi, v);
}

/* Integer argument key in [lo, hi], default def when absent. 0 (and a 400 in out) when bad. */
static int int_arg(const srv_request *rq, const char *key, int64_t lo, int64_t hi, int64_t def,
                   int64_t *v, srv_response *out)
{
    const char *s = arg(rq, key);
    *v = def;
    if (!s) return 1;
    if (url_int(s, lo, hi, v)) return 1;
    srv_error(out, 400, "argument '%s' must be an integer in %lld..%lld (decimal, no leading "
              "zero), got '%.40s'", key, (long long)lo, (long long)hi, s);
    return 0;
}

static int float_arg(const srv_request *rq, const char *key, store_val *v, srv_response *out)
{
    const char *s = arg(rq, key);
    *v = V_NULL();
    if (!s) return 1;
    /* JSON's spelling, at most 40 bytes: no hex, blank, '+', "inf" or empty string */
    double x = 0;
    size_t len = strlen(s) <= 40 ? buf_read_double(s, BUF_DECIMAL_JSON, &x) : 0;
    if (!len || s[len]) {
        srv_error(out, 400, "argument '%s' must be a finite decimal number, got '%.40s'", key, s);
        return 0;
    }
    *v = V_F(x);
    return 1;
}

/* Path "/<prefix>/D/N" (D, N non-negative integers). */
static int path_dict_feature(const char *rest, int64_t *d, int64_t *f)
{
    char a[24], b[24];
    const char *slash = strchr(rest, '/');
    if (!slash || (size_t)(slash - rest) >= sizeof a || strlen(slash + 1) >= sizeof b) return 0;
    memcpy(a, rest, (size_t)(slash - rest));
    a[slash - rest] = 0;
    strcpy(b, slash + 1);
    return a[0] != '-' && b[0] != '-' && url_int(a, 0, INT32_MAX, d) && url_int(b, 0, INT32_MAX, f);
}

/* ---- endpoints ------------------------------------------------------------------------------ */
static int api_info(srv_ctx *c, const srv_request *rq, srv_response *out)
{
    if (!check_args(rq, "", out)) return OK;
    cJSON *j = cJSON_CreateObject();
    int rc = j ? query_one(c, j, "db", STORE_SRV_INFO, NULL, 0, NULL) : ERR_NOMEM;
    if (rc) {
        cJSON_Delete(j);
        return fail(out, rc);
    }
    add_clean(j, "path", store_srv_path(c->st));
    cJSON_AddStringToObject(j, "search", store_srv_fts5(c->st) ? "fts5" : "like");
    cJSON_AddBoolToObject(j, "test", c->model != NULL);
    if (c->model) {
        cJSON_AddNumberToObject(j, "test_dict", (double)c->test_dict);
        add_clean(j, "test_sae", srv_model_sae(c->model));
        cJSON_AddNumberToObject(j, "test_max_tokens", srv_model_ctx(c->model));
    }
    cJSON_AddBoolToObject(j, "steering", c->model != NULL);
    if (c->model) {
        cJSON_AddNumberToObject(j, "steer_max_tokens", SRV_STEER_TOKENS);
        cJSON_AddNumberToObject(j, "steer_max_prompt", SRV_STEER_CHARS);
        cJSON_AddNumberToObject(j, "steer_timeout_ms", SRV_STEER_MS);
        cJSON_AddNumberToObject(j, "steer_max_strength", SRV_STEER_MAX_S);
    }
    cJSON_AddNumberToObject(j, "sql_max_rows", SRV_SQL_ROWS);
    cJSON_AddNumberToObject(j, "sql_timeout_ms", SRV_SQL_MS);
    return respond_json(out, 200, j);
}

static int api_queries(srv_ctx *c, const srv_request *rq, srv_response *out)
{
    if (!check_args(rq, "", out)) return OK;
    cJSON *j = cJSON_CreateObject();
    for (int q = 0; j && q < STORE_SRV_NQ; q++)
        cJSON_AddStringToObject(j, store_srv_name(q), store_srv_sql(c->st, q));
    return respond_json(out, 200, j);
}

static int api_dicts(srv_ctx *c, const srv_request *rq, srv_response *out)
{
    if (!check_args(rq, "", out)) return OK;
    cJSON *j = cJSON_CreateObject();
    int rc = j ? query_into(c, j, "dicts", STORE_SRV_DICTS, NULL, 0) : ERR_NOMEM;
    if (rc) {
        cJSON_Delete(j);
        return fail(out, rc);
    }
    return respond_json(out, 200, j);
}

static int api_dict(srv_ctx *c, const srv_request *rq, const char *rest, srv_response *out)
{
    int64_t d;
    if (!url_int(rest, 0, INT32_MAX, &d) || rest[0] == '-')
        return srv_error(out, 400, "expected /api/dict/DICT with DICT a dictionary id");
    if (!check_args(rq, "", out)) return OK;
    store_val p[] = {V_INT(d)};
    cJSON *j = cJSON_CreateObject();
    int found = 0;
    int rc = j ? query_one(c, j, "dict", STORE_SRV_DICT, p, 1, &found) : ERR_NOMEM;
    if (!rc && !found) {
        cJSON_Delete(j);
        return srv_error(out, 404, "no dictionary %lld", (long long)d);
    }
    if (!rc) rc = query_into(c, j, "metrics", STORE_SRV_DICT_METRICS, p, 1);
    if (!rc) rc = query_into(c, j, "training_log", STORE_SRV_DICT_LOG, p, 1);
    if (rc) {
        cJSON_Delete(j);
        return fail(out, rc);
    }
    return respond_json(out, 200, j);
}

int srv_int_cb(void *user, int nc, const char *const *names, const store_val *v)
{
    (void)names;
    if (nc > 0 && v[0].type == STORE_Q_INT) *(int64_t *)user = v[0].i;
    return 0;
}

static int api_features(srv_ctx *c, const srv_request *rq, srv_response *out)
{
    if (!check_args(rq, "dict|sort|order|min_density|max_density|tag|q|offset|limit", out))
        return OK;
    int64_t d, offset, limit;
    store_val lo, hi;
    if (!int_arg(rq, "dict", 0, INT32_MAX, -1, &d, out) ||
        !int_arg(rq, "offset", 0, 10000000, 0, &offset, out) ||
        !int_arg(rq, "limit", 1, 1000, 50, &limit, out) || !float_arg(rq, "min_density", &lo, out) ||
        !float_arg(rq, "max_density", &hi, out))
        return OK;
    if (d < 0) return srv_error(out, 400, "argument 'dict' is required");
    static const char *const sorts[] = {"feature", "density", "max_act", "mean_act", "n_active",
                                        "precision", "nearest_cos", "mean_kl", "mean_dloss"};
    const char *sort = arg(rq, "sort"), *order = arg(rq, "order"), *tag = arg(rq, "tag"),
               *q = arg(rq, "q");
    if (!sort) sort = "density";
    int ok = 0;
    for (size_t i = 0; i < sizeof sorts / sizeof *sorts; i++) ok |= !strcmp(sort, sorts[i]);
    if (!ok)
        return srv_error(out, 400, "argument 'sort' must be one of feature|density|max_act|"
                                   "mean_act|n_active|precision|nearest_cos|mean_kl|mean_dloss, "
                                   "got '%.40s'", sort);
    if (!order) order = "desc";
    if (strcmp(order, "asc") && strcmp(order, "desc"))
        return srv_error(out, 400, "argument 'order' must be asc or desc, got '%.40s'", order);
    char match[512];
    store_val mv = V_NULL();
    if (q && *q) {
        if (store_srv_match(c->st, q, match, sizeof match)) return fail(out, ERR_ARG);
        mv = V_STR(match);
    }
    store_val p[9] = {V_INT(d), lo, hi, tag && *tag ? V_STR(tag) : V_NULL(), mv, V_STR(sort),
                      V_STR(order), V_INT(limit), V_INT(offset)};
    int64_t total = 0;
    int rc = store_srv_query(c->st, STORE_SRV_FEATURES_COUNT, p, 5, srv_int_cb, &total);
    if (!rc && !total) {
        /* no rows: an unknown dictionary is a 404 as on /api/dict/D (it was 200, total 0, and
           the page showed an empty table under another dictionary's name) */
        int64_t id = -1;
        rc = store_srv_query(c->st, STORE_SRV_DICT, p, 1, srv_int_cb, &id);
        if (!rc && id < 0) return srv_error(out, 404, "no dictionary %lld", (long long)d);
    }
    cJSON *j = rc ? NULL : cJSON_CreateObject();
    if (!rc && !j) rc = err_set(ERR_NOMEM, "out of memory");
    if (!rc) {
        cJSON_AddNumberToObject(j, "dict", (double)d);
        cJSON_AddNumberToObject(j, "total", (double)total);
        cJSON_AddNumberToObject(j, "offset", (double)offset);
        cJSON_AddNumberToObject(j, "limit", (double)limit);
        cJSON_AddStringToObject(j, "sort", sort);
        cJSON_AddStringToObject(j, "order", order);
        rc = query_into(c, j, "features", STORE_SRV_FEATURES, p, 9);
    }
    if (rc) {
        cJSON_Delete(j);
        return fail(out, rc);
    }
    return respond_json(out, 200, j);
}

static int api_search(srv_ctx *c, const srv_request *rq, srv_response *out)
{
    if (!check_args(rq, "q|limit", out)) return OK;
    int64_t limit;
    if (!int_arg(rq, "limit", 1, 200, 20, &limit, out)) return OK;
    const char *q = arg(rq, "q");
    char match[512];
    if (!q || !*q) return srv_error(out, 400, "argument 'q' is required");
    if (store_srv_match(c->st, q, match, sizeof match)) return fail(out, ERR_ARG);
    store_val p[] = {V_STR(match), V_INT(limit)};
    cJSON *j = cJSON_CreateObject();
    int rc = j ? query_into(c, j, "results", STORE_SRV_SEARCH, p, 2) : ERR_NOMEM;
    if (rc) {
        cJSON_Delete(j);
        return fail(out, rc);
    }
    add_clean(j, "q", q);
    return respond_json(out, 200, j);
}

static int api_token(srv_ctx *c, const srv_request *rq, srv_response *out)
{
    if (!check_args(rq, "dict|text|limit|offset", out)) return OK;
    int64_t d, limit, offset;
    if (!int_arg(rq, "dict", 0, INT32_MAX, -1, &d, out) ||
        !int_arg(rq, "limit", 1, 500, 50, &limit, out) ||
        !int_arg(rq, "offset", 0, 10000000, 0, &offset, out))
        return OK;
    const char *t = arg(rq, "text");
    if (d < 0 || !t || !*t) return srv_error(out, 400, "arguments 'dict' and 'text' are required");
    if (strlen(t) > 200) return srv_error(out, 400, "argument 'text': at most 200 bytes");
    store_val p[] = {V_INT(d), V_STR(t), V_INT(limit), V_INT(offset)};
    cJSON *j = cJSON_CreateObject();
    int rc = j ? query_into(c, j, "features", STORE_SRV_TOKEN, p, 4) : ERR_NOMEM;
    if (rc) {
        cJSON_Delete(j);
        return fail(out, rc);
    }
    /* how many features in all (the query's window count; the page said nothing of the 149
       past the first 50, an audit): from a row, or a count past the end when offset is */
    int64_t total = 0;
    cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "features"), 0), *x;
    if (first && (x = cJSON_GetObjectItem(first, "total")) && x->valuestring)
        total = strtoll(x->valuestring, NULL, 10);
    else if (!first && offset > 0) {
        store_val p0[] = {V_INT(d), V_STR(t), V_INT(1), V_INT(0)};
        cJSON *tmp = cJSON_CreateObject();
        rc = tmp ? query_into(c, tmp, "features", STORE_SRV_TOKEN, p0, 4) : ERR_NOMEM;
        cJSON *f0 = rc ? NULL : cJSON_GetArrayItem(cJSON_GetObjectItem(tmp, "features"), 0);
        if (f0 && (x = cJSON_GetObjectItem(f0, "total")) && x->valuestring)
            total = strtoll(x->valuestring, NULL, 10);
        cJSON_Delete(tmp);
        if (rc) {
            cJSON_Delete(j);
            return fail(out, rc);
        }
    }
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "features")) cJSON_DeleteItemFromObject(x, "total");
    cJSON_AddItemToObject(j, "total", srv_json_int(total));
    cJSON_AddItemToObject(j, "offset", srv_json_int(offset));
    cJSON_AddItemToObject(j, "limit", srv_json_int(limit));
    add_clean(j, "text", t);
    return respond_json(out, 200, j);
}

/* The activation rows of STORE_SRV_ACTS grouped into examples: one per (kind, interval, rank),
 * each with its tokens. */
typedef struct {
    cJSON *top, *bands; /* arrays */
    cJSON *cur, *cur_tokens;
    const char *cur_kind;
    int64_t cur_interval, cur_rank, cur_seq, cur_pos;
    cJSON *band;       /* current band object */
    int64_t band_interval;
    int max_top;
} acts_acc;

static int acts_cb(void *user, int nc, const char *const *names, const store_val *v)
{
    acts_acc *a = user;
    /* columns: kind interval rank seq_id pos value position text tok_value */
    if (nc != 9) return 1;
    const char *kind = v[0].type == STORE_Q_TEXT ? v[0].s : "";
    int quant = !strcmp(kind, "quantile");
    int64_t interval = v[1].type == STORE_Q_INT ? v[1].i : -1, rank = v[2].i;
    if (!quant && rank >= a->max_top) return 0;
    if (!a->cur || strcmp(a->cur_kind, quant ? "quantile" : "top") || a->cur_interval != interval ||
        a->cur_rank != rank || a->cur_seq != v[3].i || a->cur_pos != v[4].i) {
        a->cur = cJSON_CreateObject();
        if (!a->cur) return 1;
        /* exact digits and marked infinities, as everywhere else (seq was a double, 2^53 + 1
           came out as 9.00719925474099e+15 and live=1 ran another sequence; an Inf value
           came out as 0: an audit) */
        cJSON_AddItemToObject(a->cur, "seq", srv_json_int(v[3].i));
        cJSON_AddItemToObject(a->cur, "pos", srv_json_int(v[4].i));
        cJSON_AddItemToObject(a->cur, "value", srv_json_num(v[5].type == STORE_Q_FLOAT ? v[5].f
                                                            : v[5].type == STORE_Q_INT ? (double)v[5].i : 0));
        a->cur_tokens = cJSON_AddArrayToObject(a->cur, "tokens");
        a->cur_kind = quant ? "quantile" : "top";
        a->cur_interval = interval;
        a->cur_rank = rank;
        a->cur_seq = v[3].i;
        a->cur_pos = v[4].i;
        if (quant) {
            if (!a->band || a->band_interval != interval) {
                a->band = cJSON_CreateObject();
                if (!a->band) return 1;
                cJSON_AddItemToObject(a->band, "interval", srv_json_int(interval));
                cJSON_AddArrayToObject(a->band, "examples");
                cJSON_AddItemToArray(a->bands, a->band);
                a->band_interval = interval;
            }
            cJSON_AddItemToArray(cJSON_GetObjectItem(a->band, "examples"), a->cur);
        } else {
            cJSON_AddItemToArray(a->top, a->cur);
        }
    }
    cJSON *t = cJSON_CreateArray();
    if (!t) return 1;
    /* [text, activation (0 when none stored), is the example's own position] */
    cJSON_AddItemToArray(t, v[7].type == STORE_Q_TEXT ? srv_json_str(v[7].s, v[7].n)
                                                      : cJSON_CreateString(""));
    double tv = v[8].type == STORE_Q_FLOAT ? v[8].f : v[8].type == STORE_Q_INT ? (double)v[8].i : 0;
    cJSON_AddItemToArray(t, srv_json_num(tv));
    cJSON_AddItemToArray(t, cJSON_CreateBool(v[6].i == v[4].i));
    cJSON_AddItemToArray(a->cur_tokens, t);
    return 0;
}

typedef struct { int *ids; int n, cap, bad; } ids_acc; /* bad: first position with no integer id */
static int ids_cb(void *user, int nc, const char *const *names, const store_val *v)
{
    ids_acc *a = user;
    if (a->n == a->cap) return 1;
    int ok = nc > 0 && v[0].type == STORE_Q_INT && v[0].i >= INT_MIN && v[0].i <= INT_MAX;
    if (!ok && a->bad < 0) a->bad = a->n;
    a->ids[a->n++] = ok ? (int)v[0].i : -1;
    return 0;
}

/* Adds each token's activation recomputed with the model (a 4th element) to one example:
 * the stored sequence up to the window's last token goes through the model and the SAE. */
static int live_example(srv_ctx *c, cJSON *ex, int64_t f)
{
    cJSON *toks = cJSON_GetObjectItem(ex, "tokens");
    int n = cJSON_GetArraySize(toks), own = -1;
    for (int i = 0; i < n; i++)
        if (cJSON_IsTrue(cJSON_GetArrayItem(cJSON_GetArrayItem(toks, i), 2))) own = i;
    /* seq and pos are raw digits (srv_json_int) */
    int64_t seq = strtoll(cJSON_GetObjectItem(ex, "seq")->valuestring, NULL, 10);
    int64_t pos = strtoll(cJSON_GetObjectItem(ex, "pos")->valuestring, NULL, 10);
    if (own < 0 || n < 1) return OK;
    int64_t last = pos - own + n - 1;
    int cap = srv_model_ctx(c->model) + 2;
    ids_acc a = {mem_alloc((size_t)cap * sizeof(int)), 0, cap, -1};
    float *act = mem_alloc((size_t)cap * sizeof(float));
    int rc = a.ids && act ? OK : err_set(ERR_NOMEM, "out of memory");
    store_val p[] = {V_INT(seq), V_INT(last)};
    if (!rc) rc = store_srv_query(c->st, STORE_SRV_SEQ_TOKENS, p, 2, ids_cb, &a);
    if (rc == ERR_ABORTED || (!rc && a.n != last + 1))
        rc = err_set(ERR_ARG, "positions 0..%lld hold %s%d tokens, not %lld", (long long)last,
                     rc ? "more than " : "", a.n, (long long)last + 1);
    else if (!rc && a.bad >= 0)
        rc = err_set(ERR_ARG, "position %d holds no integer token id", a.bad);
    if (!rc) rc = srv_model_feature(c->model, a.ids, a.n, (int)f, act);
    /* the sequence is the database's, not the request's: a damaged tokens table (an id outside
       the vocabulary, a row deleted) was a 400 that blamed the client (a review) */
    if (rc == ERR_ARG) {
        char why[256];
        snprintf(why, sizeof why, "%s", err_msg());
        rc = err_set(ERR_FORMAT, "%s: sequence %lld of the tokens table is damaged or not this "
                     "model's: %s", store_srv_path(c->st), (long long)seq, why);
    }
    for (int i = 0; !rc && i < n; i++)
        cJSON_AddItemToArray(cJSON_GetArrayItem(toks, i), srv_json_num(act[pos - own + i]));
    mem_free(a.ids);
    mem_free(act);
    return rc;
}

static int api_feature(srv_ctx *c, const srv_request *rq, const char *rest, srv_response *out)
{
    int64_t d, f, before, after, top, nn, live;
    if (!path_dict_feature(rest, &d, &f))
        return srv_error(out, 400, "expected /api/feature/DICT/FEATURE with two non-negative integers");
    if (!check_args(rq, "before|after|top|nearest|live", out)) return OK;
    if (!int_arg(rq, "live", 0, 1, 0, &live, out)) return OK;
    if (live && (!c->model || c->test_dict != d))
        return srv_error(out, 400, "live=1 needs serve --model with the SAE of dictionary %lld "
                         "(--sae)", (long long)d);
    if (!int_arg(rq, "before", 0, 64, 10, &before, out) ||
        !int_arg(rq, "after", 0, 64, 4, &after, out) ||
        !int_arg(rq, "top", 0, 1000, 20, &top, out) ||
        !int_arg(rq, "nearest", 0, 100, 10, &nn, out))
        return OK;
    store_val p[] = {V_INT(d), V_INT(f), V_INT(before), V_INT(after)};
    cJSON *j = cJSON_CreateObject();
    int found = 0, rc = j ? query_one(c, j, "feature", STORE_SRV_FEATURE, p, 2, &found) : ERR_NOMEM;
    if (!rc && !found) {
        cJSON_Delete(j);
        return srv_error(out, 404, "no feature %lld in dictionary %lld", (long long)f, (long long)d);
    }
    if (!rc) rc = query_one(c, j, "dict", STORE_SRV_DICT, p, 1, NULL);
    if (!rc) rc = query_into(c, j, "metrics", STORE_SRV_DICT_METRICS, p, 1);
    if (!rc) rc = query_into(c, j, "hist", STORE_SRV_HIST, p, 2);
    if (!rc) rc = query_into(c, j, "logits", STORE_SRV_LOGITS, p, 2);
    if (!rc) rc = query_one(c, j, "effect", STORE_SRV_EFFECT, p, 2, NULL);
    if (!rc) rc = query_into(c, j, "effect_logits", STORE_SRV_EFFECT_LOGITS, p, 2);
    if (!rc) rc = query_into(c, j, "pos", STORE_SRV_POS, p, 2);
    if (!rc) {
        store_val pn[] = {V_INT(d), V_INT(f), V_INT(nn)};
        rc = query_into(c, j, "nearest", STORE_SRV_NEAREST, pn, 3);
    }
    if (!rc) {
        acts_acc a = {.top = cJSON_AddArrayToObject(j, "top"),
                      .bands = cJSON_AddArrayToObject(j, "bands"), .max_top = (int)top,
                      .band_interval = -2};
        rc = a.top && a.bands ? store_srv_query(c->st, STORE_SRV_ACTS, p, 4, acts_cb, &a)
                              : err_set(ERR_NOMEM, "out of memory");
        cJSON *ex;
        if (live) {
            cJSON_ArrayForEach(ex, a.top) if (!rc) rc = live_example(c, ex, f);
            cJSON *b;
            cJSON_ArrayForEach(b, a.bands) cJSON_ArrayForEach(ex, cJSON_GetObjectItem(b, "examples"))
                if (!rc) rc = live_example(c, ex, f);
        }
    }
    if (!rc) cJSON_AddBoolToObject(j, "live", live != 0);
    if (!rc && srv_report_has(c->report, d, f)) {
        char u[64];
        snprintf(u, sizeof u, "/report/%lld/%lld.png", (long long)d, (long long)f);
        cJSON_AddStringToObject(j, "dashboard", u);
    } else if (!rc) cJSON_AddNullToObject(j, "dashboard");
    if (rc) {
        cJSON_Delete(j);
        return fail(out, rc);
    }
    cJSON_AddNumberToObject(j, "dict_id", (double)d);
    return respond_json(out, 200, j);
}

static int check_fields(cJSON *j, const char *allowed, srv_response *out);

/* The first key some object of j (at any depth) has twice, or NULL. */
static const char *dup_key(const cJSON *j)
{
    const cJSON *x, *y;
    cJSON_ArrayForEach(x, j)
    {
        if (cJSON_IsObject(j))
            for (y = j->child; y != x; y = y->next)
                if (!strcmp(x->string, y->string)) return x->string;
        if (cJSON_IsObject(x) || cJSON_IsArray(x)) {
            const char *d = dup_key(x);
            if (d) return d;
        }
    }
    return NULL;
}

/* POST bodies are JSON objects; GET takes the same keys as arguments. */
static cJSON *body_json(const srv_request *rq, srv_response *out)
{
    if (rq->body_len > SRV_MAX_BODY) {
        srv_error(out, 413, "request body above %d bytes", SRV_MAX_BODY);
        return NULL;
    }
    /* cJSON keeps strings NUL-terminated: a NUL in one (raw or \u0000) would cut it silently,
       so "select 1\u0000; drop ..." would run as "select 1". In valid JSON a backslash only
       starts an escape inside a string, so a scan of the escapes finds every \u0000. */
    const char *b = rq->body ? rq->body : "";
    for (size_t i = 0; i < rq->body_len; i++) {
        if (!b[i] || (b[i] == '\\' && i + 5 < rq->body_len && b[i + 1] == 'u' &&
                      !memcmp(b + i + 2, "0000", 4))) {
            srv_error(out, 400, "the body has a NUL character (\\u0000), which no field may hold");
            return NULL;
        }
        if (b[i] == '\\') i++; /* the escaped character */
    }
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(b, rq->body_len, &end, 0);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        srv_error(out, 400, "the body must be a JSON object");
        return NULL;
    }
    /* one JSON text (RFC 8259 2): {"sql": "SELECT 1"}{"a": 1} ran the first and dropped the rest */
    while (end && end < b + rq->body_len && strchr(" \t\r\n", *end) && *end) end++;
    if (end && end < b + rq->body_len) {
        cJSON_Delete(j);
        srv_error(out, 400, "the body has more after its JSON object (at byte %zu)",
                  (size_t)(end - b));
        return NULL;
    }
    /* cJSON keeps every copy of a key and finds the first: {"sql": "SELECT 1", "sql": "..."}
       ran the first where another reader would take the last */
    const char *dup = dup_key(j);
    if (dup) {
        srv_error(out, 400, "the body has the key '%.60s' twice", dup);
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

/* A string field of a JSON body: absent -> *v NULL; present, it must be a string (a method of
 * 5, ["clamp"] or null ran the default "add" with 200: a review). 0 (and a 400 in out) when not. */
static int str_field(cJSON *j, const char *key, const char **v, srv_response *out)
{
    cJSON *x = cJSON_GetObjectItemCaseSensitive(j, key);
    *v = NULL;
    if (!x) return 1;
    if (!cJSON_IsString(x)) {
        srv_error(out, 400, "\"%s\" must be a string", key);
        return 0;
    }
    *v = x->valuestring;
    return 1;
}

typedef struct {
    cJSON *cols, *rows;
    size_t bytes; /* the rows so far as JSON (json_size) */
    int full;     /* a row was left out: it would have taken bytes past SRV_SQL_BYTES */
} sql_acc;

/* Bytes x takes in the response as cJSON prints it, with its comma: a control character is 6
 * (\u0001), '"' and '\\' 2 (the cap counted the raw text, so 64 columns of char(1) cells sent
 * 50 MB where it meant 8: a review). The numbers are raw digits; an object is {"real":"-inf"}. */
static size_t json_size(const cJSON *x)
{
    if (!x) return 0;
    if (cJSON_IsRaw(x)) return strlen(x->valuestring) + 1;
    if (cJSON_IsNull(x)) return 5;
    if (!cJSON_IsString(x)) return 17;
    size_t n = 3;
    for (const unsigned char *p = (const unsigned char *)x->valuestring; *p; p++)
        n += *p == '"' || *p == '\\' || *p == '\b' || *p == '\f' || *p == '\n' || *p == '\r' ||
             *p == '\t' ? 2 : *p < 32 ? 6 : 1;
    return n;
}

static int sql_cb(void *user, int nc, const char *const *names, const store_val *v)
{
    sql_acc *a = user;
    if (!cJSON_GetArraySize(a->cols))
        for (int c = 0; c < nc; c++) {
            cJSON *x = srv_json_str(names[c], strlen(names[c]));
            a->bytes += json_size(x);
            cJSON_AddItemToArray(a->cols, x);
        }
    cJSON *r = cJSON_CreateArray();
    if (!r) return 1;
    size_t n = 3; /* the row's [], */
    for (int c = 0; c < nc; c++) {
        store_val x = v[c];
        if (x.type == STORE_Q_TEXT && x.n > 2000) x.n = 2000; /* long cells cut (utf8_clean mends the end) */
        cJSON *e = val_json(&x);
        n += json_size(e);
        cJSON_AddItemToArray(r, e);
    }
    if (a->bytes + n > SRV_SQL_BYTES) { /* the rows sent stay within the cap */
        cJSON_Delete(r);
        a->full = 1;
        return 1;
    }
    a->bytes += n;
    cJSON_AddItemToArray(a->rows, r);
    return 0;
}

/* An empty result's column names (sql_cb takes them from the first row otherwise): the page
 * drew no header for "select 1 as a, 2 as b where 0" (a review) */
static int sql_cols(void *user, int nc, const char *const *names)
{
    sql_acc *a = user;
    for (int c = 0; c < nc; c++) {
        cJSON *x = srv_json_str(names[c], strlen(names[c]));
        if (!x) return 1;
        a->bytes += json_size(x);
        cJSON_AddItemToArray(a->cols, x);
    }
    return 0;
}

static int api_sql(srv_ctx *c, const srv_request *rq, srv_response *out)
{
    cJSON *body = NULL;
    const char *sql;
    if (!strcmp(rq->method, "POST")) {
        if (!check_args(rq, "", out)) return OK;
        if (!(body = body_json(rq, out))) return OK;
        if (!check_fields(body, "sql", out)) {
            cJSON_Delete(body);
            return OK;
        }
        if (!str_field(body, "sql", &sql, out)) {
            cJSON_Delete(body);
            return OK;
        }
    } else {
        if (!check_args(rq, "q", out)) return OK;
        sql = arg(rq, "q");
    }
    if (!sql || !*sql) {
        cJSON_Delete(body);
        return srv_error(out, 400, "no SQL given (POST {\"sql\": \"...\"} or GET ?q=...)");
    }
    if (strlen(sql) > 16384) {
        cJSON_Delete(body);
        return srv_error(out, 413, "SQL longer than 16384 bytes");
    }
    cJSON *j = cJSON_CreateObject();
    sql_acc a = {cJSON_AddArrayToObject(j, "columns"), cJSON_AddArrayToObject(j, "rows"), 0, 0};
    int truncated = 0, rc = a.cols && a.rows ? OK : err_set(ERR_NOMEM, "out of memory");
    if (!rc)
        rc = store_srv_console(c->st, sql, SRV_SQL_ROWS, SRV_SQL_MS, sql_cb, sql_cols, &a, &truncated);
    cJSON_Delete(body);
    if (rc == ERR_ABORTED && a.full) {
        rc = OK;
        truncated = 1;
    }
    if (rc) {
        cJSON_Delete(j);
        return rc == ERR_SQL ? srv_error(out, 400, "%s", err_msg()) : fail(out, rc);
    }
    cJSON_AddBoolToObject(j, "truncated", truncated);
    cJSON_AddNumberToObject(j, "max_rows", SRV_SQL_ROWS);
    return respond_json(out, 200, j);
}

static int api_test(srv_ctx *c, const srv_request *rq, srv_response *out)
{
    cJSON *body = NULL;
    const char *text;
    int64_t k = 5;
    if (!strcmp(rq->method, "POST")) {
        if (!check_args(rq, "", out)) return OK;
        if (!(body = body_json(rq, out))) return OK;
        if (!check_fields(body, "text|k", out)) {
            cJSON_Delete(body);
            return OK;
        }
        if (!str_field(body, "text", &text, out)) {
            cJSON_Delete(body);
            return OK;
        }
        cJSON *kv = cJSON_GetObjectItemCaseSensitive(body, "k");
        if (kv && (!cJSON_IsNumber(kv) || kv->valuedouble < 1 || kv->valuedouble > 32 ||
                   kv->valuedouble != (double)(int)kv->valuedouble)) {
            cJSON_Delete(body);
            return srv_error(out, 400, "\"k\" must be an integer in 1..32");
        }
        if (kv) k = kv->valueint;
    } else {
        if (!check_args(rq, "text|k", out) || !int_arg(rq, "k", 1, 32, 5, &k, out)) return OK;
        text = arg(rq, "text");
    }
    int rc = OK;
    if (!c->model) rc = srv_error(out, 404, "test your text needs a model: start serve with --model DIR");
    else if (!text || !*text) rc = srv_error(out, 400, "no text given");
    else if (strlen(text) > SRV_TEST_CHARS)
        rc = srv_error(out, 413, "text longer than %d bytes", SRV_TEST_CHARS);
    else {
        cJSON *j = cJSON_CreateObject();
        rc = j ? srv_model_test(c->model, text, (int)k, j) : err_set(ERR_NOMEM, "out of memory");
        if (rc) {
            cJSON_Delete(j);
            rc = fail(out, rc);
        } else {
            cJSON_AddNumberToObject(j, "dict_id", (double)c->test_dict);
            rc = respond_json(out, 200, j);
        }
    }
    cJSON_Delete(body);
    return rc;
}

/* A number field of a JSON body: absent -> def; else finite, in [lo, hi] and (integer) whole.
 * 0 (and a 400 in out) when bad. */
static int num_field(cJSON *j, const char *key, double lo, double hi, int integer, double def,
                     double *v, srv_response *out)
{
    cJSON *x = cJSON_GetObjectItemCaseSensitive(j, key);
    *v = def;
    if (!x) return 1;
    if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < lo ||
        x->valuedouble > hi || (integer && x->valuedouble != floor(x->valuedouble))) {
        srv_error(out, 400, "\"%s\" must be a%s number in %g..%g", key, integer ? "n integer" : "",
                  lo, hi);
        return 0;
    }
    *v = x->valuedouble;
    return 1;
}

/* Every key of a JSON body must be one the endpoint knows (allowed: "a|b|c"). */
static int check_fields(cJSON *j, const char *allowed, srv_response *out)
{
    cJSON *x;
    cJSON_ArrayForEach(x, j)
    {
        if (!in_list(allowed, x->string)) {
            srv_error(out, 400, "unknown field '%.60s' (this endpoint takes %s)", x->string, allowed);
            return 0;
        }
    }
    return 1;
}

/* POST /api/steer: the steered and the unsteered continuation side by side (srv_model_steer). */
static int api_steer(srv_ctx *c, const srv_request *rq, srv_response *out)
{
    if (!check_args(rq, "", out)) return OK;
    if (!c->model)
        return srv_error(out, 404, "steering needs a model: start serve with --model DIR (and --sae)");
    cJSON *body = body_json(rq, out);
    if (!body) return OK;
    int rc = OK;
    ana_steer_term terms[SRV_STEER_TERMS];
    double d, mx, seed, temp, topk, tmo;
    srv_steer_req r = {.terms = terms, .timeout_ms = SRV_STEER_MS};
    const char *method;
    cJSON *fs = cJSON_GetObjectItemCaseSensitive(body, "features");
    if (!check_fields(body, "dict|prompt|features|method|max_tokens|seed|temperature|top_k|"
                      "timeout_ms", out) ||
        !str_field(body, "method", &method, out) || !str_field(body, "prompt", &r.prompt, out) ||
        !num_field(body, "timeout_ms", 0, SRV_STEER_MS, 1, SRV_STEER_MS, &tmo, out) ||
        !num_field(body, "dict", 0, INT32_MAX, 1, (double)c->test_dict, &d, out) ||
        !num_field(body, "max_tokens", 1, SRV_STEER_TOKENS, 1, 32, &mx, out) ||
        !num_field(body, "seed", 0, 9007199254740992.0, 1, 0, &seed, out) ||
        !num_field(body, "temperature", 0, 10, 0, 1, &temp, out) ||
        !num_field(body, "top_k", 0, 1 << 20, 1, 0, &topk, out))
        goto done;
    if ((int64_t)d != c->test_dict) {
        rc = srv_error(out, 400, "dictionary %lld is not the SAE serve runs (dictionary %lld: --sae)",
                       (long long)d, (long long)c->test_dict);
        goto done;
    }
    if (!r.prompt) {
        rc = srv_error(out, 400, "\"prompt\" (a string) is required (\"\" starts from <|endoftext|>)");
        goto done;
    }
    if (strlen(r.prompt) > SRV_STEER_CHARS) {
        rc = srv_error(out, 413, "prompt longer than %d bytes", SRV_STEER_CHARS);
        goto done;
    }
    if (method && ana_steer_method_parse(method, &r.method)) {
        rc = srv_error(out, 400, "\"method\" must be add, clamp, ortho or cap");
        goto done;
    } else if (!method) r.method = ANA_STEER_ADD;
    int nf = cJSON_IsArray(fs) ? cJSON_GetArraySize(fs) : -1;
    if (nf < 1 || nf > SRV_STEER_TERMS) {
        rc = srv_error(out, 400, "\"features\" must be 1..%d [feature, strength] pairs",
                       SRV_STEER_TERMS);
        goto done;
    }
    int D = srv_model_dsae(c->model);
    for (int i = 0; i < nf; i++) {
        cJSON *p = cJSON_GetArrayItem(fs, i), *f = cJSON_GetArrayItem(p, 0), *v = cJSON_GetArrayItem(p, 1);
        if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 || !cJSON_IsNumber(f) ||
            !cJSON_IsNumber(v) || f->valuedouble != floor(f->valuedouble) || f->valuedouble < 0 ||
            f->valuedouble >= D || !isfinite(v->valuedouble) ||
            fabs(v->valuedouble) > SRV_STEER_MAX_S) {
            rc = srv_error(out, 400, "\"features\"[%d] must be [feature in 0..%d, strength with "
                           "|strength| <= %g]", i, D - 1, SRV_STEER_MAX_S);
            goto done;
        }
        terms[i].feature = (int)f->valuedouble;
        terms[i].value = (float)v->valuedouble;
    }
    r.nterms = nf;
    r.max_new = (int)mx;
    r.seed = (uint64_t)seed;
    r.temperature = temp;
    r.top_k = (int)topk;
    r.timeout_ms = (int)tmo;
    cJSON *j = cJSON_CreateObject();
    rc = j ? srv_model_steer(c->model, &r, j) : err_set(ERR_NOMEM, "out of memory");
    if (rc) {
        cJSON_Delete(j);
        rc = fail(out, rc);
        goto done;
    }
    cJSON_AddNumberToObject(j, "dict_id", (double)c->test_dict);
    cJSON_AddStringToObject(j, "method", ana_steer_method_name(r.method));
    cJSON *ta = cJSON_AddArrayToObject(j, "features");
    for (int i = 0; ta && i < nf; i++) {
        cJSON *p = cJSON_CreateArray();
        cJSON_AddItemToArray(p, cJSON_CreateNumber(terms[i].feature));
        cJSON_AddItemToArray(p, cJSON_CreateNumber(terms[i].value));
        cJSON_AddItemToArray(ta, p);
    }
    cJSON_AddNumberToObject(j, "seed", (double)r.seed);
    cJSON_AddNumberToObject(j, "temperature", r.temperature);
    cJSON_AddNumberToObject(j, "top_k", r.top_k);
    cJSON_AddNumberToObject(j, "max_tokens", r.max_new);
    rc = respond_json(out, 200, j);
done:
    cJSON_Delete(body);
    return rc;
}

/* GET /report/D/N.png: the dashboard the report directory has for (D, N); nothing else. */
static int report_png(srv_ctx *c, const srv_request *rq, const char *rest, srv_response *out)
{
    char b[48];
    size_t n = strlen(rest);
    int64_t d, f;
    if (n < 5 || n >= sizeof b || strcmp(rest + n - 4, ".png"))
        return srv_error(out, 400, "expected /report/DICT/FEATURE.png");
    memcpy(b, rest, n - 4);
    b[n - 4] = 0;
    if (!path_dict_feature(b, &d, &f)) return srv_error(out, 400, "expected /report/DICT/FEATURE.png");
    if (!check_args(rq, "", out)) return OK;
    if (!c || !c->report)
        return srv_error(out, 404, "no report directory: start serve with --report DIR");
    char *data;
    size_t len;
    int rc = srv_report_read(c->report, d, f, &data, &len);
    if (rc) return fail(out, rc);
    return respond_text(out, 200, "image/png", data, len);
}

/* ---- routing -------------------------------------------------------------------------------- */
static int is_page(const char *p)
{
    if (!strcmp(p, "/") || !strcmp(p, "/test") || !strcmp(p, "/sql") || !strcmp(p, "/index.html"))
        return 1;
    /* any /feature/... : the page says what is wrong with a bad one (the app's error line,
       not this server's raw JSON) */
    return !strncmp(p, "/feature/", 9);
}

/* The methods a path answers, for a 405's Allow header (RFC 9110 15.5.6: it must be sent). */
static const char *allowed(const char *p)
{
    if (!strcmp(p, "/api/steer")) return "POST";
    if (!strcmp(p, "/api/sql") || !strcmp(p, "/api/test")) return "GET, HEAD, POST";
    return "GET, HEAD";
}

static int not_allowed(srv_response *out, const char *p, const char *msg)
{
    int rc = srv_error(out, 405, "%s", msg);
    out->allow = allowed(p);
    return rc;
}

int srv_handle(srv_ctx *c, const srv_request *rq, srv_response *out)
{
    memset(out, 0, sizeof *out);
    const char *m = rq->method ? rq->method : "";
    const char *p = rq->path ? rq->path : "";
    int get = !strcmp(m, "GET") || !strcmp(m, "HEAD"), post = !strcmp(m, "POST");
    if (!get && !post) {
        char msg[64];
        /* the methods of the Allow header (the body said GET, HEAD, POST on every path) */
        snprintf(msg, sizeof msg, "method %.16s not allowed (%s)", m, allowed(p));
        return not_allowed(out, p, msg);
    }
    if (get && rq->body_len) return srv_error(out, 400, "a %s request takes no body", m);
    if (p[0] != '/') return srv_error(out, 400, "the path must start with '/'");
    if (strlen(p) > SRV_MAX_URL) return srv_error(out, 414, "path too long");
    int api = !strncmp(p, "/api/", 5);
    if (post && strcmp(p, "/api/sql") && strcmp(p, "/api/test") && strcmp(p, "/api/steer"))
        return not_allowed(out, p, "POST only to /api/sql, /api/test and /api/steer");
    if (!post && !strcmp(p, "/api/steer"))
        return not_allowed(out, p, "steering is POST /api/steer with a JSON body (docs/serve.md)");
    if (!api && !strncmp(p, "/report/", 8)) return report_png(c, rq, p + 8, out);
    if (!api) {
        for (size_t i = 0; i < sizeof ASSETS / sizeof *ASSETS; i++)
            if (!strcmp(p, ASSETS[i].path)) {
                if (!check_args(rq, "v", out)) return OK;
                out->status = 200;
                out->type = ASSETS[i].type;
                out->data = ASSETS[i].data;
                out->len = *ASSETS[i].len;
                return OK;
            }
        if (is_page(p)) {
            /* the page's own parameters (q, dict, text, sql) are read by app.js */
            out->status = 200;
            out->type = "text/html; charset=utf-8";
            out->data = index_html;
            out->len = index_html_len;
            return OK;
        }
        return srv_error(out, 404, "no page %.200s", p);
    }
    const char *r = p + 5;
    if (!c || !c->st) return srv_error(out, 503, "no database open");
    if (!strcmp(r, "info")) return api_info(c, rq, out);
    if (!strcmp(r, "queries")) return api_queries(c, rq, out);
    if (!strcmp(r, "dicts")) return api_dicts(c, rq, out);
    if (!strncmp(r, "dict/", 5)) return api_dict(c, rq, r + 5, out);
    if (!strcmp(r, "features")) return api_features(c, rq, out);
    if (!strcmp(r, "search")) return api_search(c, rq, out);
    if (!strcmp(r, "token")) return api_token(c, rq, out);
    if (!strncmp(r, "feature/", 8)) return api_feature(c, rq, r + 8, out);
    if (!strcmp(r, "sql")) return api_sql(c, rq, out);
    if (!strcmp(r, "test")) return api_test(c, rq, out);
    if (!strcmp(r, "steer")) return api_steer(c, rq, out);
    return srv_error(out, 404, "no endpoint %.200s (see /api/queries and docs/serve.md)", p);
}

/* ---- request targets ------------------------------------------------------------------------ */
static int hexval(int ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
         : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* Percent-decodes s in place ('+' is a space in the query only). 0 on a bad escape or a NUL. */
static int pct_decode(char *s, int plus)
{
    char *o = s;
    for (; *s; s++) {
        if (*s == '%') {
            int h = hexval((unsigned char)s[1]), l = h < 0 ? -1 : hexval((unsigned char)s[2]);
            if (h < 0 || l < 0 || (h == 0 && l == 0)) return 0;
            *o++ = (char)(h * 16 + l);
            s += 2;
        } else if (plus && *s == '+') *o++ = ' ';
        else *o++ = *s;
    }
    *o = 0;
    return 1;
}

int srv_parse_target(char *target, const char **path, srv_arg *args, int *nargs)
{
    *nargs = 0;
    *path = NULL;
    if (!target || target[0] != '/') return err_set(ERR_ARG, "the request target must start with '/'");
    if (strlen(target) > SRV_MAX_URL) return err_set(ERR_ARG, "request target too long");
    char *q = strchr(target, '?');
    char *hash = strchr(target, '#');
    if (hash) *hash = 0;
    if (q) *q++ = 0;
    /* an escaped '/' is not a segment separator (RFC 3986 2.2), and no path here holds one:
       decoded, /api/feature/1%2F5 was /api/feature/1/5 (an audit) */
    if (strcasestr(target, "%2F")) return err_set(ERR_ARG, "an escaped '/' (%%2F) in the path");
    if (!pct_decode(target, 0)) return err_set(ERR_ARG, "bad %%-escape in the path");
    size_t len = strlen(target);
    if (strstr(target, "/../") || strstr(target, "/./") || strstr(target, "//") ||
        (len >= 3 && !strcmp(target + len - 3, "/..")) || (len >= 2 && !strcmp(target + len - 2, "/.")))
        return err_set(ERR_ARG, "the path has '..', '.' or empty segments");
    *path = target;
    while (q && *q) {
        char *amp = strchr(q, '&');
        if (amp) *amp = 0;
        if (*q) {
            if (*nargs == SRV_MAX_ARGS) return err_set(ERR_ARG, "more than %d arguments", SRV_MAX_ARGS);
            char *eq = strchr(q, '=');
            if (eq) *eq = 0;
            if (!pct_decode(q, 1) || (eq && !pct_decode(eq + 1, 1)))
                return err_set(ERR_ARG, "bad %%-escape in the query string");
            if (!*q) return err_set(ERR_ARG, "an argument without a name");
            args[*nargs].key = q;
            args[*nargs].value = eq ? eq + 1 : "";
            ++*nargs;
        }
        q = amp ? amp + 1 : NULL;
    }
    return OK;
}
