"""Nothing is spent on a caller's body before the caller is authenticated, and the bodies held at
once are bounded (issue 23): over real sockets, against mcpsync's own HTTP server and gunicorn.

An attacker without a token (or with a bad one, or one without the endpoint's scope) declares a
16 MB body and sends only the head: the challenge must come straight after the head, without
`100 Continue`, and the connection closes; the client never has to send the body. A valid token
gets `100 Continue` and is served. Clients with valid tokens that declare more body than the
server's budget are refused 503 with Retry-After at the head (the ones let in get `100 Continue`,
which is how the test knows, without waiting, which were let in), while small requests are
still served. A body that keeps coming steadily is cut at its capped deadline.

Every wait is a read on a socket with a timeout (or `quiet_for`, which is a select); the bytes a
dripping client spaces out are the stimulus, not a synchronisation.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpsync import Server, Service
from mcpsync.auth import Auth
from mcpsync.auth.resource.static import StaticTokens
from mcpsync.transport.http.serving import HttpServing

from .._timeouts import LONG
from ..httpd.raw_http import RawClient, Reply, Servers, request

pytestmark = pytest.mark.timeout(60)

GOOD = "good-token-0123456789abcdef"
NARROW = "narrow-token-0123456789abcd"  # a valid token without the endpoint's scope
BAD = "no-such-token-0123456789abc"
SCOPE = "mcp"
DECLARED = 16 * 1024 * 1024
REPO_ROOT = Path(__file__).resolve().parents[2]


def initialize(padding: int = 0) -> bytes:
    params: dict[str, Any] = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bodies", "version": "1"}}
    if padding:
        params["clientInfo"]["padding"] = "x" * padding
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode()


def mcp_request(frame: dict[str, object], *, session: str | None = None, token: str = GOOD) -> bytes:
    """A whole POST of `frame` to /mcp with `token`, on a handshake-era `session` if given."""
    headers = [("Host", "127.0.0.1"), ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"),
               ("Authorization", f"Bearer {token}"), ("MCP-Protocol-Version", "2025-11-25")]
    if session is not None:
        headers.append(("Mcp-Session-Id", session))
    return request("POST", "/mcp", headers=headers, body=json.dumps(frame).encode(), host=False)


def open_session(client: RawClient) -> str:
    """initialize and notifications/initialized on `client`'s connection: the session's id."""
    client.send(mcp_request({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                             "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
    created = client.read_response()
    session = created.header("Mcp-Session-Id")
    assert created.status == 200 and session is not None, created.raw_head
    client.send(mcp_request({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session))
    assert client.read_response().status == 202
    return session


def get_stream(session: str) -> bytes:
    """The GET that opens `session`'s event stream."""
    return request("GET", "/mcp", headers=[("Host", "127.0.0.1"), ("Accept", "text/event-stream"), ("Authorization", f"Bearer {GOOD}"),
                                          ("Mcp-Session-Id", session), ("MCP-Protocol-Version", "2025-11-25")], host=False)


