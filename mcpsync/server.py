"""The `Server`: what an application builds, fills with services and serves.

Strategy: a thin face over the catalog (what is served), the engine (what requests mean) and the
transports (how bytes move). It owns every transport it starts and stops them in `shutdown()`. It
starts no thread of its own: `serve_stdio()` runs the reader on the calling thread, `start_stdio()`
on one named thread the stdio transport owns.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._fanout import Fanout
from ._process import StdioWire as StdioWire  # re-exported: serve_stdio takes one, isolate_stdio makes it
from ._process import graceful_signals
from ._process import isolate_stdio as isolate_stdio
from ._version import __version__
from .catalog.cache_hint import CacheHint
from .catalog.catalog import Catalog
from .catalog.context import Context
from .catalog.extension import Extension
from .catalog.icons import Icon, checked_icons
from .catalog.service import Service, Tool
from .engine.engine import Engine
from .engine.interceptors import Interceptor
from .engine.session import Session
from .errors import McpsyncError
from .protocol.framing import DEFAULT_MAX_FRAME_BYTES
from .protocol.versions import Era
from .tasks.control import UNTOLD, TaskControl
from .tasks.record import LEGACY as LEGACY_FORM
from .tasks.record import MODERN as MODERN_FORM
from .tasks.runner import TaskRunner
from .transport.http.options import (
    DEFAULT_MAX_SESSIONS_PER_CALLER,
    HttpOptions,
)
from .transport.lifecycle.load import Load
from .transport.lifecycle.subscriptions import DEFAULT_SUBSCRIPTION_CAP
from .transport.stdio.server import DEFAULT_WRITE_TIMEOUT, StdioServer

if TYPE_CHECKING:
    from .auth.client.credentials import HttpCredentials
    from .auth.resource.guard import Auth
    from .auth.resource.principal import Principal
    from .bus import Bus
    from .bus.store import Store
    from .gateway.remote import RemoteSource
    from .telemetry import Telemetry
    from .transport.http.endpoint import WsgiTransport
    from .transport.http.serving import HttpServing

log = logging.getLogger("mcpsync")



class Server:
    """An MCP server for both protocol eras.

    Args:
        name, version, title: what the server reports about itself (`serverInfo`).
        extensions: the extensions it offers (`mcpsync.Extension`, SEP-2133; `add_extension`).
        description, website_url, icons: what else it says of itself (`serverInfo`, MCP
            2025-11-25 and later; an older handshake-era client is sent none of them); icons as
            `Icon`s or mappings, checked (see `mcpsync.catalog.icons`).
        services: the services to serve from the start (more can be added later).
        instructions: guidance for the model; defaults to the services' instructions, joined.
        interceptors: hooks around every request and tool call (see `Interceptor`).
        tool_filter: a predicate; tools it rejects are neither listed nor callable.
        page_size: entries per page of every list method.
        workers: threads running requests concurrently on each stdio connection (and per HTTP app).
        max_frame_bytes: the longest stdio line accepted (longer ones are answered -32600), and
            the largest HTTP request body (413).
        ttl_ms, cache_scope: the cache hints of 2026-07-28 list results (and discovery, and reads).
        cache_hints: a method's own hint, `{"tools/list": CacheHint(60_000, "public")}`, over
            those two (see `mcpsync.catalog.cache_hint`; a resource may have its own for its reads).
        shutdown_timeout: how long `shutdown()` waits for running requests.
        drain_timeout: how long end of input waits for running requests.
        write_timeout: seconds a stdio client may leave this server's output unread, while answers
            wait for it, before it is treated as gone: the connection ends as at a shutdown
            (running requests cancelled), logged once on stderr. A client that reads slowly is
            waited for; one that stops is not.
        subscription_cap: open `subscriptions/listen` streams allowed per connection.
        request_state_secret: the key (32 bytes or more, bytes or str) sealing the `requestState`
            of 2026-07-28 `input_required` results; default: random per process. Give every
            process that serves the same clients the same secret. `mcpsync serve` reads it from
            the environment variable MCPSYNC_REQUEST_STATE_SECRET.
        request_state_ttl: seconds a client has to retry with the answers (default 600).
        ask_timeout: seconds a handshake-era `ctx.elicit/sample/roots` waits for the client.
        auth: protects every HTTP endpoint this server makes (`wsgi_app`, `start_http`,
            `serve_http`): only requests with a valid bearer token are served (see `Auth`). stdio
            is never protected: a stdio server takes its credentials from its environment.
        max_sessions_per_caller: handshake-era HTTP sessions one caller (the principal of its
            token, `Principal.key`) may hold at once, on every replica together (default 32, well
            below `max_sessions`' 1024), so one token cannot evict other callers' sessions or lock
            newcomers out. At the bound the caller's own oldest never-used session gives way,
            else its own session idle longest (idle past 10 s in one process; unloaded for two
            keeper rounds across replicas, 125 s at the default session timeout), else its
            `initialize` is answered 429 with `Retry-After`. Endpoints without `auth` have no
            caller to bound. Each endpoint may give its own (`wsgi_app`, `start_http`).
        bus: where this server's list changes and resource updates meet those of the other
            processes serving the same clients (replicas): a URL ("redis://host:6379/0"; the
            `redis` extra) or a `Bus` (see `mcpsync.bus`); None: this process alone. A change made
            on any replica reaches the listeners of every one (see `use_bus`).
        store: where the replicas keep what they share besides messages (handshake-era sessions
            and their streams' events, single-use requestState marks; see `mcpsync.bus.store`).
            A Redis bus URL brings its own (`RedisStore` on the same Redis); give one with a `Bus`
            object (e.g. two `MemoryBus` peers and one `MemoryStore` are two replicas in a test).
            None: sessions live in the process that created them.
        single_use_state: every tool's 2026-07-28 `requestState` runs it once (a replay is
            refused -32602, reason `replayed`), on every replica when they share a `store`; one
            tool at a time: `@service.tool(single_use_state=True)`.
        tasks: the runner of the calls that become tasks (`@service.tool(task="optional")`), with
            its limits and store (`TaskRunner(store, limits=TaskLimits(...))`); default: one keeping
            its records here, or in Redis with a Redis `bus`. `close()` fails what still runs then.
        telemetry: OpenTelemetry spans and metrics for every request served (`mcpsync.telemetry`,
            the `otel` extra); None: nothing of OpenTelemetry is imported.
    """

    def __init__(
        self,
        name: str = "mcpsync",
        version: str = __version__,
        *,
        title: str | None = None,
        services: Iterable[Service] = (),
        instructions: str | None = None,
        interceptors: Iterable[Interceptor] = (),
        tool_filter: Callable[[Tool], bool] | None = None,
        page_size: int = 100,
        workers: int = 16,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        cache_hints: Mapping[str, CacheHint] | None = None,
        shutdown_timeout: float = 5.0,
        drain_timeout: float = 30.0,
        write_timeout: float = DEFAULT_WRITE_TIMEOUT,
        subscription_cap: int = DEFAULT_SUBSCRIPTION_CAP,
        request_state_secret: bytes | str | None = None,
        request_state_ttl: float = 600.0,
        ask_timeout: float = 300.0,
        auth: Auth | None = None,
        bus: Bus | str | None = None,
        store: Store | None = None,
        single_use_state: bool = False,
        max_sessions_per_caller: int = DEFAULT_MAX_SESSIONS_PER_CALLER,
        tasks: TaskRunner | None = None,
        telemetry: Telemetry | None = None,
        description: str | None = None,
        website_url: str | None = None,
        icons: Iterable[Icon | Mapping[str, Any]] = (),
        extensions: Iterable[Extension] = (),
    ) -> None:
        if max_sessions_per_caller < 1:
            raise ValueError("max_sessions_per_caller must be at least 1")
        server_info: dict[str, Any] = {"name": name, "version": version}
        if title:
            server_info["title"] = title
        if description:
            server_info["description"] = description
        if website_url:
            if not website_url.lower().startswith(("https://", "http://")):
                raise ValueError(f"website_url must be an http(s) URL, not {website_url[:80]!r}")
            server_info["websiteUrl"] = website_url
        checked = checked_icons(icons, "server")
        if checked:
            server_info["icons"] = list(checked)
        self.catalog = Catalog(services)
        self.engine = Engine(
            self.catalog,
            server_info,
            instructions=instructions,
            interceptors=interceptors,
            tool_filter=tool_filter,
            page_size=page_size,
            ttl_ms=ttl_ms,
            cache_scope=cache_scope,
            cache_hints=cache_hints,
            request_state_secret=request_state_secret,
            request_state_ttl=request_state_ttl,
            ask_timeout=ask_timeout,
            single_use_state=single_use_state,
            tasks=tasks,
        )
        self.telemetry: Telemetry | None = None
        """Traces and measures the requests served, and the calls sent to the upstreams added
        after it is set (`use_telemetry`)."""
        if telemetry is not None:
            self.use_telemetry(telemetry)
        for extension in extensions:
            self.add_extension(extension)
        self.workers = workers
        self.max_frame_bytes = max_frame_bytes
        self.shutdown_timeout = shutdown_timeout
        self.drain_timeout = drain_timeout
        if write_timeout <= 0:
            raise ValueError("write_timeout must be positive")
        self.write_timeout = write_timeout
        self.subscription_cap = subscription_cap
        self.max_sessions_per_caller = max_sessions_per_caller
        self.auth = auth
        """The `Auth` of the HTTP endpoints made from now on (each may give its own)."""
        self._lock = threading.Lock()
        self._transports: list[Any] = []  # StdioServer, WsgiTransport, HttpServing
        self._fanout = Fanout(self.catalog, self.engine.tasks, self._live_transports)
        if bus is not None:
            self.use_bus(bus, store)
        elif store is not None:
            raise ValueError("a shared store needs the replicas' bus: give bus= too")

    def use_telemetry(self, telemetry: Telemetry) -> None:
        """Trace and measure every request served from now on (`mcpsync.telemetry`), the calls
        sent to the upstreams added after this (`mcpsync serve --otel` calls it on the Server it
        serves, before adding the config's upstreams), and report the operator's gauges (`load`)."""
        self.telemetry = telemetry
        self.engine.observer = telemetry.server_observer()
        telemetry.watch(self)

    def load(self) -> Load:
        """What this server holds now, over all its transports: requests in flight, open streams
        (listens, GET streams), handshake-era sessions, its tasks, and the request workers taken
        (of how many); an operator's gauges read it."""
        total = Load(tasks=self.engine.tasks.active)
        for transport in self._live_transports():
            total += transport.load()
        return total

    def store_reachable(self) -> bool | None:
        """Whether the replicas' shared store answers now (one round trip); None without one."""
        store = self._fanout.store
        return store.reachable() if store is not None else None

    @property
    def name(self) -> str:
        name: str = self.engine.server_info["name"]
        return name

    # -- the catalog ----------------------------------------------------------------------------
    def add_extension(self, extension: Extension) -> None:
        """Offer an extension (`mcpsync.Extension`): advertised in `capabilities.extensions` in
        both eras, its methods answered, its services served. Before serving: a client learns
        the capabilities once."""
        self.engine.add_extension(extension)
        for service in extension.services:
            self.add_service(service)

    def add_service(self, service: Service) -> None:
        """Serve another service; connected clients are told about the new entries."""
        self.catalog.add_service(service)

    def remove_service(self, service: Service | str) -> Service:
        """Stop serving a service (by object or name); connected clients are told."""
        return self.catalog.remove_service(service)

    def refresh_tools(self) -> None:
        """Announce that the tool list changed (e.g. a tool filter's answer changed)."""
        self.catalog.refresh({"tools"})

    def refresh_prompts(self) -> None:
        self.catalog.refresh({"prompts"})

    def refresh_resources(self) -> None:
        self.catalog.refresh({"resources"})

    # -- upstream servers (the gateway) ------------------------------------------------------
    def add_remote(
        self,
        name: str,
        target: Sequence[str] | str,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        headers: Mapping[str, str] | None = None,
        mode: str = "auto",
        prefix: str = "",
        allow: Iterable[str] | None = None,
        deny: Iterable[str] = (),
        timeout: float = 60.0,
        roots: Iterable[str | Mapping[str, str]] | None = None,
        auth: HttpCredentials | None = None,
    ) -> RemoteSource:
        """Proxy an upstream MCP server behind this one: `target` is a command list (started as
        a child, with `env` and `cwd`) or an http(s) URL (with `headers`, and `auth`: this
        gateway's own credentials there, such as `BearerToken` or `OAuth`; the tokens of this
        server's clients are never passed on).

        Its tools and prompts (named `prefix + name`; `allow`/`deny` filter tools by their
        upstream names) and its resources join the catalog after the local ones; local entries
        win clashes, then earlier upstreams. Connects now (waiting up to `timeout` for the first
        attempt) and reconnects with backoff if the upstream dies.

        `roots` (`file://` URIs, or `{"uri": ..., "name": ...}`) are what the upstream's
        `roots/list` is answered, whoever the client is. Without them, a `roots/list` during a
        call asks that call's client, and one outside any call gets the roots of the one stdio
        client that declared `roots` (handshake era), else an empty list; that client's
        `notifications/roots/list_changed` is passed on.
        """
        if isinstance(target, str):
            if not target.startswith(("http://", "https://")):
                raise TypeError(f"upstream {name!r}: give a command as a list (e.g. shlex.split({target!r})) or an http(s) URL")
        elif not target or not all(isinstance(part, str) for part in target) or not target[0].strip():
            raise ValueError(f"upstream {name!r}: the command must be a non-empty list of strings")
        from .gateway.remote import RemoteOptions, parse_roots  # by the first upstream: a plain serve starts without them
        from .gateway.upstream import upstream_source

        try:
            fixed_roots = parse_roots(list(roots)) if roots is not None else None
        except ValueError as exc:
            raise ValueError(f"upstream {name!r}: roots: {exc}") from None
        options = RemoteOptions(
            prefix=prefix,
            allow=frozenset(allow) if allow is not None else None,
            deny=frozenset(deny),
            call_timeout=timeout,
            start_timeout=timeout,
            roots=fixed_roots,
        )
        remote = upstream_source(
            name, target, options, env=env, cwd=cwd, headers=headers, auth=auth, mode=mode, timeout=timeout, client_roots=self._client_roots,
            telemetry=self.telemetry,
        )
        self.catalog.add_remote(remote)
        return remote

    def remove_remote(self, name: str) -> None:
        """Stop proxying an upstream (its child is stopped); clients are told."""
        self.catalog.remove_remote(name)

    def start_task(self, fn: Callable[[Context], Any], *, name: str | None = None, owner: Principal | None = None,
                   form: str = MODERN_FORM) -> str:
        """Run `fn(ctx)` as a task of this server's, outside any request, and return its id: for a
        program that starts the long job itself (a web page's button, a schedule) and hands a
        client the id to follow (`tasks/get`, `session.task(id)`). `fn` runs on the task pool with
        the task's `Context` (cancellation, progress messages; it has no client to ask); what it
        returns becomes the result as a tool's return value does (`name`: the tool it is shown as,
        by default the function's). `owner`: whose it is, the `Principal` of the client meant to
        read it on an endpoint with `Auth` (None: any client of an open endpoint, or stdio's);
        `form`: "2026-07-28" or "2025-11-25", the form of the clients that will read it."""
        if form not in (MODERN_FORM, LEGACY_FORM):
            raise ValueError(f"form must be {MODERN_FORM!r} or {LEGACY_FORM!r}")
        tool = Tool(fn, name=name)
        if tool.input_schema.get("required"):  # its Context is no argument: it is not in the schema
            raise TypeError(f"start_task: {tool.name} must take no arguments but its Context")
        era = Era.MODERN if form == MODERN_FORM else Era.HANDSHAKE

        def body(control: TaskControl) -> dict[str, Any]:
            ctx = Context(request_id=None, era=era, protocol_version=form, client_info=None, client_capabilities={}, progress_token=UNTOLD,
                          notify=control.notify, cancel_event=control.cancel_event, wants_log=lambda level: False, on_cancel=control.on_cancel)
            return tool.to_result(tool.invoke({}, ctx))

        key = owner.key if owner is not None else None
        return self.engine.tasks.create(form=form, tool=tool.name, owner=key, requested_ttl=None, body=body).task_id

    def notify_resource_updated(self, uri: str) -> None:
        """Tell subscribed clients that the content at `uri` changed (subscriptions to a parent
        URI count: an update of `file:///a/b` reaches a subscription to `file:///a`)."""
        self.catalog.resource_updated(uri)

    def _client_roots(self, timeout: float) -> list[dict[str, Any]]:
        """The roots of the one client that can be asked outside a request: a stdio connection
        of the handshake era that declared `roots`. With none or several (whose would they be?),
        or no good answer within `timeout`, none."""
        askable = [t for t in self._live_transports() if isinstance(t, StdioServer) and t.session.declares_roots]
        if len(askable) != 1:
            return []
        try:
            answer = askable[0].ask_client("roots/list", {})
        except McpsyncError as exc:
            log.info("cannot ask the client for its roots: %s", exc)
            return []
        try:
            roots = answer.result(timeout).get("roots")
        except (McpsyncError, concurrent.futures.TimeoutError) as exc:
            answer.cancel()  # the client is told it need not answer any more
            log.info("the client did not give its roots: %s", exc or "no answer in time")
            return []
        if not isinstance(roots, list):
            return []
        return [root for root in roots if isinstance(root, dict) and isinstance(root.get("uri"), str)]

    def _client_notified(self, session: Session, method: str) -> None:
        """On a stdio reader: the roots an upstream would be given may have changed (the client
        said so, or a client with roots just arrived); each upstream's supervisor tells it."""
        arrived = method == "notifications/initialized" and session.declares_roots
        if method == "notifications/roots/list_changed" or arrived:
            for remote in self.catalog.remotes:
                remote.client_roots_changed()

    def _upstreams_shutting_down(self, shutting_down: bool) -> None:
        """While the server shuts down, a forwarded call it cancels says so upstream and down."""
        for remote in self.catalog.remotes:
            remote.server_shutting_down(shutting_down)

    # -- changes, here and on the other replicas -------------------------------------------------
    def use_bus(self, bus: Bus | str, store: Store | None = None) -> None:
        """Share list changes and resource updates with the other replicas through `bus` (a URL
        or a `Bus`; see the `bus` argument), and sessions through `store` (a Redis URL brings
        one, and a task store for a runner made without one, before its first task). This server
        owns them from now on: `close()` closes them. HTTP endpoints made before keep theirs.

        A change made here is delivered to the local listeners at once and published; one
        published by another replica is delivered to the local listeners only (never published
        again, and never back to its publisher: each reaches each listener once). After the bus
        comes back from an outage, every local listener is told that every list changed: it may
        have missed a change, and a re-list costs less than a stale list."""
        if self._fanout.bus is not None:
            raise McpsyncError("this server already has a bus")
        task_store = None
        if isinstance(bus, str):
            from .bus import bus_for, store_for, task_store_for

            url = bus
            bus = bus_for(url)
            if store is None:
                store, task_store = store_for(url), task_store_for(url)
        self._fanout.use_bus(bus, store, task_store)
        if store is not None:
            self.engine.use_claims(store.claim)  # a state used on any replica is used on all

    def _live_transports(self) -> tuple[Any, ...]:
        with self._lock:
            return tuple(self._transports)

    # -- stdio ----------------------------------------------------------------------------------
    def serve_stdio(self, wire: StdioWire | None = None) -> bool:
        """Serve this process's stdin/stdout until end of input or `shutdown()`; blocks.

        While serving, fd 1 points at stderr and fd 0 at /dev/null, so a stray `print()` cannot
        corrupt the wire; SIGTERM and SIGINT shut down gracefully when called on the main thread.
        Pass `wire` (from `isolate_stdio()`) to isolate earlier, e.g. before importing user code.

        Returns True when every request finished in time, False when some were still running at
        the shutdown deadline (their threads keep the interpreter alive until they return).
        """
        wire = wire or isolate_stdio()
        transport = self.serve_fds(wire.wire_in, wire.wire_out, on_stopped=wire.restore, start=False)
        with graceful_signals(transport, on_signal=lambda: self._upstreams_shutting_down(True)):
            try:
                return transport.serve()
            finally:
                self._upstreams_shutting_down(False)

    def start_stdio(self, wire: StdioWire | None = None) -> Server:
        """Serve this process's stdin/stdout on a background thread and return at once."""
        wire = wire or isolate_stdio()
        self.serve_fds(wire.wire_in, wire.wire_out, on_stopped=wire.restore)
        return self

    def serve_fds(
        self,
        read_fd: int,
        write_fd: int,
        *,
        on_stopped: Callable[[], None] | None = None,
        start: bool = True,
    ) -> StdioServer:
        """Serve newline-delimited JSON-RPC on any pair of file descriptors (pipes, sockets).

        With `start=True` the transport runs on its own thread; otherwise call its `serve()`.
        The descriptors stay the caller's to close.
        """
        def stopped() -> None:
            with self._lock:
                if transport in self._transports:
                    self._transports.remove(transport)
            if on_stopped is not None:
                on_stopped()

        transport = StdioServer(
            self.engine,
            read_fd,
            write_fd,
            workers=self.workers,
            max_frame_bytes=self.max_frame_bytes,
            drain_timeout=self.drain_timeout,
            shutdown_timeout=self.shutdown_timeout,
            write_timeout=self.write_timeout,
            on_stopped=stopped,
            subscription_cap=self.subscription_cap,
            on_notification=lambda method, params: self._client_notified(transport.session, method),
        )
        with self._lock:
            self._transports.append(transport)
        if start:
            transport.start()
        return transport

    # -- HTTP -----------------------------------------------------------------------------------
    def wsgi_app(self, path: str | None = None, *, options: HttpOptions | None = None, bus: Bus | str | None = None, **settings: Any) -> WsgiTransport:
        """A WSGI application serving this server's MCP endpoint at `path` (None: the options',
        "/mcp" by default), in both eras.

        Host it with any WSGI server that streams (cheroot, gunicorn's gthread workers, uWSGI,
        mod_wsgi), or mount it beside another WSGI app (`fallback=flask_app` serves every other
        path). The settings are an `HttpOptions` (`options`), or its fields as keywords (they
        replace those of `options`): `fallback`, `allowed_hosts`, `allowed_origins`, `auth`,
        `max_streams` (default 256, where each stream holds a thread), `request_timeout`,
        `keepalive`, `session_timeout`, `max_sessions`, `max_sessions_per_caller`, `workers`,
        `max_body_bytes`, `subscription_cap`, `shutdown_timeout`; those that are None are this
        server's own (`auth`, `workers`, `max_frame_bytes`, ...). `bus`, for a server that has
        none yet, is `use_bus(bus)` first (as `Server(bus=...)`), so a WSGI module can name its
        Redis where it makes the app. The app stops with `shutdown()`.
        """
        chosen = HttpOptions.given(options, **settings, **({} if path is None else {"path": path}))
        if bus is not None:
            self.use_bus(bus)
        app = self._http_app(chosen, chosen.wsgi_streams(), lambda: self._unregister(app))
        with self._lock:
            self._transports.append(app)
        return app

    def start_http(self, host: str = "127.0.0.1", port: int = 8000, *, options: HttpOptions | None = None, **settings: Any) -> HttpServing:
        """Serve HTTP on `host:port` (port 0: any free one; see `.url`) with mcpsync's own
        HTTP/1.1 server, on a background thread, and return at once; `shutdown()` stops it.
        The settings are those of `wsgi_app` (`options`, or its fields as keywords, `path`
        among them), and of the server: `threads` is how many requests it reads, runs or writes
        at once, a worker thread each; `max_connections` how many connections it holds open (one
        more is answered 503), which cost a file descriptor each while they wait, as do open
        streams: `max_streams` (default, None: 8,000, or four fifths of `max_connections` if
        fewer) must stay below it, and is also the listens' cap unless `subscription_cap` is
        given. `max_buffered_bytes` bounds the request bodies it holds at once, across all
        connections (None: 64 MiB, or `max_body_bytes` if more; a request past it is answered
        503 with Retry-After before its body is sent)."""
        from .transport.http.serving import HttpServing

        chosen = HttpOptions.given(options, **settings)
        streams = chosen.served_streams()
        serving: HttpServing | None = None
        app = self._http_app(chosen, streams, lambda: self._unregister(serving), subscription_cap=streams)
        try:
            serving = HttpServing(app, host, port, threads=chosen.threads, max_connections=chosen.max_connections, max_buffered_bytes=chosen.max_buffered_bytes)
        except BaseException:
            app.shutdown(0)
            raise
        with self._lock:
            self._transports.append(serving)
        return serving.start()

    def serve_http(
        self,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        on_ready: Callable[[str], None] | None = None,
        options: HttpOptions | None = None,
        **settings: Any,
    ) -> bool:
        """Serve HTTP on `host:port` until `shutdown()` (or SIGTERM/SIGINT, when called on the
        main thread); blocks. `on_ready(url)` is called once the port is bound (port 0 picks a
        free one). The settings are those of `start_http`. True if every request finished in
        time."""
        serving = self.start_http(host, port, options=options, **settings)
        with graceful_signals(serving, on_signal=lambda: self._upstreams_shutting_down(True)):
            if on_ready is not None:
                on_ready(serving.url)
            try:
                return serving.serve()
            finally:
                self._upstreams_shutting_down(False)

    def _unregister(self, transport: Any) -> None:
        with self._lock:
            if transport in self._transports:
                self._transports.remove(transport)

    def _http_app(self, options: HttpOptions, streams: int, on_stopped: Callable[[], None], *, subscription_cap: int | None = None) -> WsgiTransport:
        """The one place a `WsgiTransport` is made: what `options` leaves None is this server's."""
        from .transport.http.endpoint import WsgiTransport

        cap = options.subscription_cap if options.subscription_cap is not None else subscription_cap
        return WsgiTransport(
            self.engine,
            path=options.path,
            live_path=options.live_path,
            ready_path=options.ready_path,
            fallback=options.fallback,
            allowed_hosts=options.allowed_hosts,
            allowed_origins=options.allowed_origins,
            auth=self.auth if options.auth is None else options.auth,
            max_body_bytes=self.max_frame_bytes if options.max_body_bytes is None else options.max_body_bytes,
            request_timeout=options.request_timeout,
            keepalive=options.keepalive,
            max_streams=streams,
            subscription_cap=self.subscription_cap if cap is None else cap,
            session_timeout=options.session_timeout,
            max_sessions=options.max_sessions,
            max_sessions_per_caller=self.max_sessions_per_caller if options.max_sessions_per_caller is None else options.max_sessions_per_caller,
            workers=self.workers if options.workers is None else options.workers,
            shutdown_timeout=self.shutdown_timeout if options.shutdown_timeout is None else options.shutdown_timeout,
            on_stopped=on_stopped,
            store=self._fanout.store,
            bus=self._fanout.bus,
        )

    def wait(self, timeout: float) -> bool:
        """Wait until every transport serving now has stopped (end of input or shutdown)."""
        deadline = time.monotonic() + timeout
        return all(transport.wait(max(0.0, deadline - time.monotonic())) for transport in self._live_transports())

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop every transport gracefully; safe from any thread. True if all stopped in time."""
        with self._lock:
            transports = tuple(self._transports)
        self._upstreams_shutting_down(True)
        try:
            return all([transport.shutdown(timeout) for transport in transports])
        finally:
            self._upstreams_shutting_down(False)

    def close(self, timeout: float | None = None) -> bool:
        """`shutdown()` every transport, then stop every upstream and the bus. True if all
        stopped in time."""
        stopped = self.shutdown(timeout)
        self.engine.tasks.close(self.shutdown_timeout if timeout is None else timeout)
        self.catalog.close_remotes()
        self._fanout.close()
        return stopped

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
