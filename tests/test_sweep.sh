#!/usr/bin/env bash
# test_sweep.sh - `saelite sweep` on a tiny random model: the grid trains and evaluates every run
# once (rows, PNGs), a sweep stopped between runs and inside a run (--max-runs, --max-steps)
# continues to the same SAEs and rows as an uninterrupted one, a finished sweep is not retrained,
# other settings in the same directory (the eval suites' included; not --expansion beside a
# --d-sae) are refused naming the setting,
# a bad --model/--tokenizer or a value twice in a list is refused before anything is written,
# SIGTERM says to rerun the same command, eval_summary metrics get frontiers, a smaller grid
# summarises only its runs, a second sweep into one directory is refused, k and empty hooks are
# checked per hook before anything is written, a database changed between a kill and the rerun is
# refused.
set -u
BIN=${SAELITE_BIN:-./saelite}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2"; fi; }
T=$(mktemp -d /tmp/saelite_test_sweep.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT

# a corpus of random common words, a BPE tokenizer trained on it and a random 1-layer model
RANDOM=2
for d in $(seq 60); do
    n=$((20 + RANDOM % 60)); line=""
    for _ in $(seq $n); do
        w=(the of and to in is was he for it with as his on be at by had are but from or)
        line+="${w[RANDOM % ${#w[@]}]} "
    done
    printf '%s.\n\n' "$line"
done > "$T/corpus.txt"
$BIN bpe-train --vocab 300 "$T/corpus.txt" -o "$T/tok" >/dev/null 2>&1
$BIN init-model --layers 1 --d-model 16 --heads 2 --ctx 32 --vocab 300 --seed 3 -o "$T/m" >/dev/null 2>&1
$BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus.txt" --ctx 32 --batch 4 \
    --hook blocks.0.mlp.hook_post,blocks.0.ln2.hook_normalized,blocks.0.hook_mlp_out --db "$T/a.db" >/dev/null 2>&1
check '[ $? -eq 0 ]' "extract of the three hooks"

SW=(--db "$T/a.db" --hook blocks.0.mlp.hook_post --tc-hook blocks.0.ln2.hook_normalized
    --tc-hook-out blocks.0.hook_mlp_out --model "$T/m" --tokenizer "$T/tok"
    --families relu,topk,gated,transcoder,skip_transcoder,target_topk --ks 2,4 --relu-l1 0.25,4 --gated-l1 1,4
    --d-sae 32 --tokens 3072 --batch 128 --checkpoint-every 4 --val-frac 0.2 --eval-tokens 256
    --ce-seqs 4 --max-seqs 8)
runs=12
out=$($BIN sweep "${SW[@]}" --out "$T/full" 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"$runs runs (0 done before, $runs trained now)"* ]]' "full sweep: $out"
q() { sqlite3 "$T/a.db" "$1"; }
check '[ "$(q "SELECT count(*) FROM sweep_runs WHERE sweep = '"'$T/full'"' AND l0 > 0 AND ev IS NOT NULL AND ce_score IS NOT NULL AND sae_id IS NOT NULL")" = $runs ]' \
    "one row per run with L0, EV, CE score and the registry id"
check '[ "$(q "SELECT count(*) FROM sweep_runs r JOIN sae_registry s ON s.id = r.sae_id AND s.dir = r.dir WHERE r.sweep = '"'$T/full'"'")" = $runs ]' \
    "rows point at their registered SAEs"
check '[ "$(q "SELECT count(DISTINCT tokens || seed || d_sae) FROM sweep_runs")" = 1 ]' "same budget, seed and size"
check '[ "$(q "SELECT hook_out FROM sweep_runs WHERE name = '"'skip_transcoder_k2'"'")" = blocks.0.hook_mlp_out ]' "transcoder rows name their target"
check '[ "$(q "SELECT count(*) FROM sweep_runs WHERE family = '"'"'topk@blocks.0.hook_mlp_out'"'"'")" = 2 ]' "the target SAE has its family"
for f in frontier_ev frontier_ce frontier_transcoders; do
    check '[ -s "$T/full/$f.png" ] && [[ "$out" == *"wrote $T/full/$f.png"* ]]' "$f.png drawn"
