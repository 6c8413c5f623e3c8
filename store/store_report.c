/* store_report.c - read-only queries over the analysis tables for `saelite report`. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/fileio.h"
#include "common/mem.h"
#include "common/utf8.h"
#include "store/store_internal.h"
#include "store/store_sae.h"
#include "store/store_report.h"

static double col_real(sqlite3_stmt *st, int i)
{
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

static void col_str(sqlite3_stmt *st, int i, char *buf, size_t cap)
{
    const char *t = (const char *)sqlite3_column_text(st, i);
    snprintf(buf, cap, "%s", t ? t : "");
}

/* ---- what analyze writes, checked on reading (a tampered or foreign table must fail with the
 * database, table, feature and value named, not draw a misleading picture) ------------------ */

/* Column i is a number (NULL allowed when nullable): text and blobs in a REAL column read as 0
 * through sqlite3_column_double and drew density 'abc' as 0. */
static int col_is_num(sqlite3_stmt *st, int i, int nullable)
{
    int t = sqlite3_column_type(st, i);
    return t == SQLITE_INTEGER || t == SQLITE_FLOAT || (nullable && t == SQLITE_NULL);
}

static int col_not_num(store *s, sqlite3_stmt *st, int i, const char *table, const char *where)
{
    const char *t = (const char *)sqlite3_column_text(st, i);
    return err_set(ERR_FORMAT, "%s: %s: %s: '%.40s' is not a number", store_path(s), table, where,
                   t ? t : "NULL");
}

static int bad_value(store *s, const char *table, const char *where, double v, const char *why)
{
    return err_set(ERR_FORMAT, "%s: %s: %s: value %.6g: %s", store_path(s), table, where, v, why);
}

/* The largest quantile band id accepted: analyze numbers --quantiles bands from 0 and samples at
 * most a few hundred positions per feature; a huge id (2147483647) overflowed maxband + 1. */
#define REP_MAX_INTERVAL 99999

/* ERR_FORMAT with a hint when the analysis tables are missing. */
static int need_tables(store *s)
{
    int64_t n = 0;
    int rc = store_query_i64(s, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                                "name IN ('ana_dicts', 'ana_features', 'ana_acts')", &n);
    if (rc) return rc;
    if (n < 3)
        return err_set(ERR_FORMAT, "%s: no analysis tables; run 'saelite analyze' on it first",
                       store_path(s));
    return OK;
}

#define DICT_COLS "id, kind, ifnull(sae_id, -1), name, hook_name, split, d_in, d_sae, top_n, n_seqs, n_tokens"

static void read_dict(sqlite3_stmt *st, store_rep_dict *d)
{
    memset(d, 0, sizeof *d);
    d->id = sqlite3_column_int64(st, 0);
    col_str(st, 1, d->kind, sizeof d->kind);
    d->sae_id = sqlite3_column_int64(st, 2);
    col_str(st, 3, d->name, sizeof d->name);
    col_str(st, 4, d->hook_name, sizeof d->hook_name);
    col_str(st, 5, d->split, sizeof d->split);
    d->d_in = sqlite3_column_int(st, 6);
    d->d_sae = sqlite3_column_int(st, 7);
    d->top_n = sqlite3_column_int(st, 8);
    d->n_seqs = sqlite3_column_int64(st, 9);
    d->n_tokens = sqlite3_column_int64(st, 10);
}

/* The list of analysed dictionaries, for "not found" messages. */
static void list_dicts(store *s, char *buf, size_t cap)
{
    sqlite3_stmt *st;
    buf[0] = 0;
    /* each with its analysis id, what dict:N names (sae_id is never recorded) */
    if (store_prepare(s, "SELECT kind, id, name, hook_name, split FROM ana_dicts ORDER BY id", &st))
        return;
    size_t o = 0;
    int k = 0;
    while (sqlite3_step(st) == SQLITE_ROW && o + 1 < cap) {
        const char *kind = (const char *)sqlite3_column_text(st, 0);
        long long id = sqlite3_column_int64(st, 1);
        const char *name = (const char *)sqlite3_column_text(st, 2);
        const char *hook = (const char *)sqlite3_column_text(st, 3);
        const char *split = (const char *)sqlite3_column_text(st, 4);
        int w;
        if (kind && !strcmp(kind, "sae"))
            w = snprintf(buf + o, cap - o, "%sdict:%lld sae '%s' at %s (%s)", k ? ", " : "", id,
                         name ? name : "", hook ? hook : "", split ? split : "");
        else
            w = snprintf(buf + o, cap - o, "%sdict:%lld neurons at %s (%s)", k ? ", " : "", id,
                         hook ? hook : "", split ? split : "");
        if (w < 0) break;
        o += (size_t)w < cap - o ? (size_t)w : cap - o - 1;
        k++;
    }
    sqlite3_finalize(st);
    if (!k) snprintf(buf, cap, "none; run 'saelite analyze' first");
}

/* A hint when `sae` is a directory and an analysed SAE's relative name is the end of its real
 * path ('runs/demo/sae' of /x/runs/demo/sae): analyze records the name as given, so from another
 * working directory it does not resolve (a review). Only a hint: the name says nothing of which
 * directory it was relative to, so it is never taken for this one. "" when none. */
static void tail_hint(store *s, const char *sae, char *buf, size_t cap)
{
    buf[0] = 0;
    char *real = realpath(sae, NULL);
    sqlite3_stmt *st;
    if (!real) return;
    if (store_prepare(s, "SELECT id, name FROM ana_dicts WHERE kind = 'sae' ORDER BY " STORE_ANA_NEWEST, &st)) {
        free(real);
        return;
    }
    size_t r = strlen(real);
    while (!buf[0] && sqlite3_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 1);
        if (!name || name[0] == '/') continue;
        const char *nm = name;
        while (!strncmp(nm, "./", 2))
            for (nm += 2; *nm == '/'; nm++) {}
        size_t n = strlen(nm);
        while (n && nm[n - 1] == '/') n--;
        if (n && r > n && real[r - n - 1] == '/' && !strncmp(real + r - n, nm, n))
            snprintf(buf, cap, " (dict:%lld '%s' ends this directory's path: if analyze ran on it "
                     "from another directory, give --sae dict:%lld or run from there)",
                     (long long)sqlite3_column_int64(st, 0), name,
                     (long long)sqlite3_column_int64(st, 0));
    }
    sqlite3_finalize(st);
    free(real);
}

