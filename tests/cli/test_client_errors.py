"""What `mcpsync tools|call|listen|login` say when they cannot do what was asked: one line that
names the fix, the documented exit status, never a traceback. Real `mcpsync` processes, against
real `mcpsync serve` children (stdio and HTTP) and a foreign endpoint served here."""

from __future__ import annotations

import http.server
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpsync import InvalidUrl, McpsyncError, connect

from .._timeouts import LONG
from ._http_child import HttpChild
from ._serving import REPO_ROOT, serve_env

SERVE = [sys.executable, "-m", "mcpsync", "serve"]
ASKING = [*SERVE, str(REPO_ROOT / "integration" / "fixtures" / "asking_app.py")]
TOKENS = str(REPO_ROOT / "docs" / "examples" / "tokens.txt")
CLIENT_COMMANDS = [["tools"], ["call", "echo"], ["listen"]]


def mcpsync(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m mcpsync ARGS` to completion, with its own (empty) token directory under `home`."""
    return subprocess.run(
        [sys.executable, "-m", "mcpsync", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**serve_env(), "XDG_CONFIG_HOME": str(home), **env},
        cwd=REPO_ROOT,
        timeout=LONG * 3,
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


# -- URLs that cannot be used ---------------------------------------------------------------------


@pytest.mark.parametrize("command", CLIENT_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("url", ["http://ada:s3cret@127.0.0.1:9/mcp", "https://s3cret@mcp.example.com/mcp"])
def test_credentials_in_the_url_are_a_usage_error_naming_token_env(command: list[str], url: str, tmp_path: Path) -> None:
    result = mcpsync(*command, url, home=tmp_path)
    assert result.returncode == 2
    line = one_error_line(result)
    shown = url.replace("ada:s3cret@", "").replace("s3cret@", "")
    assert line == (
        f"Error: {shown}: credentials in the URL are not supported; pass a token in an environment variable with --token-env VARIABLE, "
        f"or log in: mcpsync login {shown}"
    )


def test_login_to_a_url_with_credentials_says_to_log_in_without_them(tmp_path: Path) -> None:
    result = mcpsync("login", "--no-browser", "http://ada:s3cret@127.0.0.1:9/mcp", home=tmp_path)
    assert result.returncode == 2
    assert one_error_line(result) == (
        "Error: http://127.0.0.1:9/mcp: credentials in the URL are not supported; log in without them: mcpsync login http://127.0.0.1:9/mcp "
        "(a token you were given goes to mcpsync tools, call and listen with --token-env VARIABLE)"
    )
    assert not (tmp_path / "mcpsync").exists()


def test_connect_refuses_credentials_in_the_url_with_an_mcpsync_error_that_is_a_value_error() -> None:
    with pytest.raises(InvalidUrl) as refused:
        connect("http://ada:s3cret@127.0.0.1:9/mcp")
    assert isinstance(refused.value, McpsyncError) and isinstance(refused.value, ValueError)
    assert "s3cret" not in str(refused.value) and "auth=" in str(refused.value)
    with pytest.raises(McpsyncError):
        connect("http://[::1/mcp")


@pytest.mark.parametrize("command", CLIENT_COMMANDS, ids=lambda c: c[0])
def test_a_url_with_an_unknown_scheme_says_so_rather_than_starting_it_as_a_program(command: list[str], tmp_path: Path) -> None:
    result = mcpsync(*command, "htp://host/mcp", home=tmp_path)
    assert result.returncode == 2
    assert one_error_line(result) == "Error: 'htp://host/mcp' looks like a URL with an unknown scheme 'htp': only http:// and https:// URLs are supported"


def test_an_upper_case_scheme_is_a_url(tmp_path: Path) -> None:
    with HttpChild() as child:
        result = mcpsync("tools", child.url.replace("http://", "HTTP://"), home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "echo"


# -- protected servers with nothing to log in to ---------------------------------------------------


def test_a_static_token_server_gets_token_env_not_a_login_that_can_only_fail(tmp_path: Path) -> None:
    with HttpChild("--auth-token-file", TOKENS) as child:
        refused = mcpsync("tools", child.url, home=tmp_path)
        login = mcpsync("login", "--no-browser", "--timeout", "5", child.url, home=tmp_path)
        given = mcpsync("tools", "--token-env", "NOTES_TOKEN", child.url, home=tmp_path, NOTES_TOKEN="reader-4f2b9c1d8e7a6b5c0d")
    metadata = child.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    assert refused.returncode == 3
    assert one_error_line(refused) == (
        f"Error: cannot talk to {child.url}: not authorized: the protected resource metadata at {metadata} names no authorization server, "
        "so there is nothing to log in to: pass the token you were given in an environment variable, with --token-env VARIABLE"
    )
    assert login.returncode == 3
    assert one_error_line(login) == (
        f"Error: cannot log in to {child.url}: the protected resource metadata at {metadata} names no authorization server, "
        "so there is nothing to log in to: a token you were given goes to mcpsync tools, call and listen with --token-env VARIABLE"
    )
    assert given.returncode == 0 and given.stdout.split()[0] == "echo", given.stderr  # what the message says works


class _Bare401(http.server.BaseHTTPRequestHandler):
    """A protected endpoint of another make: 401 with a bare Bearer challenge, and no metadata of
    either kind (every other path is 404)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(401 if self.path == "/mcp" else 404)
        self.send_header("WWW-Authenticate", "Bearer")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def bare_401() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Bare401)
    thread = threading.Thread(target=server.serve_forever, name="test-bare-401")
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(LONG)


def test_a_server_without_any_metadata_gets_token_env_too(bare_401: str, tmp_path: Path) -> None:
    result = mcpsync("call", "echo", bare_401, home=tmp_path)
    login = mcpsync("login", "--no-browser", "--timeout", "5", bare_401, home=tmp_path)
    origin = bare_401.removesuffix("/mcp")
    missing = f"{bare_401} publishes no protected resource metadata, and {origin} no authorization server metadata, so there is nothing to log in to"
    assert result.returncode == 3
    assert one_error_line(result) == (
        f"Error: cannot talk to {bare_401}: not authorized: {missing}: pass the token you were given in an environment variable, with --token-env VARIABLE"
    )
    assert login.returncode == 3
    assert one_error_line(login) == f"Error: cannot log in to {bare_401}: {missing}: a token you were given goes to mcpsync tools, call and listen with --token-env VARIABLE"


# -- exit statuses ---------------------------------------------------------------------------------


def test_call_help_lists_the_exit_statuses(tmp_path: Path) -> None:
    result = mcpsync("call", "--help", home=tmp_path)
    assert result.returncode == 0
    statuses = result.stdout.split("Exit status:", 1)[1].split("Examples:", 1)[0]
    assert [line.split()[0] for line in statuses.splitlines() if line[:6].strip().isdigit()] == ["0", "1", "2", "3", "130"], statuses
    assert "elicitation" in statuses and "Ctrl-C" in statuses


@pytest.mark.parametrize("mode", ["legacy", "modern"])
@pytest.mark.parametrize("tool", ["confirm_delete", "list_roots"])
def test_a_tool_asking_what_call_cannot_give_exits_1_in_either_era(mode: str, tool: str, tmp_path: Path) -> None:
    result = mcpsync("call", tool, "--mode", mode, "--", *ASKING, home=tmp_path)
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert "which the client did not declare" in result.stdout + result.stderr


def test_ctrl_c_during_a_call_exits_130_and_stops_the_server(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpsync", "call", "countdown", "--args", '{"steps": 100, "delay": 0.5}', "--", *SERVE],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**serve_env(), "XDG_CONFIG_HOME": str(tmp_path)},
        cwd=REPO_ROOT,
    )
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("progress: 1/100"), "the call did not start"  # the tool is running
        servers = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=LONG)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=LONG)
    assert (proc.returncode, out, err) == (130, "", "interrupted\n")
    assert servers and not any(Path(f"/proc/{pid}").exists() for pid in servers), "the server outlived the CLI"