def mcp_post(body_length: int | None, *, token: str | None = None, expect: bool = False, host: str = "127.0.0.1") -> bytes:
    """The head of a POST to /mcp declaring `body_length` bytes, or (None) a chunked body; the
    body is sent separately."""
    framing = ("Transfer-Encoding", "chunked") if body_length is None else ("Content-Length", str(body_length))
    headers = [("Host", host), ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"), framing]
    if token is not None:
        headers.append(("Authorization", f"Bearer {token}"))
    if expect:
        headers.append(("Expect", "100-continue"))
    return request("POST", "/mcp", headers=headers, host=False)


class Endpoint:
    """A `Server` behind `Auth(StaticTokens)` on mcpsync's own HTTP server, on a free port."""

    def __init__(self, **options: Any) -> None:
        auth = Auth(StaticTokens({GOOD: [SCOPE], NARROW: ["other"]}), required_scopes=[SCOPE])
        self.server = Server("bodies", services=[Service("bodies")], auth=auth)
        self.serving: HttpServing = self.server.start_http("127.0.0.1", 0, threads=8, **options)
        self.clients: list[RawClient] = []

    def connect(self) -> RawClient:
        client = RawClient(self.serving.port)
        self.clients.append(client)
        return client

    def close(self) -> None:
        for client in self.clients:
            client.close()
        self.server.shutdown()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    served = Endpoint()
    try:
        yield served
    finally:
        served.close()


def refused_at_the_head(client: RawClient, status: int) -> Reply:
    """The answer that comes after the head alone: `status` (never `100 Continue`), then the close."""
    reply = client.read_response()
    assert reply.status == status, (reply.status, reply.raw_head, reply.body[:300])
    assert reply.closes, reply.raw_head
    assert client.wait_closed() == b""
    return reply


# -- authentication on the head -------------------------------------------------------------------

CASES = {"no token": (None, 401, None), "a bad token": (BAD, 401, "invalid_token"), "a token without the scope": (NARROW, 403, "insufficient_scope")}


@pytest.mark.parametrize("length", [DECLARED, None], ids=["16 MB declared", "chunked"])
@pytest.mark.parametrize("expect", [True, False], ids=["expect 100-continue", "head only"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_caller_that_is_not_authenticated_is_challenged_on_the_head_without_sending_the_body(
    endpoint: Endpoint, case: str, expect: bool, length: int | None
) -> None:
    token, status, error = CASES[case]
    client = endpoint.connect()
    client.send(mcp_post(length, token=token, expect=expect))
    reply = refused_at_the_head(client, status)  # before: 100 Continue, or no answer until 16 MB came
    challenge = reply.header("WWW-Authenticate")
    assert challenge is not None and challenge.startswith("Bearer ") and "resource_metadata=" in challenge
    if error is not None:
        assert f'error="{error}"' in challenge
    assert json.loads(reply.body)["error"]["code"] == -32600


def test_a_valid_token_gets_100_continue_and_is_served(endpoint: Endpoint) -> None:
    client = endpoint.connect()
    body = initialize()
    client.send(mcp_post(len(body), token=GOOD, expect=True))
    interim = client.read_response()
    assert (interim.status, interim.reason) == (100, "Continue")
    client.send(body)
    reply = client.read_response()
    assert reply.status == 200, reply.body
    assert reply.header("Mcp-Session-Id")
    assert json.loads(reply.body)["result"]["serverInfo"]["name"] == "bodies"


def test_a_request_without_a_body_is_refused_and_the_connection_kept(endpoint: Endpoint) -> None:
    """A first request without a token is routine (it finds the metadata): with no body to spare,
    its 401 leaves the connection open for the next one, as before."""
    client = endpoint.connect()
    client.send(mcp_post(0))
    reply = client.read_response()
    assert reply.status == 401 and not reply.closes
    body = initialize()
    client.send(mcp_post(len(body), token=GOOD) + body)
    assert client.read_response().status == 200


# -- the budget across connections -------------------------------------------------------------------

def test_bodies_past_the_budget_are_refused_503_at_the_head_while_small_requests_are_served() -> None:
    # 4 MiB in all, a sixteenth of it (256 KiB) kept for small bodies: three 1 MiB bodies fit
    served = Endpoint(max_body_bytes=1024 * 1024, max_buffered_bytes=4 * 1024 * 1024)
    try:
        big = initialize(padding=1024 * 1024 - 1000)
        holding = []
        refused = 0
        for _ in range(8):
            client = served.connect()
            client.send(mcp_post(len(big), token=GOOD, expect=True))
            reply = client.read_response()
            if reply.status == 100:  # let in: its body's share is held from now on
                holding.append(client)
                continue
            assert reply.status == 503, (reply.status, reply.raw_head)
            assert reply.header("Retry-After") == "1" and reply.closes
            assert client.wait_closed() == b""
            refused += 1
        assert (len(holding), refused) == (3, 5)
        for _ in range(3):  # meanwhile, a small request is served on a fresh connection
            small = served.connect()
            body = initialize()
            small.send(mcp_post(len(body), token=GOOD) + body)
            assert small.read_response().status == 200
        for client in holding:  # the bodies let in are served, and give their share back
            client.send(big)
            assert client.read_response().status == 200
        late = served.connect()
        late.send(mcp_post(len(big), token=GOOD, expect=True))
        assert late.read_response().status == 100
        late.send(big)
        assert late.read_response().status == 200
    finally:
        served.close()


def test_a_connection_that_goes_away_mid_body_gives_its_share_back() -> None:
    served = Endpoint(max_body_bytes=1024 * 1024, max_buffered_bytes=1024 * 1024 + 1)
    try:
        big = initialize(padding=1024 * 1024 - 1000)
        first = served.connect()
        first.send(mcp_post(len(big), token=GOOD, expect=True))
        assert first.read_response().status == 100
        second = served.connect()
        second.send(mcp_post(len(big), token=GOOD, expect=True))
        refused_at_the_head(second, 503)
        first.send(big[:1000])
        first.close()  # half a body, then gone
        deadline = time.monotonic() + LONG
        while time.monotonic() < deadline:  # the server notices the close on its own time: retry as told
            third = served.connect()
            third.send(mcp_post(len(big), token=GOOD, expect=True))
            reply = third.read_response()
            if reply.status == 100:
                break
            assert reply.status == 503
            third.quiet_for(0.1)  # the server closes it: this returns as soon as it has
        else:
            raise AssertionError("the share of a connection that went away was never given back")
        third.send(big)
        assert third.read_response().status == 200
    finally:
        served.close()


# -- the body's deadline --------------------------------------------------------------------------

def test_a_body_that_keeps_coming_is_cut_at_its_capped_deadline() -> None:
    """The rate floor alone (1 byte/s here) would let a body that drips a byte every 50 ms run for
    ever, each byte buying a second more; the cap ends it at `body_timeout`."""
    seen = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(environ["wsgi.input"].read())
        start_response("200 OK", [("Content-Length", "0")])
        return []

    servers = Servers()
    try:
        server = servers.start(app, timeout=0.5, min_body_rate=1, body_timeout=1.0)
        client = servers.connect(server)
        client.send(request("POST", "/", headers=[("Content-Length", "100000")]))
        started = time.monotonic()
        while time.monotonic() - started < 4.0 and client.quiet_for(0.05):
            client.send(b"x")
        elapsed = time.monotonic() - started
        reply = client.read_response()
        assert (reply.status, reply.closes) == (408, True), reply.raw_head
        assert 0.9 <= elapsed <= 3.0, f"cut after {elapsed:.2f} s, body_timeout=1.0"
        assert seen == []
    finally:
        servers.close()


# -- the server's hook, as any application may use it -------------------------------------------

def test_a_request_before_a_head_the_check_refuses_is_answered_first_and_the_refused_body_never_read() -> None:
    seen: list[bytes] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(environ["wsgi.input"].read())
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]

    def check(environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes] | None:
        assert environ["wsgi.input"].read() == b""  # the head alone
        if environ.get("HTTP_AUTHORIZATION") == "yes":
            return None
        return "401 Unauthorized", [("WWW-Authenticate", "Bearer"), ("Content-Length", "999")], b"who?"

    servers = Servers()
    try:
        client = servers.connect(servers.start(app, head_check=check))
        client.send(request("POST", "/", headers=[("Authorization", "yes")], body=b"first")
                    + request("POST", "/", headers=[("Content-Length", "1000000")]) + b"x" * 1000)
        first = client.read_response()
        assert (first.status, first.body) == (200, b"ok")
        refused = client.read_response()
        assert (refused.status, refused.body, refused.header("WWW-Authenticate")) == (401, b"who?", "Bearer")
        assert refused.header("Content-Length") == "4" and refused.closes  # framed by the server
        assert client.wait_closed() == b""
        assert seen == [b"first"]
    finally:
        servers.close()


# -- under gunicorn (mcpsync serve --processes): the app itself reads no body before its token ------

@contextlib.contextmanager
def serve(tmp_path: Path, *args: str) -> Iterator[int]:
    """A real `mcpsync serve --http 127.0.0.1:0 --auth-token-file ... ARGS` process: its port."""
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"{GOOD} sub=good {SCOPE}\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpsync", "serve", "--http", "127.0.0.1:0", "--auth-token-file", str(tokens), *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
    )
    try:
        yield int(_serving_url(proc).rsplit(":", 1)[1].split("/")[0])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=LONG)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=LONG)


