#!/usr/bin/env bash
# The demo under 200 concurrent traversals by ten users (issue 51): the
# demo's own config (default [runtime]), its four sources (catalog,
# documents, python-notes, js-catalog), dev tokens for ten users, each
# traversal an official Python SDK client with a session of its own.
# Prints traversals completed and failures, then the server's memory: idle,
# right after, its peak, and a minute later (kept instances expire after
# warm_idle_ms, idle sources are trimmed after idle_trim_s).
# Usage: benchmarks/demo-load.sh [TRAVERSALS]   (after benchmarks/setup.sh and
#   cargo xtask clients, for the Python venv)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/target/release/emseepea
CFG=$ROOT/target/ems/demo-load.toml
mkdir -p "$ROOT/target/ems" "$ROOT/target/demo"
# The demo's databases, as `cargo xtask demo` seeds them.
python3 - "$ROOT" <<'PY'
import sqlite3, sys
root = sys.argv[1]
for db, guest in (("documents", "documents"), ("notes", "python-notes")):
    path = f"{root}/target/demo/{db}.sqlite"
    conn = sqlite3.connect(path)
    for f in ("schema", "seed"):
        conn.executescript(open(f"{root}/guest-examples/{guest}/sql/{f}.sql").read())
    conn.commit()
PY
sed -e "s#\.\./target#$ROOT/target#g" "$ROOT/guest-examples/demo.toml" > "$CFG"
# RUNTIME="warm_instances = 0" benchmarks/demo-load.sh: the same with other [runtime] settings.
if [ -n "${RUNTIME:-}" ]; then printf '\n[runtime]\n%b\n' "$RUNTIME" >> "$CFG"; fi
$B serve --config "$CFG" > "$ROOT/target/ems/demo-load.log" 2>&1 &
P=$!
trap 'kill $P 2>/dev/null || true' EXIT
for _ in $(seq 600); do grep -q "listening on" "$ROOT/target/ems/demo-load.log" && break; sleep 0.5; done
rss() { awk '/VmRSS/ {print $2}' /proc/$P/status; }
sleep 2
echo "idle $(rss) kB"
TOKENS=$ROOT/target/ems/demo-load.tokens
: > "$TOKENS"
for u in alice bob carol dave erin frank grace heidi ivan judy; do
  $B token --config "$CFG" --sub $u --scope "catalog:read documents:read notes:read" \
    --audience http://127.0.0.1:8787/mcp >> "$TOKENS"
done
"$ROOT/target/clients/py-mcp2/bin/python" "$ROOT/benchmarks/demo_load.py" \
  http://127.0.0.1:8787/mcp "$TOKENS" --traversals "${1:-200}"
echo "after $(rss) kB (peak $(awk '/VmHWM/ {print $2}' /proc/$P/status) kB)"
for t in 20 40 60; do sleep 20; echo -n "+${t}s $(rss) kB  "; done; echo
