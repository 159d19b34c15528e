"""The official MCP Python SDK's OAuth client against `toolgate serve --http`
with `[auth]`: from nothing but the endpoint's URL it finds the authorization
server (the 401's `resource_metadata`, RFC 9728; the server's metadata, RFC
8414/OpenID), gets a token for this resource (RFC 8707) and opens a session.

Two grants:
* `--client ID --secret SECRET`: client credentials, for a client the
  authorization server knows (the SDK's `ClientCredentialsOAuthProvider`);
* `--sign-in`: the SDK's `OAuthClientProvider`, as an MCP client run by a
  person uses it: it registers itself (dynamic client registration, RFC
  7591), sends the user to the authorization endpoint (PKCE), and trades
  the code for a token. The "browser" here is an HTTP client that follows
  the authorization server's redirects (its interaction signs the user in
  and consents at once) until the one to the redirect URI, and hands the
  code back.

    oauth_client.py --http URL --issuer ISSUER (--client ID --secret SECRET | --sign-in)
                    [--scope SCOPE] [--mode legacy|auto] TOOL=ARGS_JSON...

Prints one JSON object: the tools listed, each call's result, and the URLs
the client requested (the discovery among them).
"""

import argparse
import json
import sys
from urllib.parse import parse_qs, urljoin, urlparse

import anyio
import httpx2 as httpx  # the SDK's HTTP client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata

# Never listened on: the "browser" stops at the redirect to it.
REDIRECT_URI = "http://127.0.0.1:9/callback"


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
    parser.add_argument("--client")
    parser.add_argument("--secret")
    parser.add_argument("--sign-in", action="store_true")
    parser.add_argument("--scope")
    parser.add_argument("--mode", default="legacy")
    parser.add_argument("calls", nargs="*")
    args = parser.parse_args()

    requested = []

    async def log(request):
        requested.append(f"{request.method} {request.url}")

    storage = Memory()
    if args.sign_in:
        landed = {}

        async def browse(url):
            # The user's browser: follow redirects (keeping cookies, as the
            # interaction needs) until the one back to the client.
            async with httpx.AsyncClient(follow_redirects=False) as browser:
                for _ in range(20):
                    requested.append(f"GET {url}")
                    r = await browser.get(url)
                    location = r.headers.get("location")
                    if location is None:
                        raise RuntimeError(f"the authorization server stopped at {url}: {r.status_code} {r.text[:500]}")
                    url = urljoin(url, location)
                    if url.startswith(REDIRECT_URI):
                        query = parse_qs(urlparse(url).query)
                        if "error" in query:
                            raise RuntimeError(f"authorization refused: {query}")
                        landed["code"] = query["code"][0]
                        landed["state"] = query.get("state", [None])[0]
                        landed["iss"] = query.get("iss", [None])[0]
                        return
                raise RuntimeError("too many redirects")

        async def callback():
            return AuthorizationCodeResult(code=landed["code"], state=landed["state"], iss=landed["iss"])

        provider = OAuthClientProvider(
            server_url=args.http,
            client_metadata=OAuthClientMetadata(
                client_name="toolgate sign-in test",
                redirect_uris=[REDIRECT_URI],
                grant_types=["authorization_code"],
                response_types=["code"],
                scope=args.scope,
            ),
            storage=storage,
            redirect_handler=browse,
            callback_handler=callback,
        )
    else:
        provider = ClientCredentialsOAuthProvider(
            server_url=args.http,
            storage=storage,
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
                "client_id": storage.client_info.client_id if storage.client_info else args.client,
            }
        )
    )
    sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main)
