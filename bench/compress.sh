#!/usr/bin/env bash
# Compression of the cleartext against its goals (ACCENT: compression adaptive to link and CPU).
#
#   bench/compress.sh [ROUNDS] [SIZE] [P] [LOOP_SIZE]     defaults: 5 32MiB 0.1 256MiB
#   RATE=100 bench/compress.sh ...                        link rate in Mbit/s (default 100)
#   CORPUS=text bench/compress.sh ...                     what to send (default crates, below)
#
# Part 1, over an emulated link (two network namespaces routed through a third, both directions
# shaped there to RATE Mbit/s by tbf, as the laboratory builds its links; needs root, iproute2):
# SIZE bytes of the cargo registry's crate sources (.rs, .md, .toml files in sorted order), of
# which P is classified by a ranges file (five equal parts per MiB, as the thesis's x-P files);
# or, with CORPUS=text|csv|json|log|letters, a document of that kind from `sieve gen` (seed 1),
# whose classified parts are whole values and records, as its ranges file says. Sent by these,
# alternating within every round:
#   secure-only                      every byte over TLS (no compression)
#   sieve off                        --compress off
#   sieve auto                       the default
#   sieve accent                     ACCENT's policy
#   sieve zstd:1 / 3 / 9 / 19        fixed levels: the best of them is the ideal choice
#   sieve auto classified            auto with --compress-classified
#   zstd --adapt | socat OPENSSL     the whole file compressed (classified bytes too) inside TLS
#   socat TCP                        the raw file over plain TCP: the link's goodput
# The bound is the time the link needs for the raw classified bytes plus the cleartext at the
# best fixed level, the one that answered soonest (as its sessions reported their cleartext):
# (classified + plain_after) / goodput. Not the smallest cleartext of any level: zstd 19 makes
# the fewest bytes but compresses at a few MB/s, so no sender moves them in the link's time.
# Part 2, on loopback: LOOP_SIZE bytes of the same sources, sieve auto against sieve off.
#
# Response times (sieve: its --json response_ms; the others: wall time until both ends exit),
# medians with min..max over the rounds, and each goal's ratio. The receiver discards (verifies,
# acknowledges, writes nothing). Needs zstd, socat, python3 (apt-get install zstd socat).
set -euo pipefail
ROUNDS=${1:-5}
SIZE=${2:-32MiB}
P=${3:-0.1}
LOOP_SIZE=${4:-256MiB}
RATE=${RATE:-100}
CORPUS=${CORPUS:-crates}
case "$CORPUS" in
  crates|text|csv|json|log|letters) ;;
  *) echo "CORPUS must be crates, text, csv, json, log or letters (got $CORPUS)" >&2; exit 1 ;;
esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces and tc)" >&2; exit 1; }
for t in zstd socat python3 ip tc; do
  command -v "$t" >/dev/null || { echo "needs $t (apt-get install zstd socat iproute2)" >&2; exit 1; }
done
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
S="$TARGET/release/sieve"
W=$(mktemp -d)
C=sieve-bench-$$-c
V=sieve-bench-$$-s
R=sieve-bench-$$-r
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  ip netns del "$C" 2>/dev/null || true
  ip netns del "$V" 2>/dev/null || true
  ip netns del "$R" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
cd "$W"
to_bytes() {
  case "$1" in
    *iB) numfmt --from=iec "${1%iB}" ;;
    *B) numfmt --from=si "${1%B}" ;;
    *) numfmt --from=iec "$1" ;;
  esac
}
BYTES=$(to_bytes "$SIZE")
LOOP_BYTES=$(to_bytes "$LOOP_SIZE")
ranges() {  # FILE P → FILE.ranges.json: five equal classified parts per MiB
  python3 - "$1" "$2" <<'PY'
import json, os, sys
path, p = sys.argv[1], float(sys.argv[2])
n = os.path.getsize(path)
mib = 1 << 20
ranges = []
for start in range(0, n, mib):
    block = min(mib, n - start)
    part = int(block * p / 5)
    for k in range(5):
        a = start + k * block // 5
        if part > 0:
            ranges.append([a, min(a + part, n)])
json.dump({"ranges": ranges}, open(path + ".ranges.json", "w"))
PY
}
if [ "$CORPUS" = crates ]; then
  REG="${CARGO_HOME:-$HOME/.cargo}/registry/src"
  [ -d "$REG" ] || { echo "no crate sources in $REG" >&2; exit 1; }
  # Enough sources for the larger document, then both cut from the start.
  find "$REG" -type f \( -name '*.rs' -o -name '*.md' -o -name '*.toml' \) -print0 | sort -z \
    | xargs -0 cat 2>/dev/null | head -c "$(( BYTES > LOOP_BYTES ? BYTES : LOOP_BYTES ))" \
    > sources || true
  head -c "$BYTES" sources > doc.txt
  head -c "$LOOP_BYTES" sources > loop.txt
  ranges doc.txt "$P"
  ranges loop.txt "$P"
