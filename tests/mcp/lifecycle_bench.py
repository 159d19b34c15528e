#!/usr/bin/env python3
"""The plugin lifecycle, measured through the `toolgate` binary.

Usage: lifecycle_bench.py TOOLGATE GUESTS_DIR [ROUNDS]
  TOOLGATE    the binary (target/release/toolgate, or target/debug/toolgate)
  GUESTS_DIR  the built fixtures (target/guests/wasm32-wasip2/guest)

1. rename -> first call served by the new version: `toolgate serve` watching
   a plugin directory (default watcher: 50 ms quiet period); the
   `versioned-1`/`-2` fixtures are written to a hidden temporary file and
   renamed over `v.wasm` in turn while the client calls `which_version`
   back to back; per replacement, from the rename to the first answer
   carrying the new version. The first two rounds compile (not counted).
2. start with 20 plugins, compiling vs cached: 20 distinct components (the
   `tools` fixture, each with a custom section of its own: its own digest,
   its own cache entry); `toolgate plugins` with an empty compile cache,
   then with the cache it filled (the process's whole run).
3. `toolgate serve` ready: built-ins only, cache warm; spawn -> `initialize`
   answered.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CACHES = None
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "bench", "version": "1"}}})


def summary(v):
    v = sorted(v)
    p95 = v[min(len(v) - 1, round((len(v) - 1) * 0.95))]
    return (f"median {statistics.median(v):.1f} ms, p95 {p95:.1f} ms, "
            f"min {v[0]:.1f}, max {v[-1]:.1f} (n = {len(v)})")


class Server:
    def __init__(self, args, env):
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)
        self.id = 10

    def send(self, obj):
        self.p.stdin.write(json.dumps(obj) + "\n")
        self.p.stdin.flush()

    def answer(self, id_):
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit("the server closed its output")
            v = json.loads(line)
            if v.get("id") == id_:
                return v

    def call(self, tool, args):
        self.id += 1
        self.send({"jsonrpc": "2.0", "id": self.id, "method": "tools/call",
                   "params": {"name": tool, "arguments": args}})
        return self.answer(self.id)

    def close(self):
        self.p.kill()
        self.p.wait()


def env_with(cache):
    env = dict(os.environ)
    env["TOOLGATE_CACHE_DIR"] = cache
    env["RUST_LOG"] = "error"
    return env


def rename_to_first_call(bin_, guests, rounds, work):
    plugins = os.path.join(work, "plugins")
    os.makedirs(plugins)
    files = [open(os.path.join(guests, f"fixture_versioned_{i}.wasm"), "rb").read() for i in (1, 2)]
    with open(os.path.join(plugins, "v.wasm"), "wb") as f:
        f.write(files[0])
    cache = os.path.join(CACHES, "cache-reload")
    s = Server([bin_, "--no-default-plugins", "--plugins", plugins, "serve", "--structured-content"], env_with(cache))
    s.send(json.loads(INIT))
    s.answer(1)
    s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    times = []
    nxt = 1
    for rnd in range(rounds + 2):
        tmp = os.path.join(plugins, ".v.wasm.tmp")
        with open(tmp, "wb") as f:
            f.write(files[nxt])
        want = nxt + 1
        t0 = time.perf_counter()
        os.rename(tmp, os.path.join(plugins, "v.wasm"))
        while True:
            r = s.call("which_version", {"n": 1})
            sc = r.get("result", {}).get("structuredContent") or {}
            if sc.get("version") == want:
                break
            if time.perf_counter() - t0 > 30:
                raise SystemExit(f"version {want} never served: {r}")
        ms = (time.perf_counter() - t0) * 1000
        if rnd >= 2:
            times.append(ms)
        nxt = 1 - nxt
        time.sleep(0.1)
    s.close()
    print("rename -> first call served by the new version:", summary(times))


def custom_section(data, name):
    def leb(n):
        out = bytearray()
        while True:
            b = n & 0x7F
            n >>= 7
            if n == 0:
                out.append(b)
                return bytes(out)
            out.append(b | 0x80)
    payload = leb(len(name)) + name.encode()
    return data + b"\x00" + leb(len(payload)) + payload


def start_twenty(bin_, guests, work, runs=5):
    plugins = os.path.join(work, "twenty")
    os.makedirs(plugins)
    base = open(os.path.join(guests, "fixture_tools.wasm"), "rb").read()
    for i in range(20):
        with open(os.path.join(plugins, f"p{i:02}.wasm"), "wb") as f:
            f.write(custom_section(base, f"bench-{i}"))
    cold, warm = [], []
    for run in range(runs):
        cache = os.path.join(CACHES, f"cache-twenty-{run}")
        for into in (cold, warm):
            t0 = time.perf_counter()
            out = subprocess.run([bin_, "--no-default-plugins", "--plugins", plugins, "plugins", "--json"],
                                 env=env_with(cache), capture_output=True, text=True)
            into.append((time.perf_counter() - t0) * 1000)
            if out.returncode != 0:
                raise SystemExit(out.stderr)
            status = json.loads(out.stdout)["status"]
            assert len(status) == 20 and all(s["state"] == "serving" for s in status), status
    print("start with 20 plugins (`toolgate plugins`), compiling:", summary(cold))
    print("start with 20 plugins (`toolgate plugins`), cached:   ", summary(warm))
    print(f"cached is {statistics.median(cold) / statistics.median(warm):.1f}x faster (medians)")


def serve_ready(bin_, work, runs=20):
    # Outside the working directory: the built-ins are granted it, and the
    # host refuses a compile cache inside a grant.
    cache = os.path.join(CACHES, "cache-serve")
    times = []
    for run in range(runs + 1):
        t0 = time.perf_counter()
        s = Server([bin_, "serve", "--structured-content"], env_with(cache))
        s.send(json.loads(INIT))
        r = s.answer(1)
        ms = (time.perf_counter() - t0) * 1000
        assert "serverInfo" in r["result"], r
        s.close()
        if run > 0:
            times.append(ms)
    print("toolgate serve (built-ins, cache warm): spawn -> initialize answered:", summary(times))


def main():
    bin_, guests = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    global CACHES
    work = tempfile.mkdtemp(prefix="toolgate-lifecycle-bench-")
    CACHES = tempfile.mkdtemp(prefix="toolgate-lifecycle-bench-caches-")
    cwd = os.getcwd()
    os.chdir(work)  # ./toolgate.toml of the caller must not apply
    try:
        rename_to_first_call(bin_, guests, rounds, work)
        start_twenty(bin_, guests, work)
        serve_ready(bin_, work)
    finally:
        os.chdir(cwd)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(CACHES, ignore_errors=True)


if __name__ == "__main__":
    main()
