"""SessionOptions and ConnectionOptions: a client session's settings, and how its connection is
made, each as one value, for `connect()`, `ClientSession` and the gateway's upstreams.

Why: both take the same settings (the era mode, the deadline, the callbacks answering the server,
what the client says of itself); written once here, with their defaults, `connect()` passes the
value on instead of restating every keyword, and a program can build it once and connect many
times. The keywords of both still work: they build the value (an unknown one is a TypeError).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import IO, TYPE_CHECKING, Any

from ._input_required import MAX_INPUT_ROUNDS
from ._server_requests import Handler

if TYPE_CHECKING:
    from ..auth.client.credentials import HttpCredentials
    from ..telemetry import Telemetry

DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class SessionOptions:
    """A session's settings; each field is the `ClientSession` keyword of the same name."""

    mode: str = "auto"
    timeout: float = DEFAULT_TIMEOUT
    client_info: Mapping[str, Any] | None = None
    roots: Handler | None = None
    sampling: Handler | None = None
    elicitation: Handler | None = None
    on_log: Callable[[dict[str, Any]], None] | None = None
    on_change: Callable[[str, dict[str, Any]], None] | None = None
    on_lost: Callable[[Exception], None] | None = None
    on_elicitation_complete: Callable[[str], None] | None = None
    """Called with the id of a URL-mode elicitation the server says is done (handshake era)."""
    log_level: str | None = None
    max_input_rounds: int = MAX_INPUT_ROUNDS
    elicitation_modes: Sequence[str] = ("form",)
    roots_list_changed: bool = False
    sampling_tools: bool = False
    """With `sampling`: declare `sampling.tools`, so a server may offer the model tools (the
    callback's result may then hold `tool_use` blocks)."""
    telemetry: Telemetry | None = None
    """OpenTelemetry spans and metrics for every request sent (`mcpsync.telemetry`)."""
    extensions: Mapping[str, Mapping[str, Any]] | None = None
    """The extensions this client supports, by id, with their settings: declared in its
    `capabilities.extensions` in both eras (SEP-2133)."""
    cache: bool = False
    """Keep the lists and reads a 2026-07-28 server says may be kept, for as long as it says
    (`mcpsync.client._response_cache`)."""


def session_options(options: SessionOptions | None, **settings: Any) -> SessionOptions:
    """`options` (or the defaults) with the keywords given replacing its fields."""
    base = SessionOptions() if options is None else options
    return replace(base, **settings) if settings else base


@dataclass(frozen=True)
class ConnectionOptions:
    """How a connection is made: `env`, `cwd` and `stderr` for a child process (env adds to this
    process's environment), `headers` and `auth` for an HTTP endpoint (see `connect`)."""

    env: Mapping[str, str] | None = None
    cwd: str | os.PathLike[str] | None = None
    stderr: IO[Any] | int | None = None
    headers: Mapping[str, str] | None = None
    auth: HttpCredentials | None = None


CONNECTION_FIELDS = frozenset(field.name for field in fields(ConnectionOptions))


def split_options(
    session: SessionOptions | None, connection: ConnectionOptions | None, settings: dict[str, Any]
) -> tuple[SessionOptions, ConnectionOptions]:
    """`connect()`'s keywords shared out: those naming a `ConnectionOptions` field replace the
    connection's, the rest the session's (an unknown one is a TypeError)."""
    made = {name: settings.pop(name) for name in CONNECTION_FIELDS & settings.keys()}
    where = ConnectionOptions() if connection is None else connection
    return session_options(session, **settings), replace(where, **made) if made else where
