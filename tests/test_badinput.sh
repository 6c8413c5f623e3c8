#!/usr/bin/env bash
# test_badinput.sh - bad input must fail cleanly (issue 9), driving the real binary.
#
# Every case runs `saelite ...` in a scratch directory holding good fixtures (a database, a
# model, ...) and checks that the command
#   - exits 1 or 2 (never 0, never a signal or a sanitizer abort),
#   - prints exactly one non-empty line on stderr, matching the case's pattern (the problem named),
#     and no sanitizer report,
#   - leaves every file in the scratch directory as it was: no new (partial) files, unchanged
#     bytes, and databases still pass PRAGMA integrity_check with the same rows (.dump hash).
# Usage: tests/test_badinput.sh   (SAELITE_BIN=path overrides ./saelite; the ASan build uses it)
set -u
ROOT=$(pwd)
BIN=${SAELITE_BIN:-./saelite}
[[ "$BIN" == /* ]] || BIN="$ROOT/$BIN"
W=$(mktemp -d "${TMPDIR:-/tmp}/saelite-badinput.XXXXXX")
trap 'chmod -R u+w "$W" 2>/dev/null; rm -rf "$W" "$W.err"' EXIT
pass=0; fail=0; skip=0
# KNOWN="finding" before a case marks a reported, unfixed bug in another module: the case still
# runs; failing it counts as skipped (XFAIL, printed), passing it prints XPASS (remove the mark).
# EXACT="line" before a case: a usage error, exit 2, and the stderr line exactly this.
KNOWN=""; EXACT=""; LAST=""

# Fingerprint of the scratch directory: path, size and mtime of every file, one `find`. SQLite
# side files are left out except a non-empty DB-wal (uncheckpointed writes); any write to a
# database changes its size/mtime or leaves such a WAL, so an unchanged listing means unchanged
# databases. deep() adds PRAGMA integrity_check and a .dump hash (the rows) of every database:
# run at the start and the end (a database must still pass and hold the same rows).
state() {
    (cd "$W" && find . -type f ! -name '*-shm' ! -name '*-journal' \( ! -name '*-wal' -o -size +0 \) \
        -printf '%p %s %T@\n')  # directory order: stable while nothing changes
}
deep() {
    (cd "$W" && for db in *.db; do
        printf '%s %s %s\n' "$db" "$(sqlite3 "$db" 'PRAGMA integrity_check' 2>&1 | head -n 1)" \
            "$(sqlite3 "$db" .dump 2>&1 | sha256sum | cut -c1-16)"
    done)
}

# bad NAME REGEX CMD [ARGS...]: run `saelite CMD ARGS` in $W and check the contract above.
bad() {
    local name=$1 re=$2; shift 2
    local before after rc lines=0 text l why="" errl
    before=${LAST:-$(state)} # the previous case's final state, when nothing ran in between
    (cd "$W" && exec "$BIN" "$@") > /dev/null 2> "$W.err"
    rc=$?
    mapfile -t errl < "$W.err"  # builtins from here on: the machine is shared, forks are slow
    for l in "${errl[@]}"; do [ -n "$l" ] && lines=$((lines + 1)); done
    printf -v text '%s\n' "${errl[@]}"
    after=$(state); LAST=$after
    shopt -s nocasematch
    if [ $rc -eq 0 ]; then why="exit 0 (should fail)"
    elif [ $rc -ne 1 ] && [ $rc -ne 2 ]; then why="exit $rc (crash or signal?)"
    elif [[ $text =~ Sanitizer|runtime\ error|Segmentation|Aborted ]]; then why="sanitizer report"
    elif [ "$lines" -ne 1 ]; then why="$lines lines on stderr (want one)"
    elif ! [[ $text =~ $re ]]; then why="message does not match /$re/"
    elif [ -n "$EXACT" ] && [ "$text" != "$EXACT"$'\n' ]; then why="message is not exactly: $EXACT"
    elif [ -n "$EXACT" ] && [ $rc -ne 2 ]; then why="exit $rc (a usage error exits 2)"
    elif [ "$before" != "$after" ]; then
        why="files changed: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | head -n 4 | tr '\n' ';')"
    fi
    shopt -u nocasematch
    if [ -n "$KNOWN" ]; then
        if [ -z "$why" ]; then pass=$((pass + 1)); echo "XPASS $name (known finding fixed? drop KNOWN: $KNOWN)"
        else skip=$((skip + 1)); echo "XFAIL $name: $why (known finding: $KNOWN)"; fi
    elif [ -z "$why" ]; then pass=$((pass + 1)); echo "ok   $name"
    else
        fail=$((fail + 1)); echo "FAIL $name: $why"
        printf '     $ saelite %s\n' "$*"; head -n 5 "$W.err" | sed 's/^/     | /'
    fi
    KNOWN=""; EXACT=""
}

has() { "$BIN" help "$1" > /dev/null 2>&1; } # a command exists on this build

# ---- fixtures (made with saelite itself; no Python needed) ------------------------------------
setup() { # run a fixture command; a failure here fails the whole script
    if ! (cd "$W" && "$BIN" "$@") > /dev/null 2> "$W.err"; then
        echo "FAIL fixture: saelite $*"; sed 's/^/     | /' "$W.err"; fail=$((fail + 1))
        echo "test_badinput: $pass passed, $fail failed, $skip skipped"; exit 1
    fi
}
H=blocks.0.hook_resid_post
# put_f32 FILE ROW COL VALUE_HEX: overwrite one float32 of a [rows, 8] .npy made by saelite.
put_f32() {
    local size off
    size=$(stat -c %s "$W/$1"); off=$((size - ROWS * 8 * 4 + ($2 * 8 + $3) * 4))
    printf "$4" | dd of="$W/$1" bs=1 seek="$off" conv=notrunc status=none
}
ROWS=16
# ids_npy FILE N: an int32 .npy [N] holding 1..N (token ids), written byte by byte.
ids_npy() {
    local hdr="{'descr': '<i4', 'fortran_order': False, 'shape': ($2,), }" i
    while [ $(( (10 + ${#hdr} + 1) % 64 )) -ne 0 ]; do hdr="$hdr "; done
    { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $(( ${#hdr} + 1 )))\\x00"
      printf '%s\n' "$hdr"; for ((i = 1; i <= $2; i++)); do printf "\\x$(printf %02x $i)\\x00\\x00\\x00"; done
    } > "$W/$1"
}
setup init-model --layers 1 --d-model 8 --heads 2 --ctx 16 --vocab 270 -o model
setup forward --model model --tokens 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 --hook $H --npy acts.npy
setup import --npy acts.npy --db good.db --hook $H --seq-len 4
setup forward --model model --tokens 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 --hook blocks.0.mlp.hook_post --npy wide.npy
ids_npy ids5.npy 5
ids_npy ids16.npy 16
printf 'the cat sat on the mat. the dog sat on the log.\n\nanother doc here with the cat.\n' > "$W/small.txt"
setup bpe-train --vocab 270 small.txt -o tok
setup extract --model model --tokenizer tok --corpus small.txt --hook $H --db ex.db --ctx 8
setup init-model --layers 1 --d-model 16 --heads 1 --d-mlp 4096 --ctx 65537 --vocab 270 -o mbig
setup sae-train --npy acts.npy --out sae8 --arch topk --k 2 --d-sae 16 --tokens 256 --batch 16 --eval-tokens 16 --hook $H
setup init-model --layers 1 --d-model 8 --heads 2 --ctx 1 --vocab 270 -o m_ctx1
setup extract --model m_ctx1 --tokenizer tok --corpus small.txt --hook $H --db one.db --no-bos
setup sae-train --npy wide.npy --out sae32 --arch topk --k 2 --d-sae 16 --tokens 256 --batch 16 --eval-tokens 16 --hook $H
cp "$W/acts.npy" "$W/nan.npy"; put_f32 nan.npy 3 2 '\x00\x00\xc0\x7f'
cp "$W/acts.npy" "$W/inf.npy"; put_f32 inf.npy 9 7 '\x00\x00\x80\xff'
cp "$W/acts.npy" "$W/big.npy"; put_f32 big.npy 3 2 '\x00\xb8\x88\x47'  # 70000: beyond float16
: > "$W/empty.npy"
head -c 100 "$W/acts.npy" > "$W/trunc_header.npy"
head -c 300 "$W/acts.npy" > "$W/trunc_data.npy"
echo "hello" > "$W/text.npy"
echo "not a database" > "$W/text.db"
head -c 5000 "$W/good.db" > "$W/trunc.db"
cp "$W/good.db" "$W/seq0.db"
# nanact.db: the first stored sequence's token 1, dimension 2 made NaN (f32 blobs, as import writes)
cp "$W/good.db" "$W/nanact.db"
python3 -c 'import sqlite3, struct, sys
c = sqlite3.connect(sys.argv[1]); i, d = c.execute("SELECT id, data FROM activations ORDER BY id LIMIT 1").fetchone()
d = bytearray(d); d[(1 * 8 + 2) * 4:(1 * 8 + 3) * 4] = struct.pack("<f", float("nan"))
c.execute("UPDATE activations SET data = ? WHERE id = ?", (bytes(d), i)); c.commit()' "$W/nanact.db"
cp "$W/good.db" "$W/newer.db"; sqlite3 "$W/newer.db" 'PRAGMA user_version = 999'
mkdir -p "$W/m_emptycfg" "$W/m_badjson" "$W/m_trunc" "$W/m_mismatch" "$W/m_nosafet"
cp "$W/model/model.safetensors" "$W/m_emptycfg/"; : > "$W/m_emptycfg/config.json"
cp "$W/model/model.safetensors" "$W/m_badjson/"; echo 'n_layer: 1' > "$W/m_badjson/config.json"
cp "$W/model/config.json" "$W/m_trunc/"; head -c 3000 "$W/model/model.safetensors" > "$W/m_trunc/model.safetensors"
cp "$W/model/model.safetensors" "$W/m_mismatch/"
sed 's/"n_embd": 8/"n_embd": 16/' "$W/model/config.json" > "$W/m_mismatch/config.json"
cp "$W/model/config.json" "$W/m_nosafet/"
mkdir -p "$W/tok_bad" "$W/tok_trunc"
setup init-model --layers 1 --d-model 8 --heads 2 --ctx 16 --vocab 64 -o m_small
echo '{"a": 1' > "$W/tok_bad/encoder.json"; cp "$W/tok/vocab.bpe" "$W/tok_bad/"
head -c 500 "$W/tok/encoder.json" > "$W/tok_trunc/encoder.json"; cp "$W/tok/vocab.bpe" "$W/tok_trunc/"
mkdir -p "$W/brown_bad"; printf 'ca01 news\n' > "$W/brown_bad/cats.txt"; printf '\n\n\tThe/at cat\n' > "$W/brown_bad/ca01"
# Read-only output: permissions do not stop root, /proc does.
RO=/proc/saelite-badinput; [ "$(id -u)" -ne 0 ] && { mkdir -p "$W/ro"; chmod 555 "$W/ro"; RO=ro; }

# Hostile databases (issue 20): copies of ex.db changed the way another program (or damage) could.
hostile() { cp "$W/ex.db" "$W/$1"; sqlite3 "$W/$1" <<< "$2" || { echo "FAIL fixture: $1"; fail=$((fail + 1)); }; }
TOKS='sequence_id INTEGER, position INTEGER, token_id INTEGER, text TEXT, byte_start INTEGER, byte_end INTEGER, pos_tag TEXT'
hostile h_view.db "DROP TABLE tokens; CREATE VIEW tokens(sequence_id, position, token_id, text) AS
  SELECT 1, 1, 1, context(1, 1); CREATE VIEW v_text AS SELECT tok_text(1); CREATE VIEW v_vec AS
  SELECT vec_len(x'00000000') AS n"
hostile h_drop.db "DROP TABLE tokens"
hostile h_cols.db "ALTER TABLE tokens RENAME COLUMN position TO pos"
hostile h_type.db "DROP TABLE tokens; CREATE TABLE tokens (${TOKS/text TEXT/text BLOB})"
hostile h_vtab.db "DROP TABLE tokens; CREATE VIRTUAL TABLE tokens USING fts5(sequence_id, position, token_id, text)"
hostile h_trig.db "CREATE TRIGGER t_ctx AFTER INSERT ON tokens BEGIN SELECT context(1, 1); END"
hostile h_trig2.db "CREATE TRIGGER t_del AFTER INSERT ON activations BEGIN DELETE FROM documents; END"
hostile h_hooks.db "DROP TABLE hooks; CREATE VIEW hooks AS SELECT 1 AS id"
hostile h_width.db "UPDATE hooks SET width = -3"
hostile h_seqlen.db "UPDATE hooks SET seq_len = 1000000, width = 4096" # each below 2^24, a sequence not
hostile h_ntok.db "UPDATE activations SET n_tokens = 9223372036854775807"
hostile h_loop.db "CREATE VIEW forever AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"
ANA_V=$(sed -n 's/^#define STORE_ANA_VERSION //p' "$ROOT/store/store_ana.h")
hostile h_ana.db "$(cat "$ROOT/store/schema_analysis.sql"); INSERT INTO schema_parts VALUES ('analysis', $ANA_V);
  DROP TABLE ana_vocab; CREATE VIEW ana_vocab(token, text) AS SELECT 1, tok_text(1)"
hostile h_ana2.db "$(cat "$ROOT/store/schema_analysis.sql"); INSERT INTO schema_parts VALUES ('analysis', $ANA_V); DROP TABLE ana_acts"
SAE_V=$(sed -n 's/^#define STORE_SAE_VERSION //p' "$ROOT/store/store_sae.h")
hostile h_sae.db "$(cat "$ROOT/store/schema_sae.sql"); INSERT INTO schema_parts VALUES ('sae', $SAE_V);
  ALTER TABLE sae_registry RENAME TO sae_old; CREATE TABLE sae_registry (id INTEGER PRIMARY KEY)"
# the same at part version 1 (a registry from before the weights column): checked as it was made
hostile h_sae1.db "$(cat "$ROOT/store/schema_sae.sql"); INSERT INTO schema_parts VALUES ('sae', 1);
  ALTER TABLE sae_registry RENAME TO sae_old; CREATE TABLE sae_registry (id INTEGER PRIMARY KEY)"
sqlite3 "$W/h_other.db" "CREATE TABLE t (x); INSERT INTO t VALUES (1)"                   # another program's
sqlite3 "$W/h_fake.db" "PRAGMA application_id = 1396786508; PRAGMA user_version = 1; CREATE TABLE models (id)"
cp "$W/ex.db" "$W/h_page.db"   # damaged table pages (models and hooks: their root pages; the
# page size follows the rows' size since 2026-12-06)
PGSZ=$(sqlite3 "$W/ex.db" "PRAGMA page_size")
for off in $(sqlite3 "$W/ex.db" "SELECT (rootpage - 1) * $PGSZ FROM sqlite_master WHERE name IN ('models', 'hooks')"); do
    head -c 64 /dev/zero | tr '\0' '\377' | dd of="$W/h_page.db" bs=1 seek=$off conv=notrunc status=none
done
cp "$W/ex.db" "$W/h_head.db"   # the schema page's b-tree header overwritten
head -c 64 /dev/zero | tr '\0' '\377' | dd of="$W/h_head.db" bs=1 seek=100 conv=notrunc status=none
mkdir -p "$W/adir"

DEEP_BEFORE=$(deep)

# ---- the dispatcher and flag parsing ------------------------------------------------------
bad "unknown command" "unknown command 'frobnicate'" frobnicate
bad "help for an unknown command" "unknown command 'nosuch'" help nosuch
bad "unknown flag" "unknown option '--bogus'" init-model --layers 1 --d-model 8 --heads 2 --bogus -o m2
bad "non-numeric size" "--layers expects an integer, got 'abc'" init-model --layers abc --d-model 8 --heads 2 -o m2

# ---- declared flag checks (cli/args.c): one message format, exit 2 ------------------------
EXACT="saelite extract: --hook is required (see 'saelite extract --help')"
bad "required flag missing" "--hook is required" extract --model model --corpus small.txt --db new.db
EXACT="saelite bpe-train: -o is required (see 'saelite bpe-train --help')"
bad "required flag missing (either spelling)" "-o is required" bpe-train --vocab 300 small.txt
EXACT="saelite extract: --batch must be >= 1, got 0 (see 'saelite extract --help')"
bad "out-of-range value" "--batch must be >= 1" extract --model model --corpus small.txt --hook $H --db new.db --batch 0
EXACT="saelite report: --threads must be in 1..64, got 65 (see 'saelite report --help')"
bad "out-of-range value (two bounds)" "--threads must be in 1..64" report --db ex.db --sae sae8 --out rep --threads 65
EXACT="saelite synth: --corr must be in [0, 1), got 1 (see 'saelite synth --help')"
bad "out-of-range value (open bound)" "--corr must be in" synth --out s.npy --truth t.npy --corr 1
EXACT="saelite superpose: --lr must be > 0, got 0 (see 'saelite superpose --help')"
bad "out-of-range value (exclusive)" "--lr must be > 0" superpose --n 4 --m 2 --lr 0
EXACT="saelite pack: --lr must be in (0, 3], got 0 (see 'saelite pack --help')"
bad "out-of-range value (exclusive, bounded)" "--lr must be in .0, 3." pack --dim 4 --count 8 --lr 0
EXACT="saelite extract: --dtype must be one of f32|f16|bf16, got 'f8' (see 'saelite extract --help')"
bad "bad enum value" "--dtype must be one of" extract --model model --corpus small.txt --hook $H --db new.db --dtype f8
EXACT="saelite report: --by must be one of density|max|alignment, got 'size' (see 'saelite report --help')"
bad "bad enum value (report --by)" "--by must be one of" report --db ex.db --sae sae8 --out rep --by size
EXACT="saelite params: --preset must be one of gpt2|gpt2-medium|gpt2-large|gpt2-xl|gpt3, got 'gpt5' (see 'saelite params --help')"
bad "bad enum value (choices from the library's list)" "--preset must be one of" params --preset gpt5
# --help prints the default from the variable's initial value, and the declarations
help_has() { # help_has NAME LINE CMD...: `saelite CMD --help` has exactly this line
    local name=$1 want=$2; shift 2
    if "$BIN" "$@" --help | grep -qxF -- "$want"; then pass=$((pass + 1)); echo "ok   $name"
    else fail=$((fail + 1)); echo "FAIL $name: no line '$want' in saelite $* --help"; fi
}
help_has "--help: default from the initial value" \
    "  --batch N              windows per forward pass (>= 1, default: 8)" extract
help_has "--help: default of a later flag unaffected by given values" \
    "  --batch N              windows per forward pass (>= 1, default: 8)" extract --batch 3
help_has "--help: required flag marked" \
    "  --model STR            model directory (config.json + model.safetensors) (required)" extract
help_has "--help: choices shown" "  --dtype f32|f16|bf16   storage dtype (default: f32)" extract
help_has "--help: default stated where the value is a sentinel" \
    "  --d-mlp N              MLP width (0: the default) (in 0..1048576, default: 4 x d-model)" init-model
help_has "--help: a flag that is on by default" \
    "  --bos                  prepend <|endoftext|> to every window (--no-bos: do not) (default: on)" extract

# ---- init-model ------------------------------------------------------------------------------
bad "zero layers" "--layers must be in 1..1000, got 0" init-model --layers 0 --d-model 8 --heads 2 -o m2
bad "negative layers" "--layers must be in 1..1000, got -1" init-model --layers -1 --d-model 8 --heads 2 -o m2
bad "heads do not divide d-model" "not a multiple of --heads 3" init-model --layers 1 --d-model 10 --heads 3 -o m2
bad "unknown dtype" "--dtype must be one of f32\|f16\|bf16, got 'f8'" init-model --layers 1 --d-model 8 --heads 2 --dtype f8 -o m2
bad "zero context" "--ctx must be in 1..1048576, got 0" init-model --layers 1 --d-model 8 --heads 2 --ctx 0 -o m2
bad "negative vocabulary" "--vocab must be in 1..16777216, got -3" init-model --layers 1 --d-model 8 --heads 2 --vocab -3 -o m2
bad "output under a regular file" "acts.npy/m2.*Not a directory" init-model --layers 1 --d-model 8 --heads 2 -o acts.npy/m2
bad "read-only output" "$RO/m2" init-model --layers 1 --d-model 8 --heads 2 -o $RO/m2

# ---- forward (model loading) -----------------------------------------------------------------
F=(--tokens 1,2 --hook $H --npy o.npy)
bad "missing model directory" "nosuch/config.json: cannot open" forward --model nosuch "${F[@]}"
bad "empty config.json" "m_emptycfg/config.json: not valid JSON at line 1, column 1" forward --model m_emptycfg "${F[@]}"
bad "config.json not JSON" "m_badjson/config.json: not valid JSON at line 1, column 1" forward --model m_badjson "${F[@]}"
bad "truncated safetensors" "m_trunc/model.safetensors:.*outside" forward --model m_trunc "${F[@]}"
bad "missing safetensors" "m_nosafet/model.safetensors" forward --model m_nosafet "${F[@]}"
bad "config does not fit the weights" "wte.weight' has shape \[270,8\], expected \[270,16\]" forward --model m_mismatch "${F[@]}"
# (it ended "(or a prefix ending in '*')", which forward refuses)
bad "unknown hook" "no hook point matches 'blocks.0.hook_nosuch'.*, ln_final.hook_normalized[^(]*\$" forward --model model --tokens 1,2 --hook blocks.0.hook_nosuch --npy o.npy
bad "hook of a layer the model lacks" "blocks.5.hook_resid_post" forward --model model --tokens 1,2 --hook blocks.5.hook_resid_post --npy o.npy
bad "token id outside the vocabulary" "token id 270 .*outside the vocabulary" forward --model model --tokens 1,270 --hook $H --npy o.npy
bad "negative token id" "bad list '1,-2'" forward --model model --tokens 1,-2 --hook $H --npy o.npy
bad "sequence longer than the context" "17 tokens exceeds the model context of 16" forward --model model --tokens 1-17 --hook $H --npy o.npy
bad "forward output under a regular file" "acts.npy/o.npy.*Not a directory" forward --model model --tokens 1,2 --hook $H --npy acts.npy/o.npy
# ids are ints: 4294967297 ran token 1, exit 0; LONG_MAX looped until memory ran out (an audit)
bad "forward --tokens beyond int" "values must be in 0..2147483647" forward --model model --tokens 4294967297 --hook $H --npy o_big.npy
bad "forward --tokens at LONG_MAX" "values must be in 0..2147483647" forward --model model --tokens 9223372036854775807 --hook $H --npy o_big.npy
# lists take digits only, as the integer flags do (" 5", "1, 2", "+1" and a trailing comma passed)
for l in " 5" "1, 2" "+1" "5," "3-+4"; do
    bad "forward --tokens '$l'" "bad list '${l//+/\\+}'" forward --model model --tokens "$l" --hook $H --npy o_l.npy
done
bad "report --features with a range beyond 10M values" "at most 10M values" report --db ex.db --sae sae8 --features 0-5000000,0-6000000 --out rep_big
bad "forward --text with a missing --model (was: no tokenizer files)" "nodir/config.json: cannot open" forward --model nodir --text "the cat" --hook $H --npy o_nodir.npy

# ---- import (.npy into a database) ------------------------------------------------------------
I=(--db good.db --hook x.new)
bad "missing .npy" "nosuch.npy: cannot open" import --npy nosuch.npy "${I[@]}"
bad "empty .npy" "empty.npy: not a .npy file" import --npy empty.npy "${I[@]}"
bad "truncated .npy header" "trunc_header.npy: truncated" import --npy trunc_header.npy "${I[@]}"
bad "truncated .npy data" "trunc_data.npy: truncated" import --npy trunc_data.npy "${I[@]}"
bad "text file as .npy" "text.npy: not a .npy file" import --npy text.npy "${I[@]}"
bad "NaN activation" "nan.npy: non-finite value \\(nan\\) at row 3, column 2" import --npy nan.npy "${I[@]}"
bad "Inf activation" "inf.npy: non-finite value \\(-inf\\) at row 9, column 7" import --npy inf.npy "${I[@]}"
bad "width differs from the stored hook" "width 8, not 32" import --npy wide.npy --db good.db --hook $H
bad "negative seq-len" "--seq-len must be in 1..16777216, got -5" import --npy acts.npy "${I[@]}" --seq-len -5
bad "zero seq-len" "--seq-len" import --npy acts.npy --db seq0.db --hook x.new --seq-len 0
bad "unknown storage dtype" "--dtype must be one of f32\|f16\|bf16, got 'f8'" import --npy acts.npy "${I[@]}" --dtype f8
bad "text file as database" "text.db: not a database" import --npy acts.npy --db text.db --hook x.new
bad "truncated database" "trunc.db: not a database" import --npy acts.npy --db trunc.db --hook x.new
bad "newer schema database" "newer.db: written by a newer saelite \(schema version 999" import --npy acts.npy --db newer.db --hook x.new
bad "database in a missing directory" "nodir/new.db: cannot create: No such file" import --npy acts.npy --db nodir/new.db --hook x.new
# a database whose full path is longer than SQLite takes (504 bytes on 3.40): it said "unable to
# open database file (No such file or directory)" of a directory that is there
LONGP=$(printf 'l%.0s' {1..200})/$(printf 'l%.0s' {1..200})/$(printf 'l%.0s' $(seq $((520 - ${#W} - 1 - 402 - 5))))
mkdir -p "$W/$LONGP"
bad "a database whose full path is 520 bytes" "x.db: cannot open: its full path is 520 bytes long, and SQLite opens a database only where that is at most" \
    import --npy acts.npy --db "$LONGP/x.db" --hook x.new
# ... measured as SQLite measures it: "." and ".." dropped (a missing file behind 600 bytes of
# "./" is missing, not too long) and symbolic links followed (a short link to the long directory)
DOTS=$(printf './%.0s' {1..300})
bad "a missing database behind 600 bytes of ./: not 'too long'" "/missing.db: cannot open: No such file or directory" \
    query --db "$DOTS/missing.db" "SELECT 1"
ln -s "$W/$LONGP" "$W/lk"
bad "a database through a link to a 520-byte path" "lk/x.db: cannot open: its full path is 520 bytes long" \
    import --npy acts.npy --db lk/x.db --hook x.new
bad "token ids of the wrong length (new db)" "ids5.npy: 5 token ids for 16 activation rows" import --npy acts.npy --db new.db --hook x.new --tokens ids5.npy
bad "NaN activation (new db)" "nan.npy: non-finite" import --npy nan.npy --db new.db --hook x.new
bad "activation beyond float16 (new db: none created)" "big.npy: 70000 at row 3, column 2 is beyond f16's range; import as bf16 or f32" import --npy big.npy --db new.db --hook x.new --dtype f16
bad "float token ids" "acts.npy: element 0 is not an integer" import --npy acts.npy --db good.db --hook x.new --tokens acts.npy

# ---- export / info (reading a database) --------------------------------------------------------
bad "export of an unknown hook" "no hook 'nosuch'" export --db good.db --hook nosuch --npy o.npy
bad "export from a missing database" "missing.db: cannot open" export --db missing.db --hook $H --npy o.npy
bad "export negative limit" "--limit must be >= 0" export --db good.db --hook $H --npy o.npy --limit -1
bad "export under a regular file" "acts.npy/o.npy.*Not a directory" export --db good.db --hook $H --npy acts.npy/o.npy
bad "export to read-only output" "$RO/o.npy" export --db good.db --hook $H --npy $RO/o.npy
bad "export from a truncated database" "trunc.db: not a database" export --db trunc.db --hook $H --npy o.npy
bad "info on a missing database" "missing.db: cannot open" info --db missing.db
# a path of 1.2 kB: the message kept its first 1 KiB and lost the problem ("/ddd.../missi")
LONGD=$(printf 'd%.0s' {1..200})
bad "info on a missing database, a 1.2 kB path: the problem is still said" \
    "$LONGD/missing.db: cannot open: No such file" info --db "$LONGD/$LONGD/$LONGD/$LONGD/$LONGD/$LONGD/missing.db"
bad "info on a newer schema" "written by a newer saelite" info --db newer.db
bad "info on a text file" "text.db: not a database" info --db text.db
bad "info on an empty file" "empty.npy: empty database" info --db empty.npy
bad "info: the database given twice (the second was ignored)" "the database is given twice" info --db missing.db text.db

# ---- extract -----------------------------------------------------------------------------------
E=(extract --model model --tokenizer tok --corpus small.txt)
bad "extract: unknown hook" "unknown hook 'blocks.0.nosuch'" "${E[@]}" --hook blocks.0.nosuch --db new.db
bad "extract: negative ctx" "--ctx must be >= 1, got -3" "${E[@]}" --hook $H --db new.db --ctx -3
bad "extract: zero batch" "--batch must be >= 1, got 0" "${E[@]}" --hook $H --db new.db --batch 0
bad "extract: batch beyond the machine's memory (an existing database untouched)" "--batch 2000000000: the 8 batches in flight need [0-9.]+ GB, more than this machine's" "${E[@]}" --hook $H --db ex.db --batch 2000000000
bad "extract: ctx beyond the model" "--ctx 100 exceeds the context" "${E[@]}" --hook $H --db new.db --ctx 100
bad "extract: missing corpus" "nosuch.txt: cannot open" extract --model model --tokenizer tok --corpus nosuch.txt --hook $H --db new.db
bad "extract: empty corpus" "empty.npy: the corpus holds no text" extract --model model --tokenizer tok --corpus empty.npy --hook $H --db new.db
bad "extract: tokenizer larger than the model" "tokenizer tok has 269 ids but model m_small only" extract --model m_small --tokenizer tok --corpus small.txt --hook $H --db new.db
# the same check (tok_check_model) for every command that encodes text for a model
bad "forward --text: tokenizer larger than the model" "tokenizer tok has 269 ids but model m_small only 64 \(wrong --tokenizer\?\)" forward --model m_small --tokenizer tok --text "the cat" --hook $H --npy o.npy
bad "attention: tokenizer larger than the model" "tokenizer tok has 269 ids but model m_small only 64" attention --model m_small --tokenizer tok --layer 0 --text "the cat" --out a.png
bad "generate: tokenizer larger than the model" "tokenizer tok has 269 ids but model m_small only 64" generate --model m_small --tokenizer tok --prompt the
bad "extract: malformed tokenizer" "tok_bad/encoder.json" extract --model model --tokenizer tok_bad --corpus small.txt --hook $H --db new.db
bad "extract: newer schema database" "newer.db: written by a newer saelite" "${E[@]}" --hook $H --db newer.db
bad "extract: different ctx than stored" "stored with sequence length 8, not 4" "${E[@]}" --hook $H --db ex.db --ctx 4

# ---- sae-train / sae-eval / analyze / report / query ------------------------------------------
T=(sae-train --npy acts.npy --out s1 --d-sae 16 --k 2 --tokens 256 --batch 16 --eval-tokens 16)
# a transcoder to an earlier hook trained, and analyze refused it afterwards (a review)
bad "sae-train: a transcoder whose --hook-out comes first" "the transcoder's --hook-out blocks.0.hook_resid_pre runs before its --hook $H in the forward pass" \
    sae-train --db ex.db --hook $H --hook-out blocks.0.hook_resid_pre --arch transcoder --d-sae 16 --k 2 --tokens 256 --batch 16 --out tcback
bad "sae-train: NaN learning rate" "--lr expects a finite number, got 'nan'" "${T[@]}" --lr nan
bad "sae-train: infinite learning rate" "--lr expects a finite number" "${T[@]}" --lr inf
bad "sae-train: a hex learning rate (strtod read 0x1p-3)" "--lr expects a finite number, got '0x1p-3'" "${T[@]}" --lr 0x1p-3
bad "sae-train: a hex token count (strtod read 0x10 as 16)" "--tokens expects an integer, got '0x10'" "${T[@]}" --tokens 0x10
bad "sae-train: a seed that underflows to 0 (1e-400 ran as seed 0)" "--seed expects an integer, got '1e-400'" "${T[@]}" --seed 1e-400
bad "sae-train: a leading blank in an integer flag (strtol skipped it)" "--k expects an integer, got ' 2'" "${T[@]}" --k " 2"
bad "sae-train: negative learning rate" "--lr" "${T[@]}" --lr -1 --out s_neg
bad "sae-train: zero k" "--k must be >= 1, got 0" "${T[@]}" --k 0
bad "sae-train: k above d-sae" "k 32 must be in 1..d_sae \(16\)" "${T[@]}" --k 32
# buffers past the machine's memory: refused before anything is allocated (not killed mid-step)
bad "sae-train: d-sae beyond the machine's memory" "d_sae 2000000000 x d_in 8: .* need [0-9.]+ GB, more than this machine's" "${T[@]}" --d-sae 2000000000
bad "sae-train: negative tokens" "--tokens must be >= 1, got -5" "${T[@]}" --tokens -5
bad "sae-train: unknown architecture" "--arch must be one of relu\|topk\|batchtopk\|jumprelu\|gated\|matryoshka\|transcoder\|skip_transcoder, got 'foo'" "${T[@]}" --arch foo
bad "sae-train: NaN activations" "nan.npy: non-finite value \\(nan\\) at row 3, column 2" "${T[@]/acts.npy/nan.npy}"
bad "sae-train: NaN activations in a store" "nanact.db: hook $H, sequence [0-9]+: non-finite value \\(nan\\) at token 1, dimension 2" sae-train --db nanact.db --hook $H --out s1 --d-sae 16 --k 2 --tokens 256 --batch 16 --eval-tokens 16
bad "sae-train: 1-d activations" "ids16.npy: expected \[tokens, d_in\]" "${T[@]/acts.npy/ids16.npy}"
bad "sae-train: missing activations" "nosuch.npy: cannot open" "${T[@]/acts.npy/nosuch.npy}"
bad "sae-train: resume without a checkpoint" "s_none/checkpoint.bin" "${T[@]}" --out s_none --resume
bad "sae-eval: activations of another width" "wide.npy" sae-eval --sae sae8 --npy wide.npy
bad "sae-eval: NaN activations" "nan.npy" sae-eval --sae sae8 --npy nan.npy
# an empty [0, 8] file: "reconstruction on 0 tokens, mse 0", exit 0 before (an audit)
python3 -c 'import sys; h = "{\x27descr\x27: \x27<f4\x27, \x27fortran_order\x27: False, \x27shape\x27: (0, 8), }"
h += " " * (63 - 10 - len(h)) + "\n"; open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode())' "$W/empty8.npy"
LAST=""
bad "sae-eval: an empty activations file" "empty8.npy: no tokens \\(shape \\[0, 8\\]\\)" sae-eval --sae sae8 --npy empty8.npy
bad "sae-eval: an empty ground truth" "empty8.npy: no features" sae-eval --sae sae8 --ground-truth empty8.npy
bad "analyze: missing SAE" "nosuch/cfg.json: cannot open" analyze --db ex.db --sae nosuch --no-model
# eval on a database no suite can use (no POS tags, one genre): refused, and no eval or SAE
# registry tables left behind (the harness checks the file is unchanged)
bad "eval: no probing task" "good.db: no probing task has train and test rows" eval --db good.db --sae sae8 --suite sparse_probing
bad "eval: no POS tags for absorption" "good.db: no POS-tagged tokens for the absorption suite" eval --db good.db --sae sae8 --suite absorption
bad "analyze: NaN activations in a store" "nanact.db: hook $H, sequence [0-9]+: non-finite value \\(nan\\) at token 1, dimension 2" analyze --db nanact.db --sae sae8 --no-model --all
bad "analyze: SAE width differs from the database (mismatched SAE)" "reads 32 values per token but ex.db stores 8" analyze --db ex.db --sae sae32 --no-model
bad "analyze: SAE of another hook" "trained on $H, not --hook blocks.0.hook_attn_out" analyze --db ex.db --sae sae8 --hook blocks.0.hook_attn_out --no-model
bad "analyze: unknown hook for neurons" "no hook 'blocks.0.nosuch'" analyze --db ex.db --neurons --hook blocks.0.nosuch --no-model
# windows of one token (a model of n_ctx 1, extracted --no-bos): the downstream loss has nothing
# to predict; the line guessed "(extracted with --ctx 1?)", a flag this extract never had
bad "analyze: 1-token windows with the model" "no sequence of $H has 2 or more tokens for the downstream loss \(windows of one token: extract --ctx 1 or a model of n_ctx 1, or import --seq-len 1\); --no-model skips it" \
    analyze --db one.db --sae sae8 --model m_ctx1
# flags that only shape another flag's work were accepted alone and did nothing (a review)
EXACT="saelite analyze: --effects-ctx applies to --effects only (see 'saelite analyze --help')"
bad "analyze: --effects-ctx without --effects" "--effects-ctx applies to --effects only" analyze --db ex.db --sae sae8 --effects-ctx 4
EXACT="saelite analyze: --effects-seqs applies to --effects only (see 'saelite analyze --help')"
bad "analyze: --effects-seqs without --effects" "--effects-seqs applies to --effects only" analyze --db ex.db --sae sae8 --no-model --effects-seqs 0
EXACT="saelite analyze: --force applies to --all-acts only (see 'saelite analyze --help')"
bad "analyze: --force without --all-acts" "--force applies to --all-acts only" analyze --db ex.db --sae sae8 --no-model --force
SAELITE_ANA_CACHE_KIB=lots bad "analyze: a bad SAELITE_ANA_CACHE_KIB" "SAELITE_ANA_CACHE_KIB=lots: not a cache size in KiB" analyze --db ex.db --sae sae8 --no-model --all
bad "analyze: zero top" "--top must be >= 1, got 0" analyze --db ex.db --sae sae8 --no-model --top 0
bad "analyze: validation fraction above 1" "--val-frac must be in \(0, 1\), got 2" analyze --db ex.db --sae sae8 --no-model --val-frac 2
bad "analyze: newer schema database" "written by a newer saelite" analyze --db newer.db --neurons --hook $H --no-model
# the recorded model path found neither from here nor beside the database: the message named
# only the second place tried (sub/gone/model), a path no database held (a user's run)
mkdir -p "$W/sub"; hostile sub/mv.db "UPDATE models SET path = 'gone/model'"; LAST=""
bad "analyze: the recorded model path, moved" "the model gone/model recorded for hook $H \\(not found from here, nor as sub/gone/model; give --model DIR or --no-model\\)" analyze --db sub/mv.db --sae sae8 --all
# a hook saelite import wrote: its models row names no directory, and analyze opened the marker
# as one ("(imported .npy)/config.json: cannot open", a user's run)
# a model of n_ctx 1 without --ctx: the message named --ctx, which the user had not given
setup init-model --layers 1 --d-model 4 --heads 2 --ctx 1 --vocab 270 -o ctx1; LAST=""
bad "extract: a model of n_ctx 1 with BOS" "ctx1: n_ctx 1 leaves no room for a token after the <\\|endoftext\\|> each window starts with; use --no-bos" extract --model ctx1 --tokenizer tok --corpus small.txt --hook blocks.0.hook_resid_post --db ctx1.db
bad "analyze: an imported hook, no --model" "good.db: no model recorded for hook $H \\(imported from .npy\\); give --model DIR or --no-model" analyze --db good.db --sae sae8 --all
bad "analyze: --effects without the model" "--effects needs --sae and the model" analyze --db ex.db --sae sae8 --no-model --effects
bad "analyze: --effects with neurons only" "--effects needs --sae and the model" analyze --db ex.db --neurons --hook $H --effects
bad "report: SAE never analysed" "no analysis of SAE '999'" report --db ex.db --sae 999 --out rep
bad "report: bad feature list" "bad list '1,x'" report --db ex.db --sae sae8 --features 1,x --out rep
bad "query: SQL syntax error" "near \"SELEC\": syntax error" query --db ex.db "SELEC 1"
bad "query: a statement that writes" "refusing a statement that would modify" query --db ex.db "DELETE FROM tokens"
# said as store_open says it (info, report): query and serve said SQLite's "unable to open
# database file", which does not say the file is not there (a review)
bad "query: missing database" "missing.db: cannot open: No such file or directory" query --db missing.db "SELECT 1"
bad "serve: missing database" "missing.db: cannot open: No such file or directory" serve --db missing.db --port 0
bad "serve: a directory as database (was 'disk I/O error')" "tok: cannot open: not a regular file" serve --db tok --port 0

# ---- hostile and damaged databases (issue 20): every opener checks the schema it relies on ------
NOTOURS="do not match saelite's schema"
bad "info: tokens is a view calling context()" "h_view.db: the core tables $NOTOURS: 'tokens' is a view" info h_view.db
bad "info: tokens table dropped" "h_drop.db: the core tables $NOTOURS: no table 'tokens'" info h_drop.db
bad "info: tokens column renamed" "h_cols.db: .*table 'tokens' has no column 'position'" info h_cols.db
bad "info: tokens column of another type" "h_type.db: .*tokens.text is declared 'BLOB', not 'TEXT'" info h_type.db
bad "info: tokens is a virtual table" "h_vtab.db: .*'tokens' is a virtual table" info h_vtab.db
bad "info: a trigger calling context()" "h_trig.db: has a trigger 't_ctx' on 'tokens'" info h_trig.db
bad "info: hooks is a view" "h_hooks.db: .*'hooks' is a view" info h_hooks.db
bad "info: analysis part with ana_vocab a view" "h_ana.db: the 'analysis' tables $NOTOURS: 'ana_vocab' is a view" info h_ana.db
bad "info: analysis part with a table dropped" "h_ana2.db: the 'analysis' tables $NOTOURS: no table 'ana_acts'" info h_ana2.db
bad "info: sae part with other columns" "h_sae.db: the 'sae' tables $NOTOURS: table 'sae_registry' has no column" info h_sae.db
bad "info: sae part version 1 with other columns" "h_sae1.db: the 'sae' tables $NOTOURS: table 'sae_registry' has no column" info h_sae1.db
bad "info: another program's SQLite file" "h_other.db: an SQLite database, but not a saelite store" info h_other.db
bad "info: saelite's id on another program's tables" "h_fake.db: the core tables $NOTOURS: column models.id is declared ''" info h_fake.db
bad "info: a damaged table page" "h_page.db: .*malformed" info h_page.db
bad "info: a damaged schema page" "h_head.db: not a database" info h_head.db
bad "info: a directory" "adir: not a regular file" info adir
bad "info: a hook of negative width" "h_width.db: hook 1 .* has width -3" info h_width.db
bad "export: a hook of negative width" "h_width.db: hook 1 .* has width -3" export --db h_width.db --hook $H --npy o.npy
bad "sae-train: a forged seq_len (was: shuffle buffer out of memory)" "h_seqlen.db: hook 1 .* has seq_len 1000000 x width 4096: a sequence of 16384000000 bytes in f32, more than SQLite stores in one value \(999999936: damaged\?\)" sae-train --db h_seqlen.db --hook $H --out s_seq --d-sae 16 --k 2 --tokens 256 --batch 16
bad "export: a forged seq_len" "h_seqlen.db: hook 1 .* has seq_len 1000000 x width 4096: a sequence of" export --db h_seqlen.db --hook $H --npy o.npy
bad "info: token counts that overflow int64" "h_ntok.db: counting activations: integer overflow" info h_ntok.db
bad "export: token counts that overflow int64" "h_ntok.db: counting activations: integer overflow" export --db h_ntok.db --hook $H --npy o.npy
bad "export: tokens table dropped" "h_drop.db: the core tables" export --db h_drop.db --hook $H --npy o.npy
bad "export: a damaged table page" "h_page.db: .*malformed" export --db h_page.db --hook $H --npy o.npy
bad "analyze: tokens is a view" "h_view.db: the core tables" analyze --db h_view.db --neurons --hook $H --no-model
bad "analyze: ana_vocab is a view" "h_ana.db: the 'analysis' tables" analyze --db h_ana.db --neurons --hook $H --no-model
bad "report: analysis table dropped" "h_ana2.db: the 'analysis' tables" report --db h_ana2.db --sae 1 --out rep
bad "sae-train: tokens column renamed" "h_cols.db: the core tables" sae-train --db h_cols.db --hook $H --out s_h --arch topk --k 2 --d-sae 16 --tokens 64 --batch 16
bad "extract into a database with a trigger" "h_trig.db: has a trigger" extract --model model --tokenizer tok --corpus small.txt --hook $H --db h_trig.db --ctx 8
bad "import into a database with a trigger" "h_trig2.db: has a trigger 't_del' on 'activations'" import --npy acts.npy --db h_trig2.db --hook x.new
bad "import into another program's tables" "h_fake.db: .*models" import --npy acts.npy --db h_fake.db --hook x.new
bad "import: a sequence over SQLite's blob limit, refused before the store is made (was: readers ran out of memory)" "new.db: hook x: a sequence of 16777216 tokens x width [0-9]+ in f32 is [0-9]+ bytes, more than SQLite stores in one value \(999999936\): fewer tokens a sequence, or a 2-byte --dtype" import --npy wide.npy --db new.db --hook x --seq-len 16777216
# the SQL functions: never run by the schema, never read a table that is not ours, never recurse
bad "query: view tokens calling context() (was a stack overflow)" "unsafe use of context\(\)" query --db h_view.db "SELECT * FROM tokens"
bad "query: a view calling tok_text()" "unsafe use of tok_text\(\)" query --db h_view.db "SELECT * FROM v_text"
bad "query: context() over a view tokens" "context\(\): not saelite's tokens table: 'tokens' is a view" query --db h_view.db "SELECT context(1, 1)"
bad "query: tok_text() over a view ana_vocab" "tok_text\(\): not saelite's ana_vocab table: 'ana_vocab' is a view" query --db h_ana.db "SELECT tok_text(1)"
bad "query: a view ana_vocab calling tok_text()" "unsafe use of tok_text\(\)" query --db h_ana.db "SELECT * FROM ana_vocab"
bad "query: context() without a tokens table" "context\(\): the database has no tokens table" query --db h_drop.db "SELECT context(1, 1)"
bad "query: tok_text() over renamed columns" "tok_text\(\): not saelite's tokens table: table 'tokens' has no column 'position'" query --db h_cols.db "SELECT tok_text(1)"
bad "query: context() over another column type" "context\(\): .*declared 'BLOB'" query --db h_type.db "SELECT context(1, 1)"
bad "query: tok_id() over a virtual tokens table" "tok_id\(\): .*virtual table" query --db h_vtab.db "SELECT tok_id('x')"
# integer arguments at the extremes (INT64_MIN/MAX positions are valid and give NULL: test_query.sh)
bad "query: context() before = INT64_MAX" "context\(\): before/after must be in 0..100000" query --db ex.db "SELECT context(1, 1, 9223372036854775807)"
bad "query: context() after = INT64_MIN" "context\(\): before/after must be in 0..100000" query --db ex.db "SELECT context(1, -9223372036854775808, 0, -9223372036854775808)"
bad "query: context() negative before" "before/after must be in 0..100000" query --db ex.db "SELECT context(1, 1, -1)"
bad "query: vec_at() with an unknown dtype" "dtype must be 'f32', 'f16' or 'bf16'" query --db ex.db "SELECT vec_at(x'00000000', 9223372036854775807, 'f64')"
# damaged files and limits
bad "query: a damaged table page" "h_page.db: database disk image is malformed" query --db h_page.db "SELECT * FROM models"
bad "query: a text file" "text.db: file is not a database" query --db text.db "SELECT * FROM sqlite_schema"
bad "query: a directory" "adir: cannot open: not a regular file" query --db adir "SELECT 1"
bad "query: an endless recursive CTE stops at --timeout" "ex.db: query stopped after 0.3 s \(--timeout\)" query --db ex.db --timeout 0.3 "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
bad "query: an endless view stops at --timeout" "h_loop.db: query stopped after 0.3 s \(--timeout\)" query --db h_loop.db --timeout 0.3 "SELECT max(x) FROM forever"
bad "query: rows beyond --max-rows" "ex.db: query stopped after 5 rows \(--max-rows\)" query --db ex.db --csv --max-rows 5 "SELECT * FROM tokens"
bad "query: --max-rows counts every statement" "query stopped after 3 rows" query --db ex.db --max-rows 3 "SELECT 1; SELECT 2; SELECT 3; SELECT 4"
EXACT="saelite query: --timeout must be >= 0, got -1 (see 'saelite query --help')"
bad "query: negative --timeout" "--timeout must be >= 0" query --db ex.db --timeout -1 "SELECT 1"
EXACT="saelite query: --max-rows must be >= 0, got -5 (see 'saelite query --help')"
bad "query: negative --max-rows" "--max-rows must be >= 0" query --db ex.db --max-rows -5 "SELECT 1"

# ---- generate / attention / params / synth ----------------------------------------------------
G=(generate --model model --tokenizer tok --prompt the)
bad "generate: missing model" "nosuch/config.json: cannot open" generate --model nosuch --prompt x
bad "generate: NaN temperature" "--temperature expects a finite number, got 'nan'" "${G[@]}" --temperature nan
bad "generate: negative temperature" "--temperature must be >= 0" "${G[@]}" --temperature -1
bad "generate: negative max-tokens" "--max-tokens must be >= 0" "${G[@]}" --max-tokens -3
bad "generate: negative top-k" "--top-k must be >= 0" "${G[@]}" --top-k -1
bad "generate: a hex steering strength (strtod read 0x10 as 16)" "steering: '0:0x10' is not FEATURE:STRENGTH" "${G[@]}" --sae sae8 --steer 0:0x10
bad "generate: steering at an attention pattern (said '2 wide')" "hook blocks.0.attn.hook_pattern is \\[B,H,T,T\\] .*not one vector per token" "${G[@]}" --sae sae8 --hook blocks.0.attn.hook_pattern --steer 0:1
# clamp encodes the hook's rows: at a hook the SAE was not trained on its codes mean nothing (it
# ran, exit 0); add moves a decoder direction, which another hook of the width may take
bad "generate: clamp at a hook the SAE was not trained on" "clamp sets the SAE's own codes, and it was trained on $H, not blocks.0.hook_resid_pre" "${G[@]}" --sae sae8 --hook blocks.0.hook_resid_pre --steer 0:0 --steer-method clamp
if (cd "$W" && exec "$BIN" "${G[@]}" --sae sae8 --hook blocks.0.hook_resid_pre --steer 0:1 --max-tokens 2) > /dev/null 2>&1; then
    pass=$((pass + 1)); echo "ok   generate: add at another hook of the same width still steers"
else fail=$((fail + 1)); echo "FAIL generate: add at another hook of the same width still steers"; fi
LAST=""
bad "attention: layer the model lacks" "--layer 5: the model has layers 0..0" attention --model model --tokenizer tok --layer 5 --text "the cat" --out a.png
bad "attention: head the model lacks" "--head 9: the model has heads 0..1" attention --model model --tokenizer tok --layer 0 --head 9 --text "the cat" --out a.png
bad "attention: output under a regular file" "acts.npy/a.png" attention --model model --tokenizer tok --layer 0 --text "the cat" --out acts.npy/a.png
# an empty output path passed the checks and failed after the work: attention's PNG was already
# in place when the rename of --npy '' failed; forward said ": write failed"
bad "attention: an empty --npy" "file '': empty path" attention --model model --tokenizer tok --layer 0 --text "the cat" --out a.png --npy ""
# an output that is a symlink into an input directory: the write replaces the link's target
ln -sf model/model.safetensors "$W/mlink.npy"; ln -sf tok/vocab.bpe "$W/tlink.png"; LAST=""
bad "forward: --npy a symlink to the model's weights" "--npy mlink.npy would replace a file of the input directory model" forward --model model --tokens 1,2 --hook $H --npy mlink.npy
bad "attention: --out a symlink into the tokenizer" "--out tlink.png would replace a file of the input directory tok" attention --model model --tokenizer tok --layer 0 --text "the cat" --out tlink.png
rm -f "$W/mlink.npy" "$W/tlink.png"; LAST=""
# a model directory of links into a blob store (Hugging Face's cache): the path's own directory
# counts too (judged by the links' targets alone, --npy hfm/model.safetensors replaced the blob;
# bad's fingerprint sees the blob's mtime)
mkdir -p "$W/blobs" "$W/hfm"; cp "$W/model/config.json" "$W/model/model.safetensors" "$W/blobs/"
ln -sf ../blobs/config.json "$W/hfm/config.json"; ln -sf ../blobs/model.safetensors "$W/hfm/model.safetensors"
bad "forward: --npy a linked model file of the model directory" "--npy hfm/model.safetensors would replace a file of the input directory hfm" forward --model hfm --tokens 1,2 --hook $H --npy hfm/model.safetensors
rm -rf "$W/blobs" "$W/hfm"; LAST=""
EXACT="saelite forward: --tokenizer needs --text (--tokens are ids already) (see 'saelite forward --help')"
bad "forward: --tokenizer with --tokens (read by nothing)" "" forward --model model --tokens 1,2 --tokenizer nosuch --hook $H --npy o.npy
bad "forward: an empty --npy" "file '': empty path" forward --model model --tokens 1,2 --hook $H --npy ""
bad "params: missing model" "nosuch/config.json: cannot open" params nosuch
bad "synth: zero dimension" "--d must be >= 1, got 0" synth --d 0 --out s.npy --truth t.npy
bad "synth: negative features" "--features must be >= 1, got -1" synth --features -1 --out s.npy --truth t.npy
bad "synth: the default --active above --features names the rule (was the list of every rule)" "active 5 must be above 0 and at most the 3 features" synth --features 3 --out s.npy --truth t.npy
bad "synth: stored sequences over SQLite's blob limit, refused before any file" "new.db: hook synth: a sequence of 16777216 tokens x width 32 in f32 is 2147483648 bytes" synth --d 32 --tokens 64 --seq-len 16777216 --db new.db --out s.npy --truth t.npy
bad "synth: a stored width over 2^24, refused before any file (was: after --out and --truth)" "new.db: hook synth: width 20000000, 1 tokens a sequence \(want 1..16777216 each\)" synth --d 20000000 --seq-len 1 --tokens 1 --db new.db --out s.npy --truth t.npy
bad "extract: a full window over SQLite's blob limit, refused before the corpus pass (a dry run said ok)" "new.db: hook blocks.0.mlp.hook_post: a sequence of 65537 tokens x width 4096 in f32 is 1073758208 bytes" extract --model mbig --tokenizer tok --corpus small.txt --hook blocks.0.mlp.hook_post --ctx 65537 --db new.db
# flags past what the store, an int or a transaction can take (a hostile-flags review: the store
# refused --seq-len 2e7 only after synth had written its files; 2147483647 children wrapped an
# int; the steps x instances count and an infinite --commit-mb overflowed)
bad "synth: --seq-len beyond the store's 2^24" "--seq-len must be in 1..16777216, got 20000000" synth --d 8 --features 16 --tokens 1000 --seq-len 20000000 --out sl.npy --truth slt.npy --db sl.db
bad "synth: children that overflow an int" "4 parents with 2147483647 children each need 8589934592 of the 16 features" synth --d 8 --features 16 --tokens 1000 --parents 4 --children 2147483647 --out ch.npy --truth cht.npy
bad "import: --seq-len beyond the store's 2^24" "--seq-len must be in 1..16777216, got 2147483647" import --npy acts.npy --db sl.db --hook h --seq-len 2147483647
bad "superpose: steps x instances past an int" "steps x instances is 21474836470000, above 2147483647" superpose --instances 2147483647 -o sp
bad "extract: an infinite --commit-mb" "--commit-mb must be in \\[0, 1048576\\], got 1e308" extract --model model --tokenizer tok --corpus small.txt --hook $H --db cm.db --commit-mb 1e308
bad "generate: --hook without --sae and --steer (did nothing)" "--hook needs --sae and --steer" generate --model model --tokenizer tok --prompt the --hook $H
bad "generate: --steer-method without --steer (did nothing)" "--steer-method needs --sae and --steer" generate --model model --tokenizer tok --prompt the --steer-method clamp

# ---- tokenizer, corpus, bpe-train --------------------------------------------------------------
bad "missing tokenizer" "nosuch: no tokenizer files" tokenize --tokenizer nosuch small.txt
bad "malformed encoder.json" "tok_bad/encoder.json: not valid JSON at line [0-9]*, column [0-9]* \(token -> id\)" tokenize --tokenizer tok_bad small.txt
bad "truncated encoder.json" "tok_trunc/encoder.json" tokenize --tokenizer tok_trunc small.txt
bad "missing text file" "nosuch.txt: cannot open" tokenize --tokenizer tok nosuch.txt
printf '1 2 99999\n' > "$W.in"
bad "decode an id outside the vocabulary" "token id 99999 .*not in the vocabulary" tokenize --tokenizer tok --decode "$W.in"
printf '1 x 2\n' > "$W.in"
bad "decode a non-number" "'x 2' is not a token id" tokenize --tokenizer tok --decode "$W.in"
rm -f "$W.in"
bad "corpus: unknown converter" "expected 'brown DIR'" corpus frob x -o out
bad "corpus: missing Brown directory" "nosuch/cats.txt: cannot open" corpus brown nosuch -o out
bad "corpus: malformed Brown file" "brown_bad/ca01:3: token 'cat' is not word/tag" corpus brown brown_bad -o out
bad "bpe-train: vocabulary too small" "--vocab must be in 257..1000000, got 100" bpe-train --vocab 100 small.txt -o tok2
bad "bpe-train: zero min-freq" "--min-freq must be >= 1" bpe-train --vocab 300 --min-freq 0 small.txt -o tok2
bad "bpe-train: missing input" "nosuch.txt: cannot open" bpe-train --vocab 300 nosuch.txt -o tok2

# ==== Round two: numbers, special files, half-written outputs, messages (issue 20) ==============
# Fixtures of this section live in $W/r2 (databases there are outside deep()'s *.db); LAST=""
# after making them, so the next case takes a fresh fingerprint.
check() { # check NAME 'CONDITION': an extra assertion, eval'ed (e.g. a directory that must not be)
    local name=$1; shift
    if eval "$1"; then pass=$((pass + 1)); echo "ok   $name"; else fail=$((fail + 1)); echo "FAIL $name"; fi
}
absent() { [ ! -e "$W/$1" ] && [ ! -L "$W/$1" ]; }
# npy_raw FILE HEADER-DICT [DATA-PRINTF]: a version-1 .npy with this header dict, byte by byte
npy_raw() {
    local hdr=$2
    while [ $(( (10 + ${#hdr} + 1) % 64 )) -ne 0 ]; do hdr="$hdr "; done
    { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $(( ${#hdr} + 1 )))\\x00"
      printf '%s\n' "$hdr"; [ -n "${3:-}" ] && printf "$3"; } > "$W/$1"
}
# st_raw FILE HEADER-JSON [DATA-PRINTF]: a safetensors file (8-byte little-endian header length)
st_raw() {
    local j=$2 n=${#2}
    { printf "\\x$(printf %02x $((n & 255)))\\x$(printf %02x $((n >> 8)))\\x00\\x00\\x00\\x00\\x00\\x00"
      printf '%s' "$j"; [ -n "${3:-}" ] && printf "$3"; } > "$W/$1"
}
# last_f32 FILE HEX: overwrite the last float32 of a file (the last tensor's last element)
last_f32() { printf "$2" | dd of="$W/$1" bs=1 seek=$(( $(stat -c %s "$W/$1") - 4 )) conv=notrunc status=none; }
mkdir -p "$W/r2"
R=r2

# -- integer arguments at the extremes: every size product from a file is checked --
mkdir -p "$W/$R/huge" "$W/$R/big1" "$W/$R/frac"
echo '{"n_layer": 1000000000, "n_embd": 1000000000, "n_head": 1, "vocab_size": 50257, "n_positions": 1024}' > "$W/$R/huge/config.json"
echo '{"n_layer": 10000000000, "n_embd": 8, "n_head": 1, "vocab_size": 50257, "n_positions": 1024}' > "$W/$R/big1/config.json"
echo '{"n_layer": 1.5, "n_embd": 8, "n_head": 1, "vocab_size": 50257, "n_positions": 1024}' > "$W/$R/frac/config.json"
for m in st_over st_neg st_offstr st_offrev; do mkdir -p "$W/$R/$m"; cp "$W/model/config.json" "$W/$R/$m/"; done
st_raw $R/st_over/model.safetensors '{"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}}' '\0\0\0\0'
st_raw $R/st_neg/model.safetensors '{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}' '\0\0\0\0'
st_raw $R/st_offstr/model.safetensors '{"a":{"dtype":"F32","shape":[1],"data_offsets":["0","4"]}}' '\0\0\0\0'
st_raw $R/st_offrev/model.safetensors '{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}' '\0\0\0\0'
npy_raw $R/over.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }"
npy_raw $R/over2.npy "{'descr': '<f8', 'fortran_order': False, 'shape': (2000000000000000000,), }"
cp -r "$W/sae8" "$W/$R/sae_big"; cp -r "$W/sae8" "$W/$R/sae_huge"; cp -r "$W/sae8" "$W/$R/sae_nok"
sed -i -E 's/"d_in":[[:space:]]*[0-9]+/"d_in": 100000000/; s/"d_sae":[[:space:]]*[0-9]+/"d_sae": 100000000/' "$W/$R/sae_big/cfg.json"
sed -i -E 's/"d_in":[[:space:]]*[0-9]+/"d_in": 1000000000000/' "$W/$R/sae_huge/cfg.json"
sed -i -E '/"k":/d' "$W/$R/sae_nok/cfg.json"
LAST=""
bad "params: sizes whose count overflows int64" "huge/config.json: the parameter count does not fit in 64 bits \(token embedding|attention query" params $R/huge
bad "params: a size above the limit" "big1/config.json: \"n_layer\" is 1e\+10, above the limit of 1e9" params $R/big1
bad "params: a fractional size" "frac/config.json: \"n_layer\" must be a positive integer" params $R/frac
bad "safetensors: shape whose byte count overflows" "tensor 'a': shape too large \(its byte count overflows 64 bits\)" params $R/st_over
bad "safetensors: negative shape entry" "tensor 'a': shape entry 0 is not a non-negative integer" params $R/st_neg
bad "safetensors: data_offsets that are strings" "tensor 'a': data_offsets must be two numbers" params $R/st_offstr
bad "safetensors: data_offsets reversed" "tensor 'a': data_offsets \[4, 0\] end before they begin" params $R/st_offrev

# -- a FIFO or directory where a loader expects a file: refused at once, named (FIFOs hung) --
mkdir -p "$W/$R/f_cfg" "$W/$R/f_st" "$W/$R/d_cfg" "$W/$R/f_tok" "$W/$R/f_bpe" "$W/$R/f_sae" "$W/$R/f_scfg"
cp "$W/model/model.safetensors" "$W/$R/f_cfg/"; mkfifo "$W/$R/f_cfg/config.json"
cp "$W/model/config.json" "$W/$R/f_st/"; mkfifo "$W/$R/f_st/model.safetensors"
cp "$W/model/model.safetensors" "$W/$R/d_cfg/"; mkdir "$W/$R/d_cfg/config.json"
cp "$W/tok/vocab.bpe" "$W/$R/f_tok/"; mkfifo "$W/$R/f_tok/encoder.json"
cp "$W/tok/encoder.json" "$W/$R/f_bpe/"; mkfifo "$W/$R/f_bpe/vocab.bpe"
cp "$W/sae8/cfg.json" "$W/$R/f_sae/"; mkfifo "$W/$R/f_sae/sae_weights.safetensors"
cp "$W/sae8/sae_weights.safetensors" "$W/$R/f_scfg/"; mkfifo "$W/$R/f_scfg/cfg.json"
# -- model shapes and Hugging Face options: the field at fault named, with its range --
mkdir -p "$W/$R/c_eps" "$W/$R/c_saw" "$W/$R/c_inv"
for m in c_eps c_saw c_inv; do cp "$W/model/model.safetensors" "$W/$R/$m/"; done
# the file's own key replaced (one added beside it is a key twice, refused as such)
sed 's/"layer_norm_epsilon": [^,}]*/"layer_norm_epsilon": -1/' "$W/model/config.json" > "$W/$R/c_eps/config.json"
sed 's/"n_layer": 1,/"n_layer": 1, "scale_attn_weights": false,/' "$W/model/config.json" > "$W/$R/c_saw/config.json"
sed 's/"n_layer": 1,/"n_layer": 1, "scale_attn_by_inverse_layer_idx": true,/' "$W/model/config.json" > "$W/$R/c_inv/config.json"
F2=(--tokens 1,2 --logits --npy $R/x.npy)
LAST=""
bad "a FIFO as config.json" "f_cfg/config.json: not a regular file" forward --model $R/f_cfg "${F2[@]}"
bad "a FIFO as model.safetensors" "f_st/model.safetensors: not a regular file" forward --model $R/f_st "${F2[@]}"
bad "a directory as config.json" "d_cfg/config.json: is a directory" forward --model $R/d_cfg "${F2[@]}"
bad "params: a FIFO as config.json" "f_cfg/config.json: not a regular file" params $R/f_cfg
bad "a FIFO as encoder.json" "f_tok/encoder.json: not a regular file" tokenize --tokenizer $R/f_tok small.txt
bad "a FIFO as vocab.bpe" "f_bpe/vocab.bpe: not a regular file" tokenize --tokenizer $R/f_bpe small.txt
bad "a FIFO as an SAE's weights" "f_sae/sae_weights.safetensors: not a regular file" sae-eval --sae $R/f_sae --npy acts.npy
bad "a FIFO as an SAE's cfg.json" "f_scfg/cfg.json: not a regular file" sae-eval --sae $R/f_scfg --npy acts.npy
bad "config.json: layer_norm_epsilon out of range" "c_eps/config.json: invalid model shape: layer_norm_epsilon -1 is outside \(0, 1\)" forward --model $R/c_eps "${F2[@]}"
bad "config.json: scale_attn_weights false" "c_saw/config.json: \"scale_attn_weights\": false is not supported" forward --model $R/c_saw "${F2[@]}"
bad "config.json: scale_attn_by_inverse_layer_idx true" "c_inv/config.json: \"scale_attn_by_inverse_layer_idx\": true is not supported" forward --model $R/c_inv "${F2[@]}"
bad "init-model: too many layers" "--layers must be in 1\.\.1000, got 1001" init-model --layers 1001 --d-model 8 --heads 2 -o $R/m2
bad "init-model: zero vocabulary" "--vocab must be in 1\.\.16777216, got 0" init-model --layers 1 --d-model 8 --heads 2 --vocab 0 -o $R/m2
bad "init-model: negative MLP width" "--d-mlp must be in 0\.\.1048576, got -1" init-model --layers 1 --d-model 8 --heads 2 --d-mlp -1 -o $R/m2
check "  ... none of the refusals above made an output" "absent $R/x.npy && absent $R/m2"
bad "npy: shape whose element count overflows" "over.npy: .npy shape too large \(its element count overflows 64 bits at dimension 1\)" import --npy $R/over.npy --db $R/x.db --hook $H
bad "npy: 8-byte elements whose byte count overflows" "over2.npy: .npy shape too large" sae-train --npy $R/over2.npy --out $R/s_over
bad "sae cfg.json: d_in x d_sae far beyond the weights file" "W_enc' has shape \[8,16\] but .*sae_big/cfg.json says d_in 100000000, d_sae 100000000" sae-eval --sae $R/sae_big --npy acts.npy
# W_enc stored as [8, 16, 1]: the message showed [8, 16], the shape cfg.json asks for (an audit)
cp -r "$W/sae8" "$W/$R/sae_3d"
python3 -c 'import json, struct, sys
p = sys.argv[1]; b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); h["W_enc"]["shape"] = h["W_enc"]["shape"] + [1]
t = json.dumps(h).encode(); t += b" " * (-len(t) % 8)
open(p, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])' "$W/$R/sae_3d/sae_weights.safetensors"
LAST=""
bad "sae weights: a 3-D W_enc" "sae_3d/sae_weights.safetensors: tensor 'W_enc' has shape \[8,16,1\] but" sae-eval --sae $R/sae_3d --npy acts.npy
bad "sae cfg.json: d_in above the limit" "sae_huge/cfg.json: 'd_in' is 1e\+12, above the limit of 1e8" sae-eval --sae $R/sae_huge --npy acts.npy
bad "sae cfg.json: topk without k" "sae_nok/cfg.json: topk SAE without 'k'" sae-eval --sae $R/sae_nok --npy acts.npy

