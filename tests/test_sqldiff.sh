#!/usr/bin/env bash
# test_sqldiff.sh - differential check of the SQL functions (issue 20): every call below runs
# through `saelite query` and through `sqlite3 DB ".load ./saelite"` (the extension build of the
# same store/sqlfuncs.c) and must give the same value, or the same error message, in both. The
# databases include hostile ones (a view named tokens calling context(), a dropped or reshaped
# tokens table, a virtual table, a view ana_vocab calling tok_text()), where both must refuse in
# the same words. Values are compared as hex(quote(x)), so neither side's text rendering matters.
# Usage: tests/test_sqldiff.sh (from the repository root; SAELITE_BIN overrides ./saelite).
set -u
BIN=${SAELITE_BIN:-./saelite}
pass=0; fail=0
if [ ! -f ./saelite.so ] || ! command -v sqlite3 > /dev/null; then
    echo "SKIP: needs ./saelite.so (make all) and the sqlite3 CLI (tools/deps.sh)"
    echo "test_sqldiff: 0 passed, 0 failed, 1 skipped"; exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/saelite_sqldiff.XXXXXX")
trap 'rm -rf "$T"' EXIT

# The reference database: the store's own schema and tokens as extract writes them, plus ana_vocab.
{
cat store/schema.sql
cat <<'SQL'
INSERT INTO tokens VALUES (7,0,464,'The',0,3,'AT'),(7,1,3290,' dog',3,7,'NN'),
  (7,2,4966,' ran',7,11,'VBD'),(7,3,13,'.',11,12,'.'),(8,0,13,NULL,NULL,NULL,NULL);
SQL
cat store/schema_analysis.sql
echo "INSERT INTO ana_vocab VALUES (3290, CAST(' dog' AS BLOB)), (4966, CAST(' ran' AS BLOB)), (5, x'ff');"
} | sqlite3 "$T/n.db" || { echo "cannot build the test database"; echo "test_sqldiff: 0 passed, 1 failed"; exit 1; }
# hostile variants (sqlite3 without the extension: views are not checked when created)
variant() { cp "$T/n.db" "$T/$1.db"; sqlite3 "$T/$1.db" "$2" || { echo "FAIL: fixture $1"; fail=$((fail + 1)); }; }
variant view "DROP TABLE tokens; CREATE VIEW tokens(sequence_id, position, token_id, text) AS
    SELECT 7, 1, 1, context(7, 1); CREATE VIEW v_vec AS SELECT vec_len(x'00000000') AS n"
variant drop "DROP TABLE tokens; DROP TABLE ana_vocab"
variant cols "ALTER TABLE tokens RENAME COLUMN token_id TO tid"
variant type "DROP TABLE tokens; CREATE TABLE tokens (sequence_id INTEGER, position TEXT, token_id INTEGER, text TEXT)"
variant vtab "DROP TABLE tokens; CREATE VIRTUAL TABLE tokens USING fts5(sequence_id, position, token_id, text)"
variant vocab "DROP TABLE ana_vocab; CREATE VIEW ana_vocab(token, text) AS SELECT 1, tok_text(1)"

# side OUTPUT_FILE DB SQL: "ok <hex>..." or "error <message>" (the SQLite message, no prefixes).
via_saelite() {
    local out rc
    out=$("$BIN" query --db "$1" --csv "$2" 2> "$T/err"); rc=$?
    if [ $rc -eq 0 ]; then printf 'ok %s\n' "$(tail -n +2 <<< "$out" | tr '\n' ' ')"
    else printf 'error %s\n' "$(head -n 1 "$T/err" | sed -E 's/^saelite query: [^:]*: (SQL error: )?//')"; fi
}
via_sqlite3() {
    local out rc
    out=$(sqlite3 -csv "$1" ".load ./saelite" "$2" 2> "$T/err"); rc=$?
    if [ $rc -eq 0 ] && ! [ -s "$T/err" ]; then printf 'ok %s\n' "$(tr '\n' ' ' <<< "$out")"
    else printf 'error %s\n' "$(head -n 1 "$T/err" | sed -E 's/^(Error|Runtime error|Parse error): ((stepping|in prepare), )?(near line [0-9]+: )?//; s/ \([0-9]+\)$//')"; fi
}
# same DB EXPECT SQL: both sides agree, and the result matches EXPECT (a regex on "ok ..."/"error ...").
same() {
    local db=$1 want=$2 sql=$3 a b
    a=$(via_saelite "$T/$db.db" "$sql"); b=$(via_sqlite3 "$T/$db.db" "$sql")
    if [ "$a" = "$b" ] && [[ $a =~ $want ]]; then pass=$((pass + 1))
    else
        fail=$((fail + 1)); echo "FAIL [$db] $sql"
        echo "     saelite query: $a"; echo "     sqlite3 .load: $b"; echo "     want: /$want/"
    fi
}
# call DB EXPECT EXPR: same, on SELECT hex(quote(EXPR)) (EXPECT "ok" or an error regex)
call() { same "$1" "$2" "SELECT hex(quote($3))"; }

