"""The HTTP transport: a WSGI application serving one MCP endpoint, both protocol eras.

`WsgiTransport` is the application: it routes each request by path and method to the endpoint's
parts, which share one lock and the endpoint's state (`_state`): the rules its head decides
(`_gate`), the POST path (`_post`), each request's run and answer, JSON or an event stream
(`_requests`), a handshake-era session's lookup, GET stream and DELETE (`_session_paths`), and
the open listens (`_listens`). Every refusal, wherever it is found, becomes one response here.

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
from typing import TYPE_CHECKING, Any

from ...bus.store import RETRY_AFTER, StoreUnavailable
from ...engine.engine import Engine
from ...protocol import jsonrpc
from ...protocol.framing import DEFAULT_MAX_FRAME_BYTES
from ...protocol.versions import HANDSHAKE_ERA
from ..lifecycle.load import Load
from ..lifecycle.subscriptions import DEFAULT_SUBSCRIPTION_CAP, LOCAL
from ._cors import Cors
from ._directory import LocalDirectory, SharedDirectory
from ._gate import ADMITTED, Gate
from ._health import Health
from ._listens import Listens
from ._post import CHANNEL_CAPACITY, PostPath
from ._replies import DECODED, _Refused, empty_reply, json_reply, status_line
from ._requests import Requests
from ._rules import header, normalize_path, route
from ._session_paths import SessionPaths
from ._sessions import SessionTable
from ._state import EndpointState
from .options import (
    DEFAULT_KEEPALIVE,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_SESSIONS_PER_CALLER,
    DEFAULT_MAX_STREAMS,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_SESSION_TIMEOUT,
    LIVE_PATH,
    READY_PATH,
    HeadAnswer,
    WsgiApp,
)

if TYPE_CHECKING:
    from ...auth.resource.guard import Auth
    from ...bus import Bus
    from ...bus.store import Store

log = logging.getLogger("mcpsync")

STORE_DOWN = "Service Unavailable: the session store cannot be reached; retry"


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
        live_path: str | None = LIVE_PATH,
        ready_path: str | None = READY_PATH,
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
        self.path = normalize_path(path)
        probes = [normalize_path(probe) if probe is not None else None for probe in (live_path, ready_path)]
        if self.path in probes or (probes[0] is not None and probes[0] == probes[1]):
            raise ValueError("live_path, ready_path and path must differ")
        self._health = Health(probes[0], probes[1], self._not_ready)
        self._engine = engine
        self._fallback = fallback
        self._state = EndpointState(max_streams)
        self._gate = Gate(self._state, self.path, auth, allowed_hosts, allowed_origins)
        if auth is None:
            _warn_unguarded_scopes(engine, self.path)
        self._max_body = max_body_bytes
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
        self._listens = Listens(self._state, engine, auth, subscription_cap)
        self._requests = Requests(
            self._state,
            engine,
            auth=auth,
            path=self.path,
            directory=self._directory,
            listens=self._listens,
            workers=workers,
            keepalive=keepalive,
            request_timeout=request_timeout,
        )
        self._session_paths = SessionPaths(self._state, engine, auth=auth, directory=self._directory, requests=self._requests, keepalive=keepalive)
        self._post = PostPath(engine, directory=self._directory, session_paths=self._session_paths, requests=self._requests, max_body=max_body_bytes)
        self._clean = True
        self._stopped = threading.Event()

    def load(self) -> Load:
        """The requests in flight, the streams open, the handshake-era sessions held and the
        request workers taken now."""
        workers = self._requests.workers
        return Load(self._requests.in_flight, self._state.streams, len(self._directory.table), busy=workers.busy, workers=workers.workers)

    def _not_ready(self) -> str | None:
        """Why a readiness probe is answered 503, or None: it is ready."""
        if self._state.closing:
            return "shutting down"
        if not self._directory.ready():
            return "the session store is unreachable"
        return None

    @property
    def max_body_bytes(self) -> int:
        """The largest request body this endpoint takes."""
        return self._max_body

    # -- WSGI ------------------------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = normalize_path(environ.get("PATH_INFO", ""))
        gate = self._gate
        if not gate.serves(path):
            if path in self._health.paths:
                return self._health.answer(path, environ, start_response)
            if self._fallback is not None:
                return self._fallback(environ, start_response)
            return empty_reply(start_response, 404)
        allow_origin = gate.allow_origin(environ)
        if allow_origin is not None:
            start_response = Cors.wrap(start_response, allow_origin)
        try:
            gate.check_rebinding(environ)
            method = environ.get("REQUEST_METHOD", "GET").upper()
            if Cors.is_preflight(environ):  # before authentication: a browser's preflight carries no token
                if allow_origin is None:
                    raise _Refused(403, f"Forbidden: CORS is not allowed for Origin {header(environ, 'Origin')!r} (see allowed_origins)")
                start_response(status_line(204), Cors.preflight_headers(environ))
                return []
            if path != self.path:
                return gate.metadata(environ, start_response, method)
            principal = gate.admit(environ, method)
            if method == "POST":
                return self._post.post(environ, start_response, principal)
            if method == "GET":
                return self._session_paths.get(environ, start_response, principal)
            return self._session_paths.delete(environ, start_response, principal)
        except _Refused as refused:
            return _refused_reply(start_response, refused)
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
        if not self._gate.serves(path):
            return None if self._fallback is not None else self._captured(environ)
        if path != self.path or Cors.is_preflight(environ):
            return self._captured(environ)
        try:
            self._gate.admit_head(environ)
        except _Refused as refused:
            return self._captured(environ, refused)
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
            allow_origin = self._gate.allow_origin(environ)
            if allow_origin is not None:
                start_response = Cors.wrap(start_response, allow_origin)
            body = b"".join(_refused_reply(start_response, refused))
        return written[0], written[1], body

    def answers_at_once(self, environ: dict[str, Any], body: bytes) -> bool:
        """Whether this whole request is answered at once, waiting on nothing (see `AnswersAtOnce`:
        mcpsync's own server then runs it on its loop thread): a POST to the endpoint that
        `check_head` let in, carrying a request the engine answers on the calling thread
        (`Engine.answers_at_once`: a tool without a Context, a listing), and in the handshake era
        only for a session found without a round trip to a shared store (`held_fresh`), never an
        `initialize` (which makes a session, in the store when there is one).
        The decoded body is left in the environ (`DECODED`), so `__call__` does not decode it again."""
        if environ.get(ADMITTED) is None or environ.get("REQUEST_METHOD") != "POST" or len(body) > self._max_body:
            return False
        message = jsonrpc.decode(body)
        environ[DECODED] = (body, message)
        if not isinstance(message, jsonrpc.Request):
            return False
        if route(message, header(environ, "MCP-Protocol-Version")) is HANDSHAKE_ERA:
            session_id = header(environ, "Mcp-Session-Id")
            if session_id is None or not self._directory.held_fresh(session_id):  # initialize, or a store round trip
                return False
        return self._engine.answers_at_once(message)

    # -- list changes ----------------------------------------------------------------------------
    def publish_list_changed(self, kinds: frozenset[str], origin: str = LOCAL) -> None:
        """Untagged notifications to every initialized session's stream, then one tagged copy per
        listen that asked for the kind. Never blocks on a client: a stream that cannot keep up is
        dropped. `origin`: made here, or told by the bus (`_directory`)."""
        methods = [(kind, f"notifications/{kind}/list_changed") for kind in sorted(kinds)]
        plain = [jsonrpc.encode(jsonrpc.notification_frame(method)) for _, method in methods]
        self._directory.deliver(plain, None, origin)
        self._listens.tell_list_changed(methods)

    def publish_resource_updated(self, uri: str, origin: str = LOCAL) -> None:
        """A resource changed: to the sessions and listens subscribed to it (or to a parent)
        whose token may read it (`SessionPaths._told`; a session's GET stream checks as it sends)."""
        method, params = "notifications/resources/updated", {"uri": uri}
        self._directory.deliver([jsonrpc.encode(jsonrpc.notification_frame(method, params))], uri, origin)
        self._listens.tell_resource_updated(uri, method, params)

    def publish_task_status(self, task_id: str, params: dict[str, Any], origin: str = LOCAL) -> None:
        """A task changed: to the listens of this endpoint that asked for it (2026-07-28)."""
        self._listens.tell_task_status(task_id, params)

    # -- stopping --------------------------------------------------------------------------------
    def shutdown(self, timeout: float | None = None) -> bool:
        """Graceful shutdown from any thread: open listens get their `complete` result, GET
        streams and sessions end, running requests are cancelled and waited for up to `timeout`
        (default `shutdown_timeout`) and then answered -32603. True if every request finished in
        time. Later requests are answered 503."""
        budget = self._shutdown_timeout if timeout is None else timeout
        deadline = time.monotonic() + budget
        with self._state.lock:
            first = not self._state.closing
            self._state.closing = True
            listens = self._listens.drain()
        if not first:
            return self._stopped.wait(budget + 1.0) and self._clean
        self._listens.complete(listens)
        self._directory.close()
        running = self._requests.stop(deadline)
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

    def wait(self, timeout: float) -> bool:
        """Wait until `shutdown()` has finished; True if it has."""
        return self._stopped.wait(timeout)

    def close(self) -> None:
        self.shutdown()

    def __enter__(self) -> WsgiTransport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _refused_reply(start_response: Callable[..., Any], refused: _Refused) -> list[bytes]:
    return json_reply(start_response, refused.status, jsonrpc.encode(jsonrpc.error_frame(refused.request_id, refused.error)), refused.headers)
