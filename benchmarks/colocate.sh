#!/usr/bin/env bash
# What one client's round trip pays for crossing CPUs: each server at fixed
# C = 1, first placed by the kernel ("spread": the driver and the server's
# thread end up on different CPUs, and every request and response wakes a
# sleeping one), then with the server and the driver both confined to CPU 0
# ("one CPU": the same wake-ups stay on one CPU). On a VM whose idle vCPUs halt,
# the difference is the hypervisor's cost of waking a halted vCPU, which no
# server can take off its own round trip (BENCHMARKS.md, twenty-ninth round).
# Prints, per server and placement, pages/s of each run, the round trip, the
# server's CPU per page and its context switches per page (its whole process tree).
# Usage: benchmarks/colocate.sh [RUNS] [SECONDS]   (after benchmarks/setup.sh)
#   SERVERS="rmcp emseepea" picks the servers (default: bare-hyper rmcp ts-sdk python-1w emseepea).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${1:-3}; SECS=${2:-3}
PEERS=$ROOT/target/peers; EMS=$ROOT/target/ems
D=$PEERS/target/release/mcp-load; B=$ROOT/target/release/emseepea
NODE26=$PEERS/ts-sdk/runtimes/node26/node_modules/.bin/node
PORT=18370; URL=http://127.0.0.1:$PORT/mcp; TCK=$(getconf CLK_TCK)
SP=
# tree PID: the process and all its descendants (uvicorn's workers, node's).
tree() { local c; echo "$1"; for c in $(pgrep -P "$1" 2>/dev/null || true); do tree "$c"; done; }
# stop: the server and its descendants, then until its port is free.
stop() {
  [ -n "$SP" ] || return 0
  kill $(tree "$SP") 2>/dev/null || true
  wait "$SP" 2>/dev/null || true
  SP=
  for _ in $(seq 100); do (: < /dev/tcp/127.0.0.1/$PORT) 2>/dev/null || return 0; sleep 0.1; done
}
trap stop EXIT
# start NAME PREFIX...: the server, under PREFIX (taskset or env).
start() {
  local n=$1; shift
  case $n in
    bare-hyper) (cd "$PEERS" && exec "$@" target/release/peer-bare-hyper $PORT) ;;
    rmcp) (cd "$PEERS" && exec "$@" target/release/peer-rmcp $PORT) ;;
    ts-sdk) (cd "$PEERS" && PORT=$PORT exec "$@" "$NODE26" ts-sdk/server.mjs) ;;
    python-1w) (cd "$PEERS" && exec "$@" python-sdk/.venv/bin/uvicorn server:app --app-dir python-sdk \
      --host 127.0.0.1 --port $PORT --loop uvloop --http httptools --no-access-log --log-level warning --workers 1) ;;
    emseepea) (cd "$EMS" && sed "s#^state_dir = .*#state_dir = \"colocate\"#" ems.toml > colocate.toml \
      && exec "$@" "$B" serve --config colocate.toml --listen 127.0.0.1:$PORT) ;;
    *) echo "unknown server $n" >&2; exit 2 ;;
  esac > "$EMS/colocate-$n.log" 2>&1 &
  SP=$!
  for _ in $(seq 300); do (: < /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.05; done
  sleep 0.5
}
# ticks PID: CPU ticks of the process tree.
ticks() {
  local t=0 p
  for p in $(tree "$1"); do
    t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo $t
}
# switches PID: context switches (voluntary and not) of every thread of the tree.
switches() {
  local t=0 p f
  for p in $(tree "$1"); do
    for f in /proc/$p/task/*/status; do
      t=$((t + $(awk '/ctxt_switches/{s+=$2} END{print s+0}' "$f" 2>/dev/null || echo 0)))
    done
  done
  echo $t
}
echo "server placement | pages/s per run | round trip µs (median run) | server CPU µs per page | context switches per page"
for n in ${SERVERS:-bare-hyper rmcp ts-sdk python-1w emseepea}; do
  for place in spread one-cpu; do
    pre=(env); [ $place = one-cpu ] && pre=(taskset -c 0)
    start $n "${pre[@]}"
    args=(--url $URL -c 1 --mode fixed --warmup 0)
    if [ $n = emseepea ]; then
      token=$(cd "$EMS" && "$B" token --config colocate.toml --sub alice --scope catalog:read --audience $URL)
      args+=(--session --header "Authorization: Bearer $token" --prime 100)
    else
      args+=(--cursor 5000)
    fi
    "${pre[@]}" "$D" "${args[@]}" -d 1 > /dev/null 2>&1
    rates=(); cpus=(); csws=()
    for _ in $(seq "$RUNS"); do
      t0=$(ticks $SP); c0=$(switches $SP)
      rps=$("${pre[@]}" "$D" "${args[@]}" -d "$SECS" 2>&1 | grep -oE 'ok [0-9]+ req/s' | grep -oE '[0-9]+')
      t1=$(ticks $SP); c1=$(switches $SP)
      rates+=("$rps"); cpus+=("$(( (t1 - t0) * 1000000 / TCK / (rps * SECS) ))")
      csws+=("$(( (c1 - c0) * 100 / (rps * SECS) ))")
    done
    python3 - "$n" "$place" "${rates[*]}" "${cpus[*]}" "${csws[*]}" <<'PY'
import statistics, sys
n, place = sys.argv[1], sys.argv[2]
rates, cpus, csws = (list(map(int, a.split())) for a in sys.argv[3:6])
m = statistics.median(rates)
print(f"{n} {place} | {' '.join(map(str, rates))} | {1e6 / m:.1f} | {statistics.median(cpus)} | {statistics.median(csws) / 100:.2f}")
PY
    stop
  done
done
