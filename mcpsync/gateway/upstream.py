"""An upstream MCP server (a command or a URL) as a `RemoteSource`: how its client session opens.

Strategy: the source's supervisor calls the connector each time it (re)connects, so every attempt
starts a fresh child or HTTP connection with the same settings. The session declares the question
capabilities (roots, sampling, elicitation) whose answers the relay carries to the call's client.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from ..protocol.versions import Era
from .remote import RemoteOptions, RemoteSource


def upstream_source(
    name: str,
    target: Sequence[str] | str,
    options: RemoteOptions,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    headers: Mapping[str, str] | None = None,
    mode: str = "auto",
    timeout: float = 60.0,
) -> RemoteSource:
    """A source for `target` (a command list, or an http(s) URL), not yet started."""
    from ..client import connection_for
    from ..client.session import ClientSession

    def connector(on_change: Callable[[str, dict[str, Any]], None], on_lost: Callable[[Exception], None]) -> Any:
        connection = connection_for(target, env=env, cwd=cwd, headers=headers)
        # The upstream's questions during a call reach that call's client (relay.py), which checks
        # each question against that client's own capabilities.
        session = ClientSession(
            connection,
            mode=mode,
            timeout=timeout,
            on_change=on_change,
            on_lost=on_lost,
            elicitation_modes=("form", "url"),
            **remote.question_handlers(),
        ).open()
        if session.era is Era.MODERN:  # a 2026-07-28 server only tells a listener about changes
            session.listen(tools=True, prompts=True, resources=True, queue_events=False)
        return session

    remote = RemoteSource(name, connector, options)
    return remote
