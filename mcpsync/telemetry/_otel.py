"""The spans and histograms of `Telemetry`, on the OpenTelemetry API (imported only from here).

Strategy: the engine calls `ServerObserver.begin` on the thread that runs a request, before
anything else; the span starts there, with the trace context the client put in `params._meta` as
its parent (or the current context when it put none), and is made current for the request's own
code. `leave()` puts the previous context back on that thread; `end(outcome)` sets the error
attributes and the status from the outcome, ends the span and records the duration, on whichever
thread has the outcome (a forwarded call's ends on the thread that reads the upstream). The client
side does the same around a `PendingCall`, and puts its span's context into the request's `_meta`.

Nothing here may fail a request: a malformed `traceparent` is ignored, as the W3C rules say.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from .._version import __version__
from ..catalog.context import AskClient, CancelSignal, Notify
from ..engine.interceptors import TransportInfo
from ..engine.outcome import Failure, NoResponse, Outcome, Success
from ..engine.seams import Exchange
from ..engine.session import Session
from ..protocol.jsonrpc import McpError, Notification, Request
from ..protocol.versions import LATEST_MODERN_VERSION, META_PROTOCOL_VERSION, Era
from ..transport.lifecycle.load import Load

SCOPE = "mcpsync"
TRACE_KEYS = ("traceparent", "tracestate", "baggage")
"""The `_meta` keys that carry W3C trace context and baggage (SEP-414; reserved in 2026-07-28)."""
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
"""The conventions' advised histogram boundaries, in seconds."""
TARGETED = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}
"""Methods whose span name ends with a target, and the attribute that names it."""
WITH_URI = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe", "notifications/resources/updated"})
METRIC_KEYS = frozenset(
    {"mcp.method.name", "error.type", "gen_ai.tool.name", "gen_ai.prompt.name", "rpc.response.status_code",
     "gen_ai.operation.name", "mcp.protocol.version", "network.transport", "network.protocol.name", "network.protocol.version"}
)
"""The span attributes a duration is recorded with: none that grows without bound (no ids, no URI)."""
TOOL_ERROR = "tool_error"
OVER_HTTP = {"network.transport": "tcp", "network.protocol.name": "http", "network.protocol.version": "1.1"}
"""The network attributes of a message over mcpsync's HTTP (its server and its client speak HTTP/1.1)."""
OVER_PIPE = {"network.transport": "pipe"}
"""The network attributes of a message over stdio."""
PEER_KEYS = frozenset({*OVER_HTTP, "mcp.protocol.version", "mcp.session.id"})
"""A served request's attributes that what the server sends on its behalf shares."""


class Gauges:
    """The operator's gauges of the servers watched, read as the meter collects (on the reader's
    thread): requests in flight, open streams, handshake-era sessions, tasks, the request workers
    taken and their number, and whether the replicas' store answers; each point carries the
    server's name (`mcpsync.server.name`).

    One collection reads each server's `load()` once, so `workers.busy` and `workers.max` (say)
    describe the same moment: the first gauge (the SDK calls them in the order they were made)
    takes a fresh reading, and the others use it, unless it is older than `SNAPSHOT_AGE` seconds
    (a reader that called them otherwise)."""

    SNAPSHOT_AGE = 1.0

    def __init__(self, meter: Any) -> None:
        self._servers: weakref.WeakSet[Any] = weakref.WeakSet()  # a closed, dropped Server leaves by itself
        self._lock = threading.Lock()
        self._snapshot: tuple[float, list[tuple[str, Load]]] | None = None
        for index, (name, unit, description, read) in enumerate((
            ("mcpsync.server.requests.active", "{request}", "Requests in flight, running or waiting", lambda load: load.requests),
            ("mcpsync.server.streams.active", "{stream}", "Open listens and GET streams", lambda load: load.streams),
            ("mcpsync.server.sessions.active", "{session}", "Handshake-era sessions held", lambda load: load.sessions),
            ("mcpsync.server.tasks.active", "{task}", "Tasks running or waiting for a worker", lambda load: load.tasks),
            ("mcpsync.server.workers.busy", "{thread}", "Request workers running a request or with one queued", lambda load: load.busy),
            ("mcpsync.server.workers.max", "{thread}", "Request workers there may be (busy = max: requests wait)", lambda load: load.workers),
        )):
            meter.create_observable_gauge(name, callbacks=[self._reader(read, fresh=index == 0)], unit=unit, description=description)
        meter.create_observable_gauge(
            "mcpsync.server.store.reachable", callbacks=[self._reachable], unit="1", description="1 while the replicas' shared store answers, else 0"
        )

    def watch(self, server: Any) -> None:
        with self._lock:
            self._servers.add(server)
            self._snapshot = None

    def _loads(self, fresh: bool) -> list[tuple[str, Load]]:
        now = time.monotonic()
        with self._lock:
            if not fresh and self._snapshot is not None and now - self._snapshot[0] < self.SNAPSHOT_AGE:
                return self._snapshot[1]
            servers = list(self._servers)
        loads = [(server.name, server.load()) for server in servers]
        with self._lock:
            self._snapshot = (now, loads)
        return loads

    def _reader(self, read: Callable[[Load], int], *, fresh: bool) -> Callable[[Any], list[metrics.Observation]]:
        def observe(_options: Any) -> list[metrics.Observation]:
            return [metrics.Observation(read(load), {"mcpsync.server.name": name}) for name, load in self._loads(fresh)]

        return observe

    def _reachable(self, _options: Any) -> list[metrics.Observation]:
        with self._lock:
            servers = list(self._servers)
        points = []
        for server in servers:
            reachable = server.store_reachable()
            if reachable is not None:
                points.append(metrics.Observation(int(reachable), {"mcpsync.server.name": server.name}))
        return points


