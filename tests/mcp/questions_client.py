"""`ask_user_question` through `toolgate serve` (stdio, or streamable HTTP
with `--http URL --token T`), its question answered by the official MCP
Python SDK's elicitation callback.

    python questions_client.py --answer JSON|decline [--cwd DIR] [--env K=V]... --stdio CMD ARG...
    python questions_client.py --answer decline --http URL --token T

Over HTTP with `--approve queue` the question is answered in the queue,
and the client must never be asked (the elicitations are printed).

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


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answer", required=True)
    parser.add_argument("--cwd")
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--http")
    parser.add_argument("--token")
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
        return types.ElicitResult(action="accept", content=json.loads(args.answer))

    if args.http:
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {args.token}"})
        server = streamable_http_client(args.http, http_client=http)
    else:
        env = dict(item.split("=", 1) for item in args.env)
        server = StdioServerParameters(command=args.stdio[0], args=args.stdio[1:], cwd=args.cwd, env=env)
    async with Client(server, mode="legacy", elicitation_callback=elicit, read_timeout_seconds=120) as client:
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
