#!/usr/bin/env bash
# bench_sae_gt.sh - SAE ground-truth recovery on a generator family we did not design
# (tools/ref/gt_gen.py): saelite's TopK at its defaults against the plain PyTorch TopK recipe
# (tools/ref/topk_ref.py) at equal tokens, both scored by `saelite sae-eval --ground-truth`.
# Prints one markdown row per generator (the table in docs/sae.md).
# Env: SAE_BENCH_GT=0 skips it (ref ~5 min per generator on 2 idle cores, 30 min on busy ones); SAE_GT_TOKENS (default 6000000);
# SAE_GT_DIR (default /tmp/saelite_gt: data and SAEs, reused when present: delete to redo);
# SAE_GT_CONFIGS (names, default all); SAE_GT_REF=0 skips the PyTorch column (also skipped when
# torch is missing: tools/deps.sh python3-torch); SAE_GT_STAGE=data|ref|ours|all (default all:
# data only generates, ref only trains the reference, ours only ours); SAE_GT_ARCH=topk|batchtopk
# (default topk: saelite --arch batchtopk against the recipe with --batch-topk, into
# ours_batchtopk_TOKENS and ref_batchtopk_TOKENS), matryoshka (saelite --arch matryoshka at its
# default widths d_sae/8,/4,/2 against the recipe with --matryoshka at the same widths, into
# ours_matryoshka_TOKENS and ref_matryoshka_TOKENS), or relu|jumprelu|gated: saelite --arch ARCH
# at its defaults over the --l1 grid SAE_GT_L1 against tools/ref/l1_ref.py (the Anthropic April
# 2024 L1 recipe / the JumpReLU paper's / the Gated SAE paper's) over its own grid SAE_GT_LAM
# with SAE_GT_REF_FLAGS, into
# ours_ARCH_l1_L_TOKENS and ref_ARCH_lam_L_TOKENS, one row per run with L0 and explained variance
# (sae-eval --npy on the first 100k rows) and MMCS / recovered (default configs: base corr0.9);
# or transcoder: the same generators with a second dictionary (gt_gen.py --d-out 256: y = the same
# codes on other unit directions, in $DIR/tc_NAME), saelite --arch transcoder --npy --npy-out
# against topk_ref.py --npy-out, both scored on the output directions (truth_out.npy; default
# configs: base corr0.9 decay0.98); skip_transcoder: the same with --arch skip_transcoder against
# topk_ref.py --npy-out --skip (default configs: skiplin skiplin2, whose y also has a linear map of
# x, which has a dense part: gt_gen.py --linear --dense, so W_skip and the decoder are identifiable;
# transcoders only); batchtopk_transcoder: saelite --arch transcoder --activation batchtopk against
# topk_ref.py --npy-out --batch-topk (default configs: base corr0.9 decay0.98).
set -u
[ "${SAE_BENCH_GT:-1}" = 0 ] && { echo "bench_sae_gt: skipped (SAE_BENCH_GT=0)"; exit 0; }
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
BIN=${SAELITE:-./saelite}
TOK=${SAE_GT_TOKENS:-6000000}
DIR=${SAE_GT_DIR:-/tmp/saelite_gt}
STAGE=${SAE_GT_STAGE:-all}
ARCH=${SAE_GT_ARCH:-topk}
case $ARCH in
topk) TAG=$TOK; REFARCH=(); L1MODE=0 ;;
batchtopk) TAG=batchtopk_$TOK; REFARCH=(--batch-topk); L1MODE=0 ;;
matryoshka) TAG=matryoshka_$TOK; REFARCH=(); L1MODE=0 ;; # widths per generator (d_sae) below
transcoder) TAG=${ARCH}_$TOK; REFARCH=(); L1MODE=0; SAE_GT_CONFIGS=${SAE_GT_CONFIGS:-base corr0.9 decay0.98} ;;
skip_transcoder) TAG=${ARCH}_$TOK; REFARCH=(--skip); L1MODE=0; SAE_GT_CONFIGS=${SAE_GT_CONFIGS:-skiplin skiplin2} ;;
batchtopk_transcoder) TAG=${ARCH}_$TOK; REFARCH=(--batch-topk); OURSARCH=(--arch transcoder --activation batchtopk)
  L1MODE=0; SAE_GT_CONFIGS=${SAE_GT_CONFIGS:-base corr0.9 decay0.98} ;;
# relu: both trainers' MMCS peaks at coefficient 5 or below on the base set at 6M tokens (10 and
# 20 lose it); jumprelu: L0 3-13. The recipes' lr and theta init are for runs this short
# (docs/sae.md, "ReLU and JumpReLU against their recipes")
relu) L1GRID=${SAE_GT_L1:-2.5 5 10}; LAMGRID=${SAE_GT_LAM:-2.5 5 10}
  REFFLAGS=${SAE_GT_REF_FLAGS:---lr 1e-3}; L1MODE=1 ;;
