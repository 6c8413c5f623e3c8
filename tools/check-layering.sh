#!/usr/bin/env bash
# check-layering.sh - fail when a source file includes a module its own module may not include.
#
# The allowed edges are the tables between the <!-- layering:... --> and <!-- headers:... -->
# markers of docs/architecture.md (the one source of truth; this script only reads them):
#   | `model/` | `common/` `corpus/` |      module model may include common and corpus (and itself)
#   | `cli/`   | * !tests !bench !fuzz |   every module in the table but the ones after '!'
#   | `sqlite3.h` | `store/` |            only store/ may include <sqlite3.h>
#   | `store/store_internal.h` | `store/` `tests/` |   a module's private header and its users
# Checked, in every *.c and *.h below ROOT (build/, data/, runs/, demo/ and .git/ skipped):
#   #include "dir/file"  (also "../dir/file", resolved against the including file's folder):
#                        dir must be the file's own module or allowed by its row;
#   #include <header>    when header has a row: the file's module must be listed there;
#   "*_internal.h"       a private header must have a row naming the modules that may use it.
# The table itself must name only modules that exist in it and, ignoring edges between two
# '*' rows (tests, bench and fuzz share helpers), be acyclic.
# Usage: tools/check-layering.sh [ROOT [DOC]]   (defaults: . and ROOT/docs/architecture.md)
# Prints one line per problem, "file:line: module X may not include Y (see docs/architecture.md)",
# then "layering: N problems"; exits 1 when there are any, 0 (silently) when there are none.
set -u
ROOT=${1:-.}
DOC=${2:-$ROOT/docs/architecture.md}
[ -r "$DOC" ] || { echo "check-layering: cannot read $DOC" >&2; exit 2; }

files=$(cd "$ROOT" && find . \( -path ./build -o -path ./data -o -path ./runs -o -path ./demo \
        -o -path ./.git \) -prune -o -type f \( -name '*.c' -o -name '*.h' \) -print |
        sed 's|^\./||' | LC_ALL=C sort)

