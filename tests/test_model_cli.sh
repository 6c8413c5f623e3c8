#!/usr/bin/env bash
# test_model_cli.sh - init-model and forward end to end (exit codes, outputs, error messages).
set -u
BIN=${SAELITE_BIN:-./saelite}
pass=0; fail=0
ok() { if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $*"; fi; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

$BIN init-model --layers 2 --d-model 32 --heads 4 --vocab 50 --ctx 8 --seed 3 -o "$tmp/m" >/dev/null 2>&1
ok test $? -eq 0
ok test -s "$tmp/m/config.json" -a -s "$tmp/m/model.safetensors"
# a model already there is refused (a downloaded checkpoint was replaced silently), --force replaces it
cp "$tmp/m/model.safetensors" "$tmp/m.before"
err=$($BIN init-model --layers 1 --d-model 16 --heads 2 --vocab 50 --ctx 8 -o "$tmp/m" 2>&1); ok test $? -eq 1
ok grep -q "m holds a model (model.safetensors): give another -o, or --force" <<<"$err"
ok cmp -s "$tmp/m/model.safetensors" "$tmp/m.before"
mkdir -p "$tmp/mf" && cp "$tmp/m/config.json" "$tmp/mf/"
$BIN init-model --layers 1 --d-model 16 --heads 2 --vocab 50 --ctx 8 --force -o "$tmp/mf" >/dev/null 2>&1; ok test $? -eq 0
ok test -s "$tmp/mf/model.safetensors"
$BIN init-model --layers 1 --d-model 30 --heads 4 -o "$tmp/x" >/dev/null 2>&1; ok test $? -eq 2
$BIN init-model --layers 1 --d-model 32 --heads 4 --dtype f8 -o "$tmp/x" >/dev/null 2>&1; ok test $? -eq 2
$BIN init-model --layers 1 --d-model 32 --heads 4 --bogus 1 -o "$tmp/x" >/dev/null 2>&1; ok test $? -eq 2
# same seed, same bytes; prefix + bf16 variant loads too
$BIN init-model --layers 2 --d-model 32 --heads 4 --vocab 50 --ctx 8 --seed 3 -o "$tmp/m2" >/dev/null 2>&1
ok cmp -s "$tmp/m/model.safetensors" "$tmp/m2/model.safetensors"
$BIN init-model --layers 2 --d-model 32 --heads 4 --vocab 50 --ctx 8 --dtype bf16 --prefix --untied -o "$tmp/mb" >/dev/null 2>&1
ok test $? -eq 0

out=$($BIN forward --model "$tmp/m" --tokens 1,2,3,4,5 --hook blocks.1.mlp.hook_post --npy "$tmp/a.npy" 2>&1)
ok test $? -eq 0
ok grep -q "\[5, 128\]" <<<"$out"
$BIN forward --model "$tmp/mb" --tokens 1,2,3 --hook blocks.0.attn.hook_pattern --npy "$tmp/p.npy" >/dev/null 2>&1
ok test $? -eq 0
# npy header of the pattern: (4, 3, 3) = [H,T,T]
ok grep -aq "(4, 3, 3)" "$tmp/p.npy"
$BIN forward --model "$tmp/m" --tokens 1,2,3 --logits --npy "$tmp/l.npy" >/dev/null 2>&1
ok grep -aq "(3, 50)" "$tmp/l.npy"
err=$($BIN forward --model "$tmp/m" --tokens 1,2,3 --hook blocks.9.hook_z --npy "$tmp/z.npy" 2>&1)
ok test $? -eq 1
ok grep -q "no hook point matches" <<<"$err"
err=$($BIN forward --model "$tmp/m" --tokens 1,2,77 --logits --npy "$tmp/z.npy" 2>&1)
ok test $? -eq 1
ok grep -q "outside the vocabulary" <<<"$err"
err=$($BIN forward --model "$tmp/m" --tokens 1,2,3,4,5,6,7,8,9 --logits --npy "$tmp/z.npy" 2>&1)
ok test $? -eq 1
ok grep -q "context" <<<"$err"
$BIN forward --model "$tmp/nope" --tokens 1 --logits --npy "$tmp/z.npy" >/dev/null 2>&1; ok test $? -eq 1
$BIN forward --model "$tmp/m" --tokens 1 --npy "$tmp/z.npy" >/dev/null 2>&1; ok test $? -eq 2
ok test ! -e "$tmp/z.npy"
# config.json and model.safetensors as one: a weights write that fails leaves the old config.json
# (it was replaced first, beside the old weights or none: "does not fit" at the next load)
mkdir -p "$tmp/half/model.safetensors"
$BIN init-model --layers 1 --d-model 8 --heads 2 --vocab 50 --ctx 8 -o "$tmp/half" >/dev/null 2>&1
ok test $? -eq 1
ok test ! -e "$tmp/half/config.json"
ok test -z "$(ls "$tmp/half" | grep tmp)"
cp "$tmp/m/config.json" "$tmp/m.config"
rm -rf "$tmp/m3" && cp -r "$tmp/m" "$tmp/m3" && rm "$tmp/m3/model.safetensors" && mkdir "$tmp/m3/model.safetensors"
$BIN init-model --layers 1 --d-model 8 --heads 2 --vocab 50 --ctx 8 -o "$tmp/m3" >/dev/null 2>&1
ok test $? -eq 1
ok cmp -s "$tmp/m3/config.json" "$tmp/m.config"
# SIGTERM while a large model's weights are drawn: exit 130, the line, nothing written (it died
# on the signal, and in the write a config.json and a model.safetensors.tmp.PID were left)
SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.05 $BIN init-model --layers 12 --d-model 640 --heads 10 --vocab 50257 -o "$tmp/term" \
    >/dev/null 2>"$tmp/term.err" &
tp=$!
for _ in $(seq 50); do grep -q "random weights" "$tmp/term.err" && break; sleep 0.1; done
kill -TERM $tp; wait $tp; trc=$?
ok test $trc -eq 130
ok grep -q "saelite init-model: interrupted; nothing written" "$tmp/term.err"
ok test ! -e "$tmp/term"
# a bad -o is refused before the weights are drawn (-o '', a file, a path under a file failed
# at the write, seconds later, and -o '' said ": cannot create directory")
touch "$tmp/afile"
for o in "" "$tmp/afile" "$tmp/afile/sub"; do
    SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.05 $BIN init-model --layers 12 --d-model 768 --heads 12 -o "$o" >/dev/null 2>"$tmp/o.err"
    ok test $? -eq 1
    ok test "$(grep -c . "$tmp/o.err")" -eq 1
    ok test -z "$(grep 'random weights' "$tmp/o.err")"
    [ -n "$o" ] || ok grep -qx "saelite init-model: directory '': empty path" "$tmp/o.err"
done
echo "test_model_cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
