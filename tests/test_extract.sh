#!/usr/bin/env bash
# test_extract.sh - `saelite import/export/info` round trips and bad input; `saelite extract` on a
# tiny random model (resume after kill -9 equals an uninterrupted run) when the model and
# tokenizer commands are built in.
set -u
BIN=${SAELITE_BIN:-./saelite}
# The test models are tiny: one BLAS thread avoids spinning workers on a busy machine.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
PY=/usr/bin/python3
pass=0; fail=0; skip=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { if eval "$1"; then ok; else bad "$2"; fi; }
T=$(mktemp -d /tmp/saelite_test_extract.XXXXXX)
trap 'umount "$T/small" 2>/dev/null; rm -rf "$T"' EXIT

# ---- import / export / info ----------------------------------------------------------------
$PY - "$T" <<'PY'
import sys, numpy as np
d = sys.argv[1]
r = np.random.default_rng(0)
np.save(d + "/acts.npy", r.standard_normal((300, 24)).astype(np.float32))
np.save(d + "/ids.npy", r.integers(0, 50257, 300).astype(np.int64))
np.save(d + "/bad3d.npy", np.zeros((2, 3, 4), np.float32))
np.save(d + "/ids_short.npy", np.zeros(299, np.int32))
PY
out=$($BIN import --npy "$T/acts.npy" --tokens "$T/ids.npy" --db "$T/i.db" --hook resid --seq-len 64 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"300 tokens in 5 sequences"* ]]' "import: $out"
$BIN export --db "$T/i.db" --hook resid --npy "$T/back.npy" --tokens-npy "$T/back_ids.npy" >/dev/null 2>&1
check '[ $? -eq 0 ]' "export after import"
check '$PY -c "import numpy as np,sys; a=np.load(sys.argv[1]); b=np.load(sys.argv[2]); i=np.load(sys.argv[3]); j=np.load(sys.argv[4]); sys.exit(0 if a.dtype==np.float32 and (a==b).all() and (i==j).all() else 1)" "$T/acts.npy" "$T/back.npy" "$T/ids.npy" "$T/back_ids.npy"' \
    "export of an import gives back the same array and ids"
