#!/usr/bin/env bash
# The side-by-side run of the book's Performance chapter: emseepea (release,
# dev bearer token, sealed cursors, a legacy session per connection; empty
# precompile cache, so it compiles at start) with a source in each language,
# the Rust catalog (emseepea), python-notes (emseepea-py) and js-catalog
# (emseepea-js), beside the peers' servers; then the per-language ratios.
# Usage: benchmarks/peers.sh [RUNS] [SECONDS]   (after benchmarks/setup.sh);
#   ends with benchmarks/targets.py on the run (issue 14's targets, cell by cell).
#   ALSO=ems-inline.toml benchmarks/peers.sh ...   a second emseepea (another
#   config in target/ems, as "emseepea-2") in the same run, cell by cell;
#   ALSO_BIN=PATH runs that second server from another binary (a baseline).
#   LANGS="py js" picks the interpreted servers (LANGS="" for none);
#   PEERS="rmcp python-2w" picks the peers; BENCH_ARGS="-m fixed -c 1" adds
#   bench.sh options (one cell, say, to find what a cell depends on).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/target/release/emseepea
cd "$ROOT/target/ems"
rm -rf state/cache state2 state-py state-js
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT
# start NAME CONFIG PORT STATE_DIR [SCOPE]: a server, then its `-H` and URL arguments.
ARGS=()
start() {
  local log="$ROOT/target/ems/bench-$1.log"
  sed "s#^state_dir = .*#state_dir = \"$4\"#" "$2" > "bench-$1.toml"
  local bin=$B; [ "$1" = emseepea-2 ] && bin=${ALSO_BIN:-$B}
  $bin serve --config "bench-$1.toml" --listen "127.0.0.1:$3" > "$log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 300); do grep -q "listening on" "$log" && break; sleep 0.2; done
  local token
  token=$($B token --config "bench-$1.toml" --sub alice --scope "${5:-catalog:read}" --audience "http://127.0.0.1:$3/mcp")
  ARGS+=(-H "$1=Authorization: Bearer $token" --prime "$1" "$1=http://127.0.0.1:$3/mcp@SESSION")
}
start emseepea ems.toml 18301 state
for lang in ${LANGS-py js}; do
  case $lang in
    py) start emseepea-py ems-py.toml 18321 state-py notes:read ;;
    js) start emseepea-js ems-js.toml 18331 state-js catalog:read ;;
  esac
done
if [ -n "${ALSO:-}" ]; then start emseepea-2 "$ALSO" 18311 state2; fi
# The VM's idle policy moves every one-client figure (BENCHMARKS.md,
# twenty-fifth round): say what it was.
echo "# idle: $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo unknown)," \
  "guest_halt_poll_ns $(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null || echo -)"
cd "$ROOT/target/peers"
# bench.sh exits 1 after printing its results: its EXIT trap ends on
# `[ -n "$p" ] && ...` over an empty list, under `set -e`. Say so, not fail.
# shellcheck disable=SC2086 # BENCH_ARGS is a list of options
./bench.sh -r "${1:-1}" -d "${2:-5}" -s "${PEERS:-bare-hyper rmcp ts-sdk python-2w}" --no-wrk \
  ${BENCH_ARGS:-} "${ARGS[@]}" \
  || echo "(bench.sh exited $?: see its results above)"
# The issue's targets cell by cell, and what each SDK multiple asks of the
# driver's ceiling (bare hyper), from this run's results.
latest=$(ls -td "$ROOT"/target/peers/results/*/ | head -1)
echo
python3 "$ROOT/benchmarks/targets.py" "${latest}results.jsonl" emseepea
if [ -n "${ALSO:-}" ]; then
  echo
  python3 "$ROOT/benchmarks/targets.py" "${latest}results.jsonl" emseepea-2
fi
echo
python3 "$ROOT/benchmarks/targets.py" "${latest}results.jsonl" --languages
