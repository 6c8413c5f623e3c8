#!/usr/bin/env bash
# test_crash_resume.sh - long jobs survive SIGKILL (issue 9): `extract`, `sae-train`, `train-lm`
# and `analyze` are killed at random points several times in a row, then rerun (resumed) to the end;
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

# ---- analyze: the same command continues the pass from its checkpoint -------------------------
# A store of synthetic activations (3125 sequences), an SAE on them; the SAE's pass and the
# neurons' each checkpoint every 0.05 s (--checkpoint-secs). Compared: every analysis table, the
# dictionary ids replaced by their kind (a killed run that wrote the SAE's rows before the kill
# moves the ids of the rerun), timings left out.
"$BIN" synth --out syn.npy --truth syn_t.npy --db syn.db --d 64 --features 256 --tokens 200000 --seq-len 64 > /dev/null 2>&1 &&
"$BIN" sae-train --npy syn.npy --out sae_syn --arch topk --k 8 --d-sae 512 --tokens 50000 --batch 1024 > /dev/null 2>&1 ||
    bad "analyze fixtures (synth, sae-train)"
andump() {
    local t cols nc sel
    for t in $(sqlite3 "$1" "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'ana\_%' ESCAPE '\' ORDER BY name"); do
        IFS='|' read -r cols nc <<< "$(sqlite3 -separator '|' "$1" "SELECT group_concat(CASE WHEN name = 'dict_id' THEN
            '(SELECT kind FROM ana_dicts WHERE ana_dicts.id = dict_id)' WHEN type = 'REAL' THEN
            'printf(''%!.17g'',' || name || ')' WHEN type = 'BLOB' THEN 'hex(' || name || ')' ELSE name END, ','), count(*)
            FROM pragma_table_info('$t') WHERE name NOT IN ('created_at', 'seconds') AND NOT ('$t' = 'ana_dicts' AND name = 'id')")"
        echo "== $t"; sqlite3 "$1" "SELECT $cols FROM \"$t\" ORDER BY $(seq -s, 1 "$nc")"
    done
}
ana_cmd() { CMD=("$BIN" analyze --db "$1" --sae sae_syn --neurons --hook synth --no-model --all --checkpoint-secs 0.05); }
# forge FILE OFFSET FMT VALUE: a forged checkpoint that passes the checksum (tests/forge_sum.py)
forge() { python3 "$ROOT/tests/forge_sum.py" "$@"; }
cp syn.db ana_ref.db
t0=$(now_ms); ana_cmd ana_ref.db; "${CMD[@]}" > /dev/null 2> err.txt || bad "analyze: uninterrupted run failed: $(head -n 1 err.txt)"
ana_ms=$(( $(now_ms) - t0 ))
andump ana_ref.db > ana_ref.dump
nref=$(grep -c . ana_ref.dump)
ls ana_ref.db.analyze-* > /dev/null 2>&1 && bad "analyze: the finished run left its checkpoint" || ok "analyze: a finished run leaves no checkpoint"
cmd_for() { ana_cmd ana_crash.db; }
reset_for() { rm -f ana_crash.db*; cp syn.db ana_crash.db; }
after_kill() { :; }
reset_for
run_killed analyze "$KILLS" "$ana_ms"
cmd_for; "${CMD[@]}" > /dev/null 2> err.txt || bad "analyze: resumed run failed: $(head -n 1 err.txt)"
andump ana_crash.db > ana_crash.dump
if cmp -s ana_ref.dump ana_crash.dump && [ "$nref" -gt 10000 ]; then ok "analyze: after the kills every analysis table equals the uninterrupted run's ($nref rows)"
else bad "analyze: after the kills the tables differ: $(diff ana_ref.dump ana_crash.dump | head -n 3 | tr '\n' ' ')"; fi
ls ana_crash.db.analyze-* > /dev/null 2>&1 && bad "analyze: a checkpoint is left after the resumed run" || ok "analyze: no checkpoint left after the resumed run"
no_temp_left .

