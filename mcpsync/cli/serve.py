"""`mcpsync serve`: options in, a `Server` built and served out.

Strategy: the command reads its options (and a `--config` file), builds the server with the
library's own calls (`_serve_build`: `Server`, `add_remote`, `use_bus`) and an `HttpOptions`, and
serves it with the library's (`mcpsync.hosting`: `run_stdio`, `run_http`; `mcpsync.processes`:
`serve_processes`), so a program does all of it with the same calls (docs/guide/http.rst shows
how). What is left here is the command line's own: the options, their usage errors (exit 2), and
each failure said in one line (exit 1). Logs go to stderr only: on stdio, stdout is the wire.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..hosting import log_to_stderr, run_http, run_stdio
from ..hosting import raise_fd_limit as _raise_fd_limit  # a module attribute: tests keep their own process's limit
from ..protocol.framing import DEFAULT_MAX_FRAME_BYTES
from ..transport.http.options import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_SESSIONS_PER_CALLER,
    DEFAULT_MAX_STREAMS,
    DEFAULT_SERVED_MAX_STREAMS,
    HttpOptions,
)
from ..transport.stdio.server import DEFAULT_WRITE_TIMEOUT
from ._serve_auth import auth_for, auth_options
from ._serve_build import build_server, checked_bus, read_config

if TYPE_CHECKING:
    from ..server import Server
    from ..telemetry import Telemetry


F = TypeVar("F", bound=Callable[..., Any])
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
_HTTP_DEFAULTS = {field.name: field.default for field in dataclasses.fields(HttpOptions)}


def _http_setting(flag: str, field: str, kind: click.ParamType[Any], help: str) -> Callable[[F], F]:
    """An option for one `HttpOptions` field, its default read from there (so written once)."""
    default = _HTTP_DEFAULTS[field]
    return click.option(flag, field, type=kind, default=default, help=f"HTTP: {help}  [default: {default:g}]")


def _unless_given(flag: str, kind: click.ParamType[Any], help: str) -> Callable[[F], F]:
    """An option that is None unless given: then a loaded Server's own value, the config's, or a
    default derived from other options applies, which `help` names."""
    return click.option(flag, type=kind, default=None, help=help)


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
@_unless_given("--log-level", click.Choice(LOG_LEVELS, case_sensitive=False), "Threshold of the log written to stderr.  [default: warning]")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="The log's lines on stderr: text, or one JSON object per line (time, level, logger, message; the trace_id and "
    "span_id of a traced request with --otel) for log pipelines.",
)
@_unless_given(
    "--max-frame-bytes",
    click.IntRange(min=1024),
    f"Longest accepted input line (longer: -32600, skipped); over HTTP the largest body (larger: 413).  [default: {DEFAULT_MAX_FRAME_BYTES}]",
)
@_unless_given("--workers", click.IntRange(min=1), "Requests served concurrently (threads).  [default: 16]")
@_unless_given(
    "--write-timeout",
    click.FloatRange(min=0.1),
    f"stdio: seconds the client may leave the server's output unread, while answers wait, before it is treated as gone "
    f"(the server then shuts down, as at the end of its input). A slow reader is waited for.  [default: {DEFAULT_WRITE_TIMEOUT:g}]",
)
@_unless_given("--page-size", click.IntRange(min=1), "Entries per page of tools/list, prompts/list and the resource lists.  [default: 100]")
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
    "--otel",
    is_flag=True,
    help="Trace and measure every request with OpenTelemetry (spans and metrics by its MCP conventions), exported by "
    "OTLP as the standard variables say: OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318), OTEL_EXPORTER_OTLP_PROTOCOL "
    "(http/protobuf, the default, or grpc), OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS, ... Needs "
    "opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http (or -grpc). "
    "With --processes each worker exports its own, as a service instance of its own (service.instance.id).",
)
@click.option(
    "--prometheus",
    "prometheus_address",
    metavar="HOST:PORT",
    help="Answer Prometheus scrapes of the metrics (the MCP durations and mcpsync's gauges) at http://HOST:PORT/metrics "
    "(port 0: any free port; the URL goes to stderr), with --otel or alone. Needs opentelemetry-sdk and "
    "opentelemetry-exporter-prometheus. Not with --processes (one port cannot answer for several processes: use --otel).",
)
@_unless_given(
    "--processes",
    click.IntRange(min=1),
    "HTTP: worker processes, run by gunicorn (the gunicorn extra), each building its own server from TARGET; "
    "each serves --threads requests plus --max-streams streams (a thread each). With more than one, --bus redis://... "
    "is what makes them one server: without it each worker has its own sessions and listens.  [default: 1, this process alone]",
)
@_http_setting("--threads", "threads", click.IntRange(min=2), "requests read, run or written at once, a worker thread each (a waiting connection holds none).")
@_http_setting(
    "--max-connections", "max_connections", click.IntRange(min=2), "connections open at once (one more is answered 503), at most the file descriptor limit."
)
@_unless_given(
    "--max-buffered-bytes",
    click.IntRange(min=1024),
    "HTTP: request-body bytes held at once across all connections, at least --max-frame-bytes; a request past it is "
    "answered 503 with Retry-After before its body is sent (not with --processes, where each gunicorn thread reads one body).  "
    "[default: 64 MiB, or --max-frame-bytes if more]",
)
@_unless_given(
    "--max-streams",
    click.IntRange(min=1),
    f"HTTP: listens and GET streams open at once (per process), below --max-connections.  [default: {DEFAULT_SERVED_MAX_STREAMS} or 4/5 of "
    f"--max-connections; with --processes, where each holds a thread, {DEFAULT_MAX_STREAMS}]",
)
@_http_setting("--request-timeout", "request_timeout", click.FloatRange(min=0.1), "seconds a request may run.")
@_http_setting("--session-timeout", "session_timeout", click.FloatRange(min=1), "seconds an idle handshake-era session lives.")
@_unless_given(
    "--max-sessions-per-caller",
    click.IntRange(min=1),
    "HTTP with --auth-*: handshake-era sessions one caller (one token's principal) holds at once, across every "
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
    log_format: str,
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
    otel: bool,
    prometheus_address: str | None,
) -> None:
    """Serve MCP over stdio (or HTTP with --http), both protocol eras.

    TARGET is what to serve: a Python file (app.py) or module (package.module), optionally
    followed by :ATTR naming a Server, a Service, or a function returning one. With
    --upstream or --config, other MCP servers are proxied behind it (a gateway). With none of
    these, the embedded demo service is served.

    With --http HOST:PORT it serves Streamable HTTP instead at http://HOST:PORT/mcp until
    SIGTERM or Ctrl-C, on mcpsync's own HTTP/1.1 server: one loop holds every waiting connection
    and open stream, --threads workers serve the requests. The same app runs under any WSGI
    server through Server.wsgi_app(). GET /livez and /readyz answer a load balancer's or an
    orchestrator's probes (ready: not shutting down, and the --bus store answers).

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

    With --otel every request gets an OpenTelemetry span and its duration is measured (the MCP
    conventions), exported by OTLP to OTEL_EXPORTER_OTLP_ENDPOINT; a client that sends its
    trace context in params._meta (traceparent) gets its trace continued. Under --processes each
    worker exports its own. With --prometheus HOST:PORT the metrics also answer scrapes at
    http://HOST:PORT/metrics (one process only).

    \b
    Examples:
      mcpsync serve
      mcpsync serve app.py
      mcpsync serve mypackage.tools:service --name tools --log-level info
      mcpsync serve --upstream "npx -y @modelcontextprotocol/server-everything"
      mcpsync serve --config ~/.config/Claude/claude_desktop_config.json
      mcpsync serve app.py --http 127.0.0.1:8000
      OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 mcpsync serve app.py --otel
      mcpsync serve app.py --http 0.0.0.0:8000 --processes 4 --bus redis://127.0.0.1:6379/0
      mcpsync serve app.py --http 0.0.0.0:8000 --auth-resource https://mcp.example.com/mcp \\
        --auth-issuer https://login.example.com --auth-jwks-url https://login.example.com/jwks
    """
    _check_transport_options(http_address, processes, write_timeout, max_buffered_bytes)
    if prometheus_address is not None and (processes or 1) > 1:
        raise click.UsageError(
            "--prometheus answers for one process, and --processes runs several: use --otel (each worker exports its own metrics)"
        )
    config = read_config(config_path, upstreams)
    level = log_level or (config.server if config is not None else {}).get("log_level", "warning")
    log_to_stderr(level, json=log_format == "json")
    given = {"resource": auth_resource, "issuer": auth_issuer, "jwks_url": auth_jwks_url, "introspection_url": auth_introspection_url,
             "token_file": auth_token_file, "authorization_servers": list(auth_servers), "scopes": list(auth_scopes)}
    auth = auth_for(config, given, over_http=http_address is not None)
    bus = checked_bus(bus_url, config)
    settings = {"workers": workers, "max_frame_bytes": max_frame_bytes, "page_size": page_size, "write_timeout": write_timeout}
    build = partial(build_server, target, config, name, settings, bus, max_buffered_bytes)
    if http_address is None:
        _serve_stdio(partial(build, telemetry=_telemetry(otel, prometheus_address)))
        return
    host, port = _parse_address(http_address)
    options = HttpOptions(  # the endpoint's, the same in one process or many
        path=http_path, allowed_hosts=allowed_hosts or None, allowed_origins=allowed_origins or None, max_streams=max_streams,
        request_timeout=request_timeout, session_timeout=session_timeout, max_sessions_per_caller=max_sessions_per_caller,
        keepalive=keepalive, threads=threads, max_connections=max_connections, max_buffered_bytes=max_buffered_bytes,
    )
    if processes is None or processes == 1:
        _serve_http(build(auth=auth, telemetry=_telemetry(otel, prometheus_address)), host, port, options, http_address)
        return
    try:
        options = options.for_threaded_worker()
    except ValueError:
        raise click.BadParameter("must be below --max-connections: each open stream holds a connection", param_hint="--max-streams") from None
    # Each worker builds its own server, auth and telemetry (its exporters' threads) after the
    # fork: nothing made here is shared.
    _serve_processes(
        lambda: build(auth=auth_for(config, given, over_http=True), telemetry=_telemetry(otel, None)), processes, host, port, options, level, bus
    )


def _telemetry(otel: bool, prometheus_address: str | None) -> Telemetry | None:
    """`--otel` (OTLP export as the OTEL_* variables say) and `--prometheus` (a scrape endpoint,
    announced on stderr); None without either. What is missing is said in one line."""
    if not otel and prometheus_address is None:
        return None
    from ..telemetry import Telemetry

    flag = "--otel" if prometheus_address is None else "--prometheus" if not otel else "--otel/--prometheus"
    prometheus = _parse_address(prometheus_address, "--prometheus") if prometheus_address is not None else None
    try:
        telemetry = Telemetry.from_environment(otlp=otel, prometheus=prometheus)
    except (ImportError, ValueError) as exc:
        raise click.ClickException(f"{flag}: {exc}") from exc
    except OSError as exc:
        raise click.ClickException(f"--prometheus: cannot serve on {prometheus_address}: {exc}") from exc
    if telemetry.prometheus_url is not None:
        click.echo(f"mcpsync: metrics for Prometheus at {telemetry.prometheus_url}", err=True)
    return telemetry


def _check_transport_options(http_address: str | None, processes: int | None, write_timeout: float | None, max_buffered_bytes: int | None) -> None:
    """The options that apply to one way of serving only are usage errors with another."""
    if processes is not None and http_address is None:
        raise click.UsageError("--processes applies to --http only: a stdio server answers the one client that started it")
    if write_timeout is not None and http_address is not None:
        raise click.UsageError("--write-timeout applies to stdio only")
    if max_buffered_bytes is not None and (http_address is None or (processes or 1) > 1):
        raise click.UsageError("--max-buffered-bytes applies to --http in one process: under --processes each gunicorn thread reads one body")


def _serve_stdio(build: Callable[[], Server]) -> None:
    """Serve the built server on stdin/stdout until end of input, SIGTERM or Ctrl-C."""
    from ..server import isolate_stdio

    wire = isolate_stdio()  # before user code runs: its import-time prints must not reach the client
    try:
        server = build()
    except click.ClickException:
        wire.restore()
        raise
    if os.isatty(wire.wire_in):
        _greet_terminal(server.name)
    run_stdio(server, wire)


def _serve_http(server: Server, host: str, port: int, options: HttpOptions, address: str) -> None:
    """Serve until SIGTERM or Ctrl-C; the URL goes to stderr first (port 0 picks a free port)."""
    def announce(url: str) -> None:
        click.echo(f"mcpsync: serving MCP over HTTP at {url}", err=True)

    _raise_fd_limit()
    try:
        run_http(server, host, port, options=options, on_ready=announce)
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"cannot serve HTTP on {address}: {exc}") from exc


def _serve_processes(build: Callable[[], Server], processes: int, host: str, port: int, options: HttpOptions, log_level: str, bus: str | None) -> None:
    """Run `processes` gunicorn workers on host:port, each serving `build()` (called in the
    worker), until SIGTERM or Ctrl-C; the URL goes to stderr once the port is bound, and each
    worker says so once it serves. A worker that cannot build its server stops them all: exit 1
    with its reason."""
    try:
        from ..processes import LoadFailed, ProcessesStopped, serve_processes
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

    def load() -> Server:
        try:
            return build()
        except click.ClickException as exc:
            raise LoadFailed(f"mcpsync: {exc.format_message()}") from exc

    def announce(url: str) -> None:
        click.echo(f"mcpsync: serving MCP over HTTP at {url} with {processes} worker processes (gunicorn)", err=True)

    def worker_ready(pid: int) -> None:
        click.echo(f"mcpsync: worker process {pid} is serving", err=True)

    _raise_fd_limit()
    try:
        serve_processes(load, host, port, processes=processes, options=options, log_level=log_level, on_ready=announce, on_worker_ready=worker_ready)
    except ProcessesStopped as exc:
        raise click.ClickException(str(exc)) from exc


def _greet_terminal(name: str) -> None:
    """Someone typed `mcpsync serve` at a terminal, where silence looks like a hang: say what it
    waits for and how to leave. On stderr, since stdout carries protocol frames only."""
    click.echo(
        f"mcpsync: serving {name!r} as MCP on stdin/stdout, one JSON-RPC message per line; Ctrl-D or Ctrl-C stops it",
        err=True,
    )


def _parse_address(address: str, option: str = "--http") -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise click.BadParameter(f"expected HOST:PORT (e.g. 127.0.0.1:8000), not {address!r}", param_hint=option)
    return host, int(port)
