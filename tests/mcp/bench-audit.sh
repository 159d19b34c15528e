#!/usr/bin/env bash
# `tools/call` through `toolgate serve` with the audit record off and at each
# `sync` setting: the no-op Wasm `echo` fixture, no policies (so the record's
# share of a call is as large as it gets), the raw stdio MCP client of
# ../shared/tools/mcp_bench_raw.py. Variants alternate within each round.
#
#   cargo build --release -p toolgate-cli             # or PROFILE=debug
#   cargo test -p toolgate-tests --no-run             # builds the fixture components
#   tests/mcp/bench-audit.sh [ROUNDS]                 # MCP_BENCH=path/to/mcp_bench_raw.py to override
#
# CALLS=N sets the calls per phase (default 2000; sequential, then 8 in
# flight). Ends with each variant's medians over the rounds and its ratio
# to `off`.
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
calls="${CALLS:-2000}"
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
            python3 "$client" echo '{"text":"x"}' --cold 3 --seq "$calls" --conc 8 -- \
            "$bin" --no-default-plugins --plugins "$work/plugins" --config "$work/$v.toml" serve --no-watch \
            | tee "$work/result-$v-$round.json"
    done
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def med(v, key):
    return statistics.median(json.load(open(f"{work}/result-{v}-{r}.json"))[key] for r in range(1, rounds + 1))
print(f"\nmedian over {rounds} round(s): sequential median ms, sequential calls/s, calls/s with 8 in flight (vs off)")
off_seq, off_conc = med("off", "seq_calls_per_s"), med("off", "inflight_calls_per_s")
for v in ["off", "none", "batch", "always"]:
    seq, conc = med(v, "seq_calls_per_s"), med(v, "inflight_calls_per_s")
    print(f"  {v:>6}: {med(v, 'seq_median_ms'):.3f} ms, {seq:.0f}/s ({(seq / off_seq - 1) * 100:+.1f}%), "
          f"{conc:.0f}/s in flight ({(conc / off_conc - 1) * 100:+.1f}%)")
PY
