"""The gateway in front of an OAuth-protected upstream: mcpsync's own endpoint behind a
`JwtVerifier` of a loopback authorization server (`tests/auth/oauth_server.py`). The gateway logs
in with credentials of its own, from Python (`add_remote(auth=OAuth(...))`) or from a config file
with the tokens `mcpsync login` kept; its clients' tokens are never what the upstream sees."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from test_cli_login import BROWSER, mcpsync_cli
from wire import REPO_ROOT, base_env, read_serving_url

import mcpsync
from mcpsync import Server
from mcpsync.auth import Auth, BearerToken, MemoryTokenStore, OAuth, StaticTokens
from tests._timeouts import LONG
from tests.auth.oauth_server import OAuthServer, protected_endpoint


def follow(url: str) -> None:
    """The user's browser: open the authorization URL, follow its redirect to the listener."""
    with urllib.request.urlopen(url, timeout=LONG) as response:
        response.read()


def test_the_gateway_logs_in_to_its_upstream_with_its_own_oauth() -> None:
    with OAuthServer() as server, protected_endpoint(server) as upstream_url:
        gateway = Server("gateway", auth=Auth(StaticTokens({"client-token-0123456789": ["use"]})), shutdown_timeout=LONG)
        try:
            oauth = OAuth(redirect_handler=follow, token_store=MemoryTokenStore(), timeout=LONG, login_timeout=LONG)
            gateway.add_remote("guarded", upstream_url, auth=oauth, prefix="up_", timeout=LONG)
            url = gateway.start_http("127.0.0.1", 0, threads=4).url
            with mcpsync.connect(url, auth=BearerToken("client-token-0123456789"), timeout=LONG) as session:
                assert session.call_tool("up_whoami", {})["content"][0]["text"] == "alice"
            assert len(server.authorization_requests()) == 1  # the gateway's one login
            issued = {request.form.get("code") for request in server.token_requests()}
            assert "client-token-0123456789" not in str(issued)
        finally:
            assert gateway.close(LONG)


def test_a_gateway_config_uses_the_tokens_mcpsync_login_kept(tmp_path: Path) -> None:
    with OAuthServer() as server, protected_endpoint(server) as upstream_url:
        login = mcpsync_cli("login", upstream_url, home=tmp_path)
        assert login.returncode == 0, login.stderr
        config = tmp_path / "gateway.toml"
        config.write_text(f'[upstreams.guarded]\nurl = "{upstream_url}"\nprefix = "up_"\nauth = {{ type = "oauth" }}\n', encoding="utf-8")
        env = {**base_env(), "XDG_CONFIG_HOME": str(tmp_path), "BROWSER": f"{sys.executable} {BROWSER} %s"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcpsync", "serve", "--config", str(config), "--http", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO_ROOT, start_new_session=True,
        )
        try:
            url, stderr = read_serving_url(proc, LONG)
            assert url is not None, stderr.decode(errors="replace")
            with mcpsync.connect(url, timeout=LONG) as session:
                assert session.call_tool("up_whoami", {})["content"][0]["text"] == "alice"
            assert len(server.authorization_requests()) == 1  # login's; the gateway used its tokens
        finally:
            proc.terminate()
            proc.communicate(timeout=LONG)


def test_a_gateway_upstream_without_a_login_says_what_to_run(caplog: pytest.LogCaptureFixture) -> None:
    with OAuthServer() as server, protected_endpoint(server) as upstream_url:
        gateway = Server("gateway", shutdown_timeout=LONG)
        try:
            with caplog.at_level("WARNING", logger="mcpsync"):
                gateway.add_remote("guarded", upstream_url, auth=OAuth(interactive=False, token_store=MemoryTokenStore()), timeout=LONG)
            assert f"run: mcpsync login {upstream_url}" in caplog.text  # why it cannot connect, in the gateway's log
        finally:
            gateway.close(LONG)
        assert server.authorization_requests() == []


def serve_config(config: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "mcpsync", "serve", "--config", str(config), "--http", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO_ROOT, start_new_session=True,
    )


def test_a_bearer_upstream_takes_its_token_from_the_environment_it_names(tmp_path: Path) -> None:
    upstream = Server("upstream", auth=Auth(StaticTokens({"upstream-token-0123456789": ["use"]})), shutdown_timeout=LONG)
    service = mcpsync.Service("guarded")
    service.add_tool(mcpsync.Tool(lambda: "alice", name="whoami"))
    upstream.add_service(service)
    upstream_url = upstream.start_http("127.0.0.1", 0, threads=4).url
    config = tmp_path / "gateway.toml"
    config.write_text(f'[upstreams.guarded]\nurl = "{upstream_url}"\nprefix = "up_"\nauth = {{ type = "bearer", token_env = "UPSTREAM_TOKEN" }}\n', encoding="utf-8")
    try:
        missing = serve_config(config, base_env())
        _, stderr = missing.communicate(timeout=LONG)
        assert missing.returncode == 2
        assert b"upstream 'guarded': the environment variable UPSTREAM_TOKEN (its bearer secret) is not set" in stderr
        proc = serve_config(config, {**base_env(), "UPSTREAM_TOKEN": "upstream-token-0123456789"})
        try:
            url, stderr = read_serving_url(proc, LONG)
            assert url is not None, stderr.decode(errors="replace")
            with mcpsync.connect(url, timeout=LONG) as session:
                assert session.call_tool("up_whoami", {})["content"][0]["text"] == "alice"
        finally:
            proc.terminate()
            _, rest = proc.communicate(timeout=LONG)
        assert b"upstream-token-0123456789" not in stderr + rest
    finally:
        assert upstream.close(LONG)
