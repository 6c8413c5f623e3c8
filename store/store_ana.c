/* store_ana.c - writing the analysis tables (see store_ana.h, schema_analysis.sql). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "store/store_ana.h"
#include "store/store_internal.h"

#include "schema_analysis_sql.h" /* generated from store/schema_analysis.sql */

/* ana_acts's indexes as SQLite records them from schema_analysis.sql (white space aside): the
 * rebuild below remakes only these; store_ana_init adds the last to older databases */
enum { ACTS_REBUILD_MIN = 100000, ACTS_NIDX = 4 };
static const char *const ACTS_INDEXES[ACTS_NIDX][2] = {
    {"ana_acts_feature", "CREATE INDEX ana_acts_feature ON ana_acts(dict_id, feature, value DESC)"},
    {"ana_acts_token", "CREATE INDEX ana_acts_token ON ana_acts(token, dict_id)"},
    {"ana_acts_seq", "CREATE INDEX ana_acts_seq ON ana_acts(seq_id, pos)"},
    {"ana_acts_kind", "CREATE INDEX ana_acts_kind ON ana_acts(dict_id, feature, kind, rank) WHERE "
                      "kind = 'top' OR kind = 'quantile'"},
};

int store_ana_init(store *s)
{
    /* version 3 -> 4 */
    int rc = store_add_column(s, "ana_dicts", "weights", "TEXT");
    if (!rc) rc = store_schema_part(s, "analysis", STORE_ANA_VERSION, schema_analysis_sql);
    /* the per-kind index of ana_acts came after version 4: a database made before gets it here
       (its part version is recorded, so the schema SQL above did not run again) */
    int64_t has = 1;
    if (!rc && !store_readonly(s))
        rc = store_query_i64(s, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                                "name = 'ana_acts_kind'", &has);
    if (!rc && !has) rc = store_exec(s, ACTS_INDEXES[ACTS_NIDX - 1][1]);
    return rc;
}

int store_ana_verify(store *s)
{
    int rc = store_schema_part_verify(s, "analysis", STORE_ANA_VERSION, schema_analysis_sql);
    /* a version 3 database (before ana_dicts.weights) is checked as it was made, so a damaged
       or hostile one is refused at open as before */
    return rc ? rc : store_schema_part_verify_without(s, "analysis", 3, schema_analysis_sql,
                                                      "ana_dicts", "weights");
}

int store_ana_by_weights(sqlite3 *db, const char *path, const store_ana_want *w, int64_t named,
                         int64_t *id, char stale[17])
{
    *id = named;
    stale[0] = 0;
    sqlite3_stmt *st = NULL;
    int r = sqlite3_prepare_v2(db, "SELECT count(*) FROM pragma_table_info('ana_dicts') WHERE name = "
                                   "'weights'", -1, &st, NULL);
    int has = r == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) > 0;
    sqlite3_finalize(st);
    char then[17] = "";
    int keep = r != SQLITE_OK || !has;
    if (!keep && named >= 0) {
        r = sqlite3_prepare_v2(db, "SELECT weights FROM ana_dicts WHERE id = ?1", -1, &st, NULL);
        if (r == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, named);
            int q = sqlite3_step(st);
            const char *t = q == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
            /* a recorded value that is no checksum (a hostile file) is named as such, not cut */
            size_t n = t ? strlen(t) : 0;
            snprintf(then, sizeof then, "%s", n == 16 && strspn(t, "0123456789abcdef") == 16 ? t : "not a checksum");
            keep = (q == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_NULL) || !strcmp(then, w->weights);
            if (q != SQLITE_ROW && q != SQLITE_DONE) r = q;
        }
        sqlite3_finalize(st);
    }
    if (r == SQLITE_OK && !keep) {
        r = sqlite3_prepare_v2(db, "SELECT id FROM ana_dicts WHERE kind = 'sae' AND weights = ?1 AND "
                                   "(?2 IS NULL OR hook_name = ?2) AND (?3 IS NULL OR split = ?3) AND "
                                   "(?4 IS NULL OR hook_name = ?4) AND (?5 <= 0 OR d_sae = ?5) ORDER BY "
                                   STORE_ANA_NEWEST " LIMIT 1", -1, &st, NULL);
        if (r == SQLITE_OK) {
            sqlite3_bind_text(st, 1, w->weights, -1, SQLITE_STATIC);
            if (w->hook) sqlite3_bind_text(st, 2, w->hook, -1, SQLITE_STATIC);
            if (w->split) sqlite3_bind_text(st, 3, w->split, -1, SQLITE_STATIC);
            if (w->sae_hook) sqlite3_bind_text(st, 4, w->sae_hook, -1, SQLITE_STATIC);
            sqlite3_bind_int64(st, 5, w->d_sae);
            int q = sqlite3_step(st);
            if (q == SQLITE_ROW) *id = sqlite3_column_int64(st, 0);
            else if (q == SQLITE_DONE) {
                *id = -1;
                if (named >= 0) memcpy(stale, then, sizeof then);
            } else r = q;
        }
        sqlite3_finalize(st);
    }
    if (r == SQLITE_OK) return OK;
    return err_set((r & 0xff) == SQLITE_NOMEM ? ERR_NOMEM : ERR_SQL, "%s: reading ana_dicts: %s%s",
                   path, sqlite3_errmsg(db), store_lock_hint(db, r));
}

