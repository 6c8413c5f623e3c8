#!/usr/bin/env bash
# bench_mpi.sh - sae-train across ranks on this machine (issue 15), TopK k 32, batch 4096, at
# (d_in, d_sae) = (512, 4096) and (768, 24576), synthetic data. Five ways, interleaved
# SAELITE_BENCH_REPS times (default 2) so they see the same load; the training loop's tok/s
# without its checkpoints (the summary line) of each, median:
#   plain     one process, 1 thread, one leaf (today's path)
#   np1       mpirun -np 1, 1 thread, one leaf                 -> np1 / plain: aim >= 0.98
#   np1.m2    mpirun -np 1, 1 thread, --micro-batches 2
#   np2.m2    mpirun -np 2, 1 thread per rank, --micro-batches 2 (the same bytes as np1.m2)
#                                                              -> np2.m2 / np1.m2: aim >= 1.7
#   thr2      one process, 2 threads (SAELITE_THREADS and OpenBLAS), one leaf
#                                                              -> np2.m2 / thr2: aim >= 0.95
#   lat1      one process, 1 thread, --latent-blocks 2
#   np2.l2    mpirun -np 2, 1 thread per rank, --latent-shards 2 --latent-blocks 2 (the same bytes
#             as lat1): latent sharding   -> np2.l2 / lat1, np2.l2 / np2.m2 (against data parallel)
# Then bench_dist under -np 2: the deterministic all-reduce's time for these gradient sizes.
# SAELITE_BENCH_MPI_STEPS="10 3" sets the steps per shape.
set -u
BIN=${SAELITE_BIN:-./saelite}
command -v mpirun > /dev/null || { echo "bench_mpi: mpirun not found (tools/deps.sh)"; exit 0; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# speed: let the shared-memory transport use its single-copy path (CMA) where the machine allows
# it (the Makefile turns it off for the tests, for containers that forbid it); measured here it is
# 5-10x faster for the gradient exchange than copy-in/copy-out
unset OMPI_MCA_btl_vader_single_copy_mechanism
R=${SAELITE_BENCH_REPS:-2}
read -r -a STEPS <<< "${SAELITE_BENCH_MPI_STEPS:-10 3}"
W=$(mktemp -d "${TMPDIR:-/tmp}/saelite-bench-mpi.XXXXXX")
trap 'rm -rf "$W"' EXIT
echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
# the training loop's steps per second without its checkpoints (the final one writes p, m and v:
# ~1.4 s at (768, 24576), a fifth of a 6-step run, a cost a real run pays once per thousands of steps)
toks() { sed -nE 's/.* ([0-9]+) steps in [0-9.]+s \(([0-9]+) tok\/s, reading [0-9]+%, checkpoints ([0-9.]+)s\).*/\1 \2 \3/p' "$1" |
         awk '{ t = $1 * 4096 / $2; if (t > $3) printf "%.0f\n", $1 * 4096 / (t - $3) }'; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
shapes=("512 4096" "768 24576")
for si in 0 1; do
    read -r d s <<< "${shapes[$si]}"
    n=${STEPS[$si]:-3}
    # the rows come from an .npy file written once (the same generator as --synth): with --synth
    # every rank would draw the whole batch (one sequential stream, 18-22% of a step), a cost no
    # real source has; --npy ranks read only their own rows, and the store's reading is ~1% of a step
    "$BIN" synth --out "$W/acts.npy" --truth "$W/truth.npy" --d "$d" --features $((4 * d)) \
        --tokens $((n * 4096 * 21 / 20 + 4096)) > /dev/null 2>&1 || { echo "bench_mpi: synth failed"; exit 0; }
    F=(sae-train --npy "$W/acts.npy" --val-frac 0.04 --d-sae "$s" --k 32 --batch 4096
       --tokens $((n * 4096)) --eval-tokens 0 --force)
    declare -A got=()
    for r in $(seq "$R"); do
        echo "# round $r of $R at ($d, $s): load $(cut -d' ' -f1 /proc/loadavg)" >&2
        for v in plain np1 np1.m2 np2.m2 thr2 lat1 np2.l2; do
            o="$W/$v"
            case $v in
            plain) SAELITE_THREADS=1 OPENBLAS_NUM_THREADS=1 "$BIN" "${F[@]}" --out "$o" > "$W/out" 2>&1 ;;
            np1) SAELITE_THREADS=1 OPENBLAS_NUM_THREADS=1 mpirun -x SAELITE_THREADS -x OPENBLAS_NUM_THREADS -np 1 --bind-to none "$BIN" "${F[@]}" --out "$o" > "$W/out" 2>&1 ;;
            np1.m2) SAELITE_THREADS=1 OPENBLAS_NUM_THREADS=1 mpirun -x SAELITE_THREADS -x OPENBLAS_NUM_THREADS -np 1 --bind-to none "$BIN" "${F[@]}" --micro-batches 2 --out "$o" > "$W/out" 2>&1 ;;
            np2.m2) SAELITE_THREADS=1 OPENBLAS_NUM_THREADS=1 mpirun -x SAELITE_THREADS -x OPENBLAS_NUM_THREADS -np 2 --bind-to none "$BIN" "${F[@]}" --micro-batches 2 --out "$o" > "$W/out" 2>&1 ;;
            thr2) SAELITE_THREADS=2 OPENBLAS_NUM_THREADS=2 "$BIN" "${F[@]}" --out "$o" > "$W/out" 2>&1 ;;
            lat1) SAELITE_THREADS=1 OPENBLAS_NUM_THREADS=1 "$BIN" "${F[@]}" --latent-blocks 2 --out "$o" > "$W/out" 2>&1 ;;
            np2.l2) SAELITE_THREADS=1 OPENBLAS_NUM_THREADS=1 mpirun -x SAELITE_THREADS -x OPENBLAS_NUM_THREADS -np 2 --bind-to none "$BIN" "${F[@]}" --latent-shards 2 --latent-blocks 2 --out "$o" > "$W/out" 2>&1 ;;
            esac
            t=$(toks "$W/out")
            [ -n "$t" ] || { echo "bench_mpi: $v failed: $(tail -n 2 "$W/out")"; t=0; }
            got[$v]="${got[$v]:-} $t"
        done
    done
    declare -A med=()
    for v in plain np1 np1.m2 np2.m2 thr2 lat1 np2.l2; do med[$v]=$(median <<< "${got[$v]}"); done
    printf '(%s, %s) k 32 batch 4096, %d steps, %d rounds: tok/s plain %s | np1 %s | np1.m2 %s | np2.m2 %s | thr2 %s\n' \
        "$d" "$s" "$n" "$R" "${med[plain]}" "${med[np1]}" "${med[np1.m2]}" "${med[np2.m2]}" "${med[thr2]}"
    awk -v a="${med[plain]}" -v b="${med[np1]}" -v c="${med[np1.m2]}" -v e="${med[np2.m2]}" -v f="${med[thr2]}" \
        'BEGIN { printf "  ratios: np2.m2/np1.m2 %.2f (aim >= 1.7)  np2.m2/thr2 %.2f (aim >= 0.95)  np1/plain %.2f (aim >= 0.98)  np1.m2/np1 %.2f\n", e/c, e/f, b/a, c/b }'
    awk -v a="${med[lat1]}" -v b="${med[np2.l2]}" -v c="${med[np2.m2]}" -v e="${med[plain]}" \
        'BEGIN { printf "  latent shards: tok/s lat1 %s np2.l2 %s | np2.l2/lat1 %.2f  np2.l2/np2.m2 %.2f  lat1/plain %.2f\n", a, b, b/a, b/c, a/e }'
    unset got med
done
echo "# load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
D=${BENCH_DIST:-build/bench/bench_dist}
[ -x "$D" ] && mpirun -np 2 --bind-to none "$D"
exit 0
