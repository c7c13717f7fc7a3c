"""`mcpsync install`: the entry written into each client's file where that client reads it, in its
shape; everything else in the file kept byte for byte (comments and trailing commas of VS Code's
JSONC included), the result read back by `json5` (an implementation nobody here wrote); an entry
never clobbered without --force; a file that is not JSON left alone; and the entry, started as a
client starts it, serving."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import json5
import pytest

import mcpsync

from .._timeouts import LONG

pytestmark = pytest.mark.timeout(60)

APP = Path(__file__).resolve().parents[2] / "docs" / "examples" / "app.py"
VSCODE = """{
  // servers of this workspace
  "servers": {
    "memory": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-memory"], /* pinned later */
    },
  },
  "inputs": [{"type": "promptString", "id": "key", "description": "API key"}],
}
"""


def _install(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config")}
    return subprocess.run([sys.executable, "-m", "mcpsync", "install", *args], cwd=home, env=env, capture_output=True, text=True, timeout=LONG * 3)


@pytest.mark.parametrize(("client", "where", "container", "typed"), [
    ("claude-desktop", "config/Claude/claude_desktop_config.json", "mcpServers", False),
    ("claude-code", ".mcp.json", "mcpServers", True),
    ("cursor", ".cursor/mcp.json", "mcpServers", False),
    ("vscode", ".vscode/mcp.json", "servers", True),
])
def test_each_client_gets_the_entry_in_its_own_file_and_shape(tmp_path: Path, client: str, where: str, container: str, typed: bool) -> None:
    done = _install(tmp_path, client, str(APP))
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / where).read_text())
    entry = written[container]["app"]
    assert entry == {**({"type": "stdio"} if typed else {}), "command": sys.executable, "args": ["-m", "mcpsync", "serve", str(APP)]}
    assert done.stderr.startswith("added server 'app' in ") and f"{where} (" in done.stderr


def test_a_jsonc_file_keeps_its_comments_and_everything_else(tmp_path: Path) -> None:
    config = tmp_path / ".vscode" / "mcp.json"
    config.parent.mkdir()
    config.write_text(VSCODE)
    done = _install(tmp_path, "vscode", str(APP), "--name", "notes ✓", "--env", 'QUOTE=say "hi"\\n')
    assert done.returncode == 0, done.stderr
    text = config.read_text()
    for line in VSCODE.splitlines():
        assert line in text.splitlines()  # every line of it, comments and trailing commas, still there
    read = json5.loads(text)
    assert read["inputs"][0]["id"] == "key" and read["servers"]["memory"]["command"] == "npx"
    assert read["servers"]["notes ✓"]["env"] == {"QUOTE": 'say "hi"\\n'}


def test_an_entry_of_the_same_name_needs_force_and_force_replaces_only_it(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    assert _install(tmp_path, "json", str(APP), "--config", str(config)).returncode == 0
    config.write_text(config.read_text().replace('"mcpServers": {', '"mcpServers": {\n    "other": {"command": "x"},', 1))
    before = config.read_text()
    again = _install(tmp_path, "json", str(APP), "--config", str(config), "--env", "A=1")
    assert again.returncode == 1 and "already has a server named 'app': --force replaces it" in again.stderr
    assert config.read_text() == before
    forced = _install(tmp_path, "json", str(APP), "--config", str(config), "--env", "A=1", "--force")
    assert forced.returncode == 0 and "replaced server 'app'" in forced.stderr
    read = json.loads(config.read_text())
    assert read["mcpServers"]["app"]["env"] == {"A": "1"} and read["mcpServers"]["other"] == {"command": "x"}


@pytest.mark.parametrize(("content", "why"), [
    ('{"mcpServers": {"a": 1,}', "line 1, column 25: ',' or '}' was expected"),  # the outer object never closed
    ('{"mcpServers": [1, 2]}', "'mcpServers' in the file is not an object"),
    ("[]", "top level is not an object"),
    ('{"mcpServers": {} /* never closed', "never closed"),
    ('{"a": "unterminated}', "never closed"),
])
def test_a_file_that_is_not_what_it_should_be_is_left_as_it_was(tmp_path: Path, content: str, why: str) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(content)
    done = _install(tmp_path, "json", str(APP), "--config", str(config))
    assert done.returncode == 1 and "is left as it was" in done.stderr and why in done.stderr, done.stderr
    assert config.read_text() == content


def test_dry_run_writes_nothing_and_the_mode_of_a_file_is_kept(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text("{}\n")
    config.chmod(0o600)
    shown = _install(tmp_path, "json", str(APP), "--config", str(config), "--dry-run")
    assert shown.returncode == 0 and json.loads(shown.stdout)["mcpServers"]["app"]["command"] == sys.executable
    assert config.read_text() == "{}\n"
    assert _install(tmp_path, "json", str(APP), "--config", str(config)).returncode == 0
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert [path.name for path in tmp_path.iterdir()] == ["mcp.json"]  # no temporary file left beside it


def test_json_needs_a_config_and_a_bad_env_is_a_usage_error(tmp_path: Path) -> None:
    assert _install(tmp_path, "json", str(APP)).returncode == 2
    bad = _install(tmp_path, "json", str(APP), "--config", "x.json", "--env", "NOEQUALS")
    assert bad.returncode == 2 and "is not NAME=VALUE" in bad.stderr


def _serve_entry(entry: dict[str, Any]) -> list[str]:
    """Start the entry as a client does (its command, args and env) and list its tools."""
    env = {**os.environ, **entry.get("env", {})}
    with mcpsync.connect([entry["command"], *entry["args"]], env=env, cwd="/") as session:
        return [tool["name"] for tool in session.list_tools()]


def test_the_entries_serve_when_a_client_starts_them_from_elsewhere(tmp_path: Path) -> None:
    package = tmp_path / "proj" / "tools_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "server.py").write_text(
        "from mcpsync import Server, Service\nservice = Service('t')\n\n@service.tool\ndef ping() -> str:\n    return 'pong'\n\nserver = Server('t', services=[service])\n"
    )
    config = tmp_path / "mcp.json"
    assert _install(tmp_path, "json", str(APP), "--config", str(config)).returncode == 0
    assert _install(tmp_path, "json", "tools_pkg.server:server", "--config", str(config), "--cwd", str(tmp_path / "proj")).returncode == 0
    servers = json.loads(config.read_text())["mcpServers"]
    assert servers["server"]["env"] == {"PYTHONPATH": str(tmp_path / "proj")}
    assert "greet" in _serve_entry(servers["app"])
    assert _serve_entry(servers["server"]) == ["ping"]