# -- NaN and Inf in weights: refused at load, naming the tensor and the index --
cp -r "$W/model" "$W/$R/m_nan"; last_f32 $R/m_nan/model.safetensors '\x00\x00\xc0\x7f'
cp -r "$W/model" "$W/$R/m_inf"; last_f32 $R/m_inf/model.safetensors '\x00\x00\x80\xff'
cp -r "$W/sae8" "$W/$R/sae_nan"; last_f32 $R/sae_nan/sae_weights.safetensors '\x00\x00\xc0\x7f'
cp -r "$W/sae8" "$W/$R/sae_inf"; last_f32 $R/sae_inf/sae_weights.safetensors '\x00\x00\x80\x7f'
cp "$W/ex.db" "$W/$R/ex_nan.db"
LAST=""
bad "model: a NaN weight (forward)" "m_nan/model.safetensors: tensor '[a-z0-9_.]+' has a non-finite value \(nan\) at index [0-9]+" forward --model $R/m_nan --tokens 1,2,3 --hook $H --npy $R/o.npy
bad "model: a -Inf weight (forward)" "m_inf/model.safetensors: tensor '[a-z0-9_.]+' has a non-finite value \(-inf\) at index" forward --model $R/m_inf --tokens 1,2,3 --hook $H --npy $R/o.npy
bad "model: a NaN weight (generate)" "m_nan/model.safetensors: tensor .* non-finite" generate --model $R/m_nan --tokenizer tok --prompt the
bad "model: a NaN weight (extract: no database made)" "m_nan/model.safetensors: tensor .* non-finite" extract --model $R/m_nan --tokenizer tok --corpus small.txt --hook $H --db $R/nan_ex.db --ctx 8
bad "SAE: a NaN weight (sae-eval)" "sae_nan/sae_weights.safetensors: tensor '(W_enc|W_dec|b_enc|b_dec)' has a non-finite value \(nan\) at index [0-9]+" sae-eval --sae $R/sae_nan --npy acts.npy
bad "SAE: an Inf weight (sae-eval)" "sae_inf/sae_weights.safetensors: tensor .* non-finite value \(inf\)" sae-eval --sae $R/sae_inf --npy acts.npy
# finite inputs that overflow float32 inside the SAE: refused, not "mse -nan" with exit 0
cp "$W/acts.npy" "$W/$R/fltmax.npy"
for r in $(seq 0 15); do for c in $(seq 0 7); do put_f32 $R/fltmax.npy $r $c '\xff\xff\x7f\x7f'; done; done
LAST=""
bad "sae-eval: activations at float32's limit" "sae8 on $R/fltmax.npy: the SAE's (latent activations|reconstruction) (are|is) not finite \((-?inf|-?nan)\): its weights or the inputs are too large for float32" sae-eval --sae sae8 --npy $R/fltmax.npy
npy_raw $R/zeros.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 8), }" "$(printf '\\x00%.0s' $(seq 128))"
LAST=""
bad "sae-eval: a true direction of zeros" "$R/zeros.npy: row 0 \(a true direction\) is all zeros" sae-eval --sae sae8 --ground-truth $R/zeros.npy
bad "sae-train --truth: a true direction of zeros" "$R/zeros.npy: row 0 \(a true direction\) is all zeros" "${T[@]}" --out $R/s_zt --truth $R/zeros.npy
EXACT="saelite sae-eval: --threshold must be in [-1, 1], got 2 (see 'saelite sae-eval --help')"
bad "sae-eval: a cosine threshold above 1" "threshold" sae-eval --sae sae8 --ground-truth $R/zeros.npy --threshold 2
EXACT="saelite sae-eval: --max-tokens must be >= 0, got -1 (see 'saelite sae-eval --help')"
bad "sae-eval: negative --max-tokens" "max-tokens" sae-eval --sae sae8 --npy acts.npy --max-tokens -1
bad "SAE: a NaN weight (analyze)" "sae_nan/sae_weights.safetensors: tensor .* non-finite" analyze --db $R/ex_nan.db --sae $R/sae_nan --no-model
# 1e38, not 1e30: at 1e30 the loss became inf on the AMD machines but stayed finite (8e60 at
# step 2, no latent fired) on an Intel Xeon; a first Adam step of 1e38 overflows float32 anywhere
bad "sae-train: loss inf on the first step (absurd --lr)" "loss became (-?nan|inf)" "${T[@]}" --out $R/s_lr --lr 1e38
check "sae-train: the failed run leaves no output directory" "absent $R/s_lr"
# a JumpReLU whose thresholds overflow fires nothing, so its loss stayed finite and +inf
# thresholds were saved with exit 0; explicit zeros were replaced by defaults (an audit)
bad "sae-train: diverged JumpReLU thresholds" "training diverged: latent .* threshold" "${T[@]}" --out $R/s_jr --arch jumprelu --jr-lr-mult 1e30
check "sae-train: the diverged run leaves no output directory" "absent $R/s_jr"
bad "superpose: a diverged run with finite floats (--lr 1e9) is refused" "loss diverged at step" superpose --lr 1e9 --steps 10 --sparsity 0 -o sp_div
check "superpose: the diverged run wrote nothing" "absent sp_div"
bad "sae-train: --l1 0" "--l1 must be > 0" "${T[@]}" --out $R/s_l1 --arch relu --l1 0
bad "sae-train: --jr-bandwidth 0" "--jr-bandwidth must be > 0" "${T[@]}" --out $R/s_bw --arch jumprelu --jr-bandwidth 0
bad "sae-train: --k-aux 0" "--k-aux must be >= 1" "${T[@]}" --out $R/s_ka --k-aux 0
mkdir -p "$W/$R/lmcorp"; printf 'the cat sat on the mat.\n\nthe dog sat on the log.\n\nanother doc with the cat.\n\na fourth one.\n' > "$W/$R/lmcorp/c.txt"
LAST=""
bad "train-lm: loss non-finite at step 2 (absurd --lr)" "loss became .* at step 2" train-lm --corpus $R/lmcorp/c.txt --tokenizer tok --layers 1 --d-model 8 --heads 2 --ctx 4 --batch 2 --steps 5 --lr 1e30 --val-frac 0.5 --warmup 0 -o $R/lm_bad
check "train-lm: the failed run leaves no output directory" "absent $R/lm_bad"
# a damaged training state (a NaN in the file's last float) is refused on --resume
LMA=(train-lm --corpus $R/lmcorp/c.txt --tokenizer tok --layers 1 --d-model 8 --heads 2 --ctx 4 --batch 2 --steps 5 --val-frac 0.5 --warmup 0)
setup "${LMA[@]}" --max-time 0.000001 -o $R/lm_dmg
last_f32 $R/lm_dmg/train_state.safetensors '\x00\x00\xc0\x7f'
LAST=""
bad "train-lm --resume from a damaged training state" "lm_dmg/train_state.safetensors: tensor '(params|adam_m|adam_v)' has nan at index [0-9]+: the file is damaged" "${LMA[@]}" --resume -o $R/lm_dmg
# damaged metadata: an all-zero RNG (xoshiro stays at 0: every batch was window 0) and a step past
# the run's --steps ("already finished", exit 0) resumed silently (an audit)
for what in rng step; do
    setup "${LMA[@]}" --max-time 0.000001 -o $R/lm_$what
    python3 - "$W/$R/lm_$what/train_state.safetensors" $what <<'PY'
