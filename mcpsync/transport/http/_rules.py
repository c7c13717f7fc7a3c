"""The HTTP side's rules that need no socket: which era a POST is, what status an error gets,
what `Accept` allows, and whose `Host` and `Origin` are let in.

Strategy: pure functions of a WSGI environ (or of plain values), so every rule is a unit test.

Routing (MCP-DIGEST §6.5, body first): a body whose `params._meta` names a protocol version is
2026-07-28; so is one whose `MCP-Protocol-Version` header names anything but a handshake version
(a modern client that forgot the envelope is told -32602, not served as a legacy client).
Everything else belongs to the handshake era and its sessions.

Status codes: in 2026-07-28 an error's JSON-RPC code decides (`-32700`, `-32600`, `-32602`,
`-32020`, `-32021`, `-32022` → 400; `-32601` → 404; anything else → 200, the Python SDK's table).
In the handshake era errors travel in-band on 200, except the HTTP-level ones (a body that is not
one JSON-RPC message, a missing or unknown session).

DNS rebinding: a request from a loopback address (every request, when the server is bound to
loopback) must name a loopback host (`localhost`, `127.0.0.1`, `[::1]`) or one of `allowed_hosts`;
an `Origin`, when present, must be a loopback origin, the same origin as `Host`, or one of
`allowed_origins`. `*` in either list allows anything. Requests from other addresses are held to
`allowed_hosts` only when that list is given.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from ...httpd.options import environ_key
from ...protocol.jsonrpc import ErrorCode, Message, Notification, Request
from ...protocol.versions import HANDSHAKE_ERA, HANDSHAKE_VERSIONS, MODERN_ERA, Era, claims_modern

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
LOOPBACK_ADDRESSES = frozenset({"127.0.0.1", "::1", "::ffff:127.0.0.1"})

MODERN_ERROR_STATUS: Mapping[int, int] = {
    ErrorCode.PARSE_ERROR: 400,
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.INVALID_PARAMS: 400,
    ErrorCode.HEADER_MISMATCH: 400,
    ErrorCode.MISSING_CLIENT_CAPABILITY: 400,
    ErrorCode.UNSUPPORTED_PROTOCOL_VERSION: 400,
    ErrorCode.METHOD_NOT_FOUND: 404,
}


def error_status(code: int, era: Era) -> int:
    """The HTTP status of a response carrying JSON-RPC error `code`."""
    return MODERN_ERROR_STATUS.get(code, 200) if era is MODERN_ERA else 200


def route(message: Message, version_header: str | None) -> Era:
    """Which era serves this POST (see the module docstring)."""
    if isinstance(message, (Request, Notification)) and claims_modern(message.params):
        return MODERN_ERA
    if version_header is not None and version_header not in HANDSHAKE_VERSIONS:
        return MODERN_ERA
    return HANDSHAKE_ERA


# -- headers ----------------------------------------------------------------------------------------

_KEYS = MappingProxyType({
    name: environ_key(name)
    for name in ("Accept", "Content-Length", "Content-Type", "Host", "Last-Event-ID", "MCP-Protocol-Version", "Mcp-Session-Id", "Origin",
                 "mcp-method", "mcp-name", "mcp-protocol-version", "traceparent", "tracestate")
})
"""The environ keys of the headers every request is looked up by, made once (`environ_key` is a
memo, but a call to it costs as much as the rest of a lookup)."""


def header(environ: Mapping[str, Any], name: str) -> str | None:
    """One request header, its surrounding whitespace removed, or None."""
    key = _KEYS.get(name) or environ_key(name)
    value = environ.get(key)
    if value is None:
        return None
    return value.strip(" \t") if type(value) is str else str(value).strip(" \t")


def trace_headers(environ: Mapping[str, Any]) -> dict[str, str] | None:
    """The W3C trace context sent as headers (`traceparent`, with its `tracestate`), or None:
    what the observer parents a request's span on when neither its `_meta` nor an HTTP
    instrumentation around the app gave one (a client that traces only its HTTP requests)."""
    traceparent = header(environ, "traceparent")
    if traceparent is None:
        return None
    carried = {"traceparent": traceparent}
    tracestate = header(environ, "tracestate")
    if tracestate is not None:
        carried["tracestate"] = tracestate
    return carried


class Headers(Mapping[str, str]):
    """The request's headers by name, in any case (`headers["mcp-method"]`), read from the
    environ only when asked: a request's checks look up a few of them, so nothing is copied."""

    __slots__ = ("_environ",)

    def __init__(self, environ: Mapping[str, Any]) -> None:
        self._environ = environ

    def __getitem__(self, name: str) -> str:
        value = header(self._environ, name)
        if value is None:
            raise KeyError(name)
        return value

    def get(self, name: str, default: Any = None) -> Any:  # the checks' one way in: without a KeyError per absent header
        value = header(self._environ, name)
        return default if value is None else value

    def __iter__(self) -> Iterator[str]:
        for key in self._environ:
            if key.startswith("HTTP_"):
                yield key[5:].replace("_", "-").lower()
            elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and self._environ[key]:
                yield key.replace("_", "-").lower()

    def __len__(self) -> int:
        return sum(1 for _ in self)


