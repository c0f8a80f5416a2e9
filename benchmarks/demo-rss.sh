#!/usr/bin/env bash
# The demo's memory under 200 concurrent traversals and after (BENCHMARKS.md,
# "RSS"): VmRSS idle, right after 20 s of load, then every 10 s for a minute
# (idle sources are trimmed after [runtime] idle_trim_s, 30 s).
# Usage: benchmarks/demo-rss.sh [ENV=VALUE...]   (after benchmarks/setup.sh and cargo xtask demo once)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/target/release/emseepea
CFG=$ROOT/target/ems/demo-bench.toml
# The demo's config, with room for 200 connections of one principal.
sed -e "s#\.\./target#$ROOT/target#g" \
    -e 's/^\[auth\]$/[http]\nmax_sessions_per_principal = 1000\n\n[runtime]\nmax_calls_per_caller = 64\nmax_calls_per_source = 64\n\n[auth]/' \
    "$ROOT/guest-examples/demo.toml" > "$CFG"
env "$@" $B serve --config "$CFG" > "$ROOT/target/ems/demo-server.log" 2>&1 &
P=$!
trap 'kill $P 2>/dev/null || true' EXIT
for _ in $(seq 600); do grep -q "listening on" "$ROOT/target/ems/demo-server.log" && break; sleep 0.5; done
rss() { awk '/VmRSS/ {print $2}' /proc/$P/status; }
sleep 2
echo "idle $(rss) kB"
TOKEN=$($B token --config "$CFG" --sub alice --scope "catalog:read documents:read notes:read js-catalog:read" --audience http://127.0.0.1:8787/mcp)
"$ROOT/target/peers/target/release/mcp-load" --url http://127.0.0.1:8787/mcp -c 200 -d 20 --mode traversal \
  --session --header "Authorization: Bearer $TOKEN" 2>&1 | grep -oE 'ok [0-9]+ req/s|errors [0-9]+' | tr '\n' ' '
echo "after $(rss) kB (peak $(awk '/VmHWM/ {print $2}' /proc/$P/status) kB)"
for t in 10 20 30 40 50 60; do sleep 10; echo -n "+${t}s $(rss)  "; done; echo