# ana_killed DB: a run of DB killed once its first checkpoint is there (then the file's name is
# in $ck); ana_after DB WANT WHAT: the rerun says WANT on stderr and its tables equal the
# reference
ana_killed() {
    rm -f "$1"*; cp syn.db "$1"
    ana_cmd "$1"; "${CMD[@]}" "${@:2}" > /dev/null 2>&1 &
    local pid=$! i
    for i in $(seq 1000); do ck=$(ls "$1".analyze-* 2> /dev/null | grep -v '\.tmp\.' | head -n 1); [ -n "$ck" ] && break; sleep 0.01; done
    kill -KILL $pid 2> /dev/null; wait $pid 2> /dev/null
    ck=$(ls "$1".analyze-* 2> /dev/null | grep -v '\.tmp\.' | head -n 1)
}
ana_after() {
    ana_cmd "$1"; "${CMD[@]}" > out.txt 2> err.txt
    local rc=$?
    andump "$1" > "$1.dump"
    if [ $rc -eq 0 ] && grep -q -- "$2" err.txt && cmp -s ana_ref.dump "$1.dump"; then ok "analyze, $3: $(grep -m1 -- "$2" err.txt | cut -c1-110)"
    else bad "analyze, $3: rc $rc, '$(head -n 1 err.txt)', tables $(cmp -s ana_ref.dump "$1.dump" && echo equal || echo differ)"; fi
}
ana_killed ana_k1.db
[ -n "$ck" ] && ana_after ana_k1.db "continuing the sae pass from ana_k1.db.analyze-" "killed after its first checkpoint" ||
    bad "analyze: no checkpoint appeared before the kill"
grep -q "continued from a checkpoint that held [1-9]" out.txt && ok "analyze: the summary says it continued" || bad "analyze: the summary does not say it continued: $(head -n 2 out.txt)"
# Ctrl-C says what the same command does next (it said "interrupted" alone, an audit): continues
# from the checkpoint it names, or, stopped before the first one, starts again
rm -f ana_i1.db*; cp syn.db ana_i1.db
ana_cmd ana_i1.db; "${CMD[@]}" > /dev/null 2> err.txt &
pid=$!
for i in $(seq 1000); do ck=$(ls ana_i1.db.analyze-* 2> /dev/null | grep -v '\.tmp\.' | head -n 1); [ -n "$ck" ] && break; sleep 0.01; done
kill -INT $pid; wait $pid; rc=$?
line=$(grep -m1 '^saelite analyze' err.txt)
[ $rc -eq 130 ] && [ -n "$ck" ] && [[ "$line" == *"interrupted; the same command continues from ana_i1.db.analyze-"* ]] &&
    ok "analyze: Ctrl-C after a checkpoint: $line" || bad "analyze: Ctrl-C after a checkpoint: rc $rc, '$line'"
rm -f ana_i2.db*; cp syn.db ana_i2.db
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.1 "$BIN" analyze --db ana_i2.db --sae sae_syn --hook synth --no-model --all \
    --checkpoint-secs 1000 > /dev/null 2> err.txt &
pid=$!
for i in $(seq 1000); do grep -q '^sae .*seq' err.txt && break; sleep 0.01; done
kill -INT $pid; wait $pid; rc=$?
line=$(grep -m1 '^saelite analyze' err.txt)
[ $rc -eq 130 ] && [[ "$line" == *"interrupted before the first checkpoint (every 1000 s, --checkpoint-secs); the same command starts again"* ]] &&
    [ -z "$(ls ana_i2.db.analyze-* 2> /dev/null)" ] &&
    ok "analyze: Ctrl-C before the first checkpoint: $line" || bad "analyze: Ctrl-C before the first checkpoint: rc $rc, '$line' $(head -c 300 err.txt)"
