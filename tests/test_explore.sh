#!/usr/bin/env bash
# test_explore.sh - superpose, pack, params, generate, embed and attention through the binary:
# exit codes, outputs and pictures, and that failures leave no files behind.
set -u
BIN=${SAELITE_BIN:-./saelite}
pass=0; fail=0
ok() { if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $*"; fi; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# ---- params
out=$($BIN params --preset gpt3 2>&1); ok test $? -eq 0
ok grep -q "^weight matrices *175,181,291,520$" <<<"$out"
ok grep -q "total parameters: 175,221,817,344" <<<"$out"
out=$($BIN params --preset gpt2 2>&1); ok grep -q "total parameters: 124,439,808" <<<"$out"
$BIN params --preset gpt5 >/dev/null 2>&1; ok test $? -eq 2
$BIN params >/dev/null 2>&1; ok test $? -eq 2

# ---- superpose: pentagon at S=0.9 for 5 features in 2 dimensions
out=$($BIN superpose --n 5 --m 2 --importance 0.9 --sparsity 0,0.9 --steps 3000 --instances 3 \
      -o "$tmp/sup" 2>&1); ok test $? -eq 0
ok grep -Eq "^0\.9 .* 5/5 +0\.[34][0-9] 0\.[34]" <<<"$out"
ok grep -Eq "^0 .* 2/5 " <<<"$out"
for f in superpose.png dimensionality.png features.csv summary.csv W_S0.9.npy gram_S0.9.npy; do
    ok test -s "$tmp/sup/$f"
done
ok test "$(wc -l < "$tmp/sup/features.csv")" -eq 11
$BIN superpose --sparsity 1.5 -o "$tmp/bad" >/dev/null 2>&1; ok test $? -eq 2
ok test ! -e "$tmp/bad"

# ---- pack: the optimizer beats random vectors; 6 lines in R^3 reach 1/sqrt(5)
out=$($BIN pack --dim 3 --count 6 --steps 300 2>&1); ok test $? -eq 0
ok grep -Eq "^optimized +0\.447[23] " <<<"$out"
out=$($BIN pack --dim 16 --count 100 --steps 200 -o "$tmp/pk" 2>&1); ok test $? -eq 0
r=$(awk '$1 == "random" {print $2}' <<<"$out"); o=$(awk '$1 == "optimized" {print $2}' <<<"$out")
ok awk -v r="$r" -v o="$o" 'BEGIN { exit !(o < 0.65 * r) }'
ok test -s "$tmp/pk/angles.png" -a -s "$tmp/pk/angles.csv" -a -s "$tmp/pk/vectors.npy"
$BIN pack --dim 0 --count 5 >/dev/null 2>&1; ok test $? -eq 2
$BIN pack --dim 4 --count 5 --range 91,89 >/dev/null 2>&1; ok test $? -eq 2
# the float lists share one reader (args_float_list): pack's sscanf took blanks, hex and nan
for r in " 89,91" "89, 91" "0x10,91" "nan,91" "89,91," "89,91,92"; do
    $BIN pack --dim 4 --count 5 --steps 1 --range "$r" >/dev/null 2>&1; ok test $? -eq 2
done
$BIN pack --dim 4 --count 5 --steps 1 --range 89,91 >/dev/null 2>&1; ok test $? -eq 0
# findings of an audit against the paper and an independent PyTorch run:
# sparsities spelt in 4 digits shared one W file; duplicates and a trailing comma were taken
$BIN superpose --n 5 --m 2 --steps 20 --sparsity 0.99991,0.99992 -o "$tmp/sp2" >/dev/null 2>&1
ok test -s "$tmp/sp2/W_S0.99991.npy" -a -s "$tmp/sp2/W_S0.99992.npy"
$BIN superpose --n 5 --m 2 --steps 20 --sparsity 0.9,0.9 >/dev/null 2>&1; ok test $? -eq 2
$BIN superpose --n 5 --m 2 --steps 20 --sparsity 0.5, >/dev/null 2>&1; ok test $? -eq 2
for sp in "-0" " 0.5" "0x0.1" "0.5,,0.9"; do
    $BIN superpose --n 5 --m 2 --steps 20 --sparsity "$sp" >/dev/null 2>&1; ok test $? -eq 2
done
# a NaN model (the ReLU hid it from the loss) was written with exit 0
$BIN superpose --n 5 --m 2 --lr 1e308 --steps 10 --sparsity 0.5 -o "$tmp/nanrun" >/dev/null 2>&1
ok test $? -eq 1 -a ! -e "$tmp/nanrun"
# an output that cannot be written: refused before training, nothing else written
mkdir -p "$tmp/mid/b_S0.9.npy"
$BIN superpose --n 5 --m 2 --steps 20 --sparsity 0,0.9 -o "$tmp/mid" >/dev/null 2>&1
ok test $? -eq 1 -a ! -e "$tmp/mid/W_S0.npy"
# a killed superpose continues with the models it finished (OUT.superpose-ckpt beside OUT) and
# ends with an uninterrupted run's files, byte for byte; forged or foreign files are refused
SUPK=(--n 6 --m 3 --steps 6000 --sparsity 0,0.5,0.9,0.99)
$BIN superpose "${SUPK[@]}" -o "$tmp/spr" >/dev/null 2>&1; ok test $? -eq 0
ok test ! -e "$tmp/spr.superpose-ckpt"
supkill() { # OUT: a run into OUT killed once its checkpoint is there
    $BIN superpose "${SUPK[@]}" -o "$1" >/dev/null 2>&1 &
    local pid=$! i
    for i in $(seq 2000); do [ -s "$1.superpose-ckpt" ] && break; sleep 0.01; done
    kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
}
forge_sup() { python3 tests/forge_sum.py "$@"; } # FILE OFFSET FMT VALUE, the checksum recomputed
supkill "$tmp/spk"
ok test -s "$tmp/spk.superpose-ckpt"
out=$($BIN superpose "${SUPK[@]}" -o "$tmp/spk" 2>&1); ok test $? -eq 0
ok grep -q "continuing with the [1-3] models* finished before" <<<"$out"
ok grep -q "more from a killed run's checkpoint" <<<"$out"
ok diff -r "$tmp/spr" "$tmp/spk"
ok test ! -e "$tmp/spk.superpose-ckpt"
# -o under a directory that does not exist yet: the checkpoint's folder is made at the start
# (none could be written, so a kill started over: an audit)
supkill "$tmp/newparent/spn"
ok test -s "$tmp/newparent/spn.superpose-ckpt"
# the first model's first weight NaN (after {magic, key, key, count} and {index, loss})
supkill "$tmp/spf"
[ -s "$tmp/spf.superpose-ckpt" ] && forge_sup "$tmp/spf.superpose-ckpt" 48 f nan
out=$($BIN superpose "${SUPK[@]}" -o "$tmp/spf" 2>&1)
ok grep -q "is damaged (a weight that is not finite): training every model" <<<"$out"
ok diff -r "$tmp/spr" "$tmp/spf"
# another setting (--steps) after the kill: not continued
supkill "$tmp/sps"
out=$($BIN superpose --n 6 --m 3 --steps 5000 --sparsity 0,0.5,0.9,0.99 -o "$tmp/sps" 2>&1)
ok grep -q "was made with other settings: training every model" <<<"$out"
# --no-checkpoint keeps none (and a finished run removes a killed run's)
supkill "$tmp/spn"
$BIN superpose "${SUPK[@]}" --no-checkpoint -o "$tmp/spn" >/dev/null 2>&1
ok test ! -e "$tmp/spn.superpose-ckpt"
ok diff -r "$tmp/spr" "$tmp/spn"
# pack: days of pair passes refused; the range bound takes both ends
$BIN pack --dim 10 --count 1000000 >/dev/null 2>&1; ok test $? -eq 2
out=$($BIN pack --dim 20 --count 200 --range 80,95 --steps 0 2>&1)
ok grep -q "needs D >= 4 ln N / eps^2 = 2791 dimensions" <<<"$out"

# --range between the 0.1-degree bins: 89.05,89.15 counted [89.0, 89.2) under its own label
out=$($BIN pack --dim 3 --count 4 --steps 0 --range 89.05,89.15 2>&1); ok test $? -eq 2
ok grep -q "range wants multiples of 0.1 degree (the histogram's bins), got '89.05,89.15'" <<<"$out"
$BIN pack --dim 3 --count 4 --steps 0 --range 0.1,179.9 >/dev/null 2>&1; ok test $? -eq 0

# ---- a tiny tokenizer and random model for generate / embed / attention
printf 'the cat sat on the mat.\n\nthe dog sat on the log. the cat and the dog.\n' > "$tmp/t.txt"
$BIN bpe-train --vocab 280 "$tmp/t.txt" -o "$tmp/m" >/dev/null 2>&1; ok test $? -eq 0
$BIN init-model --layers 2 --d-model 32 --heads 4 --vocab 300 --ctx 16 --seed 5 -o "$tmp/m" \
    >/dev/null 2>&1; ok test $? -eq 0

g1=$($BIN generate --model "$tmp/m" --prompt "the cat" --temperature 0 --max-tokens 24 2>/dev/null)
ok test $? -eq 0
g2=$($BIN generate --model "$tmp/m" --prompt "the cat" --top-k 1 --seed 9 --max-tokens 24 2>/dev/null)
ok test "$g1" = "$g2"                        # top-k 1 is greedy; context slides past 16 tokens
ok test "${g1:0:7}" = "the cat"              # the prompt is echoed, then the continuation
s1=$($BIN generate --model "$tmp/m" --prompt "the" --seed 4 --max-tokens 10 2>/dev/null)
s2=$($BIN generate --model "$tmp/m" --prompt "the" --seed 4 --max-tokens 10 2>/dev/null)
ok test "$s1" = "$s2"
err=$($BIN generate --model "$tmp/m" --prompt "the" --max-tokens 3 2>&1 >/dev/null)
ok grep -q "generated 3 tokens" <<<"$err"
$BIN generate --model "$tmp/m" --prompt "x" --temperature -1 >/dev/null 2>&1; ok test $? -eq 2
# a negative seed was read as 2^64 - 1; a subnormal temperature was "not finite" (an audit)
$BIN generate --model "$tmp/m" --prompt "x" --seed -1 >/dev/null 2>&1; ok test $? -eq 2
g0=$($BIN generate --model "$tmp/m" --prompt "the cat" --temperature 1e-310 --max-tokens 24 2>/dev/null)
ok test "$g0" = "$g1"
$BIN generate --model "$tmp/nope" --prompt "x" >/dev/null 2>&1; ok test $? -eq 1
# --precision: refused under SAELITE_NO_BF16 (auto falls back to fp32's text); where the CPU has
# bf16, the greedy text comes out (it may differ from fp32's where two logits are close)
err=$(SAELITE_NO_BF16=1 $BIN generate --model "$tmp/m" --prompt "the cat" --temperature 0 --max-tokens 24 --precision bf16 2>&1 >/dev/null)
ok test $? -eq 1
ok grep -q "precision bf16: disabled by SAELITE_NO_BF16=1" <<<"$err"
ga=$(SAELITE_NO_BF16=1 $BIN generate --model "$tmp/m" --prompt "the cat" --temperature 0 --max-tokens 24 --precision auto 2>"$tmp/ga.err")
ok test "$ga" = "$g1"
ok grep -q "; matmuls fp32 (no bf16: disabled by SAELITE_NO_BF16=1)" "$tmp/ga.err"
if $BIN generate --model "$tmp/m" --prompt "the cat" --temperature 0 --max-tokens 24 --precision bf16 >/dev/null 2>&1; then
    gb=$($BIN generate --model "$tmp/m" --prompt "the cat" --temperature 0 --max-tokens 24 --no-stop --precision bf16 2>&1)
    ok grep -q "generated 24 tokens.*; matmuls bf16 (oneDNN)" <<<"$gb"
    ok test "${gb:0:7}" = "the cat"
fi

# ---- generate --steer: an SAE over the 32-wide residual (no hook_name: --hook names it)
$BIN sae-train --synth --synth-d 32 --synth-features 64 --tokens 20k --k 4 --expansion 2 \
    --out "$tmp/sae" >/dev/null 2>&1; ok test $? -eq 0
G=(generate --model "$tmp/m" --prompt "the cat" --temperature 0 --max-tokens 12)
plain=$($BIN "${G[@]}" 2>/dev/null)
cmp=$($BIN "${G[@]}" --sae "$tmp/sae" --hook blocks.1.hook_resid_post --steer 3:20,5:-4 --compare 2>/dev/null)
ok test $? -eq 0
ok grep -q "^=== steered (3:20,5:-4, add) ===$" <<<"$cmp"
ok test "$(sed -n '/^=== unsteered ===$/,$p' <<<"$cmp" | tail -n +2)" = "$plain"   # same seed, no hook
steered=$(sed -n '2,/^=== unsteered/p' <<<"$cmp" | head -n -2)
ok test "$steered" != "$plain"
for m in clamp ortho cap; do
    $BIN "${G[@]}" --sae "$tmp/sae" --hook blocks.1.hook_resid_post --steer 3:0 --steer-method $m \
        >/dev/null 2>&1; ok test $? -eq 0
done
err=$($BIN "${G[@]}" --sae "$tmp/sae" --steer 3:1 2>&1 >/dev/null); ok test $? -eq 1
ok grep -q "names no hook (cfg.json hook_name); give --hook NAME" <<<"$err"
out=$($BIN "${G[@]}" --sae "$tmp/sae" --hook blocks.1.hook_resid_post --steer 999:1 2>&1); ok test $? -eq 1
ok grep -q "out of range" <<<"$out"
ok test "$(grep -c "the cat" <<<"$out")" -eq 0   # nothing printed before the error
$BIN "${G[@]}" --steer 3:1 >/dev/null 2>&1; ok test $? -eq 2
$BIN "${G[@]}" --sae "$tmp/sae" --steer 3:1 --steer-method scale >/dev/null 2>&1; ok test $? -eq 2

# ---- attribute: gradient x activation and integrated gradients over the same SAE
A=(attribute --model "$tmp/m" --sae "$tmp/sae" --hook blocks.0.hook_resid_post --text "the cat sat on the")
out=$($BIN "${A[@]}" --top 5 --csv "$tmp/a.csv" --npy "$tmp/a.npy" --png "$tmp/a.png" 2>/dev/null)
ok test $? -eq 0
ok grep -q '^metric: logit\[' <<<"$out"
ok test "$(head -1 "$tmp/a.csv")" = "position,token,token_text,feature,activation,attribution"
ok test "$(grep -c ',-1,,' "$tmp/a.csv")" -eq 5            # one error node per token
ok grep -aq "'shape': (5, 65)" "$tmp/a.npy"                 # T x (d_sae + 1)
ok test -s "$tmp/a.png"
# the CSV's attributions plus error nodes add up to the printed sum
sum=$(awk -F, 'NR > 1 {s += $NF} END {printf "%.9f", s}' "$tmp/a.csv")
pr=$(sed -n 's/.*error nodes \(-\{0,1\}[0-9.]*\)$/\1/p' <<<"$out")
ok awk -v a="$sum" -v b="$pr" 'BEGIN { d = a - b; exit !(b != "" && d < 2e-6 && d > -2e-6) }' 
out=$(SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.000001 $BIN "${A[@]}" --target "#7" --ig-steps 128 --top 0 2>"$tmp/ig.err"); ok test $? -eq 0
ok grep -q "^attribute: integrated gradients .* step" "$tmp/ig.err"
ch=$(sed -n 's/.*change \(-\{0,1\}[0-9.]*\), sum.*/\1/p' <<<"$out")
sm=$(sed -n 's/.*error nodes \(-\{0,1\}[0-9.]*\)$/\1/p' <<<"$out")
ok awk -v a="$ch" -v b="$sm" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d < 1e-3 * (1 + (a < 0 ? -a : a))) }'
$BIN "${A[@]}" --target x --target-diff a,b >/dev/null 2>&1; ok test $? -eq 2
err=$($BIN "${A[@]}" --target-diff "#5,#5" 2>&1 >/dev/null); ok test $? -eq 1
ok grep -q "names token 5 twice" <<<"$err"
$BIN "${A[@]}" --target "#99999" >/dev/null 2>&1; ok test $? -eq 1
$BIN "${A[@]}" --pos 9 >/dev/null 2>&1; ok test $? -eq 1

