#!/usr/bin/env bash
# The MCP bridge's overhead: `tools/call` of server-everything's `echo`
#   (direct) server-everything itself, over stdio (`node dist/index.js stdio`);
#   (bridged) `toolgate serve` bridging that same server over stdio, in its
#             sandbox (`[mcp.servers.everything]`, no policies), tool
#             `mcp__everything__echo`;
# both driven by the same raw newline-delimited JSON-RPC client
# (tests/mcp/mcp_bench_raw.py, the one the serve figures use). Rounds
# alternate (direct) and (bridged), so machine noise falls on both alike.
#
#   cargo build --release -p toolgate-cli
#   tests/mcp/setup-servers.sh target/tmp/mcp-servers
#   tests/mcp/bench-bridge.sh [ROUNDS]       # MCP_BENCH=path/to/mcp_bench_raw.py to override
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
bin="$target/release/toolgate"
servers="$target/tmp/mcp-servers"
js="$servers/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
client="${MCP_BENCH:-$root/tests/mcp/mcp_bench_raw.py}"
rounds="${1:-3}"
for f in "$bin" "$client" "$js"; do
    [ -e "$f" ] || { echo "missing: $f (see the header of $0)" >&2; exit 1; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/plugins"
cat > "$work/toolgate.toml" <<EOF
[mcp.servers.everything]
command = "$(command -v node)"
args = ["$js", "stdio"]
auto_grant = false
[mcp.servers.everything.grants]
fs = [{ path = ".", access = "read-only" }, { path = "$servers/npm", access = "read-only" }]
EOF
for round in $(seq "$rounds"); do
    echo "== round $round, (direct)"
    python3 "$client" echo '{"message":"x"}' --cold 5 --seq 2000 --conc 8 -- node "$js" stdio
    echo "== round $round, (bridged)"
    (cd "$work" && python3 "$client" mcp__everything__echo '{"message":"x"}' --cold 5 --seq 2000 --conc 8 -- \
        "$bin" --no-default-plugins --plugins "$work/plugins" --config "$work/toolgate.toml" serve)
done
