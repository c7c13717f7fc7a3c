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
    headers = { Accept-Language = "en" }
    auth = { type = "oauth", scopes = ["mcp:tools"] }   # the tokens `mcpsync login URL` stored
    # or { type = "bearer", token_env = "REMOTE_TOKEN" }
    # or { type = "client_credentials", client_id = "gateway", client_secret_env = "GW_SECRET" }
    #    (or private_key_file = "gateway.pem", signing_algorithm = "ES256", for private_key_jwt)

    [bus]                     # replicas share list changes and resource updates (the redis extra)
    url = "redis://127.0.0.1:6379/0"

    [auth]                    # serve --http only: bearer tokens checked as an OAuth resource server
    resource = "https://mcp.example.com/mcp"       # this endpoint's URL: the tokens' audience
    issuer = "https://login.example.com"
    jwks_url = "https://login.example.com/.well-known/jwks.json"   # or introspection_url, or token_file
    scopes = ["mcp:tools"]                         # also: authorization_servers (default [issuer])

and the `mcpServers` JSON of Claude Desktop, Cursor and VS Code (`{"mcpServers": {NAME: {"command":
..., "args": [...], "env": {...}} | {"url": ..., "headers": {...}}}}`, VS Code's `"servers"` too).
Every problem is a `ConfigError` naming the file, the line (when it can be found) and the key.

An upstream's `auth` is the gateway's own credentials for it (never its clients' tokens, which
the spec forbids passing on): secrets are named, not written (`token_env`, `client_secret_env`:
environment variables; `private_key_file`, relative to the config file), and an OAuth upstream is
not logged in to from the gateway unless `interactive = true` (log in first: `mcpsync login URL`).

`[auth]` holds what the `--auth-*` options of `serve` say (an option overrides its key): a relative
`token_file` is read from the config file's directory, as the file is meant to travel with it; the
introspection client's id and secret are never read from a file (they come from the environment,
MCPSYNC_AUTH_CLIENT_ID and MCPSYNC_AUTH_CLIENT_SECRET). The mcpServers JSON has no auth: it
describes servers to start or reach, not how to protect this one.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..auth.resource.principal import is_scope
from ..errors import McpsyncError
from ..gateway.remote import parse_roots
from ._url_text import has_credentials, lower_scheme, shown, unknown_scheme

_SERVER_KEYS = {"name": str, "version": str, "workers": int, "page_size": int, "max_frame_bytes": int, "log_level": str}
_UPSTREAM_KEYS = {"command", "args", "env", "cwd", "url", "headers", "prefix", "allow", "deny", "mode", "timeout", "roots", "type", "transport", "auth"}
BUS_SCHEMES = ("memory://", "redis://", "rediss://")
"""The buses a `[bus]` url or `--bus` may name (mcpsync.bus.bus_for makes them)."""
UPSTREAM_AUTH_TYPES = {
    "bearer": ({"token_env"}, set()),
    "oauth": (set(), {"client_id", "client_secret_env", "client_metadata_url", "scopes", "interactive"}),
    "client_credentials": ({"client_id"}, {"client_secret_env", "private_key_file", "signing_algorithm", "scopes"}),
}
"""Each upstream auth `type`: the keys it needs and the keys it may have (besides `type`)."""
_NAMED_SECRETS = {"token": "token_env", "client_secret": "client_secret_env", "private_key": "private_key_file"}
MODES = ("auto", "legacy", "modern")
AUTH_SOURCES = ("jwks_url", "introspection_url", "token_file")
"""The `[auth]` keys naming how tokens are checked: a table (with its options) gives exactly one."""
_AUTH_URLS = ("resource", "issuer", "jwks_url", "introspection_url")
_AUTH_LISTS = ("authorization_servers", "scopes")
_AUTH_KEYS = (*_AUTH_URLS, "token_file", *_AUTH_LISTS, "resource_name", "scope_implies")


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
    auth: UpstreamAuth | None = None
    """The gateway's own credentials for this upstream (an http(s) one)."""


@dataclass
class UpstreamAuth:
    """An upstream's `auth` table: how the gateway authorizes itself there (see the module docstring)."""

    type: str
    token_env: str | None = None
    client_id: str | None = None
    client_secret_env: str | None = None
    client_metadata_url: str | None = None
    private_key_file: str | None = None
    signing_algorithm: str | None = None
    scopes: list[str] | None = None
    interactive: bool = False


