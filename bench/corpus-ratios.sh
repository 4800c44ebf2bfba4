#!/usr/bin/env bash
# How far each corpus compresses, frame by frame, at zstd 1, 3, 9 and 19.
#
#   bench/corpus-ratios.sh [SIZE] [FRAME]        defaults: 64MiB 4MiB
#
# Corpora, SIZE bytes each:
#   letters, text, csv, json, log   `sieve gen --kind K` at P = 0 (the whole document is content)
#   rust-docs                       the Rust toolchain's HTML documentation
#                                   ($(rustc --print sysroot)/share/doc), files in sorted order
#   crate-sources                   the cargo registry's crate sources (~/.cargo/registry/src:
#                                   .rs, .md, .toml files), in sorted order
# each concatenated and cut to SIZE (a corpus with less on this machine is used whole, and its
# size says so). Every FRAME is compressed independently, as the sender compresses plain frames
# (`zstd -b -B FRAME`, the same libzstd). The ratio is compressed / original: lower is better.
# Needs the zstd tool (apt-get install zstd). Writes ratios.csv in the current directory.
set -euo pipefail
SIZE=${1:-64MiB}
FRAME=${2:-4MiB}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
command -v zstd >/dev/null || { echo "needs the zstd tool: apt-get install zstd" >&2; exit 1; }
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml"
S="$ROOT/target/release/sieve"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# 64MiB → 67108864, 64MB → 64000000, 4096 → 4096.
to_bytes() {
  case "$1" in
    *iB) numfmt --from=iec "${1%iB}" ;;
    *B) numfmt --from=si "${1%B}" ;;
    *) numfmt --from=iec "$1" ;;
  esac
}
BYTES=$(to_bytes "$SIZE")
FRAME_BYTES=$(to_bytes "$FRAME")

for kind in letters text csv json log; do
  "$S" gen --kind "$kind" --size "$BYTES" --proportion 0 -o "$W/$kind" 2>/dev/null
done
DOCS="$(rustc --print sysroot)/share/doc"
if [ -d "$DOCS" ]; then
  # head closes the pipe once it has SIZE bytes: cat's broken pipe is expected, not reported.
  find "$DOCS" -type f -name '*.html' -print0 | sort -z | xargs -0 cat 2>/dev/null \
    | head -c "$BYTES" > "$W/rust-docs" || true
fi
REG="${CARGO_HOME:-$HOME/.cargo}/registry/src"
if [ -d "$REG" ]; then
  find "$REG" -type f \( -name '*.rs' -o -name '*.md' -o -name '*.toml' \) -print0 | sort -z \
    | xargs -0 cat 2>/dev/null | head -c "$BYTES" > "$W/crate-sources" || true
fi

echo "corpus,bytes,frame,zstd1,zstd3,zstd9,zstd19" > ratios.csv
printf '%-14s %12s %8s %8s %8s %8s\n' corpus bytes zstd1 zstd3 zstd9 zstd19
for c in letters text csv json log rust-docs crate-sources; do
  f="$W/$c"
  [ -s "$f" ] || { echo "$c: not on this machine, skipped" >&2; continue; }
  n=$(stat -c %s "$f")
  row="$c,$n,$FRAME_BYTES"
  line=$(printf '%-14s %12s' "$c" "$n")
  for level in 1 3 9 19; do
    # The last progress line holds "ORIGINAL -> COMPRESSED (xRATIO)".
    out=$(zstd -b"$level" -i1 -B"$FRAME_BYTES" "$f" 2>&1 | tr '\r' '\n' | grep -- '->' | tail -1)
    ratio=$(awk '{for (i = 1; i <= NF; i++) if ($i == "->") { printf "%.3f", $(i+1) / $(i-1); exit }}' <<<"$out")
    row="$row,$ratio"
    line="$line $(printf '%8s' "$ratio")"
  done
  echo "$row" >> ratios.csv
  echo "$line"
done
echo "(compressed / original, each $FRAME_BYTES-byte frame alone; CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
