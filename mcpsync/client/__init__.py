"""The blocking MCP client: `connect()` a server (a command, an http(s) URL, or a `Server` of this
process) and call it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._input_required import MAX_INPUT_ROUNDS  # noqa: F401  (importable from here before the options moved)
from ._server_requests import Handler  # noqa: F401  (likewise)
from .listen import ListChanged as ListChanged
from .listen import Listener as Listener
from .listen import ResourceUpdated as ResourceUpdated
from .memory import InProcessServer, MemoryConnection
from .options import ConnectionOptions as ConnectionOptions
from .options import SessionOptions as SessionOptions
from .options import split_options as _split_options
from .session import ClientSession as ClientSession
from .stdio import StdioConnection as StdioConnection
from .tasks import TaskCancelled as TaskCancelled
from .tasks import TaskHandle as TaskHandle
from .tasks import TaskStatus as TaskStatus
from .tasks import TaskTimeout as TaskTimeout


def connect(
    target: Sequence[str] | str | InProcessServer,
    *,
    options: SessionOptions | None = None,
    connection: ConnectionOptions | None = None,
    **settings: Any,
) -> ClientSession:
    """Open a session with an MCP server and agree on a protocol era.

    Args:
        target: a command as a list (`["python", "server.py"]`), started as a child process, the
            http(s) URL of a Streamable HTTP endpoint, or a `Server` object of this process, served
            to this session alone by its stdio transport on a pair of pipes (no port, no child:
            for a program's own tests; closing the session leaves the `Server` open).
        env, cwd, stderr: for the child process (env adds to this process's environment).
        headers: for the HTTP endpoint, sent with every request.
        auth: for the HTTP endpoint, credentials whose `Authorization` header goes with every
            request and which may log in when the server asks (`mcpsync.auth.BearerToken`,
            `mcpsync.auth.oauth.OAuth`, `ClientCredentials`, or your own `HttpCredentials`).
        connection: env, cwd, stderr, headers and auth as one `ConnectionOptions` (the keywords
            replace its fields).
        options: the session's settings as one `SessionOptions`; the other keywords (mode,
            timeout, client_info, roots, sampling, elicitation, on_log, on_change, on_lost,
            log_level, max_input_rounds, elicitation_modes, roots_list_changed, telemetry) are its fields,
            those of `ClientSession`, and replace the ones of `options`. `timeout` also bounds
            connecting over HTTP.

    Use it as a context manager, so the child is always stopped::

        with mcpsync.connect(["mcpsync", "serve"]) as session:
            print(session.call_tool("add", {"a": 2, "b": 3}))
    """
    chosen, where = _split_options(options, connection, dict(settings))
    return ClientSession(connection_for(target, where, timeout=chosen.timeout), options=chosen).open()


def connection_for(target: Sequence[str] | str | InProcessServer, where: ConnectionOptions, *, timeout: float = 30.0) -> Any:
    """The connection for a target: a command list → a child process; an http(s) URL → HTTP; a
    `Server` of this process → that server on a pair of pipes."""
    if not isinstance(target, (str, Sequence)):
        if where != ConnectionOptions():
            raise TypeError("env=, cwd=, stderr=, headers= and auth= are for a command or a URL: a Server of this process is called directly")
        return MemoryConnection(target)
    if isinstance(target, str):
        if target.startswith(("http://", "https://")):
            from .http import HttpConnection

            return HttpConnection(target, headers=dict(where.headers or {}), auth=where.auth, timeout=timeout)
        raise TypeError("pass a command as a list of program and arguments (e.g. ['mcpsync', 'serve']) or an http(s) URL")
    if where.auth is not None:
        raise TypeError("auth= is for an http(s) URL: a child process takes its credentials from its environment (env=)")
    return StdioConnection(target, env=where.env, cwd=where.cwd, stderr=where.stderr)