def media_type(value: str | None) -> str:
    return (value or "").split(";", 1)[0].strip().lower()


@functools.lru_cache(maxsize=64)
def accepts(accept: str | None) -> tuple[bool, bool]:
    """Whether an `Accept` header allows (application/json, text/event-stream). Wildcards count,
    `q=0` refuses; no header at all accepts everything (RFC 9110 §12.5.1). Cached: a client sends
    the same value with every request."""
    if accept is None:
        return True, True
    json = sse = False
    for item in accept.split(","):
        kind, *parameters = (part.strip() for part in item.split(";"))
        kind = kind.lower()
        if any(p.replace(" ", "").lower() in ("q=0", "q=0.0", "q=0.00", "q=0.000") for p in parameters):
            continue
        if kind in ("*/*", "application/*", "application/json"):
            json = True
        if kind in ("*/*", "text/*", "text/event-stream"):
            sse = True
    return json, sse


# -- DNS rebinding ------------------------------------------------------------------------------------

def _split_host(host: str) -> tuple[str, str | None]:
    """("example.com", "8000") from "example.com:8000"; IPv6 in brackets; names lower-cased."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return host, None
        name, rest = host[1:end], host[end + 1 :]
        return name, rest[1:] if rest.startswith(":") else None
    if host.count(":") == 1:
        name, port = host.split(":")
        return name, port
    return host, None


def is_loopback_name(hostname: str) -> bool:
    return hostname in LOOPBACK_NAMES or hostname.endswith(".localhost") or _is_loopback_ip(hostname)


def _is_loopback_ip(text: str) -> bool:
    if text in LOOPBACK_ADDRESSES:  # the usual case, without parsing
        return True
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def _host_listed(host: str, allowed: Iterable[str]) -> bool:
    name, port = _split_host(host)
    for pattern in allowed:
        want_name, want_port = _split_host(pattern)
        if want_name == name and (want_port in (None, "*") or want_port == port):
            return True
    return False


def rebinding_refusal(
    environ: Mapping[str, Any],
    allowed_hosts: frozenset[str] | None,
    allowed_origins: frozenset[str] | None,
) -> str | None:
    """Why this request's `Host` or `Origin` is refused (answer 403), or None to let it in."""
    host = header(environ, "Host") or f"{environ.get('SERVER_NAME', '')}:{environ.get('SERVER_PORT', '')}"
    remote = environ.get("REMOTE_ADDR")
    from_loopback = remote is None or _is_loopback_ip(str(remote))
    return _rebinding_verdict(host, header(environ, "Origin"), from_loopback, allowed_hosts, allowed_origins)


@functools.lru_cache(maxsize=256)
def _rebinding_verdict(
    host: str, origin: str | None, from_loopback: bool, allowed_hosts: frozenset[str] | None, allowed_origins: frozenset[str] | None
) -> str | None:
    """`rebinding_refusal`'s answer from what it depends on. Cached: a client sends the same Host
    and Origin with every request (a Host that changes with each only churns the cache)."""
    hostname, _ = _split_host(host)
    hosts = allowed_hosts or frozenset()
    host_ok = (
        "*" in hosts
        or is_loopback_name(hostname)
        or _host_listed(host, hosts)
        or (allowed_hosts is None and not from_loopback)
    )
    if not host_ok:
        return f"Host {host!r} is not allowed"
    if origin is None:
        return None
    origins = allowed_origins or frozenset()
    if "*" in origins or origin.lower().rstrip("/") in origins:
        return None
    parts = urlsplit(origin)
    try:
        origin_host = parts.hostname or ""
        same_origin = parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()
    except ValueError:
        return f"Origin {origin!r} is not allowed"
    if is_loopback_name(origin_host) or same_origin:
        return None
    return f"Origin {origin!r} is not allowed"


def rebinding_remedy(refusal: str) -> str:
    """How the operator lets in what `rebinding_refusal` refused (for the log, never the 403: the
    client must not learn the server's settings), in both of the ways a server is configured: the
    Python setting and the `mcpsync serve` option. `refusal` is that function's text, which names
    the Host or the Origin first."""
    if refusal.startswith("Host"):
        return "to let it in, add the host to allowed_hosts (mcpsync serve --allow-host HOST)"
    return "to let it in, add the origin to allowed_origins (mcpsync serve --allow-origin ORIGIN)"


def normalize_origins(origins: Iterable[str] | None) -> frozenset[str] | None:
    return None if origins is None else frozenset(o.strip().lower().rstrip("/") for o in origins)


def normalize_hosts(hosts: Iterable[str] | None) -> frozenset[str] | None:
    return None if hosts is None else frozenset(h.strip().lower() for h in hosts)


def normalize_path(path: str) -> str:
    """`/mcp/` and `/mcp` are one endpoint; an empty path is the root."""
    if not path:
        return "/"
    return path.rstrip("/") or "/"
