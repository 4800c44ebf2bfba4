#!/usr/bin/env bash
# Small-document benchmark: where fixed costs (connections, JOIN, the marks scan, process start)
# weigh most.
#
#   bench/small.sh [ROUNDS] [MODES]          defaults: 15 "secure-only sieve"
#   SIZES="1MB 10MB" PS="0.1 0.9" bench/small.sh 15 "secure-only sieve auto"
#   SIEVE=/path/to/sieve bench/small.sh ...  another binary (default: this tree's release build)
#   WRITE=1 bench/small.sh ...               the receiver writes (fsync, rename) instead of --discard
#   KIND=log SIZES=8MiB PS=0.1 bench/small.sh 30 "secure-only sieve auto"
#                                            realistic documents (`sieve gen --kind`) instead of
#                                            x-P letters: dense ones, a marked value per line
#   bench/small.sh 60 "secure-only auto secure-only@OLD auto@OLD"
#                                            MODE@PATH sends with another build of sieve (before
#                                            and after a change, in the same rounds)
#
# For every size and P, the modes alternate within every round (their order rotating from round
# to round, so that none always runs first) against one receiver on loopback, N = M = 1. Each
# transfer is one `sieve send --json` process. Prints, per document and mode, the medians of
# `response_ms` (first byte prepared to last acknowledgement), `total_ms` (connect included),
# `sieve_ms` (printed as prepare: the documents' preparation, which the response counts:
# opening, the marks scan, auto's choice) and the process's wall time, each with [min..max],
# then each mode's ratio to the first mode of the same build: of the medians, and the median
# [min..max] of the per-round ratios (the steadier figure on a machine whose speed drifts). Any
# mode `sieve send --mode` takes can be listed. The receiver is always this tree's build (or
# $SIEVE).
set -euo pipefail
ROUNDS=${1:-15}
MODES=${2:-"secure-only sieve"}
SIZES=${SIZES:-"1MB 10MB"}
PS=${PS:-"0.1 0.9"}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${SIEVE:-}" ]; then
  cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
  SIEVE="$ROOT/target/release/sieve"
fi
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT
cd "$W"
"$SIEVE" certs --dir certs 2>/dev/null
mkdir out
for s in $SIZES; do
  for p in $PS; do
    "$SIEVE" gen --kind "${KIND:-letters}" --size "$s" --proportion "$p" -o "doc-$s-$p.txt" \
      2>/dev/null
  done
done
cat doc-*.txt > /dev/null
if [ "${WRITE:-0}" = 1 ]; then store=(--overwrite); else store=(--discard); fi
"$SIEVE" serve --dir out --cert certs/server.pem --key certs/server.key "${store[@]}" \
  --listen 127.0.0.1:17543 --plain-listen 127.0.0.1:17180 2>serve.log &
sleep 1
read -r -a modes <<< "$MODES"
echo "doc,mode,round,response_ms,total_ms,sieve_ms,wall_ms" > results.csv
for r in $(seq 1 "$ROUNDS"); do
  for s in $SIZES; do
    for p in $PS; do
      n=${#modes[@]}
      for i in $(seq 0 $((n - 1))); do
        mode=${modes[$(( (i + r) % n ))]}
        bin=$SIEVE
        if [[ $mode == *@* ]]; then bin=${mode#*@}; fi
        t0=$(date +%s%N)
        "$bin" send --to 127.0.0.1:17543 --ca certs/ca.pem --json --mode "${mode%%@*}" \
          "doc-$s-$p.txt" > j.json
        t1=$(date +%s%N)
        read -r resp total prep < <(python3 -c "import json; j=json.load(open('j.json')); print(j['response_ms'], j['total_ms'], j['sieve_ms'])")
        echo "$s-$p,$mode,$r,$resp,$total,$prep,$(( (t1 - t0) / 1000000 ))" >> results.csv
      done
    done
  done
done
python3 - "$MODES" <<'PY'
import csv, statistics as st, sys
modes = sys.argv[1].split()
rows = list(csv.DictReader(open("results.csv")))
docs = list(dict.fromkeys(r["doc"] for r in rows))
base = modes[0]
def col(doc, mode, key):
    return {int(r["round"]): float(r[key]) for r in rows if r["doc"] == doc and r["mode"] == mode}
rounds = len({r["round"] for r in rows})
build = lambda m: m.partition("@")[2]
# Each mode is compared with the first mode of the same build.
bases = {}
for m in modes:
    bases.setdefault(build(m), m)
print(f"{rounds} rounds; ms, median [min..max]; ratios against {base} (or the first mode of the same build): of the medians, and per round median [min..max]")
for d in docs:
    print(f"\n{d}")
    for m in modes:
        base = bases[build(m)]
        line = f"  {m:12s}"
        for key in ["response_ms", "total_ms", "sieve_ms", "wall_ms"]:
            v = list(col(d, m, key).values())
            digits = 2 if key == "sieve_ms" else 1
            label = "prepare" if key == "sieve_ms" else key[:-3]
            line += f"  {label} {st.median(v):7.{digits}f} [{min(v):.{digits}f}..{max(v):.{digits}f}]"
        if m != base:
            for key in ["response_ms", "total_ms"]:
                a, b = col(d, m, key), col(d, base, key)
                per = [a[k] / b[k] for k in a if k in b and b[k] > 0]
                line += (f"  {key[:-3]}/{base}: {st.median(a.values())/st.median(b.values()):.2f}"
                         f" (per round {st.median(per):.2f} [{min(per):.2f}..{max(per):.2f}])")
        print(line)
PY
cp results.csv "$ROOT/target/bench-small.csv"
