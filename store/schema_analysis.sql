-- schema_analysis.sql - tables written by `saelite analyze` (schema part "analysis", version 4;
-- version 2 added the two convenience views at the end and the name column to ana_dicts_key;
-- version 3 added ana_effects and ana_effect_logits, written by `analyze --effects`; version 4
-- added ana_dicts.weights, which store_ana_init adds to an older table).
--
-- Created with CREATE TABLE IF NOT EXISTS through store_schema_part(s, "analysis", 3, ...); an
-- older database is upgraded by running this file again (every statement is idempotent).
-- Every analysis result hangs off one row of ana_dicts: one analysed dictionary (an SAE from the
-- registry, or the identity "neurons" dictionary of a hook) over one split of the stored
-- activations. Re-running analyze for the same (kind, sae_id, name, hook_name, split) replaces that row
-- and everything hanging off it, in one transaction (store_ana_dict_begin deletes the dependent rows
-- itself: foreign keys are not enforced, so the ON DELETE CASCADE clauses only document).
-- Feature indices are 0-based latent indices (for kind 'neurons', the neuron index at the hook).
-- Activation values are float32 values stored as REAL. Token ids are GPT-2 vocabulary ids.
-- Positions are 0-based token positions within a stored sequence (seq_id of the store core).

-- One analysed dictionary.
CREATE TABLE IF NOT EXISTS ana_dicts (
    id          INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('sae', 'neurons')),
    sae_id      INTEGER,            -- reserved, NULL: analyze does not register SAEs; join sae_registry on dir = name
    name        TEXT NOT NULL,      -- the SAE directory as given to analyze, or 'neurons@<hook>'
    hook_name   TEXT NOT NULL,      -- TransformerLens hook name, e.g. 'blocks.6.hook_resid_pre'
    d_in        INTEGER NOT NULL,   -- activation width at the hook
    d_sae       INTEGER NOT NULL,   -- number of features (== d_in for 'neurons')
    split       TEXT NOT NULL,      -- 'val' (default) or 'all': which stored sequences were used;
                                    -- '+bos' appended (--keep-bos) when BOS positions were counted
    n_seqs      INTEGER NOT NULL,   -- sequences analysed
    n_tokens    INTEGER NOT NULL,   -- token positions analysed
    top_n       INTEGER NOT NULL,   -- top activations kept per feature (ana_acts kind 'top')
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    seconds     REAL,               -- wall time analyze took
    weights     TEXT                -- kind 'sae': hex FNV-1a 64 of the SAE's sae_weights.safetensors
                                    -- when analysed (sae_registry.weights' checksum), so report finds
                                    -- the analysis from any directory and refuses it for other
                                    -- weights; NULL for 'neurons' and for analyses before version 4
);
-- (dropped and recreated: version 1 databases had it without name)
DROP INDEX IF EXISTS ana_dicts_key;
CREATE UNIQUE INDEX ana_dicts_key ON ana_dicts(kind, ifnull(sae_id, -1), name, hook_name, split);

-- Scalar metrics of a dictionary, one row per (dict, name). Names (all REAL):
--   mse, explained_variance, cosine, l2_ratio, l0, dead_frac, dense_frac  (sae/metrics.h set)
--   matryoshka_prefix_<m>_ev, _mse, _l0  a Matryoshka SAE's first m latents alone (sae/metrics.h)
--   ce_clean       mean next-token cross-entropy (nats) of the unmodified model
--   ce_sae         the same with the SAE reconstruction spliced in at the hook
--   ce_zero        the same with the hook activations set to zero
--   ce_sae_err     the same with reconstruction + error term spliced (must equal ce_clean)
--   ce_loss_score  (ce_zero - ce_sae) / (ce_zero - ce_clean)
--   kl_sae, kl_zero  mean KL(p_clean || p_patched) per token (nats)
--   kl_score       (kl_zero - kl_sae) / kl_zero
--   geom_max_abs_cos_mean  mean over features of max |cos| to any other decoder direction
--   geom_random_max_abs_cos_mean  the same for random unit vectors of the same count and width
--   geom_threshold, geom_n_over    a cosine threshold and how many features have max |cos| above it
--   geom_random_n_over             the same count for the random directions
--   pos_precision_mean   mean best-tag precision over features with >= 1 tagged top activation
--   pos_n_features       how many features that mean covers
CREATE TABLE IF NOT EXISTS ana_metrics (
    dict_id  INTEGER NOT NULL REFERENCES ana_dicts(id) ON DELETE CASCADE,
    name     TEXT NOT NULL,
    value    REAL,
    PRIMARY KEY (dict_id, name)
) WITHOUT ROWID;

