"""`tools/call` round trips through `toolgate serve --http` with a raw HTTP/1.1
client (stdlib only, one keep-alive connection, one session), to measure the
HTTP front's cost: headers, the token check, the body read, the shares.

    python3 bench_http.py URL [--token-file FILE] [--seq N] [--rounds R]

Prints the median and p95 of sequential `tools/call` of `echo` in ms, and
calls/s, as JSON.
"""
import argparse, http.client, json, statistics, time, urllib.parse

p = argparse.ArgumentParser()
p.add_argument("url")
p.add_argument("--token-file")
p.add_argument("--seq", type=int, default=2000)
a = p.parse_args()
u = urllib.parse.urlparse(a.url)
base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
if a.token_file:
    base["Authorization"] = "Bearer " + open(a.token_file).read().strip()
conn = http.client.HTTPConnection(u.hostname, u.port)


def post(body, session=None):
    h = dict(base)
    if session:
        h["Mcp-Session-Id"] = session
        h["MCP-Protocol-Version"] = "2025-06-18"
    conn.request("POST", u.path, json.dumps(body), h)
    r = conn.getresponse()
    data = r.read()
    return r, data


r, _ = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
assert r.status == 200, r.status
sid = r.getheader("mcp-session-id")
post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
for _ in range(50):
    r, data = post(call, sid)
    assert r.status == 200 and b'"isError":false' in data, (r.status, data[:300])
lat = []
t0 = time.perf_counter()
for i in range(a.seq):
    call["id"] = 100 + i
    t = time.perf_counter()
    post(call, sid)
    lat.append((time.perf_counter() - t) * 1e3)
t1 = time.perf_counter()
lat.sort()
print(json.dumps({"seq_median_ms": round(statistics.median(lat), 3),
                  "seq_p95_ms": round(lat[int(len(lat) * 0.95)], 3),
                  "calls_per_s": round(a.seq / (t1 - t0))}))
