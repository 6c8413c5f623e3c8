#!/usr/bin/env bash
# test_sae_cli.sh - synth, sae-train (npy and synthetic sources, --max-steps + --resume bit-identity),
# sae-eval, and error handling of the SAE commands.
set -u
BIN=${SAELITE_BIN:-./saelite}
T=build/tests/sae_cli
rm -rf "$T"; mkdir -p "$T"
pass=0; fail=0
ok() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $1"; fi; }

$BIN synth --d 32 --features 64 --active 4 --tokens 20000 --out $T/acts.npy --truth $T/truth.npy >$T/synth.out 2>&1
ok "synth writes activations and truth" '[ -s $T/acts.npy ] && [ -s $T/truth.npy ] && grep -q "20000 samples" $T/synth.out'
# SIGTERM while sampling: exit 130, one line, and the earlier pair untouched (it wrote the new
# truth beside the old activations and left a temp, an audit); progress lines meanwhile
cp $T/acts.npy $T/acts0.npy; cp $T/truth.npy $T/truth0.npy
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.2 $BIN synth --d 64 --features 8192 --tokens 1000000 --seed 9 --out $T/acts.npy --truth $T/truth.npy >/dev/null 2>$T/synth_term.err &
# SIGTERM once a progress line shows it sampling (a fixed 1.5 s came before the end of the
# generator's setup under ASan on a slower CPU: the signal then killed it, exit 143)
sp=$!; for _ in $(seq 200); do grep -q "^synth .*tok/s" $T/synth_term.err 2>/dev/null && break; sleep 0.1; done
kill -TERM $sp; wait $sp; src=$?
ok "synth stopped by SIGTERM: exit 130, progress shown, nothing replaced: exit $src, $(tail -1 $T/synth_term.err)" '[ $src -eq 130 ] && grep -q "^synth .*tok/s" $T/synth_term.err && grep -q "interrupted; nothing written" $T/synth_term.err && cmp -s $T/acts.npy $T/acts0.npy && cmp -s $T/truth.npy $T/truth0.npy && [ -z "$(ls $T | grep "\.tmp\.")" ]'

# SIGUSR1 (what mpirun forwards, what batch schedulers send before a time limit) stops like Ctrl-C
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.2 $BIN sae-train --npy $T/acts.npy --d-sae 128 --k 4 --tokens 100M --batch 512 --checkpoint-every 1000000 --out $T/usr1 >/dev/null 2>$T/usr1.err &
up=$!; for _ in $(seq 200); do grep -q "^sae-train .* step [0-9]" $T/usr1.err 2>/dev/null && break; sleep 0.1; done
kill -USR1 $up; wait $up; urc=$?
ok "sae-train stopped by SIGUSR1: exit 130 with a checkpoint: exit $urc, $(tail -1 $T/usr1.err)" '[ $urc -eq 130 ] && grep -q "interrupted at step [0-9]*; checkpoint" $T/usr1.err && [ -s $T/usr1/checkpoint.bin ]'
# SIGHUP (the terminal or ssh session closed) stops with a checkpoint too (it killed mid-step);
# under nohup it stays ignored and the run goes on. The first run gets SIGHUP's default whatever
# this script inherited: under `nohup make test` it ignored the signal too and the wait below
# waited for 100M tokens (a shell cannot reset a signal ignored on entry)
hup_default=(env --default-signal=HUP)
env --default-signal=HUP true 2>/dev/null || hup_default=(perl -e '$SIG{HUP} = "DEFAULT"; exec @ARGV or die')
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.2 "${hup_default[@]}" $BIN sae-train --npy $T/acts.npy --d-sae 128 --k 4 --tokens 100M --batch 512 --checkpoint-every 1000000 --out $T/hup >/dev/null 2>$T/hup.err &
hp=$!; for _ in $(seq 200); do grep -q "^sae-train .* step [0-9]" $T/hup.err 2>/dev/null && break; sleep 0.1; done
kill -HUP $hp; wait $hp; hrc=$?
ok "sae-train stopped by SIGHUP: exit 130 with a checkpoint: exit $hrc, $(tail -1 $T/hup.err)" '[ $hrc -eq 130 ] && grep -q "interrupted at step [0-9]*; checkpoint" $T/hup.err && [ -s $T/hup/checkpoint.bin ]'
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.2 nohup $BIN sae-train --npy $T/acts.npy --d-sae 128 --k 4 --tokens 100M --batch 512 --checkpoint-every 1000000 --out $T/nohup >/dev/null 2>$T/nohup.err &
np=$!; for _ in $(seq 200); do grep -q "^sae-train .* step [0-9]" $T/nohup.err 2>/dev/null && break; sleep 0.1; done
kill -HUP $np; sleep 1; kill -0 $np 2>/dev/null; nalive=$?
kill -USR1 $np; wait $np; nrc=$?
ok "sae-train under nohup: SIGHUP ignored, still running 1 s later; SIGUSR1 then stops it: alive $nalive, exit $nrc" '[ $nalive -eq 0 ] && [ $nrc -eq 130 ] && [ -s $T/nohup/checkpoint.bin ]'
# a closed terminal sends SIGHUP twice (the shell's to its jobs, then the kernel's to the
# foreground group as the shell exits): the second is not "Ctrl-C again, stop now", which ended
# the job mid-step without its checkpoint (1 close in 4 on a pty, a review)
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.2 "${hup_default[@]}" $BIN sae-train --npy $T/acts.npy --d-sae 128 --k 4 --tokens 100M --batch 512 --checkpoint-every 1000000 --out $T/hup2 >/dev/null 2>$T/hup2.err &
hp=$!; for _ in $(seq 200); do grep -q "^sae-train .* step [0-9]" $T/hup2.err 2>/dev/null && break; sleep 0.1; done
kill -HUP $hp; kill -HUP $hp; wait $hp; hrc=$?
ok "sae-train, SIGHUP twice (a closed terminal): exit 130 with a checkpoint: exit $hrc, $(tail -1 $T/hup2.err)" '[ $hrc -eq 130 ] && grep -q "interrupted at step [0-9]*; checkpoint" $T/hup2.err && [ -s $T/hup2/checkpoint.bin ]'
# ... to `saelite ... 2>&1 | cat` (tee, a log): cat dies of it, and the next progress line raised
# SIGPIPE, which ended the job before its checkpoint (or after it, exit 141). The pipeline runs in
# a process group of its own (set -m), signalled as a terminal's shell does; the subshell ignores
# SIGHUP to report saelite's exit status
( set -m # (in a subshell: job control's "Done" lines go nowhere)
{ trap '' HUP; SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.000001 "${hup_default[@]}" $BIN sae-train --npy $T/acts.npy --d-sae 128 --k 4 --tokens 100M --batch 512 --checkpoint-every 1000000 --out $T/hup3 2>&1 >/dev/null; echo $? > $T/hup3.rc; } | "${hup_default[@]}" cat > /dev/null &
pj=$!; for _ in $(seq 200); do [ -s $T/hup3/checkpoint_run.txt ] && break; sleep 0.1; done; sleep 0.5
kill -HUP -- -"$(ps -o pgid= -p $pj | tr -d ' ')"; wait $pj
for _ in $(seq 300); do [ -s $T/hup3.rc ] && break; sleep 0.1; done ) 2>/dev/null # the subshell outlives cat
ok "sae-train | cat, SIGHUP to both: exit 130 with a checkpoint: exit $(cat $T/hup3.rc 2>/dev/null)" '[ "$(cat $T/hup3.rc 2>/dev/null)" = 130 ] && [ -s $T/hup3/checkpoint.bin ]'

