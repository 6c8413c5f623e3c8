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
# every headline mean over test rows has its standard error beside it (<metric>_se, a bootstrap
# over the test documents): real, above rounding noise (the two test documents are each their
# genre's only one: drawn together, not as strata of one) and below 0.25, and printed
for m in sparse_probing_top1_acc sparse_probing_top5_acc sparse_probing_random_top1_acc sparse_probing_neurons_top1_acc sparse_probing_pos_top1_acc sparse_probing_genre_top1_acc sparse_probing_full_acc sparse_probing_sae_full_acc absorption_mean_frac absorption_mean_frac_nogate absorption_full_rate; do
    ok test "$(q "SELECT count(*) FROM eval_summary WHERE sae_id = $SID AND metric = '${m}_se' AND typeof(value) = 'real' AND value > 1e-4 AND value < 0.25")" = 1
done
# counts, split features and timings are not means over test rows: no se
ok test "$(q "SELECT count(*) FROM eval_summary WHERE metric IN ('absorption_mean_split_se', 'sparse_probing_n_tasks_se', 'seconds_se')")" = 0
ok grep -q "^    ± se  " "$W/e1.out"
ok grep -q "mean absorption fraction [0-9.]* ± [0-9.]* ([0-9.]* ± [0-9.]* without the 40% gate), full-absorption rate [0-9.]* ± " "$W/e1.out"
ok grep -q "^  full probe *[0-9.]* ± [0-9.]* (every hook unit); every SAE latent [0-9.]* ± " "$W/e1.out"
# every parent counts in the absorption means, as in SAEBench (its min_GT_probe_f1 = 0.6 only
# counts usable probes): here adjective's ground-truth probe has F1 0.59 and was left out before
ABS="SELECT %s FROM eval_absorption a JOIN eval_runs r ON r.id = a.run_id WHERE r.sae_id = $SID"
ok test "$(q "$(printf "$ABS" "count(*)") AND NOT included")" -ge 1
for m in mean_frac full_rate; do
    ok test "$(q "SELECT abs((SELECT value FROM eval_summary WHERE sae_id = $SID AND metric = 'absorption_$m') - ($(printf "$ABS" "avg($m)"))) < 1e-12")" = 1
done
ok test "$(q "SELECT CAST(value AS INTEGER) FROM eval_summary WHERE sae_id = $SID AND metric = 'absorption_n_parents'")" = "$(q "$(printf "$ABS" "count(*)")")"
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
# a killed eval continues its read from the checkpoint (one per sequence here) to the same rows;
# a damaged checkpoint is a fresh read with a notice, to the same rows
snapall() { snap; q "SELECT task, n, clean_acc, orig_acc, score FROM eval_ablation a JOIN eval_runs r ON r.id = a.run_id WHERE r.sae_id = (SELECT max(sae_id) FROM eval_runs) ORDER BY 1, 2"; }
snapall > "$W/sa"
# forge FILE OFFSET FMT VALUE: a value put at OFFSET, the checksum recomputed (tests/forge_sum.py)
forge() { python3 "$ROOT/tests/forge_sum.py" "$@"; }
evkilled() { # DB [SAE]: an eval of DB killed once its first checkpoint is there ($ck: the file)
    rm -f "$1"*; cp "$W/fx.db" "$1"
    "$BIN" eval --db "$1" --sae "${2:-$W/sae}" $E --checkpoint-secs 0.000001 > /dev/null 2>&1 &
    local pid=$! i
    for i in $(seq 1000); do ck=$(ls "$1".eval-* 2> /dev/null | grep -v '\.tmp\.' | head -n 1); [ -n "$ck" ] && break; sleep 0.01; done
    kill -KILL $pid 2> /dev/null; wait $pid 2> /dev/null
    ck=$(ls "$1".eval-* 2> /dev/null | grep -v '\.tmp\.' | head -n 1)
}
evafter() { # DB WANT: the rerun says WANT on stderr, succeeds, leaves no checkpoint, same rows
    "$BIN" eval --db "$1" --sae "$W/sae" $E --checkpoint-secs 0.000001 > "$W/ck.out" 2> "$W/ck.err"
    local rc=$?
    ok test $rc -eq 0
    ok grep -q -- "$2" "$W/ck.err"
    ok test -z "$(ls "$1".eval-* 2> /dev/null)"
    DB="$1" snapall > "$W/sck"
    ok cmp -s "$W/sa" "$W/sck"
}
evkilled "$W/ck1.db"
ok test -n "$ck"
# Ctrl-C once a checkpoint is there: the line said only "interrupted"; now that the same
# command continues
rm -f "$W/ci.db"*; cp "$W/fx.db" "$W/ci.db"
"$BIN" eval --db "$W/ci.db" --sae "$W/sae" $E --checkpoint-secs 0.000001 > /dev/null 2> "$W/ci.err" &
cipid=$!
for i in $(seq 1000); do [ -n "$(ls "$W/ci.db".eval-* 2> /dev/null | grep -v '\.tmp\.')" ] && break; sleep 0.01; done
kill -INT $cipid; wait $cipid; ok test $? -eq 130
ok grep -q "^saelite eval: interrupted; the same command continues from $W/ci.db.eval-[0-9a-f]*$" "$W/ci.err"
# ... but not where the file is another run's: a run with --checkpoint-secs 0 stopped beside
# the checkpoint above never reads it (it said the same command continues from it)
mkfifo "$W/ci.fifo"
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.000001 "$BIN" eval --db "$W/ci.db" --sae "$W/sae" $E \
    --checkpoint-secs 0 > /dev/null 2> "$W/ci.fifo" &