-- Per-feature statistics.
CREATE TABLE IF NOT EXISTS ana_features (
    dict_id      INTEGER NOT NULL REFERENCES ana_dicts(id) ON DELETE CASCADE,
    feature      INTEGER NOT NULL,
    n_active     INTEGER NOT NULL,  -- token positions where the activation is > 0
    density      REAL NOT NULL,     -- n_active / n_tokens of the dict
    mean_act     REAL,              -- mean activation over active positions (NULL if never active)
    max_act      REAL,              -- maximum activation (NULL if never active)
    nearest      INTEGER,           -- other feature with the largest |cos| between decoder rows
    nearest_cos  REAL,              -- that (signed) cosine
    best_tag     TEXT,              -- most frequent POS tag over the top activations (NULL: untagged)
    best_tag_precision REAL,        -- share of tagged top activations carrying best_tag
    PRIMARY KEY (dict_id, feature)
) WITHOUT ROWID;

-- Activation histogram per feature over its active (> 0) values, log-spaced bins shared by all
-- features of a dict: bin b covers [lo, hi) with hi/lo constant; values below the first edge
-- count in bin 0, values at or above the last edge in the last bin. Empty bins are not stored.
CREATE TABLE IF NOT EXISTS ana_hist (
    dict_id  INTEGER NOT NULL REFERENCES ana_dicts(id) ON DELETE CASCADE,
    feature  INTEGER NOT NULL,
    bin      INTEGER NOT NULL,
    lo       REAL NOT NULL,
    hi       REAL NOT NULL,
    count    INTEGER NOT NULL,
    PRIMARY KEY (dict_id, feature, bin)
) WITHOUT ROWID;

-- Stored sparse activations: the top-N per feature (kind 'top', rank 0 = largest), samples from
-- activation quantile intervals (kind 'quantile', interval 0 = lowest quantile band, rank within
-- the band), and with --all-acts every non-zero (kind 'all'). token is the token id at (seq_id,
-- pos): "which features fire on this word" needs no join.
CREATE TABLE IF NOT EXISTS ana_acts (
    dict_id  INTEGER NOT NULL REFERENCES ana_dicts(id) ON DELETE CASCADE,
    feature  INTEGER NOT NULL,
    kind     TEXT NOT NULL CHECK (kind IN ('top', 'quantile', 'all')),
    interval INTEGER,               -- quantile band for kind 'quantile', else NULL
    rank     INTEGER,               -- order within (feature, kind, interval); NULL for 'all'
    seq_id   INTEGER NOT NULL,
    pos      INTEGER NOT NULL,
    token    INTEGER NOT NULL,
    value    REAL NOT NULL
);
-- The top-activations query (WHERE dict_id=? AND feature=? ORDER BY value DESC) walks this index.
CREATE INDEX IF NOT EXISTS ana_acts_feature ON ana_acts(dict_id, feature, value DESC);
-- Features firing on a token, or at a position.
CREATE INDEX IF NOT EXISTS ana_acts_token ON ana_acts(token, dict_id);
CREATE INDEX IF NOT EXISTS ana_acts_seq ON ana_acts(seq_id, pos);
-- A feature's top and quantile examples (what serve and report read), without its --all-acts
-- rows: through ana_acts_feature a lookup of kind 'top' walked every non-zero of the feature
-- (serve's index build ran past its 30 s limit on the demo's 2.5M rows, an audit). Partial, so
-- the 'all' rows cost it nothing; SQLite takes it for a query that says kind = 'top', kind =
-- 'quantile' or (kind = 'top' OR kind = 'quantile') (not kind IN (...)). store_ana_init adds it
-- to a database made before it.
CREATE INDEX IF NOT EXISTS ana_acts_kind ON ana_acts(dict_id, feature, kind, rank)
    WHERE kind = 'top' OR kind = 'quantile';

-- Direct-path logit effects of each feature's decoder direction (see docs/analysis.md for the
-- final-LayerNorm approximation): the top positive (sign +1) and most negative (sign -1) tokens.
-- value is in logit units per unit of feature activation, up to the final LayerNorm's 1/sigma.
CREATE TABLE IF NOT EXISTS ana_logits (
    dict_id  INTEGER NOT NULL REFERENCES ana_dicts(id) ON DELETE CASCADE,
    feature  INTEGER NOT NULL,
    sign     INTEGER NOT NULL CHECK (sign IN (1, -1)),
    rank     INTEGER NOT NULL,      -- 0 = strongest
    token    INTEGER NOT NULL,
    value    REAL NOT NULL,
    PRIMARY KEY (dict_id, feature, sign, rank)
) WITHOUT ROWID;

