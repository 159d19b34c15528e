"""MCP clients (the official Python SDK, PyPI `mcp`) against `toolgate serve
--http` replicas behind HAProxy, for tests/tests/all/replicas_sdk.rs.
Prints one JSON object on stdout; nothing is asserted here: the test
decides.

    python replicas_client.py --http URL --token TOKEN stateless \
        --calls N --concurrency C --tag TAG [--tool echo]
    python replicas_client.py --http URL --token TOKEN sessions \
        --clients N --calls M --tag TAG

* `stateless`: one client in the SDK's default mode (`auto`: it discovers
  the 2026-07-28 revision and speaks it, with no session), N `echo`
  calls, C at a time; each call's text is `TAG-i`, so each answer says
  which call it answers. Reported: the protocol, how many answers came
  for each call (`answered`, `twice`), the answers that were not their
  call's text (`wrong`), the errors (`errors`, the first few in full).
* `sessions`: N clients at once in `legacy` mode (2025-era: `initialize`,
  then every request carries its `Mcp-Session-Id`), each making M `echo`
  calls one after another. Reported per client: its protocol, the calls
  answered with their own text, and the first error (its type and
  message) — a client that cannot go on stops at it.
"""

import argparse
import json
import sys
import time

import anyio
import httpx2 as httpx  # the SDK's HTTP client
import mcp.client.session
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

# `auto` falls back to the 2025 handshake when `server/discover` is not
# answered within the SDK's 10 s; what is negotiated is checked here, not
# how fast a server answers on loaded cores: wait as long as for any answer.
mcp.client.session.DISCOVER_TIMEOUT_SECONDS = 60.0


def text_of(result):
    if getattr(result, "isError", False) or getattr(result, "is_error", False):
        return None
    for block in result.content:
        if getattr(block, "type", None) == "text":
            return block.text
    return None


def connect(args, mode):
    http = httpx.AsyncClient(
        headers={"Authorization": f"Bearer {args.token}"},
        timeout=httpx.Timeout(30, read=60),
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
    )
    return Client(
        streamable_http_client(args.http, http_client=http),
        mode=mode,
        read_timeout_seconds=60,
    )


def describe(e):
    inner = getattr(e, "exceptions", None)
    if inner:
        return describe(inner[0])
    error = getattr(e, "error", None)
    code = getattr(error, "code", None)
    return {"type": type(e).__name__, "code": code, "message": str(e)[:500]}


async def stateless(args):
    out = {"protocol": None, "calls": args.calls, "errors": 0, "firstErrors": []}
    answered = [0] * args.calls
    wrong = []
    next_call = iter(range(args.calls))
    started = time.monotonic()
    async with connect(args, "auto") as client:
        out["protocol"] = client.protocol_version

        async def worker():
            for i in next_call:
                try:
                    r = await client.call_tool(args.tool, {"text": f"{args.tag}-{i}"})
                except Exception as e:  # noqa: BLE001 - reported, the test decides
                    out["errors"] += 1
                    if len(out["firstErrors"]) < 5:
                        out["firstErrors"].append({"call": i, **describe(e)})
                    continue
                answered[i] += 1
                t = text_of(r)
                if t != f"{args.tag}-{i}" and len(wrong) < 5:
                    wrong.append({"call": i, "got": t, "result": r.model_dump(mode="json", by_alias=True)})

        async with anyio.create_task_group() as tg:
            for _ in range(args.concurrency):
                tg.start_soon(worker)
    out["seconds"] = round(time.monotonic() - started, 3)
    out["answered"] = sum(1 for n in answered if n == 1)
    out["unanswered"] = sum(1 for n in answered if n == 0)
    out["twice"] = sum(1 for n in answered if n > 1)
    out["wrong"] = wrong
    return out


async def sessions(args):
    clients = [None] * args.clients

    async def one(k):
        report = {"protocol": None, "ok": 0, "error": None}
        clients[k] = report
        try:
            async with connect(args, "legacy") as client:
                report["protocol"] = client.protocol_version
                for i in range(args.calls):
                    text = f"{args.tag}-{k}-{i}"
                    started = time.monotonic()
                    try:
                        r = await client.call_tool("echo", {"text": text})
                    except Exception as e:  # noqa: BLE001
                        report["error"] = {
                            "call": i,
                            "seconds": round(time.monotonic() - started, 3),
                            **describe(e),
                        }
                        return
                    if text_of(r) == text:
                        report["ok"] += 1
                    else:
                        report["error"] = {"call": i, "type": "wrong", "message": str(text_of(r))}
                        return
        except Exception as e:  # noqa: BLE001 - the session could not start or end
            if report["error"] is None:
                report["error"] = {"call": None, **describe(e)}

    async with anyio.create_task_group() as tg:
        for k in range(args.clients):
            tg.start_soon(one, k)
    return {"clients": clients}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True)
    parser.add_argument("--token", required=True)
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("stateless")
    s.add_argument("--calls", type=int, required=True)
    s.add_argument("--concurrency", type=int, default=16)
    s.add_argument("--tag", default="call")
    s.add_argument("--tool", default="echo")
    c = sub.add_parser("sessions")
    c.add_argument("--clients", type=int, required=True)
    c.add_argument("--calls", type=int, required=True)
    c.add_argument("--tag", default="s")
    args = parser.parse_args()
    out = await (stateless(args) if args.what == "stateless" else sessions(args))
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    anyio.run(main)
