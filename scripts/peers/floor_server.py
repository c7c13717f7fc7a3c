#!/usr/bin/env python3
"""The floor: the fastest honest stdio MCP server a Python process can be, for scripts/bench.

    python scripts/peers/floor_server.py

Why it exists: mcpsync's benchmarks compare it with this loop, measured in the same run, to show how
much of a request's cost is Python's own (a process reading, parsing, encoding and writing a line)
and how much is mcpsync's. Nothing here is faster than what a real server could do, and nothing a
real server must do is skipped: every message is read with readline, parsed with json.loads,
answered with a result built for it, encoded with json.dumps, written and flushed, one at a time.
No threads, no batching, no answers cached as bytes.

Both protocol eras on one connection, told apart per request as mcpsync does: a request whose
params._meta carries io.modelcontextprotocol/protocolVersion is a 2026-07-28 request (its result
gets resultType, the cache fields where the schema requires them and the serverInfo stamp; another
version is -32022), any other request is handshake era.

Methods: initialize, server/discover, ping, tools/list and tools/call of its one tool, echo(text).
Notifications are read and ignored. Anything else is -32601. It exits at the end of its stdin.
"""

from __future__ import annotations

import json
import sys
from typing import Any, BinaryIO

MODERN_VERSION = "2026-07-28"
HANDSHAKE_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SERVER_INFO = {"name": "mcpsync-floor", "version": "1"}
ECHO = {
    "name": "echo",
    "description": "Return the given text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}
CACHEABLE = frozenset({"server/discover", "tools/list"})


class RpcError(Exception):
    """A JSON-RPC error answer: the code, the message and optional data."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def initialize(params: dict[str, Any]) -> dict[str, Any]:
    requested = params.get("protocolVersion")
    version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[0]
    return {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": SERVER_INFO}


def discover(params: dict[str, Any]) -> dict[str, Any]:
    return {"supportedVersions": [MODERN_VERSION], "capabilities": {"tools": {}}}


def ping(params: dict[str, Any]) -> dict[str, Any]:
    return {}


def list_tools(params: dict[str, Any]) -> dict[str, Any]:
    return {"tools": [ECHO]}


def call_tool(params: dict[str, Any]) -> dict[str, Any]:
    """echo(text): a bad argument is a tool error, an unknown tool a protocol error (-32602)."""
    if params.get("name") != "echo":
        raise RpcError(-32602, f"Unknown tool: {params.get('name')!r}")
    arguments = params.get("arguments")
    text = arguments.get("text") if isinstance(arguments, dict) else None
    if not isinstance(text, str):
        return {"content": [{"type": "text", "text": "echo needs a string argument 'text'"}], "isError": True}
    return {"content": [{"type": "text", "text": text}], "isError": False}


METHODS = {
    "initialize": initialize,
    "server/discover": discover,
    "ping": ping,
    "tools/list": list_tools,
    "tools/call": call_tool,
}


def modern_version(params: dict[str, Any]) -> str | None:
    """The request's 2026-07-28 envelope version, or None for a handshake-era request."""
    meta = params.get("_meta")
    return meta.get(META_VERSION) if isinstance(meta, dict) else None


def dress_modern(method: str, result: dict[str, Any]) -> dict[str, Any]:
    """The fields a 2026-07-28 result must carry (a handshake-era result gets none of them)."""
    result["resultType"] = "complete"
    result["_meta"] = {META_SERVER_INFO: SERVER_INFO}
    if method in CACHEABLE:
        result["ttlMs"] = 0
        result["cacheScope"] = "private"
    return result


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The response to one request."""
    method = request.get("method")
    params = request.get("params")
    params = params if isinstance(params, dict) else {}
    version = modern_version(params)
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
    try:
        if version is not None and version != MODERN_VERSION:
            raise RpcError(-32022, "Unsupported protocol version",
                           {"supported": [MODERN_VERSION], "requested": version})
        handler = METHODS.get(method)  # type: ignore[arg-type]
        if handler is None:
            raise RpcError(-32601, f"Method not found: {method}")
        result = handler(params)
        reply["result"] = dress_modern(method, result) if version is not None else result  # type: ignore[arg-type]
    except RpcError as exc:
        reply["error"] = exc.body()
    return reply


def reply_to(line: bytes) -> dict[str, Any] | None:
    """The answer to one line: None for a notification, an error for a line that is no request."""
    try:
        message = json.loads(line)
    except ValueError:
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    if not isinstance(message, dict) or "method" not in message:
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}
    if "id" not in message:
        return None
    return answer(message)


def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """One line in, one line out, until the end of stdin."""
    readline, write, flush, dumps = stdin.readline, stdout.write, stdout.flush, json.dumps
    for line in iter(readline, b""):
        if not line.strip():
            continue
        reply = reply_to(line)
        if reply is not None:
            write(dumps(reply, separators=(",", ":")).encode() + b"\n")
            flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