enum { Q_METRIC, Q_FEATURE, Q_HIST, Q_ACT, Q_LOGIT, Q_GEOM, Q_DEC, Q_POS, Q_VOCAB, Q_EFFECT,
       Q_EFFECT_LOGIT, Q__N };

static const char *const SQL[Q__N] = {
    "INSERT OR REPLACE INTO ana_metrics (dict_id, name, value) VALUES (?1, ?2, ?3)",
    "INSERT INTO ana_features (dict_id, feature, n_active, density, mean_act, max_act, nearest, "
    "nearest_cos, best_tag, best_tag_precision) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    "INSERT INTO ana_hist (dict_id, feature, bin, lo, hi, count) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    "INSERT INTO ana_acts (dict_id, feature, kind, interval, rank, seq_id, pos, token, value) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    "INSERT INTO ana_logits (dict_id, feature, sign, rank, token, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    "INSERT INTO ana_geometry (dict_id, source, bin, lo_deg, hi_deg, count) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    "INSERT INTO ana_decoder (dict_id, feature, vec) VALUES (?1, ?2, ?3)",
    "INSERT INTO ana_pos (dict_id, feature, tag, n) VALUES (?1, ?2, ?3, ?4)",
    "INSERT OR REPLACE INTO ana_vocab (token, text) VALUES (?1, ?2)",
    "INSERT INTO ana_effects (dict_id, feature, n_contexts, mean_act, mean_kl, mean_dloss, "
    "rank_corr) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    "INSERT INTO ana_effect_logits (dict_id, feature, sign, rank, token, value) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
};

struct store_ana_writer {
    store *s;
    sqlite3_stmt *q[Q__N];
};

void store_ana_writer_close(store_ana_writer *w)
{
    if (!w) return;
    for (int i = 0; i < Q__N; i++) sqlite3_finalize(w->q[i]);
    /* back to the usual cache (open set the large one before anything that calls this): unused
       pages are freed, dirty ones stay for the commit */
    store_cache_kib(w->s, STORE_CACHE_KIB);
    mem_free(w);
}

int store_ana_writer_open(store_ana_writer **out, store *s)
{
    *out = NULL;
    store_ana_writer *w = mem_calloc(1, sizeof *w);
    if (!w) return err_set(ERR_NOMEM, "analysis writer: out of memory");
    w->s = s;
    /* a dictionary's ~100k rows go into three indexes of ana_acts at random places: with the
       default cache each insert re-read and spilled pages (4.6 s of a sweep run's 22 s).
       SAELITE_ANA_CACHE_KIB sets another size (less memory; the tests' kill while rows spill) */
    int kib = STORE_CACHE_KIB_BULK;
    const char *env = getenv("SAELITE_ANA_CACHE_KIB");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end || v < 64 || v > (1L << 24)) {
            mem_free(w);
            return err_set(ERR_ARG, "SAELITE_ANA_CACHE_KIB=%s: not a cache size in KiB (64 .. %ld)",
                           env, 1L << 24);
        }
        kib = (int)v;
    }
    int rc0 = store_cache_kib(s, kib);
    if (rc0) {
        mem_free(w);
        return rc0;
    }
    for (int i = 0; i < Q__N; i++) {
        int rc = store_prepare(s, SQL[i], &w->q[i]);
        if (rc) {
            store_ana_writer_close(w);
            return rc;
        }
    }
    *out = w;
    return OK;
}

