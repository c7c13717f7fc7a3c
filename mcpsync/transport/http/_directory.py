"""Where a handshake-era session is found, and how what concerns it reaches the process holding it.

Strategy: the HTTP transport asks one of two directories, with the same methods, and never knows
which it has:

- `LocalDirectory` (no shared store: one process, today's behaviour): the process's own
  `SessionTable` is the truth. A change goes into each session's channel with an event id, and a
  GET stream resumed with `Last-Event-ID` is refilled from the session's ring of recent events.
- `SharedDirectory` (replicas sharing a `Store`, e.g. Redis): the store is the truth and the table
  holds this process's copies. A request whose session this process has not checked for
  `recheck` seconds loads its record (one round trip, which also pushes the session's expiry
  out); one that comes sooner is served from the copy, since whatever would make it wrong is
  announced on the bus: a DELETE (`session_ended`), a log level or a subscription set through
  another replica (the engine's `Session` writes them through, `SharedSession`, and says so:
  `session_changed`, which marks the copies elsewhere unchecked). While the bus is down (a backend
  that knows says so with `connected`) or after it comes back, every request loads its record
  again: what was announced meanwhile may be lost. An expiry on another replica's clock is seen
  within `recheck`.
  A change is appended once, by the replica where it was made, to the event log of every session
  it concerns; each replica then reads the logs of the GET streams it holds after their cursors
  (on the change itself, or on the bus's message that another replica made one), so a stream
  resumed anywhere, or opened after a quiet spell, is sent what it has not seen, and nothing twice.

What cannot move stays where it is: a request in flight and the tool it runs, a stream, an ask
waiting for the client's answer. The bus carries what must reach them: an answer or a
`notifications/cancelled` POSTed to another replica (published when no local ask or request
matches; the replica holding it acts, the others find nothing), and the end of a session (DELETE).

An owned keeper thread (`mcpsync-http-sessions`) pushes out, every `keep_interval`, the expiry of
the sessions this process keeps busy (a GET stream open for hours, a long tool), ends the copies
of sessions the store no longer has (a DELETE whose message was lost in an outage), and reads the
logs of its streams again (one that was full when a change came). `close()` stops and joins it.

Failures: a store that cannot be reached raises `StoreUnavailable` from `create`, `find` and
`delete`, which the transport answers 503 with `Retry-After`, and a write through a session's
`SharedSession` is undone and answered the same way (`SessionStoreDown`). A change that cannot be
appended is logged (once per outage) and owed: the replica that made it keeps it (up to
`MAX_OWED` changes, else one resync of every list), its keeper appends it to the logs of the sessions
it concerns once the store answers again (trying every `OWED_RETRY` seconds, under the change id
of its first try, so an append that timed out but ran is not logged twice), and tells every replica
on the bus (`EVENTS_CHANNEL`) to read its streams' logs. So a change made while the store was frozen
or away, with the bus none the wiser, still reaches the handshake-era GET streams on every replica,
late (the 2026-07-28 listens, fed by the bus, got it at once). An outage of Redis itself also makes
the bus's reconnect tell every local listener that every list changed (its level trigger).
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import ujson

from ...bus import Bus
from ...bus.store import Creation, SessionRecord, Store, StoreUnavailable
from ...engine.session import Session
from ...protocol import jsonrpc
from ...protocol.jsonrpc import ErrorCode, McpError, Response
from ...protocol.versions import Era
from ..lifecycle.subscriptions import LOCAL, REMOTE, RESYNC, uri_covers
from ._sessions import EVICTION_GRACE, HttpSession, SessionTable
from ._stream import Event, Final

log = logging.getLogger("mcpsync")

ENDED_CHANNEL = "session_ended"
"""The bus channel of ended sessions: the session id, ASCII."""
ANSWER_CHANNEL = "session_answer"
"""The bus channel of answers to server-to-client requests: session id, a newline, the body."""
CANCEL_CHANNEL = "session_cancel"
"""The bus channel of a client's cancellations: session id, a newline, the request id as JSON."""
CHANGED_CHANNEL = "session_changed"
"""The bus channel of sessions whose record a replica changed: the session id, ASCII."""
EVENTS_CHANNEL = "session_events"
"""The bus channel of "events were appended late": each replica reads its streams' logs (empty payload)."""
OWED_RETRY = 1.0
"""Seconds between a keeper's tries to append the changes the store could not take."""
MAX_OWED = 256
"""Changes a replica keeps for a store that is away; past it they are one resync of every list."""
RESYNC_FRAMES = tuple(jsonrpc.encode(jsonrpc.notification_frame(f"notifications/{kind}/list_changed")) for kind in ("prompts", "resources", "tools"))
"""What the sessions are told when more was owed than kept: every list may have changed."""
RECHECK = 5.0
"""Seconds a shared session's copy is served without loading its record (at most a tenth of the
session timeout): how late an expiry elsewhere may be seen, and how often the expiry is pushed out."""
KEEPER_THREAD = "mcpsync-http-sessions"