# 1-token sequences without BOS (import --seq-len 1): sae-train counted one skipped BOS per
# sequence and refused them all ("no activations in the training split")
$BIN import --npy "$T/acts.npy" --db "$T/i1.db" --hook resid --seq-len 1 >/dev/null 2>&1
out=$($BIN sae-train --db "$T/i1.db" --hook resid --d-sae 32 --k 2 --tokens 512 --batch 64 --out "$T/i1sae" 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"eval ("*" held-out tokens)"* ]]' "sae-train on 1-token sequences: $out"
$BIN export --db "$T/i.db" --hook resid --npy "$T/lim.npy" --limit 70 >/dev/null 2>&1
# progress lines on stderr (export: tokens of --limit; import: the array's rows)
err=$(SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.000001 $BIN export --db "$T/i.db" --hook resid --npy "$T/lim2.npy" --limit 70 2>&1 >/dev/null)
check '[[ "$err" == *"export "*"/70 tok"* ]]' "export progress: $err"
err=$(SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.000001 $BIN import --npy "$T/acts.npy" --db "$T/i2.db" --hook resid --seq-len 64 2>&1 >/dev/null)
check '[[ "$err" == *"import "*"/300 tok"* ]]' "import progress: $err"
check '[[ "$err" == *"reading .npy "*"/28.80k B"* ]]' "npy reading progress: $err"
check '$PY -c "import numpy as np,sys; a=np.load(sys.argv[1]); b=np.load(sys.argv[2]); sys.exit(0 if a.shape==(70,24) and (a==b[:70]).all() else 1)" "$T/lim.npy" "$T/acts.npy"' "--limit 70"
# f16/bf16 storage rounds to nearest even (numpy's float16; bf16 by the usual bit formula)
# the same file imported again (now shorter) replaces what the hook held from it; another hook's
# import of the old file keeps its rows (22 rows came back for 6 imported, an audit)
$PY -c "import numpy as np, sys; np.save(sys.argv[1], np.arange(40, dtype=np.float32).reshape(10, 4))" "$T/re.npy"
$BIN import --npy "$T/re.npy" --db "$T/re.db" --hook h --seq-len 4 >/dev/null 2>&1
$BIN import --npy "$T/re.npy" --db "$T/re.db" --hook h2 --seq-len 4 >/dev/null 2>&1
$PY -c "import numpy as np, sys; np.save(sys.argv[1], -np.arange(24, dtype=np.float32).reshape(6, 4))" "$T/re.npy"
out=$($BIN import --npy "$T/re.npy" --db "$T/re.db" --hook h --seq-len 4 2>&1)
$BIN export --db "$T/re.db" --hook h --npy "$T/re_h.npy" >/dev/null 2>&1
$BIN export --db "$T/re.db" --hook h2 --npy "$T/re_h2.npy" >/dev/null 2>&1
check '$PY -c "import numpy as np, sys; a, b = np.load(sys.argv[1]), np.load(sys.argv[2]); sys.exit(0 if (a == -np.arange(24).reshape(6, 4)).all() and (b == np.arange(40).reshape(10, 4)).all() else 1)" "$T/re_h.npy" "$T/re_h2.npy"' "a file imported again replaces the hook's rows from it: $out"
# the file, not the string typed: a.npy in two folders is two files, ./re2.npy is re2.npy (they
# replaced each other, and the same file was stored twice; an audit)
mkdir -p "$T/d1" "$T/d2"
$PY -c "import numpy as np, sys; np.save(sys.argv[1], np.ones((5, 4), np.float32)); np.save(sys.argv[2], 2 * np.ones((7, 4), np.float32))" "$T/d1/a.npy" "$T/d2/a.npy"
ABIN=$(realpath "$(command -v "$BIN")")
(cd "$T/d1" && "$ABIN" import --npy a.npy --db ../ab.db --hook h --seq-len 4 >/dev/null 2>&1)
(cd "$T/d2" && "$ABIN" import --npy a.npy --db ../ab.db --hook h --seq-len 4 >/dev/null 2>&1)
(cd "$T/d2" && "$ABIN" import --npy ./a.npy --db ../ab.db --hook h --seq-len 4 >/dev/null 2>&1)
check '[ "$(sqlite3 "$T/ab.db" "SELECT sum(n_tokens) FROM activations")" = 12 ]' "two files of one name are two documents, a file under two spellings one"
# import --pair-with: a transcoder's target, computed elsewhere, onto the input's sequences (two
# plain imports are two documents whose sequences never pair: sae-train refused the transcoder)
$PY - "$T" <<'PY'
import sys, numpy as np
d = sys.argv[1]
r = np.random.default_rng(1)
a = r.standard_normal((300, 12)).astype(np.float32)
np.save(d + "/pin.npy", a); np.save(d + "/pin2.npy", a)
np.save(d + "/pout.npy", (a @ r.standard_normal((12, 6))).astype(np.float32))
np.save(d + "/pout_short.npy", np.zeros((299, 6), np.float32))
np.save(d + "/pout12.npy", np.ones((300, 12), np.float32))
PY
$BIN import --npy "$T/pin.npy" --db "$T/p.db" --hook tin --seq-len 64 >/dev/null 2>&1
$BIN import --npy "$T/pin.npy" --db "$T/p1.db" --hook tin --seq-len 64 >/dev/null 2>&1
$BIN import --npy "$T/pout.npy" --db "$T/p1.db" --hook tout2 --seq-len 64 >/dev/null 2>&1
out=$($BIN sae-train --db "$T/p1.db" --hook tin --hook-out tout2 --arch transcoder --d-sae 16 --k 2 --tokens 512 --batch 64 --out "$T/ptc0" 2>&1)
check '[ $? -ne 0 ] && [[ "$out" == *"hold no activations of tout2"* ]]' "two plain imports do not pair: $out"
out=$($BIN import --npy "$T/pout.npy" --db "$T/p.db" --hook tout --pair-with tin 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"300 tokens in 5 sequences as hook tout"* ]]' "import --pair-with: $out"
$BIN export --db "$T/p.db" --hook tout --npy "$T/pback.npy" >/dev/null 2>&1
check '$PY -c "import numpy as np,sys; sys.exit(0 if (np.load(sys.argv[1]) == np.load(sys.argv[2])).all() else 1)" "$T/pout.npy" "$T/pback.npy"' "export of a paired import gives back its array"
check '[ "$(sqlite3 "$T/p.db" "SELECT count(*) FROM sequences")" = 5 ] && [ "$(sqlite3 "$T/p.db" "SELECT count(DISTINCT sequence_id) FROM activations")" = 5 ]' "a paired import adds no sequences"
out=$($BIN sae-train --db "$T/p.db" --hook tin --hook-out tout --arch transcoder --d-sae 16 --k 2 --tokens 512 --batch 64 --out "$T/ptc" 2>&1)
check '[ $? -eq 0 ] && [ -s "$T/ptc/sae_weights.safetensors" ]' "a transcoder trains on a paired import: $out"
out=$($BIN import --npy "$T/pout.npy" --db "$T/p.db" --hook tout --pair-with tin 2>&1)
prows=$(sqlite3 "$T/p.db" "SELECT sum(a.n_tokens) FROM activations a JOIN hooks h ON h.id = a.hook_id WHERE h.name = 'tout'")
check '[[ "$out" == *"300 tokens in 5 sequences"* ]] && [ "$prows" = 300 ]' "a paired import again replaces its rows ($prows): $out"
psum() { sqlite3 "$T/p.db" "SELECT count(*), sum(length(data)) FROM activations; SELECT count(*) FROM hooks; SELECT count(*) FROM sequences"; }
pbefore=$(psum)
pbad() { out=$($BIN import "$@" --db "$T/p.db" 2>&1); rc=$?; }
pbad --npy "$T/pout_short.npy" --hook t2 --pair-with tin
check '[ $rc -eq 1 ] && [[ "$out" == *"pout_short.npy: 299 rows, but hook tin holds 300 tokens"* ]]' "pair-with: rows must match the partner's tokens: $out"
pbad --npy "$T/pout.npy" --hook t2 --pair-with nope
check '[ $rc -eq 1 ] && [[ "$out" == *"p.db: no hook nope to pair with"* ]]' "pair-with an unknown hook: $out"
pbad --npy "$T/pout.npy" --hook t2 --pair-with tin --seq-len 32
check '[ $rc -eq 1 ] && [[ "$out" == *"--seq-len 32, but hook tin"*"sequences are of 64 rows"* ]]' "pair-with and another --seq-len: $out"
pbad --npy "$T/pout.npy" --hook t2 --pair-with tin --tokens "$T/ids.npy"
check '[ $rc -eq 1 ] && [[ "$out" == *"a paired import takes no --tokens"* ]]' "pair-with and --tokens: $out"
pbad --npy "$T/pin.npy" --hook tin --pair-with tin
check '[ $rc -eq 1 ] && [[ "$out" == *"--hook and --pair-with both name tin"* ]]' "pair-with itself: $out"
$BIN import --npy "$T/pin2.npy" --db "$T/p.db" --hook tother --seq-len 64 >/dev/null 2>&1
pbefore=$(psum)
pbad --npy "$T/pout12.npy" --hook tother --pair-with tin
check '[ $rc -eq 1 ] && [[ "$out" == *"hook tother already holds 5 sequences that tin does not"* ]]' "pair-with into a hook holding other files' rows: $out"
$BIN import --npy "$T/pout.npy" --db "$T/p.db" --hook tlen --seq-len 128 >/dev/null 2>&1
pbefore=$(psum)
pbad --npy "$T/pout.npy" --hook tlen --pair-with tin
check '[ $rc -eq 1 ] && [[ "$out" == *"hook tlen already holds sequences of 128 rows, not tin'\''s 64 (rows of another file); import the paired rows under another --hook name"* ]] && [[ "$out" != *"--seq-len for import"* ]]' "pair-with into a hook of another sequence length: another --hook name, not --seq-len (which a paired import refuses): $out"
check '[ "$(psum)" = "$pbefore" ]' "failed paired imports leave the database unchanged"
out=$($BIN import --npy "$T/pout.npy" --db "$T/pnew.db" --hook tout --pair-with tin 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"--pair-with tin: a paired import goes into the database holding that hook"*"pnew.db: cannot open"* ]] && [ ! -e "$T/pnew.db" ]' "a paired import into a missing database creates none: $out"
# an export killed mid-write left OUT.tmp.PID for good: the next export of OUT removes it
(exit 0) & dpid=$!; wait $dpid
echo partial > "$T/back.npy.tmp.$dpid"
$BIN export --db "$T/i.db" --hook resid --npy "$T/back.npy" >/dev/null 2>&1
check '[ $? -eq 0 ] && [ ! -e "$T/back.npy.tmp.$dpid" ]' "export removes a killed export's temp"
ROUND='import sys, numpy as np
def rnd(a, dt):
    if dt == "f16": return a.astype(np.float16).astype(np.float32)
    if dt == "bf16":
        u = a.view(np.uint32).astype(np.uint64)
        return (((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    return a' 
$BIN import --npy "$T/acts.npy" --db "$T/b.db" --hook r16 --dtype bf16 >/dev/null 2>&1
$BIN export --db "$T/b.db" --hook r16 --npy "$T/b16.npy" >/dev/null 2>&1
check '$PY -c "$ROUND; a=np.load(sys.argv[1]); b=np.load(sys.argv[2]); sys.exit(0 if (rnd(a, \"bf16\")==b).all() else 1)" "$T/acts.npy" "$T/b16.npy"' "bf16 round trip equals round-to-nearest-even"
out=$($BIN info --db "$T/i.db" 2>&1)
check '[[ "$out" == *"hook 1: resid"*"width 24"*"5 sequences, 300 tokens"* ]]' "info: $out"
check '[[ "$out" == *"model 1: import (imported .npy)"* && "$out" != *"(("* ]]' "info names an import once in parentheses: $out"
# names from the database as a terminal shows them safely (an escape sequence went out raw)
$BIN import --npy "$T/acts.npy" --db "$T/esch.db" --hook "$(printf 'h\033]0;x\007')" >/dev/null 2>&1
out=$($BIN info --db "$T/esch.db" 2>&1)
check '[[ "$out" == *"hook 1: h\\x1b]0;x\\x07 (model 1)"* ]] && [[ "$out" != *$'"'"'\033'"'"'* ]]' "info escapes a hook name's control bytes: $out"
# bad input: one line, non-zero, database unchanged
sum() { sqlite3 "$T/i.db" "SELECT count(*), sum(length(data)) FROM activations" 2>/dev/null; }
before=$(sum)
for args in "--npy $T/missing.npy" "--npy $T/bad3d.npy" "--npy $T/acts.npy --tokens $T/ids_short.npy"; do
    out=$($BIN import $args --db "$T/i.db" --hook other 2>&1); rc=$?
    check '[ $rc -eq 1 ] && [ $(printf "%s\n" "$out" | wc -l) -eq 1 ]' "import $args: rc $rc: $out"
done
out=$($BIN import --npy "$T/acts.npy" --db "$T/i.db" --hook resid --seq-len 32 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"sequence length 64"* ]]' "reimport with other seq-len: $out"
check '[ "$(sum)" = "$before" ]' "failed imports leave the database unchanged"
out=$($BIN export --db "$T/i.db" --hook nope --npy "$T/x.npy" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"stored hooks: resid"* ]] && [ ! -e "$T/x.npy" ]' "unknown hook: $out"
out=$($BIN info --db "$T/nothere.db" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *nothere.db* ]] && [ ! -e "$T/nothere.db" ]' "info on a missing file: $out"
head -c 5000 /dev/urandom > "$T/junk.db"
out=$($BIN info --db "$T/junk.db" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"not a database"* ]]' "info on junk: $out"
sqlite3 "$T/i.db" "PRAGMA user_version = 7"
out=$($BIN info --db "$T/i.db" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"newer saelite"* ]]' "newer schema refused: $out"
out=$($BIN export --db "$T/i.db" 2>&1)
check '[ $? -eq 2 ]' "missing flags are a usage error"

# ---- extract (needs the model and tokenizer modules) -----------------------------------------
if ! $BIN help 2>/dev/null | grep -q '^  extract '; then
    echo "SKIP: saelite has no extract command in this build"
else
# A self-contained byte-level tokenizer (256 byte tokens, 2 merges, <|endoftext|>) and a tiny
# random model over its 259 ids, so the test needs nothing from data/.
$PY - "$T" <<'PY'
import json, os, random, sys
d = sys.argv[1]
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs = bs[:]
n = 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
b2u = {b: chr(c) for b, c in zip(bs, cs)}
enc = {b2u[b]: i for i, b in enumerate(range(256))}
enc["Ġt"] = 256; enc["he"] = 257; enc["<|endoftext|>"] = 258
os.makedirs(d + "/tok")
json.dump(enc, open(d + "/tok/encoder.json", "w"))
open(d + "/tok/vocab.bpe", "w").write("#version: 0.2\nĠ t\nh e\n")
r = random.Random(1)
words = ("the of and to in is was he for it with as his on be at by had are but from or have an "
         "they which one you were her all she there would their we him been has when who will").split()
docs = []
for i in range(40):
    docs.append(" ".join(r.choice(words) for _ in range(r.randint(3, 60))).capitalize() + ".")
docs[7] = "caf\u00e9 na\u00efve \u2014 \U0001F600 emoji"
open(d + "/corpus.txt", "w").write("\n\n".join(docs) + "\n")
open(d + "/empty.txt", "w").write("\n\n\n")
with open(d + "/corpus.jsonl", "w") as f:
    for i, t in enumerate(docs[:10]):
        f.write(json.dumps({"text": t, "id": "d%d" % i, "genre": "news" if i % 2 else "fiction"}) + "\n")
