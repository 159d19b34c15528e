#!/usr/bin/env bash
# The same guard in Rust, C, Python and JavaScript (the `toolgate new guard`
# scaffold of each language: deny when the arguments mention a word),
# measured with the release `toolgate`:
#   * component size;
#   * first load without the compile cache (Cranelift compiles it) and with
#     a warm cache (`toolgate check` reports the load time);
#   * per call through the pipeline around a native stand-in tool, on a warm
#     pooled instance and on a fresh instance per call
#     (`toolgate check --call --repeat N`).
# Usage: scripts/bench-guards.sh [N]   (default 2000 calls)
# Needs: cargo build --release -p toolgate-cli, and scripts/toolchains.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-2000}"
tg="$here/target/release/toolgate"
[ -x "$tg" ] || { echo "build it first: cargo build --release -p toolgate-cli" >&2; exit 1; }
tc="${TOOLGATE_TOOLCHAINS:-$here/target/toolchains}"
export PATH="$tc/python/bin:$tc/js/node_modules/.bin:$tc/cargo/bin:$PATH"
work="$here/target/bench-guards"
rm -rf "$work" && mkdir -p "$work"
export TOOLGATE_CACHE_DIR="$work/cache"
export CARGO_TARGET_DIR="$here/target/scaffold"
echo '{"name": "bash", "arguments": {"command": "ls -la /tmp", "path": "src/main.rs"}}' > "$work/call.json"
printf '| language | size | first load, no cache | first load, cached | per call, warm | per call, fresh | path |\n'
printf '| --- | --- | --- | --- | --- | --- | --- |\n'
for lang in rust c python js; do
  name="guard-$lang"
  args=(new guard "$name" --lang "$lang" --dir "$work")
  [ "$lang" = rust ] && args+=(--sdk-path "$here/sdk")
  "$tg" "${args[@]}" >/dev/null
  (cd "$work/$name" && ./build.sh >/dev/null 2>&1)
  wasm="$work/$name/$name.wasm"
  size=$(stat -c %s "$wasm")
  nocache=$("$tg" --no-compile-cache check --json "$wasm" | python3 -c 'import json,sys; print(json.load(sys.stdin)["loadUs"])')
  "$tg" check --json "$wasm" >/dev/null   # fills the cache
  cached=$("$tg" check --json "$wasm" | python3 -c 'import json,sys; print(json.load(sys.stdin)["loadUs"])')
  read -r warm fresh path < <("$tg" check --json "$wasm" --call "$work/call.json" --repeat "$n" \
    | python3 -c 'import json,sys; j=json.load(sys.stdin); r=j["repeat"]; print("%.1f %.1f %s" % (r["warm"]["medianUs"], r["fresh"]["medianUs"], j["callPath"]))')
  printf '| %s | %s KB | %s ms | %s ms | %s µs | %s µs | %s |\n' "$lang" "$((size / 1024))" \
    "$((nocache / 1000))" "$((cached / 1000))" "$warm" "$fresh" "$path"
done