class LocalDirectory:
    """One process's sessions: the table is the truth (see the module docstring)."""

    def __init__(self, table: SessionTable) -> None:
        self.table = table

    def reserve(self, principal_key: str | None = None) -> HttpSession | None:
        """A session for this caller's `initialize`; None when the table has no room (503)."""
        return self.table.new(principal_key)

    def commit(self, created: HttpSession) -> Creation:
        """`initialize` succeeded; refused when its caller is at its bound (the table's `add`)."""
        return self.table.add(created)

    def held_fresh(self, session_id: str) -> bool:
        """Every session here is this process's own: `find` never asks a store."""
        return True

    def ready(self) -> bool:
        """No store to wait for: always."""
        return True

    def find(self, session_id: str) -> HttpSession | None:
        return self.table.find(session_id)

    def delete(self, owner: HttpSession) -> None:
        self.table.remove(owner.id)

    def answer(self, owner: HttpSession, response: Response, body: bytes) -> None:
        if not owner.asks.answer(response):  # to the request that asked, wherever it waits
            log.debug("session %s: ignored a response to %r, which no request awaits", owner.id[:8], response.id)

    def cancel(self, owner: HttpSession, request_id: Any) -> None:
        _cancel_inflight(self.table, owner, request_id)

    def deliver(self, frames: list[bytes], uri: str | None, origin: str) -> None:
        """To every initialized session (subscribed to `uri`, when given) this process has. The bus
        tells a lone process nothing, and a resync reaches the same sessions."""
        for owner in self.table.snapshot():
            if owner.session.initialized and (uri is None or _wants(owner.session.resource_subscriptions(), uri)):
                for frame in frames:
                    if not owner.offer(frame):
                        log.debug("session %s: its stream is closed or full; a notification waits for a resume", owner.id[:8])

    def open_stream(self, owner: HttpSession, last_event_id: str | None) -> str:
        return owner.resume(last_event_id)

    def stream_closed(self, owner: HttpSession) -> None:
        """Nothing to keep: the ring and the channel stay with the session."""

    def close(self) -> None:
        self.table.drain()


class SessionStoreDown(McpError):
    """A request changed its session (log level, subscriptions) and the store could not record
    it: nothing changed, and the HTTP transport answers 503 with `Retry-After` (-32603 in the
    body: the request was fine, the same one works once the store answers)."""

    def __init__(self) -> None:
        super().__init__(ErrorCode.INTERNAL_ERROR, "the session store cannot be reached; nothing was changed, retry later")


class SharedSession(Session):
    """The engine's `Session` of a shared session: what a request changes (log level, resource
    subscriptions) is written to the store, so the next request on any replica sees it. A write
    that fails is undone here and raises `SessionStoreDown` into the request."""

    def __init__(self, write: Callable[..., None], subscribe: Callable[[str, bool], None]) -> None:
        super().__init__()
        self._write = write  # fields to the store, and tells the other replicas
        self._subscribe = subscribe  # one subscription, atomically, and tells them

    def _recorded(self, undo: Callable[[], None], write: Callable[[], None]) -> None:
        try:
            write()
        except StoreUnavailable:
            undo()
            raise SessionStoreDown() from None

    def restore(self, record: SessionRecord) -> None:
        """Become what the record says, without writing anything back."""
        if self.era is None:
            self.negotiated_version = record.protocol_version
            self.client_capabilities = record.client_capabilities
            self.client_info = record.client_info
            self.claim_initialize()
            self.commit_era(Era.HANDSHAKE)
        self.sync(record)

    def sync(self, record: SessionRecord) -> None:
        """Take what may have changed on another replica: the log level and the subscriptions."""
        if record.log_level is not None:
            super().set_log_level(record.log_level)
        held = self.resource_subscriptions()
        for uri in held - record.subscriptions:
            super().unsubscribe_resource(uri)
        for uri in record.subscriptions - held:
            super().subscribe_resource(uri)

    def subscribe_resource(self, uri: str) -> None:
        if uri in self.resource_subscriptions():
            return
        super().subscribe_resource(uri)
        self._recorded(lambda: super(SharedSession, self).unsubscribe_resource(uri), lambda: self._subscribe(uri, True))

    def unsubscribe_resource(self, uri: str) -> None:
        if uri not in self.resource_subscriptions():
            return
        super().unsubscribe_resource(uri)
        self._recorded(lambda: super(SharedSession, self).subscribe_resource(uri), lambda: self._subscribe(uri, False))

    def set_log_level(self, level: str) -> Callable[[], None]:
        undo = super().set_log_level(level)
        self._recorded(undo, lambda: self._write(log_level=level))
        return undo


