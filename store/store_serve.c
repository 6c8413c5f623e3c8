/* store_serve.c - the named read-only queries of `saelite serve` and its SQL console
 * (see store_serve.h; the endpoints that use them: docs/serve.md). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/mem.h"
#include "store/sqlfuncs.h"
#include "store/store_internal.h"
#include "store/store_serve.h"

#include <sqlite3.h>

/* Connections for the named queries: c[0] holds the temp search index (the queries that read
 * it run there), the others serve the rest, so feature pages do not wait for each other. */
#define NCONN 4
/* MB SQLite's heap may grow past its size after store_srv_open (process-wide; see there) */
enum { SRV_HEAP_MB = 256 };
typedef struct store_srv store_srv;
typedef struct {
    sqlite3 *db;
    sqlite3_stmt *st[STORE_SRV_NQ]; /* prepared once; NULL where the query needs the index */
    pthread_mutex_t mu;
    store_deadline dl;              /* the running query's time limit (under mu) */
    store_srv *owner;
} srv_conn;

struct store_srv {
    char path[1024];
    srv_conn c[NCONN];
    sqlite3 *con;               /* the console's connection */
    pthread_mutex_t con_mu;
    store_deadline con_dl;      /* the console statement's time limit (under con_mu; none between) */
    unsigned rr;                /* round robin when every connection is busy */
    int fts5;
    int slow_acts;              /* 'all' rows and no ana_acts_kind (store_srv_slow_acts) */
    int capped;                 /* the heap cap is set; heap_prev is the limit it replaced */
    sqlite3_int64 heap_prev;
    int stopping;               /* store_srv_stop was called (atomic) */
    int query_ms;               /* store_srv_query's limit */
};

void store_srv_set_query_ms(store_srv *s, int ms) { s->query_ms = ms > 0 ? ms : STORE_SRV_QUERY_MS; }

/* The progress handlers: a statement stops (SQLITE_INTERRUPT) past its deadline or once the
   server is stopping, so a request in flight cannot hold the shutdown. */
static int conn_progress(void *p)
{
    srv_conn *c = p;
    return __atomic_load_n(&c->owner->stopping, __ATOMIC_RELAXED) || store_deadline_check(&c->dl);
}
static int con_progress(void *p)
{
    store_srv *s = p;
    return __atomic_load_n(&s->stopping, __ATOMIC_RELAXED) || store_deadline_check(&s->con_dl);
}


/* The features table: filters ?2 min density, ?3 max density, ?4 best tag, ?5 search match;
 * ?6 sort key, ?7 'asc'|'desc', ?8 limit, ?9 offset. MATCH_FEATURE is the search predicate. */
#define FEATURE_WHERE(MATCH_FEATURE)                                                          \
    " FROM ana_features f LEFT JOIN ana_effects e ON e.dict_id = f.dict_id AND e.feature = "  \
    "f.feature WHERE f.dict_id = ?1 AND (?2 IS NULL OR f.density >= ?2) AND "                \
    "(?3 IS NULL OR f.density <= ?3) AND (?4 IS NULL OR f.best_tag = ?4) AND "               \
    "(?5 IS NULL OR f.feature IN (SELECT s.feature FROM temp.feature_fts s WHERE "           \
    MATCH_FEATURE " AND s.dict_id = ?1))"
#define FTS_MATCH "feature_fts MATCH ?5"
#define LIKE_MATCH "(s.tokens || ' ' || s.contexts || ' ' || s.logits) LIKE ?5"
#define SORT_KEY                                                                              \
    "(CASE ?6 WHEN 'density' THEN f.density WHEN 'max_act' THEN f.max_act "                 \
    "WHEN 'mean_act' THEN f.mean_act WHEN 'n_active' THEN f.n_active "                       \
    "WHEN 'precision' THEN f.best_tag_precision WHEN 'nearest_cos' THEN abs(f.nearest_cos) " \
    "WHEN 'mean_kl' THEN e.mean_kl WHEN 'mean_dloss' THEN e.mean_dloss ELSE f.feature END)"
/* The page of rows is chosen first (inner query, ordered and limited), then only those rows get
 * their top tokens (the subquery would otherwise run for every feature before the sort). */
#define FEATURE_PAGE(MATCH_FEATURE)                                                           \
    "SELECT p.feature, p.n_active, p.density, p.mean_act, p.max_act, p.nearest, "            \
    "p.nearest_cos, p.best_tag, p.best_tag_precision, p.mean_kl, p.mean_dloss, "             \
    "(SELECT group_concat(x, char(31)) FROM (SELECT (SELECT t.text FROM tokens t WHERE "     \
    "t.sequence_id = a.seq_id AND t.position = a.pos) AS x FROM ana_acts a WHERE a.dict_id = " \
    "p.dict_id AND a.feature = p.feature AND a.kind = 'top' ORDER BY a.rank LIMIT 4)) AS "   \
    "top_tokens FROM (SELECT f.*, e.mean_kl, e.mean_dloss, " SORT_KEY " AS k"                \
    FEATURE_WHERE(MATCH_FEATURE)                                                              \
    " ORDER BY " ORDER_BY("k", "f") " LIMIT ?8 OFFSET ?9) p ORDER BY " ORDER_BY("p.k", "p")
/* never-active features (NULL keys) last, ties by feature number */
#define ORDER_BY(K, T) K " IS NULL, " K " * (CASE WHEN ?7 = 'asc' THEN 1 ELSE -1 END), " T ".feature"

