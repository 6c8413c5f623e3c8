/* serve.h - `saelite serve`: an HTTP feature browser over one saelite database (docs/serve.md).
 *
 * Purpose: srv_run serves, until *stop becomes non-zero, the embedded single-page browser
 * (serve/assets/, compiled in as build/gen/serve_assets.h) and a JSON API whose every number
 * comes from one named query of store/store_serve.h. With a model and an SAE it also runs "test
 * your text" (the model with the SAE at its hook, each token's top features).
 *
 * Split for testing: srv_handle is the whole request handling (routing, argument parsing, the
 * JSON), independent of the HTTP library; serve/http.c feeds it from GNU libmicrohttpd, the
 * fuzz target fuzz/fuzz_serve.c and tests/test_serve.sh call it too.
 *
 * Safety: binds opts.host (127.0.0.1 by default) and answers only requests whose Host is a
 * loopback name or address or that address (no DNS rebinding) and whose Origin, when given,
 * is the request's own (no cross-site requests; serve/http.c); the database is opened
 * read-only; only the embedded assets are served (no part of a URL names a file); request
 * bodies above SRV_MAX_BODY, URLs above SRV_MAX_URL and headers above the connection memory
 * limit are refused with 4xx; every malformed request gets a 4xx with {"error": "..."}; a
 * connection that takes longer than request_deadline to send a request or to read its answer
 * is shut down (a slow client cannot keep one of the opts.threads connections).
 *
 * Ownership: srv_ctx owns its store handle and model; srv_response.owned is mem_alloc'd (free
 * it with srv_response_free). Errors: err.h codes (srv_run: ERR_IO when the port cannot be
 * bound, the store's errors at open). Threads: srv_handle may be called from several threads
 * on one srv_ctx (the store serialises its connections, the model has its own lock).
 */
#ifndef SAELITE_SERVE_H
#define SAELITE_SERVE_H
#include <stddef.h>
#include <stdint.h>

#define SRV_MAX_BODY (64 * 1024)  /* bytes of a POST body */
#define SRV_MAX_URL 2048          /* bytes of a request target */
#define SRV_MAX_ARGS 16           /* query-string arguments */
#define SRV_SQL_ROWS 1000         /* console row cap */
#define SRV_SQL_MS 2000           /* console time limit */
#define SRV_SQL_BYTES (8u << 20)  /* console: bytes of rows in a response, as JSON */
#define SRV_TEST_CHARS 4000       /* "test your text": bytes of text */
#define SRV_STEER_CHARS 2000      /* steering: bytes of prompt */
#define SRV_STEER_TOKENS 128      /* steering: most tokens generated per continuation */
#define SRV_STEER_TERMS 8         /* steering: most (feature, strength) terms */
#define SRV_STEER_MS 10000        /* steering: time limit of both continuations together */
#define SRV_STEER_MAX_S 1e4       /* steering: largest |strength| */
#define SRV_STOP_WAIT_S 12.0      /* stopping: longest wait for the answers in flight */
#define SRV_DEADLINE_S 30.0       /* default seconds to receive a request and to send its answer */
#define SRV_PNG_MAX (32 << 20)    /* --report: largest dashboard file served */

struct srv_result;
typedef struct {
    const char *db;        /* database (required) */
    const char *sae;       /* SAE directory or registry id for "test your text" (NULL: the newest
                              analysed SAE whose directory exists, when model_dir is given) */
    const char *model_dir; /* model for "test your text" (NULL: that view is off) */
    const char *report_dir;/* a `saelite report` directory: its feature dashboards on the feature
                              pages (NULL: none) */
    const char *host;      /* address to bind (default "127.0.0.1") */
    int port;              /* default 8080; 0 picks a free port */
    int threads;           /* connections at most, each served by its own thread (default 256) */
    double query_timeout;  /* seconds one of serve's own queries may run (default 30) */
    double request_deadline; /* seconds a connection may take to send one request (from its
                              start or the previous answer) and, apart, to read its answer; the
                              handler's own time is not counted (default SRV_DEADLINE_S) */
    volatile int *stop;    /* polled; non-zero stops the server */
    /* called once the server listens (the URL to open; res so far); may be NULL */
    void (*on_ready)(void *user, const char *url, const struct srv_result *res);
    void *user;
} srv_opts;

typedef struct srv_result {
    int port;              /* the port it listened on */
    int64_t requests;      /* requests answered */
    int64_t cut;           /* connections shut down at the request deadline */
    double index_seconds;  /* building the search index at startup */
    int fts5;              /* 1: FTS5 search, 0: LIKE fallback */
    int slow_acts;         /* store_srv_slow_acts: for the caller's note */
    int dashboards;        /* dashboards found in report_dir */
    /* with model_dir: the SAE directory run and its analysis (-1: none in the database, matched
       by the name analyze recorded or by realpath; analysed then lists the analysed SAEs, for
       the caller's warning) */
    int64_t test_dict;
    char test_sae[4096]; /* the directory as given (paths up to PATH_MAX) */
    char analysed[512];
    /* test_dict -1 because the analysis found by name was made from other weights than the
       directory holds now (ana_dicts.weights): which, for the caller's warning; "" otherwise */
    char stale[160];
} srv_result;

void srv_defaults(srv_opts *o);
int srv_run(const srv_opts *opts, srv_result *res);

/* ---- the request handler ---------------------------------------------------------------- */
typedef struct srv_ctx srv_ctx;

typedef struct {
    const char *key, *value; /* decoded; value "" for a bare key */
} srv_arg;

typedef struct {
    const char *method;  /* "GET", "HEAD", "POST", ... */
    const char *path;    /* decoded path, no query string */
    const srv_arg *args; /* query-string arguments */
    int nargs;
    const char *body;    /* POST body (may hold NULs), NULL when none */
    size_t body_len;
} srv_request;

typedef struct {
    int status;               /* HTTP status */
    const char *type;         /* Content-Type */
    const unsigned char *data;/* body: static (an asset) or == owned */
    size_t len;
    char *owned;              /* mem_alloc'd body, NULL for static ones */
    const char *allow;        /* a 405's Allow header (static), else NULL */
} srv_response;

/* Opens the database (read-only) and, with model_dir, the model, tokenizer and SAE. */
int srv_ctx_open(srv_ctx **out, const srv_opts *opts, srv_result *res);
void srv_ctx_close(srv_ctx *c);
/* Always fills *out (a 4xx/5xx JSON error when something is wrong with the request or the
 * database); returns ERR_NOMEM only when not even the error body could be made. */
int srv_handle(srv_ctx *c, const srv_request *rq, srv_response *out);
void srv_response_free(srv_response *r);

/* Splits a raw request target "path?k=v&k2" into a percent-decoded path and arguments (in
 * place: target is modified; args point into it). ERR_ARG for a malformed target (no leading
 * '/', a bad %-escape, a NUL byte decoded, more than SRV_MAX_ARGS arguments). */
int srv_parse_target(char *target, const char **path, srv_arg *args, int *nargs);

#endif