/* The transcoder fields of d from its registry row, by id or (an analysis without the id) by
 * directory; nothing when the registry or the row is missing, or the config names no transcoder. */
static void dict_transcoder(store *s, store_rep_dict *d)
{
    sqlite3_stmt *st;
    int64_t have = 0;
    if (strcmp(d->kind, "sae") || store_query_i64(s, "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                            "AND name = 'sae_registry'", &have) || have != 1)
        return;
    if (store_prepare(s, "SELECT json_extract(config, '$.transcoder'), json_extract(config, "
                         "'$.hook_out') FROM sae_registry WHERE (id = ?1 OR (?1 < 0 AND rtrim(dir, '/') = "
                         "rtrim(?2, '/'))) AND json_valid(config) ORDER BY id DESC LIMIT 1", &st))
        return;
    sqlite3_bind_int64(st, 1, d->sae_id);
    sqlite3_bind_text(st, 2, d->name, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        const char *h = (const char *)sqlite3_column_text(st, 1);
        if (t && h && (!strcmp(t, "transcoder") || !strcmp(t, "skip_transcoder"))) {
            snprintf(d->transcoder, sizeof d->transcoder, "%s", t);
            snprintf(d->hook_out, sizeof d->hook_out, "%s", h);
        }
    }
    sqlite3_finalize(st);
}

/* The SAE directory sae holds w; *r is SQLITE_ROW when its name found *out, SQLITE_DONE when
 * not. The analysis of those weights wins (store_ana_by_weights); a name's analysis of other
 * weights, with none of them, is refused (*stale = 1). */
static int by_weights(store *s, const char *sae, const store_rep_sae *w, const char *hook,
                      const char *split, store_rep_dict *out, int *r, int *stale)
{
    store_ana_want want = {.weights = w->weights, .sae_hook = w->hook[0] ? w->hook : NULL,
                           .hook = hook, .split = split, .d_sae = w->d_sae};
    int64_t named = *r == SQLITE_ROW ? out->id : -1, id;
    char then[17];
    int rc = store_ana_by_weights(store_db(s), store_path(s), &want, named, &id, then);
    if (rc) return rc;
    if (then[0]) {
        *stale = 1;
        return err_set(ERR_NOTFOUND, "%s: the analysis of '%s' (dict:%lld) was made from other "
                       "weights than %s/sae_weights.safetensors holds now (recorded: %s; now: %s): "
                       "run 'saelite analyze --db %s --sae %s' again, or give --sae dict:%lld for "
                       "that analysis as it is", store_path(s), out->name, (long long)named, sae,
                       then, w->weights, store_path(s), sae, (long long)named);
    }
    if (id < 0 || id == named) return OK;
    sqlite3_stmt *st;
    if ((rc = store_prepare(s, "SELECT " DICT_COLS " FROM ana_dicts WHERE id = ?1", &st))) return rc;
    sqlite3_bind_int64(st, 1, id);
    int q = sqlite3_step(st);
    if (q == SQLITE_ROW) read_dict(st, out);
    sqlite3_finalize(st);
    if (q != SQLITE_ROW) return store_sql_error(s, q == SQLITE_DONE ? SQLITE_CORRUPT : q, "reading ana_dicts");
    *r = SQLITE_ROW;
    return OK;
}

/* by_number: sae may be a registry id or an analysis id ("dict:N" always the latter); 0 for a
 * registry row's directory, which is a name even when it is all digits (--out 2: read as an id
 * again, it recursed until the stack ran out, an audit) */
static int dict_find(store *s, const char *sae, const store_rep_sae *w, const char *hook,
                     const char *split, store_rep_dict *out, int by_number, int *stale)
{
    int rc = need_tables(s);
    if (rc == ERR_FORMAT) /* say which analysis was asked for, with the hint */
        return err_set(ERR_FORMAT, "%s: no analysis of SAE '%s' (no analysis tables; run "
                       "'saelite analyze' on it first)", store_path(s), sae);
    if (rc) return rc;
    char *end;
    int dict_prefix = by_number && !strncmp(sae, "dict:", 5);
    const char *num = dict_prefix ? sae + 5 : sae;
    long long id = strtoll(num, &end, 10);
    int numeric = by_number && *num && !*end && (dict_prefix || *num != '-');
    char regdir[1024] = "";
    if (numeric && !dict_prefix) {
        /* a registry id names a directory: its analysis, or none. ana_dicts.sae_id is not
           recorded, so the id matched no row and report fell through to the analysis with that
           id, another dictionary, exit 0 (an audit) */
        int has_reg;
        if ((rc = store_table_exists(s, "sae_registry", &has_reg))) return rc;
        sqlite3_stmt *rs;
        /* the row's weights checksum (sae schema version 2) keeps an analysis of the directory's
           earlier weights from being drawn as the registered SAE's (a review) */
        store_rep_sae rw = {"", "", 0};
        int wcol = 0;
        if (has_reg && (rc = store_column_exists(s, "sae_registry", "weights", &wcol))) return rc;
        if (has_reg) { /* without a registry the number is an analysis id */
            if ((rc = store_prepare(s, wcol ? "SELECT dir, weights, hook_name, d_sae FROM sae_registry "
                                              "WHERE id = ?1"
                                            : "SELECT dir, NULL, hook_name, d_sae FROM sae_registry "
                                              "WHERE id = ?1", &rs)))
                return rc;
            sqlite3_bind_int64(rs, 1, id);
            int r = sqlite3_step(rs);
            if (r == SQLITE_ROW && sqlite3_column_text(rs, 0)) {
                snprintf(regdir, sizeof regdir, "%s", (const char *)sqlite3_column_text(rs, 0));
                const char *t = (const char *)sqlite3_column_text(rs, 1);
                const char *h = (const char *)sqlite3_column_text(rs, 2);
                if (t && strlen(t) == 16) snprintf(rw.weights, sizeof rw.weights, "%s", t);
                if (h) snprintf(rw.hook, sizeof rw.hook, "%s", h);
                int64_t d = sqlite3_column_int64(rs, 3);
                rw.d_sae = d > 0 && d <= INT32_MAX ? (int)d : 0;
            } else if (r != SQLITE_ROW && r != SQLITE_DONE) rc = store_sql_error(s, r, "reading sae_registry");
            sqlite3_finalize(rs);
            if (rc) return rc;
        }
        if (regdir[0]) {
            int st2 = 0, r2 = dict_find(s, regdir, rw.weights[0] ? &rw : NULL, hook, split, out, 0, &st2);
            if (r2 == ERR_NOTFOUND && !st2)
                return err_set(ERR_NOTFOUND, "%s: registry id %lld is the SAE in %s, which has no "
                               "analysis%s%s%s%s here; run 'saelite analyze --db %s --sae %s' first "
                               "(an analysis id is dict:N)",
                               store_path(s), id, regdir, hook ? " at " : "", hook ? hook : "",
                               split ? " split " : "", split ? split : "", store_path(s), regdir);
            return r2;
        }
    }
    const char *nhook = NULL;
    int neurons = !strcmp(sae, "neurons");
    if (!strncmp(sae, "neurons@", 8)) {
        neurons = 1;
        nhook = sae + 8;
    }
    if (nhook && !hook) hook = nhook;
    sqlite3_stmt *st;
    const char *sql =
        numeric ? "SELECT " DICT_COLS " FROM ana_dicts WHERE id = ?1 AND "
                  "(?2 IS NULL OR hook_name = ?2) AND (?3 IS NULL OR split = ?3)"
        : neurons ? "SELECT " DICT_COLS " FROM ana_dicts WHERE kind = 'neurons' AND "
                    "(?2 IS NULL OR hook_name = ?2) AND (?3 IS NULL OR split = ?3) ORDER BY "
                    STORE_ANA_NEWEST " LIMIT 1"
                  /* a directory matches with or without a trailing slash */
                  : "SELECT " DICT_COLS " FROM ana_dicts WHERE kind = 'sae' AND (name = ?4 OR "
                    "rtrim(name, '/') = rtrim(?4, '/')) AND (?2 IS NULL OR hook_name = ?2) AND "
                    "(?3 IS NULL OR split = ?3) ORDER BY " STORE_ANA_NEWEST " LIMIT 1";
    if ((rc = store_prepare(s, sql, &st))) return rc;
    if (numeric) sqlite3_bind_int64(st, 1, id);
    if (hook) sqlite3_bind_text(st, 2, hook, -1, SQLITE_STATIC);
    if (split) sqlite3_bind_text(st, 3, split, -1, SQLITE_STATIC);
    if (!numeric && !neurons) sqlite3_bind_text(st, 4, sae, -1, SQLITE_STATIC);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) read_dict(st, out);
    sqlite3_finalize(st);
    if ((r == SQLITE_DONE || r == SQLITE_ROW) && !numeric && !neurons) {
        /* the same directory spelt otherwise (./sae, an absolute path, a symlink): analyze keyed
           the row by the string it was given, and report --sae ./sae did not find 'sae'; nor did
           an exact spelling find a newer analysis made under another one (an audit: "the most
           recent" drew an older one) */
        int64_t exact = r == SQLITE_ROW ? out->id : -1;
        const char *q2 = "SELECT id, name FROM ana_dicts WHERE kind = 'sae' AND (?2 IS NULL OR "
                         "hook_name = ?2) AND (?3 IS NULL OR split = ?3) ORDER BY " STORE_ANA_NEWEST;
        if ((rc = store_prepare(s, q2, &st))) return rc;
        if (hook) sqlite3_bind_text(st, 2, hook, -1, SQLITE_STATIC);
        if (split) sqlite3_bind_text(st, 3, split, -1, SQLITE_STATIC);
        int64_t hit = -1;
        while (hit < 0 && (r = sqlite3_step(st)) == SQLITE_ROW) {
            const char *nm = (const char *)sqlite3_column_text(st, 1);
            int64_t id2 = sqlite3_column_int64(st, 0);
            if (id2 == exact) break; /* newest first: nothing newer than the exact match */
            if (nm && file_same(nm, sae)) hit = id2;
        }
        sqlite3_finalize(st);
        if (r != SQLITE_ROW && r != SQLITE_DONE) return store_sql_error(s, r, "reading ana_dicts");
        r = exact >= 0 ? SQLITE_ROW : SQLITE_DONE;
        if (hit >= 0) {
            if ((rc = store_prepare(s, "SELECT " DICT_COLS " FROM ana_dicts WHERE id = ?1", &st)))
                return rc;
            sqlite3_bind_int64(st, 1, hit);
            r = sqlite3_step(st);
            if (r == SQLITE_ROW) read_dict(st, out);
            sqlite3_finalize(st);
        }
    }
    if (w && w->weights[0] && !numeric && !neurons && (r == SQLITE_ROW || r == SQLITE_DONE) &&
        (rc = by_weights(s, sae, w, hook, split, out, &r, stale)))
        return rc;
    if (r == SQLITE_ROW) {
        dict_transcoder(s, out);
        if (out->sae_id < 0 && !strcmp(out->kind, "sae")) {
            /* analyze keys its rows by directory (sae_id stays NULL): the registry row of that
               directory, however spelt, is the SAE's id (the PNGs said sae-id -1, an audit),
               unless it registered other weights than the directory's (a newer run there) */
            store_sae_entry e;
            int r3 = store_sae_get(s, -1, out->name, &e);
            if (r3 == OK) {
                if (!w || !w->weights[0] || !e.weights[0] || !strcmp(e.weights, w->weights))
                    out->sae_id = e.id;
            } else if (r3 != ERR_NOTFOUND) {
                return r3;
            }
            err_clear();
        }
        return OK;
    }
    if (r != SQLITE_DONE) return store_sql_error(s, r, "reading ana_dicts");
    char list[1024], hint[600] = "";
    list_dicts(s, list, sizeof list);
    if (!numeric && !neurons) tail_hint(s, sae, hint, sizeof hint);
    return err_set(ERR_NOTFOUND, "%s: no analysis of SAE '%s'%s%s%s%s; analysed: %s%s", store_path(s),
                   sae, hook ? " at " : "", hook ? hook : "", split ? " split " : "",
                   split ? split : "", list, hint);
}

int store_rep_dict_find(store *s, const char *sae, const store_rep_sae *w, const char *hook,
                        const char *split, store_rep_dict *out)
{
    int stale = 0;
    return dict_find(s, sae, w, hook, split, out, 1, &stale);
}

int store_rep_dict_neurons_for(store *s, const store_rep_dict *d, store_rep_dict *out)
{
    char spec[160];
    snprintf(spec, sizeof spec, "neurons@%s", d->hook_name);
    return store_rep_dict_find(s, spec, NULL, NULL, d->split, out);
}

#define FEAT_COLS "feature, n_active, density, mean_act, max_act, ifnull(nearest, -1), nearest_cos, " \
                  "best_tag, best_tag_precision"

/* One ana_features row into f, checked against what analyze writes: n_active >= 0, density in
 * [0, 1], mean/max NULL (never active) or finite and >= 0 (only active, > 0 values count),
 * nearest_cos NULL or in [-1, 1], best_tag_precision NULL or in [0, 1]. */
static int read_feature(store *s, sqlite3_stmt *st, store_rep_feature *f)
{
    static const int cols[5] = {2, 3, 4, 6, 8};
    static const char *const names[5] = {"density", "mean_act", "max_act", "nearest_cos",
                                         "best_tag_precision"};
    char where[64];
    f->feature = sqlite3_column_int64(st, 0);
    snprintf(where, sizeof where, "feature %lld", (long long)f->feature);
    if (!col_is_num(st, 0, 0)) return col_not_num(s, st, 0, "ana_features", "feature id");
    if (!col_is_num(st, 1, 0)) return col_not_num(s, st, 1, "ana_features", where);
    for (int k = 0; k < 5; k++)
        if (!col_is_num(st, cols[k], k > 0)) {
            snprintf(where, sizeof where, "feature %lld, %s", (long long)f->feature, names[k]);
            return col_not_num(s, st, cols[k], "ana_features", where);
        }
    f->n_active = sqlite3_column_int64(st, 1);
    f->density = col_real(st, 2);
    f->mean_act = col_real(st, 3);
    f->max_act = col_real(st, 4);
    f->nearest = sqlite3_column_int64(st, 5);
    f->nearest_cos = col_real(st, 6);
    col_str(st, 7, f->best_tag, sizeof f->best_tag);
    f->best_tag_precision = col_real(st, 8);
    if (f->n_active < 0) return bad_value(s, "ana_features", where, (double)f->n_active, "n_active is negative");
    if (!(f->density >= 0 && f->density <= 1))
        return bad_value(s, "ana_features", where, f->density, "density is outside [0, 1]");
    if (!isnan(f->mean_act) && !(f->mean_act >= 0 && isfinite(f->mean_act)))
        return bad_value(s, "ana_features", where, f->mean_act, "mean_act is not a finite value >= 0");
    if (!isnan(f->max_act) && !(f->max_act >= 0 && isfinite(f->max_act)))
        return bad_value(s, "ana_features", where, f->max_act, "max_act is not a finite value >= 0");
    if (!isnan(f->nearest_cos) && !(fabs(f->nearest_cos) <= 1 + 1e-6))
        return bad_value(s, "ana_features", where, f->nearest_cos, "nearest_cos is outside [-1, 1]");
    if (!isnan(f->best_tag_precision) && !(f->best_tag_precision >= 0 && f->best_tag_precision <= 1 + 1e-9))
        return bad_value(s, "ana_features", where, f->best_tag_precision, "best_tag_precision is outside [0, 1]");
    return OK;
}

int store_rep_features(store *s, int64_t dict_id, store_rep_feature **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int64_t cnt = 0;
    char q[128];
    snprintf(q, sizeof q, "SELECT count(*) FROM ana_features WHERE dict_id = %lld", (long long)dict_id);
    int rc = store_query_i64(s, q, &cnt);
    if (rc) return rc;
    store_rep_feature *f = mem_calloc((size_t)(cnt > 0 ? cnt : 1), sizeof *f);
    if (!f) return err_set(ERR_NOMEM, "%s: out of memory for %lld features", store_path(s), (long long)cnt);
    if ((rc = store_prepare(s, "SELECT " FEAT_COLS " FROM ana_features WHERE dict_id = ?1 ORDER BY feature", &st))) {
        mem_free(f);
        return rc;
    }
    sqlite3_bind_int64(st, 1, dict_id);
    size_t k = 0;
    int r;
    rc = OK;
    while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW && k < (size_t)cnt) rc = read_feature(s, st, &f[k++]);
    sqlite3_finalize(st);
    if (!rc && r != SQLITE_DONE && r != SQLITE_ROW) rc = store_sql_error(s, r, "reading ana_features");
    if (rc) {
        mem_free(f);
        return rc;
    }
    *out = f;
    *n = k;
    return OK;
}

