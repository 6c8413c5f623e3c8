#!/usr/bin/env bash
# Run each libFuzzer target build/fuzz/fuzz_<t> for N seconds at low priority (the CPU is shared).
# Usage: fuzz/run.sh SECONDS TARGET...   (called by `make fuzz`)
# The working corpus is build/fuzz/corpus/<t> (grows between runs), seeded from the committed
# fuzz/corpus/<t>; problem inputs go to build/fuzz/crashes/<t>/ and the log to build/fuzz/<t>.log.
# Exits non-zero if any target found something, after running all of them.
# Extra libFuzzer flags: fuzz/<t>.flags (one line) or FUZZ_FLAGS="...".
set -u
secs=${1:?seconds}; shift
found=0
# Known open findings (listed in docs/reliability.md, inputs replayed from fuzz/open/) are masked
# so a long run goes on to find new ones: UBSan suppressions in fuzz/open.supp, fuzz-target
# invariants named in FUZZ_IGNORE. detect_leaks: a leak on an error path is a finding too.
supp=""; [ -s fuzz/open.supp ] && supp=":suppressions=fuzz/open.supp"
export FUZZ_IGNORE=${FUZZ_IGNORE-}
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1$supp
for t in "$@"; do
    bin=build/fuzz/fuzz_$t
    work=build/fuzz/corpus/$t; crashes=build/fuzz/crashes/$t
    mkdir -p "$work" "$crashes" "fuzz/corpus/$t"
    dict=(); [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
    extra=(); [ -f "fuzz/$t.flags" ] && read -r -a extra < "fuzz/$t.flags"
    echo "fuzz: $t for ${secs}s"
    before=$(ls "$crashes" | wc -l)
    # -fork=1 with -ignore_*: a finding is saved and the run goes on (one child at a time).
    # A target with a slow start (the GPT-2 vocabulary) says -fork=0 in fuzz/<t>.flags.
    # malloc_limit_mb: a reader that believes a header and allocates gigabytes is a finding.
    nice -n 19 "$bin" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
        -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -artifact_prefix="$crashes/" "${dict[@]}" "${extra[@]}" ${FUZZ_FLAGS:-} \
        "$work" "fuzz/corpus/$t" > "build/fuzz/$t.log" 2>&1
    rc=$?
    grep -E '^#[0-9]+: cov:' "build/fuzz/$t.log" | tail -n 1
    new=$(( $(ls "$crashes" | wc -l) - before ))
    if [ $rc -ne 0 ] || [ $new -gt 0 ]; then
        found=1
        echo "fuzz: $t: $new new problem input(s) in $crashes/ (exit $rc); log build/fuzz/$t.log"
        grep -hoE 'ERROR: [A-Za-z]+: [a-z-]+|runtime error: .{0,60}|invariant broken.{0,80}' "build/fuzz/$t.log" |
            sort | uniq -c | head -n 8
    fi
done
# Inputs that crashed a fork-mode child leave its scratch dir behind (atexit never ran).
for d in /dev/shm/saelite-fuzz-* /tmp/saelite-fuzz-*; do
    [ -d "$d" ] && ! kill -0 "${d##*-}" 2> /dev/null && rm -rf "$d"
done
if [ $found -eq 0 ]; then echo "fuzz: no findings"; else echo "fuzz: findings (above)"; exit 1; fi
