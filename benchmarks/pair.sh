#!/usr/bin/env bash
# One client's latency on two servers at once, request by request in turn
# (A, B, B, A, ...), so that the VM's slow phases, which swing every rate
# here by up to 3x within seconds, fall on both alike: for A/B changes of a
# few microseconds at C = 1, where back-to-back runs cannot tell them apart.
# The driver is Python (pair.py): its own ~0.2 ms per request is in both.
# Usage: benchmarks/pair.sh BIN_A CONFIG_A BIN_B CONFIG_B [PAGES] [fixed|traversal]
#   CONFIG relative to target/ems (after benchmarks/setup.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT/target/ems"
BA=$1; CA=$2; BB=$3; CB=$4; N=${5:-5000}; MODE=${6:-fixed}
sed "s#^state_dir = .*#state_dir = \"pa\"#" "$CA" > pair-a.toml
sed "s#^state_dir = .*#state_dir = \"pb\"#" "$CB" > pair-b.toml
"$BA" serve --config pair-a.toml --listen 127.0.0.1:18321 > pair-a.log 2>&1 & PA=$!
"$BB" serve --config pair-b.toml --listen 127.0.0.1:18322 > pair-b.log 2>&1 & PB=$!
trap 'kill $PA $PB 2>/dev/null' EXIT
for _ in $(seq 300); do grep -q "listening on" pair-a.log && grep -q "listening on" pair-b.log && break; sleep 0.1; done
TA=$("$BA" token --config pair-a.toml --sub alice --scope catalog:read --audience http://127.0.0.1:18321/mcp)
TB=$("$BB" token --config pair-b.toml --sub alice --scope catalog:read --audience http://127.0.0.1:18322/mcp)
python3 "$ROOT/benchmarks/pair.py" http://127.0.0.1:18321/mcp "$TA" http://127.0.0.1:18322/mcp "$TB" "$N" "$MODE"
