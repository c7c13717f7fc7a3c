"""The store: what the replicas of one MCP server share besides the bus's messages.

Strategy: a handshake-era session is a small record (`SessionRecord`) that any replica can load,
plus a bounded log of the events meant for its GET stream, so whichever replica a request reaches
can answer it and whichever replica a client reconnects to can resume its stream. What cannot be
shared (a request in flight, an open stream, a tool waiting for the client's answer) stays in the
process that holds it, and the bus carries what must reach it (`mcpsync.transport` decides that).
The store also holds the one-time marks of single-use `requestState` values (`claim`).

The protocol is written for a key-value server (Redis, a SQL table): every method is one round trip
or one pipeline, none holds a lock between calls, and each says what it does when two replicas call
at once. The transports never see a backend: `MemoryStore` (in this process; shared by the servers
handed the same instance, as two replicas are in a test) and `RedisStore` (the `mcpsync[redis]`
extra) are interchangeable.

Failures: a backend that cannot be reached raises `StoreUnavailable` from any method, at once or
within its socket timeout, and never answers from a guess: the transport answers 503 with
`Retry-After` rather than a wrong 404.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .._creation import Creation as Creation  # re-exported: the session store answers with it
from ..errors import McpsyncError

__all__ = ["Creation", "SessionRecord", "Store", "StoreUnavailable"]

RETRY_AFTER = 1
"""Seconds a client is told to wait (`Retry-After`) when the store cannot be reached."""


class StoreUnavailable(McpsyncError):
    """The store cannot be reached (or did not answer in time); the operation may be retried."""


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """What every replica needs to serve a request of a handshake-era session.

    `cursor` is the id of the last GET-stream event a client was sent when its last GET stream
    closed: a GET without `Last-Event-ID` starts after it (so what arrived while no stream was open
    is delivered, and what was delivered is not repeated)."""

    protocol_version: str
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    client_info: dict[str, Any] | None = None
    principal_key: str | None = None
    log_level: str | None = None
    subscriptions: frozenset[str] = frozenset()
    cursor: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (`subscriptions` as a sorted list)."""
        return {
            "protocol_version": self.protocol_version,
            "client_capabilities": self.client_capabilities,
            "client_info": self.client_info,
            "principal_key": self.principal_key,
            "log_level": self.log_level,
            "subscriptions": sorted(self.subscriptions),
            "cursor": self.cursor,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionRecord:
        """The record `to_json` made. Raises ValueError for anything else (a corrupt entry)."""
        try:
            return cls(
                protocol_version=str(data["protocol_version"]),
                client_capabilities=dict(data.get("client_capabilities") or {}),
                client_info=data.get("client_info"),
                principal_key=data.get("principal_key"),
                log_level=data.get("log_level"),
                subscriptions=frozenset(data.get("subscriptions") or ()),
                cursor=data.get("cursor"),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a session record: {exc}") from None


@runtime_checkable
class Store(Protocol):
    """The shared state of the replicas; see the module docstring. Every method may raise
    `StoreUnavailable`."""

    # -- handshake-era sessions ----------------------------------------------------------------
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
        """Add a session whose `initialize` succeeded; it expires after `ttl` seconds unless loaded.

        The caller is `record.principal_key` (None, an endpoint without authorization, is one
        caller: everyone). A session is *fresh* until it is first loaded; a fresh one may give way
        to a new one (a client that never came back loses nothing), a used one never does here.

        1. The caller's own bound: when `caller_cap` is given, the caller is not None and it
           already holds `caller_cap` live sessions, its own fresh session that has waited longest
           is evicted; failing that, with `caller_idle` given, its own session loaded least
           recently, if that was more than `caller_idle` seconds ago (judged from its expiry and
           this `ttl`: one deployment gives every replica one ttl), so a client that reconnects
           without DELETE reclaims what it abandoned; else nothing is added:
           `Creation.CALLER_FULL`. The caller chooses `caller_idle` above the interval at which
           it loads the sessions it keeps busy, so a busy one never gives way.
        2. The shared bound: when `cap` live sessions exist, the fresh session that has waited
           longest *among those that may give way* is evicted: the caller's own, or those of a
           caller holding more than the asking caller will hold once this one is added (its count
           plus one). So a caller is never made to give a session to one who would then hold more
           than it: a newcomer (holding none) displaces the fresh sessions of anyone holding
           two or more, and nobody's only session. When none may give way, nothing is added:
           `Creation.FULL`.

        Why this share: with per-caller bounds alone the shared table still fills once
        `cap / caller_cap` callers hold their bound, and a newcomer would be refused for a whole
        `ttl`; with it, filling the table against a newcomer takes `cap` callers holding one fresh
        session each, or sessions that are really in use, which is what `cap` is for.

        Atomic: two replicas creating at once never exceed `cap`, nor one caller's `caller_cap`.
        An id created again replaces its session (its log included)."""
        ...

    def load_session(self, session_id: str, *, ttl: float) -> SessionRecord | None:
        """The session's record, its expiry pushed to `ttl` seconds from now (and no longer
        fresh); None when it is unknown, expired, evicted or deleted."""
        ...

    def update_session(self, session_id: str, **changes: Any) -> None:
        """Set some fields of a live session's record (`log_level`, `subscriptions`, `cursor`);
        nothing when it no longer exists. Each field is written on its own (the last writer of a
        field wins; two replicas changing different fields at once both keep theirs)."""
        ...

    def change_subscription(self, session_id: str, uri: str, subscribed: bool) -> None:
        """Add `uri` to a live session's subscriptions (or remove it), atomically: two replicas
        subscribing one session to two URIs at once keep both. Nothing when the session is gone."""
        ...

    def delete_session(self, session_id: str) -> bool:
        """End a session everywhere, with its event log; True if it existed."""
        ...

    def session_subscriptions(self) -> dict[str, frozenset[str]]:
        """Every live session's id and the URIs it subscribed to: the audience of a change."""
        ...

    # -- a session's GET-stream events ---------------------------------------------------------
    def append_events(self, frames: Mapping[str, bytes], *, change: str | None = None) -> dict[str, str]:
        """Append one encoded frame to the event log of each named session (one pipeline for all);
        the id each got. A log keeps its newest `log_cap` events (the backend's setting) and ends
        with its session. Ids are opaque strings, increasing within a log, never reused in it.
        A session that no longer exists gets no event (and is absent from the answer).

        Idempotent per `change`: an id the caller chose for this change before its first try
        (unique, e.g. random). A call naming a change that an earlier call already appended (to
        any session) appends nothing and answers {}; the mark is written in the same step as the
        append and lives as long as the longest remaining ttl of the sessions it reached. So a
        retry after `StoreUnavailable`, which says nothing of whether the append ran (a Redis
        that stalls, then runs what it was sent), never logs the change twice."""
        ...

    def events_after(self, session_id: str, after: str | None, limit: int) -> list[tuple[str, bytes]]:
        """Up to `limit` events of the session's log after the event `after` (None: from the
        oldest kept), oldest first, as (id, frame). An `after` not of this backend's id form
        counts as None; events dropped by the cap are simply absent, and an unknown session has
        none."""
        ...

    # -- single-use requestState ---------------------------------------------------------------
    def claim(self, key: str, ttl: float) -> bool:
        """Mark `key` used for `ttl` seconds: True for the first claim, False for every later one
        within `ttl` on any replica (atomic: of two replicas claiming at once, exactly one wins)."""
        ...

    def reachable(self) -> bool:
        """Whether the store answers now (a readiness probe asks; bounded by the store's own
        timeouts, never raising)."""
        ...

    def close(self) -> None:
        """Release connections; idempotent."""
        ...