import json, struct, sys
p, what = sys.argv[1], sys.argv[2]
b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
h["__metadata__"].update({"rng": "0" * 64} if what == "rng" else {"step": "1000"})
hj = json.dumps(h).encode(); open(p, "wb").write(struct.pack("<Q", len(hj)) + hj + b[8 + n:])
PY
done
LAST=""
bad "train-lm --resume from an all-zero rng state" "lm_rng/train_state.safetensors: an all-zero rng state: the file is damaged" "${LMA[@]}" --resume -o $R/lm_rng
bad "train-lm --resume from a step past --steps" "lm_step/train_state.safetensors: bad step '1000' \(the run has 5 steps\): the file is damaged" "${LMA[@]}" --resume -o $R/lm_step
bad "train-lm over a run's directory without --resume (refused, not replaced)" "lm_dmg already holds a training state \(train_state.safetensors\): --resume continues its run, --force overwrites it" "${LMA[@]}" -o $R/lm_dmg
# a batch past the machine's memory is refused before anything is allocated or made (it grew to
# 24 GB and was killed, leaving -o behind), and one whose tokens overflow the model's int
bad "train-lm --batch past physical memory" "--batch 100000000: a step over 100000000 x 4 tokens needs [0-9.]+ GB .* more than this machine's" "${LMA[@]}" --batch 100000000 -o $R/lm_mem
bad "train-lm --batch x --ctx past INT32_MAX" "--batch 1000000000 x --ctx 4: 4e\+09 tokens per step" "${LMA[@]}" --batch 1000000000 -o $R/lm_mem
# optimizer flags out of range are refused (they trained, wrongly: a negative learning rate)
bad "train-lm --min-lr-frac -1" "--min-lr-frac must be" "${LMA[@]}" --min-lr-frac -1 -o $R/lm_opt
bad "train-lm --min-lr-frac 2" "--min-lr-frac must be" "${LMA[@]}" --min-lr-frac 2 -o $R/lm_opt
bad "train-lm --weight-decay -50" "--weight-decay must be" "${LMA[@]}" --weight-decay -50 -o $R/lm_opt
bad "train-lm --clip -1" "--clip must be" "${LMA[@]}" --clip -1 -o $R/lm_opt