# a checkpoint another run left under other options (--top 5) is refused by this one: a stop
# before this run's first checkpoint does not name it as where the same command continues (it
# did, right after the notice that refused it, a review)
rm -f ana_i3.db*; cp syn.db ana_i3.db
"$BIN" analyze --db ana_i3.db --sae sae_syn --hook synth --no-model --all --checkpoint-secs 0.05 --top 5 > /dev/null 2> err.txt &
pid=$!
for i in $(seq 1000); do ck=$(ls ana_i3.db.analyze-* 2> /dev/null | grep -v '\.tmp\.' | head -n 1); [ -n "$ck" ] && break; sleep 0.01; done
kill -INT $pid; wait $pid
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.1 "$BIN" analyze --db ana_i3.db --sae sae_syn --hook synth --no-model --all \
    --checkpoint-secs 1000 > /dev/null 2> err.txt &
pid=$!
for i in $(seq 1000); do grep -q '^sae .*seq' err.txt && break; sleep 0.01; done
kill -INT $pid; wait $pid; rc=$?
line=$(grep '^saelite analyze: interrupted' err.txt | head -n 1)
[ -n "$ck" ] && [ $rc -eq 130 ] && grep -q 'made with other inputs or options' err.txt &&
    [[ "$line" == *"interrupted before the first checkpoint (every 1000 s, --checkpoint-secs); the same command starts again"* ]] &&
    ok "analyze: Ctrl-C beside another run's checkpoint: $line" || bad "analyze: Ctrl-C beside another run's checkpoint: rc $rc, '$line' $(head -c 300 err.txt)"
# hostile checkpoints: a fresh pass with a notice, the same tables
ana_killed ana_k2.db
[ -n "$ck" ] && printf 'X' | dd of="$ck" bs=1 seek=300 conv=notrunc 2> /dev/null
ana_after ana_k2.db "is damaged" "a byte changed in the checkpoint"
ana_killed ana_k3.db
[ -n "$ck" ] && truncate -s 1000 "$ck"
ana_after ana_k3.db "is damaged" "the checkpoint cut short"
ana_killed ana_k4.db --top 7
ana_after ana_k4.db "was made with other inputs or options" "a checkpoint of --top 7"
ana_killed ana_k5.db
[ -n "$ck" ] && rm -f "$ck" && mkdir "$ck"
ana_after ana_k5.db "is not a regular file" "a directory where the checkpoint was"
rmdir "$ck" 2> /dev/null
# a FIFO there hung the first save, a link there had its target overwritten (an audit): both are
# replaced by the checkpoint (never followed or written through) and gone at the end
ana_killed ana_k6.db
[ -n "$ck" ] && rm -f "$ck" && mkfifo "$ck"
ana_cmd ana_k6.db; timeout 120 "${CMD[@]}" > /dev/null 2> err.txt; rc=$?
andump ana_k6.db > ana_k6.db.dump
[ $rc -eq 0 ] && cmp -s ana_ref.dump ana_k6.db.dump && [ -z "$(ls ana_k6.db.analyze-* 2> /dev/null)" ] &&
    ok "analyze, a FIFO where the checkpoint was: not waited on, replaced, the same tables ($(grep -m1 saelite err.txt | cut -c1-90))" ||
    bad "analyze, a FIFO where the checkpoint was: rc $rc (124: hung), '$(head -n 1 err.txt)'"
ana_killed ana_k7.db
echo "precious" > victim.txt
[ -n "$ck" ] && rm -f "$ck" && ln -s "$PWD/victim.txt" "$ck"
ana_cmd ana_k7.db; "${CMD[@]}" > /dev/null 2> err.txt; rc=$?
andump ana_k7.db > ana_k7.db.dump
[ $rc -eq 0 ] && [ "$(cat victim.txt)" = precious ] && cmp -s ana_ref.dump ana_k7.db.dump && [ -z "$(ls ana_k7.db.analyze-* 2> /dev/null)" ] &&
    ok "analyze, a symbolic link where the checkpoint was: its target untouched, the same tables" ||
    bad "analyze, a symbolic link where the checkpoint was: rc $rc, the target now holds $(stat -c %s victim.txt) bytes"
