#!/usr/bin/env bash
# Run every test binary (and tests/*.sh scripts) given as arguments; sum their
# "name: N passed, N failed[, N skipped]" lines; a crash or a missing tally counts as a failure.
# Prints "total: N passed, N failed[, N skipped]" last and exits non-zero on any failure.
# Tests run SAELITE_TEST_JOBS at a time (default: the cores, at most 4; 1 runs them one by one, in
# the order given). Each test is a process of its own with its own temporary directory, and most of
# the suite waits on processes it starts (python3, sqlite3, mpirun), so two at a time on 2 cores
# took make test from 8 min 16 s to 5 min 56 s on the Zen 5 VM (docs/reliability.md, "Round eighteen"). A test's
# line appears when it ends.
set -u
# Tests read the commands' stderr: keep progress lines out of it unless asked for
# (test_common checks the progress modes itself).
export SAELITE_PROGRESS="${SAELITE_PROGRESS-0}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/saelite-tests.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# The tests' python3 is Debian's, the interpreter tools/deps.sh installs for (python3-torch): where
# a version manager's shim comes first on PATH (pyenv on the Zen 5 VM: 0.37 s a call against
# /usr/bin/python3's 0.04), test_serve alone took 177 s instead of 79 (it runs python3 per check).
if [ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ]; then
    mkdir "$tmp/py" && ln -s /usr/bin/python3 "$tmp/py/python3" && export PATH="$tmp/py:$PATH"
fi
jobs=${SAELITE_TEST_JOBS:-$(nproc 2> /dev/null || echo 1)}
[[ "$jobs" =~ ^[0-9]+$ ]] && [ "$jobs" -ge 1 ] || { echo "SAELITE_TEST_JOBS must be a positive number, got '$jobs'"; exit 2; }
[ -n "${SAELITE_TEST_JOBS:-}" ] || [ "$jobs" -le 4 ] || jobs=4
# The longest tests first (test_crash_resume: 579 s of an 18-minute ASan run two at a time), so
# that the last one to start is a short one.
order=()
if [ "$jobs" -gt 1 ]; then
    for slow in test_crash_resume.sh test_mpi.sh test_serve.sh test_eval.sh test_badinput.sh test_sae; do
        for t in "$@"; do [ "$(basename "$t")" = "$slow" ] && order+=("$t"); done
    done
fi
for t in "$@"; do
    case " ${order[*]-} " in *" $t "*) ;; *) order+=("$t") ;; esac
done
# run_one I TEST: the test's output in $tmp/I.out, its exit status and seconds in $tmp/I.rc
run_one() {
    local start rc secs
    start=$(date +%s.%N)
    if [[ "$2" == *.sh ]]; then bash "$2" > "$tmp/$1.out" 2>&1; rc=$?
    else "$2" > "$tmp/$1.out" 2>&1; rc=$?; fi
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    echo "$rc $secs" > "$tmp/$1.rc"
}
pass=0; fail=0; skip=0
# report I TEST: add the finished test's tally and print its line
report() {
    local name out rc secs line p f s
    name=$(basename "$2")
    out=$(cat "$tmp/$1.out")
    read -r rc secs < "$tmp/$1.rc"
    line=$(printf '%s\n' "$out" | grep -E '^[A-Za-z0-9_.-]+: [0-9]+ passed, [0-9]+ failed' | tail -n 1)
    if [ -z "$line" ]; then
        printf '%s\n' "$out" | tail -n 30
        echo "$name: no tally (exit $rc) after ${secs}s"
        fail=$((fail + 1)); return
    fi
    p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
    s=0; [[ "$line" == *skipped* ]] && s=$(sed -E 's/.* ([0-9]+) skipped.*/\1/' <<<"$line")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    if [ "$f" -ne 0 ]; then printf '%s\n' "$out" | grep -E 'FAIL|error|Error' | head -n 40; fi
    echo "$line  (${secs}s)"
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
}
# wait -n -p (which job ended) is bash 5.1's: an older bash runs the tests one by one
if [ "${BASH_VERSINFO[0]}" -lt 5 ] || { [ "${BASH_VERSINFO[0]}" -eq 5 ] && [ "${BASH_VERSINFO[1]}" -lt 1 ]; }; then
    jobs=1
fi
declare -A running=()   # pid -> index into order
i=0; n=${#order[@]}
while [ "$jobs" -eq 1 ] && [ "$i" -lt "$n" ]; do
    run_one "$i" "${order[$i]}"
    report "$i" "${order[$i]}"
    i=$((i + 1))
done
while [ "$i" -lt "$n" ] || [ "${#running[@]}" -gt 0 ]; do
    if [ "$i" -lt "$n" ] && [ "${#running[@]}" -lt "$jobs" ]; then
        run_one "$i" "${order[$i]}" &
        running[$!]=$i; i=$((i + 1)); continue
    fi
    done_pid=
    wait -n -p done_pid "${!running[@]}"
    [ -n "$done_pid" ] || continue
    k=${running[$done_pid]}; unset "running[$done_pid]"
    report "$k" "${order[$k]}"
done
if [ "$skip" -gt 0 ]; then echo "total: $pass passed, $fail failed, $skip skipped"
else echo "total: $pass passed, $fail failed"; fi
[ "$fail" -eq 0 ]
