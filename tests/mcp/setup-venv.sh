#!/usr/bin/env bash
# The project-local MCP test environment: a Python venv holding the official
# MCP SDK (PyPI `mcp`, pinned in requirements.txt), used by the serve tests
# as a real third-party client. Reused while requirements.txt is unchanged.
#   tests/mcp/setup-venv.sh [--check] VENV_DIR
# With --check it installs nothing: exit 0 when the venv is ready, 1 if not.
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
venv="$1"
here="$(cd "$(dirname "$0")" && pwd)"
req="$here/requirements.txt"
if [ -x "$venv/bin/python" ] && cmp -s "$req" "$venv/.requirements" \
    && "$venv/bin/python" -c "import mcp" 2>/dev/null; then
    exit 0
fi
if [ "$check" = 1 ]; then
    echo "the MCP Python SDK is not installed in $venv" >&2
    exit 1
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --timeout 60 -r "$req"
cp "$req" "$venv/.requirements"
