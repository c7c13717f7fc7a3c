"""Review of the owed-change resync (issue 24 item 5): a change whose append reached a real Redis that
then answered too late is delivered twice.

A replica on a real redis-server (`RedisBus` and `RedisStore`) holds a handshake-era GET stream. The
store gives up on Redis after half a second; the bus waits ten seconds and checks its connection only
every minute, so the stall is an outage for the store alone (as in test_store_freeze.py). The stall is
a real SIGSTOP of Redis, made at the moment the append is about to be sent (the store's subclass only
picks the moment: after the audience was read, as a Redis stalled by a slow command, a fork or the
network would be): the append is in Redis's socket when the store times out, and Redis runs it when
it resumes. It failed before the change ids of `Store.append_events`.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Mapping

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

STORE_TIMEOUT = 0.5
BUS_TIMEOUT = 10.0


class StallingStore(RedisStore):
    """A `RedisStore` whose next `append_events`, once armed, meets a Redis frozen just before the
    append is sent, and resumed once the store has given up on it."""

    def __init__(self, url: str, pid: int, **options: object) -> None:
        super().__init__(url, **options)  # type: ignore[arg-type]
        self.pid = pid
        self.armed = False

    def append_events(self, frames: Mapping[str, bytes], *, change: str | None = None) -> dict[str, str]:
        if not self.armed:
            return super().append_events(frames, change=change)
        self.armed = False
        os.kill(self.pid, signal.SIGSTOP)
        try:
            return super().append_events(frames, change=change)  # sent to the frozen Redis: times out
        finally:
            os.kill(self.pid, signal.SIGCONT)  # Redis reads the append from its socket and runs it


@pytest.fixture
def replica(own_redis: RedisServer, namespace: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Replica, StallingStore]]:
    monkeypatch.setattr(bus_module, "HEALTH_CHECK_INTERVAL", 60)
    with redis.Redis.from_url(own_redis.url) as client:
        pid = int(client.info("server")["process_id"])
    bus = RedisBus(own_redis.url, namespace=namespace, socket_timeout=BUS_TIMEOUT)
    assert bus.wait_connected(LONG)
    store = StallingStore(own_redis.url, pid, namespace=namespace, socket_timeout=STORE_TIMEOUT)
    made = Replica(Server("a", services=[service(Asked())], bus=bus, store=store))
    try:
        yield made, store
    finally:
        made.server.close(LONG)


def test_a_change_whose_append_redis_ran_late_is_delivered_once(replica: tuple[Replica, StallingStore]) -> None:
    """What a client sees: one `tools/list_changed` made during a short Redis stall arrives twice on
    its GET stream (two events, two ids), and a client re-lists twice. The module docstring of
    `_http_directory` promises "nothing twice".

    Cause: `SharedDirectory.deliver` treats a `StoreUnavailable` from `append_events` as "not
    appended" and owes the frame; but a timeout says nothing about whether Redis ran the script
    (it was sent, and a stalled Redis runs it once it resumes), so `_settle_owed` appends it a
    second time. Fix: make the append idempotent: e.g. give each change an id chosen before the
    first try (the Lua script skips an id it has seen in the session's log, or XADD with an
    explicit id derived from it), so retrying an owed change cannot duplicate it."""
    server, store = replica
    stream = SseStream(server.get(server.initialize()))
    assert stream.next()[1] is None  # the priming event: the stream is open
    server.server.refresh_prompts()  # the append script is loaded in Redis, so the late one runs
    assert stream.message()[1]["method"] == "notifications/prompts/list_changed"
    store.armed = True
    server.server.refresh_tools()  # its append times out in the store, and Redis runs it on resuming
    assert stream.message()[1]["method"] == "notifications/tools/list_changed"
    server.server.refresh_resources()  # the next change: nothing doubled ahead of it
    assert stream.message()[1]["method"] == "notifications/resources/list_changed"
    stream.close()
