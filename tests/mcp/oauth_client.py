"""The official MCP Python SDK's OAuth client (the client-credentials
grant) against `toolgate serve --http` with `[auth]`: from nothing but the
endpoint's URL it finds the authorization server (the 401's
`resource_metadata`, RFC 9728; the server's metadata, RFC 8414/OpenID),
gets a token for this resource (RFC 8707) and opens a session.

    oauth_client.py --http URL --issuer ISSUER --client ID --secret SECRET
                    [--scope SCOPE] [--mode legacy|auto] TOOL=ARGS_JSON...

Prints one JSON object: the tools listed, each call's result, and the URLs
the client requested (the discovery among them).
"""

import argparse
import json
import sys

import anyio
import httpx2 as httpx  # the SDK's HTTP client
from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client


class Memory(TokenStorage):
    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", required=True)
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--scope")
    parser.add_argument("--mode", default="legacy")
    parser.add_argument("calls", nargs="*")
    args = parser.parse_args()

    requested = []

    async def log(request):
        requested.append(f"{request.method} {request.url}")

    provider = ClientCredentialsOAuthProvider(
        server_url=args.http,
        storage=Memory(),
        client_id=args.client,
        client_secret=args.secret,
        scope=args.scope,
        issuer=args.issuer,
    )
    http = httpx.AsyncClient(auth=provider, event_hooks={"request": [log]})
    results = []
    async with Client(
        streamable_http_client(args.http, http_client=http),
        mode=args.mode,
        read_timeout_seconds=60,
    ) as client:
        tools = await client.list_tools()
        for call in args.calls:
            name, _, arguments = call.partition("=")
            r = await client.call_tool(name, json.loads(arguments or "{}"))
            results.append(r.model_dump(mode="json", by_alias=True, exclude_none=True))
    print(
        json.dumps(
            {
                "tools": sorted(t.name for t in tools.tools),
                "results": results,
                "requested": requested,
            }
        )
    )
    sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main)
