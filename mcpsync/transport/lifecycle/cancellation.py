"""The cancellation half of a request in flight, shared by every transport.

Strategy: an event a tool can poll (`ctx.cancelled`) or wait on (`ctx.wait_cancelled`), plus
callbacks for work that cannot poll, such as a call forwarded to an upstream server. Cancelling is
idempotent; a callback registered after the cancel runs at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("mcpsync")


class Cancellable:
    """A request's cancellation: its flag, the Event a waiting thread sleeps on (made only when
    one waits: most requests are never waited on), and its callbacks. It is its own
    `cancel_event` (`is_set`, `wait`), the signal a `Context` reads."""

    __slots__ = ("_cancelled", "_event", "_callbacks", "_lock")

    def __init__(self) -> None:
        self._cancelled = False
        self._event: threading.Event | None = None
        self._callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    @property
    def cancel_event(self) -> Cancellable:
        return self

    def is_set(self) -> bool:
        """True once the request is cancelled."""
        return self._cancelled

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the request is cancelled, at most `timeout` seconds; True if it is."""
        with self._lock:
            if self._cancelled:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Run `callback` when the request is cancelled (at once if it already is)."""
        with self._lock:
            if not self._cancelled:
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
            if self._cancelled:
                return
            self._cancelled = True
            callbacks, self._callbacks = self._callbacks, []
            event = self._event
        if event is not None:
            event.set()
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("a cancel callback failed")
