# Conveniences. The README's two commands need only cargo; these need `just`.

# The demo on the built-in plugins.
demo:
    cargo run -p toolgate-cli -- demo

# Every test (the README's test command).
test:
    cargo test

# What CI runs.
ci:
    .ci/run

# Lints: clippy on everything (host and guests), formatting.
lint:
    cargo clippy --workspace --all-targets -- -D warnings
    cargo clippy --target wasm32-wasip2 -p 'plugin-*' -p 'fixture-*' -- -D warnings
    cargo fmt --all -- --check

# Build the first-party plugins as standalone .wasm files into target/plugins.
plugins:
    cargo build --target wasm32-wasip2 --profile guest --workspace --exclude toolgate --exclude toolgate-cli --exclude toolgate-tests --exclude toolgate-schema --exclude toolgate-sandbox --exclude toolgate-guest-build --exclude toolgate-sdk-macros
    mkdir -p target/plugins
    for f in target/wasm32-wasip2/guest/plugin_*.wasm; do n=$(basename $f .wasm); cp $f target/plugins/${n#plugin_}.wasm; done
    ls -la target/plugins

# The Python, JavaScript and C guest toolchains (apt for the C compiler).
toolchains:
    scripts/toolchains.sh apt python js c

# The same guard in four languages: size, load, per call (BENCHMARKS.md).
bench-guards:
    cargo build --release -p toolgate-cli
    scripts/bench-guards.sh

# Benchmarks (figures go to BENCHMARKS.md): the schema validator, the
# pipeline per call, the scheduler's overhead.
bench:
    cargo bench -p toolgate-schema
    cargo bench -p toolgate-tests --bench pipeline
    cargo bench -p toolgate-tests --bench scheduler

# The file tools against rg and cat (BENCHMARKS.md, "Tool catalog"); needs rg.
bench-catalog:
    cargo bench -p toolgate-tests --bench catalog

# `tools/call` through `toolgate serve` with the raw MCP client (BENCHMARKS.md, "MCP").
bench-serve rounds="3":
    cargo build --release -p toolgate-cli
    cargo test -p toolgate-tests --no-run
    tests/mcp/bench.sh {{rounds}}

# Fuzz the schema compiler and validator (needs nightly and cargo-fuzz).
fuzz seconds="600":
    cd host/schema/fuzz && cargo +nightly fuzz run compile_validate -- -max_total_time={{seconds}}
