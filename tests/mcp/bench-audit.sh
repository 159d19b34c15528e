#!/usr/bin/env bash
# `tools/call` through `toolgate serve` with the audit record off and at each
# `sync` setting: the no-op Wasm `echo` fixture, no policies (so the record's
# share of a call is as large as it gets), the raw stdio MCP client of
# ../shared/tools/mcp_bench_raw.py. Variants alternate within each round.
#
#   cargo build --release -p toolgate                 # or PROFILE=debug
#   cargo test -p toolgate-tests --no-run             # builds the fixture components
#   tests/mcp/bench-audit.sh [ROUNDS]                 # MCP_BENCH=path/to/mcp_bench_raw.py to override
#
# The record is written in a fresh directory under $TMPDIR (its file system
# decides what fdatasync costs).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
bin="$target/${PROFILE:-release}/toolgate"
guests="$target/guests/wasm32-wasip2/guest"
client="${MCP_BENCH:-$root/tests/mcp/mcp_bench_raw.py}"
rounds="${1:-3}"
for f in "$bin" "$client" "$guests/fixture_tools.wasm"; do
    [ -e "$f" ] || { echo "missing: $f (see the header of $0)" >&2; exit 1; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/plugins"
cp "$guests/fixture_tools.wasm" "$work/plugins/tools.wasm"
printf '[audit]\nenabled = false\n' > "$work/off.toml"
for sync in none batch always; do
    printf '[audit]\npath = "%s/%s.jsonl"\nsigning_key = "%s/audit.key"\nsync = "%s"\n' \
        "$work" "$sync" "$work" "$sync" > "$work/$sync.toml"
done
for round in $(seq "$rounds"); do
    for v in off none batch always; do
        echo "== round $round, audit $v"
        TOOLGATE_STATE_DIR="$work/state" TOOLGATE_CACHE_DIR="$work/cache" \
            python3 "$client" echo '{"text":"x"}' --cold 3 --seq 2000 --conc 8 -- \
            "$bin" --no-default-plugins --plugins "$work/plugins" --config "$work/$v.toml" serve --no-watch
    done
done
