#!/usr/bin/env bash
# bench_serve.sh - `saelite serve` latency and load on a real analysed database (the demo's, by
# default: SAELITE_BENCH_DB=runs/demo/brown.db; SAELITE_BENCH_MODEL=runs/demo/model turns on the
# "test your text" and steering figures; SAELITE_BENCH_SAE and SAELITE_BENCH_REPORT pass --sae and
# --report). The database is opened read-only, never changed. Paths may be relative to the
# directory it runs in; the binaries are found from this script's folder.
#   1. one client, 200 feature-page API calls over random features: p50/p95 (target p95 < 20 ms)
#   2. one client, 200 index searches (target p95 < 50 ms)
#   3. with a model: one client, 50 "test your text" calls of about 128 tokens (target < 150 ms)
#   4. with a model: one client, 20 steering calls (32 tokens steered + 32 unsteered, add)
#   5. 50 concurrent clients, SAELITE_BENCH_N requests (default 5000) of the feature API, and the
#      same against a plain static file of the same server (/app.js): the ratio of the p50s
# Each single-client line is followed by the server's CPU time per request (utime + stime of the
# server process over those requests, from /proc), the steadier figure on a loaded machine; the
# load average is printed first and last.
set -u
HERE=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SAELITE_BIN:-$HERE/saelite}
DB=${SAELITE_BENCH_DB:-runs/demo/brown.db}
MODEL=${SAELITE_BENCH_MODEL:-$(dirname "$DB")/model}
N=${SAELITE_BENCH_N:-5000}
C=$HERE/build/bench/bench_serve
if [ ! -f "$DB" ]; then echo "bench_serve: skipped (no $DB; set SAELITE_BENCH_DB)"; exit 0; fi
[ -x "$C" ] || { echo "bench_serve: build $C first (make bench)"; exit 1; }
T=$(mktemp -d /tmp/saelite_bench_serve.XXXXXX)
m=(); [ -f "$MODEL/config.json" ] && m=(--model "$MODEL")
[ -n "${SAELITE_BENCH_SAE:-}" ] && m+=(--sae "$SAELITE_BENCH_SAE")
[ -n "${SAELITE_BENCH_REPORT:-}" ] && m+=(--report "$SAELITE_BENCH_REPORT")
echo "bench_serve: load average at start: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"
"$BIN" serve --db "$DB" "${m[@]}" --port 0 --threads 4 > "$T/out" 2> "$T/err" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 600); do grep -q '^serve: open' "$T/out" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
url=$(sed -n 's/^serve: open \(http:[^ ]*\)\/ in a browser.*/\1/p' "$T/out")
[ -n "$url" ] || { cat "$T/err"; exit 1; }
port=${url##*:}
info=$(curl -s "$url/api/info")
dict=$(curl -s "$url/api/dicts" | python3 -c 'import json,sys; d=json.load(sys.stdin)["dicts"]; t=json.loads(sys.argv[1]).get("test_dict", -1)
b=[x for x in d if x["id"] == t] or [max(d, key=lambda x: x["d_sae"])]; print(b[0]["id"], b[0]["d_sae"], b[0].get("effects", 0))' "$info")
read -r D NF NE <<<"$dict"
echo "bench_serve: dictionary $D ($NF features, $NE with measured effects); $(sed -n 's/^serve: //p' "$T/err" | tr '\n' ';')"
cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
# run LABEL N ARGS...: one bench_serve line, then the server's CPU ms per request
run() {
    local n=$2 c0 c1; shift 2
    c0=$(cpu)
    "$C" 127.0.0.1 "$port" 1 "$n" "$@" || rc=1
    c1=$(cpu)
    awk -v a="$c0" -v b="$c1" -v n="$n" -v hz="$(getconf CLK_TCK)" \
        'BEGIN { printf "  server CPU %.2f ms per request\n", 1e3 * (b - a) / hz / n }'
}
feat=(); for i in $(seq 200); do feat+=("/api/feature/$D/$(( (i * 7919) % NF ))"); done
rc=0
run feature 200 "${feat[@]}"
words=(the of and dog house said time new one his)
srch=(); for w in "${words[@]}"; do srch+=("/api/search?q=$w"); done
run search 200 "${srch[@]}"
run features 100 "/api/features?dict=$D&limit=50" "/api/features?dict=$D&limit=50&sort=mean_kl" "/api/features?dict=$D&limit=50&q=the"
if [ ${#m[@]} -gt 0 ] && [ -f "$MODEL/config.json" ]; then
    text=$(printf 'The%%20jury%%20said%%20the%%20city%%20had%%20done%%20well%%20in%%20the%%20election.%%20%.0s' $(seq 9))
    run test 50 "/api/test?text=$text"
    if python3 -c 'import json,sys; sys.exit(0 if json.loads(sys.argv[1]).get("steering") and json.loads(sys.argv[1]).get("test_dict", -1) >= 0 else 1)' "$info"; then
        st=(); for i in 1 2 3 4 5; do
            st+=("POST /api/steer {\"prompt\": \"The jury said the city\", \"features\": [[$(( (i * 7919) % NF )), 8]], \"max_tokens\": 32, \"seed\": $i}")
        done
        run steer 20 "${st[@]}"
    else echo "bench_serve: steering skipped (serve runs no analysed SAE of this database: SAELITE_BENCH_SAE)"; fi
fi
a=$("$C" 127.0.0.1 "$port" 50 "$N" "${feat[@]}") || rc=1
b=$("$C" 127.0.0.1 "$port" 50 "$N" /app.js) || rc=1
echo "$a"; echo "$b"
pa=$(sed -E 's/.*p50 ([0-9.]+) ms.*/\1/' <<<"$a"); pb=$(sed -E 's/.*p50 ([0-9.]+) ms.*/\1/' <<<"$b")
awk -v a="$pa" -v b="$pb" 'BEGIN { printf "bench_serve: 50 clients, feature API p50 / static file p50 = %.1f\n", a / (b > 0 ? b : 1e-9) }'
echo "bench_serve: load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