@dataclass
class AuthConfig:
    """How `serve --http` checks bearer tokens: the `[auth]` table, or the `--auth-*` options.

    An empty key is not given; `authorization_servers` defaults to `[issuer]` when it is built
    (not here, so that an `--auth-issuer` option moves that default with it)."""

    resource: str | None = None
    issuer: str | None = None
    jwks_url: str | None = None
    introspection_url: str | None = None
    token_file: str | None = None
    authorization_servers: list[str] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)
    resource_name: str | None = None
    """A human-readable name for the metadata (table only)."""
    scope_implies: dict[str, list[str]] = field(default_factory=dict)
    """Broader scopes and the narrower ones each grants (table only; see `Auth`)."""

    def merged(self, over: AuthConfig) -> AuthConfig:
        """These settings with each key that `over` gives replacing this one's: the command line
        over the config file, key by key (a list replaces a list: it does not add to it)."""
        return AuthConfig(**{f.name: getattr(over, f.name) or getattr(self, f.name) for f in fields(self)})

    def sources(self) -> list[str]:
        """The keys of `AUTH_SOURCES` given: how tokens would be checked (one, when all is well)."""
        return [key for key in AUTH_SOURCES if getattr(self, key)]


@dataclass
class GatewayConfig:
    path: str
    server: dict[str, Any] = field(default_factory=dict)
    services: list[str] = field(default_factory=list)
    upstreams: list[UpstreamConfig] = field(default_factory=list)
    auth: AuthConfig | None = None
    """The `[auth]` table (None when there is none)."""
    bus: str | None = None
    """The `[bus]` table's `url`: where the replicas share their changes (None: this process alone)."""


def url_problem(value: str) -> str | None:
    """What is wrong with an auth URL (None: nothing). OAuth sends tokens and metadata over HTTP(S)
    and names a resource or an issuer by an absolute URL with no fragment (RFC 8707, RFC 8414)."""
    try:
        parts = urlsplit(value)
    except ValueError:  # a bracketed host that is not an IPv6 address
        parts = urlsplit("")
    if not value.startswith(("http://", "https://")) or not parts.netloc:
        return "must be an http:// or https:// URL"
    if "#" in value:
        return "must not have a #fragment"
    return None


def scope_problem(value: str) -> str | None:
    """What is wrong with a scope (None: nothing): one RFC 6749 scope-token, no space or quote,
    since a token's scopes travel as one space-separated string."""
    if not is_scope(value):
        return f"{value!r} is not a scope (printable ASCII, no spaces, quotes or backslashes)"
    return None


UPSTREAM_CREDENTIALS = (
    "credentials in the URL are not supported (they are never sent); give the upstream a token in the headers "
    "(Authorization) or the auth table of its entry in a --config file"
)


