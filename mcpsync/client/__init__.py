"""The blocking MCP client: `connect()` a server (a command or an http(s) URL) and call it."""

from __future__ import annotations

import os
from typing import IO, Any, Mapping, Sequence

from .listen import ListChanged as ListChanged
from .listen import Listener as Listener
from .listen import ResourceUpdated as ResourceUpdated
from .session import ClientSession as ClientSession
from .stdio import StdioConnection as StdioConnection


def connect(
    target: Sequence[str] | str,
    *,
    mode: str = "auto",
    timeout: float = 30.0,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stderr: IO[Any] | int | None = None,
    **session_options: Any,
) -> ClientSession:
    """Open a session with an MCP server and agree on a protocol era.

    Args:
        target: a command as a list (`["python", "server.py"]`), started as a child process, or
            the http(s) URL of a Streamable HTTP endpoint (pass `headers=` for it).
        mode: "auto" (probe 2026-07-28, fall back to the handshake era), "legacy" or "modern".
        timeout: the default deadline of every call, in seconds.
        env, cwd, stderr: for the child process (env adds to this process's environment).
        session_options: callbacks and settings of `ClientSession` (roots, sampling,
            elicitation, on_log, client_info).

    Use it as a context manager, so the child is always stopped::

        with mcpsync.connect(["mcpsync", "serve"]) as session:
            print(session.call_tool("add", {"a": 2, "b": 3}))
    """
    connection = connection_for(target, env=env, cwd=cwd, stderr=stderr, headers=session_options.pop("headers", None), timeout=timeout)
    return ClientSession(connection, mode=mode, timeout=timeout, **session_options).open()


def connection_for(
    target: Sequence[str] | str,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stderr: IO[Any] | int | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> Any:
    """The connection for a target: a command list → a child process; an http(s) URL → HTTP."""
    if isinstance(target, str):
        if target.startswith(("http://", "https://")):
            from .http import HttpConnection

            return HttpConnection(target, headers=dict(headers or {}), timeout=timeout)
        raise TypeError("pass a command as a list of program and arguments (e.g. ['mcpsync', 'serve']) or an http(s) URL")
    return StdioConnection(target, env=env, cwd=cwd, stderr=stderr)
