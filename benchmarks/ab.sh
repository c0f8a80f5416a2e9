#!/usr/bin/env bash
# One cell against one server binary, for A/B runs (alternate binaries or
# configs, repeat, compare): pages/s, p50, p99 and server CPU per page.
# Usage: benchmarks/ab.sh BINARY [CONFIG] [MODE] [C] [SECONDS]
#   CONFIG relative to target/ems (default ems.toml), MODE fixed|traversal.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$1; CFG=${2:-ems.toml}; MODE=${3:-traversal}; C=${4:-16}; SECS=${5:-4}
cd "$ROOT/target/ems"
$B serve --config "$CFG" > ab-server.log 2>&1 &
SP=$!
trap 'kill $SP 2>/dev/null || true' EXIT
for _ in $(seq 300); do grep -q "listening on" ab-server.log && break; sleep 0.1; done
TOKEN=$($B token --config "$CFG" --sub alice --scope catalog:read --audience http://127.0.0.1:18301/mcp)
D=$ROOT/target/peers/target/release/mcp-load
PRIME=(); [ "$MODE" = fixed ] && PRIME=(--prime 100)
ARGS=(--url http://127.0.0.1:18301/mcp -c "$C" --mode "$MODE" --session "${PRIME[@]}" --header "Authorization: Bearer $TOKEN")
$D "${ARGS[@]}" -d 1 >/dev/null 2>&1
a=$(awk '{print $14+$15}' /proc/$SP/stat)
OUT=$($D "${ARGS[@]}" -d "$SECS" --warmup 0 2>&1)
b=$(awk '{print $14+$15}' /proc/$SP/stat)
RPS=$(echo "$OUT" | grep -oE 'ok [0-9]+ req/s' | grep -oE '[0-9]+')
P50=$(echo "$OUT" | grep -oE 'p50 [0-9.]+' | cut -d' ' -f2)
P99=$(echo "$OUT" | grep -oE 'p99 [0-9.]+' | cut -d' ' -f2)
ERR=$(echo "$OUT" | grep -oE 'errors [0-9]+' | cut -d' ' -f2)
TICK=$(getconf CLK_TCK)
US=$(python3 -c "print(round(($b-$a)*1e6/$TICK/($RPS*$SECS),1))")
echo "$(basename "$B") $CFG $MODE C=$C: $RPS pages/s p50 $P50 ms p99 $P99 ms errors $ERR, server CPU ${US} µs/page"