# forged with the checksum recomputed: the first top entry of feature 0 (after the header, the
# tree's sums, the counts and ana_feat_acc_pack's fixed part) at sequence id 10^12: refused
ana_killed ana_k10.db
if [ -n "$ck" ]; then
    read -r depth <<< "$(python3 -c "import struct,sys; print(struct.unpack_from('<q', open(sys.argv[1],'rb').read(), 48)[0])" "$ck")"
    W1=$((5 + 64 + 512)); NB=40; D1=512
    ent=$((56 + depth * W1 * 8 + 16 + D1 * 8 + 8 + 48 + D1 * (8 + 4 + 4 + 4) + D1 * NB * 8))
    forge "$ck" $((ent + 8)) q 1000000000000
fi
ana_after ana_k10.db "an example outside the sequences it covers" "a forged example at sequence id 10^12"
# killed, then finished with --checkpoint-secs 0: the earlier run's file goes too
ana_killed ana_k11.db
ana_cmd ana_k11.db; "${CMD[@]}" --checkpoint-secs 0 > /dev/null 2>&1
[ -n "$ck" ] && [ -z "$(ls ana_k11.db.analyze-* 2> /dev/null)" ] && ok "analyze: a run without checkpoints removes a killed run's file" ||
    bad "analyze: left after a --checkpoint-secs 0 run: $(ls ana_k11.db.analyze-* 2> /dev/null)"
# the SAE's cfg.json (k) or the stored values changed after the kill: not continued
ana_killed ana_k8.db
cp -r sae_syn sae_syn8
sed -i 's/"k":[[:space:]]*8,/"k": 6,/' sae_syn/cfg.json
cp syn.db ana_k8ref.db
ana_cmd ana_k8ref.db; "${CMD[@]}" --checkpoint-secs 0 > /dev/null 2>&1
ana_cmd ana_k8.db; "${CMD[@]}" > /dev/null 2> err.txt; rc=$?
andump ana_k8ref.db > ana_k8ref.dump; andump ana_k8.db > ana_k8.dump
[ $rc -eq 0 ] && grep -q "was made with other inputs or options" err.txt && cmp -s ana_k8ref.dump ana_k8.dump &&
    ! cmp -s ana_ref.dump ana_k8.dump && ok "analyze, the SAE's k changed after the kill: not continued, the new k's tables" ||
    bad "analyze, the SAE's k changed after the kill: rc $rc, '$(grep -m1 saelite err.txt)', tables $(cmp -s ana_k8ref.dump ana_k8.dump && echo equal || echo differ)"
rm -rf sae_syn && mv sae_syn8 sae_syn
ana_killed ana_k9.db
"$BIN" synth --out syn2.npy --truth syn2_t.npy --db syn2.db --d 64 --features 256 --tokens 200000 --seq-len 64 --seed 5 > /dev/null 2>&1
rm -f ana_k9.db ana_k9.db-*; cp syn2.db ana_k9.db; cp syn2.db ana_k9ref.db
ana_cmd ana_k9ref.db; "${CMD[@]}" --checkpoint-secs 0 > /dev/null 2>&1
ana_cmd ana_k9.db; "${CMD[@]}" > /dev/null 2> err.txt; rc=$?
andump ana_k9ref.db > ana_k9ref.dump; andump ana_k9.db > ana_k9.dump
[ $rc -eq 0 ] && grep -q "was made with other inputs or options" err.txt && cmp -s ana_k9ref.dump ana_k9.dump &&
    ok "analyze, the database made again with other values under the same ids: not continued, its own tables" ||
    bad "analyze over a database made again: rc $rc, '$(grep -m1 saelite err.txt)', tables $(cmp -s ana_k9ref.dump ana_k9.dump && echo equal || echo differ)"