/* ---- per-feature reader -------------------------------------------------------------------- */
enum { Q_FEAT, Q_ACTS, Q_HIST, Q_LOGITS, Q_POS, Q_SEQ, Q_SEQACTS, Q_HASALL, Q_DUPRANK, Q__N };

struct store_rep {
    store *s;
    int64_t dict;
    sqlite3_stmt *q[Q__N];
};

static const char *const rep_sql[Q__N] = {
    "SELECT " FEAT_COLS " FROM ana_features WHERE dict_id = ?1 AND feature = ?2",
    /* In value order, not rank order: rank only restates it (0 = largest), and a table whose
       ranks disagree with its values still draws its largest values on top, truthfully. */
    /* (kind = 'top' OR kind = 'quantile'), not kind IN (...): SQLite takes the partial index
       ana_acts_kind only for the first form, and without it walks every --all-acts row */
    "SELECT kind, ifnull(interval, -1), ifnull(rank, -1), seq_id, pos, token, value FROM ana_acts "
    "WHERE dict_id = ?1 AND feature = ?2 AND (kind = 'top' OR kind = 'quantile') ORDER BY "
    "kind = 'quantile', interval, value DESC, rank",
    "SELECT lo, hi, count FROM ana_hist WHERE dict_id = ?1 AND feature = ?2 ORDER BY bin",
    "SELECT token, value FROM ana_logits WHERE dict_id = ?1 AND feature = ?2 AND sign = ?3 ORDER BY rank",
    "SELECT tag, n FROM ana_pos WHERE dict_id = ?1 AND feature = ?2 ORDER BY n DESC, tag",
    "SELECT n_tokens, tokens FROM sequences WHERE id = ?1",
    ("SELECT pos, value FROM ana_acts WHERE dict_id = ?1 AND feature = ?2 AND seq_id = ?3 AND "
     "kind = 'all' AND pos BETWEEN ?4 AND ?5"),
    "SELECT EXISTS (SELECT 1 FROM ana_acts WHERE dict_id = ?1 AND feature = ?2 AND kind = 'all')",
    /* two rows in one place (a rank, or a position among the top ones: the top-N are distinct
       positions): appended or merged tables, which drew each context two or three times */
    ("SELECT 'rank', kind, ifnull(interval, -1), ifnull(rank, -1) FROM ana_acts WHERE dict_id = ?1 "
     "AND feature = ?2 AND (kind = 'top' OR kind = 'quantile') GROUP BY kind, interval, rank "
     "HAVING count(*) > 1 UNION ALL SELECT 'position', kind, seq_id, pos FROM ana_acts WHERE "
     "dict_id = ?1 AND feature = ?2 AND kind = 'top' GROUP BY kind, seq_id, pos HAVING count(*) > 1 LIMIT 1"),
};