cipid=$!
{ grep -q -m1 "eval read" && kill -INT $cipid; cat > "$W/ci0.err"; } < "$W/ci.fifo"
wait $cipid; ok test $? -eq 130
ok test -n "$(ls "$W/ci.db".eval-* 2> /dev/null)"
ok grep -q "^saelite eval: interrupted$" "$W/ci0.err"
# ... and before the first save (every 60 s by default) it says the same command starts again
# (it said "interrupted" alone, where sae-train names the case: a scale audit)
rm -f "$W/cf.db"*; cp "$W/fx.db" "$W/cf.db"; mkfifo "$W/cf.fifo"
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.000001 "$BIN" eval --db "$W/cf.db" --sae "$W/sae" $E \
    > /dev/null 2> "$W/cf.fifo" &
cipid=$!
{ grep -q -m1 "eval read" && kill -INT $cipid; cat > "$W/cf.err"; } < "$W/cf.fifo"
wait $cipid; ok test $? -eq 130
ok grep -q "^saelite eval: interrupted before the first checkpoint (every 60 s, --checkpoint-secs); the same command starts again$" "$W/cf.err"
# ... but not where a checkpoint is there: a stop before the read beside the checkpoint of ci.db's
# first run (the rerun continues it), and a stop in the suites after their file was saved with
# none of the read (a read shorter than the interval: the rerun takes the probes fitted so far)
rm -f "$W/cb.fifo"; mkfifo "$W/cb.fifo"
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.000001 "$BIN" eval --db "$W/ci.db" --sae "$W/sae" $E \
    --checkpoint-secs 0.000001 > /dev/null 2> "$W/cb.fifo" &
cipid=$!
{ grep -q -m1 "eval tense" && { kill -STOP $cipid; kill -INT $cipid; kill -CONT $cipid; }; cat > "$W/cb.err"; } < "$W/cb.fifo"
wait $cipid; ok test $? -eq 130
ok grep -q "^saelite eval: interrupted before the read; the same command starts it (or continues it from the checkpoint an earlier run of it saved" "$W/cb.err"
# every sequence and row: the suites take about 1.4 s here, the read 0.2 s (2 s under ASan).
# The case needs a read shorter than the interval: where the read outran it (a read checkpoint
# there when the suites begin: ASan with other tests beside it, 1 run in 2) the same run is
# made again with a longer interval
for secs in 6 15 40; do
    rm -f "$W/cp.db"* "$W/cp.fifo"; cp "$W/fx.db" "$W/cp.db"; mkfifo "$W/cp.fifo"
    EB="--seqs-per-genre 100000 --train-per-class 100000 --test-per-class 100000 --checkpoint-secs $secs"
    SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.000001 "$BIN" eval --db "$W/cp.db" --sae "$W/sae" $EB \
        > /dev/null 2> "$W/cp.fifo" &
    cipid=$!
    phase=0; : > "$W/cp.err"
    while IFS= read -r line; do
        echo "$line" >> "$W/cp.err"
        case $phase$line in
            0"eval probes"*)
                if [ -n "$(ls "$W/cp.db".eval-* 2> /dev/null | grep -v probes)" ] && [ $secs != 40 ]; then
                    kill -KILL $cipid; phase=3
                else kill -STOP $cipid; sleep $secs.2; kill -CONT $cipid; phase=1; fi;;
            1*) f=("$W"/cp.db.eval-*.probes); [ -e "${f[0]}" ] && { kill -STOP $cipid; kill -INT $cipid; kill -CONT $cipid; phase=2; };;
        esac
    done < "$W/cp.fifo"
    [ $phase = 3 ] && { wait $cipid 2> /dev/null; continue; }
    break