# --effects: killed once its own checkpoint (PATH.effects) is there, continued to the same
# tables (the 2-layer model of the extract above, the SAE trained on its MLP hook)
eff_cmd() { CMD=("$BIN" analyze --db "$1" --sae sae_ref --hook blocks.1.mlp.hook_post --model model --effects --all --checkpoint-secs 0.000001); }
cp ref.db eff_ref.db
eff_cmd eff_ref.db; "${CMD[@]}" > /dev/null 2> err.txt || bad "analyze --effects: uninterrupted run failed: $(head -n 1 err.txt)"
andump eff_ref.db > eff_ref.dump
cp ref.db eff_k.db
eff_cmd eff_k.db; "${CMD[@]}" > /dev/null 2>&1 &
pid=$!
for i in $(seq 1000); do ls eff_k.db.analyze-*.effects 2> /dev/null | grep -qv '\.tmp\.' && break; sleep 0.01; done
kill -KILL $pid 2> /dev/null; wait $pid 2> /dev/null
eff_cmd eff_k.db; "${CMD[@]}" > /dev/null 2> err.txt
rc=$?
andump eff_k.db > eff_k.dump
if [ $rc -eq 0 ] && grep -q "continuing the effects from eff_k.db.analyze-" err.txt && cmp -s eff_ref.dump eff_k.dump &&
   [ "$(grep -c . eff_ref.dump)" -gt 1000 ] && [ -z "$(ls eff_k.db.analyze-* 2> /dev/null)" ]; then
    ok "analyze --effects, killed after its first effects checkpoint: continued, every table equal ($(grep -m1 'continuing the effects' err.txt | sed 's/.*(//'))"
else bad "analyze --effects resumed: rc $rc, '$(grep -m1 saelite err.txt)', tables $(cmp -s eff_ref.dump eff_k.dump && echo equal || echo differ), left: $(ls eff_k.db.analyze-* 2> /dev/null)"; fi
# effkill DB: an --effects run of DB killed once its effects checkpoint is there ($eck: it)
effkill() {
    rm -f "$1"*; cp ref.db "$1"
    eff_cmd "$1"; "${CMD[@]}" > /dev/null 2>&1 &
    local pid=$! i
    for i in $(seq 1000); do eck=$(ls "$1".analyze-*.effects 2> /dev/null | grep -v '\.tmp\.' | head -n 1); [ -n "$eck" ] && break; sleep 0.01; done
    kill -KILL $pid 2> /dev/null; wait $pid 2> /dev/null
    eck=$(ls "$1".analyze-*.effects 2> /dev/null | grep -v '\.tmp\.' | head -n 1)
}
# forged effects checkpoints (checksum recomputed; the SAE's 64 features, vocabulary 270, one
# chunk): a NaN KL sum failed every later run, a token id out of range stayed in every later
# checkpoint (an audit); refused, the same tables, and the next checkpoint continues
for forgery in "nan 1104 d nan" "token 71760 i 99999"; do
    set -- $forgery
    effkill eff_f$1.db
    [ -n "$eck" ] && forge "$eck" "$2" "$3" "$4"
    eff_cmd eff_f$1.db; "${CMD[@]}" > /dev/null 2> err.txt; rc=$?
    andump eff_f$1.db > eff_f$1.dump
    [ $rc -eq 0 ] && grep -q "is damaged" err.txt && cmp -s eff_ref.dump eff_f$1.dump &&
        ok "analyze --effects, a forged $1: refused ($(grep -m1 'is damaged' err.txt | sed 's/.*is damaged/is damaged/' | cut -c1-60)), the same tables" ||
        bad "analyze --effects, a forged $1: rc $rc, '$(grep -m1 saelite err.txt)'"
done
effkill eff_p.db
[ -n "$eck" ] && forge "$eck" 71760 i 99999
sleep 0.05; touch forged.mark
eff_cmd eff_p.db; "${CMD[@]}" > /dev/null 2>&1 &
pid=$!
for i in $(seq 1000); do [ -n "$(find . -maxdepth 1 -name 'eff_p.db.analyze-*.effects' -newer forged.mark 2> /dev/null)" ] && break; sleep 0.01; done
kill -KILL $pid 2> /dev/null; wait $pid 2> /dev/null
eff_cmd eff_p.db; "${CMD[@]}" > /dev/null 2> err.txt; rc=$?
[ $rc -eq 0 ] && grep -q "continuing the effects" err.txt && ok "analyze --effects: after a refused forged file the next checkpoint is taken again" ||
    bad "analyze --effects after a refused forged file: rc $rc, '$(grep -m1 saelite err.txt)'"

