-- schema_graph.sql - attribution graphs written by `saelite graph --db` (schema part "graph",
-- version 1), created with CREATE TABLE IF NOT EXISTS through store_schema_part(s, "graph", 1, ...).
-- One row of graphs per run (a rerun adds a new graph); its nodes and every non-zero direct
-- effect hang off it. Node indices follow circuit-tracer's order (features, error nodes, token
-- embeddings, logits; analysis/graph.h); the adjacency is edges(target, source). Values are the
-- doubles the graph was computed in. Foreign keys are not enforced; the clauses document.

CREATE TABLE IF NOT EXISTS graphs (
    id             INTEGER PRIMARY KEY,
    slug           TEXT NOT NULL,
    prompt         TEXT NOT NULL,
    model_dir      TEXT NOT NULL,
    transcoders    TEXT NOT NULL,   -- transcoder directories, comma-separated, block order
    n_layers       INTEGER NOT NULL,
    n_pos          INTEGER NOT NULL, -- prompt tokens
    n_nodes        INTEGER NOT NULL,
    n_edges        INTEGER NOT NULL, -- non-zero direct effects
    n_nodes_kept   INTEGER NOT NULL, -- after pruning
    n_edges_kept   INTEGER NOT NULL,
    node_threshold REAL NOT NULL,
    edge_threshold REAL NOT NULL,
    max_rel_err    REAL,            -- completeness: max |edges + bias - value| / max(|value|, |bias| + sum |edges|)
    created_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);

CREATE TABLE IF NOT EXISTS graph_nodes (
    graph_id     INTEGER NOT NULL REFERENCES graphs(id) ON DELETE CASCADE,
    node         INTEGER NOT NULL,  -- index in the adjacency
    node_id      TEXT NOT NULL,     -- circuit-tracer's id: L_F_P, L_-1_P, E_TOK_P, (L+1)_TOK_P
    -- circuit-tracer's types ('cross layer transcoder' is its name for every transcoder feature,
    -- per-layer ones included)
    feature_type TEXT NOT NULL CHECK (feature_type IN ('cross layer transcoder',
                                      'mlp reconstruction error', 'embedding', 'logit')),
    layer        INTEGER,           -- block (features, errors); NULL embeddings; n_layers logits
    pos          INTEGER NOT NULL,  -- token position
    feature      INTEGER,           -- transcoder latent (features), else NULL
    token        INTEGER,           -- token id (embeddings, logits), else NULL
    token_text   TEXT,
    activation   REAL,              -- features: activation; logits: probability
    value        REAL,              -- features: pre-activation; logits: logit (real forward)
    bias         REAL,              -- features, logits: constant part under the frozen model
    influence    REAL NOT NULL,     -- pruning's node influence
    kept         INTEGER NOT NULL,  -- 1: in the pruned graph
    PRIMARY KEY (graph_id, node)
);

CREATE TABLE IF NOT EXISTS graph_edges (
    graph_id INTEGER NOT NULL REFERENCES graphs(id) ON DELETE CASCADE,
    target   INTEGER NOT NULL,      -- graph_nodes.node
    source   INTEGER NOT NULL,
    weight   REAL NOT NULL,         -- direct effect of source on target
    kept     INTEGER NOT NULL,      -- 1: in the pruned graph
    PRIMARY KEY (graph_id, target, source)
);
