#!/usr/bin/env bash
# Build path-guard.wasm: bindings (wit-bindgen c), compile and link a core
# module (clang for wasm32-wasi, wasi-libc for malloc and string.h), wrap
# it as a component (wasm-tools). Needs: clang-19, lld-19, wasi-libc,
# libclang-rt-19-dev-wasm32 (Debian), wit-bindgen-cli, wasm-tools
# (`scripts/toolchains.sh apt c` installs them all).
set -euo pipefail
cd "$(dirname "$0")"
out="$(realpath -m "${1:-path-guard.wasm}")"
gen="$(mktemp -d)"
trap 'rm -rf "$gen"' EXIT
wit-bindgen c wit --world path-guard --out-dir "$gen" > "$gen/log" 2>&1 || { cat "$gen/log" >&2; exit 1; }
clang-19 --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Wextra -Werror \
  -I "$gen" -o "$gen/core.wasm" guard.c "$gen/path_guard.c" "$gen/path_guard_component_type.o"
wasm-tools component new "$gen/core.wasm" -o "$out"
wasm-tools validate "$out"
