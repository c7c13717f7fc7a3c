"""The HTTP server's defaults and the types of what it serves, in a module that imports nothing.

Strategy: `Server.start_http/serve_http`, `mcpsync serve` and the MCP endpoint name these in
their signatures and help, and importing them must not load the server (httptools, sockets,
threads): a stdio server never does. Each value is written here once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

DEFAULT_THREADS = 64
"""Requests mcpsync's own HTTP server reads, runs or writes at once, a worker thread each."""
DEFAULT_MAX_CONNECTIONS = 10_000
"""Connections mcpsync's own HTTP server holds open at once (capped below the descriptor limit)."""
DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024
"""Request-body bytes mcpsync's own HTTP server holds at once, across all connections (a request
that would take more is refused 503 with Retry-After before its body is sent)."""

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
"""A WSGI application (PEP 3333): called with the environ and `start_response`."""

HeadAnswer = tuple[str, list[tuple[str, str]], bytes]
"""A whole response: the status line ("401 Unauthorized"), the headers and the body."""
HeadCheck = Callable[[dict[str, Any]], "HeadAnswer | None"]
"""Called by mcpsync's own HTTP server with the environ of a request whose head has arrived and
whose body has not been read: None to read the body and run the application, or the answer to
send instead (the connection then closes and the body is never read)."""
AnswersAtOnce = Callable[[dict[str, Any], bytes], bool]
"""Called by mcpsync's own HTTP server on its loop thread with a whole request, its environ and its
body: True when the application answers it at once, waiting on nothing (no other thread, no
network, no client), so the loop runs it itself, sparing the hand-off to a worker; False to hand it
to a worker. The environ is the one the application is then called with."""


@functools.lru_cache(maxsize=256)
def environ_key(name: str) -> str:
    """The WSGI environ's key for a header name (`Mcp-Session-Id` -> `HTTP_MCP_SESSION_ID`): what
    the server files a header under and what the application looks it up by. A memo of a pure
    function, bounded: a client sends the same few names with every request."""
    key = name.upper().replace("-", "_")
    return key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key
