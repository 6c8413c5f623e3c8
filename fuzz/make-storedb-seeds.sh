#!/usr/bin/env bash
# make-storedb-seeds.sh - the seed databases of the storedb fuzz target (fuzz/fuzz_storedb.c):
# small saelite stores (512-byte pages, rollback journal) made from the schema files with the
# sqlite3 CLI, and the hostile regressions of issue 20 (fuzz/regress/storedb/).
# Usage: fuzz/make-storedb-seeds.sh   (from the repository root)
set -eu
C=fuzz/corpus/storedb R=fuzz/regress/storedb
mkdir -p "$C" "$R"
rows="INSERT INTO models VALUES (1, 'm', 'm', '{}', 'abc', '2026-01-01');
INSERT INTO documents VALUES (1, 'c.txt', 0, 'doc0', NULL, 'the cat', 'x');
INSERT INTO sequences VALUES (1, 1, 0, 3, 1, x'50c400000100000002000000');
INSERT INTO tokens VALUES (1, 0, 50256, '<|endoftext|>', NULL, NULL, NULL), (1, 1, 1, 'the', 0, 3, 'AT'),
  (1, 2, 2, ' cat', 3, 7, 'NN');
INSERT INTO hooks VALUES (1, 1, 'blocks.0.hook_resid_post', 0, 2, 'f32', 3);
INSERT INTO activations VALUES (1, 1, 1, 3, x'0000803f000000400000404000008040000000000000803f');
INSERT INTO runs VALUES (1, 'extract', '{}', 'done', '2026-01-01', NULL);"
mk() { # mk FILE SQL...: a fresh store with the core schema, then the SQL
    local f=$1; shift
    rm -f "$f"
    { echo "PRAGMA page_size = 512; PRAGMA application_id = 1396786508; PRAGMA user_version = 1;"
      cat store/schema.sql; printf '%s\n' "$@"; } | sqlite3 "$f"
}
mk "$C/empty-store.db"
mk "$C/one-sequence.db" "$rows"
mk "$C/analysis.db" "$rows" "$(cat store/schema_analysis.sql)" \
    "INSERT INTO schema_parts VALUES ('analysis', 2); INSERT INTO ana_vocab VALUES (1, CAST('the' AS BLOB));"
mk "$C/sae.db" "$rows" "$(cat store/schema_sae.sql)" "INSERT INTO schema_parts VALUES ('sae', 1);"
# issue 20: a view named tokens that calls context() recursed until the stack overflowed
mk "$R/tokens-view-calls-context.db" "$rows" "DROP TABLE tokens;
CREATE VIEW tokens(sequence_id, position, token_id, text) AS SELECT 1, 1, 1, context(1, 1);"
mk "$R/ana-vocab-view-calls-tok-text.db" "$rows" "$(cat store/schema_analysis.sql)" \
    "INSERT INTO schema_parts VALUES ('analysis', 2); DROP TABLE ana_vocab;
CREATE VIEW ana_vocab(token, text) AS SELECT 1, tok_text(1);"
mk "$R/tokens-dropped.db" "$rows" "DROP TABLE tokens;"
mk "$R/trigger.db" "$rows" "CREATE TRIGGER t AFTER INSERT ON tokens BEGIN SELECT context(1, 1); END;"
mk "$R/hook-width-negative.db" "$rows" "UPDATE hooks SET width = -3;"
mk "$R/tokens-at-int64-extremes.db" "$rows" "INSERT INTO tokens VALUES
  (1, 9223372036854775807, 1, 'max', NULL, NULL, NULL), (1, -9223372036854775808, 1, 'min', NULL, NULL, NULL);"
ls -l "$C" "$R"
