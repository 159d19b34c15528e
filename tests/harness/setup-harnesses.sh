#!/usr/bin/env bash
# Install the agent harnesses of harnesses.txt into DIR (project-local, under
# the target directory) with npm: DIR/node_modules/.bin/claude, codex, gemini and opencode. Reused while
# harnesses.txt is unchanged. Exits non-zero, saying why, when npm or the
# registry fails.
#   tests/harness/setup-harnesses.sh [--check] DIR
# With --check it installs nothing: exit 0 when the harnesses are ready, 1 if not.
set -euo pipefail
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
dir="$1"
here="$(cd "$(dirname "$0")" && pwd)"
list="$here/harnesses.txt"
ready() {
    cmp -s "$list" "$dir/.harnesses" \
        && "$dir/node_modules/.bin/claude" --version >/dev/null 2>&1 \
        && "$dir/node_modules/.bin/codex" --version >/dev/null 2>&1 \
        && "$dir/node_modules/.bin/gemini" --version >/dev/null 2>&1 \
        && "$dir/node_modules/.bin/opencode" --version >/dev/null 2>&1
}
if ready; then
    exit 0
fi
if [ "$check" = 1 ]; then
    echo "the agent harnesses of $list are not installed in $dir" >&2
    exit 1
fi
command -v npm >/dev/null || { echo "npm is not installed (the harnesses come from npm)" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$dir"
packages=()
while read -r package version; do
    case "$package" in ''|'#'*) continue ;; esac
    packages+=("$package@$version")
done < "$list"
npm install --prefix "$dir" --no-audit --no-fund --no-save --silent "${packages[@]}" \
    || { echo "cannot install ${packages[*]} from npm" >&2; exit 1; }
cp "$list" "$dir/.harnesses"
ready || { echo "installed ${packages[*]}, but one of them does not run (\`claude --version\`, \`codex --version\`, \`gemini --version\`, \`opencode --version\`)" >&2; exit 1; }
