"""CORS for the MCP endpoint: what lets a web page on another origin call it from a browser.

Why one setting: an origin a deployment lists in `allowed_origins` (`--allow-origin`) is one it
trusts to call the endpoint; the DNS-rebinding check lets its requests in, and a browser would
still refuse to show the page the answers without CORS. So the same list turns CORS on, for the
listed origins only: loopback origins, let in by default past the rebinding check, get no CORS
until they are listed, and `*` lists every origin (answered `*`: mcpsync never asks a browser for
credentials, so none are allowed).

A preflight (`OPTIONS` with `Origin`) from a listed origin is answered 204 with the methods, the
request headers a client of either era sends (the tools' `Mcp-Param-*` among them) and a max age;
from another origin 403 without CORS headers, so the browser refuses. Every other response to a
listed origin, JSON, empty or event stream, says who may read it and which response headers the
page may see (`Mcp-Session-Id`, `MCP-Protocol-Version`, `WWW-Authenticate`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._rules import header

METHODS = "GET, POST, DELETE"
EXPOSED = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate"
MAX_AGE = "7200"
"""Seconds a browser may keep a preflight's answer (Chromium keeps at most two hours)."""
REQUEST_HEADERS = frozenset(
    {"content-type", "accept", "authorization", "mcp-protocol-version", "mcp-session-id", "mcp-method", "mcp-name", "last-event-id"}
)
PARAM_PREFIX = "mcp-param-"


class Cors:
    """The CORS answers for the origins in `origins` (normalized: lower case, no trailing slash)."""

    def __init__(self, origins: frozenset[str]) -> None:
        self._origins = origins
        self._any = "*" in origins

    def allow_origin(self, environ: Mapping[str, Any]) -> str | None:
        """`Access-Control-Allow-Origin` for this request, or None: no Origin, or not listed."""
        origin = header(environ, "Origin")
        if origin is None:
            return None
        if self._any:
            return "*"
        return origin if origin.lower().rstrip("/") in self._origins else None

    @staticmethod
    def is_preflight(environ: Mapping[str, Any]) -> bool:
        return environ.get("REQUEST_METHOD") == "OPTIONS" and header(environ, "Origin") is not None

    @staticmethod
    def preflight_headers(environ: Mapping[str, Any]) -> list[tuple[str, str]]:
        """The answer to a preflight from an allowed origin (its own CORS headers come from `wrap`)."""
        asked = header(environ, "Access-Control-Request-Headers") or ""
        names = [name.strip() for name in asked.split(",") if name.strip()]
        allowed = [name for name in names if name.lower() in REQUEST_HEADERS or name.lower().startswith(PARAM_PREFIX)]
        headers = [("Access-Control-Allow-Methods", METHODS), ("Access-Control-Max-Age", MAX_AGE)]
        if allowed:
            headers.append(("Access-Control-Allow-Headers", ", ".join(allowed)))
        return headers

    @staticmethod
    def wrap(start_response: Callable[..., Any], allow_origin: str) -> Callable[..., Any]:
        """`start_response` adding the CORS headers of an allowed origin to whatever is answered."""
        extra = [("Access-Control-Allow-Origin", allow_origin), ("Vary", "Origin"), ("Access-Control-Expose-Headers", EXPOSED)]

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            return start_response(status, [*headers, *extra], exc_info)

        return start
