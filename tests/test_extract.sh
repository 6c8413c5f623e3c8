#!/usr/bin/env bash
# test_extract.sh - `saelite import/export/info` round trips and bad input; `saelite extract` on a
# tiny random model (resume after kill -9 equals an uninterrupted run) when the model and
# tokenizer commands are built in.
set -u
BIN=${SAELITE_BIN:-./saelite}
PY=/usr/bin/python3
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { if eval "$1"; then ok; else bad "$2"; fi; }
T=$(mktemp -d /tmp/saelite_test_extract.XXXXXX)
trap 'rm -rf "$T"' EXIT

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
$BIN export --db "$T/i.db" --hook resid --npy "$T/lim.npy" --limit 70 >/dev/null 2>&1
check '$PY -c "import numpy as np,sys; a=np.load(sys.argv[1]); b=np.load(sys.argv[2]); sys.exit(0 if a.shape==(70,24) and (a==b[:70]).all() else 1)" "$T/lim.npy" "$T/acts.npy"' "--limit 70"
# bf16 storage rounds like torch's bfloat16
$BIN import --npy "$T/acts.npy" --db "$T/b.db" --hook r16 --dtype bf16 >/dev/null 2>&1
$BIN export --db "$T/b.db" --hook r16 --npy "$T/b16.npy" >/dev/null 2>&1
check '$PY -c "import numpy as np,torch,sys; a=np.load(sys.argv[1]); b=np.load(sys.argv[2]); w=torch.from_numpy(a).to(torch.bfloat16).float().numpy(); sys.exit(0 if (w==b).all() else 1)" "$T/acts.npy" "$T/b16.npy"' "bf16 round trip equals torch rounding"
out=$($BIN info --db "$T/i.db" 2>&1)
check '[[ "$out" == *"hook 1: resid"*"width 24"*"5 sequences, 300 tokens"* ]]' "info: $out"
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

echo "test_extract: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
