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
setup sae-train --npy acts.npy --out sae8 --arch topk --k 2 --d-sae 16 --tokens 256 --batch 16 --eval-tokens 16 --hook $H
setup sae-train --npy wide.npy --out sae32 --arch topk --k 2 --d-sae 16 --tokens 256 --batch 16 --eval-tokens 16 --hook $H
cp "$W/acts.npy" "$W/nan.npy"; put_f32 nan.npy 3 2 '\x00\x00\xc0\x7f'
cp "$W/acts.npy" "$W/inf.npy"; put_f32 inf.npy 9 7 '\x00\x00\x80\xff'
: > "$W/empty.npy"
head -c 100 "$W/acts.npy" > "$W/trunc_header.npy"
head -c 300 "$W/acts.npy" > "$W/trunc_data.npy"
echo "hello" > "$W/text.npy"
echo "not a database" > "$W/text.db"
head -c 5000 "$W/good.db" > "$W/trunc.db"
cp "$W/good.db" "$W/seq0.db"
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
EXACT="saelite pack: --lr must be > 0, got 0 (see 'saelite pack --help')"
bad "out-of-range value (exclusive)" "--lr must be > 0" pack --dim 4 --count 8 --lr 0
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
    "  --d-mlp N              MLP width (default: 4 x d-model)" init-model
help_has "--help: a flag that is on by default" \
    "  --bos                  prepend <|endoftext|> to every window (--no-bos: do not) (default: on)" extract

# ---- init-model ------------------------------------------------------------------------------
bad "zero layers" "--layers must be >= 1, got 0" init-model --layers 0 --d-model 8 --heads 2 -o m2
bad "negative layers" "--layers must be >= 1, got -1" init-model --layers -1 --d-model 8 --heads 2 -o m2
bad "heads do not divide d-model" "not a multiple of --heads 3" init-model --layers 1 --d-model 10 --heads 3 -o m2
bad "unknown dtype" "--dtype must be one of f32\|f16\|bf16, got 'f8'" init-model --layers 1 --d-model 8 --heads 2 --dtype f8 -o m2
bad "zero context" "n_positions 0" init-model --layers 1 --d-model 8 --heads 2 --ctx 0 -o m2
bad "negative vocabulary" "vocab_size -3" init-model --layers 1 --d-model 8 --heads 2 --vocab -3 -o m2
bad "output under a regular file" "acts.npy/m2.*Not a directory" init-model --layers 1 --d-model 8 --heads 2 -o acts.npy/m2
bad "read-only output" "$RO/m2" init-model --layers 1 --d-model 8 --heads 2 -o $RO/m2

# ---- forward (model loading) -----------------------------------------------------------------
F=(--tokens 1,2 --hook $H --npy o.npy)
bad "missing model directory" "nosuch/config.json: cannot open" forward --model nosuch "${F[@]}"
bad "empty config.json" "m_emptycfg/config.json: not a JSON object" forward --model m_emptycfg "${F[@]}"
bad "config.json not JSON" "m_badjson/config.json: not a JSON object" forward --model m_badjson "${F[@]}"
bad "truncated safetensors" "m_trunc/model.safetensors:.*outside" forward --model m_trunc "${F[@]}"
bad "missing safetensors" "m_nosafet/model.safetensors" forward --model m_nosafet "${F[@]}"
bad "config does not fit the weights" "wte.weight' has shape \[270,8\], expected \[270,16\]" forward --model m_mismatch "${F[@]}"
bad "unknown hook" "no hook point matches 'blocks.0.hook_nosuch'" forward --model model --tokens 1,2 --hook blocks.0.hook_nosuch --npy o.npy
bad "hook of a layer the model lacks" "blocks.5.hook_resid_post" forward --model model --tokens 1,2 --hook blocks.5.hook_resid_post --npy o.npy
bad "token id outside the vocabulary" "token id 270 .*outside the vocabulary" forward --model model --tokens 1,270 --hook $H --npy o.npy
bad "negative token id" "bad list '1,-2'" forward --model model --tokens 1,-2 --hook $H --npy o.npy
bad "sequence longer than the context" "17 tokens exceeds the model context of 16" forward --model model --tokens 1-17 --hook $H --npy o.npy
bad "forward output under a regular file" "acts.npy/o.npy.*Not a directory" forward --model model --tokens 1,2 --hook $H --npy acts.npy/o.npy

