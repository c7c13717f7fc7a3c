"""`mcpsync serve --http` as an OAuth 2.1 resource server: the --auth-* options and the [auth] table.

What a user gets wrong fails before anything is loaded or bound: a usage error (exit 2) naming the
option, or the table key and its file, as the user wrote it. What is right builds the real
verifier inside the `Auth` the served Server gets. Serving itself (tokens over real HTTP) is
integration/test_auth*.py's; here `Server.serve_http` is replaced by a recorder, so a command runs
in-process up to the point where it would bind its port, and the test reads what it would serve.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mcpsync import Server
from mcpsync.auth import Auth, InvalidToken, Principal, VerifierUnavailable
from mcpsync.cli import cli

from .._timeouts import LONG
from ..auth.authority import Authority
from ._serving import REPO_ROOT, serve_env, serve_initialize_on_a_pipe

HTTP = ["--http", "127.0.0.1:0"]
RESOURCE = "https://mcp.example.com/mcp"
ISSUER = "https://login.example.com"
JWKS = ["--auth-jwks-url", "https://login.example.com/jwks", "--auth-issuer", ISSUER, "--auth-resource", RESOURCE]
TOKEN = "dev-token-0123456789abcdef"
AUTH_OPTIONS = (
    "--auth-resource URL",
    "--auth-issuer ISS",
    "--auth-jwks-url URL",
    "--auth-introspection-url URL",
    "--auth-token-file FILE",
    "--auth-server URL",
    "--auth-scope SCOPE",
)


@pytest.fixture(autouse=True)
def no_client_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The introspection client comes from the environment: none unless a test sets it."""
    monkeypatch.delenv("MCPSYNC_AUTH_CLIENT_ID", raising=False)
    monkeypatch.delenv("MCPSYNC_AUTH_CLIENT_SECRET", raising=False)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Server]:
    """Each Server a `serve --http` command would serve, recorded instead of served."""
    servers: list[Server] = []

    def serve_http(self: Server, host: str, port: int, **options: Any) -> bool:
        servers.append(self)
        return True

    monkeypatch.setattr(Server, "serve_http", serve_http)
    monkeypatch.setattr("mcpsync.cli.serve._raise_fd_limit", lambda: None)  # this process's limit stays
    return servers


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["serve", *args], prog_name="mcpsync", catch_exceptions=False)


def served_auth(served: list[Server], *args: str) -> Auth:
    """The `Auth` of the Server `serve ARGS` would serve (it must have one)."""
    result = run(*args)
    assert result.exit_code == 0, result.output
    [server] = served
    assert isinstance(server.auth, Auth), server.auth
    return server.auth


def usage_error(result: Result, *words: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert result.stdout == ""
    for word in words:
        assert word in result.stderr, (word, result.stderr)
    return result.stderr


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


# -- --help -------------------------------------------------------------------------------------------

def test_serve_help_documents_every_auth_option_and_where_the_client_secret_comes_from() -> None:
    result = CliRunner().invoke(cli, ["serve", "--help"], prog_name="mcpsync", terminal_width=200)
    assert result.exit_code == 0
    for option in AUTH_OPTIONS:
        assert f"  {option}  " in result.stdout, (option, result.stdout)
    assert "MCPSYNC_AUTH_CLIENT_ID" in result.stdout and "MCPSYNC_AUTH_CLIENT_SECRET" in result.stdout
    assert "[auth]" in result.stdout, "the help says the config table exists"


# -- usage errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "option",
    [["--auth-resource", RESOURCE], ["--auth-token-file", "tokens"], ["--auth-scope", "mcp:tools"], ["--auth-server", ISSUER]],
    ids=lambda option: option[0],
)
def test_auth_options_without_http_say_that_stdio_takes_its_credentials_from_its_environment(option: list[str]) -> None:
    message = usage_error(run(*option), option[0], "--http only", "environment")
    assert "Traceback" not in message


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--auth-resource", RESOURCE], ["one way to check tokens", "--auth-jwks-url", "--auth-introspection-url", "--auth-token-file"]),
        (["--auth-scope", "mcp:tools", "--auth-server", ISSUER], ["one way to check tokens"]),
        ([*JWKS, "--auth-token-file", "tokens"], ["not both --auth-jwks-url and --auth-token-file"]),
        (["--auth-introspection-url", "https://as/introspect", "--auth-token-file", "t", "--auth-resource", RESOURCE], ["not both"]),
        (["--auth-jwks-url", "https://as/jwks", "--auth-resource", RESOURCE], ["--auth-jwks-url needs --auth-issuer"]),
        (["--auth-jwks-url", "https://as/jwks", "--auth-issuer", ISSUER], ["--auth-jwks-url needs --auth-resource", "audience"]),
        (["--auth-introspection-url", "https://as/introspect"], ["--auth-introspection-url needs --auth-resource"]),
        (["--auth-resource", "mcp.example.com/mcp", "--auth-token-file", "t"], ["--auth-resource", "must be an http:// or https:// URL"]),
        (["--auth-resource", "https://mcp.example.com/mcp#x", "--auth-token-file", "t"], ["--auth-resource", "must not have a #fragment"]),
        (["--auth-jwks-url", "ftp://as/jwks"], ["--auth-jwks-url", "'ftp://as/jwks' must be an http:// or https:// URL"]),
        (["--auth-issuer", "login"], ["--auth-issuer", "must be an http:// or https:// URL"]),
        (["--auth-server", "https://"], ["--auth-server", "must be an http:// or https:// URL"]),
        (["--auth-scope", "mcp:tools files:read"], ["--auth-scope", "is not a scope"]),
        (["--auth-token-file"], ["--auth-token-file", "requires an argument"]),
    ],
    ids=[
        "no-source", "no-source-scopes-only", "two-sources", "introspection-and-file", "jwks-no-issuer", "jwks-no-resource",
        "introspection-no-resource", "resource-not-url", "resource-fragment", "jwks-url-ftp", "issuer-not-url",
        "server-not-url", "scope-with-space", "token-file-no-value",
    ],
)
def test_serve_refuses_auth_that_cannot_work_before_serving(served: list[Server], args: list[str], words: list[str]) -> None:
    usage_error(run(*HTTP, *args), *words)
    assert served == []


