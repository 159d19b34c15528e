"""The MCP server the official conformance suite expects, bridged by
`toolgate serve` in the conformance test (tests/tests/all/conformance.rs),
on the official Python SDK (PyPI `mcp`, the low-level server), over stdio.

The suite's server scenarios call tools, read resources and get prompts by
fixed names (`test_error_handling`, `json_schema_2020_12_tool`,
`test://static-text`, `test_simple_prompt`, …): this server lists exactly
those, so that what the suite checks is what toolgate passes through — the
listing as given (`$schema`, `$defs`, `additionalProperties`), content
blocks, errors, resources and prompts. toolgate bridges it with
`namespace = false`, so the names reach the suite unchanged.

With `--appear-on FILE` (the list-change test, `tests/tests/all/passthrough.rs`)
it lists one more tool, `appeared`, once FILE exists, and says so with
`notifications/tools/list_changed`.

With `--hostile` (the bounds test) it misbehaves instead: `resources/list`
pages without end, `test://huge` is 9 MiB of text, `test://slow` never
answers, and every prompt has 2000 messages.

    python conformance_server.py [--appear-on FILE] [--hostile]
"""

import argparse
import base64
import os
import warnings

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

# A 1x1 PNG and a tiny WAV header: real bytes, base64.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201e2b2"
        "6c3c0000000049454e44ae426082"
    )
).decode()
WAV = base64.b64encode(
    b"RIFF" + (36).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
    + (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + (8000).to_bytes(4, "little")
    + (8000).to_bytes(4, "little") + (1).to_bytes(2, "little") + (8).to_bytes(2, "little")
    + b"data" + (0).to_bytes(4, "little")
).decode()

EMPTY = {"type": "object", "properties": {}}
SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


def tool(name, description, schema=EMPTY):
    return types.Tool(name=name, description=description, input_schema=schema)


TOOLS = [
    tool("test_simple_text", "Returns simple text content"),
    tool("test_image_content", "Returns image content"),
    tool("test_audio_content", "Returns audio content"),
    tool("test_embedded_resource", "Returns an embedded resource"),
    tool("test_multiple_content_types", "Returns text, image and resource content"),
    tool("test_error_handling", "Always returns an error"),
    tool("test_reconnection", "Answers after a moment"),
    tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", SCHEMA_2020_12),
]


def text(s):
    return types.TextContent(type="text", text=s)


def image():
    return types.ImageContent(type="image", data=PNG, mime_type="image/png")


def embedded(uri="test://embedded-resource"):
    return types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(uri=uri, mime_type="text/plain", text="embedded"),
    )