void store_rep_close(store_rep *r)
{
    if (!r) return;
    for (int i = 0; i < Q__N; i++) sqlite3_finalize(r->q[i]);
    mem_free(r);
}

int store_rep_open(store_rep **out, store *s, int64_t dict_id)
{
    *out = NULL;
    int rc = need_tables(s);
    if (rc) return rc;
    store_rep *r = mem_calloc(1, sizeof *r);
    if (!r) return err_set(ERR_NOMEM, "out of memory");
    r->s = s;
    r->dict = dict_id;
    for (int i = 0; i < Q__N && !rc; i++) rc = store_prepare(s, rep_sql[i], &r->q[i]);
    if (rc) {
        store_rep_close(r);
        return rc;
    }
    *out = r;
    return OK;
}


static sqlite3_stmt *bind2(store_rep *r, int q, int64_t feature)
{
    sqlite3_stmt *st = r->q[q];
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    sqlite3_bind_int64(st, 1, r->dict);
    sqlite3_bind_int64(st, 2, feature);
    return st;
}

int store_rep_has_all(store_rep *r, int64_t feature, int *has)
{
    sqlite3_stmt *st = bind2(r, Q_HASALL, feature);
    int x = sqlite3_step(st);
    *has = x == SQLITE_ROW && sqlite3_column_int(st, 0);
    sqlite3_reset(st);
    if (x != SQLITE_ROW) return store_sql_error(r->s, x, "reading ana_acts");
    return OK;
}