done
wait $cipid; ok test $? -eq 130
ok test -z "$(ls "$W/cp.db".eval-* 2> /dev/null | grep -v probes)"
ok grep -q "^saelite eval: interrupted; the same command reads again and continues the suites from $W/cp.db.eval-[0-9a-f]*.probes$" "$W/cp.err"
"$BIN" eval --db "$W/cp.db" --sae "$W/sae" $EB > /dev/null 2> "$W/cp2.err"
ok grep -q "continuing the suites with [1-9][0-9]* probes fitted before" "$W/cp2.err"
evafter "$W/ck1.db" "continuing the read from $W/ck1.db.eval-"
ok grep -q "continued from a checkpoint that held [1-9][0-9]* of the sequences read" "$W/ck.out"
evkilled "$W/ck2.db"
[ -n "$ck" ] && printf 'X' | dd of="$ck" bs=1 seek=100 conv=notrunc 2> /dev/null
evafter "$W/ck2.db" "is damaged"
evkilled "$W/ck3.db"
[ -n "$ck" ] && truncate -s 60 "$ck"
evafter "$W/ck3.db" "is damaged"
# forged: a NaN in the first token row with the checksum recomputed (LIBLINEAR cannot fit it)
evkilled "$W/ck7.db"
# after {magic, key, key, done, n}: token row 0, value 0 a quiet NaN (0x7fc00000)
[ -n "$ck" ] && forge "$ck" 40 I 2143289344
evafter "$W/ck7.db" "a value no read keeps"
# a FIFO there (it hung the first save) and a link there (its target was overwritten): replaced,
# never waited on or followed (an audit)
evkilled "$W/ck4.db"
[ -n "$ck" ] && rm -f "$ck" && mkfifo "$ck"
evafter "$W/ck4.db" "is not a regular file"
evkilled "$W/ck5.db"
echo precious > "$W/victim"
[ -n "$ck" ] && rm -f "$ck" && ln -s "$W/victim" "$ck"
evafter "$W/ck5.db" "is not a regular file"
ok test "$(cat "$W/victim")" = precious
# killed, then finished with --checkpoint-secs 0: the killed run's file goes too
evkilled "$W/ck8.db"
ok test -n "$ck"
"$BIN" eval --db "$W/ck8.db" --sae "$W/sae" $E --checkpoint-secs 0 > /dev/null 2>&1
ok test -z "$(ls "$W"/ck8.db.eval-* 2> /dev/null)"
# killed in the suites: the probes it fitted (DB.eval-HASH.probes) are taken, the same rows
probkilled() { # DB: an eval of DB killed once its probes file is there ($pk: the file)
    rm -f "$1"*; cp "$W/fx.db" "$1"
    "$BIN" eval --db "$1" --sae "$W/sae" $E --checkpoint-secs 0.000001 > /dev/null 2>&1 &
    local pid=$! i
    for i in $(seq 3000); do pk=$(ls "$1".eval-*.probes 2> /dev/null | head -n 1); [ -n "$pk" ] && break; sleep 0.01; done
    kill -KILL $pid 2> /dev/null; wait $pid 2> /dev/null
    pk=$(ls "$1".eval-*.probes 2> /dev/null | head -n 1)
}
probkilled "$W/pk1.db"
ok test -n "$pk"
evafter "$W/pk1.db" "continuing the suites with [1-9][0-9]* probes fitted before"
ok grep -q "continued the suites with [1-9][0-9]* probes an earlier run had fitted" "$W/ck.out"
# forged, checksum recomputed: the first entry's first weight NaN (after {magic, key, key, n} and
# the entry's {key, key, d, b}); another key: refused, every probe fitted, the same rows
probkilled "$W/pk2.db"
[ -n "$pk" ] && forge "$pk" 64 d nan
evafter "$W/pk2.db" "is damaged (a weight that is not finite): fitting every probe"
probkilled "$W/pk3.db"
[ -n "$pk" ] && forge "$pk" 8 q 12345
evafter "$W/pk3.db" "was made with other inputs or options: fitting every probe"
probkilled "$W/pk4.db"
[ -n "$pk" ] && forge "$pk" 24 q 99999999
evafter "$W/pk4.db" "is damaged (its count does not fit its size)"
# finished with --checkpoint-secs 0: the probes file goes too
probkilled "$W/pk5.db"
ok test -n "$pk"
"$BIN" eval --db "$W/pk5.db" --sae "$W/sae" $E --checkpoint-secs 0 > /dev/null 2>&1
ok test -z "$(ls "$W"/pk5.db.eval-* 2> /dev/null)"
# the SAE's cfg.json changed after the kill (its k, both places): not continued (an SAE the
# database does not know yet: a killed eval has not registered it, so no registry row refuses it)
cp -r "$W/sae" "$W/sae6"
evkilled "$W/ck6.db" "$W/sae6"
sed -i 's/"k":\([[:space:]]*\)4,/"k":\13,/g' "$W/sae6/cfg.json"
"$BIN" eval --db "$W/ck6.db" --sae "$W/sae6" $E --checkpoint-secs 0.000001 > /dev/null 2> "$W/ck.err"
ok test -n "$ck"
ok grep -q "was made with other inputs or options" "$W/ck.err"
ok test "$(q "SELECT count(*) FROM eval_runs")" = 4
for m in scr_metric_threshold_2 scr_metric_threshold_500 tpp_threshold_2_total_metric tpp_threshold_500_total_metric; do
    ok test "$(q "SELECT count(*) FROM eval_summary WHERE sae_id = $SID AND metric = '$m' AND typeof(value) = 'real'")" = 1
