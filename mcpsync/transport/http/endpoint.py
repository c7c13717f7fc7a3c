"""The HTTP transport: a WSGI application serving one MCP endpoint, both protocol eras.

Strategy: one POST, one engine call. The WSGI thread that received a request validates it at the
HTTP level (`Host`/`Origin`, method, `Content-Type`, `Accept`, body size), decodes the body once,
routes it to an era (`_rules.route`), hands the engine call to a bounded executor
(`mcpsync-http-worker-N`) and then waits on the request's channel (`_stream`) for the first
thing to send. A request that cannot send anything before its answer (`Engine.runs_inline`: a
listing, a forwarded call, a tool without a `Context`) runs on the WSGI thread itself, sparing
the hand-off; such a tool is not interrupted by the request timeout (nothing could interrupt it
on a worker either, but there the client would be answered -32603 on time). A shutdown that gives
up on it still answers it: mcpsync's own server lets another thread write the response
(`RESPOND_NOW`); under another WSGI server the answer waits until the tool returns. What comes first:
- the answer, within the keep-alive interval: a JSON response, with the era's status code;
- a progress or log notification, or the interval passing in silence: `200 text/event-stream`,
  the notifications as they come, keep-alive comments, then the answer, which ends the stream.
So a quick answer can still carry the spec's 400/404, nothing is buffered beyond the bounded
channel, a forwarded call (a `Deferred` outcome) is answered by whichever thread resolves it, and
a client that goes away is noticed by the next write: the server closes the body, and closing it
cancels the request. No thread waits longer than the keep-alive interval without writing.

2026-07-28 (stateless): each POST runs on a fresh modern `Session`; the routing headers are
checked against the body between the envelope and the version check (`_headers`).
`subscriptions/listen` answers with an SSE stream: the acknowledgement first, then the tagged
changes (registration and acknowledgement under one lock that publishing also takes, so no change
overtakes its ack), keep-alive comments, and the `complete` result on shutdown. GET and DELETE are
405. Handshake era: `initialize` creates a session (`Mcp-Session-Id`); later requests name it
(400 without, 404 for an unknown or expired one); GET opens the session's stream of untagged list
changes and resource updates; DELETE ends the session (`_sessions`).

Server-to-client requests (handshake era): a tool that elicits, samples or asks for the roots
calls its exchange's `ask`, which writes the JSON-RPC request (id `mcpsync-N`, unique in the
session) into the request's own channel, so the response becomes an event stream (such tools run
on a worker, never inline, so this WSGI thread is free to stream it) and the request is an SSE
`message` event. The client answers with a POST of its own carrying the JSON-RPC response and the
session's `Mcp-Session-Id`: it is matched by id to the waiting ask (`_sessions.PendingAsks`)
and answered 202, as is an answer nobody awaits (ignored). Asks still pending fail when their
request ends (answered, timed out, cancelled, its stream closed by a client that went away) or
their session ends (DELETE, expiry, shutdown); an asker that gives up cancels its future, and the
client is sent `notifications/cancelled` while the stream is open. A 2026-07-28 request and
`initialize` never write a request: `ask` raises (2026-07-28 tools return `input_required`).

Limits: the body (413), each request's run time (a -32603 answer and the request cancelled),
the streams that stay open (listens and GET streams; past it a listen is refused with -32603 and
a GET with 503), the subscriptions, the sessions (503 for one more `initialize`), each channel.

Before the body: everything the head decides (the token, the Host and Origin, the method) is
checked before `wsgi.input` is read, so a caller refused costs no body under any WSGI server; and
under mcpsync's own, `check_head` is called before the body is even received or `100 Continue`
sent (the server sends its answer and closes), and the bodies held at once are bounded there. A
body to this app's other paths (404, the metadata, a CORS preflight) is never read there either:
their answers do not depend on it. The fallback's requests are the fallback's (`check_head`).

Threads: besides the WSGI server's own, only the executor's workers, joined by `shutdown()`.

Deployment: the app keeps its state in its process. 2026-07-28 requests need none, so any number
of worker processes and machines can serve them; a listen hears the changes made in its own
process. A handshake-era session lives in the process that answered its `initialize`: with
several worker processes, route each session to one (sticky on `Mcp-Session-Id`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from ...auth.resource.guard import AuthRefusal
from ...auth.resource.principal import InsufficientScope
from ...bus.store import RETRY_AFTER, Creation, StoreUnavailable
from ...engine.engine import NO_ENVELOPE, Engine
from ...engine.interceptors import TransportInfo
from ...engine.operations import update_scopes
from ...engine.outcome import Failure, NoResponse, Outcome, Subscribed, Success
from ...engine.session import Session
from ...engine.single_use import RequestStateUnchecked
from ...httpd.server import RESPOND_NOW
from ...protocol import jsonrpc
from ...protocol.framing import DEFAULT_MAX_FRAME_BYTES
from ...protocol.jsonrpc import ErrorCode, Invalid, McpError, Notification, Request, Response
from ...protocol.methods import MODERN_ONLY_METHODS
from ...protocol.sse import sse_priming
from ...protocol.versions import HANDSHAKE_VERSIONS, META_SUBSCRIPTION_ID, MODERN_VERSIONS, Era, unsupported_version
from ..lifecycle.inflight import SHUTTING_DOWN, InFlight, answer_frame, shutting_down_frame
from ..lifecycle.subscriptions import DEFAULT_SUBSCRIPTION_CAP, LOCAL, Subscription, complete_frame, may_be_told, tagged_frame
from ._cors import Cors
from ._directory import LocalDirectory, SessionStoreDown, SharedDirectory
from ._headers import ToolHeaderPlans, check_routing_headers
from ._replies import _Refused, empty_reply, json_reply, read_body, status_line
from ._resume import MARK as POST_STREAM_MARK
from ._resume import DetachedStreams, StreamLog
from ._rules import (
    Headers,
    accepts,
    error_status,
    header,
    media_type,
    normalize_hosts,
    normalize_origins,
    normalize_path,
    rebinding_refusal,
    rebinding_remedy,
    route,
)
from ._sessions import FULL_RETRY_AFTER, HttpSession, SessionTable, Told
from ._stream import CLOSED, RELEASE, SSE_HEADERS, TIMEOUT, Exchange, Final, SseBody
from .options import (
    DEFAULT_KEEPALIVE,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_SESSIONS_PER_CALLER,
    DEFAULT_MAX_STREAMS,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_SESSION_TIMEOUT,
    HeadAnswer,
    WsgiApp,
)

if TYPE_CHECKING:
    from ...auth.resource.guard import Auth
    from ...auth.resource.principal import Principal
    from ...bus import Bus
    from ...bus.store import Store

log = logging.getLogger("mcpsync")

HTTP = TransportInfo("http", supports_subscriptions=True, handshake_push=True)

CHANNEL_CAPACITY = 256
RETRY_MS = 1000
"""The `retry` of a resumable stream's priming event: how long a client waits before reconnecting."""
STORE_DOWN = "Service Unavailable: the session store cannot be reached; retry"
GET_TAKEOVER_WAIT = 2.0
"""Seconds a GET that resumes (`Last-Event-ID`) waits for the session's stream to end by itself:
its client lost it, and this server sees the connection close a moment later. A stream still
there past it is another client's, and the resume is refused 409."""