static const struct {
    const char *name, *sql, *sql_like; /* sql_like: the variant without FTS5 (NULL: the same) */
} Q[STORE_SRV_NQ] = {
    [STORE_SRV_INFO] = {"info",
        "SELECT (SELECT count(*) FROM ana_dicts) AS dicts, (SELECT count(*) FROM documents) AS "
        "documents, (SELECT count(*) FROM sequences) AS sequences, (SELECT count(*) FROM hooks) "
        "AS hooks, (SELECT count(*) FROM sae_registry) AS saes, (SELECT group_concat(name, ', ') "
        "FROM models) AS models", NULL},
    [STORE_SRV_DICTS] = {"dicts",
        "SELECT d.id, d.kind, d.sae_id, d.name, d.hook_name, d.d_in, d.d_sae, d.split, d.n_seqs, "
        "d.n_tokens, d.top_n, d.created_at, d.seconds, r.id AS registry_id, r.architecture, r.k, "
        "CASE WHEN json_valid(r.config) THEN json_extract(r.config, '$.transcoder') END AS transcoder, "
        "CASE WHEN json_valid(r.config) THEN json_extract(r.config, '$.hook_out') END AS hook_out, "
        "r.tokens AS train_tokens, (SELECT count(*) FROM ana_features f WHERE f.dict_id = d.id "
        "AND f.n_active = 0) AS dead, (SELECT count(*) FROM ana_effects e WHERE e.dict_id = d.id) "
        "AS effects FROM ana_dicts d LEFT JOIN sae_registry r ON r.id = "
        "d.sae_id OR (d.sae_id IS NULL AND d.kind = 'sae' AND r.dir = d.name) ORDER BY "
        STORE_ANA_MS("d.created_at") ", d.id", NULL}, /* oldest first: serve's "newest wins" takes
        the last (STORE_ANA_NEWEST) */
    [STORE_SRV_DICT] = {"dict",
        "SELECT d.id, d.kind, d.sae_id, d.name, d.hook_name, d.d_in, d.d_sae, d.split, d.n_seqs, "
        "d.n_tokens, d.top_n, d.created_at, d.seconds, r.id AS registry_id, r.dir, "
        "r.architecture, r.k, "
        "CASE WHEN json_valid(r.config) THEN json_extract(r.config, '$.transcoder') END AS transcoder, "
        "CASE WHEN json_valid(r.config) THEN json_extract(r.config, '$.hook_out') END AS hook_out, "
        "r.model_name, r.tokens AS train_tokens, r.eval_mse, r.eval_ev, "
        "r.eval_cos, r.eval_l0, r.eval_dead, r.seconds AS train_seconds FROM ana_dicts d LEFT "
        "JOIN sae_registry r ON r.id = d.sae_id OR (d.sae_id IS NULL AND d.kind = 'sae' AND "
        "r.dir = d.name) WHERE d.id = ?1 LIMIT 1", NULL},
    [STORE_SRV_DICT_METRICS] = {"dict_metrics",
        "SELECT name, value FROM ana_metrics WHERE dict_id = ?1 ORDER BY name", NULL},
    [STORE_SRV_DICT_LOG] = {"dict_log",
        "SELECT l.step, l.tokens, l.mse, l.ev, l.l0, l.dead_frac, l.lr, l.loss FROM "
        "sae_training_log l WHERE l.sae_id = (SELECT r.id FROM ana_dicts d JOIN sae_registry r "
        "ON r.id = d.sae_id OR (d.sae_id IS NULL AND d.kind = 'sae' AND r.dir = d.name) WHERE "
        "d.id = ?1 LIMIT 1) ORDER BY l.step", NULL},
    [STORE_SRV_FEATURES] = {"features",
        FEATURE_PAGE(FTS_MATCH), FEATURE_PAGE(LIKE_MATCH)},
    [STORE_SRV_FEATURES_COUNT] = {"features_count",
        "SELECT count(*) AS total" FEATURE_WHERE(FTS_MATCH),
        "SELECT count(*) AS total" FEATURE_WHERE(LIKE_MATCH)},
    [STORE_SRV_SEARCH] = {"search",
        "SELECT s.dict_id, s.feature, f.density, f.max_act, snippet(feature_fts, 2, char(2), "
        "char(3), '…', 10) AS tokens, snippet(feature_fts, 3, char(2), char(3), '…', 12) AS "
        "contexts, snippet(feature_fts, 4, char(2), char(3), '…', 10) AS logits FROM "
        "temp.feature_fts s JOIN ana_features f ON f.dict_id = s.dict_id AND f.feature = "
        "s.feature WHERE feature_fts MATCH ?1 ORDER BY rank LIMIT ?2",
        "SELECT s.dict_id, s.feature, f.density, f.max_act, s.tokens, substr(s.contexts, 1, 200) "
        "AS contexts, s.logits FROM temp.feature_fts s JOIN ana_features f ON f.dict_id = "
        "s.dict_id AND f.feature = s.feature WHERE (s.tokens || ' ' || s.contexts || ' ' || "
        "s.logits) LIKE ?1 ORDER BY f.max_act DESC LIMIT ?2"},
    /* n counts positions: one kept both as a top example and as a quantile sample is one. The
       tokens table (no index on text) is the fallback of a database without ana_vocab: a LIMIT
       of 0 skips its scan when ana_vocab has rows (a NOT EXISTS beside the text test scanned
       every token row on each request: 1.1 s of 1.4 s at 10M tokens, an audit). CROSS JOIN and
       the + keep ana_acts first, through ana_acts_token: grouping by the bare column let SQLite
       walk the whole dictionary in feature order instead, every --all-acts row (28 s on the
       demo's 2.5M rows, an audit) */
    [STORE_SRV_TOKEN] = {"token",
        "SELECT a.feature, count(DISTINCT (a.seq_id << 32) + a.pos) AS n, max(a.value) AS "
        "max_value, f.density, count(*) OVER () AS total FROM ana_acts a "
        "CROSS JOIN ana_features f ON f.dict_id = a.dict_id AND f.feature = a.feature WHERE "
        "a.dict_id = ?1 AND a.token IN (SELECT token FROM ana_vocab WHERE text IN (CAST(?2 AS "
        "BLOB), CAST(' ' || ?2 AS BLOB)) UNION SELECT token_id FROM (SELECT token_id FROM tokens "
        "WHERE text IN (?2, ' ' || ?2) LIMIT (SELECT CASE WHEN EXISTS (SELECT 1 FROM ana_vocab) "
        "THEN 0 ELSE -1 END))) GROUP BY +a.feature ORDER BY max_value DESC, a.feature LIMIT ?3 "
        "OFFSET ?4", NULL},
    [STORE_SRV_FEATURE] = {"feature",
        "SELECT f.feature, f.n_active, f.density, f.mean_act, f.max_act, f.nearest, "
        "f.nearest_cos, f.best_tag, f.best_tag_precision, d.d_sae, d.n_tokens FROM ana_features "
        "f JOIN ana_dicts d ON d.id = f.dict_id WHERE f.dict_id = ?1 AND f.feature = ?2", NULL},
    [STORE_SRV_HIST] = {"hist",
        "SELECT bin, lo, hi, count FROM ana_hist WHERE dict_id = ?1 AND feature = ?2 ORDER BY bin",
        NULL},
    [STORE_SRV_LOGITS] = {"logits",
        "SELECT l.sign, l.rank, l.token, ifnull(CAST(v.text AS TEXT), tok_text(l.token)) AS "
        "text, l.value FROM ana_logits l LEFT JOIN ana_vocab v ON v.token = l.token WHERE "
        "l.dict_id = ?1 AND l.feature = ?2 ORDER BY l.sign DESC, l.rank", NULL},
    [STORE_SRV_POS] = {"pos",
        "SELECT tag, n FROM ana_pos WHERE dict_id = ?1 AND feature = ?2 ORDER BY n DESC, tag",
        NULL},
    [STORE_SRV_NEAREST] = {"nearest",
        "SELECT feature, cos FROM (SELECT o.feature, vec_cos(o.vec, me.vec) AS cos FROM "
        "ana_decoder me JOIN ana_decoder o ON o.dict_id = me.dict_id AND o.feature <> me.feature "
        "WHERE me.dict_id = ?1 AND me.feature = ?2) ORDER BY abs(cos) DESC, feature LIMIT ?3",
        NULL},
    /* the example's context tokens, each with the largest activation of this feature stored
       at it (mine: the feature's stored activations by position, one lookup per token) */
    [STORE_SRV_ACTS] = {"acts",
        "WITH mine AS MATERIALIZED (SELECT seq_id, pos, max(value) AS v FROM ana_acts WHERE "
        "dict_id = ?1 AND feature = ?2 GROUP BY seq_id, pos) SELECT a.kind, a.interval, a.rank, "
        "a.seq_id, a.pos, a.value, t.position, t.text, m.v AS tok_value FROM ana_acts a JOIN "
        "tokens t ON t.sequence_id = a.seq_id AND t.position BETWEEN a.pos - ?3 AND a.pos + ?4 "
        "LEFT JOIN mine m ON m.seq_id = t.sequence_id AND m.pos = t.position WHERE a.dict_id = "
        "?1 AND a.feature = ?2 AND (a.kind = 'top' OR a.kind = 'quantile') ORDER BY a.kind = 'quantile', "
        "a.interval DESC, a.rank, a.seq_id, a.pos, t.position", NULL},
    [STORE_SRV_DICT_BY_SAE] = {"dict_by_sae",
        "SELECT id FROM ana_dicts WHERE kind = 'sae' AND (name = ?1 OR sae_id = ?2) ORDER BY "
        STORE_ANA_NEWEST " LIMIT 1", NULL},
    [STORE_SRV_SEQ_TOKENS] = {"seq_tokens",
        "SELECT token_id FROM tokens WHERE sequence_id = ?1 AND position <= ?2 ORDER BY position",
        NULL},
    [STORE_SRV_EFFECT] = {"effect",
        "SELECT n_contexts, mean_act, mean_kl, mean_dloss, rank_corr FROM ana_effects WHERE "
        "dict_id = ?1 AND feature = ?2", NULL},
    /* measured tokens, with the direct-path value of the same token where ana_logits has it */
    [STORE_SRV_EFFECT_LOGITS] = {"effect_logits",
        "SELECT m.sign, m.rank, m.token, ifnull(CAST(v.text AS TEXT), tok_text(m.token)) AS text, "
        "m.value, l.value AS direct FROM ana_effect_logits m LEFT JOIN ana_vocab v ON v.token = "
        "m.token LEFT JOIN ana_logits l ON l.dict_id = m.dict_id AND l.feature = m.feature AND "
        "l.sign = m.sign AND l.token = m.token WHERE m.dict_id = ?1 AND m.feature = ?2 ORDER BY "
        "m.sign DESC, m.rank", NULL},
    /* ?3 the analysis id a dashboard records (-1: none, from before it did): that analysis if its
       name, hook, split (?4, NULL: not recorded), tokens (?5) and feature ?6's n_active (?7; both
       NULL: not recorded) agree (an analysis made again keeps its id: the older one's picture
       showed on it, a review); without an id, the one analysis of that name and hook, none when
       there are several (another analysis's picture is not shown) */
    [STORE_SRV_DICT_BY_NAME] = {"dict_by_name",
        "SELECT id FROM ana_dicts WHERE name = ?1 AND hook_name = ?2 AND (CASE WHEN ?3 >= 0 THEN id "
        "= ?3 AND (?4 IS NULL OR split = ?4) AND (?5 IS NULL OR n_tokens = ?5) AND (?7 IS NULL OR "
        "EXISTS (SELECT 1 FROM ana_features f WHERE f.dict_id = ?3 AND f.feature = ?6 AND "
        "f.n_active = ?7)) ELSE (SELECT count(*) FROM ana_dicts WHERE name = ?1 "
        "AND hook_name = ?2) = 1 END)", NULL},
};

