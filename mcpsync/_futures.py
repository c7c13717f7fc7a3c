"""Answers that arrive once, from whichever thread has them first.

Strategy: an answer can race a cancel or a timeout (the waiter gave up) or a duplicate (a late
response); the first settles it and the rest are dropped, never raised at the thread that
happened to bring them. `settle` does this for a `concurrent.futures.Future`; `OneShot` is the
same contract without the Future's machinery, for the objects made once per request on the hot
paths (a client's pending call, a gateway's forwarded call).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("mcpsync")

DoneCallback = Callable[[Any, "BaseException | None"], None]
"""Called with (result, None) or (None, error)."""


def settle(future: concurrent.futures.Future[Any], *, result: Any = None, error: BaseException | None = None) -> bool:
    """Resolve (or fail, with `error`) unless already settled or cancelled; True if this did."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        return False
    return True


class OneShot:
    """A result or an error, settled once; callbacks run on the settling thread.

    Lighter than a `concurrent.futures.Future`, which builds a Condition (and its RLock) up front:
    here the Event exists only once a thread waits, and callbacks are dropped once they have run,
    so a callback that refers back to its owner makes no reference cycle for the collector."""

    __slots__ = ("_lock", "_outcome", "_callbacks", "_event")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._outcome: tuple[Any, BaseException | None] | None = None
        self._callbacks: list[DoneCallback] | None = None
        self._event: threading.Event | None = None

    def done(self) -> bool:
        return self._outcome is not None

    def settle(self, result: Any = None, error: BaseException | None = None) -> bool:
        """End it with `result`, or with `error`; False (and nothing happens) if it had ended."""
        with self._lock:
            if self._outcome is not None:
                return False
            self._outcome = outcome = (None, error) if error is not None else (result, None)
            callbacks, self._callbacks = self._callbacks, None
            event = self._event
        self._before_wake(*outcome)
        if event is not None:
            event.set()
        if callbacks:
            for callback in callbacks:
                try:
                    callback(*outcome)
                except Exception:
                    log.exception("a completion callback raised")
        return True

    def _before_wake(self, result: Any, error: BaseException | None) -> None:
        """A subclass's last word on the settling thread, before a waiting thread wakes (the
        client ends a request's span here, so the caller's next span never overlaps it)."""

    def on_done(self, callback: DoneCallback) -> None:
        """`callback(result, None)` or `callback(None, error)` once it ends, on the thread that
        ends it; at once, here, if it has. A callback's exception is logged, not raised."""
        with self._lock:
            outcome = self._outcome
            if outcome is None:
                if self._callbacks is None:
                    self._callbacks = [callback]
                else:
                    self._callbacks.append(callback)
                return
        _run(callback, outcome)

    def wait(self, timeout: float | None) -> bool:
        """Wait until it has ended, at most `timeout` seconds; True if it has."""
        with self._lock:
            if self._outcome is not None:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def value(self) -> Any:
        """The result, or raise the error. Only once it has ended."""
        outcome = self._outcome
        if outcome is None:
            raise RuntimeError("not settled yet")
        result, error = outcome
        if error is not None:
            raise error
        return result

    def error(self) -> BaseException | None:
        """The error it ended with (None while pending or after a result)."""
        outcome = self._outcome
        return None if outcome is None else outcome[1]


def _run(callback: DoneCallback, outcome: tuple[Any, BaseException | None]) -> None:
    try:
        callback(*outcome)
    except Exception:
        log.exception("a completion callback raised")