MAX=9223372036854775807 MIN=-9223372036854775808
OK=^ok
for e in "tok_text(3290)" "tok_text(464)" "tok_text(5)" "tok_text(NULL)" "tok_text($MIN)" "tok_text($MAX)" \
         "tok_text('3290')" "tok_text(3290.7)" "tok_text(x'00')" "tok_id(' dog')" "tok_id('The')" \
         "tok_id(' nothing')" "tok_id(NULL)" "tok_id(42)" "tok_id(x'ff')" \
         "context(7, 1)" "context(7, 3, 1, 0)" "context(7, 99)" "context(99, 0)" "context(8, 0)" \
         "context(7, $MAX)" "context(7, $MIN)" "context(7, $MAX, 100000, 100000)" \
         "context(7, $MIN, 100000, 100000)" "context($MIN, $MIN, 100000, 100000)" \
         "context($MAX, $MAX, 100000, 100000)" "context(7, 1, 100000, 100000)" "context(7, 1, 0, 0)" \
         "context(NULL, 1)" "context(7, NULL)" "context(7, 1, NULL)" "context('7', '1')" "context(7.0, '1.0')" \
         "context(7, 1e300)" "context(7, -1e300, 5, 5)" \
         "vec_dot(x'0000803f', x'00004040')" "vec_dot(NULL, x'00000000')" "vec_dot(zeroblob(4000), zeroblob(4000))" \
         "vec_cos(x'0000803f0000803f', x'0000803f00000000')" "vec_cos(x'0000803f', x'00000000')" \
         "vec_norm(x'0000803f0000803f')" "vec_norm(x'')" "vec_norm(NULL)" "vec_len(x'0000803f')" \
         "vec_len(x'003c00c0', 'f16')" "vec_len(x'003c00c0', 'bf16')" "vec_len(NULL, 'f64')" \
         "vec_at(x'0000803f', 0)" "vec_at(x'0000803f', 1)" "vec_at(x'0000803f', -1)" \
         "vec_at(x'0000803f', $MAX)" "vec_at(x'0000803f', $MIN)" "vec_at(x'0000803f', $MAX, 'f16')" \
         "vec_at(x'003c00c0', 1, 'f16')" "vec_at(x'803f', 0, 'bf16')" "vec_at(x'0000c07f', 0)" \
         "vec_at(x'0000807f', 0)" "vec_at(x'0000803f', 1e300)" "vec_at(x'0000803f', '0')" \
         "vec_norm(x'803f0040', 'bf16')" "vec_dot(x'803f0040', x'0040803f', 'bf16')" \
         "vec_cos(x'003c00c0', x'003c0000', 'f16')" "vec_norm(x'803f', NULL)" \
         "vec_slice(x'803f00404040', 1, 2, 'bf16')" "vec_slice(x'0000803f', 0, 1)" \
         "vec_slice(x'0000803f', 1, 0)" "vec_slice(x'0000803f', 1, 1)" "vec_slice(x'0000803f', $MAX, $MAX)" \
         "vec_slice(x'0000803f', -1, 1)" "vec_slice(x'803f', 0, 1, NULL)"; do
    call n "$OK" "$e"