RespondNow = Callable[[str, list[tuple[str, str]], bytes], bool]
_ADMITTED = "mcpsync.admitted"
"""The environ key where `check_head` leaves (the transport, the principal) for `__call__`."""


def _token_end(principal: Principal | None) -> float | None:
    """When a stream opened with this principal's token must end (`time.monotonic()`), or None."""
    if principal is None or principal.expires_at is None:
        return None
    return time.monotonic() + max(0.0, principal.expires_at - time.time())


def _warn_unguarded_scopes(engine: Engine, path: str) -> None:
    """Entries that declare scopes, served where no token is checked: say so once, at start, since
    every caller may use them (the scopes only mean something behind `Auth`)."""
    snapshot = engine.catalog.snapshot
    scoped = [entry.name for entries in (snapshot.tools, snapshot.prompts, snapshot.resources, snapshot.templates) for entry in entries if entry.scopes]
    if scoped:
        log.warning(
            "the HTTP endpoint %s checks no tokens (no auth=), so every caller may use %s, which declare%s scopes",
            path,
            ", ".join(scoped),
            "s" if len(scoped) == 1 else "",
        )


class _Caller(NamedTuple):
    """Who sent a request, as its answer may need to say: the principal its token stands for, and
    its environ (for the URL of a 403's challenge)."""

    environ: dict[str, Any]
    principal: Principal | None


