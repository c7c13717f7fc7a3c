"""The cancellation half of a request in flight, shared by every transport.

Strategy: an event a tool can poll (`ctx.cancelled`) or wait on (`ctx.wait_cancelled`), plus
callbacks for work that cannot poll, such as a call forwarded to an upstream server. Cancelling is
idempotent; a callback registered after the cancel runs at once. Every request has one, and few
are ever waited on, so the event is a `LazyEvent`.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger("mcpsync")


class LazyEvent:
    """`threading.Event`'s `is_set`, `set` and `wait`, with the Event (a Condition and its lock
    underneath) made only when a thread waits: most requests are never waited on."""

    __slots__ = ("_flag", "_event", "_lock")

    def __init__(self) -> None:
        self._flag = False
        self._event: threading.Event | None = None
        self._lock = threading.Lock()

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        with self._lock:
            self._flag = True
            event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: float | None = None) -> bool:
        with self._lock:
            if self._flag:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)


class Cancellable:
    __slots__ = ("cancel_event", "_callbacks", "_lock")

    def __init__(self) -> None:
        self.cancel_event = LazyEvent()
        self._callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Run `callback` when the request is cancelled (at once if it already is)."""
        with self._lock:
            if not self.cancel_event.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def forget_callbacks(self) -> None:
        """The request is over, so a cancel can change nothing: drop its callbacks. (They refer to
        the request's context, which refers back here: kept, every request would leave a
        reference cycle for the garbage collector.)"""
        with self._lock:
            self._callbacks = []

    def cancel(self) -> None:
        """Mark the request cancelled and run its cancel callbacks (e.g. cancel an upstream call)."""
        with self._lock:
            if self.cancel_event.is_set():
                return
            self.cancel_event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("a cancel callback failed")
