"""`mcpsync install CLIENT [TARGET]`: write a server entry that runs `mcpsync serve TARGET` into the
configuration file an MCP client reads (Claude Desktop, Claude Code, Cursor, VS Code, or any file
of `mcpServers`), keeping everything else in it as it was: other servers, unrelated keys, comments
(VS Code's file is JSONC), the order and the indentation (`_jsonc` splices the one entry in).

The entry runs this interpreter (`sys.executable -m mcpsync serve TARGET`) by its absolute path, so
it works whatever PATH the client starts it with. A file TARGET is made absolute; a module TARGET
(`package.module:server`) gets `PYTHONPATH` set to `--cwd` (default: here), so it imports from
there: no client's own `cwd` key is needed, and not every client has one.

An entry of the same name is never overwritten without `--force`; a file that is not JSON/JSONC, or
whose servers are not an object, is left alone, saying where. The file is replaced atomically
(written beside it, then renamed), keeping its permissions.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import click

from ._jsonc import JsoncError, set_member

__all__ = ["install"]


@dataclass(frozen=True)
class ClientConfig:
    """Where a client keeps its servers, and how an entry looks there."""

    container: str  # the top-level key of the servers
    typed: bool  # an entry says "type": "stdio"
    path: str  # where the file is ("" : --config must say)
    about: str


def _claude_desktop() -> str:
    if sys.platform == "darwin":
        return "~/Library/Application Support/Claude/claude_desktop_config.json"
    if sys.platform == "win32":
        return os.path.join(os.environ.get("APPDATA", "~"), "Claude", "claude_desktop_config.json")
    return os.path.join(os.environ.get("XDG_CONFIG_HOME") or "~/.config", "Claude", "claude_desktop_config.json")


CLIENTS = {
    "claude-desktop": ClientConfig("mcpServers", False, _claude_desktop(), "Claude Desktop's claude_desktop_config.json"),
    "claude-code": ClientConfig("mcpServers", True, ".mcp.json", "Claude Code's project file, .mcp.json here"),
    "cursor": ClientConfig("mcpServers", False, "~/.cursor/mcp.json", "Cursor's ~/.cursor/mcp.json (every project)"),
    "vscode": ClientConfig("servers", True, ".vscode/mcp.json", "VS Code's workspace file, .vscode/mcp.json here (JSONC)"),
    "json": ClientConfig("mcpServers", False, "", "any file of mcpServers, named with --config"),
}


def _env_pair(_ctx: click.Context, _param: click.Parameter, given: tuple[str, ...]) -> dict[str, str]:
    pairs = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not name or any(char.isspace() for char in name):
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--env")
        pairs[name] = value
    return pairs


@click.command(short_help="Add `mcpsync serve TARGET` to an MCP client's configuration.")
@click.argument("client", type=click.Choice(sorted(CLIENTS)))
@click.argument("target", required=False)
@click.option("--name", help="The server's name in the client (default: TARGET's file or module name, or mcpsync-demo).")
@click.option(
    "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), help="The file to write (default: the client's own; required for json)."
)
@click.option("--env", "env", multiple=True, metavar="NAME=VALUE", callback=_env_pair, help="An environment variable the server gets (repeat it).")
@click.option("--cwd", type=click.Path(file_okay=False, exists=True, path_type=Path), help="Where TARGET is read and imported from (default: here).")
@click.option("--force", is_flag=True, help="Replace an entry of the same name.")
@click.option("--dry-run", is_flag=True, help="Print the file as it would be written, and write nothing.")
def install(
    client: str, target: str | None, name: str | None, config_path: Path | None, env: dict[str, str], cwd: Path | None, force: bool, dry_run: bool,
) -> None:
    """Add a server that runs `mcpsync serve TARGET` (TARGET as serve takes it; none: the demo) to
    CLIENT's configuration: claude-desktop, claude-code, cursor, vscode, or json (--config FILE).

    Everything else in the file stays as it was, comments included. An entry of the same name is
    replaced only with --force. The client reads the file when it starts (or when told to reload).

    \b
    Examples:
      mcpsync install claude-desktop app.py
      mcpsync install vscode tools.server:server --name tools --env API_KEY=...
      mcpsync install json app.py --config ~/mcp.json --dry-run
    """
    spec = CLIENTS[client]
    if config_path is None and not spec.path:
        raise click.UsageError("json needs --config FILE: the file to add the server to")
    path = (config_path or Path(spec.path)).expanduser()
    here = (cwd or Path.cwd()).resolve()
    args, env = _serve_command(target, here, env)
    entry: dict[str, object] = {"type": "stdio"} if spec.typed else {}
    entry.update({"command": sys.executable, "args": args})
    if env:
        entry["env"] = env
    server_name = name or _default_name(target)
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read {path}: {exc}") from exc
    try:
        edited, existed = set_member(text, spec.container, server_name, entry, replace=force)
    except JsoncError as exc:
        if str(exc).endswith("is already there"):
            raise click.ClickException(f"{path} already has a server named {server_name!r}: --force replaces it, --name gives another name") from exc
        raise click.ClickException(f"{path} is left as it was: {exc}") from exc
    if dry_run:
        click.echo(edited, nl=not edited.endswith("\n"))
        return
    _write(path, edited)
    click.echo(f"{'replaced' if existed else 'added'} server {server_name!r} in {path} ({spec.about})", err=True)


def _serve_command(target: str | None, here: Path, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The arguments after the interpreter, and the environment, that serve TARGET from `here`."""
    args = ["-m", "mcpsync", "serve"]
    if target is None:
        return args, env
    candidate = here / target
    if target.endswith(".py") or candidate.is_file():
        if not candidate.is_file():
            raise click.BadParameter(f"{candidate} is not a file", param_hint="TARGET")
        return [*args, str(candidate.resolve())], env
    if "PYTHONPATH" not in env:  # a module: importable from `here`
        env = {**env, "PYTHONPATH": str(here)}
    return [*args, target], env


def _default_name(target: str | None) -> str:
    if target is None:
        return "mcpsync-demo"
    base = target.split(":", 1)[0]
    return Path(base).stem if base.endswith(".py") else base.rsplit(".", 1)[-1]


def _write(path: Path, text: str) -> None:
    """Replace the file atomically: written beside it, then renamed over it, its mode kept."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text if text.endswith("\n") else text + "\n")
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