# -- outputs that are not regular files (the rule of common/fileio.h); the real /dev/full and
#    /dev/null are never touched: stand-ins are made with mknod in $W/r2 --
E=(export --db good.db --hook $H)
(cd "$W" && "$BIN" "${E[@]}" --npy $R/ref.npy > /dev/null 2>&1)
mkdir -p "$W/$R/outdir" "$W/$R/real"; : > "$W/$R/real/t.npy"
ln -s nowhere/missing.npy "$W/$R/dangle.npy"; ln -s outdir "$W/$R/ldir.npy"
ln -s real/t.npy "$W/$R/l1.npy"; ln -s l1.npy "$W/$R/l2.npy"
LAST=""
bad "export: output is a directory" "outdir: is a directory; refusing" "${E[@]}" --npy $R/outdir
bad "export: output is a dangling symlink" "dangle.npy: symlink to a missing file" "${E[@]}" --npy $R/dangle.npy
check "export: the dangling link is still a link, its target not created" '[ -L "$W/$R/dangle.npy" ] && [ ! -e "$W/$R/nowhere" ]'
bad "export: output is a symlink to a directory" "ldir.npy: is a directory \(through a symlink\)" "${E[@]}" --npy $R/ldir.npy
(cd "$W" && "$BIN" "${E[@]}" --npy $R/l2.npy > /dev/null 2>&1)
check "export through a symlink chain writes the final target" 'cmp -s "$W/$R/ref.npy" "$W/$R/real/t.npy"'
check "  ... and both links are still links" '[ -L "$W/$R/l1.npy" ] && [ -L "$W/$R/l2.npy" ]'
mkfifo "$W/$R/fifo"
cat "$W/$R/fifo" > "$W/$R/from_fifo" & rd=$!
(cd "$W" && "$BIN" "${E[@]}" --npy $R/fifo > /dev/null 2>&1); frc=$?
wait $rd
check "export to a FIFO writes through to its reader" '[ $frc -eq 0 ] && [ -p "$W/$R/fifo" ]'
check "  ... the reader got the whole array" 'cmp -s "$W/$R/ref.npy" "$W/$R/from_fifo"'
LAST=""
if mknod "$W/$R/full" c 1 7 2> /dev/null && mknod "$W/$R/null" c 1 3 2> /dev/null; then
    LAST=""
    bad "export to a full device (stand-in 1,7): ENOSPC reported" "full: write failed: No space left on device" "${E[@]}" --npy $R/full
    check "  ... the device node is still a character device" '[ -c "$W/$R/full" ]'
    bad "export --tokens-npy to a full device (the activations file is not left alone)" "full: write failed: No space left on device" export --db ex.db --hook $H --npy $R/o2.npy --tokens-npy $R/full
    bad "synth --truth to a full device" "full: write failed: No space left on device" synth --d 4 --features 8 --tokens 16 --out $R/null --truth $R/full
    check "  ... /dev/null stand-in still a device after a write" '[ -c "$W/$R/null" ] && [ -c "$W/$R/full" ]'
    ln -s full "$W/$R/lfull"; LAST=""
    bad "export to a symlink to a full device" "lfull: write failed: No space left on device" "${E[@]}" --npy $R/lfull
