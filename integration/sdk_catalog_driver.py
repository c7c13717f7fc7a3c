"""The official Python SDK on mcpsync's catalog: its matcher on RFC 6570 templates, its client reading
through them (integration/test_uri_templates.py), and what its models make of the listings
(integration/test_icons.py). Run with the peers venv's python; it imports `mcp`, never mcpsync.

    match FILE: reads [[template, uri], ...] as JSON from FILE and prints, for each pair, the
           values the SDK's own matcher (`mcp.shared.uri_template.UriTemplate`) finds, None for
           no match, or {"refused": reason} for a template it will not parse.
    read MODE FILE -- COMMAND...: starts COMMAND as a stdio server, connects the SDK's client in
           MODE ("legacy" or "auto"), reads each URI of the JSON list in FILE with
           `resources/read`, and prints [{"uri", "text"} or {"uri", "error": [code, message]}].
    list MODE -- COMMAND...: connects as `read` does, lists tools, prompts, resources and templates,
           and prints them and the server's info as the SDK's models parsed them (`model_dump`
           by alias: a field the SDK does not know, or rejects, is not there).
    sample MODE -- COMMAND...: connects as `read` does, declaring sampling with tools, calls the
           server's `plan` tool, and prints its text and what each sampling request offered (the
           tools' names, the toolChoice, the content types of each message), as the SDK parsed it;
           the SDK's model answers first with a `tool_use` of `lookup`, then with the text of the
           `tool_result` it is given (integration/test_sampling_tools.py).
    complete -- COMMAND...: connects in the handshake era, calls the server's `pay` tool, accepts
           the URL-mode elicitation it asks, and prints the elicitation's params and every
           `notifications/elicitation/complete` its message handler got before the call's answer
           (integration/test_elicitation_complete.py).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio


def match(path: str) -> None:
    from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

    results: list[Any] = []
    with open(path, encoding="utf-8") as given:
        pairs = json.load(given)
    for template, uri in pairs:
        try:
            parsed = UriTemplate.parse(template)
        except InvalidUriTemplate as exc:
            results.append({"refused": str(exc)})
            continue
        results.append(parsed.match(uri))
    print(json.dumps(results))


async def read(mode: str, command: list[str], uris: list[str]) -> None:
    from mcp import Client, MCPError, StdioServerParameters
    from mcp.client.stdio import stdio_client

    # the SDK passes only HOME, PATH and the like by default: the server needs ours (its venv)
    params = stdio_client(StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ)))
    results: list[dict[str, Any]] = []
    with anyio.fail_after(60):
        async with Client(params, mode=mode) as client:
            for uri in uris:
                try:
                    result = await client.read_resource(uri)
                except MCPError as exc:
                    results.append({"uri": uri, "error": [exc.error.code, exc.error.message]})
                    continue
                read = {"uri": uri, "text": result.contents[0].text}  # type: ignore[union-attr]
                if getattr(result, "ttl_ms", None) is not None:  # 2026-07-28's cache hints, as the SDK parsed them
                    read.update(ttlMs=result.ttl_ms, cacheScope=result.cache_scope)
                results.append(read)
    print(json.dumps(results))


async def listing(mode: str, command: list[str]) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = stdio_client(StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ)))
    with anyio.fail_after(60):
        async with Client(params, mode=mode) as client:
            dump = {
                "serverInfo": client.server_info.model_dump(by_alias=True, exclude_none=True) if client.server_info else None,
                "capabilities": client.server_capabilities.model_dump(by_alias=True, exclude_none=True),
                "tools": [tool.model_dump(by_alias=True, exclude_none=True) for tool in (await client.list_tools()).tools],
                "prompts": [prompt.model_dump(by_alias=True, exclude_none=True) for prompt in (await client.list_prompts()).prompts],
                "resources": [resource.model_dump(by_alias=True, exclude_none=True) for resource in (await client.list_resources()).resources],
                "templates": [
                    template.model_dump(by_alias=True, exclude_none=True) for template in (await client.list_resource_templates()).resource_templates
                ],
            }
    print(json.dumps(dump))


async def sample(mode: str, command: list[str]) -> None:
    import mcp_types as types
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    asked: list[dict[str, Any]] = []

    async def model(_context: Any, params: types.CreateMessageRequestParams) -> Any:
        asked.append({
            "tools": [tool.name for tool in params.tools or ()],
            "toolChoice": params.tool_choice.mode if params.tool_choice else None,
            "messages": [[block.type for block in (m.content if isinstance(m.content, list) else [m.content])] for m in params.messages],
        })
        last = params.messages[-1].content
        results = [block for block in (last if isinstance(last, list) else [last]) if block.type == "tool_result"]
        if not results:
            use = types.ToolUseContent(name="lookup", id="use-1", input={"city": "Lisbon"})
            return types.CreateMessageResultWithTools(role="assistant", content=[use], model="fake-model", stop_reason="toolUse")
        text = results[0].content[0].text  # type: ignore[union-attr]
        return types.CreateMessageResultWithTools(role="assistant", content=types.TextContent(text=f"the tool says {text}"), model="fake-model")

    params = stdio_client(StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ)))
    capability = types.SamplingCapability(tools=types.SamplingToolsCapability())
    with anyio.fail_after(60):
        async with Client(params, mode=mode, sampling_callback=model, sampling_capabilities=capability) as client:
            result = await client.call_tool("plan", {})
    print(json.dumps({"text": result.content[0].text, "isError": result.is_error, "asked": asked}))  # type: ignore[union-attr]


async def complete(command: list[str]) -> None:
    import mcp_types as types
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    seen: list[Any] = []

    async def elicitation(_context: Any, params: Any) -> Any:
        seen.append({"asked": params.model_dump(by_alias=True, exclude_none=True)})
        return types.ElicitResult(action="accept")

    async def messages(message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ElicitCompleteNotification):
            seen.append({"complete": root.params.elicitation_id})

    params = stdio_client(StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ)))
    with anyio.fail_after(60):
        async with Client(params, mode="legacy", elicitation_callback=elicitation, message_handler=messages) as client:
            result = await client.call_tool("pay", {})
            seen.append({"answered": result.content[0].text})  # type: ignore[union-attr]
    print(json.dumps(seen))


if __name__ == "__main__":
    if sys.argv[1] == "match":
        match(sys.argv[2])
    elif sys.argv[1] == "list":
        anyio.run(listing, sys.argv[2], sys.argv[sys.argv.index("--") + 1 :])
    elif sys.argv[1] == "complete":
        anyio.run(complete, sys.argv[sys.argv.index("--") + 1 :])
    elif sys.argv[1] == "sample":
        anyio.run(sample, sys.argv[2], sys.argv[sys.argv.index("--") + 1 :])
    else:
        with open(sys.argv[3], encoding="utf-8") as listed:
            uris = json.load(listed)
        anyio.run(read, sys.argv[2], sys.argv[sys.argv.index("--") + 1 :], uris)
