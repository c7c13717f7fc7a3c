"""Change events from a server, as an iterator a script can loop over.

Strategy: the session's reader thread pushes events into a queue; the caller's thread takes them
out. The same `Listener` serves both eras: fed by a tagged `subscriptions/listen` stream in
2026-07-28, or by the handshake era's unsolicited notifications (filtered to what was asked for).
Closing it unsubscribes (a `notifications/cancelled` for the listen, or resources/unsubscribe).
"""

from __future__ import annotations

import enum
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .._futures import OneShot

_KIND_OF_METHOD = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
}


class _End(enum.Enum):
    """What ends a listener's queue: an enum member, so `event is _END` narrows for checkers."""

    END = "end"


_END = _End.END
# How often a blocked iteration re-checks that the listener is still open.
_ITERATION_SLICE = 1.0


@dataclass(frozen=True, slots=True)
class ListChanged:
    """The server's list of `kind` ("tools", "prompts" or "resources") changed: list it again."""

    kind: str


@dataclass(frozen=True, slots=True)
class ResourceUpdated:
    """The content of the resource at `uri` changed: read it again."""

    uri: str


Event = ListChanged | ResourceUpdated


class Listener:
    """An open subscription. Iterate for events; `close()` (or leaving a `with` block) ends it."""

    def __init__(
        self,
        subscription_id: Any,
        stop: Callable[[], None],
        *,
        kinds: frozenset[str] | None = None,
        uris: tuple[str, ...] = (),
        queue_events: bool = True,
    ) -> None:
        self.subscription_id = subscription_id
        self.accepted: dict[str, Any] = {}
        self._stop = stop
        self._kinds = kinds
        self._uris = uris
        self._queue_events = queue_events
        self._events: queue.SimpleQueue[Event | _End] = queue.SimpleQueue()
        self._acked = threading.Event()
        self._closed = False
        self._ended = False
        self.error: Exception | None = None

    # -- the caller's side ------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        while True:
            event = self.next_event(_ITERATION_SLICE)
            if event is not None:
                return event
            if self._ended:  # next_event drained what was queued before the end
                raise StopIteration

    def next_event(self, timeout: float) -> Event | None:
        """The next event, or None if none came within `timeout` seconds (or the listener ended)."""
        try:
            event = self._events.get(timeout=timeout)
        except queue.Empty:
            return None
        if event is _END:
            self._events.put(_END)  # keep telling every later reader
            return None
        return event

    @property
    def closed(self) -> bool:
        """True once closed by the caller or ended by the server (see `error` for why)."""
        return self._ended

    def close(self) -> None:
        """Unsubscribe. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop()
        self._finish()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the session's side -----------------------------------------------------------------------
    def _wait_ack(self, timeout: float, outcome: OneShot) -> bool:
        outcome.on_done(lambda _result, _error: self._acked.set())
        if not self._acked.wait(timeout):
            return False
        error = outcome.error()
        if not self.accepted and error is not None:
            raise error
        return True

    def _acknowledge(self, accepted: dict[str, Any]) -> None:
        self.accepted = accepted
        self._acked.set()

    def _deliver(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/subscriptions/acknowledged":
            notifications = params.get("notifications")
            self._acknowledge(notifications if isinstance(notifications, dict) else {})
            return
        if not self._queue_events:
            return  # kept open only so the server sends changes (seen through on_change)
        kind = _KIND_OF_METHOD.get(method)
        if kind is not None:
            if self._kinds is None or kind in self._kinds:
                self._events.put(ListChanged(kind))
        elif method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
            uri = params["uri"]
            if self.subscription_id is not None or any(uri == u or uri.startswith(u.rstrip("/") + "/") for u in self._uris):
                self._events.put(ResourceUpdated(uri))

    def _finish(self, error: Exception | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        self.error = error
        self._events.put(_END)
