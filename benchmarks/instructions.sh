#!/usr/bin/env bash
# Instructions per page, counted by callgrind: on this VM, wall-clock rates
# swing by up to 3x between phases and there are no hardware counters, but an
# instruction count does not depend on the phase. Use it to compare two host
# binaries (same config, same mode); it is not a rate. Valgrind's emulated CPU
# has no SHA-NI and counts each `rep movs`/`rep stos` step, so SHA-256, memcpy
# and memset weigh more here than on hardware.
# Usage: benchmarks/instructions.sh BIN [CONFIG] [MODE] [C] [SECONDS]
#   CONFIG relative to target/ems (after benchmarks/setup.sh; default
#   ems-inline.toml); needs `valgrind` (apt-get install valgrind).
# Prints pages served, instructions, instructions per page, and writes the
# profile to target/ems/callgrind.<name> (read it with callgrind_annotate).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(realpath "$1"); CFG=${2:-ems-inline.toml}; MODE=${3:-traversal}; C=${4:-16}; SECS=${5:-20}
cd "$ROOT/target/ems"
D=$ROOT/target/peers/target/release/mcp-load
PORT=18350
NAME=$(basename "$BIN")
# Valgrind cannot reserve the pool's default address space: a small pool.
sed "s#^state_dir = .*#state_dir = \"vg\"#" "$CFG" > vg.toml
cat >> vg.toml <<'EOF'
max_concurrent_calls = 2
standby_instances = 0
max_memories_per_component = 1
EOF
# The compiler child runs under valgrind too (--trace-children), so the
# component is compiled for valgrind's CPU, not this one's.
rm -rf vg && mkdir vg
valgrind --tool=callgrind --trace-children=yes --instr-atstart=no \
  --callgrind-out-file="$PWD/callgrind.$NAME.%p" \
  "$BIN" serve --config vg.toml --listen "127.0.0.1:$PORT" > vg.log 2>&1 &
VG=$!
trap 'kill $VG 2>/dev/null || true' EXIT
for _ in $(seq 300); do grep -q "listening on" vg.log && break; sleep 0.5; done
TOKEN=$("$BIN" token --config vg.toml --sub alice --scope catalog:read --audience "http://127.0.0.1:$PORT/mcp")
args=(--url "http://127.0.0.1:$PORT/mcp" -c "$C" --mode "$MODE" --warmup 0 --session
      --header "Authorization: Bearer $TOKEN")
[ "$MODE" = fixed ] && args+=(--prime 100)
# Warm: first calls, lazily built state, the allocator's pages.
"$D" "${args[@]}" -d 3 > /dev/null 2>&1
rm -f callgrind."$NAME".*
callgrind_control -i on "$VG" > /dev/null
out=$("$D" "${args[@]}" -d "$SECS" 2>&1)
callgrind_control -d "$VG" > /dev/null
pages=$(echo "$out" | grep -oE '\(([0-9]+) ok' | grep -oE '[0-9]+')
f=$(ls -t callgrind."$NAME".*.1 | head -1)
mv "$f" "callgrind.$NAME"
ir=$(callgrind_annotate "callgrind.$NAME" 2>/dev/null | awk '/PROGRAM TOTALS/{gsub(",","",$1); print $1}')
echo "$NAME $MODE C=$C: $pages pages, $ir instructions, $((ir / pages)) per page"