done
check '[[ "$out" == *"no eval_summary view"* ]] && ! ls "$T/full" | grep -q sparse' "without eval_summary its frontiers are not drawn"
check '[[ "$out" == *"L0 needed for an explained variance"* ]] && [[ "$out" == *"best "* ]]' "summary with winners"
check '[[ "$out" == *"transcoders: CE loss score with blocks.0.hook_mlp_out replaced at equal L0"* ]]' "the transcoders' winners name the replaced hook"
# a user's own analyze of a sweep's SAE replaces its analysis under the same id: the sweep's
# dict_id named a row that was gone
d0=$(q "SELECT dict_id FROM sweep_runs WHERE name = 'topk_k2'")
out=$($BIN analyze --db "$T/a.db" --sae "$T/full/topk_k2" --model "$T/m" --tokenizer "$T/tok" --max-seqs 6 2>&1)
check '[ $? -eq 0 ] && [ -n "$d0" ] && [ "$(q "SELECT d.id || d.n_seqs FROM sweep_runs r JOIN ana_dicts d ON d.id = r.dict_id WHERE r.name = '"'topk_k2'"'")" = "${d0}6" ]' \
    "a manual analyze keeps the sweep's dict_id ($d0): $out"
# a user deletes the largest ana_dicts row (sqlite3): the next analysis of another SAE took its
# id, and the sweep's dict_id named that SAE's analysis
dmax=$(q "SELECT max(id) FROM ana_dicts"); nmax=$(q "SELECT name FROM sweep_runs WHERE dict_id = $dmax")
q "DELETE FROM ana_dicts WHERE id = $dmax"
$BIN sae-train --db "$T/a.db" --hook blocks.0.mlp.hook_post --d-sae 32 --k 2 --tokens 1024 --batch 128 --out "$T/other" >/dev/null 2>&1
out=$($BIN analyze --db "$T/a.db" --sae "$T/other" --no-model --max-seqs 6 2>&1)
check '[ $? -eq 0 ] && [ -n "$nmax" ] && [ "$(q "SELECT max(id) FROM ana_dicts")" -gt "$dmax" ] && [ -z "$(q "SELECT d.id FROM sweep_runs r JOIN ana_dicts d ON d.id = r.dict_id WHERE r.name = '"'$nmax'"'")" ]' \
    "a new analysis after the largest row was deleted takes an id no sweep row names ($nmax had $dmax; new $(q "SELECT max(id) FROM ana_dicts")): $out"

