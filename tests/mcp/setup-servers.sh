#!/usr/bin/env bash
# Install the MCP servers of servers.txt into DIR (project-local, under the
# target directory): DIR/npm (npm install --prefix) and DIR/time-venv (a
# Python venv); DIR/clients (npm install --prefix: the clients the docs'
# recipes drive); and DIR/npx-cache, an npm cache in which `npx -y PACKAGE@VERSION`
# of each npm server has run once (the docs' recipes start from it: the
# sandbox's egress cannot reach this machine's registry mirror). Reused while servers.txt is unchanged. Exits non-zero, saying
# which registry failed, when one cannot be reached.
#   tests/mcp/setup-servers.sh [--check] DIR
# With --check it installs nothing: exit 0 when the servers are ready, 1 if not.
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
mkdir -p "$1"
dir="$(cd "$1" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
list="$here/servers.txt"
if cmp -s "$list" "$dir/.servers" \
    && [ -x "$dir/npm/node_modules/.bin/mcp-server-everything" ] \
    && [ -x "$dir/time-venv/bin/mcp-server-time" ] \
    && [ -d "$dir/npx-cache/_npx" ] \
    && [ -x "$dir/clients/node_modules/.bin/mcp-inspector" ] \
    && [ -f "$dir/clients/node_modules/oidc-provider/package.json" ]; then
    exit 0
fi
if [ "$check" = 1 ]; then
    echo "the MCP servers of $list are not installed in $dir" >&2
    exit 1
fi
rm -rf "$dir"
mkdir -p "$dir/npm"
clients=()
while read -r registry package version; do
    case "$registry" in
        ''|'#'*) continue ;;
        npm-client)
            # Installed together below: a second `npm install --no-save`
            # into one prefix prunes what the first installed.
            clients+=("$package@$version")
            ;;
        npm)
            command -v npm >/dev/null || { echo "npm is not installed (needed for $package)" >&2; exit 1; }
            npm install --prefix "$dir/npm" --no-audit --no-fund --no-save --silent "$package@$version" \
                || { echo "cannot install $package@$version from npm" >&2; exit 1; }
            # A stdio server reads EOF on stdin and exits.
            (cd "$dir" && npm_config_cache="$dir/npx-cache" npx -y "$package@$version" stdio < /dev/null > /dev/null 2>&1) \
                || { echo "cannot run $package@$version with npx (cache $dir/npx-cache)" >&2; exit 1; }
            ;;
        pypi)
            [ -x "$dir/time-venv/bin/python" ] || python3 -m venv "$dir/time-venv"
            "$dir/time-venv/bin/python" -m pip install --quiet --disable-pip-version-check --timeout 60 "$package==$version" \
                || { echo "cannot install $package==$version from PyPI" >&2; exit 1; }
            ;;
        *) echo "unknown registry $registry in $list" >&2; exit 1 ;;
    esac
done < "$list"
if [ "${#clients[@]}" -gt 0 ]; then
    # The clients get a prefix of their own, apart from the servers.
    command -v npm >/dev/null || { echo "npm is not installed (needed for ${clients[*]})" >&2; exit 1; }
    npm install --prefix "$dir/clients" --no-audit --no-fund --no-save --silent "${clients[@]}" \
        || { echo "cannot install ${clients[*]} from npm" >&2; exit 1; }
fi
cp "$list" "$dir/.servers"
