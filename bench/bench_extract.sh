#!/usr/bin/env bash
# bench_extract.sh - `saelite extract` on Brown with the small model shape (1 layer, d_model 128,
# 4 heads, d_mlp 512, ctx 128, 4096-token BPE vocabulary trained on Brown) at
# blocks.0.mlp.hook_post: tokens/s against a dry run (the forward passes alone, same batches), where
# the main thread spends its time while the forward runs on the compute thread, and the storage
# write rate against dd on the same filesystem (one run; the machine may be shared, so noisy).
#
# Model: SAELITE_SMALL_MODEL (a trained small model directory with its tokenizer files), else a
# random-weight model of the same shape built in runs/bench-small (forward cost does not depend
# on the weights). Tokens: SAELITE_BENCH_TOKENS (default 400000). Needs data/brown (make data;
# saelite corpus brown), which is built here when missing.
set -eu
BIN=${SAELITE_BIN:-./saelite}
N=${SAELITE_BENCH_TOKENS:-400000}
W=runs/bench
mkdir -p "$W"
. bench/models.sh
bench_brown
M=$(bench_small_model)
db=$W/extract.db
rm -f "$db" "$db-wal" "$db-shm"
EXA=(extract --model "$M" --corpus data/brown/brown.jsonl --tags data/brown/brown.tags.jsonl
     --hook blocks.0.mlp.hook_post --max-tokens "$N" --batch 8)
# The forward passes alone on the same windows and batches: a dry run reads and tokenizes the
# corpus and runs every forward, and stores nothing. Its thread policy is extract's own (on 2
# cores a small model runs a forward on each thread); the dry run with every core for OpenBLAS is
# the other candidate, and the faster of the two is the reference. Wall times are compared: with
# two threads computing, "forward" in the summary adds both threads' forward time.
dry1=$($BIN "${EXA[@]}" --dry-run 2>&1 | tail -n 1)
dry2=$(OPENBLAS_NUM_THREADS=$(nproc) $BIN "${EXA[@]}" --dry-run 2>&1 | tail -n 1)
echo "dry run: $dry1"
echo "dry run, OPENBLAS_NUM_THREADS=$(nproc): $dry2"
out=$($BIN "${EXA[@]}" --db "$db" 2>&1 | tail -n 1)
echo "$out"
awk -v d1="$dry1" -v d2="$dry2" -v out="$out" 'function wall(s) { match(s, /in [0-9.]+ s/); return substr(s, RSTART + 3, RLENGTH - 5) + 0 }
BEGIN {
    w = wall(d1); if (wall(d2) > 0 && wall(d2) < w) w = wall(d2)
    total = wall(out)
    if (w <= 0 || total <= 0) { print "bench_extract: could not parse the dry runs"; exit 1 }
    printf "extract end to end vs the forward passes alone (the faster dry run: corpus, tokenizer and forward, nothing stored) on the same tokens: %.2f s vs %.2f s = ratio %.2f (target 0.9)\n", total, w, w / total
}'
bytes=$(sqlite3 "$db" "SELECT sum(length(data)) FROM activations")
rm -f "$db" "$db-wal" "$db-shm"
# dd-style sequential write of the same number of bytes, flushed to disk
mbytes=$(( (bytes + 1048575) / 1048576 ))
t0=$(date +%s.%N)
dd if=/dev/zero of="$W/dd.bin" bs=1M count="$mbytes" conv=fdatasync status=none
t1=$(date +%s.%N)
rm -f "$W/dd.bin"
awk -v out="$out" -v bytes="$bytes" -v ddt="$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" 'BEGIN {
    match(out, /in [0-9.]+ s/); total = substr(out, RSTART + 3, RLENGTH - 5) + 0
    match(out, /\(([0-9]+) tok\/s\)/); tps = substr(out, RSTART + 1, RLENGTH - 8) + 0
    match(out, /forward [0-9.]+/); fw = substr(out, RSTART + 8, RLENGTH - 8) + 0
    match(out, /storage [0-9.]+/); stg = substr(out, RSTART + 8, RLENGTH - 8) + 0
    match(out, /waiting for the forward [0-9.]+/); wt = substr(out, RSTART + 24, RLENGTH - 24) + 0
    match(out, /tokenizer [0-9.]+/); tk = substr(out, RSTART + 10, RLENGTH - 10) + 0
    match(out, /corpus reading [0-9.]+/); cr = substr(out, RSTART + 15, RLENGTH - 15) + 0
    if (total <= 0 || stg <= 0 || ddt <= 0) { print "bench_extract: could not parse: " out; exit 1 }
    dd = bytes / 1e6 / ddt; sr = bytes / 1e6 / stg
    printf "extract %d tok/s; forward (both threads) %.0f%% of wall; main thread: storage %.0f%%, tokenizer %.0f%%, corpus reading %.0f%%, waiting for the forward %.0f%%\n", tps, 100*fw/total, 100*stg/total, 100*tk/total, 100*cr/total, 100*wt/total
    printf "storage during extract %.0f MB/s of activations = %.2f x dd (%.0f MB/s, %.0f MB with fdatasync)\n", sr, sr/dd, dd, bytes/1e6
}'
