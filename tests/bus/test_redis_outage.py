"""RedisBus when Redis goes away: publishes drop (counted, logged once) without blocking, the bus
reconnects with backoff to a server restarted on the same port, re-subscribes, fires on_reconnect,
and messages flow again; close() stays prompt while Redis is down."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

from mcpsync.bus import RedisBus
from mcpsync.bus.redis import FIRST_DELAY, MAX_DELAY, THREAD_NAME, next_delay

from .._timeouts import LONG
from .inbox import Inbox
from .redis_server import RedisServer

MakeBus = Callable[[str], RedisBus]


def test_the_backoff_doubles_from_a_tenth_of_a_second_to_five() -> None:
    delays = [FIRST_DELAY]
    while len(delays) < 9:
        delays.append(next_delay(delays[-1]))
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0])
    assert MAX_DELAY == 5.0


def test_an_outage_drops_then_a_restart_on_the_same_port_brings_everything_back(
    own_redis: RedisServer, make_bus: MakeBus, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = make_bus(own_redis.url), make_bus(own_redis.url)
    assert a.wait_connected(LONG) and b.wait_connected(LONG)
    reconnected = {"a": threading.Event(), "b": threading.Event()}
    a.on_reconnect(reconnected["a"].set)
    b.on_reconnect(reconnected["b"].set)
    inbox = Inbox()
    b.subscribe("tools", inbox)
    a.publish("tools", b"before")
    assert inbox.wait_for(1) == [("tools", b"before")]

    with caplog.at_level(logging.INFO, logger="mcpsync"):
        own_redis.stop()
        assert a.wait_disconnected(LONG) and b.wait_disconnected(LONG)
        started = time.monotonic()
        for n in range(1000):
            a.publish("tools", f"lost {n}".encode())
        assert time.monotonic() - started < 1.0  # dropped at once, never waiting on a socket
        assert a.dropped == 1000
        late = Inbox()
        b.subscribe("prompts", late)  # while down: returns at once; the reconnect subscribes it

        own_redis.start()
        assert a.wait_connected(LONG) and b.wait_connected(LONG)
        assert reconnected["a"].wait(LONG) and reconnected["b"].wait(LONG)
        a.publish("tools", b"after")
        a.publish("prompts", b"late")
        assert inbox.wait_for(2) == [("tools", b"before"), ("tools", b"after")]
        assert late.wait_for(1) == [("prompts", b"late")]
    assert a.dropped == 1000
    drops = [r for r in caplog.records if "dropped until it is back" in r.getMessage() and r.name == "mcpsync"]
    assert len(drops) == 1, "the drops are logged once per outage"
    assert any("lost Redis at 127.0.0.1" in r.getMessage() for r in caplog.records)
    assert any("is back (1000 message(s) dropped so far)" in r.getMessage() for r in caplog.records)
    assert "lost 1" not in caplog.text and own_redis.url not in caplog.text


def test_a_second_outage_is_logged_and_recovered_again(own_redis: RedisServer, make_bus: MakeBus, caplog: pytest.LogCaptureFixture) -> None:
    a, b = make_bus(own_redis.url), make_bus(own_redis.url)
    assert a.wait_connected(LONG) and b.wait_connected(LONG)
    inbox = Inbox()
    b.subscribe("c", inbox)
    reconnects: list[int] = []
    done = threading.Condition()

    def count() -> None:
        with done:
            reconnects.append(1)
            done.notify_all()

    b.on_reconnect(count)
    with caplog.at_level(logging.WARNING, logger="mcpsync"):
        for round_ in (1, 2):
            own_redis.stop()
            assert a.wait_disconnected(LONG) and b.wait_disconnected(LONG)
            a.publish("c", b"dropped")
            own_redis.start()
            assert a.wait_connected(LONG) and b.wait_connected(LONG)
            with done:
                assert done.wait_for(lambda n=round_: len(reconnects) >= n, LONG)  # type: ignore[misc]
            a.publish("c", f"round {round_}".encode())
            assert inbox.wait_for(round_)[-1] == ("c", f"round {round_}".encode())
    drops = [r for r in caplog.records if "dropped until it is back" in r.getMessage()]
    assert len(drops) == 2 and a.dropped == 2


def test_close_is_prompt_while_redis_is_down(own_redis: RedisServer) -> None:
    bus = RedisBus(own_redis.url)
    assert bus.wait_connected(LONG)
    own_redis.stop()
    assert bus.wait_disconnected(LONG)
    thread = next(t for t in threading.enumerate() if t.name == THREAD_NAME)
    started = time.monotonic()
    bus.close(timeout=LONG)
    assert time.monotonic() - started < 1.0  # the backoff pause ends at once on close
    assert not thread.is_alive()


def test_redis_down_at_start_then_up_connects_and_fires_on_reconnect(make_bus: MakeBus) -> None:
    server = RedisServer()  # a free port, nothing on it yet
    try:
        bus, other = make_bus(server.url), make_bus(server.url)
        fired = threading.Event()
        bus.on_reconnect(fired.set)
        inbox = Inbox()
        bus.subscribe("c", inbox)
        assert bus.wait_disconnected(LONG) and not bus.connected
        bus.publish("c", b"nowhere")
        assert bus.dropped == 1
        server.start()
        assert bus.wait_connected(LONG) and other.wait_connected(LONG)
        assert fired.wait(LONG)  # messages may have been missed while it could not connect
        other.publish("c", b"hello")
        assert inbox.wait_for(1) == [("c", b"hello")]
    finally:
        server.close()


def test_a_first_connect_that_succeeds_does_not_fire_on_reconnect(own_redis: RedisServer, make_bus: MakeBus) -> None:
    fired: list[int] = []
    bus, other = make_bus(own_redis.url), make_bus(own_redis.url)
    bus.on_reconnect(lambda: fired.append(1))
    assert bus.wait_connected(LONG) and other.wait_connected(LONG)
    inbox = Inbox()
    bus.subscribe("c", inbox)
    other.publish("c", b"x")
    inbox.wait_for(1)  # the thread has passed the point where it would have fired
    assert fired == []
