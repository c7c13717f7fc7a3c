"""Handshake-era HTTP sessions: what `initialize` created, found again by `Mcp-Session-Id`.

Strategy: a table under one lock, with no thread of its own. Each session holds the engine's
`Session` (negotiated version, capabilities, log level, resource subscriptions), the requests it
has in flight (so a `notifications/cancelled` finds them), and a bounded channel of unsolicited
notifications (list changes, resource updates) that its GET stream drains; what arrives while no
GET stream is open waits there, up to the channel's capacity. Ids are 32 characters of a
cryptographically random URL-safe token (visible ASCII, as the spec requires).

A session is *busy* while it has a request in flight or its GET stream open, and *idle*
otherwise; only idle sessions ever end on their own. Besides the id map, the table keeps the
idle ones in two queues, each in order of `last_seen`:

- *fresh*: sessions that have made no request since their own `initialize`, oldest first;
- *idle*: the other idle ones, least recently used first (a request naming the session, the end
  of its last request in flight, or the close of its GET stream moves it to the back).

Every lookup and every `create` pops from the front of both queues what has been idle longer than
`idle_timeout` (expiry), so the cost is the number of sessions that end, never the table's size.

The table holds at most `max_sessions`. Why eviction, not just expiry: `initialize` is the one
request that needs no session, so anyone who can reach the endpoint can fill the table with
sessions that never come back (a thousand POSTs take a third of a second), and with expiry alone
every new client would then be refused for the whole `idle_timeout` (30 minutes by default). So
when the table is full, a new `initialize` first evicts, at once:

1. the fresh session that has waited longest: a client that never came back has lost nothing,
   and a flood of `initialize` only ever displaces its own kind;
2. failing that, the least recently used idle session, if it has been idle longer than
   `eviction_grace` (`EVICTION_GRACE`, 10 s): a client that returns to it gets 404 and, as the
   spec requires, initializes again, so it loses its session state but not its service. The
   grace keeps a client between two requests of one task from being evicted by a stranger.

Only when every session is busy or used within the grace is the table really full: `create`
answers None (the transport answers 503), as before. An evicted session ends as an expired one
does: its GET-stream channel closes, its pending asks fail, later requests naming it get 404.
Evictions are logged at DEBUG; a refusal warns once until a session can be created again.

Sessions are also bounded per caller (`max_per_caller`, the caller being `Principal.key`), the
rule `Store.create_session` states for replicas, so one token cannot take every place:

- a caller holding `max_per_caller` sessions gives up its own fresh session that has waited
  longest for its next one, else its own least recently used one idle past the grace (a client
  that reconnects without DELETE reclaims its abandoned sessions); when all of its sessions are
  busy or used within the grace, `add` refuses it (`Creation.CALLER_FULL`, which the transport
  answers 429): nobody else's session is touched;
- the table-wide eviction above takes only what may give way: the asking caller's own sessions,
  or those of a caller holding more than the asking caller will once its new session is added
  (its count plus one). A newcomer therefore displaces a caller holding two or more, never the
  only session of anyone: no caller gives a session to one who would then hold more than it.

What the full table then gives a new caller: a session as long as some caller holds two or more
sessions that may give way (fresh, or idle past the grace); 503 only when every caller holds at
most one, or the rest are busy or in recent use. So locking newcomers out takes `max_sessions`
callers (distinct principals the authorization server vouched for) each keeping a session, or
sessions really in use, which is what `max_sessions` is sized for.

The unauthenticated (an endpoint without `Auth`, principal None) are one caller with no bound of
its own: everyone there shares the table as before, and a flood of `initialize` displaces fresh
sessions first, as above. They are not bounded by client address, since behind a reverse proxy
every client has the proxy's.

Each session also keeps its server-to-client requests awaiting an answer (`PendingAsks`): an
elicitation, sampling or roots request goes out on the asking request's own stream, and the client
answers with a POST of its own that names the session, so the answer is matched here by id. When
a session ends (DELETE, expiry, eviction, shutdown) its pending asks fail and later ones are
refused. Sessions end outside the table's lock, since failing an ask runs its callbacks.

GET-stream events carry ids (`Event`), so a client that reconnects with `Last-Event-ID` is sent
what it missed. Here, in one process, each session keeps its newest events in a ring beside the
channel (`offer`, `resume`); where replicas share a store, the store's log plays that part and this
table holds only the process's copies of the sessions it serves (`_directory`).

Lock order: the transport sets `HttpSession.streaming` under its own lock, and the setter takes
the table's; the table therefore never calls out while it holds its lock.
"""

