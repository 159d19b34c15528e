#!/usr/bin/env bash
# Issue 25's "done when", as a command: in a private mount namespace where
# no C compiler for wasm exists (clang, lld and LLVM masked, the WASI
# headers and libc masked), a fresh clone of this repository's HEAD
#   1. runs the README's first command (`cargo run -p toolgate-cli -- demo`),
#   2. runs a `run_code` program with `toolgate --code-mode run`,
#   3. scaffolds a Rust guard with `toolgate new` and builds it as generated,
#   4. runs the README's second command (`cargo test`) unless --no-test.
# Each step's wall time is printed. Needs root (or unprivileged user
# namespaces: it re-executes itself under `unshare -rm` then) and
# everything a fresh machine has (rustup's stable toolchain, gcc).
#
#   scripts/check-without-clang.sh [--no-test] [WORKDIR]
#
# WORKDIR (default: a new directory under /tmp) receives the clone and its
# target directory; it is left behind for inspection. Given a WORKDIR that
# already holds a clone, the clone is reset to HEAD and its target directory
# kept (a second run builds only what changed).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
run_tests=1
if [ "${1:-}" = "--no-test" ]; then
    run_tests=0
    shift
fi
work="${1:-$(mktemp -d /tmp/toolgate-no-clang.XXXXXX)}"

if [ -z "${TOOLGATE_IN_PRIVATE_NS:-}" ]; then
    export TOOLGATE_IN_PRIVATE_NS=1
    flags=(-m --propagation private)
    [ "$(id -u)" = 0 ] || flags=(-r "${flags[@]}")
    args=()
    [ "$run_tests" = 1 ] || args+=(--no-test)
    exec unshare "${flags[@]}" -- "$0" "${args[@]}" "$work"
fi

# Mask every C toolchain for wasm this machine may have.
masked=()
for f in /usr/bin/clang* /usr/bin/wasm-ld* /usr/bin/lld* /usr/bin/ld.lld* /usr/bin/llvm-*; do
    [ -e "$f" ] || continue
    mount --bind /dev/null "$f"
    masked+=("$f")
done
for d in /usr/lib/llvm-* /usr/lib/wasm32-wasi /usr/include/wasm32-wasi /usr/share/wasi-sysroot /opt/wasi-sdk; do
    [ -d "$d" ] || continue
    mount -t tmpfs -o ro,mode=000 tmpfs "$d"
    masked+=("$d")
done
echo "== masked: ${masked[*]:-nothing (no C toolchain for wasm was installed)}"
if command -v clang-19 >/dev/null && clang-19 --version >/dev/null 2>&1; then
    echo "clang-19 still runs: the masking failed" >&2
    exit 1
fi

step() {
    local name="$1"
    shift
    local start=$SECONDS
    echo "== $name"
    "$@"
    echo "== $name: $((SECONDS - start))s"
}

clone="$work/toolgate"
head="$(git -C "$repo" rev-parse HEAD)"
if [ -d "$clone/.git" ]; then
    step "the clone reset to ${head:0:7}" \
        sh -c "git -C '$clone' fetch -q '$repo' '$head' && git -C '$clone' reset -q --hard '$head'"
else
    step "fresh clone of ${head:0:7}" git clone -q "$repo" "$clone"
    git -C "$clone" checkout -q "$head"
fi
cd "$clone"
# Nothing from this machine's toolgate state or caches.
export TOOLGATE_STATE_DIR="$work/state" TOOLGATE_CACHE_DIR="$work/cache"
export CARGO_TARGET_DIR="$clone/target"

step "cargo run -p toolgate-cli -- demo" cargo run -q -p toolgate-cli -- demo >"$work/demo.out"
tail -n 3 "$work/demo.out"
tg="$clone/target/debug/toolgate"

cat >"$work/code.json" <<'EOF'
[{"id": "c1", "name": "run_code", "arguments": {"code": "const r = await tools.glob({pattern: '*.md'}); console.log(JSON.stringify(r).includes('README')); return 6 * 7;"}}]
EOF
step "toolgate --code-mode run (a run_code program)" \
    "$tg" --code-mode --approve allow run "$work/code.json" | tee "$work/code.out"
grep -q '42' "$work/code.out" || {
    echo "the run_code program did not return 42" >&2
    exit 1
}

rm -rf "$work/my-guard"
step "toolgate new guard my-guard (Rust)" "$tg" new guard my-guard --lang rust --dir "$work"
(cd "$work/my-guard" && step "building the scaffolded guard as generated (its build.sh)" ./build.sh &&
    step "its test.sh" ./test.sh)

if [ "$run_tests" = 1 ]; then
    step "cargo test" cargo test -q 2>&1 | tail -n 40
fi
echo "== without a C toolchain for wasm: all steps passed"