done
ok test "$(q "SELECT count(DISTINCT task) FROM eval_ablation WHERE task LIKE 'scr:%'")" = 2
# SCR: a direction whose clean probe is not better than the biased one by more than one test row
# has no score (SAEBench's ratio flips sign there: 0.70 -> 0.675 with clean 0.675 scored +1.0).
# Here the tense direction is one (clean tense probe 0.85 = biased 0.85, tense counted once per
# word; 0.77 < 0.82 when BPE pieces counted): NULL rows and metrics,
# a note naming both accuracies; the reported direction 1 keeps its numbers
NT=$(q "SELECT value FROM eval_summary WHERE sae_id = $SID AND metric = 'scr_balanced_test_rows'")
ok test "$(q "SELECT count(*) FROM eval_ablation WHERE task LIKE 'scr:%' AND (score IS NULL) != ((clean_acc - orig_acc) * $NT <= 1.5)")" = 0
ok test "$(q "SELECT count(*) FROM eval_ablation WHERE task = 'scr:ablate_genre' AND score IS NULL AND clean_acc <= orig_acc")" = 7
ok test "$(q "SELECT count(*) FROM eval_summary WHERE sae_id = $SID AND metric LIKE 'scr_dir2_threshold_%' AND value IS NULL")" = 7
ok grep -q "^note: scr: direction 2 (prose kind ablated, tense read) left NULL: the clean tense probe scores 0\.[0-9]*, the biased probe 0\.[0-9]* on [0-9]* test rows" "$W/e1.out"
# the tense label counts each verb once (every BPE piece voted before: 104 test rows, 0.77 < 0.82)
ok grep -q "the clean tense probe scores 0\.8478, the biased probe 0\.8478 on 92 test rows" "$W/e1.out"
ok test "$(q "SELECT count(*) FROM eval_ablation WHERE task LIKE 'tpp:genre:%' AND n = 500")" = 2
# TPP's headline is SAEBench's: the per-dataset means (8 POS classes, 2 genres here), then their
# mean, not the mean over the 10 pooled classes; the per-dataset means are stored too
for N in 2 500; do
    ok test "$(q "SELECT abs((SELECT value FROM eval_summary WHERE sae_id = $SID AND metric = 'tpp_threshold_${N}_total_metric') - (SELECT avg(m) FROM (SELECT avg(score) AS m FROM eval_ablation a JOIN eval_runs r ON r.id = a.run_id WHERE r.sae_id = $SID AND r.suite = 'tpp' AND n = $N GROUP BY substr(task, 1, 7)))) < 1e-12")" = 1
    for k in pos genre; do
        ok test "$(q "SELECT abs((SELECT value FROM eval_summary WHERE sae_id = $SID AND metric = 'tpp_${k}_threshold_${N}_total_metric') - (SELECT avg(score) FROM eval_ablation a JOIN eval_runs r ON r.id = a.run_id WHERE r.sae_id = $SID AND r.suite = 'tpp' AND n = $N AND task LIKE 'tpp:$k:%')) < 1e-12")" = 1
    done
done
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
# it is registered as trained, as sae-train registers it: a BatchTopK SAE (saved as JumpReLU) as
# batchtopk with its k (was: jumprelu, k NULL), a Matryoshka with its k (was NULL); a rerun
# finds the row
for a in batchtopk matryoshka; do
    setup sae-train --db "$DB" --hook $H --arch $a --k 4 --expansion 2 --tokens 20k --seed 1 --out "$W/sae_$a"
    cp -r "$W/sae_$a" "$W/sae_${a}2"
    for i in 1 2; do "$BIN" eval --db "$DB" --sae "$W/sae_${a}2" $E --suite sparse_probing --no-random > "$W/e5.out" 2>&1; ok test $? -eq 0; done
    ok test "$(q "SELECT architecture || ' ' || k FROM sae_registry WHERE dir = '$W/sae_${a}2'")" = "$(q "SELECT architecture || ' ' || k FROM sae_registry WHERE dir = '$W/sae_$a'")"
    ok test "$(q "SELECT architecture || ' ' || k FROM sae_registry WHERE dir = '$W/sae_${a}2'")" = "$a 4"