open(d + "/bad.txt", "wb").write(b"valid start \xff\xfe\xc3 broken \xe2\x82 end\n\nsecond")
PY
$BIN init-model --layers 2 --d-model 32 --heads 2 --ctx 32 --vocab 259 --seed 3 -o "$T/m" >/dev/null 2>&1
$BIN init-model --layers 2 --d-model 32 --heads 2 --ctx 32 --vocab 259 --seed 4 -o "$T/m_other" >/dev/null 2>&1
HOOKS=blocks.0.mlp.hook_post,blocks.1.hook_resid_post
# --commit-mb 0.1: a commit every ~5 batches, so kills land between commits
EX=($BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus.txt" --hook $HOOKS --ctx 16 --batch 2 --commit-mb 0.1)
ex() { "${EX[@]}" "$@"; }
dbhash() { sqlite3 "$1" "SELECT 'd', id, source, ordinal, name, genre, checksum, text FROM documents ORDER BY id;
  SELECT 's', id, document_id, start, n_tokens, bos, hex(tokens) FROM sequences ORDER BY id;
  SELECT 't', * FROM tokens ORDER BY sequence_id, position;
  SELECT 'h', * FROM hooks ORDER BY id;
  SELECT 'a', id, hook_id, sequence_id, n_tokens, hex(data) FROM activations ORDER BY id;
  SELECT 'm', id, name, path, config, checksum FROM models ORDER BY id;
  SELECT 'r', id, kind, params, status FROM runs ORDER BY id;" | md5sum | cut -c1-32; }
acts() { sqlite3 -cmd ".timeout 5000" "$1" "SELECT count(*) FROM activations" 2>/dev/null || echo 0; }
# a rerun over stored batches computes nothing: its progress lines' rate is 0 (it counted the
# stored tokens: 99k tok/s, ETA 00:04 for a resume at 8.2k tok/s and 45 s to go, an audit)
ex --db "$T/prog.db" >/dev/null 2>&1
out=$(SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.0001 "${EX[@]}" --db "$T/prog.db" 2>&1 >/dev/null)
check '[ $? -eq 0 ] && [[ "$out" == *"tok/s"* ]] && ! grep -Eq "[1-9][0-9.]*[kMG]? tok/s" <<< "$out"' "a rerun over stored batches shows no rate: $(head -c 300 <<< "$out")"

t0=$(date +%s%N)
out=$(ex --db "$T/a.db" 2>&1)
rc=$?
run_ms=$((($(date +%s%N) - t0) / 1000000))
check '[ $rc -eq 0 ] && [[ "$out" == *"blocks.0.mlp.hook_post: "*" x 128 x 4 bytes"* ]]' "extract: $out"
ref=$(dbhash "$T/a.db")
nacts=$(acts "$T/a.db")
check '[ "$nacts" -gt 100 ]' "extract stored $nacts activation rows"
check '[ "$(sqlite3 "$T/a.db" "PRAGMA integrity_check")" = ok ]' "integrity after extract"
# the documented schema answers SQL: every token row has text; BOS rows have no byte span
check '[ "$(sqlite3 "$T/a.db" "SELECT count(*) FROM tokens WHERE text IS NULL OR (position > 0 AND byte_start IS NULL)")" = 0 ]' "token rows complete"
check '[ "$(sqlite3 "$T/a.db" "SELECT t.text FROM tokens t JOIN sequences s ON s.id = t.sequence_id JOIN documents d ON d.id = s.document_id WHERE d.ordinal = 7 AND s.start = 0 AND t.position BETWEEN 1 AND 3" | tr -d "\n")" = "caf" ]' "token text of document 7"
# --dry-run computes the same windows and stores nothing
out=$(ex --dry-run --db "$T/dry.db" 2>&1)
check '[ $? -eq 0 ] && [ ! -e "$T/dry.db" ] && [[ "$out" == *"dry run"* ]] && [[ "$out" == *"298 windows, 4448 tokens in"* ]]' "dry run: $out"
# rerunning a finished run changes nothing
ex --db "$T/a.db" >/dev/null 2>&1
check '[ "$(dbhash "$T/a.db")" = "$ref" ]' "rerun of a finished extract is a no-op"

# The corpus 8 times over, so that kills and Ctrl-C land inside a run even on a fast machine.
for i in $(seq 8); do cat "$T/corpus.txt"; echo; done > "$T/big.txt"
EXB=("${EX[@]/"$T/corpus.txt"/"$T/big.txt"}")
t0=$(date +%s%N)
"${EXB[@]}" --db "$T/big.db" >/dev/null 2>&1
run_ms=$((($(date +%s%N) - t0) / 1000000))
bigref=$(dbhash "$T/big.db")
# The main thread runs forwards itself while it would wait for one (its own copy of a small
# fp32 model): a model whose forward outweighs the storage, so that it does; the database must be
# the one a single thread makes.
$BIN init-model --layers 2 --d-model 192 --heads 4 --ctx 64 --vocab 259 --seed 5 -o "$T/mw" >/dev/null 2>&1
WX=($BIN extract --model "$T/mw" --tokenizer "$T/tok" --corpus "$T/big.txt" --hook blocks.1.mlp.hook_post,blocks.1.hook_resid_mid --ctx 64 --batch 2)
out=$("${WX[@]}" --db "$T/w2.db" 2>&1)
nmain=$(sed -n 's/.*and \([0-9]*\) batches on the main thread.*/\1/p' <<<"$out")
SAELITE_THREADS=1 "${WX[@]}" --db "$T/w1.db" >/dev/null 2>&1
check '[ "${nmain:-0}" -gt 0 ] && [ "$(dbhash "$T/w1.db")" = "$(dbhash "$T/w2.db")" ]' "batches the main thread computed (${nmain:-none}) give the bits of one thread: $out"
rm -f "$T"/w[12].db*
# a dry run on 2 cores runs the same side-by-side forwards (one OpenBLAS thread each) rather than
# splitting each GEMM over two threads; with more cores the pool's estimate decides
if [ "$(nproc)" = 2 ]; then
    out=$(env -u OPENBLAS_NUM_THREADS "${WX[@]}" --dry-run 2>&1)
    nmain=$(sed -n 's/.*and \([0-9]*\) batches on the main thread.*/\1/p' <<<"$out")
    check '[ "${nmain:-0}" -gt 0 ]' "a dry run on 2 cores computes on the main thread too: $out"
fi
# a second timed run: a load spike during the first would put most kills after the end
t0=$(date +%s%N)
"${EXB[@]}" --db "$T/big2.db" >/dev/null 2>&1
ms2=$((($(date +%s%N) - t0) / 1000000))
[ $ms2 -lt $run_ms ] && run_ms=$ms2
rm -f "$T/big2.db" "$T/big2.db-wal" "$T/big2.db-shm"
# kill -9 at random moments of a run (uniform over the first 80% of the time an uninterrupted run
# took, the shorter of two), then
# resume: the final database must equal the uninterrupted one. Trial 3 is killed twice.
killed=0
for trial in 1 2 3; do
    rm -f "$T/k.db" "$T/k.db-wal" "$T/k.db-shm"
    for k in 1 $([ $trial -eq 3 ] && echo 2); do
        ms=$((RANDOM % (run_ms * 4 / 5 + 1)))
        "${EXB[@]}" --db "$T/k.db" >/dev/null 2>&1 & pid=$!  # $! is saelite itself, not a subshell
        sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
        kill -9 $pid 2>/dev/null && killed=$((killed + 1))
        wait $pid 2>/dev/null
        echo "trial $trial: kill -9 at ${ms} ms of ${run_ms}: $(acts "$T/k.db") activation rows stored"
        [ -e "$T/k.db" ] && [ "$(sqlite3 "$T/k.db" "PRAGMA integrity_check")" != ok ] && bad "integrity after kill (trial $trial)"
    done
    "${EXB[@]}" --db "$T/k.db" >/dev/null 2>&1
    check '[ $? -eq 0 ] && [ "$(dbhash "$T/k.db")" = "$bigref" ]' "trial $trial: resume after kill -9 equals the uninterrupted run"
done
check '[ $killed -ge 2 ]' "killed only $killed of 4 runs (too fast to interrupt?)"
# Ctrl-C stops cleanly after a batch with a message, and a rerun completes (up to 3 tries: a
# run can finish before the signal lands)
interrupted=0
for try in 1 2 3; do
    rm -f "$T/c.db" "$T/c.db-journal" "$T/c.db-wal" "$T/c.db-shm"
    "${EXB[@]}" --db "$T/c.db" > "$T/int.out" 2>&1 & pid=$!
    # half-way through (a third, then a sixth on retries: a retry means the run went faster than
    # the reference run, as when a loaded machine frees up), not polling the file: a poll holding
    # a lock at the wrong moment only shifts when commits land
    ms=$((run_ms * (try == 1 ? 3 : try == 2 ? 2 : 1) / 6))
    sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
    kill -INT $pid 2>/dev/null; wait $pid; rc=$?
    echo "SIGINT try $try: exit $rc, $(acts "$T/c.db") activation rows stored"
    [ $rc -eq 0 ] && continue
    interrupted=1
    check '[ $rc -eq 130 ] && grep -q "interrupted after .* run the same command again to resume" "$T/int.out"' "SIGINT: exit $rc: $(cat "$T/int.out")"
    check '[ "$(sqlite3 "$T/c.db" "SELECT status FROM runs")" = running ]' "interrupted run stays 'running'"
    break
done
check '[ $interrupted -eq 1 ]' "SIGINT never landed before the run finished"
"${EXB[@]}" --db "$T/c.db" >/dev/null 2>&1
check '[ "$(dbhash "$T/c.db")" = "$bigref" ]' "resume after SIGINT equals the uninterrupted run"

# export equals `saelite forward` on the same tokens (second sequence: one batch with the first)
$BIN export --db "$T/a.db" --hook blocks.0.mlp.hook_post --npy "$T/e.npy" --tokens-npy "$T/e_ids.npy" --limit 32 >/dev/null 2>&1
ids=$($PY -c "import numpy as np,sys; print(','.join(map(str, np.load(sys.argv[1])[16:32])))" "$T/e_ids.npy")
$BIN forward --model "$T/m" --tokens "$ids" --hook blocks.0.mlp.hook_post --npy "$T/f.npy" >/dev/null 2>&1
check '$PY -c "import numpy as np,sys; a=np.load(sys.argv[1])[16:32]; b=np.load(sys.argv[2]).reshape(16,-1); sys.exit(0 if np.abs(a-b).max() <= 1e-6 else 1)" "$T/e.npy" "$T/f.npy"' "export equals forward"
# --pair-with an extracted hook: its windows are the model's, refused with the way round
cp "$T/a.db" "$T/ap.db"
out=$($BIN import --npy "$T/e.npy" --db "$T/ap.db" --hook mine --pair-with blocks.0.mlp.hook_post 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"hook blocks.0.mlp.hook_post holds extracted activations; --pair-with takes an imported hook"* ]] && [ "$(dbhash "$T/ap.db")" = "$(dbhash "$T/a.db")" ]' "pair-with an extracted hook: $out"
# f16 and bf16 stores round the f32 values
# (same windows and batches as the f32 run they are compared with: --max-tokens 64 cuts the last)
for dt in f32 f16 bf16; do
    ex --db "$T/$dt.db" --dtype $dt --max-tokens 64 >/dev/null 2>&1
    $BIN export --db "$T/$dt.db" --hook blocks.0.mlp.hook_post --npy "$T/$dt.npy" >/dev/null 2>&1
    check '$PY -c "$ROUND; a=np.load(sys.argv[1])[:64]; b=np.load(sys.argv[2]); sys.exit(0 if b.shape==(64,128) and (rnd(a, sys.argv[3])==b).all() else 1)" "$T/f32.npy" "$T/$dt.npy" $dt' "$dt extraction equals rounded f32"
done
check '[ "$(sqlite3 "$T/f16.db" "SELECT sum(n_tokens) FROM sequences")" = 64 ]' "--max-tokens 64 stores 64 tokens"
# the rate counts the tokens a run computed: a rerun of a finished extraction computes none
out=$(ex --db "$T/f16.db" --dtype f16 --max-tokens 64 2>&1 | tail -n 1)
check '[[ "$out" == *"64 tokens in "*" s (0 tok/s)"* ]]' "a rerun's rate: $out"
# another --max-tokens on the same database: a larger one extends it as a fresh run would (the
# window the first cap cut short gives its activations to the whole one, so no hook holds a token
# twice), a smaller one changes nothing (was: the cut window and the whole one both stored)
win() { sqlite3 "$1" "SELECT a.hook_id, q.document_id, q.start, q.n_tokens FROM activations a JOIN sequences q ON q.id = a.sequence_id ORDER BY 1, 2, 3" | md5sum; }
ex --db "$T/mt.db" --max-tokens 40 >/dev/null 2>&1
check '[ "$(sqlite3 "$T/mt.db" "SELECT count(*) FROM sequences WHERE n_tokens = 8")" = 1 ]' "--max-tokens 40 cuts a window to 8 tokens"
ex --db "$T/mt.db" --max-tokens 100 >/dev/null 2>&1; rc=$?
ex --db "$T/mt_ref.db" --max-tokens 100 >/dev/null 2>&1
check '[ $rc -eq 0 ] && [ "$(win "$T/mt.db")" = "$(win "$T/mt_ref.db")" ]' "a larger --max-tokens: the hooks' windows are a fresh run's"
check '[ "$(sqlite3 "$T/mt.db" "SELECT group_concat(t) FROM (SELECT sum(q.n_tokens) t FROM activations a JOIN sequences q ON q.id = a.sequence_id GROUP BY a.hook_id)")" = 100,100 ]' "a larger --max-tokens: 100 tokens a hook"
mthash() { sqlite3 "$1" "SELECT id, hook_id, sequence_id, hex(data) FROM activations ORDER BY id; SELECT * FROM sequences ORDER BY id" | md5sum; }
before=$(mthash "$T/mt.db")
ex --db "$T/mt.db" --max-tokens 40 >/dev/null 2>&1; rc=$?
check '[ $rc -eq 0 ] && [ "$(mthash "$T/mt.db")" = "$before" ] && [ "$(win "$T/mt.db")" = "$(win "$T/mt_ref.db")" ]' "a smaller --max-tokens changes nothing"
# JSONL with ids and genres, --no-bos
$BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus.jsonl" --hook blocks.0.hook_resid_pre --db "$T/j.db" --ctx 8 --no-bos >/dev/null 2>&1
check '[ "$(sqlite3 "$T/j.db" "SELECT name || genre FROM documents WHERE ordinal = 1")" = d1news ] && [ "$(sqlite3 "$T/j.db" "SELECT count(*) FROM sequences WHERE bos = 1")" = 0 ]' "JSONL ids/genres and --no-bos"
# the same corpus by another path: its documents are stored again, not shared with the hooks
# extracted before, and the plan says so (it said nothing; a user's copied database)
out=$(B=$(readlink -f "$BIN"); cd "$T" && "$B" extract --model m --tokenizer tok --corpus ./corpus.jsonl --hook blocks.0.hook_resid_mid --db j.db --ctx 8 --no-bos 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"note: j.db already holds this corpus as '\''$T/corpus.jsonl'\''"*"again under '\''./corpus.jsonl'\''"*"if '\''$T/corpus.jsonl'\'' is this same file"* ]]' "another path to the same corpus: $out"
out=$($BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus.jsonl" --hook blocks.0.hook_mlp_out --db "$T/j.db" --ctx 8 --no-bos 2>&1)
check '[ $? -eq 0 ] && [[ "$out" != *"note: "*"already holds this corpus"* ]]' "the same path: no note: $out"
# another corpus that opens with the same document is not "this corpus" (the note compared the
# first document only, and its advice would have extracted the other corpus)
{ head -n 1 "$T/corpus.jsonl"; echo '{"id":"x1","text":"an entirely different second document."}'; } > "$T/other.jsonl"
cp "$T/j.db" "$T/j2.db"
out=$(B=$(readlink -f "$BIN"); cd "$T" && "$B" extract --model m --tokenizer tok --corpus other.jsonl --hook blocks.0.hook_resid_pre --db j2.db --ctx 8 --no-bos 2>&1)
check '[ $? -eq 0 ] && [[ "$out" != *"already holds this corpus"* ]]' "another corpus opening with the same document: no note: $out"
# a shorter corpus with the same first documents matches, and the note said "its stored
# documents are this corpus's first ones", which a longer stored corpus is not (a review)
head -n 3 "$T/corpus.jsonl" > "$T/short.jsonl"
cp "$T/j.db" "$T/j3.db"
out=$(B=$(readlink -f "$BIN"); cd "$T" && "$B" extract --model m --tokenizer tok --corpus short.jsonl --hook blocks.0.hook_resid_pre --db j3.db --ctx 8 --no-bos 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"already holds this corpus as '\''$T/corpus.jsonl'\'' (the path given then; its stored documents and this corpus'\''s have the same texts as far as both go)"* ]] && [[ "$out" != *"this corpus'\''s first ones"* ]]' "a shorter corpus with the same first documents: the note says no more than it knows: $out"
# the stored path is printed as a terminal shows it: an escape sequence in a file name went to
# the terminal raw (a review: stdout printed database strings as they were)
ESCN=$(printf 'c\033[2Jx.jsonl')
cp "$T/corpus.jsonl" "$T/$ESCN"
$BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/$ESCN" --hook blocks.0.hook_resid_pre --db "$T/esc.db" --ctx 8 --no-bos >/dev/null 2>&1
out=$($BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus.jsonl" --hook blocks.0.hook_mlp_out --db "$T/esc.db" --ctx 8 --no-bos 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"as '\''$T/c\\x1b[2Jx.jsonl'\''"* ]] && [[ "$out" != *$'"'"'\033'"'"'* ]]' "a stored path with an escape byte is printed escaped: $out"
# a transcoder pairs two hooks of one forward pass: one computed in fp32 and one in bf16 were
# paired silently (the run's precision set by hand here: a machine without bf16 cannot make it)
out=$($BIN sae-train --db "$T/j.db" --hook blocks.0.hook_resid_pre --hook-out blocks.0.hook_mlp_out --arch transcoder --d-sae 16 --k 2 --tokens 256 --batch 64 --out "$T/tcp" 2>&1)
check '[ $? -eq 0 ]' "a transcoder over two fp32 extracts of one corpus path: $out"
cp "$T/j.db" "$T/jp.db"
sqlite3 "$T/jp.db" "UPDATE runs SET params = json_set(params, '\$.precision', 'bf16') WHERE kind = 'extract' AND instr(params, 'blocks.0.hook_mlp_out')"
out=$($BIN sae-train --db "$T/jp.db" --hook blocks.0.hook_resid_pre --hook-out blocks.0.hook_mlp_out --arch transcoder --d-sae 16 --k 2 --tokens 256 --batch 64 --out "$T/tcp2" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"come from extracts of different precision (fp32 and bf16)"* ]] && [ ! -e "$T/tcp2" ]' "a transcoder over fp32 and bf16 hooks: $out"
# analyze measured a transcoder against such a pair silently (its EV against another forward
# pass's target); it refuses it as sae-train does, and measures the one-precision pair
cp "$T/jp.db" "$T/jpa.db"
out=$($BIN analyze --db "$T/jpa.db" --sae "$T/tcp" --no-model --all 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"jpa.db: hooks blocks.0.hook_resid_pre and blocks.0.hook_mlp_out come from extracts of different precision (fp32 and bf16)"* ]] && [ -z "$(sqlite3 "$T/jpa.db" "SELECT name FROM sqlite_master WHERE name = '"'ana_metrics'"'")" ]' "analyze: a transcoder over fp32 and bf16 hooks: $out"
cp "$T/j.db" "$T/ja.db"
out=$($BIN analyze --db "$T/ja.db" --sae "$T/tcp" --no-model --all 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"explained variance"* ]]' "analyze: a transcoder over two fp32 extracts: $out"
# ... and of the same windows: blocks.0.hook_resid_mid came by another path to the corpus above,
# so its sequences are not hook_mlp_out's; sae-train started and failed at its first sequence
# with "no activations of hook blocks.0.hook_mlp_out for sequence N", the cause unsaid, and
# analyze likewise (a copy of tcp named as trained on hook_resid_mid)
out=$($BIN sae-train --db "$T/j.db" --hook blocks.0.hook_resid_mid --hook-out blocks.0.hook_mlp_out --arch transcoder --d-sae 16 --k 2 --tokens 256 --batch 64 --out "$T/tcw" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"j.db: "*" of hook blocks.0.hook_resid_mid'"'"'s "*" sequences hold no activations of blocks.0.hook_mlp_out"*"store both with one multi-hook extract"* ]] && [ ! -e "$T/tcw" ]' "a transcoder over hooks of other windows: $out"
cp -r "$T/tcp" "$T/tcw_a"
sed -i 's/blocks\.0\.hook_resid_pre/blocks.0.hook_resid_mid/g' "$T/tcw_a/cfg.json"
out=$($BIN analyze --db "$T/ja.db" --sae "$T/tcw_a" --no-model --all 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"of hook blocks.0.hook_resid_mid'"'"'s "*" sequences hold no activations of blocks.0.hook_mlp_out"* ]]' "analyze: a transcoder over hooks of other windows: $out"
# ... or the output hook's extract stopped sooner (another --max-tokens, same path and flags): the
# line named only another corpus path, --bos choice or imports
cp "$T/j.db" "$T/jm.db"
$BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus.jsonl" --hook blocks.0.hook_attn_out --db "$T/jm.db" --ctx 8 --no-bos --max-tokens 24 >/dev/null 2>&1
out=$($BIN sae-train --db "$T/jm.db" --hook blocks.0.hook_resid_pre --hook-out blocks.0.hook_attn_out --arch transcoder --d-sae 16 --k 2 --tokens 256 --batch 64 --out "$T/tcm" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"sequences hold no activations of blocks.0.hook_attn_out"*"--max-tokens, one left unfinished"* ]] && [ ! -e "$T/tcm" ]' "a transcoder whose output hook was extracted over fewer tokens: $out"
# a hot journal (a writer killed mid-transaction, as extract under kill -9): sae-train --db, a
# writer, rolls it back first as docs/store.md says (its read-only source open failed: "attempt
# to write a readonly database ... only a writer can roll back")
cp "$T/j.db" "$T/hot.db"
$PY tests/hot_journal.py "$T/hot.db"
out=$($BIN sae-train --db "$T/hot.db" --hook blocks.0.hook_resid_pre --d-sae 16 --k 2 --tokens 256 --batch 64 --out "$T/hotsae" 2>&1)
check '[ $? -eq 0 ] && [ ! -e "$T/hot.db-journal" ] && [ -e "$T/hotsae/sae_weights.safetensors" ]' "sae-train rolls a hot journal back: $out"
# invalid UTF-8 is kept as byte tokens; text stays valid UTF-8 in the tokens table
$BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/bad.txt" --hook blocks.0.hook_resid_pre --db "$T/u.db" --ctx 8 >/dev/null 2>&1
check '[ $? -eq 0 ] && [ "$(sqlite3 "$T/u.db" "SELECT count(*) FROM tokens WHERE text = char(65533)")" -ge 3 ]' "invalid UTF-8 corpus"

# OpenBLAS's kernels: named in the plan; Debian's 0.3.21 runs Prescott (SSE3) kernels on CPUs it
# does not know (6-8x slower sgemm on an Intel Xeon of model 207), so saelite asks for the ones
# the CPU can run unless OPENBLAS_CORETYPE is set, and keeps a value that is set
out=$(env -u OPENBLAS_CORETYPE $BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus.txt" --hook blocks.0.hook_resid_pre --ctx 16 --dry-run 2>&1)
core=$(sed -n 's/^  matmuls: fp32 (OpenBLAS \(.*\))$/\1/p' <<< "$out")
check '[ -n "$core" ]' "the fp32 plan names OpenBLAS's kernels: $out"
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    check '[ "$core" != Prescott ]' "OpenBLAS on a CPU with AVX2 runs more than its SSE3 kernels (got $core)"
fi
out=$(OPENBLAS_CORETYPE=Prescott $BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus.txt" --hook blocks.0.hook_resid_pre --ctx 16 --dry-run 2>&1)
check '[[ "$out" == *"matmuls: fp32 (OpenBLAS Prescott)"* ]]' "a set OPENBLAS_CORETYPE is kept: $out"

# --precision bf16: refused (exit 1, no database) under SAELITE_NO_BF16; where the CPU has bf16,
# the stored activations are within 3% of the fp32 run's scale but not equal to them
PX=($BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus.txt" --hook blocks.1.hook_resid_post --ctx 16 --batch 2)
out=$(SAELITE_NO_BF16=1 "${PX[@]}" --db "$T/nobf.db" --precision bf16 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"SAELITE_NO_BF16"* ]] && [ ! -e "$T/nobf.db" ]' "bf16 refused: $out"
# the fallback and the refusal say which variable turned bf16 off (they blamed the CPU, an audit)
out=$(SAELITE_NO_BF16=1 "${PX[@]}" --dry-run --precision auto 2>&1)
check '[[ "$out" == *"matmuls: fp32 (no bf16: disabled by SAELITE_NO_BF16=1)"* ]]' "auto under SAELITE_NO_BF16: $out"
out=$(ONEDNN_MAX_CPU_ISA=AVX2 "${PX[@]}" --db "$T/nobf.db" --precision bf16 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"capped by ONEDNN_MAX_CPU_ISA=AVX2; HINT: unset it"* ]] && [ ! -e "$T/nobf.db" ]' "bf16 under an ISA cap: $out"
if "${PX[@]}" --dry-run --precision auto 2>&1 | grep -q "matmuls: bf16"; then
    "${PX[@]}" --db "$T/p32.db" >/dev/null 2>&1 && "${PX[@]}" --db "$T/p16.db" --precision bf16 >/dev/null 2>&1
    check '[ $? -eq 0 ]' "extract --precision bf16"
    $BIN export --db "$T/p32.db" --hook blocks.1.hook_resid_post --npy "$T/p32.npy" >/dev/null 2>&1
    $BIN export --db "$T/p16.db" --hook blocks.1.hook_resid_post --npy "$T/p16.npy" >/dev/null 2>&1
    check '$PY -c "import numpy as np,sys; a=np.load(sys.argv[1]); b=np.load(sys.argv[2]); d=np.abs(a-b).max(); sys.exit(0 if a.shape==b.shape and 0 < d <= 0.03*np.abs(a).max() else 1)" "$T/p32.npy" "$T/p16.npy"' \
        "bf16 extract within 3% of fp32 (and not equal)"
    check '[ "$(sqlite3 "$T/p16.db" "SELECT count(*) FROM runs WHERE params LIKE '"'"'%precision%bf16%'"'"'")" = 1 ] && [ "$(sqlite3 "$T/p32.db" "SELECT count(*) FROM runs WHERE params LIKE '"'"'%precision%'"'"'")" = 0 ]' \
        "a bf16 extract is a run of its own (fp32 runs keep their parameters)"
fi

# bad input: one line, exit 1, stored data untouched
before=$(dbhash "$T/a.db")
one_line_fail() { local out rc; out=$("$@" 2>&1); rc=$?; [ $rc -eq 1 ] && [ $(printf "%s\n" "$out" | grep -c .) -le 6 ] && printf "%s\n" "$out" | tail -n 1 | grep -q "$EXPECT" || { echo "  got rc $rc: $out"; return 1; }; }
EXPECT="unknown hook 'blocks.9.nope'.*blocks.L.mlp.hook_post"
check 'one_line_fail $BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus.txt" --hook blocks.9.nope --db "$T/a.db"' "unknown hook"
EXPECT="exceeds the context"
check 'one_line_fail ex --db "$T/a.db" --ctx 64' "--ctx beyond n_ctx"
EXPECT="missing.txt"
check 'one_line_fail $BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/missing.txt" --hook $HOOKS --db "$T/a.db"' "missing corpus"
EXPECT="no text"
check 'one_line_fail $BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/empty.txt" --hook $HOOKS --db "$T/a.db"' "empty corpus"
EXPECT="another model"
check 'one_line_fail $BIN extract --model "$T/m_other" --tokenizer "$T/tok" --corpus "$T/corpus.txt" --hook $HOOKS --db "$T/a.db" --ctx 16' "different model"
EXPECT="sequence length 16"
check 'one_line_fail ex --db "$T/a.db" --ctx 8' "other --ctx for stored hooks"
EXPECT="stored as f32, not bf16"
check 'one_line_fail ex --db "$T/a.db" --dtype bf16' "other --dtype for stored hooks"
# a hook's rows come from one --bos choice and one precision (both mixed in before, exit 0)
EXPECT="made with --bos; this run's (--no-bos)"
check 'one_line_fail ex --db "$T/a.db" --no-bos' "other --bos for stored hooks"
if "${EX[@]}" --dry-run --precision auto 2>&1 | grep -q "matmuls: bf16"; then
    EXPECT="computed in fp32; this run computes in bf16"
    check 'one_line_fail ex --db "$T/a.db" --precision bf16' "other --precision for stored hooks"
fi
# another tokenizer into the stored corpus fails at the first window, after the setup made the
# new hook and the run: both are taken back (they fixed the hook's dtype, so the corrected
# command was refused, and info called the run unfinished: an audit)
mkdir -p "$T/tok_plain"; cp "$T/tok/encoder.json" "$T/tok_plain/"; printf '#version: 0.2\n' > "$T/tok_plain/vocab.bpe"
EXPECT="holds other tokens"
check 'one_line_fail $BIN extract --model "$T/m" --tokenizer "$T/tok_plain" --corpus "$T/corpus.txt" --hook blocks.0.hook_resid_pre --db "$T/a.db" --ctx 16 --batch 2' "another tokenizer into a stored corpus"
check '[ "$(sqlite3 "$T/a.db" "SELECT count(*) FROM runs WHERE status <> '"'"'done'"'"'")" = 0 ]' "the refused run left no run row"
EXPECT="not a database"
check 'one_line_fail ex --db "$T/junk.db"' "junk database"
EXPECT="cannot"
check 'one_line_fail ex --db "/proc/saelite_test.db"' "unwritable database path"
check '[ "$(dbhash "$T/a.db")" = "$before" ]' "failed runs leave the database as it was"
# ... and into a new file: none is left
EXPECT="holds no text"
check 'one_line_fail $BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/empty.txt" --hook $HOOKS --db "$T/new.db" && [ ! -e "$T/new.db" ]' "empty corpus into a new file"
EXPECT="no room for a text token"
check 'one_line_fail ex --db "$T/new.db" --max-tokens 1 && [ ! -e "$T/new.db" ]' "--max-tokens 1 with a BOS"
# a full disk (simulated with a file size limit) fails cleanly; stored rows stay; a rerun finishes
ex --db "$T/q.db" --max-tokens 200 >/dev/null 2>&1
n0=$(acts "$T/q.db")
# (but the window the cap cut short: its activations go to the whole window the rerun extracts)
cut=$(sqlite3 "$T/q.db" "SELECT max(id) FROM sequences")
qrows() { sqlite3 "$T/q.db" "SELECT id, sequence_id, hex(data) FROM activations WHERE sequence_id < $cut ORDER BY id" | md5sum; }
q0=$(qrows)
out=$(trap '' XFSZ; ulimit -f 1500; ex --db "$T/q.db" 2>&1 >/dev/null); rc=$?
check '[ $rc -eq 1 ] && [[ "$out" == *"q.db"*"disk"* ]] && [ $(printf "%s\n" "$out" | wc -l) -eq 1 ]' "file size limit: rc $rc: $out"
check '[ "$(sqlite3 "$T/q.db" "PRAGMA integrity_check")" = ok ]' "integrity after a full disk"
check '[ "$n0" -gt 0 ] && [ "$(qrows)" = "$q0" ]' "rows stored before the full disk are unchanged"
ex --db "$T/q.db" >/dev/null 2>&1
check '[ $? -eq 0 ] && [ "$(sqlite3 "$T/q.db" "SELECT count(*) FROM runs WHERE status = '"'done'"'")" = 2 ]' "rerun after a full disk completes"
# the free-space check refuses up front (needs a small filesystem: a tmpfs, mounted as root, or
# for a user in a user and mount namespace of its own, unshare -rm, where the kernel allows one)
mkdir -p "$T/small"
small=()   # how the command runs with a 3 MB tmpfs on $T/small
if [ "$(id -u)" = 0 ]; then
    mount -t tmpfs -o size=3m tmpfs "$T/small" 2>/dev/null && small=(env)
elif unshare -rm sh -c 'mount -t tmpfs -o size=3m tmpfs "$1"' sh "$T/small" 2>/dev/null; then
    small=(unshare -rm sh -c 'mount -t tmpfs -o size=3m tmpfs "$1" && shift && exec "$@"' sh "$T/small")
fi
if [ ${#small[@]} -gt 0 ]; then
    out=$("${small[@]}" "${EX[@]}" --db "$T/small/s.db" 2>&1); rc=$?
    check '[ $rc -eq 1 ] && [[ "$out" == *"needs about"*"are free"*"--force"* ]]' "free-space check: $out"
    [ "$(id -u)" != 0 ] || umount "$T/small"
else
    skip=$((skip + 1)); echo "SKIP: free-space check (cannot mount a small tmpfs here)"
fi
out=$(ex --db "$T/x.db" --batch 0 2>&1)
check '[ $? -eq 2 ]' "--batch 0 is a usage error"

# ---- transcoders: the MLP's input and output from one multi-hook extract (paired rows), trained
# in place of the MLP, resumed bit-identical, evaluated, and spliced in by analyze
$BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus.txt" --ctx 16 --batch 2 \
    --hook blocks.0.ln2.hook_normalized,blocks.0.hook_mlp_out --db "$T/tc.db" >/dev/null 2>&1
TA=(--db "$T/tc.db" --hook blocks.0.ln2.hook_normalized --hook-out blocks.0.hook_mlp_out --d-sae 64 --k 4 --tokens 12288 --batch 256 --lr 0.003 --shuffle-buffer 1024 --val-frac 0.2)
for a in transcoder skip_transcoder; do
    out=$($BIN sae-train "${TA[@]}" --arch $a --out "$T/$a" 2>&1)
    check '[ $? -eq 0 ] && [[ "$out" == *"sae-train: $a (topk) blocks.0.ln2.hook_normalized -> blocks.0.hook_mlp_out, d_in 32 d_out 32 d_sae 64"* ]] && [[ "$out" == *"registered in"* ]]' "$a trains: $out"
    check 'grep -q "\"$a\"" "$T/$a/cfg.json" && grep -q "\"hook_name_out\":\s*\"blocks.0.hook_mlp_out\"" "$T/$a/cfg.json" && grep -q "\"d_out\":\s*32" "$T/$a/cfg.json"' "$a cfg.json"
    $BIN sae-train "${TA[@]}" --arch $a --out "$T/${a}_p" --max-steps 17 >/dev/null 2>&1
    $BIN sae-train "${TA[@]}" --arch $a --out "$T/${a}_p" --resume >/dev/null 2>&1
    check 'cmp -s "$T/$a/sae_weights.safetensors" "$T/${a}_p/sae_weights.safetensors"' "$a resume bit-identical"
    out=$($BIN analyze --db "$T/tc.db" --sae "$T/$a" --all --ce-seqs 8 2>&1)
    check '[ $? -eq 0 ]' "analyze splices the $a in place of the MLP: $out"
    q="SELECT group_concat(printf('%.6f', value)) FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE d.name = '$T/$a' AND m.name IN"
    check '[ "$(sqlite3 "$T/tc.db" "$q ('"'ce_clean'"')")" = "$(sqlite3 "$T/tc.db" "$q ('"'ce_sae_err'"')")" ] && [ -n "$(sqlite3 "$T/tc.db" "$q ('"'ce_loss_score'"')")" ]' "$a: the error term gives back the clean loss"
done
check '[ "$(sqlite3 "$T/tc.db" "SELECT count(*) FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE m.name = '"'explained_variance'"' AND m.value > 0")" = 2 ]' "analyze measures the transcoders against hook_mlp_out"
# writing the features' rows reports its own progress (it ran after the last ETA, an audit)
cp "$T/tc.db" "$T/tcprog.db" # a copy: the rerun replaces the analysis the checks below read
out=$(SAELITE_PROGRESS=lines SAELITE_PROGRESS_EVERY=0.000001 $BIN analyze --db "$T/tcprog.db" --sae "$T/transcoder" --all --no-model 2>&1 >/dev/null)
check '[ $? -eq 0 ] && grep -q "^writing .*feature" <<<"$out"' "analyze's writing phase has progress lines: $(tail -n 3 <<<"$out")"
# a reconstruction beyond float's range: x - xhat loses x, so the error term no longer gives the
# clean loss back and the scores measure the overflow; analyze says so (it stored -0.70, exit 0)
cp -r "$T/transcoder" "$T/tc_big"
$PY - "$T/tc_big/sae_weights.safetensors" <<'PY'
import json, struct, sys, numpy as np
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n]); o = h["W_dec"]["data_offsets"]; at = 8 + n + o[0]
w = np.frombuffer(bytes(b[at:8 + n + o[1]]), np.float32) * np.float32(1e30)
b[at:8 + n + o[1]] = w.astype(np.float32).tobytes(); open(p, "wb").write(b)
PY
out=$($BIN analyze --db "$T/tcprog.db" --sae "$T/tc_big" --all --ce-seqs 4 2>&1)
check '[ $? -eq 0 ] && grep -q "warning: .*tc_big: the SAE plus its error term gives CE" <<<"$out"' "analyze warns when the error term does not restore the model: $(tail -n 3 <<<"$out")"
# a pair whose target runs first in the block trained (the store cannot tell) and analyze said
# "gives N values, not 0 rows of 32" (an audit): it names the order now. sae-train refuses such
# a pair by the hooks' names before training; one made elsewhere (here: the names swapped in a
# copy's cfg.json) still meets analyze's check
out=$($BIN sae-train --db "$T/tc.db" --hook blocks.0.hook_mlp_out --hook-out blocks.0.ln2.hook_normalized --d-sae 64 --k 4 \
    --tokens 2048 --batch 256 --val-frac 0.2 --arch transcoder --out "$T/tc_rev0" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"--hook-out blocks.0.ln2.hook_normalized runs before its --hook blocks.0.hook_mlp_out"* ]] && [ ! -e "$T/tc_rev0" ]' "sae-train refuses a reversed transcoder pair: $out"
cp -r "$T/transcoder" "$T/tc_rev"
sed -i 's/blocks\.0\.ln2\.hook_normalized/@IN@/; s/blocks\.0\.hook_mlp_out/blocks.0.ln2.hook_normalized/; s/@IN@/blocks.0.hook_mlp_out/' "$T/tc_rev/cfg.json"
cp "$T/tc.db" "$T/tcrev.db"
out=$($BIN analyze --db "$T/tcrev.db" --sae "$T/tc_rev" --ce-seqs 4 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"output hook blocks.0.ln2.hook_normalized runs before its input hook"* ]]' "a reversed transcoder pair: $out"
# analyze --precision bf16 (the model's matmuls): refused under SAELITE_NO_BF16; where the CPU
# has bf16, the clean loss within 2% of the fp32 analysis's (a copy of the database)
out=$(SAELITE_NO_BF16=1 $BIN analyze --db "$T/tc.db" --sae "$T/transcoder" --all --ce-seqs 8 --precision bf16 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"SAELITE_NO_BF16"* ]]' "analyze --precision bf16 refused: $out"
if $BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus.txt" --hook blocks.0.hook_mlp_out --ctx 16 --dry-run --precision auto 2>&1 | grep -q "matmuls: bf16"; then
    cp "$T/tc.db" "$T/tc16.db"
    out=$($BIN analyze --db "$T/tc16.db" --sae "$T/transcoder" --all --ce-seqs 8 --precision bf16 2>&1)
    q="SELECT value FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE d.name = '$T/transcoder' AND m.name = 'ce_clean'"
    check '[ $? -eq 0 ] && $PY -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 0.02 * abs(a) else 1)" "$(sqlite3 "$T/tc.db" "$q")" "$(sqlite3 "$T/tc16.db" "$q")"' \
        "analyze --precision bf16: clean loss within 2% of fp32: $out"
    # and says so, printed and stored (neither was, an audit); fp32 analyses have no such row
    q="SELECT group_concat(value) FROM ana_metrics m JOIN ana_dicts d ON d.id = m.dict_id WHERE d.name = '$T/transcoder' AND m.name = 'model_bf16'"
    check '[[ "$out" == *"model matmuls: bf16 (oneDNN, ISA "* ]] && [ "$(sqlite3 "$T/tc16.db" "$q")" = "1.0" ] && [ -z "$(sqlite3 "$T/tc.db" "$q")" ]' \
        "analyze --precision bf16 records its precision: $(grep matmuls <<<"$out")"