RESOURCES = [
    types.Resource(uri="test://static-text", name="static-text", mime_type="text/plain",
                   description="A static text resource"),
    types.Resource(uri="test://static-binary", name="static-binary", mime_type="image/png",
                   description="A static binary resource"),
    types.Resource(uri="test://watched-resource", name="watched-resource", mime_type="text/plain",
                   description="A resource to subscribe to"),
]
TEMPLATES = [
    types.ResourceTemplate(uri_template="test://template/{id}/data", name="template",
                           mime_type="application/json", description="Data by id"),
]
PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A prompt without arguments"),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with two arguments",
        arguments=[types.PromptArgument(name="arg1", required=True),
                   types.PromptArgument(name="arg2", required=True)],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt embedding a resource",
        arguments=[types.PromptArgument(name="resourceUri", required=True)],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt with an image"),
]


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser()
    parser.add_argument("--appear-on")
    parser.add_argument("--hostile", action="store_true")
    args = parser.parse_args()
    tools = list(TOOLS)
    sessions = []

    async def list_tools(ctx, params):
        if not sessions:
            sessions.append(ctx.session)
        return types.ListToolsResult(tools=tools)

    async def appear_on(path):
        while not os.path.exists(path):
            await anyio.sleep(0.05)
        tools.append(tool("appeared", "Listed once the trigger file exists"))
        while not sessions:
            await anyio.sleep(0.05)
        await sessions[0].send_tool_list_changed()

    async def call_tool(ctx, params):
        name = params.name
        if name == "test_simple_text":
            return types.CallToolResult(content=[text("This is a simple text response for testing.")])
        if name == "test_image_content":
            return types.CallToolResult(content=[image()])
        if name == "test_audio_content":
            return types.CallToolResult(
                content=[types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")]
            )
        if name == "test_embedded_resource":
            return types.CallToolResult(content=[embedded()])
        if name == "test_multiple_content_types":
            return types.CallToolResult(content=[text("Multiple content types"), image(), embedded()])
        if name == "test_error_handling":
            return types.CallToolResult(
                content=[text("This tool intentionally returns an error for testing")], is_error=True
            )
        if name == "test_reconnection":
            await anyio.sleep(0.1)
            return types.CallToolResult(content=[text("Reconnection test completed successfully")])
        if name == "json_schema_2020_12_tool":
            return types.CallToolResult(content=[text(f"got {params.arguments}")])
        raise ValueError(f"unknown tool {name}")

    async def list_resources(ctx, params):
        if args.hostile:
            cursor = getattr(params, "cursor", None) if params is not None else None
            n = int(cursor) if cursor else 0
            return types.ListResourcesResult(resources=RESOURCES, next_cursor=str(n + 1))
        return types.ListResourcesResult(resources=RESOURCES)

    async def list_templates(ctx, params):
        return types.ListResourceTemplatesResult(resource_templates=TEMPLATES)

    async def read_resource(ctx, params):
        uri = str(params.uri)
        if args.hostile and uri == "test://huge":
            return types.ReadResourceResult(
                contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text="x" * (9 << 20))]
            )
        if args.hostile and uri == "test://slow":
            await anyio.sleep(3600)
        if uri in ("test://static-text", "test://watched-resource"):
            contents = types.TextResourceContents(
                uri=uri, mime_type="text/plain", text="This is the content of the static text resource."
            )
        elif uri == "test://static-binary":
            contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)
        elif uri.startswith("test://template/") and uri.endswith("/data"):
            id_ = uri[len("test://template/"):-len("/data")]
            contents = types.TextResourceContents(
                uri=uri, mime_type="application/json", text=f'{{"id": "{id_}", "data": "for {id_}"}}'
            )
        else:
            raise ValueError(f"no resource {uri}")
        return types.ReadResourceResult(contents=[contents])

    async def list_prompts(ctx, params):
        return types.ListPromptsResult(prompts=PROMPTS)

    async def get_prompt(ctx, params):
        a = params.arguments or {}

        def user(content):
            return types.PromptMessage(role="user", content=content)

        if args.hostile:
            return types.GetPromptResult(messages=[user(text("again")) for _ in range(2000)])

        if params.name == "test_simple_prompt":
            return types.GetPromptResult(messages=[user(text("This is a simple prompt for testing."))])
        if params.name == "test_prompt_with_arguments":
            return types.GetPromptResult(
                messages=[user(text(f"Prompt with arguments: arg1='{a.get('arg1')}', arg2='{a.get('arg2')}'"))]
            )
        if params.name == "test_prompt_with_embedded_resource":
            return types.GetPromptResult(
                messages=[user(embedded(a.get("resourceUri", "test://example-resource"))),
                          user(text("Please process the embedded resource above."))]
            )
        if params.name == "test_prompt_with_image":
            return types.GetPromptResult(
                messages=[user(image()), user(text("Please analyze the image above."))]
            )
        raise ValueError(f"unknown prompt {params.name}")

    server = Server(
        "conformance",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )

    async def run():
        async with stdio_server() as (read, write):
            async with anyio.create_task_group() as tg:
                if args.appear_on:
                    tg.start_soon(appear_on, args.appear_on)
                await server.run(read, write, server.create_initialization_options())
                tg.cancel_scope.cancel()

    anyio.run(run)


if __name__ == "__main__":
    main()
