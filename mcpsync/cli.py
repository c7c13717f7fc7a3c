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
