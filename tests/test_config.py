"""Tests for mcpsync.cli.config: the gateway's TOML, the mcpServers JSON of Claude Desktop, Cursor and VS
Code, and `--upstream` arguments. Every bad file is one `ConfigError` naming the file, the line and
the key, so a user can go straight to the mistake."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import mcpsync.cli.config
from mcpsync.cli.config import AuthConfig, ConfigError, GatewayConfig, UpstreamAuth, UpstreamConfig, load_config, upstream_from_argument

pytestmark = pytest.mark.timeout(90)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


# -- good files -----------------------------------------------------------------------------------

def test_an_upstreams_roots_are_uris_or_tables_with_uri_and_name(tmp_path: Path) -> None:
    path = write(tmp_path, "gateway.toml", """
        [upstreams.files]
        command = ["npx", "-y", "@modelcontextprotocol/server-filesystem"]
        roots = ["file:///srv/data", { uri = "file:///home/me/notes", name = "notes" }]

        [upstreams.other]
        command = ["other"]
    """)
    files, other = load_config(path).upstreams
    assert files.roots == [{"uri": "file:///srv/data"}, {"uri": "file:///home/me/notes", "name": "notes"}]
    assert other.roots is None, "no roots given: the client's roots are relayed"


def test_the_toml_of_the_readme_is_read_whole(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "gateway.toml",
        """
        [server]
        name = "gateway"
        version = "2.0"
        workers = 4
        page_size = 50
        max_frame_bytes = 65536
        log_level = "info"
        services = ["app.py", "mypackage.tools:service"]

        [upstreams.files]
        command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
        env = { DEBUG = "1" }
        cwd = "/srv"
        prefix = "fs_"
        deny = ["write_file"]
        mode = "legacy"
        timeout = 12

        [upstreams.remote]
        url = "http://127.0.0.1:8000/mcp"
        headers = { Authorization = "Bearer x" }
        allow = ["search"]
        """,
    )
    config = load_config(path)
    assert config == GatewayConfig(
        path=str(path),
        server={"name": "gateway", "version": "2.0", "workers": 4, "page_size": 50, "max_frame_bytes": 65536, "log_level": "info"},
        services=["app.py", "mypackage.tools:service"],
        upstreams=[
            UpstreamConfig(
                name="files",
                command=["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                env={"DEBUG": "1"},
                cwd="/srv",
                prefix="fs_",
                deny=["write_file"],
                mode="legacy",
                timeout=12.0,
            ),
            UpstreamConfig(name="remote", url="http://127.0.0.1:8000/mcp", headers={"Authorization": "Bearer x"}, allow=["search"]),
        ],
    )


def test_toml_defaults_and_a_command_string_with_args(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "gw.toml",
        """
        services = ["app.py"]

        [upstreams.everything]
        command = "npx"
        args = ["-y", "@modelcontextprotocol/server-everything"]
        """,
    )
    config = load_config(path)
    assert config.server == {}
    assert config.services == ["app.py"]
    [upstream] = config.upstreams
    assert upstream == UpstreamConfig(name="everything", command=["npx", "-y", "@modelcontextprotocol/server-everything"])
    assert (upstream.prefix, upstream.allow, upstream.deny, upstream.mode, upstream.timeout) == ("", None, [], "auto", 60.0)


def test_the_toml_of_the_module_docstring_is_read_whole(tmp_path: Path) -> None:
    """What config.py's docstring shows a user is a file this reader takes."""
    doc = mcpsync.cli.config.__doc__ or ""
    example = doc.split("::\n", 1)[1].split("\nand the `mcpServers`", 1)[0]
    config = load_config(write(tmp_path, "gateway.toml", example))
    assert [upstream.name for upstream in config.upstreams] == ["files", "remote"]
    assert config.auth == AuthConfig(
        resource="https://mcp.example.com/mcp",
        issuer="https://login.example.com",
        jwks_url="https://login.example.com/.well-known/jwks.json",
        scopes=["mcp:tools"],
    )


def test_an_auth_table_is_read_with_its_token_file_next_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    path = write(tmp_path / "etc", "gateway.toml", """
        [auth]
        resource = "http://127.0.0.1:8000/mcp"
        issuer = "https://login.example.com/realms/mcp"
        token_file = "tokens.txt"
        authorization_servers = ["https://login.example.com/realms/mcp", "https://other.example.com"]
        scopes = ["mcp:tools", "files:read"]
    """)
    assert load_config(path).auth == AuthConfig(
        resource="http://127.0.0.1:8000/mcp",
        issuer="https://login.example.com/realms/mcp",
        token_file=str(tmp_path / "etc" / "tokens.txt"),
        authorization_servers=["https://login.example.com/realms/mcp", "https://other.example.com"],
        scopes=["mcp:tools", "files:read"],
    )