/* Steps a statement whose parameters are bound, then resets it for the next row. */
static int run(store_ana_writer *w, int q, const char *what)
{
    sqlite3_stmt *st = w->q[q];
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_DONE ? OK : store_sql_error(w->s, rc, what);
}

static void bind_real_or_null(sqlite3_stmt *st, int i, double v)
{
    if (isfinite(v)) sqlite3_bind_double(st, i, v);
    else sqlite3_bind_null(st, i);
}

static int acts_rebuilds; /* for the tests (store_ana_acts_rebuilds) */
int store_ana_acts_rebuilds(void) { return acts_rebuilds; }

/* a and b equal but for the lengths of their runs of white space (the schema file's line breaks;
 * store_ana_init's one-line ana_acts_kind). None of ACTS_INDEXES has white space in a literal. */
static int same_spaced(const char *a, const char *b)
{
    for (;;) {
        int sa = isspace((unsigned char)*a), sb = isspace((unsigned char)*b);
        if (sa != sb) return 0;
        if (sa) {
            while (isspace((unsigned char)*a)) a++;
            while (isspace((unsigned char)*b)) b++;
            continue;
        }
        if (*a != *b) return 0;
        if (!*a) return 1;
        a++, b++;
    }
}

/* Runs one statement (the tail, if any, is not run). */
static int exec_one(store *s, const char *sql)
{
    sqlite3_stmt *st = NULL;
    int r = sqlite3_prepare_v2(store_db(s), sql, -1, &st, NULL);
    if (r == SQLITE_OK && !st) r = SQLITE_CORRUPT;
    if (r == SQLITE_OK) {
        r = sqlite3_step(st);
        if (r == SQLITE_DONE) r = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return r == SQLITE_OK ? OK : store_sql_error(s, r, "making an index of ana_acts again");
}

/* ana_acts's rows of dictionary id. Row by row, each deleted row is a search in each of the
 * table's four indexes (about 15 us a row here: 21 s for the 1.4M rows of an --all-acts
 * analysis, more than writing them). Where those rows are most of the table (the usual re-run of
 * an --all-acts analysis) the indexes are dropped, the rows deleted in a scan, and the indexes
 * made again over what is left: 2-3 s. Only inside the caller's transaction, so a kill rolls
 * all of it back. Only when ana_acts has exactly saelite's own indexes: the file is input, and its
 * recorded index SQL is run again only where it is ours (a crafted sqlite_schema row ran its
 * second statement, "CREATE INDEX i ON ana_acts(token); UPDATE models ...", a review); any
 * other index (a user's own) keeps the row-by-row delete. */
static int delete_acts_rows(store_ana_writer *w, int64_t id)
{
    char sql[128];
    int64_t n_del = 0, n_all = 0;
    snprintf(sql, sizeof sql, "SELECT count(*) FROM ana_acts WHERE dict_id = %lld", (long long)id);
    int rc = store_query_i64(w->s, sql, &n_del);
    if (!rc && n_del >= ACTS_REBUILD_MIN)
        rc = store_query_i64(w->s, "SELECT count(*) FROM ana_acts", &n_all);
    snprintf(sql, sizeof sql, "DELETE FROM ana_acts WHERE dict_id = %lld", (long long)id);
    /* rebuilding costs about a row-by-row delete's time for twice the rows left; outside a
       transaction a kill between DROP INDEX and CREATE INDEX left ana_acts without its indexes
       for good (store_ana_init remakes only ana_acts_kind; a review): row by row there */
    if (rc || n_del < ACTS_REBUILD_MIN || n_all - n_del > 2 * n_del ||
        sqlite3_get_autocommit(store_db(w->s)))
        return rc ? rc : store_exec(w->s, sql);

    /* the recorded indexes: each must be one of ours, once (the recorded text is kept, so the
       file reads as before) */
    sqlite3_stmt *st;
    char *made[ACTS_NIDX] = {0};
    int ours = 1, r;
    if ((rc = store_prepare(w->s, "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND "
                                  "tbl_name = 'ana_acts'", &st)))
        return rc;
    while (ours && (r = sqlite3_step(st)) == SQLITE_ROW) {
        const char *nm = (const char *)sqlite3_column_text(st, 0);
        const char *ms = (const char *)sqlite3_column_text(st, 1);
        int k = -1;
        for (int i = 0; nm && ms && i < ACTS_NIDX; i++)
            if (!strcmp(nm, ACTS_INDEXES[i][0]) && same_spaced(ms, ACTS_INDEXES[i][1])) k = i;
        if (k < 0 || made[k]) ours = 0; /* another index (or an autoindex: sql NULL) */
        else if (!(made[k] = sqlite3_mprintf("%s", ms))) {
            r = SQLITE_NOMEM;
            break;
        }
    }
    sqlite3_finalize(st);
    if (ours && r != SQLITE_DONE) rc = store_sql_error(w->s, r, "listing the indexes of ana_acts");
    else if (!ours) rc = store_exec(w->s, sql);
    else {
        /* DROP INDEX deletes the index's sqlite_stat1/4 rows and CREATE INDEX makes none: keep
           them, as a row-by-row delete does (a user's ANALYZE; otherwise ana_acts alone had no
           statistics and the planner fell back to its guesses) */
        static const char *const stat[2] = {"sqlite_stat1", "sqlite_stat4"};
        int64_t kept[2] = {0, 0};
        char q[256];
        for (int j = 0; !rc && j < 2; j++) {
            snprintf(q, sizeof q, "SELECT count(*) FROM main.sqlite_schema WHERE name = '%s'", stat[j]);
            rc = store_query_i64(w->s, q, &kept[j]);
            snprintf(q, sizeof q, "CREATE TEMP TABLE saelite_keep_%s AS SELECT * FROM main.%s WHERE "
                                  "tbl = 'ana_acts' AND idx LIKE 'ana\\_acts\\_%%' ESCAPE '\\'", stat[j], stat[j]);
            if (!rc && kept[j]) rc = store_exec(w->s, q);
        }
        for (int i = 0; !rc && i < ACTS_NIDX; i++)
            if (made[i]) {
                snprintf(q, sizeof q, "DROP INDEX %s", ACTS_INDEXES[i][0]);
                rc = store_exec(w->s, q);
            }
        if (!rc) rc = store_exec(w->s, sql);
        for (int i = 0; !rc && i < ACTS_NIDX; i++)
            if (made[i]) rc = exec_one(w->s, made[i]);
        for (int j = 0; j < 2; j++) {
            if (!kept[j]) continue;
            snprintf(q, sizeof q, "INSERT INTO main.%s SELECT * FROM temp.saelite_keep_%s", stat[j], stat[j]);
            if (!rc) rc = store_exec(w->s, q);
            snprintf(q, sizeof q, "DROP TABLE IF EXISTS temp.saelite_keep_%s", stat[j]);
            sqlite3_exec(store_db(w->s), q, NULL, NULL, NULL);
        }
        if (!rc) acts_rebuilds++;
    }
    for (int i = 0; i < ACTS_NIDX; i++) sqlite3_free(made[i]);
    return rc;
}

/* Every row of the tables keyed by dict_id under id (explicit deletes: do not depend on PRAGMA
 * foreign_keys for the cascade). */
static int delete_dict_rows(store_ana_writer *w, int64_t id)
{
    static const char *const tables[] = {"ana_metrics", "ana_features", "ana_hist",
                                         "ana_logits", "ana_geometry", "ana_decoder", "ana_pos",
                                         "ana_effects", "ana_effect_logits"};
    int rc = delete_acts_rows(w, id);
    for (size_t i = 0; !rc && i < sizeof tables / sizeof tables[0]; i++) {
        char sql[128];
        snprintf(sql, sizeof sql, "DELETE FROM %s WHERE dict_id = %lld", tables[i], (long long)id);
        rc = store_exec(w->s, sql);
    }
    return rc;
}

/* One past the largest id in ana_dicts and in sweep_runs.dict_id (when that table exists). */
static int next_dict_id(store *s, int64_t *id)
{
    int64_t a = 0, b = 0, n = -1;
    int rc = store_query_i64(s, "SELECT coalesce(max(id), 0) FROM ana_dicts", &a);
    if (!rc) rc = store_count_rows(s, "sweep_runs", &n);
    if (!rc && n > 0) rc = store_query_i64(s, "SELECT coalesce(max(dict_id), 0) FROM sweep_runs", &b);
    int64_t m = a > b ? a : b;
    *id = m < INT64_MAX ? m + 1 : -1; /* -1: SQLite picks a free rowid (a hostile file's max) */
    return rc;
}

int store_ana_dict_begin(store_ana_writer *w, const store_ana_dict *d, int64_t *dict_id,
                         int64_t *replaced_seqs)
{
    int64_t replaced = -1;
    sqlite3_stmt *st;
    /* the same name, or for an SAE the same directory spelt otherwise (./sae after sae added a
       second row for one SAE, an audit found) */
    int rc = store_prepare(w->s, "SELECT id, name, n_seqs FROM ana_dicts WHERE kind = ?1 AND ifnull(sae_id, -1) "
                                 "= ?2 AND hook_name = ?3 AND split = ?4 ORDER BY name = ?5 DESC, id DESC", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, d->kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, d->sae_id < 0 ? -1 : d->sae_id);
    sqlite3_bind_text(st, 3, d->hook_name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, d->split, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, d->name, -1, SQLITE_STATIC);
    int r;
    int64_t old = -1;
    while (old < 0 && (r = sqlite3_step(st)) == SQLITE_ROW) {
        const char *nm = (const char *)sqlite3_column_text(st, 1);
        if (nm && (!strcmp(nm, d->name) || (!strcmp(d->kind, "sae") && file_same(nm, d->name)))) {
            old = sqlite3_column_int64(st, 0);
            replaced = sqlite3_column_int64(st, 2);
        }
    }
    sqlite3_finalize(st);
    if (r != SQLITE_ROW && r != SQLITE_DONE) return store_sql_error(w->s, r, "finding an earlier analysis");
    if (old >= 0) {
        if ((rc = delete_dict_rows(w, old))) return rc;
        char sql[96];
        snprintf(sql, sizeof sql, "DELETE FROM ana_dicts WHERE id = %lld", (long long)old);
        if ((rc = store_exec(w->s, sql))) return rc;
    }
    /* the replacement keeps the old id: sweep_runs.dict_id, a user's saved query, a serve page
       open on /feature/ID/F name the analysis of this (dictionary, hook, split), not a row that
       is gone (a new id left the sweep's dict_id dangling, an audit found). A new analysis
       takes an id no sweep row names: after a user deleted the largest ana_dicts row
       (sqlite3), the next rowid was that row's, and sweep_runs.dict_id named another SAE's
       analysis. */
    int64_t id = old;
    if (id < 0) rc = next_dict_id(w->s, &id);
    if (rc) return rc;
    /* created_at to the millisecond: it orders analyses newest first (STORE_ANA_NEWEST), and to
       the second (the column's default) an SAE analysed on val, then all, then val again within
       one second tied, and the id (kept by a replacement) gave report the older 'all' */
    rc = store_prepare(w->s, "INSERT INTO ana_dicts (kind, sae_id, name, hook_name, d_in, d_sae, "
                             "split, n_seqs, n_tokens, top_n, weights, id, created_at) VALUES (?1,?2,?3,?4,?5,"
                             "?6,?7,?8,?9,?10,?11,?12," STORE_ANA_MS("'now'") ")", &st);
    if (rc) return rc;
    if (id >= 0) sqlite3_bind_int64(st, 12, id); /* NULL: the next rowid */
    sqlite3_bind_text(st, 1, d->kind, -1, SQLITE_STATIC);
    if (d->sae_id >= 0) sqlite3_bind_int64(st, 2, d->sae_id);
    sqlite3_bind_text(st, 3, d->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, d->hook_name, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, d->d_in);
    sqlite3_bind_int(st, 6, d->d_sae);
    sqlite3_bind_text(st, 7, d->split, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 8, d->n_seqs);
    sqlite3_bind_int64(st, 9, d->n_tokens);
    sqlite3_bind_int(st, 10, d->top_n);
    if (d->weights) sqlite3_bind_text(st, 11, d->weights, -1, SQLITE_STATIC);
    r = sqlite3_step(st);
    sqlite3_finalize(st);
    if (r != SQLITE_DONE) return store_sql_error(w->s, r, "recording the analysed dictionary");
    *dict_id = sqlite3_last_insert_rowid(store_db(w->s));
    if (replaced_seqs) *replaced_seqs = replaced;
    /* a user's DELETE FROM ana_dicts leaves the other tables' rows (foreign keys are not
       enforced) and the next analysis reuses the id: those rows failed it on a UNIQUE
       constraint, or merged into it (an audit) */
    return delete_dict_rows(w, *dict_id);
}

int store_ana_dict_seconds(store_ana_writer *w, int64_t dict_id, double seconds)
{
    sqlite3_stmt *st;
    int rc = store_prepare(w->s, "UPDATE ana_dicts SET seconds = ?2 WHERE id = ?1", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, dict_id);
    sqlite3_bind_double(st, 2, seconds);
    int r = sqlite3_step(st);
    sqlite3_finalize(st);
    return r == SQLITE_DONE ? OK : store_sql_error(w->s, r, "recording the analysis time");
}

int store_ana_metric(store_ana_writer *w, int64_t dict_id, const char *name, double value)
{
    sqlite3_stmt *st = w->q[Q_METRIC];
    sqlite3_bind_int64(st, 1, dict_id);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    bind_real_or_null(st, 3, value);
    return run(w, Q_METRIC, "writing a metric");
}

int store_ana_feature(store_ana_writer *w, int64_t dict_id, int feature, int64_t n_active,
                      double density, double mean_act, double max_act, int nearest,
                      double nearest_cos, const char *best_tag, double best_tag_precision)
{
    sqlite3_stmt *st = w->q[Q_FEATURE];
    sqlite3_bind_int64(st, 1, dict_id);
    sqlite3_bind_int(st, 2, feature);
    sqlite3_bind_int64(st, 3, n_active);
    sqlite3_bind_double(st, 4, density);
    bind_real_or_null(st, 5, mean_act);
    bind_real_or_null(st, 6, max_act);
    if (nearest >= 0) sqlite3_bind_int(st, 7, nearest);
    bind_real_or_null(st, 8, nearest >= 0 ? nearest_cos : NAN);
    if (best_tag) sqlite3_bind_text(st, 9, best_tag, -1, SQLITE_STATIC);
    bind_real_or_null(st, 10, best_tag ? best_tag_precision : NAN);
    return run(w, Q_FEATURE, "writing feature statistics");
}

int store_ana_hist(store_ana_writer *w, int64_t dict_id, int feature, int bin, double lo,
                   double hi, int64_t count)
{
    sqlite3_stmt *st = w->q[Q_HIST];
    sqlite3_bind_int64(st, 1, dict_id);
    sqlite3_bind_int(st, 2, feature);
    sqlite3_bind_int(st, 3, bin);
    sqlite3_bind_double(st, 4, lo);
    sqlite3_bind_double(st, 5, hi);
    sqlite3_bind_int64(st, 6, count);
    return run(w, Q_HIST, "writing a histogram");
}

int store_ana_act(store_ana_writer *w, int64_t dict_id, int feature, const char *kind,
                  int interval, int rank, int64_t seq_id, int pos, int token, double value)
{
    sqlite3_stmt *st = w->q[Q_ACT];
    sqlite3_bind_int64(st, 1, dict_id);
    sqlite3_bind_int(st, 2, feature);
    sqlite3_bind_text(st, 3, kind, -1, SQLITE_STATIC);
    if (interval >= 0) sqlite3_bind_int(st, 4, interval);
    if (rank >= 0) sqlite3_bind_int(st, 5, rank);
    sqlite3_bind_int64(st, 6, seq_id);
    sqlite3_bind_int(st, 7, pos);
    sqlite3_bind_int(st, 8, token);
    sqlite3_bind_double(st, 9, value);
    return run(w, Q_ACT, "writing an activation");
}

/* One (feature, sign, rank, token, value) row of ana_logits or ana_effect_logits. */
static int token_row(store_ana_writer *w, int q, int64_t dict_id, int feature, int sign, int rank,
                     int token, double value, const char *what)
{
    sqlite3_stmt *st = w->q[q];
    sqlite3_bind_int64(st, 1, dict_id);
    sqlite3_bind_int(st, 2, feature);
    sqlite3_bind_int(st, 3, sign);
    sqlite3_bind_int(st, 4, rank);
    sqlite3_bind_int(st, 5, token);
    sqlite3_bind_double(st, 6, value);
    return run(w, q, what);
}

int store_ana_logit(store_ana_writer *w, int64_t dict_id, int feature, int sign, int rank,
                    int token, double value)
{
    return token_row(w, Q_LOGIT, dict_id, feature, sign, rank, token, value, "writing a logit effect");
}

int store_ana_effect(store_ana_writer *w, int64_t dict_id, int feature, int64_t n_contexts,
                     double mean_act, double mean_kl, double mean_dloss, double rank_corr)
{
    sqlite3_stmt *st = w->q[Q_EFFECT];
    sqlite3_bind_int64(st, 1, dict_id);
    sqlite3_bind_int(st, 2, feature);
    sqlite3_bind_int64(st, 3, n_contexts);
    sqlite3_bind_double(st, 4, mean_act);
    sqlite3_bind_double(st, 5, mean_kl);
    sqlite3_bind_double(st, 6, mean_dloss);
    bind_real_or_null(st, 7, rank_corr);
    return run(w, Q_EFFECT, "writing a measured effect");
}

int store_ana_effect_logit(store_ana_writer *w, int64_t dict_id, int feature, int sign, int rank,
                           int token, double value)
{
    return token_row(w, Q_EFFECT_LOGIT, dict_id, feature, sign, rank, token, value,
                     "writing a measured token effect");
}

int store_ana_geometry(store_ana_writer *w, int64_t dict_id, const char *source, int bin,
                       double lo_deg, double hi_deg, int64_t count)
{
    sqlite3_stmt *st = w->q[Q_GEOM];
    sqlite3_bind_int64(st, 1, dict_id);
    sqlite3_bind_text(st, 2, source, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, bin);
    sqlite3_bind_double(st, 4, lo_deg);
    sqlite3_bind_double(st, 5, hi_deg);
    sqlite3_bind_int64(st, 6, count);
    return run(w, Q_GEOM, "writing the geometry histogram");
}

int store_ana_decoder(store_ana_writer *w, int64_t dict_id, int feature, const float *vec, int d)
{
    sqlite3_stmt *st = w->q[Q_DEC];
    unsigned char *b = mem_alloc((size_t)d * 4);
    if (!b) return err_set(ERR_NOMEM, "analysis writer: out of memory");
    for (int i = 0; i < d; i++) { /* little-endian on every host */
        uint32_t u;
        memcpy(&u, &vec[i], 4);
        b[4 * i] = (unsigned char)u;
        b[4 * i + 1] = (unsigned char)(u >> 8);
        b[4 * i + 2] = (unsigned char)(u >> 16);
        b[4 * i + 3] = (unsigned char)(u >> 24);
    }
    sqlite3_bind_int64(st, 1, dict_id);
    sqlite3_bind_int(st, 2, feature);
    sqlite3_bind_blob(st, 3, b, d * 4, SQLITE_TRANSIENT);
    mem_free(b);
    return run(w, Q_DEC, "writing a decoder row");
}

int store_ana_pos(store_ana_writer *w, int64_t dict_id, int feature, const char *tag, int64_t n)
{
    sqlite3_stmt *st = w->q[Q_POS];
    sqlite3_bind_int64(st, 1, dict_id);
    sqlite3_bind_int(st, 2, feature);
    sqlite3_bind_text(st, 3, tag, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, n);
    return run(w, Q_POS, "writing a POS count");
}

int store_ana_vocab(store_ana_writer *w, int token, const char *bytes, size_t len)
{
    sqlite3_stmt *st = w->q[Q_VOCAB];
    sqlite3_bind_int(st, 1, token);
    sqlite3_bind_blob(st, 2, bytes, (int)len, SQLITE_STATIC);
    return run(w, Q_VOCAB, "writing the vocabulary");
}

int store_ana_seq_tags(store *s, int64_t seq_id, int T, char (*tags)[16], int *any,
                       unsigned char *cont)
{
    sqlite3_stmt *st;
    *any = 0;
    for (int i = 0; i < T; i++) tags[i][0] = 0;
    if (cont) memset(cont, 0, (size_t)T);
    /* cont: the row before in the same sequence ends where this one starts, with the same tag */
    int rc = store_prepare(s, "SELECT t.position, t.pos_tag, p.byte_end IS NOT NULL AND "
                              "p.byte_end = t.byte_start AND p.pos_tag = t.pos_tag AND "
                              "substr(t.text, 1, 1) NOT IN (' ', char(9), char(10), char(13)) "
                              "FROM tokens t LEFT JOIN tokens p ON p.sequence_id = t.sequence_id "
                              "AND p.position = t.position - 1 "
                              "WHERE t.sequence_id = ?1 AND t.pos_tag IS NOT NULL", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, seq_id);
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        int p = sqlite3_column_int(st, 0);
        const char *t = (const char *)sqlite3_column_text(st, 1);
        if (p < 0 || p >= T || !t || !*t) continue;
        snprintf(tags[p], 16, "%s", t);
        if (cont) cont[p] = (unsigned char)(sqlite3_column_int(st, 2) == 1);
        *any = 1;
    }
    sqlite3_finalize(st);
    return r == SQLITE_DONE ? OK : store_sql_error(s, r, "reading POS tags");
}
