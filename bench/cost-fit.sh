#!/usr/bin/env bash
# Fit the constants of the `--mode auto` cost model (crates/sieve-core/src/cost.rs, Overheads)
# on this machine from real transfers.
#
#   bench/cost-fit.sh [ROUNDS]        default 5
#
# 1. `sieve calibrate --fresh --json`: the protection speeds (seal of the suite, MAC, copy, scan).
# 2. bench/small.sh over 1 MB, 10 MB, 64 MiB and 256 MiB at P = 0.1 and 0.9, secure-only and
#    sieve alternating, receiver --discard (SIZES, PS and SIEVE are passed through).
# 3. A least-squares fit of the medians of `total_ms` (connect + response) against the model:
#      secure-only  T = F + bytes × (2/seal + ks/copy) / cores
#      sieve        T = F + plain + bytes/scan + bytes × (P(2/seal + ks/copy) + (1-P)(2/mac + kp/copy)) / cores
#    F (session + one document) and ks from secure-only's line; then kp and plain from the sieve's
#    points with ks fixed. Prints the Overheads to put in cost.rs.
set -euo pipefail
ROUNDS=${1:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${SIEVE:-}" ]; then
  cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
  export SIEVE="$ROOT/target/release/sieve"
fi
CAL=$(mktemp)
trap 'rm -f "$CAL"' EXIT
XDG_CACHE_HOME=$(mktemp -d) "$SIEVE" calibrate --fresh --json > "$CAL"
SIZES=${SIZES:-"1MB 10MB 64MiB 256MiB"} PS=${PS:-"0.1 0.9"} \
  "$ROOT/bench/small.sh" "$ROUNDS" "secure-only sieve"
python3 - "$CAL" "$ROOT/target/bench-small.csv" "$(nproc)" <<'PY'
import csv, json, statistics as st, sys
cal = json.load(open(sys.argv[1])); rows = list(csv.DictReader(open(sys.argv[2])))
cores = float(sys.argv[3])
seal = cal["suites"]["aes128gcm"]; copy = cal["memcpy"]; scan = cal["scan"] * min(cores, 2)
mac = cal["macs"][cal["mac_preference"][0]]
units = {"KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024, "MiB": 2**20, "GiB": 2**30}
def size_of(s):
    for u in sorted(units, key=len, reverse=True):
        if s.endswith(u): return float(s[:-len(u)]) * units[u]
    return float(s)
pts = {}
for r in rows:
    s, p = r["doc"].rsplit("-", 1)
    pts.setdefault((size_of(s), float(p), r["mode"]), []).append(float(r["total_ms"]))
med = {k: st.median(v) for k, v in pts.items()}
ms = lambda b, gbps: b / gbps / 1e6   # milliseconds for b bytes at gbps GB/s
def fit(xs, ys):   # least squares y = a + b x
    mx, my = st.mean(xs), st.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b
so = [(b, t) for (b, p, m), t in med.items() if m == "secure-only"]
F, slope = fit([b for b, _ in so], [t for _, t in so])
# slope (ms per byte) = (2/seal + ks/copy)/cores, in ms per byte: x GB/s -> 1/(x*1e6) ms per byte
ks = (slope * cores - 2 / (seal * 1e6)) * copy * 1e6
sv = [(b, p, t) for (b, p, m), t in med.items() if m == "sieve"]
# sieve: t - F - scan - secure part = plain + (1-P) b (2/mac + kp/copy)/cores
xs, ys = [], []
for b, p, t in sv:
    secure = p * b * (2 / (seal * 1e6) + ks / (copy * 1e6)) / cores
    xs.append((1 - p) * b / cores)
    ys.append(t - F - ms(b, scan) - secure)
plain, s2 = fit(xs, ys)
kp = (s2 - 2 / (mac * 1e6)) * copy * 1e6
print(f"speeds (GB/s): seal {seal:.2f}, mac {mac:.2f} ({cal['mac_preference'][0]}), copy {copy:.2f}, scan {scan:.1f} on {cores:.0f} cores")
print(f"fitted: session+doc {F:.1f} ms, secure_copies {ks:.2f}, plain_copies {kp:.2f}, plain {plain:.1f} ms")
for (b, p, m), t in sorted(med.items()):
    secure = p * b if m == "sieve" else b
    cpu = (2 * ms(secure, seal) + 2 * ms(b - secure, mac) + ms(secure * ks + (b - secure) * kp, copy)) / cores
    pred = F + cpu + ((plain + ms(b, scan)) if m == "sieve" else 0)
    print(f"  {b/1e6:8.1f} MB P={p:.1f} {m:12s} measured {t:8.1f} ms  model {pred:8.1f} ms")
PY
