#!/usr/bin/env bash
# What the built-in plan-mode guard costs per call: `toolgate run` of a
# batch of N calls with the plugin on (`[plugins.plan-mode] enabled =
# true`) and off (its default), rounds alternating, for a tool that is not read-only
# (`todo_write`: the guard reads the scope's mode from the store) and one
# that is (`get_goal`: the guard passes without a store read). Prints each
# round's seconds; the per-call cost is (on - off) / N.
#
#   cargo build --release -p toolgate-cli
#   scripts/bench-plan-mode.sh [ROUNDS] [N]      # TOOLGATE=path/to/toolgate to override
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${TOOLGATE:-${CARGO_TARGET_DIR:-$root/target}/release/toolgate}"
rounds="${1:-5}"
n="${2:-3000}"
[ -x "$bin" ] || { echo "missing: $bin (see the header of $0)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
printf '[plugins.plan-mode]\nenabled = true\n' > "$work/on.toml"
: > "$work/off.toml"
for tool in todo_write get_goal; do
    python3 - "$tool" "$n" > "$work/$tool.json" <<'PY'
import json, sys
tool, n = sys.argv[1], int(sys.argv[2])
args = {"todos": []} if tool == "todo_write" else {}
print(json.dumps([{"id": str(i), "name": tool, "arguments": args} for i in range(n)]))
PY
done
for tool in todo_write get_goal; do
    for round in $(seq "$rounds"); do
        for v in on off; do
            start=$(date +%s.%N)
            (cd "$work" && RUST_LOG=error TOOLGATE_STATE_DIR="$work/state" "$bin" --config "$v.toml" run --compact "$tool.json" > /dev/null)
            end=$(date +%s.%N)
            echo "$tool round $round plan-mode $v: $(echo "$end - $start" | bc) s"
        done
    done
done
