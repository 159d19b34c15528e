#!/usr/bin/env bash
# Install the language servers of servers.txt into DIR (project-local, under
# the target directory) with npm: DIR/node_modules/.bin/pyright-langserver,
# DIR/node_modules/.bin/typescript-language-server. Reused while servers.txt
# is unchanged. Exits non-zero, saying why, when npm or the registry fails.
#   tests/lsp/setup-servers.sh [--check] DIR
# With --check it installs nothing: exit 0 when the servers are ready, 1 if not.
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
dir="$1"
here="$(cd "$(dirname "$0")" && pwd)"
list="$here/servers.txt"
if cmp -s "$list" "$dir/.servers" \
    && [ -x "$dir/node_modules/.bin/pyright-langserver" ] \
    && [ -x "$dir/node_modules/.bin/typescript-language-server" ]; then
    exit 0
fi
if [ "$check" = 1 ]; then
    echo "the language servers of $list are not installed in $dir" >&2
    exit 1
fi
command -v npm >/dev/null || { echo "npm is not installed (the language servers come from npm)" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$dir"
packages=()
while read -r package version; do
    case "$package" in ''|'#'*) continue ;; esac
    packages+=("$package@$version")
done < "$list"
npm install --prefix "$dir" --no-audit --no-fund --no-save --silent "${packages[@]}" \
    || { echo "cannot install ${packages[*]} from npm" >&2; exit 1; }
cp "$list" "$dir/.servers"
