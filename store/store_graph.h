/* store_graph.h - the attribution-graph tables (store/schema_graph.sql, schema part "graph"),
 * written by `saelite graph --db`.
 *
 * Usage: store_graph_init once per open store; inside one store_begin/store_commit transaction:
 * store_graph_add (the graphs row; returns its id), then store_graph_node per node and
 * store_graph_edge per non-zero edge through a writer; roll back on any error.
 * Ownership: the writer owns its prepared statements; strings are copied by SQLite.
 * Errors: err.h codes (ERR_SQL, ERR_IO, ERR_NOMEM) naming the database.
 * Thread safety: like the store, one thread per handle.
 */
#ifndef SAELITE_STORE_GRAPH_H
#define SAELITE_STORE_GRAPH_H
#include <stdint.h>

#include "store/store.h"

#define STORE_GRAPH_VERSION 1

int store_graph_init(store *s);

typedef struct {
    const char *slug, *prompt, *model_dir, *transcoders;
    int n_layers, n_pos, n_nodes, n_nodes_kept;
    int64_t n_edges, n_edges_kept;
    double node_threshold, edge_threshold, max_rel_err;
} store_graph_row;

typedef struct {
    int node;
    const char *node_id, *feature_type, *token_text; /* token_text may be NULL */
    int layer, pos, feature, token;                  /* layer/feature/token < 0 store NULL */
    double activation, value, bias, influence;       /* NaN stores NULL */
    int kept;
} store_graph_node_row;

typedef struct store_graph_writer store_graph_writer;
int store_graph_writer_open(store_graph_writer **out, store *s, const store_graph_row *g,
                            int64_t *graph_id);
int store_graph_node(store_graph_writer *w, const store_graph_node_row *r);
int store_graph_edge(store_graph_writer *w, int target, int source, double weight, int kept);
void store_graph_writer_close(store_graph_writer *w);

#endif
