"""The `mcpsync` command: thin click wiring over `Server` and the loader.

Strategy: each command parses options, builds or loads the objects, and calls one method. Usage
errors exit 2 (click), failures to load a target exit 1 with a one-line message, and logs go to
stderr only: on stdio, stdout is the wire.
"""

from __future__ import annotations

import logging
import os
import sys

import click

from . import __version__
from .transport.stdio import DEFAULT_MAX_FRAME_BYTES

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mcpsync")
def cli() -> None:
    """mcpsync: a synchronous Model Context Protocol server, gateway and client."""


@cli.command()
@click.argument("target", required=False)
@click.option("--name", help="Server name reported to clients (default: the target's, or 'mcpsync-demo').")
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="warning",
    show_default=True,
    help="Threshold of the log written to stderr.",
)
@click.option(
    "--max-frame-bytes",
    type=click.IntRange(min=1024),
    default=DEFAULT_MAX_FRAME_BYTES,
    show_default=True,
    help="Longest accepted input line; longer ones are answered -32600 and skipped.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Requests served concurrently (threads).",
)
@click.option(
    "--page-size",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Entries per page of tools/list, prompts/list and the resource lists.",
)
def serve(target: str | None, name: str | None, log_level: str, max_frame_bytes: int, workers: int, page_size: int) -> None:
    """Serve MCP over stdio, both protocol eras on one connection.

    TARGET is what to serve: a Python file (app.py) or module (package.module), optionally
    followed by :ATTR naming a Server, a Service, or a function returning one. Without
    TARGET, the embedded demo service is served.

    \b
    Examples:
      mcpsync serve
      mcpsync serve app.py
      mcpsync serve mypackage.tools:service --name tools --log-level info
    """
    _configure_logging(log_level)
    from .demo import build_demo_service
    from .loader import TargetError, load_target
    from .server import Server, isolate_stdio

    wire = isolate_stdio()  # before user code runs: its import-time prints must not reach the client

    options = dict(workers=workers, max_frame_bytes=max_frame_bytes, page_size=page_size)
    if target is None:
        server = Server(name or "mcpsync-demo", services=[build_demo_service()], **options)  # type: ignore[arg-type]
    else:
        try:
            loaded = load_target(target)
        except TargetError as exc:
            wire.restore()
            raise click.ClickException(str(exc)) from exc
        if isinstance(loaded, Server):
            server = loaded
            server.workers, server.max_frame_bytes, server.engine.page_size = workers, max_frame_bytes, page_size
            if name:
                server.engine.server_info["name"] = name
        else:
            server = Server(name or loaded.name, services=[loaded], **options)  # type: ignore[arg-type]
    if not server.serve_stdio(wire):
        # Requests still running past the shutdown deadline would keep the interpreter alive (Python
        # joins worker threads at exit); the user asked us to stop, so leave without them.
        logging.shutdown()
        sys.stderr.flush()
        os._exit(0)


# -- the client commands ---------------------------------------------------------------------------

EXIT_TOOL_ERROR = 1
EXIT_FAILURE = 3


def _client_options(command):  # type: ignore[no-untyped-def]
    command = click.argument("server", nargs=-1, required=True, metavar="-- COMMAND...")(command)
    command = click.option("--timeout", type=click.FloatRange(min=0.1), default=30.0, show_default=True, help="Deadline of each request, in seconds.")(command)
    command = click.option(
        "--mode",
        type=click.Choice(["auto", "legacy", "modern"]),
        default="auto",
        show_default=True,
        help="Protocol era: probe 2026-07-28 and fall back (auto), or force one.",
    )(command)
    return command


class _ClientFailure(click.ClickException):
    exit_code = EXIT_FAILURE


def _open(server: tuple[str, ...], mode: str, timeout: float):  # type: ignore[no-untyped-def]
    from .client import connect
    from .errors import McpsyncError

    try:
        return connect(list(server), mode=mode, timeout=timeout)
    except McpsyncError as exc:
        raise _ClientFailure(f"cannot talk to {' '.join(server)}: {exc}") from exc


