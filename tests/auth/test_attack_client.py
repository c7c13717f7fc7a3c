"""The OAuth client against hostile servers: what the browser may open, deadlines that hold, numbers.

Each test plays an authorization server (or a resource) that means harm, on loopback, and checks
what a user would notice: the browser is not opened on a `file:` URL, a fetch that is answered a
byte at a time ends when its timeout says, a token answer with an absurd `expires_in` is one clear
error, and the same through the real `mcpsync login` command in a child process (one line on
stderr, no traceback, exit 3, the browser never started).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcpsync.auth import fetch as _fetch
from mcpsync.auth.client.browser import open_browser
from mcpsync.auth.client.client_credentials import ClientCredentials
from mcpsync.auth.client.discovery import OAuthError, discover, discover_authorization_server
from mcpsync.auth.client.oauth import OAuth
from mcpsync.auth.client.store import MemoryTokenStore
from mcpsync.auth.client.tokens import TokenError, TokenSet, parse_token_answer

from .._timeouts import LONG
from .oauth_server import Client, OAuthServer, Recorded, ResourceMetadataServer, _Loopback, _Reply

REPO_ROOT = Path(__file__).resolve().parents[2]
BROWSER_STANDIN = REPO_ROOT / "integration" / "fixtures" / "browser_standin.py"
REDIRECT = "http://127.0.0.1:9/callback"


class HostileServer(OAuthServer):
    """An `OAuthServer` whose metadata and token answers carry what a test puts in them."""

    def __init__(self, *, metadata: dict[str, Any] | None = None, token_answer: dict[str, Any] | None = None,
                 registration_answer: dict[str, Any] | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.overrides = dict(metadata or {})
        self.token_answer = dict(token_answer or {})
        self.registration_answer = dict(registration_answer or {})

    def metadata(self) -> dict[str, Any]:
        return {**super().metadata(), **self.overrides}

    def _issue(self, client: Client, asked: list[str], resource: str, *, refresh: bool) -> _Reply:
        reply = super()._issue(client, asked, resource, refresh=refresh)
        reply.body.update(self.token_answer)
        return reply

    def _register(self, body: Any) -> _Reply:
        reply = super()._register(body)
        if isinstance(reply.body, dict):
            reply.body.update(self.registration_answer)
        return reply


def resource_for(server: OAuthServer) -> ResourceMetadataServer:
    rs = ResourceMetadataServer(authorization_servers=[])
    rs.start()
    rs.authorization_servers = [server.issuer]
    return rs


class NeverOpened:
    """A redirect handler (the browser) that must not be called: the test fails if it is."""

    def __init__(self) -> None:
        self.opened: list[str] = []

    def __call__(self, url: str) -> None:
        self.opened.append(url)
        raise AssertionError(f"the browser was sent to {url!r}")


def never_called() -> str:
    raise AssertionError("the flow waited for a redirect it should never have asked for")


# -- 1. what the browser opens, and what is fetched --------------------------------------------

HOSTILE_ENDPOINTS = [
    "file:///etc/passwd",
    "javascript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "ftp://127.0.0.1/authorize",
    "https://user:secret@as.example.com/authorize",
    "https://user@as.example.com/authorize",
    "http://as.example.com/authorize",
    "http://10.0.0.8/authorize",
    "http://127.0.0.1.evil.example/authorize",
    "http://localhost.evil.example/authorize",
    "https://as.example.com/authorize#fragment",
    "https://as.example.com/author ize",
    "https://as.example.com/authorize\n",
    "//as.example.com/authorize",
    "/authorize",
    "vbscript:msgbox(1)",
    "chrome://settings",
    "ms-settings:",
]

ENDPOINT_FIELDS = ["authorization_endpoint", "token_endpoint", "registration_endpoint", "jwks_uri", "introspection_endpoint",
                   "revocation_endpoint"]


@pytest.mark.parametrize("name", ENDPOINT_FIELDS)
def test_metadata_with_an_endpoint_that_is_not_https_or_loopback_http_is_refused_naming_the_field(name: str) -> None:
    with HostileServer() as server:
        for bad in HOSTILE_ENDPOINTS:
            server.overrides = {name: bad}
            with pytest.raises(OAuthError) as caught:
                discover_authorization_server(server.issuer, timeout=LONG)
            message = str(caught.value)
            assert name in message, (bad, message)
            assert "https" in message and "loopback" in message, message
            assert "secret" not in message  # credentials in the URL are never repeated


@pytest.mark.parametrize("good", [
    "https://as.example.com/authorize?prompt=consent",
    "HTTPS://AS.example.com:8443/authorize",
    "http://127.0.0.1:9/authorize",
    "http://127.45.6.7/authorize",
    "http://[::1]:9/authorize",
    "http://localhost:9/authorize",
    "http://LocalHost/authorize",
])
def test_https_and_loopback_http_endpoints_are_used(good: str) -> None:
    with HostileServer(metadata={"authorization_endpoint": good, "jwks_uri": good}) as server:
        found = discover_authorization_server(server.issuer, timeout=LONG)
        assert found is not None and found.authorization_endpoint == good


@pytest.mark.parametrize("bad", ["file:///etc/passwd", "javascript:alert(1)", "https://user:secret@as.example.com/authorize",
                                 "http://as.example.com/authorize", "data:text/html,hi"])
def test_login_never_opens_the_browser_on_a_hostile_authorization_endpoint(bad: str) -> None:
    with HostileServer(metadata={"authorization_endpoint": bad}) as server:
        rs = resource_for(server)
        try:
            browser = NeverOpened()
            oauth = OAuth(redirect_uri=REDIRECT, redirect_handler=browser, callback=never_called, token_store=MemoryTokenStore(),
                          timeout=LONG, login_timeout=LONG)
            with pytest.raises(OAuthError, match="authorization_endpoint"):
                oauth.refused(rs.endpoint, 401, rs.challenge(), None)
            assert browser.opened == []
            assert server.registration_requests() == []  # refused before anything else was sent there
        finally:
            rs.stop()


def test_a_hostile_token_endpoint_is_never_posted_to_by_client_credentials() -> None:
    with HostileServer(metadata={"token_endpoint": "http://user:pw@127.0.0.1:9/token"}) as server:
        rs = resource_for(server)
        try:
            client = ClientCredentials("robot", client_secret="s3cret-value")
            with pytest.raises(OAuthError, match="token_endpoint"):
                client.refused(rs.endpoint, 401, rs.challenge(), None)
            assert server.token_requests() == []
        finally:
            rs.stop()


@pytest.mark.parametrize("issuer", ["file:///etc", "http://user:pw@127.0.0.1:{port}", "ftp://127.0.0.1:{port}",
                                    "http://as.example.com", "http://127.0.0.1:{port}#x"])
def test_protected_resource_metadata_naming_a_hostile_issuer_is_refused_before_it_is_fetched(issuer: str) -> None:
    with HostileServer() as server:
        port = server.base_url.rsplit(":", 1)[1]
        rs = ResourceMetadataServer(authorization_servers=[issuer.format(port=port)])
        with rs:
            with pytest.raises(OAuthError) as caught:
                discover(rs.endpoint, None, timeout=LONG)
            assert "authorization_servers" in str(caught.value) and "https" in str(caught.value)
            assert "pw" not in str(caught.value)
        assert server.requests == []  # its metadata was never asked for


def test_a_resource_metadata_hint_elsewhere_over_plain_http_is_not_fetched() -> None:
    with HostileServer() as server, ResourceMetadataServer(authorization_servers=[]) as rs:
        rs.authorization_servers = [server.issuer]
        hint = "http://user:pw@" + rs.base_url.removeprefix("http://") + "/elsewhere"
        found = discover(rs.endpoint, hint, timeout=LONG)
        assert found.server.issuer == server.issuer  # the well-known URLs did
        assert "/elsewhere" not in rs.paths()


@pytest.mark.parametrize("bad", ["file:///etc/passwd", "javascript:alert(1)", "data:text/html,x", "http://as.example.com/a",
                                 "https://u:p@as.example.com/a", "ftp://as.example.com/a", "about:blank"])
def test_the_browser_opener_itself_refuses_what_is_not_https_or_loopback_http(bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", lambda url, *a, **k: opened.append(url) or True)
    with pytest.raises(OAuthError, match="https"):
        open_browser(bad)
    assert opened == []
    open_browser("https://as.example.com/authorize?state=x")
    open_browser("http://127.0.0.1:8/authorize")
    assert opened == ["https://as.example.com/authorize?state=x", "http://127.0.0.1:8/authorize"]


RECORDING_BROWSER = """import pathlib, sys
pathlib.Path(sys.argv[1]).write_text(sys.argv[2])
"""


def mcpsync_login(url: str, home: Path, browser: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env.update({"XDG_CONFIG_HOME": str(home), "BROWSER": browser})
    return subprocess.run([sys.executable, "-m", "mcpsync", "login", url, "--timeout", "2", *extra], capture_output=True, text=True,
                          env=env, cwd=REPO_ROOT, timeout=LONG * 3, stdin=subprocess.DEVNULL)


def assert_one_clear_line(run: subprocess.CompletedProcess[str], *words: str) -> None:
    assert run.returncode == 3, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize("bad", ["file:///etc/passwd", "javascript:alert(1)"])
def test_mcpsync_login_refuses_a_hostile_authorization_endpoint_without_starting_the_browser(bad: str, tmp_path: Path) -> None:
    recorder = tmp_path / "browser.py"
    recorder.write_text(RECORDING_BROWSER)
    opened = tmp_path / "opened"
    with HostileServer(metadata={"authorization_endpoint": bad}) as server:
        rs = resource_for(server)
        try:
            run = mcpsync_login(rs.endpoint, tmp_path, f"{sys.executable} {recorder} {opened} %s")
        finally:
            rs.stop()
    assert not opened.exists(), f"the browser was started on {opened.read_text()!r}"
    assert_one_clear_line(run, "authorization_endpoint", "https")


# -- 2. deadlines that hold ---------------------------------------------------------------------

TICK = 0.05
DRIP = 600  # bytes: 30 s at one per TICK, far longer than any timeout below


class DripServer:
    """One TCP connection on loopback answered by sending `prefix` at once, then `drip` one byte
    per TICK (paced by an Event's wait, which the test's end cuts short). The thread is joined."""

    def __init__(self, prefix: bytes, drip: bytes) -> None:
        self._prefix, self._drip = prefix, drip
        self._stop = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(LONG)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/drip"
        self._thread = threading.Thread(target=self._serve, name="test-drip")

    def __enter__(self) -> DripServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(LONG)
        self._sock.close()
        assert not self._thread.is_alive()

    def _serve(self) -> None:
        try:
            conn, _ = self._sock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(LONG)
            try:
                head = b""
                while b"\r\n\r\n" not in head:
                    got = conn.recv(4096)
                    if not got:
                        return
                    head += got
                conn.sendall(self._prefix)
                for byte in self._drip:
                    if self._stop.wait(TICK):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:
                return


STATUS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
PHASES = {
    "status line": (b"", b"HTTP/1.1 200 " + b"O" * DRIP),
    "headers": (STATUS, b"X-Drip: " + b"a" * DRIP),
    "body": (STATUS + b"Content-Length: 1000\r\n\r\n", b"[" + b" " * DRIP),
}
FETCHES: dict[str, Callable[[str, float], object]] = {
    "get_json": lambda url, timeout: _fetch.get_json(url, timeout=timeout),
    "post_form": lambda url, timeout: _fetch.post_form(url, {"grant_type": "refresh_token"}, timeout=timeout),
    "post_json": lambda url, timeout: _fetch.post_json(url, {"redirect_uris": ["http://127.0.0.1/cb"]}, timeout=timeout),
    "probe": lambda url, timeout: _fetch.probe(url, b"{}", timeout=timeout),
}
CASES = [(fetch, phase) for fetch in FETCHES for phase in PHASES if not (fetch == "probe" and phase == "body")]


@pytest.mark.parametrize(("fetch", "phase"), CASES)
def test_a_fetch_answered_a_byte_at_a_time_ends_at_its_timeout(fetch: str, phase: str) -> None:
    timeout = 1.0
    prefix, drip = PHASES[phase]
    with DripServer(prefix, drip) as server:
        started = time.monotonic()
        with pytest.raises(_fetch.FetchError) as caught:
            FETCHES[fetch](server.url, timeout)
        elapsed = time.monotonic() - started
    assert elapsed < timeout + 2.0, f"{fetch} waited {elapsed:.1f} s for a {phase} dripped over {DRIP * TICK:g} s"
    assert "within 1 s" in str(caught.value)


def test_a_request_read_slowly_is_bounded_by_the_same_deadline() -> None:
    """The server takes the request body a little at a time: sending it counts against the timeout."""
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(LONG)

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            while not stop.wait(TICK):
                try:
                    if not conn.recv(1024):
                        return
                except OSError:
                    return

    thread = threading.Thread(target=serve, name="test-slow-reader")
    thread.start()
    try:
        started = time.monotonic()
        with pytest.raises(_fetch.FetchError, match="within 1 s"):
            _fetch.post_json(f"http://127.0.0.1:{listener.getsockname()[1]}/register", {"pad": "x" * (8 << 20)}, timeout=1.0)
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        thread.join(LONG)
        listener.close()
    assert elapsed < 3.0 and not thread.is_alive()


# -- 3. numbers from the server -----------------------------------------------------------------

def short(value: Any) -> str:
    return repr(value)[:24]


BAD_EXPIRES_IN: list[Any] = [10**400, 1e308, 10**12, -1, -0.5, "soon", "", "3600s", "\uff11\uff12", True, False, float("inf"), float("nan"),
                             [3600], {"seconds": 3600}]


@pytest.mark.parametrize("value", BAD_EXPIRES_IN, ids=short)
def test_a_token_answer_with_an_expires_in_that_is_no_lifetime_is_one_clear_error(value: Any) -> None:
    body = {"access_token": "at-0123456789", "token_type": "Bearer", "expires_in": value}
    with pytest.raises(TokenError, match="expires_in") as caught:
        parse_token_answer(body, "https://as.example.com", clock=lambda: 1_800_000_000.0, scopes=None, resource=None,
                           where="https://as.example.com/token")
    assert "at-0123456789" not in str(caught.value)


@pytest.mark.parametrize(("value", "lifetime"), [(3600, 3600.0), (3600.5, 3600.5), ("3600", 3600.0), (0, None), (None, None)])
def test_a_sane_expires_in_is_used(value: Any, lifetime: float | None) -> None:
    body: dict[str, Any] = {"access_token": "at", "token_type": "Bearer"}
    if value is not None:
        body["expires_in"] = value
    tokens = parse_token_answer(body, None, clock=lambda: 1000.0, scopes=None, resource=None)
    assert tokens.expires_at == (None if lifetime is None else 1000.0 + lifetime)


@pytest.mark.parametrize("value", [10**400, 1e308, -60, "soon", True, float("inf")], ids=short)
def test_logging_in_at_a_token_endpoint_with_an_absurd_expires_in_fails_clearly(value: Any) -> None:
    with HostileServer(token_answer={"expires_in": value}) as server:
        rs = resource_for(server)
        try:
            from .test_oauth import Browser

            browser = Browser()
            store = MemoryTokenStore()
            oauth = OAuth(redirect_uri=REDIRECT, redirect_handler=browser.open, callback=browser.callback, token_store=store,
                          timeout=LONG, login_timeout=LONG)
            with pytest.raises(TokenError, match="expires_in"):
                oauth.refused(rs.endpoint, 401, rs.challenge(), None)
            assert oauth.authorization(rs.endpoint) is None
            assert store.load(rs.endpoint) is None or store.load(rs.endpoint).get("tokens") is None
        finally:
            rs.stop()


def test_a_registration_answer_with_an_absurd_secret_expiry_fails_clearly() -> None:
    with HostileServer(registration_answer={"client_secret_expires_at": 10**400}) as server:
        rs = resource_for(server)
        try:
            oauth = OAuth(redirect_uri=REDIRECT, redirect_handler=NeverOpened(), callback=never_called, token_store=MemoryTokenStore(),
                          timeout=LONG, login_timeout=LONG)
            with pytest.raises(OAuthError, match="client_secret_expires_at"):
                oauth.refused(rs.endpoint, 401, rs.challenge(), None)
        finally:
            rs.stop()


def test_a_kept_token_with_an_absurd_expiry_is_not_a_crash() -> None:
    assert TokenSet.from_dict({"access_token": "at", "expires_at": 10**400}) is None
    assert TokenSet.from_dict({"access_token": "at", "expires_at": "nan"}) is None


class CachingServer(_Loopback):
    """Answers every GET with `{}` and the Cache-Control the test sets."""

    cache_control = ""

    def handle(self, request: Recorded) -> _Reply:
        return _Reply(200, {}, {"Cache-Control": self.cache_control})


@pytest.mark.parametrize(("header", "max_age"), [
    ("max-age=²", None),
    ("max-age=¹²", None),
    ("max-age=" + "9" * 40, 2147483648.0),
    ("max-age=" + "9" * 5000, 2147483648.0),
    ("max-age=-5", None),
    ("max-age=1e9", None),
    ("max-age=300", 300.0),
    ('max-age="60", max-age=30', 30.0),
    ("no-store", 0.0),
])
def test_cache_control_max_age_is_a_bounded_number_or_ignored(header: str, max_age: float | None) -> None:
    with CachingServer() as server:
        server.cache_control = header
        reply = _fetch.get_json(server.base_url + "/jwks.json", timeout=LONG)
    assert reply.max_age == max_age


@pytest.mark.parametrize("value", [10**400, "soon"], ids=short)
def test_mcpsync_login_with_an_absurd_expires_in_is_one_clear_line(value: Any, tmp_path: Path) -> None:
    with HostileServer(token_answer={"expires_in": value}) as server:
        rs = resource_for(server)
        try:
            run = mcpsync_login(rs.endpoint, tmp_path, f"{sys.executable} {BROWSER_STANDIN} %s")
        finally:
            rs.stop()
        assert [r.form["grant_type"] for r in server.token_requests()] == ["authorization_code"]
    assert_one_clear_line(run, "expires_in")
    assert "eyJ" not in run.stderr
    kept = tmp_path / "mcpsync" / "tokens"
    assert not kept.exists() or all(json.loads(f.read_text()).get("tokens") is None for f in kept.iterdir())


def test_the_printed_login_url_obeys_the_browser_rule_too(capsys: pytest.CaptureFixture[str]) -> None:
    from mcpsync.cli._login import _print_url

    with pytest.raises(OAuthError, match="https"):
        _print_url("javascript:alert(1)")
    assert capsys.readouterr().err == ""
    _print_url("https://as.example.com/authorize?state=x")
    assert "https://as.example.com/authorize?state=x" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["https://user:pw@client.example.com/meta.json", "https://client.example.com/meta.json#x",
                                 "https://client.example.com/meta .json", "http://client.example.com/meta.json"])
def test_a_client_metadata_document_url_with_credentials_or_a_fragment_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="client_metadata_url"):
        OAuth(client_metadata_url=url, token_store=MemoryTokenStore())
