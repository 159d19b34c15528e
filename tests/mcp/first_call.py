#!/usr/bin/env python3
"""Start -> first answers of `toolgate serve`, on an empty compile cache.

Usage: first_call.py TOOLGATE [ROUNDS] [--warm] [--tool NAME] [--plugins DIR] [--all-on]
  TOOLGATE    the binary (target/release/toolgate or target/debug/toolgate)
  ROUNDS      how many fresh servers to start (default 5)
  --warm      reuse one compile cache across rounds (the first round fills
              it and is not counted): the figure of every start after the
              first
  --tool      the built-in tool called (default `read`; `list_dir` works too)
  --plugins   a plugin directory to serve as well (third-party plugins)
  --all-on    every default feature configured (issue 46): the audit record
              (on by default), the approval queue (`[approval] mode =
              "queue"`, its store), `[egress] deny` rules and the embedded
              state store (`[state] path`); each round in a fresh state
              directory, so the audit key and the stores are made at start

Each round: a fresh private TOOLGATE_CACHE_DIR (unless --warm) and a fresh
working directory holding one small file; the server is spawned, and at once
sent `initialize`, `notifications/initialized` and a `tools/call` of the
built-in tool (raw newline-delimited JSON-RPC over stdio, nothing else in
between). Measured from the spawn: the answer to `initialize`, the answer to
the call (which must succeed). Prints one JSON object: per-round figures and
medians, in milliseconds.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    argv = sys.argv[1:]
    if not argv:
        sys.exit(__doc__)

    def opt(name, default=None):
        if name in argv:
            i = argv.index(name)
            value = argv[i + 1]
            del argv[i:i + 2]
            return value
        return default

    warm = "--warm" in argv
    if warm:
        argv.remove("--warm")
    all_on = "--all-on" in argv
    if all_on:
        argv.remove("--all-on")
    tool = opt("--tool", "read")
    plugins = opt("--plugins")
    binary = os.path.abspath(argv[0])
    rounds = int(argv[1]) if len(argv) > 1 else 5
    base = tempfile.mkdtemp(prefix="toolgate-first-call-")
    shared_cache = os.path.join(base, "warm-cache")
    results = []
    try:
        for n in range(rounds + (1 if warm else 0)):
            cache = shared_cache if warm else os.path.join(base, f"cache-{n}")
            work = os.path.join(base, f"work-{n}")
            os.makedirs(work)
            with open(os.path.join(work, "hello.txt"), "w") as f:
                f.write("hello\n")
            r = one(binary, cache, work, tool, plugins, all_on)
            if warm and n == 0:
                continue
            results.append(r)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out = {
        "binary": binary,
        "cache": "warm" if warm else "empty",
        "all_on": all_on,
        "tool": tool,
        "rounds": results,
        "initialize_ms_median": round(statistics.median(r["initialize_ms"] for r in results), 1),
        "first_call_ms_median": round(statistics.median(r["first_call_ms"] for r in results), 1),
        "first_call_ms_max": round(max(r["first_call_ms"] for r in results), 1),
    }
    print(json.dumps(out, indent=1))


def one(binary, cache, work, tool, plugins, all_on=False):
    args = [binary]
    if plugins:
        args += ["--plugins", plugins]
    env = dict(os.environ, TOOLGATE_CACHE_DIR=cache, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
    if all_on:
        state = work + "-state"
        os.makedirs(state, mode=0o700)
        config = os.path.join(state, "toolgate.toml")
        with open(config, "w") as f:
            f.write(f'[approval]\nmode = "queue"\nstore = {json.dumps(os.path.join(state, "approvals.sqlite"))}\n\n'
                    f'[state]\npath = {json.dumps(os.path.join(state, "kv.sqlite"))}\n\n'
                    '[egress]\ndeny = ["*.internal.example.com", "10.0.0.0/8"]\n')
        args += ["--config", config]
        env["TOOLGATE_STATE_DIR"] = state
    args += ["serve", "--no-watch"]
    args_of = {"read": {"path": "hello.txt"}, "list_dir": {"path": "."}}.get(tool, {})
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "first-call", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": tool, "arguments": args_of}},
    ]
    t0 = time.perf_counter()
    p = subprocess.Popen(args, cwd=work, env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    p.stdin.write("".join(json.dumps(f) + "\n" for f in frames).encode())
    p.stdin.flush()
    seen = {}
    try:
        while len(seen) < 2:
            line = p.stdout.readline()
            if not line:
                raise SystemExit(f"the server closed its output (exit {p.wait()})")
            m = json.loads(line)
            if m.get("id") in (1, 2):
                seen[m["id"]] = (time.perf_counter() - t0, m)
    finally:
        p.stdin.close()
        p.terminate()
        p.wait()
    answer = seen[2][1]
    if "result" not in answer or answer["result"].get("isError"):
        raise SystemExit(f"the first call failed: {json.dumps(answer)[:400]}")
    return {"initialize_ms": round(seen[1][0] * 1e3, 1),
            "first_call_ms": round(seen[2][0] * 1e3, 1)}


if __name__ == "__main__":
    main()
