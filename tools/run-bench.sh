#!/usr/bin/env bash
# Run every benchmark binary given, then bench/*.sh scripts; each prints its own figures.
# Results are recorded by hand in bench/README.md with the machine they ran on.
set -u
echo "# saelite bench on $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset}"
# oneDNN's OpenMP threads (the bf16 paths) sleep instead of spinning between calls, as
# `saelite --precision bf16|auto` arranges for itself (cli/main.c); PyTorch's peers run so too.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
echo "# OMP_WAIT_POLICY=$OMP_WAIT_POLICY; load average $(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
for b in "$@"; do echo "== $(basename "$b")"; "$b" || rc=1; done
for s in bench/bench_*.sh; do [ -e "$s" ] || continue; echo "== $(basename "$s")"; bash "$s" || rc=1; done
exit $rc