def test_an_upstreams_auth_names_its_secrets_and_reads_its_key_file_next_to_the_config(tmp_path: Path) -> None:
    path = write(tmp_path, "gw.toml", """
        [upstreams.saas]
        url = "https://mcp.example.com/mcp"
        auth = { type = "oauth", client_id = "gateway", scopes = ["mcp:tools"], interactive = true }

        [upstreams.api]
        url = "https://api.example.com/mcp"
        auth = { type = "bearer", token_env = "API_TOKEN" }

        [upstreams.robot]
        url = "https://robot.example.com/mcp"
        auth = { type = "client_credentials", client_id = "gw", private_key_file = "keys/gw.pem", signing_algorithm = "RS256" }
    """)
    saas, api, robot = load_config(path).upstreams
    assert saas.auth == UpstreamAuth(type="oauth", client_id="gateway", scopes=["mcp:tools"], interactive=True)
    assert api.auth == UpstreamAuth(type="bearer", token_env="API_TOKEN")
    assert robot.auth == UpstreamAuth(type="client_credentials", client_id="gw", private_key_file=str(tmp_path / "keys" / "gw.pem"), signing_algorithm="RS256")


def test_the_bus_table_names_where_the_replicas_meet(tmp_path: Path) -> None:
    path = write(tmp_path, "gw.toml", """
        [bus]
        url = "redis://127.0.0.1:6379/0"
    """)
    assert load_config(path).bus == "redis://127.0.0.1:6379/0"
    assert load_config(write(tmp_path, "plain.toml", "[server]\nname = 'x'\n")).bus is None


def test_the_auth_table_names_the_resource_and_a_scope_hierarchy(tmp_path: Path) -> None:
    path = write(tmp_path, "gw.toml", """
        [auth]
        token_file = "tokens.txt"
        resource_name = "Team notes"
        scope_implies = { admin = ["files:read", "files:write"], owner = ["admin"] }
    """)
    auth = load_config(path).auth
    assert auth is not None
    assert auth.resource_name == "Team notes"
    assert auth.scope_implies == {"admin": ["files:read", "files:write"], "owner": ["admin"]}


def test_an_absolute_token_file_is_kept_and_an_introspection_table_read(tmp_path: Path) -> None:
    path = write(tmp_path, "gw.toml", """
        [auth]
        introspection_url = "https://login.example.com/introspect"
        resource = "https://mcp.example.com/mcp"
    """)
    assert load_config(path).auth == AuthConfig(introspection_url="https://login.example.com/introspect", resource="https://mcp.example.com/mcp")
    absolute = write(tmp_path, "static.toml", '[auth]\ntoken_file = "/srv/mcp/tokens"\n')
    assert load_config(absolute).auth == AuthConfig(token_file="/srv/mcp/tokens")


def test_no_auth_table_is_no_auth_and_an_empty_one_is_an_empty_auth(tmp_path: Path) -> None:
    """An empty table still says "protect the endpoint": serve then asks how tokens are checked."""
    assert load_config(write(tmp_path, "a.toml", "[server]\nname = 'gw'\n")).auth is None
    assert load_config(write(tmp_path, "b.toml", "[auth]\n")).auth == AuthConfig()


def test_the_mcpservers_json_has_no_auth(tmp_path: Path) -> None:
    """It describes servers to start or reach, not how this one is protected: a stray "auth" key
    there is ignored like VS Code's "inputs"."""
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "a"}}, "auth": {"token_file": "t"}}), encoding="utf-8")
    assert load_config(path).auth is None


def test_auth_options_override_the_table_key_by_key() -> None:
    table = AuthConfig(resource="https://a/mcp", issuer="https://as", jwks_url="https://as/jwks", scopes=["x", "y"])
    over = AuthConfig(resource="https://b/mcp", scopes=["z"])
    assert table.merged(over) == AuthConfig(resource="https://b/mcp", issuer="https://as", jwks_url="https://as/jwks", scopes=["z"])
    assert table.merged(AuthConfig()) == table
    assert AuthConfig(token_file="t").merged(over).sources() == ["token_file"]