done
# a database without tags: "all" runs what it can (the genre tasks), names what it skipped;
# asking for absorption there is an error
setup extract --model "$W/m" --corpus "$W/corpus/brown.jsonl" --hook $H --db "$W/plain.db"
"$BIN" eval --db "$W/plain.db" --sae "$W/sae" $E > "$W/p1.out" 2>&1; ok test $? -eq 0
ok grep -q "^skipped .*absorption (no POS tags) scr" "$W/p1.out"
ok grep -q "^sparse probing: 2 tasks (0 POS, 2 genre)" "$W/p1.out"
"$BIN" eval --db "$W/plain.db" --sae "$W/sae" $E --suite absorption > "$W/p2.out" 2>&1; ok test $? -eq 1
ok grep -q "no POS-tagged tokens" "$W/p2.out"
# documents without a genre (NULL) are in no genre task: not a genre named '' ("genre:"), not
# negatives of the others; their tokens still feed the POS tasks
cp "$DB" "$W/nog.db"
sqlite3 "$W/nog.db" "UPDATE documents SET genre = NULL WHERE id IN (SELECT id FROM documents WHERE genre = 'news' ORDER BY id LIMIT 2)"
"$BIN" eval --db "$W/nog.db" --sae "$W/sae" $E --suite sparse_probing > "$W/ng.out" 2>&1; ok test $? -eq 0
ok test "$(sqlite3 "$W/nog.db" "SELECT group_concat(DISTINCT task) FROM eval_probe WHERE kind = 'genre'")" = "genre:news,genre:adventure"
ok grep -q "^sparse probing: 10 tasks (8 POS, 2 genre)" "$W/ng.out"
# minimum sizes: a task needs 20 train and 5 test positives. Flags below them are refused;
# tasks that end up smaller (8 sequences per genre: the genre tasks, SCR's sets) are skipped
# with a note, not scored (they gave genre tasks of 2 test rows with accuracy 0.0)
"$BIN" eval --db "$DB" --sae "$SID" --train-per-class 2 --test-per-class 1 > "$W/m1.out" 2>&1; ok test $? -eq 2
ok grep -q "\-\-train-per-class must be >= 20, got 2" "$W/m1.out"
"$BIN" eval --db "$DB" --sae "$SID" --test-per-class 4 > "$W/m2.out" 2>&1; ok test $? -eq 2
ok grep -q "\-\-test-per-class must be >= 5, got 4" "$W/m2.out"
cp "$DB" "$W/small.db"
"$BIN" eval --db "$W/small.db" --sae "$SID" --seqs-per-genre 8 > "$W/m3.out" 2>&1; ok test $? -eq 0
ok grep -q "^note: sparse_probing: skipped as too small (train / test positives; a task needs 20 / 5): .*genre:news [0-9]*/[0-9]*, genre:adventure" "$W/m3.out"
ok grep -q "^note: absorption: skipped as too small .*pos:" "$W/m3.out"
ok grep -q "^note: tpp: skipped as too small .*genre:news" "$W/m3.out"
ok grep -q "^note: scr: skipped as too small .*biased probe [0-9]*/[0-9]*" "$W/m3.out"
ok grep -q "^skipped .*scr" "$W/m3.out"
ok test "$(sqlite3 "$W/small.db" "SELECT count(*) FROM eval_probe p JOIN eval_runs r ON r.id = p.run_id WHERE r.sae_id = $SID AND (kind = 'genre' OR n_train < 40 OR n_test < 10)")" = 0
ok test "$(sqlite3 "$W/small.db" "SELECT count(*) FROM eval_ablation a JOIN eval_runs r ON r.id = a.run_id WHERE r.sae_id = $SID AND task LIKE 'tpp:genre:%'")" = 0
"$BIN" eval --db "$W/small.db" --sae "$SID" --seqs-per-genre 8 --suite scr > "$W/m4.out" 2>&1; ok test $? -eq 1
ok grep -q "SCR's sets are too small .*biased probe [0-9]*/[0-9]*.*raise --seqs-per-genre" "$W/m4.out"
# the registry: a relative directory is taken from the current directory (as sae-train records
# it), and the SAE found there must be the registered one: a k=3 copy in another directory's
# "relsae" is refused, not scored under the id of the k=4 SAE registered as "relsae"
cp -r "$W/sae" "$W/relsae"
(cd "$W" && "$BIN" eval --db fx.db --sae relsae $E --suite absorption > /dev/null 2>&1); ok test $? -eq 0
RID=$(q "SELECT id FROM sae_registry WHERE dir = 'relsae'")
mkdir -p "$W/o" && cp -r "$W/sae" "$W/o/relsae"
sed -i 's/"k":[[:space:]]*4/"k": 3/' "$W/o/relsae/cfg.json"
cp "$DB" "$W/before.db"
(cd "$W/o" && "$BIN" eval --db ../fx.db --sae "$RID" $E --suite sparse_probing > "$W/r1.out" 2>&1); ok test $? -eq 1
ok grep -q "relsae: the SAE there has k 3, but registry id $RID of ../fx.db says k 4" "$W/r1.out"
ok cmp -s "$DB" "$W/before.db"
# one SAE however spelt: ./sae2 and $W/o/../sae2/ are the row registered as $W/sae2
NR=$(q "SELECT count(*) FROM sae_registry")
S2=$(q "SELECT id FROM sae_registry WHERE dir = '$W/sae2'")
(cd "$W" && "$BIN" eval --db fx.db --sae ./sae2 $E --suite absorption > "$W/r2.out" 2>&1); ok test $? -eq 0
"$BIN" eval --db "$DB" --sae "$W/o/../sae2/" $E --suite absorption > "$W/r3.out" 2>&1; ok test $? -eq 0
ok grep -q "^eval: SAE id $S2 at" "$W/r2.out"
ok grep -q "^eval: SAE id $S2 at" "$W/r3.out"
ok test "$(q "SELECT count(*) FROM sae_registry")" = "$NR"
ok test "$(q "SELECT count(*) FROM eval_runs WHERE suite = 'absorption' AND sae_id = $S2")" = 1
# the absorption suite reports progress (it ran silent after the probes' last line)
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.001 "$BIN" eval --db "$DB" --sae "$S2" $E --suite absorption,tpp > /dev/null 2> "$W/pg.err"
ok grep -q "^eval absorption .*class/s" "$W/pg.err"
ok grep -q "^eval tpp pos .*class/s" "$W/pg.err"
# the registry records the weights' checksum: the same shape retrained (here: one weight changed)
# in place is refused by id and by directory, not scored under the old id
ok test "$(q "SELECT length(weights) FROM sae_registry WHERE id = $S2")" = 16
cp -r "$W/sae2" "$W/sae2.orig"
/usr/bin/python3 - "$W/sae2/sae_weights.safetensors" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
o = 8 + n + 4 * 7                       # a float inside the first tensor
v = struct.unpack("<f", b[o:o + 4])[0]
b[o:o + 4] = struct.pack("<f", v * 0.5 + 0.25)
open(sys.argv[1], "wb").write(b)
PY
cp "$DB" "$W/before.db"
"$BIN" eval --db "$DB" --sae "$S2" $E --suite absorption > "$W/w1.out" 2>&1; ok test $? -eq 1
ok grep -q "sae2: the SAE there has weights checksum [0-9a-f]*, but registry id $S2 of .* says weights checksum [0-9a-f]* (retrained or replaced" "$W/w1.out"
"$BIN" eval --db "$DB" --sae "$W/sae2" $E --suite absorption > "$W/w2.out" 2>&1; ok test $? -eq 1
ok cmp -s "$DB" "$W/before.db"
rm -rf "$W/sae2" && mv "$W/sae2.orig" "$W/sae2"
# a registry from before the checksum (schema part sae version 1, no column): read as it is,
# upgraded by the first write, its rows unchecked (NULL)
cp "$DB" "$W/v1.db"
sqlite3 "$W/v1.db" "ALTER TABLE sae_registry DROP COLUMN weights; UPDATE schema_parts SET version = 1 WHERE name = 'sae'"
"$BIN" eval --db "$W/v1.db" --sae "$S2" $E --suite absorption > "$W/v1.out" 2>&1; ok test $? -eq 0
ok test "$(sqlite3 "$W/v1.db" "SELECT version FROM schema_parts WHERE name = 'sae'")" = 2
ok test "$(sqlite3 "$W/v1.db" "SELECT count(*) FROM sae_registry WHERE weights IS NULL")" = "$(q "SELECT count(*) FROM sae_registry")"
# the write lock is held only while the results are written: stopped in the middle of its probes
# (SIGSTOP at its first "eval probes" progress line; larger sets and C make the probes take about
# a second, so the stop lands among them), eval lets another process write
mkfifo "$W/pipe"
EL="--seqs-per-genre 400 --train-per-class 2000 --test-per-class 500 --C 1e6 --suite sparse_probing --no-random"
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.001 "$BIN" eval --db "$DB" --sae "$SID" $EL \
    > /dev/null 2> "$W/pipe" & epid=$!
