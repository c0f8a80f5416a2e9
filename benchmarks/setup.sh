#!/usr/bin/env bash
# One-time setup for the scripts here: the release server, the peers
# (../shared/peers copied to target/peers, built by its setup.sh) and the
# benchmark server's config and sources in target/ems.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
cargo build --release -p emseepea --bin emseepea
cargo xtask guests
[ -d target/peers ] || cp -r ../shared/peers target/peers
(cd target/peers && ./setup.sh --no-wrk)
mkdir -p target/ems/sources
cp target/guests/catalog.wasm target/ems/sources/
printf '[config]\nitems = "10000"\n' > target/ems/sources/catalog.toml
cat > target/ems/ems.toml <<'TOML'
listen = "127.0.0.1:18301"
sources_dir = "sources"
state_dir = "state"

[auth]
mode = "dev"

[http]
max_sessions_per_principal = 1000

[runtime]
max_calls_per_caller = 64
max_calls_per_source = 64
TOML
# The same with guest calls always on the request's worker (the default,
# spelled out), and with one guest thread for busy servers (the default of
# the fifth and sixth rounds).
sed 's/^\[runtime\]$/[runtime]\nguest_threads = 0/' target/ems/ems.toml > target/ems/ems-inline.toml
sed 's/^\[runtime\]$/[runtime]\nguest_threads = 1/' target/ems/ems.toml > target/ems/ems-gt.toml
# The same catalog in its `books` layout: the peers' own page bytes
# (`books://catalog/book-00001`, shorter than the catalog's URIs).
mkdir -p target/ems/sources-books
cp target/guests/catalog.wasm target/ems/sources-books/
printf '[config]\nitems = "10000"\nlayout = "books"\n' > target/ems/sources-books/catalog.toml
sed 's#^sources_dir = .*#sources_dir = "sources-books"#' target/ems/ems.toml > target/ems/ems-books.toml
# The interpreted sources beside their languages' SDK servers (issue 51), each
# on its own manifest and the default [runtime]: python-notes over 10,000 of
# alice's rows in SQLite, js-catalog with 10,000 items.
mkdir -p target/ems/sources-py target/ems/sources-js
cp target/guests/python-notes.wasm target/guests/python-notes.toml target/ems/sources-py/
cp target/guests/js-catalog.wasm target/ems/sources-js/
sed 's/^items = .*/items = "10000"/' guest-examples/js-catalog/manifest.toml > target/ems/sources-js/js-catalog.toml
rm -f target/ems/notes-10k.sqlite
python3 - "$ROOT" <<'PY'
import sqlite3, sys
root = sys.argv[1]
db = sqlite3.connect(f"{root}/target/ems/notes-10k.sqlite")
db.executescript(open(f"{root}/guest-examples/python-notes/sql/schema.sql").read())
db.executemany(
    "INSERT INTO notes (id, owner, sort_key, title, body) VALUES (?, 'alice', ?, ?, ?)",
    ((f"n-{i}", f"{i:05d}#n-{i}", f"Note {i}", f"Body of note {i}.") for i in range(1, 10_001)),
)
db.commit()
PY
for lang in py js; do
  cat > "target/ems/ems-$lang.toml" <<TOML
listen = "127.0.0.1:18321"
sources_dir = "sources-$lang"
state_dir = "state-$lang"

[auth]
mode = "dev"

[http]
max_sessions_per_principal = 1000

[databases.notes]
file = "$ROOT/target/ems/notes-10k.sqlite"
TOML
done
echo "ready: benchmarks/peers.sh, benchmarks/ab.sh, benchmarks/demo-load.sh"
