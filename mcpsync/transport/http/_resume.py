"""Resumable POST streams (handshake era): a client that loses the event stream of a request may
reconnect with `Last-Event-ID` and get the rest, including the answer.

Strategy: the 2025-11-25 spec says a disconnection is not a cancellation and lets a server replay
what a lost stream would have carried (SEP-1699), and the SDK clients reconnect with a GET naming
the last event id they saw. So each handshake-era POST stream numbers its events (`StreamLog`: ids
`pTOKEN.N`, the newest kept for a replay) and opens with a priming event whose id names it. When
its client goes away before the answer, the request is not cancelled at once: it is *detached*
(`DetachedStreams`) and keeps running for `grace` seconds, its notifications and its answer
waiting in its channel. A GET of the same session naming one of its ids takes it back: what the
lost stream sent after that id is sent again, then the channel goes on. A request nobody takes
back within the grace is cancelled, as a lost stream's request always was.

A client usually learns of a lost stream before the server does (a half-open connection; under a
threaded WSGI server, not until the next write, up to the keep-alive interval), so a resume may
name a stream that is still *attached* to its old response. The streams being sent are therefore
registered too (`attach`, `finished`), and a resume of an attached one asks the old response to
end at once (the `RELEASE` mark, as `ctx.close_stream()` puts it), waits up to `TAKEOVER_WAIT`
for the detach that follows, and takes it. An answer the old response had already taken to write
is in the replay (`StreamLog` keeps it).

A detached request is held by the process that runs it: a resume that reaches another replica
finds nothing here and gets the session's own GET stream (its events resume anywhere; a POST
stream's, only where its tool runs).

One owned thread, `mcpsync-http-resume`, started with the first detach, ends requests whose grace
is over; `close()` (the transport's shutdown) stops and joins it and cancels what is still
detached.
"""

from __future__ import annotations

import collections
import logging
import secrets
import threading
import time
from dataclasses import dataclass

from ...protocol.sse import event_number, sse_event
from ._stream import RELEASE, Exchange, Final

log = logging.getLogger("mcpsync")

MARK = "p"
"""The first character of a POST stream's event ids (a session GET stream's are digits)."""
DEFAULT_GRACE = 30.0
"""Seconds a request whose stream was lost waits for its client to come back."""
KEPT = 64
"""Events of a POST stream kept for a replay."""
THREAD_NAME = "mcpsync-http-resume"
TAKEOVER_WAIT = 5.0
"""Seconds a resume waits for the old response of an attached stream to end."""


class StreamLog:
    """The numbered events of one POST stream, the newest `kept` of them kept for a replay."""

    def __init__(self, kept: int = KEPT) -> None:
        self.prefix = f"{MARK}{secrets.token_urlsafe(12)}."
        self._events: collections.deque[tuple[int, bytes]] = collections.deque(maxlen=kept)
        self._count = 0
        self._lock = threading.Lock()

    def event(self, frame: bytes) -> bytes:
        """`frame` as the stream's next SSE event, with its id, kept for a replay."""
        with self._lock:
            self._count += 1
            chunk = sse_event(frame, f"{self.prefix}{self._count}")
            self._events.append((self._count, chunk))
        return chunk

    @property
    def position(self) -> str:
        """The id of the last event sent (the priming event's: nothing sent yet)."""
        return f"{self.prefix}{self._count}"

    def number_of(self, event_id: str) -> int | None:
        """The N of one of this stream's ids, else None."""
        return event_number(event_id[len(self.prefix) :]) if event_id.startswith(self.prefix) else None

    def after(self, number: int) -> bytes:
        """The events sent after event N, as one chunk (those no longer kept are gone)."""
        with self._lock:
            return b"".join(chunk for count, chunk in self._events if count > number)


@dataclass(slots=True)
class _Detached:
    exchange: Exchange
    log: StreamLog
    session_id: str
    until: float | None  # when it is cancelled; None while its stream is attached to a response


class DetachedStreams:
    """The requests whose POST stream was lost, waiting for their client; see the module docstring."""

    def __init__(self, grace: float = DEFAULT_GRACE) -> None:
        self._grace = grace
        self._cond = threading.Condition()
        self._waiting: dict[str, _Detached] = {}  # by the stream's id prefix: attached and detached
        self._thread: threading.Thread | None = None
        self._closed = False

    def attach(self, exchange: Exchange, stream: StreamLog, session_id: str) -> None:
        """A resumable stream is being sent: a resume may take it over (see the module docstring)."""
        with self._cond:
            if not self._closed:
                self._waiting[stream.prefix] = _Detached(exchange, stream, session_id, None)

    def finished(self, stream: StreamLog) -> None:
        """The stream reached its end (or cannot resume): nothing to take over any more."""
        with self._cond:
            held = self._waiting.get(stream.prefix)
            if held is not None and held.until is None:
                del self._waiting[stream.prefix]
                self._cond.notify_all()  # a takeover waiting for it gives up

    def detach(self, exchange: Exchange, stream: StreamLog, session_id: str) -> bool:
        """Keep a request whose stream was lost; False (nothing kept) once closed."""
        with self._cond:
            if self._closed:
                return False
            self._waiting[stream.prefix] = _Detached(exchange, stream, session_id, time.monotonic() + self._grace)
            if self._thread is None:
                self._thread = threading.Thread(target=self._reap, name=THREAD_NAME, daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return True

    def take(self, session_id: str, last_event_id: str, wait: float = TAKEOVER_WAIT) -> tuple[Exchange, StreamLog, int] | None:
        """The request of this session whose stream sent `last_event_id`, handed back (with the
        event's number), or None. A stream still attached is asked to end, and waited for up to
        `wait` seconds (None if its response does not end by then)."""
        key = last_event_id.rpartition(".")[0] + "."
        deadline = time.monotonic() + wait
        with self._cond:
            held = self._waiting.get(key)
            if held is None or held.session_id != session_id:
                return None
            number = held.log.number_of(last_event_id)
            if number is None:
                return None
            if held.until is None:  # attached: the old response ends, detaching it
                held.exchange.channel.put(RELEASE, force=True)
                while held.until is None and self._waiting.get(key) is held:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    self._cond.wait(remaining)
                held = self._waiting.get(key)
                if held is None or held.until is None:
                    return None  # it ended on its own meanwhile (answered), or never let go
            del self._waiting[key]
        return held.exchange, held.log, number

    def _reap(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                if self._closed:
                    return
                over = [key for key, held in self._waiting.items() if held.until is not None and held.until <= now]
                ending = [self._waiting.pop(key) for key in over]
                if not ending:
                    soonest = min((held.until for held in self._waiting.values() if held.until is not None), default=now + 3600.0)
                    self._cond.wait(max(0.0, soonest - now))
                    continue
            for held in ending:
                _cancel(held, "the client did not come back for the request's stream")

    def close(self, timeout: float = 5.0) -> None:
        """Cancel every detached request and stop the thread, joined within `timeout` (those still
        attached are running requests, which the transport's shutdown drains)."""
        with self._cond:
            self._closed = True
            ending = [held for held in self._waiting.values() if held.until is not None]
            self._waiting.clear()
            self._cond.notify_all()
            thread = self._thread
        for held in ending:
            _cancel(held, "the server is shutting down")
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


def _cancel(held: _Detached, reason: str) -> None:
    if not held.exchange.done:
        log.debug("request %r of session %s cancelled: %s", held.exchange.request.id, held.session_id[:8], reason)
    held.exchange.cancel(reason)
    held.exchange.answer(Final(None))
    held.exchange.channel.close()
