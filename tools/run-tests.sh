#!/usr/bin/env bash
# Run every test binary (and tests/*.sh scripts) given as arguments; sum their
# "name: N passed, N failed[, N skipped]" lines; a crash or a missing tally counts as a failure.
# Prints "total: N passed, N failed[, N skipped]" last and exits non-zero on any failure.
set -u
# Tests read the commands' stderr: keep progress lines out of it unless asked for
# (test_common checks the progress modes itself).
export SAELITE_PROGRESS="${SAELITE_PROGRESS-0}"
# The tests' python3 is Debian's, the interpreter tools/deps.sh installs for (python3-torch): where
# a version manager's shim comes first on PATH (pyenv on the Zen 5 VM: 0.37 s a call against
# /usr/bin/python3's 0.04), test_serve alone took 177 s instead of 79 (it runs python3 per check).
if [ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ]; then
    pydir=$(mktemp -d "${TMPDIR:-/tmp}/saelite-py.XXXXXX") && ln -s /usr/bin/python3 "$pydir/python3" &&
        export PATH="$pydir:$PATH" && trap 'rm -rf "$pydir"' EXIT
fi
pass=0; fail=0; skip=0
for t in "$@"; do
    name=$(basename "$t")
    start=$(date +%s.%N)
    if [[ "$t" == *.sh ]]; then out=$(bash "$t" 2>&1); rc=$?
    else out=$("$t" 2>&1); rc=$?; fi
    secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    line=$(printf '%s\n' "$out" | grep -E '^[A-Za-z0-9_.-]+: [0-9]+ passed, [0-9]+ failed' | tail -n 1)
    if [ -z "$line" ]; then
        printf '%s\n' "$out" | tail -n 30
        echo "$name: no tally (exit $rc) after ${secs}s"
        fail=$((fail + 1)); continue
    fi
    p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
    s=0; [[ "$line" == *skipped* ]] && s=$(sed -E 's/.* ([0-9]+) skipped.*/\1/' <<<"$line")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    if [ "$f" -ne 0 ]; then printf '%s\n' "$out" | grep -E 'FAIL|error|Error' | head -n 40; fi
    echo "$line  (${secs}s)"
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
done
if [ "$skip" -gt 0 ]; then echo "total: $pass passed, $fail failed, $skip skipped"
else echo "total: $pass passed, $fail failed"; fi
[ "$fail" -eq 0 ]