exec 3< "$W/pipe"
while IFS= read -r line <&3; do case $line in *"eval probes"*) kill -STOP $epid; break;; esac; done
sqlite3 -cmd ".timeout 300" "$DB" "BEGIN IMMEDIATE; ROLLBACK;" > "$W/lock.out" 2>&1; ok test $? -eq 0
kill -CONT $epid; cat <&3 > /dev/null; exec 3<&-; wait $epid; ok test $? -eq 0
# SIGTERM in the probe phase: exit 130 (at the next fit), the database unchanged
cp "$DB" "$W/before.db"
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.001 "$BIN" eval --db "$DB" --sae "$SID" $EL \
    > /dev/null 2> "$W/pipe" & epid=$!
exec 3< "$W/pipe"
while IFS= read -r line <&3; do case $line in *"eval probes"*) kill -STOP $epid; kill -TERM $epid; kill -CONT $epid; break;; esac; done
cat <&3 > /dev/null; exec 3<&-; wait $epid; ok test $? -eq 130
ok cmp -s "$DB" "$W/before.db"
# extreme inputs are refused at once, not fitted for ever: --C outside [1e-6, 1e6]; an SAE whose
# b_dec holds 1e38 (finite; its codes reach 1e36); a hook activation of 1e38 in the database
timeout -s KILL 20 "$BIN" eval --db "$DB" --sae "$SID" $E --C 1e300 > "$W/x1.out" 2>&1; ok test $? -eq 2
ok grep -q "\-\-C must be in \[1e-06, 1e+06\]" "$W/x1.out"
mkdir -p "$W/bdec" && cp "$W/sae/cfg.json" "$W/sae/sae_weights.safetensors" "$W/bdec/"
python3 -c "
import json,struct,sys;p=sys.argv[1];b=bytearray(open(p,'rb').read());n=struct.unpack('<Q',b[:8])[0];h=json.loads(b[8:8+n])
o=8+n+h['b_dec']['data_offsets'][0];b[o:o+4]=struct.pack('<f',1e38);open(p,'wb').write(b)" "$W/bdec/sae_weights.safetensors"
timeout -s KILL 20 "$BIN" eval --db "$DB" --sae "$W/bdec" $E --suite sparse_probing > "$W/x2.out" 2>&1; ok test $? -eq 1
ok grep -q "bdec: the SAE's code of latent [0-9]* is .* (the probes need finite codes below 1e+15" "$W/x2.out"
cp "$DB" "$W/huge.db"
sqlite3 "$W/huge.db" "UPDATE activations SET data = substr(data, 1, 512) || X'9976967E' || substr(data, 517)"
timeout -s KILL 20 "$BIN" eval --db "$W/huge.db" --sae "$W/sae" $E --suite sparse_probing > "$W/x3.out" 2>&1; ok test $? -eq 1
ok grep -q "huge.db: hook $H holds 1e+38 at sequence [0-9]*, token 1, unit 0" "$W/x3.out"
ok cmp -s "$DB" "$W/before.db"
# messages: an id beyond int64, an empty --sae; a cfg.json whose two hook_names differ
"$BIN" eval --db "$DB" --sae 9999999999999999999 > "$W/x4.out" 2>&1; ok test $? -eq 1
ok grep -q "SAE id 9999999999999999999 is out of range" "$W/x4.out"
"$BIN" eval --db "$DB" --sae "" > "$W/x5.out" 2>&1; ok test $? -eq 2
ok grep -q "\-\-sae is empty" "$W/x5.out"
mkdir -p "$W/hk" && cp "$W/sae/sae_weights.safetensors" "$W/hk/"
sed '0,/"hook_name":[[:space:]]*"[^"]*"/! s/"hook_name":[[:space:]]*"[^"]*"/"hook_name": "blocks.0.hook_resid_pre"/' "$W/sae/cfg.json" > "$W/hk/cfg.json"
"$BIN" eval --db "$DB" --sae "$W/hk" $E > "$W/x6.out" 2>&1; ok test $? -eq 1
ok grep -q "hk/cfg.json: metadata.hook_name is \"$H\" but the top-level hook_name is \"blocks.0.hook_resid_pre\"" "$W/x6.out"
ok cmp -s "$DB" "$W/before.db"
# refusals: an unknown suite, an unknown id; nothing is written
N0=$(q "SELECT count(*) FROM eval_runs")
"$BIN" eval --db "$DB" --sae "$SID" --suite scr,ravel > "$W/e5.out" 2>&1; rc=$?
ok test $rc -eq 2   # a bad value is a usage error (README: exit 2)
ok grep -q "unknown suite 'ravel'" "$W/e5.out"
"$BIN" eval --db "$DB" --sae "$SID" --suite sparse_probing,,tpp > "$W/e5b.out" 2>&1; rc=$?
ok test $rc -eq 2   # an empty name ran silently (an audit)
ok grep -q "an empty suite name in the list" "$W/e5b.out"
# a trailing comma and a suite named twice ran silently (an audit); in a sweep's --eval too
# "all" beside another name (or twice) too: "scr,all" skipped a missing scr as "all" does
for bad in "scr,:a trailing comma" "scr,tpp,scr:scr is given twice" "all,all:all is given twice" \
           "all,scr:all names every suite" "tpp,all:all names every suite"; do
    "$BIN" eval --db "$DB" --sae "$SID" --suite "${bad%%:*}" > "$W/e5c.out" 2>&1; rc=$?
    ok test $rc -eq 2; ok grep -q "^saelite eval: --suite: .*${bad#*:}" "$W/e5c.out"
    "$BIN" sweep --db "$DB" --hook $H --out "$W/swbad" --families topk --ks 2 --eval "${bad%%:*}" > "$W/e5c.out" 2>&1; rc=$?
    ok test $rc -eq 2; ok grep -q "^saelite sweep: --eval: .*${bad#*:}" "$W/e5c.out"; ok test ! -e "$W/swbad"
