/* store_serve.h - the read-only queries behind `saelite serve` (serve/serve.h, docs/serve.md).
 *
 * Purpose: every number the feature browser shows comes from one named SQL statement of this
 * file's table (store_srv_sql lists them; GET /api/queries shows them), run over the existing
 * tables (ana_*, tokens, sae_registry, sae_training_log) with the saelite SQL functions
 * (store/sqlfuncs.h). Nothing here writes the database.
 *
 * Opening: store_srv_open opens the file with SQLITE_OPEN_READONLY on five connections: four for
 * the named queries, one for the SQL console. At open, the first query connection builds a
 * full-text index of every feature (its top-activation tokens, top contexts and logit tokens) in
 * its temp schema: FTS5 when SQLite has it (PRAGMA compile_options ENABLE_FTS5), else a plain temp
 * table searched with LIKE; the queries that read the index run on that connection, the others on
 * whichever is free. Then every connection gets PRAGMA query_only. A database without the
 * analysis tables is ERR_NOTFOUND ("run saelite analyze"); missing SAE registry tables and effect
 * tables (an analysis before --effects existed) are replaced by empty temp tables, so queries
 * that join them still run.
 *
 * Values: rows come to a callback as store_val (type STORE_Q_* of store/sqlfuncs.h; text and
 * blob pointers are valid during the call only). Params are store_val too (STORE_Q_NULL binds
 * NULL). A non-zero return from the callback stops the query with ERR_ABORTED.
 *
 * Console: store_srv_console runs exactly one statement of user SQL with a deadline
 * (timeout_ms, a progress handler interrupts it: ERR_TIMEOUT-like ERR_ABORTED with "time limit")
 * and a row cap (rows past max_rows are not read; *truncated = 1). It refuses (ERR_ARG) writes,
 * ATTACH/DETACH, PRAGMA assignments, transaction control, load_extension and the pointer and
 * debug functions (fts3_tokenizer, fts5, rtreenode, ...), through sqlite3_stmt_readonly and an
 * authorizer, with SQLITE_LIMIT_ATTACHED 0 as a second fence. One statement at a time: a call
 * while another runs returns ERR_BUSY at once. Its instr() and replace() are linear-time ones with
 * SQLite's results (SQLite's are quadratic, and one opcode is past the deadline's reach); LIKE,
 * GLOB, trim/ltrim/rtrim with a set and json_patch are sqlfuncs.c's (store_internal.h). Every connection runs with
 * SQLITE_DBCONFIG_TRUSTED_SCHEMA off and DEFENSIVE on (the database is input). Memory: a
 * successful store_srv_open sets SQLite's process-wide hard heap limit to what it used plus
 * 256 MB, so no statement can take the machine's memory (a console statement that would fails
 * with ERR_ARG, "needs more than the 256 MB", and the connection goes on); store_srv_close puts
 * the previous limit back.
 *
 * Errors: err.h codes with messages naming the database (ERR_SQL for SQL errors, with SQLite's
 * message). Thread safety: one handle serves any number of threads; each connection is behind
 * its own mutex, held during one store_srv_query or store_srv_console.
 */
#ifndef SAELITE_STORE_SERVE_H
#define SAELITE_STORE_SERVE_H
#include <stddef.h>
#include <stdint.h>

#include "store/sqlfuncs.h" /* STORE_Q_* value types */

typedef struct store_srv store_srv;

typedef struct {
    int type;      /* STORE_Q_INT, _FLOAT, _TEXT, _BLOB, _NULL */
    int64_t i;     /* STORE_Q_INT */
    double f;      /* STORE_Q_FLOAT */
    const char *s; /* STORE_Q_TEXT (NUL-terminated) / STORE_Q_BLOB */
    size_t n;      /* bytes at s */
} store_val;

