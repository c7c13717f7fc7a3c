"""The `mcpsync` command: thin click wiring over the library, one module per family of commands.

`serve` (serving, with `_serve_auth`, `_serve_build`, `config`, `loader` and `demo` beside it),
`clients` (tools, call, listen), `tasks` (tasks, and what call --task does) and `login` (login,
logout, with `_login`). Each command parses its options, builds the library's objects and calls
them: what a command does, a Python program does with the same calls. The entry point is `mcpsync.cli:cli`.
"""

from __future__ import annotations

import click

from .._version import __version__
from . import clients, login, serve, tasks  # the modules stay the package's attributes (tests patch in them)

__all__ = ["cli"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mcpsync")
def cli() -> None:
    """mcpsync: a synchronous Model Context Protocol server, gateway and client."""


for _command in (serve.serve, clients.tools, clients.call, clients.listen, tasks.tasks, login.login, login.logout):
    cli.add_command(_command)
