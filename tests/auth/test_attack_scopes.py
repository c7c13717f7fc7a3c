"""A resource subscription is no way around a resource's scopes: over real HTTP on loopback, with
JWTs signed by `Authority` and checked by `JwtVerifier`, in both eras, in one process and across
two replicas sharing a store and a bus.

The vault serves `secret://vault/master` (needs `mcp:admin`), the template `secret://vault/{name}`
(needs `mcp:admin`) and `secret://public/x` (no scope of its own); the endpoint needs `mcp:tools`.
A token with only `mcp:tools` may subscribe to `secret://` (no entry is at that URI), and is then
told of the updates under it that it may read, and of nothing else. Absence is shown without
waiting: the hidden updates are published first, then a public one, and the public one must be the
next thing on the stream (a stream keeps its order).
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpsync import Server, Service
from mcpsync.auth import Auth
from mcpsync.auth.resource.jwt import JwtVerifier
from mcpsync.bus import MemoryBus, MemoryStore
from mcpsync.gateway.remote import RemoteSource
from mcpsync.protocol.versions import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION

from .._timeouts import LONG
from ..gateway.test_remote import FakeConnector, FakeSession, options
from ..sse_stream import SseStream
from .authority import Authority

pytestmark = pytest.mark.timeout(60)

RESOURCE = "http://127.0.0.1/mcp"
HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"
MASTER = "secret://vault/master"
PUBLIC = "secret://public/x"
TOOLS = "mcp:tools"
ADMIN = "mcp:tools mcp:admin"


def vault(notify: Callable[[str], None] | None = None) -> Service:
    """The vault; with `notify` (its server's `notify_resource_updated`), a tool `touch` that
    announces the master key's update and then the public one's (for a client that cannot be
    sent them from the test)."""
    service = Service("vault")

    if notify is not None:
        announce = notify

        @service.tool
        def touch() -> str:
            """Announces two updates."""
            announce(MASTER)
            announce(PUBLIC)
            return "touched"

    @service.resource(MASTER, scopes=["mcp:admin"])
    def master() -> str:
        return "the master key"

    @service.resource("secret://vault/{name}", scopes=["mcp:admin"])
    def key(name: str) -> str:
        return f"the key {name}"

    @service.resource(PUBLIC)
    def public() -> str:
        return "nothing secret"

    return service


def jwt_auth(authority: Authority) -> Auth:
    verifier = JwtVerifier(jwks_url=authority.jwks_url, issuer=authority.issuer, audience=RESOURCE, min_refresh_interval=0.001)
    return Auth(verifier, resource=RESOURCE, authorization_servers=[authority.issuer], required_scopes=["mcp:tools"])


class Endpoint:
    """One `Server` behind `Auth` on a free loopback port, and the requests a client makes of it."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.port = int(server.start_http("127.0.0.1", 0, keepalive=0.2, threads=8).url.rsplit(":", 1)[1].split("/")[0])

    def send(self, method: str, token: str, headers: dict[str, str], body: Any = None) -> http.client.HTTPResponse:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=LONG)
        sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}", **headers}
        connection.request(method, "/mcp", json.dumps(body).encode() if body is not None else None, sent)
        return connection.getresponse()

    # -- the handshake era ---------------------------------------------------------------------
    def initialize(self, token: str) -> str:
        params = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "attacker", "version": "1"}}
        answer = self.send("POST", token, {"MCP-Protocol-Version": HANDSHAKE}, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        assert answer.status == 200, answer.read()
        session = answer.getheader("Mcp-Session-Id")
        answer.read()
        assert session is not None
        note = self.send("POST", token, self.session_headers(session), {"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert note.status == 202, note.read()
        note.read()
        return session

    @staticmethod
    def session_headers(session: str) -> dict[str, str]:
        return {"MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session}

    def subscribe(self, token: str, session: str, uri: str) -> int:
        body = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": uri}}
        answer = self.send("POST", token, self.session_headers(session), body)
        answer.read()
        return answer.status

    def get_stream(self, token: str, session: str) -> SseStream:
        """The session's GET stream, once it is open (its priming event read)."""
        return self.get_stream_primed(token, session)[0]

    def get_stream_primed(self, token: str, session: str) -> tuple[SseStream, str]:
        """The session's GET stream, and the id of its priming event (where it starts)."""
        stream = SseStream(self.send("GET", token, {**self.session_headers(session), "Accept": "text/event-stream"}))
        primed, nothing = stream.next()
        assert nothing is None and primed is not None
        return stream, primed

    # -- 2026-07-28 ------------------------------------------------------------------------------
    def listen(self, token: str, uris: list[str]) -> SseStream:
        """A listen for updates under `uris`, once acknowledged."""
        meta = {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}}
        body = {"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen",
                "params": {"_meta": meta, "notifications": {"resourceSubscriptions": uris}}}
        stream = SseStream(self.send("POST", token, {"MCP-Protocol-Version": MODERN, "Mcp-Method": "subscriptions/listen"}, body))
        ack = stream.message()[1]
        assert ack["method"] == "notifications/subscriptions/acknowledged", ack
        return stream

    def close(self) -> None:
        assert self.server.close(LONG)


def updated(stream: SseStream) -> str:
    """The URI of the next resource update on the stream."""
    message = stream.message()[1]
    assert message["method"] == "notifications/resources/updated", message
    return str(message["params"]["uri"])


@pytest.fixture
def authority() -> Iterator[Authority]:
    with Authority(audience=RESOURCE) as running:
        yield running


@pytest.fixture
def endpoint(authority: Authority) -> Iterator[Endpoint]:
    served = Endpoint(Server("vault", services=[vault()], auth=jwt_auth(authority), shutdown_timeout=LONG))
    yield served
    served.close()


def token(authority: Authority, scope: str, subject: str = "mallory") -> str:
    return authority.mint(claims={"scope": scope, "sub": subject})


# -- the handshake era: resources/subscribe, then the session's GET stream ------------------------

def test_a_tools_token_subscribed_to_the_scheme_is_told_only_of_the_public_update(authority: Authority, endpoint: Endpoint) -> None:
    """And an admin token subscribed the same way is told of both. The tools token's stream
    numbers only what it is told, so its ids show no gap where the admin update was."""
    tools, admin = token(authority, TOOLS), token(authority, ADMIN, "root")
    mallory, root = endpoint.initialize(tools), endpoint.initialize(admin)
    assert endpoint.subscribe(tools, mallory, MASTER) == 403  # the direct way is refused, as it was
    for caller, session in ((tools, mallory), (admin, root)):
        assert endpoint.subscribe(caller, session, "secret://") == 200  # no entry is there: accepted, and says nothing
    (hers, primed), his = endpoint.get_stream_primed(tools, mallory), endpoint.get_stream(admin, root)
    endpoint.server.notify_resource_updated(MASTER)
    endpoint.server.notify_resource_updated(PUBLIC)
    event_id, message = hers.message()
    assert message["params"]["uri"] == PUBLIC
    assert event_id == str(int(primed) + 1)
    assert [updated(his), updated(his)] == [MASTER, PUBLIC]
    hers.close()
    his.close()


ATTACKS = [
    "secret://",
    "secret:",  # covers secret:/... by the prefix rule
    "secret:/",
    "secret://vault",  # the parent of the template's URIs, with no entry of its own
    "secret://vault/",
    "",
    "/",
    "SECRET://",  # case and percent-encoded variants: no entry, and no update of the real URIs is theirs
    "Secret://Vault/master",
    "secret%3A%2F%2Fvault",
    "secret://vault/master/",  # under the resource, outside the template ({name} holds no slash)
]
"""Subscriptions that name no entry the token lacks the scopes of, so each is accepted."""

HIDDEN = (MASTER, "secret://vault/other", "secret://vault/%6Daster", "secret://vault/master/x", "secret://vault", "secret://nothing/here", "/etc/passwd")
"""Updates a tools token is never told of: the admin resource, URIs its template matches, and
URIs no entry answers for (nobody may read them)."""

REFUSED = [MASTER, "secret://vault/other", "secret://vault/%6Daster"]
"""Subscriptions to an admin entry's own URIs (the resource's, or one the template matches,
encoded or not): refused 403 at once, as reading them is."""


def test_no_subscription_string_tells_a_tools_token_of_an_admin_entry(authority: Authority, endpoint: Endpoint) -> None:
    """Every prefix, variant and encoding at once, in one session; then updates of the admin
    resource, of URIs under the admin template (one percent-encoded, one that is only an encoding
    of the resource's URI), of a URI that no entry answers for, and last the public one."""
    tools = token(authority, TOOLS)
    session = endpoint.initialize(tools)
    for uri in ATTACKS:
        assert endpoint.subscribe(tools, session, uri) == 200, uri
    for uri in REFUSED:
        assert endpoint.subscribe(tools, session, uri) == 403, uri
    stream = endpoint.get_stream(tools, session)
    for hidden in HIDDEN:
        endpoint.server.notify_resource_updated(hidden)
    endpoint.server.notify_resource_updated(PUBLIC)
    assert updated(stream) == PUBLIC
    stream.close()


def test_a_subscription_made_with_an_admin_token_tells_a_stepped_down_token_nothing_secret(authority: Authority, endpoint: Endpoint) -> None:
    """The same caller (subject and client) subscribes with an admin token, then opens its GET
    stream with a token narrowed to `mcp:tools` (a refresh that stepped down): the stream's token
    decides, so the master key's update is not told."""
    admin = token(authority, ADMIN)
    session = endpoint.initialize(admin)
    assert endpoint.subscribe(admin, session, "secret://") == 200
    assert endpoint.subscribe(admin, session, MASTER) == 200
    stream = endpoint.get_stream(token(authority, TOOLS), session)
    endpoint.server.notify_resource_updated(MASTER)
    endpoint.server.notify_resource_updated(PUBLIC)
    assert updated(stream) == PUBLIC
    stream.close()


def test_what_waited_for_the_stream_is_told_as_the_streams_token_allows(authority: Authority, endpoint: Endpoint) -> None:
    """Updates that came while no GET stream was open wait for the next one, which is told only
    what its own token may read (here a token stepped down since they came)."""
    admin = token(authority, ADMIN)
    session = endpoint.initialize(admin)
    assert endpoint.subscribe(admin, session, "secret://") == 200
    endpoint.server.notify_resource_updated(MASTER)
    endpoint.server.notify_resource_updated(PUBLIC)
    stream = endpoint.get_stream(token(authority, TOOLS), session)
    assert updated(stream) == PUBLIC
    stream.close()


def test_updates_kept_for_a_later_stream_show_no_gap_where_a_hidden_one_was(authority: Authority, endpoint: Endpoint) -> None:
    """Before any GET stream, the token of the session's latest request decides what is kept:
    the hidden update gets no event id, so the stream opened later cannot count what it missed."""
    tools = token(authority, TOOLS)
    session = endpoint.initialize(tools)
    assert endpoint.subscribe(tools, session, "secret://") == 200
    endpoint.server.notify_resource_updated(MASTER)
    endpoint.server.notify_resource_updated(PUBLIC)
    stream, primed = endpoint.get_stream_primed(tools, session)
    event_id, message = stream.message()
    assert message["params"]["uri"] == PUBLIC
    assert event_id == str(int(primed) + 1)
    stream.close()


def test_a_request_with_a_stepped_down_token_decides_what_is_kept_from_then_on(authority: Authority, endpoint: Endpoint) -> None:
    """The same caller's refreshed, narrower token makes a request between streams: updates that
    come after it are kept only as far as it may read, though an admin token made the session and
    opens the next stream. (Each token is judged afresh; the caller being the same is not enough.)"""
    admin = token(authority, ADMIN)
    session = endpoint.initialize(admin)
    assert endpoint.subscribe(admin, session, "secret://") == 200
    assert endpoint.subscribe(token(authority, TOOLS), session, PUBLIC) == 200
    endpoint.server.notify_resource_updated(MASTER)
    endpoint.server.notify_resource_updated(PUBLIC)
    stream, primed = endpoint.get_stream_primed(admin, session)
    event_id, message = stream.message()
    assert (message["params"]["uri"], event_id) == (PUBLIC, str(int(primed) + 1))
    stream.close()


# -- 2026-07-28: subscriptions/listen with resourceSubscriptions ----------------------------------

def test_a_tools_token_listening_to_the_scheme_is_told_only_of_the_public_update(authority: Authority, endpoint: Endpoint) -> None:
    """And an admin token listening the same way is told of both."""
    hers = endpoint.listen(token(authority, TOOLS), ["secret://"])
    his = endpoint.listen(token(authority, ADMIN, "root"), ["secret://"])
    endpoint.server.notify_resource_updated(MASTER)
    endpoint.server.notify_resource_updated(PUBLIC)
    assert updated(hers) == PUBLIC
    assert [updated(his), updated(his)] == [MASTER, PUBLIC]
    hers.close()
    his.close()


def test_no_listen_filter_tells_a_tools_token_of_an_admin_entry(authority: Authority, endpoint: Endpoint) -> None:
    stream = endpoint.listen(token(authority, TOOLS), ATTACKS)
    for hidden in HIDDEN:
        endpoint.server.notify_resource_updated(hidden)
    endpoint.server.notify_resource_updated(PUBLIC)
    assert updated(stream) == PUBLIC
    stream.close()


# -- two replicas sharing a store and a bus ------------------------------------------------------

@pytest.fixture
def replicas(authority: Authority) -> Iterator[tuple[Endpoint, Endpoint]]:
    store, bus = MemoryStore(), MemoryBus()
    auth = jwt_auth(authority)
    a = Endpoint(Server("a", services=[vault()], auth=auth, bus=bus, store=store, shutdown_timeout=LONG))
    b = Endpoint(Server("b", services=[vault()], auth=auth, bus=bus.peer(), store=store, shutdown_timeout=LONG))
    yield a, b
    a.close()
    b.close()


def test_across_replicas_a_stream_held_by_one_is_told_only_what_its_token_may_read(authority: Authority, replicas: tuple[Endpoint, Endpoint]) -> None:
    """Subscribed through B, streaming from A, the updates published on B: A, which holds the
    stream, checks its token."""
    a, b = replicas
    tools, admin = token(authority, TOOLS), token(authority, ADMIN, "root")
    mallory, root = a.initialize(tools), a.initialize(admin)
    assert b.subscribe(tools, mallory, "secret://") == 200
    assert b.subscribe(admin, root, "secret://") == 200
    hers, his = a.get_stream(tools, mallory), a.get_stream(admin, root)
    listening = a.listen(tools, ["secret://"])
    b.server.notify_resource_updated(MASTER)
    b.server.notify_resource_updated(PUBLIC)
    assert updated(hers) == PUBLIC
    assert updated(listening) == PUBLIC
    assert [updated(his), updated(his)] == [MASTER, PUBLIC]
    for stream in (hers, his, listening):
        stream.close()


# -- a gateway: an upstream's resources need no scope of the gateway's own ------------------------

def test_a_gateway_tells_of_an_upstream_resource_it_lists_and_of_nothing_it_cannot_read(authority: Authority) -> None:
    """The upstream (the scripted upstream of tests/gateway, announcing on what stands for its
    reader thread) lists `up://docs/readme`: an update of it reaches the tools token, as reading
    it would, also once the upstream's list is stale. An update of a URI it does not list, and one of the gateway's own admin resource
    (an upstream cannot make a local entry's update public), reach nobody without the scopes."""
    upstream = FakeSession(resources=["up://docs/readme"])
    gateway = Server("gw", services=[vault()], auth=jwt_auth(authority), shutdown_timeout=LONG)
    gateway.catalog.add_remote(RemoteSource("up", FakeConnector(upstream), options()))
    served = Endpoint(gateway)
    try:
        tools = token(authority, TOOLS)
        session = served.initialize(tools)
        for uri in ("up://", "secret://"):
            assert served.subscribe(tools, session, uri) == 200
        stream = served.get_stream(tools, session)
        hers = served.listen(tools, ["up://", "secret://"])
        for uri in ("up://docs/unlisted", MASTER, "up://docs/readme"):
            upstream.announce("notifications/resources/updated", {"uri": uri})
        assert updated(stream) == "up://docs/readme"
        assert updated(hers) == "up://docs/readme"
        # Its list goes stale: the next update is still told (from the list last fetched), and
        # telling it asks the upstream nothing (it may come on the upstream's reader thread).
        listed = dict(upstream.list_calls)
        upstream.announce("notifications/resources/list_changed")
        upstream.announce("notifications/resources/updated", {"uri": "up://docs/readme"})
        assert stream.message()[1]["method"] == "notifications/resources/list_changed"
        assert updated(stream) == "up://docs/readme"
        assert updated(hers) == "up://docs/readme"
        assert upstream.list_calls == listed
        stream.close()
        hers.close()
    finally:
        served.close()


# -- the official Python SDK's client --------------------------------------------------------------

REPO_ROOT = Path(__file__).resolve().parents[2]
SDK_DRIVER = REPO_ROOT / "integration" / "sdk_scopes_driver.py"
PEERS_PYTHON = REPO_ROOT / ".venv-peers" / "bin" / "python"


@pytest.mark.skipif(not os.access(PEERS_PYTHON, os.X_OK), reason="the official SDK's venv is not built (scripts/peers-venv)")
def test_the_official_sdk_client_subscribed_to_the_scheme_hears_only_the_public_update(authority: Authority) -> None:
    """The SDK in the handshake era: resources/subscribe to `secret://` with a tools token, then
    a tool call that announces the master key's update and the public one's: its message handler
    sees only the public one, from the GET stream the SDK opened itself."""
    holder: list[Server] = []
    server = Server("vault", services=[vault(lambda uri: holder[0].notify_resource_updated(uri))], auth=jwt_auth(authority), shutdown_timeout=LONG)
    holder.append(server)
    served = Endpoint(server)
    try:
        env = {**os.environ, "MCP_TOKEN": token(authority, TOOLS)}
        url = f"http://127.0.0.1:{served.port}/mcp"
        command = [str(PEERS_PYTHON), str(SDK_DRIVER), "--mode", "legacy", url]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, env=env)
        assert result.returncode == 0, result.stderr[-4000:]
        summary = json.loads(result.stdout)
        assert summary["subscribed"] is True
        assert summary["updates"] == [PUBLIC]
    finally:
        served.close()