class Instruments:
    """The tracer, the four duration histograms and the gauges, from the given providers or the
    global ones."""

    def __init__(self, tracer_provider: Any, meter_provider: Any) -> None:
        self.tracer = trace.get_tracer(SCOPE, __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter(SCOPE, __version__, meter_provider=meter_provider)
        self.server_duration = meter.create_histogram(
            "mcp.server.operation.duration", unit="s", description="How long the server took to answer an MCP request",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.client_duration = meter.create_histogram(
            "mcp.client.operation.duration", unit="s", description="How long an MCP request took, as the client saw it",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.server_session = meter.create_histogram(
            "mcp.server.session.duration", unit="s", description="How long an MCP session lasted, as the server saw it",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.client_session = meter.create_histogram(
            "mcp.client.session.duration", unit="s", description="How long an MCP session lasted, as the client saw it",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.gauges = Gauges(meter)


def request_attributes(method: str, request_id: Any, params: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """The span name and the attributes a request's params give, on either side."""
    attributes: dict[str, Any] = {"mcp.method.name": method}
    if request_id is not None:
        attributes["jsonrpc.request.id"] = str(request_id)
    name = method
    if params:
        key = TARGETED.get(method)
        target = params.get("name") if key else None
        if key and isinstance(target, str):
            attributes[key] = target
            name = f"{method} {target}"
        if method in WITH_URI and isinstance(params.get("uri"), str):
            attributes["mcp.resource.uri"] = params["uri"]
    if method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
    return name, attributes


def _error_attributes(error: McpError) -> dict[str, str]:
    code = str(int(error.code))
    return {"error.type": code, "rpc.response.status_code": code}


def _is_tool_error(method: str, result: Any) -> bool:
    return method == "tools/call" and isinstance(result, dict) and result.get("isError") is True


def _remote_parent(params: dict[str, Any]) -> otel_context.Context | None:
    """The context the peer put in `params._meta`, if it is a valid one."""
    meta = params.get("_meta")
    if type(meta) is not dict or "traceparent" not in meta:
        return None
    return _extracted({key: value for key in TRACE_KEYS if isinstance(value := meta.get(key), str)})


def _extracted(carrier: Mapping[str, str]) -> otel_context.Context | None:
    """The context `carrier` holds (W3C keys), if it is a valid one."""
    try:
        extracted = propagate.extract(carrier)
    except Exception:  # a propagator refusing what a peer sent must not fail its request
        return None
    return extracted if trace.get_current_span(extracted).get_span_context().is_valid else None


class _Watched:
    """One span, current on the thread that began it until `leave()`, ended by `end()`."""

    __slots__ = ("_span", "_token", "_histogram", "_attributes", "_started", "_method")

    def __init__(
        self, span: trace.Span, token: contextvars.Token[otel_context.Context] | None, histogram: Any, attributes: dict[str, Any], method: str
    ) -> None:
        self._span = span
        self._token = token
        self._histogram = histogram
        self._attributes = attributes
        self._started = time.perf_counter()
        self._method = method

    def leave(self) -> None:
        if self._token is not None:
            otel_context.detach(self._token)
            self._token = None

    def _finish(self, errors: dict[str, str], description: str | None) -> None:
        span = self._span
        if errors:
            span.set_attributes(errors)
            span.set_status(Status(StatusCode.ERROR, description))
        span.end()
        measured = {key: value for key, value in self._attributes.items() if key in METRIC_KEYS}
        self._histogram.record(time.perf_counter() - self._started, {**measured, **errors})


class _Exchanged(_Watched):
    """A message that ends with a result or an error: a request sent and answered (or a
    notification sent), or a server's request a client answered."""

    __slots__ = ()

    def end(self, result: Any, error: BaseException | None) -> None:
        if isinstance(error, McpError):
            self._finish(_error_attributes(error), error.message)
        elif error is not None:
            self._finish({"error.type": type(error).__qualname__}, str(error))
        elif _is_tool_error(self._method, result):
            self._finish({"error.type": TOOL_ERROR}, None)
        else:
            self._finish({}, None)

    def settled(self, future: concurrent.futures.Future[Any]) -> None:
        """`end` with a future's outcome (a request sent to the client, as its answer comes)."""
        if future.cancelled():
            self._finish({"error.type": "cancelled"}, "given up before the answer came")
            return
        error = future.exception()
        self.end(None if error is not None else future.result(), error)


def _outgoing(
    made: Instruments, method: str, request_id: Any, params: dict[str, Any] | None, peer: dict[str, Any], parent: otel_context.Context | None
) -> tuple[_Exchanged, dict[str, str]]:
    """The CLIENT span of a message sent (by a client, or by a server that initiates: the
    conventions' one kind for both), a child of `parent` (None: the current context); and the
    `_meta` keys that carry its context (none when nothing records it: no SDK, or not sampled)."""
    name, attributes = request_attributes(method, request_id, params)
    attributes.update(peer)
    span = made.tracer.start_span(
        name, context=parent, kind=SpanKind.CLIENT, attributes=attributes, record_exception=False, set_status_on_exception=False
    )
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return _Exchanged(span, None, made.client_duration, attributes, method), carrier


def _carrying(params: dict[str, Any] | None, carrier: dict[str, str]) -> dict[str, Any] | None:
    """`params` to send with the `carrier` keys in its `_meta` (a copy), or as they are without any."""
    if not carrier:
        return params
    meta = params.get("_meta") if params else None
    return {**(params or {}), "_meta": {**meta, **carrier} if isinstance(meta, dict) else carrier}


class _ServerRequest(_Watched):
    """A request the server runs; what it sends the client meanwhile (through `exchange`) and a
    listen's later notifications (`stamp`) are CLIENT spans, its children."""

    __slots__ = ("_made", "_peer")

    def __init__(
        self, made: Instruments, span: trace.Span, token: contextvars.Token[otel_context.Context] | None, attributes: dict[str, Any], method: str
    ) -> None:
        super().__init__(span, token, made.server_duration, attributes, method)
        self._made = made
        self._peer = {key: value for key, value in attributes.items() if key in PEER_KEYS}

    def end(self, outcome: Outcome) -> None:
        if isinstance(outcome, Failure):
            self._finish(_error_attributes(outcome.error), outcome.error.message)
        elif isinstance(outcome, Success) and _is_tool_error(self._method, outcome.result):
            self._finish({"error.type": TOOL_ERROR}, None)
        else:
            self._finish({}, None)

    def exchange(self, exchange: Exchange) -> Exchange:
        return _TracedExchange(exchange, self)

    @property
    def stamp(self) -> Callable[[str, dict[str, Any]], dict[str, str]]:
        return self.sent_notification

    def sent_notification(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        """A notification sent on behalf of this request: its span, begun and ended now; the
        `_meta` keys that carry its context."""
        watch, carrier = self._child(method, params)
        watch.end(None, None)
        return carrier

    def asking(self, method: str, params: dict[str, Any]) -> tuple[_Exchanged, dict[str, Any]]:
        """A request to the client on behalf of this one: its watch (ended as the answer comes)
        and the params to send."""
        watch, carrier = self._child(method, params)
        return watch, _carrying(params, carrier) or params

    def _child(self, method: str, params: dict[str, Any]) -> tuple[_Exchanged, dict[str, str]]:
        return _outgoing(self._made, method, None, params, self._peer, trace.set_span_in_context(self._span))


class _TracedExchange:
    """A request's exchange whose notifications and requests to the client are traced (the
    engine's `Exchange`, the rest passed through)."""

    __slots__ = ("_exchange", "_request")

    def __init__(self, exchange: Exchange, request: _ServerRequest) -> None:
        self._exchange = exchange
        self._request = request

    @property
    def cancel_event(self) -> CancelSignal:
        return self._exchange.cancel_event

    @property
    def on_cancel(self) -> Callable[[Callable[[], None]], None] | None:
        return self._exchange.on_cancel

    @property
    def release_stream(self) -> Callable[[], bool] | None:
        return self._exchange.release_stream

    @property
    def trace_headers(self) -> Mapping[str, str] | None:
        return self._exchange.trace_headers

    @property
    def notify(self) -> Notify:
        notify, request = self._exchange.notify, self._request

        def traced(method: str, params: dict[str, Any]) -> None:
            notify(method, _carrying(params, request.sent_notification(method, params)) or params)

        return traced

    @property
    def ask(self) -> AskClient | None:
        ask, request = self._exchange.ask, self._request
        if ask is None:
            return None

        def traced(method: str, params: dict[str, Any]) -> concurrent.futures.Future[dict[str, Any]]:
            watch, sent = request.asking(method, params)
            try:
                future = ask(method, sent)
            except BaseException as exc:
                watch.end(None, exc)
                raise
            future.add_done_callback(watch.settled)
            return future

        return traced


class ServerObserver:
    """The engine's `Observer`: a SERVER span and a duration for each request."""

    def __init__(self, instruments: Callable[[], Instruments]) -> None:
        self._instruments = instruments

    def begin(self, request: Request, session: Session, transport: TransportInfo, trace_headers: Mapping[str, str] | None) -> _ServerRequest:
        made = self._instruments()
        span, parent, attributes = self._start(made, request.method, request.id, request.params, session, transport, trace_headers)
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        return _ServerRequest(made, span, token, attributes, request.method)

    def notified(
        self, notification: Notification, session: Session, transport: TransportInfo, trace_headers: Mapping[str, str] | None = None
    ) -> None:
        """A notification's span begins and ends as the transport takes it (nothing answers it)."""
        made = self._instruments()
        span, _, attributes = self._start(made, notification.method, None, notification.params, session, transport, trace_headers)
        _ServerRequest(made, span, None, attributes, notification.method).end(NoResponse("a notification"))

    def session_began(self, transport: TransportInfo) -> _ServerSession:
        return _ServerSession(self._instruments().server_session, _transport_attributes(transport.name))

    def _start(
        self, made: Instruments, method: str, request_id: Any, params: dict[str, Any], session: Session, transport: TransportInfo,
        trace_headers: Mapping[str, str] | None,
    ) -> tuple[trace.Span, otel_context.Context | None, dict[str, Any]]:
        """The SERVER span of a message, its parent and its attributes. The parent: the context in
        `_meta` (the conventions' choice), with the ambient one (an HTTP server span) linked;
        else the ambient one; else, where there is none, the one that came as headers."""
        name, attributes = request_attributes(method, request_id, params)
        attributes.update(_transport_attributes(transport.name))
        version = _protocol_version(params, session)
        if version is not None:
            attributes["mcp.protocol.version"] = version
        owner = session.tasks_owner
        if owner is not None and owner.startswith("session:"):
            attributes["mcp.session.id"] = owner.removeprefix("session:")
        parent = _remote_parent(params)
        links = None
        ambient = trace.get_current_span().get_span_context()
        if parent is not None:  # the conventions: the peer's context is the parent, the ambient one a link
            links = [Link(ambient)] if ambient.is_valid else None
        elif trace_headers and not ambient.is_valid:  # no HTTP instrumentation took the headers: they are the parent
            parent = _extracted(trace_headers)
        span = made.tracer.start_span(
            name, context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links,
            record_exception=False, set_status_on_exception=False,
        )
        return span, parent, attributes


class _Session:
    """One session's duration, recorded once at `end`."""

    __slots__ = ("_histogram", "_attributes", "_started")

    def __init__(self, histogram: Any, attributes: dict[str, Any]) -> None:
        self._histogram = histogram
        self._attributes = attributes
        self._started = time.perf_counter()

    def record(self, version: str | None, error: str | None) -> None:
        attributes = dict(self._attributes)
        if version is not None:
            attributes["mcp.protocol.version"] = version
        if error is not None:
            attributes["error.type"] = error
        self._histogram.record(time.perf_counter() - self._started, attributes)


class _ServerSession(_Session):
    __slots__ = ()

    def end(self, session: Session, error: str | None) -> None:
        self.record(session.negotiated_version or (LATEST_MODERN_VERSION if session.era is Era.MODERN else None), error)


def _transport_attributes(transport: str) -> dict[str, str]:
    return dict(OVER_HTTP if transport == "http" else OVER_PIPE)


def _protocol_version(params: dict[str, Any], session: Session) -> str | None:
    meta = params.get("_meta")
    if type(meta) is dict and isinstance(meta.get(META_PROTOCOL_VERSION), str):
        return str(meta[META_PROTOCOL_VERSION])
    if session.negotiated_version is not None:
        return session.negotiated_version
    asked = params.get("protocolVersion")  # initialize
    return asked if isinstance(asked, str) else None


class ClientObserver:
    """A CLIENT span and a duration for each request and notification a client session sends, whose
    context goes into its `_meta`; and the session's own duration."""

    def __init__(self, instruments: Callable[[], Instruments]) -> None:
        self._instruments = instruments

    def session_began(self, connection: Any) -> _ClientSession:
        """A session opens on `connection`: its duration is recorded when it closes (`end`)."""
        attributes = {key: value for key, value in _peer_attributes(connection).items() if key != "mcp.session.id"}
        return _ClientSession(self._instruments().client_session, attributes)

    def begin(
        self, method: str, request_id: Any, params: dict[str, Any] | None, connection: Any, protocol_version: str | None
    ) -> tuple[_Exchanged, dict[str, Any] | None]:
        """The call's watch, and the params to send (a copy, with the trace context in `_meta`)."""
        peer = _peer_attributes(connection)
        if protocol_version is not None:
            peer["mcp.protocol.version"] = protocol_version
        watch, carrier = _outgoing(self._instruments(), method, request_id, params, peer, None)
        return watch, _carrying(params, carrier)

    def serving(self, method: str, request_id: Any, params: dict[str, Any], connection: Any, protocol_version: str | None) -> _Exchanged:
        """A request or notification the server sent this client: its SERVER span (the server's
        context in `_meta` its parent), current on this thread until `leave()`, ended by `end`."""
        made = self._instruments()
        name, attributes = request_attributes(method, request_id, params)
        attributes.update(_peer_attributes(connection))
        if protocol_version is not None:
            attributes["mcp.protocol.version"] = protocol_version
        parent = _remote_parent(params)
        span = made.tracer.start_span(
            name, context=parent, kind=SpanKind.SERVER, attributes=attributes, record_exception=False, set_status_on_exception=False
        )
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        return _Exchanged(span, token, made.server_duration, attributes, method)


class _ClientSession(_Session):
    __slots__ = ()

    def end(self, version: str | None, error: BaseException | None) -> None:
        self.record(version, type(error).__qualname__ if error is not None else None)


def _peer_attributes(connection: Any) -> dict[str, Any]:
    """Where the client's requests go: a URL's host and port over TCP, or a pipe."""
    url = getattr(connection, "url", None)
    if not isinstance(url, str):
        return dict(OVER_PIPE)
    parts = urlsplit(url)
    attributes: dict[str, Any] = dict(OVER_HTTP)
    if parts.hostname:
        attributes["server.address"] = parts.hostname
        attributes["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
    session_id = getattr(connection, "session_id", None)
    if isinstance(session_id, str):
        attributes["mcp.session.id"] = session_id
    return attributes


def flush(tracer_provider: Any, meter_provider: Any, timeout: float) -> None:
    """Flush the given providers, or the global ones, where they can be."""
    millis = int(timeout * 1000)
    for provider in (tracer_provider or trace.get_tracer_provider(), meter_provider or metrics.get_meter_provider()):
        force_flush = getattr(provider, "force_flush", None)
        if callable(force_flush):
            force_flush(millis)