# ---- import (.npy into a database) ------------------------------------------------------------
I=(--db good.db --hook x.new)
bad "missing .npy" "nosuch.npy: cannot open" import --npy nosuch.npy "${I[@]}"
bad "empty .npy" "empty.npy: not a .npy file" import --npy empty.npy "${I[@]}"
bad "truncated .npy header" "trunc_header.npy: truncated" import --npy trunc_header.npy "${I[@]}"
bad "truncated .npy data" "trunc_data.npy: truncated" import --npy trunc_data.npy "${I[@]}"
bad "text file as .npy" "text.npy: not a .npy file" import --npy text.npy "${I[@]}"
bad "NaN activation" "nan.npy: non-finite value at row 3" import --npy nan.npy "${I[@]}"
bad "Inf activation" "inf.npy: non-finite value at row 9" import --npy inf.npy "${I[@]}"
bad "width differs from the stored hook" "width 8, not 32" import --npy wide.npy --db good.db --hook $H
bad "negative seq-len" "--seq-len must be >= 1, got -5" import --npy acts.npy "${I[@]}" --seq-len -5
bad "zero seq-len" "--seq-len" import --npy acts.npy --db seq0.db --hook x.new --seq-len 0
bad "unknown storage dtype" "--dtype must be one of f32\|f16\|bf16, got 'f8'" import --npy acts.npy "${I[@]}" --dtype f8
bad "text file as database" "text.db: not a database" import --npy acts.npy --db text.db --hook x.new
bad "truncated database" "trunc.db: not a database" import --npy acts.npy --db trunc.db --hook x.new
bad "newer schema database" "newer.db: written by a newer saelite \(schema version 999" import --npy acts.npy --db newer.db --hook x.new
bad "database in a missing directory" "nodir/new.db: cannot open" import --npy acts.npy --db nodir/new.db --hook x.new
bad "token ids of the wrong length (new db)" "ids5.npy: 5 token ids for 16 activation rows" import --npy acts.npy --db new.db --hook x.new --tokens ids5.npy
bad "NaN activation (new db)" "nan.npy: non-finite" import --npy nan.npy --db new.db --hook x.new
bad "float token ids" "acts.npy: element 0 is not an integer" import --npy acts.npy --db good.db --hook x.new --tokens acts.npy

# ---- export / info (reading a database) --------------------------------------------------------
bad "export of an unknown hook" "no hook 'nosuch'" export --db good.db --hook nosuch --npy o.npy
bad "export from a missing database" "missing.db: cannot open" export --db missing.db --hook $H --npy o.npy
bad "export negative limit" "--limit must be >= 0" export --db good.db --hook $H --npy o.npy --limit -1
bad "export under a regular file" "acts.npy/o.npy.*Not a directory" export --db good.db --hook $H --npy acts.npy/o.npy
bad "export to read-only output" "$RO/o.npy" export --db good.db --hook $H --npy $RO/o.npy
bad "export from a truncated database" "trunc.db: not a database" export --db trunc.db --hook $H --npy o.npy
bad "info on a missing database" "missing.db: cannot open" info --db missing.db
bad "info on a newer schema" "written by a newer saelite" info --db newer.db
bad "info on a text file" "text.db: not a database" info --db text.db
bad "info on an empty file" "empty.npy: empty database" info --db empty.npy

# ---- extract -----------------------------------------------------------------------------------
E=(extract --model model --tokenizer tok --corpus small.txt)
bad "extract: unknown hook" "unknown hook 'blocks.0.nosuch'" "${E[@]}" --hook blocks.0.nosuch --db new.db
bad "extract: negative ctx" "--ctx must be >= 0, got -3" "${E[@]}" --hook $H --db new.db --ctx -3
bad "extract: zero batch" "--batch must be >= 1, got 0" "${E[@]}" --hook $H --db new.db --batch 0
bad "extract: ctx beyond the model" "--ctx 100 exceeds the context" "${E[@]}" --hook $H --db new.db --ctx 100
bad "extract: missing corpus" "nosuch.txt: cannot open" extract --model model --tokenizer tok --corpus nosuch.txt --hook $H --db new.db
bad "extract: empty corpus" "empty.npy: the corpus holds no text" extract --model model --tokenizer tok --corpus empty.npy --hook $H --db new.db
bad "extract: tokenizer larger than the model" "tokenizer tok has 269 ids but model m_small only" extract --model m_small --tokenizer tok --corpus small.txt --hook $H --db new.db
bad "extract: malformed tokenizer" "tok_bad/encoder.json" extract --model model --tokenizer tok_bad --corpus small.txt --hook $H --db new.db
bad "extract: newer schema database" "newer.db: written by a newer saelite" "${E[@]}" --hook $H --db newer.db
bad "extract: different ctx than stored" "stored with sequence length 8, not 4" "${E[@]}" --hook $H --db ex.db --ctx 4

