"""The MCP HTTP endpoint's defaults, and the HTTP server's handed on, in a module that loads no transport.

Strategy: `Server.wsgi_app/start_http/serve_http` and the `mcpsync serve` options name these in
their signatures and help, and importing them must not load the transport itself (sockets,
threads): a stdio server never does. The transport takes its defaults from here too, so each value
is written once.
"""

from __future__ import annotations

from ...httpd.options import DEFAULT_MAX_BUFFERED_BYTES as DEFAULT_MAX_BUFFERED_BYTES
from ...httpd.options import DEFAULT_MAX_CONNECTIONS as DEFAULT_MAX_CONNECTIONS
from ...httpd.options import DEFAULT_THREADS as DEFAULT_THREADS
from ...httpd.options import HeadAnswer as HeadAnswer
from ...httpd.options import HeadCheck as HeadCheck
from ...httpd.options import WsgiApp as WsgiApp

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
