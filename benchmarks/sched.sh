#!/usr/bin/env bash
# Where the two cores go during one cell, for emseepea and rmcp in turn:
# the server's and the driver's cores, the cores left idle, and how long the
# server's threads and the driver wait, runnable, for a core (`perf sched`).
# The peers' driver is one thread on the same two cores: when it waits for a
# core, no new request reaches any server, whatever that server's own cost.
# Usage: [CONFIG=ems-inline.toml] benchmarks/sched.sh [MODE] [C] [ROUNDS]   (after setup.sh;
#   needs perf, Debian's linux-perf)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=${1:-fixed}; C=${2:-64}; ROUNDS=${3:-2}; CONFIG=${CONFIG:-ems.toml}
cd "$ROOT/target/ems"
D=$ROOT/target/peers/target/release/mcp-load
B=$ROOT/target/release/emseepea
OUT=$(mktemp -d)
# In target/ems, beside the sources its `sources_dir` names.
sed "s#^state_dir = .*#state_dir = \"$OUT/state\"#" "$CONFIG" > sched-ems.toml
"$B" serve --config sched-ems.toml --listen 127.0.0.1:18341 > "$OUT/ems.log" 2>&1 &
EMS=$!
"$ROOT/target/peers/target/release/peer-rmcp" 18342 > "$OUT/rmcp.log" 2>&1 &
RMCP=$!
trap 'kill $EMS $RMCP 2>/dev/null || true; rm -rf "$OUT"' EXIT
for _ in $(seq 300); do grep -q "listening on" "$OUT/ems.log" && break; sleep 0.1; done
grep -q "listening on" "$OUT/ems.log" || { cat "$OUT/ems.log"; exit 1; }
TOKEN=$("$B" token --config sched-ems.toml --sub alice --scope catalog:read --audience http://127.0.0.1:18341/mcp)
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
# busy and idle jiffies of the whole machine (steal excluded from both)
machine() { awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat; }
# cell NAME PID DRIVER-ARGS...: one 8 s cell, measured from its first second
# on for about 4 s (perf sched records 1 s of it)
cell() {
  local name=$1 pid=$2; shift 2
  "$D" -c "$C" --mode "$MODE" --warmup 0 -d 8 "$@" > "$OUT/cell.out" 2>&1 &
  local drv=$!
  sleep 1
  local s0 d0 b0 i0 s1 d1 b1 i1 t0 t1
  t0=$(date +%s.%N); s0=$(ticks "$pid"); d0=$(ticks "$drv"); read -r b0 i0 < <(machine)
  perf sched record -o "$OUT/sched.data" -- sleep 1 > /dev/null 2>&1
  sleep 2
  t1=$(date +%s.%N); s1=$(ticks "$pid"); d1=$(ticks "$drv"); read -r b1 i1 < <(machine)
  wait "$drv" || true
  local lat
  lat=$(perf sched latency -i "$OUT/sched.data" 2>/dev/null \
    | awk '/tokio-rt-worker|mcp-load/ {n=$1; sub(/:.*/,"",n); for(i=1;i<=NF;i++) if($i=="avg:") printf "%s %s ms  ", n, $(i+1)}')
  python3 -c "
t=$(getconf CLK_TCK)*($t1-$t0)
print(f'$name: {\"$(grep -oE 'ok [0-9]+ req/s' "$OUT/cell.out")\"}, server {($s1-$s0)/t:.2f} cores, driver {($d1-$d0)/t:.2f}, idle {($i1-$i0)/t:.2f} of {($b1-$b0+$i1-$i0)/t:.2f}; runnable wait (avg): $lat')"
}
for r in $(seq "$ROUNDS"); do
  echo "== round $r: $MODE C=$C"
  if [ "$MODE" = fixed ]; then
    cell emseepea "$EMS" --url http://127.0.0.1:18341/mcp --session --prime 100 --header "Authorization: Bearer $TOKEN"
    cell rmcp "$RMCP" --url http://127.0.0.1:18342/mcp --cursor 5000
  else
    cell emseepea "$EMS" --url http://127.0.0.1:18341/mcp --session --header "Authorization: Bearer $TOKEN"
    cell rmcp "$RMCP" --url http://127.0.0.1:18342/mcp
  fi
done
