"""What moves between the threads serving one HTTP response: a bounded channel, the request's
exchange, and the Server-Sent Events body that drains the channel.

Strategy: whoever produces (the engine's worker, a tool's progress call, a publisher of list
changes, the thread that resolves a forwarded call) puts encoded frames into a `Channel`; only the
WSGI thread that owns the response takes them out and yields them to the WSGI server, which writes
each one before asking for the next, so nothing is buffered beyond the channel. The channel is
bounded: a request-scoped notification waits a little for room and is then dropped; the final
answer always gets in. Closing the channel wakes the reader; what is already queued is still
drained first.

The WSGI thread never blocks longer than the keep-alive interval: with nothing to send it yields
an SSE comment, and a client that went away makes that write fail, the server closes the body, and
`close()` cancels the request (2026-07-28: closing the stream is the cancellation) and releases
the stream. Nothing here blocks without a deadline.

A handshake-era request may also ask the client something (`Exchange.ask`: elicitation, sampling,
roots): the JSON-RPC request goes into the same channel, so it reaches the client on this
request's stream, and the answer comes back through the session's `PendingAsks`. Ending the
request (answered or cancelled) fails the asks still pending and tells the client, on the stream
while it is open, that they need no answer.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import McpsyncError
from ...protocol import jsonrpc
from ...protocol.jsonrpc import Request
from ...protocol.sse import sse_event
from ..lifecycle.asks import PendingAsks, cancelled_frame, request_frame
from ..lifecycle.cancellation import Cancellable
from ..lifecycle.inflight import AnsweredOnDemand

log = logging.getLogger("mcpsync")

KEEPALIVE = b": keepalive\n\n"
OPENED = b": stream open\n\n"
SSE_HEADERS = [
    ("Content-Type", "text/event-stream"),
    ("Cache-Control", "no-cache, no-transform"),
    ("X-Accel-Buffering", "no"),
]
NOTIFY_WAIT = 5.0
"""How long a request-scoped notification waits for room in a full channel before it is dropped."""

TIMEOUT = object()
"""`Channel.get` found nothing before its deadline."""
CLOSED = object()
"""`Channel.get`: the channel is closed and empty."""
RELEASE = object()
"""Put by `Exchange.release_stream`: the stream ends here, unanswered, and the client resumes it."""


@dataclass(frozen=True, slots=True)
class Event:
    """A frame with its SSE event id: what a resumable stream (a session's GET stream) carries, so
    a client that reconnects with `Last-Event-ID` is sent what came after it."""

    id: str
    frame: bytes


@dataclass(slots=True)  # not frozen: that costs an object.__setattr__ per field, every answer; read-only by convention
class Final:
    """The answer to a request: the JSON-RPC response frame and the HTTP status it gets as JSON.
    `frame` is None when nothing is to be sent (a request the client cancelled)."""

    frame: bytes | None
    status: int = 200
    claims: Any = None  # the era a successful result locks (initialize: the handshake era)
    headers: tuple[tuple[str, str], ...] = ()  # beside Content-Type (a 403's WWW-Authenticate challenge)


class Channel:
    """A bounded FIFO from any number of producers to one consumer, with deadlines everywhere.

    Light while nobody waits in it: a parked stream (a listen, a GET stream) is woken through
    `on_ready` instead, and ten thousand of them are held at once. So the items are a list (a
    queue rarely holds more than a few; a deque costs 600 bytes empty) and the condition that
    threads wait on exists only while one does; without it, nothing needs notifying."""

    def __init__(self, capacity: int) -> None:
        self._items: list[Any] = []
        self._capacity = capacity
        self._lock = threading.Lock()
        self._cond: threading.Condition | None = None
        self._waiting = 0  # threads in `_wait`
        self._closed = False
        self._waiter: Callable[[], None] | None = None

    def _wait(self, timeout: float) -> None:
        """Under the lock: release it and wait at most `timeout` for a change. The last thread to
        stop waiting drops the condition: a stream parked for hours keeps none."""
        cond = self._cond
        if cond is None:
            cond = self._cond = threading.Condition(self._lock)
        self._waiting += 1
        try:
            cond.wait(timeout)
        finally:
            self._waiting -= 1
            if not self._waiting:
                self._cond = None

    def _notify(self) -> None:
        """Under the lock: wake the threads waiting, if any."""
        if self._cond is not None:
            self._cond.notify_all()

    def _changed(self) -> Callable[[], None] | None:
        """Under the lock: wake the threads waiting, and hand back the consumer's `on_ready` wake-up."""
        self._notify()
        waiter, self._waiter = self._waiter, None
        return waiter

    def on_ready(self, wake: Callable[[], None]) -> bool:
        """Call `wake()` once, from the producing thread, when an item arrives or the channel
        closes (for a consumer that waits without a thread); False, registering nothing, when an
        item is there already or the channel is closed."""
        with self._lock:
            if self._items or self._closed:
                return False
            self._waiter = wake
            return True

    @property
    def closed(self) -> bool:
        return self._closed

    def room(self) -> int:
        """How many more items fit before the capacity."""
        with self._lock:
            return max(0, self._capacity - len(self._items))

    def peek(self) -> Any:
        """The next item without taking it; TIMEOUT when there is none."""
        with self._lock:
            return self._items[0] if self._items else TIMEOUT

    def clear(self) -> int:
        """Drop what is queued (a resumed stream is refilled from its log); how many were dropped."""
        with self._lock:
            count = len(self._items)
            self._items.clear()
            self._notify()
            return count

    def put(self, item: Any, *, wait: float = 0.0, force: bool = False) -> bool:
        """Queue `item`; with `force` even past the capacity. False if the channel is closed, or
        still full after `wait` seconds."""
        deadline = time.monotonic() + wait
        with self._lock:
            while not self._closed and not force and len(self._items) >= self._capacity:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._wait(remaining)
            if self._closed:
                return False
            self._items.append(item)
            waiter = self._changed()
        if waiter is not None:
            waiter()
        return True

    def finish(self, item: Any) -> bool:
        """Queue a last item and close, in one step; False if already closed."""
        with self._lock:
            if self._closed:
                return False
            self._items.append(item)
            self._closed = True
            waiter = self._changed()
        if waiter is not None:
            waiter()
        return True

    def get(self, timeout: float) -> Any:
        """The next item; TIMEOUT if none came within `timeout`; CLOSED once closed and drained."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._lock:
            while not self._items:
                if self._closed:
                    return CLOSED
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return TIMEOUT
                self._wait(remaining)
            item = self._items.pop(0)
            self._notify()
            return item

    def wait(self, timeout: float) -> None:
        """Until an item is there or the channel closes, at most `timeout` seconds; takes nothing."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._lock:
            while not (self._items or self._closed):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._wait(remaining)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            waiter = self._changed()
        if waiter is not None:
            waiter()


class Exchange(Cancellable):
    """One request in flight over HTTP, as the engine sees it (`notify`, `ask`, `cancel_event`,
    `on_cancel`) and as the transport finishes it (`answer`, `subscribe`, `cancel`).

    `asks` is the session's table of server-to-client requests; None where the request may not
    send any (2026-07-28, `initialize`). `trace_headers`: the trace context its POST carried as
    headers, for the observer (only read when the server is traced)."""

    def __init__(
        self, request: Request, *, streams: bool, capacity: int, asks: PendingAsks | None = None, trace_headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__()
        self.request = request
        self.trace_headers = trace_headers
        self._capacity = capacity
        self._channel: Channel | None = None  # made when first needed: an answer in hand never is
        self._channel_lock = threading.Lock()  # its own: `ask` reads the channel under `_lock`
        self.streams = streams  # request-scoped notifications may go out (as SSE)
        self._answered = AnsweredOnDemand(self._lock)
        self._on_answered: list[Callable[[], None]] = []  # the transport's own callbacks (`when_answered`)
        self.session_id: str | None = None  # a handshake-era session's request: its stream may resume
        self.deadline: float | None = None  # when it is answered -32603 if still running
        self._asks = asks if streams else None
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    @property
    def answered(self) -> concurrent.futures.Future[None]:
        """A future resolved once the request is answered, made when first asked for (a shutdown
        waits on it). The transport's own callbacks go to `when_answered`."""
        return self._answered.future()

    def when_answered(self, callback: Callable[[], None]) -> None:
        """Run `callback()` once the request is answered, on the thread that answers it (at once
        if it is answered already)."""
        with self._lock:
            if not self._answered.over:
                self._on_answered.append(callback)
                return
        callback()

    @property
    def channel(self) -> Channel:
        """What goes to the client on this request's response, in order (see `Channel`)."""
        channel = self._channel
        if channel is None:
            with self._channel_lock:
                if self._channel is None:
                    self._channel = Channel(self._capacity)
                channel = self._channel
        return channel

    # -- the engine's side ---------------------------------------------------------------------
    def notify(self, method: str, params: dict[str, Any]) -> None:
        """A request-scoped notification (progress, log): onto this request's stream."""
        if self._done or not self.streams or self.cancel_event.is_set():
            return
        frame = jsonrpc.encode(jsonrpc.notification_frame(method, params))
        if not self._done and not self.channel.put(frame, wait=NOTIFY_WAIT):
            log.debug("dropped %s for request %r: its stream is closed or full", method, self.request.id)

    def ask(self, method: str, params: dict[str, Any]) -> concurrent.futures.Future[dict[str, Any]]:
        """Send the client a request on this request's stream (elicitation/create,
        sampling/createMessage, roots/list) and return a future for its answer.

        The future resolves with the client's `result`; it fails with `McpError` when the client
        answered an error, and with `McpsyncError` when the request ends (answered, cancelled, the
        client went away) or the session ends first. Cancelling it forgets the id and sends the
        client `notifications/cancelled` on the stream if it is still open. The caller waits on
        the future with its own deadline.

        Raises:
            McpsyncError: at once, with nothing written, when this request may not send requests
                (2026-07-28, `initialize`), is already answered or cancelled, its stream is closed,
                or its session has ended, or `params` is not JSON.
        """
        asks = self._asks
        if asks is None:
            raise McpsyncError(
                f"cannot send {method} to the client: a {self.request.method} request over HTTP sends no "
                "requests (a 2026-07-28 request returns input_required instead; initialize never asks)"
            )
        # Under the lock that answer() and cancel() take to end the request: an ask is registered
        # and written wholly before the request ends (which then fails it) or not at all. The
        # frame goes past the channel's bound, without waiting: an asker waits for each answer,
        # so asks are few, and what a client must answer is never dropped.
        with self._lock:
            if self._done:
                raise McpsyncError(f"cannot send {method} to the client: the request is already answered")
            if self.cancel_event.is_set():
                raise McpsyncError(f"cannot send {method} to the client: the request was cancelled")
            ask_id, future = asks.open(self, method)
            try:
                frame = request_frame(ask_id, method, params)
            except McpsyncError:
                asks.forget(ask_id)
                raise
            if not self.channel.put(frame, force=True):
                asks.forget(ask_id)
                raise McpsyncError(f"cannot send {method} to the client: the request's stream is closed")
        future.add_done_callback(lambda settled: self._ask_settled(asks, ask_id, settled))
        return future

    def _ask_settled(self, asks: PendingAsks, ask_id: str, future: concurrent.futures.Future[dict[str, Any]]) -> None:
        """The asker gave up (cancelled the future): forget the id and tell the client."""
        if future.cancelled() and asks.forget(ask_id):
            self._tell_cancelled([ask_id], "the server no longer waits for the answer")

    def _tell_cancelled(self, ask_ids: list[str], reason: str) -> None:
        """Onto the stream while it is open, past its capacity: at most one per ask, and the
        thread cancelling (a WSGI thread, an asker) must not wait for room."""
        for ask_id in ask_ids:
            if not self.channel.put(cancelled_frame(ask_id, reason), force=True):
                log.debug("could not cancel %s: the stream of request %r is closed", ask_id, self.request.id)

    def _abandon_asks(self, reason: str) -> None:
        """The request ended: its pending asks fail, and the client hears they need no answer."""
        if self._asks is not None:
            ids = self._asks.abandon(self, reason)
            if ids:
                self._tell_cancelled(ids, reason)

    def release_stream(self) -> bool:
        """End this request's event stream now, before its answer, for the client to resume it
        with `Last-Event-ID` (SEP-1699 polling: a long tool need not hold a connection). Only a
        handshake-era session's request streams resumably; False, doing nothing, for any other,
        and once it is answered or cancelled."""
        if self.session_id is None or not self.streams or self._done or self.cancel_event.is_set():
            return False
        return self.channel.put(RELEASE, force=True)

    # -- the transport's side ------------------------------------------------------------------
    def _end(self) -> bool:
        with self._lock:
            if self._done:
                return False
            self._done = True
        return True

    def answer(self, final: Final) -> bool:
        """Send the response (if the stream is still there) and end the request; once only."""
        if not self._end():
            return False
        self._abandon_asks("the request ended before the client answered")
        self.channel.finish(final)
        self._set_answered()
        return True

    def answer_here(self) -> bool:
        """End the request with its answer sent by the calling thread itself, not through the
        channel (the thread that ran it inline has the answer in hand); False, ending nothing, if
        it was answered already (a shutdown's answer, in the channel or written by the server)."""
        if not self._end():
            return False
        self._abandon_asks("the request ended before the client answered")
        self._set_answered()
        return True

    def subscribe(self, ack: bytes) -> bool:
        """An accepted listen: its acknowledgement opens a stream that only its subscription feeds."""
        if not self._end():
            return False
        self.channel.put(ack, force=True)
        self._set_answered()
        return True

    def cancel(self, reason: str = "the request was cancelled") -> None:
        """Cancel the request (see `Cancellable.cancel`) and fail the asks it still waits on."""
        super().cancel()
        self._abandon_asks(reason)

    def _set_answered(self) -> None:
        self._answered.end()
        with self._lock:  # a callback given from now on runs at once (`when_answered`)
            callbacks, self._on_answered = self._on_answered, []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("a callback of an answered request failed")


class SseBody:
    """The WSGI body of an event stream: yields what the channel delivers as SSE events, a comment
    every `keepalive` seconds of silence, and ends after the final answer or when the channel
    closes. At `deadline` it calls `on_deadline()` once (which answers the request into the
    channel) and goes on reading; without `on_deadline` it ends there (a GET stream whose token
    expired: the session's channel stays open for the next one). `on_close(completed)` runs once
    when the server closes the body; `completed` is False when the stream was cut short (a
    client that went away). `prime`, when given, is sent first instead of the opening comment (a
    resumable stream's priming event, `sse_priming`, and what it replays); `number(frame)`, when
    given, makes each frame an event with its id (a resumable POST stream's `StreamLog.event`);
    `on_event(id)` is told the id of each `Event` as it is handed to the server to write (where a
    session's GET stream got to)."""

    def __init__(
        self,
        channel: Channel,
        *,
        keepalive: float,
        first: bytes | None = None,
        prime: bytes | None = None,
        number: Callable[[bytes], bytes] | None = None,
        on_event: Callable[[str], None] | None = None,
        deadline: float | None = None,
        on_deadline: Callable[[], None] | None = None,
        on_close: Callable[[bool], None] | None = None,
    ) -> None:
        self._channel = channel
        self._keepalive = keepalive
        self._event = sse_event if number is None else number
        self._on_event = on_event
        if first is None:
            self._pending: bytes | None = OPENED if prime is None else prime
        else:  # the first frame opens the stream (after the priming event, if any)
            self._pending = self._event(first) if prime is None else prime + self._event(first)
        self._deadline = deadline
        self._on_deadline = on_deadline
        self._on_close = on_close
        self._finished = False
        self._released = False  # ended by `release_stream`: cut short on purpose, to be resumed
        self._closed = False
        self._quiet_until = time.monotonic() + keepalive  # when a keep-alive comment is due

    def __iter__(self) -> SseBody:
        return self

    def __next__(self) -> bytes:
        """Under any WSGI server: `take`, waiting on the channel while nothing is due."""
        while True:
            now = time.monotonic()
            piece = self.take(now)
            if piece is not None:
                return piece
            self._channel.wait(self._due() - now)

    def _due(self) -> float:
        """When `take` has something anyway: the next keep-alive, or the request's deadline."""
        return self._quiet_until if self._deadline is None else min(self._quiet_until, self._deadline)

    # -- without a thread: mcpsync's own server parks the stream between pieces (`Parkable`) ------
    def take(self, now: float) -> bytes | None:
        """The next piece if one is ready, else None; StopIteration once the stream has ended.
        The same pieces as iterating, in the same order, but never waiting."""
        chunk = self._take(now)
        if chunk is not None:
            self._quiet_until = now + self._keepalive
        return chunk

    def _take(self, now: float) -> bytes | None:
        if self._pending is not None:
            chunk, self._pending = self._pending, None
            return chunk
        while not self._finished:
            item = self._channel.get(0.0)
            if isinstance(item, Final):
                self._finished = True
                if item.frame is not None:
                    return self._event(item.frame)
            elif item is CLOSED:
                self._finished = True
            elif item is RELEASE:
                self._finished = self._released = True
            elif item is TIMEOUT:
                if self._deadline is not None and now >= self._deadline:
                    self._deadline = None
                    if self._on_deadline is None:
                        self._finished = True
                        break
                    self._on_deadline()  # answers into the channel: taken on the next turn
                    continue
                return KEEPALIVE if now >= self._quiet_until else None
            elif isinstance(item, Event):
                if self._on_event is not None:
                    self._on_event(item.id)
                return sse_event(item.frame, item.id)
            else:
                return self._event(item)
        raise StopIteration

    def park(self, wake: Callable[[], None]) -> float | None:
        """Have `wake()` called when the channel has something; when `take` is due anyway (the
        next keep-alive, or the request's deadline). 0.0: something is there already."""
        if self._finished or not self._channel.on_ready(wake):
            return 0.0
        return self._due()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            try:
                self._on_close(self._finished and not self._released)
            except Exception:
                log.exception("closing an HTTP stream failed")