done
# errors: the same message from both
call n "^error context\(\): before/after must be in 0\.\.100000$" "context(7, 1, 100001)"
call n "^error context\(\): before/after must be in 0\.\.100000$" "context(7, 1, -1)"
call n "^error context\(\): before/after must be in 0\.\.100000$" "context(7, 1, 0, $MIN)"
call n "^error context\(\): before/after must be in 0\.\.100000$" "context(7, 1, $MAX, $MAX)"
call n "^error wrong number of arguments to function context\(\)$" "context(7)"
call n "^error wrong number of arguments to function vec_at\(\)$" "vec_at(x'00')"
call n "^error vec_dot\(\): a BLOB of 1 bytes is no float32 vector$" "vec_dot(x'00', x'0000')"
call n "^error vec_cos\(\): the vectors differ in length \(1 and 2\)$" "vec_cos(x'00000000', x'0000000000000000')"
call n "^error vec_dot\(\) takes two float32 BLOBs$" "vec_dot('a', 'b')"
# integer arguments: text that is not a number, fractions and blobs were converted ('abc' read as
# 0, 1.9 as 1, an audit)
call n "^error context\(\): argument 1 must be an integer$" "context(7.9, 1)"
call n "^error context\(\): argument 2 must be an integer$" "context(7, 'abc')"
call n "^error context\(\): argument 3 must be an integer$" "context(7, 1, 'x')"
call n "^error vec_at\(\): argument 2 must be an integer$" "vec_at(x'0000803f00000040', '1abc')"
call n "^error vec_at\(\): argument 2 must be an integer$" "vec_at(x'0000803f00000040', 1.9)"
call n "^error vec_at\(\): argument 2 must be an integer$" "vec_at(x'0000803f00000040', x'01')"
call n "^error vec_norm\(\) takes a float32 BLOB$" "vec_norm(x'000000')"
call n "^error vec_norm\(\) takes a float32 BLOB$" "vec_norm(1)"
call n "^error vec_norm\(\) takes a bfloat16 BLOB$" "vec_norm(x'000000', 'bf16')"
call n "^error vec_dot\(\): dtype must be" "vec_dot(x'00000000', x'00000000', 'f64')"
call n "^error vec_slice\(\): argument 3 \(count\) must be >= 0$" "vec_slice(x'0000803f', 0, -1)"
call n "^error vec_slice\(\): argument 2 must be an integer$" "vec_slice(x'0000803f', 0.5, 1)"
call n "^error vec_slice\(\): a BLOB of 3 bytes is no bfloat16 vector$" "vec_slice(x'000000', 0, 1, 'bf16')"
call n "^error vec_len\(\): dtype must be" "vec_len(x'00', 'f64')"
call n "^ok 4E554C4C $" "vec_at(x'803f', 0, NULL)"
call n "^ok 4E554C4C $" "vec_len(x'00', NULL)"
call n "^error vec_len\(\) takes a BLOB$" "vec_len(3)"
call n "^error vec_at\(\) takes a BLOB$" "vec_at('abc', 0)"
# hostile databases: the schema cannot call the functions, and the functions refuse foreign tables
same view "^error unsafe use of context\(\)$" "SELECT count(*) FROM tokens"
# the vector functions are pure (INNOCUOUS): a user's view over them keeps working
same view "^ok 1 $" "SELECT n FROM v_vec"
call view "^error context\(\): not saelite's tokens table: 'tokens' is a view, not a table$" "context(7, 1)"
call view "^error tok_text\(\): not saelite's tokens table: 'tokens' is a view" "tok_text(464)"
call view "^error tok_id\(\): not saelite's tokens table" "tok_id('The')"
call view "$OK" "vec_len(x'00000000')"
call drop "^error context\(\): the database has no tokens table$" "context(7, 1)"
call drop "^ok 4E554C4C $" "tok_text(3290)"
call cols "^error tok_id\(\): not saelite's tokens table: table 'tokens' has no column 'token_id'$" "tok_id(' dog')"
call cols "^error context\(\): not saelite's tokens table: table 'tokens' has no column 'token_id'$" "context(7, 1)"
call type "^error context\(\): not saelite's tokens table: column tokens.position is declared 'TEXT', not 'INTEGER'$" "context(7, 1)"
call vtab "^error tok_text\(\): not saelite's tokens table: 'tokens' is a virtual table$" "tok_text(1)"
call vocab "^error tok_text\(\): not saelite's ana_vocab table: 'ana_vocab' is a view, not a table$" "tok_text(3290)"
same vocab "^error unsafe use of tok_text\(\)$" "SELECT * FROM ana_vocab"
call vocab "$OK" "context(7, 1)"

# The extension alone: what `saelite query` cannot do (it is read-only: no temp objects, no
# writes), a session of the sqlite3 shell can. A temp table named tokens does not replace the
# database's; a trigger calling context() cannot run it.
out=$(sqlite3 "$T/n.db" ".load ./saelite" "CREATE TEMP TABLE tokens (sequence_id INTEGER, position INTEGER, token_id INTEGER, text TEXT); INSERT INTO temp.tokens VALUES (7, 1, 1, 'evil'); SELECT context(7, 1);" 2>&1)
if [ "$out" = "The« dog» ran." ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL temp tokens shadowing main: $out"; fi
cp "$T/n.db" "$T/trig.db"
out=$(sqlite3 "$T/trig.db" ".load ./saelite" "CREATE TRIGGER t AFTER INSERT ON tokens BEGIN SELECT context(7, 1); END; INSERT INTO tokens VALUES (9, 0, 1, 'x', 0, 1, NULL);" 2>&1)
if [[ $out == *"unsafe use of context()"* ]]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL trigger calling context(): $out"; fi

echo "test_sqldiff: $pass passed, $fail failed"
[ $fail -eq 0 ]
