"""Replicas stay in step when Redis stalls: a change made while a real Redis is frozen (SIGSTOP), for
less time than the bus takes to notice, still reaches the handshake-era GET streams of every replica
once Redis answers again.

Two servers in one process, each on its own loopback port, share one real redis-server through a
`RedisBus` each and a `RedisStore` each. The store gives up on a frozen Redis within half a second;
the buses wait ten seconds for an answer and check their connections only every minute, so the freeze
is an outage for the store alone and no reconnect resync can stand in for the owed change. Each
replica holds a GET stream of its own session; the change is made on one of them.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest
import redis

from mcpsync import Server
from mcpsync.bus import RedisBus, RedisStore
from mcpsync.bus import redis as bus_module

from .._timeouts import LONG
from ..sse_stream import SseStream
from ..transport.test_http_shared_sessions import Asked, Replica, service
from .redis_server import RedisServer

pytestmark = pytest.mark.timeout(60)

STORE_TIMEOUT = 0.5  # the store's: a frozen Redis is an outage to it at once
BUS_TIMEOUT = 10.0  # the buses': they wait out the freeze and never see it


@pytest.fixture
def replicas(own_redis: RedisServer, namespace: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Replica, Replica, int, list[RedisBus]]]:
    monkeypatch.setattr(bus_module, "HEALTH_CHECK_INTERVAL", 60)
    made: list[Replica] = []
    buses: list[RedisBus] = []
    try:
        for name in ("a", "b"):
            bus = RedisBus(own_redis.url, namespace=namespace, socket_timeout=BUS_TIMEOUT)
            assert bus.wait_connected(LONG)
            buses.append(bus)
            store = RedisStore(own_redis.url, namespace=namespace, socket_timeout=STORE_TIMEOUT)
            made.append(Replica(Server(name, services=[service(Asked())], bus=bus, store=store)))
        with redis.Redis.from_url(own_redis.url) as client:
            pid = int(client.info("server")["process_id"])
        yield made[0], made[1], pid, buses
    finally:
        for replica in made:
            replica.server.close(LONG)


def test_a_change_made_while_redis_is_frozen_reaches_every_replicas_streams(replicas: tuple[Replica, Replica, int, list[RedisBus]]) -> None:
    a, b, redis_pid, buses = replicas
    reconnects: list[int] = []
    for bus in buses:
        bus.on_reconnect(lambda: reconnects.append(1))
    streams = []
    for replica in (a, b):
        stream = SseStream(replica.get(replica.initialize()))
        assert stream.next()[1] is None  # the priming event: the stream is open
        streams.append(stream)
    os.kill(redis_pid, signal.SIGSTOP)
    try:
        a.server.refresh_tools()  # its append to the sessions' logs times out
    finally:
        os.kill(redis_pid, signal.SIGCONT)
    for stream in streams:  # once the store answers, the change owed is appended, and both read it
        assert stream.message()[1]["method"] == "notifications/tools/list_changed"
    assert not reconnects and all(bus.connected for bus in buses)  # no reconnect resync delivered it
    b.server.refresh_prompts()  # and the streams go on as before, nothing doubled ahead of it
    for stream in streams:
        assert stream.message()[1]["method"] == "notifications/prompts/list_changed"
        stream.close()
