/* serve_internal.h - for serve/'s own files: the handler context, the "test your text" model
 * (serve/textmodel.c) and the JSON helpers shared by router.c and textmodel.c.
 *
 * srv_model owns a GPT-2 model, its tokenizer and an SAE; srv_model_test runs one text through
 * the model (BOS first, at most n_ctx tokens), encodes the hook activations with the SAE and adds
 * to out: "tokens": [{"text", "features": [[feature, activation], ...]}] (top k per token, by
 * activation, only active ones) and "truncated". Neither the model nor the tokenizer is
 * thread-safe, and every connection's thread shares them: srv_model_test and srv_model_steer
 * take the model's mutex around each use of either (tokenizing included). Each pass attaches its
 * own hooks (the capture hook, or steering's) under that mutex.
 */
#ifndef SAELITE_SERVE_INTERNAL_H
#define SAELITE_SERVE_INTERNAL_H
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdint.h>

#include "analysis/steer.h"
#include "sae/sae.h"
#include "serve/serve.h"
#include "store/store_serve.h"

typedef struct srv_model srv_model;

int srv_model_open(srv_model **out, const char *model_dir, const char *sae_dir);
void srv_model_close(srv_model *m);
int srv_model_test(srv_model *m, const char *text, int k, cJSON *out);
/* Activations of one feature at every position of ids[0..T) (a stored sequence, BOS included as
 * stored) into out[T]. ERR_ARG when T exceeds the model's context or an id its vocabulary. */
int srv_model_feature(srv_model *m, const int *ids, int T, int feature, float *out);
const char *srv_model_sae(const srv_model *m);
const sae_model *srv_model_sae_weights(const srv_model *m); /* the SAE itself */
int srv_model_ctx(const srv_model *m);
int srv_model_dsae(const srv_model *m);

/* Steering: the steered and the unsteered continuation of prompt from the same seed, through
 * ana_steer_generate (analysis/steer.h, what `generate --steer --compare` runs); each stops at
 * <|endoftext|>, after max_new tokens or at the deadline (timeout_ms after the call began, for
 * both together). Adds "steered" and "unsteered" ({"text", "tokens", "ids", "stop"}),
 * "prompt_tokens", "hook" and "ms" to out. Takes the model's mutex. */
typedef struct {
    const char *prompt;
    ana_steer_method method;
    const ana_steer_term *terms;
    int nterms;
    int max_new, top_k, timeout_ms;
    double temperature;
    uint64_t seed;
} srv_steer_req;
int srv_model_steer(srv_model *m, const srv_steer_req *r, cJSON *out);

/* The dashboards of a `saelite report` directory (serve/reportdir.c): only files the report
 * wrote (feature_N.png, regular, its PNG text naming feature N and one of the database's
 * dictionaries) listed at open, served by (dictionary, feature); no URL part names a file.
 * srv_report_read: the file's bytes (mem_alloc'd) or ERR_NOTFOUND. Read-only after open. */
typedef struct srv_report srv_report;
int srv_report_open(srv_report **out, const char *dir, store_srv *st, int *n_found);
void srv_report_close(srv_report *r);
int srv_report_has(const srv_report *r, int64_t dict, int64_t feature);
int srv_report_read(const srv_report *r, int64_t dict, int64_t feature, char **data, size_t *len);

struct srv_ctx {
    store_srv *st;
    srv_model *model;   /* NULL without --model */
    srv_report *report; /* NULL without --report */
    int64_t test_dict;  /* the ana_dicts id of the SAE the model runs (-1: not analysed) */
};

/* A JSON error response {"error": msg, "status": status}; returns OK. */
int srv_error(srv_response *out, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* s[0..n) as a JSON string, invalid UTF-8 replaced (U+FFFD). NULL on no memory. */
cJSON *srv_json_str(const char *s, size_t n);
/* Numbers as exact JSON text (router.c): an int64 as its digits; a double in the fewest of 15,
 * 16 or 17 significant digits that read back as it, +-Inf as {"real": "inf"|"-inf"}, NaN null.
 * NULL on no memory. */
cJSON *srv_json_int(int64_t i);
cJSON *srv_json_num(double x);
/* Row callback for a query whose first column is one integer: *(int64_t *)user = it. */
int srv_int_cb(void *user, int nc, const char *const *names, const store_val *v);
/* Strict decimal integer in [lo, hi]: 1 and *v, or 0. */
int srv_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *v);

#endif
