#!/usr/bin/env bash
# Plugins from OCI registries: pull + verify + first call of a 1 MB and a
# 20 MB component (the `versioned-1` test fixture, padded to size with a
# custom section), through a local docker-registry:
#   * cold: empty store and no compile cache — `toolgate run` pulls at
#     start (tag → digest, manifest and layer checked, stored), compiles,
#     and makes the first call;
#   * warm: the store holds it (read and verified again, no network) and
#     the compile cache is warm;
#   * the same component as a file of a plugin directory (warm cache): the
#     baseline, what the store's checks cost over it.
#   * signed: the same, pushed with `--sign-key` and loaded under `[trust]`
#     with `require_signature = true` — the pull also fetches the
#     signature manifest and payload, every load verifies the signature
#     (cold and warm, as above).
# Median of N runs (default 5) of the whole `toolgate run` process.
# Usage: scripts/bench-oci.sh [N]   (TG=path/to/toolgate; default target/release/toolgate)
# Needs: docker-registry (apt-get install docker-registry), python3, and the
# test fixtures (cargo test -p toolgate-tests --no-run builds them).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-5}"
tg="${TG:-$here/target/release/toolgate}"
[ -x "$tg" ] || { echo "build it first: cargo build --release -p toolgate-cli (or set TG=)" >&2; exit 1; }
fixture="$here/target/guests/wasm32-wasip2/guest/fixture_versioned_1.wasm"
[ -f "$fixture" ] || { echo "missing $fixture: cargo test -p toolgate-tests --no-run" >&2; exit 1; }
work="$(mktemp -d /tmp/bench-oci.XXXXXX)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s/data\nhttp:\n  addr: 127.0.0.1:%s\n' "$work" "$port" > "$work/registry.yml"
docker-registry serve "$work/registry.yml" >/dev/null 2>&1 &
registry=$!
trap 'kill $registry 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
# A custom section "pad" makes the component SIZE bytes (it is not code:
# compile time stays that of the fixture; pull and digest checks grow).
pad() {
  python3 - "$fixture" "$1" "$2" <<'PY'
import sys
src, size, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
b = open(src, "rb").read()
def leb(n):
    o = bytearray()
    while True:
        x = n & 0x7f; n >>= 7
        o.append(x | (0x80 if n else 0))
        if not n: return bytes(o)
name = b"\x03pad"
body = size - len(b) - 1 - 5 - len(name)
payload = name + b"\0" * body
open(out, "wb").write(b + b"\x00" + leb(len(payload)) + payload)
PY
}
echo '[{"id": "1", "name": "which_version", "arguments": {"n": 1}}]' > "$work/call.json"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ms() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000000 )); }
printf '| component | cold: pull + verify + compile + first call | warm: store + cache + first call | same file from a plugin directory, warm cache |\n| --- | --- | --- | --- |\n'
for mb in 1 20; do
  pad $((mb << 20)) "$work/c$mb.wasm"
  ref="oci://127.0.0.1:$port/bench/c$mb:1"
  TOOLGATE_STATE_DIR="$work/push-state" "$tg" push "$ref" "$work/c$mb.wasm" >/dev/null
  printf '[plugins.v]\nsource = "%s"\n' "$ref" > "$work/c$mb.toml"
  cold=$(for _ in $(seq "$n"); do
    rm -rf "$work/state"
    TOOLGATE_STATE_DIR="$work/state" ms "$tg" --no-default-plugins --no-compile-cache --config "$work/c$mb.toml" run "$work/call.json"
  done | median)
  export TOOLGATE_CACHE_DIR="$work/cache"
  TOOLGATE_STATE_DIR="$work/state" "$tg" --no-default-plugins --config "$work/c$mb.toml" run "$work/call.json" \
    | grep -q '"version": 1' || { echo "the call through the pulled component failed" >&2; exit 1; }
  warm=$(for _ in $(seq "$n"); do
    TOOLGATE_STATE_DIR="$work/state" ms "$tg" --no-default-plugins --config "$work/c$mb.toml" run "$work/call.json"
  done | median)
  mkdir -p "$work/dir$mb" && cp "$work/c$mb.wasm" "$work/dir$mb/v.wasm"
  file=$(for _ in $(seq "$n"); do
    TOOLGATE_STATE_DIR="$work/state" ms "$tg" --no-default-plugins --plugins "$work/dir$mb" run "$work/call.json"
  done | median)
  unset TOOLGATE_CACHE_DIR
  printf '| %s MB | %s ms | %s ms | %s ms |\n' "$mb" "$cold" "$warm" "$file"
done
# Signed: push --sign-key, [trust] requiring the signature.
"$tg" keygen sign "$work/k.pem" >/dev/null
printf '\n| component, signed, `[trust] require_signature = true` | cold: pull + signatures + verify + compile + first call | warm: store + verify + cache + first call |\n| --- | --- | --- |\n'
for mb in 1 20; do
  ref="oci://127.0.0.1:$port/bench/s$mb:1"
  TOOLGATE_STATE_DIR="$work/push-state" "$tg" push --sign-key "$work/k.pem" "$ref" "$work/c$mb.wasm" >/dev/null
  printf '[trust]\nkeys = ["k.pub"]\nrequire_signature = true\n[plugins.v]\nsource = "%s"\n' "$ref" > "$work/s$mb.toml"
  cold=$(for _ in $(seq "$n"); do
    rm -rf "$work/sstate"
    TOOLGATE_STATE_DIR="$work/sstate" ms "$tg" --no-default-plugins --no-compile-cache --config "$work/s$mb.toml" run "$work/call.json"
  done | median)
  export TOOLGATE_CACHE_DIR="$work/scache"   # its own: the cache is keyed by the state directory
  TOOLGATE_STATE_DIR="$work/sstate" "$tg" --no-default-plugins --config "$work/s$mb.toml" run "$work/call.json" \
    | grep -q '"version": 1' || { echo "the call through the signed component failed" >&2; exit 1; }
  warm=$(for _ in $(seq "$n"); do
    TOOLGATE_STATE_DIR="$work/sstate" ms "$tg" --no-default-plugins --config "$work/s$mb.toml" run "$work/call.json"
  done | median)
  unset TOOLGATE_CACHE_DIR
  printf '| %s MB | %s ms | %s ms |\n' "$mb" "$cold" "$warm"
done
