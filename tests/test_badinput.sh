#!/usr/bin/env bash
# test_badinput.sh - bad input must fail cleanly (issue 9), driving the real binary.
#
# Every case runs `saelite ...` in a scratch directory holding good fixtures (a database, a
# model, ...) and checks that the command
#   - exits 1 or 2 (never 0, never a signal or a sanitizer abort),
#   - prints exactly one non-empty line on stderr, matching the case's pattern (the problem named),
#     and no sanitizer report,
#   - leaves every file in the scratch directory as it was: no new (partial) files, unchanged
#     bytes, and databases still pass PRAGMA integrity_check with the same rows (.dump hash).
# Usage: tests/test_badinput.sh   (SAELITE_BIN=path overrides ./saelite; the ASan build uses it)
set -u
ROOT=$(pwd)
BIN=${SAELITE_BIN:-./saelite}
[[ "$BIN" == /* ]] || BIN="$ROOT/$BIN"
W=$(mktemp -d "${TMPDIR:-/tmp}/saelite-badinput.XXXXXX")
trap 'chmod -R u+w "$W" 2>/dev/null; rm -rf "$W"' EXIT
pass=0; fail=0

# Fingerprint of the scratch directory: path + hash of each file; a database by integrity_check
# and a hash of its .dump (rows, not bytes: SQLite may rewrite pages without changing content).
state() {
    (cd "$W" && find . -type f ! -name '*-shm' ! -name '*-wal' ! -name '*-journal' | LC_ALL=C sort |
        while IFS= read -r f; do
            if [[ "$f" == *.db ]]; then
                printf '%s %s %s\n' "$f" "$(sqlite3 "$f" 'PRAGMA integrity_check' 2>&1 | tr '\n' ' ')" \
                    "$(sqlite3 "$f" .dump 2>&1 | sha256sum | cut -c1-16)"
            else
                printf '%s %s\n' "$f" "$(sha256sum < "$f" | cut -c1-16)"
            fi
        done)
}

# bad NAME REGEX CMD [ARGS...]: run `saelite CMD ARGS` in $W and check the contract above.
bad() {
    local name=$1 re=$2; shift 2
    local before after rc err lines why=""
    before=$(state)
    (cd "$W" && exec "$BIN" "$@") > "$W.out" 2> "$W.err"
    rc=$?
    err=$(cat "$W.err")
    lines=$(grep -c . "$W.err")
    after=$(state)
    if [ $rc -eq 0 ]; then why="exit 0 (should fail)"
    elif [ $rc -ne 1 ] && [ $rc -ne 2 ]; then why="exit $rc (crash or signal?)"
    elif grep -qE 'Sanitizer|runtime error|Segmentation|Aborted' "$W.err"; then why="sanitizer report"
    elif [ "$lines" -ne 1 ]; then why="$lines lines on stderr (want one)"
    elif ! grep -Eiq -- "$re" "$W.err"; then why="message does not match /$re/"
    elif [ "$before" != "$after" ]; then
        why="files changed: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | head -n 4 | tr '\n' ';')"
    fi
    if [ -z "$why" ]; then pass=$((pass + 1)); echo "ok   $name"
    else
        fail=$((fail + 1)); echo "FAIL $name: $why"
        printf '     $ saelite %s\n' "$*"; head -n 5 "$W.err" | sed 's/^/     | /'
    fi
    rm -f "$W.out" "$W.err"
}

has() { "$BIN" help "$1" > /dev/null 2>&1; } # a command exists on this build

# ---- the dispatcher --------------------------------------------------------------------------
bad "unknown command" "unknown command 'frobnicate'" frobnicate
bad "help for an unknown command" "unknown command 'nosuch'" help nosuch

echo "test_badinput: $pass passed, $fail failed"
[ $fail -eq 0 ]
