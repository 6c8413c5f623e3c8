/* fuzz_serve - `saelite serve`'s request handling without the socket: the input is a request
 * "METHOD TARGET\nBODY" (the first line split at its first space); srv_parse_target splits the
 * raw target as serve/http.c does, and srv_handle routes it against a tiny analysed database
 * written once (one SAE dictionary of 4 features with every ana_* table filled, a sequence of
 * 4 tokens).
 * Invariants: no crash or sanitizer report; a rejected target has an error message; every
 * response has a status in 200..599 and a Content-Type, an /api/ response is a JSON object,
 * and every 4xx/5xx response is a JSON object with an "error" string. */
#include <cjson/cJSON.h>

#include "common/mem.h"
#include "fuzz/fuzz.h"
#include "serve/serve.h"
#include "store/store.h"
#include "store/store_ana.h"
#include "store/store_sae.h"

static char serve_db[300];

static void serve_cleanup(void)
{
    char p[320];
    unlink(serve_db);
    snprintf(p, sizeof p, "%s-wal", serve_db);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", serve_db);
    unlink(p);
}

static void serve_fixture(void)
{
    snprintf(serve_db, sizeof serve_db, "%s/serve.db", fuzz_tmpdir());
    serve_cleanup();
    store *s = NULL;
    store_ana_writer *w = NULL;
    int64_t doc, seq, dict;
    static const int ids[4] = {1, 2, 3, 4};
    static const char *const text[4] = {"The", " cat", " sat", "."};
    static const char *const tags[4] = {"at", "nn", "vbd", "."};
    float vec[4][3] = {{1, 0, 0}, {0, 1, 0}, {0.6f, 0.8f, 0}, {0, 0, 1}};
    store_ana_dict d = {"sae", -1, "sae_dir", "blocks.0.hook_resid_pre", "val", 3, 4, 2, 1, 4};
    int rc = store_open(&s, serve_db, STORE_CREATE);
    if (!rc) rc = store_sae_init(s);
    if (!rc) rc = store_ana_init(s);
    if (!rc) rc = store_begin(s);
    if (!rc) rc = store_doc_add(s, "fuzz", 0, "d", "news", "The cat sat.", 12, &doc);
    if (!rc) rc = store_seq_add(s, doc, 0, 0, ids, 4, &seq, NULL);
    if (!rc) rc = store_tokens_add(s, seq, 4, ids, text, NULL, NULL, tags);
    if (!rc) rc = store_commit(s);
    if (!rc) rc = store_ana_writer_open(&w, s);
    if (!rc) rc = store_ana_dict_begin(w, &d, &dict, NULL);
    for (int f = 0; !rc && f < 4; f++) {
        rc = store_ana_feature(w, dict, f, 2, 0.5, 1.0 + f, 2.0 + f, (f + 1) % 4, 0.6, "nn", 0.5);
        if (!rc) rc = store_ana_hist(w, dict, f, 0, 0.5, 1.0, 2);
        if (!rc) rc = store_ana_act(w, dict, f, "top", -1, 0, seq, f, ids[f], 2.0 + f);
        if (!rc) rc = store_ana_act(w, dict, f, "quantile", 0, 0, seq, 3 - f, ids[3 - f], 0.5);
        if (!rc) rc = store_ana_logit(w, dict, f, 1, 0, ids[f], 0.25);
        if (!rc) rc = store_ana_logit(w, dict, f, -1, 0, ids[3 - f], -0.25);
        if (!rc) rc = store_ana_decoder(w, dict, f, vec[f], 3);
        if (!rc) rc = store_ana_pos(w, dict, f, tags[f], 1);
        if (!rc) rc = store_ana_vocab(w, ids[f], text[f], strlen(text[f]));
    }
    if (!rc) rc = store_ana_metric(w, dict, "mse", 0.125);
    store_ana_writer_close(w);
    store_close(s);
    if (rc) fuzz_fail("cannot write the fixture database: %s", err_msg());
}

static srv_ctx *serve_ctx(void)
{
    static srv_ctx *c;
    if (!c) {
        serve_fixture();
        srv_opts o;
        srv_defaults(&o);
        o.db = serve_db;
        if (srv_ctx_open(&c, &o, NULL)) fuzz_fail("srv_ctx_open: %s", err_msg());
        atexit(serve_cleanup);
    }
    return c;
}

static int fuzz_serve(const uint8_t *data, size_t n)
{
    srv_ctx *c = serve_ctx();
    if (n > SRV_MAX_BODY + SRV_MAX_URL + 64) return 0;
    const uint8_t *nl = memchr(data, '\n', n);
    size_t line = nl ? (size_t)(nl - data) : n;
    char *req = mem_alloc(line + 1);
    if (!req) return 0;
    memcpy(req, data, line);
    req[line] = 0;
    char *sp = memchr(req, ' ', line);
    const char *method = sp ? req : "GET";
    char *target = sp ? sp + 1 : req;
    if (sp) *sp = 0;
    srv_arg args[SRV_MAX_ARGS];
    int nargs;
    const char *path;
    size_t tlen = strlen(target);
    int rc = srv_parse_target(target, &path, args, &nargs);
    fuzz_check_err(rc, "srv_parse_target");
    if (!rc) {
        if (nargs < 0 || nargs > SRV_MAX_ARGS || !path || path[0] != '/' || strlen(path) > tlen)
            fuzz_fail("srv_parse_target returned a bad split");
        srv_request rq = {method, path, args, nargs, nl ? (const char *)nl + 1 : NULL,
                          nl ? n - line - 1 : 0};
        srv_response r;
        if (srv_handle(c, &rq, &r) == OK) {
            if (r.status < 200 || r.status > 599 || !r.type || (!r.data && r.len))
                fuzz_fail("response without a status, type or body");
            int api = !strncmp(path, "/api/", 5);
            if (api || r.status >= 400) {
                cJSON *j = cJSON_ParseWithLength((const char *)r.data, r.len);
                if (!cJSON_IsObject(j)) fuzz_fail("%s %s: status %d without a JSON object", method, path, r.status);
                cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
                if (r.status >= 400 && (!cJSON_IsString(e) || !e->valuestring[0]))
                    fuzz_fail("%s %s: status %d without an error message", method, path, r.status);
                cJSON_Delete(j);
            }
            srv_response_free(&r);
        }
    }
    mem_free(req);
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) { return fuzz_serve(data, n); }
#endif