done
"$BIN" sweep --db "$DB" --hook $H --out "$W/swbad" --families topk --ks 2 --eval "" > "$W/e5c.out" 2>&1; rc=$?
ok test $rc -eq 2; ok grep -q "^saelite sweep: --eval: no suite given" "$W/e5c.out"; ok test ! -e "$W/swbad"
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
# an eval by hand of a sweep's SAE replaces its suites' rows (keyed by SAE and suite), and the
# rerun sweep drew the frontiers from them under its own settings (an audit): it evaluates that
# run again on its own sample
K2=$(q "SELECT sae_id FROM sweep_runs WHERE sweep = '$W/sw' AND name = 'topk_k2'")
"$BIN" eval --db "$DB" --sae "$W/sw/topk_k2" --suite sparse_probing --seqs-per-genre 30 --no-random > /dev/null 2>&1
ok test "$(q "SELECT json_extract(config, '\$.seqs_per_genre') FROM eval_runs WHERE sae_id = $K2 AND suite = 'sparse_probing'")" = 30
"$BIN" sweep --db "$DB" --hook $H --out "$W/sw" --families topk,relu --ks 2,4 --relu-l1 1,4 \
    --d-sae 64 --tokens 8k --batch 256 --ce-seqs 8 --max-seqs 16 --eval-tokens 2000 \
    --eval sparse_probing,absorption --eval-seqs-per-genre 20 --no-png > "$W/sw3.out" 2>&1; rc=$?
