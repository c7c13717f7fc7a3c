"""The HTTP transport's defaults and the WSGI application type, in a module that imports nothing.

Strategy: `Server.wsgi_app/start_http/serve_http` and the `mcpsync serve` options name these in
their signatures and help, and importing them must not load the transport itself (sockets,
threads): a stdio server never does. The transport takes its defaults from here too, so each value
is written once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

DEFAULT_KEEPALIVE = 15.0
DEFAULT_REQUEST_TIMEOUT = 300.0
DEFAULT_MAX_STREAMS = 256
DEFAULT_SESSION_TIMEOUT = 1800.0
DEFAULT_MAX_SESSIONS = 1024
DEFAULT_THREADS = 64
"""Requests mcpsync's own HTTP server reads, runs or writes at once, a worker thread each."""
DEFAULT_MAX_CONNECTIONS = 10_000
"""Connections mcpsync's own HTTP server holds open at once (capped below the descriptor limit)."""
DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024
"""Request-body bytes mcpsync's own HTTP server holds at once, across all connections (a request
that would take more is refused 503 with Retry-After before its body is sent)."""
DEFAULT_SERVED_MAX_STREAMS = 8_000
"""Open streams (listens and GET streams) under mcpsync's own HTTP server, where a stream holds no
thread; `DEFAULT_MAX_STREAMS` is the WSGI app's default under other servers, where each holds one."""

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
"""A WSGI application (PEP 3333): called with the environ and `start_response`."""

HeadAnswer = tuple[str, list[tuple[str, str]], bytes]
"""A whole response: the status line ("401 Unauthorized"), the headers and the body."""
HeadCheck = Callable[[dict[str, Any]], "HeadAnswer | None"]
"""Called by mcpsync's own HTTP server with the environ of a request whose head has arrived and
whose body has not been read: None to read the body and run the application, or the answer to
send instead (the connection then closes and the body is never read)."""
DEFAULT_MAX_SESSIONS_PER_CALLER = 32
"""Handshake-era sessions one caller (`Principal.key`) holds at once, across replicas. Well below
`DEFAULT_MAX_SESSIONS` (1024), so one token cannot fill the table: a person's clients, tabs and
agents rarely hold more than a few sessions of one server; a service account that fans out to many
workers with one token may need it raised. Unauthenticated endpoints have no caller to bound."""
