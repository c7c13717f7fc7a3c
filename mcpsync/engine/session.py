"""Per-connection protocol state: the era lock and what the handshake negotiated.

Strategy: the era moves once, from unlocked to handshake or modern, and only when a transport has
*written* the successful result of an era-distinctive request (`commit_era`). A failed probe leaves
the connection unlocked so the client can fall back. Everything here is guarded by one small lock
because workers and the reader thread both read it; the engine never blocks on it for long.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..protocol.versions import HANDSHAKE_ERA, LOG_LEVEL_RANK, MODERN_ERA, Era


class Session:
    """What one connection has established. HTTP handshake sessions and stdio connections each own one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._era: Era | None = None
        self._initialize_claimed = False
        self.negotiated_version: str | None = None
        self.client_capabilities: dict[str, Any] = {}
        self.client_info: dict[str, Any] | None = None
        self._log_threshold: int | None = None  # None: every level (no logging/setLevel yet)
        self._initialized = False
        self._resource_subscriptions: set[str] = set()
        self.tasks_owner: str | None = None
        """Whose tasks this connection's are when no token says who is calling: its HTTP session
        (a task made in one handshake-era session of an open endpoint is not another's to read,
        list or cancel); None on stdio, where the connection is the one client."""

    @property
    def era(self) -> Era | None:
        """The locked era, or None while the connection is still unlocked."""
        return self._era

    @property
    def initialized(self) -> bool:
        """True once the `initialize` result has been written: untagged notifications may flow."""
        return self._initialized

    @property
    def declares_roots(self) -> bool:
        """Whether the client can be asked for its roots outside a request (an initialized
        handshake-era connection whose client declared `roots`)."""
        return self.era is HANDSHAKE_ERA and self.initialized and isinstance(self.client_capabilities.get("roots"), dict)

    def claim_initialize(self) -> bool:
        """Reserve the one `initialize` of this connection; False if one already ran or is running."""
        with self._lock:
            if self._initialize_claimed:
                return False
            self._initialize_claimed = True
            return True

    def release_initialize(self) -> None:
        """An `initialize` failed before its result was written: another may be tried."""
        with self._lock:
            self._initialize_claimed = False

    def commit_era(self, era: Era) -> None:
        """Lock the era (first success wins); for the handshake era also open the notification gate."""
        if self._era is era and (era is MODERN_ERA or self._initialized):
            return  # settled already (every 2026-07-28 answer claims its era), and it never moves back
        with self._lock:
            if self._era is None:
                self._era = era
            if era is HANDSHAKE_ERA and self._era is HANDSHAKE_ERA:
                self._initialized = True

    def subscribe_resource(self, uri: str) -> None:
        with self._lock:
            self._resource_subscriptions.add(uri)

    def unsubscribe_resource(self, uri: str) -> None:
        with self._lock:
            self._resource_subscriptions.discard(uri)

    def resource_subscriptions(self) -> frozenset[str]:
        """URIs this handshake-era connection subscribed to with `resources/subscribe`."""
        with self._lock:
            return frozenset(self._resource_subscriptions)

    def set_log_level(self, level: str) -> Callable[[], None]:
        """Log at `level` and above from now on; returns what puts the level back as it was (a
        shared session undoes a change its store could not take with it)."""
        with self._lock:
            before, self._log_threshold = self._log_threshold, LOG_LEVEL_RANK[level]

        def undo() -> None:
            with self._lock:
                self._log_threshold = before

        return undo

    def wants_log(self, level: str) -> bool:
        threshold = self._log_threshold
        return threshold is None or LOG_LEVEL_RANK[level] >= threshold