def test_an_empty_toml_file_is_an_empty_gateway(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "empty.toml", "")) == GatewayConfig(path=str(tmp_path / "empty.toml"))


CLAUDE_DESKTOP = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
            "env": {"NODE_ENV": "production"},
        },
        "git": {"command": "uvx", "args": ["mcp-server-git", "--repository", "."]},
    }
}
CURSOR = {
    "mcpServers": {
        "local": {"command": "python", "args": ["server.py"]},
        "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${env:TOKEN}"}},
    }
}
VSCODE = {
    "inputs": [{"type": "promptString", "id": "token", "description": "API token", "password": True}],
    "servers": {
        "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer ${input:token}"}},
        "memory": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "env": {"MEMORY": "/tmp/m.json"}},
    },
}


@pytest.mark.parametrize(
    "name, data, expected",
    [
        (
            "claude_desktop_config.json",
            CLAUDE_DESKTOP,
            [
                UpstreamConfig(name="filesystem", command=["npx", "-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"], env={"NODE_ENV": "production"}),
                UpstreamConfig(name="git", command=["uvx", "mcp-server-git", "--repository", "."]),
            ],
        ),
        (
            "mcp.json",
            CURSOR,
            [
                UpstreamConfig(name="local", command=["python", "server.py"]),
                UpstreamConfig(name="remote", url="https://mcp.example.com/mcp", headers={"Authorization": "Bearer ${env:TOKEN}"}),
            ],
        ),
        (
            "mcp.json",
            VSCODE,
            [
                UpstreamConfig(name="github", url="https://api.githubcopilot.com/mcp/", headers={"Authorization": "Bearer ${input:token}"}),
                UpstreamConfig(name="memory", command=["npx", "-y", "@modelcontextprotocol/server-memory"], env={"MEMORY": "/tmp/m.json"}),
            ],
        ),
        (
            "servers.conf",  # not named .json: recognised by its opening brace
            {"mcpServers": {"one": {"command": ["python", "-m", "one"], "prefix": "one_", "mode": "modern"}}},
            [UpstreamConfig(name="one", command=["python", "-m", "one"], prefix="one_", mode="modern")],
        ),
    ],
    ids=["claude-desktop", "cursor", "vscode-servers", "json-by-content"],
)
def test_mcpservers_json_files_are_read(tmp_path: Path, name: str, data: dict, expected: list[UpstreamConfig]) -> None:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    config = load_config(path)
    assert config.upstreams == expected
    assert config.services == [] and config.server == {}


# -- bad files: file, line, key -------------------------------------------------------------------

