"""The `mcpsync` command: thin click wiring over the library, one module per family of commands.

`serve` (serving, with `_serve_auth`, `_serve_build`, `config`, `loader` and `demo` beside it),
`clients` (tools, call, listen), `inspecting` (inspect), `install` (with `_jsonc`), `tasks`
(tasks, and what call --task does) and `login` (login, logout, with `_login`). Each command parses its options, builds the library's objects and calls
them: what a command does, a Python program does with the same calls. The entry point is `mcpsync.cli:cli`.

A family's module is imported when one of its commands runs (or `--help` lists them all), not
before: `mcpsync serve` starts without the client commands' imports, and start-up is most of
what a host waits for before the first answer.
"""

from __future__ import annotations

import importlib

import click

from .._version import __version__

__all__ = ["cli"]

COMMANDS = {
    "serve": ("serve", "serve"),
    "tools": ("clients", "tools"),
    "call": ("clients", "call"),
    "listen": ("clients", "listen"),
    "inspect": ("inspecting", "inspect"),
    "install": ("install", "install"),
    "tasks": ("tasks", "tasks"),
    "login": ("login", "login"),
    "logout": ("login", "logout"),
}
"""Each command's module in this package and its name there (`--help` lists them sorted, as click does)."""


class _Commands(click.Group):
    """The group whose commands are imported from their modules when first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = COMMANDS.get(cmd_name)
        if found is None:
            return None
        module, name = found
        command: click.Command = getattr(importlib.import_module(f".{module}", __name__), name)
        return command


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mcpsync")
def cli() -> None:
    """mcpsync: a synchronous Model Context Protocol server, gateway and client."""
