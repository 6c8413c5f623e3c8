-- schema_sweep.sql - architecture sweeps (schema part "sweep", version 1), written by
-- `saelite sweep` (sweep/sweep.h, docs/sae.md "The sweep"). Created with CREATE TABLE IF NOT
-- EXISTS through store_schema_part(s, "sweep", 1, ...). One row per finished run (trained and
-- evaluated); a resumed sweep skips the runs that have their row. ev/mse/l0/dead_frac are
-- sae-train's held-out evaluation (raw units; transcoders: against the target hook); the
-- ce_*/kl_* columns are analyze's downstream pass on held-out sequences with the SAE spliced in at
-- its hook (a transcoder in place of the MLP). Metric definitions: sae/metrics.h, analysis/ana.h.
-- Other evaluations join on sae_id (sae_registry.id).

CREATE TABLE IF NOT EXISTS sweep_runs (
    id            INTEGER PRIMARY KEY,
    sweep         TEXT NOT NULL,         -- the sweep's output directory, as given
    name          TEXT NOT NULL,         -- run name, e.g. topk_k32 (its directory under sweep)
    family        TEXT NOT NULL,         -- frontier series: relu, topk, ..., transcoder, sae@HOOK
    architecture  TEXT NOT NULL,         -- training architecture (transcoders: the activation)
    hook_name     TEXT NOT NULL,         -- input hook
    hook_out      TEXT,                  -- transcoders: target hook; NULL otherwise
    param         TEXT NOT NULL,         -- the sparsity setting: 'k' or 'l1'
    value         REAL NOT NULL,         -- its value
    d_in          INTEGER NOT NULL,
    d_out         INTEGER,               -- transcoders; NULL otherwise
    d_sae         INTEGER NOT NULL,
    tokens        INTEGER NOT NULL,      -- training tokens
    seed          INTEGER NOT NULL,
    config        TEXT NOT NULL,         -- the run's settings (JSON); a resumed sweep must match
    dir           TEXT NOT NULL,         -- the SAE directory
    sae_id        INTEGER,               -- sae_registry.id
    dict_id       INTEGER,               -- ana_dicts.id of the downstream evaluation (a later
                                         -- analyze of the SAE at that hook and split keeps the id)
    eval_tokens   INTEGER,
    ev            REAL,                  -- explained variance, held out
    mse           REAL,
    l0            REAL,                  -- mean active latents per token, held out
    dead_frac     REAL,                  -- latents never active on the held-out tokens
    ce_tokens     INTEGER,               -- predicted tokens of the downstream pass
    ce_clean      REAL,
    ce_sae        REAL,
    ce_zero       REAL,
    ce_score      REAL,                  -- (ce_zero - ce_sae) / (ce_zero - ce_clean)
    kl_sae        REAL,
    kl_score      REAL,                  -- 1 - kl_sae / kl_zero
    train_seconds REAL,
    eval_seconds  REAL,
    created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    UNIQUE (sweep, name)
);
