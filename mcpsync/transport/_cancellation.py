"""The cancellation half of a request in flight, shared by every transport.

Strategy: an event a tool can poll (`ctx.cancelled`) or wait on (`ctx.wait_cancelled`), plus
callbacks for work that cannot poll, such as a call forwarded to an upstream server. Cancelling is
idempotent; a callback registered after the cancel runs at once.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger("mcpsync")


class Cancellable:
    __slots__ = ("cancel_event", "_callbacks", "_lock")

    def __init__(self) -> None:
        self.cancel_event = threading.Event()
        self._callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Run `callback` when the request is cancelled (at once if it already is)."""
        with self._lock:
            if not self.cancel_event.is_set():
                self._callbacks.append(callback)
                return
        callback()

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