BAD_TOML = [
    # (file text, line, key, words of the problem)
    ('[server]\nname = "gw"\nnmae = "typo"\n', 3, "nmae", "unknown server setting"),
    ('[server]\nworkers = "4"\n', 2, "workers", "must be a int"),
    ("[server]\nworkers = true\n", 2, "workers", "must be a int"),
    ('[server]\nname = "gw"\nservices = "app.py"\n', 3, "services", "must be a list of strings"),
    ('[upstreams.files]\ncommand = ["x"]\nprefx = "fs_"\n', 3, "upstreams.files.prefx", "unknown upstream setting"),
    ('[upstreams.files]\ncommand = []\n', 2, "upstreams.files.command", "must not be empty"),
    ('[upstreams.files]\ncommand = ["npx", 3]\n', 2, "upstreams.files.command", "must be a list of strings"),
    ('[upstreams.files]\ncommand = "npx"\nargs = "-y"\n', 3, "upstreams.files.args", "must be a list of strings"),
    ('[upstreams.files]\nurl = "ftp://example.com"\n', 2, "upstreams.files.url", "must be an http:// or https:// URL"),
    ('[upstreams.files]\ncommand = ["x"]\nenv = { DEBUG = 1 }\n', 3, "upstreams.files.env", "must be a table of strings"),
    ('[upstreams.files]\nurl = "https://h/mcp"\nheaders = { "X-Retries" = 3 }\n', 3, "upstreams.files.headers", "must be a table of strings"),
    ('[upstreams.files]\ncommand = ["x"]\nmode = "fast"\n', 3, "upstreams.files.mode", "must be one of auto, legacy, modern"),
    ('[upstreams.files]\ncommand = ["x"]\nprefix = 3\n', 3, "upstreams.files.prefix", "must be a string"),
    ('[upstreams.files]\ncommand = ["x"]\ncwd = ["/tmp"]\n', 3, "upstreams.files.cwd", "must be a string"),
    ('[upstreams.files]\ncommand = ["x"]\nallow = "read"\n', 3, "upstreams.files.allow", "must be a list of strings"),
    ('[upstreams.files]\ncommand = ["x"]\ndeny = [1]\n', 3, "upstreams.files.deny", "must be a list of strings"),
    ('[upstreams.files]\ncommand = ["x"]\ntimeout = -1\n', 3, "upstreams.files.timeout", "must be a positive number of seconds"),
    ('[upstreams.files]\ncommand = ["x"]\ntimeout = "5"\n', 3, "upstreams.files.timeout", "must be a positive number of seconds"),
    ('[upstreams.files]\ncommand = ["x"]\ntimeout = false\n', 3, "upstreams.files.timeout", "must be a positive number of seconds"),
    ('[upstreams.a]\ncommand = ["a"]\n\n[upstreams.b]\ncommand = ["b"]\nmode = "quick"\n', 6, "upstreams.b.mode", "must be one of"),
    ('[upstreams.files]\ncommand = ["x"]\nroots = "/srv"\n', 3, "upstreams.files.roots", "must be a list of file:// URIs"),
    ('[upstreams.files]\ncommand = ["x"]\nroots = ["/srv"]\n', 3, "upstreams.files.roots", "a root's uri must start with file://"),
    ('[upstreams.files]\ncommand = ["x"]\nroots = [{ path = "/srv" }]\n', 3, "upstreams.files.roots", "a table with uri and an optional name"),
    ('server = "gw"\n', 1, "server", "must be a table"),
    ('upstreams = ["x"]\n', 1, "upstreams", "must be a table of named upstreams"),
    ('[upstreams]\nfiles = 3\n', 2, "upstreams.files", "must be a table/object"),
    ('auth = "jwt"\n', 1, "auth", "must be a table"),
    ('[auth]\nresource = "https://h/mcp"\naudience = "x"\n', 3, "auth.audience", "unknown auth setting"),
    ('[auth]\nintrospection_url = "https://h/i"\nclient_secret = "s3cret"\n', 3, "auth.client_secret", "set MCPSYNC_AUTH_CLIENT_SECRET in the environment"),
    ('[auth]\nclient_id = "mcp"\n', 2, "auth.client_id", "set MCPSYNC_AUTH_CLIENT_ID in the environment"),
    ("[auth]\nresource = 8000\n", 2, "auth.resource", "must be a non-empty string"),
    ('[auth]\nissuer = ""\n', 2, "auth.issuer", "must be a non-empty string"),
    ("[auth]\ntoken_file = true\n", 2, "auth.token_file", "must be a non-empty string"),
    ('[auth]\njwks_url = "ftp://h/jwks"\n', 2, "auth.jwks_url", "must be an http:// or https:// URL"),
    ('[auth]\nissuer = "login.example.com"\n', 2, "auth.issuer", "must be an http:// or https:// URL"),
    ('[auth]\nintrospection_url = "https://"\n', 2, "auth.introspection_url", "must be an http:// or https:// URL"),
    ('[auth]\nresource = "https://h/mcp#tools"\n', 2, "auth.resource", "must not have a #fragment"),
    ('[auth]\nauthorization_servers = "https://as"\n', 2, "auth.authorization_servers", "must be a list of strings"),
    ('[auth]\nauthorization_servers = ["https://as", "as.example.com"]\n', 2, "auth.authorization_servers", "'as.example.com': must be an http"),
    ('[auth]\nscopes = "mcp:tools"\n', 2, "auth.scopes", "must be a list of strings"),
    ('[auth]\nscopes = ["mcp:tools files:read"]\n', 2, "auth.scopes", "'mcp:tools files:read' is not a scope"),
    ('[auth]\nscopes = [""]\n', 2, "auth.scopes", "is not a scope"),
    ('[auth]\njwks_url = "https://as/jwks"\ntoken_file = "t"\n', 3, "auth.token_file", "not both jwks_url and token_file"),
    ('[upstreams.a]\nurl = "https://h/mcp"\n\n[auth]\nresource = "https://h/mcp"\nurl = "x"\n', 6, "auth.url", "unknown auth setting"),
    ('[auth]\nresource_name = 3\n', 2, "auth.resource_name", "must be a non-empty string"),
    ('[bus]\nurl = "kafka://broker"\n', 2, "bus.url", "must be a URL starting with memory://, redis://, rediss://"),
    ('[bus]\nhost = "x"\n', 2, "bus.host", "unknown bus setting (expected url)"),
    ('bus = "redis://x"\n', 1, "bus", "must be a table"),
    ('[upstreams.a]\ncommand = ["x"]\nauth = { type = "bearer", token_env = "T" }\n', 3, "upstreams.a.auth", "is for an http(s) upstream"),
    ('[upstreams.a]\nurl = "https://h/mcp"\nauth = "Bearer x"\n', 3, "upstreams.a.auth", "must be a table with a type"),
    ('[upstreams.a]\nurl = "https://h/mcp"\nauth = { type = "basic" }\n', 3, "upstreams.a.auth.type", "must be one of bearer, oauth, client_credentials"),
    ('[upstreams.a]\nurl = "https://h/mcp"\nauth = { type = "bearer", token = "s3cret" }\n', 3, "upstreams.a.auth.token", "name it with token_env"),
    ('[upstreams.a]\nurl = "https://h/mcp"\nauth = { type = "bearer" }\n', 3, "upstreams.a.auth", "bearer auth needs token_env"),
    ('[upstreams.a]\nurl = "https://h/mcp"\nauth = { type = "oauth", token_env = "T" }\n', 3, "upstreams.a.auth.token_env", "not a setting of oauth auth"),
    ('[upstreams.a]\nurl = "https://h/mcp"\nauth = { type = "oauth", interactive = "yes" }\n', 3, "upstreams.a.auth.interactive", "must be true or false"),
    ('[upstreams.a]\nurl = "https://h/mcp"\nauth = { type = "oauth", scopes = ["a b"] }\n', 3, "upstreams.a.auth.scopes", "is not a scope"),
    ('[upstreams.a]\nurl = "https://h/mcp"\nauth = { type = "client_credentials", client_id = "gw" }\n', 3, "upstreams.a.auth", "needs one of client_secret_env or private_key_file"),
    ('[upstreams.a]\nurl = "https://h/mcp"\nauth = { type = "client_credentials", client_id = "gw", client_secret = "x" }\n', 3, "upstreams.a.auth.client_secret", "name it with client_secret_env"),
    ('[auth]\nscope_implies = ["admin"]\n', 2, "auth.scope_implies", "must be a table of scopes"),
    ('[auth]\nscope_implies = { "sup er" = ["admin"] }\n', 2, "auth.scope_implies", "'sup er' is not a scope"),
    ('[auth]\nscope_implies = { admin = "files:read" }\n', 2, "auth.scope_implies", "admin: must be a list of scopes"),
    ('[auth]\nscope_implies = { admin = ["files read"] }\n', 2, "auth.scope_implies", "admin: 'files read' is not a scope"),
]


