"""The channel between a request's producers (its tool, the engine) and its one consumer (the
response being written), with real threads: a consumer waiting on an empty channel and producers
waiting on a full one are woken by the other side, whichever round it is (the condition they wait
on exists only while one does, and is made afresh for the next), and a close wakes everyone."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from mcpsync.transport.http._stream import CLOSED, TIMEOUT, Channel

from .._timeouts import LONG, SHORT, wait_until

pytestmark = pytest.mark.timeout(90)

BLOCKED = 10 * LONG
"""How long a blocked call may wait: past `joined()`'s bound, so a wake-up that never comes fails
the test rather than passing late."""


class Waiting:
    """`call()` on a thread of its own; `result` once it returns."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.result: Any = None
        self._thread = threading.Thread(target=self._run, args=(call,), name="test-channel", daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], Any]) -> None:
        self.result = call()

    def joined(self) -> Any:
        self._thread.join(LONG)
        assert not self._thread.is_alive()
        return self.result


def waiting_threads(channel: Channel) -> int:
    return channel._waiting


def test_a_waiting_consumer_gets_each_item_as_it_comes_round_after_round() -> None:
    channel = Channel(4)
    for n in range(3):
        consumer = Waiting(lambda: channel.get(BLOCKED))
        wait_until(lambda: waiting_threads(channel) == 1)
        assert channel.put(n)
        assert consumer.joined() == n
        assert waiting_threads(channel) == 0


def test_producers_waiting_on_a_full_channel_go_in_as_the_consumer_takes() -> None:
    channel = Channel(1)
    assert channel.put("first")
    producers = [Waiting(lambda item=item: channel.put(item, wait=BLOCKED)) for item in ("second", "third")]
    wait_until(lambda: waiting_threads(channel) == 2)
    taken = [channel.get(LONG) for _ in range(3)]
    assert [producer.joined() for producer in producers] == [True, True]
    assert taken[0] == "first" and sorted(taken[1:]) == ["second", "third"]
    assert channel.get(0) is TIMEOUT


def test_a_full_channel_refuses_after_the_wait_and_a_forced_item_still_goes_in() -> None:
    channel = Channel(1)
    assert channel.put("first")
    assert channel.put("second", wait=SHORT) is False
    assert channel.put("last", force=True)
    assert [channel.get(0), channel.get(0), channel.get(0)] == ["first", "last", TIMEOUT]


def test_close_wakes_a_waiting_consumer_and_a_waiting_producer() -> None:
    empty, full = Channel(1), Channel(1)
    assert full.put("kept")
    consumer = Waiting(lambda: empty.get(BLOCKED))
    producer = Waiting(lambda: full.put("more", wait=BLOCKED))
    wait_until(lambda: waiting_threads(empty) == 1 and waiting_threads(full) == 1)
    empty.close()
    full.close()
    assert consumer.joined() is CLOSED
    assert producer.joined() is False
    assert [full.get(0), full.get(0)] == ["kept", CLOSED]


def test_a_parked_consumer_is_woken_once_by_the_producing_thread() -> None:
    """`on_ready`: a consumer without a thread (a parked stream) is called back by the producer."""
    channel = Channel(4)
    woken = []
    assert channel.on_ready(lambda: woken.append(threading.current_thread().name))
    Waiting(lambda: channel.put("item")).joined()
    assert woken == ["test-channel"]
    assert channel.put("another")
    assert woken == ["test-channel"]
    assert channel.on_ready(lambda: woken.append("again")) is False  # items wait: no callback needed
    channel.wait(0)
    assert [channel.get(0), channel.get(0)] == ["item", "another"]
