"""A 2026-07-28 MCP client (the official Python SDK's default mode, over
streamable HTTP) against `toolgate serve --http --approve queue`: its
`bash` calls get an `InputRequiredResult` whose `requestState` names the
pending approval, and it calls again with that state until the call
completes. The approval tests (tests/tests/all/approvals.rs) decide the
entries meanwhile, restart the server, and check what is printed (one JSON
object on stdout). Nothing is asserted here: the test decides.

    python approvals_stateless.py --http URL --token TOKEN [--rounds N] \
        [--first-only] [--state STATE] [--probe] [--auto CMD] [--code JS]... [CMD...]

* each CMD: driven by hand (`session.call_tool(..., allow_input_required=True)`),
  every round recorded: the result type, the request state;
* `--auto CMD`: one call through `Client.call_tool`, which retries by
  itself (the SDK's own driver, as an agent would use it);
* `--first-only`: stop after the first answer of each CMD (print its state);
* `--state STATE`: start each CMD's loop from that state (a client that
  reconnected to a restarted server);
* `--probe`: after a CMD completed, send its last state again with other
  arguments, then with the same ones (both must be refused);
* `--code JS` (repeatable): a Code Mode program, `run_code {code: JS}`
  through `Client.call_tool`, one after the other (`programs`: each
  result and how long it took).
"""

import argparse
import json
import sys
import time

import anyio
import httpx2 as httpx  # the SDK's HTTP client
import mcp_types as types
import mcp.client.session
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

# `auto` falls back to the 2025 handshake when `server/discover` is not
# answered within the SDK's 10 s; what is negotiated is checked here, not
# how fast a server answers on loaded cores: wait as long as for any answer.
mcp.client.session.DISCOVER_TIMEOUT_SECONDS = 60.0


def dump(result):
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--first-only", action="store_true")
    parser.add_argument("--state")
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--auto")
    parser.add_argument("--code", action="append", default=[])
    parser.add_argument("commands", nargs="*")
    args = parser.parse_args()
    questions = []

    async def elicit(context, params):
        questions.append(params.message)
        return types.ElicitResult(action="decline")

    out = {"calls": [None] * len(args.commands), "auto": None, "questions": questions,
           "programs": []}

    def connect():
        http = httpx.AsyncClient(
            headers={"Authorization": f"Bearer {args.token}"},
            timeout=httpx.Timeout(30, read=120),
        )
        return Client(
            streamable_http_client(args.http, http_client=http),
            elicitation_callback=elicit,
            read_timeout_seconds=120,
            input_required_max_rounds=args.rounds,
        )

    async def by_hand(client, i, command):
        rounds = []
        state = args.state
        arguments = {"command": command}
        for _ in range(args.rounds):
            started = time.time()
            r = await client.session.call_tool(
                "bash", arguments, request_state=state, allow_input_required=True
            )
            took = time.time() - started
            if isinstance(r, types.InputRequiredResult):
                rounds.append({"type": "input_required", "state": r.request_state,
                               "inputRequests": bool(r.input_requests), "seconds": took})
                state = r.request_state
                if args.first_only:
                    break
                await anyio.sleep(0.05)
                continue
            rounds.append({"type": "result", "result": dump(r), "seconds": took})
            break
        call = {"rounds": rounds}
        if args.probe and state is not None:
            other = await client.session.call_tool(
                "bash", {"command": command + " && echo smuggled"}, request_state=state,
                allow_input_required=True,
            )
            again = await client.session.call_tool(
                "bash", arguments, request_state=state, allow_input_required=True
            )
            call["otherArguments"] = dump(other)
            call["again"] = dump(again)
        out["calls"][i] = call

    async with connect() as client:
        out["protocol"] = client.protocol_version
        await client.list_tools()
        for code in args.code:
            started = time.time()
            r = await client.call_tool("run_code", {"code": code})
            out["programs"].append({"result": dump(r), "seconds": time.time() - started})
        async with anyio.create_task_group() as tg:
            for i, command in enumerate(args.commands):
                tg.start_soon(by_hand, client, i, command)
            if args.auto:
                async def auto():
                    r = await client.call_tool("bash", {"command": args.auto})
                    out["auto"] = dump(r)
                tg.start_soon(auto)

    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main)
