/* store_graph.c - the attribution-graph tables (see store_graph.h, schema_graph.sql). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "store/store_graph.h"
#include "store/store_internal.h"

#include "schema_graph_sql.h" /* generated from store/schema_graph.sql */

int store_graph_init(store *s) { return store_schema_part(s, "graph", STORE_GRAPH_VERSION, schema_graph_sql); }
int store_graph_verify(store *s)
{
    return store_schema_part_verify(s, "graph", STORE_GRAPH_VERSION, schema_graph_sql);
}

struct store_graph_writer {
    store *s;
    int64_t id;
    sqlite3_stmt *node, *edge;
};

void store_graph_writer_close(store_graph_writer *w)
{
    if (!w) return;
    sqlite3_finalize(w->node);
    sqlite3_finalize(w->edge);
    mem_free(w);
}

static int step_reset(store *s, sqlite3_stmt *st, const char *what)
{
    int r = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return r == SQLITE_DONE ? OK : store_sql_error(s, r, what);
}

static void bind_real(sqlite3_stmt *st, int i, double v)
{
    if (isfinite(v)) sqlite3_bind_double(st, i, v);
    else sqlite3_bind_null(st, i);
}

int store_graph_writer_open(store_graph_writer **out, store *s, const store_graph_row *g,
                            int64_t *graph_id)
{
    *out = NULL;
    sqlite3_stmt *st;
    int rc = store_prepare(s, "INSERT INTO graphs (slug, prompt, model_dir, transcoders, n_layers, "
                              "n_pos, n_nodes, n_edges, n_nodes_kept, n_edges_kept, node_threshold, "
                              "edge_threshold, max_rel_err) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,"
                              "?11,?12,?13)", &st);
    if (rc) return rc;
    sqlite3_bind_text(st, 1, g->slug, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, g->prompt, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, g->model_dir, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, g->transcoders, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, g->n_layers);
    sqlite3_bind_int(st, 6, g->n_pos);
    sqlite3_bind_int(st, 7, g->n_nodes);
    sqlite3_bind_int64(st, 8, g->n_edges);
    sqlite3_bind_int(st, 9, g->n_nodes_kept);
    sqlite3_bind_int64(st, 10, g->n_edges_kept);
    sqlite3_bind_double(st, 11, g->node_threshold);
    sqlite3_bind_double(st, 12, g->edge_threshold);
    bind_real(st, 13, g->max_rel_err);
    rc = step_reset(s, st, "adding a graph");
    sqlite3_finalize(st);
    if (rc) return rc;
    store_graph_writer *w = mem_calloc(1, sizeof *w);
    if (!w) return err_set(ERR_NOMEM, "graph writer: out of memory");
    w->s = s;
    w->id = *graph_id = sqlite3_last_insert_rowid(store_db(s));
    rc = store_prepare(s, "INSERT INTO graph_nodes (graph_id, node, node_id, feature_type, layer, pos, "
                          "feature, token, token_text, activation, value, bias, influence, kept) "
                          "VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14)", &w->node);
    if (!rc) rc = store_prepare(s, "INSERT INTO graph_edges (graph_id, target, source, weight, kept) "
                                   "VALUES (?1,?2,?3,?4,?5)", &w->edge);
    if (rc) {
        store_graph_writer_close(w);
        return rc;
    }
    *out = w;
    return OK;
}

int store_graph_node(store_graph_writer *w, const store_graph_node_row *r)
{
    sqlite3_stmt *st = w->node;
    sqlite3_bind_int64(st, 1, w->id);
    sqlite3_bind_int(st, 2, r->node);
    sqlite3_bind_text(st, 3, r->node_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, r->feature_type, -1, SQLITE_STATIC);
    if (r->layer >= 0) sqlite3_bind_int(st, 5, r->layer);
    sqlite3_bind_int(st, 6, r->pos);
    if (r->feature >= 0) sqlite3_bind_int(st, 7, r->feature);
    if (r->token >= 0) sqlite3_bind_int(st, 8, r->token);
    if (r->token_text) sqlite3_bind_text(st, 9, r->token_text, -1, SQLITE_STATIC);
    bind_real(st, 10, r->activation);
    bind_real(st, 11, r->value);
    bind_real(st, 12, r->bias);
    sqlite3_bind_double(st, 13, isfinite(r->influence) ? r->influence : 0);
    sqlite3_bind_int(st, 14, r->kept);
    return step_reset(w->s, st, "adding a graph node");
}

int store_graph_edge(store_graph_writer *w, int target, int source, double weight, int kept)
{
    sqlite3_stmt *st = w->edge;
    sqlite3_bind_int64(st, 1, w->id);
    sqlite3_bind_int(st, 2, target);
    sqlite3_bind_int(st, 3, source);
    sqlite3_bind_double(st, 4, weight);
    sqlite3_bind_int(st, 5, kept);
    return step_reset(w->s, st, "adding a graph edge");
}
