"""A 2026-07-28 client of the MCP Tasks extension (`io.modelcontextprotocol/tasks`,
the extension's 2026-07-28 revision), in raw JSON-RPC over streamable HTTP:
the MCP Python SDK (2.3.0) does not speak the extension, so the requests are
written here by hand, with the headers and `_meta` fields that SDK sends on
this revision. Against `toolgate serve --http --approve queue`, its `bash`
calls that meet a queued `ask` get a task; it polls `tasks/get` until the
task ends. The approval tests (tests/tests/all/approvals.rs) decide the
entries meanwhile and check what is printed (one JSON object on stdout).
Nothing is asserted here: the test decides.

    python approvals_tasks.py --http URL --token TOKEN [--cancel] \
        [--poll-seconds S] [--probe] CMD...

* each CMD: one `tools/call` of `bash` declaring the extension; its answer
  (`created`), then `tasks/get` every 100 ms until a terminal status (or S
  seconds): every status seen in order (`statuses`), the last answer
  (`final`);
* `--cancel`: `tasks/cancel` each task once it was created (its answer:
  `cancel`), then poll as above;
* `--probe`: what the server says to a `tasks/update` that accepts the
  approval (right after the first task was created), to `tasks/get` of an unknown id, to
  `tasks/get` without declaring the extension, to `tasks/cancel` of an
  unknown id, to `tasks/update` of a real task, and to a call of the same
  kind that does not declare the extension, and to the first call again
  with the request state of its (approved, run) entry (`probes`).
"""

import argparse
import json
import re
import sys
import time

import httpx2 as httpx  # the MCP Python SDK's HTTP client

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"


class Raw:
    def __init__(self, url, token):
        self.url = url
        self.http = httpx.Client(
            headers={"Authorization": f"Bearer {token}"}, timeout=httpx.Timeout(30, read=60)
        )
        self.id = 0

    def request(self, method, params, tasks=True, name=None):
        self.id += 1
        capabilities = {"extensions": {TASKS: {}}} if tasks else {}
        params = dict(params)
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientInfo": {"name": "tasks-raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        }
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
        }
        if name is not None:
            headers["Mcp-Name"] = name
        body = {"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}
        r = self.http.post(self.url, content=json.dumps(body), headers=headers)
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            # The answer is the SSE event whose data carries our id.
            for line in r.text.splitlines():
                if line.startswith("data:"):
                    try:
                        message = json.loads(line[5:].strip())
                    except ValueError:
                        continue
                    if message.get("id") == self.id:
                        return message
            return {"http": r.status_code, "text": r.text}
        try:
            return r.json()
        except ValueError:
            return {"http": r.status_code, "text": r.text}

    def call(self, command, tasks=True):
        return self.request(
            "tools/call", {"name": "bash", "arguments": {"command": command}}, tasks, "bash"
        )

    def task(self, method, task_id, tasks=True, **extra):
        return self.request(method, {"taskId": task_id, **extra}, tasks, task_id)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--cancel", action="store_true")
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--poll-seconds", type=float, default=60)
    parser.add_argument("commands", nargs="*")
    args = parser.parse_args()
    raw = Raw(args.http, args.token)
    out = {"calls": [], "probes": {}}
    for command in args.commands:
        created = raw.call(command)
        call = {"command": command, "created": created, "statuses": [], "final": None}
        out["calls"].append(call)
        print(json.dumps({"created": created}), file=sys.stderr, flush=True)
    for call in out["calls"]:
        result = call["created"].get("result", {})
        if result.get("resultType") != "task":
            continue
        task_id = result["taskId"]
        if args.cancel:
            call["cancel"] = raw.task("tasks/cancel", task_id)
        if args.probe and "selfApprove" not in out["probes"]:
            # A client answering its own approval: nothing was asked of it.
            out["probes"]["selfApprove"] = raw.task(
                "tasks/update", task_id,
                inputResponses={"toolgate/approval": {"action": "accept", "content": {}}},
            )
    deadline = time.time() + args.poll_seconds
    live = [c for c in out["calls"] if c["created"].get("result", {}).get("resultType") == "task"]
    while live and time.time() < deadline:
        for call in list(live):
            got = raw.task("tasks/get", call["created"]["result"]["taskId"])
            call["final"] = got
            status = got.get("result", {}).get("status")
            if not call["statuses"] or call["statuses"][-1] != status:
                call["statuses"].append(status)
            if status in ("completed", "failed", "cancelled") or status is None:
                live.remove(call)
        time.sleep(0.1)
    if args.probe:
        real = next(
            (c["created"]["result"]["taskId"] for c in out["calls"]
             if c["created"].get("result", {}).get("resultType") == "task"),
            "t-none",
        )
        out["probes"] |= {
            "unknown": raw.task("tasks/get", "t-00000000000000000000000000000000"),
            "undeclared": raw.task("tasks/get", real, tasks=False),
            "cancelUnknown": raw.task("tasks/cancel", "t-nope"),
            "update": raw.task("tasks/update", real, inputResponses={}),
            "getAgain": raw.task("tasks/get", real),
            "withoutTasks": raw.call("echo without tasks", tasks=False),
        }
        # The approved entry's id (from the task's message), replayed as a
        # retry of the same call: an approval runs its call once.
        first = out["calls"][0]
        message = (first["final"] or {}).get("result", {}).get("statusMessage", "")
        entry = re.search(r"a-[0-9a-f]{12}", message)
        if entry:
            out["probes"]["replay"] = raw.request(
                "tools/call",
                {"name": "bash", "arguments": {"command": first["command"]},
                 "requestState": f"toolgate-approval:{entry.group(0)}"},
                True, "bash",
            )
    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
