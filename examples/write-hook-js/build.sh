#!/usr/bin/env bash
# Build write-hook.wasm with componentize-js (npm; `scripts/toolchains.sh
# js` installs it). `-d http -d fetch-event`: without them componentize-js
# adds `wasi:http` imports and a `wasi:http/incoming-handler` export, which
# the host does not provide, and the component does not load.
set -euo pipefail
cd "$(dirname "$0")"
out="$(realpath -m "${1:-write-hook.wasm}")"
componentize-js hook.js --wit wit --world-name write-hook -d http -d fetch-event -o "$out" >/dev/null
