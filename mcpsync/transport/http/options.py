"""The MCP HTTP endpoint's defaults, and the HTTP server's handed on, in a module that loads no transport.

Strategy: `Server.wsgi_app/start_http/serve_http` and the `mcpsync serve` options name these in
their signatures and help, and importing them must not load the transport itself (sockets,
threads): a stdio server never does. The transport takes its defaults from here too, so each value
is written once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ...httpd.options import DEFAULT_MAX_BUFFERED_BYTES as DEFAULT_MAX_BUFFERED_BYTES
from ...httpd.options import DEFAULT_MAX_CONNECTIONS as DEFAULT_MAX_CONNECTIONS
from ...httpd.options import DEFAULT_THREADS as DEFAULT_THREADS
from ...httpd.options import HeadAnswer as HeadAnswer
from ...httpd.options import HeadCheck as HeadCheck
from ...httpd.options import WsgiApp as WsgiApp

if TYPE_CHECKING:
    from ...auth.resource.guard import Auth

DEFAULT_KEEPALIVE = 15.0
DEFAULT_REQUEST_TIMEOUT = 300.0
DEFAULT_MAX_STREAMS = 256
DEFAULT_SESSION_TIMEOUT = 1800.0
DEFAULT_MAX_SESSIONS = 1024
DEFAULT_SERVED_MAX_STREAMS = 8_000
"""Open streams (listens and GET streams) under mcpsync's own HTTP server, where a stream holds no
thread; `DEFAULT_MAX_STREAMS` is the WSGI app's default under other servers, where each holds one."""

DEFAULT_MAX_SESSIONS_PER_CALLER = 32
"""Handshake-era sessions one caller (`Principal.key`) holds at once, across replicas. Well below
`DEFAULT_MAX_SESSIONS` (1024), so one token cannot fill the table: a person's clients, tabs and
agents rarely hold more than a few sessions of one server; a service account that fans out to many
workers with one token may need it raised. Unauthenticated endpoints have no caller to bound."""


LIVE_PATH = "/livez"
"""The liveness probe's path: 200 while the process serves HTTP."""
READY_PATH = "/readyz"
"""The readiness probe's path: 200 while the endpoint can serve MCP requests, else 503 and why."""


@dataclass(frozen=True)
class HttpOptions:
    """The HTTP endpoint's settings as one value: built once (by `mcpsync serve`, or by a program)
    and passed to `Server.wsgi_app`, `start_http` and `serve_http`, whose keywords build one too.

    None means "this server's own" for `auth`, `workers`, `max_body_bytes` (its
    `max_frame_bytes`), `subscription_cap`, `shutdown_timeout` and `max_sessions_per_caller`, and
    the derived default for `max_streams` (see `served_streams` and `wsgi_streams`). `threads`,
    `max_connections` and `max_buffered_bytes` are those of mcpsync's own HTTP server (`httpd`),
    unused under another WSGI server. `fallback` serves every other path. `live_path` and
    `ready_path` answer a load balancer's or an orchestrator's probes (None turns one off): live
    while the process serves, ready unless it is shutting down or the replicas' store is unreachable.
    """

    path: str = "/mcp"
    live_path: str | None = LIVE_PATH
    ready_path: str | None = READY_PATH
    fallback: WsgiApp | None = None
    allowed_hosts: Iterable[str] | None = None
    allowed_origins: Iterable[str] | None = None
    auth: Auth | None = None
    max_streams: int | None = None
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    keepalive: float = DEFAULT_KEEPALIVE
    session_timeout: float = DEFAULT_SESSION_TIMEOUT
    max_sessions: int = DEFAULT_MAX_SESSIONS
    max_sessions_per_caller: int | None = None
    workers: int | None = None
    max_body_bytes: int | None = None
    subscription_cap: int | None = None
    shutdown_timeout: float | None = None
    threads: int = DEFAULT_THREADS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_buffered_bytes: int | None = None

    @classmethod
    def given(cls, options: HttpOptions | None, **settings: Any) -> HttpOptions:
        """`options` (or the defaults) with the keywords given replacing its fields: how a keyword
        API (`Server.wsgi_app`, `start_http`, ...) builds the one value; an unknown keyword is a
        TypeError."""
        base = cls() if options is None else options
        return replace(base, **settings) if settings else base

    def served_streams(self) -> int:
        """Open streams under mcpsync's own server, where a stream holds a connection and no
        thread: `max_streams`, which must stay below `max_connections`, or by default
        `DEFAULT_SERVED_MAX_STREAMS`, or four fifths of `max_connections` if fewer."""
        return self._streams(DEFAULT_SERVED_MAX_STREAMS)

    def wsgi_streams(self, max_connections: int | None = None) -> int:
        """Open streams under another WSGI server, where each holds a thread: `max_streams`, or
        `DEFAULT_MAX_STREAMS`; given the server's `max_connections` (gunicorn's worker
        connections), below it and at most four fifths of it by default."""
        if max_connections is None:
            return DEFAULT_MAX_STREAMS if self.max_streams is None else self.max_streams
        return replace(self, max_connections=max_connections)._streams(DEFAULT_MAX_STREAMS)

    def for_threaded_worker(self) -> HttpOptions:
        """These options for one process of a threaded WSGI server (gunicorn's gthread workers)
        that holds `max_connections` connections, where each open stream holds a thread:
        `max_streams` fixed at `wsgi_streams(max_connections)`, and the listens capped by it unless
        `subscription_cap` is given. Give that process `threads + max_streams` threads, so open
        streams can never starve the requests (`mcpsync.processes` does). A ValueError if
        `max_streams` is not below `max_connections`."""
        streams = self.wsgi_streams(self.max_connections)
        cap = streams if self.subscription_cap is None else self.subscription_cap
        return replace(self, max_streams=streams, subscription_cap=cap)

    def _streams(self, default: int) -> int:
        if self.max_streams is None:
            return max(1, min(default, self.max_connections * 4 // 5))
        if self.max_streams >= self.max_connections:
            raise ValueError("max_streams must be below max_connections: each open stream holds a connection")
        return self.max_streams