(cd "$ROOT" && printf '%s\n' "$files" | awk -v doc="$DOC" -v docname="docs/architecture.md" '
function strip(s) { gsub(/`/, "", s); gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
function modname(s) { s = strip(s); sub(/\/$/, "", s); return s }
function problem(msg) { print msg; nprob++ }
# "a/b/../c" -> "a/c"; leading ".." that climb above ROOT are kept (and match no module)
function normalize(p,    n, parts, out, k, i) {
    n = split(p, parts, "/"); k = 0
    for (i = 1; i <= n; i++) {
        if (parts[i] == "." || parts[i] == "") continue
        if (parts[i] == ".." && k > 0 && out[k] != "..") { k--; continue }
        out[++k] = parts[i]
    }
    p = ""
    for (i = 1; i <= k; i++) p = p (i > 1 ? "/" : "") out[i]
    return p
}
function visit(m,    d, n, i, deps) {       # depth-first search for a cycle
    state[m] = 1; stack[++depth] = m
    n = split(edges[m], deps, " ")
    for (i = 1; i <= n; i++) {
        d = deps[i]
        if (d == "" || (star[m] && star[d])) continue
        if (state[d] == 1) { cyc = d; return 1 }
        if (!state[d] && visit(d)) return 1
    }
    state[m] = 2; depth--
    return 0
}
BEGIN {
    section = ""
    while ((getline line < doc) > 0) {
        if (line ~ /<!-- *layering:begin *-->/) { section = "mod"; continue }
        if (line ~ /<!-- *headers:begin *-->/) { section = "hdr"; continue }
        if (line ~ /<!-- *(layering|headers):end *-->/) { section = ""; continue }
        if (section == "" || line !~ /^\|/ || line ~ /^\|[ \t]*:?-/) continue
        ncell = split(line, cell, "|")
        key = modname(cell[2]); val = strip(cell[3])
        if (key == "" || key ~ /^(module|header)$/) continue     # the head row
        if (section == "mod") { mods[key] = 1; spec[key] = val; order[++nmods] = key }
        else { hdr[key] = 1; hdrspec[key] = val; nhdrs++ }
    }
    close(doc)
    if (!nmods) { problem(doc ": no module table between <!-- layering:begin --> and <!-- layering:end -->"); exit }
    for (i = 1; i <= nmods; i++) {                    # expand each row into allowed[m, dep]
        m = order[i]; n = split(spec[m], tok, /[ \t,]+/)
        for (j = 1; j <= n; j++) if (tok[j] == "*") { star[m] = 1 }
        if (star[m]) for (k = 1; k <= nmods; k++) if (order[k] != m) allowed[m, order[k]] = 1
        for (j = 1; j <= n; j++) {
            t = tok[j]
            if (t == "" || t == "*" || t == "-" || t == "—") continue
            neg = sub(/^!/, "", t); t = modname(t)
            if (!(t in mods)) { problem(docname ": the row of " m " names " t ", which has no row"); continue }
            if (neg) delete allowed[m, t]
            else allowed[m, t] = 1
        }
        for (k = 1; k <= nmods; k++) if ((m, order[k]) in allowed) edges[m] = edges[m] " " order[k]
    }
    for (i = 1; i <= nmods; i++) if (!state[order[i]] && visit(order[i])) {
        path = cyc
        for (k = depth; k >= 1 && stack[k] != cyc; k--) path = stack[k] " -> " path
        problem(docname ": the table has a cycle: " cyc " -> " path)
        break
    }
    for (h in hdr) {
        n = split(hdrspec[h], tok, /[ \t,]+/)
        for (j = 1; j <= n; j++) if ((t = modname(tok[j])) != "") {
            if (!(t in mods)) problem(docname ": the row of " h " names " t ", which has no row")
            hdrok[h, t] = 1
        }
    }
}
{
    f = $0
    m = f; if (!sub(/\/.*/, "", m)) next                # files at the top level belong to no module
    if (!(m in mods)) {
        if (!(m in unlisted)) problem(f ": module " m " has no row in the table (see " docname ")")
        unlisted[m] = 1; next
    }
    dir = f; sub(/\/[^\/]*$/, "", dir)
    ln = 0
    while ((getline line < f) > 0) {
        ln++
        if (line !~ /^[ \t]*#[ \t]*include[ \t]*[<"]/) continue
        inc = line; sub(/^[ \t]*#[ \t]*include[ \t]*/, "", inc)
        quoted = substr(inc, 1, 1) == "\""
        inc = substr(inc, 2); sub(/[">].*/, "", inc)
        if (!quoted) {
            if ((inc in hdr) && !((inc, m) in hdrok))
                problem(f ":" ln ": module " m " may not include <" inc "> (only " hdrspec[inc] "; see " docname ")")
            continue
        }
        if (inc !~ /\//) {                          # "harness.h", generated "schema_sql.h": local
            p = dir "/" inc; if (inc !~ /_internal\.h$/) continue
        } else if (inc ~ /^\.\.?\//) p = normalize(dir "/" inc)
        else p = normalize(inc)
        t = p; sub(/\/.*/, "", t)
        if (t != m) {
            if (!(t in mods)) problem(f ":" ln ": module " m " includes \"" inc "\" from " t ", which has no row (see " docname ")")
            else if (!((m, t) in allowed)) problem(f ":" ln ": module " m " may not include " t " (see " docname ")")
        }
        if (p in hdr) {
            if (!((p, m) in hdrok)) problem(f ":" ln ": module " m " may not include " p " (private to " hdrspec[p] "; see " docname ")")
        } else if (p ~ /_internal\.h$/) problem(f ":" ln ": " p " is a private header without a row in the header table (see " docname ")")
    }
    close(f)
}
END {
    if (nprob) { print "layering: " nprob " problem" (nprob > 1 ? "s" : ""); exit 1 }
}')
