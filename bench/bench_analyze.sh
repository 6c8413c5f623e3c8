#!/usr/bin/env bash
# bench_analyze.sh - end-to-end `saelite analyze` time on a real store and SAE (the Brown
# activations with a 4096-latent SAE in the demo). Needs a database and an SAE, which `make demo`
# produces; point at them with SAELITE_BENCH_DB, SAELITE_BENCH_SAE (and SAELITE_BENCH_HOOK when
# the SAE's cfg.json names no hook). The database is copied first, so the bench never changes it.
# Prints tokens/s and the phases' share of the wall time as analyze reports them.
set -u
BIN=${SAELITE_BIN:-./saelite}
DB=${SAELITE_BENCH_DB:-runs/demo/brown.db}
SAE=${SAELITE_BENCH_SAE:-runs/demo/sae}
if [ ! -f "$DB" ] || [ ! -f "$SAE/cfg.json" ]; then
    echo "bench_analyze: skipped (no $DB or $SAE/cfg.json; set SAELITE_BENCH_DB / SAELITE_BENCH_SAE)"
    exit 0
fi
T=$(mktemp -d /tmp/saelite_bench_analyze.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp "$DB" "$T/a.db"
# the copy lives elsewhere, so resolve the model directory the database recorded here
model=${SAELITE_BENCH_MODEL:-$("$BIN" query --db "$DB" --csv "SELECT path FROM models ORDER BY id LIMIT 1" | sed -n 2p)}
if [ -n "$model" ] && [ "${model#/}" = "$model" ] && [ ! -f "$model/config.json" ]; then
    model="$(dirname "$DB")/$model"
fi
hook=(--model "$model")
[ -n "${SAELITE_BENCH_HOOK:-}" ] && hook+=(--hook "$SAELITE_BENCH_HOOK")
start=$(date +%s.%N)
out=$("$BIN" analyze --db "$T/a.db" --sae "$SAE" "${hook[@]}" 2>&1) || { echo "$out"; exit 1; }
end=$(date +%s.%N)
echo "$out"
tokens=$(sed -nE 's/.* ([0-9]+) tokens, ([0-9]+) features.*/\1/p' <<<"$out" | head -1)
awk -v a="$start" -v b="$end" -v n="$tokens" 'BEGIN { printf "analyze: %.1f s wall, %.0f tokens/s (shared machine: noisy)\n", b - a, n / (b - a) }'