# stopped after one run, then inside the next one, then continued
out=$($BIN sweep "${SW[@]}" --out "$T/part" --max-runs 1 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"11 runs left"* ]] && [ ! -e "$T/part/frontier_ev.png" ]' "--max-runs 1: $out"
out=$($BIN sweep "${SW[@]}" --out "$T/part" --max-steps 5 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"stopped in relu_l14 at step 5 of 24"* ]] && [ -s "$T/part/relu_l14/checkpoint.bin" ]' "--max-steps 5: $out"
out=$($BIN sweep "${SW[@]}" --out "$T/part" 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"(1 done before, 11 trained now)"* ]] && [ -s "$T/part/frontier_ev.png" ]' "continued: $out"
same=1
for d in "$T"/full/*/; do
    n=$(basename "$d")
    cmp -s "$d/sae_weights.safetensors" "$T/part/$n/sae_weights.safetensors" || { same=0; echo "differs: $n"; }
done
check '[ $same = 1 ]' "the interrupted sweep's SAEs are bit-identical to the uninterrupted ones"
rows() { q "SELECT name, ev, l0, dead_frac, ce_score, kl_score FROM sweep_runs WHERE sweep = '$1' ORDER BY name"; }
check '[ "$(rows "$T/full")" = "$(rows "$T/part")" ]' "and so are their rows"
# a run directory removed or damaged after its row was written is trained again, not skipped as
# "done before" (its row listed an SAE that no longer existed, an audit)
rm -rf "$T/part/topk_k2"
head -c 100 "$T/full/gated_l11/sae_weights.safetensors" > "$T/part/gated_l11/sae_weights.safetensors"
out=$($BIN sweep "${SW[@]}" --out "$T/part" --no-png 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"(10 done before, 2 trained now)"* ]] && [[ "$out" == *"2 runs recorded done no longer had that SAE in their directory"* ]]' "lost runs trained again: $out"
check 'cmp -s "$T/full/topk_k2/sae_weights.safetensors" "$T/part/topk_k2/sae_weights.safetensors" && cmp -s "$T/full/gated_l11/sae_weights.safetensors" "$T/part/gated_l11/sae_weights.safetensors"' "to the same weights"
check '[ "$(rows "$T/full")" = "$(rows "$T/part")" ]' "and the same rows"

out=$($BIN sweep "${SW[@]}" --out "$T/full" --no-png 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"($runs done before, 0 trained now)"* ]]' "a finished sweep is not retrained: $out"
# however the directory is spelt (it was two sweeps over the same folders)
out=$(B=$(realpath "$BIN") && cd "$T" && "$B" sweep "${SW[@]}" --out ./full/ --no-png 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"($runs done before, 0 trained now)"* ]] && [ "$(q "SELECT count(DISTINCT sweep) FROM sweep_runs WHERE sweep LIKE '"'%full%'"'")" = 1 ]' "./full/ continues $T/full: $out"
out=$($BIN sweep "${SW[@]}" --out "$T/full" --tokens 4096 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"run relu_l10p25 was done with other settings: --tokens 3072, not 4096; rerun with --tokens 3072 to continue"* ]]' "other settings in the same directory refused, naming the setting: $out"
# the eval suites' settings are recorded too: a continued sweep with another
# --eval-seqs-per-genre scored half the grid on another sample, exit 0
n0=$(q "SELECT count(*) FROM sweep_runs")
out=$($BIN sweep "${SW[@]}" --out "$T/full" --eval-seqs-per-genre 5 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"--eval-seqs-per-genre 50, not 5;"* ]]' "another --eval-seqs-per-genre refused: $out"
out=$($BIN sweep "${SW[@]}" --out "$T/full" --eval sparse_probing 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"--eval sparse_probing,absorption, not sparse_probing;"* ]]' "another --eval refused: $out"
# --expansion sizes nothing beside --d-sae 32: another is no other setting (it was refused)
out=$($BIN sweep "${SW[@]}" --out "$T/full" --expansion 2 --no-png 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"($runs done before, 0 trained now)"* ]]' "another --expansion beside the same --d-sae continues: $out"
out=$($BIN sweep "${SW[@]}" --out "$T/full" --d-sae 64 --expansion 2 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"--d-sae 32, not 64;"* ]]' "another --d-sae still refused: $out"
out=$($BIN sweep "${SW[@]}" --out "$T/full" --eval absorption,sparse_probing --no-png 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"($runs done before, 0 trained now)"* ]]' "the same suites in another order continue: $out"
check '[ "$(q "SELECT count(*) FROM sweep_runs")" = $n0 ]' "the refusals wrote no rows"
# the CE/KL pass's model and tokenizer are checked before anything is written (a bad --model
# failed only after the first SAE was trained and registered)
$BIN init-model --layers 1 --d-model 16 --heads 2 --ctx 32 --vocab 300 --seed 4 -o "$T/m2" >/dev/null 2>&1
nreg=$(q "SELECT count(*) FROM sae_registry")
for bad in "--model $T/nope:nope/config.json: cannot open" "--tokenizer $T/m:m: no tokenizer files" \
           "--model $T/m2:m2: checksum"; do
    out=$($BIN sweep "${SW[@]}" ${bad%%:*} --out "$T/badm" 2>&1)
    check '[ $? -eq 1 ] && [[ "$out" == *"${bad#*:}"* ]] && [ ! -e "$T/badm" ] && [ "$(q "SELECT count(*) FROM sae_registry")" = $nreg ]' \
        "${bad%%:*} refused before training: $out"
done
out=$($BIN sweep "${SW[@]}" --out "$T/x" --families topk,nope 2>&1)
check '[ $? -eq 2 ] && [[ "$out" == "saelite sweep: unknown family"* ]]' "unknown family, one prefix: $out"
# SIGTERM inside a run: the message says how a sweep continues (it passed on sae-train's
# "continue with --resume", an option the sweep does not have)
$BIN sweep "${SW[@]}" --out "$T/term" --families topk --ks 2 --tokens 1000000000 > "$T/term.out" 2> "$T/term.err" &
pid=$!
for _ in $(seq 300); do [ -e "$T/term/topk_k2/checkpoint.bin" ] && break; sleep 0.1; done
kill -TERM $pid; wait $pid; rc=$?
check '[ $rc -eq 130 ] && grep -q "interrupted while training $T/term/topk_k2 at step [0-9]* of 7812500 (checkpoint saved); rerun the same command to continue" "$T/term.err" && ! grep -q -- "--resume" "$T/term.err"' \
    "SIGTERM's message: $(tail -c 300 "$T/term.err")"

# a value twice trained the same run twice into one directory: refused before anything is written
for dup in "--ks 4,2,4:--ks: 4 is given twice" "--relu-l1 1,1.0:--relu-l1: 1 is given twice" \
           "--gated-l1 1.0000001,1.0000002:--gated-l1: 1.0000001 and 1.0000002 would be one run" \
           "--jumprelu-l0 2,2:--jumprelu-l0: 2 is given twice"; do
    out=$($BIN sweep "${SW[@]}" ${dup%%:*} --out "$T/dup" 2>&1)
    check '[ $? -eq 2 ] && [[ "$out" == "saelite sweep: ${dup#*:}"* ]] && [ ! -e "$T/dup" ]' "${dup%%:*} refused: $out"
done
out=$($BIN sweep "${SW[@]}" --out "$T/x" --families "" 2>&1)
check '[ $? -eq 2 ] && [[ "$out" == "saelite sweep: --families: no family given"* ]] && [ ! -e "$T/x" ]' "--families '' is a usage error (was exit 1, the grid is empty): $out"
out=$($BIN sweep "${SW[@]}" --out "$T/x" --ks 2,x 2>&1)
check '[ $? -eq 2 ]' "bad --ks is a usage error"

# findings of an audit of the sweep:
# a smaller grid over a finished directory drew and summarised the other runs too
out=$($BIN sweep "${SW[@]}" --out "$T/full" --families relu,topk --ks 2 --no-png 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"3 runs (3 done before, 0 trained now)"* ]] && [[ "$out" == *"9 runs in $T/full from another grid"* ]] && [[ "$out" != *"topk 0"*"topk_k4"* ]]' \
    "a smaller grid summarises its own runs: $out"
# two sweeps into one directory both trained the whole grid
if command -v flock >/dev/null; then
    flock "$T/full/.sweep.lock" sleep 3 & fl=$!
    sleep 0.5
    out=$($BIN sweep "${SW[@]}" --out "$T/full" --no-png 2>&1)
    check '[ $? -eq 1 ] && [[ "$out" == *"$T/full: another sweep is writing into this directory"* ]]' "a second sweep into one directory: $out"
    wait $fl
fi
# k against the transcoders' own d_sae (expansion x a 16-wide hook) before anything trains
out=$($BIN sweep "${SW[@]}" --out "$T/kbig" --families topk,transcoder --ks 48 --d-sae 0 --expansion 2 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"k 48 is more than d_sae (32) of transcoder on blocks.0.ln2.hook_normalized"* ]] && [ ! -e "$T/kbig" ]' \
    "k above a transcoder's d_sae refused first: $out"
# a hook without training rows: refused before the directory and the table
cp "$T/a.db" "$T/noact.db"
sqlite3 "$T/noact.db" "DELETE FROM activations WHERE hook_id = (SELECT id FROM hooks WHERE name = 'blocks.0.hook_mlp_out')"
out=$($BIN sweep "${SW[@]/$T\/a.db/$T/noact.db}" --out "$T/noact" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"hook blocks.0.hook_mlp_out has no activations in the training split"* ]] && [ ! -e "$T/noact" ]' \
    "a hook without activations refused first: $out"

# the database changed between a kill and the rerun (another extract into the same hook): the
# runs done before were trained on the old data, the rest would be on the new, one frontier,
# exit 0; and a directory of another database's sweep: its finished checkpoints were taken as
# this database's SAEs (an audit). Both refused, naming the hook and the counts
cp "$T/a.db" "$T/ch.db"
CH=("${SW[@]/$T\/a.db/$T/ch.db}" --families topk --ks 2,4 --no-png --eval none)
$BIN sweep "${CH[@]}" --out "$T/ch" --max-runs 1 > /dev/null 2>&1
$BIN sweep "${CH[@]}" --out "$T/ch2" --max-steps 2 > /dev/null 2>&1
sed 's/^the /a /' "$T/corpus.txt" > "$T/corpus2.txt"
$BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus2.txt" --ctx 32 --batch 4 \
    --hook blocks.0.mlp.hook_post,blocks.0.ln2.hook_normalized,blocks.0.hook_mlp_out --db "$T/ch.db" >/dev/null 2>&1
n0=$(sqlite3 "$T/ch.db" "SELECT count(*) FROM sweep_runs")
out=$($BIN sweep "${CH[@]}" --out "$T/ch" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"run topk_k2 was trained on other data: hook blocks.0.mlp.hook_post had "*" tokens in its training split then, "*" now in $T/ch.db"* ]] && [ "$(sqlite3 "$T/ch.db" "SELECT count(*) FROM sweep_runs")" = $n0 ]' \
    "a database changed after a run was done: $out"
out=$($BIN sweep "${CH[@]}" --out "$T/ch2" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"run had \"store_rows "*"(the training split"*" tokens in --db"* ]]' \
    "a database changed during a run: $out"
out=$($BIN sweep "${SW[@]}" --out "$T/full" --families topk --ks 2 --no-png 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"(1 done before, 0 trained now)"* ]]' "the same database continues: $out"
# rows of the transcoder's target hook for other sequences (an extract of that hook alone): its
# pairs are its input hook's sequences, unchanged; it was refused as trained on other data
cp "$T/a.db" "$T/to.db"
TO=("${SW[@]/$T\/a.db/$T/to.db}" --families transcoder --ks 2 --no-png --eval none)
$BIN sweep "${TO[@]}" --out "$T/to" > /dev/null 2>&1
$BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus2.txt" --ctx 32 --batch 4 \
    --hook blocks.0.hook_mlp_out --db "$T/to.db" >/dev/null 2>&1
out=$($BIN sweep "${TO[@]}" --out "$T/to" 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"(1 done before, 0 trained now)"* ]]' "rows of the transcoder's target hook for other sequences: $out"
# a transcoder's run recorded by 0a8459d (on main) holds train_tokens_out, which 0fffd9c stopped
# checking: it continues (it was refused as done with "--train-tokens-out N", a flag there is not)
sqlite3 "$T/to.db" "UPDATE sweep_runs SET config = substr(config, 1, length(config) - 1) || ', \"train_tokens_out\": 7}' WHERE sweep = '$T/to'"
out=$($BIN sweep "${TO[@]}" --out "$T/to" 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"(1 done before, 0 trained now)"* ]]' "a run recorded with train_tokens_out (0a8459d): $out"

# an SAE trained by hand into the directory of the run with the largest registry id: its new
# registry row got that same id again, so the sweep's row took it for the SAE it had trained
# ("done before", the old run's numbers on the frontier; eval rows of the old SAE became the new
# one's): an audit. A new id: the run is found changed
cp "$T/a.db" "$T/ru.db"
RU=("${SW[@]/$T\/a.db/$T/ru.db}" --families topk --ks 2,4 --no-png --eval none)
$BIN sweep "${RU[@]}" --out "$T/ru" > /dev/null 2>&1
id0=$(sqlite3 "$T/ru.db" "SELECT sae_id FROM sweep_runs WHERE sweep = '$T/ru' AND name = 'topk_k4'")
check '[ "$id0" = "$(sqlite3 "$T/ru.db" "SELECT max(id) FROM sae_registry")" ]' "topk_k4 holds the largest id"
$BIN sae-train --db "$T/ru.db" --hook blocks.0.mlp.hook_post --arch topk --k 3 --d-sae 32 --tokens 3072 --val-frac 0.2 \
    --batch 128 --out "$T/ru/topk_k4" --force > /dev/null 2>&1
check '[ "$(sqlite3 "$T/ru.db" "SELECT id FROM sae_registry WHERE k = 3")" -gt "$id0" ]' "a re-registered directory gets a new id"
out=$($BIN sweep "${RU[@]}" --out "$T/ru" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" != *"(2 done before"* ]] && [[ "$out" == *"topk_k4/checkpoint.bin: the checkpoint"*"run had --k 3 (this run 4)"* ]]' \
    "the sweep sees the run's directory changed: $out"
# ... and says what to do (a sweep has no flags to change: it said "resume with the same flags"),
# which then works
check '[[ "$out" == *"(this run 4); that run was started with other settings or data (this sweep with other flags or before the database changed, or a sae-train by hand): rerun as it was started to continue it, or remove $T/ru/topk_k4/checkpoint.bin to train it from the start" ]]' \
    "the refusal inside a sweep says to remove the checkpoint: $out"
rm "$T/ru/topk_k4/checkpoint.bin"
out=$($BIN sweep "${RU[@]}" --out "$T/ru" 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"(1 done before, 1 trained now)"* ]]' "removed, the run is trained again: $out"
# a checkpoint this sweep left (--max-steps) under other flags: it said "that is not this sweep's
# run", where the sweep's first flags continue it (a review)
cp "$T/a.db" "$T/ms.db"
MS=("${SW[@]/$T\/a.db/$T/ms.db}" --families topk --ks 2 --no-png --eval none --out "$T/ms")
$BIN sweep "${MS[@]}" --max-steps 2 > /dev/null 2>&1
out=$($BIN sweep "${MS[@]}" --seed 7 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"that run was started with other settings or data (this sweep with other flags"*"rerun as it was started to continue it"* ]] && [ -s "$T/ms/topk_k2/checkpoint.bin" ]' \
    "a checkpoint the sweep left under other flags: $out"
out=$($BIN sweep "${MS[@]}" 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"(0 done before, 1 trained now)"* ]]' "its first flags continue it: $out"

# the eval suites' view (a stand-in here): its metrics get frontiers by name
q "CREATE VIEW eval_summary AS SELECT id AS sae_id, 'sparse_probing' AS suite, 'sparse_probing_top1_acc' AS metric, 0.5 + eval_ev / 4 AS value FROM sae_registry UNION ALL SELECT id, 'absorption', 'absorption_mean_frac', 0.1 FROM sae_registry WHERE architecture = 'topk'"
out=$($BIN sweep "${SW[@]}" --out "$T/full" 2>&1)
check '[ $? -eq 0 ] && [ -s "$T/full/frontier_sparse_probing_top1_acc.png" ] && [ -s "$T/full/frontier_absorption_mean_frac.png" ] && [[ "$out" != *"no eval_summary"* ]]' "eval_summary frontiers: $out"

echo "test_sweep: $pass passed, $fail failed"
[ $fail -eq 0 ]
