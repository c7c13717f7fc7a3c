"""The handshake era's session, as requests name it: the lookup every request of a session goes
through (`Mcp-Session-Id`), the session's GET stream, and DELETE, which ends it.

Why GET and DELETE live here: in 2026-07-28 (stateless) there is nothing to stream or end, so
both are 405 there. A handshake-era request names its session (400 without, 404 for an unknown or
expired one, or one another principal's token created); GET opens the session's stream of
untagged list changes and resource updates (one at a time: a second is 409, past `max_streams`
503), or takes back a POST stream its client lost (`Last-Event-ID`, `_resume`); DELETE ends the
session (`_sessions`).

Which resource updates a GET stream is told is its own token's business (`_told`): it ends when
that token expires, and the client opens the next one with a fresh token and its `Last-Event-ID`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ...engine.operations import update_scopes
from ...protocol.sse import sse_priming
from ...protocol.versions import HANDSHAKE_VERSIONS
from ..lifecycle.inflight import SHUTTING_DOWN
from ..lifecycle.subscriptions import may_be_told
from ._directory import LocalDirectory, SharedDirectory
from ._gate import required_scopes, token_end
from ._replies import _Refused, empty_reply, status_line
from ._requests import RETRY_MS, Requests
from ._resume import MARK as POST_STREAM_MARK
from ._rules import accepts, header
from ._sessions import HttpSession, Told
from ._state import EndpointState
from ._stream import SSE_HEADERS, SseBody

if TYPE_CHECKING:
    from ...auth.resource.guard import Auth
    from ...auth.resource.principal import Principal
    from ...engine.engine import Engine

log = logging.getLogger("mcpsync")

GET_TAKEOVER_WAIT = 2.0
"""Seconds a GET that resumes (`Last-Event-ID`) waits for the session's stream to end by itself:
its client lost it, and this server sees the connection close a moment later. A stream still
there past it is another client's, and the resume is refused 409."""


