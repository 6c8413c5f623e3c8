/* store_eval.c - the evaluation tables (see store_eval.h, schema_eval.sql). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "store/store_eval.h"
#include "store/store_internal.h"
#include "store/store_sae.h"

#include "schema_eval_sql.h" /* generated from store/schema_eval.sql */

int store_eval_init(store *s)
{
    int rc = store_sae_init(s);
    return rc ? rc : store_schema_part(s, "eval", STORE_EVAL_VERSION, schema_eval_sql);
}

int store_eval_verify(store *s)
{
    return store_schema_part_verify(s, "eval", STORE_EVAL_VERSION, schema_eval_sql);
}

static int step_done(store *s, sqlite3_stmt *st, const char *what)
{
    int r = sqlite3_step(st);
    int rc = r == SQLITE_DONE ? OK : store_sql_error(s, r, what);
    sqlite3_finalize(st);
    return rc;
}

static void bind_real(sqlite3_stmt *st, int i, double v)
{
    if (isfinite(v)) sqlite3_bind_double(st, i, v);
}

int store_eval_seqs(store *s, int64_t hook_id, store_eval_seq **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *st;
    int rc = store_prepare(s, "SELECT q.id, q.document_id, q.bos, q.n_tokens, coalesce(d.genre, '') "
                              "FROM activations a JOIN sequences q ON q.id = a.sequence_id "
                              "JOIN documents d ON d.id = q.document_id WHERE a.hook_id = ?1 "
                              "ORDER BY q.id", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, hook_id);
    size_t cap = 0;
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 1024;
            store_eval_seq *p = mem_realloc(*out, cap * sizeof *p);
            if (!p) {
                rc = err_set(ERR_NOMEM, "%s: out of memory", store_path(s));
                break;
            }
            *out = p;
        }
        store_eval_seq *q = &(*out)[(*n)++];
        q->seq_id = sqlite3_column_int64(st, 0);
        q->doc_id = sqlite3_column_int64(st, 1);
        q->bos = sqlite3_column_int(st, 2);
        q->n_tokens = sqlite3_column_int(st, 3);
        const char *g = (const char *)sqlite3_column_text(st, 4);
        snprintf(q->genre, sizeof q->genre, "%s", g ? g : "");
    }
    if (!rc && r != SQLITE_DONE) rc = store_sql_error(s, r, "reading sequences");
    sqlite3_finalize(st);
    if (rc) {
        mem_free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

/* The eval_runs rows that match where (an SQL condition on eval_runs, reading ?1 = sae_id and
 * ?2 = text where it names them) with every row hanging off them: the one list of those tables. */
static int delete_runs(store *s, const char *where, int64_t sae_id, const char *text, const char *what)
{
    static const char *const rows[] = {"eval_probe", "eval_absorption", "eval_ablation", "eval_metrics"};
    const size_t nrows = sizeof rows / sizeof *rows;
    int rc = OK;
    for (size_t i = 0; !rc && i <= nrows; i++) {
        char sql[256];
        if (i < nrows)
            snprintf(sql, sizeof sql, "DELETE FROM %s WHERE run_id IN (SELECT id FROM eval_runs WHERE %s)",
                     rows[i], where);
        else snprintf(sql, sizeof sql, "DELETE FROM eval_runs WHERE %s", where);
        sqlite3_stmt *st;
        if ((rc = store_prepare(s, sql, &st))) break;
        sqlite3_bind_int64(st, 1, sae_id); /* where a condition names only ?2, ?1 is bound and unread */
        sqlite3_bind_text(st, 2, text, -1, SQLITE_STATIC);
        rc = step_done(s, st, what);
    }
    return rc;
}

int store_eval_forget_sae(store *s, int64_t sae_id)
{
    int yes = 0, rc = store_table_exists(s, "eval_runs", &yes);
    return rc || !yes ? rc : delete_runs(s, "sae_id = ?1", sae_id, NULL,
                                         "removing the evaluations of a replaced SAE");
}

int store_eval_run_begin(store *s, int64_t sae_id, const char *suite, const char *hook_name,
                         const char *config_json, int64_t n_seqs, int64_t *run_id)
{
    sqlite3_stmt *st;
    int rc = delete_runs(s, "sae_id = ?1 AND suite = ?2", sae_id, suite, "replacing an evaluation");
    if (rc) return rc;
    if ((rc = store_prepare(s, "INSERT INTO eval_runs (sae_id, suite, hook_name, config, n_seqs) "
                               "VALUES (?1, ?2, ?3, ?4, ?5)", &st)))
        return rc;
    sqlite3_bind_int64(st, 1, sae_id);
    sqlite3_bind_text(st, 2, suite, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, hook_name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, config_json ? config_json : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, n_seqs);
    if ((rc = step_done(s, st, "writing an evaluation run"))) return rc;
    *run_id = sqlite3_last_insert_rowid(store_db(s));
    return OK;
}

int store_eval_probe(store *s, int64_t run_id, const char *task, const char *kind,
                     const char *dict, int k, int n_train, int n_test, double train_acc,
                     double test_acc, const char *features)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "INSERT INTO eval_probe (run_id, task, kind, dict, k, n_train, "
                              "n_test, train_acc, test_acc, features) VALUES "
                              "(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_text(st, 2, task, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, dict, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, k);
    sqlite3_bind_int(st, 6, n_train);
    sqlite3_bind_int(st, 7, n_test);
    bind_real(st, 8, train_acc);
    bind_real(st, 9, test_acc);
    if (features) sqlite3_bind_text(st, 10, features, -1, SQLITE_STATIC);
    return step_done(s, st, "writing a probe result");
}