ok test $rc -eq 0
ok grep -q "^1 runs done before were evaluated again" "$W/sw3.out"
ok test "$(q "SELECT json_extract(config, '\$.seqs_per_genre') FROM eval_runs WHERE sae_id = $K2 AND suite = 'sparse_probing'")" = 20
# SIGTERM while that run is evaluated again: the message said "eval suites of DIR: interrupted"
# (not how to go on), after the run's "(done before)" line; the rerun evaluates it again
"$BIN" eval --db "$DB" --sae "$W/sw/topk_k2" --suite sparse_probing --seqs-per-genre 30 --no-random > /dev/null 2>&1
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.001 "$BIN" sweep --db "$DB" --hook $H --out "$W/sw" \
    --families topk,relu --ks 2,4 --relu-l1 1,4 --d-sae 64 --tokens 8k --batch 256 --ce-seqs 8 \
    --max-seqs 16 --eval-tokens 2000 --eval sparse_probing,absorption --eval-seqs-per-genre 20 \
    --no-png > "$W/sw4.out" 2> "$W/pipe" & epid=$!
exec 3< "$W/pipe"
: > "$W/sw4.err"
while IFS= read -r line <&3; do echo "$line" >> "$W/sw4.err"; case $line in *"eval probes"*) kill -STOP $epid; kill -TERM $epid; kill -CONT $epid; break;; esac; done
cat <&3 >> "$W/sw4.err"; exec 3<&-; wait $epid; ok test $? -eq 130
ok grep -q "^saelite sweep: interrupted while evaluating $W/sw/topk_k2 again (its suites' rows are another sample's); rerun the same command to continue$" "$W/sw4.err"
ok test "$(grep -c "topk_k2" "$W/sw4.out")" = 0
"$BIN" sweep --db "$DB" --hook $H --out "$W/sw" --families topk,relu --ks 2,4 --relu-l1 1,4 \
    --d-sae 64 --tokens 8k --batch 256 --ce-seqs 8 --max-seqs 16 --eval-tokens 2000 \
    --eval sparse_probing,absorption --eval-seqs-per-genre 20 --no-png > "$W/sw5.out" 2>&1
ok grep -q "^1 runs done before were evaluated again" "$W/sw5.out"
"$BIN" sweep --db "$W/plain.db" --hook $H --out "$W/sw2" --families topk --ks 2,4 --d-sae 64 --tokens 8k \
    --batch 256 --ce-seqs 8 --max-seqs 16 --eval-tokens 2000 --eval none > "$W/sw2.out" 2>&1; rc=$?
ok test $rc -eq 0
ok test "$(sqlite3 "$W/plain.db" "SELECT count(*) FROM eval_summary WHERE sae_id IN (SELECT sae_id FROM sweep_runs)")" = 0
echo "test_eval.sh: $pass passed, $fail failed"
[ $fail -eq 0 ]
