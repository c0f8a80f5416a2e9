#!/usr/bin/env bash
# The side-by-side run of BENCHMARKS.md: emseepea (release, catalog guest,
# dev bearer token, sealed cursors, a legacy session per connection; empty
# precompile cache, so it compiles at start) beside the peers' servers.
# Usage: benchmarks/peers.sh [RUNS] [SECONDS]   (after benchmarks/setup.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/target/release/emseepea
cd "$ROOT/target/ems"
rm -rf state/cache
PORT=18301
$B serve --config ems.toml --listen 127.0.0.1:$PORT > "$ROOT/target/ems/bench-server.log" 2>&1 &
EPID=$!
trap 'kill $EPID 2>/dev/null || true' EXIT
for _ in $(seq 300); do grep -q "listening on" bench-server.log && break; sleep 0.2; done
TOKEN=$($B token --config ems.toml --sub alice --scope catalog:read --audience http://127.0.0.1:$PORT/mcp)
cd "$ROOT/target/peers"
./bench.sh -r "${1:-1}" -d "${2:-5}" -s "bare-hyper rmcp ts-sdk python-2w" --no-wrk \
  -H "emseepea=Authorization: Bearer $TOKEN" --prime emseepea "emseepea=http://127.0.0.1:$PORT/mcp@SESSION"
