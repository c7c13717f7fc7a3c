"""One caller cannot take the handshake-era session table from the others: over real HTTP on
loopback, with JWTs signed by `Authority` and checked by `JwtVerifier`, in one process, across two
replicas sharing a `MemoryStore`, and across two replicas sharing a real Redis (Debian's
redis-server).

The attack: caller A (one token's principal) sends `initialize` after `initialize`, `cap + 100` of
them, where `cap` is `max_sessions_per_caller` and the table (`max_sessions`) is smaller than A's
flood. Before the per-caller bound, A's sessions filled the table: a newcomer got 503, and an idle
session of another caller could be evicted. Now A holds at most `cap`: its own oldest never-used
session gives way to its next one (past the grace, its longest idle one too), and once every one
of its sessions is in recent use, A alone is refused 429 with `Retry-After`. Caller B's idle session keeps answering and a new caller C is served.

When many callers together fill the table, a newcomer still gets a place from any caller holding
two or more never-used sessions; it is refused 503 (with `Retry-After`) only when every caller
holds at most one session or the others are in use. An endpoint without `Auth` has no caller to
bound: its sessions share the table as before.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpsync import Server, Service
from mcpsync.auth import Auth
from mcpsync.auth.resource.jwt import JwtVerifier
from mcpsync.bus import MemoryBus, MemoryStore, RedisBus
from mcpsync.bus.redis_store import RedisStore
from mcpsync.bus.store import Creation
from mcpsync.transport.http._sessions import EVICTION_GRACE, HttpSession, SessionTable

from .._timeouts import LONG
from ..bus.redis_server import RedisServer
from ..cli._serving import serve_env
from .authority import Authority

pytestmark = pytest.mark.timeout(60)

RESOURCE = "http://127.0.0.1/mcp"
VERSION = "2025-11-25"
CAP = 8  # max_sessions_per_caller in most tests (the default, 32, is checked on its own)
TABLE = 24  # max_sessions: below A's cap + 100, so A alone could fill it before the bound
_namespaces = itertools.count()
TIES = 2  # sessions Redis may count as made in one millisecond with the last one evicted


def tools() -> Service:
    service = Service("tools")

    @service.tool
    def echo(text: str) -> str:
        """Says it back."""
        return text

    return service


class Client:
    """The requests a client makes of the endpoint on a loopback port, on one kept-alive connection
    (so a flood of `initialize` costs no new connection each)."""

    def __init__(self, port: int) -> None:
        self._connection = http.client.HTTPConnection("127.0.0.1", port, timeout=LONG)

    def post(self, token: str | None, frame: dict[str, Any], session: str | None = None) -> tuple[int, http.client.HTTPMessage, Any]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if session is not None:
            headers["Mcp-Session-Id"] = session
        self._connection.request("POST", "/mcp", json.dumps(frame), headers)
        response = self._connection.getresponse()
        body = response.read()
        if response.getheader("Connection", "").lower() == "close":
            self._connection.close()
        return response.status, response.headers, json.loads(body) if body.strip() else None

    def initialize(self, token: str | None, *, use: bool = True) -> tuple[int, str | None, http.client.HTTPMessage]:
        """(status, the session id, the headers) of an `initialize`; with `use`, the session is
        then used (`notifications/initialized`), as every real client does at once."""
        params = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        status, headers, _ = self.post(token, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        session = headers.get("Mcp-Session-Id")
        if status == 200 and use:
            assert session is not None
            assert self.post(token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)[0] == 202
        return status, session, headers

    def call(self, token: str | None, session: str | None) -> int:
        """The status of a tool call in the session (200 served, 404 the session is gone)."""
        frame = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}
        status, _, body = self.post(token, frame, session)
        if status == 200:
            assert body["result"]["content"][0]["text"] == "hi"
        return status

    def delete(self, token: str, session: str) -> int:
        headers = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": session, "MCP-Protocol-Version": VERSION}
        self._connection.request("DELETE", "/mcp", headers=headers)
        response = self._connection.getresponse()
        response.read()
        return response.status

    def close(self) -> None:
        self._connection.close()


class Replica(Client):
    """One server on a free loopback port, and a client of it."""

    def __init__(self, server: Server, **options: Any) -> None:
        self.server = server
        url = server.start_http("127.0.0.1", 0, keepalive=0.2, threads=8, **options).url
        super().__init__(int(url.rsplit(":", 1)[1].split("/")[0]))

    def close(self) -> None:
        super().close()
        assert self.server.close(LONG)


class Deployment:
    """The replicas a load balancer without affinity spreads requests over (one: a lone process)."""

    def __init__(self, replicas: list[Replica]) -> None:
        self.replicas = replicas
        self._next = itertools.cycle(replicas)

    def any(self) -> Replica:
        return next(self._next)

    def close(self) -> None:
        for replica in self.replicas:
            replica.close()


@pytest.fixture
def authority() -> Iterator[Authority]:
    with Authority(audience=RESOURCE) as running:
        yield running


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def jwt_auth(authority: Authority) -> Auth:
    verifier = JwtVerifier(jwks_url=authority.jwks_url, issuer=authority.issuer, audience=RESOURCE, min_refresh_interval=0.001)
    return Auth(verifier, resource=RESOURCE, authorization_servers=[authority.issuer])


def deploy(kind: str, auth: Auth | None, request: pytest.FixtureRequest, **options: Any) -> Deployment:
    """`kind`: "alone" (one process), "memory" (two replicas, one MemoryStore), "redis" (two
    replicas on a real Redis, each with its own RedisBus and RedisStore)."""
    if kind == "alone":
        return Deployment([Replica(Server("alone", services=[tools()], auth=auth), **options)])
    if kind == "memory":
        store, bus = MemoryStore(), MemoryBus()
        servers = [Server("a", services=[tools()], auth=auth, bus=bus, store=store), Server("b", services=[tools()], auth=auth, bus=bus.peer(), store=store)]
    else:
        url = request.getfixturevalue("redis_server").url
        namespace = f"attack{next(_namespaces)}:"
        servers = [
            Server(name, services=[tools()], auth=auth, bus=RedisBus(url, namespace=namespace), store=RedisStore(url, namespace=namespace))
            for name in ("a", "b")
        ]
    return Deployment([Replica(server, **options) for server in servers])


KINDS = ["alone", "memory", "redis"]


@pytest.fixture(params=KINDS)
def deployment(request: pytest.FixtureRequest, authority: Authority) -> Iterator[Deployment]:
    made = deploy(request.param, jwt_auth(authority), request, max_sessions=TABLE, max_sessions_per_caller=CAP)
    yield made
    made.close()


# -- one caller's flood --------------------------------------------------------------------------
def test_a_flood_of_used_sessions_is_refused_429_to_its_caller_alone(deployment: Deployment, authority: Authority) -> None:
    a, b, c = (authority.mint(claims={"sub": name}) for name in ("alice", "bob", "carol"))
    status, b_session, _ = deployment.any().initialize(b)
    assert status == 200 and b_session is not None
    held: list[str] = []
    refusals = []
    for _ in range(CAP + 100):
        status, session, headers = deployment.any().initialize(a)
        if status == 200:
            assert session is not None
            held.append(session)
        else:
            refusals.append((status, headers.get("Retry-After")))
    assert len(held) == CAP  # every one used: none may give way, so A is refused from then on
    assert refusals == [(429, "10")] * 100
    for replica in deployment.replicas:
        assert replica.call(b, b_session) == 200  # B's idle session was not touched
    status, c_session, _ = deployment.any().initialize(c)
    assert status == 200 and c_session is not None  # and a newcomer is served
    assert all(deployment.any().call(a, session) == 200 for session in held)  # A keeps what it has


def test_a_flood_of_unused_sessions_evicts_only_its_callers_oldest(deployment: Deployment, authority: Authority) -> None:
    a, b, c = (authority.mint(claims={"sub": name}) for name in ("alice", "bob", "carol"))
    status, b_session, _ = deployment.any().initialize(b, use=False)  # B's: never used, the oldest of all
    assert status == 200 and b_session is not None
    opened = []
    for _ in range(CAP + 100):
        status, session, _ = deployment.any().initialize(a, use=False)
        assert status == 200 and session is not None  # a client that never came back loses nothing
        opened.append(session)
    assert deployment.any().call(b, b_session) == 200
    status, c_session, _ = deployment.any().initialize(c)
    assert status == 200 and c_session is not None
    statuses = [deployment.any().call(a, session) for session in opened]
    assert statuses.count(404) == 100 and statuses.count(200) == CAP  # A holds its cap: its oldest gave way
    # (Redis orders them by its clock's millisecond: two made in the same one may swap places)
    assert statuses[: 100 - TIES] == [404] * (100 - TIES) and statuses[-CAP + TIES :] == [200] * (CAP - TIES)


def test_a_caller_that_ends_a_session_may_open_another(deployment: Deployment, authority: Authority) -> None:
    a = authority.mint(claims={"sub": "alice"})
    sessions = [deployment.any().initialize(a)[1] for _ in range(CAP)]
    assert deployment.any().initialize(a)[0] == 429
    assert sessions[0] is not None and deployment.any().delete(a, sessions[0]) == 204
    assert deployment.any().initialize(a)[0] == 200


# -- many callers together -----------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_a_full_table_gives_a_newcomer_the_place_of_a_caller_holding_more(kind: str, authority: Authority, request: pytest.FixtureRequest) -> None:
    table, cap = 6, 3
    deployment = deploy(kind, jwt_auth(authority), request, max_sessions=table, max_sessions_per_caller=cap)
    try:
        token = {name: authority.mint(claims={"sub": name}) for name in ("alice", "bob", "carol", "dave", "erin", "frank", "grace")}
        alice = [deployment.any().initialize(token["alice"], use=False)[1] for _ in range(cap)]  # 3 never used
        bob = [deployment.any().initialize(token["bob"])[1] for _ in range(cap)]  # 3 in use: the table is full
        for name in ("carol", "dave"):  # each newcomer takes one of Alice's unused places
            assert deployment.any().initialize(token[name])[0] == 200
        probed = [deployment.any().call(token["alice"], session) for session in alice[:2]]
        # two of Alice's three gave way, her oldest two; with Redis, two made in one millisecond of its
        # clock have no order, so the third may have gone instead of one of those (and is now in use)
        in_order = probed == [404, 404]
        assert in_order or (kind == "redis" and sorted(probed) == [200, 404]), probed
        assert all(deployment.any().call(token["bob"], session) == 200 for session in bob)
        # Alice holds one now, as each newcomer does: no caller gives its only session away
        status, _, headers = deployment.any().initialize(token["erin"])
        assert (status, headers.get("Retry-After")) == (503, "10")
        if in_order:  # a caller's own unused session still makes way for its next one: Alice's last
            status, newest, _ = deployment.any().initialize(token["alice"], use=False)
            assert status == 200 and newest is not None
            assert deployment.any().call(token["alice"], alice[2]) == 404
            assert deployment.any().call(token["alice"], newest) == 200
    finally:
        deployment.close()


# -- without Auth ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["alone", "memory"])
def test_without_auth_every_client_shares_the_table_as_before(kind: str, request: pytest.FixtureRequest) -> None:
    deployment = deploy(kind, None, request, max_sessions=TABLE, max_sessions_per_caller=2)
    try:
        sessions = [deployment.any().initialize(None)[1] for _ in range(5)]  # more than 2: no caller to bound
        assert all(session is not None and deployment.any().call(None, session) == 200 for session in sessions)
    finally:
        deployment.close()


# -- the default bound ----------------------------------------------------------------------------
def test_by_default_one_caller_holds_32_sessions_and_others_are_served(authority: Authority, request: pytest.FixtureRequest) -> None:
    deployment = deploy("alone", jwt_auth(authority), request, max_sessions=64)
    try:
        a, c = authority.mint(claims={"sub": "alice"}), authority.mint(claims={"sub": "carol"})
        statuses = [deployment.any().initialize(a)[0] for _ in range(32 + 100)]
        assert statuses == [200] * 32 + [429] * 100
        assert deployment.any().initialize(c)[0] == 200
    finally:
        deployment.close()


# -- mcpsync serve ---------------------------------------------------------------------------------
def ready_port(child: subprocess.Popen[bytes]) -> int:
    """The port a `serve --http 127.0.0.1:0` child names once it listens (its stderr, read with a deadline)."""
    assert child.stderr is not None
    said, deadline, ready = b"", time.monotonic() + LONG, b"serving MCP over HTTP at "
    while ready not in said or b"\n" not in said.split(ready, 1)[1]:
        readable, _, _ = select.select([child.stderr], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(child.stderr.fileno(), 4096) if readable else b""
        assert chunk, said.decode(errors="replace")
        said += chunk
    url = said.split(ready, 1)[1].split()[0].decode()
    return int(url.rsplit(":", 1)[1].split("/")[0])


def test_mcpsync_serve_takes_the_bound_from_its_option(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("token-of-alice-0123456789 sub=alice\ntoken-of-carol-0123456789 sub=carol\n")
    command = [sys.executable, "-m", "mcpsync", "serve", "--http", "127.0.0.1:0", "--auth-token-file", str(tokens), "--max-sessions-per-caller", "2"]
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=serve_env(), cwd=tmp_path)
    try:
        client = Client(ready_port(child))
        statuses = [client.initialize("token-of-alice-0123456789")[0] for _ in range(3)]
        assert statuses == [200, 200, 429]
        assert client.initialize("token-of-carol-0123456789")[0] == 200
        client.close()
    finally:
        child.terminate()
        child.wait(LONG)


def test_mcpsync_serve_help_explains_the_bound() -> None:
    shown = subprocess.run([sys.executable, "-m", "mcpsync", "serve", "--help"], capture_output=True, env=serve_env(), timeout=LONG, check=True)
    text = " ".join(shown.stdout.decode().split())
    assert "--max-sessions-per-caller" in text
    for words in ("one caller (one token's principal)", "429 with Retry-After", "service account", "[default: 32"):
        assert words in text, words


# -- the table's own clock: what the grace decides ------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_caller_at_its_bound_gives_up_its_own_session_idle_past_the_grace_never_a_busy_one() -> None:
    """A client that reconnects without DELETE is not locked out for the session timeout: its
    abandoned sessions give way to its next ones, once idle past the grace (one process; the
    store's `caller_idle` is tests/bus/test_store.py's)."""
    clock = Clock()
    table = SessionTable(idle_timeout=1800.0, max_sessions=100, capacity=4, clock=clock, max_per_caller=2)

    def opened(key: str) -> tuple[Creation, HttpSession]:
        session = table.new(key)
        assert session is not None
        outcome = table.add(session)
        table.find(session.id)  # used at once, as by notifications/initialized
        return outcome, session

    _, b = opened("B")  # B's is the idle one of longest standing throughout
    clock.now += 1
    _, a0 = opened("A")
    clock.now += 5
    _, a1 = opened("A")
    clock.now += EVICTION_GRACE + 1 - 5  # a0 idle past the grace, a1 not
    outcome, a2 = opened("A")
    assert outcome is Creation.CREATED and table.find(a0.id) is None
    assert opened("A")[0] is Creation.CALLER_FULL  # a1 and a2 were used within the grace
    a2.streaming = True  # busy: never given up however long it stays so
    clock.now += 2 * EVICTION_GRACE
    outcome, a3 = opened("A")
    assert outcome is Creation.CREATED and table.find(a1.id) is None and table.find(a2.id) is a2
    clock.now += 2 * EVICTION_GRACE
    assert opened("A")[0] is Creation.CREATED and table.find(a3.id) is None and table.find(a2.id) is a2
    assert table.find(b.id) is b
    a2.streaming = False
    table.drain()