class SessionPaths:
    """A handshake-era session's lookup, GET stream and DELETE on one endpoint."""

    def __init__(
        self,
        state: EndpointState,
        engine: Engine,
        *,
        auth: Auth | None,
        directory: LocalDirectory | SharedDirectory,
        requests: Requests,
        keepalive: float,
    ) -> None:
        self._state = state
        self._engine = engine
        self._auth = auth
        self._directory = directory
        self._requests = requests
        self._keepalive = keepalive
        self._stream_ended = threading.Condition(state.lock)  # a GET stream let its session go

    def get(self, environ: dict[str, Any], start_response: Callable[..., Any], principal: Principal | None) -> Iterable[bytes]:
        owner = self._handshake_session(environ, principal)
        if not accepts(header(environ, "Accept"))[1]:
            raise _Refused(406, "Not Acceptable: a GET stream is text/event-stream")
        last_event_id = header(environ, "Last-Event-ID")
        state = self._state
        if last_event_id is not None and last_event_id.startswith(POST_STREAM_MARK):
            resumed = None if state.closing else self._requests.resume(start_response, owner, last_event_id)
            if resumed is not None:
                return resumed
            last_event_id = None  # over, or held by another replica: the session's own stream
        with state.lock:
            if state.closing:
                raise _Refused(503, SHUTTING_DOWN)
            if owner.streaming and last_event_id is not None:
                # A resume: its client has lost the stream, which this server may not have noticed
                # yet (the close is seen a moment later); wait a little for it to end by itself.
                self._stream_ended.wait_for(lambda: not owner.streaming or state.closing, GET_TAKEOVER_WAIT)
                if state.closing:
                    raise _Refused(503, SHUTTING_DOWN)
            if owner.streaming:
                raise _Refused(409, "Conflict: this session's GET stream is already open")
            if state.streams >= state.max_streams:
                raise _Refused(503, "Service Unavailable: too many open streams")
            owner.streaming = True
            self._tell_as(owner, principal)
            state.streams += 1
        try:
            start = self._directory.open_stream(owner, last_event_id)
        except BaseException:
            self._release_get(owner)
            raise
        start_response(status_line(200), list(SSE_HEADERS))
        # It ends when its token expires (no on_deadline: the stream just ends); the client opens
        # the next one with a fresh token and its Last-Event-ID, and is sent what came meanwhile.
        return SseBody(
            owner.events,
            keepalive=self._keepalive,
            prime=sse_priming(start, RETRY_MS),
            on_event=lambda event_id: setattr(owner, "sent", event_id),
            deadline=token_end(principal),
            on_close=lambda _completed: self._release_get(owner),
        )

    def delete(self, environ: dict[str, Any], start_response: Callable[..., Any], principal: Principal | None) -> Iterable[bytes]:
        owner = self._handshake_session(environ, principal)
        self._directory.delete(owner)
        return empty_reply(start_response, 204)

    def _handshake_session(self, environ: dict[str, Any], principal: Principal | None) -> HttpSession:
        """GET and DELETE exist only for handshake-era sessions: 405 otherwise."""
        version = header(environ, "MCP-Protocol-Version")
        if header(environ, "Mcp-Session-Id") is None or (version is not None and version not in HANDSHAKE_VERSIONS):
            raise _Refused(405, "Method Not Allowed: 2026-07-28 is POST only", headers=[("Allow", "POST")])
        return self.session_of(environ, principal)

    def session_of(self, environ: dict[str, Any], principal: Principal | None, request_id: Any = None) -> HttpSession:
        """The session the request names. A session belongs to the principal whose token created it:
        another's token gets the same 404 as an unknown id (so it learns nothing), a refreshed token
        of the same caller is served."""
        session_id = header(environ, "Mcp-Session-Id")
        if session_id is None:
            raise _Refused(400, "Bad Request: the Mcp-Session-Id header is required (initialize first)", request_id)
        found = self._directory.find(session_id)
        if found is not None and found.principal_key != (None if principal is None else principal.key):
            log.warning("refused a request from %s naming session %s, which another principal created", environ.get("REMOTE_ADDR"), session_id[:8])
            found = None
        if found is None:
            raise _Refused(404, "Session not found: it expired or was ended; initialize again", request_id)
        if self._auth is not None and found.events.told_scopes != _scopes_of(principal):
            # Looked at without the lock: most requests carry a token with the scopes of the session's
            # last one, and taking the lock every session shares on each of them made callers queue.
            with self._state.lock:
                if not found.streaming:  # between streams, this token decides what waits for the next (`_told`)
                    self._tell_as(found, principal)
        return found

    def _release_get(self, owner: HttpSession) -> None:
        with self._state.lock:
            owner.streaming = False
            self._state.streams -= 1
            self._stream_ended.notify_all()
        self._directory.stream_closed(owner)

    def _tell_as(self, owner: HttpSession, principal: Principal | None) -> None:
        """What `owner`'s GET stream is told is now decided by `principal`'s token (under the lock)."""
        owner.events.told = self._told(principal)
        owner.events.told_scopes = _scopes_of(principal)

    def _told(self, principal: Principal | None) -> Told | None:
        """Which resource updates a handshake-era session's GET stream opened with `principal`'s
        token is told (None, without `Auth`: all it subscribed to).

        The stream's token decides, not the token of the request that subscribed: the stream is
        what carries the update, its token is the caller's latest word on what it may read (a
        refreshed or stepped-down token opens the next stream, and a stream ends when its token
        expires), and only the process holding the stream knows it: with replicas, the
        subscription may have been made through another one, and the store keeps the URIs alone.
        A subscription made with a narrower token than the stream's tells the stream what its
        own token may read anyway. Between streams, the token of the session's latest request
        decides which updates are kept for the next stream; that stream checks them again.
        It reads nothing of the token but its scopes: `session_of` makes it again only when they
        change (`told_scopes`)."""
        if principal is None:
            return None
        catalog, required = self._engine.catalog, required_scopes(self._auth)
        return lambda uri: may_be_told(principal, update_scopes(catalog, uri), required)


def _scopes_of(principal: Principal | None) -> frozenset[str] | None:
    """What a session's filter of told updates is made from: the token's scopes (None: no `Auth`)."""
    return None if principal is None else principal.scopes