else
    skip=$((skip + 1)); echo "SKIP full-device cases: mknod refused (not root)"
fi

# -- nothing half-written after a failure --
LAST=""
bad "sae-train over a trained SAE without --resume" "sae8 already holds a trained SAE \(sae_weights.safetensors\): --resume continues its run, --force overwrites it" "${T[@]}" --out sae8
bad "sae-train --resume into a missing directory" "s_nores/checkpoint.bin: no checkpoint to --resume" "${T[@]}" --out $R/s_nores --resume
check "  ... and creates no directory" "absent $R/s_nores"
# a damaged checkpoint (a NaN in Adam's second moment, the last float before the S int64
# counters, the AuxK float and the 8-byte checksum) is refused on --resume, not trained on until
# the loss is NaN: by its checksum, and by the value check where the checksum was recomputed
setup sae-train --npy acts.npy --out $R/ckd --d-sae 16 --k 2 --tokens 2560 --batch 16 --eval-tokens 16 --max-steps 5
cp -r "$W/$R/ckd" "$W/$R/ckd2"
ck_poke() { # ck_poke FILE BYTES [resum]: the 4 bytes before the counters, AuxK and the sum
    python3 -c 'import sys
p, b, resum = sys.argv[1], bytes.fromhex(sys.argv[2]), len(sys.argv) > 3
d = bytearray(open(p, "rb").read()); o = len(d) - 8 - 4 - 16 * 8 - 4; d[o:o + 4] = b
if resum:
    h = 0xcbf29ce484222325
    for x in d[:-8]: h = ((h ^ x) * 0x100000001b3) & 0xffffffffffffffff
    d[-8:] = h.to_bytes(8, "little")
open(p, "wb").write(bytes(d))' "$@"
}
ck_poke "$W/$R/ckd/checkpoint.bin" 0000c07f resum
LAST=""
bad "sae-train --resume from a damaged checkpoint (checksum recomputed)" "ckd/checkpoint.bin: nan at index [0-9]+ of the checkpoint's Adam's second moment: the file is damaged" sae-train --npy acts.npy --out $R/ckd --d-sae 16 --k 2 --tokens 2560 --batch 16 --eval-tokens 16 --resume
# an in-range value (3.0) changed: only the checksum sees it (it resumed into another SAE, exit 0)
ck_poke "$W/$R/ckd2/checkpoint.bin" 00004040
LAST=""
bad "sae-train --resume from a checkpoint with a changed value" "ckd2/checkpoint.bin: the checkpoint fails its checksum: the file is damaged" sae-train --npy acts.npy --out $R/ckd2 --d-sae 16 --k 2 --tokens 2560 --batch 16 --eval-tokens 16 --resume
head -c -3 "$W/$R/ckd2/checkpoint.bin" > "$W/$R/ckd2/c" && mv "$W/$R/ckd2/c" "$W/$R/ckd2/checkpoint.bin"
LAST=""
bad "sae-train --resume from a cut checkpoint" "ckd2/checkpoint.bin: checkpoint is truncated \\([0-9]+ bytes, want [0-9]+\\)" sae-train --npy acts.npy --out $R/ckd2 --d-sae 16 --k 2 --tokens 2560 --batch 16 --eval-tokens 16 --resume
bad "sae-train: k above d-sae leaves no directory" "k 32 must be in 1..d_sae" "${T[@]}" --k 32 --out $R/s_k
check "  ... none" "absent $R/s_k"
bad "sae-train: output under a regular file" "acts.npy: exists and is not a directory|acts.npy/x" "${T[@]}" --out acts.npy
mkdir -p "$W/$R/rep"; cp "$W/ex.db" "$W/$R/rep/ex.db"
(cd "$W" && "$BIN" analyze --db $R/rep/ex.db --sae sae8 --no-model --all > /dev/null 2>&1)
LAST=""
bad "report: ground truth of the wrong shape (after the directory was made)" "ids16.npy: ground truth must be \[n_features >= 1, 8\], got shape \(16,\)" report --db $R/rep/ex.db --sae sae8 --ground-truth ids16.npy --out $R/rep/out
check "  ... the report directory it created is gone" "absent $R/rep/out"
# tampered analysis tables (an audit drew each of these without a word): one line naming the
# database, the table, the feature and the value, and no output directory left behind
RF=$(sqlite3 "$W/$R/rep/ex.db" "SELECT feature FROM ana_acts WHERE kind = 'top' AND dict_id = (SELECT max(id) FROM ana_dicts WHERE kind = 'sae') GROUP BY feature HAVING count(*) >= 3 LIMIT 1")
RD="dict_id = (SELECT max(id) FROM ana_dicts WHERE kind = 'sae')"
rep_hostile() { # rep_hostile NAME REGEX SQL: a copy of the analysed database changed by SQL
    local name=$1 re=$2 sql=$3
    cp "$W/$R/rep/ex.db" "$W/$R/rep/h_$name.db"
    sqlite3 "$W/$R/rep/h_$name.db" "$sql"
    LAST=""
    bad "report: tampered $name" "h_$name.db: $re" report --db $R/rep/h_$name.db --sae sae8 --features $RF --out $R/rep/out_$name
    check "  ... no output directory" "absent $R/rep/out_$name"
}
F="feature $RF"
rep_hostile inf_max "ana_features: $F: value inf: max_act is not a finite value >= 0" "UPDATE ana_features SET max_act = 9e999 WHERE $RD AND feature = $RF"
rep_hostile neg_density "ana_features: $F: value -0.5: density is outside \\[0, 1\\]" "UPDATE ana_features SET density = -0.5 WHERE $RD AND feature = $RF"
rep_hostile big_density "ana_features: $F: value 5: density is outside" "UPDATE ana_features SET density = 5 WHERE $RD AND feature = $RF"
rep_hostile text_density "ana_features: $F, density: 'abc' is not a number" "UPDATE ana_features SET density = 'abc' WHERE $RD AND feature = $RF"
rep_hostile inf_act "ana_acts: $F, top rank 1: value inf: is not a finite activation" "UPDATE ana_acts SET value = 9e999 WHERE $RD AND feature = $RF AND kind = 'top' AND rank = 1"
rep_hostile neg_act "ana_acts: $F, top rank 0: value -5: is not a finite activation >= 0" "UPDATE ana_acts SET value = -5 WHERE $RD AND feature = $RF AND kind = 'top' AND rank = 0"
rep_hostile interval_huge "ana_acts: $F, quantile rank [0-9]+: quantile interval 2147483647 is outside 0..99999" "UPDATE ana_acts SET interval = 2147483647 WHERE $RD AND feature = $RF AND kind = 'quantile'"
rep_hostile top_twice "ana_acts: $F: two 'top' rows at sequence" "INSERT INTO ana_acts SELECT dict_id, feature, kind, interval, rank + 100, seq_id, pos, token, value FROM ana_acts WHERE $RD AND feature = $RF AND kind = 'top'"
rep_hostile rank_twice "ana_acts: $F: two 'top' rows with rank 0" "UPDATE ana_acts SET rank = 0 WHERE $RD AND feature = $RF AND kind = 'top'"
rep_hostile hist_neg "ana_hist: $F: value -50: count is negative" "UPDATE ana_hist SET count = -50 WHERE $RD AND feature = $RF"
rep_hostile hist_disorder "ana_hist: $F: value [0-9.e-]+: bin starts before the previous bin ends" "UPDATE ana_hist SET bin = 100 - bin WHERE $RD AND feature = $RF; INSERT INTO ana_hist SELECT dict_id, feature, 200, lo / 10, lo / 5, 1 FROM ana_hist WHERE $RD AND feature = $RF AND bin = (SELECT min(bin) FROM ana_hist WHERE $RD AND feature = $RF)"
rep_hostile hist_text "ana_hist: row [0-9]+: 'abc' is not a number" "UPDATE ana_hist SET count = 'abc' WHERE $RD AND feature = $RF"
rep_hostile geom_text "ana_geometry: row [0-9]+: 'abc' is not a number" "UPDATE ana_geometry SET count = 'abc' WHERE $RD AND source = 'decoder'"
rep_hostile hist_zero_lo "ana_hist: $F: value 0: bin edge lo is not a finite value > 0" "UPDATE ana_hist SET lo = 0 WHERE $RD AND feature = $RF"
rep_hostile feat_oob "ana_features: feature 99999 is outside 0..15" "INSERT INTO ana_features VALUES ((SELECT max(id) FROM ana_dicts WHERE kind = 'sae'), 99999, 5, 0.9, 1, 2, NULL, NULL, NULL, NULL)"
rep_hostile feat_neg "ana_features: feature -5 is outside 0..15" "INSERT INTO ana_features VALUES ((SELECT max(id) FROM ana_dicts WHERE kind = 'sae'), -5, 5, 0.9, 1, 2, NULL, NULL, NULL, NULL)"
rep_hostile dict_ntok0 "ana_dicts: analysis [0-9]+ of 'sae8': .*n_tokens 0 \\(each must be >= 1\\)" "UPDATE ana_dicts SET n_tokens = 0 WHERE id = (SELECT max(id) FROM ana_dicts WHERE kind = 'sae')"
rep_hostile dict_din0 "ana_dicts: analysis [0-9]+ of 'sae8': d_in 0" "UPDATE ana_dicts SET d_in = 0 WHERE id = (SELECT max(id) FROM ana_dicts WHERE kind = 'sae')"
# a bin width of 1e-12 degrees: lround overflowed int and the run said only "out of memory"
rep_hostile geom_tiny "ana_geometry: bin width 1e-12 degrees .* bins \\(more than 100000\\)" "UPDATE ana_geometry SET hi_deg = lo_deg + 1e-12 WHERE $RD AND bin = 0 AND source = 'decoder'"
rep_hostile geom_neg "ana_geometry: source 'decoder': value -1e\\+06: count is negative" "UPDATE ana_geometry SET count = -1000000 WHERE $RD AND source = 'decoder'"
rep_hostile nearest_inf "ana_features: feature [0-9]+: value inf: nearest_cos is outside \\[-1, 1\\]" "UPDATE ana_features SET nearest_cos = 9e999 WHERE $RD"
rep_hostile logit_inf "ana_logits: feature $RF, sign 1: value inf: is not a finite logit effect" "INSERT INTO ana_logits VALUES ((SELECT max(id) FROM ana_dicts WHERE kind = 'sae'), $RF, 1, 0, 5, 9e999)"
rep_hostile logit_text "ana_logits: feature $RF, sign -1: 'abc' is not a number" "INSERT INTO ana_logits VALUES ((SELECT max(id) FROM ana_dicts WHERE kind = 'sae'), $RF, -1, 0, 5, 'abc')"
# ranks that disagree with the values are drawn in value order (rank only restates it): exit 0
cp "$W/$R/rep/ex.db" "$W/$R/rep/h_rankorder.db"
sqlite3 "$W/$R/rep/h_rankorder.db" "UPDATE ana_acts SET rank = 100 - rank WHERE $RD AND feature = $RF AND kind = 'top'"
check "report: ranks out of value order draw the values in order" "(cd \"\$W\" && \"\$BIN\" report --db $R/rep/h_rankorder.db --sae sae8 --features $RF --out $R/rep/out_rankorder) > /dev/null 2>&1 && [ -f \"\$W/$R/rep/out_rankorder/feature_$RF.png\" ]"
LAST=""
bad "train-lm: no held-out documents (refused before creating -o)" "no held-out documents" train-lm --corpus small.txt --tokenizer tok --layers 1 --d-model 8 --heads 2 --ctx 4 --steps 2 -o $R/lm_noval
check "  ... no directory" "absent $R/lm_noval"

