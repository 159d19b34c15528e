#!/usr/bin/env bash
# The approval console's browser test environment: a Python venv holding
# Playwright and the official MCP SDK (PyPI, pinned in
# browser-requirements.txt). No browser is downloaded
# (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD): the test drives Debian's `chromium`
# (apt-get install chromium; or TOOLGATE_CHROMIUM=PATH).
# Reused while browser-requirements.txt is unchanged.
#   tests/mcp/setup-browser.sh [--check] VENV_DIR
# With --check it installs nothing: exit 0 when the venv is ready, 1 if not.
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
venv="$1"
here="$(cd "$(dirname "$0")" && pwd)"
req="$here/browser-requirements.txt"
if [ -x "$venv/bin/python" ] && cmp -s "$req" "$venv/.requirements" \
    && "$venv/bin/python" -c "import mcp, playwright.async_api" 2>/dev/null; then
    exit 0
fi
if [ "$check" = 1 ]; then
    echo "Playwright and the MCP Python SDK are not installed in $venv" >&2
    exit 1
fi
rm -rf "$venv"
python3 -m venv "$venv"
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 "$venv/bin/python" -m pip install --quiet \
    --disable-pip-version-check --timeout 60 -r "$req"
cp "$req" "$venv/.requirements"