fi
out=$($BIN report --db "$T/tc.db" --sae "$T/skip_transcoder" --top 4 --out "$T/tcrep" 2>&1)
check '[ $? -eq 0 ] && [ -s "$T/tcrep/index.html" ] && [ "$(ls "$T/tcrep"/feature_*.png | wc -l)" = 4 ]' "report renders a transcoder's dashboards: $out"
# --sae by registry id: the PNGs' sae-id metadata is that id (it said -1: an audit)
rid=$(sqlite3 "$T/tc.db" "SELECT max(id) FROM sae_registry WHERE dir = '$T/skip_transcoder'")
out=$($BIN report --db "$T/tc.db" --sae "$rid" --features 0 --no-global --out "$T/tcrep_id" 2>&1)
check '[ $? -eq 0 ] && grep -qa "sae-id.$rid" "$T/tcrep_id/feature_0.png"' "report --sae $rid (a registry id) writes sae-id $rid into the PNG: $out"
# --sae DIR: the PNGs' sae-id is the directory's registry id (analyze keys by directory; it said -1)
out=$($BIN report --db "$T/tc.db" --sae "$T/skip_transcoder" --features 0 --no-global --out "$T/tcrep_dir" 2>&1)
check '[ $? -eq 0 ] && grep -qa "sae-id.$rid" "$T/tcrep_dir/feature_0.png"' "report --sae DIR writes its registry id $rid into the PNG: $out"
# analyze --sae ID: the registry row's directory, analysed under that directory's name (it said
# "registry ids are not supported"); an unknown id and a database without a registry refused
cp "$T/tc.db" "$T/tcid.db"
n0=$(sqlite3 "$T/tcid.db" "SELECT count(*) FROM ana_dicts WHERE name = '$T/skip_transcoder'")
out=$($BIN analyze --db "$T/tcid.db" --sae "$rid" --ce-seqs 4 2>&1)
check '[ $? -eq 0 ] && [ "$(sqlite3 "$T/tcid.db" "SELECT count(*) FROM ana_dicts WHERE name = '"'$T/skip_transcoder'"' AND split = '"'val'"'")" = 1 ] && [ "$(sqlite3 "$T/tcid.db" "SELECT count(*) FROM ana_dicts WHERE name = '"'$rid'"'")" = 0 ] && [ "$n0" -ge 1 ]' "analyze --sae $rid analyses the registry's directory under its name: $out"
out=$($BIN analyze --db "$T/tcid.db" --sae "$T/skip_transcoder" --ce-seqs 4 --max-seqs 2 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"(replaced the earlier analysis of "*" sequences under the same key)"* ]]' "a --max-seqs run says it replaced the full analysis: $out"
out=$($BIN analyze --db "$T/tcid.db" --sae 987654 --ce-seqs 4 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"no SAE with id 987654"* ]]' "analyze --sae with an unknown id: $out"
sqlite3 "$T/tcid.db" "UPDATE sae_registry SET d_sae = d_sae + 1 WHERE id = $rid"
out=$($BIN analyze --db "$T/tcid.db" --sae "$rid" --ce-seqs 4 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"d_sae"* ]]' "analyze --sae ID whose directory holds another SAE is refused: $out"
# after a user's DELETE FROM ana_dicts (foreign keys not enforced: the other tables keep their
# rows) the next analysis reuses an id: it failed on a UNIQUE constraint or merged the old rows
cp "$T/tc.db" "$T/tcdel.db"
sqlite3 "$T/tcdel.db" "DELETE FROM ana_dicts"
out=$($BIN analyze --db "$T/tcdel.db" --sae "$T/skip_transcoder" --ce-seqs 4 --top 2 2>&1)
check '[ $? -eq 0 ] && [ "$(sqlite3 "$T/tcdel.db" "SELECT max(rank) FROM ana_acts WHERE kind = '"'top'"' AND dict_id = (SELECT max(id) FROM ana_dicts)")" = 1 ] && [ "$(sqlite3 "$T/tcdel.db" "SELECT count(*) FROM ana_features WHERE dict_id = (SELECT max(id) FROM ana_dicts)")" = "$(sqlite3 "$T/tcdel.db" "SELECT d_sae FROM ana_dicts")" ]' "analyze after DELETE FROM ana_dicts: no stale rows under the reused id: $out"
# rows that do not vary: explained variance 0/0 is no measurement (NULL; it was stored as 0)
$PY -c "import numpy as np, sys; np.save(sys.argv[1], np.array([[0.5, 0, 2]], dtype=np.float32))" "$T/one.npy"
$BIN import --npy "$T/one.npy" --db "$T/one.db" --hook h >/dev/null 2>&1
out=$($BIN analyze --db "$T/one.db" --neurons --hook h --all --no-model 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"explained variance n/a (the rows do not vary)"* ]] && [ "$(sqlite3 "$T/one.db" "SELECT quote(value) FROM ana_metrics WHERE name = '"'explained_variance'"'")" = NULL ]' "one row: explained variance NULL: $out"
# sequences of one token: no downstream loss; the message names the database and --no-model
$BIN extract --model "$T/m" --tokenizer "$T/tok" --corpus "$T/corpus.txt" --hook blocks.0.ln2.hook_normalized,blocks.0.hook_mlp_out --db "$T/ctx1.db" --ctx 1 --no-bos --max-tokens 50 >/dev/null 2>&1
out=$($BIN analyze --db "$T/ctx1.db" --sae "$T/skip_transcoder" --all 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"ctx1.db: no sequence of blocks.0.ln2.hook_normalized has 2 or more tokens"*"--no-model skips it"* ]]' "analyze on one-token sequences: $out"
# forward --text "" --bos runs <|endoftext|> alone (it said "encodes to no tokens")
out=$($BIN forward --model "$T/m" --tokenizer "$T/tok" --text "" --bos --logits --npy "$T/eot.npy" 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"logits [1, 259]"* ]]' "forward of <|endoftext|> alone: $out"
rm -f "$T/noreg.db"
$BIN export --db "$T/tc.db" --hook blocks.0.ln2.hook_normalized --npy "$T/noreg.npy" >/dev/null 2>&1
$BIN import --npy "$T/noreg.npy" --db "$T/noreg.db" --hook blocks.0.ln2.hook_normalized --seq-len 8 >/dev/null 2>&1
out=$($BIN analyze --db "$T/noreg.db" --sae 1 --no-model 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"no SAE registry, so '"'1'"' is no SAE id"* ]]' "analyze --sae 1 on a database without a registry: $out"
$BIN export --db "$T/tc.db" --hook blocks.0.ln2.hook_normalized --npy "$T/tcx.npy" >/dev/null 2>&1
$BIN export --db "$T/tc.db" --hook blocks.0.hook_mlp_out --npy "$T/tcy.npy" >/dev/null 2>&1
out=$($BIN sae-eval --sae "$T/skip_transcoder" --npy "$T/tcx.npy" --npy-out "$T/tcy.npy" 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"skip_transcoder d_out 32"* ]] && [[ "$out" == *"explained variance"* ]]' "sae-eval on (input, target) pairs: $out"
out=$($BIN sae-eval --sae "$T/skip_transcoder" --npy "$T/tcx.npy" 2>&1)
check '[ $? -eq 2 ]' "a transcoder's sae-eval needs --npy-out"
# a transcoder on .npy pairs (--npy-out: the targets row for row); refused when the rows differ
NA=(--d-sae 64 --k 4 --tokens 12288 --batch 256 --lr 0.003 --val-frac 0.2)
out=$($BIN sae-train --npy "$T/tcx.npy" --npy-out "$T/tcy.npy" --arch transcoder "${NA[@]}" --out "$T/tcnpy" 2>&1)
check '[ $? -eq 0 ] && [[ "$out" == *"sae-train: transcoder (topk) $T/tcx.npy -> $T/tcy.npy, d_in 32 d_out 32 d_sae 64"* ]] && grep -q "\"d_out\":\s*32" "$T/tcnpy/cfg.json"' "a transcoder trains on --npy / --npy-out: $out"
# ... the names given as metadata for analyze are checked as --db's are: a reversed pair trained,
# and analyze refused the transcoder afterwards ("output hook ... runs before its input hook")
out=$($BIN sae-train --npy "$T/tcx.npy" --npy-out "$T/tcy.npy" --arch transcoder "${NA[@]}" --hook blocks.0.hook_mlp_out --hook-out blocks.0.ln2.hook_normalized --out "$T/tcnpy_rev" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"--hook-out blocks.0.ln2.hook_normalized runs before its --hook blocks.0.hook_mlp_out"* ]] && [ ! -e "$T/tcnpy_rev" ]' "a reversed transcoder pair named with --npy: $out"
out=$($BIN sae-eval --sae "$T/tcnpy" --npy "$T/tcx.npy" --npy-out "$T/tcy.npy" 2>&1)
ev=$(sed -n 's/.*explained variance \([-0-9.]*\).*/\1/p' <<<"$out")
check '$PY -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0.5 else 1)" "$ev"' "the .npy transcoder explains its targets (EV $ev > 0.5): $out"
$PY -c "import numpy as np, sys; np.save(sys.argv[2], np.load(sys.argv[1])[:-1])" "$T/tcy.npy" "$T/tcy_short.npy"
out=$($BIN sae-train --npy "$T/tcx.npy" --npy-out "$T/tcy_short.npy" --arch transcoder "${NA[@]}" --out "$T/tcshort" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"tcy_short.npy: expected ["*"(the rows of"* ]] && [ ! -e "$T/tcshort" ]' "--npy-out with other rows than --npy refused: $out"
$PY -c "import numpy as np, sys; np.save(sys.argv[2], np.load(sys.argv[1])[:, :0]); np.save(sys.argv[3], np.load(sys.argv[1])[:, :-1])" "$T/tcy.npy" "$T/tcy_none.npy" "$T/tcy_narrow.npy"
out=$($BIN sae-train --npy "$T/tcx.npy" --npy-out "$T/tcy_none.npy" --arch transcoder "${NA[@]}" --out "$T/tcnone" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"tcy_none.npy: expected ["*", d_out] with d_out >= 1"*"got shape ("*", 0)"* ]] && [ ! -e "$T/tcnone" ]' "--npy-out with no columns refused, naming its shape: $out"
out=$($BIN sae-eval --sae "$T/tcnpy" --npy "$T/tcx.npy" --npy-out "$T/tcy_narrow.npy" 2>&1)
check '[ $? -eq 1 ] && [[ "$out" == *"tcy_narrow.npy: expected [tokens, 32], got ["*", 31] (the SAE"*"s d_out is 32)"* ]]' "sae-eval names d_out for a target of the wrong width: $out"
out=$($BIN sae-train --npy "$T/tcx.npy" --npy-out "$T/tcy.npy" --arch topk "${NA[@]}" --out "$T/tcnot" 2>&1)
check '[ $? -eq 2 ] && [ ! -e "$T/tcnot" ]' "--npy-out is for transcoders: $out"
out=$($BIN sae-train --npy "$T/tcx.npy" --arch transcoder "${NA[@]}" --out "$T/tcnoy" 2>&1)
check '[ $? -eq 2 ] && [ ! -e "$T/tcnoy" ]' "a transcoder on --npy needs --npy-out: $out"
out=$($BIN sae-train --db "$T/tc.db" --hook blocks.0.ln2.hook_normalized --arch transcoder --out "$T/tcbad" 2>&1)
check '[ $? -eq 2 ] && [ ! -e "$T/tcbad" ]' "a transcoder needs --hook-out"
fi

echo "test_extract: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