# ---- report: the same command keeps the dashboards a killed run finished ------------------------
# Dashboards are drawn into a staging folder and moved into --out at the end; a killed run's
# folder is taken over by the next run, which keeps every dashboard whose content key matches.
# Compared: every file of --out, byte for byte, with an uninterrupted run's.
rep_cmd() { CMD=("$BIN" report --db ana_ref.db --sae sae_syn --top 300 --out "$1"); }
t0=$(now_ms); rep_cmd rep_ref; "${CMD[@]}" > /dev/null 2> err.txt || bad "report: uninterrupted run failed: $(head -n 1 err.txt)"
rep_ms=$(( $(now_ms) - t0 ))
cmd_for() { rep_cmd rep_crash; }
reset_for() { rm -rf rep_crash; }
after_kill() { :; }
reset_for
run_killed report "$KILLS" "$rep_ms"
staged=$(find rep_crash -name '*.png' -path '*saelite-report.tmp*' 2> /dev/null | wc -l)
cmd_for; "${CMD[@]}" > out.txt 2> err.txt || bad "report: the run after the kills failed: $(head -n 1 err.txt)"
kept=$(sed -n 's/.*(\([0-9]*\) already there.*/\1/p' out.txt)
if diff -r rep_ref rep_crash > /dev/null && [ "${kept:-0}" -gt 0 ] && [ "$staged" -gt 0 ]; then
    ok "report: after the kills --out equals the uninterrupted run's; $kept of 300 dashboards kept ($staged staged by the last killed run)"
else bad "report after the kills: kept '${kept}', staged $staged, $(diff -r rep_ref rep_crash 2>&1 | head -n 2 | tr '\n' ' ')"; fi
rep_cmd rep_crash; "${CMD[@]}" > out.txt 2> err.txt
grep -q "(300 already there with the same content, kept)" out.txt && grep -q " 0 drawn" out.txt && diff -r rep_ref rep_crash > /dev/null &&
    ok "report: run again, nothing is drawn: $(cut -c1-80 out.txt)" || bad "report run again: $(head -n 1 out.txt) $(head -n 1 err.txt)"
"$BIN" report --db ana_ref.db --sae sae_syn --top 300 --out rep_crash --contexts 5 > out.txt 2> err.txt
grep -q "already there" out.txt && bad "report --contexts 5 kept dashboards drawn with 20: $(head -n 1 out.txt)" ||
    ok "report: another --contexts draws every dashboard again"
# Ctrl-C: the message says the dashboards are kept, and the next run keeps them
rm -rf rep_int
rep_cmd rep_int; "${CMD[@]}" > /dev/null 2> err.txt &
pid=$!
for i in $(seq 500); do [ "$(find rep_int -name 'feature_*.png' 2> /dev/null | wc -l)" -ge 20 ] && break; sleep 0.01; done
kill -INT $pid 2> /dev/null; wait $pid; rc=$?
rep_cmd rep_int; "${CMD[@]}" > out.txt 2> err2.txt
if [ $rc -eq 130 ] && grep -q "kept for the same command" err.txt && grep -q "already there" out.txt && diff -r rep_ref rep_int > /dev/null; then
    ok "report: after Ctrl-C ($(grep -m1 interrupted err.txt | cut -c1-60)) the next run keeps them, the same files"
elif [ $rc -eq 0 ]; then skip=$((skip + 1)); echo "skip report Ctrl-C: the run finished before the signal"
else bad "report after Ctrl-C: rc $rc, '$(head -n 1 err.txt)', '$(head -n 1 out.txt)', the next run: '$(head -n 2 err2.txt | tr '\n' ' ')'"; fi

echo "test_crash_resume: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
