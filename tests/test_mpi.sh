#!/usr/bin/env bash
# test_mpi.sh - sae-train under mpirun (issue 15): the weights and the training log are
# byte-identical for -np 1, 2 and 4 (oversubscribed on 2 cores) and for one process, given the
# same --micro-batches; --resume continues bit-identically from a checkpoint written by another
# world size; a rank killed with SIGKILL ends the job within seconds with a one-line message, the
# checkpoint intact and resumable; a world size that does not fit and a rank that cannot read its
# data fail before any work, naming the problem; commands that do not run distributed refuse.
# One rank out of memory inside a step (latent blocks, the candidates mid-run, a tree sum, the
# micro-batch tree; an LD_PRELOAD shim) stops every rank within seconds with that rank's line;
# dist_allgather above one MPI chunk keeps every byte.
# extract and analyze: the same rows as one process for -np 1, 2, 4 (analyze: every analysis
# table and the report built from it), a killed rank 0, refusals before any work.
# Tiny synthetic shapes, one OpenBLAS and one saelite thread per rank (the promise is for fixed
# thread counts). Skips only when mpirun is missing (tools/deps.sh installs OpenMPI).
# Usage: tests/test_mpi.sh   (SAELITE_BIN=path overrides ./saelite)
set -u
ROOT=$(pwd)
BIN=${SAELITE_BIN:-./saelite}
[[ "$BIN" == /* ]] || BIN="$ROOT/$BIN"
pass=0; fail=0; skip=0
ok()  { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
if ! command -v mpirun > /dev/null; then
    echo "SKIP mpirun not found (tools/deps.sh installs openmpi-bin)"
    echo "test_mpi: 0 passed, 0 failed, 1 skipped"
    exit 0
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/saelite-mpi.XXXXXX")
trap '[ -n "${MPI_KEEP:-}" ] || rm -rf "$W"' EXIT
cd "$W" || exit 1
# root, 2 cores and containers (the Makefile exports the same for `make test`)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OPENBLAS_NUM_THREADS=1 SAELITE_THREADS=1
# Under make test-asan: OpenMPI's own allocations (in components it dlcloses at MPI_Finalize, so
# LeakSanitizer cannot even name them) would fail every rank; leaks stay checked in the
# single-process runs here and everywhere else.
MPI=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun -x OPENBLAS_NUM_THREADS -x SAELITE_THREADS)
SYN0=(--synth --synth-d 32 --synth-features 64 --d-sae 128 --k 4 --batch 256 --eval-tokens 1024
      --dead-window 2000)
SYN=("${SYN0[@]}" --micro-batches 4)
same() { cmp -s "$1/sae_weights.safetensors" "$2/sae_weights.safetensors" &&
         cmp -s "$1/training_log.csv" "$2/training_log.csv"; }
# killwait PID MPIRUN_PID LABEL WHO: kill -9 PID, then the job (mpirun) must end within 15 s
killwait() {
    local t0 _
    t0=$(date +%s)
    kill -KILL "$1"
    for _ in $(seq 150); do kill -0 "$2" 2> /dev/null || break; sleep 0.1; done
    if kill -0 "$2" 2> /dev/null; then bad "$3: the job still runs 15 s after $4 was killed"; kill -KILL "$2"
    else ok "$3: the job ended $(( $(date +%s) - t0 ))s after $4 was killed"; fi
    wait "$2" 2> /dev/null
}
# survivor ERRFILE WHAT: rank 1, the survivor of rank 0's kill, said in one line to rerun
survivor() {
    local line
    line=$(grep -m1 '^saelite: rank 1' "$1")
    [[ "$line" == *"run the same command again"* ]] && ok "$2: the survivor says: $line" ||
        bad "$2: no one-line message from rank 1: $(head -c 300 "$1")"
}
# rank0 PATTERN MPIRUN_PID: the PID of rank 0 among the processes whose command line matches
rank0() {
    local p
    for p in $(pgrep -f "$1"); do
        [ "$p" = "$2" ] && continue
        tr '\0' '\n' < /proc/$p/environ 2> /dev/null | grep -qx OMPI_COMM_WORLD_RANK=0 && echo "$p"
    done
}

# ---- -np 1/2/4 and one process: the same bytes ------------------------------------------------
for arch in relu topk batchtopk jumprelu matryoshka gated; do
    F=("${SYN[@]}" --arch "$arch" --tokens 12800)
    "$BIN" sae-train "${F[@]}" --out "$arch.p" > /dev/null 2> err.txt || bad "$arch: one process: $(head -n 1 err.txt)"
    for n in 1 2 4; do
        "${MPI[@]}" -np $n "$BIN" sae-train "${F[@]}" --out "$arch.$n" > out.txt 2> err.txt ||
            { bad "$arch: -np $n failed: $(grep -m1 saelite err.txt)"; continue; }
        if same "$arch.p" "$arch.$n"; then ok "$arch: -np $n weights and log = one process"
        else bad "$arch: -np $n weights or log differ from one process"; fi
    done
    # rank 0 alone prints the summary
    c=$(grep -c '^sae-train:' out.txt)
    [ "$c" = 1 ] && ok "$arch: one summary line from -np 4" || bad "$arch: $c summary lines from -np 4"
    # ... and the note that --k (SYN gives it to all) does nothing for relu, jumprelu and gated
    # (each rank printed it)
    c=$(grep -c '^note: --k is for' out.txt); w=0
    case $arch in relu|jumprelu|gated) w=1;; esac
    [ "$c" = $w ] && ok "$arch: $w --k note from -np 4" || bad "$arch: $c --k notes from -np 4, not $w"
done
# ranks on one node share g and p (dist_shm_new); SAELITE_NO_SHM forces the message path that
# ranks on several nodes take: the same bytes (relu: with its default gradient clipping, whose
# norm sums every rank's part)
for arch in topk gated relu; do
    F=("${SYN[@]}" --arch "$arch" --tokens 12800)
    for n in 2 4; do
        SAELITE_NO_SHM=1 "${MPI[@]}" -x SAELITE_NO_SHM -np $n "$BIN" sae-train "${F[@]}" --out "$arch.ns$n" > /dev/null 2> err.txt ||
            { bad "$arch: -np $n without shared memory failed: $(grep -m1 saelite err.txt)"; continue; }
        same "$arch.p" "$arch.ns$n" && ok "$arch: -np $n through messages (SAELITE_NO_SHM) = one process" ||
            bad "$arch: -np $n through messages differs from one process"
    done
done
# the sharded Adam's parts are whole latents, halved per level: an odd d_sae gives unequal parts
F=("${SYN[@]}" --arch jumprelu --d-sae 97 --tokens 6400)
"$BIN" sae-train "${F[@]}" --out odd.p > /dev/null 2>&1
for n in 2 4; do
    "${MPI[@]}" -np $n "$BIN" sae-train "${F[@]}" --out odd.$n > /dev/null 2> err.txt || bad "d_sae 97 -np $n: $(grep -m1 saelite err.txt)"
    same odd.p odd.$n && ok "d_sae 97 (unequal Adam parts): -np $n = one process" || bad "d_sae 97: -np $n differs from one process"
done
# without --micro-batches: plain saelite = mpirun -np 1 (the single-pass step)
F=(--synth --synth-d 32 --synth-features 64 --d-sae 128 --k 4 --batch 256 --eval-tokens 1024 --tokens 6400)
"$BIN" sae-train "${F[@]}" --out plain.p > /dev/null 2>&1
"${MPI[@]}" -np 1 "$BIN" sae-train "${F[@]}" --out plain.1 > /dev/null 2>&1
same plain.p plain.1 && ok "one leaf: mpirun -np 1 = plain saelite" || bad "one leaf: mpirun -np 1 differs from plain saelite"

# ---- an .npy source: each rank reads only its rows of every batch, the same bytes -------------
"$BIN" synth --out np.npy --truth np_truth.npy --d 32 --features 64 --tokens 6000 > /dev/null 2>&1
F=(--npy np.npy --d-sae 128 --k 4 --batch 256 --tokens 12800 --micro-batches 4 --eval-tokens 256)
"$BIN" sae-train "${F[@]}" --out npy.p > /dev/null 2>&1
for n in 2 4; do
    "${MPI[@]}" -np $n "$BIN" sae-train "${F[@]}" --out npy.$n > /dev/null 2> err.txt || bad "npy -np $n: $(grep -m1 saelite err.txt)"
    same npy.p npy.$n && ok "npy source (rows read per rank): -np $n = one process" || bad "npy source: -np $n differs from one process"
done

# ---- a store source: the same bytes, one registry row and one log from rank 0 ---------------------
"$BIN" synth --out st.npy --truth st_truth.npy --db st1.db --d 32 --features 64 --tokens 20000 > /dev/null 2>&1
cp st1.db st4.db
F=(--hook synth --d-sae 128 --k 4 --batch 256 --tokens 12800 --micro-batches 4 --arch batchtopk --eval-tokens 512)
"$BIN" sae-train --db st1.db "${F[@]}" --out st.p > /dev/null 2>&1
"${MPI[@]}" -np 4 "$BIN" sae-train --db st4.db "${F[@]}" --out st.4 > out.txt 2> err.txt || bad "store -np 4: $(grep -m1 saelite err.txt)"
same st.p st.4 && ok "store source: -np 4 = one process" || bad "store source: -np 4 differs from one process"
q="SELECT (SELECT count(*) FROM sae_registry), (SELECT count(*) FROM sae_training_log)"
r1=$(sqlite3 st1.db "$q" 2>&1); r4=$(sqlite3 st4.db "$q" 2>&1)
[ "$r1" = "$r4" ] && [ "${r4%%|*}" = 1 ] && [ "$(grep -c '^registered' out.txt)" = 1 ] &&
    ok "store source: one registry row and the same log rows ($r4)" || bad "store source: registry/log rows $r4 vs $r1"

# a skip transcoder (paired rows from the store: here the same hook in and out) under -np 4
F=(--hook synth --hook-out synth --d-sae 128 --k 4 --batch 256 --tokens 12800 --micro-batches 4 --arch skip_transcoder --eval-tokens 512)
"$BIN" sae-train --db st1.db "${F[@]}" --out tc.p > /dev/null 2>&1
"${MPI[@]}" -np 4 "$BIN" sae-train --db st4.db "${F[@]}" --out tc.4 > /dev/null 2> err.txt || bad "skip_transcoder -np 4: $(grep -m1 saelite err.txt)"
same tc.p tc.4 && ok "skip_transcoder: -np 4 = one process" || bad "skip_transcoder: -np 4 differs from one process"

# ---- resume across world sizes ------------------------------------------------------------------
F=("${SYN[@]}" --arch batchtopk --tokens 25600 --checkpoint-every 10)
"${MPI[@]}" -np 2 "$BIN" sae-train "${F[@]}" --out res --max-steps 40 > /dev/null 2> err.txt || bad "resume: first part: $(head -n 1 err.txt)"
"${MPI[@]}" -np 4 "$BIN" sae-train "${F[@]}" --out res --resume > /dev/null 2> err.txt || bad "resume: -np 4 part: $(grep -m1 saelite err.txt)"
"$BIN" sae-train "${F[@]}" --out res.p > /dev/null 2>&1
same res res.p && ok "resume: -np 2 for 40 steps then -np 4 = one uninterrupted process" ||
    bad "resume: -np 2 then -np 4 differs from the uninterrupted run"
# a different --micro-batches is refused on resume
"${MPI[@]}" -np 2 "$BIN" sae-train "${F[@]}" --out res --max-steps 40 --force > /dev/null 2>&1
if "$BIN" sae-train "${SYN0[@]}" --arch batchtopk --tokens 25600 --checkpoint-every 10 \
        --micro-batches 2 --out res --resume > /dev/null 2> err.txt; then bad "resume: another --micro-batches was accepted"
else grep -q "micro-batches 4" err.txt && ok "resume: another --micro-batches refused: $(head -n 1 err.txt)" ||
        bad "resume: unclear message: $(head -n 1 err.txt)"; fi
# both ranks on one core, a fresh run then --resume, 8 times: rank 0 creates and locks OUT only
# once every rank has checked it (before, a rank that checked after that lock refused the job as
# "another sae-train is writing into this directory", about one try in two pinned like this)
if command -v taskset > /dev/null; then
    F=("${SYN[@]}" --arch topk --tokens 2560)
    nlk=0; lkmsg=
    for i in 1 2 3 4 5 6 7 8; do
        for res in "" --resume; do
            taskset -c 0 "${MPI[@]}" --bind-to none -np 2 "$BIN" sae-train "${F[@]}" --out lk$i $res \
                > /dev/null 2> err.txt || { nlk=$((nlk + 1)); lkmsg=$(grep -m1 saelite err.txt); }
        done
    done
    [ "$nlk" = 0 ] && ok "one core, -np 2: 8 fresh runs and 8 resumes start" ||
        bad "one core, -np 2: $nlk of 16 starts refused: $lkmsg"
fi

# ---- latent shards (TopK + AuxK): -np 1/2/4 --latent-shards N = one process, same --latent-blocks
F=(--synth --synth-d 32 --synth-features 64 --d-sae 512 --k 4 --batch 256 --eval-tokens 1024
   --dead-window 512 --tokens 12800 --latent-blocks 4 --checkpoint-every 10 --grad-clip 0.5)
"$BIN" sae-train "${F[@]}" --out lat.p > lat.out 2> err.txt || bad "latent blocks: one process: $(head -n 1 err.txt)"
c=$(sed -n 's/^gradient norm clipped to 0.5 in \([0-9]*\) of 50 steps$/\1/p' lat.out)
[ "${c:-0}" -gt 0 ] && ok "latent blocks: the gradient clipped in $c of 50 steps" || bad "latent blocks: clipping not exercised: $(grep clipped lat.out)"
d=$(awk -F, 'NR > 1 && $6 > 0 {n++} END {print n + 0}' lat.p/training_log.csv)
[ "$d" -gt 0 ] && ok "latent blocks: AuxK runs (dead latents in $d log rows)" || bad "latent blocks: no dead latents, AuxK not exercised"
for n in 1 2 4; do
    "${MPI[@]}" -np $n "$BIN" sae-train "${F[@]}" --latent-shards $n --out lat.$n > out.txt 2> err.txt ||
        { bad "latent shards -np $n failed: $(grep -m1 saelite err.txt)"; continue; }
    same lat.p lat.$n && cmp -s lat.p/checkpoint.bin lat.$n/checkpoint.bin &&
        ok "latent shards: -np $n weights, log and checkpoint = one process --latent-blocks 4" ||
        bad "latent shards: -np $n differs from one process --latent-blocks 4"
done
# checkpoints by the clock (--checkpoint-secs): rank 0's clock decides, every rank gathers with it
# (a rank's own clock would leave the others in the gather); here at every step, same bits
"${MPI[@]}" -np 2 "$BIN" sae-train "${F[@]}" --latent-shards 2 --checkpoint-secs 0.000001 --out latc > /dev/null 2> err.txt ||
    bad "latent shards --checkpoint-secs: $(grep -m1 saelite err.txt)"
same lat.p latc && ok "latent shards -np 2, a checkpoint by the clock at every step: = one process" ||
    bad "latent shards -np 2 with --checkpoint-secs differs from one process"
# resume across shard counts: 2 shards for 20 steps, 4 to the end; 4 shards for 30, one process on
"${MPI[@]}" -np 2 "$BIN" sae-train "${F[@]}" --latent-shards 2 --out latr --max-steps 20 > /dev/null 2>&1
"${MPI[@]}" -np 4 "$BIN" sae-train "${F[@]}" --latent-shards 4 --out latr --resume > /dev/null 2> err.txt || bad "latent resume: $(grep -m1 saelite err.txt)"
same latr lat.p && ok "latent shards: resume 2 shards -> 4 shards = uninterrupted" || bad "latent shards: resume 2 -> 4 differs"
"${MPI[@]}" -np 4 "$BIN" sae-train "${F[@]}" --latent-shards 4 --out latr1 --max-steps 30 > /dev/null 2>&1
"$BIN" sae-train "${F[@]}" --out latr1 --resume > /dev/null 2> err.txt || bad "latent resume in one process: $(head -n 1 err.txt)"
same latr1 lat.p && ok "latent shards: resume 4 shards -> one process = uninterrupted" || bad "latent shards: resume 4 -> 1 differs"
# refusals, in one line, before any work
refuse() { # expected-substring command...
    local want=$1; shift
    if "$@" > /dev/null 2> err.txt; then bad "accepted: $*"; return; fi
    msg=$(grep -m1 'saelite sae-train' err.txt)
    [[ "$msg" == *"$want"* ]] && [ ! -e latx ] && ok "refused: $msg" || bad "refusal unclear or OUT created: $msg"
}
refuse "need --arch topk" "$BIN" sae-train "${F[@]}" --arch batchtopk --out latx
refuse "not implemented" "$BIN" sae-train "${F[@]}" --micro-batches 2 --out latx
refuse "needs mpirun -np 4" "${MPI[@]}" -np 2 "$BIN" sae-train "${F[@]}" --latent-shards 4 --out latx
refuse "power of two" "$BIN" sae-train "${F[@]}" --latent-blocks 3 --out latx
refuse "latent-blocks 4 (not 2)" "$BIN" sae-train "${F[@]}" --latent-blocks 2 --out latr --resume

# ---- one rank out of memory inside a step: every rank stops together, with that rank's line ----
# (tests/mpi_failshim.c fails every allocation of FAIL_SIZE bytes on rank 1 after FAIL_SKIP; not
# under test-asan, whose runtime must come first)
if ! cc -shared -fPIC -o shim.so "$ROOT/tests/mpi_failshim.c" -ldl 2> err.txt; then bad "failshim: $(head -n 1 err.txt)"
elif ldd "$BIN" 2> /dev/null | grep -q libasan; then skip=$((skip + 1)); echo "skip one-rank failures (ASan build)"
else
    # oom EXPECT LABEL SIZE SKIP saelite-args...: the job ends (60 s at most, 2-3 s as fixed), the
    # failing rank's message once, "rank 1: " first
    oom() {
        local want=$1 label=$2 size=$3 sk=$4 t0 rc n msg; shift 4
        t0=$(date +%s)
        FAIL_SIZE=$size FAIL_SKIP=$sk timeout 60 "${MPI[@]}" -x LD_PRELOAD="$W/shim.so" -x FAIL_SIZE \
            -x FAIL_SKIP -np 2 "$BIN" sae-train "$@" > /dev/null 2> err.txt
        rc=$?
        n=$(grep -c '^saelite sae-train' err.txt); msg=$(grep -m1 '^saelite sae-train' err.txt)
        if [ $rc = 124 ]; then bad "$label: the job hung (killed after 60 s): $msg"
        elif [ $rc != 0 ] && [ "$n" = 1 ] && [[ "$msg" == *"rank 1: "*"$want"* ]]; then
            ok "$label: every rank stopped in $(( $(date +%s) - t0 )) s: $msg"
        else bad "$label: exit $rc, $n messages: $msg"; fi
    }
    L=(--synth --synth-d 32 --synth-features 64 --k 4 --batch 256 --eval-tokens 1024)
    # the block buffers at the first step (ldead: d_sae/L ints, 2001 here)
    oom "latent blocks" "latent shards, first step" 8004 0 "${L[@]}" --d-sae 4002 --tokens 5120 --latent-shards 2 --out oom1
    # the candidates' buffer grows mid-run when AuxK first has dead latents (250 x 2 blocks x (4 + 1))
    oom "top-k candidates" "latent shards, mid-run" 20000 0 "${L[@]}" --batch 250 --d-sae 512 --k-aux 1 \
        --dead-window 512 --tokens 12500 --latent-blocks 4 --latent-shards 2 --checkpoint-every 1 --out oom2
    r=$(awk 'END {print NR - 1}' oom2/training_log.csv 2> /dev/null)
    [ "${r:-0}" -gt 1 ] && ok "latent shards, mid-run: the failure came after $r logged steps" || bad "latent shards, mid-run: failed at the start ($r rows)"
    # dist_sum_f32's exchange buffer (the reconstruction sum, [256, 32] floats)
    oom "deterministic sum" "latent shards, the tree sum" 16388 0 "${L[@]}" --d-sae 512 --tokens 12800 --latent-shards 2 --out oom3
    # data parallel: a leaf-tree gradient (the 5th array of 8352 floats after p, g, m, v)
    oom "micro-batch gradients" "micro-batches, the leaf tree" 33408 4 "${L[@]}" --d-sae 128 --tokens 12800 --micro-batches 4 --out oom4
fi
# dist_allgather above one MPI chunk (2^28 bytes per rank goes in pieces): the same bytes
if cc -O2 -std=c11 -D_GNU_SOURCE -I"$ROOT" -o ag "$ROOT/tests/mpi_allgather.c" "$ROOT"/common/{dist,err,mem,utf8}.c \
        $(pkg-config --cflags --libs ompi-c) 2> err.txt; then
    out=$("${MPI[@]}" -np 2 ./ag 2>&1)
    [ "$out" = "allgather ok" ] && ok "dist_allgather of 2^28 + 4097 bytes per rank (chunked) and of 1000: every byte in place" ||
        bad "dist_allgather chunked: $(echo "$out" | head -n 2)"
else bad "mpi_allgather: $(head -n 1 err.txt)"; fi

# node-shared windows: reuse agreed across ranks asking for different sizes (no hang), and each
# rank's part of the in-place sum = dist_sum_f32 bit for bit, the other copies zeroed
if cc -O2 -std=c11 -D_GNU_SOURCE -I"$ROOT" -o shm "$ROOT/tests/mpi_shm.c" "$ROOT"/common/{dist,err,mem,utf8}.c \
        $(pkg-config --cflags --libs ompi-c) 2> err.txt; then
    for n in 2 4; do
        out=$(timeout 60 "${MPI[@]}" -np $n ./shm 2>&1)
        case "$out" in
        "shm ok") ok "dist_shm -np $n: window reuse agreed, the in-place part sum = dist_sum_f32" ;;
        "shm unavailable") skip=$((skip + 1)); echo "SKIP dist_shm -np $n: no shared window on this machine" ;;
        *) bad "dist_shm -np $n: $(echo "$out" | head -n 2)" ;;
        esac
    done
else bad "mpi_shm: $(head -n 1 err.txt)"; fi

# ---- a killed rank ------------------------------------------------------------------------------
F=("${SYN[@]}" --arch topk --d-sae 512 --tokens 20000000 --checkpoint-every 5)
"${MPI[@]}" -np 2 "$BIN" sae-train "${F[@]}" --out kill > kill.out 2> kill.err &
mp=$!
for _ in $(seq 300); do [ -f kill/checkpoint.bin ] && break; sleep 0.1; done
victim=$(pgrep -f "$(basename "$BIN") sae-train.*--out kill" | grep -v "^$mp$" | tail -n 1)
if [ -z "$victim" ] || [ ! -f kill/checkpoint.bin ]; then bad "kill: no running rank or no checkpoint to start from"
else
    killwait "$victim" $mp kill "rank PID $victim"
    line=$(grep -m1 '^saelite' kill.err)
    [ -n "$line" ] && ok "kill: survivor says: $line" || bad "kill: no one-line message from a survivor: $(head -c 300 kill.err)"
    "$BIN" sae-train "${F[@]}" --tokens 20000000 --out kill --resume --max-steps 3 > /dev/null 2> err.txt &&
        ok "kill: the checkpoint resumes (one process)" || bad "kill: resume failed: $(head -n 1 err.txt)"
fi

# ---- Ctrl-C on mpirun (SIGTERM to the ranks) and SIGUSR1 (forwarded: a stop with a checkpoint) ---
# started ERRFILE: the ranks are past their signal handlers once rank 0 reports progress (the
# suite turns progress off: these runs turn it on)
started() {
    local _
    for _ in $(seq 300); do grep -q '^sae-train .* step [0-9]' "$1" 2> /dev/null && return 0; sleep 0.1; done
    return 1
}
F=("${SYN[@]}" --arch topk --d-sae 512 --tokens 20000000)
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.2 "${MPI[@]}" -np 2 "$BIN" sae-train "${F[@]}" --checkpoint-every 1000000 --out term > /dev/null 2> term.err &
mp=$!
if started term.err; then
    kill -INT $mp; wait $mp
    line=$(grep -m1 '^saelite: rank' term.err)
    [[ "$line" == *"no checkpoint was written yet, rerun without --resume"* ]] && [ ! -e term/checkpoint.bin ] &&
        ok "Ctrl-C before the first checkpoint: $line" || bad "Ctrl-C before the first checkpoint: $(head -c 400 term.err)"
else bad "Ctrl-C: the run did not start: $(head -c 300 term.err)"; kill -KILL $mp; wait $mp; fi
# --force over another run's checkpoint: that file is not this run's (it said --resume, which then
# refused: "the checkpoint's run had --k 4")
"$BIN" sae-train "${F[@]}" --checkpoint-every 20 --max-steps 40 --out forced > /dev/null 2>&1
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.2 "${MPI[@]}" -np 2 "$BIN" sae-train "${F[@]}" --k 8 --force --checkpoint-every 1000000 --out forced > /dev/null 2> forced.err &
mp=$!
if started forced.err; then
    kill -INT $mp; wait $mp
    line=$(grep -m1 '^saelite: rank' forced.err)
    # and it keeps --force: without it the rerun is refused (the other run's checkpoint is there)
    "$BIN" sae-train "${F[@]}" --k 8 --checkpoint-every 1000000 --out forced > /dev/null 2> err.txt
    rc=$?
    [[ "$line" == *"no checkpoint was written yet, rerun the same command (with --force, not --resume"* ]] &&
        [ -s forced/checkpoint.bin ] && [ $rc -ne 0 ] && grep -q -- '--force overwrites it' err.txt &&
        ok "Ctrl-C before a --force run's first checkpoint (another run's is there): $line" ||
        bad "--force over a checkpoint: $(head -c 400 forced.err) / rerun without --force: rc $rc $(head -c 200 err.txt)"
else bad "--force: the run did not start: $(head -c 300 forced.err)"; kill -KILL $mp; wait $mp; fi
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.2 "${MPI[@]}" -np 2 "$BIN" sae-train "${F[@]}" --checkpoint-every 1000000 --out usr1 > /dev/null 2> usr1.err &
mp=$!
if started usr1.err; then
    kill -USR1 $mp
    for _ in $(seq 150); do kill -0 $mp 2> /dev/null || break; sleep 0.1; done
    if kill -0 $mp 2> /dev/null; then bad "SIGUSR1: the job still runs 15 s later"; kill -KILL $mp; fi
    wait $mp
    line=$(grep -m1 '^saelite sae-train: interrupted at step' usr1.err)
    [ -n "$line" ] && [ -s usr1/checkpoint.bin ] && ! grep -q 'ended by mpirun' usr1.err &&
        "$BIN" sae-train "${F[@]}" --checkpoint-every 1000000 --out usr1 --resume --max-steps 3 > /dev/null 2> err.txt &&
        ok "SIGUSR1 to mpirun: every rank stopped at a step, the checkpoint resumes: $line" ||
        bad "SIGUSR1 to mpirun: $(head -c 400 usr1.err) / $(head -n 1 err.txt)"
else bad "SIGUSR1: the run did not start: $(head -c 300 usr1.err)"; kill -KILL $mp; wait $mp; fi
# SIGHUP to mpirun (its terminal or ssh session closed): mpirun ends the job as for Ctrl-C, every
# rank left says so (mpirun may be gone before it forwards every rank's line: the Ctrl-C case above
# reads one), and the run continues from its last checkpoint. mpirun gets SIGHUP's default
# whatever this script inherited (under nohup it would ignore it and run 20M tokens)
hup_default=(env --default-signal=HUP)
env --default-signal=HUP true 2> /dev/null || hup_default=(perl -e '$SIG{HUP} = "DEFAULT"; exec @ARGV or die')
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.2 "${hup_default[@]}" "${MPI[@]}" -np 2 "$BIN" sae-train "${F[@]}" --checkpoint-every 5 --out hup > /dev/null 2> hup.err &
mp=$!
for _ in $(seq 600); do [ -s hup/checkpoint.bin ] && break; sleep 0.05; done
if [ -s hup/checkpoint.bin ]; then
    kill -HUP $mp
    for _ in $(seq 150); do kill -0 $mp 2> /dev/null || break; sleep 0.1; done
    if kill -0 $mp 2> /dev/null; then bad "SIGHUP to mpirun: the job still runs 15 s later"; kill -KILL $mp; fi
    wait $mp; rc=$?
    n=$(grep -c '^saelite: rank [01] of 2: ended by mpirun .*the last checkpoint is intact, rerun with --resume' hup.err)
    [ $rc -ne 0 ] && [ "$n" -ge 1 ] &&
        "$BIN" sae-train "${F[@]}" --checkpoint-every 5 --out hup --resume --max-steps 1 > /dev/null 2> err.txt &&
        ok "SIGHUP to mpirun: exit $rc, $n rank line(s), the checkpoint resumes" ||
        bad "SIGHUP to mpirun: exit $rc, $n rank lines: $(grep -v '^sae-train' hup.err | head -c 400) / $(head -n 1 err.txt 2> /dev/null)"
else bad "SIGHUP: no checkpoint written: $(head -c 300 hup.err)"; kill -KILL $mp; wait $mp; fi

# --force over another run's checkpoint, Ctrl-C after this run rewrote it twice: the line says
# --resume (a stat() of the file's inode said "no checkpoint was written yet": the second atomic
# rewrite reused the old file's inode on ext4, a review)
"$BIN" sae-train "${F[@]}" --checkpoint-every 20 --max-steps 40 --out forced2 > /dev/null 2>&1
i0=$(stat -c %i forced2/checkpoint.bin 2> /dev/null); prev=$i0; changes=0
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.2 "${MPI[@]}" -np 2 "$BIN" sae-train "${F[@]}" --k 8 --force --checkpoint-every 300 --out forced2 > /dev/null 2> forced2.err &
mp=$!
# up to 120 s: under ASan with another test beside it a step is many times slower
for _ in $(seq 2400); do
    i=$(stat -c %i forced2/checkpoint.bin 2> /dev/null)
    [ -n "$i" ] && [ "$i" != "$prev" ] && { changes=$((changes + 1)); prev=$i; }
    # where the filesystem gives the old inode back (ext4 alternates two), stop at that moment
    [ $changes -ge 2 ] && { [ "$i" = "$i0" ] || [ $changes -ge 6 ]; } && break
    sleep 0.05
done
sleep 0.1 # past the step's agreement
kill -INT $mp; wait $mp
line=$(grep -m1 '^saelite: rank' forced2.err)
[ $changes -ge 2 ] && [[ "$line" == *"the last checkpoint is intact, rerun with --resume"* ]] &&
    "$BIN" sae-train "${F[@]}" --k 8 --out forced2 --resume --max-steps 1 > /dev/null 2> err.txt &&
    ok "Ctrl-C after a --force run's checkpoints ($changes, old inode again: $([ "$i" = "$i0" ] && echo yes || echo no)): $line" ||
    bad "--force, two checkpoints ($changes seen): $line / $(head -n 1 err.txt)"
# SIGINT to rank 1 alone: every rank stops at the step's agreement, and every rank exits 130 (rank 0,
# which had no signal, exited 1, and mpirun said 1 when it came first)
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.2 "${MPI[@]}" -np 2 "$BIN" sae-train "${F[@]}" --checkpoint-every 1000000 --out int1 > /dev/null 2> int1.err &
mp=$!
if started int1.err; then
    r1=""
    for p in $(pgrep -P $mp); do tr '\0' '\n' < /proc/$p/environ 2> /dev/null | grep -q '^OMPI_COMM_WORLD_RANK=1$' && r1=$p; done
    if [ -n "$r1" ]; then
        kill -INT $r1; wait $mp; rc=$?
        [ $rc -eq 130 ] && grep -q '^saelite sae-train: interrupted at step' int1.err &&
            ok "SIGINT to rank 1: mpirun exits 130" || bad "SIGINT to rank 1: mpirun exit $rc: $(grep -v '^sae-train' int1.err | head -c 400)"
    else skip=$((skip + 1)); echo "skip SIGINT to rank 1: no OMPI_COMM_WORLD_RANK in the ranks' environment"; kill -KILL $mp; wait $mp; fi
else bad "SIGINT to rank 1: the run did not start: $(head -c 300 int1.err)"; kill -KILL $mp; wait $mp; fi

# ---- fails before any work, naming the problem --------------------------------------------------
F=("${SYN[@]}" --arch topk --tokens 12800)
"${MPI[@]}" -np 3 "$BIN" sae-train "${F[@]}" --out np3 > /dev/null 2> err.txt
msg=$(grep -m1 'saelite sae-train' err.txt)
[[ "$msg" == *"world size 3"*"power of two"* ]] && [ ! -e np3 ] && [ "$(grep -c 'saelite sae-train' err.txt)" = 1 ] &&
    ok "-np 3: refused once, before any work: $msg" || bad "-np 3: $msg (out created: $([ -e np3 ] && echo yes || echo no))"
"${MPI[@]}" -np 8 "$BIN" sae-train "${F[@]}" --out np8 > /dev/null 2> err.txt
msg=$(grep -m1 'saelite sae-train' err.txt)
[[ "$msg" == *"world size 8 (mpirun -np) does not divide --micro-batches 4"* ]] && [ ! -e np8 ] &&
    ok "-np 8 with 4 micro-batches: refused: $msg" || bad "-np 8: $msg"
"$BIN" synth --out acts.npy --truth truth.npy --d 16 --features 32 --tokens 4096 > /dev/null 2>&1
N=(--d-sae 64 --k 4 --batch 256 --tokens 5120 --micro-batches 2)
# the same command line on every rank (checked), the file missing where rank 1 runs: a node
# without the shared file, played by another working directory
mkdir -p rdA rdB && cp acts.npy rdA/
"${MPI[@]}" -np 1 -wdir "$W/rdA" "$BIN" sae-train --npy acts.npy "${N[@]}" --out "$W/rd" : \
    -np 1 -wdir "$W/rdB" "$BIN" sae-train --npy acts.npy "${N[@]}" --out "$W/rd" > /dev/null 2> err.txt
msg=$(grep -m1 'saelite sae-train' err.txt)
[[ "$msg" == *"rank 1"*"acts.npy"* ]] && [ ! -e rd/checkpoint.bin ] &&
    ok "a rank that cannot read its data: $msg" || bad "unreadable data on rank 1: '$msg'"
# another .npy behind the same path on rank 1 (another width hung the job, an audit): refused
mkdir -p rdC && "$BIN" synth --out rdC/acts.npy --truth rdC/t.npy --d 8 --features 16 --tokens 4096 > /dev/null 2>&1
timeout 120 "${MPI[@]}" -np 1 -wdir "$W/rdA" "$BIN" sae-train --npy acts.npy "${N[@]}" --out "$W/rdw" : \
    -np 1 -wdir "$W/rdC" "$BIN" sae-train --npy acts.npy "${N[@]}" --out "$W/rdw" > /dev/null 2> err.txt
rc=$?
msg=$(grep -m1 'saelite sae-train' err.txt)
[ $rc -ne 124 ] && [[ "$msg" == *"rank 1: the training data (its width, rows or .npy files): not the same as on rank 0"* ]] && [ ! -e rdw/checkpoint.bin ] &&
    ok "another .npy behind the same path on rank 1: refused, no hang" || bad "another .npy on rank 1: rc $rc, '$msg'"
# a usage error is said once, not once per rank (an audit)
"${MPI[@]}" -np 2 "$BIN" sae-train --npy acts.npy --k 0 --out ku > /dev/null 2> err.txt
[ "$(grep -c '^saelite sae-train' err.txt)" = 1 ] && ok "a usage error under -np 2: one line" ||
    bad "a usage error under -np 2: $(grep -c '^saelite sae-train' err.txt) lines"
# other flags on one rank trained weights no single process gives, cfg.json naming rank 0's k;
# another command on one rank hung (an audit): refused before anything
"${MPI[@]}" -np 1 "$BIN" sae-train --npy acts.npy "${N[@]}" --out mm : -np 1 "$BIN" sae-train --npy acts.npy "${N[@]}" --k 8 --out mm > /dev/null 2> err.txt
rc=$?
msg=$(grep -m1 '^saelite' err.txt)
[ $rc -ne 0 ] && [[ "$msg" == *"rank 1 was started with other arguments than rank 0"* ]] && [ ! -e mm ] &&
    ok "other flags on one rank: refused: $msg" || bad "other flags on one rank: rc $rc, '$msg'"
timeout 60 "${MPI[@]}" -np 1 "$BIN" sae-train --npy acts.npy "${N[@]}" --out mm : -np 1 "$BIN" info acts.npy > /dev/null 2> err.txt
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "other arguments than rank 0" err.txt && [ ! -e mm ] &&
    ok "another command on one rank: refused, no hang" || bad "another command on one rank: rc $rc"
"${MPI[@]}" -np 2 "$BIN" info acts.npy > /dev/null 2> err.txt
grep -q "does not run on several ranks" err.txt && ok "info under -np 2 refused: $(grep -m1 saelite err.txt)" ||
    bad "info under -np 2: $(head -n 2 err.txt)"

# ---- extract: rank 0 stores, every rank runs forward passes; the same rows as one process ------
"$BIN" init-model --layers 1 --d-model 16 --heads 2 --ctx 16 --vocab 300 -o exm > /dev/null 2>&1
awk 'BEGIN { srand(7); split("the cat sat on a mat dog log ran far away into big small red house", w, " ");
             for (d = 0; d < 200; d++) { n = 3 + int(rand() * 120); s = "";
                 for (i = 0; i < n; i++) s = s (i ? " " : "") w[1 + int(rand() * 16)];
                 print s; print "" } }' > ex.txt
head -n 80 ex.txt > ex_small.txt
"$BIN" bpe-train --vocab 300 ex_small.txt -o extok > /dev/null 2>&1
EX=(extract --model exm --tokenizer extok --hook blocks.0.mlp.hook_post,blocks.0.hook_resid_post --ctx 8 --batch 3)
# every row of every table extract writes (timestamps left out), blobs as hex
dump() { "$BIN" query --db "$1" --csv --max-width 0 --timeout 0 "SELECT * FROM documents ORDER BY id;
  SELECT id, document_id, start, n_tokens, bos, hex(tokens) FROM sequences ORDER BY id;
  SELECT * FROM tokens ORDER BY sequence_id, position;
  SELECT id, hook_id, sequence_id, n_tokens, hex(data) FROM activations ORDER BY id;
  SELECT * FROM hooks ORDER BY id; SELECT id, name, path, config, checksum FROM models ORDER BY id;
  SELECT id, kind, params, status FROM runs ORDER BY id" > "$2"; }
exsame() { # DB_A DB_B: the row dumps and the exported activations and token ids are identical
    dump "$1" "$1.dump" && dump "$2" "$2.dump" && cmp -s "$1.dump" "$2.dump" && [ -s "$1.dump" ] || return 1
    for h in blocks.0.mlp.hook_post blocks.0.hook_resid_post; do
        for d in "$1" "$2"; do
            "$BIN" export --db "$d" --hook $h --npy "$d.$h.npy" --tokens-npy "$d.$h.ids.npy" > /dev/null 2>&1 || return 1
        done
        cmp -s "$1.$h.npy" "$2.$h.npy" && cmp -s "$1.$h.ids.npy" "$2.$h.ids.npy" || return 1
    done
}
# another model behind the same path on rank 1 (its activations were stored under rank 0's model
# row, exit 0, an audit): refused before the database is made
mkdir -p exA exB && ln -sfn "$W/exm" exA/m && ln -sfn "$W/extok" exA/t && ln -sfn "$W/extok" exB/t &&
"$BIN" init-model --layers 1 --d-model 16 --heads 2 --ctx 16 --vocab 300 --seed 9 -o exB/m > /dev/null 2>&1
XM=(extract --model m --tokenizer t --hook blocks.0.hook_resid_post --ctx 8 --corpus "$W/ex_small.txt" --db "$W/exw.db")
timeout 120 "${MPI[@]}" -np 1 -wdir "$W/exA" "$BIN" "${XM[@]}" : -np 1 -wdir "$W/exB" "$BIN" "${XM[@]}" > /dev/null 2> err.txt
rc=$?
msg=$(grep -m1 '^saelite extract' err.txt)
[ $rc -ne 124 ] && [[ "$msg" == *"rank 1: the model's files (config.json and model.safetensors): not the same as on rank 0"* ]] && [ ! -e exw.db ] &&
    ok "extract: another model behind the same path on rank 1: refused" || bad "extract with another model on rank 1: rc $rc, '$msg', db $([ -e exw.db ] && echo made || echo absent)"
"$BIN" "${EX[@]}" --corpus ex_small.txt --db exp.db > /dev/null 2> err.txt || bad "extract: one process: $(head -n 1 err.txt)"
for n in 1 2 4; do
    "${MPI[@]}" -np $n "$BIN" "${EX[@]}" --corpus ex_small.txt --db ex$n.db > out.txt 2> err.txt ||
        { bad "extract -np $n failed: $(grep -m1 saelite err.txt)"; continue; }
    exsame exp.db ex$n.db && ok "extract -np $n: every row, the exported activations and token ids = one process" ||
        bad "extract -np $n: rows or exports differ from one process"
done
# --precision auto (bf16 where the CPU has it): every rank's forward runs in rank 0's precision
"$BIN" "${EX[@]}" --corpus ex_small.txt --precision auto --db expb.db > /dev/null 2> err.txt || bad "extract bf16: one process: $(head -n 1 err.txt)"
"${MPI[@]}" -np 2 "$BIN" "${EX[@]}" --corpus ex_small.txt --precision auto --db ex2b.db > /dev/null 2> err.txt ||
    bad "extract bf16 -np 2 failed: $(grep -m1 saelite err.txt)"
exsame expb.db ex2b.db && ok "extract --precision auto -np 2: every row and export = one process" ||
    bad "extract --precision auto -np 2: rows or exports differ from one process"
c=$(grep -c '^extract:' out.txt)
[ "$c" = 2 ] && ok "extract: rank 0 alone prints the plan and the summary (-np 4)" || bad "extract: $c plan/summary lines from -np 4"
# a failure on open is agreed and printed once, and leaves no database
"${MPI[@]}" -np 2 "$BIN" "${EX[@]}" --corpus ex_small.txt --hook blocks.9.nothing --db exbad.db > /dev/null 2> err.txt
c=$(grep -c '^saelite extract' err.txt)
[ "$c" = 1 ] && [ ! -e exbad.db ] && ok "extract -np 2: a bad hook is refused once: $(grep -m1 '^saelite' err.txt | cut -c1-80)" ||
    bad "extract -np 2 with a bad hook: $c messages, db $([ -e exbad.db ] && echo created || echo absent)"
# without OPENBLAS_NUM_THREADS (extract picks rank 0's count) and a model whose GEMMs OpenBLAS
# threads: the other ranks compute with rank 0's thread count (oversubscribed, unbound ranks ran
# OpenBLAS's default of every core against rank 0's one: other bits, a review)
"$BIN" init-model --layers 1 --d-model 128 --heads 4 --d-mlp 512 --ctx 64 --vocab 300 -o exw128 > /dev/null 2>&1
TX=(extract --model exw128 --tokenizer extok --hook blocks.0.mlp.hook_post,blocks.0.hook_resid_post --ctx 64 --batch 8 --corpus ex.txt)
env -u OPENBLAS_NUM_THREADS "$BIN" "${TX[@]}" --db ext1.db > /dev/null 2> err.txt || bad "extract (thread reference): $(head -n 1 err.txt)"
env -u OPENBLAS_NUM_THREADS "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun -np 4 "$BIN" "${TX[@]}" --db ext4.db > /dev/null 2> err.txt || bad "extract -np 4 (threads): $(grep -m1 saelite err.txt)"
exsame ext1.db ext4.db && ok "extract -np 4 without OPENBLAS_NUM_THREADS (d_model 128): every row and export = one process" ||
    bad "extract -np 4 without OPENBLAS_NUM_THREADS: rows or exports differ from one process"
# killed (rank 0, the writer, with SIGKILL) under -np 2, resumed under -np 4: the same rows
# (a commit per batch while it is killed, to be sure to stop it midway; the commit size is not part
# of the run's identity, and the reference and the resume commit as usual)
KX=("${EX[@]}" --corpus ex.txt)
"$BIN" "${KX[@]}" --db exkp.db > /dev/null 2> err.txt || bad "extract (kill reference): $(head -n 1 err.txt)"
"${MPI[@]}" -np 2 "$BIN" "${KX[@]}" --commit-mb 0.001 --db exk.db > /dev/null 2> exk.err &
mp=$!
acts() { "$BIN" query --db "$1" --csv --timeout 0 "SELECT count(*) FROM activations" 2> /dev/null | tail -n 1; }
for _ in $(seq 300); do a=$(acts exk.db); [ -n "$a" ] && [ "$a" -gt 20 ] 2> /dev/null && break; sleep 0.05; done
victim=$(rank0 "$(basename "$BIN") extract.*--db exk.db" $mp)
if [ -z "$victim" ]; then bad "extract kill: no rank 0 running (finished before the kill?)"; wait $mp
else
    killwait "$victim" $mp "extract kill" "rank 0"
    survivor exk.err "extract kill"
    # (a read-only count cannot open it now: the killed writer left a hot journal, which the
    # resuming writer rolls back)
    "${MPI[@]}" -np 4 "$BIN" "${KX[@]}" --db exk.db > out.txt 2> err.txt || bad "extract resume -np 4: $(grep -m1 saelite err.txt)"
    read -r done all <<< "$(sed -n 's/.* \([0-9]*\) of \([0-9]*\) batches already stored.*/\1 \2/p' out.txt)"
    [ -n "$done" ] && [ "$done" -gt 0 ] && [ "$done" -lt "$all" ] &&
        ok "extract kill: rank 0 killed with $done of $all batches stored (seen by the resume)" ||
        bad "extract kill: '$done' of '$all' batches stored before the resume"
    grep -q "resuming" out.txt && exsame exkp.db exk.db &&
        ok "extract: killed under -np 2, resumed under -np 4: every row and export = one uninterrupted process" ||
        bad "extract: the resumed database differs from one uninterrupted process"
fi
# SIGINT to rank 1 alone: rank 0 stops the run as for its own Ctrl-C, every rank exits 130, the
# rerun continues to the same rows (rank 1 had ignored it: the run finished, exit 0, an audit)
"${MPI[@]}" -np 2 "$BIN" "${KX[@]}" --commit-mb 0.001 --db exi.db > exi.out 2> exi.err &
mp=$!
for _ in $(seq 300); do a=$(acts exi.db); [ -n "$a" ] && [ "$a" -gt 20 ] 2> /dev/null && break; sleep 0.05; done
r1=""
for p in $(pgrep -f "$(basename "$BIN") extract.*--db exi.db"); do
    [ "$p" = $mp ] && continue
    tr '\0' '\n' < /proc/$p/environ 2> /dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && r1=$p
done
if [ -z "$r1" ]; then bad "extract SIGINT to rank 1: no rank 1 running (finished before?)"; wait $mp
else
    kill -INT "$r1"; wait $mp; rc=$?
    line=$(grep -m1 '^saelite extract' exi.err)
    [ $rc -eq 130 ] && [[ "$line" == "saelite extract: rank 1 was interrupted; stopped after "*"run the same command again to resume" ]] &&
        [ "$(grep -c '^saelite' exi.err)" = 1 ] &&
        ok "extract: SIGINT to rank 1 stops the run, exit 130: $line" || bad "extract SIGINT to rank 1: mpirun exit $rc: $(head -c 400 exi.err)"
    "${MPI[@]}" -np 2 "$BIN" "${KX[@]}" --db exi.db > out.txt 2> err.txt && grep -q "resuming" out.txt && exsame exkp.db exi.db &&
        ok "extract: the rerun after rank 1's SIGINT = one uninterrupted process" ||
        bad "extract: the rerun after rank 1's SIGINT: $(grep -m1 saelite err.txt)"
fi
# ---- analyze: every rank its blocks of sequences, rank 0 writes; the same tables as one process --
# a small tagged Brown-format corpus (POS counts), a 48-latent SAE and an 8192-latent one (whose
# geometry and writing take long enough to kill a rank in the middle)
mkdir -p anb; : > anb/cats.txt
for d in 1 2 3 4; do
    echo "ca0$d news" >> anb/cats.txt
    awk -v seed=$d 'BEGIN { split("cat dog bird horse farmer teacher river garden house window", N, " ")
        split("sat ran slept walked looked waited", V, " "); split("big small old green quiet happy", A, " ")
        split("on near under behind", P, " "); s = seed * 7
        for (i = 0; i < 60; i++) {
            s = (s * 1103515245 + 12345) % 2147483648; n = 1 + int(s / 65536) % 10
            s = (s * 1103515245 + 12345) % 2147483648; v = 1 + int(s / 65536) % 6
            s = (s * 1103515245 + 12345) % 2147483648; a = 1 + int(s / 65536) % 6
            s = (s * 1103515245 + 12345) % 2147483648; p = 1 + int(s / 65536) % 4
            if (i % 6 == 0) printf "\n\n\t"
            printf "The/at %s/jj %s/nn %s/vbd %s/in the/at %s/nn ./. ", A[a], N[n], V[v], P[p], N[n] }
        printf "\n" }' > anb/ca0$d
done
AH=blocks.0.mlp.hook_post
{ "$BIN" corpus brown anb -o anc && "$BIN" bpe-train --vocab 300 anc/brown.jsonl -o anm &&
  "$BIN" init-model --layers 1 --d-model 16 --heads 2 --vocab 300 --ctx 16 --seed 3 -o anm &&
  "$BIN" extract --model anm --corpus anc/brown.jsonl --tags anc/brown.tags.jsonl --hook $AH --ctx 16 --db an.db &&
  "$BIN" sae-train --db an.db --hook $AH --arch topk --k 4 --d-sae 48 --tokens 10k --seed 1 --out "$W/ansae" &&
  "$BIN" sae-train --db an.db --hook $AH --arch topk --k 4 --d-sae 8192 --batch 256 --tokens 512 --seed 1 --out "$W/anbig"
} > an_setup.log 2>&1 || bad "analyze setup: $(tail -n 2 an_setup.log)"
# every row of every analysis table (timings and timestamps left out), floats to 17 digits
andump() {
    local t cols nc
    for t in $(sqlite3 "$1" "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'ana\_%' ESCAPE '\' ORDER BY name"); do
        read -r cols nc <<< "$(sqlite3 -separator ' ' "$1" "SELECT group_concat(CASE WHEN type = 'REAL' THEN
            'printf(''%!.17g'',' || name || ')' WHEN type = 'BLOB' THEN 'hex(' || name || ')' ELSE name END, ','), count(*)
            FROM pragma_table_info('$t') WHERE name NOT IN ('created_at', 'seconds')")"
        echo "== $t"; sqlite3 "$1" "SELECT $cols FROM \"$t\" ORDER BY $(seq -s, 1 "$nc")"
    done
}
# the report of a database, built in its own folder under the same file name (the page names it)
anreport() { mkdir -p "$1.rep" && cp "$1" "$1.rep/x.db" &&
             (cd "$1.rep" && "$BIN" report --db x.db --sae "$W/ansae" --top 4 --out r > /dev/null 2>&1) && rm -f "$1.rep"/x.db*; }
for split in all val; do
    AN=(analyze --sae "$W/ansae" --neurons --top 5 --effects --effects-ctx 3 --ce-seqs 40)
    # the whole store, 288 sequences in 256 blocks; the validation split's 29 (most blocks empty)
    # with --all-acts (rank 0 alone writes those in a second pass)
    if [ $split = all ]; then AN+=(--all); else AN+=(--all-acts); fi
    cp an.db anp.$split.db
    "$BIN" "${AN[@]}" --db anp.$split.db > /dev/null 2> err.txt || bad "analyze ($split): one process: $(head -n 1 err.txt)"
    andump anp.$split.db > anp.$split.dump
    [ $split = all ] && anreport anp.$split.db
    for n in 1 2 4; do
        [ $split = val ] && [ $n != 4 ] && continue
        cp an.db an$n.$split.db
        "${MPI[@]}" -np $n "$BIN" "${AN[@]}" --db an$n.$split.db > out.txt 2> err.txt ||
            { bad "analyze ($split) -np $n failed: $(grep -m1 saelite err.txt)"; continue; }
        # rank 0 closed before a reader and left the analysis in DB-wal alone (an audit); the
        # shim's CLOSE_DELAY_MS holds every reader's close back, so that order shows each time
        if [ $n = 2 ] && [ -s shim.so ] && ! ldd "$BIN" 2> /dev/null | grep -q libasan; then
            cp an.db anw.db
            CLOSE_DELAY_MS=400 "${MPI[@]}" -x LD_PRELOAD="$W/shim.so" -x CLOSE_DELAY_MS -np 2 "$BIN" "${AN[@]}" --db anw.db > /dev/null 2>&1
            [ ! -s anw.db-wal ] && [ "$(sqlite3 anw.db "SELECT count(*) FROM sqlite_master WHERE name LIKE 'ana%'")" != 0 ] && ok "analyze ($split) -np 2, readers closing late: the WAL is checkpointed into the file" ||
                bad "analyze ($split) -np 2, readers closing late: $(stat -c %s anw.db-wal 2>/dev/null) bytes left in the WAL"
        fi
        [ ! -s an$n.$split.db-wal ] && ok "analyze ($split) -np $n: the WAL is checkpointed into the file" ||
            bad "analyze ($split) -np $n: $(stat -c %s an$n.$split.db-wal) bytes left in the WAL"
        andump an$n.$split.db > an$n.$split.dump
        if cmp -s anp.$split.dump an$n.$split.dump && [ "$(grep -c . anp.$split.dump)" -gt 5000 ]; then
            ok "analyze ($split split) -np $n: every analysis table = one process ($(grep -c . anp.$split.dump) rows)"
        else bad "analyze ($split split) -np $n: tables differ from one process: $(diff anp.$split.dump an$n.$split.dump | head -n 3 | tr '\n' ' ')"; fi
        if [ $split = all ]; then
            anreport an$n.$split.db
            diff -r anp.all.db.rep an$n.all.db.rep > /dev/null && [ -s an$n.all.db.rep/r/index.html ] &&
                ok "analyze -np $n: the report (pictures and page) = one process's" || bad "analyze -np $n: the report differs from one process's"
        fi
    done
    c=$(grep -c '^analyze:' out.txt)
    [ "$c" = 2 ] && ok "analyze ($split): rank 0 alone prints the summary (-np 4)" || bad "analyze ($split): $c summary lines from -np 4"
done
# a Matryoshka SAE's prefix errors ride in the same tree of float sums: its ana_metrics rows
# (matryoshka_prefix_*) are one process's to the last digit under -np 2 and 4
mq() { sqlite3 "$1" "SELECT name, printf('%!.17g', value) FROM ana_metrics ORDER BY name"; }
if "$BIN" sae-train --db an.db --hook $AH --arch matryoshka --widths 8,24 --k 4 --d-sae 48 --tokens 10k --seed 1 --out "$W/anmat" > /dev/null 2>&1 &&
   cp an.db anm1.db && "$BIN" analyze --sae "$W/anmat" --all --no-model --db anm1.db > /dev/null 2>&1; then
    for n in 2 4; do
        cp an.db anm$n.db
        "${MPI[@]}" -np $n "$BIN" analyze --sae "$W/anmat" --all --no-model --db anm$n.db > /dev/null 2>&1 &&
            [ "$(mq anm1.db | grep -c '^matryoshka_prefix_\(8\|24\)_\(ev\|mse\|l0\)|')" = 6 ] && [ "$(mq anm1.db)" = "$(mq anm$n.db)" ] &&
            ok "analyze -np $n: a Matryoshka SAE's metrics and prefixes = one process's" ||
            bad "analyze -np $n: a Matryoshka SAE's metrics differ from one process's: $(diff <(mq anm1.db) <(mq anm$n.db) | head -n 2 | tr '\n' ' ')"
    done
else bad "analyze of a Matryoshka SAE (one process) failed"; fi
# refused before any work, once, naming the problem; the database untouched (no analysis tables)
antables() { sqlite3 "$1" "SELECT count(*) FROM sqlite_master WHERE name LIKE 'ana\_%' ESCAPE '\'"; }
cp an.db an3.db
"${MPI[@]}" -np 3 "$BIN" analyze --sae "$W/ansae" --db an3.db > /dev/null 2> err.txt
msg=$(grep -m1 '^saelite analyze' err.txt)
[[ "$msg" == *"world size 3"*"power of two"* ]] && [ "$(grep -c '^saelite analyze' err.txt)" = 1 ] && [ "$(antables an3.db)" = 0 ] &&
    ok "analyze -np 3: refused once, the database untouched: $(echo "$msg" | cut -c1-90)" || bad "analyze -np 3: '$msg', $(antables an3.db) analysis tables"
mkdir -p anA anB && ln -sfn "$W/ansae" anA/s
"${MPI[@]}" -np 1 -wdir "$W/anA" "$BIN" analyze --sae s --db "$W/an3.db" : -np 1 -wdir "$W/anB" "$BIN" analyze --sae s --db "$W/an3.db" > /dev/null 2> err.txt
msg=$(grep -m1 '^saelite analyze' err.txt)
[[ "$msg" == *"rank 1: "*"s"* ]] && [ "$(antables an3.db)" = 0 ] &&
    ok "analyze: a rank that cannot read its SAE: $msg" || bad "analyze with an unreadable SAE on rank 1: '$msg', $(antables an3.db) analysis tables"
# another SAE behind the same path on rank 1 (other width: the job hung in a collective; other
# weights: analysed with exit 0, an audit): refused before any work
mkdir -p anC anD && ln -sfn "$W/ansae" anC/s && ln -sfn "$W/anbig" anD/s
timeout 120 "${MPI[@]}" -np 1 -wdir "$W/anC" "$BIN" analyze --sae s --db "$W/an3.db" --no-model : -np 1 -wdir "$W/anD" "$BIN" analyze --sae s --db "$W/an3.db" --no-model > /dev/null 2> err.txt
rc=$?
msg=$(grep -m1 '^saelite analyze' err.txt)
[ $rc -ne 124 ] && [[ "$msg" == *"rank 1: the SAE (its shape or weights) or the stored hook: not the same as on rank 0"* ]] && [ "$(antables an3.db)" = 0 ] &&
    ok "analyze: another SAE behind the same path on rank 1: refused, no hang: $(echo "$msg" | cut -c1-80)" || bad "analyze with another SAE on rank 1: rc $rc, '$msg'"
# rank 0, the writer, killed with SIGKILL while it writes (its -wal grows: the analysis writer's
# cache cut to 256 KiB, so its rows spill long before the commit: the -wal passes 1 MB about 4 s
# before the end, where a 4 MiB cache left 0.5 s and a loaded machine could miss the kill): the
# job ends, the survivor says so in one line, the transaction is rolled back (the rows are those
# from before)
cp anp.all.db ank.db
SAELITE_ANA_CACHE_KIB=256 "${MPI[@]}" -np 2 -x SAELITE_ANA_CACHE_KIB "$BIN" analyze --sae "$W/anbig" --all --db ank.db > ank.out 2> ank.err &
mp=$!
for _ in $(seq 600); do [ "$(stat -c %s ank.db-wal 2> /dev/null || echo 0)" -gt 1000000 ] && break; sleep 0.05; done
victim=$(rank0 "$(basename "$BIN") analyze.*--db ank.db" $mp)
if [ -z "$victim" ]; then bad "analyze kill: no rank 0 running (finished before the kill?)"; wait $mp
else
    killwait "$victim" $mp "analyze kill" "rank 0"
    survivor ank.err "analyze kill"
    nd=$(sqlite3 ank.db "SELECT count(*) FROM ana_dicts WHERE name = '$W/anbig'")
    andump ank.db > ank.dump
    [ "$(sqlite3 ank.db 'PRAGMA integrity_check')" = ok ] && [ "$nd" = 0 ] && cmp -s ank.dump anp.all.dump &&
        ok "analyze kill: the database is whole and holds exactly the rows from before the run" ||
        bad "analyze kill: the database changed ($nd rows for the killed SAE; $(sqlite3 ank.db 'PRAGMA integrity_check' | head -n 1))"
fi

# the pass's checkpoints under mpirun (one file per rank): the job killed once both ranks wrote
# theirs, the same command continues, and the tables are one process's
cp an.db anr1.db && cp an.db anr2.db
"$BIN" analyze --sae "$W/anbig" --all --no-model --db anr1.db > /dev/null 2> err.txt || bad "analyze anbig, one process: $(head -n 1 err.txt)"
"${MPI[@]}" -np 2 "$BIN" analyze --sae "$W/anbig" --all --no-model --db anr2.db --checkpoint-secs 0.02 > /dev/null 2>&1 &
mp=$!
for _ in $(seq 600); do [ "$(ls anr2.db.analyze-*-[01].2 2> /dev/null | wc -l)" = 2 ] && break; sleep 0.02; done
victim=$(rank0 "$(basename "$BIN") analyze.*--db anr2.db" $mp)
if [ -z "$victim" ] || [ "$(ls anr2.db.analyze-*-[01].2 2> /dev/null | wc -l)" != 2 ]; then
    bad "analyze checkpoints -np 2: no checkpoint of each rank before the end"; wait $mp
else
    killwait "$victim" $mp "analyze checkpoints -np 2" "rank 0"
    "${MPI[@]}" -np 2 "$BIN" analyze --sae "$W/anbig" --all --no-model --db anr2.db --checkpoint-secs 0.02 > out.txt 2> err.txt
    rc=$?
    andump anr1.db > anr1.dump; andump anr2.db > anr2.dump
    [ $rc = 0 ] && [ "$(grep -c 'continuing the sae pass' err.txt)" = 2 ] && cmp -s anr1.dump anr2.dump && [ -z "$(ls anr2.db.analyze-* 2> /dev/null)" ] &&
        ok "analyze -np 2 killed and rerun: both ranks continued, the tables are one process's, no checkpoint left" ||
        bad "analyze -np 2 killed and rerun: rc $rc, $(grep -c 'continuing the sae pass' err.txt) ranks continued, tables $(cmp -s anr1.dump anr2.dump && echo equal || echo differ), left: $(ls anr2.db.analyze-* 2> /dev/null)"
    # the summary counts both ranks' continued sequences (it said rank 0's alone, an audit)
    held=$(sed -n 's/.*continuing the sae pass from .* (\([0-9]*\) of [0-9]* sequences done).*/\1/p' err.txt | awk '{ s += $1 } END { print s + 0 }')
    grep -q "continued from a checkpoint that held $held of the sequences" out.txt &&
        ok "analyze -np 2 rerun: the summary counts both ranks' $held continued sequences" ||
        bad "analyze -np 2 rerun: ranks continued $held sequences, the summary: $(grep 'continued from' out.txt)"
fi
# killed under -np 2, finished by one process: it starts over (other files), and once written
# removes the ranks' files too (they stayed for good, an audit)
cp an.db anr3.db
"${MPI[@]}" -np 2 "$BIN" analyze --sae "$W/anbig" --all --no-model --db anr3.db --checkpoint-secs 0.02 > /dev/null 2>&1 &
mp=$!
for _ in $(seq 600); do [ "$(ls anr3.db.analyze-*-[01].2 2> /dev/null | wc -l)" = 2 ] && break; sleep 0.02; done
victim=$(rank0 "$(basename "$BIN") analyze.*--db anr3.db" $mp)
if [ -n "$victim" ]; then kill -KILL "$victim"; fi
wait $mp 2> /dev/null
left=$(ls anr3.db.analyze-* 2> /dev/null | wc -l)
anck0=$(ls anr3.db.analyze-*-0.2 2> /dev/null | head -n 1) # rank 0's name, for the stop below
"$BIN" analyze --sae "$W/anbig" --all --no-model --db anr3.db > /dev/null 2> err.txt
rc=$?
andump anr3.db > anr3.dump
[ "$left" -ge 1 ] && [ $rc = 0 ] && cmp -s anr1.dump anr3.dump && [ -z "$(ls anr3.db.analyze-* 2> /dev/null)" ] &&
    ok "analyze killed under -np 2 ($left checkpoint files), done by one process: the same tables, no file left" ||
    bad "analyze killed under -np 2, done by one process: rc $rc, $left files before, left after: $(ls anr3.db.analyze-* 2> /dev/null)"
# each rank saves on its own clock and rank 0 prints the stop line: with rank 1's checkpoint alone
# (a directory where rank 0's goes: it saves none) the line named rank 0's path, and with that
# path's file not this run's it said "starts again", where the rerun continued rank 1's sequences
# (a review). The line names the ranks' files.
cp an.db anr4.db
if [ -z "$anck0" ]; then bad "analyze stop -np 2: no name of rank 0's checkpoint from the run before"
else
    mkdir "anr4.db${anck0#anr3.db}"
    "${MPI[@]}" -np 2 "$BIN" analyze --sae "$W/anbig" --all --no-model --db anr4.db --checkpoint-secs 0.02 > /dev/null 2> err.txt &
    mp=$!
    for _ in $(seq 600); do ls anr4.db.analyze-*-1.2 > /dev/null 2>&1 && break; sleep 0.01; done
    kill -USR1 $mp; wait $mp; rc=$?
    line=$(grep -m1 '^saelite analyze: interrupted' err.txt)
    rmdir "anr4.db${anck0#anr3.db}"
    "${MPI[@]}" -np 2 "$BIN" analyze --sae "$W/anbig" --all --no-model --db anr4.db --checkpoint-secs 0.02 > /dev/null 2> err2.txt
    [ $rc = 130 ] && [[ "$line" == *"interrupted; the same command continues from anr4.db.analyze-"*"-R.2 (one per rank that saved one; on the same world size)" ]] &&
        grep -q "continuing the sae pass from anr4.db.analyze-.*-1.2" err2.txt &&
        ok "analyze -np 2 stopped with rank 1's checkpoint alone: $line" ||
        bad "analyze -np 2 stopped with rank 1's checkpoint alone: rc $rc, '$line', the rerun: $(grep -m1 continuing err2.txt)"
fi

echo "test_mpi: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
