#!/usr/bin/env python3
"""A soak through `toolgate serve --http` (issue 46): many calls from
several clients at once while plugins are hot-reloaded, with the audit
record on — then every call accounted for.

Usage:
    python3 tests/mcp/soak.py TOOLGATE GUESTS_DIR [--calls N] [--clients C]
                              [--reload-every S]

  TOOLGATE    the binary (target/release/toolgate)
  GUESTS_DIR  the built fixtures (target/guests/wasm32-wasip2/guest)

The server: the default configuration (the built-in plugins), a plugin
directory with the `tools` fixture (`echo`), one Wasm guard (the `guard`
fixture, `BEHAVIOR = "pass"`: it runs on every call and allows it) and
`v.wasm` (the `versioned-1`/`-2` fixtures); `[audit]` on (its default
`sync = "batch"`); the bearer token. Both versions are compiled and served
once before the soak starts (warm-up, not counted).

The soak: C client processes (stdlib HTTP/1.1, one keep-alive connection
and one MCP session each) share N `tools/call` of `echo`, each with a text
of its own, and check that each answer is exactly that text. Meanwhile
`v.wasm` is replaced (a hidden file renamed over it) every S seconds, and
the server's resident memory, threads and open files are read once a
second from /proc.

Then: the generation in force (`/metrics`), the server stopped with
SIGTERM (it closes the record), `toolgate audit verify` on the record, and
the record's `echo` call records counted — exactly N, each text once.

Prints one JSON object; exits 1 when a check fails.
"""

import argparse
import http.client
import json
import multiprocessing
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "soak", "version": "1"}}}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def answer_of(data):
    """The JSON-RPC answer in a response body (JSON, or an SSE stream)."""
    text = data.decode()
    if text.lstrip().startswith("{"):
        return json.loads(text)
    for line in text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            v = json.loads(line[5:])
            if "id" in v:
                return v
    raise ValueError(f"no answer in {text[:200]!r}")


