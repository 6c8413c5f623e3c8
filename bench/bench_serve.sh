#!/usr/bin/env bash
# bench_serve.sh - `saelite serve` latency and load on a real analysed database (the demo's, by
# default: SAELITE_BENCH_DB=runs/demo/brown.db; SAELITE_BENCH_MODEL=runs/demo/model turns on the
# "test your text" figure). The database is opened read-only, never changed.
#   1. one client, 200 feature-page API calls over random features: p50/p95 (target p95 < 20 ms)
#   2. one client, 200 index searches (target p95 < 50 ms)
#   3. with a model: one client, 50 "test your text" calls of about 128 tokens (target < 150 ms)
#   4. 50 concurrent clients, SAELITE_BENCH_N requests (default 5000) of the feature API, and the
#      same against a plain static file of the same server (/app.js): the ratio of the p50s
set -u
BIN=${SAELITE_BIN:-./saelite}
DB=${SAELITE_BENCH_DB:-runs/demo/brown.db}
MODEL=${SAELITE_BENCH_MODEL:-$(dirname "$DB")/model}
N=${SAELITE_BENCH_N:-5000}
C=build/bench/bench_serve
if [ ! -f "$DB" ]; then echo "bench_serve: skipped (no $DB; set SAELITE_BENCH_DB)"; exit 0; fi
[ -x "$C" ] || { echo "bench_serve: build $C first (make bench)"; exit 1; }
T=$(mktemp -d /tmp/saelite_bench_serve.XXXXXX)
m=(); [ -f "$MODEL/config.json" ] && m=(--model "$MODEL")
"$BIN" serve --db "$DB" "${m[@]}" --port 0 --threads 4 > "$T/out" 2> "$T/err" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 600); do grep -q '^serve: open' "$T/out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
url=$(sed -n 's/^serve: open \(http:[^ ]*\)\/ in a browser.*/\1/p' "$T/out")
[ -n "$url" ] || { cat "$T/err"; exit 1; }
port=${url##*:}
dict=$(curl -s "$url/api/dicts" | python3 -c 'import json,sys; d=json.load(sys.stdin)["dicts"]; print(max(d, key=lambda x: x["d_sae"])["id"], max(d, key=lambda x: x["d_sae"])["d_sae"])')
read -r D NF <<<"$dict"
echo "bench_serve: dictionary $D ($NF features); $(sed -n 's/^serve: //p' "$T/err")"
feat=(); for i in $(seq 200); do feat+=("/api/feature/$D/$(( (i * 7919) % NF ))"); done
rc=0
"$C" 127.0.0.1 "$port" 1 200 "${feat[@]}" || rc=1
words=(the of and dog house said time new one his)
srch=(); for w in "${words[@]}"; do srch+=("/api/search?q=$w"); done
"$C" 127.0.0.1 "$port" 1 200 "${srch[@]}" || rc=1
if [ ${#m[@]} -gt 0 ]; then
    text=$(printf 'The%%20jury%%20said%%20the%%20city%%20had%%20done%%20well%%20in%%20the%%20election.%%20%.0s' $(seq 9))
    "$C" 127.0.0.1 "$port" 1 50 "/api/test?text=$text" || rc=1
fi
a=$("$C" 127.0.0.1 "$port" 50 "$N" "${feat[@]}") || rc=1
b=$("$C" 127.0.0.1 "$port" 50 "$N" /app.js) || rc=1
echo "$a"; echo "$b"
pa=$(sed -E 's/.*p50 ([0-9.]+) ms.*/\1/' <<<"$a"); pb=$(sed -E 's/.*p50 ([0-9.]+) ms.*/\1/' <<<"$b")
awk -v a="$pa" -v b="$pb" 'BEGIN { printf "bench_serve: 50 clients, feature API p50 / static file p50 = %.1f\n", a / (b > 0 ? b : 1e-9) }'
exit $rc
