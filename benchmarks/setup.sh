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
echo "ready: benchmarks/peers.sh, benchmarks/ab.sh, benchmarks/demo-rss.sh"
