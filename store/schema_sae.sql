-- schema_sae.sql - the SAE registry and training log (schema part "sae", version 2; version 2
-- added sae_registry.weights, which store_sae_init adds to a version 1 table), written by
-- `saelite sae-train --db`. Created with CREATE TABLE IF NOT EXISTS through
-- store_schema_part(s, "sae", 2, ...). An SAE's integer id (sae_registry.id) is what
-- `analyze --sae` and `report --sae` accept besides the directory.
-- Metric definitions: sae/metrics.h and docs/sae.md. Training-log values are measured on the
-- training batch in the trainer's normalised space (inputs scaled to mean norm sqrt(d_in));
-- eval_* columns on held-out tokens in raw units.

CREATE TABLE IF NOT EXISTS sae_registry (
    id            INTEGER PRIMARY KEY,
    dir           TEXT NOT NULL UNIQUE,  -- output directory (SAELens layout), as given
    architecture  TEXT NOT NULL,         -- relu, topk, batchtopk, jumprelu, gated, matryoshka; a
                                         -- transcoder's activation (config: transcoder, hook_out)
    d_in          INTEGER NOT NULL,
    d_sae         INTEGER NOT NULL,
    k             INTEGER,               -- topk/batchtopk; NULL otherwise
    hook_name     TEXT NOT NULL,
    model_name    TEXT,
    hook_id       INTEGER,               -- store hook the SAE was trained on (NULL: other source)
    tokens        INTEGER NOT NULL,      -- training tokens seen
    config        TEXT NOT NULL,         -- training config JSON (as in cfg.json "training")
    eval_tokens   INTEGER,
    eval_mse      REAL,
    eval_ev       REAL,                  -- explained variance
    eval_cos      REAL,
    eval_l2_ratio REAL,
    eval_l0       REAL,
    eval_dead     REAL,                  -- dead fraction
    eval_dense    REAL,                  -- fraction with density > 0.1
    seconds       REAL,                  -- training wall time (every call of a resumed run)
    created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    weights       TEXT                   -- hex FNV-1a 64 of sae_weights.safetensors when
                                         -- registered (NULL: registered before version 2)
);

CREATE TABLE IF NOT EXISTS sae_training_log (
    sae_id     INTEGER NOT NULL REFERENCES sae_registry(id) ON DELETE CASCADE,
    step       INTEGER NOT NULL,
    tokens     INTEGER NOT NULL,
    mse        REAL,   -- per element, normalised units
    ev         REAL,   -- explained variance of the batch
    l0         REAL,
    dead_frac  REAL,
    lr         REAL,
    loss       REAL,
    PRIMARY KEY (sae_id, step)
);