class Session:
    def __init__(self, port, token):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.base = {"Content-Type": "application/json",
                     "Accept": "application/json, text/event-stream",
                     "Authorization": "Bearer " + token}
        self.sid = None
        r, _ = self.post(INIT)
        assert r.status == 200, r.status
        self.sid = r.getheader("mcp-session-id")
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, body):
        h = dict(self.base)
        if self.sid:
            h["Mcp-Session-Id"] = self.sid
            h["MCP-Protocol-Version"] = "2025-06-18"
        self.conn.request("POST", "/mcp", json.dumps(body), h)
        r = self.conn.getresponse()
        return r, r.read()

    def close(self):
        """Ends the session (`DELETE`), as a well-behaved client does."""
        h = dict(self.base, **{"Mcp-Session-Id": self.sid})
        self.conn.request("DELETE", "/mcp", headers=h)
        self.conn.getresponse().read()
        self.conn.close()

    def call(self, id_, tool, args):
        r, data = self.post({"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                             "params": {"name": tool, "arguments": args}})
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {data[:200]!r}")
        return answer_of(data)


def client(job):
    """One client process: its share of the calls. Returns what it saw."""
    port, token, me, n = job
    s = Session(port, token)
    ok, wrong, lat = 0, [], []
    for i in range(n):
        text = f"{me}-{i}"
        t = time.perf_counter()
        try:
            v = s.call(10 + i, "echo", {"text": text})
            res = v.get("result") or {}
            got = "".join(b.get("text", "") for b in res.get("content", []))
            if v.get("id") == 10 + i and not res.get("isError") and got == text:
                ok += 1
            elif len(wrong) < 5:
                wrong.append(json.dumps(v)[:300])
        except Exception as e:  # noqa: BLE001 — counted and reported
            if len(wrong) < 5:
                wrong.append(repr(e)[:300])
            s = Session(port, token)
        if i % 10 == 0:
            lat.append((time.perf_counter() - t) * 1e3)
    s.close()
    return {"ok": ok, "wrong": wrong, "lat": lat}


def cpu_seconds(pid):
    """User and system CPU time the process has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
            elif k == "Threads":
                out[k] = int(v)
    fds = os.listdir(f"/proc/{pid}/fd")
    out["fds"] = len(fds)
    files = out["files"] = {}
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        files[target] = files.get(target, 0) + 1
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("toolgate")
    p.add_argument("guests")
    p.add_argument("--calls", type=int, default=100_000)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--reload-every", type=float, default=2.0,
                   help="seconds between replacements of v.wasm (0: none)")
    p.add_argument("--no-audit", action="store_true",
                   help="no audit record, `[audit] enabled = false` (what the record costs)")
    p.add_argument("--all-on", action="store_true",
                   help="also the approval queue (configured, never asked: `echo` is not "
                        "destructive), egress rules and the embedded state store")
    a = p.parse_args()
    a.toolgate, a.guests = os.path.abspath(a.toolgate), os.path.abspath(a.guests)
    guest = lambda name: os.path.join(a.guests, f"fixture_{name}.wasm")  # noqa: E731

    tmp = tempfile.mkdtemp(prefix="toolgate-soak-")
    work, plugins, state, cache = (os.path.join(tmp, d) for d in ("work", "plugins", "state", "cache"))
    for d in (work, plugins, state, cache):
        os.makedirs(d, mode=0o700)
    shutil.copy(guest("tools"), os.path.join(plugins, "tools.wasm"))
    shutil.copy(guest("guard"), os.path.join(plugins, "guard.wasm"))
    shutil.copy(guest("versioned_1"), os.path.join(plugins, "v.wasm"))
    record = os.path.join(state, "audit.jsonl")
    config = os.path.join(tmp, "toolgate.toml")
    with open(config, "w") as f:
        if a.no_audit:
            f.write('[audit]\nenabled = false\n\n')
        else:
            f.write(f'[audit]\npath = {json.dumps(record)}\n\n')
        if a.all_on:
            f.write(f'[approval]\nmode = "queue"\nstore = {json.dumps(os.path.join(state, "approvals.sqlite"))}\n\n'
                    f'[state]\npath = {json.dumps(os.path.join(state, "kv.sqlite"))}\n\n'
                    '[egress]\ndeny = ["*.internal.example.com", "10.0.0.0/8"]\n\n')
        f.write('[plugins.guard]\nvars = { BEHAVIOR = "pass" }\n')
    token = secrets.token_hex(32)
    token_file = os.path.join(state, "serve-token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(token + "\n")
    port = free_port()
    env = dict(os.environ, TOOLGATE_CACHE_DIR=cache, TOOLGATE_STATE_DIR=state, RUST_LOG="error")
    server = subprocess.Popen(
        [a.toolgate, "--plugins", plugins, "--config", config, "serve",
         "--http", f"127.0.0.1:{port}", "--token-file", token_file],
        cwd=work, env=env, stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(tmp, "server.log"), "w"))
    checks = {}
    try:
        deadline = time.time() + 120
        while True:
            try:
                s = Session(port, token)
                break
            except (ConnectionError, OSError):
                if time.time() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start: " + open(os.path.join(tmp, "server.log")).read()[-2000:])
                time.sleep(0.1)

        def version():
            v = s.call(1, "which_version", {"n": 0})
            return "".join(b.get("text", "") for b in v["result"]["content"]).replace(" ", "")

        def swap(n):
            hidden = os.path.join(plugins, ".v.wasm.tmp")
            shutil.copy(guest(f"versioned_{n}"), hidden)
            os.replace(hidden, os.path.join(plugins, "v.wasm"))

        # Warm-up: both versions compiled and served once.
        for n in (2, 1):
            swap(n)
            until = time.time() + 120
            while f'"version":{n}' not in version():
                if time.time() > until:
                    raise SystemExit(f"version {n} was never served")
                time.sleep(0.05)

        samples, stop = [], threading.Event()
        reloads = [0]

        def sample():
            while not stop.is_set():
                samples.append((time.time(), proc_status(server.pid)))
                stop.wait(1.0)

        def reload():
            n = 2
            while a.reload_every > 0 and not stop.wait(a.reload_every):
                swap(n)
                reloads[0] += 1
                n = 3 - n

        threads = [threading.Thread(target=sample), threading.Thread(target=reload)]
        before = proc_status(server.pid)
        for t in threads:
            t.start()
        share = [a.calls // a.clients + (1 if i < a.calls % a.clients else 0) for i in range(a.clients)]
        t0, cpu0 = time.time(), cpu_seconds(server.pid)
        with multiprocessing.Pool(a.clients) as pool:
            results = pool.map(client, [(port, token, f"c{i}", share[i]) for i in range(a.clients)])
        elapsed, cpu = time.time() - t0, cpu_seconds(server.pid) - cpu0
        stop.set()
        for t in threads:
            t.join()
        time.sleep(2)  # idle: what is left once the load is gone
        after = proc_status(server.pid)
        r = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        r.request("GET", "/metrics", headers={"Authorization": "Bearer " + token})
        metrics = r.getresponse().read().decode()
        generation = next((float(l.split()[-1]) for l in metrics.splitlines()
                           if l.startswith("toolgate_generation")), None)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()

    ok = sum(x["ok"] for x in results)
    wrong = [w for x in results for w in x["wrong"]]
    lat = sorted(l for x in results for l in x["lat"])
    verify = subprocess.run([a.toolgate, "audit", "verify", "--json", record],
                            env=env, capture_output=True, text=True) if not a.no_audit else None
    echo_records, texts = 0, set()
    for name in sorted(os.listdir(state)):
        if not name.startswith("audit.jsonl"):
            continue
        with open(os.path.join(state, name)) as f:
            for line in f:
                v = json.loads(line)
                if v.get("kind") == "call" and v.get("tool") == "echo":
                    echo_records += 1
                    texts.add(json.dumps(v.get("arguments"), sort_keys=True))
    # The pools grow under load (an instance per call in flight): what
    # must not grow is what the server holds once warm, so the baseline is
    # the largest of the first fifth of the samples.
    first = [st for (_, st) in samples[1: max(2, len(samples) // 5)]] or [before]
    warm = {k: max(st[k] for st in first) for k in ("VmRSS", "Threads", "fds")}
    out = {
        "calls": a.calls, "clients": a.clients, "seconds": round(elapsed, 1),
        "calls_per_s": round(a.calls / elapsed),
        "server_cpu_us_per_call": round(cpu / a.calls * 1e6, 1),
        "server_cores": round(cpu / elapsed, 2),
        "median_ms": round(statistics.median(lat), 3) if lat else None,
        "p99_ms": round(lat[int(len(lat) * 0.99)], 3) if lat else None,
        "answered_right": ok, "wrong": wrong[:5],
        "reloads": reloads[0], "generation": generation,
        "audit_verify": verify and verify.returncode,
        "audit_verify_out": verify and verify.stdout.strip()[:300],
        "echo_call_records": echo_records, "distinct_arguments": len(texts),
        "rss_kib": {"before": before["VmRSS"], "warm": warm["VmRSS"],
                    "peak": max(st["VmRSS"] for (_, st) in samples), "end": after["VmRSS"]},
        "threads": {"before": before["Threads"], "warm": warm["Threads"],
                    "peak": max(st["Threads"] for (_, st) in samples), "end": after["Threads"]},
        "fds": {"before": before["fds"], "warm": warm["fds"],
                "peak": max(st["fds"] for (_, st) in samples), "end": after["fds"],
                "more_at_end": {f: n - before.get("files", {}).get(f, 0)
                                for f, n in after.get("files", {}).items()
                                if n > before.get("files", {}).get(f, 0)}},
    }
    checks = {
        "every call answered right": ok == a.calls,
        "audit verify intact": a.no_audit or verify.returncode == 0,
        "one echo record per call": a.no_audit or (echo_records == a.calls and len(texts) == a.calls),
        "no thread growth after warm-up": after["Threads"] <= warm["Threads"],
        "no fd growth after warm-up": after["fds"] <= warm["fds"],
        "memory flat after warm-up (end within 25%)": after["VmRSS"] <= warm["VmRSS"] * 1.25,
        "reloaded": a.reload_every == 0 or reloads[0] > 0,
    }
    out["checks"] = checks
    print(json.dumps(out, indent=1))
    shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(0 if all(checks.values()) else 1)


if __name__ == "__main__":
    main()
