#!/usr/bin/env python3
"""A soak through `toolgate serve --http` (issue 46): many calls from
several clients at once while plugins are hot-reloaded, with the audit
record on — then every call accounted for.

Usage:
    python3 tests/mcp/soak.py TOOLGATE GUESTS_DIR [--calls N] [--clients C]
                              [--reload-every S] [--replicas R]
                              [--no-audit] [--all-on]

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

With `--replicas R` (R > 1): R servers, each with its own state directory
(audit record, compile cache), sharing the plugin directory, the token and
one Debian `redis-server` (`[state] url`), behind Debian's `haproxy`
(round robin, sessions sticky by `Mcp-Session-Id`); the clients call the
balancer. Reported per replica: its calls, its CPU per call, its memory,
threads and descriptors; and Redis's CPU per call.

Then: the generation in force on each server (`/metrics`), the servers
stopped with SIGTERM (each closes its record), `toolgate audit verify` on
every record (one chain per replica), and the `echo` call records counted
— exactly N, each text once. `--no-audit` and `--all-on` change the
configuration, to measure what the record and the other features cost.

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
    # Connections are the clients' and the balancer's to keep or close
    # (HAProxy keeps some to each server): growth is judged without them.
    out["held"] = sum(n for f, n in files.items() if not f.startswith("socket:"))
    return out


def start(args, env, log, port, token, pid_of=None):
    """A process, and (for a server) a session once it answers on `port`."""
    proc = subprocess.Popen(args, env=env, cwd=env.get("SOAK_CWD"), stdout=subprocess.DEVNULL,
                            stderr=open(log, "w"))
    deadline = time.time() + 120
    while True:
        try:
            return proc, (Session(port, token) if token else socket.create_connection(("127.0.0.1", port)).close())
        except (ConnectionError, OSError):
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit(f"{args[0]} did not start: " + open(log).read()[-2000:])
            time.sleep(0.1)


def usage(samples, before, after):
    """Resident memory, threads and descriptors of one process: before the
    load, once warm, at the peak and at the end. The pools grow under load
    (an instance per call in flight): what must not grow is what the server
    holds once warm, so the warm figure is the largest of the first fifth
    of the samples."""
    first = samples[1: max(2, len(samples) // 5)] or [before]
    warm = {k: max(st[k] for st in first) for k in ("VmRSS", "Threads", "fds", "held")}
    peak = {k: max(st[k] for st in samples or [before]) for k in ("VmRSS", "Threads", "fds")}
    return {
        "rss_kib": {"before": before["VmRSS"], "warm": warm["VmRSS"], "peak": peak["VmRSS"], "end": after["VmRSS"]},
        "threads": {"before": before["Threads"], "warm": warm["Threads"], "peak": peak["Threads"], "end": after["Threads"]},
        "fds": {"before": before["fds"], "warm": warm["fds"], "peak": peak["fds"], "end": after["fds"],
                "not_sockets": {"before": before["held"], "warm": warm["held"], "end": after["held"]},
                "more_at_end": {f: n - before["files"].get(f, 0) for f, n in after["files"].items()
                                if n > before["files"].get(f, 0)}},
    }, {
        "no thread growth after warm-up": after["Threads"] <= warm["Threads"],
        # The instance pools grow while calls are in flight (each instance of
        # a built-in opens the working directory it preopens) and keep their
        # warm instances; a leak per call or per reload would pass this
        # bound many times over (100,000 calls, a reload every 2 s).
        f"descriptors held at the end at most {POOL_GROWTH} over the start (sockets aside)":
            after["held"] - before["held"] <= POOL_GROWTH,
        "memory flat after warm-up (end within 25%)": after["VmRSS"] <= warm["VmRSS"] * 1.25,
    }


# Descriptors (sockets aside) the instance pools may add while warm.
POOL_GROWTH = 12

HAPROXY = """global
    maxconn 512
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
frontend mcp
    bind 127.0.0.1:{port}
    default_backend toolgate
