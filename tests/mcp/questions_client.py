"""`ask_user_question` through `toolgate serve` (stdio, or streamable HTTP
with `--http URL --token T`), its question answered by the official MCP
Python SDK's elicitation callback.

    python questions_client.py --answer JSON|decline [--cwd DIR] [--env K=V]... --stdio CMD ARG...
    python questions_client.py --answer decline --http URL --token T
        [--mode auto] [--program]

Over HTTP with `--approve queue` the question is answered in the queue,
and the client must never be asked (the elicitations are printed).
`--mode auto` speaks the stateless revision (2026-07-28) where the server
offers it: the questions come as an `InputRequiredResult` and the SDK
calls again with the answer. `--program` asks through Code Mode's
`run_code`: a program asking two sets of questions (the second a
`Color` question), so that one call asks twice; each form is answered
with the `--answer` keys it has.

Approval elicitations (an empty form) are accepted; the question's form
is answered with the `--answer` content (or declined). Prints one JSON
object: the call's result and every elicitation seen. Nothing is asserted
here: the Rust test decides (tests/tests/all/serve.rs).
"""

import argparse
import json

import anyio
import httpx2 as httpx  # the SDK's HTTP client
import mcp.client.session
import mcp_types as types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

mcp.client.session.DISCOVER_TIMEOUT_SECONDS = 60.0

QUESTIONS = {
    "questions": [
        {
            "header": "Stack",
            "question": "Which language?",
            "options": [
                {"label": "Rust", "description": "compiled, safe"},
                {"label": "Python", "description": "quick to write"},
            ],
        },
        {
            "header": "Extras",
            "question": "Which extras?",
            "multiSelect": True,
            "options": [
                {"label": "CI", "description": "a workflow"},
                {"label": "Docs", "description": "a README"},
            ],
        },
    ]
}

SECOND = {
    "questions": [
        {
            "header": "Color",
            "question": "Which color?",
            "options": [
                {"label": "Red", "description": ""},
                {"label": "Blue", "description": ""},
            ],
        }
    ]
}

PROGRAM = (
    "const a = await tools.ask_user_question(%s);\n"
    "const b = await tools.ask_user_question(%s);\n"
    "return [a, b].map(x => x.answers.map(y => y.selected.concat(y.other ? [y.other] : []).join('+')));"
    % (json.dumps(QUESTIONS), json.dumps(SECOND))
)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answer", required=True)
    parser.add_argument("--cwd")
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--http")
    parser.add_argument("--token")
    parser.add_argument("--mode", default="legacy")
    parser.add_argument("--program", action="store_true")
    parser.add_argument("--stdio", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    seen = []

    async def elicit(context, params):
        form = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        seen.append(form)
        if not form.get("requestedSchema", {}).get("properties"):
            return types.ElicitResult(action="accept", content={})
        if args.answer == "decline":
            return types.ElicitResult(action="decline")
        props = form["requestedSchema"]["properties"]
        answer = {k: v for k, v in json.loads(args.answer).items() if k in props}
        return types.ElicitResult(action="accept", content=answer)

    if args.http:
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {args.token}"})
        server = streamable_http_client(args.http, http_client=http)
    else:
        env = dict(item.split("=", 1) for item in args.env)
        server = StdioServerParameters(command=args.stdio[0], args=args.stdio[1:], cwd=args.cwd, env=env)
    async with Client(server, mode=args.mode, elicitation_callback=elicit, read_timeout_seconds=120) as client:
        if args.program:
            result = await client.call_tool("run_code", {"code": PROGRAM})
        else:
            result = await client.call_tool("ask_user_question", QUESTIONS)
        print(
            json.dumps(
                {
                    "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
                    "elicitations": seen,
                }
            )
        )


anyio.run(main)
