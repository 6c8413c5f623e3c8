-- saelite store schema, version 1 (PRAGMA user_version = 1, PRAGMA application_id = 0x5341454c).
-- Created on first open; every open checks the version (newer is refused, see store/store.h).
-- Conventions: ids are INTEGER PRIMARY KEY; byte offsets are into documents.text (UTF-8 bytes,
-- half-open [start, end)); token ids are GPT-2 BPE ids; blobs are little-endian.

-- One row per model a database was written with (extraction refuses a second, different model).
CREATE TABLE models (
    id        INTEGER PRIMARY KEY,
    name      TEXT NOT NULL,          -- directory base name, or 'import' for imported arrays
    path      TEXT NOT NULL,          -- model directory (or .npy file) as given
    config    TEXT NOT NULL,          -- config.json contents ('{}' for imports)
    checksum  TEXT NOT NULL,          -- hex FNV-1a 64 of config.json + model.safetensors ('' for imports)
    created   TEXT NOT NULL DEFAULT (datetime('now'))
);

-- Documents of a corpus, in corpus order (ordinal counts from 0 per source).
CREATE TABLE documents (
    id        INTEGER PRIMARY KEY,
    source    TEXT NOT NULL,          -- corpus file as given
    ordinal   INTEGER NOT NULL,       -- index of the document in the file
    name      TEXT NOT NULL,          -- the document's id ('id' field, Brown file id, or 'doc<N>')
    genre     TEXT,                   -- Brown category or JSONL 'genre'; NULL when unknown
    text      TEXT,                   -- the document text (NULL for imports)
    checksum  TEXT NOT NULL,          -- hex FNV-1a 64 of the text, to detect a changed corpus
    UNIQUE (source, ordinal)
);

-- Windows of tokens fed to the model. tokens: T int32 little-endian token ids, including the
-- <|endoftext|> prepended when bos = 1 (then start counts document tokens without it).
CREATE TABLE sequences (
    id          INTEGER PRIMARY KEY,
    document_id INTEGER NOT NULL REFERENCES documents(id),
    start       INTEGER NOT NULL,     -- index of the window's first document token
    n_tokens    INTEGER NOT NULL,     -- T, including the BOS token
    bos         INTEGER NOT NULL,     -- 1 when token 0 is a prepended <|endoftext|>
    tokens      BLOB NOT NULL,
    UNIQUE (document_id, start, n_tokens, bos)
);

-- One row per token of every sequence, for SQL queries (e.g. find all ' bank' tokens).
CREATE TABLE tokens (
    sequence_id INTEGER NOT NULL REFERENCES sequences(id),
    position    INTEGER NOT NULL,     -- 0..T-1 within the sequence (0 is BOS when bos = 1)
    token_id    INTEGER NOT NULL,
    text        TEXT,                 -- the token's bytes as UTF-8 (invalid bytes as U+FFFD)
    byte_start  INTEGER,              -- span in documents.text; NULL for BOS and imports
    byte_end    INTEGER,
    pos_tag     TEXT,                 -- Brown POS tag of the word the token starts in, or NULL
    PRIMARY KEY (sequence_id, position)
) WITHOUT ROWID;

-- Hook points with stored activations. dtype: 'f32', 'f16' or 'bf16'.
CREATE TABLE hooks (
    id        INTEGER PRIMARY KEY,
    model_id  INTEGER NOT NULL REFERENCES models(id),
    name      TEXT NOT NULL,          -- TransformerLens name, e.g. blocks.0.mlp.hook_post
    layer     INTEGER NOT NULL,       -- block index, -1 outside blocks or unknown
    width     INTEGER NOT NULL,       -- values per token
    dtype     TEXT NOT NULL CHECK (dtype IN ('f32', 'f16', 'bf16')),
    seq_len   INTEGER NOT NULL,       -- the window length (--ctx) sequences were cut to
    UNIQUE (model_id, name)
);

-- Dense activations: one blob per (hook, sequence) of n_tokens x width values in the hook's
-- dtype, little-endian, row-major (token-major).
CREATE TABLE activations (
    id          INTEGER PRIMARY KEY,
    hook_id     INTEGER NOT NULL REFERENCES hooks(id),
    sequence_id INTEGER NOT NULL REFERENCES sequences(id),
    n_tokens    INTEGER NOT NULL,
    data        BLOB NOT NULL,
    UNIQUE (hook_id, sequence_id)
);

-- Extraction runs: the parameters of each `saelite extract`, so a rerun resumes the same work.
CREATE TABLE runs (
    id        INTEGER PRIMARY KEY,
    kind      TEXT NOT NULL,          -- 'extract' or 'import'
    params    TEXT NOT NULL,          -- the parameters as JSON
    status    TEXT NOT NULL,          -- 'running' or 'done'
    started   TEXT NOT NULL DEFAULT (datetime('now')),
    finished  TEXT
);

-- Versions of extension schema parts (SAE registry, analysis tables) kept by other modules.
CREATE TABLE schema_parts (
    name      TEXT PRIMARY KEY,
    version   INTEGER NOT NULL
);
