#!/usr/bin/env bash
# The cleartext MAC on a CPU without carry-less multiply: the sieve at P = 0 (every byte on the
# plain channel, so the MAC is all the protection it pays for) with every CPU feature, against
# the same under a mask that takes carry-less multiply away, where AES-GMAC is slow and the two
# ends negotiate another MAC (keyed BLAKE3 or ChaCha20-Poly1305, whichever both measure fastest).
#
#   bench/mac.sh [SIZE] [ROUNDS]            defaults: 1GiB 7
#   MASK='~0x200000200000000:~0x60000000000' bench/mac.sh     the mask (this default clears
#                                           AES-NI and PCLMULQDQ, and VAES and VPCLMULQDQ)
#   SIEVE=/path/to/sieve bench/mac.sh       another binary (default: this tree's release build)
#
# Each side runs its own receiver (`--discard`) under its own mask; the two alternate within
# every round, their order rotating. The document is an x-P file at P = 0 sent with an empty
# ranges file (no marks scan). Prints each side's median response time [min..max], the MAC
# its receiver chose, and the masked side's time over the unmasked side's: of the medians, and
# the median [min..max] of the per-round ratios. The goal: at most 1.3.
set -euo pipefail
SIZE=${1:-1GiB}
ROUNDS=${2:-7}
MASK=${MASK:-'~0x200000200000000:~0x60000000000'}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${SIEVE:-}" ]; then
  cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
  SIEVE="$ROOT/target/release/sieve"
fi
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT
cd "$W"
export XDG_CACHE_HOME="$W/cache"
"$SIEVE" certs --dir certs 2>/dev/null
"$SIEVE" gen --size "$SIZE" --proportion 0 -o doc.txt 2>/dev/null
echo '{"ranges": []}' > doc.ranges.json
cat doc.txt > /dev/null
mkdir out-unmasked out-masked
env -u OPENSSL_ia32cap "$SIEVE" serve --dir out-unmasked --cert certs/server.pem \
  --key certs/server.key --discard --listen 127.0.0.1:17743 --plain-listen 127.0.0.1:17380 \
  2>serve-unmasked.log &
OPENSSL_ia32cap="$MASK" "$SIEVE" serve --dir out-masked --cert certs/server.pem \
  --key certs/server.key --discard --listen 127.0.0.1:17744 --plain-listen 127.0.0.1:17381 \
  2>serve-masked.log &
sleep 1
echo "side,round,response_ms,mac" > results.csv
for r in $(seq 1 "$ROUNDS"); do
  sides="unmasked masked"
  [ $((r % 2)) = 0 ] && sides="masked unmasked"
  for side in $sides; do
    if [ "$side" = masked ]; then
      OPENSSL_ia32cap="$MASK" "$SIEVE" send --to 127.0.0.1:17744 --ca certs/ca.pem --json \
        --mode sieve --ranges doc.ranges.json doc.txt > j.json
    else
      env -u OPENSSL_ia32cap "$SIEVE" send --to 127.0.0.1:17743 --ca certs/ca.pem --json \
        --mode sieve --ranges doc.ranges.json doc.txt > j.json
    fi
    resp=$(python3 -c "import json; print(json.load(open('j.json'))['response_ms'])")
    mac=$(sed 's/\x1b\[[0-9;]*m//g' "serve-$side.log" | grep -o 'mac=[a-z0-9-]*' | tail -1 | cut -d= -f2)
    echo "$side,$r,$resp,$mac" >> results.csv
  done
done
python3 - "$MASK" <<'PY'
import csv, statistics as st, sys
rows = list(csv.DictReader(open("results.csv")))
def col(side):
    return {int(r["round"]): float(r["response_ms"]) for r in rows if r["side"] == side}
u, m = col("unmasked"), col("masked")
macs = {r["side"]: r["mac"] for r in rows}
print(f"{len(u)} rounds, P = 0, response ms, median [min..max]; OPENSSL_ia32cap={sys.argv[1]!r} on the masked side")
for side, v in (("unmasked", u), ("masked", m)):
    xs = list(v.values())
    print(f"  {side:9s} {st.median(xs):8.1f} [{min(xs):.1f}..{max(xs):.1f}]  mac {macs.get(side, '?')}")
per = sorted(m[k] / u[k] for k in m if k in u)
print(f"  masked / unmasked: {st.median(m.values()) / st.median(u.values()):.3f} "
      f"(per round {st.median(per):.3f} [{per[0]:.3f}..{per[-1]:.3f}]); goal: at most 1.3")
PY
