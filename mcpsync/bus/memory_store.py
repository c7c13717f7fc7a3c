"""The in-memory store: one process's shared state, and two replicas' in a test.

Strategy: dicts under one lock, with expiry checked lazily against a clock: a call that could see
an expired entry first drops every one (a scan: this store serves one process's sessions, or a
test's two replicas, never a fleet; that is Redis's job). Servers
handed the same `MemoryStore` share it as replicas share Redis (with `MemoryBus.peer()` for the
messages), which is how the transports' multi-replica rules are tested without a network.

Event ids are the decimal numbers 1, 2, 3... of each log, which sort as integers.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..protocol.sse import event_number
from .store import Creation, SessionRecord

__all__ = ["MemoryStore"]

DEFAULT_LOG_CAP = 256
"""Events kept per session log."""


class _Entry:
    __slots__ = ("record", "expires", "fresh", "log", "count")

    def __init__(self, record: SessionRecord, expires: float) -> None:
        self.record = record
        self.expires = expires
        self.fresh = True
        self.log: collections.deque[tuple[int, bytes]] = collections.deque()
        self.count = 0


def _gives_way(owner: str | None, caller: str | None, held: Mapping[str | None, int], mine: int) -> bool:
    """May a fresh session of `owner` be evicted for `caller`, who holds `mine` (`Store.create_session`)?"""
    return owner == caller or held[owner] > mine + 1


class MemoryStore:
    """A `Store` in this process; see the module docstring."""

    def __init__(self, *, log_cap: int = DEFAULT_LOG_CAP, clock: Callable[[], float] = time.monotonic) -> None:
        if log_cap < 1:
            raise ValueError("log_cap must be at least 1")
        self._lock = threading.Lock()
        self._sessions: dict[str, _Entry] = {}
        self._claims: dict[str, float] = {}
        self._changes: dict[str, float] = {}  # change id -> until when a retry of it is skipped
        self._log_cap = log_cap
        self._clock = clock

    def _expire_locked(self, now: float) -> None:
        for table, expired in (
            (self._sessions, [sid for sid, entry in self._sessions.items() if entry.expires <= now]),
            (self._claims, [key for key, until in self._claims.items() if until <= now]),
            (self._changes, [key for key, until in self._changes.items() if until <= now]),
        ):
            for key in expired:
                del table[key]

    # -- sessions --------------------------------------------------------------------------------
    def create_session(
        self,
        session_id: str,
        record: SessionRecord,
        *,
        ttl: float,
        cap: int,
        caller_cap: int | None = None,
        caller_idle: float | None = None,
    ) -> Creation:
        """See `Store.create_session`: counted by a scan of the live sessions, under the lock."""
        caller = record.principal_key
        with self._lock:
            now = self._clock()
            self._expire_locked(now)
            self._sessions.pop(session_id, None)  # created again: replaced, not counted
            fresh = sorted((entry.expires, sid) for sid, entry in self._sessions.items() if entry.fresh)
            held = collections.Counter(entry.record.principal_key for entry in self._sessions.values())
            if caller_cap is not None and caller is not None and held[caller] >= caller_cap:
                own = [sid for _, sid in fresh if self._sessions[sid].record.principal_key == caller]
                if not own and caller_idle is not None:
                    used = sorted((entry.expires, sid) for sid, entry in self._sessions.items() if entry.record.principal_key == caller)
                    own = [sid for expires, sid in used[:1] if expires <= now + ttl - caller_idle]
                if not own:
                    return Creation.CALLER_FULL
                del self._sessions[own[0]]
            elif len(self._sessions) >= cap:
                mine = held[caller]
                givers = [sid for _, sid in fresh if _gives_way(self._sessions[sid].record.principal_key, caller, held, mine)]
                if not givers:
                    return Creation.FULL
                del self._sessions[givers[0]]
            self._sessions[session_id] = _Entry(record, now + ttl)
            return Creation.CREATED

    def load_session(self, session_id: str, *, ttl: float) -> SessionRecord | None:
        with self._lock:
            now = self._clock()
            self._expire_locked(now)
            entry = self._sessions.get(session_id)
            if entry is None:
                return None
            entry.expires = now + ttl
            entry.fresh = False
            return entry.record

    def update_session(self, session_id: str, **changes: Any) -> None:
        with self._lock:
            entry = self._sessions.get(session_id)
            if entry is not None and entry.expires > self._clock():
                entry.record = replace(entry.record, **changes)

    def change_subscription(self, session_id: str, uri: str, subscribed: bool) -> None:
        with self._lock:
            entry = self._sessions.get(session_id)
            if entry is not None and entry.expires > self._clock():
                held = entry.record.subscriptions
                entry.record = replace(entry.record, subscriptions=held | {uri} if subscribed else held - {uri})

    def delete_session(self, session_id: str) -> bool:
        with self._lock:
            self._expire_locked(self._clock())
            return self._sessions.pop(session_id, None) is not None

    def session_subscriptions(self) -> dict[str, frozenset[str]]:
        with self._lock:
            self._expire_locked(self._clock())
            return {sid: entry.record.subscriptions for sid, entry in self._sessions.items()}

    # -- event logs ------------------------------------------------------------------------------
    def append_events(self, frames: Mapping[str, bytes], *, change: str | None = None) -> dict[str, str]:
        """See `Store.append_events`; a `change`'s mark lives as long as the longest remaining ttl
        of the sessions it reached, as in Redis."""
        ids: dict[str, str] = {}
        with self._lock:
            now = self._clock()
            if change is not None and self._changes.get(change, now) > now:
                return ids
            longest = now
            for sid, frame in frames.items():
                entry = self._sessions.get(sid)
                if entry is None or entry.expires <= now:
                    continue
                entry.count += 1
                entry.log.append((entry.count, frame))
                if len(entry.log) > self._log_cap:
                    entry.log.popleft()
                ids[sid] = str(entry.count)
                longest = max(longest, entry.expires)
            if change is not None and ids:
                self._changes[change] = longest
        return ids

    def events_after(self, session_id: str, after: str | None, limit: int) -> list[tuple[str, bytes]]:
        start = (event_number(after) if after is not None else None) or 0
        with self._lock:
            entry = self._sessions.get(session_id)
            if entry is None or entry.expires <= self._clock():
                return []
            found = [(str(number), frame) for number, frame in entry.log if number > start]
        return found[:limit]

    # -- single use ------------------------------------------------------------------------------
    def claim(self, key: str, ttl: float) -> bool:
        with self._lock:
            now = self._clock()
            self._expire_locked(now)
            if key in self._claims:
                return False
            self._claims[key] = now + ttl
            return True

    def reachable(self) -> bool:
        """Always: it is in this process."""
        return True

    def close(self) -> None:
        """Nothing to release."""