def test_serve_max_buffered_bytes_bounds_the_bodies_a_real_server_holds(tmp_path: Path) -> None:
    with serve(tmp_path, "--max-frame-bytes", "1048576", "--max-buffered-bytes", "1048576") as port:
        first, second = RawClient(port), RawClient(port)
        try:
            first.send(mcp_post(1024 * 1024, token=GOOD, expect=True))
            assert first.read_response().status == 100
            second.send(mcp_post(1024 * 1024, token=GOOD, expect=True))
            assert refused_at_the_head(second, 503).header("Retry-After") == "1"
        finally:
            first.close()
            second.close()


def _serving_url(proc: subprocess.Popen[bytes]) -> str:
    assert proc.stderr is not None
    marker = b"serving MCP over HTTP at "
    stderr = b""
    deadline = time.monotonic() + LONG
    while marker not in stderr or b"\n" not in stderr.split(marker, 1)[1]:
        ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(proc.stderr.fileno(), 4096) if ready else b""
        assert chunk, f"serve --processes did not start: {stderr.decode(errors='replace')}"
        stderr += chunk
    return stderr.split(marker, 1)[1].split()[0].decode()


def test_under_gunicorn_a_caller_without_a_token_is_challenged_without_sending_the_body(tmp_path: Path) -> None:
    """gunicorn sends `100 Continue` itself before the app runs (so an `Expect` does not help
    there); but the app authenticates before it reads `wsgi.input`, so the challenge comes
    without the body, which gunicorn then drops (it drains at most 64 KiB, and closes)."""
    pytest.importorskip("gunicorn")
    with serve(tmp_path, "--processes", "2") as port:
        client = RawClient(port)
        try:
            client.send(mcp_post(DECLARED))
            reply = client.read_response()
            assert reply.status == 401, (reply.status, reply.raw_head)
            assert (reply.header("WWW-Authenticate") or "").startswith("Bearer ")
        finally:
            client.close()