backend toolgate
    balance roundrobin
    stick-table type string len 128 size 100k expire 30m
    stick on req.hdr(mcp-session-id)
    stick store-response res.hdr(mcp-session-id)
{servers}
"""


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
    p.add_argument("--replicas", type=int, default=1,
                   help="N > 1: N servers sharing one Debian redis-server (`[state] url`) "
                        "behind Debian's haproxy (sessions sticky by Mcp-Session-Id), all "
                        "watching the one plugin directory")
    a = p.parse_args()
    a.toolgate, a.guests = os.path.abspath(a.toolgate), os.path.abspath(a.guests)
    guest = lambda name: os.path.join(a.guests, f"fixture_{name}.wasm")  # noqa: E731
    for tool in (["redis-server", "haproxy"] if a.replicas > 1 else []):
        if not shutil.which(tool):
            raise SystemExit(f"--replicas needs Debian's {tool}: apt-get install -y redis-server haproxy")

    tmp = tempfile.mkdtemp(prefix="toolgate-soak-")
    work, plugins = os.path.join(tmp, "work"), os.path.join(tmp, "plugins")
    for d in (work, plugins):
        os.makedirs(d, mode=0o700)
    shutil.copy(guest("tools"), os.path.join(plugins, "tools.wasm"))
    shutil.copy(guest("guard"), os.path.join(plugins, "guard.wasm"))
    shutil.copy(guest("versioned_1"), os.path.join(plugins, "v.wasm"))
    token = secrets.token_hex(32)
    token_file = os.path.join(tmp, "serve-token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(token + "\n")
    procs, servers, redis = [], [], None
    try:
        if a.replicas > 1:
            redis_port = free_port()
            redis, _ = start(["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no"],
                             dict(os.environ), os.path.join(tmp, "redis.log"), redis_port, None)
            procs.append(redis)
        for n in range(1, a.replicas + 1):
            state = os.path.join(tmp, f"state-r{n}")
            os.makedirs(state, mode=0o700)
            record = os.path.join(state, "audit.jsonl")
            config = os.path.join(state, "toolgate.toml")
            with open(config, "w") as f:
                if a.no_audit:
                    f.write('[audit]\nenabled = false\n\n')
                else:
                    f.write(f'[audit]\npath = {json.dumps(record)}\n\n')
                if redis:
                    f.write(f'[state]\nurl = "redis://127.0.0.1:{redis_port}/0"\n\n')
                elif a.all_on:
                    f.write(f'[state]\npath = {json.dumps(os.path.join(state, "kv.sqlite"))}\n\n')
                if a.all_on:
                    f.write(f'[approval]\nmode = "queue"\nstore = {json.dumps(os.path.join(state, "approvals.sqlite"))}\n\n'
                            '[egress]\ndeny = ["*.internal.example.com", "10.0.0.0/8"]\n\n')
                f.write('[plugins.guard]\nvars = { BEHAVIOR = "pass" }\n')
            port = free_port()
            env = dict(os.environ, TOOLGATE_CACHE_DIR=os.path.join(state, "cache"),
                       TOOLGATE_STATE_DIR=state, RUST_LOG="error", SOAK_CWD=work)
            args = [a.toolgate, "--plugins", plugins, "--config", config, "serve",
                    "--http", f"127.0.0.1:{port}", "--token-file", token_file]
            if redis:
                args += ["--replica-id", f"r{n}"]
            proc, session = start(args, env, os.path.join(state, "server.log"), port, token)
            procs.append(proc)
            servers.append({"name": f"r{n}", "proc": proc, "port": port, "session": session,
                            "record": record, "env": env, "state": state})
        front = servers[0]["port"]
        if redis:
            front = free_port()
            cfg = os.path.join(tmp, "haproxy.cfg")
            with open(cfg, "w") as f:
                f.write(HAPROXY.format(port=front, servers="\n".join(
                    f"    server {s['name']} 127.0.0.1:{s['port']}" for s in servers)))
            haproxy, _ = start(["haproxy", "-f", cfg], dict(os.environ), os.path.join(tmp, "haproxy.log"),
                               front, None)
            procs.append(haproxy)

        def swap(n):
            hidden = os.path.join(plugins, ".v.wasm.tmp")
            shutil.copy(guest(f"versioned_{n}"), hidden)
            os.replace(hidden, os.path.join(plugins, "v.wasm"))

        # Warm-up: both versions compiled and served once, by every server.
        for n in (2, 1):
            swap(n)
            for srv in servers:
                until = time.time() + 120
                while True:
                    v = srv["session"].call(1, "which_version", {"n": 0})
                    text = "".join(b.get("text", "") for b in v["result"]["content"]).replace(" ", "")
                    if f'"version":{n}' in text:
                        break
                    if time.time() > until:
                        raise SystemExit(f"version {n} was never served by {srv['name']}")
                    time.sleep(0.05)

        samples, stop = {s["name"]: [] for s in servers}, threading.Event()
        reloads = [0]

        def sample():
            while not stop.is_set():
                for srv in servers:
                    samples[srv["name"]].append(proc_status(srv["proc"].pid))
                stop.wait(1.0)

        def reload():
            n = 2
            while a.reload_every > 0 and not stop.wait(a.reload_every):
                swap(n)
                reloads[0] += 1
                n = 3 - n

        threads = [threading.Thread(target=sample), threading.Thread(target=reload)]
        before = {s["name"]: proc_status(s["proc"].pid) for s in servers}
        for t in threads:
            t.start()
        share = [a.calls // a.clients + (1 if i < a.calls % a.clients else 0) for i in range(a.clients)]
        cpu0 = {s["name"]: cpu_seconds(s["proc"].pid) for s in servers}
        redis_cpu0 = cpu_seconds(redis.pid) if redis else 0
        t0 = time.time()
        with multiprocessing.Pool(a.clients) as pool:
            results = pool.map(client, [(front, token, f"c{i}", share[i]) for i in range(a.clients)])
        elapsed = time.time() - t0
        cpu = {s["name"]: cpu_seconds(s["proc"].pid) - cpu0[s["name"]] for s in servers}
        redis_cpu = (cpu_seconds(redis.pid) - redis_cpu0) if redis else None
        stop.set()
        for t in threads:
            t.join()
        time.sleep(2)  # idle: what is left once the load is gone
        after = {s["name"]: proc_status(s["proc"].pid) for s in servers}
        generation = {}
        for srv in servers:
            r = http.client.HTTPConnection("127.0.0.1", srv["port"], timeout=10)
            r.request("GET", "/metrics", headers={"Authorization": "Bearer " + token})
            metrics = r.getresponse().read().decode()
            generation[srv["name"]] = next((float(line.split()[-1]) for line in metrics.splitlines()
                                            if line.startswith("toolgate_generation")), None)
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()

    ok = sum(x["ok"] for x in results)
    wrong = [w for x in results for w in x["wrong"]]
    lat = sorted(v for x in results for v in x["lat"])
    records = [os.path.join(s["state"], f) for s in servers for f in os.listdir(s["state"])
               if f.startswith("audit.jsonl")]
    verify = None if a.no_audit else subprocess.run(
        [a.toolgate, "audit", "verify", "--json", *records], env=servers[0]["env"],
        capture_output=True, text=True)
    echo_records, texts, by_replica = 0, set(), {}
    for path in records:
        with open(path) as f:
            for line in f:
                v = json.loads(line)
                if v.get("kind") == "call" and v.get("tool") == "echo":
                    echo_records += 1
                    texts.add(json.dumps(v.get("arguments"), sort_keys=True))
                    name = os.path.basename(os.path.dirname(path))[len("state-"):]
                    by_replica[name] = by_replica.get(name, 0) + 1
    total_cpu = sum(cpu.values())
    out = {
        "calls": a.calls, "clients": a.clients, "replicas": a.replicas,
        "seconds": round(elapsed, 1), "calls_per_s": round(a.calls / elapsed),
        "server_cpu_us_per_call": round(total_cpu / a.calls * 1e6, 1),
        "server_cores": round(total_cpu / elapsed, 2),
        "median_ms": round(statistics.median(lat), 3) if lat else None,
        "p99_ms": round(lat[int(len(lat) * 0.99)], 3) if lat else None,
        "answered_right": ok, "wrong": wrong[:5],
        "reloads": reloads[0], "generation": generation,
        "audit_verify": verify and verify.returncode,
        "audit_verify_out": verify and verify.stdout.strip()[:300],
        "echo_call_records": echo_records, "distinct_arguments": len(texts),
    }
    checks = {
        "every call answered right": ok == a.calls,
        "audit verify intact": a.no_audit or verify.returncode == 0,
        "one echo record per call": a.no_audit or (echo_records == a.calls and len(texts) == a.calls),
        "reloaded": a.reload_every == 0 or reloads[0] > 0,
    }
    per = {}
    for srv in servers:
        name = srv["name"]
        figures, held = usage(samples[name], before[name], after[name])
        calls = by_replica.get(name, 0)
        figures["calls"] = calls
        figures["cpu_us_per_call"] = round(cpu[name] / calls * 1e6, 1) if calls else None
        per[name] = figures
        for k, v in held.items():
            checks[k] = checks.get(k, True) and v
    if a.replicas == 1:
        out.update({k: v for k, v in per["r1"].items() if k not in ("calls", "cpu_us_per_call")})
    else:
        out["per_replica"] = per
        out["redis_cpu_us_per_call"] = round(redis_cpu / a.calls * 1e6, 1)
    out["checks"] = checks
    print(json.dumps(out, indent=1))
    shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(0 if all(checks.values()) else 1)


if __name__ == "__main__":
    main()
