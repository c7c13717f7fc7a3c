"""The HTTP headers a client sends: the 2026-07-28 routing headers of a message, their value
encoding, and the user's own headers (checked once, and never overriding the protocol's).

Why apart from the connection: these are rules of the format, with no state but the tools'
header plans the connection hands in, and tests check them without sockets.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from ..protocol.param_headers import ParamHeader, render_value, value_at
from ..protocol.versions import META_PROTOCOL_VERSION

_NAMED_METHODS = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",  # the tasks extension's requests name their task (SEP-2663)
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
"""The methods whose `Mcp-Name` header repeats a param, and which one."""
_PLAIN_VALUE = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_SENTINEL_PREFIX, _SENTINEL_SUFFIX = "=?base64?", "?="


def header_value(value: str) -> str:
    """A routing header value as 2026-07-28 sends it: as is when it is plain visible ASCII without
    leading or trailing spaces, otherwise `=?base64?<base64 of its UTF-8>?=`."""
    if value == "" or (_PLAIN_VALUE.fullmatch(value) and not (value.startswith(_SENTINEL_PREFIX) and value.endswith(_SENTINEL_SUFFIX))):
        return value
    encoded = base64.b64encode(value.encode("utf-8", "surrogatepass")).decode("ascii")
    return f"{_SENTINEL_PREFIX}{encoded}{_SENTINEL_SUFFIX}"


def routing_headers(message: dict[str, Any], plans: Mapping[str, tuple[ParamHeader, ...]]) -> dict[str, str] | None:
    """The 2026-07-28 headers of a message whose `params._meta` names a protocol version
    (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` (see _NAMED_METHODS), and for `tools/call` the tool's
    `Mcp-Param-<Token>` from `plans`, by tool name); None for a handshake-era message."""
    given = message.get("params")
    params: dict[str, Any] = given if isinstance(given, dict) else {}
    meta = params.get("_meta")
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    if not isinstance(version, str):
        return None
    own = {"MCP-Protocol-Version": header_value(version)}
    method = message.get("method")
    if isinstance(method, str):
        own["Mcp-Method"] = header_value(method)
        name = params.get(_NAMED_METHODS.get(method, ""))
        if isinstance(name, str):
            own["Mcp-Name"] = header_value(name)
        if method == "tools/call" and isinstance(name, str):
            own.update(_argument_headers(plans.get(name, ()), params.get("arguments")))
    return own


TRACE_HEADERS = ("traceparent", "tracestate")
"""The W3C trace context a request's `params._meta` carries (put there by `mcpsync.telemetry`),
sent as HTTP headers too: a proxy or an HTTP instrumentation between client and server sees the
trace without reading the body."""


def trace_headers(message: dict[str, Any]) -> dict[str, str]:
    """`traceparent` and `tracestate` as headers, when the message's `_meta` has them."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict) or "traceparent" not in meta:
        return {}
    return {name: value for name in TRACE_HEADERS if isinstance(value := meta.get(name), str) and value.isascii() and value.isprintable()}


def _argument_headers(plan: tuple[ParamHeader, ...], arguments: Any) -> dict[str, str]:
    """`Mcp-Param-<Token>` for each annotated argument present (null counts as absent)."""
    headers = {}
    for path, token, _ in plan:
        value = value_at(arguments, path) if isinstance(arguments, dict) else None
        rendered = None if value is None else render_value(value)
        if rendered is not None:
            headers[f"Mcp-Param-{token}"] = header_value(rendered)
    return headers


def checked_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The user's headers, checked once: valid names, no CR/LF/NUL, Latin-1 values (ValueError)."""
    checked: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise ValueError(f"invalid HTTP header name {name!r}")
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise ValueError(f"invalid value for HTTP header {name!r}")
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            raise ValueError(f"the value of HTTP header {name!r} is not Latin-1; encode it first") from None
        checked[name] = value
    return checked


def merged(user: dict[str, str], own: dict[str, str]) -> dict[str, str]:
    """The user's headers, except where the protocol's own headers (which win) have the same name."""
    taken = {name.lower() for name in own}
    return {**{n: v for n, v in user.items() if n.lower() not in taken}, **own}
