#!/bin/bash
# Peak resident memory of both ends moving a 4 GiB x-P document (P = 0.1) on loopback, with
# compression forced on (zstd:3) and with the default (auto); the receiver discards (--discard).
# Needs GNU time (apt-get install time) and a release build (cargo build --release).
set -e
cd "$(dirname "$0")/.."
S=${S:-$PWD/target/release/sieve}
echo "CPU: $(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed "s/^ //")"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT; cd "$d"
"$S" certs --dir certs 2>/dev/null
"$S" gen --size 4GiB --proportion 0.1 -o doc.txt 2>/dev/null
for c in zstd:3 auto; do
  /usr/bin/time -f "%M" -o rx.txt "$S" serve --dir out --cert certs/server.pem --key certs/server.key --discard \
    --listen 127.0.0.1:17543 --plain-listen 127.0.0.1:17180 2>serve.log &
  sp=$!; sleep 1
  /usr/bin/time -f "%e %M" -o tx.txt "$S" send --to 127.0.0.1:17543 --ca certs/ca.pem --compress $c --json doc.txt > j.json
  pkill -INT -f "listen 127.0.0.1:17543" || true; wait $sp || true
  python3 - "$c" <<'PY'
import json,sys
j=json.load(open('j.json')); c=j.get('compression') or {}
tx=open('tx.txt').read().split(); rx=open('rx.txt').read().split()
print(f"{sys.argv[1]}: response {j['response_ms']:.0f} ms, cleartext {c.get('plain_before',0)/2**20:.0f} -> {c.get('plain_after',0)/2**20:.0f} MiB, sender peak RSS {int(tx[-1])/1024:.0f} MiB, receiver peak RSS {int(rx[-1])/1024:.0f} MiB")
PY
done