else
  for f in doc:$BYTES loop:$LOOP_BYTES; do
    "$S" gen --kind "$CORPUS" --size "${f#*:}" -p "$P" --seed 1 \
      --ranges-out "${f%%:*}.txt.ranges.json" -o "${f%%:*}.txt" >/dev/null
  done
fi
"$S" certs --dir certs >/dev/null 2>&1
# Warm the page cache.
cat doc.txt loop.txt > /dev/null

# The link: the bottleneck in a third namespace that routes between the two, as the laboratory
# builds its links (shaped on the sender's own interface, its small queue made the kernel refuse
# its own retransmissions and two flows at once fell into retransmission storms).
ip netns add "$C"
ip netns add "$V"
ip netns add "$R"
ip link add sb-c netns "$C" type veth peer name sb-rc netns "$R"
ip link add sb-s netns "$V" type veth peer name sb-rs netns "$R"
ip -n "$C" addr add 10.78.0.1/30 dev sb-c
ip -n "$R" addr add 10.78.0.2/30 dev sb-rc
ip -n "$V" addr add 10.78.0.5/30 dev sb-s
ip -n "$R" addr add 10.78.0.6/30 dev sb-rs
for ns in "$C" "$V" "$R"; do ip -n "$ns" link set lo up; done
ip -n "$C" link set sb-c up
ip -n "$V" link set sb-s up
ip -n "$R" link set sb-rc up
ip -n "$R" link set sb-rs up
ip -n "$C" route add 10.78.0.4/30 via 10.78.0.2
ip -n "$V" route add 10.78.0.0/30 via 10.78.0.6
ip netns exec "$R" sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'
BURST=$(python3 -c "print(max(int($RATE * 1e6 / 8 * 0.002), 10 * 1514))")
ip netns exec "$R" tc qdisc add dev sb-rs root handle 1: tbf rate "${RATE}mbit" burst "$BURST" latency 50ms
ip netns exec "$R" tc qdisc add dev sb-rc root handle 1: tbf rate "${RATE}mbit" burst "$BURST" latency 50ms
HOST=10.78.0.5
mkdir -p out
ip netns exec "$V" "$S" serve --dir out --cert certs/server.pem --key certs/server.key --discard \
  --listen $HOST:17443 --plain-listen $HOST:17080 2>serve.log &
ip netns exec "$V" "$S" serve --dir out --cert certs/server.pem --key certs/server.key --discard \
  --listen 127.0.0.1:17443 --plain-listen 127.0.0.1:17080 2>/dev/null &
"$S" serve --dir out --cert certs/server.pem --key certs/server.key --discard \
  --listen 127.0.0.1:18443 --plain-listen 127.0.0.1:18080 2>serve-loop.log &
sleep 1.5

now_ms() { date +%s%3N; }
# Wait until something in namespace $1 listens on TCP port $2.
listening() {
  for _ in $(seq 1 500); do
    ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q . && return 0
    sleep 0.01
  done
  return 1
}
sieve_send() {  # TO FILE ARGS... → prints response_ms; keeps the JSON in last.json
  local to=$1 file=$2
  shift 2
  "$S" send --to "$to" --server-name localhost --ca certs/ca.pem --json \
    --ranges "$file.ranges.json" "$@" "$file" > last.json
  python3 -c "import json; print(json.load(open('last.json'))['response_ms'])"
}
zstd_socat() {
  ip netns exec "$V" sh -c "socat -u OPENSSL-LISTEN:17444,reuseaddr,cert=certs/server.pem,key=certs/server.key,verify=0 STDOUT | zstd -dq > /dev/null" &
  local srv=$!
  listening "$V" 17444
  local t0; t0=$(now_ms)
  ip netns exec "$C" sh -c "zstd --adapt -q -c doc.txt | socat -u STDIN OPENSSL:$HOST:17444,cafile=certs/ca.pem,commonname=localhost"
  wait $srv
  echo $(( $(now_ms) - t0 ))
}
socat_tcp() {
  ip netns exec "$V" socat -u TCP-LISTEN:17445,reuseaddr OPEN:/dev/null,wronly &
  local srv=$!
  listening "$V" 17445
  local t0; t0=$(now_ms)
  ip netns exec "$C" socat -u OPEN:doc.txt TCP:$HOST:17445
  wait $srv
  echo $(( $(now_ms) - t0 ))
}
on_link() { ip netns exec "$C" "$@"; }