from __future__ import annotations

import collections
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ...bus.store import Creation
from ...engine.observer import SessionObservation
from ...engine.session import Session
from ...protocol.sse import event_number
from ..lifecycle.asks import PendingAsks
from ..lifecycle.subscriptions import updated_uri
from ._stream import Channel, Event, Exchange

log = logging.getLogger("mcpsync")

EVICTION_GRACE = 10.0  # seconds an idle, once-used session is safe from eviction (see the module docstring)
FULL_RETRY_AFTER = 10
"""Seconds (`Retry-After`) a client refused a session (503, 429) is told to wait: the eviction
grace, after which a session idle since may give way."""


SessionFactory = Callable[[str], Session]
"""Makes the engine's `Session` of a new session id (the shared directory's writes through)."""


Told = Callable[[str], bool]
"""Whether the reader of a session's GET stream may be told that the resource at a URI changed
(the transport makes one per token: `WsgiTransport._told`)."""


def _may_tell(told: Told | None, frame: bytes) -> bool:
    uri = None if told is None else updated_uri(frame)
    return uri is None or told is None or told(uri)


class GetStreamEvents(Channel):
    """A session's GET-stream channel that skips, as they are taken, the resource updates its
    reader may not be told (`told`, set when a GET stream opens: None tells everything). Checked
    here, at the last moment, on the process that holds the stream and knows the token it was
    opened with, whatever replica appended the update and whatever token subscribed."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.told: Told | None = None
        self.told_scopes: frozenset[str] | None = None
        """The scopes of the token `told` was made for (None: no token). `told` reads nothing else
        of it, so a request whose token has the same scopes (the same token, nearly always) need
        not make it again; a token with other scopes, the same caller's included, is judged afresh."""

    def get(self, timeout: float) -> Any:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            item = super().get(deadline - time.monotonic())
            if not isinstance(item, Event) or _may_tell(self.told, item.frame):
                return item


class HttpSession:
    """One handshake-era client."""

    def __init__(
        self,
        session_id: str,
        capacity: int,
        now: float,
        on_streaming: Callable[[HttpSession, bool], None] | None = None,
        *,
        session: Session | None = None,
        ask_prefix: str = "mcpsync-",
        principal_key: str | None = None,
    ) -> None:
        self.id = session_id
        self.session = Session() if session is None else session
        self.events = GetStreamEvents(capacity)  # unsolicited notifications for the GET stream, as `Event`s
        self.asks = PendingAsks(ask_prefix)  # server-to-client requests awaiting the client's answer
        self.inflight: dict[Any, Exchange] = {}  # guarded by the table's lock
        self.observed: SessionObservation | None = None  # its duration, from an initialize here to its end here (telemetry)
        self.principal_key = principal_key  # who created it (`Principal.key`); only they may use it; fixed
        if principal_key is None:
            self.session.tasks_owner = f"session:{session_id}"  # no token: the session owns its tasks
        self.last_seen = now
        # The GET stream's events: `feed_lock` orders what goes into `events`; `cursor` is the id of
        # the last event put there (a shared store's log is read after it); `_recent` keeps the
        # newest events for a resume when there is no shared store.
        self.feed_lock = threading.Lock()
        self.cursor: str | None = None
        self.sent: str | None = None  # the id of the last event its GET stream wrote
        self.checked_until = 0.0  # a shared session's copy is trusted until then (`_directory`)
        self._recent: collections.deque[Event] = collections.deque(maxlen=capacity)
        self._count = 0
        self._streaming = False
        self._on_streaming = on_streaming

    def offer(self, frame: bytes) -> bool:
        """A notification for the GET stream, with the next event id (kept for a resume); False
        when the channel is closed or full (the event is kept for a resume all the same). An
        update the stream's reader (`events.told`) may not be told gets no id at all, so the ids
        it is sent show no gap where it was."""
        with self.feed_lock:
            if not _may_tell(self.events.told, frame):
                return True
            self._count += 1
            event = Event(str(self._count), frame)
            self._recent.append(event)
            return self.events.put(event)

    def resume(self, last_event_id: str | None) -> str:
        """A GET stream opens: with the id of the last event the client saw, what came after it is
        queued again in order (the stream that carried it may have lost it); without one, what is
        queued is sent. The priming event's id: the position the stream starts from."""
        with self.feed_lock:
            seen = None if last_event_id is None else event_number(last_event_id)
            if seen is not None:
                self.events.clear()
                for event in self._recent:
                    if int(event.id) > seen:
                        self.events.put(event, force=True)
                return str(min(seen, self._count))
            head = self.events.peek()
            return str(int(head.id) - 1) if isinstance(head, Event) else str(self._count)

    @property
    def streaming(self) -> bool:
        """A GET stream is open. The transport sets it (check and set under its own lock); setting
        it tells the table, which then neither expires nor evicts the session until it closes."""
        return self._streaming

    @streaming.setter
    def streaming(self, value: bool) -> None:
        if self._on_streaming is None:
            self._streaming = value
        else:
            self._on_streaming(self, value)

    def idle_since(self) -> float | None:
        """When it went idle, or None while a request or a GET stream keeps it alive."""
        return None if self.inflight or self._streaming else self.last_seen


