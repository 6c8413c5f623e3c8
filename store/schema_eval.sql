-- schema_eval.sql - results of `saelite eval` (schema part "eval", version 1). Created with
-- CREATE ... IF NOT EXISTS through store_schema_part(s, "eval", 1, ...). Every row hangs off one
-- eval_runs row: one per (SAE, suite); a rerun replaces the run and its rows. SAEs are keyed by
-- sae_registry.id (eval registers an SAE the database does not know). Definitions of every
-- number: docs/eval.md.

CREATE TABLE IF NOT EXISTS eval_runs (
    id         INTEGER PRIMARY KEY,
    sae_id     INTEGER NOT NULL REFERENCES sae_registry(id),
    suite      TEXT NOT NULL,          -- 'sparse_probing', 'absorption', 'scr' or 'tpp'
    hook_name  TEXT NOT NULL,
    config     TEXT NOT NULL,          -- the run's parameters as JSON (seed, sizes, C, thresholds)
    n_seqs     INTEGER NOT NULL,       -- sequences read
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    UNIQUE (sae_id, suite)
);

-- Sparse probing: one row per (task, dictionary, k). kind 'pos' (one token per row) or 'genre'
-- (one sequence per row, mean-pooled, BOS masked). dict: 'sae', 'random_sae' (same shape, random
-- weights), 'neurons' (the hook's own units) with k the number of selected inputs, 'full'
-- (every hook unit, k = width) or 'sae_full' (every latent, k = d_sae).
CREATE TABLE IF NOT EXISTS eval_probe (
    run_id     INTEGER NOT NULL REFERENCES eval_runs(id),
    task       TEXT NOT NULL,          -- e.g. 'pos:noun', 'genre:news'
    kind       TEXT NOT NULL,
    dict       TEXT NOT NULL,
    k          INTEGER NOT NULL,
    n_train    INTEGER NOT NULL,       -- balanced: half positives
    n_test     INTEGER NOT NULL,
    train_acc  REAL,
    test_acc   REAL,
    features   TEXT,                   -- selected input ids, JSON array (NULL for 'full')
    PRIMARY KEY (run_id, task, dict, k)
);

-- Absorption: one row per parent (a coarse POS class).
CREATE TABLE IF NOT EXISTS eval_absorption (
    run_id         INTEGER NOT NULL REFERENCES eval_runs(id),
    parent         TEXT NOT NULL,      -- e.g. 'noun'
    gt_f1          REAL,               -- test F1 of the ground-truth probe on the hook activations
    included       INTEGER NOT NULL,   -- 1 when gt_f1 > 0.6 (SAEBench's count; every parent
                                       -- counts in the means since 2026-12-05, not only these)
    split_features TEXT NOT NULL,      -- the k-sparse probe's latents, JSON array
    n_split        INTEGER NOT NULL,
    split_f1       REAL,               -- test F1 of the k-sparse probe on them
    n_probe_tp     INTEGER NOT NULL,   -- test positives the ground-truth probe finds
    n_false_neg    INTEGER NOT NULL,   -- ... that the k-sparse probe misses
    mean_frac      REAL,               -- absorption fraction summed over those / n_probe_tp
    full_rate      REAL,               -- full absorptions / n_probe_tp
    PRIMARY KEY (run_id, parent)
);

-- SCR and TPP: one row per (task, N ablated latents). SCR tasks 'scr:ablate_tense' (dir 1: the
-- tense latents ablated, the biased probe read on the genre-group test set) and
-- 'scr:ablate_genre' (dir 2); clean_acc = the probe trained on the evaluated label alone,
-- orig_acc / ablated_acc = the biased probe before / after, score = (ablated - orig) /
-- (clean - orig), NULL unless clean - orig > 1 / n_test (docs/eval.md). TPP tasks 'tpp:pos:noun', 'tpp:genre:news', ...: clean_acc / ablated_acc = the
-- class's own probe before / after ablating its latents, other_diff = the mean accuracy drop of
-- the other classes' probes, score = (clean - ablated) - other_diff.
CREATE TABLE IF NOT EXISTS eval_ablation (
    run_id      INTEGER NOT NULL REFERENCES eval_runs(id),
    task        TEXT NOT NULL,
    n           INTEGER NOT NULL,      -- latents ablated (fewer when fewer have a non-zero effect)
    clean_acc   REAL,
    orig_acc    REAL,                  -- SCR only
    ablated_acc REAL,
    other_diff  REAL,                  -- TPP only
    score       REAL,
    PRIMARY KEY (run_id, task, n)
);

-- Headline numbers per run (the names: docs/eval.md).
CREATE TABLE IF NOT EXISTS eval_metrics (
    run_id INTEGER NOT NULL REFERENCES eval_runs(id),
    metric TEXT NOT NULL,
    value  REAL,
    PRIMARY KEY (run_id, metric)
);

-- The headline numbers of every SAE still in the registry.
CREATE VIEW IF NOT EXISTS eval_summary AS
    SELECT r.sae_id AS sae_id, r.suite AS suite, m.metric AS metric, m.value AS value
    FROM eval_metrics m JOIN eval_runs r ON r.id = m.run_id
    JOIN sae_registry g ON g.id = r.sae_id;