-- Measured causal effects (`analyze --effects`, analysis/effects.h): for each feature, over the
-- contexts (sequence, position) where it fires (at most --effects-ctx of them, in sequence
-- order), the hook row is ablated in the delta form x - f*W_dec[feature] (the SAE error term is
-- kept) and the next-token distribution at that position is compared with the clean one.
-- Features that never fired have no row.
CREATE TABLE IF NOT EXISTS ana_effects (
    dict_id     INTEGER NOT NULL REFERENCES ana_dicts(id) ON DELETE CASCADE,
    feature     INTEGER NOT NULL,
    n_contexts  INTEGER NOT NULL,   -- contexts measured
    mean_act    REAL NOT NULL,      -- mean activation of the feature over them
    mean_kl     REAL NOT NULL,      -- mean KL(p_clean || p_ablated), nats
    mean_dloss  REAL NOT NULL,      -- mean CE_ablated - CE_clean of the actual next token, nats
    rank_corr   REAL,               -- Spearman correlation over the vocabulary between the
                                    -- direct-path logit effects (ana_logits' source) and the
                                    -- measured mean log-probability change (NULL: no direct path)
    PRIMARY KEY (dict_id, feature)
) WITHOUT ROWID;

-- The tokens whose log-probability the feature raises most (sign +1) and lowers most (sign -1),
-- measured: value = mean over its contexts of log p_clean(token) - log p_ablated(token), i.e. what
-- the feature adds (the orientation of ana_logits, so the two tables join on dict_id, feature,
-- sign, token).
CREATE TABLE IF NOT EXISTS ana_effect_logits (
    dict_id  INTEGER NOT NULL REFERENCES ana_dicts(id) ON DELETE CASCADE,
    feature  INTEGER NOT NULL,
    sign     INTEGER NOT NULL CHECK (sign IN (1, -1)),
    rank     INTEGER NOT NULL,      -- 0 = strongest
    token    INTEGER NOT NULL,
    value    REAL NOT NULL,
    PRIMARY KEY (dict_id, feature, sign, rank)
) WITHOUT ROWID;

-- Dictionary geometry: histogram of pairwise angles (degrees, [0, 180]) between decoder
-- directions (source 'decoder') and between as many random unit vectors of the same width
-- (source 'random'); bins of equal width; count = number of unordered pairs.
CREATE TABLE IF NOT EXISTS ana_geometry (
    dict_id  INTEGER NOT NULL REFERENCES ana_dicts(id) ON DELETE CASCADE,
    source   TEXT NOT NULL CHECK (source IN ('decoder', 'random')),
    bin      INTEGER NOT NULL,
    lo_deg   REAL NOT NULL,
    hi_deg   REAL NOT NULL,
    count    INTEGER NOT NULL,
    PRIMARY KEY (dict_id, source, bin)
) WITHOUT ROWID;

-- Decoder directions as float32 little-endian BLOBs of d_in values (for vec_cos/vec_dot in SQL).
CREATE TABLE IF NOT EXISTS ana_decoder (
    dict_id  INTEGER NOT NULL REFERENCES ana_dicts(id) ON DELETE CASCADE,
    feature  INTEGER NOT NULL,
    vec      BLOB NOT NULL,
    PRIMARY KEY (dict_id, feature)
) WITHOUT ROWID;

-- Part-of-speech distribution over a feature's top activations (corpora with tags, e.g. Brown):
-- n = how many of its top-N activations fall on a token tagged tag (simplified tag).
CREATE TABLE IF NOT EXISTS ana_pos (
    dict_id  INTEGER NOT NULL REFERENCES ana_dicts(id) ON DELETE CASCADE,
    feature  INTEGER NOT NULL,
    tag      TEXT NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (dict_id, feature, tag)
) WITHOUT ROWID;

-- Token text for the tok_text() SQL function: raw token bytes as text (invalid UTF-8 kept).
CREATE TABLE IF NOT EXISTS ana_vocab (
    token    INTEGER PRIMARY KEY,
    text     BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS ana_vocab_text ON ana_vocab(text);

-- Convenience views for queries (read-only):
-- every metric with its dictionary, one row per (dictionary, metric); basis is ana_dicts.kind.
CREATE VIEW IF NOT EXISTS sae_metrics_view AS
    SELECT d.id AS dict_id, d.kind AS basis, d.name AS dictionary, d.hook_name, d.split,
           m.name AS metric, m.value
    FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id;
-- per-feature POS alignment (features with at least one tagged top activation).
CREATE VIEW IF NOT EXISTS feature_pos AS
    SELECT d.id AS dict_id, d.kind AS basis, d.name AS dictionary, f.feature, f.best_tag,
           f.best_tag_precision AS best_precision, f.n_active
    FROM ana_features f JOIN ana_dicts d ON d.id = f.dict_id
    WHERE f.best_tag IS NOT NULL;
