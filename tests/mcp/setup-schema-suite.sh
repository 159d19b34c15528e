#!/usr/bin/env bash
# Install the official JSON-Schema-Test-Suite's draft 2020-12 tests into
# DIR/draft2020-12 (project-local, under the target directory), from the
# sdist pinned in schema-suite.txt. Reused while schema-suite.txt is
# unchanged. Exits non-zero, saying what failed, when PyPI cannot be reached.
#   tests/mcp/setup-schema-suite.sh [--check] DIR
# With --check it installs nothing: exit 0 when the suite is ready, 1 if not.
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
dir="$1"
here="$(cd "$(dirname "$0")" && pwd)"
list="$here/schema-suite.txt"
if cmp -s "$list" "$dir/.schema-suite" && [ -f "$dir/draft2020-12/minimum.json" ]; then
    exit 0
fi
if [ "$check" = 1 ]; then
    echo "the JSON-Schema-Test-Suite of $list is not installed in $dir" >&2
    exit 1
fi
version="$(awk '$1 == "pypi" && $2 == "jsonschema" { print $3 }' "$list")"
[ -n "$version" ] || { echo "no jsonschema version in $list" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$dir/download"
python3 -m pip download --quiet --disable-pip-version-check --timeout 60 \
    --no-deps --no-binary :all: -d "$dir/download" "jsonschema==$version" \
    || { echo "cannot download the jsonschema $version sdist from PyPI" >&2; exit 1; }
tar -xzf "$dir/download/jsonschema-$version.tar.gz" -C "$dir/download" \
    "jsonschema-$version/json/tests/draft2020-12" "jsonschema-$version/json/LICENSE" \
    || { echo "the jsonschema $version sdist holds no json/tests/draft2020-12" >&2; exit 1; }
mv "$dir/download/jsonschema-$version/json/tests/draft2020-12" "$dir/draft2020-12"
mv "$dir/download/jsonschema-$version/json/LICENSE" "$dir/LICENSE"
rm -rf "$dir/download"
cp "$list" "$dir/.schema-suite"
