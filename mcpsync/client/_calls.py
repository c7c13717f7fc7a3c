"""The calls of one client session still waiting for their end: found by request id when the
answer comes, by progress token when progress does, and ended all at once when the session is.

Why apart from the session: the two indexes must change together, whoever ends a call (its
answer, a timeout, a cancel, close(), a lost connection), and that is one job; the session only
says when it accepts new calls. It shares the session's lock, so a call is never added once the
session has ended.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..errors import ProtocolViolation
from ..protocol.jsonrpc import ErrorCode, McpError, Response
from ._pending import PendingCall


class Calls:
    """A session's calls in flight, by request id and by progress token."""

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._by_id: dict[Any, PendingCall] = {}
        self._by_token: dict[Any, PendingCall] = {}

    def add(self, call: PendingCall) -> None:
        """Take in a new call (the caller holds the lock, having checked the session is open)."""
        self._by_id[call.id] = call
        if call.progress_token is not None:
            self._by_token[call.progress_token] = call

    def remove(self, call: PendingCall) -> None:
        """Forget a call as it ends."""
        with self._lock:
            self._by_id.pop(call.id, None)
            if call.progress_token is not None:
                self._by_token.pop(call.progress_token, None)

    def take(self, request_id: Any) -> PendingCall | None:
        """Forget a call without ending it (a closed listener: a late answer is dropped)."""
        with self._lock:
            return self._by_id.pop(request_id, None)

    def with_token(self, progress_token: Any) -> PendingCall | None:
        """The call a progress notification is about, if it still waits."""
        with self._lock:
            return self._by_token.get(progress_token)

    def on_wire(self) -> list[Any]:
        """The ids of the calls that have gone out (the caller holds the lock)."""
        return [request_id for request_id, call in self._by_id.items() if call.on_wire]

    def overdue(self) -> list[PendingCall]:
        """The calls whose deadline has passed."""
        now = time.monotonic()
        with self._lock:
            return [call for call in self._by_id.values() if call.deadline is not None and call.deadline <= now]

    def answer(self, response: Response) -> None:
        """End the call `response` answers: its result, its error as McpError, or
        ProtocolViolation for a result that is not an object. A response to no call is dropped
        (one that timed out or was cancelled)."""
        with self._lock:
            call = self._by_id.get(response.id)
        if call is None:
            return
        if response.error is not None:
            error = response.error
            call.settle(error=McpError(error.get("code", ErrorCode.INTERNAL_ERROR), str(error.get("message", "")), error.get("data")))
        elif not isinstance(response.result, dict):
            call.settle(error=ProtocolViolation(f"the result of request {response.id!r} is not an object"))
        else:
            call.settle(result=response.result)

    def fail_all(self, error: Exception) -> None:
        """End every call with `error` (the session closed, or its connection was lost)."""
        with self._lock:
            calls = list(self._by_id.values())
            self._by_id.clear()
            self._by_token.clear()
        for call in calls:
            call.settle(error=error)
