"""The `Server` that a `mcpsync serve` command line describes: its target (or the demo), the
config's services and upstreams, its settings, its bus and its auth, made with the library's own
calls (`Server`, `add_service`, `add_remote`, `use_bus`).

Strategy: `serve` reads the options and reads `--config` once (`read_config`), then calls
`build_server` in the process that serves: once, or in each worker under --processes, after the
fork. Every failure is a click error saying why in one line (a secret, such as a bus URL's
password, is never repeated). The config reader and the target loader are imported only by the
command lines that need them, so a plain serve starts without them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click

from .._version import __version__
from ._serve_auth import upstream_credentials

if TYPE_CHECKING:
    from ..auth import Auth
    from ..engine.request_state import RequestStateSealer
    from ..server import Server
    from ..telemetry import Telemetry
    from .config import GatewayConfig
    from .loader import Servable


def read_config(config_path: str | None, upstreams: tuple[str, ...]) -> GatewayConfig | None:
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


def checked_bus(given: str | None, config: GatewayConfig | None) -> str | None:
    """The bus of --bus, else of the config's [bus] table, its scheme checked before anything is
    loaded (the URL is not repeated: it may hold a password)."""
    bus = given or (config.bus if config is not None else None)
    if bus is not None:
        from .config import BUS_SCHEMES

        if not bus.startswith(BUS_SCHEMES):
            raise click.BadParameter(f"expected a URL starting with {', '.join(BUS_SCHEMES)}", param_hint="--bus")
    return bus


def build_server(
    target: str | None,
    config: GatewayConfig | None,
    name: str | None,
    given: dict[str, Any],
    bus: str | None,
    max_buffered_bytes: int | None = None,
    *,
    auth: Auth | None = None,
    telemetry: Telemetry | None = None,
) -> Server:
    """The Server that `serve` runs, with `auth` (else a loaded Server keeps its own) and the bus;
    `given` holds the Server settings of the command line (workers, max_frame_bytes, page_size,
    write_timeout), None where not given. `max_buffered_bytes` must hold one of its bodies."""
    server = _compose(target, config, name, given, telemetry)
    if max_buffered_bytes is not None and max_buffered_bytes < server.max_frame_bytes:
        raise click.BadParameter(f"must hold at least one body of --max-frame-bytes ({server.max_frame_bytes})", param_hint="--max-buffered-bytes")
    if auth is not None:
        server.auth = auth
    if bus is not None:
        try:
            server.use_bus(bus)
        except (ImportError, ValueError) as exc:  # the redis extra not installed, a bad URL
            server.close(timeout=0)
            raise click.ClickException(f"--bus: {exc}") from exc  # not the URL: it may hold a password
    return server


def _compose(target: str | None, config: GatewayConfig | None, name: str | None, given: dict[str, Any], telemetry: Telemetry | None) -> Server:
    """The target's Server (or the demo's) plus config services and upstreams, traced with
    `telemetry` before any upstream is added (so the calls forwarded to them are traced too)."""
    from ..server import Server

    settings = config.server if config is not None else {}
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
        if telemetry is not None:
            server.use_telemetry(telemetry)
    else:
        first = head.name if head is not None else "mcpsync-gateway"
        server = Server(server_name or first, settings.get("version", __version__), telemetry=telemetry, **options)
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
