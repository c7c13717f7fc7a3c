"""Handshake-era HTTP sessions: what `initialize` created, found again by `Mcp-Session-Id`.

Strategy: a table under one lock, with no thread of its own. Each session holds the engine's
`Session` (negotiated version, capabilities, log level, resource subscriptions), the requests it
has in flight (so a `notifications/cancelled` finds them), and a bounded channel of unsolicited
notifications (list changes, resource updates) that its GET stream drains; what arrives while no
GET stream is open waits there, up to the channel's capacity. Ids are 32 characters of a
cryptographically random URL-safe token (visible ASCII, as the spec requires).

Expiry is lazy: every lookup sweeps, at most once a second, the sessions idle longer than
`idle_timeout` (no request for that long, none in flight, no GET stream open). The table holds at
most `max_sessions`; `create()` sweeps first and answers None when it is still full.

Each session also keeps its server-to-client requests awaiting an answer (`PendingAsks`): an
elicitation, sampling or roots request goes out on the asking request's own stream, and the client
answers with a POST of its own that names the session, so the answer is matched here by id. When
a session ends (DELETE, expiry, shutdown) its pending asks fail and later ones are refused.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from ..engine.session import Session
from ._asks import PendingAsks
from ._http_stream import Channel, Exchange

log = logging.getLogger("mcpsync")

SWEEP_INTERVAL = 1.0


class HttpSession:
    """One handshake-era client."""

    def __init__(self, session_id: str, capacity: int, now: float) -> None:
        self.id = session_id
        self.session = Session()
        self.events = Channel(capacity)  # unsolicited notifications for the GET stream
        self.asks = PendingAsks()  # server-to-client requests awaiting the client's answer
        self.inflight: dict[Any, Exchange] = {}  # guarded by the table's lock
        self.streaming = False  # a GET stream is open (guarded by the transport's lock)
        self.last_seen = now

    def idle_since(self) -> float | None:
        """When it went idle, or None while a request or a GET stream keeps it alive."""
        return None if self.inflight or self.streaming else self.last_seen


class SessionTable:
    def __init__(
        self,
        *,
        idle_timeout: float,
        max_sessions: int,
        capacity: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sessions: dict[str, HttpSession] = {}
        self._lock = threading.Lock()
        self._idle_timeout = idle_timeout
        self._max = max_sessions
        self._capacity = capacity
        self._clock = clock
        self._next_sweep = 0.0

    def __len__(self) -> int:
        return len(self._sessions)

    def new(self) -> HttpSession | None:
        """A session for an `initialize` (not yet in the table); None when the table is full."""
        with self._lock:
            self._sweep_locked(force=True)
            if len(self._sessions) >= self._max:
                return None
        return HttpSession(secrets.token_urlsafe(24), self._capacity, self._clock())

    def add(self, session: HttpSession) -> None:
        """`initialize` succeeded: from now on the session is found by its id."""
        with self._lock:
            session.last_seen = self._clock()
            self._sessions[session.id] = session

    def find(self, session_id: str) -> HttpSession | None:
        """The live session with this id (seen now), or None if unknown or expired."""
        with self._lock:
            self._sweep_locked()
            session = self._sessions.get(session_id)
            if session is not None:
                session.last_seen = self._clock()
            return session

    def remove(self, session_id: str) -> HttpSession | None:
        """End a session (DELETE): its GET stream ends, its requests are cancelled."""
        with self._lock:
            session = self._sessions.pop(session_id, None)
            ending = _ending([session] if session is not None else [])
        _end(ending, "the session was ended")
        return session

    def drain(self) -> list[HttpSession]:
        """End every session (shutdown)."""
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
            ending = _ending(sessions)
        _end(ending, "the server is shutting down")
        return sessions

    def snapshot(self) -> list[HttpSession]:
        with self._lock:
            return list(self._sessions.values())

    # -- requests in flight ----------------------------------------------------------------------
    def begin(self, session: HttpSession, exchange: Exchange) -> bool:
        """Track a request of this session; False if its id is already in flight."""
        request_id = exchange.request.id
        with self._lock:
            if request_id in session.inflight:
                return False
            session.inflight[request_id] = exchange
            return True

    def end(self, session: HttpSession, exchange: Exchange) -> None:
        with self._lock:
            if session.inflight.get(exchange.request.id) is exchange:
                del session.inflight[exchange.request.id]
            session.last_seen = self._clock()

    def inflight(self, session: HttpSession, request_id: Any) -> Exchange | None:
        with self._lock:
            exchange = session.inflight.get(request_id)
        if exchange is None or type(exchange.request.id) is not type(request_id):
            return None
        return exchange

    # -- expiry ------------------------------------------------------------------------------------
    def _sweep_locked(self, force: bool = False) -> None:
        now = self._clock()
        if not force and now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_INTERVAL
        expired = [s for s in self._sessions.values() if (since := s.idle_since()) is not None and now - since > self._idle_timeout]
        for session in expired:
            del self._sessions[session.id]
            session.events.close()  # idle: nothing in flight to cancel (so no ask awaits an answer)
            session.asks.end("the session expired")


def _ending(sessions: list[HttpSession]) -> list[tuple[HttpSession, list[Exchange]]]:
    """Under the table's lock: the sessions to end, each with its requests in flight."""
    return [(session, list(session.inflight.values())) for session in sessions]


def _end(ending: list[tuple[HttpSession, list[Exchange]]], reason: str) -> None:
    for session, exchanges in ending:
        session.events.close()
        for exchange in exchanges:  # each fails its own asks, telling its client on its stream
            exchange.cancel(reason)
        session.asks.end(reason)  # and any left (a request just beginning) fail; later ones are refused
