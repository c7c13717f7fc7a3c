"""MemoryBus (peers in one process, no thread) and bus_for's URL rules."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from mcpsync.bus import Bus, MemoryBus, RedisBus, bus_for

from .._timeouts import LONG
from .inbox import Inbox


def test_peers_hear_each_other_and_never_themselves() -> None:
    a = MemoryBus()
    b, c = a.peer(), a.peer()
    inbox_a, inbox_b, inbox_c = Inbox(), Inbox(), Inbox()
    a.subscribe("tools", inbox_a)
    b.subscribe("tools", inbox_b)
    c.subscribe("prompts", inbox_c)
    a.publish("tools", b"1")
    b.publish("tools", b"2")
    assert inbox_a.messages == [("tools", b"2")]  # delivered synchronously, on the publisher's thread
    assert inbox_b.messages == [("tools", b"1")]
    assert inbox_c.messages == []


def test_a_bus_alone_delivers_to_nobody() -> None:
    bus = MemoryBus()
    inbox = Inbox()
    bus.subscribe("tools", inbox)
    bus.publish("tools", b"x")
    assert inbox.messages == []
    assert MemoryBus().peer() is not None


def test_separate_buses_are_separate_networks() -> None:
    a, b = MemoryBus(), MemoryBus()
    inbox = Inbox()
    b.subscribe("tools", inbox)
    a.publish("tools", b"x")
    assert inbox.messages == []


def test_a_closed_peer_neither_sends_nor_receives_and_close_is_idempotent() -> None:
    a = MemoryBus()
    b = a.peer()
    inbox_a, inbox_b = Inbox(), Inbox()
    a.subscribe("c", inbox_a)
    b.subscribe("c", inbox_b)
    b.close()
    b.close()
    a.publish("c", b"to b")
    b.publish("c", b"to a")
    assert inbox_a.messages == [] and inbox_b.messages == []


def test_a_handler_that_raises_is_logged_without_its_payload_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    a = MemoryBus()
    b = a.peer()
    inbox = Inbox()

    def broken(channel: str, payload: bytes) -> None:
        raise RuntimeError("boom")

    b.subscribe("c", broken)
    b.subscribe("c", inbox)
    with caplog.at_level(logging.ERROR, logger="mcpsync"):
        a.publish("c", b"secret-payload")
    assert inbox.messages == [("c", b"secret-payload")]
    assert "handler for channel 'c' failed" in caplog.text
    assert "secret-payload" not in caplog.text


def test_on_reconnect_is_kept_and_never_called() -> None:
    bus = MemoryBus()
    called: list[int] = []
    bus.on_reconnect(lambda: called.append(1))
    bus.peer().publish("c", b"x")
    bus.close()
    assert called == []


def test_both_backends_are_buses() -> None:
    assert isinstance(MemoryBus(), Bus)


def test_bus_for_memory() -> None:
    assert isinstance(bus_for("memory://"), MemoryBus)
    assert isinstance(bus_for("MEMORY://"), MemoryBus)


def test_bus_for_redis_makes_a_redis_bus_that_closes() -> None:
    bus = bus_for("redis://127.0.0.1:1/0")  # nothing listens on port 1: it keeps retrying until closed
    assert isinstance(bus, RedisBus) and isinstance(bus, Bus)
    assert bus.address == "127.0.0.1:1/0"
    bus.close(LONG)
    assert not bus.connected
    rediss = bus_for("rediss://user:pw@127.0.0.1:1")
    assert isinstance(rediss, RedisBus) and rediss.address == "127.0.0.1:1/0"
    rediss.close(LONG)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("", "not a bus URL"),
        ("localhost:6379", "not a bus URL"),
        ("nats://localhost:4222", "'nats'"),
        ("memory://elsewhere", "takes no address"),
        ("redis://localhost:port/0", "port is not a number"),
        ("redis://localhost:6379/zero", "database number"),
        ("redis://user:hunter2@localhost:99999/0", "port is not a number"),
    ],
)
def test_bus_for_refuses_bad_urls_without_repeating_them(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as raised:
        bus_for(url)
    assert "hunter2" not in str(raised.value)
    assert (url == "" or url not in str(raised.value))


def test_without_redis_installed_a_redis_bus_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(ImportError, match=r"pip install 'mcpsync\[redis\]'"):
        bus_for("redis://127.0.0.1:1/0")


def test_importing_mcpsync_and_the_bus_does_not_import_redis() -> None:
    code = "import sys, mcpsync, mcpsync.bus, mcpsync.bus.redis; assert 'redis' not in sys.modules, 'redis was imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=LONG)
    assert done.returncode == 0, done.stderr
