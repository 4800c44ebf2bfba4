#!/usr/bin/env bash
# Quality of automatic marking, measured: the default policy (and, if it is installed,
# Microsoft Presidio's predefined recognizers) on one seeded labelled set of CSV, NDJSON, logs
# and letters. Prints recall per planted kind and over-marking for each.
#
# usage: bench/mark-eval.sh [BYTES_PER_FORMAT] [SEED]     (default 1048576 and 2026)
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-1048576}
seed=${2:-2026}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo
echo "== sieve mark, default policy =="
cargo run -q -p sieve-mark --release --example eval -- --size "$size" --seed "$seed" --write "$dir"
echo
echo "== Microsoft Presidio, predefined recognizers (same set) =="
if python3 -c 'import presidio_analyzer' 2>/dev/null; then
  python3 bench/presidio_eval.py "$dir" 2>&1 | grep -v -i 'warning'
else
  echo "presidio-analyzer is not installed (pip install presidio-analyzer); skipped"
fi
