"""A small MCP server (stdio, standard library only) for the egress tests:
its one tool, `fetch`, gets `{url}` (plain `http://HOST:PORT/PATH`)
through the proxy `HTTP_PROXY` names, with a `CONNECT` tunnel — what a
bridged server under the sandbox has for a network — and answers the
body, or `ERROR: …` with what the proxy said (an error result).

    python3 egress_server.py
"""

import http.client
import json
import os
import sys
import urllib.parse

TOOL = {
    "name": "fetch",
    "description": "GET a URL through HTTP_PROXY (a CONNECT tunnel)",
    "inputSchema": {
        "type": "object",
        "properties": {"url": {"type": "string"}},
        "required": ["url"],
    },
}


def fetch(url):
    proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
    target = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=120)
    # CONNECT: the proxy answers it once egress decided (after an
    # approval, if one is asked); a refusal is its status line.
    conn.set_tunnel(target.hostname, target.port or 80)
    conn.request("GET", target.path or "/", headers={"Connection": "close"})
    return conn.getresponse().read().decode()


def answer(msg_id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}) + "\n")
    sys.stdout.flush()


def main():
    for line in sys.stdin:
        msg = json.loads(line)
        method, msg_id = msg.get("method"), msg.get("id")
        if msg_id is None:
            continue  # a notification
        if method == "initialize":
            answer(msg_id, {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "egress-server", "version": "1"},
            })
        elif method == "tools/list":
            answer(msg_id, {"tools": [TOOL]})
        elif method == "tools/call":
            try:
                text, error = fetch(msg["params"]["arguments"]["url"]), False
            except Exception as e:  # noqa: BLE001 - the message is the result
                text, error = f"ERROR: {e}", True
            answer(msg_id, {"content": [{"type": "text", "text": text}], "isError": error})
        else:
            answer(msg_id, {})


if __name__ == "__main__":
    main()