class SharedDirectory:
    """Sessions that live in a store shared by the replicas (see the module docstring).

    Args:
        store: the shared store.
        bus: the bus the replicas share (answers, cancellations and ends travel on it).
        ttl: seconds a session may stay idle before it expires, everywhere.
        cap: live sessions at most, across the replicas (`Store.create_session`).
        caller_cap: live sessions at most of one caller (`Principal.key`), across the replicas;
            None: no bound of its own. The store applies it, atomically, so this process's table
            of copies does not. A caller at it gives up its own fresh session, else its own
            session idle longest, if no replica has loaded it for two keeper rounds and a
            recheck (see `__init__`): a busy session is never given up.
        capacity: the channel capacity of each GET stream (also the most read from a log at once).
        max_local: copies this process keeps at most (idle ones beyond it are dropped).
        keep_interval: seconds between the keeper's rounds (default: a third of `ttl`, at most 60).
    """

    def __init__(
        self,
        store: Store,
        bus: Bus,
        *,
        ttl: float,
        cap: int,
        capacity: int,
        max_local: int,
        keep_interval: float | None = None,
        caller_cap: int | None = None,
    ) -> None:
        self._store = store
        self._bus = bus
        self._ttl = ttl
        self._cap = cap
        self._caller_cap = caller_cap
        self._capacity = capacity
        tag = os.urandom(4).hex()  # this process's asks: an answer routed by the bus settles one
        self.table = SessionTable(idle_timeout=ttl, max_sessions=max_local, capacity=capacity, session_factory=self._session_for, ask_prefix=f"mcpsync-{tag}-")
        self._outage = False  # a failed append was logged; quiet until one succeeds
        self._recheck = min(RECHECK, ttl / 10)
        self._clock = time.monotonic
        # What the bus said of sessions lately (id -> (when, ended)), so a load that raced the
        # message is not trusted: kept for twice the recheck, oldest first.
        self._notices: collections.OrderedDict[str, tuple[float, bool]] = collections.OrderedDict()
        self._notices_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()  # the keeper's: a stop, or a change owed
        # Changes the store could not take, in order: frame -> (the URI it concerns, None: every
        # initialized session; the change's id, `Store.append_events`), appended by the keeper once
        # the store answers (module docstring).
        self._owed: collections.OrderedDict[bytes, tuple[str | None, str]] = collections.OrderedDict()
        self._owed_lock = threading.Lock()
        # Ids of this replica's changes (`Store.append_events`): unique across replicas by the
        # prefix, and made without a system call on the path of every change.
        self._change_ids = map(f"{os.urandom(8).hex()}-{{}}".format, itertools.count())
        self._keep_interval = min(ttl / 3, 60.0) if keep_interval is None else keep_interval
        # A busy session (a request in flight, a GET stream) is loaded by its replica's keeper every
        # keep_interval, and one in use by its requests at least every recheck: one not loaded for
        # two keeper rounds is idle everywhere, so it may give way to its own caller's next one.
        self._caller_idle = max(EVICTION_GRACE, 2 * self._keep_interval + self._recheck)
        bus.subscribe(ENDED_CHANNEL, self._remote_ended)
        bus.subscribe(ANSWER_CHANNEL, self._remote_answer)
        bus.subscribe(CANCEL_CHANNEL, self._remote_cancel)
        bus.subscribe(CHANGED_CHANNEL, self._remote_changed)
        bus.subscribe(EVENTS_CHANNEL, self._remote_events)
        bus.on_reconnect(self._uncheck_all)
        self._keeper = threading.Thread(target=self._keep, name=KEEPER_THREAD, daemon=True)
        self._keeper.start()

    def _session_for(self, session_id: str) -> Session:
        def write(**changes: Any) -> None:
            self._store.update_session(session_id, **changes)
            self._bus.publish(CHANGED_CHANNEL, session_id.encode("ascii"))

        def subscribe(uri: str, subscribed: bool) -> None:
            self._store.change_subscription(session_id, uri, subscribed)
            self._bus.publish(CHANGED_CHANNEL, session_id.encode("ascii"))

        return SharedSession(write, subscribe)

    # -- what the transport asks -------------------------------------------------------------------
    def reserve(self, principal_key: str | None = None) -> HttpSession | None:
        """A session for this caller's `initialize` (a copy here; the store decides at `commit`)."""
        return self.table.new(principal_key)

    def commit(self, created: HttpSession) -> Creation:
        """`initialize` succeeded: the session exists for every replica from now on, unless the
        store refuses it (`Store.create_session`: the table full, 503, or its caller at its bound,
        429)."""
        session = created.session
        record = SessionRecord(
            protocol_version=session.negotiated_version or "",
            client_capabilities=dict(session.client_capabilities),
            client_info=session.client_info,
            principal_key=created.principal_key,
        )
        outcome = self._store.create_session(
            created.id, record, ttl=self._ttl, cap=self._cap, caller_cap=self._caller_cap, caller_idle=self._caller_idle
        )
        if outcome:
            self.table.add(created)
        return outcome

    def ready(self) -> bool:
        """Whether the store that handshake-era requests need answers now (a readiness probe asks:
        one round trip, bounded by the store's timeout)."""
        return self._store.reachable()

    def held_fresh(self, session_id: str) -> bool:
        """Whether `find` would answer from this process's copy, without a round trip to the store
        (checked within `recheck`, the bus up): such a session's request may be answered at once."""
        owner = self.table.find(session_id)
        return owner is not None and self._bus.connected and owner.checked_until > self._clock()

    def find(self, session_id: str) -> HttpSession | None:
        """The session as the store has it (its copy here, if checked within `recheck` and the
        bus is up; else loaded, and its expiry pushed out); None when it is gone, and then this
        process's copy ends too."""
        now = self._clock()
        if self._bus.connected:
            owner = self.table.find(session_id)
            if owner is not None and owner.checked_until > now:
                return owner
        record = self._store.load_session(session_id, ttl=self._ttl)
        raced = self._notice_since(session_id, now)  # the bus spoke of it while the record was read
        if raced is not None and raced:  # ended: the record is already gone
            record = None
        if record is None:
            self.table.remove(session_id)
            return None
        owner, made = self.table.adopt(session_id, record.principal_key)
        session = owner.session
        assert isinstance(session, SharedSession)
        if made:
            owner.cursor = record.cursor
            session.restore(record)
        else:
            session.sync(record)
        owner.checked_until = 0.0 if raced is not None else now + self._recheck  # changed meanwhile: load again next time
        return owner

    def delete(self, owner: HttpSession) -> None:
        self._store.delete_session(owner.id)
        self.table.remove(owner.id)
        self._bus.publish(ENDED_CHANNEL, owner.id.encode("ascii"))

    def answer(self, owner: HttpSession, response: Response, body: bytes) -> None:
        if not owner.asks.answer(response):  # not asked here: the replica that asked settles it
            self._bus.publish(ANSWER_CHANNEL, owner.id.encode("ascii") + b"\n" + body)

    def cancel(self, owner: HttpSession, request_id: Any) -> None:
        if not _cancel_inflight(self.table, owner, request_id):
            if not jsonrpc.is_request_id(request_id):
                return
            encoded = ujson.dumps(request_id).encode()
            self._bus.publish(CANCEL_CHANNEL, owner.id.encode("ascii") + b"\n" + encoded)

    def deliver(self, frames: list[bytes], uri: str | None, origin: str) -> None:
        """A change made here goes into the log of every session it concerns, on every replica; a
        resync into the logs of the streams held here; then the streams held here read their logs.
        A change the store cannot take now is owed (the module docstring), with the id it was
        first tried under, so a retry of an append that ran after all is not logged twice."""
        changes = [(frame, next(self._change_ids)) for frame in frames]
        appended = 0
        try:
            if origin == LOCAL:
                audience = [sid for sid, subscribed in self._store.session_subscriptions().items() if uri is None or _wants(subscribed, uri)]
            elif origin == RESYNC:
                audience = [owner.id for owner in self.table.snapshot() if owner.streaming]
            else:
                audience = []
            if audience:
                for frame, change in changes:
                    self._store.append_events(dict.fromkeys(audience, frame), change=change)
                    appended += 1
            self._outage = False
        except StoreUnavailable as exc:
            if not self._outage:
                log.warning("the session store is unreachable: a change waits to be delivered to handshake-era sessions (%s)", exc)
            self._outage = True
            if origin != REMOTE:  # another replica's change is owed by that replica
                self._owe(changes[appended:], uri)
            return  # reading each stream's log would wait on it again, once per stream
        self._feed_streams()

    def _owe(self, changes: list[tuple[bytes, str]], uri: str | None) -> None:
        """Keep (frame, change id) pairs for the keeper. A frame owed again replaces its earlier
        entry (one delivery of the same notification stands for both) and keeps the newer id."""
        with self._owed_lock:
            for frame, change in changes:
                self._owed.pop(frame, None)
                self._owed[frame] = (uri, change)
            if len(self._owed) > MAX_OWED:  # too much to keep: every list may have changed
                self._owed = collections.OrderedDict((frame, (None, next(self._change_ids))) for frame in RESYNC_FRAMES)
        self._wake.set()

    def _settle_owed(self) -> None:
        """The keeper's: append what was owed, oldest first, to whom it concerns now, each under
        the id of its first try (the store skips one that already ran); then every replica reads
        its streams' logs. What the store still cannot take stays owed."""
        with self._owed_lock:
            owed = list(self._owed.items())
        try:
            subscriptions = self._store.session_subscriptions()
            for frame, (uri, change) in owed:
                audience = [sid for sid, subscribed in subscriptions.items() if uri is None or _wants(subscribed, uri)]
                if audience:
                    self._store.append_events(dict.fromkeys(audience, frame), change=change)
                with self._owed_lock:
                    if self._owed.get(frame) == (uri, change):  # not owed anew meanwhile
                        del self._owed[frame]
        except StoreUnavailable:
            return
        self._outage = False
        log.info("the session store answers again: %d change(s) that waited were delivered", len(owed))
        self._bus.publish(EVENTS_CHANNEL, b"")
        self._feed_streams()

    def open_stream(self, owner: HttpSession, last_event_id: str | None) -> str:
        """A GET stream opens here: it starts after `Last-Event-ID`, or where the session's last
        stream ended, on whichever replica (read from the store now: StoreUnavailable when it
        cannot be); the priming event's id is that position."""
        if last_event_id is None:
            record = self._store.load_session(owner.id, ttl=self._ttl)
            last_event_id = record.cursor if record is not None else None
        with owner.feed_lock:
            owner.events.clear()
            owner.cursor = owner.sent = last_event_id
        self._feed(owner)
        return last_event_id or "0"

    def stream_closed(self, owner: HttpSession) -> None:
        """Remember where the stream ended (the last event it wrote; what it had queued is sent
        by the next one), for the next one opened without `Last-Event-ID`."""
        try:
            self._store.update_session(owner.id, cursor=owner.sent)
        except StoreUnavailable:
            log.debug("session %s: could not record where its stream ended", owner.id[:8])

    def close(self) -> None:
        """Stop the keeper and end this process's copies (the sessions live on in the store)."""
        self._stop.set()
        self._wake.set()
        if threading.current_thread() is not self._keeper:
            self._keeper.join(5.0)
        self.table.drain()

    # -- reading the logs ------------------------------------------------------------------------
    def _feed_streams(self) -> None:
        for owner in self.table.snapshot():
            if owner.streaming:
                self._feed(owner)

    def _feed(self, owner: HttpSession) -> None:
        """Put what the session's log has after its cursor into its stream's channel, as far as
        it has room (the rest is read on the next change or keeper round)."""
        with owner.feed_lock:
            room = owner.events.room()
            if room == 0:
                return
            try:
                events = self._store.events_after(owner.id, owner.cursor, room)
            except StoreUnavailable:
                return
            for event_id, frame in events:
                if not owner.events.put(Event(event_id, frame)):
                    break
                owner.cursor = event_id

    # -- the keeper ------------------------------------------------------------------------------
    def _keep(self) -> None:
        next_round = self._clock() + self._keep_interval
        while True:
            self._wake.wait(OWED_RETRY if self._owed else max(0.0, next_round - self._clock()))
            self._wake.clear()
            if self._stop.is_set():
                return
            if self._owed:
                self._settle_owed()
            if self._clock() >= next_round:
                next_round = self._clock() + self._keep_interval
                self._keep_round()

    def _keep_round(self) -> None:
        """Push out the expiry of this process's busy sessions, end the copies of sessions gone
        elsewhere, and refill the streams held here."""
        for owner in self.table.snapshot():
            if owner.idle_since() is not None:
                continue
            try:
                alive = self._store.load_session(owner.id, ttl=self._ttl) is not None
            except StoreUnavailable:
                break  # the next round tries again; requests meanwhile get 503
            if not alive:
                log.info("session %s ended elsewhere (deleted or expired)", owner.id[:8])
                self.table.remove(owner.id)
            elif owner.streaming:
                self._feed(owner)

    # -- what the bus brings (on its thread: quick, never raising) -------------------------------
    def _remote_ended(self, channel: str, payload: bytes) -> None:
        session_id = payload.decode("ascii", "replace")
        self._notice(session_id, ended=True)
        self.table.remove(session_id)

    def _remote_events(self, channel: str, payload: bytes) -> None:
        """Another replica appended what the store could not take earlier: read the logs now."""
        self._feed_streams()

    def _remote_changed(self, channel: str, payload: bytes) -> None:
        session_id = payload.decode("ascii", "replace")
        self._notice(session_id, ended=False)
        owner = self.table.peek(session_id)
        if owner is not None:
            owner.checked_until = 0.0  # its next request loads the record

    def _notice(self, session_id: str, *, ended: bool) -> None:
        now = self._clock()
        with self._notices_lock:
            self._notices.pop(session_id, None)
            self._notices[session_id] = (now, ended)
            while self._notices:
                oldest = next(iter(self._notices.values()))[0]
                if now - oldest <= 2 * self._recheck:
                    break
                self._notices.popitem(last=False)

    def _notice_since(self, session_id: str, since: float) -> bool | None:
        """What the bus said of the session at or after `since`: True ended, False changed, None nothing."""
        with self._notices_lock:
            notice = self._notices.get(session_id)
        if notice is None or notice[0] < since:
            return None
        return notice[1]

    def _uncheck_all(self) -> None:
        """The bus is back: what it carried meanwhile is lost, so no copy is trusted."""
        for owner in self.table.snapshot():
            owner.checked_until = 0.0

    def _remote_answer(self, channel: str, payload: bytes) -> None:
        session_id, _, body = payload.partition(b"\n")
        owner = self.table.peek(session_id.decode("ascii", "replace"))
        if owner is None:
            return
        message = jsonrpc.decode(body)
        if isinstance(message, Response):
            owner.asks.answer(message)

    def _remote_cancel(self, channel: str, payload: bytes) -> None:
        session_id, _, encoded = payload.partition(b"\n")
        owner = self.table.peek(session_id.decode("ascii", "replace"))
        if owner is None:
            return
        try:
            request_id = ujson.loads(encoded)
        except ValueError:
            return
        if jsonrpc.is_request_id(request_id):
            _cancel_inflight(self.table, owner, request_id)


def _wants(subscribed: frozenset[str], uri: str) -> bool:
    return any(uri_covers(each, uri) for each in subscribed)


def _cancel_inflight(table: SessionTable, owner: HttpSession, request_id: Any) -> bool:
    """The client stopped waiting for one of its requests: cancel it, with no response; whether
    this process had it in flight."""
    exchange = table.inflight(owner, request_id)
    if exchange is None or exchange.request.method == "initialize":
        return exchange is not None
    exchange.cancel()
    exchange.answer(Final(None))
    return True