# -- messages that name the file and the real problem --
npy_raw $R/be.npy "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 8), }"
npy_raw $R/obj.npy "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }" '\0\0\0\0\0\0\0\0'
npy_raw $R/rec.npy "{'descr': [('a', '<f4'), ('b', '<f4')], 'fortran_order': False, 'shape': (1,), }" '\0\0\0\0\0\0\0\0'
npy_raw $R/u1.npy "{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }" '\0'
npy_raw $R/empty.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 16), }"
npy_raw $R/nocols.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 0), }"
npy_raw $R/trail.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }" '\0\0\x80\x3f\0\0\0\x40XYZ'
npy_raw $R/short.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }" '\0\0\x80\x3f'
# 1e10 x 32 floats (1.3 TB) in a sparse file: the data is all there, the machine's memory is not
npy_raw $R/huge.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (10000000000, 32), }"
truncate -s +1280000000000 "$W/$R/huge.npy" 2>/dev/null
LAST=""
bad "npy: big-endian dtype, quoted whole" "be.npy: unsupported .npy dtype '>f4' \(big-endian" sae-train --npy $R/be.npy --out $R/s_m
bad "npy: object dtype" "obj.npy: unsupported .npy dtype '\|O' \(an object array" sae-train --npy $R/obj.npy --out $R/s_m
bad "npy: structured dtype" "rec.npy: structured .npy dtype \(a record array" sae-train --npy $R/rec.npy --out $R/s_m
bad "npy: uint8 dtype" "u1.npy: unsupported .npy dtype '\|u1' \(want <f4" import --npy $R/u1.npy --db $R/x.db --hook $H
bad "npy: a [0, 16] array is empty, not 'got 2 dims' (sae-train)" "empty.npy: expected \[tokens, d_in\] with tokens and d_in >= 1, got shape \(0, 16\) \(an empty array\)" sae-train --npy $R/empty.npy --out $R/s_m
bad "npy: a [0, 16] array (import)" "empty.npy: want a \[tokens, width\] array with at least one token .* got shape \(0, 16\)" import --npy $R/empty.npy --db $R/x.db --hook $H
bad "npy: a [4, 0] array (sae-train)" "nocols.npy: .* got shape \(4, 0\) \(an empty array\)" sae-train --npy $R/nocols.npy --out $R/s_m
bad "npy: 1-d array names its shape" "ids16.npy: expected \[tokens, d_in\], got 1 dims \(shape \(16,\)\)" sae-train --npy ids16.npy --out $R/s_m
bad "npy: trailing bytes after the data" "trail.npy: 3 bytes after the .npy data \(shape \(1, 2\) needs 8 bytes\)" sae-train --npy $R/trail.npy --out $R/s_m
bad "npy: trailing bytes (import)" "trail.npy: 3 bytes after the .npy data" import --npy $R/trail.npy --db $R/x.db --hook $H
if [ "$(stat -c %s "$W/$R/huge.npy")" -gt 1000000000000 ]; then
bad "npy: an array past the machine's memory is refused before loading" "huge.npy: loading 320000000000 elements needs 1280.0 GB, more than this machine's" sae-train --npy $R/huge.npy --out $R/s_m
fi
bad "npy: truncated data names the shape" "short.npy: truncated .npy data \(shape \(2, 2\) needs 4 elements" sae-train --npy $R/short.npy --out $R/s_m
check "  ... none of the refusals above made an output directory" "absent $R/s_m"
bad "extract: --ctx 0 is refused (its check says positive)" "--ctx must be >= 1, got 0" extract --model model --tokenizer tok --corpus small.txt --hook $H --db $R/c0.db --ctx 0

