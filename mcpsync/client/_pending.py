"""A client's request on its way: registered with its session, sent once, ended once (an answer,
a timeout, a cancel, a lost connection, whichever comes first).

Why apart from the session: its way to the wire (unsent, sending, sent, withdrawn) is a small
state machine of its own, which a gateway drives directly (`prepare_request`, then `send()`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from .._futures import OneShot
from ..errors import CallCancelled, CallTimeout

log = logging.getLogger("mcpsync")

Progress = Callable[[float, "float | None", "str | None"], None]
"""Called with (progress, total, message) for each progress notification of a call."""

class Session(Protocol):
    """The session as a call sees it (a `ClientSession`): what the call needs of it."""

    timeout: float

    def _unregister(self, pending: PendingCall) -> None: ...

    def _send_request(self, request_id: Any, method: str, params: dict[str, Any] | None, progress_token: Any, timeout: float | None = None) -> None: ...

    def _cancel_on_wire(self, request_id: Any, reason: str, timeout: float | None = None) -> None: ...


class Watch(Protocol):
    """The telemetry's watch over one call (`mcpsync.telemetry`): ended once, with its outcome."""

    def end(self, result: Any, error: BaseException | None) -> None: ...


class SessionWatch(Protocol):
    """The telemetry's watch over a whole session (its duration): ended once, as it closes."""

    def end(self, version: str | None, error: BaseException | None) -> None: ...


_UNSENT, _SENDING, _SENT, _WITHDRAWN = range(4)
"""A PendingCall's way to the wire. A cancel or a timeout withdraws an unsent call (it is never
sent); one that comes while the request is being written is sent on the wire right after it, so
the server never gets the cancel first."""


class PendingCall(OneShot):
    """A request on its way: `result()` waits for it, `cancel()` withdraws it, `on_done()` hooks
    on. (Its `settle` is the session's: an answer, a timeout, a cancel, a lost connection.)"""

    __slots__ = ("id", "method", "timeout_given", "progress", "progress_token", "deadline", "watch", "_session", "_params", "_wire", "_cancel_after_send")

    def __init__(
        self,
        session: Session,
        request_id: Any,
        method: str,
        params: dict[str, Any] | None,
        progress: Progress | None = None,
        timeout: float | None = None,
    ) -> None:
        super().__init__()
        self.id = request_id
        self.method = method
        self.timeout_given = timeout
        self.progress = progress
        self.progress_token = f"mcpsync-{request_id}" if progress is not None else None
        self.deadline = time.monotonic() + timeout if timeout is not None else None  # for expire_overdue
        self._session = session
        self._params = params
        self._wire = _UNSENT
        self._cancel_after_send: str | None = None
        self.watch: Watch | None = None  # the telemetry's span of this call, if any

    def settle(self, result: Any = None, error: BaseException | None = None) -> bool:
        """End it (see `OneShot.settle`), leaving the session's table first: a late answer to it
        is dropped, and its `on_done` callbacks see a session without it."""
        if self._outcome is not None:
            return False
        self._session._unregister(self)
        return super().settle(result, error)

    def _before_wake(self, result: Any, error: BaseException | None) -> None:
        self._end_watch(result, error)

    def forget_watch(self) -> None:
        """The caller gave the call up without an outcome (a listener it closed): its span ends
        now, as a call that went well, and not again."""
        self._end_watch(None, None)

    def _end_watch(self, result: Any, error: BaseException | None) -> None:
        watch, self.watch = self.watch, None
        if watch is not None:
            try:
                watch.end(result, error)
            except Exception:
                log.exception("ending the span of %s failed", self.method)

    @property
    def on_wire(self) -> bool:
        """Whether the request has gone out (or is going out now)."""
        return self._wire in (_SENDING, _SENT)

    def send(self) -> None:
        """Send it (once; `start_request` has; not at all once it has ended, been cancelled or
        timed out first). If the send fails, the call has failed with that error (its `on_done`
        callbacks have run) and the error is raised here too."""
        with self._lock:
            if self._wire != _UNSENT or self._outcome is not None:
                return
            self._wire = _SENDING
        params, self._params = self._params, None
        session = self._session
        try:
            session._send_request(self.id, self.method, params, self.progress_token, session.timeout if self.timeout_given is None else self.timeout_given)
        except BaseException as exc:
            with self._lock:
                self._wire = _SENT
            self.settle(error=exc)
            raise
        with self._lock:
            self._wire = _SENT
            reason, self._cancel_after_send = self._cancel_after_send, None
        if reason is not None:  # a cancel came while the request was being written
            session._cancel_on_wire(self.id, reason)

    def result(self, timeout: float | None = None) -> dict[str, Any]:
        """Wait for the answer (the session's default timeout unless given); see `request()`."""
        limit = self._session.timeout if timeout is None else timeout
        if not self.wait(limit):
            self._expire(limit)
        result: dict[str, Any] = self.value()
        return result

    def _expire(self, limit: float | None) -> None:
        self._withdraw(f"timed out after {limit} s", CallTimeout(f"{self.method} got no answer within {limit} s"), tell=self.method != "initialize")

    def cancel(self, reason: str = "cancelled") -> None:
        """Tell the server to stop (a `notifications/cancelled`) and fail `result()` at once, with
        `CallCancelled`: this side's decision, not an error the server answered."""
        self._withdraw(reason, CallCancelled(f"{self.method} was cancelled: {reason}"))

    def _withdraw(self, reason: str, error: BaseException, tell: bool = True) -> None:
        """End the call with `error`; the server hears `reason` if the request is (being) sent."""
        with self._lock:
            if self._outcome is not None:
                return
            wire = self._wire
            if wire == _UNSENT:
                self._wire = _WITHDRAWN
            elif wire == _SENDING and tell:
                self._cancel_after_send = reason
        if wire == _SENT and tell:
            self._session._cancel_on_wire(self.id, reason)
        self.settle(error=error)