jumprelu) L1GRID=${SAE_GT_L1:-1 3 10}; LAMGRID=${SAE_GT_LAM:-0.003 0.01 0.03}
  REFFLAGS=${SAE_GT_REF_FLAGS:---lr 1e-3 --theta-init 0.05}; L1MODE=1 ;;
# gated: our --l1 5 is about the recipe's lam 0.3 (E||x|| = sqrt(d_in) against E||x||^2 = 1)
gated) L1GRID=${SAE_GT_L1:-5}; LAMGRID=${SAE_GT_LAM:-0.1 0.3}
  REFFLAGS=${SAE_GT_REF_FLAGS:---lr 1e-3}; L1MODE=1 ;;
*) echo "bench_sae_gt: SAE_GT_ARCH must be topk, batchtopk, matryoshka, transcoder, skip_transcoder, batchtopk_transcoder, relu, jumprelu or gated"; exit 1 ;;
esac
[ -n "${OURSARCH+x}" ] || OURSARCH=(--arch "$ARCH")
[ $L1MODE = 1 ] && SAE_GT_CONFIGS=${SAE_GT_CONFIGS:-base corr0.9}
mkdir -p "$DIR"
TC_DOUT=256 # the transcoders' target width (gt_gen.py --d-out, and the recipe's fresh pairs)
# name | generator flags | d_sae | k | samples (fresh: as many as tokens, each seen about once)
CONFIGS=(
  "base||1024|6|1000000"
  "indep|--rho 0|1024|6|1000000"
  "corr0.9|--rho 0.9|1024|6|1000000"
  "decay0.995|--decay 0.995|1024|6|1000000"
  "decay0.98|--decay 0.98|1024|6|1000000"
  "active3|--active 3|1024|4|1000000"
  "active10|--active 10|1024|11|1000000"
  "ratio1|--features 256|512|6|1000000"
  "ratio4|--features 1024|2048|6|1000000"
  "mag_u|--mag u|1024|6|1000000"
  "mag_exp|--mag exp|1024|6|1000000"
  "fresh||1024|6|$TOK"
  "skiplin|--linear 1 --dense 0.3|1024|6|1000000"
  "skiplin2|--linear 0.5 --dense 0.5 --seed 2|1024|6|1000000"
)
want() { [ -z "${SAE_GT_CONFIGS:-}" ] || [[ " $SAE_GT_CONFIGS " == *" $1 "* ]]; }
has_torch=0
[ "${SAE_GT_REF:-1}" != 0 ] && $PY -c "import torch" 2>/dev/null && has_torch=1
mmcs() { # SAE_DIR TRUTH -> "mmcs recovered%"
  "$BIN" sae-eval --sae "$1" --ground-truth "$2" 2>/dev/null |
    sed -n 's/.*MMCS \([0-9.]*\), recovered (cos > 0.90) \([0-9.]*\)%.*/\1 \2/p'
}
wskip() { # SAE_DIR GENDIR -> ", W_skip err E" (||W_skip - M||_F / ||M||_F) where the generator has M
  [ -f "$2/truth_skip.npy" ] && [ $has_torch = 1 ] || return 0 # graph_ref.py's reader imports torch
  $PY - "$1/sae_weights.safetensors" "$2/truth_skip.npy" <<'PYEOF'
import sys
import numpy as np
sys.path.insert(0, "tools/ref")
from graph_ref import read_safetensors
W, M = read_safetensors(sys.argv[1])["W_skip"].numpy(), np.load(sys.argv[2])
print(f", W_skip err {np.linalg.norm(W - M) / np.linalg.norm(M):.3f}", end="")
PYEOF
}
# relu/jumprelu: one row per trainer and coefficient (sae-eval's L0 and EV on 100k rows, MMCS)
l1_row() { # NAME TRAINER COEF SAE_DIR GENDIR
  local ev l0 m om orr
  ev=$("$BIN" sae-eval --sae "$4" --npy "$5/acts.npy" --max-tokens 100000 2>/dev/null)
  l0=$(sed -n 's/.* L0 \([0-9.]*\) .*/\1/p' <<<"$ev")
  m=$(sed -n 's/.*explained variance \([-0-9.]*\) .*/\1/p' <<<"$ev")
  read -r om orr <<<"$(mmcs "$4" "$5/truth.npy")"
  echo "| $1 | $2 | $3 | $l0 | $m | $om / $orr% |"
}
l1_config() { # NAME GENDIR D_SAE
  local l o
  for l in $L1GRID; do
    o="$2/ours_${ARCH}_l1_${l}_$TOK"
    if [ "$STAGE" != ref ] && [ ! -f "$o/cfg.json" ]; then
      "$BIN" sae-train --npy "$2/acts.npy" --arch "$ARCH" --d-sae "$3" --l1 "$l" --tokens "$TOK" \
        --out "$o" --log-every 100000 >"$o.log" 2>&1 || { echo "saelite failed: $o.log"; exit 1; }
    fi
    [ "$STAGE" = all ] && l1_row "$1" "saelite $ARCH" "$l" "$o" "$2"
  done
  for l in $LAMGRID; do
    o="$2/ref_${ARCH}_lam_${l}_$TOK"
    if [ $has_torch = 1 ] && [ "$STAGE" != ours ] && [ ! -f "$o/cfg.json" ]; then
      # shellcheck disable=SC2086
      OMP_NUM_THREADS=1 $PY tools/ref/l1_ref.py --arch "$ARCH" --npy "$2/acts.npy" --lam "$l" \
        --d-sae "$3" --tokens "$TOK" --out "$o" $REFFLAGS >"$o.log" 2>&1 || { echo "ref failed: $o.log"; exit 1; }
    fi
    [ "$STAGE" = all ] && [ -f "$o/cfg.json" ] && l1_row "$1" "l1_ref.py $ARCH" "$l" "$o" "$2"
  done
}
[ "$STAGE" = all ] && [ $L1MODE = 1 ] && {
  echo "ground truth, $TOK tokens, batch 4096: saelite $ARCH defaults (--l1 grid) vs tools/ref/l1_ref.py (--lam grid, $REFFLAGS)"
  echo "| generator | trainer | coefficient | L0 | EV | MMCS / recovered |"
  echo "|---|---|---:|---:|---:|---|"
}
[ "$STAGE" = all ] && [ $L1MODE = 0 ] && {
  echo "ground truth, $TOK tokens, batch 4096: saelite $ARCH defaults vs PyTorch recipe (MMCS / recovered at cos > 0.9)"
  echo "| generator | flags | d_sae | k | samples | saelite | PyTorch recipe |"
  echo "|---|---|---:|---:|---:|---|---|"
}
for c in "${CONFIGS[@]}"; do
  IFS='|' read -r name flags S k n <<<"$c"
  want "$name" || continue
  d="$DIR/$name"; genflags=$flags; truth=truth.npy; pair=()
  if [[ $ARCH == *transcoder ]]; then
    d="$DIR/tc_$name"; genflags="$flags --d-out $TC_DOUT"; truth=truth_out.npy; pair=(--npy-out "$d/out.npy")
  elif [[ $name == skiplin* ]]; then
    echo "bench_sae_gt: $name is a transcoder's generator (SAE_GT_ARCH=transcoder or skip_transcoder)"; continue
  fi
  # shellcheck disable=SC2086
  [ -f "$d/meta.json" ] || $PY tools/ref/gt_gen.py "$d" $genflags --samples "$n" >/dev/null || exit 1
  [ "$STAGE" = data ] && continue
  [ $L1MODE = 1 ] && { l1_config "$name" "$d" "$S"; continue; }
  if [ $has_torch = 1 ] && [ "$STAGE" != ours ] && [ ! -f "$d/ref_$TAG/cfg.json" ]; then
    # the fresh row's reference draws its own fresh samples from the same generator
    # (a transcoder's: fresh pairs, --d-out as gt_gen.py's)
    refpair=("${pair[@]}")
    if [ "$name" = fresh ]; then src=(--gen $flags); else src=(--npy "$d/acts.npy"); fi
    [ "$name" = fresh ] && [ ${#pair[@]} -gt 0 ] && refpair=(--d-out $TC_DOUT)
    [ "$ARCH" = matryoshka ] && REFARCH=(--matryoshka "$((S / 8)),$((S / 4)),$((S / 2))")
    OMP_NUM_THREADS=1 $PY tools/ref/topk_ref.py "${src[@]}" "${refpair[@]}" "${REFARCH[@]}" --out "$d/ref_$TAG" --d-sae "$S" \
      --k "$k" --tokens "$TOK" >"$d/ref_$TAG.log" 2>&1 || { echo "ref failed: $d/ref_$TAG.log"; exit 1; }
  fi
  [ "$STAGE" = ref ] && continue
  [ -f "$d/ours_$TAG/cfg.json" ] ||
    "$BIN" sae-train --npy "$d/acts.npy" "${pair[@]}" "${OURSARCH[@]}" --d-sae "$S" --k "$k" --tokens "$TOK" \
      --out "$d/ours_$TAG" --log-every 100000 >"$d/ours_$TAG.log" 2>&1 ||
    { echo "saelite failed: $d/ours_$TAG.log"; exit 1; }
  [ "$STAGE" = ours ] && continue
  read -r om orr <<<"$(mmcs "$d/ours_$TAG" "$d/$truth")"
  ref="-"; sk=""; [ "$ARCH" = skip_transcoder ] && sk=$(wskip "$d/ours_$TAG" "$d")
  if [ -f "$d/ref_$TAG/cfg.json" ]; then
    read -r rm rr <<<"$(mmcs "$d/ref_$TAG" "$d/$truth")"; ref="$rm / $rr%"
    [ "$ARCH" = skip_transcoder ] && ref="$ref$(wskip "$d/ref_$TAG" "$d")"
  fi
  echo "| $name | ${flags:-(base)} | $S | $k | $n | $om / $orr%$sk | $ref |"
done