def _print_json(value: object) -> None:
    import json

    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


@cli.command()
@_client_options
@click.option("--json", "as_json", is_flag=True, help="Print the full tool definitions as JSON.")
def tools(server: tuple[str, ...], mode: str, timeout: float, as_json: bool) -> None:
    """List the tools of the MCP server started by COMMAND.

    \b
    Example:
      mcpsync tools -- mcpsync serve
    """
    from .errors import McpsyncError

    with _open(server, mode, timeout) as session:
        try:
            listed = session.list_tools()
        except McpsyncError as exc:
            raise _ClientFailure(str(exc)) from exc
    if as_json:
        _print_json(listed)
        return
    width = max((len(tool["name"]) for tool in listed), default=0)
    for tool in listed:
        summary = (tool.get("description") or "").strip().splitlines()
        click.echo(f"{tool['name']:<{width}}  {summary[0] if summary else ''}".rstrip())


@cli.command()
@click.argument("tool")
@click.option("--args", "arguments", default="{}", show_default=True, help="Tool arguments as a JSON object.")
@_client_options
@click.option("--json", "as_json", is_flag=True, help="Print the whole CallToolResult as JSON.")
def call(tool: str, arguments: str, server: tuple[str, ...], mode: str, timeout: float, as_json: bool) -> None:
    """Call TOOL on the MCP server started by COMMAND and print its result.

    Exits 1 when the tool reports an error (isError), 3 when the call itself fails.

    \b
    Example:
      mcpsync call add --args '{"a": 2, "b": 3}' -- mcpsync serve
    """
    import json

    from .errors import McpsyncError

    try:
        parsed = json.loads(arguments)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--args") from exc
    if not isinstance(parsed, dict):
        raise click.BadParameter("must be a JSON object", param_hint="--args")

    def progress(done: float, total: float | None, message: str | None) -> None:
        click.echo(f"progress: {done}{f'/{total}' if total is not None else ''}{f' {message}' if message else ''}", err=True)

    with _open(server, mode, timeout) as session:
        try:
            result = session.call_tool(tool, parsed, progress=progress)
        except McpsyncError as exc:
            raise _ClientFailure(str(exc)) from exc
    if as_json:
        _print_json(result)
    else:
        for block in result.get("content") or []:
            click.echo(block["text"] if block.get("type") == "text" else json.dumps(block, ensure_ascii=False))
    if result.get("isError"):
        sys.exit(EXIT_TOOL_ERROR)


@cli.command()
@_client_options
@click.option("--count", type=click.IntRange(min=1), help="Stop after this many events.")
@click.option("--resource", "resources", multiple=True, metavar="URI", help="Also watch this resource (repeatable).")
def listen(server: tuple[str, ...], mode: str, timeout: float, count: int | None, resources: tuple[str, ...]) -> None:
    """Print the list changes (and resource updates) of the MCP server started by COMMAND.

    One line per event, as it arrives, until the server ends, Ctrl-C, or --count events.

    \b
    Example:
      mcpsync listen --resource file:///notes -- mcpsync serve app.py
    """
    from .client import ListChanged
    from .errors import McpsyncError

    with _open(server, mode, timeout) as session:
        try:
            listener = session.listen(tools=True, prompts=True, resources=True, resource_uris=resources)
        except McpsyncError as exc:
            raise _ClientFailure(str(exc)) from exc
        click.echo(f"listening ({session.era.value if session.era else '?'} era)", err=True)
        seen = 0
        with listener:
            try:
                for event in listener:
                    if isinstance(event, ListChanged):
                        click.echo(f"{event.kind} list changed")
                    else:
                        click.echo(f"resource updated {event.uri}")
                    seen += 1
                    if count is not None and seen >= count:
                        break
            except KeyboardInterrupt:
                pass
        if listener.error is not None:
            raise _ClientFailure(str(listener.error))
