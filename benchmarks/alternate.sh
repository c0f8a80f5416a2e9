#!/usr/bin/env bash
# Throughput of two emseepea servers, both running, measured in turn in short
# cells (A, B, B, A, ...): on this VM rates swing by up to 3x between phases
# that last seconds, so only cells taken side by side in time compare.
# Prints each pair (pages/s, server CPU per page, p99) and the medians.
# Usage: benchmarks/alternate.sh BIN_A CONFIG_A BIN_B CONFIG_B [MODE] [C] [PAIRS] [SECONDS]
#   CONFIG relative to target/ems (after benchmarks/setup.sh). BIN_A `rmcp`
#   (CONFIG_A ignored, say -) is the peers' rmcp server: B/A is then
#   emseepea's ratio to rmcp, cell by cell in the same moments.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BA=$1; CA=$2; BB=$3; CB=$4; MODE=${5:-traversal}; C=${6:-64}; PAIRS=${7:-10}; SECS=${8:-1}
cd "$ROOT/target/ems"
D=$ROOT/target/peers/target/release/mcp-load
declare -A PORT=([a]=18331 [b]=18332) PID TOKEN
# side X BIN CONFIG: start server X; BIN `rmcp` is the peers' rmcp server
# (no auth, plain offset cursors), for emseepea against it in the same moments.
side() {
  if [ "$2" = rmcp ]; then
    "$ROOT/target/peers/target/release/peer-rmcp" "${PORT[$1]}" > "alt-$1.log" 2>&1 &
    PID[$1]=$!
    for _ in $(seq 100); do (: < "/dev/tcp/127.0.0.1/${PORT[$1]}") 2>/dev/null && break; sleep 0.05; done
    return
  fi
  sed "s#^state_dir = .*#state_dir = \"alt-$1\"#" "$3" > "alt-$1.toml"
  "$2" serve --config "alt-$1.toml" --listen "127.0.0.1:${PORT[$1]}" > "alt-$1.log" 2>&1 &
  PID[$1]=$!
  for _ in $(seq 300); do grep -q "listening on" "alt-$1.log" && break; sleep 0.1; done
  TOKEN[$1]=$("$2" token --config "alt-$1.toml" --sub alice --scope catalog:read --audience "http://127.0.0.1:${PORT[$1]}/mcp")
}
trap 'kill ${PID[a]:-} ${PID[b]:-} 2>/dev/null || true' EXIT
side a "$BA" "$CA"
side b "$BB" "$CB"
# cell X: pages/s and server CPU µs per page of one cell against server X.
cell() {
  local args=(--url "http://127.0.0.1:${PORT[$1]}/mcp" -c "$C" --mode "$MODE" --warmup 0)
  if [ -n "${TOKEN[$1]:-}" ]; then
    args+=(--session --header "Authorization: Bearer ${TOKEN[$1]}")
    [ "$MODE" = fixed ] && args+=(--prime 100)
  elif [ "$MODE" = fixed ]; then
    args+=(--cursor 5000)
  fi
  local t0 t1 out rps
  t0=$(awk '{print $14+$15}' "/proc/${PID[$1]}/stat")
  out=$("$D" "${args[@]}" -d "$SECS" 2>&1)
  t1=$(awk '{print $14+$15}' "/proc/${PID[$1]}/stat")
  rps=$(echo "$out" | grep -oE 'ok [0-9]+ req/s' | grep -oE '[0-9]+')
  p99=$(echo "$out" | sed -E 's/.* p99 ([0-9.]+) ms.*/\1/')
  echo "$rps $(python3 -c "print(round(($t1-$t0)*1e6/$(getconf CLK_TCK)/($rps*$SECS),1))") $p99"
}
cell a >/dev/null; cell b >/dev/null
RATIOS=(); P99A=(); P99B=()
# field N of a cell's "pages/s µs/page p99" line
f() { echo "$1" | cut -d' ' -f"$2"; }
for i in $(seq "$PAIRS"); do
  if [ $((i % 2)) = 1 ]; then A=$(cell a); B=$(cell b); else B=$(cell b); A=$(cell a); fi
  r=$(python3 -c "print(round($(f "$B" 1)/$(f "$A" 1),3))")
  RATIOS+=("$r"); P99A+=("$(f "$A" 3)"); P99B+=("$(f "$B" 3)")
  echo "pair $i: A $(f "$A" 1) pages/s ($(f "$A" 2) µs/page, p99 $(f "$A" 3) ms)  B $(f "$B" 1) pages/s ($(f "$B" 2) µs/page, p99 $(f "$B" 3) ms)  B/A $r"
done
python3 -c "import statistics,sys; r=sorted(map(float,sys.argv[1:])); print(f'$MODE C=$C: median B/A {statistics.median(r):.3f} (range {r[0]:.3f}-{r[-1]:.3f}, {len(r)} pairs)')" "${RATIOS[@]}"
python3 -c "import statistics,sys; n=len(sys.argv)//2; a=list(map(float,sys.argv[1:n+1])); b=list(map(float,sys.argv[n+1:])); print(f'median p99: A {statistics.median(a):.2f} ms, B {statistics.median(b):.2f} ms')" "${P99A[@]}" "${P99B[@]}"