@pytest.mark.parametrize("text, line, key, problem", BAD_TOML, ids=[f"{case[2]}-{i}" for i, case in enumerate(BAD_TOML)])
def test_a_bad_toml_setting_names_the_file_line_and_key(tmp_path: Path, text: str, line: int, key: str, problem: str) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    message = str(raised.value)
    assert message.startswith(f"{path}:{line}: {key}: "), message
    assert problem in message, message


BAD_TOML_TABLES = [
    # A misspelled or incomplete table: the line to point at is the table's header.
    ('[server]\nname = "gw"\n\n[upstream.files]\ncommand = ["x"]\n', 4, "upstream", "unknown section"),
    ('[upstreams.files]\nprefix = "fs_"\n', 1, "upstreams.files", "needs exactly one of command or url"),
    ('[upstreams.files]\ncommand = ["x"]\nurl = "https://h/mcp"\n', 1, "upstreams.files", "needs exactly one of command or url"),
]


@pytest.mark.parametrize("text, line, key, problem", BAD_TOML_TABLES, ids=["unknown-section", "no-command-or-url", "both"])
def test_a_bad_toml_table_names_the_line_of_its_header(tmp_path: Path, text: str, line: int, key: str, problem: str) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    message = str(raised.value)
    assert problem in message, message
    assert message.startswith(f"{path}:{line}: {key}: "), message


