#!/usr/bin/env bash
# The keyless tests' cross-check: a Python venv holding sigstore-python
# (PyPI, pinned below), which verifies the same bundles offline so that
# `keyless::python_sigstore_agrees` can compare its verdicts with ours.
# Reused while the pin is unchanged.
#   tests/sigstore/setup-venv.sh VENV_DIR
set -euo pipefail
venv="$1"
pin="sigstore==4.5.1"
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.requirements" 2>/dev/null)" = "$pin" ] \
    && "$venv/bin/python" -c "import sigstore" 2>/dev/null; then
    exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --timeout 60 "$pin"
echo "$pin" > "$venv/.requirements"
