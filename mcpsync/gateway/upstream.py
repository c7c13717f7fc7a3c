"""An upstream MCP server (a command or a URL) as a `RemoteSource`: how its client session opens.

Strategy: the source's supervisor calls the connector each time it (re)connects, so every attempt
starts a fresh child or HTTP connection with the same settings; the connector makes the session
and the supervisor opens it (so closing the gateway reaches a session still being opened).

A command upstream is stopped on a shorter budget than a client gives its own server
(`STOP_BUDGET`, below the client's `CLOSE_GRACE`): a gateway that a client closes has stopped its
upstreams, all at once (Catalog.close_remotes), before that client's patience ends. Its process
group is told to the source's watchdog, which stops it if the gateway is killed first. The
session declares the question capabilities (roots, with `listChanged`, sampling, elicitation)
whose answers the relay carries to the call's client, or, outside a call, gives the roots (relay.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..client.session import ClientSession
from ..client.stdio import KILL_WAIT, StdioConnection
from ..protocol.versions import Era
from .relay import ClientRoots
from .remote import RemoteOptions, RemoteSource

if TYPE_CHECKING:
    from ..auth.client.credentials import HttpCredentials
    from ..telemetry import Telemetry

STOP_EXIT_GRACE = 1.0
"""Seconds an upstream gets to exit by itself once the gateway closes its stdin."""
STOP_TERM_GRACE = 0.5
"""Seconds between SIGTERM and SIGKILL to an upstream's process group that did not exit."""
STOP_BUDGET = STOP_EXIT_GRACE + STOP_TERM_GRACE + KILL_WAIT
"""The longest the gateway takes to stop one upstream's child (every upstream at once)."""


class UpstreamSession(ClientSession):
    """The gateway's session with one upstream: a 2026-07-28 upstream is listened to as soon as it
    is open, since it tells only a listener about changes."""

    def open(self) -> UpstreamSession:
        super().open()
        if self.era is Era.MODERN:
            self.listen(tools=True, prompts=True, resources=True, queue_events=False)
        return self


def upstream_source(
    name: str,
    target: Sequence[str] | str,
    options: RemoteOptions,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    headers: Mapping[str, str] | None = None,
    auth: HttpCredentials | None = None,
    mode: str = "auto",
    timeout: float = 60.0,
    client_roots: ClientRoots | None = None,
    telemetry: Telemetry | None = None,
) -> RemoteSource:
    """A source for `target` (a command list, or an http(s) URL), not yet started. `client_roots`
    answers the upstream's `roots/list` outside a call when `options.roots` is not set."""
    from ..client import ConnectionOptions, connection_for

    def connector(on_change: Callable[[str, dict[str, Any]], None], on_lost: Callable[[Exception], None]) -> UpstreamSession:
        # The upstream's questions during a call reach that call's client (relay.py), which checks
        # each question against that client's own capabilities.
        handlers = remote.question_handlers()
        if isinstance(target, str) or auth is not None:
            connection = connection_for(target, ConnectionOptions(env=env, cwd=cwd, headers=headers, auth=auth))  # HTTP (or its TypeError)
        else:
            connection = StdioConnection(target, env=env, cwd=cwd, close_grace=STOP_EXIT_GRACE, term_grace=STOP_TERM_GRACE, watchdog=remote.watchdog)
        return UpstreamSession(
            connection,
            mode=mode,
            timeout=timeout,
            on_change=on_change,
            on_lost=on_lost,
            elicitation_modes=("form", "url"),
            roots_list_changed=True,
            roots=handlers["roots"],
            sampling=handlers["sampling"],
            elicitation=handlers["elicitation"],
            telemetry=telemetry,  # a forwarded call's span is a child of the gateway's server span
        )

    remote = RemoteSource(name, connector, options, client_roots=client_roots)
    return remote
