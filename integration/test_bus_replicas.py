"""Two replicas of one server on one Redis (`mcpsync serve --http --bus redis://...`, real
processes, Debian's redis-server started by the test): a change made through one reaches the
listeners of the other, in both eras, once each, and never comes back to its publisher twice."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from wire import read_serving_url, spawn_http_server

import mcpsync
from mcpsync.client import ListChanged, ResourceUpdated
from tests._timeouts import LONG
from tests.bus.redis_server import RedisServer

APP = Path(__file__).parent / "fixtures" / "http_app.py"


class Replica:
    def __init__(self, bus: str) -> None:
        self.proc = spawn_http_server(str(APP), "--bus", bus)
        url, self.stderr = read_serving_url(self.proc, LONG)
        assert url is not None, self.stderr.decode(errors="replace")
        self.url = url

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        try:
            _, rest = self.proc.communicate(timeout=LONG)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, rest = self.proc.communicate(timeout=LONG)
        assert self.proc.returncode == 0, (self.stderr + rest).decode(errors="replace")
        return (self.stderr + rest).decode(errors="replace")


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with RedisServer() as running:
        yield running


@pytest.fixture
def replicas(redis: RedisServer) -> Iterator[tuple[Replica, Replica]]:
    first, second = Replica(redis.url), Replica(redis.url)
    try:
        yield first, second
    finally:
        for replica in (first, second):
            assert "Traceback" not in replica.stop()


def test_a_change_through_one_replica_reaches_a_listen_on_the_other(replicas: tuple[Replica, Replica]) -> None:
    a, b = replicas
    with mcpsync.connect(a.url, mode="modern", timeout=LONG) as on_a, mcpsync.connect(b.url, mode="modern", timeout=LONG) as on_b:
        with on_b.listen(tools=True, resource_uris=["notes://welcome"]) as far, on_a.listen(tools=True, resource_uris=["notes://welcome"]) as near:
            on_a.call_tool("add_tool", {})
            assert isinstance(far.next_event(LONG), ListChanged)
            on_a.call_tool("touch", {"uri": "notes://welcome"})
            updated = far.next_event(LONG)
            assert isinstance(updated, ResourceUpdated) and updated.uri == "notes://welcome"
            # The publisher's own listen hears each change once: the bus brings none back to it.
            assert [type(near.next_event(LONG)), type(near.next_event(LONG))] == [ListChanged, ResourceUpdated]
            assert near.next_event(0.5) is None


def test_after_redis_comes_back_every_listener_is_told_to_re_list(redis: RedisServer, replicas: tuple[Replica, Replica]) -> None:
    """A change published while Redis was down is lost: the level trigger makes up for it."""
    a, b = replicas
    with mcpsync.connect(b.url, mode="modern", timeout=LONG) as on_b:
        with on_b.listen(tools=True, prompts=True, resources=True) as far:
            redis.stop()
            redis.start()  # the same port: both replicas reconnect with backoff
            changed = [far.next_event(LONG) for _ in range(3)]
            assert {event.kind for event in changed if isinstance(event, ListChanged)} == {"tools", "prompts", "resources"}


def test_a_handshake_session_on_one_replica_hears_a_change_made_on_the_other(replicas: tuple[Replica, Replica]) -> None:
    a, b = replicas
    heard: list[str] = []
    arrived = threading.Event()

    def on_change(method: str, params: dict[str, object]) -> None:
        heard.append(method)
        arrived.set()

    with mcpsync.connect(b.url, mode="legacy", on_change=on_change, timeout=LONG) as on_b, mcpsync.connect(a.url, mode="modern", timeout=LONG) as on_a:
        on_b.list_tools()  # the session is open, and so is its GET stream
        on_a.call_tool("add_tool", {})
        assert arrived.wait(LONG)
        assert heard == ["notifications/tools/list_changed"]