# ---- outputs over inputs and late checks (a hostile audit, 2026-12-04) -------------------------
LAST=""
bad "export: --npy over the database it reads" "good.db: is the database being exported from" export --db good.db --hook $H --npy good.db
bad "export: --npy over the database's write-ahead log (lost committed tables)" "good.db-wal: is the database being exported from \\(or its journal\\)" export --db good.db --hook $H --npy good.db-wal
# an output onto the input it reads (forward's weights, a report over its own database)
LAST=""
EXACT="saelite forward: --npy model/model.safetensors would replace a file of the input directory model; write it elsewhere (see 'saelite forward --help')" bad "forward: --npy over the model's weights" "" forward --model model --tokens 1 --logits --npy model/model.safetensors
mkdir -p "$W/$R/rr"; cp "$W/good.db" "$W/$R/rr/index.html"
LAST=""
bad "report: a --db named index.html inside --out" "--db $R/rr/index.html is a file report writes in --out $R/rr" report --db $R/rr/index.html --sae sae8 --out $R/rr
bad "report: a directory as --training-log" "$R: is a directory, not a training log" report --db $R/rep/ex.db --sae sae8 --out $R/rtl --training-log $R
bad "export: --npy and --tokens-npy on one (existing) file" "acts.npy: the activations and the token ids would both go to this file" export --db good.db --hook $H --npy acts.npy --tokens-npy ./acts.npy
bad "synth: --out over its own --db" "--out and --db name the same file good.db" synth --out good.db --truth $R/t.npy --d 8 --features 16 --tokens 16 --db good.db
bad "synth: --out and --truth on one file" "--out and --truth name the same file" synth --out $R/s.npy --truth $R/s.npy --d 8 --features 16 --tokens 16
bad "synth: --spec over --out" "--out and --spec name the same file" synth --out acts.npy --truth $R/t.npy --d 8 --features 16 --tokens 16 --spec ./acts.npy
bad "synth: a damaged --db fails before --out and --truth are written" "text.db: not a database" synth --out $R/s.npy --truth $R/t.npy --d 8 --features 16 --tokens 16 --db text.db
bad "synth: a --db hook of another width fails before --out and --truth are written" "good.db: hook $H is stored with width [0-9]+, not 16" synth --out $R/s.npy --truth $R/t.npy --d 16 --features 16 --tokens 16 --db good.db --hook $H
check "synth: the refused run wrote neither array" "absent $R/s.npy && absent $R/t.npy"
bad "synth: an empty --hook" "--hook needs a name" synth --out $R/s.npy --truth $R/t.npy --d 8 --features 16 --tokens 16 --db good.db --hook ""
bad "import: an empty --hook" "acts.npy: the hook to import into needs a name" import --npy acts.npy --db good.db --hook ""
bad "synth: --spec in a missing directory fails first, named as given" "nodir/g.json: cannot create: directory" synth --out $R/s.npy --truth $R/t.npy --d 8 --features 16 --tokens 16 --spec nodir/g.json
bad "synth: a seed past 2^53 with --spec is refused, not rounded to 2^53" "--spec keeps seeds 0..2\^53 .*9007199254740993" synth --out $R/s.npy --truth $R/t.npy --d 8 --features 16 --tokens 16 --seed 9007199254740993 --spec $R/g.json
bad "sae-train: a bad --truth fails before training (no OUT)" "text.npy: not a .npy file" "${T[@]}" --truth text.npy
bad "sae-train: --truth of another width, its shape named" "wide.npy: expected \[features, 8\] \(the SAE's input width\), got shape \(16, 32\)" "${T[@]}" --truth wide.npy
bad "sae-train: --expansion past 2^30 latents (was an int overflow to d_sae 32)" "--expansion 2.68435e\+08 x d_in 8 gives 2.147e\+09 latents" sae-train --npy acts.npy --out s1 --expansion 268435458 --k 2 --tokens 256 --batch 16
bad "sae-train: --max-norm-ratio without a store (was ignored)" "--max-norm-ratio filters a store's tokens" "${T[@]}" --max-norm-ratio 2
bad "sae-train: a batch past the machine's memory" "--batch 2000000000: a batch of 8-float rows needs 64.0 GB, more than this machine's" "${T[@]}" --batch 2000000000 --tokens 4000000000
bad "sae-train: --tokens past int64 says out of range" "--tokens: 9223372036854775808 is out of range" "${T[@]}" --tokens 9223372036854775808
setup forward --model model --tokens 1,2,3,4,5,6,7,8 --hook $H --npy acts8.npy
setup sae-train --npy acts.npy --out s_resume --d-sae 16 --k 2 --tokens 256 --batch 16 --eval-tokens 16 --max-steps 2
LAST=""
bad "sae-train: --resume with another --k names the flag" "s_resume/checkpoint.bin: the checkpoint's run had --k 2 \\(this run 3\\); resume with the same flags" sae-train --npy acts.npy --out s_resume --d-sae 16 --k 3 --tokens 256 --batch 16 --eval-tokens 16 --resume
bad "sae-train: --resume with another --val-frac (was accepted)" "s_resume/checkpoint.bin: the checkpoint's run had .val_frac 0.05., this one .val_frac 0.2. \\(--val-frac\\)" sae-train --npy acts.npy --out s_resume --d-sae 16 --k 2 --tokens 256 --batch 16 --eval-tokens 16 --resume --val-frac 0.2
bad "sae-train: --resume on another --npy file of the same width" "s_resume/checkpoint.bin: the checkpoint's run had .rows 16., this one .rows 8. \\(the --npy file's rows\\)" sae-train --npy acts8.npy --out s_resume --d-sae 16 --k 2 --tokens 256 --batch 16 --eval-tokens 16 --resume
mkdir -p "$W/$R/adir" "$W/$R/sdir/sae_weights.safetensors"; cp "$W/sae8/cfg.json" "$W/$R/sdir/"
npy_raw $R/zero.npy "{'descr': '<f4', 'fortran_order': False, 'shape': (16, 8), }"; head -c 512 /dev/zero >> "$W/$R/zero.npy"
LAST=""
bad "sae-train: a directory as --npy" "adir: is a directory, not a .npy file" sae-train --npy $R/adir --out s1
# (the runner named its command, which the line's prefix names again)
bad "sae-train: an empty --out" "^saelite sae-train: no output directory given \\(--out\\)" "${T[@]}" --out ""
bad "sae-train: --val-frac leaving no training rows, the file named" "acts.npy: its 16 rows all went to validation \\(--val-frac 0.9999\\)" "${T[@]}" --val-frac 0.9999
bad "sae-train: all-zero activations, the file named" "zero.npy: the 16384 rows sampled to set the input scale have zero" sae-train --npy $R/zero.npy --out s1 --d-sae 16 --k 2 --tokens 256 --batch 16
bad "sae-eval: a directory where the weights should be" "sae_weights.safetensors: is a directory, not a safetensors file" sae-eval --sae $R/sdir --npy acts.npy
bad "attention: a negative --head (was taken as all heads)" "--head must be >= 0, got -5" attention --model model --tokenizer tok --text "the cat" --layer 0 --out $R/a.png --head -5
bad "attention: --npy in a missing directory fails before the PNG is written" "nodir/a.npy: cannot create: directory" attention --model model --tokenizer tok --text "the cat" --layer 0 --out $R/a.png --npy nodir/a.npy
bad "attention: --out and --npy on one file" "--out and --npy name the same file" attention --model model --tokenizer tok --text "the cat" --layer 0 --out $R/a.png --npy ./$R/a.png
bad "attribute: --png in a missing directory fails before --npy and --csv are written" "nodir/x.png: cannot create: directory" attribute --model model --tokenizer tok --sae sae8 --text "the cat sat" --npy $R/o.npy --csv $R/o.csv --png nodir/x.png
# outputs on the inputs (each replaced its input, exit 0)
bad "attribute: --csv on the SAE's cfg.json" "--csv sae8/cfg.json would replace a file of the input directory sae8" attribute --model model --tokenizer tok --sae sae8 --text "the cat sat" --csv sae8/cfg.json
bad "attribute: --npy on the model's weights" "--npy model/model.safetensors would replace a file of the input directory model" attribute --model model --tokenizer tok --sae sae8 --text "the cat sat" --npy model/model.safetensors
bad "attention: --out on the model's weights" "--out model/model.safetensors would replace a file of the input directory model" attention --model model --tokenizer tok --text "the cat" --layer 0 --out model/model.safetensors
bad "attention: --npy on the tokenizer's merges" "--npy tok/vocab.bpe would replace a file of the input directory tok" attention --model model --tokenizer tok --text "the cat" --layer 0 --out $R/a.png --npy tok/vocab.bpe
mkdir -p "$W/$R/lmrun" && echo state > "$W/$R/lmrun/train_state.safetensors"
printf '\n\n  \n' > "$W/$R/blank.txt"
mkdir -p "$W/$R/bt_in" && cp "$W/small.txt" "$W/$R/bt_in/encoder.json"
LAST=""
bad "bpe-train: a corpus named encoder.json in -o" "encoder.json is an input" bpe-train --vocab 300 $R/bt_in/encoder.json -o $R/bt_in
bad "init-model: over a train-lm run (its model replaced, its state left)" "lmrun holds a train-lm run" init-model --layers 1 --d-model 8 --heads 2 -o $R/lmrun
bad "bpe-train: a corpus without text (trained byte tokens alone, exit 0)" "blank.txt: no text to train on" bpe-train --vocab 300 $R/blank.txt -o $R/tk_blank
check "  ... no tokenizer was written" "absent $R/tk_blank"
bad "bpe-train: over a tokenizer already in -o (replaced without a word, exit 0)" "tok already holds a tokenizer \(encoder.json\): give another -o, or --force" bpe-train --vocab 300 small.txt -o tok
cp -r "$W/tok" "$W/$R/tok_force"
check "  ... --force replaces it" "(cd \"\$W\" && \"\$BIN\" bpe-train --vocab 280 --min-freq 1 small.txt -o $R/tok_force --force) > /dev/null 2>&1 && ! cmp -s \"\$W/tok/encoder.json\" \"\$W/$R/tok_force/encoder.json\""
LAST=""
bad "embed: an expression ending with an operator (read as if it were not there)" "ends with an operator" embed --model model --tokenizer tok "the -"
bad "attribute: --hook other than the SAE's (its codes there read as its features, exit 0)" "sae8: the SAE was trained on blocks.0.hook_resid_post, not --hook blocks.0.hook_resid_pre" attribute --model model --tokenizer tok --sae sae8 --hook blocks.0.hook_resid_pre --text "the cat"
bad "attribute: a token id with a space ('# 5' was token 5)" "target '# 5': not a token id below" attribute --model model --tokenizer tok --sae sae8 --text "the cat" --target "# 5"
bad "attribute: a token id with a sign ('#+5' was token 5)" "target '#\\+5': not a token id below" attribute --model model --tokenizer tok --sae sae8 --text "the cat" --target "#+5"
bad "attribute: --ig-steps beyond 10000 (accepted, and ran for ever)" "--ig-steps must be in 0..10000" attribute --model model --tokenizer tok --sae sae8 --text "the cat" --ig-steps 100000000
printf '{"id": "1", "spans": [[0, 3, "at", "at"]]}\n{"id": "2", "spans": []}\n' > "$W/$R/small.tags.jsonl"
LAST=""
bad "extract: a bad --tags file fails before the database is created" "small.txt:1:1: not valid JSON" extract --model model --tokenizer tok --corpus small.txt --tags small.txt --hook $H --db $R/tg.db --ctx 8
bad "extract: --tags into a store whose tokens have none (was silently not stored)" "ex.db: its stored tokens were extracted without --tags" extract --model model --tokenizer tok --corpus small.txt --tags $R/small.tags.jsonl --hook blocks.0.mlp.hook_post --db ex.db --ctx 8
check "  ... no database was made" "absent $R/tg.db"
# sequences whose documents were deleted (outside saelite): a rerun stored every token twice
cp "$W/ex.db" "$W/$R/nodocs.db"; sqlite3 "$W/$R/nodocs.db" 'DELETE FROM documents'
LAST=""
bad "extract: sequences without their documents" "nodocs.db: [0-9]+ stored sequences refer to documents that are no longer in its documents table" extract --model model --tokenizer tok --corpus small.txt --hook $H --db $R/nodocs.db --ctx 8
setup init-model --layers 1 --d-model 8 --heads 2 --ctx 16 --vocab 270 --seed 9 -o $R/model2
LAST=""
bad "analyze: a --model other than the one extract used (CE scores were computed against it)" "model2: checksum [0-9a-f]{16}, but ex.db's hook $H was extracted from a model with checksum [0-9a-f]{16}" analyze --db ex.db --sae sae8 --model $R/model2 --all
# an SAE trained on one model's activations, scored on another's (an audit: eval printed scores)
setup extract --model $R/model2 --tokenizer tok --corpus small.txt --hook $H --db $R/ex2.db --ctx 8
setup sae-train --db ex.db --hook $H --out $R/sae_ex --arch topk --k 2 --d-sae 16 --tokens 256 --batch 16 --eval-tokens 16
LAST=""
bad "analyze: an SAE of another model's activations" "sae_ex: the SAE was trained on activations of a model with checksum [0-9a-f]{16}, but $R/ex2.db's hook $H comes from model 'model2' with checksum [0-9a-f]{16}" analyze --db $R/ex2.db --sae $R/sae_ex --no-model --all
bad "eval: an SAE of another model's activations" "sae_ex: the SAE was trained on activations of a model with checksum" eval --db $R/ex2.db --sae $R/sae_ex
# a database without its models row (forged, or another tool's): the SAE's own record of its
# model is still compared with --model (exit 0 and a CE score through model2 before, an audit)
cp "$W/ex.db" "$W/$R/nomodels.db"; sqlite3 "$W/$R/nomodels.db" 'DELETE FROM models'
LAST=""
bad "analyze: no models row, another --model than the SAE's" "model2: checksum [0-9a-f]{16}, but the SAE was trained on activations of a model with checksum [0-9a-f]{16}" analyze --db $R/nomodels.db --sae $R/sae_ex --model $R/model2 --all
# a token blob shorter than its sequence row says: the store's message, not "analyze: failed"
cp "$W/ex.db" "$W/$R/tokblob.db"
sqlite3 "$W/$R/tokblob.db" 'UPDATE sequences SET n_tokens = n_tokens + 1 WHERE id = (SELECT min(id) FROM sequences)'
LAST=""
bad "analyze: a damaged token blob" "tokblob.db: sequence [0-9]+: token blob has [0-9]+ bytes, want [0-9]+" analyze --db $R/tokblob.db --sae sae8 --no-model --all
# a stored token id the model cannot take: the message names the database, hook and sequence
cp "$W/ex.db" "$W/$R/bigtok.db"
python3 -c 'import sqlite3, struct, sys
c = sqlite3.connect(sys.argv[1]); i, t = c.execute("SELECT id, tokens FROM sequences ORDER BY id LIMIT 1").fetchone()
t = bytearray(t); t[4:8] = struct.pack("<i", 2**31 - 1); c.execute("UPDATE sequences SET tokens = ? WHERE id = ?", (bytes(t), i)); c.commit()' "$W/$R/bigtok.db"
LAST=""
bad "analyze: a stored token id outside the model's vocabulary" "bigtok.db: hook $H, sequence [0-9]+: token id 2147483647 at position 1 is outside the vocabulary" analyze --db $R/bigtok.db --sae sae8 --model model --all
bad "attribute: an SAE of another model" "sae_ex: the SAE was trained on activations of a model with checksum [0-9a-f]{16}, but --model $R/model2 has checksum" attribute --model $R/model2 --tokenizer tok --sae $R/sae_ex --text "the cat"
bad "generate --steer: an SAE of another model" "sae_ex: the SAE was trained on activations of a model with checksum" generate --model $R/model2 --tokenizer tok --sae $R/sae_ex --steer 0:1 --prompt "the cat"
bad "sweep: a k above d_sae fails before anything is written (was at its run)" "k 100 is more than d_sae \\(16\\)" sweep --db ex.db --out $R/sw --hook $H --families topk --ks 100 --d-sae 16 --tokens 256 --batch 16 --eval none
EXACT="saelite sweep: --eval: unknown suite 'foo' (sparse_probing, absorption, scr, tpp, all) (see 'saelite sweep --help')"
bad "sweep: an unknown suite fails before the first run is trained, a usage error (was exit 1)" "--eval: unknown suite 'foo'" sweep --db ex.db --out $R/sw --hook $H --families topk --ks 2 --d-sae 16 --tokens 256 --batch 16 --eval foo
EXACT="saelite eval: --suite: unknown suite 'ravel' (sparse_probing, absorption, scr, tpp, all) (see 'saelite eval --help')"
bad "eval: an unknown suite is a usage error (was exit 1)" "unknown suite 'ravel'" eval --db ex.db --sae $R/sae_ex --suite scr,ravel
EXACT="saelite serve: --sae is empty: give an SAE directory or a registry id (see 'saelite serve --help')"
bad "serve: an empty --sae (served the default SAE)" "--sae is empty" serve --db ex.db --sae "" --port 0
EXACT="saelite generate: steering: 'abc' is not FEATURE:STRENGTH[,FEATURE:STRENGTH...] (see 'saelite generate --help')"
bad "generate --steer: a malformed term is a usage error (was exit 1)" "steer" generate --model $R/model2 --tokenizer tok --sae $R/sae_ex --steer abc --prompt "the cat"
EXACT="saelite sweep: --ks: 8 is given twice (see 'saelite sweep --help')"
bad "sweep: a k given twice is a usage error (exit 2, was 1)" "--ks: 8 is given twice" sweep --db ex.db --out $R/sw --hook $H --families topk --ks 8,8 --d-sae 16 --tokens 256 --batch 16
bad "sweep: --families with a trailing comma (was taken)" "--families 'topk,': a trailing comma" sweep --db ex.db --out $R/sw --hook $H --families topk, --ks 2 --d-sae 16 --tokens 256 --batch 16
bad "sweep: a family twice (was taken)" "--families: topk is given twice" sweep --db ex.db --out $R/sw --hook $H --families topk,relu,topk --ks 2 --d-sae 16 --tokens 256 --batch 16
bad "sweep: a blank in a float list is refused, naming the list" "--relu-l1: expected up to [0-9]+ positive numbers a,b,... \\(got '1e-3, 1e-2'\\)" sweep --db ex.db --out $R/sw --hook $H --families relu --relu-l1 "1e-3, 1e-2" --d-sae 16 --tokens 256 --batch 16
bad "sweep: an unknown hook" "ex.db: no hook 'nosuch'" sweep --db ex.db --out $R/sw --hook nosuch --families topk --ks 2 --d-sae 16 --tokens 256 --batch 16
bad "sweep: fewer tokens than a batch" "--tokens 8 is less than one batch \\(16\\)" sweep --db ex.db --out $R/sw --hook $H --families topk --ks 2 --d-sae 16 --tokens 8 --batch 16
check "  ... no sweep directory was made" "absent $R/sw"
check "  ... none of the refusals above made an output" "absent $R/a.png && absent $R/o.npy && absent $R/o.csv"
check "  ... none of the refusals above made an output" "absent $R/s.npy && absent $R/t.npy && absent s1 && absent $R/g.json"