/* The search index: one row per (dictionary, feature). */
static const char FTS_CREATE[] =
    "CREATE VIRTUAL TABLE temp.feature_fts USING fts5(dict_id UNINDEXED, feature UNINDEXED, "
    "tokens, contexts, logits, tokenize = 'unicode61')";
static const char LIKE_CREATE[] =
    "CREATE TABLE temp.feature_fts (dict_id INTEGER, feature INTEGER, tokens TEXT, contexts "
    "TEXT, logits TEXT)";
static const char FTS_FILL[] =
    "INSERT INTO temp.feature_fts (dict_id, feature, tokens, contexts, logits) "
    "SELECT f.dict_id, f.feature, "
    "ifnull((SELECT group_concat(x, ' ') FROM (SELECT DISTINCT (SELECT t.text FROM tokens t "
    "WHERE t.sequence_id = a.seq_id AND t.position = a.pos) AS x FROM ana_acts a WHERE "
    "a.dict_id = f.dict_id AND a.feature = f.feature AND a.kind = 'top')), ''), "
    "ifnull((SELECT group_concat(c, ' | ') FROM (SELECT (SELECT group_concat(t.text, '') FROM "
    "tokens t WHERE t.sequence_id = a.seq_id AND t.position BETWEEN a.pos - 4 AND a.pos + 2) AS c "
    "FROM ana_acts a WHERE a.dict_id = f.dict_id AND a.feature = f.feature AND a.kind = 'top' "
    "ORDER BY a.rank LIMIT 8)), ''), "
    "ifnull((SELECT group_concat(ifnull(CAST(v.text AS TEXT), tok_text(l.token)), ' ') FROM "
    "ana_logits l LEFT JOIN ana_vocab v ON v.token = l.token WHERE l.dict_id = f.dict_id AND "
    "l.feature = f.feature AND l.sign = 1), '') "
    "FROM ana_features f WHERE f.n_active > 0";

