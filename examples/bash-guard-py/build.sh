#!/usr/bin/env bash
# Build bash-guard.wasm with componentize-py (PyPI; `scripts/toolchains.sh
# python` installs it). The world is the contract's `guard-plugin`.
set -euo pipefail
cd "$(dirname "$0")"
out="$(realpath -m "${1:-bash-guard.wasm}")"
componentize-py --quiet -d ../../wit -w guard-plugin componentize app -o "$out"