# one SAE directory spelt two ways is one analysis, and report finds it by either (an audit:
# ./sae8 after sae8 added a second row, and report --sae ./sae8 found no analysis of it)
setup analyze --db ex.db --sae sae8 --no-model --all
setup analyze --db ex.db --sae ./sae8/ --no-model --all
check "analyze: sae8 and ./sae8/ are one analysis" "[ \"\$(sqlite3 \"\$W/ex.db\" \"SELECT count(*) FROM ana_dicts WHERE kind = 'sae'\")\" = 1 ]"
setup report --db ex.db --sae "$W/sae8" --out $R/rep --features 1
check "report: an absolute path finds the analysis made with a relative one" "[ -f \"\$W/$R/rep/index.html\" ]"
# ... and from another directory, where the relative name does not resolve, by the SAE's weights
# (ana_dicts.weights; the refusal below was all report could say before)
mkdir -p "$W/$R/away/sae8"
check "report from another directory finds the analysis by the SAE's weights" "(cd \"\$W/$R/away\" && \"\$BIN\" report --db \"\$W/ex.db\" --sae \"\$W/sae8\" --out rep --features 1 --no-global) 2> \"\$W/away.err\" | grep -q \"of '[./]*sae8/*'\" || { cat \"\$W/away.err\"; false; }"
# a directory of that name without the weights: the refusal says which analysis might be its
# (only a hint: the name is not taken for it)
cp "$W/sae8/cfg.json" "$W/$R/away/sae8/"
check "report from another directory, no weights there: the refusal names dict:N of 'sae8'" "(cd \"\$W/$R\" && \"\$BIN\" report --db \"\$W/ex.db\" --sae away/sae8 --out away/rep2 --features 1) > /dev/null 2> \"\$W/away.err\"; [ \$? -eq 1 ] && grep -q \"(dict:[0-9]* '[./]*sae8/*' ends this directory's path: if analyze ran on it from another directory, give --sae dict:[0-9]* or run from there)\" \"\$W/away.err\" || { cat \"\$W/away.err\"; false; }"
# an SAE retrained in place: its analysis describes other weights (report drew it as the new
# SAE's, exit 0); dict:N still names that analysis as it is. Seeds of their own: sae_ex and 2
# below train with the same flags, and bit-identical weights are the same SAE to report
setup sae-train --db ex.db --hook $H --out $R/sae_rt --arch topk --k 2 --d-sae 16 --tokens 256 --batch 16 --eval-tokens 16 --seed 3
setup analyze --db ex.db --sae $R/sae_rt --no-model --all
setup report --db ex.db --sae $R/sae_rt --out $R/rep_rt --features 1 --no-global
setup sae-train --db ex.db --hook $H --out $R/sae_rt --arch topk --k 2 --d-sae 16 --tokens 256 --batch 16 --eval-tokens 16 --seed 7 --force
LAST=""
bad "report: an SAE retrained since its analysis (drew the old analysis)" "the analysis of '$R/sae_rt' \\(dict:[0-9]+\\) was made from other weights than $R/sae_rt/sae_weights.safetensors holds now \\(recorded: [0-9a-f]{16}; now: [0-9a-f]{16}\\): run 'saelite analyze --db ex.db --sae $R/sae_rt' again, or give --sae dict:[0-9]+ for that analysis as it is" report --db ex.db --sae $R/sae_rt --out $R/rep_rt2 --features 1
check "  ... nothing written" "absent $R/rep_rt2"
rtd=$(sqlite3 "$W/ex.db" "SELECT id FROM ana_dicts WHERE name = '$R/sae_rt'")
check "  ... dict:N draws that analysis" "[ -n \"$rtd\" ] && (cd \"\$W\" && \"\$BIN\" report --db ex.db --sae dict:$rtd --out $R/rep_rt3 --features 1 --no-global) > /dev/null 2>&1"
# ... and its registry id, checked against the registry row's weights (drew it, a review)
rtr=$(sqlite3 "$W/ex.db" "SELECT id FROM sae_registry WHERE dir = '$R/sae_rt'")
LAST=""
bad "report: the registry id of an SAE retrained since its analysis (drew it)" "the analysis of '$R/sae_rt' \\(dict:[0-9]+\\) was made from other weights" report --db ex.db --sae "$rtr" --out $R/rep_rt4 --features 1
# the same weights with another hook or width in cfg.json are another SAE: not found by weights
# (drew sae8's analysis, a review); a plain copy is found
cp -r "$W/sae8" "$W/$R/sae8_copy"; cp -r "$W/sae8" "$W/$R/sae8_pre"
sed -i 's/hook_resid_post/hook_resid_pre/' "$W/$R/sae8_pre/cfg.json"
check "report: a copy of an analysed SAE finds its analysis" "(cd \"\$W\" && \"\$BIN\" report --db ex.db --sae $R/sae8_copy --out $R/rep_copy --features 1 --no-global) 2>&1 | grep -q \"of '[./]*sae8/*'\""
LAST=""
bad "report: the same weights under another hook are not that analysis" "no analysis of SAE '$R/sae8_pre'" report --db ex.db --sae $R/sae8_pre --out $R/rep_pre --features 1
# an analysis from before ana_dicts.weights (NULL) stays the one its name finds, before a newer
# analysis of the same weights under another name (a review)
cp "$W/ex.db" "$W/$R/nul.db"
setup analyze --db $R/nul.db --sae $R/sae8_copy --no-model --all
sqlite3 "$W/$R/nul.db" "UPDATE ana_dicts SET weights = NULL WHERE name IN ('sae8', './sae8/', '$W/sae8')"
check "report: a name's analysis without weights is still its own" "(cd \"\$W\" && \"\$BIN\" report --db $R/nul.db --sae sae8 --out $R/rep_nul --features 1 --no-global) 2>&1 | grep -q \"of '[./]*sae8/*'\""
# the most recent analysis of a directory, whichever spelling made it: an exact match of an
# older one won (an audit: report --sae sae8 drew the older analysis)
setup analyze --db ex.db --sae "$W/sae8" --no-model --all --keep-bos
check "report: the newest analysis under another spelling" "(cd \"\$W\" && \"\$BIN\" report --db ex.db --sae ./sae8/ --out $R/rep_new --features 1 --no-global) 2>&1 | grep -q \"of '\$W/sae8'\""
LAST=""
# a hook whose extract is unfinished (running in another process, or killed) was read as if it
# were complete, without a word (an audit of concurrent use): analyze and sae-train say so
cp "$W/ex.db" "$W/$R/unf.db" && sqlite3 "$W/$R/unf.db" "UPDATE runs SET status = 'running'"
check "analyze: an unfinished extract is named" "(cd \"\$W\" && \"\$BIN\" analyze --db $R/unf.db --sae sae8 --no-model --all) 2>&1 | grep -q \"^note: $H's extract (run [0-9]*) is unfinished: these results use the [0-9]* tokens it stored so far\""
check "sae-train --db: an unfinished extract is named" "(cd \"\$W\" && \"\$BIN\" sae-train --db $R/unf.db --hook $H --out $R/sae_unf --k 2 --d-sae 16 --tokens 256 --batch 16 --eval-tokens 16) 2>&1 | grep -q \"^note: $H's extract (run [0-9]*) is unfinished\""
# a later finished run of the hook (a rerun with another --batch is a new row) completed it
sqlite3 "$W/$R/unf.db" "INSERT INTO runs(kind, params, status) SELECT kind, json_set(params, '\$.batch', 16), 'done' FROM runs WHERE id = (SELECT max(id) FROM runs)"
check "analyze: a killed extract completed by a later run is not named" "! (cd \"\$W\" && \"\$BIN\" analyze --db $R/unf.db --sae sae8 --no-model --all) 2>&1 | grep -q unfinished"
LAST=""
# a registry id whose SAE was never analysed drew the analysis with that number instead, exit 0
rid=$(sqlite3 "$W/ex.db" "SELECT id FROM sae_registry WHERE dir LIKE '%sae_ex'")
LAST=""
bad "report: a registry id never analysed (drew analysis $rid, another dictionary)" "registry id $rid is the SAE in $R/sae_ex, which has no analysis here" report --db ex.db --sae "$rid" --out $R/rep_rid --features 1
# a registry row whose directory is a number was read as an id again: endless recursion, SIGSEGV
setup sae-train --db ex.db --hook $H --out 2 --arch topk --k 2 --d-sae 16 --tokens 256 --batch 16 --eval-tokens 16
rid2=$(sqlite3 "$W/ex.db" "SELECT id FROM sae_registry WHERE dir = '2'")
LAST=""
bad "report: a registry id whose directory is a number (crashed)" "registry id $rid2 is the SAE in 2, which has no analysis here" report --db ex.db --sae "$rid2" --out $R/rep_num --features 1
did=$(sqlite3 "$W/ex.db" "SELECT max(id) FROM ana_dicts")
check "report: dict:N names an analysis id" "[ -n \"$did\" ] && (cd \"\$W\" && \"\$BIN\" report --db ex.db --sae dict:$did --out $R/rep_dict --features 1 --no-global) > /dev/null 2>&1"
LAST=""
bad "report: an unknown dict:N lists the analyses by their dict:N" "no analysis of SAE 'dict:9999'; analysed: dict:[0-9]+ " report --db ex.db --sae dict:9999 --out $R/rep_9999

# ---- hostile corpora and tags files (a review) --------------------------------------------------
# Fixtures in $W/rv; each of these was read with exit 0 (tags on the wrong document, cut tags,
# raw JSON as text, the end of the input at an out-of-memory line).
mkdir -p "$W/rv"
printf '{"id":"d1","text":"the cat sat."}\n{"id":"mine","text":"the dog sat on the mat."}\n' > "$W/rv/c.jsonl"
printf '{"id":"d1","doc":1,"spans":[[0,3,"at","at"]]}\n{"id":"d2","doc":2,"spans":[[0,3,"at","at"],[4,7,"nn","nn"]]}\n' > "$W/rv/ok.tags.jsonl"
printf '{"id":"d1","spans":[[0,3,"at","at"]]}\n{"id":"d1","spans":[]}\n' > "$W/rv/dup.tags.jsonl"
printf '{"id":"d1","spans":[[0.5,3,"at","at"]]}\n' > "$W/rv/half.tags.jsonl"
printf '{"id":"d1","spans":[[0,3,"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9","at"]]}\n' > "$W/rv/long.tags.jsonl"
printf '{"id":"d1","text":5}\n{"id":"d2","text":6}\n' > "$W/rv/tnum.jsonl"
printf '{"id":"d1","text":"the\tcat"}\n' > "$W/rv/tab.jsonl"
printf '{"id":"d1","text":"the \xc0\xaf cat"}\n' > "$W/rv/overlong.jsonl"
printf '\xef\xbb\xbf{"id":"d1","text":"the cat sat."}\n' > "$W/rv/bom.jsonl"
LAST=""
E=(extract --model model --tokenizer tok --hook $H --ctx 8)
bad "extract: a repeated id in the tags file" "rv/dup.tags.jsonl:2: a second tags line for id 'd1' \(the first is line 1\)" "${E[@]}" --corpus rv/c.jsonl --tags rv/dup.tags.jsonl --db rv/new.db
bad "extract: a span offset of 0.5" "rv/half.tags.jsonl:1: span 0 of document 'd1' is not \[start,end" "${E[@]}" --corpus rv/c.jsonl --tags rv/half.tags.jsonl --db rv/new.db
bad "extract: an 18-byte tag (was cut mid-character)" "rv/long.tags.jsonl:1: span 0: the tag .* is 18 bytes, longer than the 15" "${E[@]}" --corpus rv/c.jsonl --tags rv/long.tags.jsonl --db rv/new.db
bad "extract: JSONL whose \"text\" is a number (was read as plain text)" 'rv/tnum.jsonl:1: "text" is not a string' "${E[@]}" --corpus rv/tnum.jsonl --db rv/new.db
bad "extract: a raw TAB in a JSONL string" "rv/tab.jsonl:1:23: a raw control character in a string" "${E[@]}" --corpus rv/tab.jsonl --db rv/new.db
bad "extract: overlong UTF-8 in a JSONL line" "rv/overlong.jsonl:1:24: invalid UTF-8" "${E[@]}" --corpus rv/overlong.jsonl --db rv/new.db
# a document whose id has no tags line gets no tags (it took d2's by position); a BOM starts JSONL
setup "${E[@]}" --corpus rv/c.jsonl --tags rv/ok.tags.jsonl --db rv/tags.db
check "extract: tags only for the document with their id" '[ "$(sqlite3 "$W/rv/tags.db" "SELECT d.name, count(t.pos_tag) FROM tokens t JOIN sequences q ON q.id = t.sequence_id JOIN documents d ON d.id = q.document_id GROUP BY d.name ORDER BY d.name" | tr "\n" " ")" = "d1|1 mine|0 " ]'
setup "${E[@]}" --corpus rv/bom.jsonl --db rv/bom.db
check "extract: a JSONL corpus starting with a BOM is JSONL" '[ "$(sqlite3 "$W/rv/bom.db" "SELECT name || \"|\" || text FROM documents")" = "d1|the cat sat." ]'
# a line too long for memory: an error naming it, not the end of the corpus
printf 'the cat\n' > "$W/rv/huge.txt"
if [[ $BIN == *asan* ]]; then # ulimit -v breaks ASan's shadow memory (as in test_query.sh)
    skip=$((skip + 1)); echo "SKIP extract: out of memory reading a line (ASan)"
elif truncate -s 2G "$W/rv/huge.txt" 2>/dev/null; then
    (cd "$W" && ulimit -v 1500000 && exec "$BIN" "${E[@]}" --corpus rv/huge.txt --db rv/huge.db) > /dev/null 2> "$W.err"
    rc=$?
    check "extract: out of memory reading a line is an error" '[ $rc -eq 1 ] && grep -q "rv/huge.txt: out of memory reading line 2" "$W.err"'
    rm -f "$W/rv/huge.txt"
else
    skip=$((skip + 1)); echo "SKIP extract: out of memory reading a line (no sparse files)"
fi
LAST=""
# a --top too large for memory said "out of memory for 8 features", nothing of --top
if [[ $BIN == *asan* ]]; then
    skip=$((skip + 1)); echo "SKIP analyze: --top too large for memory (ASan)"
else
    (cd "$W" && ulimit -v 1500000 && exec "$BIN" analyze --db ex.db --sae sae8 --no-model --all --top 100000000) > /dev/null 2> "$W.err"
    rc=$?
    check "analyze: a --top too large for memory names --top" '[ $rc -eq 1 ] && grep -q "x 100000000 top activations .*a smaller --top" "$W.err"'
fi
LAST=""

# Every database still passes integrity_check and holds its rows (the known findings above that
# write to a database are the exceptions: those databases are left out here).
after=$(deep | grep -vE '^ex\.db ')
before=$(echo "$DEEP_BEFORE" | grep -vE '^ex\.db ')
if [ "$before" = "$after" ] && ! grep -qv ' ok ' <<< "$(echo "$after" | grep -E '^(good|seq0)\.db')"; then
    pass=$((pass + 1)); echo "ok   databases intact with unchanged rows: $(echo "$after" | cut -d' ' -f1 | tr '\n' ' ')"
else
    fail=$((fail + 1)); echo "FAIL databases changed or damaged:"; diff <(echo "$before") <(echo "$after") | sed 's/^/     /'
fi

echo "test_badinput: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
