"""The 2026-07-28 rule for tools whose arguments travel as HTTP headers (`x-mcp-header`), as a
session applies it: `list_tools()` leaves out a tool whose annotations are invalid (with a warning
naming it and why) and tells the connection which arguments each of the others repeats as an
`Mcp-Param-*` header; `call_tool()` refuses a left-out tool before sending anything
(`InvalidTool`), as the transport spec requires, since its calls could not carry the headers the
server checks.

Why apart from the session: it is one rule of one transport, with its own memory (the tools the
last list left out); the session asks it before and after a call. A connection without
`know_tools` (stdio, in memory) sends no such headers, and the rule has nothing to do.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ..errors import InvalidTool
from ..protocol.jsonrpc import ErrorCode, McpError
from ..protocol.param_headers import split_invalid_tools
from ..protocol.versions import Era

log = logging.getLogger("mcpsync.client")


class ToolHeaders:
    """What the last `list_tools()` of one session said about the tools' headers. Shares the
    session's lock."""

    def __init__(self, connection: Any, lock: threading.Lock) -> None:
        self._connection = connection
        self._lock = lock
        self._invalid: dict[str, str] = {}  # name -> why, from the last list_tools(); under the lock

    def listed(self, tools: list[dict[str, Any]], era: Era | None) -> list[dict[str, Any]]:
        """The tools a listing shows (in 2026-07-28, those with valid annotations), once the
        connection has learned their headers."""
        know_tools = getattr(self._connection, "know_tools", None)
        if know_tools is None:
            return tools
        invalid: dict[str, str] = {}
        if era is Era.MODERN:
            tools, invalid = split_invalid_tools(tools)
            for name, reason in invalid.items():
                log.warning("leaving out tool %r: %s", name, reason)
        with self._lock:
            self._invalid = invalid
        know_tools(tools)
        return tools

    def refuse_invalid(self, name: str) -> None:
        """Raise InvalidTool for a tool the last listing left out."""
        with self._lock:
            reason = self._invalid.get(name)
        if reason is not None:
            raise InvalidTool(f"tool {name!r} was left out of list_tools() and is not called: {reason}")

    def learned(self, refusal: McpError, name: str, list_tools: Callable[[], object]) -> bool:
        """Whether a call of `name` that got `refusal` may go once more: a -32020 over HTTP means the
        tool wants some arguments as `Mcp-Param-*` headers, which only its listed schema tells.
        Refused before the tool ran, so it is safe to list the tools (`list_tools`) and retry,
        when that taught the connection the tool's headers. Raises InvalidTool when the new
        listing left the tool out."""
        knows_tool = getattr(self._connection, "knows_tool", None)
        if refusal.code != ErrorCode.HEADER_MISMATCH or knows_tool is None or knows_tool(name):
            return False
        list_tools()
        self.refuse_invalid(name)
        return bool(knows_tool(name))