int store_rep_feature_get(store_rep *r, int64_t feature, store_rep_feature *out)
{
    sqlite3_stmt *st = bind2(r, Q_FEAT, feature);
    int x = sqlite3_step(st);
    if (x == SQLITE_ROW) {
        int rc = read_feature(r->s, st, out);
        sqlite3_reset(st);
        return rc;
    }
    sqlite3_reset(st);
    if (x == SQLITE_DONE)
        return err_set(ERR_NOTFOUND, "%s: feature %lld was not analysed (see ana_features)",
                       store_path(r->s), (long long)feature);
    return store_sql_error(r->s, x, "reading ana_features");
}

/* Growable array helper. */
static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return OK;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    void *np = mem_realloc(*p, nc * elem);
    if (!np) return err_set(ERR_NOMEM, "out of memory");
    *p = np;
    *cap = nc;
    return OK;
}

int store_rep_acts(store_rep *r, int64_t feature, store_rep_act **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st = bind2(r, Q_ACTS, feature);
    store_rep_act *a = NULL;
    size_t cap = 0, k = 0;
    int x, rc = OK;
    while ((x = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = grow((void **)&a, &cap, k + 1, sizeof *a))) break;
        const char *kind = (const char *)sqlite3_column_text(st, 0);
        a[k].kind = kind && !strcmp(kind, "top") ? STORE_REP_TOP : STORE_REP_QUANTILE;
        a[k].interval = sqlite3_column_int(st, 1);
        a[k].rank = sqlite3_column_int(st, 2);
        a[k].seq_id = sqlite3_column_int64(st, 3);
        a[k].pos = sqlite3_column_int(st, 4);
        a[k].token = sqlite3_column_int(st, 5);
        double v = sqlite3_column_double(st, 6);
        char where[96];
        snprintf(where, sizeof where, "feature %lld, %s rank %d", (long long)feature,
                 a[k].kind == STORE_REP_TOP ? "top" : "quantile", a[k].rank);
        /* analyze keeps only active (> 0) values, for the neuron basis too (analysis.md) */
        if (!col_is_num(st, 6, 0)) rc = col_not_num(r->s, st, 6, "ana_acts", where);
        else if (!(v >= 0 && v <= FLT_MAX))
            rc = bad_value(r->s, "ana_acts", where, v, "is not a finite activation >= 0");
        else if (a[k].kind == STORE_REP_QUANTILE && (a[k].interval < 0 || a[k].interval > REP_MAX_INTERVAL))
            rc = err_set(ERR_FORMAT, "%s: ana_acts: %s: quantile interval %d is outside 0..%d",
                         store_path(r->s), where, a[k].interval, REP_MAX_INTERVAL);
        if (rc) break;
        a[k].value = (float)v;
        k++;
    }
    if (!rc && x != SQLITE_DONE && x != SQLITE_ROW) rc = store_sql_error(r->s, x, "reading ana_acts");
    sqlite3_reset(st);
    if (!rc) {
        sqlite3_stmt *d = bind2(r, Q_DUPRANK, feature);
        x = sqlite3_step(d);
        if (x == SQLITE_ROW && !strcmp((const char *)sqlite3_column_text(d, 0), "rank"))
            rc = err_set(ERR_FORMAT, "%s: ana_acts: feature %lld: two '%s' rows with rank %lld (interval %lld)",
                         store_path(r->s), (long long)feature, (const char *)sqlite3_column_text(d, 1),
                         (long long)sqlite3_column_int64(d, 3), (long long)sqlite3_column_int64(d, 2));
        else if (x == SQLITE_ROW)
            rc = err_set(ERR_FORMAT, "%s: ana_acts: feature %lld: two '%s' rows at sequence %lld position %lld",
                         store_path(r->s), (long long)feature, (const char *)sqlite3_column_text(d, 1),
                         (long long)sqlite3_column_int64(d, 2), (long long)sqlite3_column_int64(d, 3));
        else if (x != SQLITE_DONE) rc = store_sql_error(r->s, x, "reading ana_acts");
        sqlite3_reset(d);
    }
    if (rc) {
        mem_free(a);
        return rc;
    }
    *out = a;
    *n = k;
    return OK;
}