args="--npy $T/acts.npy --d-sae 128 --k 4 --tokens 40960 --batch 512 --lr 0.002 --checkpoint-every 20"
$BIN sae-train $args --out $T/full >$T/full.out 2>&1
ok "sae-train on npy" 'grep -q "^eval" $T/full.out && [ -s $T/full/sae_weights.safetensors ] && [ -s $T/full/cfg.json ] && [ -s $T/full/sparsity.safetensors ]'
$BIN sae-train $args --out $T/part --max-steps 33 >$T/part.out 2>&1
ok "--max-steps leaves a checkpoint" '[ -s $T/part/checkpoint.bin ]'
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.000001 $BIN sae-train $args --out $T/part --resume >$T/resume.out 2>&1
ok "resume finishes, naming where it continued" 'grep -q "47 steps" $T/resume.out && grep -q "^resumed at step 33 of 80 (the checkpoint.s); the whole run.s training loops took [0-9.]*s$" $T/resume.out'
ok "the stream's replay shows progress (it was silent)" 'grep -q "^resume: replaying the stream .* tok" $T/resume.out'
ok "the held-out evaluation shows progress (it ran after the ETA)" 'grep -q "^held-out eval .* tok" $T/resume.out'
ok "resumed weights bit-identical" 'cmp -s $T/full/sae_weights.safetensors $T/part/sae_weights.safetensors'
# a checkpoint by the clock (--checkpoint-secs) where the steps give none before the end: kill -9
# after it, and the resume ends bit-identical (the kill lost every step since the start)
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.2 $BIN sae-train ${args/--checkpoint-every 20/--checkpoint-every 0} --tokens 4M --out $T/clock0 >/dev/null 2>&1
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.2 $BIN sae-train ${args/--checkpoint-every 20/--checkpoint-every 0} --tokens 4M --checkpoint-secs 0.3 --out $T/clock >/dev/null 2>$T/clock.err &
cp_=$!; for _ in $(seq 300); do [ -s $T/clock/checkpoint.bin ] && break; sleep 0.05; done
kill -KILL $cp_ 2>/dev/null; wait $cp_ 2>/dev/null
$BIN sae-train ${args/--checkpoint-every 20/--checkpoint-every 0} --tokens 4M --out $T/clock --resume >$T/clock2.out 2>&1
ok "sae-train --checkpoint-secs: a checkpoint by the clock survives kill -9, the resume is bit-identical: $(grep -o 'resumed at step [0-9]* of [0-9]*' $T/clock2.out)" 'grep -q "^resumed at step [1-9][0-9]* of 7812 " $T/clock2.out && cmp -s $T/clock0/sae_weights.safetensors $T/clock/sae_weights.safetensors'
ok "training log continues" '[ "$(grep -c . $T/part/training_log.csv)" = "$(grep -c . $T/full/training_log.csv)" ]'
$BIN sae-train --npy $T/acts.npy --d-sae 64 --k 4 --tokens 40960 --batch 512 --out $T/part --resume >$T/bad.out 2>&1
ok "resume with other flags refused" '[ $? -ne 0 ] && grep -q "the checkpoint.s run had --d-sae 128 (this run 64)" $T/bad.out'
ok "the steps' precision is recorded (fp32: none in cfg.json)" 'grep -qx "precision fp32" $T/part/checkpoint_run.txt && ! grep -q precision $T/part/cfg.json'
# a checkpoint_run.txt from before the precision line gets one at the resumed call's first checkpoint
rm -rf $T/pold; $BIN sae-train $args --out $T/pold --max-steps 20 >/dev/null 2>&1
sed -i '/^precision /d' $T/pold/checkpoint_run.txt
$BIN sae-train $args --out $T/pold --resume --max-steps 5 >/dev/null 2>&1
ok "an older run file gains the precision line on resume" 'grep -qx "precision fp32" $T/pold/checkpoint_run.txt'
# a resume in another precision: cfg.json said the last call's (or nothing for fp32), an audit;
# now "mixed" and a note (where the CPU has bf16: both directions)
if $BIN sae-train $args --out $T/pauto --max-steps 1 --precision auto 2>&1 | grep -q "encoder GEMM: bf16"; then
    for pr in "bf16 fp32" "fp32 bf16"; do
        p1=${pr% *}; p2=${pr#* }
        rm -rf $T/pmix; $BIN sae-train $args --out $T/pmix --max-steps 33 --precision $p1 >/dev/null 2>&1
        out=$($BIN sae-train $args --out $T/pmix --resume --precision $p2 2>&1)
        ok "$p1 resumed in $p2: cfg.json and the run file say mixed, with a note" '[ $? -eq 0 ] && grep -q "\"precision\":[[:space:]]*\"mixed\"" $T/pmix/cfg.json && grep -qx "precision mixed" $T/pmix/checkpoint_run.txt && grep -q "note: the checkpoint.s steps ran in $p1, this call.s in $p2" <<<"$out"'
    done
    # no step in the other precision, no "mixed": a refused resume (it wrote the record before
    # loading the checkpoint, a review), and a finished run resumed in the other precision
    rm -rf $T/pmix; $BIN sae-train $args --out $T/pmix --max-steps 33 --precision bf16 >/dev/null 2>&1
    $BIN sae-train ${args/--d-sae 128/--d-sae 64} --out $T/pmix --resume --precision fp32 >/dev/null 2>&1
    ok "a refused resume in fp32 leaves the bf16 record" '[ $? -ne 0 ] && grep -qx "precision bf16" $T/pmix/checkpoint_run.txt'
    $BIN sae-train $args --out $T/pmix --resume --precision bf16 >/dev/null 2>&1
    out=$($BIN sae-train $args --out $T/pmix --resume --precision fp32 2>&1)
    ok "a finished bf16 run resumed in fp32 stays bf16" '[ $? -eq 0 ] && grep -q "\"precision\":[[:space:]]*\"bf16\"" $T/pmix/cfg.json && ! grep -q "note: the checkpoint" <<<"$out"'

fi

# a store-backed run stopped and resumed registers the whole training curve, as an uninterrupted one
$BIN import --npy $T/acts.npy --db $T/acts.db --hook synth.acts --seq-len 64 >/dev/null 2>&1
dargs="--db $T/acts.db --hook synth.acts --d-sae 128 --k 4 --tokens 40960 --batch 512 --checkpoint-every 20"
$BIN sae-train $dargs --out $T/dfull >$T/dfull.out 2>&1
$BIN sae-train $dargs --out $T/dpart --max-steps 33 >/dev/null 2>&1
$BIN sae-train $dargs --out $T/dpart --resume >$T/dpart.out 2>&1
# a database another process holds locked (rollback journal): one wait for the lock, then the
# line; the read-write open that rolls back a hot journal waited 10 s, then the sources 10 s more
cp $T/acts.db $T/acts_lock.db; rm -f $T/acts_lock.db-wal $T/acts_lock.db-shm
sqlite3 $T/acts_lock.db "PRAGMA journal_mode=DELETE" >/dev/null
/usr/bin/python3 -c 'import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None); c.execute("BEGIN EXCLUSIVE"); c.execute("CREATE TABLE lockme(a)")
open(sys.argv[2], "w").close(); time.sleep(40)' $T/acts_lock.db $T/locked.flag & lockpid=$!
for _ in $(seq 100); do [ -e $T/locked.flag ] && break; sleep 0.1; done
t0=$(date +%s)
$BIN sae-train ${dargs/$T\/acts.db/$T/acts_lock.db} --out $T/dlock >$T/dlock.out 2>&1; rc=$?
el=$(( $(date +%s) - t0 ))
kill $lockpid 2>/dev/null; wait $lockpid 2>/dev/null
ok "a locked database: one wait, then the line (${el} s: $(tail -1 $T/dlock.out))" '[ $rc -eq 1 ] && [ $el -lt 16 ] && grep -q "database is locked (another process is writing to it" $T/dlock.out'
# rows added to the database between the stop and --resume: refused, and not with "resume with the
# same flags" (the same flags were given; a review)
cp $T/acts.db $T/acts_more.db
$BIN sae-train ${dargs/$T\/acts.db/$T/acts_more.db} --out $T/dmore --max-steps 5 >/dev/null 2>&1
sqlite3 $T/acts_more.db "DELETE FROM activations WHERE rowid = (SELECT max(rowid) FROM activations)"
$BIN sae-train ${dargs/$T\/acts.db/$T/acts_more.db} --out $T/dmore --resume >$T/dmore.out 2>&1; rc=$?
ok "a database changed since the checkpoint is refused, naming the way on" '[ $rc -eq 1 ] && grep -q "run had \"store_rows [0-9]*\", this one \"store_rows [0-9]*\" (the training split.s tokens in --db: .*); resume on the database it was trained on, or train it from the start on this one (--force without --resume)$" $T/dmore.out'
# the same rows from another model (the hook extracted again with it): refused too (the rows alone
# let it continue); a checkpoint from before the store_model line resumes as before
cp $T/acts.db $T/acts_model.db
$BIN sae-train ${dargs/$T\/acts.db/$T/acts_model.db} --out $T/dmodel --max-steps 5 >/dev/null 2>&1
cp -r $T/dmodel $T/dmodel_old
sqlite3 $T/acts_model.db "UPDATE models SET checksum = '0123456789abcdef'"
$BIN sae-train ${dargs/$T\/acts.db/$T/acts_model.db} --out $T/dmodel --resume >$T/dmodel.out 2>&1; rc=$?
ok "another model's activations under the same flags are refused: $(cat $T/dmodel.out)" '[ $rc -eq 1 ] && grep -q "run had \"store_model \", this one \"store_model 0123456789abcdef\" (the checksum of the model whose activations --db holds: .*); resume on the database it was trained on" $T/dmodel.out'
sed -i '/^store_model /d' $T/dmodel_old/checkpoint_run.txt
$BIN sae-train ${dargs/$T\/acts.db/$T/acts_model.db} --out $T/dmodel_old --resume >$T/dmodel_old.out 2>&1; rc=$?
ok "a checkpoint from before the store_model line resumes: exit $rc" '[ $rc -eq 0 ] && grep -q "^resumed at step 5 " $T/dmodel_old.out'
q() { sqlite3 $T/acts.db "SELECT count(*) || ',' || max(step) FROM sae_training_log l JOIN sae_registry r ON r.id = l.sae_id WHERE r.dir = '$1'"; }
ok "store run registered" 'grep -q "registered in" $T/dfull.out && grep -q "registered in" $T/dpart.out'
ok "resumed store run registers every log row" '[ "$(q $T/dpart)" = "$(q $T/dfull)" ] && [ "$(q $T/dfull)" = "80,80" ]'
ok "resumed CSV export equals the uninterrupted one" 'cmp -s $T/dfull/training_log.csv $T/dpart/training_log.csv'
# the held-out metrics read the validation split once: it has 1408 tokens here, fewer than the
# 8192-token buffer plus the tokens asked, so its stream wrapped (tokens counted twice, others
# never; an audit). Now they are analyze's over the same split, to the digit.
cp $T/acts.db $T/acts_an.db
an=$($BIN analyze --db $T/acts_an.db --sae $T/dfull --no-model --val-frac 0.05 2>&1)
ok "held-out mse is the split's, once each ($(grep -o '"mse":[^,]*' $T/dfull/cfg.json) against $(grep -o 'mse [0-9.e-]*' <<<"$an"))" '[ "$(grep -o "\"mse\":[[:space:]]*[0-9.e-]*" $T/dfull/cfg.json | grep -o "[0-9.e-]*$")" = "$(grep -o "mse [0-9.e-]*" <<<"$an" | cut -d" " -f2)" ] && grep -q "1408 held-out tokens" $T/dfull.out'
# ... and its training time is every call's: the checkpoint records the seconds so far (here
# set to 1000 s), which the resumed call adds to its own (the registry had the last call's only)
$BIN sae-train $dargs --out $T/dsec --max-steps 33 >/dev/null 2>&1
# (rewritten as a SAELOG02 file, from before the checksum, which still resumes)
/usr/bin/python3 -c "import struct,sys; b=bytearray(open(sys.argv[1],'rb').read()); assert b[:8]==b'SAELOG03'; b[16:24]=struct.pack('<d',1000.0); open(sys.argv[1],'wb').write(b'SAELOG02'+b[8:-8])" $T/dsec/checkpoint_log.bin
$BIN sae-train $dargs --out $T/dsec --resume >/dev/null 2>&1
secs() { sqlite3 $T/acts.db "SELECT seconds FROM sae_registry WHERE dir = '$1' ORDER BY id DESC LIMIT 1"; }
ok "a resumed run's registered seconds count the calls before it ($(secs $T/dsec))" 'awk -v s="$(secs $T/dsec)" "BEGIN { exit !(s >= 1000 && s < 1100) }"'
ok "an uninterrupted run's seconds are its own ($(secs $T/dfull))" 'awk -v s="$(secs $T/dfull)" "BEGIN { exit !(s > 0 && s < 100) }"'
# a changed byte in a row of the current log (SAELOG03) is refused by its checksum (the resumed
# run registered that curve and wrote it to the CSV); removing the file resumes without it
$BIN sae-train $dargs --out $T/dbad --max-steps 33 >/dev/null 2>&1
/usr/bin/python3 -c "import sys; b=bytearray(open(sys.argv[1],'rb').read()); b[40]^=1; open(sys.argv[1],'wb').write(b)" $T/dbad/checkpoint_log.bin
out=$($BIN sae-train $dargs --out $T/dbad --resume 2>&1)
ok "a damaged checkpoint log is refused by its checksum ($out)" '[ $? -eq 1 ] && grep -q "checkpoint_log.bin: damaged (its checksum does not match)" <<<"$out"'
rm $T/dbad/checkpoint_log.bin
ok "... and without it the run resumes" '$BIN sae-train $dargs --out $T/dbad --resume >/dev/null 2>&1 && cmp -s $T/dfull/sae_weights.safetensors $T/dbad/sae_weights.safetensors'
# a checkpoint log from before the seconds (SAELOG01: magic, count, rows) still resumes
$BIN sae-train $dargs --out $T/dold --max-steps 33 >/dev/null 2>&1
/usr/bin/python3 -c "import sys; b=open(sys.argv[1],'rb').read(); open(sys.argv[1],'wb').write(b'SAELOG01'+b[8:16]+b[24:-8])" $T/dold/checkpoint_log.bin
$BIN sae-train $dargs --out $T/dold --resume >/dev/null 2>&1
ok "a SAELOG01 checkpoint log resumes with every row" '[ $? -eq 0 ] && cmp -s $T/dfull/training_log.csv $T/dold/training_log.csv && [ "$(q $T/dold)" = "80,80" ]'

# the same weights whatever the thread counts (batch x d_sae >= 1M, so the kernels do split)
targs="--npy $T/acts.npy --d-sae 2048 --k 4 --tokens 4096 --batch 1024 --seed 5"
SAELITE_THREADS=1 OPENBLAS_NUM_THREADS=1 $BIN sae-train $targs --out $T/th1 >/dev/null 2>&1
SAELITE_THREADS=2 OPENBLAS_NUM_THREADS=2 $BIN sae-train $targs --out $T/th2 >/dev/null 2>&1
ok "weights independent of the thread counts" '[ -s $T/th1/sae_weights.safetensors ] && cmp -s $T/th1/sae_weights.safetensors $T/th2/sae_weights.safetensors'

$BIN sae-eval --sae $T/full --ground-truth $T/truth.npy --npy $T/acts.npy >$T/eval.out 2>&1
ok "sae-eval reports MMCS and metrics" 'grep -q "MMCS" $T/eval.out && grep -q "explained variance" $T/eval.out'

# rows that do not vary have no explained variance (it would divide by 0): said, not "0.0000"
python3 -c "
import sys; d = 32; hdr = \"{'descr': '<f4', 'fortran_order': False, 'shape': (64, %d), }\" % d
hdr += ' ' * (63 - (10 + len(hdr)) % 64) + '\\n'
sys.stdout.buffer.write(b'\\x93NUMPY\\x01\\x00' + len(hdr).to_bytes(2, 'little') + hdr.encode() + b'\\x00\\x00\\x80\\x3f' * (64 * d))" > $T/const.npy
$BIN sae-eval --sae $T/full --npy $T/const.npy >$T/const.out 2>&1
ok "sae-eval: constant rows: explained variance n/a ($(grep -o 'explained variance [^ ]*' $T/const.out))" 'grep -q "explained variance n/a (the rows do not vary)" $T/const.out'
$BIN sae-train --synth --synth-d 32 --synth-features 64 --arch batchtopk --d-sae 128 --k 4 --tokens 20480 --batch 512 --out $T/bt --truth-out $T/bt_truth.npy --truth $T/bt_truth.npy >$T/bt.out 2>&1
ok "synthetic batchtopk run" 'grep -q "ground truth: MMCS" $T/bt.out && grep -q "\"jumprelu\"" $T/bt/cfg.json'
$BIN sae-eval --sae $T/bt --ground-truth $T/bt_truth.npy >$T/bte.out 2>&1
ok "sae-eval names the architecture it runs as and the one it was trained as ($(head -1 $T/bte.out))" 'grep -q "^sae $T/bt: jumprelu d_in 32 d_sae 128 (trained as batchtopk k 4)$" $T/bte.out'
$BIN sae-eval --sae $T/full --ground-truth $T/truth.npy >$T/fe.out 2>&1
ok "sae-eval: no 'trained as' where the SAE runs as it was trained" '! grep -q "trained as" $T/fe.out && grep -q "^sae $T/full: " $T/fe.out'
# another architecture's flags trained without a word (--arch jumprelu --k 32 aims at nothing)
$BIN sae-train --synth --synth-d 16 --synth-features 32 --arch jumprelu --k 4 --jr-bandwidth 0.1 --tokens 2048 --batch 256 --out $T/jrk >$T/jrk.out 2>&1
ok "jumprelu --k: a note that it is ignored" 'grep -q "^note: --k is for topk, batchtopk and matryoshka; --arch jumprelu ignores it" $T/jrk.out && ! grep -q "jr-bandwidth" $T/jrk.out'
$BIN sae-train --synth --synth-d 16 --synth-features 32 --arch topk --k=4 --l1 2 --tokens 2048 --batch 256 --out $T/tkl >$T/tkl.out 2>&1
ok "topk --l1: a note, none for its own --k" 'grep -q "^note: --l1 is for relu, gated and jumprelu; --arch topk ignores it" $T/tkl.out && ! grep -q "note: --k" $T/tkl.out'
# the default architecture says so; a transcoder's notes name its activations (relu, topk,
# batchtopk, jumprelu: "relu, gated and jumprelu" named one it cannot have)
$BIN sae-train --synth --synth-d 16 --synth-features 32 --l1 2 --tokens 2048 --batch 256 --out $T/tkd >$T/tkd.out 2>&1
ok "--l1 without --arch: the default named" 'grep -q "^note: --l1 is for relu, gated and jumprelu; --arch topk (the default) ignores it" $T/tkd.out'
$BIN sae-train --npy $T/acts.npy --npy-out $T/acts.npy --arch transcoder --l1 2 --tokens 2048 --batch 256 --out $T/tcl >$T/tcl.out 2>&1
$BIN sae-train --npy $T/acts.npy --npy-out $T/acts.npy --arch transcoder --activation jumprelu --k 4 --tokens 2048 --batch 256 --out $T/tcj >$T/tcj.out 2>&1
ok "transcoder notes name its activations" 'grep -q "^note: --l1 is for the relu and jumprelu activations; --activation topk (the default) ignores it" $T/tcl.out && grep -q "^note: --k is for the topk and batchtopk activations; --activation jumprelu ignores it" $T/tcj.out'

$BIN sae-train --npy $T/missing.npy --out $T/x >$T/e1.out 2>&1; rc=$?
ok "missing input: exit 1 naming the file" '[ $rc -eq 1 ] && grep -q "missing.npy" $T/e1.out'
$BIN sae-train --npy $T/acts.npy --out $T/x --arch nope >$T/e2.out 2>&1; rc=$?
ok "bad arch: usage error" '[ $rc -eq 2 ]'
$BIN sae-train --npy $T/acts.npy >$T/e3.out 2>&1; rc=$?
ok "no --out: usage error" '[ $rc -eq 2 ]'
$BIN sae-eval --sae $T/nowhere --ground-truth $T/truth.npy >$T/e4.out 2>&1; rc=$?
ok "sae-eval on a missing SAE fails cleanly" '[ $rc -eq 1 ] && grep -q "cfg.json" $T/e4.out'
$BIN sae-eval --sae $T/full --ground-truth $T/acts.npy --max-tokens 5 >$T/e5.out 2>&1; rc=$?
ok "sae-eval takes an [F,d] array as truth, but no row of zeros (acts.npy has one: a sample with nothing active)" '[ $rc -eq 1 ] && grep -q "acts.npy: row 5 (a true direction) is all zeros" $T/e5.out'

# finding 6: non-positive learning rates and sizes are usage errors; nothing is created
for f in "--lr -1" "--lr 0" "--d-sae -4" "--shuffle-buffer 0" "--synth-active 0"; do
    $BIN sae-train --npy $T/acts.npy --out $T/neg --k 4 --tokens 1024 --batch 512 $f >$T/e6.out 2>&1; rc=$?
    ok "sae-train $f refused" '[ $rc -eq 2 ] && [ "$(wc -l < $T/e6.out)" = 1 ] && grep -q -- "${f%% *}" $T/e6.out && [ ! -e $T/neg ]'
done
# finding 11: library messages are not prefixed with the command a second time
$BIN sae-train --npy $T/acts.npy --out $T/bigk --d-sae 16 --k 32 --tokens 1024 --batch 512 >$T/e7.out 2>&1; rc=$?
ok "k above d_sae: one prefix" '[ $rc -ne 0 ] && grep -q "^saelite sae-train: k 32 must be in 1..d_sae (16)" $T/e7.out'
# finding 7: sae-eval refuses NaN activations with one line naming the file
cp $T/acts.npy $T/nan.npy
printf '\000\000\300\177' | dd of=$T/nan.npy bs=1 seek=$(( $(stat -c %s $T/nan.npy) - 4 )) conv=notrunc 2>/dev/null
$BIN sae-eval --sae $T/full --npy $T/nan.npy >$T/e8.out 2>$T/e8.err; rc=$?
ok "sae-eval refuses NaN activations" '[ $rc -eq 1 ] && [ "$(wc -l < $T/e8.err)" = 1 ] && grep -q "nan.npy: non-finite value (nan) at row 19999, column 31" $T/e8.err'
$BIN synth --d 16 --features 32 --tokens 64 --out $T/w16.npy --truth $T/w16t.npy >/dev/null 2>&1
$BIN sae-eval --sae $T/full --npy $T/w16.npy >/dev/null 2>$T/e9.err; rc=$?
ok "sae-eval: another width names the shape" '[ $rc -eq 1 ] && grep -q "w16.npy: expected \[tokens, 32\], got \[64, 16\]" $T/e9.err'

# the sparse kernels' thread split must not change any bit
targs="--npy $T/acts.npy --d-sae 128 --k 16 --tokens 20480 --batch 4096 --val-frac 0"
SAELITE_THREADS=1 $BIN sae-train $targs --out $T/th1 --force >/dev/null 2>&1
SAELITE_THREADS=3 $BIN sae-train $targs --out $T/th3 >/dev/null 2>&1
ok "thread count does not change results" '[ -s $T/th1/sae_weights.safetensors ] && cmp -s $T/th1/sae_weights.safetensors $T/th3/sae_weights.safetensors'

# the store path: synth --db, sae-train --db --hook, registry + log, resume bit-identical
$BIN synth --d 32 --features 64 --active 4 --tokens 20000 --out $T/s2.npy --truth $T/s2_truth.npy --db $T/syn.db >$T/s2.out 2>&1
ok "synth --db stores the activations" 'grep -q "as hook synth" $T/s2.out'
sargs="--db $T/syn.db --hook synth --d-sae 128 --k 4 --tokens 30720 --batch 512 --lr 0.002 --shuffle-buffer 4096"
$BIN sae-train $sargs --out $T/sfull --truth $T/s2_truth.npy >$T/sfull.out 2>&1
ok "sae-train from the store" 'grep -q "registered in" $T/sfull.out && grep -q "ground truth: MMCS" $T/sfull.out'
ok "registry row and log in the db" '[ "$(sqlite3 $T/syn.db "select count(*) from sae_registry where dir = '"'"'$T/sfull'"'"' and hook_name = '"'"'synth'"'"' and eval_ev > 0.5")" = 1 ] && [ "$(sqlite3 $T/syn.db "select count(*) > 10 from sae_training_log")" = 1 ]'
$BIN sae-train $sargs --out $T/spart --max-steps 21 >/dev/null 2>&1
$BIN sae-train $sargs --out $T/spart --resume >$T/sres.out 2>&1
ok "store-sourced resume bit-identical" 'cmp -s $T/sfull/sae_weights.safetensors $T/spart/sae_weights.safetensors'
# the new architectures through the same path: store source, stop + resume bit-identical, sae-eval
for arch in gated matryoshka; do
    extra=""; [ $arch = matryoshka ] && extra="--widths 16,64"
    $BIN sae-train $sargs --arch $arch $extra --out $T/s_$arch >$T/s_$arch.out 2>&1
    ok "$arch from the store" 'grep -q "registered in" $T/s_$arch.out && grep -q "^sae-train: $arch" $T/s_$arch.out'
    $BIN sae-train $sargs --arch $arch $extra --out $T/sp_$arch --max-steps 21 >/dev/null 2>&1
    $BIN sae-train $sargs --arch $arch $extra --out $T/sp_$arch --resume >/dev/null 2>&1
    ok "$arch resume bit-identical" 'cmp -s $T/s_$arch/sae_weights.safetensors $T/sp_$arch/sae_weights.safetensors'
    $BIN sae-eval --sae $T/s_$arch --npy $T/s2.npy --ground-truth $T/s2_truth.npy >$T/se_$arch.out 2>&1
    ok "$arch sae-eval" 'grep -q "^sae $T/s_$arch: $arch" $T/se_$arch.out && grep -q "explained variance" $T/se_$arch.out'
done
ok "gated layout" 'grep -q "\"gated\"" $T/s_gated/cfg.json && grep -q b_gate $T/s_gated/sae_weights.safetensors && grep -q r_mag $T/s_gated/sae_weights.safetensors && ! grep -q b_enc $T/s_gated/sae_weights.safetensors'
ok "matryoshka saved as jumprelu with its widths" 'grep -q "\"jumprelu\"" $T/s_matryoshka/cfg.json && tr -d " \n\t" < $T/s_matryoshka/cfg.json | grep -q "\"matryoshka_widths\":\[16,64,128\]"'
# each inner prefix's reconstruction (16 and 64 of 128 latents; the full width is the line above),
# as an independent float64 numpy decode of the truncated codes gives it; no prefixes for gated
ok "matryoshka sae-eval prints its prefixes: $(grep -c "^  prefix" $T/se_matryoshka.out) lines" 'grep -q "^  prefix 16 of 128 latents: mse [0-9.e-]*  explained variance [0-9.-]*  L0 [0-9.]*$" $T/se_matryoshka.out && grep -q "^  prefix 64 of 128 latents: " $T/se_matryoshka.out && ! grep -q "prefix 128" $T/se_matryoshka.out && ! grep -q "prefix" $T/se_gated.out'
# sae-train's held-out eval too: a line per inner prefix and their EVs in cfg.json's training
ok "sae-train prints and records the matryoshka prefixes" 'grep -q "^  prefix 16 of 128 latents: mse [0-9.e-]*  explained variance [0-9.-]*  L0 [0-9.]*$" $T/s_matryoshka.out && grep -q "^  prefix 64 of 128 latents: " $T/s_matryoshka.out && tr -d " \n\t" < $T/s_matryoshka/cfg.json | grep -q "\"prefix_explained_variance\":\[[0-9.e-]*,[0-9.e-]*\]" && ! grep -q "prefix" $T/s_gated.out $T/s_gated/cfg.json'
ok "matryoshka prefixes as numpy decodes them" '/usr/bin/python3 tests/matryoshka_prefix_ref.py $T/s_matryoshka $T/s2.npy $T/se_matryoshka.out >$T/mpref.out 2>&1'
# analyze: the same prefixes as ana_metrics rows (what it printed), none for another architecture
cp $T/syn.db $T/syn_an.db
$BIN analyze --db $T/syn_an.db --sae $T/s_matryoshka --no-model >$T/an_m.out 2>&1
$BIN analyze --db $T/syn_an.db --sae $T/s_gated --no-model >/dev/null 2>&1
mq() { sqlite3 $T/syn_an.db "SELECT group_concat(m.name || '=' || printf('%.4f', m.value), ' ') FROM (SELECT * FROM ana_metrics ORDER BY name) m JOIN ana_dicts d ON d.id = m.dict_id WHERE d.name = '$1' AND m.name LIKE 'matryoshka_prefix_%'"; }
pev=$(grep -o "prefix 16 of 128: l0 [0-9.]*  explained variance [0-9.-]*" $T/an_m.out | awk '{print $NF}')
ok "analyze stores the matryoshka prefixes: $(mq $T/s_matryoshka)" '[ "$(mq $T/s_matryoshka | wc -w)" = 6 ] && mq $T/s_matryoshka | grep -q "matryoshka_prefix_16_ev=$pev matryoshka_prefix_16_l0=[0-9.]* matryoshka_prefix_16_mse=[0-9.]* matryoshka_prefix_64_ev=" && [ -n "$pev" ] && [ -z "$(mq $T/s_gated)" ]'
$BIN sae-train $sargs --arch matryoshka --widths 64,16 --out $T/mbad >$T/mbad.out 2>&1; rc=$?
ok "matryoshka widths must increase" '[ $rc -ne 0 ] && grep -q "strictly increasing" $T/mbad.out'
$BIN sae-train $sargs --widths 16 --out $T/mbad2 >$T/mbad2.out 2>&1; rc=$?
ok "--widths needs --arch matryoshka" '[ $rc -eq 2 ]'
# matryoshka's inner levels: the truncated full-width code (shared, the default) or a BatchTopK
# of their own (own, what checkpoints from before --levels ran)
ok "matryoshka records its level mode" 'tr -d " \n\t" < $T/s_matryoshka/cfg.json | grep -q "\"levels\":\"shared\""'
$BIN sae-train $sargs --arch matryoshka --widths 16,64 --levels own --out $T/m_own >/dev/null 2>&1
ok "--levels own trains other weights" '[ -f $T/m_own/sae_weights.safetensors ] && ! cmp -s $T/m_own/sae_weights.safetensors $T/s_matryoshka/sae_weights.safetensors && tr -d " \n\t" < $T/m_own/cfg.json | grep -q "\"levels\":\"own\""'
$BIN sae-train $sargs --levels own --out $T/mbad3 >$T/mbad3.out 2>&1; rc=$?
ok "--levels needs --arch matryoshka" '[ $rc -eq 2 ]'
# a checkpoint written before the field (its config 8 bytes shorter, and, older than the
# checksum, no trailing sum) resumes as "own"
$BIN sae-train $sargs --arch matryoshka --widths 16,64 --levels own --out $T/m_old --max-steps 21 >/dev/null 2>&1
/usr/bin/python3 - "$T/m_old/checkpoint.bin" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
del b[-8:]
n = struct.unpack_from("<I", b, 8)[0]
struct.pack_into("<I", b, 8, n - 8)
del b[64 + n - 8:64 + n]
open(sys.argv[1], "wb").write(bytes(b))
PY
$BIN sae-train $sargs --arch matryoshka --widths 16,64 --out $T/m_old --resume >$T/m_old1.out 2>&1; rc=$?
ok "an old matryoshka checkpoint refuses the new default" '[ $rc -ne 0 ] && grep -q "had --levels own (this run shared)" $T/m_old1.out'
$BIN sae-train $sargs --arch matryoshka --widths 16,64 --levels own --out $T/m_old --resume >$T/m_old2.out 2>&1
ok "an old matryoshka checkpoint resumes with --levels own, bit-identical" 'cmp -s $T/m_own/sae_weights.safetensors $T/m_old/sae_weights.safetensors'
$BIN sae-train $sargs --out $T/snorm --max-norm-ratio 1.5 >$T/snorm.out 2>&1
ok "--max-norm-ratio drops high-norm tokens" 'grep -Eq "^dropped [1-9][0-9]* training tokens" $T/snorm.out && grep -q "^eval" $T/snorm.out'
$BIN sae-train --db $T/syn.db --hook nope --out $T/x >$T/e5.out 2>&1; rc=$?
ok "unknown hook: exit 1 listing hooks" '[ $rc -eq 1 ] && grep -q "synth" $T/e5.out'

# The synthetic absorption check from the command line: synth --spec writes the generator, sae-eval
# --synth rebuilds it and prints SAEBench's metric beside the generator's exact absorption.
# abs_pair FILE: ex = "exact binary, partial", sb = "full rate, ungated fraction" from sae-eval
# --synth's output; abs_close: the exact ones real (binary > 0.1) and each within 0.05 of SAEBench's.
abs_pair() {
    ex=$(sed -n 's/.*generator (exact): absorption \([0-9.]*\) .*partial \([0-9.]*\) .*/\1 \2/p' "$1")
    sb=$(sed -n 's/.*SAEBench: full-absorption rate \([0-9.]*\) .*without its 40% gate \([0-9.]*\) .*/\1 \2/p' "$1")
}
abs_close() { echo "$ex $sb" | awk '{ exit !(NF == 4 && $1 > 0.1 && ($3 - $1) ^ 2 <= 0.0025 && ($4 - $2) ^ 2 <= 0.0025) }'; }
H="--d 256 --features 96 --active 3 --rank 0 --parents 3 --children 16 --child-p 0.05 --seed 11"
$BIN synth $H --tokens 300000 --out $T/h.npy --truth $T/ht.npy --spec $T/gen.json >$T/h.out 2>&1
ok "synth --spec writes the generator" 'grep -q "3 parents, each followed by 16 children" $T/h.out && grep -q "\"child_p\":[[:space:]]*0.05" $T/gen.json'
$BIN sae-train --npy $T/h.npy --arch topk --d-sae 96 --k 3 --batch 1024 --tokens 300000 --out $T/hsae >$T/hsae.out 2>&1
$BIN sae-eval --sae $T/hsae --synth $T/gen.json --ground-truth $T/ht.npy >$T/habs.out 2>&1; rc=$?
# the MMCS against the rebuilt generator is the one against the written truth
m1=$(sed -n 's/^ground truth.*MMCS \([0-9.]*\),.*/\1/p' $T/habs.out); m2=$(sed -n 's/^generator.*MMCS \([0-9.]*\),.*/\1/p' $T/habs.out)
ok "sae-eval --synth rebuilds the generator's directions" '[ $rc -eq 0 ] && [ -n "$m1" ] && [ "$m1" = "$m2" ]'
abs_pair $T/habs.out
# default training (normalised inputs, clipped gradients): SAEBench's full rate and ungated fraction
# report the generator's binary and partial absorption within 0.05 (docs/eval.md)
ok "absorption from the CLI within 0.05 of the generator's ($ex / $sb)" 'abs_close'
$BIN sae-train --synth-spec $T/gen.json --arch topk --d-sae 96 --k 3 --batch 1024 --tokens 300000 --out $T/hstream >$T/hstream.out 2>&1
$BIN sae-eval --sae $T/hstream --synth $T/gen.json >$T/hsabs.out 2>&1; rc=$?
abs_pair $T/hsabs.out
ok "sae-train --synth-spec streams the hierarchy; absorption within 0.05 ($ex / $sb)" '[ $rc -eq 0 ] && grep -q "d_in 256 d_sae 96" $T/hstream.out && abs_close'
# Matryoshka with the parents in its first group absorbs almost nothing here, and SAEBench's
# fraction says so too: below the streamed TopK's (docs/eval.md, "Does it order the architectures right?")
$BIN sae-train --synth-spec $T/gen.json --arch matryoshka --widths 6,96 --d-sae 96 --k 3 --batch 1024 --tokens 300000 --out $T/hmat >/dev/null 2>&1
$BIN sae-eval --sae $T/hmat --synth $T/gen.json >$T/hmabs.out 2>&1
gt=$(sed -n 's/.*absorption fraction \([0-9.]*\),.*/\1/p' $T/hsabs.out); gm=$(sed -n 's/.*absorption fraction \([0-9.]*\),.*/\1/p' $T/hmabs.out)
pm=$(sed -n 's/.*generator (exact): absorption [0-9.]* .*partial \([0-9.]*\) .*/\1/p' $T/hmabs.out)
ok "matryoshka absorbs less than topk, by the generator ($pm) and by SAEBench ($gm < $gt)" 'echo "$pm $gm $gt" | awk "{ exit !(NF == 3 && \$1 < 0.1 && \$2 + 0.2 < \$3) }"'
printf '{"d": 16, "features": 8, "colour": 1}' > $T/bad0.json
$BIN sae-train --synth-spec $T/bad0.json --out $T/hbad >/dev/null 2>$T/bad11.err; rc=$?
ok "sae-train --synth-spec refuses a bad spec naming it" '[ $rc -eq 1 ] && [ "$(wc -l < $T/bad11.err)" = 1 ] && grep -q "bad0.json: unknown key" $T/bad11.err && [ ! -e $T/hbad ]'
$BIN sae-train --synth-spec $T/gen.json --npy $T/h.npy --out $T/hbad >/dev/null 2>$T/bad12.err; rc=$?
ok "--synth-spec with --npy is a usage error" '[ $rc -eq 2 ] && grep -q "exactly one of" $T/bad12.err'
printf '{"d": 256, "features": 96, "parents": 3, "children": 16, "colour": 1}' > $T/bad1.json
printf '{"d": 25.5}' > $T/bad2.json
printf '{"d": 256, "features": 96, "parents": 7, "children": 16}' > $T/bad3.json
printf '{"d": 100000, "features": 100000}' > $T/bad4.json
printf '[1, 2]' > $T/bad5.json
printf '{"seed": 1e300}' > $T/bad6.json
for i in 1 2 3 4 5 6; do
    $BIN sae-eval --sae $T/hsae --synth $T/bad$i.json >$T/bad$i.out 2>$T/bad$i.err; rc=$?
    ok "sae-eval refuses bad spec $i with one line naming it" '[ $rc -eq 1 ] && [ "$(wc -l < $T/bad$i.err)" = 1 ] && grep -q "bad$i.json: " $T/bad$i.err'
done
ok "the spec errors say what is wrong" 'grep -q "unknown key \"colour\"" $T/bad1.err && grep -q "\"d\" must be a whole number" $T/bad2.err && grep -q "7 parents with 16 children" $T/bad3.err && grep -q "GiB for the generator, over the" $T/bad4.err && grep -q "\"seed\" must be a whole number 0..2^53" $T/bad6.err'
# the command line's generator has the spec's bound: 5M features of d 1 asked for 20 GB (the
# copula's 1024-row chunk) for a 4 KB output, and a rank above the features 800 MB (an audit)
$BIN synth --features 5000000 --d 1 --active 1 --tokens 10 --out $T/huge.npy --truth $T/huget.npy >/dev/null 2>$T/bad9.err; rc=$?
ok "synth refuses a generator past its memory bound before allocating it" '[ $rc -eq 1 ] && [ "$(wc -l < $T/bad9.err)" = 1 ] && grep -q "5000000 features of d 1 (rank 8) need [0-9.]* GiB for the generator" $T/bad9.err && [ ! -e $T/huge.npy ]'
$BIN synth --features 4 --d 4 --active 1 --rank 5 --tokens 10 --out $T/huge.npy --truth $T/huget.npy >/dev/null 2>$T/bad10.err; rc=$?
ok "synth refuses a rank above the features" '[ $rc -eq 1 ] && grep -q "rank 5 above the 4 features" $T/bad10.err'
$BIN sae-eval --sae $T/hsae --synth $T >/dev/null 2>$T/bad7.err; rc=$?
ok "sae-eval refuses a directory as spec" '[ $rc -eq 1 ] && grep -q "not a regular file" $T/bad7.err'
$BIN synth --d 64 --features 96 --tokens 100 --seed 1 --out $T/h64.npy --truth $T/h64t.npy --spec $T/g64.json >/dev/null 2>&1
$BIN sae-eval --sae $T/hsae --synth $T/g64.json >/dev/null 2>$T/bad8.err; rc=$?
ok "sae-eval --synth refuses another width" '[ $rc -eq 1 ] && grep -q "g64.json: the generator makes 64 values, the SAE reads 256" $T/bad8.err'
# a transcoder of the generator's width was refused as "the generator makes 64 values, the SAE
# is a transcoder writing 64": the reason is that it is a transcoder, named by its directory (the
# first fix put the generator's file before "the SAE is a transcoder")
$BIN sae-train --npy $T/h64.npy --npy-out $T/h64.npy --arch transcoder --d-sae 16 --k 2 --tokens 128 --batch 64 --out $T/tc64 >/dev/null 2>&1
$BIN sae-eval --sae $T/tc64 --synth $T/g64.json >/dev/null 2>$T/bad8t.err; rc=$?
ok "sae-eval --synth refuses a transcoder saying so: $(cat $T/bad8t.err)" '[ $rc -eq 1 ] && grep -q "sae-eval: $T/tc64 is a transcoder (d_in 64 -> d_out 64): the synthetic check of $T/g64.json needs an SAE of the generator" $T/bad8t.err'
$BIN synth --d 8 --features 16 --tokens 10 --parents 2 --out $T/p.npy --truth $T/pt.npy >/dev/null 2>$T/bad9.err; rc=$?
ok "synth --parents without --children is a usage error" '[ $rc -eq 2 ] && grep -q "both --parents and --children" $T/bad9.err'
$BIN synth --d 8 --features 16 --tokens 10 --seed -1 --spec $T/neg.json --out $T/p.npy --truth $T/pt.npy >/dev/null 2>$T/bad10.err; rc=$?
ok "synth --spec refuses a seed JSON cannot keep" '[ $rc -eq 2 ] && [ ! -e $T/neg.json ]'
$BIN sae-train --npy $T/h64.npy --arch topk --d-sae 32 --k 2 --batch 50 --tokens 100 --out $T/h64sae >/dev/null 2>&1
$BIN sae-eval --sae $T/h64sae --synth $T/g64.json >$T/nohier.out 2>&1; rc=$?
ok "sae-eval --synth without a hierarchy reports MMCS and says so" '[ $rc -eq 0 ] && grep -q "^generator.*MMCS" $T/nohier.out && grep -q "no hierarchy" $T/nohier.out'

# --tokens not a multiple of --batch: cfg.json records the tokens trained, and the summary says
# so; a dead window as long as the run is named (AuxK never acted); no held-out rows: null
# metrics in cfg.json, not an mse of 0 (an audit of odd sizes)
$BIN sae-train --npy $T/acts.npy --d-sae 64 --k 4 --tokens 12000 --batch 5000 --out $T/part5 >$T/part5.out 2>&1
ok "a partial last batch: the tokens trained in cfg.json and a note" '/usr/bin/python3 -c "import json,sys; sys.exit(json.load(open(\"$T/part5/cfg.json\"))[\"training\"][\"tokens\"] != 10000)" && grep -q "^note: --tokens 12000 is not a multiple of --batch 5000: 2 steps, 10000 tokens trained" $T/part5.out'
ok "a dead window as long as the run is named" 'grep -q "^note: the dead window (100000 tokens) is longer than the run lets a latent go unfired (5000 tokens" $T/part5.out'
# more --tokens than the data holds: the data repeats (a new order each pass), and the summary says
# how often (an audit: 10M tokens from a 1.6M-token store went round it six times unsaid)
$BIN sae-train --npy $T/acts.npy --d-sae 64 --k 4 --tokens 50000 --batch 5000 --val-frac 0 --out $T/rep >$T/rep.out 2>&1
ok "more tokens than the data: the passes are named" 'grep -q "^note: 50000 tokens trained are 2.50 passes over the training data.s 20000 tokens" $T/rep.out && ! grep -q "passes over" $T/part5.out'
$BIN sae-train --npy $T/acts.npy --d-sae 64 --k 4 --tokens 4096 --batch 512 --dead-window 3800 --out $T/dw38 >$T/dw38.out 2>&1
ok "a dead window past the last step's reach is named (it is shorter than the run)" 'grep -q "^note: the dead window (3800 tokens) is longer than the run lets a latent go unfired (3584 tokens" $T/dw38.out'
$BIN sae-train --npy $T/acts.npy --d-sae 64 --k 4 --tokens 1024 --batch 512 --val-frac 0 --out $T/noval >/dev/null 2>&1
ok "no held-out rows: null metrics in cfg.json" '/usr/bin/python3 -c "import json,sys; t=json.load(open(\"$T/noval/cfg.json\"))[\"training\"]; sys.exit(not (t[\"eval_tokens\"] == 0 and t[\"mse\"] is None and t[\"explained_variance\"] is None))"'

# one sae-train per output directory: of two started together into one new directory one
# trains and the other is refused naming the lock (both exited 0, and the directory held one
# run's weights beside the other's training_log.csv: an audit, 7 of 18 tries)
solo_ok=0
for i in 1 2 3; do
    rm -rf $T/both
    $BIN sae-train --npy $T/acts.npy --d-sae 64 --k 4 --tokens 20480 --batch 512 --out $T/both >/dev/null 2>$T/both1.err & p=$!
    $BIN sae-train --npy $T/acts.npy --d-sae 64 --k 8 --tokens 20480 --batch 512 --seed 7 --out $T/both >/dev/null 2>$T/both2.err; r2=$?
    wait $p; r1=$?
    if [ $r1 -eq 0 ]; then win=4; lose=$T/both2.err; rl=$r2; else win=8; lose=$T/both1.err; rl=$r1; fi
    [ $((r1 + r2)) -eq 1 ] && [ $rl -eq 1 ] && grep -Eq "another sae-train is writing into this directory|already holds a trained SAE \(sae_weights" $lose &&
        /usr/bin/python3 - $T/both $win <<'PY' && solo_ok=$((solo_ok + 1))
import csv, json, sys
d, k = sys.argv[1], int(sys.argv[2])
rows = list(csv.DictReader(open(d + "/training_log.csv")))
sys.exit(0 if json.load(open(d + "/cfg.json"))["k"] == k and rows and abs(float(rows[-1]["l0"]) - k) < 1e-9 else 1)
PY
done
ok "two sae-train into one directory at once: one trains, one is refused, the files are one run's (3 of 3)" '[ $solo_ok -eq 3 ]'
# report refuses an SAE directory while a sae-train holds its lock (the training log is being
# rewritten and new weights registered: an audit drew the old analysis with the new curves)
flock -o $T/dfull/.sae-train.lock sleep 30 & fp=$!  # -o: sleep does not hold it after kill
for i in $(seq 1 100); do flock -n -s $T/dfull/.sae-train.lock true 2>/dev/null || break; sleep 0.05; done
$BIN report --db $T/acts_an.db --sae $T/dfull --top 2 --no-global --out $T/rlock >/dev/null 2>$T/rlock.err; rc=$?
kill $fp 2>/dev/null; wait $fp 2>/dev/null
ok "report refuses a directory a sae-train is writing into" '[ $rc -eq 1 ] && grep -q "dfull: sae-train is writing into this directory (it holds .sae-train.lock)" $T/rlock.err && [ ! -e $T/rlock ]'
$BIN report --db $T/acts_an.db --sae $T/dfull --top 2 --out $T/rlock >/dev/null 2>$T/rlock.err; rc=$?
ok "and draws it once the lock is free" '[ $rc -eq 0 ] && [ -s $T/rlock/index.html ]'

echo "test_sae_cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
