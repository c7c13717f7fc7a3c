"""What one execution produced, as a value the transport matches on (never `None`).

Strategy: the transport encodes a `Success` or `Failure` as the response, registers a `Subscribed`
and writes its acknowledgement, and stays silent for a `NoResponse`. `claims` tells the transport
which era to lock once the result has been written (the lock point of BEHAVIOR.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..protocol.jsonrpc import McpError
from ..protocol.versions import Era


# Made once per request (or more, through interceptors): slotted, not frozen (a frozen dataclass
# pays an `object.__setattr__` call per field at creation). Read-only by convention.
@dataclass(slots=True)
class Success:
    result: dict[str, Any]
    claims: Era | None = None


@dataclass(slots=True)
class Failure:
    error: McpError


Stamp = Callable[[str, dict[str, Any]], dict[str, str]]
"""Given a notification's method and params as it is sent, the keys its `_meta` gets (the trace
context of a watched listen: `engine.observer`); {} when there is nothing to add."""


@dataclass(frozen=True, slots=True)
class Subscribed:
    """An accepted `subscriptions/listen`: the transport writes the ack and owns the subscription.
    `stamp`: what each notification told to it carries (a traced listen's context), or None."""

    request_id: Any
    accepted: dict[str, Any]
    stamp: Stamp | None = None


@dataclass(frozen=True, slots=True)
class NoResponse:
    reason: str


@dataclass(slots=True)
class Deferred:
    """The outcome comes later (a call forwarded upstream): `then(deliver)` has `deliver(outcome)`
    called once with the final outcome, on the thread that completes it (at once if it has). The
    transport answers then; no worker waits meanwhile. (A callback, not a Future: this is the
    gateway's hot path, and nobody ever blocks on it.)"""

    then: Callable[[Callable[[Outcome], None]], None]


Outcome = Success | Failure | Subscribed | NoResponse | Deferred


class Later(Protocol):
    """What an operation may return instead of a result: something that ends later (a
    `PendingCall` of the client), with `result` or `error`, on whichever thread ends it."""

    def on_done(self, callback: Callable[[Any, BaseException | None], None]) -> None: ...
