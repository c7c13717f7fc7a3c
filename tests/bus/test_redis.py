"""RedisBus against a real redis-server: delivery, no echo, many channels, concurrency, handlers that
raise, the thread's name and its stop."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

import pytest

from mcpsync.bus import RedisBus
from mcpsync.bus.redis import THREAD_NAME

from .._timeouts import LONG
from .inbox import Inbox
from .redis_server import RedisServer

MakeBus = Callable[[str], RedisBus]


def connected(make_bus: MakeBus, server: RedisServer) -> RedisBus:
    bus = make_bus(server.url)
    assert bus.wait_connected(LONG), "the bus did not reach the test's redis-server"
    return bus


def test_a_message_reaches_the_other_bus_and_never_comes_back(redis_server: RedisServer, make_bus: MakeBus) -> None:
    a, b = connected(make_bus, redis_server), connected(make_bus, redis_server)
    inbox_a, inbox_b = Inbox(), Inbox()
    a.subscribe("tools", inbox_a)
    b.subscribe("tools", inbox_b)
    a.publish("tools", b"from a")
    assert inbox_b.wait_for(1) == [("tools", b"from a")]
    b.publish("tools", b"from b")
    # Redis delivers to a's subscription in publish order: had a's own message come back, it would be first
    assert inbox_a.wait_for(1) == [("tools", b"from b")]
    assert inbox_b.payloads() == [b"from a"]


def test_subscribe_returns_once_redis_has_confirmed_it(redis_server: RedisServer, make_bus: MakeBus) -> None:
    a, b = connected(make_bus, redis_server), connected(make_bus, redis_server)
    for n in range(20):  # each published at once after subscribe returns: none may be lost
        inbox = Inbox()
        b.subscribe(f"fresh{n}", inbox)
        a.publish(f"fresh{n}", b"first")
        assert inbox.wait_for(1) == [(f"fresh{n}", b"first")]


def test_many_channels_each_to_its_own_handlers(redis_server: RedisServer, make_bus: MakeBus) -> None:
    a, b = connected(make_bus, redis_server), connected(make_bus, redis_server)
    inboxes = {f"channel/{n}": Inbox() for n in range(50)}
    for channel, inbox in inboxes.items():
        b.subscribe(channel, inbox)
    also = Inbox()
    b.subscribe("channel/7", also)  # a second handler on one channel
    b.subscribe("ünïcode", inboxes["channel/0"])
    for channel in inboxes:
        a.publish(channel, channel.encode())
    a.publish("unheard", b"nobody subscribed")
    a.publish("ünïcode", b"\x00\xffbinary")
    for channel, inbox in inboxes.items():
        expected = [(channel, channel.encode())] + ([("ünïcode", b"\x00\xffbinary")] if channel == "channel/0" else [])
        assert inbox.wait_for(len(expected)) == expected
    assert also.wait_for(1) == [("channel/7", b"channel/7")]


def test_namespaces_keep_deployments_apart(redis_server: RedisServer, make_bus: MakeBus) -> None:
    ours_a, ours_b = connected(make_bus, redis_server), connected(make_bus, redis_server)
    theirs_a, theirs_b = RedisBus(redis_server.url, namespace="another:"), RedisBus(redis_server.url, namespace="another:")
    try:
        assert theirs_a.wait_connected(LONG) and theirs_b.wait_connected(LONG)
        inbox_ours, inbox_theirs = Inbox(), Inbox()
        ours_b.subscribe("tools", inbox_ours)
        theirs_b.subscribe("tools", inbox_theirs)
        theirs_a.publish("tools", b"theirs")
        assert inbox_theirs.wait_for(1) == [("tools", b"theirs")]
        ours_a.publish("tools", b"ours")
        assert inbox_ours.wait_for(1) == [("tools", b"ours")]
        theirs_a.publish("tools", b"marker")  # after "ours" reached Redis: had it crossed over, it would come first
        assert inbox_theirs.wait_for(2) == [("tools", b"theirs"), ("tools", b"marker")]
        assert inbox_ours.payloads() == [b"ours"]
    finally:
        theirs_a.close(LONG)
        theirs_b.close(LONG)


def test_concurrent_publishers_lose_nothing_and_deliver_each_once(redis_server: RedisServer, make_bus: MakeBus) -> None:
    a, b, c = (connected(make_bus, redis_server) for _ in range(3))
    inboxes = {name: Inbox() for name in "abc"}
    for name, bus in zip("abc", (a, b, c), strict=True):
        bus.subscribe("changes", inboxes[name])
    per_thread, publishers = 250, [(a, "a0"), (a, "a1"), (a, "a2"), (b, "b0"), (b, "b1")]
    start = threading.Barrier(len(publishers))

    def publish(bus: RedisBus, tag: str) -> None:
        start.wait(LONG)
        for n in range(per_thread):
            bus.publish("changes", f"{tag}:{n}".encode())

    threads = [threading.Thread(target=publish, args=(bus, tag), name=f"publisher-{tag}") for bus, tag in publishers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LONG)
    sent_by = {"a": 3 * per_thread, "b": 2 * per_thread}
    got_c = collections.Counter(inboxes["c"].wait_for(sum(sent_by.values())))
    got_b = collections.Counter(inboxes["b"].wait_for(sent_by["a"]))
    got_a = collections.Counter(inboxes["a"].wait_for(sent_by["b"]))
    everything = {("changes", f"{tag}:{n}".encode()) for _, tag in publishers for n in range(per_thread)}
    assert set(got_c) == everything and set(got_c.values()) == {1}
    assert {p for _, p in got_b} == {m for _, m in everything if m.startswith(b"a")} and set(got_b.values()) == {1}
    assert {p for _, p in got_a} == {m for _, m in everything if m.startswith(b"b")} and set(got_a.values()) == {1}
    for tag in ("a0", "b1"):  # and one publisher's messages keep their order
        mine = [p for p in inboxes["c"].payloads() if p.startswith(tag.encode() + b":")]
        assert mine == [f"{tag}:{n}".encode() for n in range(per_thread)]
    assert a.dropped == b.dropped == 0


def test_a_handler_that_raises_is_logged_without_the_payload_and_the_bus_goes_on(
    redis_server: RedisServer, make_bus: MakeBus, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = connected(make_bus, redis_server), connected(make_bus, redis_server)
    inbox = Inbox()

    def broken(channel: str, payload: bytes) -> None:
        raise RuntimeError("boom")

    b.subscribe("c", broken)
    b.subscribe("c", inbox)
    with caplog.at_level(logging.ERROR, logger="mcpsync"):
        a.publish("c", b"secret-payload-1")
        a.publish("c", b"secret-payload-2")
        assert inbox.wait_for(2) == [("c", b"secret-payload-1"), ("c", b"secret-payload-2")]
    failures = [record for record in caplog.records if "handler for channel 'c' failed" in record.getMessage()]
    assert len(failures) == 2
    assert "secret-payload" not in caplog.text
    assert b.connected


def test_the_thread_is_named_and_close_joins_it_at_once(redis_server: RedisServer) -> None:
    bus = RedisBus(redis_server.url)
    assert bus.wait_connected(LONG)
    ours = [thread for thread in threading.enumerate() if thread.name == THREAD_NAME]
    assert len(ours) == 1 and ours[0].daemon
    started = time.monotonic()
    bus.close(timeout=LONG)
    assert time.monotonic() - started < 1.0  # one read slice, not a timeout
    assert not ours[0].is_alive() and not bus.connected
    bus.close(timeout=LONG)  # idempotent
    before = bus.dropped
    bus.publish("c", b"after close")
    assert bus.dropped == before + 1


def test_close_from_a_handler_stops_the_bus_without_joining_itself(redis_server: RedisServer, make_bus: MakeBus) -> None:
    a, b = connected(make_bus, redis_server), connected(make_bus, redis_server)
    closed = threading.Event()

    def close_me(channel: str, payload: bytes) -> None:
        b.close(LONG)
        closed.set()

    b.subscribe("stop", close_me)
    a.publish("stop", b"")
    assert closed.wait(LONG)
    assert b.wait_disconnected(LONG) and not b.connected