class SessionTable:
    """The live sessions; see the module docstring for expiry and eviction."""

    def __init__(
        self,
        *,
        idle_timeout: float,
        max_sessions: int,
        capacity: int,
        clock: Callable[[], float] = time.monotonic,
        eviction_grace: float = EVICTION_GRACE,
        session_factory: SessionFactory | None = None,
        ask_prefix: str = "mcpsync-",
        max_per_caller: int | None = None,
    ) -> None:
        self._sessions: dict[str, HttpSession] = {}
        self._held: collections.Counter[str | None] = collections.Counter()  # sessions per principal key
        # The idle sessions, each queue in order of last_seen (the front has waited longest).
        self._fresh: OrderedDict[str, HttpSession] = OrderedDict()  # no request since initialize
        self._idle: OrderedDict[str, HttpSession] = OrderedDict()  # used; least recently first
        self._lock = threading.Lock()
        self._idle_timeout = idle_timeout
        self._max = max_sessions
        self._max_per_caller = max_per_caller  # None: the shared store bounds callers (`add` does not)
        self._capacity = capacity
        self._clock = clock
        self._grace = eviction_grace
        self._refusing = False  # warned that the table is full; quiet until a create succeeds
        self._session_factory = session_factory
        self._ask_prefix = ask_prefix

    def __len__(self) -> int:
        return len(self._sessions)

    def new(self, principal_key: str | None = None) -> HttpSession | None:
        """A session for an `initialize` by this caller (not yet in the table); None when the table
        is full of sessions that may not give way to it. Makes room first: see the module docstring.

        The caller's own bound comes first, as in `Store.create_session`: a caller holding
        `max_per_caller` sessions needs no new place in the table (at `add` one of its own gives
        way, or it is refused `Creation.CALLER_FULL`, 429), so a full table neither refuses it
        (503 would send it to wait for the server instead of ending its own sessions) nor loses
        anyone else's session to it. Without `max_per_caller` (replicas sharing a store, whose
        `create_session` checks the caller's bound before the shared one at `commit`) this
        table of copies does not know the caller's bound, and refuses for being full as before."""
        with self._lock:
            now = self._clock()
            expired = self._expire_locked(now)
            bound = self._max_per_caller
            at_bound = bound is not None and principal_key is not None and self._held[principal_key] >= bound
            evicted = [] if at_bound else self._evict_locked(now, principal_key)
            full = not at_bound and len(self._sessions) >= self._max
            warn = full and not self._refusing
            self._refusing = full
        _end([(session, []) for session in expired], "the session expired")
        _end([(session, []) for session, _ in evicted], "the session was evicted to make room for a new one")
        for session, why in evicted:
            log.debug("session %s evicted to make room for a new one: %s", session.id[:8], why)
        if full:
            if warn:
                log.warning(
                    "refusing new HTTP sessions (503): all %d are in active use (in flight, streaming, or used in the last %g s)",
                    self._max,
                    self._grace,
                )
            return None
        return self._make(secrets.token_urlsafe(24), principal_key)

    def _make(self, session_id: str, principal_key: str | None) -> HttpSession:
        session = None if self._session_factory is None else self._session_factory(session_id)
        return HttpSession(
            session_id, self._capacity, self._clock(), self._set_streaming, session=session, ask_prefix=self._ask_prefix, principal_key=principal_key
        )

    def adopt(self, session_id: str, principal_key: str | None) -> tuple[HttpSession, bool]:
        """This process's copy of a session the shared store knows, made now if it has none (a
        request of a session another replica created): (the copy, whether it is new). Seen now,
        like `find`; a new copy is never fresh and may exceed `max_sessions` (the store holds
        the real count)."""
        with self._lock:
            now = self._clock()
            expired = self._expire_locked(now)
            session = self._sessions.get(session_id)
            made = session is None
            if session is None:
                session = self._make(session_id, principal_key)
                self._sessions[session_id] = session
                self._held[principal_key] += 1
            self._touch_locked(session, now)
        _end([(ended, []) for ended in expired], "the session expired")
        return session, made

    def peek(self, session_id: str) -> HttpSession | None:
        """This process's copy of a session, if it has one, without counting as a use."""
        with self._lock:
            return self._sessions.get(session_id)

    def add(self, session: HttpSession) -> Creation:
        """`initialize` succeeded: from now on the session is found by its id. A caller holding
        `max_per_caller` sessions first gives up one of its own (`_own_to_evict_locked`); when
        none may go, the session is not added (`Creation.CALLER_FULL`). Checked here, under the
        lock that adds, so concurrent `initialize`s of one caller cannot pass its bound together."""
        key = session.principal_key
        evicted: HttpSession | None = None
        refused = False
        with self._lock:
            now = self._clock()
            expired = self._expire_locked(now)
            if self._max_per_caller is not None and key is not None and self._held[key] >= self._max_per_caller:
                evicted = self._own_to_evict_locked(key, now)
                if evicted is None:
                    refused = True
                else:
                    self._pop_locked(evicted.id)
            if not refused:
                session.last_seen = now
                self._sessions[session.id] = session
                self._fresh[session.id] = session
                self._held[key] += 1
        _end([(ended, []) for ended in expired], "the session expired")
        if evicted is not None:
            _end([(evicted, [])], "the session was evicted: its caller opened more sessions than it may hold")
            log.debug("session %s evicted: its caller holds %d sessions, its most", evicted.id[:8], self._max_per_caller)
        if refused:
            log.info("refused a session (429): its caller holds %d sessions, all in use", self._max_per_caller)
            return Creation.CALLER_FULL
        return Creation.CREATED

    def _own_to_evict_locked(self, key: str, now: float) -> HttpSession | None:
        """The caller's own session that gives way to its next one: its fresh one that has waited
        longest, else its least recently used idle one past the grace (a client that went away
        without DELETE, so one that reconnects often is not locked out for `idle_timeout`);
        None while every one is busy or used within the grace."""
        fresh = next((own for own in self._fresh.values() if own.principal_key == key), None)
        if fresh is not None:
            return fresh
        for idle in self._idle.values():
            if now - idle.last_seen <= self._grace:
                return None  # the queue is in order of last_seen: the rest are more recent
            if idle.principal_key == key:
                return idle
        return None

    def find(self, session_id: str) -> HttpSession | None:
        """The live session with this id (seen now, so no longer fresh), or None if unknown,
        expired or evicted."""
        with self._lock:
            now = self._clock()
            expired = self._expire_locked(now)
            session = self._sessions.get(session_id)
            if session is not None:
                self._touch_locked(session, now)
        _end([(session, []) for session in expired], "the session expired")
        return session

    def remove(self, session_id: str) -> HttpSession | None:
        """End a session (DELETE): its GET stream ends, its requests are cancelled."""
        with self._lock:
            session = self._pop_locked(session_id)
            ending = _ending([session] if session is not None else [])
        _end(ending, "the session was ended")
        return session

    def drain(self) -> list[HttpSession]:
        """End every session (shutdown)."""
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
            self._fresh.clear()
            self._idle.clear()
            self._held.clear()
            ending = _ending(sessions)
        _end(ending, "the server is shutting down")
        return sessions

    def snapshot(self) -> list[HttpSession]:
        with self._lock:
            return list(self._sessions.values())

    # -- requests in flight, GET streams -----------------------------------------------------------
    def begin(self, session: HttpSession, exchange: Exchange) -> bool:
        """Track a request of this session; False if its id is already in flight."""
        request_id = exchange.request.id
        with self._lock:
            if request_id in session.inflight:
                return False
            session.inflight[request_id] = exchange
            self._fresh.pop(session.id, None)  # busy: in neither queue until its last request ends
            self._idle.pop(session.id, None)
            return True

    def end(self, session: HttpSession, exchange: Exchange) -> None:
        with self._lock:
            if session.inflight.get(exchange.request.id) is exchange:
                del session.inflight[exchange.request.id]
            self._touch_locked(session, self._clock())

    def inflight(self, session: HttpSession, request_id: Any) -> Exchange | None:
        with self._lock:
            exchange = session.inflight.get(request_id)
        if exchange is None or type(exchange.request.id) is not type(request_id):
            return None
        return exchange

    def _set_streaming(self, session: HttpSession, value: bool) -> None:
        """`HttpSession.streaming` was set: a GET stream opened (busy) or closed (idle from now)."""
        with self._lock:
            session._streaming = value  # the property's own storage, set under this lock
            self._touch_locked(session, self._clock())

    # -- expiry and eviction -----------------------------------------------------------------------
    def _touch_locked(self, session: HttpSession, now: float) -> None:
        """The session was used now: no longer fresh; at the back of the idle queue if idle."""
        session.last_seen = now
        self._fresh.pop(session.id, None)
        if self._sessions.get(session.id) is not session:
            return  # already ended (a request that raced its expiry, eviction or DELETE)
        if session.idle_since() is None:
            self._idle.pop(session.id, None)
        else:
            self._idle[session.id] = session
            self._idle.move_to_end(session.id)

    def _expire_locked(self, now: float) -> list[HttpSession]:
        """Remove the sessions idle longer than `idle_timeout`: the fronts of the two queues."""
        expired: list[HttpSession] = []
        for queue in (self._fresh, self._idle):
            while queue:
                session = next(iter(queue.values()))
                if now - session.last_seen <= self._idle_timeout:
                    break
                self._pop_locked(session.id)
                expired.append(session)
        return expired

    def _evict_locked(self, now: float, key: str | None) -> list[tuple[HttpSession, str]]:
        """While the table is full: remove the oldest fresh session that may give way to caller
        `key`, else the least recently used idle one past the grace that may; stop when neither
        exists. Each with why, for the log."""
        evicted: list[tuple[HttpSession, str]] = []
        while len(self._sessions) >= self._max:
            session = next((each for each in self._fresh.values() if self._gives_way(each, key)), None)
            if session is not None:
                why = f"it made no request in the {now - session.last_seen:.1f} s since its initialize"
            else:
                for each in self._idle.values():
                    if now - each.last_seen <= self._grace:
                        break  # the queue is in order of last_seen: the rest are more recent
                    if self._gives_way(each, key):
                        session = each
                        why = f"it was the least recently used, idle for {now - session.last_seen:.1f} s"
                        break
            if session is None:
                break
            self._pop_locked(session.id)
            evicted.append((session, why))
        return evicted

    def _gives_way(self, session: HttpSession, key: str | None) -> bool:
        """May this session make room for caller `key`: its own, or its caller holds more than
        `key` will once its new session is added (see the module docstring)."""
        return session.principal_key == key or self._held[session.principal_key] > self._held[key] + 1

    def _pop_locked(self, session_id: str) -> HttpSession | None:
        self._fresh.pop(session_id, None)
        self._idle.pop(session_id, None)
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self._held[session.principal_key] -= 1
            if not self._held[session.principal_key]:
                del self._held[session.principal_key]
        return session


def _ending(sessions: list[HttpSession]) -> list[tuple[HttpSession, list[Exchange]]]:
    """Under the table's lock: the sessions to end, each with its requests in flight."""
    return [(session, list(session.inflight.values())) for session in sessions]


def _end(ending: list[tuple[HttpSession, list[Exchange]]], reason: str) -> None:
    """Outside the table's lock: close each session's GET-stream channel and fail its requests and
    asks. An expired or evicted session is idle, so it has no request to cancel."""
    for session, exchanges in ending:
        observed, session.observed = session.observed, None
        if observed is not None:
            observed.end(session.session, None)
        session.events.close()
        for exchange in exchanges:  # each fails its own asks, telling its client on its stream
            exchange.cancel(reason)
        session.asks.end(reason)  # and any left (a request just beginning) fail; later ones are refused
