#!/usr/bin/env bash
# test_install.sh - `make install` / `make uninstall` into a scratch DESTDIR, and the generated
# man page: it is roff for saelite(1), names every command and every flag of every command (it
# is made from the flag tables, so a flag missing here is a generator bug), and renders cleanly.
set -u
pass=0; fail=0
ok() { if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $*"; fi; }
T=$(mktemp -d "${TMPDIR:-/tmp}/saelite-install.XXXXXX"); trap 'rm -rf "$T"' EXIT
if [ ! -x ./saelite ] || [ ! -f saelite.so ]; then
    echo "test_install: 0 passed, 0 failed, 1 skipped (build ./saelite and saelite.so first)"; exit 0
fi
# a make of its own: not the caller's jobserver or variable overrides. test-asan passes BUILD=,
# OPT= and SAN= on its command line, which make also exports into the environment, and the
# Makefile takes them with ?=: left there, `make install` relinked ./saelite from the ASan
# objects, and the next `make demo` ran 2-3x slower on an ASan binary.
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u BUILD -u OPT -u SAN -u ARCH -u CFLAGS \
    make --no-print-directory -s "$@"; }

mk install DESTDIR="$T" PREFIX=/usr > "$T.log" 2>&1; rc=$?
ok test $rc -eq 0 || cat "$T.log"
rm -f "$T.log"
B=$T/usr/bin/saelite SO=$T/usr/lib/saelite/saelite.so M=$T/usr/share/man/man1/saelite.1
ok test -x "$B"
ok test -f "$SO"
ok test -f "$M"
ok cmp -s "$B" ./saelite
ok grep -q "^saelite " <("$B" --version)

# the page: roff of saelite(1), one .SS per command, every flag of each command
ok grep -q '^\.TH SAELITE 1 ' <(head -n 1 "$M")
for s in NAME SYNOPSIS DESCRIPTION COMMANDS "EXIT STATUS"; do ok grep -qx "\.SH $s" "$M"; done
cmds=$(./saelite help | awk '/^commands:/ { on = 1; next } on && NF { print $1 }')
ok test "$(wc -w <<< "$cmds")" -ge 20
ok test "$(grep -c '^\.SS ' "$M")" -eq "$(wc -w <<< "$cmds")"
missing=""
for c in $cmds; do
    roff=$(sed 's/-/\\-/g' <<< "$c")
    grep -qxF ".SS $roff" "$M" || missing="$missing $c"
    # the options of `saelite c --help`, each as a .TP entry of the page
    for f in $(./saelite "$c" --help | awk '/^options:/ { on = 1; next } on && /^  -/ { print $1 }'); do
        grep -qxF "\\fB$(sed 's/-/\\-/g' <<< "$f")\\fR" <(grep -A1 '^\.TP' "$M" | sed 's/ \\fI.*//') ||
            missing="$missing $c:$f"
    done
done
ok test -z "$missing" || echo "  not in the man page:$missing"
if command -v man > /dev/null; then # render it: no warnings, the sections there
    out=$(MANWIDTH=80 man --warnings -l "$M" 2> "$T/warn"); rc=$?
    ok test $rc -eq 0
    ok test ! -s "$T/warn" || cat "$T/warn"
    ok grep -q "EXIT STATUS" <<< "$out"
    ok grep -q -- "--batch N" <<< "$out"
fi
if command -v sqlite3 > /dev/null; then # the installed extension loads
    ok test "$(sqlite3 :memory: ".load ${SO%.so}" "SELECT vec_len(x'0000803f00000040')" 2>&1)" = 2
fi

mk uninstall DESTDIR="$T" PREFIX=/usr > /dev/null 2>&1
ok test $? -eq 0
ok test ! -e "$B" -a ! -e "$SO" -a ! -e "$M" -a ! -e "$T/usr/lib/saelite"

echo "test_install: $pass passed, $fail failed"
[ $fail -eq 0 ]
