#!/usr/bin/env bash
# test_crash_resume.sh - long jobs survive SIGKILL (issue 9): `extract`, `sae-train` and
# `train-lm` are killed at random points several times in a row, then rerun (resumed) to the end;
# the result must equal an uninterrupted run: the database rows (extract) or the written weights
# (sae-train, train-lm) hash the same. After every kill the database passes integrity_check.
# Kill times are drawn uniformly over 5-35% of the measured uninterrupted run (so several kills
# land before the resumed job completes), from a fixed seed
# (CRASH_SEED) so a failure can be replayed; tiny sizes keep the whole script within seconds.
# Usage: tests/test_crash_resume.sh   (SAELITE_BIN=path overrides ./saelite)
set -u
ROOT=$(pwd)
BIN=${SAELITE_BIN:-./saelite}
[[ "$BIN" == /* ]] || BIN="$ROOT/$BIN"
W=$(mktemp -d "${TMPDIR:-/tmp}/saelite-crash.XXXXXX")
trap '[ -n "${CRASH_KEEP:-}" ] || rm -rf "$W"' EXIT
cd "$W" || exit 1
RANDOM=${CRASH_SEED:-9}
KILLS=${CRASH_KILLS:-4}
pass=0; fail=0; skip=0
ok()  { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
now_ms() { date +%s%3N; }
# no_temp_left DIR [KNOWN]: a finished run leaves no temp files (name.tmp.PID) from killed runs.
# KNOWN (a reported finding) turns a failure into a printed skip.
no_temp_left() {
    local left
    left=$(find "$1" -name '*.tmp*' | head -n 3 | tr '\n' ' ')
    if [ -z "$left" ]; then ok "$1: no temp files left by the killed runs"
    elif [ -n "${2:-}" ]; then skip=$((skip + 1)); echo "XFAIL $1: temp files left: $left(known finding: $2)"
    else bad "$1: temp files left by the killed runs: $left"; fi
}

# Fixtures: a 2-layer model, a BPE vocabulary and a small text corpus, all made by saelite.
"$BIN" init-model --layers 2 --d-model 16 --heads 2 --ctx 16 --vocab 270 -o model > /dev/null &&
"$BIN" bpe-train --vocab 270 "$ROOT/README.md" -o tok > /dev/null 2>&1 &&
head -c 6000 "$ROOT/README.md" > corpus.txt || { echo "FAIL fixtures"; echo "test_crash_resume: 0 passed, 1 failed"; exit 1; }

# run_killed NAME KILLS REF_MS: start CMD, SIGKILL it after a random 5-35% of REF_MS, KILLS
# times (CMD is rebuilt by the caller's `cmd_for` function before each start so it can add
# --resume); at least one kill must hit a running process; checks after each with `after_kill`.
# Under a load that swings (run times vary 10x on a busy 2-core machine), a reference time can
# be far too long: while no kill has hit yet, a run that finished first halves REF_MS and the
# output is reset (`reset_for`) so the next try starts fresh, for up to 4 extra tries.
run_killed() {
    local name=$1 kills=$2 ref_ms=$3 i pid d hit=0
    for ((i = 1; i <= kills || (hit == 0 && i <= kills + 4); i++)); do
        d=$(( ref_ms * (5 + RANDOM % 31) / 100 ))
        cmd_for; "${CMD[@]}" > /dev/null 2>&1 &
        pid=$!
        sleep "$(printf '%d.%03d' $((d / 1000)) $((d % 1000)))"
        if kill -0 "$pid" 2> /dev/null; then kill -KILL "$pid" 2> /dev/null && hit=$((hit + 1))
        elif [ $hit -eq 0 ]; then ref_ms=$((ref_ms / 2)); wait "$pid" 2> /dev/null; reset_for; fi
        wait "$pid" 2> /dev/null
        after_kill "$name" "$i" "$d"
    done
    if [ $hit -gt 0 ]; then ok "$name: $hit of $kills kills hit a running process"
    else bad "$name: no kill hit a running process (all runs finished first)"; fi
}

# ---- extract: rerunning the same command resumes ------------------------------------------------
H=blocks.0.hook_resid_post,blocks.1.mlp.hook_post
ext_cmd() { CMD=("$BIN" extract --model model --tokenizer tok --corpus corpus.txt --hook $H --db "$1" --ctx 16 --batch 2); }
# Everything but run bookkeeping (timestamps, one row per attempt).
db_rows() {
    sqlite3 "$1" "SELECT id, source, ordinal, name, genre, text, checksum FROM documents ORDER BY id;
        SELECT id, document_id, start, n_tokens, bos, hex(tokens) FROM sequences ORDER BY id;
        SELECT * FROM tokens ORDER BY sequence_id, position;
        SELECT id, name, path, config, checksum FROM models ORDER BY id;
        SELECT id, model_id, name, layer, width, dtype, seq_len FROM hooks ORDER BY id;
        SELECT id, hook_id, sequence_id, n_tokens, hex(data) FROM activations ORDER BY id;" | sha256sum
}
# min_ms MS: MS, or the time of a second uninterrupted run of CMD when that is shorter (a load
# spike during the first would put every kill after the end); ms_out holds the result.
min_ms() {
    local t0 d
    t0=$(now_ms); "${CMD[@]}" > /dev/null 2>&1; d=$(( $(now_ms) - t0 ))
    ms_out=$(( d < $1 ? d : $1 ))
}
t0=$(now_ms); ext_cmd ref.db; "${CMD[@]}" > /dev/null 2>&1 || bad "extract: uninterrupted run failed"
ext_ms=$(( $(now_ms) - t0 ))
ext_cmd ref2.db; min_ms "$ext_ms"; ext_ms=$ms_out; rm -f ref2.db ref2.db-wal ref2.db-shm
cmd_for() { ext_cmd crash.db; }
reset_for() { rm -f crash.db crash.db-wal crash.db-shm crash.db-journal; }
after_kill() {
    [ -f crash.db ] || return 0
    local ic
    ic=$(sqlite3 crash.db 'PRAGMA integrity_check' 2>&1)
    if [ "$ic" = ok ]; then ok "extract: database intact after kill $2 at ${3} ms"
    else bad "extract: integrity_check after kill $2 at ${3} ms: $ic"; fi
}
run_killed extract "$KILLS" "$ext_ms"
cmd_for; "${CMD[@]}" > /dev/null 2> err.txt || bad "extract: resumed run failed: $(head -n 1 err.txt)"
if [ "$(db_rows crash.db)" = "$(db_rows ref.db)" ]; then ok "extract: resumed database equals the uninterrupted one"
else bad "extract: resumed database differs from the uninterrupted one"; fi
[ "$(sqlite3 crash.db "SELECT count(*) FROM runs WHERE status != 'done'")" = 0 ] &&
    ok "extract: no run left unfinished" || bad "extract: a run is still marked unfinished"

# ---- sae-train: --resume continues from the last checkpoint -----------------------------------
"$BIN" export --db ref.db --hook blocks.1.mlp.hook_post --npy acts.npy > /dev/null || bad "export for sae-train"
sae_cmd() {
    CMD=("$BIN" sae-train --npy acts.npy --out "$1" --arch topk --k 4 --d-sae 64 --tokens 20000 --batch 256
         --checkpoint-every 5 --seed 3 --eval-tokens 512)
    [ -f "$1/checkpoint.bin" ] && CMD+=(--resume)
}
t0=$(now_ms); sae_cmd sae_ref; "${CMD[@]}" > /dev/null 2>&1 || bad "sae-train: uninterrupted run failed"
sae_ms=$(( $(now_ms) - t0 ))
sae_cmd sae_ref2; min_ms "$sae_ms"; sae_ms=$ms_out; rm -rf sae_ref2
cmd_for() { sae_cmd sae_crash; }
reset_for() { rm -rf sae_crash; }
after_kill() { :; }
run_killed sae-train "$KILLS" "$sae_ms"
cmd_for; "${CMD[@]}" > /dev/null 2> err.txt || bad "sae-train: resumed run failed: $(head -n 1 err.txt)"
for f in sae_weights.safetensors sparsity.safetensors training_log.csv; do
    if cmp -s "sae_ref/$f" "sae_crash/$f"; then ok "sae-train: resumed $f equals the uninterrupted one"
    else bad "sae-train: resumed $f differs from the uninterrupted one"; fi
done
no_temp_left sae_crash

# ---- train-lm: --resume continues from train_state.safetensors ---------------------------------
lm_cmd() {
    CMD=("$BIN" train-lm --corpus corpus.txt --tokenizer tok --layers 1 --d-model 16 --heads 2 --ctx 16
         --batch 4 --steps 60 --checkpoint-every 5 --eval-every 20 --eval-windows 4 --val-frac 0.25 -o "$1" --resume)
}
t0=$(now_ms); lm_cmd lm_ref; "${CMD[@]}" > /dev/null 2>&1 || bad "train-lm: uninterrupted run failed"
lm_ms=$(( $(now_ms) - t0 ))
lm_cmd lm_ref2; min_ms "$lm_ms"; lm_ms=$ms_out; rm -rf lm_ref2
cmd_for() { lm_cmd lm_crash; }
reset_for() { rm -rf lm_crash; }
run_killed train-lm "$KILLS" "$lm_ms"
cmd_for; "${CMD[@]}" > /dev/null 2> err.txt || bad "train-lm: resumed run failed: $(head -n 1 err.txt)"
if cmp -s lm_ref/model.safetensors lm_crash/model.safetensors; then ok "train-lm: resumed model.safetensors equals the uninterrupted one"
else bad "train-lm: resumed model.safetensors differs from the uninterrupted one"; fi
no_temp_left lm_crash

echo "test_crash_resume: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
