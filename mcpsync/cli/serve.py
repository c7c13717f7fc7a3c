"""`mcpsync serve`: options in, a `Server` built and served out.

Strategy: the command reads its options (and a `--config` file), builds the server with the
library's own calls (`Server`, `add_remote`, `use_bus`, `serve_stdio`/`serve_http`), and serves.
Usage errors exit 2 (click), failures to load a target exit 1 with a one-line message, and logs go
to stderr only: on stdio, stdout is the wire.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import click

from .._stderr_log import PipeHandler, stderr_handler
from .._version import __version__
from ..protocol.framing import DEFAULT_MAX_FRAME_BYTES
from ..transport.http.options import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_SESSIONS_PER_CALLER,
    DEFAULT_MAX_STREAMS,
    DEFAULT_SERVED_MAX_STREAMS,
    HttpOptions,
    WsgiApp,
)
from ..transport.stdio.server import DEFAULT_WRITE_TIMEOUT
from ._serve_auth import auth_for, auth_options, upstream_credentials

if TYPE_CHECKING:
    from ..engine.request_state import RequestStateSealer
    from ..server import Server
    from .config import GatewayConfig
    from .loader import Servable


F = TypeVar("F", bound=Callable[..., Any])
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def _configure_logging(level: str) -> None:
    """The root logger writes to stderr at `level`, through a handler that never makes a logging
    thread wait on a host that does not read stderr (`mcpsync._stderr_log`)."""
    root = logging.getLogger()
    for replaced in root.handlers:
        if isinstance(replaced, PipeHandler):  # its writer thread is this module's to end
            replaced.close()
    root.handlers[:] = [stderr_handler(sys.stderr)]
    root.setLevel(level.upper())


_HTTP_DEFAULTS = {field.name: field.default for field in dataclasses.fields(HttpOptions)}


def _http_setting(flag: str, field: str, kind: click.ParamType[Any], help: str) -> Callable[[F], F]:
    """An option for one `HttpOptions` field, its default read from there (so written once)."""
    default = _HTTP_DEFAULTS[field]
    return click.option(flag, field, type=kind, default=default, help=f"HTTP: {help}  [default: {default:g}]")


@click.command()
@click.argument("target", required=False)
@click.option("--name", help="Server name reported to clients (default: the target's, or 'mcpsync-demo').")
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    metavar="CMD|URL",
    help="Proxy another MCP server: a command line (quoted) or an http(s) URL. Repeatable.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help="A TOML gateway config, or the mcpServers JSON of Claude Desktop, Cursor or VS Code.",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default=None,
    help="Threshold of the log written to stderr.  [default: warning]",
)
@click.option(
    "--max-frame-bytes",
    type=click.IntRange(min=1024),
    default=None,
    help=f"Longest accepted input line (longer: -32600, skipped); over HTTP the largest body (larger: 413).  [default: {DEFAULT_MAX_FRAME_BYTES}]",
)
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Requests served concurrently (threads).  [default: 16]")
@click.option(
    "--write-timeout",
    type=click.FloatRange(min=0.1),
    default=None,
    help=f"stdio: seconds the client may leave the server's output unread, while answers wait, before it is treated as gone "
    f"(the server then shuts down, as at the end of its input). A slow reader is waited for.  [default: {DEFAULT_WRITE_TIMEOUT:g}]",
)
@click.option(
    "--page-size",
    type=click.IntRange(min=1),
    default=None,
    help="Entries per page of tools/list, prompts/list and the resource lists.  [default: 100]",
)
@click.option(
    "--http",
    "http_address",
    metavar="HOST:PORT",
    help="Serve Streamable HTTP on this address (port 0: any free port) instead of stdio.",
)
@click.option("--path", "http_path", default="/mcp", show_default=True, help="HTTP: the MCP endpoint's path.")
@click.option(
    "--allow-host",
    "allowed_hosts",
    multiple=True,
    metavar="HOST",
    help="HTTP: a Host name let in besides localhost (name, name:port, or *). Repeatable.",
)
@click.option(
    "--allow-origin",
    "allowed_origins",
    multiple=True,
    metavar="ORIGIN",
    help="HTTP: a browser Origin let in besides local ones, and answered CORS so its pages may call the endpoint (https://app.example.com, or *). Repeatable.",
)
@click.option(
    "--bus",
    "bus_url",
    metavar="URL",
    help="Share list changes, resource updates and handshake-era sessions with the other processes serving the "
    "same clients (replicas) through this Redis: redis://HOST:PORT/DB (the redis extra). Default: this process alone.",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=None,
    help="HTTP: worker processes, run by gunicorn (the gunicorn extra), each building its own server from TARGET; "
    "each serves --threads requests plus --max-streams streams (a thread each). With more than one, --bus redis://... "
    "is what makes them one server: without it each worker has its own sessions and listens.  [default: 1, this process alone]",
)
@_http_setting("--threads", "threads", click.IntRange(min=2), "requests read, run or written at once, a worker thread each (a waiting connection holds none).")
@_http_setting(
    "--max-connections", "max_connections", click.IntRange(min=2), "connections open at once (one more is answered 503), at most the file descriptor limit."
)
@click.option(
    "--max-buffered-bytes",
    type=click.IntRange(min=1024),
    default=None,
    help="HTTP: request-body bytes held at once across all connections, at least --max-frame-bytes; a request past it is "
    "answered 503 with Retry-After before its body is sent (not with --processes, where each gunicorn thread reads one body).  "
    "[default: 64 MiB, or --max-frame-bytes if more]",
)
@click.option(
    "--max-streams",
    type=click.IntRange(min=1),
    default=None,
    help=f"HTTP: listens and GET streams open at once (per process), below --max-connections.  [default: {DEFAULT_SERVED_MAX_STREAMS} or 4/5 of "
    f"--max-connections; with --processes, where each holds a thread, {DEFAULT_MAX_STREAMS}]",
)
@_http_setting("--request-timeout", "request_timeout", click.FloatRange(min=0.1), "seconds a request may run.")
@_http_setting("--session-timeout", "session_timeout", click.FloatRange(min=1), "seconds an idle handshake-era session lives.")
@click.option(
    "--max-sessions-per-caller",
    type=click.IntRange(min=1),
    default=None,
    help="HTTP with --auth-*: handshake-era sessions one caller (one token's principal) holds at once, across every "
    f"process, so one token cannot evict other callers' sessions or fill the {DEFAULT_MAX_SESSIONS} places. At it, the caller's "
    "oldest never-used session makes way, else its longest idle one, else its initialize gets 429 with Retry-After. Raise it "
    "for a service account whose "
    f"many workers share one token.  [default: {DEFAULT_MAX_SESSIONS_PER_CALLER}, or a served Server's own]",
)
@_http_setting("--keepalive", "keepalive", click.FloatRange(min=0.05), "seconds between SSE keep-alive comments.")
@auth_options
def serve(
    target: str | None,
    name: str | None,
    upstreams: tuple[str, ...],
    config_path: str | None,
    log_level: str | None,
    max_frame_bytes: int | None,
    workers: int | None,
    write_timeout: float | None,
    page_size: int | None,
    http_address: str | None,
    http_path: str,
    allowed_hosts: tuple[str, ...],
    allowed_origins: tuple[str, ...],
    processes: int | None,
    threads: int,
    max_connections: int,
    max_buffered_bytes: int | None,
    max_streams: int | None,
    request_timeout: float,
    session_timeout: float,
    max_sessions_per_caller: int | None,
    keepalive: float,
    auth_resource: str | None,
    auth_issuer: str | None,
    auth_jwks_url: str | None,
    auth_introspection_url: str | None,
    auth_token_file: str | None,
    auth_servers: tuple[str, ...],
    auth_scopes: tuple[str, ...],
    bus_url: str | None,
) -> None:
    """Serve MCP over stdio (or HTTP with --http), both protocol eras.

    TARGET is what to serve: a Python file (app.py) or module (package.module), optionally
    followed by :ATTR naming a Server, a Service, or a function returning one. With
    --upstream or --config, other MCP servers are proxied behind it (a gateway). With none of
    these, the embedded demo service is served.

    With --http HOST:PORT it serves Streamable HTTP instead at http://HOST:PORT/mcp until
    SIGTERM or Ctrl-C, on mcpsync's own HTTP/1.1 server: one loop holds every waiting connection
    and open stream, --threads workers serve the requests. The same app runs under any WSGI
    server through Server.wsgi_app().

    With --processes N (above 1) gunicorn runs N worker processes on that address instead (the
    gunicorn extra: pip install 'mcpsync[gunicorn]'), each building its own server from TARGET
    and the config after the fork. Clients then reach any worker: with --bus redis://... the
    workers are one server (any worker serves any request of any session, and a change made
    through one reaches the listens held by every other);
    without it each worker has its own sessions and listens, and a warning says so. SIGTERM stops
    them gracefully: every open listen gets its complete result first.

    Tools that ask the client (ctx.elicit, ctx.sample, ctx.roots) answer 2026-07-28 requests with
    input_required and a requestState sealed under a random per-process secret; when several
    processes serve the same clients, give them one secret of 32 bytes or more in the environment
    variable MCPSYNC_REQUEST_STATE_SECRET (a served Server's own secret takes precedence).

    With --auth-* options (or an [auth] table in --config) the HTTP endpoint is an OAuth 2.1
    resource server: every request needs a bearer token, checked with one of --auth-jwks-url,
    --auth-introspection-url or --auth-token-file, and its metadata tells clients where to get
    one. An option overrides its key of the table. They replace a served Server's own auth.

    \b
    Examples:
      mcpsync serve
      mcpsync serve app.py
      mcpsync serve mypackage.tools:service --name tools --log-level info
      mcpsync serve --upstream "npx -y @modelcontextprotocol/server-everything"
      mcpsync serve --config ~/.config/Claude/claude_desktop_config.json
      mcpsync serve app.py --http 127.0.0.1:8000
      mcpsync serve app.py --http 0.0.0.0:8000 --processes 4 --bus redis://127.0.0.1:6379/0
      mcpsync serve app.py --http 0.0.0.0:8000 --auth-resource https://mcp.example.com/mcp \\
        --auth-issuer https://login.example.com --auth-jwks-url https://login.example.com/jwks
    """
    if processes is not None and http_address is None:
        raise click.UsageError("--processes applies to --http only: a stdio server answers the one client that started it")
    if write_timeout is not None and http_address is not None:
        raise click.UsageError("--write-timeout applies to stdio only")
    if max_buffered_bytes is not None and (http_address is None or (processes or 1) > 1):
        raise click.UsageError("--max-buffered-bytes applies to --http in one process: under --processes each gunicorn thread reads one body")
    config = _read_config(config_path, upstreams)
    settings = config.server if config is not None else {}
    _configure_logging(log_level or settings.get("log_level", "warning"))
    given = {
        "resource": auth_resource,
        "issuer": auth_issuer,
        "jwks_url": auth_jwks_url,
        "introspection_url": auth_introspection_url,
        "token_file": auth_token_file,
        "authorization_servers": list(auth_servers),
        "scopes": list(auth_scopes),
    }
    auth = auth_for(config, given, over_http=http_address is not None)
    bus = bus_url or (config.bus if config is not None else None)
    if bus is not None:
        from .config import BUS_SCHEMES

        if not bus.startswith(BUS_SCHEMES):  # the URL is not repeated: it may hold a password
            raise click.BadParameter(f"expected a URL starting with {', '.join(BUS_SCHEMES)}", param_hint="--bus")
    options = HttpOptions(  # the endpoint's, the same in one process or many
        path=http_path,
        allowed_hosts=allowed_hosts or None,
        allowed_origins=allowed_origins or None,
        max_streams=max_streams,
        request_timeout=request_timeout,
        session_timeout=session_timeout,
        max_sessions_per_caller=max_sessions_per_caller,
        keepalive=keepalive,
        threads=threads,
        max_connections=max_connections,
        max_buffered_bytes=max_buffered_bytes,
    )
    if http_address is not None and processes is not None and processes > 1:
        host, port = _parse_address(http_address)
        try:
            streams = options.wsgi_streams(max_connections)
        except ValueError:
            raise click.BadParameter("must be below --max-connections: each open stream holds a connection", param_hint="--max-streams") from None
        per_worker = replace(options, max_streams=streams, subscription_cap=streams)

        def load_app() -> WsgiApp:  # in each worker, after the fork
            server = _build_server(target, config, name, settings, max_frame_bytes, workers, page_size)
            worker_auth = auth_for(config, given, over_http=True)  # its own: nothing made in the master is shared
            if worker_auth is not None:
                server.auth = worker_auth
            _use_bus(server, bus)
            from ..gunicorn import manage

            return manage(server).wsgi_app(options=per_worker)

        _serve_processes(processes, host, port, http_path, threads + streams, max_connections, log_level or settings.get("log_level", "warning"), bus, load_app)
        return
    if http_address is not None:
        host, port = _parse_address(http_address)
        server = _build_server(target, config, name, settings, max_frame_bytes, workers, page_size)
        if max_buffered_bytes is not None and max_buffered_bytes < server.max_frame_bytes:
            raise click.BadParameter(f"must hold at least one body of --max-frame-bytes ({server.max_frame_bytes})", param_hint="--max-buffered-bytes")
        if auth is not None:  # else a loaded Server keeps its own
            server.auth = auth
        _use_bus(server, bus)
        _serve_http(server, http_address, lambda on_ready: server.serve_http(host, port, on_ready=on_ready, options=options))
        return
    from ..server import isolate_stdio

    wire = isolate_stdio()  # before user code runs: its import-time prints must not reach the client
    try:
        server = _build_server(target, config, name, settings, max_frame_bytes, workers, page_size, write_timeout)
        _use_bus(server, bus)
    except click.ClickException:
        wire.restore()
        raise
    if os.isatty(wire.wire_in):
        _greet_terminal(server.name)
    clean = server.serve_stdio(wire)
    server.close(timeout=0)
    if not clean:
        # Requests still running past the shutdown deadline would keep the interpreter alive (Python
        # joins worker threads at exit); the user asked us to stop, so leave without them.
        logging.shutdown()
        sys.stderr.flush()
        os._exit(0)


def _use_bus(server: Server, url: str | None) -> None:
    """Share the server's changes with its replicas through the bus at `url` (--bus, or [bus]);
    a bus that cannot be made (the redis extra not installed, a bad URL) exits 1 saying why."""
    if url is None:
        return
    try:
        server.use_bus(url)
    except (ImportError, ValueError) as exc:
        server.close(timeout=0)
        raise click.ClickException(f"--bus: {exc}") from exc  # not the URL: it may hold a password


def _serve_processes(
    processes: int, host: str, port: int, path: str, threads: int, max_connections: int, log_level: str, bus: str | None, load_app: Callable[[], WsgiApp]
) -> None:
    """Run `processes` gunicorn workers on host:port, each serving `load_app()` (built in the
    worker) on `threads` threads, until SIGTERM or Ctrl-C; the URL goes to stderr once the port is
    bound, and each worker says so once it serves. A worker that cannot build its server stops
    them all: exit 1 with its reason."""
    try:
        from ._gunicorn_app import GRACEFUL_TIMEOUT, KEEPALIVE, HaltServer, LoadFailed, ProcessesApplication
    except ImportError as exc:
        if exc.name is None or exc.name.split(".")[0] != "gunicorn":
            raise
        raise click.ClickException("--processes runs its workers with gunicorn, which is not installed: pip install 'mcpsync[gunicorn]'") from exc
    if bus is None or bus.startswith("memory://"):
        logging.getLogger("mcpsync").warning(
            "--processes %d without a shared bus (--bus redis://...): each worker has its own sessions and listens, "
            "and a change made through one reaches only its own clients",
            processes,
        )
    shown = f"[{host}]" if ":" in host else host

    def load() -> WsgiApp:
        try:
            return load_app()
        except click.ClickException as exc:
            raise LoadFailed(f"mcpsync: {exc.format_message()}") from exc

    def announce(url: str) -> None:
        click.echo(f"mcpsync: serving MCP over HTTP at {url} with {processes} worker processes (gunicorn)", err=True)

    settings = {
        "bind": [f"{shown}:{port}"],
        "workers": processes,
        "worker_class": "gthread",
        "threads": threads,
        "worker_connections": max_connections,
        "keepalive": KEEPALIVE,
        "graceful_timeout": GRACEFUL_TIMEOUT,
        "loglevel": log_level,
        "errorlog": "-",
        "accesslog": None,
        "proc_name": "mcpsync",
    }
    _raise_fd_limit()
    def worker_ready(pid: int) -> None:
        click.echo(f"mcpsync: worker process {pid} is serving", err=True)

    application = ProcessesApplication(settings, load, lambda bound: f"http://{shown}:{bound}{path}", announce, worker_ready)
    master = os.getpid()
    try:
        application.run()
    except SystemExit as exc:
        # A worker leaves through here too (it was forked inside run()): its status is gunicorn's
        # to read. The master's failure has been explained above it (a worker's reason, a busy port).
        if os.getpid() == master and exc.code not in (None, 0):
            raise click.ClickException(f"the worker processes stopped (gunicorn's exit status {exc.code})") from exc
        raise
    except HaltServer as exc:  # gunicorn 27 lets a second failed worker's halt escape its own handler
        raise click.ClickException(f"the worker processes stopped: {exc.reason}") from exc


def _greet_terminal(name: str) -> None:
    """Someone typed `mcpsync serve` at a terminal, where silence looks like a hang: say what it
    waits for and how to leave. On stderr, since stdout carries protocol frames only."""
    click.echo(
        f"mcpsync: serving {name!r} as MCP on stdin/stdout, one JSON-RPC message per line; Ctrl-D or Ctrl-C stops it",
        err=True,
    )


def _parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise click.BadParameter(f"expected HOST:PORT (e.g. 127.0.0.1:8000), not {address!r}", param_hint="--http")
    return host, int(port)


def _serve_http(server: Server, address: str, serve_http: Callable[[Callable[[str], None]], bool]) -> None:
    """Serve until SIGTERM or Ctrl-C (`serve_http(on_ready)`); the URL goes to stderr first (port 0
    picks a free port)."""
    def announce(url: str) -> None:
        click.echo(f"mcpsync: serving MCP over HTTP at {url}", err=True)

    _raise_fd_limit()
    try:
        clean = serve_http(announce)
    except (OSError, ValueError) as exc:
        server.close(timeout=0)
        raise click.ClickException(f"cannot serve HTTP on {address}: {exc}") from exc
    server.close(timeout=0)
    if not clean:
        logging.shutdown()
        sys.stderr.flush()
        os._exit(0)


def _raise_fd_limit() -> None:
    """A connection or an open stream costs a file descriptor: let this process open as many as
    the hard limit allows (the soft limit is often 1,024), as servers do."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass  # the soft limit stays; --max-connections is capped below it


def _read_config(config_path: str | None, upstreams: tuple[str, ...]) -> GatewayConfig | None:
    """The --config file plus the --upstream arguments, or None when there are neither: the config
    reader (tomllib, shlex) is imported only by the serve commands that need it."""
    if config_path is None and not upstreams:
        return None
    from .config import ConfigError, GatewayConfig, load_config, upstream_from_argument

    try:
        config = load_config(config_path) if config_path else GatewayConfig("<command line>")
        config.upstreams += [upstream_from_argument(value, index) for index, value in enumerate(upstreams, 1)]
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    return config


def _build_server(
    target: str | None,
    config: GatewayConfig | None,
    name: str | None,
    settings: dict[str, Any],
    max_frame_bytes: int | None,
    workers: int | None,
    page_size: int | None,
    write_timeout: float | None = None,
) -> Server:
    """The Server that `serve` runs: the target's (or the demo's) plus config services and upstreams."""
    from ..server import Server

    given = {"workers": workers, "max_frame_bytes": max_frame_bytes, "page_size": page_size, "write_timeout": write_timeout}
    # What the command line or the config file says; a loaded Server keeps its own values otherwise.
    chosen = {key: value if value is not None else settings.get(key) for key, value in given.items()}
    options: dict[str, Any] = {key: value for key, value in chosen.items() if value is not None}  # config.py checked the types
    server_name = name or settings.get("name")
    loaded = _load_targets(([target] if target else []) + (config.services if config is not None else []))
    if not loaded and (config is None or not config.upstreams):
        from .demo import build_demo_service

        loaded = [build_demo_service()]
        server_name = server_name or "mcpsync-demo"
    secret = os.environ.get("MCPSYNC_REQUEST_STATE_SECRET") or None
    head = loaded[0] if loaded else None
    if isinstance(head, Server):
        server = head
        if secret is not None and server.engine.request_states.ephemeral:  # a Server's own secret wins
            server.engine.request_states = _sealer(secret, server.engine.request_states.ttl)
        server.workers = options.get("workers", server.workers)
        server.max_frame_bytes = options.get("max_frame_bytes", server.max_frame_bytes)
        server.write_timeout = options.get("write_timeout", server.write_timeout)
        server.engine.page_size = options.get("page_size", server.engine.page_size)
        if server_name:
            server.engine.server_info["name"] = server_name
    else:
        first = head.name if head is not None else "mcpsync-gateway"
        server = Server(server_name or first, settings.get("version", __version__), **options)
        if secret is not None:
            server.engine.request_states = _sealer(secret, server.engine.request_states.ttl)
        if head is not None:
            server.add_service(head)
    for extra in loaded[1:]:
        for service in extra.catalog.services if isinstance(extra, Server) else [extra]:
            server.add_service(service)
    if config is not None:
        _add_upstreams(server, config)
    return server


def _load_targets(specs: list[str]) -> list[Servable]:
    """Each TARGET and config service, loaded (the loader is imported only when there is one)."""
    if not specs:
        return []
    from .loader import TargetError, load_target

    try:
        return [load_target(spec) for spec in specs]
    except TargetError as exc:
        raise click.ClickException(str(exc)) from exc


def _add_upstreams(server: Server, config: GatewayConfig) -> None:
    """Proxy the config's upstreams behind `server`; two of the same name are a usage error."""
    names = [upstream.name for upstream in config.upstreams]
    clashes = sorted({name for name in names if names.count(name) > 1})
    if clashes:
        raise click.ClickException(f"two upstreams are named {', '.join(map(repr, clashes))}; rename one in {config.path}")
    for upstream in config.upstreams:
        target = upstream.url or upstream.command
        assert target, "the config reader gives every upstream a url or a command"
        server.add_remote(
            upstream.name,
            target,
            env=upstream.env or None,
            cwd=upstream.cwd,
            headers=upstream.headers or None,
            mode=upstream.mode,
            prefix=upstream.prefix,
            allow=upstream.allow,
            deny=upstream.deny,
            timeout=upstream.timeout,
            roots=upstream.roots,
            auth=upstream_credentials(upstream.name, upstream.auth) if upstream.auth is not None else None,
        )


def _sealer(secret: str, ttl: float) -> RequestStateSealer:
    from ..engine.request_state import RequestStateSealer

    try:
        return RequestStateSealer(secret, ttl=ttl)
    except ValueError as exc:
        raise click.ClickException(f"MCPSYNC_REQUEST_STATE_SECRET: {exc}") from exc
