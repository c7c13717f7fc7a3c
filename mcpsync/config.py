"""A gateway configuration file: local services, upstream servers and server limits.

Strategy: two formats are read into one `GatewayConfig`. mcpsync's own TOML::

    [server]
    name = "gateway"          # also: version, workers, page_size, max_frame_bytes, log_level
    services = ["app.py", "mypackage.tools:service"]

    [upstreams.files]
    command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
    env = { DEBUG = "1" }
    prefix = "fs_"
    deny = ["write_file"]
    roots = ["file:///srv/shared"]   # what its roots/list gets (else the client's roots)

    [upstreams.remote]
    url = "http://127.0.0.1:8000/mcp"
    headers = { Authorization = "Bearer ..." }

and the `mcpServers` JSON of Claude Desktop, Cursor and VS Code (`{"mcpServers": {NAME: {"command":
..., "args": [...], "env": {...}} | {"url": ..., "headers": {...}}}}`, VS Code's `"servers"` too).
Every problem is a `ConfigError` naming the file, the line (when it can be found) and the key.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import McpsyncError

_SERVER_KEYS = {"name": str, "version": str, "workers": int, "page_size": int, "max_frame_bytes": int, "log_level": str}
_UPSTREAM_KEYS = {"command", "args", "env", "cwd", "url", "headers", "prefix", "allow", "deny", "mode", "timeout", "roots", "type", "transport"}
MODES = ("auto", "legacy", "modern")


class ConfigError(McpsyncError, ValueError):
    """The configuration file is unreadable or says something mcpsync cannot do."""


@dataclass
class UpstreamConfig:
    name: str
    command: list[str] | None = None
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    prefix: str = ""
    allow: list[str] | None = None
    deny: list[str] = field(default_factory=list)
    mode: str = "auto"
    timeout: float = 60.0
    roots: list[dict[str, str]] | None = None


@dataclass
class GatewayConfig:
    path: str
    server: dict[str, Any] = field(default_factory=dict)
    services: list[str] = field(default_factory=list)
    upstreams: list[UpstreamConfig] = field(default_factory=list)


def parse_roots(value: Any) -> tuple[dict[str, str], ...]:
    """Roots given for an upstream (a config's `roots`, `Server.add_remote(roots=...)`): a list of
    `file://` URIs, each a string or a table with `uri` and an optional `name`, as MCP's `Root`.
    Raises ValueError saying what is wrong."""
    if not isinstance(value, list):
        raise ValueError("must be a list of file:// URIs (or tables with uri and name)")
    roots = []
    for entry in value:
        root = {"uri": entry} if isinstance(entry, str) else entry
        if not isinstance(root, dict) or set(root) - {"uri", "name"} or not all(isinstance(v, str) for v in root.values()):
            raise ValueError(f"{entry!r}: a root is a file:// URI, or a table with uri and an optional name")
        if not root.get("uri", "").startswith("file://"):
            raise ValueError(f"{entry!r}: a root's uri must start with file://")
        roots.append(dict(root))
    return tuple(roots)


def upstream_from_argument(value: str, index: int) -> UpstreamConfig:
    """`--upstream` on the command line: a URL, or a command line split like a shell would."""
    if value.startswith(("http://", "https://")):
        return UpstreamConfig(name=f"upstream{index}", url=value)
    try:
        command = shlex.split(value)
    except ValueError as exc:
        raise ConfigError(f"--upstream {value!r}: {exc}") from None
    if not command:
        raise ConfigError("--upstream needs a command or a URL")
    return UpstreamConfig(name=f"upstream{index}", command=command)


def load_config(path: str | Path) -> GatewayConfig:
    """Read a TOML (`.toml`) or mcpServers JSON file."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    reader = _Reader(str(path), text)
    if source.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        return reader.json()
    return reader.toml()


class _Reader:
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self.lines = text.splitlines()

    def fail(self, key: str, problem: str, table: str | None = None) -> ConfigError:
        line = self._line_of(key, table)
        where = f"{self.path}:{line}" if line else self.path
        return ConfigError(f"{where}: {key}: {problem}")

    def _line_of(self, key: str, table: str | None) -> int | None:
        """Best effort: the header of the table `key` names, or the line defining `key` (after its
        table's header, when there is one)."""
        header = re.compile(r"^\s*\[+\s*" + r"\s*\.\s*".join(re.escape(p) for p in key.split(".")) + r"\s*[\].]")
        for number, line in enumerate(self.lines):
            if header.search(line):
                return number + 1
        leaf = key.rsplit(".", 1)[-1]
        start = 0
        if table:
            header = re.compile(r"^\s*\[\s*" + r"\s*\.\s*".join(re.escape(p) for p in table.split(".")) + r"\s*\]")
            json_key = re.compile(r'"' + re.escape(table.rsplit(".", 1)[-1]) + r'"\s*:')
            for number, line in enumerate(self.lines):
                if header.search(line) or json_key.search(line):
                    start = number
                    break
        pattern = re.compile(r'^\s*"?' + re.escape(leaf) + r'"?\s*[=:]')
        for number in range(start, len(self.lines)):
            if pattern.search(self.lines[number]):
                return number + 1
        return start + 1 if table else None

    # -- TOML ----------------------------------------------------------------------------------
    def toml(self) -> GatewayConfig:
        try:
            data = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{self.path}: not valid TOML: {exc}") from None
        config = GatewayConfig(self.path)
        unknown = set(data) - {"server", "upstreams", "services"}
        if unknown:
            raise self.fail(sorted(unknown)[0], "unknown section (expected server, services, upstreams)")
        server = data.get("server", {})
        if not isinstance(server, dict):
            raise self.fail("server", "must be a table")
        services = server.pop("services", data.get("services", []))
        for key, value in server.items():
            expected = _SERVER_KEYS.get(key)
            if expected is None:
                raise self.fail(key, f"unknown server setting (expected one of {', '.join(sorted(_SERVER_KEYS))}, services)", "server")
            if not isinstance(value, expected) or isinstance(value, bool):
                raise self.fail(key, f"must be a {expected.__name__}", "server")
        config.server = server
        config.services = self._strings(services, "services", "server")
        upstreams = data.get("upstreams", {})
        if not isinstance(upstreams, dict):
            raise self.fail("upstreams", "must be a table of named upstreams")
        config.upstreams = [self.upstream(name, spec, f"upstreams.{name}") for name, spec in upstreams.items()]
        return config

    # -- mcpServers JSON -------------------------------------------------------------------------
    def json(self) -> GatewayConfig:
        try:
            data = json.loads(self.text)
        except ValueError as exc:
            raise ConfigError(f"{self.path}: not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{self.path}: expected a JSON object with an \"mcpServers\" key")
        servers = data.get("mcpServers", data.get("servers"))
        if not isinstance(servers, dict):
            raise self.fail("mcpServers", "must be an object mapping names to servers")
        config = GatewayConfig(self.path)
        config.upstreams = [self.upstream(name, spec, name) for name, spec in servers.items()]
        return config

    # -- one upstream, either format -------------------------------------------------------------
    def upstream(self, name: str, spec: Any, table: str) -> UpstreamConfig:
        if not isinstance(spec, dict):
            raise self.fail(table, "must be a table/object")
        for key in spec:
            if key not in _UPSTREAM_KEYS:
                raise self.fail(f"{table}.{key}", f"unknown upstream setting (expected one of {', '.join(sorted(_UPSTREAM_KEYS))})", table)
        upstream = UpstreamConfig(name=name)
        command, url = spec.get("command"), spec.get("url")
        if (command is None) == (url is None):
            raise self.fail(table, "needs exactly one of command or url")
        if command is not None:
            if isinstance(command, str):
                args = self._strings(spec.get("args", []), f"{table}.args", table)
                upstream.command = [command, *args]
            else:
                upstream.command = self._strings(command, f"{table}.command", table)
                if "args" in spec:
                    upstream.command += self._strings(spec["args"], f"{table}.args", table)
            if not upstream.command or not upstream.command[0].strip():
                raise self.fail(f"{table}.command", "must not be empty", table)
        else:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise self.fail(f"{table}.url", "must be an http:// or https:// URL", table)
            upstream.url = url
        upstream.env = self._string_map(spec.get("env", {}), f"{table}.env", table)
        upstream.headers = self._string_map(spec.get("headers", {}), f"{table}.headers", table)
        for key in ("cwd", "prefix", "mode"):
            if key in spec and not isinstance(spec[key], str):
                raise self.fail(f"{table}.{key}", "must be a string", table)
        upstream.cwd = spec.get("cwd")
        upstream.prefix = spec.get("prefix", "")
        upstream.mode = spec.get("mode", "auto")
        if upstream.mode not in MODES:
            raise self.fail(f"{table}.mode", f"must be one of {', '.join(MODES)}", table)
        if "allow" in spec:
            upstream.allow = self._strings(spec["allow"], f"{table}.allow", table)
        upstream.deny = self._strings(spec.get("deny", []), f"{table}.deny", table)
        timeout = spec.get("timeout", 60.0)
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise self.fail(f"{table}.timeout", "must be a positive number of seconds", table)
        upstream.timeout = float(timeout)
        if "roots" in spec:
            try:
                upstream.roots = list(parse_roots(spec["roots"]))
            except ValueError as exc:
                raise self.fail(f"{table}.roots", str(exc), table) from None
        return upstream

    def _strings(self, value: Any, key: str, table: str | None) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.fail(key, "must be a list of strings", table)
        return list(value)

    def _string_map(self, value: Any, key: str, table: str | None) -> dict[str, str]:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise self.fail(key, "must be a table of strings", table)
        return dict(value)
