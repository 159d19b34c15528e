# A language server for the tests, as hostile as one can be, by mode
# (its first argument; the second is a TCP port for `probe`):
#   probe   tries, from inside its sandbox, to write the project, read the
#           host's configuration, reach the network (the port) and have the
#           host apply an edit, and answers a hover with what happened;
#   silent  never answers a hover;   crash  dies with last words on one;
#   opencrash  dies as soon as a document is opened;
#   huge    claims a 1 TiB message;  flood  answers 20 MiB;
#   echo    answers a hover with its pid;
#   hover   answers a hover with the position it was asked about;
#   count   answers a hover with how many documents it holds open;
#   any other mode answers `initialize`, and every other request with null.
# Used by tests/tests/all/lsp.rs, cli/tests/cli.rs and cli/tests/lifetime.rs.
import json, os, socket, sys
def read():
    length = None
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            sys.exit(0)
        line = line.strip()
        if not line:
            break
        k, v = line.split(b":", 1)
        if k.strip().lower() == b"content-length":
            length = int(v)
    return json.loads(sys.stdin.buffer.read(length))
def send(m, length=None):
    body = json.dumps(m).encode()
    n = len(body) if length is None else length
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % n + body)
    sys.stdout.buffer.flush()
def attempt(f):
    try:
        f()
        return "done"
    except Exception as e:
        return "denied: " + type(e).__name__
mode = sys.argv[1]
opened = set()
while True:
    m = read()
    method = m.get("method")
    if method == "textDocument/didOpen":
        if mode == "opencrash":
            sys.stderr.write("boom: opening it was too much\n")
            sys.stderr.flush()
            os._exit(4)
        opened.add(m["params"]["textDocument"]["uri"])
    elif method == "textDocument/didClose":
        opened.discard(m["params"]["textDocument"]["uri"])
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"capabilities": {"hoverProvider": True}}})
    elif method == "textDocument/hover":
        if mode == "silent":
            continue
        if mode == "hover":
            p = m["params"]["position"]
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"contents": {"kind": "plaintext", "value": "hover from the fake server at %d:%d" % (p["line"], p["character"])}}})
            continue
        if mode == "count":
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"contents": "open %d" % len(opened)}})
            continue
        if mode == "echo":
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"contents": "pid %d" % os.getpid()}})
            continue
        if mode == "crash":
            sys.stderr.write("boom: the server fell over\n")
            sys.stderr.flush()
            os._exit(3)
        if mode == "huge":
            send({"jsonrpc": "2.0", "id": m["id"], "result": None}, length=1 << 40)
            continue
        if mode == "flood":
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"contents": "x" * (20 << 20)}})
            continue
        root = os.getcwd()
        report = {
            "write_project": attempt(lambda: open(os.path.join(root, "pwned.txt"), "w").write("x")),
            "read_config": attempt(lambda: open(os.path.join(root, "toolgate.toml")).read()),
            "write_cache": attempt(lambda: open(os.path.join(os.environ["HOME"], "c.txt"), "w").write("x")),
            "network": attempt(lambda: socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=2)),
        }
        send({"jsonrpc": "2.0", "id": "edit-1", "method": "workspace/applyEdit",
              "params": {"edit": {"changes": {}}}})
        while True:
            reply = read()
            if reply.get("id") == "edit-1" and "method" not in reply:
                break
        report["apply_edit"] = reply.get("result")
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"contents": json.dumps(report)}})
    elif "id" in m and method:
        send({"jsonrpc": "2.0", "id": m["id"], "result": None})
