"""What the engine needs of the layers around it: a transport's request in flight (`Exchange`),
and a gateway's tool that forwards its calls (`ForwardedTool`).

Why a protocol: the engine runs a request for either transport (and for a test's fake), and a
`Context` it builds talks back to the client through that request. Naming what it uses here, and
nothing more, lets mypy check every transport's exchange against it, where the engine used to take
`Any` and ask it `getattr`. What a transport cannot do it says with None: stdio has no stream to
release, a test's fake may ask nothing of the client. A catalog tool that is not a local `Tool` is
a `ForwardedTool`: the engine starts its call and answers when the upstream does, and the gateway's
`RemoteTool` is checked against the protocol where it is defined.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..catalog.context import AskClient, CancelSignal, Context, Notify
from .outcome import Later


class Exchange(Protocol):
    """One request as the engine sees it: how to tell the client something about it, whether it
    was cancelled, and (where the transport can) how to ask the client and release its stream."""

    @property
    def cancel_event(self) -> CancelSignal:
        """Set once the request is cancelled (`is_set`, `wait`)."""
        ...

    @property
    def notify(self) -> Notify:
        """Sends a notification about this request to the client (dropped once it has ended)."""
        ...

    @property
    def on_cancel(self) -> Callable[[Callable[[], None]], None] | None:
        """Runs a callback when the request is cancelled; None: nothing to run it."""
        ...

    @property
    def ask(self) -> AskClient | None:
        """Sends a request to the client (handshake era) and gives its answer's future; None where
        the transport cannot."""
        ...

    @property
    def trace_headers(self) -> Mapping[str, str] | None:
        """The W3C trace context that came beside the message, not in it (HTTP's `traceparent`
        and `tracestate` headers), for the observer; None where none came (stdio)."""
        ...

    @property
    def release_stream(self) -> Callable[[], bool] | None:
        """Ends the request's stream early (HTTP: the client polls for the rest); None where
        there is no stream to release."""
        ...


class ForwardedTool(Protocol):
    """A tool served by another server (the gateway's `RemoteTool`): its call is started, not run,
    and the engine finishes the request when it ends, with no worker waiting meanwhile."""

    @property
    def name(self) -> str: ...

    def start(self, arguments: dict[str, Any], ctx: Context) -> Later:
        """Send the call on; the answer (or the failure) arrives through the `Later`."""
        ...

    @property
    def task(self) -> str:
        """"forbidden", "optional" or "required": whether a call may run as a task (`run_task`)."""
        ...

    def run_task(self, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """The call as a task's function: blocks until the other server's outcome, on the task pool."""
        ...