def upstream_from_argument(value: str, index: int) -> UpstreamConfig:
    """`--upstream` on the command line: a URL, or a command line split like a shell would. A
    URL of another scheme (htp://) is an error, not a program to start and retry for ever."""
    if problem := unknown_scheme(value):
        raise ConfigError(f"--upstream {problem}")
    if value.lower().startswith(("http://", "https://")):
        if has_credentials(value):
            raise ConfigError(f"--upstream {shown(value)}: {UPSTREAM_CREDENTIALS}")
        return UpstreamConfig(name=f"upstream{index}", url=lower_scheme(value))
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
        # The leaf's own line, else (a key inside an inline table: `auth = { type = ... }`) the
        # line of the key that holds it, and so on outwards.
        parts = key.split(".")
        inner = parts[len(table.split(".")):] if table and key.startswith(table + ".") else [leaf]
        for name in reversed(inner or [leaf]):
            pattern = re.compile(r'^\s*"?' + re.escape(name) + r'"?\s*[=:]')
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
        unknown = set(data) - {"server", "upstreams", "services", "auth", "bus"}
        if unknown:
            raise self.fail(sorted(unknown)[0], "unknown section (expected server, services, upstreams, auth, bus)")
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
        if "auth" in data:
            config.auth = self.auth(data["auth"])
        if "bus" in data:
            config.bus = self.bus(data["bus"])
        return config

    def auth(self, table: Any) -> AuthConfig:
        """The `[auth]` table. Only at most one verifier source can be told here: what else each
        source needs (an issuer, a resource) may still come from the command line."""
        if not isinstance(table, dict):
            raise self.fail("auth", "must be a table")
        auth = AuthConfig()
        for key, value in table.items():
            where = f"auth.{key}"
            if key in ("client_id", "client_secret"):
                raise self.fail(where, f"not read from a file: set MCPSYNC_AUTH_{key.upper()} in the environment", "auth")
            if key not in _AUTH_KEYS:
                raise self.fail(where, f"unknown auth setting (expected one of {', '.join(_AUTH_KEYS)})", "auth")
            if key in _AUTH_LISTS:
                setattr(auth, key, self._auth_list(key, value))
            elif key == "scope_implies":
                auth.scope_implies = self._scope_implies(value)
            elif not isinstance(value, str) or not value.strip():
                raise self.fail(where, "must be a non-empty string", "auth")
            elif key in _AUTH_URLS and (problem := url_problem(value)):
                raise self.fail(where, problem, "auth")
            else:
                setattr(auth, key, value)
        if auth.token_file:
            auth.token_file = str(Path(self.path).parent / Path(auth.token_file).expanduser())
        if len(sources := auth.sources()) > 1:
            raise self.fail(f"auth.{sources[1]}", f"give one way to check tokens, not both {sources[0]} and {sources[1]}", "auth")
        return auth

    def bus(self, table: Any) -> str:
        """The `[bus]` table: its one key, `url` (memory://, redis:// or rediss://)."""
        if not isinstance(table, dict):
            raise self.fail("bus", "must be a table")
        for key in table:
            if key != "url":
                raise self.fail(f"bus.{key}", "unknown bus setting (expected url)", "bus")
        url = table.get("url")
        if not isinstance(url, str) or not url.startswith(BUS_SCHEMES):
            raise self.fail("bus.url", f"must be a URL starting with {', '.join(BUS_SCHEMES)}", "bus")
        return url

    def _scope_implies(self, value: Any) -> dict[str, list[str]]:
        """`scope_implies = { admin = ["files:read", "files:write"] }`: scopes to lists of scopes."""
        if not isinstance(value, dict):
            raise self.fail("auth.scope_implies", "must be a table of scopes, each naming a list of the scopes it grants", "auth")
        implied = {}
        for broad, narrower in value.items():
            if problem := scope_problem(broad):
                raise self.fail("auth.scope_implies", problem, "auth")
            if not isinstance(narrower, list) or not all(isinstance(item, str) for item in narrower):
                raise self.fail("auth.scope_implies", f"{broad}: must be a list of scopes", "auth")
            for item in narrower:
                if problem := scope_problem(item):
                    raise self.fail("auth.scope_implies", f"{broad}: {problem}", "auth")
            implied[broad] = list(narrower)
        return implied

    def _auth_list(self, key: str, value: Any) -> list[str]:
        """`authorization_servers` (URLs) or `scopes` (scope tokens), each checked."""
        items = self._strings(value, f"auth.{key}", "auth")
        check = url_problem if key == "authorization_servers" else scope_problem
        for item in items:
            if problem := check(item):
                raise self.fail(f"auth.{key}", f"{item!r}: {problem}" if key == "authorization_servers" else problem, "auth")
        return items

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
            if has_credentials(url):
                raise self.fail(f"{table}.url", UPSTREAM_CREDENTIALS, table)
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
        if "auth" in spec:
            if upstream.url is None:
                raise self.fail(f"{table}.auth", "is for an http(s) upstream: a command takes its credentials from env", table)
            upstream.auth = self._upstream_auth(spec["auth"], f"{table}.auth", table)
        return upstream

    def _upstream_auth(self, value: Any, key: str, table: str) -> UpstreamAuth:
        """An upstream's `auth` table: its `type`, the keys that type needs, and nothing else."""
        if not isinstance(value, dict):
            raise self.fail(key, "must be a table with a type (bearer, oauth or client_credentials)", table)
        kind = value.get("type")
        if kind not in UPSTREAM_AUTH_TYPES:
            raise self.fail(f"{key}.type", f"must be one of {', '.join(UPSTREAM_AUTH_TYPES)}", table)
        needed, optional = UPSTREAM_AUTH_TYPES[kind]
        for name in value:
            if name in _NAMED_SECRETS:
                raise self.fail(f"{key}.{name}", f"secrets are not written in a config file: name it with {_NAMED_SECRETS[name]}", table)
            if name != "type" and name not in needed | optional:
                raise self.fail(f"{key}.{name}", f"not a setting of {kind} auth (expected {', '.join(sorted(needed | optional))})", table)
        for name in sorted(needed - set(value)):
            raise self.fail(key, f"{kind} auth needs {name}", table)
        auth = UpstreamAuth(type=kind)
        for name, given in value.items():
            if name in ("type", "scopes", "interactive"):
                continue
            if not isinstance(given, str) or not given.strip():
                raise self.fail(f"{key}.{name}", "must be a non-empty string", table)
            setattr(auth, name, given)
        if "scopes" in value:
            auth.scopes = self._strings(value["scopes"], f"{key}.scopes", table)
            for scope in auth.scopes:
                if problem := scope_problem(scope):
                    raise self.fail(f"{key}.scopes", problem, table)
        if "interactive" in value:
            if not isinstance(value["interactive"], bool):
                raise self.fail(f"{key}.interactive", "must be true or false", table)
            auth.interactive = value["interactive"]
        if kind == "client_credentials" and (auth.client_secret_env is None) == (auth.private_key_file is None):
            raise self.fail(key, "client_credentials auth needs one of client_secret_env or private_key_file", table)
        if auth.private_key_file is not None:
            auth.private_key_file = str(Path(self.path).parent / Path(auth.private_key_file).expanduser())
        if auth.client_metadata_url is not None and (problem := url_problem(auth.client_metadata_url)):
            raise self.fail(f"{key}.client_metadata_url", problem, table)
        return auth

    def _strings(self, value: Any, key: str, table: str | None) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.fail(key, "must be a list of strings", table)
        return list(value)

    def _string_map(self, value: Any, key: str, table: str | None) -> dict[str, str]:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise self.fail(key, "must be a table of strings", table)
        return dict(value)