int store_eval_absorption(store *s, int64_t run_id, const char *parent, double gt_f1,
                          int included, const char *split_features, int n_split, double split_f1,
                          int n_probe_tp, int n_false_neg, double mean_frac, double full_rate)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "INSERT INTO eval_absorption (run_id, parent, gt_f1, included, "
                              "split_features, n_split, split_f1, n_probe_tp, n_false_neg, "
                              "mean_frac, full_rate) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)",
                           &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_text(st, 2, parent, -1, SQLITE_STATIC);
    bind_real(st, 3, gt_f1);
    sqlite3_bind_int(st, 4, included);
    sqlite3_bind_text(st, 5, split_features ? split_features : "[]", -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 6, n_split);
    bind_real(st, 7, split_f1);
    sqlite3_bind_int(st, 8, n_probe_tp);
    sqlite3_bind_int(st, 9, n_false_neg);
    bind_real(st, 10, mean_frac);
    bind_real(st, 11, full_rate);
    return step_done(s, st, "writing an absorption result");
}

int store_eval_ablation(store *s, int64_t run_id, const char *task, int n, double clean_acc,
                        double orig_acc, double ablated_acc, double other_diff, double score)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "INSERT INTO eval_ablation (run_id, task, n, clean_acc, orig_acc, "
                              "ablated_acc, other_diff, score) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_text(st, 2, task, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, n);
    bind_real(st, 4, clean_acc);
    bind_real(st, 5, orig_acc);
    bind_real(st, 6, ablated_acc);
    bind_real(st, 7, other_diff);
    bind_real(st, 8, score);
    return step_done(s, st, "writing an ablation result");
}

int store_eval_runs_other(store *s, int64_t sae_id, uint64_t seed, int seqs_per_genre,
                          int random_sae, int64_t *n)
{
    *n = 0;
    int have, rc = store_table_exists(s, "eval_runs", &have);
    if (rc || !have) return rc;
    sqlite3_stmt *st;
    rc = store_prepare(s, "SELECT count(*) FROM eval_runs WHERE sae_id = ?1 AND NOT ("
                          "json_valid(config) AND json_extract(config, '$.seed') = ?2 AND "
                          "json_extract(config, '$.seqs_per_genre') = ?3 AND "
                          "json_extract(config, '$.random_sae') = ?4)", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, sae_id);
    sqlite3_bind_int64(st, 2, (int64_t)seed);
    sqlite3_bind_int(st, 3, seqs_per_genre);
    sqlite3_bind_int(st, 4, random_sae ? 1 : 0);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) *n = sqlite3_column_int64(st, 0);
    else rc = store_sql_error(s, r, "reading eval_runs");
    sqlite3_finalize(st);
    return rc;
}

int store_eval_metric(store *s, int64_t run_id, const char *metric, double value)
{
    sqlite3_stmt *st;
    int rc = store_prepare(s, "INSERT OR REPLACE INTO eval_metrics (run_id, metric, value) "
                              "VALUES (?1, ?2, ?3)", &st);
    if (rc) return rc;
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_text(st, 2, metric, -1, SQLITE_STATIC);
    bind_real(st, 3, value);
    return step_done(s, st, "writing an evaluation metric");
}