/* Stand-ins for the SAE registry tables of a database whose SAEs were trained without --db. */
static const char *const SAE_TEMP[][2] = {
    {"sae_registry",
     "CREATE TEMP TABLE sae_registry (id INTEGER PRIMARY KEY, dir TEXT, architecture TEXT, "
     "d_in INTEGER, d_sae INTEGER, k INTEGER, hook_name TEXT, model_name TEXT, hook_id INTEGER, "
     "tokens INTEGER, config TEXT, eval_tokens INTEGER, eval_mse REAL, eval_ev REAL, eval_cos "
     "REAL, eval_l2_ratio REAL, eval_l0 REAL, eval_dead REAL, eval_dense REAL, seconds REAL, "
     "created_at TEXT)"},
    {"sae_training_log",
     "CREATE TEMP TABLE sae_training_log (sae_id INTEGER, step INTEGER, tokens INTEGER, mse "
     "REAL, ev REAL, l0 REAL, dead_frac REAL, lr REAL, loss REAL)"},
    /* analysis part version 2 (before analyze --effects) has no effect tables */
    {"ana_effects",
     "CREATE TEMP TABLE ana_effects (dict_id INTEGER, feature INTEGER, n_contexts INTEGER, "
     "mean_act REAL, mean_kl REAL, mean_dloss REAL, rank_corr REAL, PRIMARY KEY (dict_id, "
     "feature))"},
    {"ana_effect_logits",
     "CREATE TEMP TABLE ana_effect_logits (dict_id INTEGER, feature INTEGER, sign INTEGER, rank "
     "INTEGER, token INTEGER, value REAL, PRIMARY KEY (dict_id, feature, sign, rank))"},
};
static const char *const ANA_TABLES[] = {"ana_dicts", "ana_features", "ana_hist", "ana_acts",
                                         "ana_logits", "ana_decoder", "ana_pos", "ana_vocab",
                                         "ana_metrics", "tokens", "models", "documents",
                                         "sequences", "hooks"};

static int sqlerr(store_srv *s, sqlite3 *db, const char *what)
{
    return err_set(ERR_SQL, "%s: %s: %s%s", s->path, what, sqlite3_errmsg(db),
                   store_lock_hint(db, sqlite3_errcode(db)));
}