/* The named queries (docs/serve.md says which endpoint uses which). */
enum {
    STORE_SRV_INFO,          /* database summary: counts */
    STORE_SRV_DICTS,         /* every analysed dictionary with its SAE registry row */
    STORE_SRV_DICT,          /* one dictionary: ?1 dict id */
    STORE_SRV_DICT_METRICS,  /* ana_metrics of ?1 */
    STORE_SRV_DICT_LOG,      /* the training curve of ?1's SAE (sae_training_log) */
    STORE_SRV_FEATURES,      /* features of ?1, filtered (?2..?5), sorted (?6, ?7), paged (?8, ?9) */
    STORE_SRV_FEATURES_COUNT,/* how many rows STORE_SRV_FEATURES has without paging */
    STORE_SRV_SEARCH,        /* full-text search over every dictionary: ?1 match, ?2 limit */
    STORE_SRV_TOKEN,         /* features of ?1 whose stored activations fall on token text ?2,
                                ?3 of them from ?4; each row's total: how many in all */
    STORE_SRV_FEATURE,       /* one feature ?1, ?2 */
    STORE_SRV_HIST,          /* its activation histogram */
    STORE_SRV_LOGITS,        /* its logit effects */
    STORE_SRV_POS,           /* its POS-tag counts */
    STORE_SRV_NEAREST,       /* nearest features by decoder cosine: ?3 how many */
    STORE_SRV_ACTS,          /* top and quantile activations with context tokens ?3 before, ?4 after */
    STORE_SRV_DICT_BY_SAE,   /* newest kind 'sae' dictionary named ?1 or with sae_id ?2 */
    STORE_SRV_SEQ_TOKENS,    /* token ids of sequence ?1 up to position ?2 (live activations) */
    STORE_SRV_DICT_BY_NAME,  /* the analysis ?3 (split ?4, ?5 tokens, feature ?6 active ?7 times)
                                named ?1 at hook ?2, or without ?3 the only one (serve --report's
                                PNGs) */
    STORE_SRV_EFFECT,        /* measured ablation effect of ?1, ?2 (ana_effects) */
    STORE_SRV_EFFECT_LOGITS, /* its measured promoted/suppressed tokens, with the direct-path value */
    STORE_SRV_NQ
};

/* Time limit of one named query (store_srv_query) by default: past it the query fails with
 * ERR_SQL, "ran past its 30000 ms limit" (the database is input: a view in place of a table
 * can run forever; 5 s, the first limit, was within reach of the nearest-features scan of a
 * 131072 x 4096 decoder from a cold cache, a review). store_srv_set_query_ms changes it. The
 * console has its own (store_srv_console's timeout_ms). */
#define STORE_SRV_QUERY_MS 30000
void store_srv_set_query_ms(struct store_srv *s, int ms);

/* path: database file; query_ms: the queries' limit (<= 0: STORE_SRV_QUERY_MS), which the
 * search index's build (see above) has too. *fts_seconds (may be NULL) says how long that took. */
int store_srv_open(store_srv **out, const char *path, int query_ms, double *fts_seconds);
void store_srv_close(store_srv *s);
/* From any thread: every statement running or started from now on stops within about 1000
 * SQLite opcodes (store_srv_query ERR_BUSY "serve is stopping"; the console ERR_ABORTED), so
 * a server shutting down does not wait for slow queries. */
void store_srv_stop(store_srv *s);
const char *store_srv_path(const store_srv *s);
/* 1 when the search index is FTS5, 0 when it is the LIKE fallback. */
int store_srv_fts5(const store_srv *s);
/* 1 when the database has --all-acts rows but not the index ana_acts_kind (analysed before it
 * existed): feature pages then read every stored activation of the feature; `saelite analyze`
 * adds the index (serve is read-only). */
int store_srv_slow_acts(const store_srv *s);
/* The analysis of the SAE whose sae_weights.safetensors has checksum `weights`, given `named`,
 * the one found by its name or realpath (-1: none): named when it recorded those weights or
 * none (before analysis version 4), else the newest analysis that recorded them at this hook
 * and width (hook NULL, d_sae <= 0: any), else -1 with
 * stale[] = the weights named recorded (the directory holds another SAE now); stale "" otherwise.
 * Without ana_dicts.weights (a version 3 database) *id = named. */
int store_srv_dict_by_weights(store_srv *s, const char *weights, const char *hook, int64_t d_sae,
                              int64_t named, int64_t *id, char stale[17]);
/* Name and SQL text of query q (NULL outside 0..STORE_SRV_NQ-1). */
const char *store_srv_name(int q);
const char *store_srv_sql(const store_srv *s, int q);

typedef int (*store_srv_row_fn)(void *user, int ncols, const char *const *names,
                                const store_val *vals);
int store_srv_query(store_srv *s, int q, const store_val *params, int nparams,
                    store_srv_row_fn fn, void *user);

/* The match argument for STORE_SRV_SEARCH / STORE_SRV_FEATURES ?5 from a user's words: FTS5: each
 * word as a quoted prefix term ("dog"* "ran"*), all required; LIKE fallback: '%words%'. Returns
 * OK, or ERR_ARG when q has no word or does not fit cap. */
int store_srv_match(const store_srv *s, const char *q, char *out, size_t cap);

/* cols (may be NULL) is called once with the statement's column names when it ends without a
 * row (fn gives them otherwise), so that an empty result still has its header. Its non-zero
 * return stops with ERR_ABORTED, as fn's. */
typedef int (*store_srv_cols_fn)(void *user, int ncols, const char *const *names);
int store_srv_console(store_srv *s, const char *sql, int max_rows, int timeout_ms,
                      store_srv_row_fn fn, store_srv_cols_fn cols, void *user, int *truncated);

#endif