# ---- sae-train / sae-eval / analyze / report / query ------------------------------------------
T=(sae-train --npy acts.npy --out s1 --d-sae 16 --k 2 --tokens 256 --batch 16 --eval-tokens 16)
bad "sae-train: NaN learning rate" "--lr expects a finite number, got 'nan'" "${T[@]}" --lr nan
bad "sae-train: infinite learning rate" "--lr expects a finite number" "${T[@]}" --lr inf
bad "sae-train: negative learning rate" "--lr" "${T[@]}" --lr -1 --out s_neg
bad "sae-train: zero k" "--k must be >= 1, got 0" "${T[@]}" --k 0
bad "sae-train: k above d-sae" "k 32 must be in 1..d_sae \(16\)" "${T[@]}" --k 32
bad "sae-train: negative tokens" "--tokens must be >= 1, got -5" "${T[@]}" --tokens -5
bad "sae-train: unknown architecture" "--arch must be one of relu\|topk\|batchtopk\|jumprelu\|gated\|matryoshka\|transcoder\|skip_transcoder, got 'foo'" "${T[@]}" --arch foo
bad "sae-train: NaN activations" "non-finite" "${T[@]/acts.npy/nan.npy}"
bad "sae-train: 1-d activations" "ids16.npy: expected \[tokens, d_in\]" "${T[@]/acts.npy/ids16.npy}"
bad "sae-train: missing activations" "nosuch.npy: cannot open" "${T[@]/acts.npy/nosuch.npy}"
bad "sae-train: resume without a checkpoint" "s_none/checkpoint.bin" "${T[@]}" --out s_none --resume
bad "sae-eval: activations of another width" "wide.npy" sae-eval --sae sae8 --npy wide.npy
bad "sae-eval: NaN activations" "nan.npy" sae-eval --sae sae8 --npy nan.npy
bad "analyze: missing SAE" "nosuch/cfg.json: cannot open" analyze --db ex.db --sae nosuch --no-model
bad "analyze: SAE width differs from the database (mismatched SAE)" "reads 32 values per token but ex.db stores 8" analyze --db ex.db --sae sae32 --no-model
bad "analyze: SAE of another hook" "trained on $H, not --hook blocks.0.hook_attn_out" analyze --db ex.db --sae sae8 --hook blocks.0.hook_attn_out --no-model
bad "analyze: unknown hook for neurons" "no hook 'blocks.0.nosuch'" analyze --db ex.db --neurons --hook blocks.0.nosuch --no-model
bad "analyze: zero top" "--top must be >= 1, got 0" analyze --db ex.db --sae sae8 --no-model --top 0
bad "analyze: validation fraction above 1" "--val-frac must be in \(0, 1\), got 2" analyze --db ex.db --sae sae8 --no-model --val-frac 2
bad "analyze: newer schema database" "written by a newer saelite" analyze --db newer.db --neurons --hook $H --no-model
bad "report: SAE never analysed" "no analysis of SAE '999'" report --db ex.db --sae 999 --out rep
bad "report: bad feature list" "bad list '1,x'" report --db ex.db --sae sae8 --features 1,x --out rep
bad "query: SQL syntax error" "near \"SELEC\": syntax error" query --db ex.db "SELEC 1"
bad "query: a statement that writes" "refusing a statement that would modify" query --db ex.db "DELETE FROM tokens"
bad "query: missing database" "missing.db: cannot open" query --db missing.db "SELECT 1"

# ---- generate / attention / params / synth ----------------------------------------------------
G=(generate --model model --tokenizer tok --prompt the)
bad "generate: missing model" "nosuch/config.json: cannot open" generate --model nosuch --prompt x
bad "generate: NaN temperature" "--temperature expects a finite number, got 'nan'" "${G[@]}" --temperature nan
bad "generate: negative temperature" "--temperature must be >= 0" "${G[@]}" --temperature -1
bad "generate: negative max-tokens" "--max-tokens must be >= 0" "${G[@]}" --max-tokens -3
bad "generate: negative top-k" "--top-k must be >= 0" "${G[@]}" --top-k -1
bad "attention: layer the model lacks" "--layer 5: the model has layers 0..0" attention --model model --tokenizer tok --layer 5 --text "the cat" --out a.png
bad "attention: head the model lacks" "--head 9: the model has heads 0..1" attention --model model --tokenizer tok --layer 0 --head 9 --text "the cat" --out a.png
bad "attention: output under a regular file" "acts.npy/a.png" attention --model model --tokenizer tok --layer 0 --text "the cat" --out acts.npy/a.png
bad "params: missing model" "nosuch/config.json: cannot open" params nosuch
bad "synth: zero dimension" "--d must be >= 1, got 0" synth --d 0 --out s.npy --truth t.npy
bad "synth: negative features" "--features must be >= 1, got -1" synth --features -1 --out s.npy --truth t.npy

# ---- tokenizer, corpus, bpe-train --------------------------------------------------------------
bad "missing tokenizer" "nosuch: no tokenizer files" tokenize --tokenizer nosuch small.txt
bad "malformed encoder.json" "tok_bad/encoder.json: not a JSON object" tokenize --tokenizer tok_bad small.txt
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
