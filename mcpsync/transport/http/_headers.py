"""The 2026-07-28 routing headers of an HTTP POST, checked against its body (-32020).

Strategy: pure functions over a plain mapping of lower-cased header names to values (OWS already
stripped, RFC 9110 §5.5), so they are tested without a server. `check_routing_headers` is the
engine's `HeaderCheck` hook for one request: it runs after the envelope's shape is known good and
before the version is checked, so a client whose header and body disagree is told -32020 rather
than -32022 (the conformance suite's order). Which `Mcp-Param-*` headers a tool's calls carry is
read from its schema once per tool object (`ToolHeaderPlans`), not on every call.

What is checked (streamable-http.mdx §Standard headers, §Custom headers; SEP-2243):
- `MCP-Protocol-Version` present and equal to `_meta["io.modelcontextprotocol/protocolVersion"]`;
- `Mcp-Method` equal to the body's `method` (values are case-sensitive);
- `Mcp-Name` equal to `params.name` (`tools/call`, `prompts/get`) or `params.uri`
  (`resources/read`) when the body has one;
- for `tools/call`, every `Mcp-Param-<Token>` that the tool's `inputSchema` declares with
  `x-mcp-header`: present exactly when the argument is (null counts as absent), equal once decoded
  (integers compare numerically). A schema whose annotations are invalid is not checked at all:
  conforming clients drop such a tool and send no headers for it.
Values may come as `=?base64?<base64 of UTF-8>?=`; a malformed one never matches.
"""

from __future__ import annotations

import base64
import binascii
import re
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ...protocol.jsonrpc import ErrorCode, McpError, Request
from ...protocol.param_headers import ParamHeader, param_headers, render_value, value_at
from ...protocol.versions import Envelope

if TYPE_CHECKING:
    from ...engine.engine import Engine

NAMED_METHODS = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
"""Method → the params key that `Mcp-Name` mirrors."""
PARAM_PREFIX = "mcp-param-"

_SENTINEL = re.compile(r"=\?base64\?(?P<payload>.*)\?=", re.DOTALL)
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")

HeaderPlan = Callable[[str], tuple[ParamHeader, ...]]


class ToolHeaderPlans:
    """A `HeaderPlan` for one engine: the `Mcp-Param-*` headers a call of the named tool carries
    (none for a tool it does not serve), worked out once per tool object (a tool's schema never
    changes; a changed tool is a new object, and the old one's plan goes with it)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._plans: weakref.WeakKeyDictionary[Any, tuple[ParamHeader, ...]] = weakref.WeakKeyDictionary()

    def __call__(self, name: str) -> tuple[ParamHeader, ...]:
        tool = self._engine.catalog.find_tool(name)
        if tool is None or (self._engine.tool_filter is not None and not self._engine.tool_filter(tool)):
            return ()
        plan = self._plans.get(tool)
        if plan is None:
            plan = self._plans[tool] = param_headers(tool.definition().get("inputSchema"))
        return plan
"""The `Mcp-Param-*` headers a call of the named tool must carry (see `param_headers`)."""


def mismatch(message: str) -> McpError:
    return McpError(ErrorCode.HEADER_MISMATCH, f"Header mismatch: {message}")


def decode_value(value: str | None) -> str | None:
    """A header value as sent: verbatim, or the text inside a `=?base64?...?=` sentinel. A malformed
    sentinel (bad or non-canonical base64, not UTF-8) gives None, which matches nothing."""
    if value is None or not value.startswith("=?"):
        return value
    match = _SENTINEL.fullmatch(value)
    if match is None:
        return value
    payload = match.group("payload")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(raw).decode("ascii") != payload:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def check_routing_headers(headers: Mapping[str, str], request: Request, envelope: Envelope, plan: HeaderPlan) -> None:
    """Raise -32020 when the request's routing headers do not match its body."""
    version = headers.get("mcp-protocol-version")
    if version is None:
        raise mismatch("the MCP-Protocol-Version header is missing")
    if version != envelope.protocol_version:
        raise mismatch(
            f"the MCP-Protocol-Version header ({version!r}) does not match the body's protocol version ({envelope.protocol_version!r})"
        )
    method = headers.get("mcp-method")
    if method is None:
        raise mismatch("the Mcp-Method header is missing")
    if method != request.method:
        raise mismatch(f"the Mcp-Method header ({method!r}) does not match the body's method ({request.method!r})")
    key = NAMED_METHODS.get(request.method)
    if key is not None:
        body_value = request.params.get(key)
        if body_value is not None:
            raw = headers.get("mcp-name")
            if raw is None:
                raise mismatch(f"the Mcp-Name header is missing (the body's {key} is {_quoted(body_value)})")
            if decode_value(raw) != body_value:
                raise mismatch(f"the Mcp-Name header does not match the body's {key} ({_quoted(body_value)})")
    if request.method == "tools/call":
        _check_param_headers(headers, request, plan)


def _quoted(value: object) -> str:
    """A body's value as an error quotes it: a string, cut at 200 characters; anything else by its
    type alone (a value nested a thousand deep has a repr that raises RecursionError)."""
    if isinstance(value, str):
        return repr(value if len(value) <= 200 else value[:200] + "...")
    return f"a {type(value).__name__}, not a string"


def _check_param_headers(headers: Mapping[str, str], request: Request, plan: HeaderPlan) -> None:
    name = request.params.get("name")
    arguments = request.params.get("arguments")
    if not isinstance(name, str) or (arguments is not None and not isinstance(arguments, dict)):
        return  # the operation answers -32602 for these
    arguments = arguments or {}
    for path, token, prop in plan(name):
        header_name = f"Mcp-Param-{token}"
        raw = headers.get(PARAM_PREFIX + token.lower())
        value = value_at(arguments, path)
        argument = ".".join(path)
        rendered = None if value is None else render_value(value)
        if rendered is None:
            if raw is not None:
                raise mismatch(f"the {header_name} header is present but the argument {argument!r} is absent or cannot be sent as a header")
            continue
        if raw is None:
            raise mismatch(f"the {header_name} header is missing (the argument {argument!r} is present)")
        decoded = decode_value(raw)
        if decoded is None:
            raise mismatch(f"the {header_name} header carries a malformed base64 value")
        if not _same_value(prop.get("type"), value, rendered, decoded):
            raise mismatch(f"the {header_name} header does not match the argument {argument!r}")


def _same_value(kind: Any, value: Any, rendered: str, decoded: str) -> bool:
    """Integers compare numerically (`42` matches `42.0`); everything else as written."""
    integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "integer" and integral and not isinstance(value, bool) and _DECIMAL.fullmatch(decoded):
        whole, _, fraction = decoded.partition(".")
        if fraction.strip("0"):
            return False
        try:
            return int(whole) == int(value)
        except ValueError:
            return False
    return decoded == rendered