def test_an_introspection_secret_without_a_client_id_is_a_usage_error(served: list[Server], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPSYNC_AUTH_CLIENT_SECRET", "s3cret-value")
    message = usage_error(
        run(*HTTP, "--auth-introspection-url", "https://as/introspect", "--auth-resource", RESOURCE),
        "MCPSYNC_AUTH_CLIENT_SECRET is set but MCPSYNC_AUTH_CLIENT_ID is not",
    )
    assert "s3cret-value" not in message
    assert served == []


def test_a_problem_of_the_table_names_its_keys_and_the_file(tmp_path: Path, served: list[Server]) -> None:
    config = write(tmp_path / "gateway.toml", '[auth]\njwks_url = "https://as/jwks"\nresource = "https://h/mcp"\n')
    usage_error(run(*HTTP, "--config", str(config)), f"jwks_url in the [auth] table of {config} needs --auth-issuer (or issuer in the [auth] table")
    usage_error(run(*HTTP, "--config", str(config), "--auth-token-file", "t"), f"not both jwks_url in the [auth] table of {config} and --auth-token-file")
    empty = write(tmp_path / "empty.toml", "[auth]\n")
    usage_error(run(*HTTP, "--config", str(empty)), "one way to check tokens", "token_file in the [auth] table")
    assert served == []


def test_a_bad_auth_table_is_a_config_error_naming_file_line_and_key(tmp_path: Path) -> None:
    config = write(tmp_path / "gateway.toml", '[auth]\nresource = "https://h/mcp"\nscopes = "mcp:tools"\n')
    result = run(*HTTP, "--config", str(config))
    assert result.exit_code == 1 and result.stdout == ""
    assert f"{config}:3: auth.scopes: must be a list of strings" in result.stderr, result.stderr


# -- what gets built ----------------------------------------------------------------------------------

def token_file(tmp_path: Path) -> Path:
    return write(tmp_path / "tokens.txt", f"# for the tests\n{TOKEN} sub=alice mcp:tools files:read\n")


def test_a_token_file_builds_static_tokens_for_the_served_server(tmp_path: Path, served: list[Server]) -> None:
    from mcpsync.auth.resource.static import StaticTokens

    auth = served_auth(served, *HTTP, "--auth-token-file", str(token_file(tmp_path)), "--auth-scope", "mcp:tools")
    assert isinstance(auth.verifier, StaticTokens)
    principal = auth.verifier.verify(TOKEN)
    assert isinstance(principal, Principal) and principal.subject == "alice"
    assert principal.scopes == {"mcp:tools", "files:read"}
    assert auth.verifier.verify("another-token-0123456789") is None
    assert (auth.resource, auth.authorization_servers, auth.required_scopes) == (None, (), ("mcp:tools",))


def test_a_jwks_url_builds_a_jwt_verifier_of_this_resource_and_issuer(served: list[Server]) -> None:
    from mcpsync.auth.resource.jwt import JwtVerifier

    with Authority(audience=RESOURCE) as authority:
        issuer = authority.issuer
        auth = served_auth(served, *HTTP, "--auth-jwks-url", authority.jwks_url, "--auth-issuer", issuer, "--auth-resource", RESOURCE)
        assert isinstance(auth.verifier, JwtVerifier)
        assert auth.verifier.verify(authority.mint()).subject == "alice"
        with pytest.raises(InvalidToken, match="audience"):
            auth.verifier.verify(authority.mint({"aud": "https://other.example.com/mcp"}))
        with pytest.raises(InvalidToken, match="issuer"):
            auth.verifier.verify(authority.mint({"iss": "https://other.example.com"}))
    assert (auth.resource, auth.authorization_servers, auth.required_scopes) == (RESOURCE, (issuer,), ())


def test_auth_servers_given_replace_the_issuer_in_the_metadata(served: list[Server]) -> None:
    auth = served_auth(served, *HTTP, *JWKS, "--auth-server", "https://a.example.com", "--auth-server", "https://b.example.com")
    assert auth.authorization_servers == ("https://a.example.com", "https://b.example.com")


def test_an_introspection_url_builds_a_verifier_that_authenticates_from_the_environment(
    served: list[Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcpsync.auth.resource.introspection import IntrospectionVerifier

    with Authority(audience=RESOURCE) as authority:
        args = [*HTTP, "--auth-introspection-url", authority.introspection_url, "--auth-resource", RESOURCE, "--auth-issuer", authority.issuer]
        token = authority.register()
        anonymous = served_auth(served, *args)
        with pytest.raises(VerifierUnavailable):  # the authority wants this resource server's client credentials
            anonymous.verifier.verify(token)
        assert authority.client_id and authority.client_secret
        monkeypatch.setenv("MCPSYNC_AUTH_CLIENT_ID", authority.client_id)
        monkeypatch.setenv("MCPSYNC_AUTH_CLIENT_SECRET", authority.client_secret)
        served.clear()
        auth = served_auth(served, *args)
        assert isinstance(auth.verifier, IntrospectionVerifier)
        assert auth.verifier.verify(token).subject == "alice"
        elsewhere = authority.register(answer={"active": True, **authority.claims({"aud": "https://other.example.com/mcp"})})
        with pytest.raises(InvalidToken):
            auth.verifier.verify(elsewhere)
        foreign = authority.register(answer={"active": True, **authority.claims({"iss": "https://other.example.com"})})
        with pytest.raises(InvalidToken):
            auth.verifier.verify(foreign)


def test_options_override_the_table_key_by_key(tmp_path: Path, served: list[Server]) -> None:
    config = write(tmp_path / "gateway.toml", f"""
        [auth]
        resource = "https://old.example.com/mcp"
        issuer = "{ISSUER}"
        jwks_url = "{ISSUER}/jwks"
        scopes = ["mcp:tools", "mcp:admin"]
    """)
    auth = served_auth(served, *HTTP, "--config", str(config), "--auth-resource", RESOURCE, "--auth-scope", "mcp:read")
    assert (auth.resource, auth.authorization_servers, auth.required_scopes) == (RESOURCE, (ISSUER,), ("mcp:read",))


def test_the_tables_resource_name_and_scope_hierarchy_reach_the_auth(tmp_path: Path, served: list[Server]) -> None:
    token_file(tmp_path)
    config = write(tmp_path / "gateway.toml", '[auth]\ntoken_file = "tokens.txt"\nresource_name = "Team notes"\nscope_implies = { owner = ["mcp:tools"] }\n')
    auth = served_auth(served, *HTTP, "--config", str(config))
    assert auth.resource_name == "Team notes"
    assert auth.widen(Principal("x", scopes=frozenset({"owner"}))).scopes == {"owner", "mcp:tools"}


def test_the_tables_token_file_is_read_next_to_the_config(tmp_path: Path, served: list[Server], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "etc").mkdir()
    token_file(tmp_path / "etc")
    config = write(tmp_path / "etc" / "gateway.toml", '[auth]\ntoken_file = "tokens.txt"\n')
    monkeypatch.chdir(tmp_path)
    auth = served_auth(served, *HTTP, "--config", "etc/gateway.toml")
    assert isinstance(auth.verifier.verify(TOKEN), Principal)
    assert config.exists()


def test_a_token_file_that_does_not_parse_exits_1_naming_the_line_not_the_token(tmp_path: Path, served: list[Server]) -> None:
    tokens = write(tmp_path / "tokens.txt", f"{TOKEN} mcp:tools\nshort-secret\n")
    result = run(*HTTP, "--auth-token-file", str(tokens))
    assert result.exit_code == 1 and result.stdout == "", result.output
    assert f"{tokens}:2" in result.stderr, result.stderr
    assert "short-secret" not in result.stderr and TOKEN not in result.stderr, result.stderr
    assert served == []


def test_a_token_file_that_does_not_exist_exits_1_naming_it(tmp_path: Path, served: list[Server]) -> None:
    result = run(*HTTP, "--auth-token-file", str(tmp_path / "nowhere.txt"))
    assert result.exit_code == 1 and result.stdout == ""
    assert "nowhere.txt" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert served == []


def test_a_served_server_keeps_its_own_auth_unless_auth_is_given(tmp_path: Path, served: list[Server]) -> None:
    write(tmp_path / "app.py", f"""
        from mcpsync import Server
        from mcpsync.auth import Auth
        from mcpsync.auth.resource.static import StaticTokens

        server = Server("own", auth=Auth(StaticTokens({{"{TOKEN}": ["own"]}}), resource_name="own"))
    """)
    target = str(tmp_path / "app.py")
    result = run(target, *HTTP)
    assert result.exit_code == 0, result.output
    assert served[-1].auth is not None and served[-1].auth.resource_name == "own"
    result = run(target, *HTTP, "--auth-token-file", str(token_file(tmp_path)))
    assert result.exit_code == 0, result.output
    assert served[-1].auth is not None and served[-1].auth.resource_name is None
    assert served[-1].auth.verifier.verify(TOKEN).subject == "alice"


def test_no_auth_leaves_a_new_server_open(served: list[Server]) -> None:
    assert run(*HTTP).exit_code == 0
    assert served[0].auth is None


# -- stdio and imports -------------------------------------------------------------------------------

def test_stdio_serves_a_config_whose_auth_table_is_for_http(tmp_path: Path) -> None:
    """One config file may serve both ways: over stdio the [auth] table has nothing to protect."""
    config = write(tmp_path / "gateway.toml", '[server]\nname = "shared"\n\n[auth]\ntoken_file = "tokens.txt"\n')
    returncode, out, err = serve_initialize_on_a_pipe("--config", str(config), cwd=tmp_path)
    assert returncode == 0, err.decode()
    assert json.loads(out)["result"]["serverInfo"]["name"] == "shared"


_IMPORTED_BY_SERVE = """
import sys
from click.testing import CliRunner
from mcpsync import Server
from mcpsync.cli import cli

Server.serve_http = lambda self, host, port, **options: True
result = CliRunner().invoke(cli, ["serve", "--http", "127.0.0.1:0", *sys.argv[1:]], catch_exceptions=False)
assert result.exit_code == 0, result.output
print(sorted(name for name in sys.modules if name.startswith(("mcpsync.auth.", "jwt", "cryptography")) or name == "mcpsync.auth"))
"""


def _auth_modules_imported(*args: str) -> set[str]:
    """The auth modules (and PyJWT's, cryptography's) a `serve --http ARGS` imports, in a new
    interpreter (this one has imported them all)."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTED_BY_SERVE, *args], capture_output=True, text=True, env=serve_env(), cwd=REPO_ROOT, timeout=LONG
    )
    assert done.returncode == 0, done.stderr
    names: list[str] = json.loads(done.stdout.strip().replace("'", '"'))
    return {name for name in names if name in VERIFIERS or name.count(".") <= 2}


VERIFIERS = ("mcpsync.auth.resource.jwt", "mcpsync.auth.resource.introspection", "mcpsync.auth.resource.static", "jwt", "cryptography")


def test_serving_http_without_auth_imports_no_verifier() -> None:
    assert {name for name in _auth_modules_imported() if name.startswith(VERIFIERS)} == set()


def test_a_token_file_imports_its_verifier_only(tmp_path: Path) -> None:
    imported = {name for name in _auth_modules_imported("--auth-token-file", str(token_file(tmp_path))) if name.startswith(VERIFIERS)}
    assert imported == {"mcpsync.auth.resource.static"}
