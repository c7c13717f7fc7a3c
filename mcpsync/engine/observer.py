"""What watches each request the engine runs, from its start to its outcome (`Engine(observer=...)`):
`mcpsync.telemetry`'s spans and metrics.

Why a protocol here: the engine must not import OpenTelemetry (an optional extra), nor know what
watches it; it calls `begin` and the two ends, and an engine without an observer pays one attribute
read per request.

What the server sends on behalf of a request is watched too (the conventions' CLIENT spans of a
server that initiates): its notifications and its requests to the client go through the exchange
`Observation.exchange` gives, and the notifications a listen is told later carry `Observation.stamp`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from ..protocol.jsonrpc import Notification, Request
from .interceptors import TransportInfo
from .outcome import Outcome, Stamp
from .seams import Exchange
from .session import Session


class Observation(Protocol):
    """One request watched: `leave()` on the thread that began it, once the engine has returned
    there; `end(outcome)` once, with the final outcome, on whichever thread has it."""

    def leave(self) -> None: ...

    def end(self, outcome: Outcome) -> None: ...

    def exchange(self, exchange: Exchange) -> Exchange:
        """`exchange` with what the request sends the client through it (notifications, requests)
        watched as the request's children."""
        ...

    @property
    def stamp(self) -> Stamp:
        """What a notification sent later on behalf of this request (a listen's) carries in its
        `_meta`: watched as the request's child when it is sent."""
        ...


class SessionObservation(Protocol):
    """One connection's session watched (a stdio connection): `end` once, as it closes."""

    def end(self, session: Session, error: str | None) -> None: ...


class Observer(Protocol):
    """Watches every request the engine runs; `begin` is called on the thread that runs it, before
    anything else, and must not raise."""

    def begin(self, request: Request, session: Session, transport: TransportInfo, trace_headers: Mapping[str, str] | None) -> Observation:
        """`trace_headers`: the trace context that came beside the request (`Exchange.trace_headers`)."""
        ...

    def notified(
        self, notification: Notification, session: Session, transport: TransportInfo, trace_headers: Mapping[str, str] | None = None
    ) -> None:
        """A notification the client sent, as the transport takes it; must not raise."""
        ...

    def session_began(self, transport: TransportInfo) -> SessionObservation:
        """A connection's session begins (its duration is measured until `end`)."""
        ...
