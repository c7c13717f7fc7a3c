"""One stdio request in flight as a tool sees it, and the connection's questions to the client.

Strategy: an `Exchange` is a request's cancellation (`Cancellable`), its request-scoped
notifications (written under the output lock only while the request is neither answered nor
cancelled by the client) and its `ask`. `StdioServer` ends it (`finish`) once it is answered or
dropped, which fails the asks it left open.

Server-to-client requests (handshake era only): a tool's `ctx.elicit`/`sample`/`roots` reach
`Exchange.ask`, which gives the request a fresh `"mcpsync-N"` id, registers it and writes it in one
critical section of the output lock, and returns a future. The reader routes each response to its
future as soon as it decodes it (like a cancel, never queued behind other frames), so a tool waiting
for an answer cannot stall the reader. A waiter that gives up cancels the future: the id is
forgotten and the client gets `notifications/cancelled`. Asks still open when their request is
answered are failed (and cancelled on the wire); every open ask fails at end of input or shutdown.
Nothing is ever written for an ask unless the connection completed `initialize` (a 2026-07-28
connection never sees a request from the server).
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any

from ...engine.session import Session
from ...errors import McpsyncError
from ...protocol import jsonrpc
from ...protocol.jsonrpc import Request, Response
from ...protocol.versions import HANDSHAKE_ERA, claims_modern
from ..lifecycle.asks import PendingAsks, cancelled_frame, request_frame
from ..lifecycle.cancellation import Cancellable
from ..lifecycle.inflight import AnsweredOnDemand
from ._output import Output

log = logging.getLogger("mcpsync")


class Exchange(Cancellable):
    """One in-flight request: its cancellation, its request-scoped notifications and the requests
    it sends the client (`ask`)."""

    __slots__ = ("request_id", "method", "_params", "cancelled_by_client", "done", "future", "_answered", "_output", "_asks")

    release_stream = None
    """A stdio request has no stream of its own to release (the engine's `Exchange` asks)."""
    trace_headers = None
    """Nothing comes beside a frame on a pipe: its trace context is in its `_meta` or nowhere."""

    def __init__(self, request: Request, output: Output, asks: Asks) -> None:
        super().__init__()
        self.request_id = request.id
        self.method = request.method
        self._params = request.params
        self.cancelled_by_client = False
        self.done = False
        self.future: concurrent.futures.Future[None] | None = None  # the executor's work item
        self._answered = AnsweredOnDemand(self._lock)  # over once finish() is: after the response and the era commit
        self._output = output
        self._asks = asks

    @property
    def modern(self) -> bool:
        """Whether the request claims the 2026-07-28 era: asked only when its tool asks the client
        something, so not worked out for every request."""
        return claims_modern(self._params)

    @property
    def answered(self) -> concurrent.futures.Future[None]:
        """Resolved once the request is over (answered, or dropped). A forwarded call ends long
        after its worker returned, so this, not `future`, is what waits for a request. Made on
        first use: most requests are never waited for."""
        return self._answered.future()

    def finish(self) -> None:
        """Mark the request over (after its response, or instead of one); its open asks fail."""
        with self._lock:
            self.done = True
        self.forget_callbacks()
        self._asks.abandon(self)
        self._answered.end()

    def notify(self, method: str, params: dict[str, Any]) -> None:
        frame = jsonrpc.encode(jsonrpc.notification_frame(method, params))
        if not self._output.wait_for_room(len(frame)):  # outside the lock: the reader may need it
            return  # no room and no waiting (shutting down, the end of input): dropped
        with self._output.lock:
            if not (self.done or self.cancelled_by_client):
                self._output.write_locked(frame)

    def ask(self, method: str, params: dict[str, Any]) -> concurrent.futures.Future[dict[str, Any]]:
        """Send the client a request on behalf of this one (`elicitation/create`,
        `sampling/createMessage`, `roots/list`) and return a future for its answer.

        Returns:
            A future resolved with the response's `result` object, or failed with `McpError` (the
            client answered an error, or a result that is not an object) or `McpsyncError` (the
            request was answered first, or the connection closed). Cancel it to give up: the
            client is then told with `notifications/cancelled`.

        Raises:
            McpsyncError: at once, with nothing written, on a connection that has not completed
                `initialize` (so always in 2026-07-28), for a request already answered or
                cancelled, while the server is closing, or when `params` cannot be encoded.
        """
        return self._asks.ask(self, method, params)


class Asks:
    """One connection's server-to-client requests still waiting for an answer (`lifecycle.asks`).

    Refusals are decided under the output lock, against the state every writer sees; the id is
    registered before its frame is written, so its answer cannot arrive first."""

    def __init__(self, output: Output, session: Session) -> None:
        self._output = output
        self._session = session
        self._table = PendingAsks()
        self._closed: str | None = None  # why nothing more can be answered, once closing began

    def ask(self, exchange: Exchange | None, method: str, params: dict[str, Any]) -> concurrent.futures.Future[dict[str, Any]]:
        """For `exchange`, or (None) on behalf of no request: see `StdioServer.ask_client`."""
        with self._output.lock:
            self._refuse_locked(exchange, method)
        ask_id, future = self._table.open(exchange, method)
        try:
            frame = request_frame(ask_id, method, params)
            with self._output.lock:
                self._refuse_locked(exchange, method)  # again: the state may have moved meanwhile
                if not self._output.write_locked(frame):
                    raise McpsyncError(f"cannot send {method}: the connection is closed")
        except BaseException:
            self._table.forget(ask_id)
            raise
        future.add_done_callback(lambda done: self._given_up(ask_id, done))
        return future

    def _refuse_locked(self, exchange: Exchange | None, method: str) -> None:
        if (exchange is not None and exchange.modern) or self._session.era is not HANDSHAKE_ERA:
            raise McpsyncError(
                f"cannot send {method}: server-to-client requests need a connection that completed "
                "initialize (a 2026-07-28 server never sends requests; it answers input_required)"
            )
        if self._closed is not None or not self._output.usable:
            raise McpsyncError(f"cannot send {method}: {self._closed or 'the connection is closed'}")
        if exchange is not None and (exchange.done or exchange.cancelled_by_client or exchange.cancel_event.is_set()):
            raise McpsyncError(f"cannot send {method}: the request it belongs to is over or cancelled")

    def route(self, response: Response) -> None:
        """On the reader thread: hand a response to the ask it answers (or ignore it)."""
        if not self._table.answer(response):
            log.debug("ignoring a response to id %r: no request of this server is waiting for it", response.id)

    def _given_up(self, ask_id: str, future: concurrent.futures.Future[dict[str, Any]]) -> None:
        """A done callback: when the waiter cancelled the future, forget the id and tell the client."""
        if future.cancelled() and self._table.forget(ask_id):
            self._write(cancelled_frame(ask_id, "the server stopped waiting for the answer"))

    def abandon(self, exchange: Exchange) -> None:
        """The request is over: fail its asks still open and tell the client not to bother."""
        for ask_id in self._table.abandon(exchange, "the request it belongs to was answered"):
            self._write(cancelled_frame(ask_id, "the request it was asked for is over"))

    def close(self, reason: str) -> None:
        """When closing begins: refuse new asks and fail every open one (no answer can come)."""
        with self._output.lock:
            self._closed = reason
        self._table.end(reason)

    def _write(self, frame: bytes) -> None:
        with self._output.lock:
            self._output.write_locked(frame)