class WsgiTransport:
    """A WSGI application for one MCP endpoint; usually made by `Server.wsgi_app()`.

    Args:
        engine: the server's engine.
        path: the endpoint's path (`PATH_INFO`); other paths go to `fallback`, or get 404.
        fallback: another WSGI application to serve every other path (e.g. your Flask app).
        allowed_hosts: `Host` values let in besides the loopback names ("name" for any port,
            "name:port", "*" for any). Requests from loopback addresses must name one of them;
            when the list is given, every request must.
        allowed_origins: `Origin` values let in besides loopback and same-origin ones
            ("https://app.example.com", or "*"); web pages from these origins also get CORS
            answers (`_cors`), so they may call the endpoint from a browser.
        max_body_bytes: the largest request body (larger: 413).
        request_timeout: seconds a request may run before it is cancelled and answered -32603.
        keepalive: seconds of silence before an SSE comment; also how long an answer may take
            before the response becomes a stream.
        max_streams: listens and GET streams open at once.
        subscription_cap: `subscriptions/listen` streams open at once.
        session_timeout: seconds a handshake-era session may stay idle before it expires.
        max_sessions: handshake-era sessions at once.
        max_sessions_per_caller: handshake-era sessions one caller (`Principal.key`) holds at once;
            at it, the caller's own oldest never-used session gives way, else its own longest idle
            one past the grace, else it is refused 429 (see `_sessions`). No bound for an
            endpoint without `auth`.
        workers: threads running requests that may speak before their answer (tools with a
            `Context`, prompts, resource reads) at once; more wait their turn.
        shutdown_timeout: how long `shutdown()` waits for running requests.
        on_stopped: called once shutdown has finished.
        store: where handshake-era sessions live when replicas share them (with `bus`); None:
            in this process (see `_directory`).
        bus: the replicas' bus, for what must reach the process holding a request or a stream.

    Host it with any WSGI server that writes each body chunk as it is yielded (cheroot, gunicorn
    with threaded workers, uWSGI, mod_wsgi); every stream holds one of its threads while open.
    Such a server may send `100 Continue` before the app runs (gunicorn does); the app still
    authenticates before it reads `wsgi.input`, and the server drops the unread body.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        path: str = "/mcp",
        fallback: WsgiApp | None = None,
        allowed_hosts: Iterable[str] | None = None,
        allowed_origins: Iterable[str] | None = None,
        auth: Auth | None = None,
        max_body_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        keepalive: float = DEFAULT_KEEPALIVE,
        max_streams: int = DEFAULT_MAX_STREAMS,
        subscription_cap: int = DEFAULT_SUBSCRIPTION_CAP,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        max_sessions_per_caller: int = DEFAULT_MAX_SESSIONS_PER_CALLER,
        workers: int = 16,
        shutdown_timeout: float = 5.0,
        on_stopped: Callable[[], None] | None = None,
        store: Store | None = None,
        bus: Bus | None = None,
    ) -> None:
        for name, value in (
            ("max_body_bytes", max_body_bytes),
            ("max_streams", max_streams),
            ("max_sessions", max_sessions),
            ("max_sessions_per_caller", max_sessions_per_caller),
            ("workers", workers),
        ):
            if value < 1:
                raise ValueError(f"{name} must be at least 1")
        for name, number in (("request_timeout", request_timeout), ("keepalive", keepalive), ("session_timeout", session_timeout)):
            if not number > 0:
                raise ValueError(f"{name} must be positive")
        self._engine = engine
        self.path = normalize_path(path)
        self._fallback = fallback
        self._allowed_hosts = normalize_hosts(allowed_hosts)
        self._allowed_origins = normalize_origins(allowed_origins)
        self._cors = Cors(self._allowed_origins) if self._allowed_origins else None
        self._auth = auth
        self._metadata_paths = auth.metadata_paths(self.path) if auth is not None else frozenset()
        if auth is None:
            _warn_unguarded_scopes(engine, self.path)
        self._max_body = max_body_bytes
        self._request_timeout = request_timeout
        self._keepalive = keepalive
        self._max_streams = max_streams
        self._subscription_cap = subscription_cap
        self._shutdown_timeout = shutdown_timeout
        self._on_stopped = on_stopped
        self._directory: LocalDirectory | SharedDirectory
        if store is None:
            self._directory = LocalDirectory(
                SessionTable(idle_timeout=session_timeout, max_sessions=max_sessions, capacity=CHANNEL_CAPACITY, max_per_caller=max_sessions_per_caller)
            )
        else:
            if bus is None:
                raise ValueError("a shared session store needs the replicas' bus")
            self._directory = SharedDirectory(
                store, bus, ttl=session_timeout, cap=max_sessions, capacity=CHANNEL_CAPACITY, max_local=max_sessions, caller_cap=max_sessions_per_caller
            )
        self._sessions = self._directory.table
        self._detached = DetachedStreams()
        self._inflight: InFlight[Exchange] = InFlight(workers, "mcpsync-http-worker")  # keyed by the exchange itself
        # Guards everything below, and orders acks before changes. Re-entrant: answering an exchange
        # runs callbacks (`_forget`) that take it.
        self._lock = threading.RLock()
        self._stream_ended = threading.Condition(self._lock)  # a GET stream let its session go
        self._listens: dict[Exchange, Subscription] = {}
        self._streams = 0  # open listens and GET streams
        # Requests running inline, while their WSGI thread is inside the engine: the server's way
        # of answering from another thread (`RESPOND_NOW`), or None if it has none.
        self._inline: dict[Exchange, RespondNow | None] = {}
        self._closing = False
        self._clean = True
        self._stopped = threading.Event()
        self._param_headers = ToolHeaderPlans(engine)

    @property
    def max_body_bytes(self) -> int:
        """The largest request body this endpoint takes."""
        return self._max_body

    # -- WSGI ------------------------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = normalize_path(environ.get("PATH_INFO", ""))
        if path != self.path and path not in self._metadata_paths:
            if self._fallback is not None:
                return self._fallback(environ, start_response)
            return empty_reply(start_response, 404)
        cors = self._cors
        allow_origin = None if cors is None else cors.allow_origin(environ)
        if allow_origin is not None:
            start_response = Cors.wrap(start_response, allow_origin)
        try:
            self._check_rebinding(environ)
            method = environ.get("REQUEST_METHOD", "GET").upper()
            if Cors.is_preflight(environ):  # before authentication: a browser's preflight carries no token
                if allow_origin is None:
                    raise _Refused(403, f"Forbidden: CORS is not allowed for Origin {header(environ, 'Origin')!r} (see allowed_origins)")
                start_response(status_line(204), Cors.preflight_headers(environ))
                return []
            if path != self.path:
                return self._metadata(environ, start_response, method)
            principal = self._admit(environ, method)
            if method == "POST":
                return self._post(environ, start_response, principal)
            if method == "GET":
                return self._get(environ, start_response, principal)
            return self._delete(environ, start_response, principal)
        except _Refused as refused:
            return self._refused(start_response, refused)
        except StoreUnavailable as exc:
            log.warning("answered 503 to a handshake-era request: %s", exc)
            down = _Refused(503, STORE_DOWN, headers=[("Retry-After", str(RETRY_AFTER))])
            return json_reply(start_response, 503, jsonrpc.encode(jsonrpc.error_frame(None, down.error)), down.headers)

    # -- before the body: what a request's head alone decides -------------------------------------
    def check_head(self, environ: dict[str, Any]) -> HeadAnswer | None:
        """The answer to a request with a body that its head alone decides, or None to read the
        body. mcpsync's own server calls it before it reads the body or sends `100 Continue`, and
        sends the answer instead, so a request refused here costs no body (`WsgiServer(head_check=
        ...)`), and no share of the server's body budget. For the paths this app answers itself:

        - the endpoint: a token missing, bad or without the endpoint's scopes; a foreign Host or
          Origin; a method it does not serve; a shutdown. A request let through is remembered
          (`__call__` finds its principal; under any other WSGI server it checks the head itself,
          before it reads `wsgi.input`);
        - whatever cannot depend on its body, answered here whole: a path that is not the
          endpoint's when there is no fallback (404), the metadata paths (405 for a method other
          than GET and HEAD, else the metadata), and a CORS preflight (`OPTIONS` with `Origin`;
          any other `OPTIONS` is the endpoint's 405 above). RFC 9110 (9.3.7) defines no use for
          an OPTIONS body, and a browser never sends one on a preflight, so its answer is the one
          it gets without a body; the body is left unread (the connection then closes), rather
          than read for nothing, so it never takes any of the budget.

        The fallback's paths are not the endpoint's to authenticate (it has its own rules, which
        this app cannot know): its requests are let through (None) and their bodies are budgeted
        like any other, so they are bounded by `max_buffered_bytes` too, but a fallback that takes
        large bodies from anyone shares that budget with the endpoint's callers. Serve such an app
        on a server of its own."""
        path = normalize_path(environ.get("PATH_INFO", ""))
        if path != self.path and path not in self._metadata_paths:
            return None if self._fallback is not None else self._captured(environ)
        if path != self.path or Cors.is_preflight(environ):
            return self._captured(environ)
        try:
            self._check_rebinding(environ)
            principal = self._admit(environ, environ.get("REQUEST_METHOD", "GET").upper())
        except _Refused as refused:
            return self._captured(environ, refused)
        environ[_ADMITTED] = (self, principal)
        return None

    def _captured(self, environ: dict[str, Any], refused: _Refused | None = None) -> HeadAnswer:
        """The answer as a `HeadAnswer`: `refused`'s, with the CORS headers of an allowed origin,
        or else the app's own (`__call__`, which adds them itself) to a request whose answer
        cannot depend on its body, none of which is read."""
        written: list[Any] = []
        start_response: Callable[..., Any] = lambda status, headers, exc_info=None: written.extend((status, headers))  # noqa: E731
        if refused is None:  # a HEAD is answered the GET's head (the server sends no body for it)
            asked = {**environ, "REQUEST_METHOD": "GET"} if environ.get("REQUEST_METHOD") == "HEAD" else environ
            body = b"".join(self(asked, start_response))
        else:
            allow_origin = None if self._cors is None else self._cors.allow_origin(environ)
            if allow_origin is not None:
                start_response = Cors.wrap(start_response, allow_origin)
            body = b"".join(self._refused(start_response, refused))
        return written[0], written[1], body

    def _check_rebinding(self, environ: dict[str, Any]) -> None:
        refusal = rebinding_refusal(environ, self._allowed_hosts, self._allowed_origins)
        if refusal is not None:
            log.warning("refused a request from %s: %s; %s", environ.get("REMOTE_ADDR"), refusal, rebinding_remedy(refusal))
            raise _Refused(403, f"Forbidden: {refusal}")

    def _admit(self, environ: dict[str, Any], method: str) -> Principal | None:
        """A request to the endpoint that may be served, by whom (None without `Auth`); from its
        head alone, before its body is read."""
        if self._closing:
            raise _Refused(503, SHUTTING_DOWN)
        admitted = environ.get(_ADMITTED)
        if admitted is not None and admitted[0] is self:  # check_head has, moments ago
            principal: Principal | None = admitted[1]
            if principal is None or principal.expires_at is None or principal.expires_at > time.time():
                return principal
        if method not in ("POST", "GET", "DELETE"):
            raise _Refused(405, f"Method Not Allowed: {method}", headers=[("Allow", "GET, POST, DELETE")])
        return self._authenticate(environ)

    @staticmethod
    def _refused(start_response: Callable[..., Any], refused: _Refused) -> list[bytes]:
        return json_reply(start_response, refused.status, jsonrpc.encode(jsonrpc.error_frame(refused.request_id, refused.error)), refused.headers)

    # -- authorization ---------------------------------------------------------------------------
    def _authenticate(self, environ: dict[str, Any]) -> Principal | None:
        """Who holds the request's token, before anything else of it is read; None without `Auth`."""
        if self._auth is None:
            return None
        try:
            return self._auth.authenticate(environ, self.path)
        except AuthRefusal as refusal:
            if refusal.status != 401 or "HTTP_AUTHORIZATION" in environ:  # a first request without a token is routine
                log.info("refused a request from %s: %s", environ.get("REMOTE_ADDR"), refusal.message)
            raise _Refused(refusal.status, refusal.message, headers=refusal.headers()) from None

    def _metadata(self, environ: dict[str, Any], start_response: Callable[..., Any], method: str) -> Iterable[bytes]:
        """The protected resource metadata (RFC 9728), public: no token needed to read it."""
        assert self._auth is not None, "metadata paths exist only with Auth"
        if method not in ("GET", "HEAD"):
            raise _Refused(405, f"Method Not Allowed: {method}", headers=[("Allow", "GET, HEAD")])
        body = jsonrpc.encode(self._auth.metadata(environ, self.path))
        reply = json_reply(start_response, 200, body, [("Cache-Control", "max-age=300")])
        return [] if method == "HEAD" else reply

    def _post(self, environ: dict[str, Any], start_response: Callable[..., Any], principal: Principal | None) -> Iterable[bytes]:
        if media_type(header(environ, "Content-Type")) != "application/json":
            raise _Refused(415, "Unsupported Media Type: the body must be application/json")
        if accepts(header(environ, "Accept")) != (True, True):
            raise _Refused(406, "Not Acceptable: Accept must list application/json and text/event-stream")
        body = read_body(environ, self._max_body)
        message = jsonrpc.decode(body)
        version = header(environ, "MCP-Protocol-Version")
        era = route(message, version)
        if isinstance(message, Invalid):  # never reached the engine: a client error in either era
            return json_reply(start_response, 400, jsonrpc.encode(jsonrpc.error_frame(message.answer_id, message.error)))
        if isinstance(message, Response):
            if era is Era.MODERN:
                raise _Refused(400, "Invalid Request: a 2026-07-28 POST carries one request or notification")
            owner = self._session_of(environ, principal)
            self._directory.answer(owner, message, body)  # to the request that asked, wherever it waits
            return empty_reply(start_response, 202)
        if isinstance(message, Notification):
            return self._notification(environ, start_response, message, era, version, principal)
        if era is Era.MODERN:
            session = Session()
            session.commit_era(Era.MODERN)  # stateless: this request alone, and no envelope is no request
            found = Headers(environ)
            exchange = Exchange(message, streams=True, capacity=CHANNEL_CAPACITY)
            check = lambda request, envelope: check_routing_headers(found, request, envelope, self._param_headers)  # noqa: E731 - a one-line closure over `found`
            return self._run(environ, start_response, exchange, session, Era.MODERN, check, principal)
        if message.method == "initialize":
            created = self._directory.reserve(None if principal is None else principal.key)
            if created is None:
                raise _sessions_refused(Creation.FULL, message.id)
            exchange = Exchange(message, streams=False, capacity=CHANNEL_CAPACITY)
            return self._run(environ, start_response, exchange, created.session, Era.HANDSHAKE, None, principal, created=created)
        if message.method in MODERN_ONLY_METHODS and header(environ, "Mcp-Session-Id") is None:  # a bare server/discover
            raise _Refused(400, f"Bad Request: {message.method} is a 2026-07-28 method, and {NO_ENVELOPE}", message.id)
        owner = self._session_of(environ, principal, message.id)
        exchange = Exchange(message, streams=True, capacity=CHANNEL_CAPACITY, asks=owner.asks)
        exchange.session_id = owner.id
        if not self._sessions.begin(owner, exchange):
            error = McpError(ErrorCode.INVALID_REQUEST, "Invalid Request: a request with this id is already in flight")
            return json_reply(start_response, 200, jsonrpc.encode(jsonrpc.error_frame(message.id, error)))
        exchange.answered.add_done_callback(lambda _f: self._sessions.end(owner, exchange))
        return self._run(environ, start_response, exchange, owner.session, Era.HANDSHAKE, None, principal)

    def _notification(
        self,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
        message: Notification,
        era: Era,
        version: str | None,
        principal: Principal | None,
    ) -> Iterable[bytes]:
        if era is Era.MODERN:
            # 2026-07-28 has no client notification over HTTP (closing a stream is the cancel);
            # acknowledged and dropped, as the SDKs do, unless the version is not served.
            if version is not None and version not in MODERN_VERSIONS:
                raise _Refused(400, "Unsupported protocol version", error=unsupported_version(version))
            return empty_reply(start_response, 202)
        owner = self._session_of(environ, principal)
        if message.method == "notifications/cancelled":  # the client stopped waiting: no response
            self._directory.cancel(owner, message.params.get("requestId"))
        return empty_reply(start_response, 202)

    def _get(self, environ: dict[str, Any], start_response: Callable[..., Any], principal: Principal | None) -> Iterable[bytes]:
        owner = self._handshake_session(environ, principal)
        if not accepts(header(environ, "Accept"))[1]:
            raise _Refused(406, "Not Acceptable: a GET stream is text/event-stream")
        last_event_id = header(environ, "Last-Event-ID")
        if last_event_id is not None and last_event_id.startswith(POST_STREAM_MARK):
            resumed = None if self._closing else self._resume(start_response, owner, last_event_id)
            if resumed is not None:
                return resumed
            last_event_id = None  # over, or held by another replica: the session's own stream
        with self._lock:
            if self._closing:
                raise _Refused(503, SHUTTING_DOWN)
            if owner.streaming and last_event_id is not None:
                # A resume: its client has lost the stream, which this server may not have noticed
                # yet (the close is seen a moment later); wait a little for it to end by itself.
                self._stream_ended.wait_for(lambda: not owner.streaming or self._closing, GET_TAKEOVER_WAIT)
                if self._closing:
                    raise _Refused(503, SHUTTING_DOWN)
            if owner.streaming:
                raise _Refused(409, "Conflict: this session's GET stream is already open")
            if self._streams >= self._max_streams:
                raise _Refused(503, "Service Unavailable: too many open streams")
            owner.streaming = True
            owner.events.told = self._told(principal)
            self._streams += 1
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
            deadline=_token_end(principal),
            on_close=lambda _completed: self._release_get(owner),
        )

    def _delete(self, environ: dict[str, Any], start_response: Callable[..., Any], principal: Principal | None) -> Iterable[bytes]:
        owner = self._handshake_session(environ, principal)
        self._directory.delete(owner)
        return empty_reply(start_response, 204)

    def _handshake_session(self, environ: dict[str, Any], principal: Principal | None) -> HttpSession:
        """GET and DELETE exist only for handshake-era sessions: 405 otherwise."""
        version = header(environ, "MCP-Protocol-Version")
        if header(environ, "Mcp-Session-Id") is None or (version is not None and version not in HANDSHAKE_VERSIONS):
            raise _Refused(405, "Method Not Allowed: 2026-07-28 is POST only", headers=[("Allow", "POST")])
        return self._session_of(environ, principal)

    def _session_of(self, environ: dict[str, Any], principal: Principal | None, request_id: Any = None) -> HttpSession:
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
        if self._auth is not None:
            with self._lock:
                if not found.streaming:  # between streams, this token decides what waits for the next (`_told`)
                    found.events.told = self._told(principal)
        return found

    # -- one request -----------------------------------------------------------------------------
    def _run(
        self,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
        exchange: Exchange,
        session: Session,
        era: Era,
        header_check: Callable[[Request, Any], None] | None,
        principal: Principal | None,
        *,
        created: HttpSession | None = None,
    ) -> Iterable[bytes]:
        request = exchange.request
        caller = _Caller(environ, principal)
        if self._engine.runs_inline(request):
            return self._run_inline(environ.get(RESPOND_NOW), start_response, exchange, session, era, header_check, caller, created)
        with self._lock:
            work = None
            if not self._closing:
                try:
                    work = self._inflight.submit(self._execute, exchange, session, era, header_check, caller)
                except RuntimeError:  # the executor stopped: the server is shutting down
                    pass
            if work is None:
                exchange.answer(Final(None))
                raise _Refused(503, SHUTTING_DOWN, request.id)
            self._inflight.add(exchange, exchange)
        exchange.answered.add_done_callback(lambda _f: self._forget(exchange))
        if request.method == "subscriptions/listen":  # no run time limit: it lasts as long as its token
            return self._respond(start_response, exchange, _token_end(principal), lambda: self._end_listen(exchange), created)
        return self._respond(start_response, exchange, time.monotonic() + self._request_timeout, lambda: self._expire(exchange), created)

    def _run_inline(
        self,
        respond_now: RespondNow | None,
        start_response: Callable[..., Any],
        exchange: Exchange,
        session: Session,
        era: Era,
        header_check: Callable[[Request, Any], None] | None,
        caller: _Caller,
        created: HttpSession | None,
    ) -> Iterable[bytes]:
        """It cannot speak before its answer, so nothing could stream before it returns: run it on
        this WSGI thread, sparing the two thread switches of the hand-off to a worker. (A forwarded
        call returns at once; its answer and progress still come through the channel.) While it
        runs, it is in `_inline`, so a shutdown that answers it knows this thread cannot."""
        with self._lock:
            if self._closing:
                exchange.answer(Final(None))
                raise _Refused(503, SHUTTING_DOWN, exchange.request.id)
            self._inflight.add(exchange, exchange)
            self._inline[exchange] = respond_now
        exchange.answered.add_done_callback(lambda _f: self._forget(exchange))
        try:
            self._execute(exchange, session, era, header_check, caller)
        finally:
            with self._lock:
                del self._inline[exchange]
        return self._respond(start_response, exchange, time.monotonic() + self._request_timeout, lambda: self._expire(exchange), created)

    def _forget(self, exchange: Exchange) -> None:
        self._inflight.settle(exchange, exchange)

    def _execute(self, exchange: Exchange, session: Session, era: Era, header_check: Any, caller: _Caller) -> None:
        """On a worker: run the engine; the answer goes into the exchange's channel."""
        deliver = lambda final: self._complete(exchange, era, final, caller)  # noqa: E731 - a one-line closure
        self._engine.execute_to(exchange.request, session, exchange, HTTP, deliver, header_check, caller.principal)

    def _complete(self, exchange: Exchange, era: Era, outcome: Outcome, caller: _Caller) -> None:
        """The engine's outcome: the work is over (the request may have been answered already,
        past its deadline), so a cancel can no longer reach it."""
        exchange.forget_callbacks()
        if isinstance(outcome, Subscribed):
            self._activate(exchange, outcome, caller.principal)
            return
        if isinstance(outcome, NoResponse):
            exchange.answer(Final(None))
            return
        assert isinstance(outcome, (Success, Failure))
        frame, error = answer_frame(exchange.request, outcome)
        if error is None and isinstance(outcome, Success):
            exchange.answer(Final(frame, 200, outcome.claims))
        elif isinstance(error, (RequestStateUnchecked, SessionStoreDown)):  # the store is away: the same request works later
            exchange.answer(Final(frame, 503, headers=(("Retry-After", str(RETRY_AFTER)),)))
        elif isinstance(error, InsufficientScope) and self._auth is not None:  # the client may step up
            refusal = self._auth.insufficient(caller.environ, self.path, error.scopes, error.description)
            exchange.answer(Final(frame, 403, headers=tuple(refusal.headers())))
        else:
            assert error is not None
            exchange.answer(Final(frame, error_status(error.code, era)))

    def _respond(
        self,
        start_response: Callable[..., Any],
        exchange: Exchange,
        deadline: float | None,
        on_deadline: Callable[[], None],
        created: HttpSession | None,
    ) -> Iterable[bytes]:
        """Wait for the first thing to send and answer in JSON or start the event stream. At
        `deadline`, `on_deadline()` answers into the channel (a request's -32603, a listen's end)."""
        undecided_until = time.monotonic() + self._keepalive
        while True:
            limit = undecided_until if exchange.streams else (deadline or undecided_until)
            if deadline is not None:
                limit = min(limit, deadline)
            item = exchange.channel.get(limit - time.monotonic())
            if isinstance(item, Final):
                return self._answer_json(start_response, item, created, exchange.request.id)
            if item is CLOSED:
                return empty_reply(start_response, 204)
            if item is RELEASE:  # released before anything was sent: a stream that ends at once
                exchange.channel.put(RELEASE, force=True)
                return self._stream(start_response, exchange, None, deadline, on_deadline)
            if item is TIMEOUT:
                if deadline is not None and time.monotonic() >= deadline:
                    on_deadline()  # its answer is in the channel now (or was already)
                    deadline = None
                    continue
                if not exchange.streams:
                    continue
                item = None
            return self._stream(start_response, exchange, item, deadline, on_deadline)

    def _answer_json(self, start_response: Callable[..., Any], final: Final, created: HttpSession | None, request_id: Any) -> Iterable[bytes]:
        if final.frame is None:
            return empty_reply(start_response, 204)
        extra = []
        if created is not None and final.claims is Era.HANDSHAKE:
            created.session.commit_era(Era.HANDSHAKE)
            outcome = self._directory.commit(created)
            if not outcome:
                raise _sessions_refused(outcome, request_id)
            extra.append(("Mcp-Session-Id", created.id))
        extra.extend(final.headers)
        return json_reply(start_response, final.status, final.frame, extra)

    def _stream(
        self, start_response: Callable[..., Any], exchange: Exchange, first: bytes | None, deadline: float | None, on_deadline: Callable[[], None]
    ) -> SseBody:
        """The response becomes an event stream; a handshake-era session's is resumable
        (`_resume`): numbered events after a priming event that names it."""
        start_response(status_line(200), list(SSE_HEADERS))
        if exchange.session_id is None:
            return SseBody(
                exchange.channel,
                keepalive=self._keepalive,
                first=first,
                deadline=deadline,
                on_deadline=on_deadline,
                on_close=lambda completed: self._stream_closed(exchange, completed),
            )
        exchange.deadline = deadline
        stream = StreamLog()
        return self._resumable(exchange, stream, sse_priming(stream.position, RETRY_MS), first, on_deadline)

    def _resume(self, start_response: Callable[..., Any], owner: HttpSession, last_event_id: str) -> SseBody | None:
        """A GET naming an event of a POST stream this process holds detached: the rest of it."""
        taken = self._detached.take(owner.id, last_event_id)
        if taken is None:
            return None
        exchange, stream, number = taken
        start_response(status_line(200), list(SSE_HEADERS))
        prime = sse_priming(last_event_id, RETRY_MS) + stream.after(number)
        return self._resumable(exchange, stream, prime, None, lambda: self._expire(exchange))

    def _resumable(self, exchange: Exchange, stream: StreamLog, prime: bytes, first: bytes | None, on_deadline: Callable[[], None]) -> SseBody:
        """The body of a handshake-era session's POST stream, first sent or resumed: its events
        numbered by `stream`, and registered, so that a resume may take it over (lost again, it
        may be taken over again)."""
        assert exchange.session_id is not None
        self._detached.attach(exchange, stream, exchange.session_id)
        return SseBody(
            exchange.channel,
            keepalive=self._keepalive,
            first=first,
            prime=prime,
            number=stream.event,
            deadline=exchange.deadline,
            on_deadline=on_deadline,
            on_close=lambda completed: self._stream_closed(exchange, completed, stream),
        )

    def _expire(self, exchange: Exchange) -> None:
        """The request ran out of time: cancel it and answer -32603 (unless it just answered)."""
        request = exchange.request
        error = McpError(ErrorCode.INTERNAL_ERROR, f"Request timed out after {self._request_timeout:g} s")
        if exchange.answer(Final(jsonrpc.encode(jsonrpc.error_frame(request.id, error)))):
            log.warning("%s (id %r) timed out after %g s; cancelled", request.method, request.id, self._request_timeout)
            exchange.cancel()

    def _stream_closed(self, exchange: Exchange, completed: bool, stream: StreamLog | None = None) -> None:
        """The server closed a response stream: if it did not reach its end, the client went away
        (or the server stopped), which cancels the request, unless it may resume (a handshake-era
        session's, detached for its client to come back); a listen is unsubscribed."""
        owner_id = exchange.session_id
        if not completed and stream is not None and owner_id is not None and not self._closing and self._detached.detach(exchange, stream, owner_id):
            return
        if stream is not None:
            self._detached.finished(stream)
        exchange.channel.close()
        if not completed:
            exchange.cancel("the client closed the stream")
        with self._lock:
            if self._listens.pop(exchange, None) is not None:
                self._streams -= 1

    def _end_listen(self, exchange: Exchange) -> None:
        """The token a listen was opened with has expired: it ends with its `complete` result, as
        at shutdown, and the client listens again with a fresh token (an open stream is no way
        around a token's lifetime)."""
        with self._lock:
            subscription = self._listens.pop(exchange, None)
            if subscription is not None:
                self._streams -= 1
        if subscription is None:  # not acknowledged yet: nothing was promised
            exchange.cancel("the access token expired")
            exchange.answer(Final(None))
            return
        log.info("listen %r ended: its access token expired", subscription.id)
        exchange.channel.finish(Final(self._complete_frame(subscription.id)))

    # -- subscriptions/listen --------------------------------------------------------------------
    def _activate(self, exchange: Exchange, outcome: Subscribed, principal: Principal | None) -> None:
        """Register an accepted listen and queue its acknowledgement in one critical section."""
        ack = jsonrpc.encode(
            jsonrpc.notification_frame(
                "notifications/subscriptions/acknowledged",
                {"_meta": {META_SUBSCRIPTION_ID: outcome.request_id}, "notifications": outcome.accepted},
            )
        )
        with self._lock:
            if exchange.cancel_event.is_set():
                exchange.answer(Final(None))
                return
            if self._closing:  # never leave a listen registered during shutdown
                exchange.answer(Final(self._complete_frame(outcome.request_id)))
                return
            if len(self._listens) >= self._subscription_cap:
                refusal = McpError(ErrorCode.INTERNAL_ERROR, "Subscription limit reached")
            elif self._streams >= self._max_streams:
                refusal = McpError(ErrorCode.INTERNAL_ERROR, "Subscription limit reached: too many open streams")
            else:
                self._listens[exchange] = Subscription(outcome.request_id, outcome.accepted, principal)
                self._streams += 1
                exchange.subscribe(ack)
                return
        exchange.answer(Final(jsonrpc.encode(jsonrpc.error_frame(outcome.request_id, refusal))))

    def _complete_frame(self, subscription_id: Any) -> bytes:
        return complete_frame(subscription_id, self._engine.server_info)

    def _release_get(self, owner: HttpSession) -> None:
        with self._lock:
            owner.streaming = False
            self._streams -= 1
            self._stream_ended.notify_all()
        self._directory.stream_closed(owner)

    # -- list changes ----------------------------------------------------------------------------
    def publish_list_changed(self, kinds: frozenset[str], origin: str = LOCAL) -> None:
        """Untagged notifications to every initialized session's stream, then one tagged copy per
        listen that asked for the kind. Never blocks on a client: a stream that cannot keep up is
        dropped. `origin`: made here, or told by the bus (`_directory`)."""
        methods = [(kind, f"notifications/{kind}/list_changed") for kind in sorted(kinds)]
        plain = [jsonrpc.encode(jsonrpc.notification_frame(method)) for _, method in methods]
        self._directory.deliver(plain, None, origin)
        with self._lock:
            for exchange, subscription in list(self._listens.items()):
                for kind, method in methods:
                    if subscription.wants_kind(kind):
                        self._send_tagged(exchange, subscription, method, {})

    def publish_resource_updated(self, uri: str, origin: str = LOCAL) -> None:
        """A resource changed: to the sessions and listens subscribed to it (or to a parent)
        whose token may read it (`_told`; a session's GET stream checks as it sends)."""
        method, params = "notifications/resources/updated", {"uri": uri}
        self._directory.deliver([jsonrpc.encode(jsonrpc.notification_frame(method, params))], uri, origin)
        needed = update_scopes(self._engine.catalog, uri) if self._auth is not None else None
        required = self._required_scopes()
        with self._lock:
            for exchange, subscription in list(self._listens.items()):
                if subscription.wants_uri(uri) and may_be_told(subscription.principal, needed, required):
                    self._send_tagged(exchange, subscription, method, params)

    def _required_scopes(self) -> frozenset[str]:
        return frozenset(self._auth.required_scopes) if self._auth is not None else frozenset()

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
        decides which updates are kept for the next stream; that stream checks them again."""
        if principal is None:
            return None
        catalog, required = self._engine.catalog, self._required_scopes()
        return lambda uri: may_be_told(principal, update_scopes(catalog, uri), required)

    def _send_tagged(self, exchange: Exchange, subscription: Subscription, method: str, params: dict[str, Any]) -> None:
        """Under the lock: one tagged notification onto a listen's stream, or drop the listen if
        its client does not keep up (its stream ends; the client listens again and re-lists)."""
        if not exchange.channel.put(tagged_frame(method, subscription.id, params)):
            log.warning("dropping listen %r: its client does not keep up", subscription.id)
            del self._listens[exchange]
            self._streams -= 1
            exchange.channel.close()

    # -- stopping --------------------------------------------------------------------------------
    def shutdown(self, timeout: float | None = None) -> bool:
        """Graceful shutdown from any thread: open listens get their `complete` result, GET
        streams and sessions end, running requests are cancelled and waited for up to `timeout`
        (default `shutdown_timeout`) and then answered -32603. True if every request finished in
        time. Later requests are answered 503."""
        budget = self._shutdown_timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        with self._lock:
            first = not self._closing
            self._closing = True
            listens = list(self._listens.items())
            self._listens.clear()
        if not first:
            return self._stopped.wait(budget + 1.0) and self._clean
        for exchange, subscription in listens:
            exchange.channel.finish(Final(self._complete_frame(subscription.id)))
        self._directory.close()
        self._detached.close()
        self._inflight.drain(max(0.0, deadline - time.monotonic()))
        for _, exchange in self._inflight.unsettled():  # past the deadline: the exchange's answer() decides once
            final = Final(shutting_down_frame(exchange.request.id))
            if exchange.answer(final):
                self._deliver_past_inline(exchange, final)
        running = self._inflight.wait_workers(deadline)
        with self._lock:
            running += len(self._inline)
        self._inflight.stop_workers(clean=not running)
        if running:
            self._clean = False
            log.warning("%d request(s) still running after the shutdown deadline; their threads are left to finish", running)
        if self._on_stopped is not None:
            try:
                self._on_stopped()
            except Exception:
                log.exception("HTTP on_stopped callback failed")
        self._stopped.set()
        return self._clean

    def _deliver_past_inline(self, exchange: Exchange, final: Final) -> None:
        """`final` is in the exchange's channel, but if the request runs inline its WSGI thread is
        still inside the tool and cannot send it: our own server writes it from here instead.
        Exactly one of the two threads gets to write (`respond_now` refuses once the other has
        begun); under another WSGI server the answer waits in the channel for the tool to return."""
        with self._lock:
            respond_now = self._inline.get(exchange)
        if respond_now is not None and final.frame is not None:
            respond_now(status_line(final.status), [("Content-Type", "application/json")], final.frame)

    def wait(self, timeout: float) -> bool:
        """Wait until `shutdown()` has finished; True if it has."""
        return self._stopped.wait(timeout)

    def close(self) -> None:
        self.shutdown()

    def __enter__(self) -> WsgiTransport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _sessions_refused(outcome: Creation, request_id: Any) -> _Refused:
    """No session for this `initialize`: 429 when the caller's own sessions fill its bound, 503
    when the table is full; either way with `Retry-After`."""
    retry = [("Retry-After", str(FULL_RETRY_AFTER))]
    if outcome is Creation.CALLER_FULL:
        return _Refused(429, "Too Many Requests: this caller holds its most sessions, all in use; end one (DELETE) or reuse it", request_id, headers=retry)
    return _Refused(503, "Service Unavailable: too many sessions", request_id, headers=retry)