echo "variant,round,ms,plain_after,classified_after" > results.csv
record() { echo "$1,$2,$3,${4:-,}" >> results.csv; }  # ${4}: "plain_after,classified_after"
after() { python3 -c "import json; c=json.load(open('last.json')).get('compression') or {}; print(f\"{c.get('plain_after','')},{c.get('classified_after','')}\")"; }
for r in $(seq 1 "$ROUNDS"); do
  record secure-only "$r" "$(on_link bash -c "$(declare -f sieve_send); S=$S; sieve_send $HOST:17443 doc.txt --mode secure-only")"
  for policy in off auto accent zstd:1 zstd:3 zstd:9 zstd:19; do
    ms=$(on_link bash -c "$(declare -f sieve_send); S=$S; sieve_send $HOST:17443 doc.txt --mode sieve --compress $policy")
    record "sieve $policy" "$r" "$ms" "$(after)"
  done
  ms=$(on_link bash -c "$(declare -f sieve_send); S=$S; sieve_send $HOST:17443 doc.txt --mode sieve --compress auto --compress-classified")
  record "sieve auto classified" "$r" "$ms" "$(after)"
  record "zstd --adapt | socat OPENSSL" "$r" "$(zstd_socat)"
  record "socat TCP" "$r" "$(socat_tcp)"
  # Loopback: auto against off.
  for policy in off auto; do
    record "loopback sieve $policy" "$r" "$(sieve_send 127.0.0.1:18443 loop.txt --mode sieve --compress $policy)" "$(after)"
  done
done
CLASSIFIED=$(python3 -c "import json; print(sum(b-a for a,b in json.load(open('doc.txt.ranges.json'))['ranges']))")
python3 - "$(stat -c %s doc.txt)" "$CLASSIFIED" "$RATE" "$LOOP_BYTES" "$CORPUS" <<'PY'
import csv, statistics as st, sys
size, classified, rate, loop = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
rows = list(csv.DictReader(open("results.csv")))
def col(v, k="ms"): return [float(r[k]) for r in rows if r["variant"] == v and r[k]]
def med(v, k="ms"): return st.median(col(v, k))
corpus = sys.argv[5]
what = "crate sources" if corpus == "crates" else f"`sieve gen --kind {corpus}`"
print(f"{size/2**20:.0f} MiB of {what}, P = {classified/size:.2f}, {rate:g} Mbit/s link; "
      f"{len(col('secure-only'))} alternating rounds; response ms, median [min..max]")
names = ["secure-only", "sieve off", "sieve auto", "sieve accent", "sieve zstd:1", "sieve zstd:3",
         "sieve zstd:9", "sieve zstd:19", "sieve auto classified", "zstd --adapt | socat OPENSSL",
         "socat TCP", "loopback sieve off", "loopback sieve auto"]
for n in names:
    xs = col(n)
    extra = ""
    pa = col(n, "plain_after")
    if pa:
        extra = f"  cleartext {st.median(pa)/1e6:6.2f} MB on the wire"
    ca = col(n, "classified_after")
    if ca and max(ca) > 0:
        extra += f", classified {st.median(ca)/1e6:.2f} MB"
    print(f"{n:30s} {st.median(xs):8.0f} [{min(xs):.0f}..{max(xs):.0f}]{extra}")
goodput = size / (med("socat TCP") / 1000)
fixed = {n: med(n) for n in ["sieve zstd:1", "sieve zstd:3", "sieve zstd:9", "sieve zstd:19"]}
best = min(fixed, key=fixed.get)
best_after = med(best, "plain_after")
bound = (classified + best_after) / goodput * 1000
auto, so = med("sieve auto"), med("secure-only")
print(f"link goodput (socat TCP) {goodput*8/1e6:.1f} Mbit/s; bound = (classified {classified/1e6:.2f} MB "
      f"+ cleartext at {best} {best_after/1e6:.2f} MB) / goodput = {bound:.0f} ms")
print(f"goal  sieve auto / secure-only            = {auto/so:.3f}  (goal <= 0.40)")
print(f"goal  sieve auto / bound                  = {auto/bound:.3f}  (goal <= 1.10)")
print(f"      sieve auto / best fixed ({best}) = {auto/fixed[best]:.3f}  (throughput {fixed[best]/auto*100:.1f} % of the ideal; goal >= 95 %)")
print(f"      sieve accent / best fixed            = {med('sieve accent')/fixed[best]:.3f}")
z = med("zstd --adapt | socat OPENSSL")
print(f"goal  sieve auto classified / zstd|socat  = {med('sieve auto classified')/z:.3f}  (goal <= 1.15)")
print(f"      sieve auto / zstd|socat             = {auto/z:.3f}")
lo, la = med("loopback sieve off"), med("loopback sieve auto")
paired = [a / o for o, a in zip(col("loopback sieve off"), col("loopback sieve auto"))]
print(f"goal  loopback ({loop/2**20:.0f} MiB) auto / off = {la/lo:.3f}, per round {st.median(paired):.3f} "
      f"[{min(paired):.3f}..{max(paired):.3f}]  (goal <= 1.03)")
PY
echo "(CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, shared by both ends)"
cp results.csv "$TARGET/bench-compress.csv"