int store_rep_seq_acts(store_rep *r, int64_t feature, int64_t seq_id, int lo, int hi, int *pos,
                       float *val, int cap, int *n)
{
    *n = 0;
    sqlite3_stmt *st = bind2(r, Q_SEQACTS, feature);
    sqlite3_bind_int64(st, 3, seq_id);
    sqlite3_bind_int(st, 4, lo);
    sqlite3_bind_int(st, 5, hi);
    int x;
    int rc = OK;
    while ((x = sqlite3_step(st)) == SQLITE_ROW && *n < cap) {
        pos[*n] = sqlite3_column_int(st, 0);
        double v = sqlite3_column_double(st, 1);
        if (!col_is_num(st, 1, 0) || !(fabs(v) <= FLT_MAX)) {
            char where[96];
            snprintf(where, sizeof where, "feature %lld, kind 'all' at sequence %lld position %d",
                     (long long)feature, (long long)seq_id, pos[*n]);
            rc = col_is_num(st, 1, 0) ? bad_value(r->s, "ana_acts", where, v, "is not a finite activation")
                                      : col_not_num(r->s, st, 1, "ana_acts", where);
            break;
        }
        val[*n] = (float)v;
        (*n)++;
    }
    sqlite3_reset(st);
    if (!rc && x != SQLITE_DONE && x != SQLITE_ROW) rc = store_sql_error(r->s, x, "reading ana_acts");
    if (rc) *n = 0;
    return rc;
}

/* Step st to the end and split its first three (REAL) columns into three arrays of *n values
 * (NULL when there are no rows; the caller resets or finalizes st). */
/* Frees what read_columns3 gave (the callers' checks refuse a row after reading). */
static void drop3(double **c0, double **c1, double **c2, size_t *n)
{
    mem_free(*c0);
    mem_free(*c1);
    mem_free(*c2);
    *c0 = *c1 = *c2 = NULL;
    *n = 0;
}

/* Three numeric columns of every row (text in them read as 0: a review); table names them. */
static int read_columns3(store *s, sqlite3_stmt *st, const char *table, const char *what,
                         double **c0, double **c1, double **c2, size_t *n)
{
    double *v[3] = {NULL, NULL, NULL};
    size_t cap[3] = {0, 0, 0}, k = 0;
    int x = SQLITE_DONE, rc = OK;
    while (!rc && (x = sqlite3_step(st)) == SQLITE_ROW) {
        for (int j = 0; j < 3 && !rc; j++) {
            if (!col_is_num(st, j, 0)) {
                char w[48];
                snprintf(w, sizeof w, "row %zu", k + 1);
                rc = col_not_num(s, st, j, table, w);
            } else if (!(rc = grow((void **)&v[j], &cap[j], k + 1, sizeof(double))))
                v[j][k] = sqlite3_column_double(st, j);
        }
        k++;
    }
    if (!rc && x != SQLITE_DONE) rc = store_sql_error(s, x, what);
    if (rc) {
        for (int j = 0; j < 3; j++) mem_free(v[j]);
        return rc;
    }
    *c0 = v[0];
    *c1 = v[1];
    *c2 = v[2];
    *n = k;
    return OK;
}

int store_rep_hist(store_rep *r, int64_t feature, double **lo, double **hi, double **count,
                   size_t *n)
{
    *lo = *hi = *count = NULL;
    *n = 0;
    sqlite3_stmt *st = bind2(r, Q_HIST, feature);
    int rc = read_columns3(r->s, st, "ana_hist", "reading ana_hist", lo, hi, count, n);
    sqlite3_reset(st);
    /* analyze's bins: log-spaced over active (> 0) values, so 0 < lo < hi, ascending by bin
       (each starting at or after the previous one's end), counts >= 0 */
    char where[64];
    snprintf(where, sizeof where, "feature %lld", (long long)feature);
    for (size_t k = 0; !rc && k < *n; k++) {
        double l = (*lo)[k], h = (*hi)[k], c = (*count)[k];
        if (!(l > 0 && isfinite(l))) rc = bad_value(r->s, "ana_hist", where, l, "bin edge lo is not a finite value > 0");
        else if (!(h > l && isfinite(h))) rc = bad_value(r->s, "ana_hist", where, h, "bin edge hi is not finite and above lo");
        else if (k > 0 && l < (*hi)[k - 1] * (1 - 1e-9))
            rc = bad_value(r->s, "ana_hist", where, l, "bin starts before the previous bin ends (bins not ascending)");
        else if (!(c >= 0 && isfinite(c))) rc = bad_value(r->s, "ana_hist", where, c, "count is negative or not finite");
    }
    if (rc) drop3(lo, hi, count, n);
    return rc;
}

