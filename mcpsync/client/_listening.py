"""The listeners of a client session: opening them in either era, routing the server's change
notifications to them, and closing them (unsubscribing what no other listener watches).

Why apart from the session: the listeners' bookkeeping (by subscription id or key, URIs counted
by watcher) is one job; the session only opens, routes and ends through it. It shares the
session's lock, so a listener and the call behind it come and go together.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any, Protocol

from ..errors import CallTimeout, ConnectionLost, SessionClosed
from ..protocol.jsonrpc import McpError
from ._pending import PendingCall, Progress
from .listen import Listener

log = logging.getLogger("mcpsync.client")


class Session(Protocol):
    """The session as its listeners see it (a `ClientSession`)."""

    @property
    def _lock(self) -> threading.Lock: ...

    @property
    def _ids(self) -> Iterator[int]: ...

    @property
    def _closed(self) -> bool: ...

    def request(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None, progress: Progress | None = None
    ) -> dict[str, Any]: ...

    def _register(
        self, request_id: Any, method: str, params: dict[str, Any] | None, progress: Progress | None = None, timeout: float | None = None
    ) -> PendingCall: ...

    def _unregister(self, pending: PendingCall) -> None: ...

    def _take_pending(self, request_id: Any) -> PendingCall | None: ...

    def _cancel_on_wire(self, request_id: Any, reason: str, timeout: float | None = None) -> None: ...


class Listening:
    """The open listeners of one session, by subscription id (2026-07-28) or key (handshake era)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._lock = session._lock
        self._listeners: dict[Any, Listener] = {}
        self._uri_watchers: dict[str, int] = {}  # handshake era: open listeners per subscribed URI

    def detach(self) -> list[Listener]:
        """Forget every listener and return them, for the caller to finish (it holds the lock)."""
        listeners = list(self._listeners.values())
        self._listeners.clear()
        return listeners

    def targets(self, subscription_id: Any) -> list[Listener]:
        """Who hears a change: the listener of its subscription id, or (none given) every
        listener without one."""
        with self._lock:
            if subscription_id is not None:
                return [self._listeners[subscription_id]] if subscription_id in self._listeners else []
            return [listener for listener in self._listeners.values() if listener.subscription_id is None]

    def listen_modern(self, wanted: dict[str, bool], uris: tuple[str, ...], timeout: float, queue_events: bool = True) -> Listener:
        """A `subscriptions/listen`, acknowledged within `timeout` (else CallTimeout, cancelled)."""
        session = self._session
        request_id = f"listen-{next(session._ids)}"
        filter_: dict[str, Any] = {f"{kind}ListChanged": True for kind, on in wanted.items() if on}
        if uris:
            filter_["resourceSubscriptions"] = list(uris)
        listener = Listener(request_id, lambda: self._stop_modern(request_id), queue_events=queue_events)
        pending = session._register(request_id, "subscriptions/listen", {"notifications": filter_})
        with self._lock:
            self._listeners[request_id] = listener
        try:
            pending.send()  # with the params _register gave it (a traced listen's context in _meta)
            if not listener._wait_ack(timeout, pending):
                session._cancel_on_wire(request_id, "no acknowledgement")
                raise CallTimeout(f"subscriptions/listen was not acknowledged within {timeout} s")
        except BaseException:
            with self._lock:
                self._listeners.pop(request_id, None)
            session._unregister(pending)
            raise
        pending.on_done(lambda _result, _error: self._listen_ended(request_id, pending))
        return listener

    def _listen_ended(self, request_id: Any, pending: PendingCall) -> None:
        """The server completed the listen (graceful shutdown) or the connection was lost."""
        self._session._unregister(pending)
        with self._lock:
            listener = self._listeners.pop(request_id, None)
        if listener is not None:
            listener._finish()

    def _stop_modern(self, request_id: Any) -> None:
        with self._lock:
            listener = self._listeners.pop(request_id, None)
        pending = self._session._take_pending(request_id)
        if listener is not None and pending is not None and not self._session._closed:
            self._session._cancel_on_wire(request_id, "listener closed")

    def listen_handshake(self, wanted: dict[str, bool], uris: tuple[str, ...], timeout: float | None) -> Listener:
        """The server's unsolicited changes, and resources/subscribe for each URI no other listener watches."""
        key = object()
        listener = Listener(None, lambda: self._stop_handshake(key, uris), kinds=frozenset(k for k, on in wanted.items() if on), uris=uris)
        with self._lock:
            self._listeners[key] = listener
        subscribed: list[str] = []
        try:
            for uri in uris:
                with self._lock:
                    first = self._uri_watchers.get(uri, 0) == 0
                if first:
                    self._session.request("resources/subscribe", {"uri": uri}, timeout=timeout)
                with self._lock:
                    self._uri_watchers[uri] = self._uri_watchers.get(uri, 0) + 1
                subscribed.append(uri)
        except BaseException:
            self._stop_handshake(key, tuple(subscribed))
            raise
        listener._acknowledge({"handshake": True})
        return listener

    def _stop_handshake(self, key: object, uris: tuple[str, ...]) -> None:
        """Forget a handshake-era listener; unsubscribe a URI only when no other listener watches it."""
        with self._lock:
            self._listeners.pop(key, None)
            last = []
            for uri in uris:
                count = self._uri_watchers.get(uri, 0) - 1
                if count <= 0:
                    self._uri_watchers.pop(uri, None)
                    last.append(uri)
                else:
                    self._uri_watchers[uri] = count
        for uri in last:
            try:
                self._session.request("resources/unsubscribe", {"uri": uri})
            except (McpError, ConnectionLost, SessionClosed, CallTimeout) as exc:
                log.debug("resources/unsubscribe %s failed: %s", uri, exc)
