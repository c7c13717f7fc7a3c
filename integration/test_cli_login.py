"""`mcpsync login`, `logout`, and the client commands with the tokens login kept, as a user runs
them: real processes, a loopback authorization server (`tests/auth/oauth_server.py`), mcpsync's
own endpoint protected by a `JwtVerifier` of that server's keys, and a browser stand-in that
Python's `webbrowser` starts from the BROWSER variable (`fixtures/browser_standin.py`), following
the redirect to the login's loopback listener."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

from wire import REPO_ROOT, base_env

from mcpsync import Server, Service
from mcpsync.auth import Auth
from tests._timeouts import LONG
from tests.auth.oauth_server import OAuthServer, protected_endpoint

BROWSER = Path(__file__).parent / "fixtures" / "browser_standin.py"


def mcpsync_cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**base_env(), "XDG_CONFIG_HOME": str(home), "BROWSER": f"{sys.executable} {BROWSER} %s"}
    return subprocess.run([sys.executable, "-m", "mcpsync", *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=LONG * 3, stdin=subprocess.DEVNULL)


def test_login_keeps_the_tokens_the_client_commands_use_until_logout(tmp_path: Path) -> None:
    with OAuthServer() as server, protected_endpoint(server) as url:
        before = mcpsync_cli("tools", url, home=tmp_path)
        assert before.returncode == 3, before.stderr
        assert f"not authorized: a login is needed, which this client may not start (interactive=False); run: mcpsync login {url}" in before.stderr

        login = mcpsync_cli("login", url, home=tmp_path)
        assert login.returncode == 0, login.stderr
        tokens = tmp_path / "mcpsync" / "tokens"
        assert f"logged in to {url} (tokens kept in {tokens})" in login.stderr
        assert len(server.authorization_requests()) == 1
        assert server.authorization_requests()[0].query["scope"] == "read"  # what the 401 asked for
        [kept] = tokens.iterdir()
        assert stat.S_IMODE(tokens.stat().st_mode) == 0o700 and stat.S_IMODE(kept.stat().st_mode) == 0o600
        issued = [request for request in server.token_requests() if request.form["grant_type"] == "authorization_code"]
        assert len(issued) == 1

        listed = mcpsync_cli("tools", url, home=tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.split()[0] == "whoami"
        called = mcpsync_cli("call", "whoami", url, home=tmp_path)
        assert (called.returncode, called.stdout) == (0, "alice\n"), called.stderr
        assert len(server.authorization_requests()) == 1  # no second login: the kept tokens did

        for run in (login, listed, called):
            assert "eyJ" not in run.stdout + run.stderr  # no token (a JWT) printed or logged

        logout = mcpsync_cli("logout", url, home=tmp_path)
        assert (logout.returncode, logout.stderr.strip()) == (0, f"logged out of {url}")
        assert list(tokens.iterdir()) == []
        assert mcpsync_cli("tools", url, home=tmp_path).returncode == 3
        again = mcpsync_cli("logout", url, home=tmp_path)
        assert again.stderr.strip() == f"no tokens were kept for {url}"


def test_login_to_a_server_that_asks_for_none_says_so(tmp_path: Path) -> None:
    server = Server("open", services=[Service("nothing")])
    url = server.start_http("127.0.0.1", 0, threads=2).url
    try:
        result = mcpsync_cli("login", url, home=tmp_path)
    finally:
        assert server.close(LONG)
    assert result.returncode == 3
    assert "does not ask for a login" in result.stderr
    assert not (tmp_path / "mcpsync").exists()


def test_a_token_one_was_given_goes_in_an_environment_variable(tmp_path: Path) -> None:
    from mcpsync.auth import StaticTokens

    service = Service("guarded")

    @service.tool
    def whoami() -> str:
        return "ops"

    server = Server("guarded", services=[service], auth=Auth(StaticTokens({"ops-token-0123456789abcdef": ["read"]})))
    url = server.start_http("127.0.0.1", 0, threads=2).url
    try:
        env_home = {"XDG_CONFIG_HOME": str(tmp_path), "OPS_TOKEN": "ops-token-0123456789abcdef"}
        run = lambda *args: subprocess.run(  # noqa: E731
            [sys.executable, "-m", "mcpsync", *args], capture_output=True, text=True, env={**base_env(), **env_home}, cwd=REPO_ROOT, timeout=LONG * 3
        )
        called = run("call", "whoami", "--token-env", "OPS_TOKEN", url)
        assert (called.returncode, called.stdout) == (0, "ops\n"), called.stderr
        assert "ops-token" not in called.stderr
        unset = run("tools", "--token-env", "NO_SUCH_VARIABLE", url)
        assert unset.returncode == 2 and "the environment variable NO_SUCH_VARIABLE is not set" in unset.stderr
        command = run("tools", "--token-env", "OPS_TOKEN", "--", "mcpsync", "serve")
        assert command.returncode == 2 and "is for a URL" in command.stderr
    finally:
        assert server.close(LONG)
