"""Issue 28's readiness through a real load balancer: a replica whose store goes away is taken out of
rotation, its clients never see it, and it is put back once the store answers again.

The deployment, all real processes on loopback: one redis-server, two `mcpsync serve --http
--processes 2 --bus redis://...` instances of integration/fixtures/replicas_app.py (every tool says
which process ran it), and Debian's nginx in front, round-robin. One instance reaches Redis through
a relay the test partitions (tests/bus/silent_proxy.py: nothing relayed, nothing closed, as across
a network partition); the other reaches it directly, so only the first loses its store.

nginx open source has no active health checks (nothing polls `/readyz`); it takes an upstream out
on the answers it gets, the way docs/guide/scaling.rst configures it: `proxy_next_upstream error
timeout http_503 non_idempotent` and `max_fails=1 fail_timeout=FAIL_TIMEOUT` on each server. That
is safe because every 503 mcpsync answers means nothing was done (a handshake-era request whose
session cannot be read, a session write undone, shutdown, a full session table): nginx sends the
same POST to the other replica, and marks the failed one down for `FAIL_TIMEOUT` seconds, after
which one request tries it again. `/readyz` says the same thing to a prober (Kubernetes) that asks.

Timing: nothing sleeps to synchronise. A request to the partitioned instance fails after its
Redis `socket_timeout` (2 s); "out of rotation" is asserted only of requests the client saw end
before FAIL_TIMEOUT had passed since the failing one began (nginx's window cannot have closed
for them, however slow the machine); "put back" is awaited with a deadline, probing through the
balancer at a steady pace (a probe makes no session).
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from fixtures.instances import Balancer, Instance
from wire import has_traceback

from tests._timeouts import LONG
from tests.bus.redis_server import RedisServer
from tests.bus.silent_proxy import SilentProxy

pytestmark = pytest.mark.timeout(180)

APP = Path(__file__).parent / "fixtures" / "replicas_app.py"
HANDSHAKE = "2025-11-25"
FAIL_TIMEOUT = 10  # seconds nginx keeps a failed upstream out of rotation


class PassiveBalancer(Balancer):
    """The replica tests' nginx, taking an upstream out after one failed answer (a 503 included)
    and sending the request to the next one, as docs/guide/scaling.rst advises: with the request
    bodies buffered (nginx's default), since it cannot send the next upstream a body it streamed
    to the first."""

    def config(self) -> str:
        config = super().config()
        for host, port in self.upstreams:
            server = f"server {host}:{port};"
            assert server in config
            config = config.replace(server, f"server {host}:{port} max_fails=1 fail_timeout={FAIL_TIMEOUT}s;")
        anchor = "proxy_pass http://replicas;"
        config = config.replace(anchor, f"{anchor}\n            proxy_next_upstream error timeout http_503 non_idempotent;")
        unbuffered = "proxy_request_buffering off;"  # nginx can resend only a body it kept
        assert unbuffered in config
        return config.replace(unbuffered, "proxy_request_buffering on;")


class Rotation(NamedTuple):
    proxy: SilentProxy
    partitioned: Instance  # reaches Redis through the proxy
    steady: Instance
    balancer: PassiveBalancer


class Answer(NamedTuple):
    status: int
    upstreams: list[str]  # the instances nginx tried, in order
    began: float
    ended: float


@pytest.fixture
def rotation(tmp_path: Path) -> Iterator[Rotation]:
    env = {"MCPSYNC_REQUEST_STATE_SECRET": "the one requestState secret both instances share", "REPLICAS_STATE": str(tmp_path / "unlocked")}
    with ExitStack() as stack:
        redis = RedisServer()
        stack.callback(redis.close)
        redis.start()
        proxy = SilentProxy(redis.port)
        stack.callback(proxy.close)
        partitioned = Instance(APP, f"redis://127.0.0.1:{proxy.port}/0", env)
        stack.callback(partitioned.stop)
        steady = Instance(APP, redis.url, env)
        stack.callback(steady.stop)
        balancer = PassiveBalancer(upstreams=[("127.0.0.1", partitioned.port), ("127.0.0.1", steady.port)])
        stack.callback(balancer.close)
        balancer.start()
        yield Rotation(proxy, partitioned, steady, balancer)
        stack.close()
        for instance in (partitioned, steady):
            assert not has_traceback(instance.log()), instance.log()


def _post(port: int, frame: dict[str, Any], session: str | None = None) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=LONG)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": HANDSHAKE}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    connection.request("POST", "/mcp", json.dumps(frame), headers)
    return connection.getresponse()


def _initialize(balancer: PassiveBalancer) -> Answer:
    """An `initialize` through the balancer: a session made in the store (which an instance
    without its store cannot do: 503), and the instances nginx tried for it, in order."""
    params = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "rotation-test", "version": "1"}}
    began = time.monotonic()
    response = _post(balancer.port, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
    body = response.read()
    ended = time.monotonic()
    assert response.status != 200 or response.getheader("Mcp-Session-Id"), body
    return Answer(response.status, _tried(response), began, ended)


def _probe_through(balancer: PassiveBalancer) -> tuple[int, list[str]]:
    """`GET /readyz` through the balancer: its status, and the instances nginx tried."""
    connection = http.client.HTTPConnection("127.0.0.1", balancer.port, timeout=LONG)
    try:
        connection.request("GET", "/readyz")
        response = connection.getresponse()
        response.read()
        return response.status, _tried(response)
    finally:
        connection.close()


def _tried(response: http.client.HTTPResponse) -> list[str]:
    """The instances nginx tried for `response`, in order (the balancer's X-Upstream header)."""
    return [address.strip() for address in (response.getheader("X-Upstream") or "").split(",")]


def _until_served_alone_by(address: str, ask: Callable[[], tuple[int, list[str]]], balancer: PassiveBalancer) -> None:
    """`ask()` through the balancer (its status, the instances nginx tried) until `address` alone
    answers, every answer a 200, within two fail windows (why two: the test, after the heal)."""
    deadline = time.monotonic() + 2 * FAIL_TIMEOUT + LONG
    while True:
        status, upstreams = ask()
        assert status == 200, (status, upstreams)
        if upstreams == [address]:
            return
        assert time.monotonic() < deadline, balancer.access_log()
        time.sleep(0.2)  # a poll's pace: nginx's window is what is awaited


def test_a_replica_whose_store_is_away_leaves_the_rotation_unseen_and_comes_back(rotation: Rotation) -> None:
    proxy, partitioned, steady, balancer = rotation
    before = [_initialize(balancer) for _ in range(2)]  # round-robin: one on each
    assert [answer.status for answer in before] == [200, 200]
    assert sorted(answer.upstreams[0] for answer in before) == sorted([partitioned.address, steady.address]), before

    proxy.cut()  # the partitioned instance's store is away; the steady one's is not
    during = [_initialize(balancer) for _ in range(6)]
    assert all(answer.status == 200 and answer.upstreams[-1] == steady.address for answer in during), during  # nobody saw it
    tried_first = [index for index, answer in enumerate(during) if answer.upstreams[0] == partitioned.address]
    assert tried_first, during  # round-robin sent one there: its 503 went on to the other instance
    failed = during[tried_first[0]]
    assert failed.upstreams == [partitioned.address, steady.address], failed
    surely_out = [answer for answer in during[tried_first[0] + 1:] if answer.ended < failed.began + FAIL_TIMEOUT]
    assert all(answer.upstreams == [steady.address] for answer in surely_out), during  # out of rotation
    assert partitioned.readiness() == (503, {"status": "not ready", "reason": "the session store is unreachable"})
    assert steady.readiness() == (200, {"status": "ready"})

    proxy.heal()
    deadline = time.monotonic() + LONG
    while partitioned.readiness()[0] != 200:  # the first PING may still meet a connection made before
        assert time.monotonic() < deadline, partitioned.log()
    # nginx tries it again once FAIL_TIMEOUT has passed, and it answers: back in rotation. Not
    # necessarily at the first try: the instance runs two processes, and one that served nothing
    # during the cut still holds pooled connections made before it, which stay dead across a
    # partition. It learns so on its first store call (a probe's PING as well as a session's),
    # one socket_timeout later, answering 503, which nginx sends on to the other instance, taking
    # this one out for FAIL_TIMEOUT once more. Each process does so at most once, and the
    # readiness wait above has woken at least one of the two, so each wait below lasts at most
    # two windows. Whatever the order, no client sees a failure.
    _until_served_alone_by(partitioned.address, lambda: _probe_through(balancer), balancer)
    # Sessions are made on it again, once its other process has had its one 503, if it had not yet.
    _until_served_alone_by(partitioned.address, lambda: _initialize(balancer)[:2], balancer)
