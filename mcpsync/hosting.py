"""A `Server` as the whole job of its process: what `mcpsync serve` does around the server it
builds, public so that a program does the same with the same calls.

Strategy: `Server.serve_stdio` and `Server.serve_http` serve until end of input, `shutdown()`,
SIGTERM or SIGINT. What is left is the process's business, which those calls do not take on by
themselves, since a program that embeds a server may want otherwise: where the log goes
(`log_to_stderr`: stderr, through a handler that never makes a thread wait on a host that does not
read it), how many file descriptors the process may open (`raise_fd_limit`: each connection and
each open stream costs one), and how it ends (`run_stdio`, `run_http`: the server closed, and the
process left at once if requests were still running at the shutdown deadline, since Python would
wait for their threads at exit). Several worker processes are `mcpsync.processes`'.

Importing this module imports nothing more than `mcpsync serve` over stdio needs.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._stderr_log import PipeHandler, stderr_handler

if TYPE_CHECKING:
    from ._process import StdioWire
    from .server import Server
    from .transport.http.options import HttpOptions

__all__ = ["log_to_stderr", "raise_fd_limit", "run_http", "run_stdio"]


def log_to_stderr(level: str = "warning", *, json: bool = False) -> None:
    """The root logger writes to stderr at `level` (a name: "debug", "info", "warning", "error",
    "critical"), replacing its handlers, through one that never makes a logging thread wait on a
    host that does not read stderr: whole lines, through a bounded queue and one writer thread.
    `json`: one JSON object per line, with the trace and span ids of a traced request."""
    root = logging.getLogger()
    for replaced in root.handlers:
        if isinstance(replaced, PipeHandler):  # its writer thread is this module's to end
            replaced.close()
    root.handlers[:] = [stderr_handler(sys.stderr, json=json)]
    root.setLevel(level.upper())


def raise_fd_limit() -> None:
    """Let this process open as many file descriptors as its hard limit allows (the soft limit is
    often 1,024), as servers do: a connection or an open stream costs one. Before serving HTTP."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass  # the soft limit stays; max_connections is capped below it


def run_stdio(server: Server, wire: StdioWire | None = None) -> None:
    """Serve stdin/stdout as this process's job: `server.serve_stdio(wire)` until end of input,
    SIGTERM or Ctrl-C, then close the server (upstreams, bus). Take `wire` with `isolate_stdio()`
    before importing code that may print. Running tasks are cancelled and given the shutdown
    timeout too. If requests were still running at the shutdown deadline, the process exits at
    once (status 0) instead of returning."""
    try:
        clean = server.serve_stdio(wire)
    finally:
        _close(server)
    _leave_unless(clean)


def run_http(
    server: Server,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    options: HttpOptions | None = None,
    on_ready: Callable[[str], None] | None = None,
    **settings: Any,
) -> None:
    """Serve HTTP as this process's job: `server.serve_http(host, port, ...)` with `options` (or
    its fields as keywords) until SIGTERM or Ctrl-C, `on_ready(url)` once the port is bound, then
    close the server. A port that cannot be bound raises (OSError) after closing it. If requests
    were still running at the shutdown deadline, the process exits at once (status 0) instead of
    returning."""
    try:
        clean = server.serve_http(host, port, on_ready=on_ready, options=options, **settings)
    finally:
        _close(server)
    _leave_unless(clean)


def _close(server: Server) -> None:
    """After serving: the running tasks are cancelled and given `shutdown_timeout` to return (their
    results kept), as the requests were; then the rest, whose transports have stopped already, and
    the telemetry is flushed."""
    server.engine.tasks.close(server.shutdown_timeout)
    server.close(timeout=0)
    if server.telemetry is not None:  # the spans and measurements still held go out before the process does
        server.telemetry.close()


def _leave_unless(clean: bool) -> None:
    """Requests still running past the shutdown deadline would keep the interpreter alive (Python
    joins worker threads at exit); serving was asked to stop, so leave without them."""
    if not clean:
        logging.shutdown()
        sys.stderr.flush()
        os._exit(0)