int store_rep_logits(store_rep *r, int64_t feature, int sign, int **tokens, double **values,
                     size_t *n)
{
    *tokens = NULL;
    *values = NULL;
    *n = 0;
    sqlite3_stmt *st = bind2(r, Q_LOGITS, feature);
    sqlite3_bind_int(st, 3, sign);
    int *t = NULL;
    double *v = NULL;
    size_t ct = 0, cv = 0, k = 0;
    int x, rc = OK;
    while ((x = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = grow((void **)&t, &ct, k + 1, sizeof *t)) || (rc = grow((void **)&v, &cv, k + 1, sizeof *v)))
            break;
        t[k] = sqlite3_column_int(st, 0);
        v[k] = sqlite3_column_double(st, 1);
        if (!col_is_num(st, 1, 0) || !isfinite(v[k])) {
            char where[64];
            snprintf(where, sizeof where, "feature %lld, sign %d", (long long)feature, sign);
            rc = col_is_num(st, 1, 0) ? bad_value(r->s, "ana_logits", where, v[k], "is not a finite logit effect")
                                      : col_not_num(r->s, st, 1, "ana_logits", where);
            break;
        }
        k++;
    }
    if (!rc && x != SQLITE_DONE) rc = store_sql_error(r->s, x, "reading ana_logits");
    sqlite3_reset(st);
    if (rc) {
        mem_free(t);
        mem_free(v);
        return rc;
    }
    *tokens = t;
    *values = v;
    *n = k;
    return OK;
}

int store_rep_pos(store_rep *r, int64_t feature, char (**tags)[16], double **count, size_t *n)
{
    *tags = NULL;
    *count = NULL;
    *n = 0;
    sqlite3_stmt *st = bind2(r, Q_POS, feature);
    char(*t)[16] = NULL;
    double *v = NULL;
    size_t ct = 0, cv = 0, k = 0;
    int x, rc = OK;
    while ((x = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = grow((void **)&t, &ct, k + 1, sizeof *t)) || (rc = grow((void **)&v, &cv, k + 1, sizeof *v)))
            break;
        col_str(st, 0, t[k], sizeof t[k]);
        v[k] = sqlite3_column_double(st, 1);
        if (!col_is_num(st, 1, 0) || !(v[k] >= 0 && isfinite(v[k]))) {
            char where[64];
            snprintf(where, sizeof where, "feature %lld, tag '%s'", (long long)feature, t[k]);
            rc = col_is_num(st, 1, 0) ? bad_value(r->s, "ana_pos", where, v[k], "count is negative or not finite")
                                      : col_not_num(r->s, st, 1, "ana_pos", where);
            break;
        }
        k++;
    }
    if (!rc && x != SQLITE_DONE) rc = store_sql_error(r->s, x, "reading ana_pos");
    sqlite3_reset(st);
    if (rc) {
        mem_free(t);
        mem_free(v);
        return rc;
    }
    *tags = t;
    *count = v;
    *n = k;
    return OK;
}

int store_rep_seq_window(store_rep *r, int64_t seq_id, int pos, int before, int after, int **ids,
                         int *n, int *center)
{
    *ids = NULL;
    *n = 0;
    sqlite3_stmt *st = r->q[Q_SEQ];
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, seq_id);
    int x = sqlite3_step(st), rc = OK;
    if (x != SQLITE_ROW) {
        sqlite3_reset(st);
        if (x == SQLITE_DONE)
            return err_set(ERR_NOTFOUND, "%s: no sequence %lld (referenced by ana_acts)",
                           store_path(r->s), (long long)seq_id);
        return store_sql_error(r->s, x, "reading sequences");
    }
    int T = sqlite3_column_int(st, 0);
    const unsigned char *blob = sqlite3_column_blob(st, 1);
    int nb = sqlite3_column_bytes(st, 1);
    /* `saelite import` without --tokens stores sequences with no token ids (empty blob). */
    int no_ids = nb == 0;
    if ((!no_ids && (!blob || nb != (int64_t)T * 4)) || pos < 0 || pos >= T) {
        rc = err_set(ERR_FORMAT, "%s: sequence %lld: %s", store_path(r->s), (long long)seq_id,
                     pos >= 0 && pos < T ? "bad token blob" : "stored position outside the sequence");
    } else {
        int lo = pos - before < 0 ? 0 : pos - before, hi = pos + after >= T ? T - 1 : pos + after;
        *n = hi - lo + 1;
        *center = pos - lo;
        *ids = mem_alloc(sizeof(int) * (size_t)*n);
        if (!*ids) rc = err_set(ERR_NOMEM, "out of memory");
        else
            for (int i = 0; i < *n; i++) { /* little-endian int32, whatever the host */
                if (no_ids) {
                    (*ids)[i] = -1;
                    continue;
                }
                const unsigned char *b = blob + 4 * (size_t)(lo + i);
                (*ids)[i] = (int)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                                  (uint32_t)b[3] << 24);
            }
        if (rc) *n = 0;
    }
    sqlite3_reset(st);
    return rc;
}

/* ---- whole-dictionary queries --------------------------------------------------------------- */
void store_rep_vocab_free(char **text, int n)
{
    if (!text) return;
    for (int i = 0; i < n; i++) mem_free(text[i]);
    mem_free(text);
}

