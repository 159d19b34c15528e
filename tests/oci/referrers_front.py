"""The OCI referrers API in front of a registry that lacks it.

Debian's docker-registry (distribution 2.8) has no referrers API
(`GET /v2/NAME/referrers/DIGEST`): clients fall back to the referrers tag
schema (an image index under the tag `sha256-HEX`). To exercise a client's
API branch against the real registry, this front forwards every request to
it unchanged, except:

* `GET /v2/NAME/referrers/DIGEST[?artifactType=T]` is answered as the OCI
  distribution specification (v1.1) says: 200 with an image index of the
  referrers — read from the registry's `sha256-HEX` tag, filtered by
  `artifactType` when asked (then with the header `OCI-Filters-Applied:
  artifactType`) — and an empty index when there are none;
* `GET`/`HEAD` of the tag `sha256-HEX` itself answers 404, so a client
  finds referrers through the API or not at all (writing the tag, as
  cosign's fallback does, still reaches the registry).

usage: referrers_front.py BACKEND_PORT LOG_FILE
Prints the port it listens on (127.0.0.1), then serves until killed. Each
referrers API request is appended to LOG_FILE as `referrers NAME DIGEST`.
"""

import http.client
import json
import re
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BACKEND = int(sys.argv[1])
LOG = sys.argv[2]
INDEX = "application/vnd.oci.image.index.v1+json"
REFERRERS = re.compile(r"^/v2/(.+)/referrers/(sha256:[0-9a-f]{64})$")
FALLBACK_TAG = re.compile(r"^/v2/(.+)/manifests/sha256-[0-9a-f]{64}$")
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


def backend(method, path, headers=(), body=None):
    """One request to the registry; `headers` a list of pairs (a header
    may repeat: clients send one `Accept` per manifest type)."""
    conn = http.client.HTTPConnection("127.0.0.1", BACKEND, timeout=30)
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for k, v in headers:
        conn.putheader(k, v)
    if body is not None:
        conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, r.getheaders(), data


class Front(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, headers, body):
        self.send_response(status)
        length = str(len(body))
        for k, v in headers:
            if k.lower() == "content-length":
                # A HEAD's is the body's it does not send.
                length = v if self.command == "HEAD" else length
            elif k.lower() not in HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = [
            (k, v) for k, v in self.headers.items() if k.lower() not in HOP | {"content-length"}
        ]
        status, got, data = backend(self.command, self.path, headers, body)
        self.send(status, got, data)

    def referrers(self, name, digest, query):
        with open(LOG, "a") as f:
            f.write(f"referrers {name} {digest}\n")
        tag = digest.replace(":", "-", 1)
        status, _, data = backend(
            "GET", f"/v2/{name}/manifests/{tag}", [("Host", f"127.0.0.1:{BACKEND}"), ("Accept", INDEX)]
        )
        manifests = json.loads(data).get("manifests", []) if status == 200 else []
        headers = [("Content-Type", INDEX)]
        wanted = urllib.parse.parse_qs(query).get("artifactType")
        if wanted:
            manifests = [m for m in manifests if m.get("artifactType") in wanted]
            headers.append(("OCI-Filters-Applied", "artifactType"))
        body = json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": manifests}).encode()
        self.send(200, headers, body)

    def do_GET(self):
        path, _, query = self.path.partition("?")
        m = REFERRERS.match(path)
        if m:
            return self.referrers(m.group(1), m.group(2), query)
        if FALLBACK_TAG.match(path):
            body = b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"hidden by the referrers front"}]}'
            return self.send(404, [("Content-Type", "application/json")], body)
        self.forward()

    do_HEAD = do_GET

    def do_PUT(self):
        self.forward()

    do_POST = do_PATCH = do_DELETE = do_PUT


server = ThreadingHTTPServer(("127.0.0.1", 0), Front)
print(server.server_address[1], flush=True)
server.serve_forever()