out=$($BIN embed --model "$tmp/m" --top 3 "the - cat + dog" 2>&1); ok test $? -eq 0
ok test "$(grep -cE '^ +[0-9]+ +[0-9]+ +-?[01]\.[0-9]{4}  ' <<<"$out")" -eq 3
err=$($BIN embed --model "$tmp/m" "dog - dog" 2>&1); ok test $? -eq 1
ok grep -q "cancel" <<<"$err"
# an error leaves stdout empty (the query line came before the check, an audit)
out=$($BIN embed --model "$tmp/m" "dog - dog" 2>/dev/null); ok test -z "$out"
# a --top above the vocabulary lists every row; --top 2147483647 allocated 16 GB for it ("out of
# memory" under a memory limit; ulimit -v breaks ASan's shadow memory)
if [[ $BIN != *asan* ]]; then
    out=$(ulimit -v 1500000; $BIN embed --model "$tmp/m" --top 2147483647 "cat" 2>&1); ok test $? -eq 0
    ok test "$(grep -cE '^ +[0-9]+ +[0-9]+ +-?[01]\.[0-9]{4}  ' <<<"$out")" -eq \
        "$($BIN embed --model "$tmp/m" --top 1000 "cat" | grep -cE '^ +[0-9]+ +[0-9]+ ')"
