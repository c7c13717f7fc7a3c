"""The POST path: what one POST carries, checked at the HTTP level, routed to its era, and made
into the exchange the engine runs (`_requests`).

2026-07-28 (stateless): each POST runs on a fresh modern `Session`; the routing headers are
checked against the body between the envelope and the version check (`_headers`). A client
notification is acknowledged and dropped (closing a stream is the cancel). Handshake era:
`initialize` reserves a session, committed when its answer claims the era (`Mcp-Session-Id`);
later requests name it (`_session_paths`), and a request id already in flight in the session is
refused.

Server-to-client requests (handshake era): a tool that elicits, samples or asks for the roots
calls its exchange's `ask`, which writes the JSON-RPC request (id `mcpsync-N`, unique in the
session) into the request's own channel, so the response becomes an event stream (such tools run
on a worker, never inline, so the WSGI thread is free to stream it) and the request is an SSE
`message` event. The client answers with a POST of its own carrying the JSON-RPC response and the
session's `Mcp-Session-Id`: it is matched by id to the waiting ask (`_sessions.PendingAsks`)
and answered 202, as is an answer nobody awaits (ignored). Asks still pending fail when their
request ends (answered, timed out, cancelled, its stream closed by a client that went away) or
their session ends (DELETE, expiry, shutdown); an asker that gives up cancels its future, and the
client is sent `notifications/cancelled` while the stream is open. A 2026-07-28 request and
`initialize` never write a request: `ask` raises (2026-07-28 tools return `input_required`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ...bus.store import Creation
from ...engine.engine import NO_ENVELOPE
from ...engine.session import Session
from ...protocol import jsonrpc
from ...protocol.jsonrpc import ErrorCode, Invalid, McpError, Notification, Response
from ...protocol.methods import MODERN_ONLY_METHODS
from ...protocol.versions import HANDSHAKE_ERA, MODERN_ERA, MODERN_VERSIONS, Era, unsupported_version
from ._directory import LocalDirectory, SharedDirectory
from ._headers import ToolHeaderPlans, check_routing_headers
from ._replies import _Refused, decoded_body, empty_reply, json_reply
from ._requests import HTTP, Requests, sessions_refused
from ._rules import Headers, accepts, header, media_type, route, trace_headers
from ._session_paths import SessionPaths
from ._stream import Exchange

if TYPE_CHECKING:
    from ...auth.resource.principal import Principal
    from ...engine.engine import Engine

CHANNEL_CAPACITY = 256
"""Frames a response's channel (and a session's queue for its GET stream) holds."""


class PostPath:
    """The POSTs to one endpoint, bodies of at most `max_body` bytes."""

    def __init__(
        self,
        engine: Engine,
        *,
        directory: LocalDirectory | SharedDirectory,
        session_paths: SessionPaths,
        requests: Requests,
        max_body: int,
    ) -> None:
        self._engine = engine
        self._directory = directory
        self._sessions = directory.table
        self._session_paths = session_paths
        self._requests = requests
        self._max_body = max_body
        self._param_headers = ToolHeaderPlans(engine)

    def post(self, environ: dict[str, Any], start_response: Callable[..., Any], principal: Principal | None) -> Iterable[bytes]:
        if media_type(header(environ, "Content-Type")) != "application/json":
            raise _Refused(415, "Unsupported Media Type: the body must be application/json")
        if accepts(header(environ, "Accept")) != (True, True):
            raise _Refused(406, "Not Acceptable: Accept must list application/json and text/event-stream")
        body, message = decoded_body(environ, self._max_body)
        version = header(environ, "MCP-Protocol-Version")
        era = route(message, version)
        if isinstance(message, Invalid):  # never reached the engine: a client error in either era
            return json_reply(start_response, 400, jsonrpc.encode(jsonrpc.error_frame(message.answer_id, message.error)))
        if isinstance(message, Response):
            if era is MODERN_ERA:
                raise _Refused(400, "Invalid Request: a 2026-07-28 POST carries one request or notification")
            owner = self._session_paths.session_of(environ, principal)
            self._directory.answer(owner, message, body)  # to the request that asked, wherever it waits
            return empty_reply(start_response, 202)
        carried = trace_headers(environ) if self._engine.observer is not None else None  # read only when traced
        if isinstance(message, Notification):
            return self._notification(environ, start_response, message, era, version, principal, carried)
        if era is MODERN_ERA:
            session = Session()
            session.commit_era(MODERN_ERA)  # stateless: this request alone, and no envelope is no request
            found = Headers(environ)
            exchange = Exchange(message, streams=True, capacity=CHANNEL_CAPACITY, trace_headers=carried)
            check = lambda request, envelope: check_routing_headers(found, request, envelope, self._param_headers)  # noqa: E731 - a one-line closure over `found`
            return self._requests.run(environ, start_response, exchange, session, MODERN_ERA, check, principal)
        if message.method == "initialize":
            created = self._directory.reserve(None if principal is None else principal.key)
            if created is None:
                raise sessions_refused(Creation.FULL, message.id)
            created.observed = self._engine.session_began(HTTP)  # measured if it is made and ends here
            exchange = Exchange(message, streams=False, capacity=CHANNEL_CAPACITY, trace_headers=carried)
            return self._requests.run(environ, start_response, exchange, created.session, HANDSHAKE_ERA, None, principal, created=created)
        if message.method in MODERN_ONLY_METHODS and header(environ, "Mcp-Session-Id") is None:  # a bare server/discover
            raise _Refused(400, f"Bad Request: {message.method} is a 2026-07-28 method, and {NO_ENVELOPE}", message.id)
        owner = self._session_paths.session_of(environ, principal, message.id)
        exchange = Exchange(message, streams=True, capacity=CHANNEL_CAPACITY, asks=owner.asks, trace_headers=carried)
        exchange.session_id = owner.id
        if not self._sessions.begin(owner, exchange):
            error = McpError(ErrorCode.INVALID_REQUEST, "Invalid Request: a request with this id is already in flight")
            return json_reply(start_response, 200, jsonrpc.encode(jsonrpc.error_frame(message.id, error)))
        exchange.when_answered(lambda: self._sessions.end(owner, exchange))
        return self._requests.run(environ, start_response, exchange, owner.session, HANDSHAKE_ERA, None, principal)

    def _notification(
        self,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
        message: Notification,
        era: Era,
        version: str | None,
        principal: Principal | None,
        carried: dict[str, str] | None,
    ) -> Iterable[bytes]:
        if era is MODERN_ERA:
            # 2026-07-28 has no client notification over HTTP (closing a stream is the cancel);
            # acknowledged and dropped, as the SDKs do, unless the version is not served.
            if version is not None and version not in MODERN_VERSIONS:
                raise _Refused(400, "Unsupported protocol version", error=unsupported_version(version))
            return empty_reply(start_response, 202)
        owner = self._session_paths.session_of(environ, principal)
        self._engine.notified(message, owner.session, HTTP, carried)
        if message.method == "notifications/cancelled":  # the client stopped waiting: no response
            self._directory.cancel(owner, message.params.get("requestId"))
        return empty_reply(start_response, 202)
