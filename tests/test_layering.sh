#!/usr/bin/env bash
# test_layering.sh - the include check (tools/check-layering.sh, table in docs/architecture.md):
# the tree passes it, and it fails, naming file, line and edge, on trees that break each rule.
set -u
ROOT=$(pwd)
CHECK="$ROOT/tools/check-layering.sh"
T=$(mktemp -d "${TMPDIR:-/tmp}/saelite-layering.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok()  { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# The tree as committed obeys its own table.
out=$("$CHECK" "$ROOT" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ -z "$out" ]; then ok "the tree passes"; else bad "the tree fails the check (exit $rc):"; echo "$out"; fi

# tree NAME: an empty tree with the real table, in $T/NAME
tree() { rm -rf "${T:?}/$1"; mkdir -p "$T/$1/docs"; cp "$ROOT/docs/architecture.md" "$T/$1/docs/"; }
put()  { mkdir -p "$(dirname "$T/$1")"; printf '%b' "$2" > "$T/$1"; }
# expect NAME WHAT PATTERN: the check fails on tree NAME and prints a line matching PATTERN
expect() {
    out=$("$CHECK" "$T/$1" 2>&1); rc=$?
    if [ "$rc" -eq 1 ] && grep -qE -- "$3" <<<"$out"; then ok "$2"
    else bad "$2: exit $rc, wanted a line matching '$3' in:"; echo "$out"; fi
}

tree good
put good/model/a.c '#include "model/a.h"\n#include "common/err.h"\n#include "corpus/corpus.h"\n#include <stdio.h>\n'
put good/store/b.c '#include <sqlite3.h>\n#include "store/store_internal.h"\n#include "schema_sql.h"\n'
put good/tests/t.c '#include "harness.h"\n#include "fuzz/fuzz_x.c"\n#include "store/store_internal.h"\n'
put good/bench/b.c '#include "../tests/report_fixture.h"\n'
out=$("$CHECK" "$T/good" 2>&1); rc=$?
if [ "$rc" -eq 0 ]; then ok "allowed edges pass"; else bad "allowed edges fail (exit $rc):"; echo "$out"; fi

tree up
put up/model/bpe.c '/* x */\n#include "common/err.h"\n#include "extract/corpus.h"\n'
expect up "an upward include is reported with file and line" \
    '^model/bpe\.c:3: module model may not include extract \(see docs/architecture\.md\)$'
grep -q '^layering: 1 problem$' <<<"$out" && ok "the problem count is printed" || bad "no problem count in: $out"

tree rel
put rel/store/s.c '#  include "../cli/cli.h"\n'
expect rel "a relative include is resolved" '^store/s\.c:1: module store may not include cli '

tree sys
put sys/model/m.c '#include <sqlite3.h>\n'
put sys/toy/t.c '#include <cairo.h>\n'
expect sys "sqlite3.h outside store/" '^model/m\.c:1: module model may not include <sqlite3\.h>'
expect sys "cairo.h outside reports/" '^toy/t\.c:1: module toy may not include <cairo\.h>'

tree priv
put priv/cli/c.c '#include "store/store_internal.h"\n'
put priv/sae/s.c '#include "sae/sae_secret_internal.h"\n'
expect priv "another module's private header" '^cli/c\.c:1: module cli may not include store/store_internal\.h'
expect priv "a private header without a row" '^sae/s\.c:1: sae/sae_secret_internal\.h is a private header without a row'

tree cli
put cli/sae/s.c '#include "cli/cli.h"\n'
put cli/tests/t.c '#include "cli/cli.h"\n'
expect cli "a library module including cli/" '^sae/s\.c:1: module sae may not include cli '
expect cli "tests including cli/" '^tests/t\.c:1: module tests may not include cli '

tree newmod
put newmod/server/main.c '#include "common/err.h"\n'
put newmod/model/m.c '#include "ghost/ghost.h"\n'
expect newmod "a folder without a row" '^server/main\.c: module server has no row'
expect newmod "an include from a folder without a row" '^model/m\.c:1: module model includes "ghost/ghost\.h" from ghost, which has no row'

tree cycle
sed -i 's/^| `corpus\/` | `common\/` |/| `corpus\/` | `common\/` `model\/` |/' "$T/cycle/docs/architecture.md"
expect cycle "a cycle in the table" 'the table has a cycle: (corpus -> model -> corpus|model -> corpus -> model)'

tree notable
sed -i '/layering:begin/d' "$T/notable/docs/architecture.md"
expect notable "a missing table is an error, not a pass" 'no module table'

echo "test_layering: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