fi

out=$($BIN attention --model "$tmp/m" --text "the cat sat on the mat" --layer 1 \
      --out "$tmp/att.png" --npy "$tmp/att.npy" 2>&1); ok test $? -eq 0
ok test -s "$tmp/att.png"
ok grep -aq "'shape': (4, " "$tmp/att.npy"
# several outputs: all or none (a failed .npy left the PNG; a failed PNG left attribute's CSV
# and .npy, an audit)
$BIN attention --model "$tmp/m" --text "the cat" --layer 1 --out "$tmp/a3.png" --npy /proc/a3.npy >/dev/null 2>&1
ok test $? -eq 1
ok test ! -e "$tmp/a3.png"
$BIN "${A[@]}" --target "#7" --csv "$tmp/at3.csv" --npy "$tmp/at3.npy" --png /proc/at3.png >/dev/null 2>&1
ok test $? -eq 1
ok test ! -e "$tmp/at3.csv" -a ! -e "$tmp/at3.npy"
ok test -z "$(ls "$tmp" | grep '\.tmp\.')"
$BIN attention --model "$tmp/m" --text "the cat" --layer 2 --out "$tmp/x.png" >/dev/null 2>&1
ok test $? -eq 1
ok test ! -e "$tmp/x.png"

echo "test_explore: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
