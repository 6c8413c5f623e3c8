#!/usr/bin/env bash
# Run each libFuzzer target build/fuzz/fuzz_<t> for N seconds at low priority (the CPU is shared).
# Usage: fuzz/run.sh SECONDS TARGET...   (called by `make fuzz`)
# The working corpus is build/fuzz/corpus/<t> (grows between runs), seeded from the committed
# fuzz/corpus/<t>; crashing inputs go to build/fuzz/crashes/<t>/. Exits non-zero if any target
# found a crash, after running all of them. Extra libFuzzer flags: FUZZ_FLAGS="-jobs=2 ...".
set -u
secs=${1:?seconds}; shift
found=0
for t in "$@"; do
    bin=build/fuzz/fuzz_$t
    work=build/fuzz/corpus/$t; crashes=build/fuzz/crashes/$t
    mkdir -p "$work" "$crashes" "fuzz/corpus/$t"
    dict=(); [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
    echo "fuzz: $t for ${secs}s"
    # detect_leaks: a leak on an error path is a finding too. malloc_limit_mb: a reader that
    # believes a header and allocates gigabytes before checking the file size is a finding.
    # Known open findings (listed in docs/reliability.md, replayed from fuzz/open/) are masked so a
    # long run finds new ones: UBSan suppressions in fuzz/open.supp, invariants in FUZZ_IGNORE.
    supp=""; [ -s fuzz/open.supp ] && supp=":suppressions=fuzz/open.supp"
    FUZZ_IGNORE=${FUZZ_IGNORE-msg-newline} \
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1$supp \
    nice -n 19 "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -print_final_stats=1 -artifact_prefix="$crashes/" "${dict[@]}" ${FUZZ_FLAGS:-} \
        "$work" "fuzz/corpus/$t" > "build/fuzz/$t.log" 2>&1
    rc=$?
    grep -E '^(#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "build/fuzz/$t.log" | tr '\n' ' '
    echo
    if [ $rc -ne 0 ]; then
        found=1
        echo "fuzz: $t FOUND A PROBLEM (exit $rc); see build/fuzz/$t.log and $crashes/"
        grep -E 'ERROR|runtime error|invariant|out-of-memory|SUMMARY' "build/fuzz/$t.log" | head -n 5
    fi
done
[ $found -eq 0 ] && echo "fuzz: no findings" || { echo "fuzz: findings (above)"; exit 1; }
