#!/usr/bin/env bash
# Devices without AES instructions, emulated: both ends run with OPENSSL_ia32cap masking CPU
# features, which aws-lc (the crypto under rustls) reads once per process.
#
#   bench/noaes.sh [SIZE] [P] [ROUNDS]         defaults: 256MiB 0.1 7
#   MASKS="~0x200000200000000 ''" bench/noaes.sh     masks to run ('' = the empty value)
#   MAC=blake3 bench/noaes.sh                        receiver's `--mac` (default: auto)
#   MODES="so-aes128gcm so-chacha20 sieve sieve-chacha20" bench/noaes.sh
#                                                    so-SUITE: secure-only with that suite;
#                                                    sieve-SUITE: the sieve with that suite;
#                                                    sieve: no suite named, so ChaCha20-Poly1305
#                                                    wherever aws-lc finds no AES hardware (under
#                                                    every mask here), AES-128-GCM otherwise
#
# Masks (x86): `~0x200000200000000` clears AES-NI and PCLMULQDQ in the first word; on CPUs with
# VAES and VPCLMULQDQ (in the leaf-7 word after the colon) aws-lc still hashes GCM's associated
# data, and so GMAC, with VPCLMULQDQ, so `~0x200000200000000:~0x60000000000` clears those too: the
# faithful emulation of a CPU without carry-less multiply. `0:0` (or the empty value, which clears
# the first word only) turns off every feature aws-lc looks at. BLAKE3 chooses its SIMD code by
# itself and keeps it under any mask.
#
# Per mask and round, alternating: secure-only with AES-128-GCM, secure-only with
# ChaCha20-Poly1305, and the sieve with its default suite; receiver --discard, N = M = 1.
# Prints medians [min..max] of `response_ms` and the ratios of the sieve to each secure-only, of
# the medians and per round.
set -euo pipefail
SIZE=${1:-256MiB}
P=${2:-0.1}
ROUNDS=${3:-7}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${SIEVE:-}" ]; then
  cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
  SIEVE="$ROOT/target/release/sieve"
fi
MODES=${MODES:-"so-aes128gcm so-chacha20 sieve"}
eval "masks=(${MASKS:-"'~0x200000200000000' '~0x200000200000000:~0x60000000000' ''"})"
W=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT
cd "$W"
export XDG_CACHE_HOME="$W/cache"
"$SIEVE" certs --dir certs 2>/dev/null
"$SIEVE" gen --size "$SIZE" --proportion "$P" -o doc.txt 2>/dev/null
cat doc.txt > /dev/null
mkdir out
echo "mask,mode,round,response_ms,mac" > results.csv
for mask in "${masks[@]}"; do
  OPENSSL_ia32cap="$mask" "$SIEVE" serve --dir out --cert certs/server.pem --key certs/server.key \
    --discard --mac "${MAC:-auto}" --listen 127.0.0.1:17643 --plain-listen 127.0.0.1:17280 2>serve.log &
  serve=$!
  sleep 1
  for r in $(seq 1 "$ROUNDS"); do
    for mode in $MODES; do
      case $mode in
        so-*) args=(--mode secure-only --cipher "${mode#so-}") ;;
        sieve) args=(--mode sieve) ;;
        sieve-*) args=(--mode sieve --cipher "${mode#sieve-}") ;;
        *) echo "unknown mode $mode" >&2; exit 2 ;;
      esac
      OPENSSL_ia32cap="$mask" "$SIEVE" send --to 127.0.0.1:17643 --ca certs/ca.pem --json "${args[@]}" doc.txt > j.json
      resp=$(python3 -c "import json; print(json.load(open('j.json'))['response_ms'])")
      echo "'$mask',$mode,$r,$resp,$(sed 's/\x1b\[[0-9;]*m//g' serve.log | grep -o 'mac=[a-z0-9-]*' | tail -1 | cut -d= -f2)" >> results.csv
    done
  done
  kill "$serve"; wait "$serve" 2>/dev/null || true
done
python3 - "$SIZE" "$P" "$MODES" <<'PY'
import csv, statistics as st, sys
rows = list(csv.DictReader(open("results.csv")))
print(f"{sys.argv[1]} at P = {sys.argv[2]}, response_ms median [min..max]")
for mask in dict.fromkeys(r["mask"] for r in rows):
    col = lambda m: {int(r["round"]): float(r["response_ms"]) for r in rows if r["mask"] == mask and r["mode"] == m}
    macs = {r["mac"] for r in rows if r["mask"] == mask and r["mode"].startswith("sieve")}
    print(f"OPENSSL_ia32cap={mask} (sieve's MAC: {', '.join(sorted(macs)) or '?'})")
    modes = sys.argv[3].split()
    for m in modes:
        v = list(col(m).values())
        print(f"  {m:15s} {st.median(v):8.0f} [{min(v):.0f}..{max(v):.0f}]")
    for s in [m for m in modes if m.startswith("sieve")]:
        for m in [m for m in modes if m.startswith("so-")]:
            a, b = col(s), col(m)
            per = [a[k] / b[k] for k in a if k in b]
            print(f"  {s} / {m}: {st.median(a.values())/st.median(b.values()):.2f} (per round {st.median(per):.2f} [{min(per):.2f}..{max(per):.2f}])")
PY
cp results.csv "$ROOT/target/bench-noaes.csv"
