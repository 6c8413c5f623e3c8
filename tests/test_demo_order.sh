#!/usr/bin/env bash
# test_demo_order.sh - `make demo` takes one file of a step as the step's product (demo.mk:
# corpus/brown.jsonl, tok/vocab.bpe, else a stamp touched after the command): the command writes it last, so a SIGKILL of the whole job
# (make too, which then deletes nothing) right after that file's rename leaves a complete step,
# and a kill right after any earlier rename leaves no product file that would pass for finished.
# An LD_PRELOAD shim SIGKILLs the process just after (or, KILL_BEFORE, just before) a rename to
# the named file.
# Usage: tests/test_demo_order.sh   (SAELITE_BIN=path overrides ./saelite)
set -u
ROOT=$(pwd)
BIN=${SAELITE_BIN:-./saelite}
[[ "$BIN" == /* ]] || BIN="$ROOT/$BIN"
W=$(mktemp -d "${TMPDIR:-/tmp}/saelite-demo-order.XXXXXX")
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 1
pass=0; fail=0
ok()  { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
cat > shim.c <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int rename(const char *a, const char *b)
{
    static int (*real)(const char *, const char *);
    if (!real) real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    const char *s = getenv("KILL_AFTER_RENAME");
    size_t n = strlen(b), m = s ? strlen(s) : 0;
    int hit = m && n >= m && !strcmp(b + n - m, s);
    if (hit && getenv("KILL_BEFORE")) kill(getpid(), SIGKILL); /* KILL_BEFORE: leave the temp */
    int r = real(a, b);
    if (!r && hit) kill(getpid(), SIGKILL);
    return r;
}
C
if ! cc -shared -fPIC -o shim.so shim.c -ldl 2>/dev/null; then
    echo "skip: no C compiler for the shim"; echo "test_demo_order: 0 passed, 0 failed"; exit 0
fi
# an ASan build (make test-asan) refuses a preload ahead of its runtime unless told
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
if ! LD_PRELOAD="$W/shim.so" "$BIN" help > /dev/null 2>&1; then
    echo "skip: $BIN does not run with an LD_PRELOAD shim"; echo "test_demo_order: 0 passed, 0 failed"; exit 0
fi
# killed_after NAME CMD...: run CMD with a SIGKILL right after its rename to NAME
killed_after() { local n=$1; shift; (LD_PRELOAD="$W/shim.so" KILL_AFTER_RENAME="$n" "$@" > /dev/null 2>&1; true) 2> /dev/null; }

# bpe-train: encoder.json, then vocab.bpe (the product)
for n in encoder.json vocab.bpe; do
    rm -rf tok
    killed_after "/$n" "$BIN" bpe-train --vocab 270 "$ROOT/README.md" -o tok
    if [ ! -e tok/vocab.bpe ] || [ -s tok/encoder.json ]; then ok "bpe-train killed after $n: no vocab.bpe without encoder.json"
    else bad "bpe-train killed after $n: tok/vocab.bpe is there, tok/encoder.json is not"; fi
done

# corpus brown: brown.txt, brown.tags.jsonl, then brown.jsonl (the product)
mkdir -p brown; printf 'ca01 news\n' > brown/cats.txt
printf '\n\n\tThe/at cat/nn sat/vbd ./.\n' > brown/ca01
for n in brown.txt brown.tags.jsonl brown.jsonl; do
    rm -rf c
    killed_after "/$n" "$BIN" corpus brown brown -o c
    if [ ! -e c/brown.jsonl ] || { [ -s c/brown.tags.jsonl ] && [ -s c/brown.txt ]; }; then
        ok "corpus killed after $n: no brown.jsonl without brown.tags.jsonl and brown.txt"
    else bad "corpus killed after $n: c/brown.jsonl is there without its companions: $(ls c | tr '\n' ' ')"; fi
done
# a kill inside a write (just before its rename) leaves NAME.tmp.PID: the rerun removes it
rm -rf tok c
(LD_PRELOAD="$W/shim.so" KILL_BEFORE=1 KILL_AFTER_RENAME=/encoder.json "$BIN" bpe-train --vocab 270 "$ROOT/README.md" -o tok > /dev/null 2>&1; true) 2> /dev/null
(LD_PRELOAD="$W/shim.so" KILL_BEFORE=1 KILL_AFTER_RENAME=/brown.tags.jsonl "$BIN" corpus brown brown -o c > /dev/null 2>&1; true) 2> /dev/null
had=$(ls tok c | grep -c '\.tmp\.')
"$BIN" bpe-train --vocab 270 "$ROOT/README.md" -o tok > /dev/null 2>&1
"$BIN" corpus brown brown -o c > /dev/null 2>&1
left=$(ls tok c | grep '\.tmp\.' | tr '\n' ' ')
if [ "$had" = 2 ] && [ -z "$left" ]; then ok "bpe-train, corpus: a killed run's temp files go on the rerun"
else bad "bpe-train, corpus: temps of a killed run (made $had of 2) left after the rerun: $left"; fi

# demo.mk's steps run for real with a stand-in saelite that logs its arguments (and writes the
# report's index.html, the product of that step)
printf '#!/bin/sh\necho "$*" >> "%s/calls"\n[ "$1" != report ] || { for a; do o=$a; done; mkdir -p "$o"; touch "$o/index.html"; }\n' "$W" > fake
chmod +x fake
printf 'include %s/demo.mk\ndata saelite: ; @:\n' "$ROOT" > wrap.mk
d="$W/demo"
mk() { : > calls; (cd "$ROOT" && make --no-print-directory -f "$W/wrap.mk" DEMO="$d" SAELITE="$W/fake" "$@" "$d/report/index.html") > mk.out 2>&1; }
called() { grep -c "^$1 " calls; }

# sae-train writes sae_weights.safetensors before cfg.json and its database row: demo.mk takes a
# stamp (.sae.done, touched after sae-train succeeded) as the step's product, so weights left by a
# kill of the whole job make the next `make demo` run sae-train (--resume) again, not analyze
mkdir -p "$d/corpus" "$d/tok" "$d/sae"
t=$(( $(date +%s) - 100 ))
for f in corpus/brown.jsonl tok/vocab.bpe .model.done .extract.done sae/checkpoint.bin sae/sae_weights.safetensors; do
    t=$((t + 10)); touch -d "@$t" "$d/$f" # each step's product newer than the one before
done
mk
if grep -q "^sae-train .* --resume --out $d/sae$" calls && [ "$(called analyze)" = 1 ]; then ok "demo.mk: sae weights without the .sae.done stamp: sae-train --resume runs again"
else bad "demo.mk: sae weights without the .sae.done stamp pass for a finished sae-train: $(cat calls mk.out | head -c 300)"; fi
# sae-train checkpoints only at the end unless told: the demo asks for periodic checkpoints, so a
# SIGKILL mid-step (nothing caught) loses at most SAE_CKPT steps
if grep -q -- "^sae-train .*--checkpoint-every [1-9]" calls; then ok "demo.mk: sae-train checkpoints periodically"
else bad "demo.mk: sae-train has no --checkpoint-every: a SIGKILL loses the whole step"; fi
# settings (demo.mk's variables) a finished demo was not made with: the SAE's retrain it from the
# start (it did nothing and said nothing), the report's redraw it, the model's are refused
mk
[ ! -s calls ] && ok "demo.mk: a finished demo, the same settings: nothing runs" || bad "demo.mk: a finished demo ran $(cat calls mk.out | head -c 300)"
# a dry run of a finished demo lists nothing to do (a settings file, always remade, passed for
# rewritten and `make -n` listed the whole pipeline, train-lm first); one with other settings
# says what would run again and changes nothing
mk -n
if [ ! -s calls ] && ! grep -q "^$W/fake " mk.out; then ok "demo.mk: make -n on a finished demo: nothing listed"
else bad "demo.mk: make -n on a finished demo lists: $(grep -o 'fake [a-z-]*' mk.out | tr '\n' ' ')"; fi
mk -n SAE_K=64
if [ ! -s calls ] && [ -e "$d/sae/checkpoint.bin" ] && grep -q "^SAE_K=32 " "$d/.sae.settings" && grep -q "asks for SAE_K=64 .*: sae-train (from the start) then analyze and report would run again" mk.out; then
    ok "demo.mk: make -n SAE_K=64: says so, removes and writes nothing"
else bad "demo.mk: make -n SAE_K=64: $(cat calls; ls "$d/sae"; cat "$d/.sae.settings"; tail -n 2 mk.out)"; fi
mk SAE_K=64
if grep -q "^sae-train .*--k 64 .*--force --out $d/sae$" calls && [ "$(called analyze)$(called report)" = 11 ] && [ ! -e "$d/sae/checkpoint.bin" ]; then
    ok "demo.mk: SAE_K changed: sae-train starts over (--force, the old checkpoint gone), analyze and report follow"
else bad "demo.mk: SAE_K changed: $(cat calls mk.out | head -c 400)"; fi
mk SAE_K=64
[ ! -s calls ] && ok "demo.mk: SAE_K=64 again: nothing runs" || bad "demo.mk: SAE_K=64 again ran $(cat calls mk.out | head -c 300)"
mk SAE_K=64 REPORT_TOP=5
[ "$(wc -l < calls)" = 1 ] && grep -q "^report .*--top 5 " calls && ok "demo.mk: REPORT_TOP changed: the report alone is drawn again" ||
    bad "demo.mk: REPORT_TOP changed: $(cat calls mk.out | head -c 300)"
mk SAE_K=64 REPORT_TOP=5 LM_STEPS=10; rc=$?
[ $rc -ne 0 ] && [ ! -s calls ] && grep -q "^make demo: $d was made with LM_STEPS=1500 .* and this make asks for LM_STEPS=10 .*: give a new DEMO=folder or remove $d$" mk.out &&
    ok "demo.mk: LM_STEPS changed: refused, nothing run: $(head -n 1 mk.out)" || bad "demo.mk: LM_STEPS changed: exit $rc: $(cat calls mk.out | head -c 300)"
# under make -j the SAE's and the report's settings wait for the model's check: a refused LM_*
# had removed the SAE's checkpoint and recorded the new SAE_* (the next plain make trained the
# finished SAE again from the start)
touch "$d/sae/checkpoint.bin"
mk -j2 SAE_K=16 REPORT_TOP=7 LM_STEPS=10; rc=$?
if [ $rc -ne 0 ] && [ ! -s calls ] && [ -e "$d/sae/checkpoint.bin" ] && grep -q "^SAE_K=64 " "$d/.sae.settings" && [ "$(cat "$d/.report.settings")" = REPORT_TOP=5 ]; then
    ok "demo.mk: make -j2 with LM_STEPS refused: the SAE's checkpoint and settings untouched"
else bad "demo.mk: make -j2 with LM_STEPS refused: exit $rc, $(ls "$d/sae" | tr '\n' ' '), $(cat "$d/.sae.settings" "$d/.report.settings" | tr '\n' ' ')"; fi
mk SAE_K=64 REPORT_TOP=5
[ ! -s calls ] && ok "demo.mk: then SAE_K=64 REPORT_TOP=5 again: nothing runs" || bad "demo.mk: after a refused make -j2, SAE_K=64 REPORT_TOP=5 ran $(cat calls | head -c 300)"
# a demo finished before the settings files were kept was made with the defaults: the first make
# with other settings acts on them (it took the settings given then for the demo's own)
rm -f "$d"/.*.settings; mk
[ ! -s calls ] && ok "demo.mk: a demo from before the settings files, the defaults: nothing runs" || bad "demo.mk: a demo from before the settings files ran $(cat calls mk.out | head -c 300)"
rm -f "$d"/.*.settings; mk SAE_K=16
grep -q "^sae-train .*--k 16 .*--force --out $d/sae$" calls && ok "demo.mk: a demo from before the settings files, SAE_K=16: sae-train runs" ||
    bad "demo.mk: a demo from before the settings files, SAE_K=16: $(cat calls mk.out | head -c 300)"
# a settings file a full disk left empty (printf > file truncated it, the write failed, the make
# went on) read as "made with" nothing: every later make refused LM_* ("was made with  and ...")
# and trained the SAE again. An empty file counts as none, and a failed write fails the make,
# leaving no file (on a full tmpfs where one can be mounted: root, or a namespace of its own)
for f in "$d"/.*.settings; do : > "$f"; done; mk; rc=$?
[ $rc -eq 0 ] && [ ! -s calls ] && grep -q "^SAE_K=32 " "$d/.sae.settings" && ok "demo.mk: empty settings files (a full disk's): taken as the defaults, nothing runs" ||
    bad "demo.mk: empty settings files: exit $rc: $(cat calls mk.out | head -c 300)"
full_disk() { # as root (or the namespace's): a finished demo on a full tmpfs, its settings files gone
    mkdir -p "$W/fs" && mount -t tmpfs -o size=64k tmpfs "$W/fs" || return 2
    cp -a "$d" "$W/fs/demo" && rm -f "$W/fs/demo"/.*.settings && { dd if=/dev/zero of="$W/fs/fill" bs=4k 2> /dev/null; true; }
    d="$W/fs/demo" mk; rc=$?
    l=$(ls -A "$W/fs/demo" | grep -c settings); rm -f "$W/fs/fill"
    d="$W/fs/demo" mk; rc2=$?; c=$(wc -l < calls); s=$(cat "$W/fs/demo/.model.settings")
    umount "$W/fs"
    echo "$rc $l $rc2 $c $s"
}
if [ "$(id -u)" = 0 ]; then r=$(full_disk 2> /dev/null)
else r=$(unshare -rm bash -c "$(declare -f full_disk mk); W='$W' ROOT='$ROOT' d='$d'; full_disk" 2> /dev/null); fi
if [ -z "$r" ]; then echo "skip: demo.mk's settings on a full disk (cannot mount a tmpfs here)"
elif [ "$r" = "2 0 0 0 LM_STEPS=1500 LM_BATCH=16 HOOK=blocks.0.mlp.hook_post" ]; then
    ok "demo.mk: settings files on a full disk: the make fails, no file left; with room, nothing runs"
else bad "demo.mk: settings files on a full disk (exit, files left, exit with room, commands run, the model's): $r"; fi
# ... and one stopped in sae-train before them left the defaults' checkpoint: SAE_K=16 starts
# over (it resumed that checkpoint under --k 16, which sae-train refuses)
rm -f "$d"/.*.settings "$d/.sae.done" "$d/.analyze.done"; touch "$d/sae/checkpoint.bin"; mk SAE_K=16
grep -q "^sae-train .*--k 16 .*--force --out $d/sae$" calls && [ ! -e "$d/sae/checkpoint.bin" ] &&
    ok "demo.mk: stopped in sae-train before the settings files, SAE_K=16: sae-train starts over" ||
    bad "demo.mk: stopped in sae-train before the settings files, SAE_K=16: $(cat calls mk.out | head -c 300)"
# other LM_* where train-lm has written nothing (a make stopped in the corpus or the tokenizer):
# nothing was made with the old ones, so the new ones go on (it was refused as "made with")
d0=$d; d="$W/demo2"; mkdir -p "$d/corpus" "$d/tok"; touch "$d/corpus/brown.jsonl"; touch "$d/tok/vocab.bpe"
printf 'LM_STEPS=10 LM_BATCH=16 HOOK=blocks.0.mlp.hook_post\n' > "$d/.model.settings"; mk; rc=$?
[ $rc -eq 0 ] && grep -q "^train-lm .*--steps 1500 " calls && grep -q "^LM_STEPS=1500 " "$d/.model.settings" &&
    ok "demo.mk: other LM_* before train-lm wrote anything: taken" || bad "demo.mk: other LM_* before train-lm wrote anything: exit $rc: $(cat calls mk.out | head -c 300)"
d=$d0
# `make demo` runs tools/fetch-data.sh every time: with everything fetched it must not need to
# write in data/ (a shared read-only copy failed every make demo, a finished one too)
ro="$W/rodata"
while read -r sum tgz; do
    n=${tgz%-*}; mkdir -p "$ro/$n"; echo "$sum  $tgz" > "$ro/$n/.fetched"
done < "$ROOT/tools/data.sha512"
chmod -R a-w "$ro"; chmod a+rx "$W"
as_other=()
if [ "$(id -u)" = 0 ]; then command -v setpriv > /dev/null && as_other=(setpriv --reuid=65534 --regid=65534 --clear-groups); fi
if [ "$(id -u)" = 0 ] && [ ${#as_other[@]} = 0 ]; then echo "skip: fetch-data on a read-only data/ (root, no setpriv)"
elif SAELITE_DATA="$ro" "${as_other[@]}" bash "$ROOT/tools/fetch-data.sh" > "$W/fd.out" 2>&1; then
    ok "fetch-data: a complete read-only data/ is fine"
else bad "fetch-data: a complete read-only data/ fails: $(tail -n 1 "$W/fd.out")"; fi
chmod -R u+w "$ro"
echo "test_demo_order: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
