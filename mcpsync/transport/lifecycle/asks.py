"""The server-to-client requests of one connection (stdio) or session (HTTP) that await the
client's answer, shared by both transports.

Strategy: a table from id to the waiting future. Ids are `"mcpsync-N"`, counted per table:
strings, so a client's own ids (and a stray integer id) can never be mistaken for them. Where
several processes ask in one session (replicas sharing a store), each table's ids carry its
process's tag (`"mcpsync-TAG-N"`), so an answer routed through the bus settles exactly one ask. An ask is
registered before its frame is written, so an answer can never arrive first; the transport writes
the frame and `forget`s the id if writing fails. Futures are settled outside the lock, since
settling runs their callbacks (which may write) on the settling thread. Nothing here waits: the
asker waits on its future with its own deadline.
"""

from __future__ import annotations

import concurrent.futures
import threading
from dataclasses import dataclass
from typing import Any

from ..._futures import settle
from ...errors import McpsyncError
from ...protocol import jsonrpc
from ...protocol.jsonrpc import ErrorCode, McpError, Response


@dataclass(frozen=True, slots=True)
class _Ask:
    method: str
    future: concurrent.futures.Future[dict[str, Any]]
    exchange: Any  # the request it was asked for


class PendingAsks:
    """Asks awaiting the client's answer; see the module docstring."""

    def __init__(self, prefix: str = "mcpsync-") -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, _Ask] = {}
        self._prefix = prefix
        self._count = 0
        self._ended: str | None = None  # why later asks are refused

    def __len__(self) -> int:
        return len(self._pending)

    def open(self, exchange: Any, method: str) -> tuple[str, concurrent.futures.Future[dict[str, Any]]]:
        """A fresh id and its future, registered before anything is sent (an answer may come at
        once). Raises McpsyncError once the table has ended."""
        with self._lock:
            if self._ended is not None:
                raise McpsyncError(f"cannot send {method} to the client: {self._ended}")
            self._count += 1
            ask_id = f"{self._prefix}{self._count}"
            future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
            self._pending[ask_id] = _Ask(method, future, exchange)
        return ask_id, future

    def forget(self, ask_id: str) -> bool:
        """Stop waiting for `ask_id` (its answer, if it comes, is ignored); True if it was pending."""
        with self._lock:
            return self._pending.pop(ask_id, None) is not None

    def answer(self, response: Response) -> bool:
        """The client's answer, to the ask with its id; False when no ask awaits that id. An error
        answer fails the future with the client's McpError; a malformed one with -32603."""
        with self._lock:
            ask = self._pending.pop(response.id, None) if type(response.id) is str else None
        if ask is None:
            return False
        if response.error is not None:
            code, message = response.error.get("code"), response.error.get("message")
            if type(code) is not int or type(message) is not str:
                code, message = ErrorCode.INTERNAL_ERROR, f"the client answered {ask.method} with a malformed error"
            settle(ask.future, error=McpError(code, message, response.error.get("data")))
        elif type(response.result) is not dict:
            settle(ask.future, error=McpError(ErrorCode.INTERNAL_ERROR, f"the client answered {ask.method} with a result that is not an object"))
        else:
            settle(ask.future, result=response.result)
        return True

    def abandon(self, exchange: Any, reason: str) -> list[str]:
        """Fail the asks of one request (it was answered or cancelled); their ids, so the client
        can be told it need not answer them."""
        if not self._pending:  # the common case, without the lock: an over request adds no asks
            return []
        with self._lock:
            ids = [ask_id for ask_id, ask in self._pending.items() if ask.exchange is exchange]
            asks = [self._pending.pop(ask_id) for ask_id in ids]
        for ask in asks:
            settle(ask.future, error=McpsyncError(f"no answer to {ask.method}: {reason}"))
        return ids

    def end(self, reason: str) -> None:
        """The connection or session ended: fail every pending ask and refuse later ones."""
        with self._lock:
            if self._ended is None:
                self._ended = reason
            asks = list(self._pending.values())
            self._pending.clear()
        for ask in asks:
            settle(ask.future, error=McpsyncError(f"no answer to {ask.method}: {reason}"))


def request_frame(ask_id: str, method: str, params: dict[str, Any]) -> bytes:
    """The encoded request; McpsyncError when `params` is not JSON."""
    try:
        return jsonrpc.encode({"jsonrpc": "2.0", "id": ask_id, "method": method, "params": params})
    except jsonrpc.EncodeError as exc:
        raise McpsyncError(f"cannot send {method}: its params are not JSON ({exc})") from exc


def cancelled_frame(ask_id: str, reason: str) -> bytes:
    """Tells the client an ask needs no answer any more."""
    return jsonrpc.encode(jsonrpc.notification_frame("notifications/cancelled", {"requestId": ask_id, "reason": reason}))
