#!/usr/bin/env bash
# test_train_lm.sh - train-lm end to end on a tiny generated corpus: outputs, the HF layout the
# loader reads back, and --resume ending bit-identical to an uninterrupted run.
set -u
BIN=${SAELITE_BIN:-./saelite}
pass=0; fail=0
ok() { if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $*"; fi; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# 60 short documents separated by blank lines
for i in $(seq 1 60); do
    echo "The cat number $i sat on the mat and the dog number $((i % 7)) ran to the park."
    echo "A bird sang $((i % 5)) songs while the sun was shining over the hills."
    echo
done > "$tmp/corpus.txt"
$BIN bpe-train --vocab 300 "$tmp/corpus.txt" -o "$tmp/tok" >/dev/null 2>&1
ok test -s "$tmp/tok/encoder.json"

args=(--corpus "$tmp/corpus.txt" --tokenizer "$tmp/tok" --layers 1 --d-model 32 --heads 2 --ctx 16
      --batch 4 --steps 24 --warmup 4 --lr 1e-2 --eval-every 8 --eval-windows 8 --val-frac 0.2 --seed 3)
out=$($BIN train-lm "${args[@]}" -o "$tmp/a" 2>&1)
ok test $? -eq 0
ok grep -q "step     24/24" <<<"$out"
ok grep -q "held-out loss" <<<"$out"
for f in config.json model.safetensors train_state.safetensors encoder.json vocab.bpe; do
    ok test -s "$tmp/a/$f"
done
# the output loads as a model: forward on it works
$BIN forward --model "$tmp/a" --tokens 1,2,3 --logits --npy "$tmp/l.npy" >/dev/null 2>&1
ok test $? -eq 0
# --text uses the tokenizer files copied next to the model
out2=$($BIN forward --model "$tmp/a" --text "The cat sat" --hook blocks.0.mlp.hook_post --npy "$tmp/h.npy" 2>&1)
ok test $? -eq 0
ok grep -q "blocks.0.mlp.hook_post \[[0-9]*, 128\]" <<<"$out2"
# --text does not prepend <|endoftext|> (TransformerLens's run_with_cache(str) does); --bos does:
# the same tensor as --tokens with the id in front, one row longer than without it
ids=$(printf 'The cat sat' | $BIN tokenize --tokenizer "$tmp/a" 2>/dev/null | tr ' ' ,)
eot=$(printf '<|endoftext|>' | $BIN tokenize --special --tokenizer "$tmp/a" 2>/dev/null)
ntok=$(tr , '\n' <<<"$ids" | wc -l)
ok grep -q "blocks.0.mlp.hook_post \[$ntok, 128\]" <<<"$out2"
out3=$($BIN forward --model "$tmp/a" --text "The cat sat" --bos --hook blocks.0.mlp.hook_post --npy "$tmp/hb.npy" 2>&1)
ok test $? -eq 0
ok grep -q "blocks.0.mlp.hook_post \[$((ntok + 1)), 128\]" <<<"$out3"
$BIN forward --model "$tmp/a" --tokens "$eot,$ids" --hook blocks.0.mlp.hook_post --npy "$tmp/ht.npy" >/dev/null 2>&1
ok cmp -s "$tmp/hb.npy" "$tmp/ht.npy"
err=$($BIN forward --model "$tmp/a" --tokens 1,2 --bos --logits --npy "$tmp/x.npy" 2>&1)
ok test $? -eq 2
ok grep -q -- "--bos needs --text" <<<"$err"
# loss went down from the initial ~log(300)
first=$(grep -m1 '^step' <<<"$out" | awk '{print $6}')
last=$(grep '^step' <<<"$out" | tail -1 | awk '{print $6}')
ok awk -v a="$first" -v b="$last" 'BEGIN{exit !(b < a)}'

# a rerun without --resume does not replace the finished model; --force does
cp "$tmp/a/model.safetensors" "$tmp/a.model"
$BIN train-lm "${args[@]}" --steps 5 -o "$tmp/a" >/dev/null 2>"$tmp/f.err"
ok test $? -eq 1
ok grep -q "already holds a training state" "$tmp/f.err"
ok cmp -s "$tmp/a.model" "$tmp/a/model.safetensors"
$BIN train-lm "${args[@]}" --steps 5 --force -o "$tmp/f" >/dev/null 2>&1
ok test $? -eq 0
cp -r "$tmp/a" "$tmp/f2"
$BIN train-lm "${args[@]}" --steps 5 --force -o "$tmp/f2" >/dev/null 2>&1
ok test $? -eq 0
ok cmp -s "$tmp/f/model.safetensors" "$tmp/f2/model.safetensors"
# interrupted run (stops after its first step via --max-time), then resumed
$BIN train-lm "${args[@]}" --max-time 0.000001 -o "$tmp/b" >"$tmp/b.log" 2>&1
ok grep -q "stopped at step 1" "$tmp/b.log"
$BIN train-lm "${args[@]}" --resume -o "$tmp/b" >"$tmp/b2.log" 2>&1
ok test $? -eq 0
ok grep -q "resumed at step 1" "$tmp/b2.log"
ok cmp -s "$tmp/a/model.safetensors" "$tmp/b/model.safetensors"
# a checkpoint by the clock (--checkpoint-secs) where the steps' one is far off: kill -9 after it,
# and the resume ends bit-identical to an uninterrupted run (it lost every step since the start)
long=("${args[@]}"); long[15]=6000
$BIN train-lm "${long[@]}" -o "$tmp/k0" >/dev/null 2>&1
$BIN train-lm "${long[@]}" --checkpoint-every 100000 --checkpoint-secs 0.3 -o "$tmp/k" >"$tmp/k.log" 2>&1 &
kp=$!
for _ in $(seq 300); do [ -s "$tmp/k/train_state.safetensors" ] && break; sleep 0.05; done
kill -KILL $kp 2>/dev/null; wait $kp 2>/dev/null
ok test -s "$tmp/k/train_state.safetensors"
$BIN train-lm "${long[@]}" --resume -o "$tmp/k" >"$tmp/k2.log" 2>&1
ok grep -q "resumed at step [1-9]" "$tmp/k2.log"
ok cmp -s "$tmp/k0/model.safetensors" "$tmp/k/model.safetensors"
# resuming with a different trajectory-changing flag is refused
$BIN train-lm "${args[@]}" --lr 2e-2 --resume -o "$tmp/b" >"$tmp/c.log" 2>&1
ok test $? -eq 1
ok grep -q "different options" "$tmp/c.log"
# resuming on another corpus is refused (it continued silently, matching neither run)
sed 's/cat/fox/g; s/mat/hill/g' "$tmp/corpus.txt" > "$tmp/corpus2.txt"
args2=("${args[@]}"); args2[1]="$tmp/corpus2.txt"
$BIN train-lm "${args2[@]}" --resume -o "$tmp/b" >"$tmp/c2.log" 2>&1
ok test $? -eq 1
ok grep -q "trained on other data" "$tmp/c2.log"
# resuming a finished run says so, with its held-out loss (it printed nan)
$BIN train-lm "${args[@]}" --resume -o "$tmp/b" >"$tmp/c3.log" 2>&1
ok test $? -eq 0
ok grep -q "already finished at step 24; nothing to train: held-out loss [0-9]" "$tmp/c3.log"
ok bash -c "! grep -qi nan '$tmp/c3.log'"
ok cmp -s "$tmp/a/model.safetensors" "$tmp/b/model.safetensors"
# --threads: the batch split over 2 threads is deterministic and learns what 1 thread does
$BIN train-lm "${args[@]}" --threads 1 -o "$tmp/t1" >"$tmp/t1.log" 2>&1; ok test $? -eq 0
ok grep -q "batch 4 x 16 over 1 thread," "$tmp/t1.log"
for r in a b; do
    $BIN train-lm "${args[@]}" --threads 2 -o "$tmp/t2$r" >"$tmp/t2$r.log" 2>&1; ok test $? -eq 0
done
ok grep -q "batch 4 x 16 over 2 threads," "$tmp/t2a.log"
ok cmp -s "$tmp/t2a/model.safetensors" "$tmp/t2b/model.safetensors"
v1=$(grep '^step' "$tmp/t1.log" | tail -1 | awk '{print $6}')
v2=$(grep '^step' "$tmp/t2a.log" | tail -1 | awk '{print $6}')
ok awk -v a="$v1" -v b="$v2" 'BEGIN{d = a - b; exit !(d < 0.01 && d > -0.01)}'
$BIN train-lm "${args[@]}" --threads 0 -o "$tmp/t0" >/dev/null 2>&1; ok test $? -eq 2
# a resume takes the run's thread count (another one changes the bits: it was accepted
# silently); another --threads is refused naming the count
$BIN train-lm "${args[@]}" --threads 2 --max-time 0.000001 -o "$tmp/tr" >/dev/null 2>&1
$BIN train-lm "${args[@]}" --threads 1 --resume -o "$tmp/tr" >"$tmp/tr1.log" 2>&1
ok test $? -eq 1
ok grep -q "the run was split over 2 threads, this one over 1: resume with --threads 2" "$tmp/tr1.log"
SAELITE_THREADS=1 $BIN train-lm "${args[@]}" --resume -o "$tmp/tr" >"$tmp/tr2.log" 2>&1
ok test $? -eq 0
ok grep -q "batch 4 x 16 over 2 threads," "$tmp/tr2.log"
ok cmp -s "$tmp/t2a/model.safetensors" "$tmp/tr/model.safetensors"
# --resume and --force together: one or the other (--force was ignored)
$BIN train-lm "${args[@]}" --resume --force -o "$tmp/tr" >"$tmp/rf.log" 2>&1
ok test $? -eq 1
ok grep -q -- "--resume continues the run in .* and --force starts it over: give one" "$tmp/rf.log"
# a --force run that fails before its first checkpoint leaves the previous model and its own
# tokenizer together (the new tokenizer was copied at the start, beside the old model)
printf 'zebra quokka xylophone.\n\n%.0s' $(seq 40) > "$tmp/corpus3.txt"
$BIN bpe-train --vocab 280 "$tmp/corpus3.txt" -o "$tmp/tok3" >/dev/null 2>&1
cp -r "$tmp/a" "$tmp/g"
$BIN train-lm --corpus "$tmp/corpus3.txt" --tokenizer "$tmp/tok3" --layers 1 --d-model 32 --heads 2 --ctx 16 \
    --batch 4 --steps 20 --lr 1e30 --warmup 0 --val-frac 0.2 --force -o "$tmp/g" >/dev/null 2>"$tmp/g.err"
ok test $? -eq 1
ok grep -q "became .*start again with --force and a lower --lr" "$tmp/g.err"
ok cmp -s "$tmp/a/model.safetensors" "$tmp/g/model.safetensors"
ok cmp -s "$tmp/a/encoder.json" "$tmp/g/encoder.json"
ok cmp -s "$tmp/a/train_state.safetensors" "$tmp/g/train_state.safetensors"
# ... and one that reaches its first checkpoint replaces all of it
$BIN train-lm --corpus "$tmp/corpus3.txt" --tokenizer "$tmp/tok3" --layers 1 --d-model 32 --heads 2 --ctx 16 \
    --batch 4 --steps 3 --val-frac 0.2 --force -o "$tmp/g" >/dev/null 2>&1
ok test $? -eq 0
ok cmp -s "$tmp/tok3/encoder.json" "$tmp/g/encoder.json"
$BIN forward --model "$tmp/g" --text "zebra quokka" --logits --npy "$tmp/g.npy" >/dev/null 2>&1
ok test $? -eq 0
# a held-out loss that is not finite stops the run before that step's checkpoint
$BIN train-lm "${args[@]}" --lr 1e30 --warmup 0 --checkpoint-every 1 --eval-every 1 -o "$tmp/nv" >/dev/null 2>"$tmp/nv.err"
ok test $? -eq 1
ok grep -q "held-out loss became -\?nan at step 1 (start again with --force" "$tmp/nv.err"
ok test ! -e "$tmp/nv/model.safetensors"
# a model too large for the machine is named as such (it blamed --batch 4)
$BIN train-lm "${args[@]}" --d-model 1000000 --heads 1 -o "$tmp/huge" >/dev/null 2>"$tmp/huge.err"
ok test $? -eq 1
ok grep -q "the model (layers 1, d-model 1000000, d-mlp 4000000, vocab [0-9]*: .*(a smaller --d-model, --d-mlp or --layers?)" "$tmp/huge.err"
# bad input: missing corpus file, bad flags
$BIN train-lm --corpus "$tmp/nope.txt" --tokenizer "$tmp/tok" -o "$tmp/d" >/dev/null 2>&1; ok test $? -eq 1
$BIN train-lm --corpus "$tmp/corpus.txt" --tokenizer "$tmp/tok" --d-model 30 --heads 4 -o "$tmp/d" >/dev/null 2>&1; ok test $? -eq 2
echo "test_train_lm: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
