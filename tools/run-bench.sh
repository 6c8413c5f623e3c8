#!/usr/bin/env bash
# Run every benchmark binary given, then bench/*.sh scripts; each prints its own figures.
# Results are recorded by hand in bench/README.md with the machine they ran on.
set -u
echo "# saelite bench on $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
rc=0
for b in "$@"; do echo "== $(basename "$b")"; "$b" || rc=1; done
for s in bench/bench_*.sh; do [ -e "$s" ] || continue; echo "== $(basename "$s")"; bash "$s" || rc=1; done
exit $rc
