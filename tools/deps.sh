#!/usr/bin/env bash
# Install the Debian packages saelite needs to build and test, when any is missing.
# Uses apt-get as root, sudo otherwise; says clearly what to do when neither works.
# Usage: tools/deps.sh [extra-package ...]
# Optional, not needed by make test: `tools/deps.sh python3-torch` for the PyTorch reference
# recipes in tools/ref/ (topk_ref.py, l1_ref.py) and the reference column of bench/bench_sae_gt.sh.
set -euo pipefail
# openmpi-bin/libopenmpi-dev: the distributed layer (common/dist.c, mpirun -np N; OpenMPI rather
# than MPICH: the implementation llm.c and most clusters' C codes launch with, pkg-config file
# ompi-c, and a launcher that ends the whole job when one rank dies).
# libmicrohttpd-dev: `saelite serve`'s HTTP server; curl and chromium (headless, driven through
# its DevTools protocol): tests/test_serve.sh checks the served pages in a real browser.
# liblinear-dev: the logistic-regression probes of `saelite eval` (analysis/eval_probe.c).
pkgs=(gcc make pkg-config libopenblas-dev libsqlite3-dev libpng-dev libpcre2-dev libcjson-dev
      libcairo2-dev libdnnl-dev liblinear-dev fonts-dejavu-core sqlite3 xxd python3-numpy libmicrohttpd-dev curl chromium
      openmpi-bin libopenmpi-dev "$@")
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm fetch the corpus and run the reference JS tokenizer; any install of them will do
# (Debian's nodejs/npm, or a NodeSource nodejs that bundles npm).
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing missing Debian packages: ${missing[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then sudo=""
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo"
else
    echo "deps: missing packages ${missing[*]}; run as root or install them with:" >&2
    echo "      sudo apt-get install ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2 || true
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
