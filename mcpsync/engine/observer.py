"""What watches each request the engine runs, from its start to its outcome (`Engine(observer=...)`):
`mcpsync.telemetry`'s spans and metrics.

Why a protocol here: the engine must not import OpenTelemetry (an optional extra), nor know what
watches it; it calls `begin` and the two ends, and an engine without an observer pays one attribute
read per request.
"""

from __future__ import annotations

from typing import Protocol

from ..protocol.jsonrpc import Notification, Request
from .interceptors import TransportInfo
from .outcome import Outcome
from .session import Session


class Observation(Protocol):
    """One request watched: `leave()` on the thread that began it, once the engine has returned
    there; `end(outcome)` once, with the final outcome, on whichever thread has it."""

    def leave(self) -> None: ...

    def end(self, outcome: Outcome) -> None: ...


class SessionObservation(Protocol):
    """One connection's session watched (a stdio connection): `end` once, as it closes."""

    def end(self, session: Session, error: str | None) -> None: ...


class Observer(Protocol):
    """Watches every request the engine runs; `begin` is called on the thread that runs it, before
    anything else, and must not raise."""

    def begin(self, request: Request, session: Session, transport: TransportInfo) -> Observation: ...

    def notified(self, notification: Notification, session: Session, transport: TransportInfo) -> None:
        """A notification the client sent, as the transport takes it; must not raise."""
        ...

    def session_began(self, transport: TransportInfo) -> SessionObservation:
        """A connection's session begins (its duration is measured until `end`)."""
        ...