int store_rep_vocab(store *s, char ***text, int *n)
{
    *text = NULL;
    *n = 0;
    int64_t mx = -1;
    int rc = store_query_i64(s, "SELECT ifnull(max(token), -1) FROM ana_vocab", &mx);
    if (rc) return rc;
    if (mx < 0) return OK;
    if (mx > 10000000) return err_set(ERR_FORMAT, "%s: ana_vocab: token id %lld too large", store_path(s), (long long)mx);
    char **t = mem_calloc((size_t)mx + 1, sizeof *t);
    if (!t) return err_set(ERR_NOMEM, "out of memory for the vocabulary");
    sqlite3_stmt *st;
    if ((rc = store_prepare(s, "SELECT token, text FROM ana_vocab WHERE token >= 0", &st))) {
        mem_free(t);
        return rc;
    }
    int x;
    while ((x = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        const void *b = sqlite3_column_blob(st, 1);
        int nb = sqlite3_column_bytes(st, 1);
        if (id > mx) continue;
        /* Display text, made here where the length is known: a NUL byte (token 0 of a
           byte-level BPE is "\x00") would end a C string, so the token drew blank and
           "\0abc" vanished. */
        char *c = mem_alloc(4 * (size_t)nb + 1);
        if (!c) { rc = err_set(ERR_NOMEM, "out of memory for the vocabulary"); break; }
        utf8_for_display(b ? b : "", b ? (size_t)nb : 0, c, 4 * (size_t)nb + 1);
        mem_free(t[id]);
        t[id] = c;
    }
    if (!rc && x != SQLITE_DONE) rc = store_sql_error(s, x, "reading ana_vocab");
    sqlite3_finalize(st);
    if (rc) {
        store_rep_vocab_free(t, (int)mx + 1);
        return rc;
    }
    *text = t;
    *n = (int)mx + 1;
    return OK;
}

int store_rep_token_text(store *s, int64_t seq_id, int lo, int hi, char ***text)
{
    *text = NULL;
    if (hi < lo) return OK;
    char **t = mem_calloc((size_t)(hi - lo + 1), sizeof *t);
    if (!t) return err_set(ERR_NOMEM, "out of memory");
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT position, text FROM tokens WHERE sequence_id = ?1 AND "
                              "position BETWEEN ?2 AND ?3", &st);
    if (rc) {
        mem_free(t);
        return rc;
    }
    sqlite3_bind_int64(st, 1, seq_id);
    sqlite3_bind_int(st, 2, lo);
    sqlite3_bind_int(st, 3, hi);
    int x;
    while ((x = sqlite3_step(st)) == SQLITE_ROW) {
        int p = sqlite3_column_int(st, 0);
        const char *v = (const char *)sqlite3_column_text(st, 1);
        if (!v || p < lo || p > hi) continue;
        if (!(t[p - lo] = mem_strdup(v))) { rc = err_set(ERR_NOMEM, "out of memory"); break; }
    }
    if (!rc && x != SQLITE_DONE) rc = store_sql_error(s, x, "reading tokens");
    sqlite3_finalize(st);
    if (rc) {
        store_rep_vocab_free(t, hi - lo + 1);
        return rc;
    }
    *text = t;
    return OK;
}

int store_rep_geometry(store *s, int64_t dict_id, const char *source, double **lo_deg,
                       double **hi_deg, double **count, size_t *n)
{
    *lo_deg = *hi_deg = *count = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT lo_deg, hi_deg, count FROM ana_geometry WHERE dict_id = ?1 AND "
                              "source = ?2 ORDER BY bin", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, dict_id);
    sqlite3_bind_text(st, 2, source, -1, SQLITE_STATIC);
    rc = read_columns3(s, st, "ana_geometry", "reading ana_geometry", lo_deg, hi_deg, count, n);
    sqlite3_finalize(st);
    /* angles in [0, 180] degrees, lo < hi, counts >= 0 */
    char where[64];
    snprintf(where, sizeof where, "source '%s'", source);
    for (size_t k = 0; !rc && k < *n; k++) {
        double l = (*lo_deg)[k], h = (*hi_deg)[k], c = (*count)[k];
        if (!(l >= 0 && l <= 180)) rc = bad_value(s, "ana_geometry", where, l, "lo_deg is outside [0, 180]");
        else if (!(h > l && h <= 180)) rc = bad_value(s, "ana_geometry", where, h, "hi_deg is not above lo_deg and in [0, 180]");
        else if (!(c >= 0 && isfinite(c))) rc = bad_value(s, "ana_geometry", where, c, "count is negative or not finite");
    }
    if (rc) drop3(lo_deg, hi_deg, count, n);
    return rc;
}

int store_rep_decoder(store *s, int64_t dict_id, int d_sae, int d_in, float **out)
{
    *out = NULL;
    if (d_sae <= 0 || d_in <= 0) return err_set(ERR_ARG, "decoder: bad shape %dx%d", d_sae, d_in);
    float *w = mem_calloc((size_t)d_sae * d_in, sizeof(float));
    if (!w) return err_set(ERR_NOMEM, "out of memory for a %dx%d decoder", d_sae, d_in);
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT feature, vec FROM ana_decoder WHERE dict_id = ?1", &st);
    if (rc) {
        mem_free(w);
        return rc;
    }
    sqlite3_bind_int64(st, 1, dict_id);
    int x, rows = 0;
    while ((x = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t f = sqlite3_column_int64(st, 0);
        const void *b = sqlite3_column_blob(st, 1);
        int nb = sqlite3_column_bytes(st, 1);
        if (f < 0 || f >= d_sae || nb != (int64_t)d_in * 4 || !b) {
            rc = err_set(ERR_FORMAT, "%s: ana_decoder: feature %lld: %d bytes, want %lld",
                         store_path(s), (long long)f, nb, (long long)d_in * 4);
            break;
        }
        memcpy(w + (size_t)f * d_in, b, (size_t)nb); /* float32 little-endian; x86/arm hosts */
        rows++;
    }
    if (!rc && x != SQLITE_DONE) rc = store_sql_error(s, x, "reading ana_decoder");
    sqlite3_finalize(st);
    if (!rc && rows == 0)
        rc = err_set(ERR_NOTFOUND, "%s: no decoder rows stored for this dictionary", store_path(s));
    if (rc) {
        mem_free(w);
        return rc;
    }
    *out = w;
    return OK;
}

int store_rep_metric(store *s, int64_t dict_id, const char *name, double *value)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT value FROM ana_metrics WHERE dict_id = ?1 AND name = ?2", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, dict_id);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    int x = sqlite3_step(st);
    if (x == SQLITE_ROW) *value = col_real(st, 0);
    sqlite3_finalize(st);
    if (x == SQLITE_ROW) return OK;
    if (x == SQLITE_DONE) return err_set(ERR_NOTFOUND, "%s: no metric '%s'", store_path(s), name);
    return store_sql_error(s, x, "reading ana_metrics");
}
