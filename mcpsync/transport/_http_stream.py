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
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..protocol import jsonrpc
from ._cancellation import Cancellable
from ..protocol.jsonrpc import Request

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


@dataclass(frozen=True, slots=True)
class Final:
    """The answer to a request: the JSON-RPC response frame and the HTTP status it gets as JSON.
    `frame` is None when nothing is to be sent (a request the client cancelled)."""

    frame: bytes | None
    status: int = 200
    claims: Any = None  # the era a successful result locks (initialize: the handshake era)


def sse_event(frame: bytes) -> bytes:
    """One compact JSON-RPC frame (a single line) as an SSE `message` event."""
    return b"event: message\ndata: " + frame.rstrip(b"\n") + b"\n\n"


class Channel:
    """A bounded FIFO from any number of producers to one consumer, with deadlines everywhere."""

    def __init__(self, capacity: int) -> None:
        self._items: collections.deque[Any] = collections.deque()
        self._capacity = capacity
        self._cond = threading.Condition()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def put(self, item: Any, *, wait: float = 0.0, force: bool = False) -> bool:
        """Queue `item`; with `force` even past the capacity. False if the channel is closed, or
        still full after `wait` seconds."""
        deadline = time.monotonic() + wait
        with self._cond:
            while not self._closed and not force and len(self._items) >= self._capacity:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            if self._closed:
                return False
            self._items.append(item)
            self._cond.notify_all()
            return True

    def finish(self, item: Any) -> bool:
        """Queue a last item and close, in one step; False if already closed."""
        with self._cond:
            if self._closed:
                return False
            self._items.append(item)
            self._closed = True
            self._cond.notify_all()
            return True

    def get(self, timeout: float) -> Any:
        """The next item; TIMEOUT if none came within `timeout`; CLOSED once closed and drained."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while not self._items:
                if self._closed:
                    return CLOSED
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return TIMEOUT
                self._cond.wait(remaining)
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class Exchange(Cancellable):
    """One request in flight over HTTP, as the engine sees it (`notify`, `cancel_event`,
    `on_cancel`) and as the transport finishes it (`answer`, `subscribe`, `drop`)."""

    def __init__(self, request: Request, *, streams: bool, capacity: int) -> None:
        super().__init__()
        self.request = request
        self.channel = Channel(capacity)
        self.streams = streams  # request-scoped notifications may go out (as SSE)
        self.answered: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    # -- the engine's side ---------------------------------------------------------------------
    def notify(self, method: str, params: dict[str, Any]) -> None:
        """A request-scoped notification (progress, log): onto this request's stream."""
        if self._done or not self.streams or self.cancel_event.is_set():
            return
        frame = jsonrpc.encode(jsonrpc.notification_frame(method, params))
        if not self._done and not self.channel.put(frame, wait=NOTIFY_WAIT):
            log.debug("dropped %s for request %r: its stream is closed or full", method, self.request.id)

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
        self.channel.finish(final)
        self._set_answered()
        return True

    def subscribe(self, ack: bytes) -> bool:
        """An accepted listen: its acknowledgement opens a stream that only its subscription feeds."""
        if not self._end():
            return False
        self.channel.put(ack, force=True)
        self._set_answered()
        return True

    def _set_answered(self) -> None:
        try:
            self.answered.set_result(None)
        except concurrent.futures.InvalidStateError:
            pass


class SseBody:
    """The WSGI body of an event stream: yields what the channel delivers as SSE events, a comment
    every `keepalive` seconds of silence, and ends after the final answer or when the channel
    closes. At `deadline` it calls `on_deadline()` once (which answers the request into the
    channel) and goes on reading. `on_close(completed)` runs once when the server closes the body;
    `completed` is False when the stream was cut short (a client that went away)."""

    def __init__(
        self,
        channel: Channel,
        *,
        keepalive: float,
        first: bytes | None = None,
        deadline: float | None = None,
        on_deadline: Callable[[], None] | None = None,
        on_close: Callable[[bool], None] | None = None,
    ) -> None:
        self._channel = channel
        self._keepalive = keepalive
        self._pending: bytes | None = sse_event(first) if first is not None else OPENED
        self._deadline = deadline
        self._on_deadline = on_deadline
        self._on_close = on_close
        self._finished = False
        self._closed = False

    def __iter__(self) -> "SseBody":
        return self

    def __next__(self) -> bytes:
        if self._pending is not None:  # sent at once, so the client has the headers without waiting
            chunk, self._pending = self._pending, None
            return chunk
        while not self._finished:
            wait = self._keepalive
            if self._deadline is not None:
                wait = min(wait, self._deadline - time.monotonic())
            item = self._channel.get(wait)
            if isinstance(item, Final):
                self._finished = True
                if item.frame is not None:
                    return sse_event(item.frame)
            elif item is CLOSED:
                self._finished = True
            elif item is TIMEOUT:
                if self._deadline is None or time.monotonic() < self._deadline:
                    return KEEPALIVE
                self._deadline = None
                if self._on_deadline is not None:
                    self._on_deadline()
            else:
                return sse_event(item)
        raise StopIteration

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            try:
                self._on_close(self._finished)
            except Exception:
                log.exception("closing an HTTP stream failed")
