#!/usr/bin/env bash
# test_eval.sh - `saelite eval` end to end on a small tagged Brown-format database of two genres:
# both suites run, the eval_summary view carries the contract's metrics keyed by the SAE's
# registry id, a rerun replaces its rows with the same numbers, --sae takes a registry id, an
# unregistered directory is registered, SCR and TPP write their rows (news is mostly present tense
# here, adventure mostly past: SCR's correlated pair), nothing is written on failure. A few seconds.
# Usage: tests/test_eval.sh   (SAELITE_BIN=path overrides ./saelite)
set -u
ROOT=$(pwd)
BIN=${SAELITE_BIN:-./saelite}
[[ "$BIN" == /* ]] || BIN="$ROOT/$BIN"
W=$(mktemp -d "${TMPDIR:-/tmp}/saelite-eval.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
pass=0; fail=0
ok() { if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $*"; fi; }

mkdir -p "$W/brown"; : > "$W/brown/cats.txt"
for d in 1 2 3 4 5 6 7 8; do
    if [ $d -le 4 ]; then id=ca0$d; g=news; else id=cn0$d; g=adventure; fi
    echo "$id $g" >> "$W/brown/cats.txt"
    awk -v seed=$d -v g=$g 'BEGIN {
        split("cat dog bird horse farmer teacher river garden house window", N, " ")
        if (g == "news") { split("sat ran slept walked looked waited", V, " "); split("sits runs sleeps walks looks waits", Z, " ") }
        else { split("fought rode climbed shouted jumped fled", V, " "); split("fights rides climbs shouts jumps flees", Z, " ") }
        split("big small old green quiet happy", A, " "); split("on near under behind", P, " ")
        split("he she they it", R, " "); split("slowly quickly often", B, " ")
        s = seed * 7
        for (i = 0; i < 100; i++) {
            s = (s * 1103515245 + 12345) % 2147483648; n1 = 1 + int(s / 65536) % 10
            s = (s * 1103515245 + 12345) % 2147483648; v = 1 + int(s / 65536) % 6
            s = (s * 1103515245 + 12345) % 2147483648; a = 1 + int(s / 65536) % 6
            s = (s * 1103515245 + 12345) % 2147483648; p = 1 + int(s / 65536) % 4
            s = (s * 1103515245 + 12345) % 2147483648; r = 1 + int(s / 65536) % 4
            s = (s * 1103515245 + 12345) % 2147483648; b = 1 + int(s / 65536) % 3
            if (i % 6 == 0) printf "\n\n\t"
            para = int(i / 6); past = (g == "news") ? (para % 4 == 0) : (para % 4 != 0)
            if (past) printf "The/at %s/jj %s/nn %s/vbd %s/in the/at %s/nn and/cc %s/pps %s/rb %s/vbd ./. ", A[a], N[n1], V[v], P[p], N[n1], R[r], B[b], V[v]
            else printf "The/at %s/jj %s/nn %s/vbz %s/in the/at %s/nn and/cc %s/pps %s/rb %s/vbz ./. ", A[a], N[n1], Z[v], P[p], N[n1], R[r], B[b], Z[v]
        }
        printf "\n" }' > "$W/brown/$id"
done
H=blocks.0.mlp.hook_post
setup() { "$BIN" "$@" > "$W/setup.log" 2>&1 || { echo "FAIL: setup: saelite $*"; tail -3 "$W/setup.log"; echo "test_eval: $pass passed, 1 failed"; exit 1; }; }
setup corpus brown "$W/brown" -o "$W/corpus"
setup bpe-train --vocab 300 "$W/corpus/brown.jsonl" -o "$W/m"
setup init-model --layers 1 --d-model 32 --heads 4 --vocab 300 --ctx 32 --seed 3 -o "$W/m"
setup extract --model "$W/m" --corpus "$W/corpus/brown.jsonl" --tags "$W/corpus/brown.tags.jsonl" --hook $H --db "$W/fx.db"
setup sae-train --db "$W/fx.db" --hook $H --arch topk --k 4 --expansion 2 --tokens 20k --seed 1 --out "$W/sae"
DB="$W/fx.db"
q() { sqlite3 "$DB" "$@"; }
SID=$(q "SELECT id FROM sae_registry WHERE dir = '$W/sae'")
E="--seqs-per-genre 40 --train-per-class 200 --test-per-class 80"

"$BIN" eval --db "$DB" --sae "$W/sae" $E > "$W/e1.out" 2> "$W/e1.err"; rc=$?
ok test $rc -eq 0
ok grep -q "^sparse probing: [0-9]* tasks" "$W/e1.out"
ok grep -q "^absorption: " "$W/e1.out"
ok grep -q "^eval: SAE id $SID at $H" "$W/e1.out"
for m in sparse_probing_top1_acc sparse_probing_top5_acc absorption_mean_frac absorption_mean_frac_nogate absorption_full_rate; do
    ok test "$(q "SELECT count(*) FROM eval_summary WHERE sae_id = $SID AND metric = '$m' AND typeof(value) = 'real' AND value BETWEEN 0 AND 1")" = 1
done
# per sample the ungated fraction is the gated one or more (the gate only sets samples to 0)
ok test "$(q "SELECT (SELECT value FROM eval_summary WHERE sae_id = $SID AND metric = 'absorption_mean_frac_nogate') >= (SELECT value FROM eval_summary WHERE sae_id = $SID AND metric = 'absorption_mean_frac')")" = 1
ok grep -q "without the 40% gate" "$W/e1.out"
ok test "$(q "SELECT group_concat(DISTINCT kind) FROM eval_probe")" = "pos,genre"
ok test "$(q "SELECT count(DISTINCT dict) FROM eval_probe")" = 5
# one token ('and') is the whole class: even a random model's hook separates it from the rest
ok test "$(q "SELECT test_acc > 0.9 FROM eval_probe WHERE task = 'pos:conjunction' AND dict = 'full'")" = 1
# balanced sets: half positives, so a constant guess scores 0.5
ok test "$(q "SELECT count(*) FROM eval_probe WHERE n_train % 2 != 0")" = 0
snap() { q "SELECT task, dict, k, n_train, n_test, test_acc FROM eval_probe ORDER BY 1,2,3; SELECT parent, gt_f1, included, split_features, n_probe_tp, n_false_neg, mean_frac, full_rate FROM eval_absorption ORDER BY parent; SELECT metric, value FROM eval_summary WHERE metric != 'seconds' ORDER BY 1"; }
snap > "$W/s1"
# a rerun, by registry id: the same rows, replaced (not added)
"$BIN" eval --db "$DB" --sae "$SID" $E > "$W/e2.out" 2>&1; ok test $? -eq 0
snap > "$W/s2"
ok cmp -s "$W/s1" "$W/s2"
ok test "$(q "SELECT count(*) FROM eval_runs")" = 4
for m in scr_metric_threshold_2 scr_metric_threshold_500 tpp_threshold_2_total_metric tpp_threshold_500_total_metric; do
    ok test "$(q "SELECT count(*) FROM eval_summary WHERE sae_id = $SID AND metric = '$m' AND typeof(value) = 'real'")" = 1
done
ok test "$(q "SELECT count(DISTINCT task) FROM eval_ablation WHERE task LIKE 'scr:%'")" = 2
ok test "$(q "SELECT count(*) FROM eval_ablation WHERE task LIKE 'tpp:genre:%' AND n = 500")" = 2
# the sequence labels are correlated (news present, adventure past)
ok test "$(q "SELECT value > 0.3 FROM eval_summary WHERE metric = 'scr_label_phi'")" = 1
# --no-random: the same SAE numbers, no random-SAE rows
"$BIN" eval --db "$DB" --sae "$SID" $E --suite sparse_probing --no-random > /dev/null 2>&1; ok test $? -eq 0
ok test "$(q "SELECT count(*) FROM eval_probe WHERE dict = 'random_sae'")" = 0
ok test "$(q "SELECT count(*) FROM eval_summary WHERE metric LIKE 'sparse_probing_random%'")" = 0
snap > "$W/s1b"
ok test "$(grep -v random_sae "$W/s1" | grep -v sparse_probing_random)" = "$(cat "$W/s1b")"
# another seed: another document split, other numbers
"$BIN" eval --db "$DB" --sae "$SID" $E --seed 7 --suite sparse_probing > /dev/null 2>&1; ok test $? -eq 0
ok test "$(q "SELECT count(*) FROM eval_runs")" = 4
snap > "$W/s3"
ok test -n "$(cmp "$W/s1" "$W/s3" 2>&1)"
# an SAE directory the database does not know is registered
cp -r "$W/sae" "$W/sae2"
"$BIN" eval --db "$DB" --sae "$W/sae2" $E --suite absorption > "$W/e4.out" 2>&1; ok test $? -eq 0
ok grep -q "(registered now)" "$W/e4.out"
ok test "$(q "SELECT count(*) FROM eval_summary s JOIN sae_registry r ON r.id = s.sae_id WHERE r.dir = '$W/sae2' AND metric = 'absorption_full_rate'")" = 1
# a database without tags: "all" runs what it can (the genre tasks), names what it skipped;
# asking for absorption there is an error
setup extract --model "$W/m" --corpus "$W/corpus/brown.jsonl" --hook $H --db "$W/plain.db"
"$BIN" eval --db "$W/plain.db" --sae "$W/sae" $E > "$W/p1.out" 2>&1; ok test $? -eq 0
ok grep -q "^skipped .*absorption (no POS tags) scr" "$W/p1.out"
ok grep -q "^sparse probing: 2 tasks (0 POS, 2 genre)" "$W/p1.out"
"$BIN" eval --db "$W/plain.db" --sae "$W/sae" $E --suite absorption > "$W/p2.out" 2>&1; ok test $? -eq 1
ok grep -q "no POS-tagged tokens" "$W/p2.out"
# a cfg.json whose two hook_names differ names no hook: refused, nothing written
N0=$(q "SELECT count(*) FROM eval_runs")
mkdir -p "$W/hk" && cp "$W/sae/sae_weights.safetensors" "$W/hk/"
sed '0,/"hook_name":[[:space:]]*"[^"]*"/! s/"hook_name":[[:space:]]*"[^"]*"/"hook_name": "blocks.0.hook_resid_pre"/' "$W/sae/cfg.json" > "$W/hk/cfg.json"
"$BIN" eval --db "$DB" --sae "$W/hk" $E > "$W/x6.out" 2>&1; ok test $? -eq 1
ok grep -q "hk/cfg.json: metadata.hook_name is \"$H\" but the top-level hook_name is \"blocks.0.hook_resid_pre\"" "$W/x6.out"
ok test "$(q "SELECT count(*) FROM eval_runs")" = "$N0"
# refusals: an unknown suite, an unknown id; nothing is written
N0=$(q "SELECT count(*) FROM eval_runs")
"$BIN" eval --db "$DB" --sae "$SID" --suite scr,ravel > "$W/e5.out" 2>&1; rc=$?
ok test $rc -eq 1
ok grep -q "unknown suite 'ravel'" "$W/e5.out"
"$BIN" eval --db "$DB" --sae 999 > "$W/e6.out" 2>&1; ok test $? -eq 1
ok grep -q "no SAE with id 999" "$W/e6.out"
"$BIN" eval --db "$DB" > /dev/null 2>&1; ok test $? -eq 2
ok test "$(q "SELECT count(*) FROM eval_runs")" = "$N0"
# the sweep runs the suites on every SAE of its grid (eval_summary rows under each run's registry
# id, as `saelite eval` writes them) and draws their frontiers; --eval none leaves them out
"$BIN" sweep --db "$DB" --hook $H --out "$W/sw" --families topk,relu --ks 2,4 --relu-l1 1,4 \
    --d-sae 64 --tokens 8k --batch 256 --ce-seqs 8 --max-seqs 16 --eval-tokens 2000 \
    --eval sparse_probing,absorption --eval-seqs-per-genre 20 > "$W/sw.out" 2>&1; rc=$?
ok test $rc -eq 0
SW=$(q "SELECT count(*) FROM sweep_runs WHERE sae_id IN (SELECT sae_id FROM eval_summary WHERE metric = 'sparse_probing_top1_acc') AND sae_id IN (SELECT sae_id FROM eval_summary WHERE metric = 'absorption_mean_frac')")
ok test "$SW" = 4
ok test -s "$W/sw/frontier_sparse_probing_top1_acc.png"
ok test -s "$W/sw/frontier_absorption_mean_frac.png"
ok grep -vq "no eval_summary" "$W/sw.out"
ok test ! -e "$W/sw/frontier_seconds.png" -a ! -e "$W/sw/frontier_sparse_probing_n_tasks.png"
"$BIN" sweep --db "$W/plain.db" --hook $H --out "$W/sw2" --families topk --ks 2,4 --d-sae 64 --tokens 8k \
    --batch 256 --ce-seqs 8 --max-seqs 16 --eval-tokens 2000 --eval none > "$W/sw2.out" 2>&1; rc=$?
ok test $rc -eq 0
ok test "$(sqlite3 "$W/plain.db" "SELECT count(*) FROM eval_summary WHERE sae_id IN (SELECT sae_id FROM sweep_runs)")" = 0
echo "test_eval.sh: $pass passed, $fail failed"
[ $fail -eq 0 ]