static int table_exists(sqlite3 *db, const char *name, int *yes)
{
    sqlite3_stmt *st;
    *yes = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM main.sqlite_master WHERE type IN ('table', 'view') "
                               "AND name = ?1", -1, &st, NULL) != SQLITE_OK)
        return SQLITE_ERROR;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    *yes = rc == SQLITE_ROW;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int open_conn(store_srv *s, sqlite3 **db)
{
    int rc = sqlite3_open_v2(s->path, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX, NULL);
    if (rc != SQLITE_OK)
        return *db && store_path_too_long(s->path, rc)
                   ? ERR_ARG
                   : err_set(ERR_IO, "%s: cannot open: %s", s->path,
                             *db ? sqlite3_errmsg(*db) : "out of memory");
    sqlite3_busy_timeout(*db, 2000);
    sqlite3_limit(*db, SQLITE_LIMIT_ATTACHED, 0);
    /* extension loading stays off (the default); say so in case the library was built otherwise.
       The database is input: its schema (views, triggers) may not call non-innocuous functions,
       and defensive mode keeps even a crafted statement from corrupting the file. */
    sqlite3_db_config(*db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, NULL);
    sqlite3_db_config(*db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
    sqlite3_db_config(*db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
    sqlite3_db_config(*db, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, NULL); /* see sqlfuncs.c */
    if (store_sqlfuncs_register(*db) != SQLITE_OK) return sqlerr(s, *db, "registering functions");
    return OK;
}

/* instr(X, Y) as SQLite's own computes it, in linear time: SQLite's compares Y at every
   position of X (instr of a 10 MB X and a 100 KB Y ran 12-20 s inside one opcode, where the
   console's deadline cannot stop it). NULL when either is NULL; two blobs: the 1-based byte
   offset; else both as text: the 1-based offset in characters, counted as SQLite does (it
   tries position 0 and then each byte that does not continue a UTF-8 sequence); 1 for an
   empty Y, 0 when Y does not occur. */
static void fn_instr(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    int th = sqlite3_value_type(argv[0]), tn = sqlite3_value_type(argv[1]);
    if (th == SQLITE_NULL || tn == SQLITE_NULL) return;
    int text = !(th == SQLITE_BLOB && tn == SQLITE_BLOB);
    /* a blob read as text is converted in a copy (as SQLite's does), never in the argument */
    int mixed = (th == SQLITE_BLOB) != (tn == SQLITE_BLOB);
    sqlite3_value *h = mixed ? sqlite3_value_dup(argv[0]) : argv[0];
    sqlite3_value *n = mixed ? sqlite3_value_dup(argv[1]) : argv[1];
    const unsigned char *hs = NULL, *ns = NULL;
    if (h && n) {
        hs = text ? sqlite3_value_text(h) : sqlite3_value_blob(h);
        ns = text ? sqlite3_value_text(n) : sqlite3_value_blob(n);
    }
    int nh = hs ? sqlite3_value_bytes(h) : 0, nn = ns ? sqlite3_value_bytes(n) : 0;
    if (!h || !n || (!hs && (text || nh)) || (!ns && (text || nn))) {
        sqlite3_result_error_nomem(ctx);
    } else if (nn == 0) {
        sqlite3_result_int(ctx, 1);
    } else {
        int64_t r = 0;
        for (const unsigned char *p = hs, *end = hs + nh; end - p >= nn; p++) {
            if (!(p = memmem(p, (size_t)(end - p), ns, (size_t)nn))) break;
            if (text && p != hs && (*p & 0xc0) == 0x80) continue; /* inside a character */
            r = p - hs + 1;
            if (text) { /* characters: position 0 and each sequence start before p */
                r = 1 + (p > hs);
                for (const unsigned char *q = hs + 1; q < p; q++) r += (*q & 0xc0) != 0x80;
            }
            break;
        }
        sqlite3_result_int64(ctx, r);
    }
    if (mixed) {
        sqlite3_value_free(h);
        sqlite3_value_free(n);
    }
}

/* For a NULL sqlite3_value_text of a value of type t (taken before: a failed conversion leaves
   the value NULL): the result NULL for an SQL NULL, else SQLite could not allocate (a zeroblob
   it cannot expand) and the result is its out-of-memory error, not a NULL that looks like an
   answer. */
static void text_null(sqlite3_context *ctx, int t)
{
    if (t == SQLITE_NULL) sqlite3_result_null(ctx);
    else sqlite3_result_error_nomem(ctx);
}

/* The first match of y[ny] in [p, end), or NULL. memmem over windows of 4 ny that double on each
   miss: ASan's memmem checks the whole range it is given on every call, so one call per match
   over the rest of X was quadratic there (200M one-byte matches in a 200 MB X: the console ran
   for over 20 minutes under test-asan). Still linear without ASan: at most one call per match
   plus a doubling run per gap, each call costing its window. */
static const unsigned char *next_match(const unsigned char *p, const unsigned char *end,
                                       const unsigned char *y, int ny)
{
    size_t w = 4 * (size_t)ny;
    while (end - p >= ny) {
        size_t left = (size_t)(end - p), len = left < w ? left : w;
        const unsigned char *m = memmem(p, len, y, (size_t)ny);
        if (m || len == left) return m;
        p += len - (size_t)(ny - 1); /* a match across the window's end starts in the next one */
        w *= 2;
    }
    return NULL;
}

/* replace(X, Y, Z) as SQLite's own computes it, in linear time: SQLite's compares Y at every
   position of X (2 MB by a 20 KB Y took 0.54 s; 10 MB by 100 KB about 13 s, inside one opcode
   that the console's deadline cannot stop). Non-overlapping matches of Y's bytes, left to
   right; NULL when any argument is NULL; X itself (its value, type kept) when Y is empty or
   starts with a NUL byte, as SQLite's returns it; an output past SQLITE_LIMIT_LENGTH is
   SQLite's "string or blob too big". */
static void fn_replace(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    int t[3] = {sqlite3_value_type(argv[0]), sqlite3_value_type(argv[1]), sqlite3_value_type(argv[2])};
    const unsigned char *x = sqlite3_value_text(argv[0]);
    if (!x) return text_null(ctx, t[0]);
    int nx = sqlite3_value_bytes(argv[0]);
    const unsigned char *y = sqlite3_value_text(argv[1]);
    if (!y) return text_null(ctx, t[1]);
    if (!y[0]) {
        sqlite3_result_value(ctx, argv[0]);
        return;
    }
    int ny = sqlite3_value_bytes(argv[1]);
    const unsigned char *z = sqlite3_value_text(argv[2]);
    if (!z) return text_null(ctx, t[2]);
    int nz = sqlite3_value_bytes(argv[2]);
    int64_t hits = 0;
    for (const unsigned char *p = x, *end = x + nx; end - p >= ny; p += ny, hits++)
        if (!(p = next_match(p, end, y, ny))) break;
    int64_t nout = (int64_t)nx + hits * ((int64_t)nz - ny);
    if (nout > sqlite3_limit(sqlite3_context_db_handle(ctx), SQLITE_LIMIT_LENGTH, -1)) {
        sqlite3_result_error_toobig(ctx);
        return;
    }
    unsigned char *out = sqlite3_malloc64((sqlite3_uint64)nout + 1), *o = out;
    if (!out) {
        sqlite3_result_error_nomem(ctx);
        return;
    }
    const unsigned char *p = x, *end = x + nx;
    for (int64_t h = 0; h < hits; h++) {
        const unsigned char *m = next_match(p, end, y, ny);
        memcpy(o, p, (size_t)(m - p));
        o += m - p;
        memcpy(o, z, (size_t)nz);
        o += nz;
        p = m + ny;
    }
    memcpy(o, p, (size_t)(end - p));
    o += end - p;
    *o = 0;
    sqlite3_result_text64(ctx, (const char *)out, (sqlite3_uint64)(o - out), sqlite3_free, SQLITE_UTF8);
}

/* The SAE registry stand-ins, where the database has none. */
static int sae_standins(store_srv *s, sqlite3 *db)
{
    for (size_t i = 0; i < sizeof SAE_TEMP / sizeof *SAE_TEMP; i++) {
        int yes;
        if (table_exists(db, SAE_TEMP[i][0], &yes) != SQLITE_OK ||
            (!yes && sqlite3_exec(db, SAE_TEMP[i][1], NULL, NULL, NULL) != SQLITE_OK))
            return sqlerr(s, db, "SAE registry stand-in");
    }
    return OK;
}

static int needs_index(const char *sql) { return strstr(sql, "feature_fts") != NULL; }

static void con_prime(sqlite3 *db); /* the console section, below */

int store_srv_open(store_srv **out, const char *path, int query_ms, double *fts_seconds)
{
    *out = NULL;
    if (fts_seconds) *fts_seconds = 0;
    store_srv *s = mem_calloc(1, sizeof *s);
    if (!s) return err_set(ERR_NOMEM, "out of memory");
    store_srv_set_query_ms(s, query_ms);
    for (int i = 0; i < NCONN; i++) {
        pthread_mutex_init(&s->c[i].mu, NULL);
        s->c[i].owner = s;
        store_deadline_start(&s->c[i].dl, 0);
    }
    pthread_mutex_init(&s->con_mu, NULL);
    int rc = OK;
    if (snprintf(s->path, sizeof s->path, "%s", path) >= (int)sizeof s->path) {
        rc = err_set(ERR_ARG, "database path too long: %.80s...", path);
        goto fail;
    }
    if ((rc = store_check_file(path))) goto fail;
    if ((rc = open_conn(s, &s->c[0].db))) goto fail;
    /* a file that is not a database fails here, on the first read */
    for (size_t i = 0; i < sizeof ANA_TABLES / sizeof *ANA_TABLES; i++) {
        int yes;
        if (table_exists(s->c[0].db, ANA_TABLES[i], &yes) != SQLITE_OK) {
            rc = sqlerr(s, s->c[0].db, "reading the schema");
            goto fail;
        }
        if (!yes) {
            rc = err_set(ERR_NOTFOUND, "%s: no table %s: serve browses analysed dictionaries "
                         "(run saelite extract and saelite analyze first)", s->path, ANA_TABLES[i]);
            goto fail;
        }
    }
    for (int i = 1; i < NCONN && !rc; i++) rc = open_conn(s, &s->c[i].db);
    if (!rc) rc = open_conn(s, &s->con);
    if (!rc && sqlite3_create_function(s->con, "instr", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC |
                                       SQLITE_INNOCUOUS, NULL, fn_instr, NULL, NULL) != SQLITE_OK)
        rc = sqlerr(s, s->con, "registering instr");
    if (!rc && sqlite3_create_function(s->con, "replace", 3, SQLITE_UTF8 | SQLITE_DETERMINISTIC |
                                       SQLITE_INNOCUOUS, NULL, fn_replace, NULL, NULL) != SQLITE_OK)
        rc = sqlerr(s, s->con, "registering replace");
    /* LIKE and GLOB the deadline can stop (SQLite's run inside one opcode: 34 s for a 1 MB
       string and a 40 KB pattern) */
    store_deadline_start(&s->con_dl, 0);
    if (!rc && store_like_register(s->con, &s->con_dl) != SQLITE_OK)
        rc = sqlerr(s, s->con, "registering like and glob");
    /* trim/ltrim/rtrim with a character set likewise (SQLite's: 171 s for 100 KB by 100 KB) */
    if (!rc && store_slow_builtins_register(s->con, &s->con_dl) != SQLITE_OK)
        rc = sqlerr(s, s->con, "registering trim");
    for (int i = 0; i < NCONN && !rc; i++) rc = sae_standins(s, s->c[i].db);
    if (!rc) rc = sae_standins(s, s->con);
    if (rc) goto fail;
    con_prime(s->con);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sqlite3 *db0 = s->c[0].db;
    s->fts5 = sqlite3_exec(db0, FTS_CREATE, NULL, NULL, NULL) == SQLITE_OK;
    /* the index reads the analysis tables, which are input: a view that never ends in place of
       one hung serve's start (an audit), so the build has the queries' limit too */
    store_deadline_start(&s->c[0].dl, s->query_ms / 1000.0);
    sqlite3_progress_handler(db0, 1000, conn_progress, &s->c[0]);
    if ((!s->fts5 && sqlite3_exec(db0, LIKE_CREATE, NULL, NULL, NULL) != SQLITE_OK) ||
        sqlite3_exec(db0, FTS_FILL, NULL, NULL, NULL) != SQLITE_OK) {
        if (s->c[0].dl.hit)
            rc = err_set(ERR_SQL, "%s: building the search index ran past its %d ms limit (is a "
                         "table of the database a slow view, or the database damaged? serve "
                         "--query-timeout raises it)", s->path, s->query_ms);
        else rc = sqlerr(s, db0, "building the search index");
        goto fail;
    }
    /* a database analysed before ana_acts_kind (2026-12-07) with --all-acts: its pages walk
       the 'all' rows, and serve, read-only, cannot add the index (store_srv_slow_acts) */
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db0, "SELECT NOT EXISTS (SELECT 1 FROM sqlite_master WHERE type = "
                                "'index' AND name = 'ana_acts_kind') AND EXISTS (SELECT 1 FROM "
                                "ana_acts WHERE kind = 'all')", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        s->slow_acts = sqlite3_column_int(st, 0);
    sqlite3_finalize(st); /* a failure (the deadline) only leaves the note out */
    store_deadline_start(&s->c[0].dl, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (fts_seconds) *fts_seconds = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    /* serve's own queries get a time limit from here on (store_srv_query starts it): the
       database is input, and one view in place of an analysis table (a recursive CTE that
       never ends) hung every endpoint and kept SIGTERM from stopping serve (an audit) */
    for (int i = 0; i < NCONN; i++) sqlite3_progress_handler(s->c[i].db, 1000, conn_progress, &s->c[i]);
    /* from here on nothing writes, not even the temp schema */
    for (int i = 0; i <= NCONN; i++) {
        sqlite3 *db = i < NCONN ? s->c[i].db : s->con;
        if (sqlite3_exec(db, "PRAGMA query_only = 1", NULL, NULL, NULL) != SQLITE_OK) {
            rc = sqlerr(s, db, "query_only");
            goto fail;
        }
    }
    for (int i = 0; i < NCONN; i++)
        for (int q = 0; q < STORE_SRV_NQ; q++) {
            if (i > 0 && needs_index(store_srv_sql(s, q))) continue;
            if (sqlite3_prepare_v3(s->c[i].db, store_srv_sql(s, q), -1, SQLITE_PREPARE_PERSISTENT,
                                   &s->c[i].st[q], NULL) != SQLITE_OK) {
                rc = err_set(ERR_SQL, "%s: preparing query %s: %s", s->path, Q[q].name,
                             sqlite3_errmsg(s->c[i].db));
                goto fail;
            }
        }
    /* The console runs anyone's SQL, and one SELECT of 64 randomblob(9e8) columns would ask for
       57 GB (one column held 1.8 GB before this cap). SQLite's heap in this process may grow by
       SRV_HEAP_MB past what the open needed (the index included); beyond that a statement fails
       with SQLITE_NOMEM and the connection serves the next one. */
    s->heap_prev = sqlite3_hard_heap_limit64(sqlite3_memory_used() + ((sqlite3_int64)SRV_HEAP_MB << 20));
    s->capped = 1;
    *out = s;
    return OK;
fail:
    store_srv_close(s);
    return rc;
}

void store_srv_close(store_srv *s)
{
    if (!s) return;
    for (int i = 0; i < NCONN; i++) {
        for (int q = 0; q < STORE_SRV_NQ; q++) sqlite3_finalize(s->c[i].st[q]);
        sqlite3_close(s->c[i].db);
        pthread_mutex_destroy(&s->c[i].mu);
    }
    sqlite3_close(s->con);
    pthread_mutex_destroy(&s->con_mu);
    if (s->capped) sqlite3_hard_heap_limit64(s->heap_prev);
    mem_free(s);
}

void store_srv_stop(store_srv *s)
{
    if (s) __atomic_store_n(&s->stopping, 1, __ATOMIC_RELAXED);
}

const char *store_srv_path(const store_srv *s) { return s->path; }
int store_srv_fts5(const store_srv *s) { return s->fts5; }
int store_srv_slow_acts(const store_srv *s) { return s->slow_acts; }

int store_srv_dict_by_weights(store_srv *s, const char *weights, const char *hook, int64_t d_sae,
                              int64_t named, int64_t *id, char stale[17])
{
    srv_conn *c = &s->c[0];
    store_ana_want w = {.weights = weights, .sae_hook = hook, .d_sae = d_sae};
    pthread_mutex_lock(&c->mu);
    int rc = store_ana_by_weights(c->db, s->path, &w, named, id, stale);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

const char *store_srv_name(int q) { return q >= 0 && q < STORE_SRV_NQ ? Q[q].name : NULL; }

const char *store_srv_sql(const store_srv *s, int q)
{
    if (q < 0 || q >= STORE_SRV_NQ) return NULL;
    return !s->fts5 && Q[q].sql_like ? Q[q].sql_like : Q[q].sql;
}

static void get_val(sqlite3_stmt *st, int c, store_val *v)
{
    memset(v, 0, sizeof *v);
    switch (sqlite3_column_type(st, c)) {
    case SQLITE_INTEGER: v->type = STORE_Q_INT; v->i = sqlite3_column_int64(st, c); break;
    case SQLITE_FLOAT: v->type = STORE_Q_FLOAT; v->f = sqlite3_column_double(st, c); break;
    case SQLITE_TEXT:
        v->type = STORE_Q_TEXT;
        v->s = (const char *)sqlite3_column_text(st, c);
        v->n = (size_t)sqlite3_column_bytes(st, c);
        break;
    case SQLITE_BLOB:
        v->type = STORE_Q_BLOB;
        v->s = sqlite3_column_blob(st, c);
        v->n = (size_t)sqlite3_column_bytes(st, c);
        break;
    default: v->type = STORE_Q_NULL;
    }
}

/* Steps st to the end, one callback per row; *rows counts them. max_rows < 0: no cap. cols
   (may be NULL): called with the column names when the statement ends without a row (the
   console's empty result had no names, an audit). */
static int run_rows(store_srv *s, sqlite3 *db, sqlite3_stmt *st, store_srv_row_fn fn,
                    store_srv_cols_fn cols, void *user, int max_rows, int *rows)
{
    enum { MAXC = 64 };
    int nc = 0;
    const char *names[MAXC];
    store_val vals[MAXC];
    *rows = 0;
    for (;;) {
        if (max_rows >= 0 && *rows >= max_rows) return OK;
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE && *rows == 0 && cols) {
            /* after the step, as below: the names are the statement's current ones */
            nc = sqlite3_column_count(st);
            if (nc > MAXC) return err_set(ERR_ARG, "%s: more than %d result columns", s->path, MAXC);
            for (int c = 0; c < nc; c++)
                if (!(names[c] = sqlite3_column_name(st, c))) return err_set(ERR_NOMEM, "out of memory");
            if (cols(user, nc, names)) return err_set(ERR_ABORTED, "stopped by the caller");
        }
        if (rc == SQLITE_DONE) return OK;
        if (rc != SQLITE_ROW) {
            if (rc == SQLITE_INTERRUPT)
                return err_set(ERR_ABORTED, "%s: the query ran past its time limit", s->path);
            return sqlerr(s, db, "query");
        }
        if (*rows == 0) {
            /* the names after the first step: a schema change by another process makes the
               step prepare the statement again, which freed names read before it (serve sent
               freed memory as JSON keys, an audit) */
            nc = sqlite3_column_count(st);
            if (nc > MAXC) return err_set(ERR_ARG, "%s: more than %d result columns", s->path, MAXC);
            for (int c = 0; c < nc; c++) names[c] = sqlite3_column_name(st, c);
        }
        for (int c = 0; c < nc; c++) get_val(st, c, &vals[c]);
        if (fn(user, nc, names, vals)) return err_set(ERR_ABORTED, "stopped by the caller");
        ++*rows;
    }
}

static void bind_val(sqlite3_stmt *st, int i, const store_val *v)
{
    switch (v->type) {
    case STORE_Q_INT: sqlite3_bind_int64(st, i, v->i); break;
    case STORE_Q_FLOAT: sqlite3_bind_double(st, i, v->f); break;
    case STORE_Q_TEXT: sqlite3_bind_text(st, i, v->s, (int)v->n, SQLITE_TRANSIENT); break;
    case STORE_Q_BLOB: sqlite3_bind_blob(st, i, v->s, (int)v->n, SQLITE_TRANSIENT); break;
    default: sqlite3_bind_null(st, i);
    }
}

int store_srv_query(store_srv *s, int q, const store_val *params, int nparams,
                    store_srv_row_fn fn, void *user)
{
    if (q < 0 || q >= STORE_SRV_NQ) return err_set(ERR_ARG, "no query %d", q);
    /* a free connection that has the statement; else wait for one */
    srv_conn *c = NULL;
    if (!s->c[1].st[q]) {
        c = &s->c[0];
        pthread_mutex_lock(&c->mu);
    } else {
        for (int i = 1; i <= NCONN && !c; i++)
            if (!pthread_mutex_trylock(&s->c[i % NCONN].mu)) c = &s->c[i % NCONN];
        if (!c) {
            c = &s->c[1 + __atomic_fetch_add(&s->rr, 1, __ATOMIC_RELAXED) % (NCONN - 1)];
            pthread_mutex_lock(&c->mu);
        }
    }
    sqlite3_stmt *st = c->st[q];
    int rc = OK, rows;
    if (nparams > sqlite3_bind_parameter_count(st)) {
        rc = err_set(ERR_ARG, "query %s takes %d parameters, not %d", Q[q].name,
                     sqlite3_bind_parameter_count(st), nparams);
    } else {
        sqlite3_clear_bindings(st);
        for (int i = 0; i < nparams; i++) bind_val(st, i + 1, &params[i]);
        int ms = s->query_ms;
        store_deadline_start(&c->dl, ms / 1000.0);
        rc = run_rows(s, c->db, st, fn, NULL, user, -1, &rows);
        if (rc == ERR_ABORTED && __atomic_load_n(&s->stopping, __ATOMIC_RELAXED))
            rc = err_set(ERR_BUSY, "serve is stopping");
        else if (rc == ERR_ABORTED && c->dl.hit)
            rc = err_set(ERR_SQL, "%s: serve's query %s ran past its %d ms limit (is a table of "
                         "the database a slow view, or the database damaged? GET /api/queries "
                         "shows the SQL; serve --query-timeout raises it)", s->path, Q[q].name, ms);
        store_deadline_start(&c->dl, 0);
    }
    sqlite3_reset(st);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int store_srv_match(const store_srv *s, const char *q, char *out, size_t cap)
{
    size_t k = 0, words = 0;
    const char *p = q;
    if (!s->fts5) {
        while (*p == ' ') p++;
        size_t n = strlen(p);
        while (n && p[n - 1] == ' ') n--;
        if (!n) return err_set(ERR_ARG, "search: no word given");
        if (n + 3 > cap) return err_set(ERR_ARG, "search: query too long");
        out[0] = '%';
        memcpy(out + 1, p, n);
        out[n + 1] = '%';
        out[n + 2] = 0;
        return OK;
    }
    /* FTS5: every run of non-space bytes becomes a quoted prefix term, quotes doubled, so no
       input is FTS5 syntax (AND, NEAR, column filters, unbalanced quotes) */
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        if (k + 4 > cap) return err_set(ERR_ARG, "search: query too long");
        if (words) out[k++] = ' ';
        out[k++] = '"';
        for (; *p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r'; p++) {
            if (k + 5 > cap) return err_set(ERR_ARG, "search: query too long");
            if (*p == '"') out[k++] = '"';
            out[k++] = *p;
        }
        out[k++] = '"';
        out[k++] = '*';
        words++;
    }
    if (!words) return err_set(ERR_ARG, "search: no word given");
    out[k] = 0;
    return OK;
}

/* ---- the console ------------------------------------------------------------------------- */
/* Functions the console refuses: load_extension; fts3_tokenizer, which returns a tokenizer's
   address (an ASLR leak) and with two arguments stores any pointer as a tokenizer; fts5, the
   pointer handshake for FTS5's C API; rtreenode and rtreedepth, debug functions that parse raw
   node blobs (CVE-2019-8457 was one); sqlite_log, which writes SQLite's error log. */
static const char *const CON_DENIED_FN[] = {"load_extension", "fts3_tokenizer", "fts5",
                                            "rtreenode", "rtreedepth", "sqlite_log"};

/* The pragmas that take a table or index name and only read. Their table-valued forms
   (pragma_table_info('hooks')) are declared on the console's connection when it opens
   (con_prime): the first use of any virtual table asks the authorizer for an update of
   sqlite_master, which it refuses, so every pragma_* form was refused (a review). Declared
   before the authorizer is set, these and no other virtual table (json_each, dbstat,
   sqlite_stmt, which shows other users' statements) become usable. */
static const char *const CON_READ_PRAGMAS[] = {"table_info", "table_xinfo", "index_list",
                                               "index_info", "index_xinfo", "foreign_key_list",
                                               "compile_options", "table_list", "function_list"};

static void con_prime(sqlite3 *db)
{
    for (size_t i = 0; i < sizeof CON_READ_PRAGMAS / sizeof *CON_READ_PRAGMAS; i++) {
        char sql[96];
        snprintf(sql, sizeof sql, "SELECT * FROM pragma_%s LIMIT 0", CON_READ_PRAGMAS[i]);
        sqlite3_exec(db, sql, NULL, NULL, NULL); /* one this SQLite lacks stays unusable */
    }
}

/* Reads only: no writes (also refused by stmt_readonly and query_only), no ATTACH/DETACH, no
   PRAGMA that sets a value, none of CON_DENIED_FN, no transaction control (a BEGIN would keep
   its snapshot, shared by every console user, open across requests). */
static int con_rule(int action, const char *a, const char *b)
{
    switch (action) {
    case SQLITE_SELECT: case SQLITE_READ: case SQLITE_RECURSIVE: return SQLITE_OK;
    case SQLITE_FUNCTION:
        for (size_t i = 0; b && i < sizeof CON_DENIED_FN / sizeof *CON_DENIED_FN; i++)
            if (!sqlite3_stricmp(b, CON_DENIED_FN[i])) return SQLITE_DENY;
        return SQLITE_OK;
    case SQLITE_PRAGMA: /* reading pragmas whose argument names a table or index; any other with
                           a value sets */
        for (size_t i = 0; a && i < sizeof CON_READ_PRAGMAS / sizeof *CON_READ_PRAGMAS; i++)
            if (!sqlite3_stricmp(a, CON_READ_PRAGMAS[i])) return SQLITE_OK;
        return b ? SQLITE_DENY : SQLITE_OK;
    default: return SQLITE_DENY; /* ATTACH, DETACH, INSERT, UPDATE, DELETE, CREATE, DROP,
                                    BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE, ... */
    }
}

/* *(int *)u = 1 on a refusal: SQLite reports a refused function as a plain SQLITE_ERROR */
static int con_authorize(void *u, int action, const char *a, const char *b, const char *c,
                         const char *d)
{
    (void)c; (void)d;
    int r = con_rule(action, a, b);
    if (r != SQLITE_OK) *(int *)u = 1;
    return r;
}

/* p past whitespace, ';' and comments ("--" to the end of the line; a block comment, which
   SQLite lets run to the end of the text unterminated): at the end when nothing else follows. */
static const char *skip_blank(const char *p)
{
    for (;;) {
        if (*p && strchr(" \t\n\r\f\v;", *p)) p++;
        else if (p[0] == '-' && p[1] == '-') p += strcspn(p, "\n");
        else if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            p = e ? e + 2 : p + strlen(p);
        } else return p;
    }
}

int store_srv_console(store_srv *s, const char *sql, int max_rows, int timeout_ms,
                      store_srv_row_fn fn, store_srv_cols_fn cols, void *user, int *truncated)
{
    *truncated = 0;
    /* one console statement at a time, and one slow SQLite opcode can outlast the deadline:
       the others are told at once rather than queued behind it */
    if (pthread_mutex_trylock(&s->con_mu))
        return err_set(ERR_BUSY, "the SQL console is running another query (up to %d ms); "
                       "try again", timeout_ms);
    sqlite3_stmt *st = NULL;
    const char *tail = NULL;
    int rc = OK;
    store_deadline *g = &s->con_dl; /* also the console's LIKE and GLOB's */
    store_deadline_start(g, timeout_ms / 1000.0);
    int refused = 0;
    sqlite3_set_authorizer(s->con, con_authorize, &refused);
    sqlite3_progress_handler(s->con, 1000, con_progress, s);
    int prc = sqlite3_prepare_v2(s->con, sql, -1, &st, &tail);
    if (prc != SQLITE_OK) {
        rc = refused || sqlite3_errcode(s->con) == SQLITE_AUTH
                 ? err_set(ERR_ARG, "refused: the console only reads (no writes, ATTACH, PRAGMA "
                           "assignments, transactions, extensions or internal functions): %s",
                           sqlite3_errmsg(s->con))
             : prc == SQLITE_INTERRUPT
                 ? err_set(ERR_ABORTED, "%s: the query ran past its time limit", s->path)
                 : err_set(ERR_SQL, "SQL error: %s", sqlite3_errmsg(s->con));
        goto done;
    }
    if (!st) {
        rc = err_set(ERR_ARG, "no SQL statement given");
        goto done;
    }
    if (tail) tail = skip_blank(tail);
    if (tail && *tail) {
        rc = err_set(ERR_ARG, "one statement at a time (more SQL follows: %.40s)", tail);
        goto done;
    }
    if (!sqlite3_stmt_readonly(st)) {
        rc = err_set(ERR_ARG, "refused: the console only reads");
        goto done;
    }
    int rows;
    rc = run_rows(s, s->con, st, fn, cols, user, max_rows, &rows);
    if (!rc && rows >= max_rows) {
        /* one more step says whether rows were left out; one the time limit (or a failure)
           stopped does not say, so it is that error: the 1000 rows of a query the limit cut
           there were answered as the whole result (an audit) */
        int more = sqlite3_step(st);
        if (more == SQLITE_ROW) *truncated = 1;
        else if (more == SQLITE_INTERRUPT)
            rc = err_set(ERR_ABORTED, "%s: the query ran past its time limit", s->path);
        else if (more != SQLITE_DONE) rc = sqlerr(s, s->con, "query");
    }
    /* the console's statement past the heap cap (a named query that meets the cap while the
       console holds it keeps SQLite's "out of memory") */
    if (rc && (sqlite3_extended_errcode(s->con) & 0xff) == SQLITE_NOMEM)
        rc = err_set(ERR_ARG, "%s: the query needs more than the %d MB of memory serve gives SQLite",
                     s->path, SRV_HEAP_MB);
done:
    sqlite3_finalize(st);
    sqlite3_progress_handler(s->con, 0, NULL, NULL);
    store_deadline_start(g, 0);
    sqlite3_set_authorizer(s->con, NULL, NULL);
    /* the authorizer refuses transaction control; should a transaction stay open anyway, the
       next request must not inherit its snapshot (nor keep WAL checkpoints waiting) */
    if (!sqlite3_get_autocommit(s->con)) sqlite3_exec(s->con, "ROLLBACK", NULL, NULL, NULL);
    pthread_mutex_unlock(&s->con_mu);
    return rc;
}
