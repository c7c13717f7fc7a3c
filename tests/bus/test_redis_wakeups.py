"""RedisBus's thread sleeps until there is work: no wake-ups while idle, and yet a publish, a new
subscription and close() take effect at once; every message already buffered by redis-py is handled
before it sleeps (bursts, messages larger than a read); and a Redis that stops answering without
closing the connection is seen through the health check.

"At once" is proved without timing: the health check, the one timer the idle thread has, is pushed
to a minute, so anything that happens within LONG happened because the thread was woken for it.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest
import redis

from mcpsync.bus import RedisBus
from mcpsync.bus import redis as bus_module

from .._timeouts import LONG, SHORT
from .inbox import Inbox
from .redis_server import RedisServer

FAR = 60
"""The health-check interval in these tests: far beyond LONG."""


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Buses made in the test check their connections only every FAR seconds."""
    monkeypatch.setattr(bus_module, "HEALTH_CHECK_INTERVAL", FAR)


@pytest.fixture
def pair(redis_server: RedisServer, namespace: str, quiet: None) -> Iterator[tuple[RedisBus, RedisBus]]:
    a, b = RedisBus(redis_server.url, namespace=namespace), RedisBus(redis_server.url, namespace=namespace)
    try:
        assert a.wait_connected(LONG) and b.wait_connected(LONG)
        yield a, b
    finally:
        a.close(LONG)
        b.close(LONG)


def idle_window() -> None:
    """Let SHORT seconds pass: long enough for the old 20 ms read slices to wake 15 times."""
    threading.Event().wait(SHORT)


def test_an_idle_bus_does_not_wake_and_a_publish_wakes_it_at_once(pair: tuple[RedisBus, RedisBus]) -> None:
    a, b = pair
    inbox = Inbox()
    b.subscribe("tools", inbox)
    a.publish("tools", b"settle")
    inbox.wait_for(1)
    before = a._wakeups, b._wakeups
    idle_window()
    after = a._wakeups, b._wakeups
    # at most the tail of the exchange above (a's thread may be finishing its turn): never polling
    assert after[0] - before[0] <= 1 and after[1] - before[1] <= 1, (before, after)
    a.publish("tools", b"after a quiet spell")  # a sleeps until FAR: only the wake-up sends it
    assert inbox.wait_for(2)[1] == ("tools", b"after a quiet spell")


def test_a_subscribe_after_a_quiet_spell_is_sent_at_once(pair: tuple[RedisBus, RedisBus]) -> None:
    a, b = pair
    idle_window()
    inbox = Inbox()
    b.subscribe("late", inbox)  # returns once Redis confirmed it, which needs b's thread awake
    a.publish("late", b"hello")
    assert inbox.wait_for(1) == [("late", b"hello")]
    assert b.dropped == a.dropped == 0


def test_close_wakes_an_idle_thread(redis_server: RedisServer, namespace: str, quiet: None) -> None:
    bus = RedisBus(redis_server.url, namespace=namespace)
    assert bus.wait_connected(LONG)
    thread = bus._thread
    idle_window()
    bus.close(timeout=LONG)  # asleep until FAR otherwise
    assert not thread.is_alive()
    assert not bus.connected


def test_a_burst_far_larger_than_one_read_is_all_handled(pair: tuple[RedisBus, RedisBus]) -> None:
    a, b = pair
    inbox = Inbox()
    b.subscribe("burst", inbox)
    count = 5000  # pipelined by a in batches: b's parser gets many messages per 64 KiB read
    for n in range(count):
        a.publish("burst", f"{n:05d}".encode() + b"." * 100)
    got = inbox.wait_for(count)  # any left in redis-py's buffer would wait for the health check
    assert [payload[:5] for _, payload in got] == [f"{n:05d}".encode() for n in range(count)]
    assert a.dropped == 0 and b.connected


def test_messages_larger_than_a_read_are_not_mistaken_for_an_outage(pair: tuple[RedisBus, RedisBus]) -> None:
    a, b = pair
    reconnected = threading.Event()
    b.on_reconnect(reconnected.set)
    inbox = Inbox()
    b.subscribe("big", inbox)
    payloads = [bytes([n]) * (1 << 20) if n % 2 else f"small {n}".encode() for n in range(30)]
    for payload in payloads:  # 1 MiB each, read in many pieces: half a message is not an error
        a.publish("big", payload)
    assert [payload for _, payload in inbox.wait_for(len(payloads))] == payloads
    assert not reconnected.is_set() and b.connected and a.dropped == 0


def test_a_redis_that_stops_answering_is_seen_through_the_health_check(
    own_redis: RedisServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bus_module, "HEALTH_CHECK_INTERVAL", 1)
    bus = RedisBus(own_redis.url, namespace=namespace, socket_timeout=0.5)
    other = RedisBus(own_redis.url, namespace=namespace)
    with redis.Redis.from_url(own_redis.url) as client:
        pid = int(client.info("server")["process_id"])
    try:
        assert bus.wait_connected(LONG) and other.wait_connected(LONG)
        reconnected = threading.Event()
        bus.on_reconnect(reconnected.set)
        inbox = Inbox()
        bus.subscribe("c", inbox)
        os.kill(pid, signal.SIGSTOP)  # frozen: the connection stays open, nothing is answered
        try:
            assert bus.wait_disconnected(LONG), "an unanswered health check did not end the connection"
        finally:
            os.kill(pid, signal.SIGCONT)
        assert bus.wait_connected(LONG) and reconnected.wait(LONG)
        assert other.wait_connected(LONG)
        other.publish("c", b"after the freeze")
        assert inbox.wait_for(1) == [("c", b"after the freeze")]
    finally:
        bus.close(LONG)
        other.close(LONG)
