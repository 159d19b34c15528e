#!/usr/bin/env bash
# `tools/call` round trips through `toolgate serve` (release build) for the
# no-op Wasm `echo` fixture, measured with the raw stdio MCP client of
# tests/mcp/mcp_bench_raw.py (the one the anchor was measured with):
#   (a) no policies at all (no built-ins either);
#   (b) the six-policy stack of the pipeline benchmark (tests/benches/pipeline.rs:
#       one pre-execute hook, two guards, the timeout wrapper, one post-execute
#       hook, one finalizer, one observer), Wasm components, pooled instances.
# Rounds alternate (a) and (b), so machine noise falls on both alike.
#
#   cargo build --release -p toolgate-cli
#   cargo test -p toolgate-tests --no-run      # builds the fixture components
#   tests/mcp/bench.sh [ROUNDS]                # MCP_BENCH=path/to/mcp_bench_raw.py to override
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
bin="$target/release/toolgate"
guests="$target/guests/wasm32-wasip2/guest"
client="${MCP_BENCH:-$root/tests/mcp/mcp_bench_raw.py}"
rounds="${1:-3}"
for f in "$bin" "$client" "$guests/fixture_tools.wasm"; do
    [ -e "$f" ] || { echo "missing: $f (see the header of $0)" >&2; exit 1; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/a" "$work/b"
cp "$guests/fixture_tools.wasm" "$work/a/tools.wasm"
cp "$guests/fixture_tools.wasm" "$work/b/tools.wasm"
: > "$work/a.toml"
while read -r name fixture behavior; do
    cp "$guests/$fixture.wasm" "$work/b/$name.wasm"
    printf '[plugins.%s]\ninstances = "pooled"\nvars = { BEHAVIOR = "%s" }\n' "$name" "$behavior" >> "$work/b.toml"
done <<'STACK'
pre fixture_pre_hook allow
guard-1 fixture_guard pass
guard-2 fixture_guard pass
timeout plugin_timeout -
post fixture_post_hook accept
finalizer fixture_finalizer keep
observer fixture_observer ok
STACK
# The compile cache is warmed by the first cold start of each variant.
for round in $(seq "$rounds"); do
    for v in a b; do
        echo "== round $round, ($v)"
        python3 "$client" echo '{"text":"x"}' --cold 10 --seq 2000 --conc 8 -- \
            "$bin" --no-default-plugins --plugins "$work/$v" --config "$work/$v.toml" serve
    done
done