def test_a_secret_in_the_auth_table_is_refused_without_being_repeated(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text('[auth]\nclient_secret = "hunter2-s3cret"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert "hunter2" not in str(raised.value)


def test_toml_that_does_not_parse_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text('[server]\nname = "gw"\nworkers = = 4\n', encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: not valid TOML: "), message
    assert "line 3" in message, message


BAD_JSON = [
    # (object, line of the key once indented by json.dumps(indent=2), key, problem)
    ({"mcpServers": {"files": {"command": "npx", "args": "-y"}}}, 5, "files.args", "must be a list of strings"),
    ({"mcpServers": {"files": {"command": "npx", "env": {"DEBUG": True}}}}, 5, "files.env", "must be a table of strings"),
    ({"mcpServers": {"files": {"command": "npx", "disabledd": True}}}, 5, "files.disabledd", "unknown upstream setting"),
    ({"mcpServers": {"files": {"url": "ws://h/mcp"}}}, 4, "files.url", "must be an http:// or https:// URL"),
    ({"mcpServers": {"a": {"command": "a"}, "files": {"command": "npx", "mode": "turbo"}}}, 8, "files.mode", "must be one of"),
    ({"mcpServers": {"files": {"args": ["x"]}}}, 3, "files", "needs exactly one of command or url"),
    ({"mcpServers": {"files": ["npx"]}}, 3, "files", "must be a table/object"),
    ({"mcpServers": ["npx"]}, 2, "mcpServers", "must be an object mapping names to servers"),
    ({"servers": {"files": {"type": "stdio", "command": []}}}, 5, "files.command", "must not be empty"),
]


@pytest.mark.parametrize("data, line, key, problem", BAD_JSON, ids=[f"{case[2]}-{i}" for i, case in enumerate(BAD_JSON)])
def test_a_bad_mcpservers_entry_names_the_file_line_and_key(tmp_path: Path, data: dict, line: int, key: str, problem: str) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    message = str(raised.value)
    assert message.startswith(f"{path}:{line}: {key}: "), message
    assert problem in message, message


@pytest.mark.parametrize(
    "name, text, line",
    [
        ("mcp.json", '{\n  "servers": {\n    "files": {\n      "command": ""\n    }\n  }\n}\n', 4),
        ("gateway.toml", '[upstreams.files]\ncommand = "  "\nargs = ["x"]\n', 2),
        ("gateway.toml", '[upstreams.files]\ncommand = ["", "x"]\n', 2),
    ],
    ids=["json", "toml", "toml-list"],
)
def test_an_empty_command_string_is_a_config_error(tmp_path: Path, name: str, text: str, line: int) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    message = str(raised.value)
    assert message.startswith(f"{path}:{line}: files.command: ") or message.startswith(f"{path}:{line}: upstreams.files.command: "), message
    assert "must not be empty" in message, message


@pytest.mark.parametrize(
    "text, words",
    [
        ('{\n  "mcpServers": {\n    "files": {"command": "npx",}\n  }\n}\n', ["not valid JSON", "line 3"]),
        ('["npx"]\n', ['expected a JSON object with an "mcpServers" key']),
        ('{"mcp_servers": {}}\n', ["mcpServers: must be an object mapping names to servers"]),
    ],
    ids=["syntax", "not-an-object", "no-servers-key"],
)
def test_json_that_is_not_an_mcpservers_file_says_so(tmp_path: Path, text: str, words: list[str]) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    message = str(raised.value)
    assert message.startswith(f"{path}"), message
    for word in words:
        assert word in message, message


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.toml"
    with pytest.raises(ConfigError, match=r"nowhere\.toml: cannot read: No such file or directory"):
        load_config(path)


def test_config_errors_are_value_errors() -> None:
    assert issubclass(ConfigError, ValueError)


# -- --upstream arguments -------------------------------------------------------------------------

@pytest.mark.parametrize(
    "value, expected",
    [
        ("python -m mcpsync serve", UpstreamConfig(name="upstream2", command=["python", "-m", "mcpsync", "serve"])),
        ("'/opt/my server/run' --dir \"a b\"", UpstreamConfig(name="upstream2", command=["/opt/my server/run", "--dir", "a b"])),
        ("https://mcp.example.com/mcp", UpstreamConfig(name="upstream2", url="https://mcp.example.com/mcp")),
        ("http://127.0.0.1:8000/mcp", UpstreamConfig(name="upstream2", url="http://127.0.0.1:8000/mcp")),
    ],
)
def test_an_upstream_argument_is_a_url_or_a_shell_like_command(value: str, expected: UpstreamConfig) -> None:
    assert upstream_from_argument(value, 2) == expected


@pytest.mark.parametrize("value, words", [("", "needs a command or a URL"), ("   ", "needs a command or a URL"), ("python 'unclosed", "No closing quotation")])
def test_a_bad_upstream_argument_is_a_config_error(value: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        upstream_from_argument(value, 1)
