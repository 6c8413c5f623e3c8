#!/usr/bin/env bash
# test_graph.sh - `saelite graph` through the binary: transcoders trained by extract + sae-train
# on a tiny 2-block model, the graph's files and tables, the PyTorch reference (when
# python3-torch is installed), and the refusals with their exit codes.
set -u
BIN=${SAELITE_BIN:-./saelite}
PY=/usr/bin/python3
pass=0; fail=0
ok() { if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $*"; fi; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

for i in $(seq 1 60); do
    echo "the cat sat on the mat $i. the dog sat on the log. a cat and a dog ran to the park."
    echo
done > "$tmp/t.txt"
$BIN bpe-train --vocab 300 "$tmp/t.txt" -o "$tmp/m" >/dev/null 2>&1; ok test $? -eq 0
$BIN init-model --layers 2 --d-model 32 --heads 4 --vocab 320 --ctx 16 --seed 5 -o "$tmp/m" \
    >/dev/null 2>&1; ok test $? -eq 0
H=blocks.0.ln2.hook_normalized,blocks.0.hook_mlp_out,blocks.1.ln2.hook_normalized,blocks.1.hook_mlp_out
$BIN extract --model "$tmp/m" --corpus "$tmp/t.txt" --hook $H --db "$tmp/a.db" >/dev/null 2>&1
ok test $? -eq 0
$BIN sae-train --db "$tmp/a.db" --hook blocks.0.ln2.hook_normalized --hook-out blocks.0.hook_mlp_out \
    --arch transcoder --k 4 --d-sae 64 --tokens 20000 --batch 512 --out "$tmp/tc0" >/dev/null 2>&1
ok test $? -eq 0
$BIN sae-train --db "$tmp/a.db" --hook blocks.1.ln2.hook_normalized --hook-out blocks.1.hook_mlp_out \
    --arch skip_transcoder --k 4 --d-sae 64 --tokens 20000 --batch 512 --out "$tmp/tc1" >/dev/null 2>&1
ok test $? -eq 0

G=(graph --model "$tmp/m" --transcoder "$tmp/tc0,$tmp/tc1" --text "the cat sat on the")
out=$($BIN "${G[@]}" --out "$tmp/g" --db "$tmp/g.db" 2>&1); ok test $? -eq 0
ok grep -q "^graph: 5 tokens, 2 blocks: " <<<"$out"
rel=$(sed -n 's/.*max relative error \([^,]*\),.*/\1/p' <<<"$out")
ok awk -v r="$rel" 'BEGIN { exit !(r != "" && r + 0 < 1e-4) }'
ok test -s "$tmp/g/graph.json" -a -s "$tmp/g/graph.png"
ok grep -q '"feature_type":"logit","token_prob"' "$tmp/g/graph.json"
n=$($BIN query --csv --db "$tmp/g.db" "SELECT count(*) FROM graph_nodes WHERE feature_type = 'embedding'" 2>/dev/null | tail -1)
ok test "$n" = "5"
if $PY -c "import torch, numpy" 2>/dev/null; then
    ref=$($PY tools/ref/graph_ref.py "$tmp/g.db" 2>&1); ok test $? -eq 0
    ok grep -q "^OK$" <<<"$ref"
    [ "$(tail -1 <<<"$ref")" = OK ] || echo "$ref"
    # a ReLU transcoder with a feature whose pre-activation is 2e-6 at the last token: float32
    # rounds terms of size 1 there, and the reference read that relative to 2e-6 (FAIL for a
    # graph that is right, an audit); it compares with the row's terms now, as graph does
    mkdir -p "$tmp/tcr"
    $PY - "$tmp" <<'PYEOF'
import json, sys
import numpy as np
sys.path.insert(0, "tools/ref")
import graph_ref as g
from gpt2_ref import write_safetensors
tmp = sys.argv[1]
cfg = json.load(open(tmp + "/m/config.json"))
P = g.read_safetensors(tmp + "/m/model.safetensors")
import sqlite3
toks = [r[0] for r in sqlite3.connect(tmp + "/g.db").execute(
    "SELECT token FROM graph_nodes WHERE graph_id = 1 AND feature_type = 'embedding' ORDER BY node")]
rng = np.random.default_rng(3)
C, S = cfg["n_embd"], 48
w = {"W_enc": (rng.standard_normal((C, S)) * 0.3).astype(np.float32),
     "W_dec": (rng.standard_normal((S, C)) * 0.2).astype(np.float32),
     "b_enc": (rng.standard_normal(S) * 0.1).astype(np.float32),
     "b_dec": np.zeros(C, np.float32)}
tc = {k: g.torch.from_numpy(v.astype(np.float64)) for k, v in w.items()}
tc.update(arch="relu", k=None, threshold=None, W_skip=None)
pre = g.run(P, cfg, {0: tc, 1: g.load_tc(tmp + "/tc1")[1]}, toks, {})["pre"][0][-1]
w["b_enc"][0] = np.float32(float(w["b_enc"][0]) + 2e-6 - float(pre[0]))
write_safetensors(tmp + "/tcr/sae_weights.safetensors", [(k, "F32", v) for k, v in w.items()])
json.dump({"architecture": "transcoder", "d_in": C, "d_out": C, "d_sae": S, "dtype": "float32",
           "apply_b_dec_to_input": False, "normalize_activations": "none",
           "hook_name": "blocks.0.ln2.hook_normalized", "hook_name_out": "blocks.0.hook_mlp_out"},
          open(tmp + "/tcr/cfg.json", "w"))
PYEOF
    ok test $? -eq 0
    $BIN graph --model "$tmp/m" --transcoder "$tmp/tcr,$tmp/tc1" --text "the cat sat on the" --db "$tmp/gr.db" >/dev/null 2>&1
    ok test $? -eq 0
    ok test "$(sqlite3 "$tmp/gr.db" "SELECT count(*) FROM graph_nodes WHERE layer = 0 AND feature = 0 AND pos = 4 AND activation > 0 AND activation < 1e-5")" = 1
    ref=$($PY tools/ref/graph_ref.py "$tmp/gr.db" 2>&1); ok test $? -eq 0
    [ "$(tail -1 <<<"$ref")" = OK ] || echo "$ref"
else
    echo "SKIP: no python3-torch; the PyTorch reference check did not run"
fi
# more targets than one batch (64): the batches split over the threads, the same bits as on one
G2=(graph --model "$tmp/m" --transcoder "$tmp/tc0,$tmp/tc1" --text "the cat sat on the mat. the dog sat on the")
o1=$(SAELITE_THREADS=1 $BIN "${G2[@]}" --out "$tmp/g1t" 2>&1); ok test $? -eq 0
o2=$(SAELITE_THREADS=2 $BIN "${G2[@]}" --out "$tmp/g2t" 2>&1); ok test $? -eq 0
nt=$(sed -n 's/.* nodes (\([0-9]*\) features, .*, \([0-9]*\) logits).*/\1 \2/p' <<<"$o1")
ok test "$(( ${nt% *} + ${nt#* } ))" -gt 64
ok cmp -s "$tmp/g1t/graph.json" "$tmp/g2t/graph.json"
# a second graph into the same database, stricter pruning keeps fewer edges
out2=$($BIN "${G[@]}" --db "$tmp/g.db" --edge-threshold 0.5 2>&1); ok test $? -eq 0
ok test "$($BIN query --csv --db "$tmp/g.db" "SELECT count(*) FROM graphs" 2>/dev/null | tail -1)" = "2"
k1=$($BIN query --csv --db "$tmp/g.db" "SELECT n_edges_kept FROM graphs WHERE id = 1" 2>/dev/null | tail -1)
k2=$($BIN query --csv --db "$tmp/g.db" "SELECT n_edges_kept FROM graphs WHERE id = 2" 2>/dev/null | tail -1)
ok test "$k2" -lt "$k1"

# a database that fails (not one) left graph.json alone in its folder: now neither file (an audit)
echo junk > "$tmp/junk.db"
err=$($BIN "${G[@]}" --out "$tmp/gj" --db "$tmp/junk.db" 2>&1); ok test $? -eq 1
ok test ! -e "$tmp/gj/graph.json" -a ! -e "$tmp/gj/graph.png"
ok test -z "$(ls "$tmp/gj" 2>/dev/null | grep tmp)"
# text that is not valid UTF-8 token by token (a split character): graph.json and the nodes'
# token_text hold U+FFFD, as the tokens table does; raw bytes made json.load fail (an audit)
$BIN graph --model "$tmp/m" --transcoder "$tmp/tc0,$tmp/tc1" --text "the caf$(printf '\xc3\xa9') sat" --out "$tmp/gu" --db "$tmp/gu.db" >/dev/null 2>&1
ok test $? -eq 0
ok $PY -c "import json, sys; d = json.load(open(sys.argv[1], encoding='utf-8')); sys.exit(0 if '\ufffd' in ''.join(d['metadata']['prompt_tokens']) else 1)" "$tmp/gu/graph.json"
ok test "$(sqlite3 "$tmp/gu.db" "SELECT count(*) FROM graph_nodes WHERE token_text LIKE '%'||char(65533)||'%'")" -ge 1
# bytes that are not UTF-8 in --text and --slug: graph.json loads and the database holds U+FFFD
# (both took the raw bytes: json.load failed, an audit)
$BIN graph --model "$tmp/m" --transcoder "$tmp/tc0,$tmp/tc1" --text "caf$(printf '\xff') x" --slug "s$(printf '\xfe')" --out "$tmp/gx" --db "$tmp/gx.db" >/dev/null 2>&1
ok test $? -eq 0
ok $PY -c "import json, sys; d = json.load(open(sys.argv[1], encoding='utf-8')); sys.exit(0 if d['metadata']['slug'] == 's\ufffd' and '\ufffd' in d['metadata']['prompt'] else 1)" "$tmp/gx/graph.json"
ok test "$(sqlite3 "$tmp/gx.db" "SELECT hex(slug) FROM graphs")" = 73EFBFBD
# --db inside --out under graph.json's name: refused, the database kept (it was replaced)
mkdir -p "$tmp/gd"; cp "$tmp/g.db" "$tmp/gd/graph.json"
err=$($BIN "${G[@]}" --out "$tmp/gd" --db "$tmp/gd/graph.json" 2>&1); ok test $? -eq 2
ok grep -q "is an input" <<<"$err"
ok cmp -s "$tmp/g.db" "$tmp/gd/graph.json"
# a graph.png that cannot be written fails before the database is (the graph was committed, exit 1)
mkdir -p "$tmp/gp/graph.png"
err=$($BIN "${G[@]}" --out "$tmp/gp" --db "$tmp/gp.db" 2>&1); ok test $? -eq 1
ok test ! -e "$tmp/gp.db" -a ! -e "$tmp/gp/graph.json"
ok grep -q "graph.png: is a directory" <<<"$err"
# refusals: flags (2), inputs (1), nothing written
$BIN graph --model "$tmp/m" --text x >/dev/null 2>&1; ok test $? -eq 2
$BIN "${G[@]}" --node-threshold 1.5 >/dev/null 2>&1; ok test $? -eq 2
$BIN "${G[@]}" --max-logits 0 >/dev/null 2>&1; ok test $? -eq 2
err=$($BIN graph --model "$tmp/m" --transcoder "$tmp/tc0" --text "the cat" --out "$tmp/bad" 2>&1); ok test $? -eq 1
ok grep -q "no transcoder for block 1" <<<"$err"
ok test ! -e "$tmp/bad"
err=$($BIN graph --model "$tmp/m" --transcoder "$tmp/tc1,$tmp/tc1" --text "the cat" 2>&1); ok test $? -eq 1
ok grep -q "second transcoder for block 1" <<<"$err"
$BIN sae-train --db "$tmp/a.db" --hook blocks.0.ln2.hook_normalized --k 4 --d-sae 64 --tokens 5000 \
    --batch 512 --out "$tmp/sae" >/dev/null 2>&1
err=$($BIN graph --model "$tmp/m" --transcoder "$tmp/sae,$tmp/tc1" --text "the cat" 2>&1); ok test $? -eq 1
ok grep -q "not a transcoder" <<<"$err"
# a transcoder whose output hook is another (or missing): named by its directory, not only
# "block 0" (an audit); the missing one said "maps X -> ;"
for v in other none; do
    cp -r "$tmp/tc0" "$tmp/tc0_$v"
    $PY -c 'import json, sys
p, v = sys.argv[1], sys.argv[2]; d = json.load(open(p))
for o in (d, d.get("metadata", {})):
    if "hook_name_out" in o:
        if v == "none": del o["hook_name_out"]
        else: o["hook_name_out"] = "blocks.0.hook_resid_post"
json.dump(d, open(p, "w"))' "$tmp/tc0_$v/cfg.json" $v
    err=$($BIN graph --model "$tmp/m" --transcoder "$tmp/tc0_$v,$tmp/tc1" --text "the cat" 2>&1); ok test $? -eq 1
    ok grep -q "tc0_$v: block 0: the transcoder maps blocks.0.ln2.hook_normalized -> $([ $v = none ] && echo '(no hook_name_out)' || echo blocks.0.hook_resid_post); the graph needs" <<<"$err"
done
err=$($BIN "${G[@]}" --max-feature-nodes 3 2>&1); ok test $? -eq 1
ok grep -q "max-feature-nodes" <<<"$err"
$BIN graph --model "$tmp/nope" --transcoder "$tmp/tc0,$tmp/tc1" --text x >/dev/null 2>&1; ok test $? -eq 1
# a trailing comma is refused as in the other lists (it was taken)
out=$($BIN graph --model "$tmp/m" --transcoder "$tmp/tc0,$tmp/tc1," --text x 2>&1); ok test $? -eq 1
ok grep -q "an empty or too long directory" <<<"$out"
err=$($BIN "${G[@]/the cat sat on the/$(printf 'w%.0s ' $(seq 1 20))}" 2>&1); ok test $? -eq 1
ok grep -q "tokens (the model takes 1 to 16)" <<<"$err"

# report draws a transcoder's dashboards with both sides named (issue 16): the header and
# index.html give the input and the output hook; an SAE's report keeps its old wording
$BIN analyze --db "$tmp/a.db" --sae "$tmp/tc1" --model "$tmp/m" >/dev/null 2>&1; ok test $? -eq 0
$BIN report --db "$tmp/a.db" --sae "$tmp/tc1" --top 2 --out "$tmp/rep" >/dev/null 2>&1; ok test $? -eq 0
ok grep -q "skip_transcoder '$tmp/tc1' from blocks.1.ln2.hook_normalized to blocks.1.hook_mlp_out" "$tmp/rep/index.html"
ok test "$(ls "$tmp/rep" | grep -c '^feature_[0-9]*\.png$')" = 2
# analyze --effects of a transcoder: the ablation at its output hook and the direct path from
# there (it ablated at the input hook, and the rank correlation with the direct path was NULL
# for every feature, blocks.0.ln2.hook_normalized having none; an audit)
cp "$tmp/a.db" "$tmp/e.db"
$BIN analyze --db "$tmp/e.db" --sae "$tmp/tc0" --model "$tmp/m" --effects --effects-ctx 4 >/dev/null 2>&1; ok test $? -eq 0
ne=$(sqlite3 "$tmp/e.db" "SELECT count(*) FROM ana_effects")
nr=$(sqlite3 "$tmp/e.db" "SELECT count(*) FROM ana_effects WHERE rank_corr BETWEEN -1 AND 1")
ok test "$ne" -gt 0 -a "$nr" = "$ne"
# an SAE at ln_final.hook_normalized gets logit effects (W_U . d, exact there); they were
# skipped as "not on a linear direct path to the logits"
$BIN extract --model "$tmp/m" --corpus "$tmp/t.txt" --hook ln_final.hook_normalized --db "$tmp/e.db" >/dev/null 2>&1; ok test $? -eq 0
$BIN sae-train --db "$tmp/e.db" --hook ln_final.hook_normalized --k 4 --d-sae 64 --tokens 4096 --batch 512 --out "$tmp/lnf" >/dev/null 2>&1; ok test $? -eq 0
out=$($BIN analyze --db "$tmp/e.db" --sae "$tmp/lnf" --model "$tmp/m" 2>&1); ok test $? -eq 0
ok test "$(grep -c 'logit effects skipped' <<<"$out")" = 0
ok test "$(sqlite3 "$tmp/e.db" "SELECT count(*) FROM ana_logits l JOIN ana_dicts d ON d.id = l.dict_id WHERE d.hook_name = 'ln_final.hook_normalized'")" -gt 0
# --db of the same model's activations takes the graph; of another model's, refused before the
# graph is computed, nothing written (graph tables sat beside the other model's features)
out=$($BIN "${G[@]}" --db "$tmp/a.db" 2>&1); ok test $? -eq 0
ok test "$(sqlite3 "$tmp/a.db" "SELECT count(*) FROM graphs")" = 1
$BIN init-model --layers 2 --d-model 32 --heads 4 --vocab 320 --ctx 16 --seed 6 -o "$tmp/m6" >/dev/null 2>&1
cp "$tmp/m/vocab.bpe" "$tmp/m/encoder.json" "$tmp/m6/"
$BIN extract --model "$tmp/m6" --corpus "$tmp/t.txt" --hook blocks.0.hook_mlp_out --db "$tmp/o.db" --max-tokens 64 >/dev/null 2>&1; ok test $? -eq 0
osum=$(sqlite3 "$tmp/o.db" ".dump" | md5sum)
out=$($BIN "${G[@]}" --db "$tmp/o.db" --out "$tmp/go" 2>&1); rc=$?
ok test $rc -eq 1
ok grep -q "o.db: holds activations of another model (.*m6.*), not .*/m (.*); use another --db" <<<"$out"
ok test "$(sqlite3 "$tmp/o.db" ".dump" | md5sum)" = "$osum"
ok test ! -e "$tmp/go/graph.json"
# an empty file (mktemp) is a new database, as it was before the model check (refused as "empty
# database (no saelite tables)" by the check's read-only open, a review)
: > "$tmp/empty.db"
out=$($BIN "${G[@]}" --db "$tmp/empty.db" --out "$tmp/ge" 2>&1); ok test $? -eq 0
ok test "$(sqlite3 "$tmp/empty.db" "SELECT count(*) FROM graphs")" = 1
echo "test_graph.sh: $pass passed, $fail failed"
test $fail -eq 0
