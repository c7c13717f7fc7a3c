"""`LoopWatch`: the HTTP server's loop is handed over when one turn holds it past the limit, once
per turn (a loop just handed over may idle in its poller: handing it over again would leave two
threads polling), and never for turns that end in time."""

from __future__ import annotations

import queue
from collections.abc import Iterator

import pytest

from mcpsync.httpd._watch import LoopWatch

from .._timeouts import LONG

pytestmark = pytest.mark.timeout(30)

LIMIT = 0.01
QUIET = 0.2  # twenty looks of the watch: long enough for a second hand-over to have come


@pytest.fixture
def watched() -> Iterator[tuple[LoopWatch, queue.Queue[str]]]:
    calls: queue.Queue[str] = queue.Queue()
    watch = LoopWatch(lambda: calls.put("hand over"), limit=LIMIT)
    watch.start()
    try:
        yield watch, calls
    finally:
        watch.stop(LONG)


def test_a_turn_held_past_the_limit_is_handed_over_once(watched: tuple[LoopWatch, queue.Queue[str]]) -> None:
    watch, calls = watched
    turn = watch.begin()
    assert calls.get(timeout=LONG) == "hand over"
    with pytest.raises(queue.Empty):  # the same turn, still held: the new loop must not be handed over too
        calls.get(timeout=QUIET)
    watch.end(turn)
    held = watch.begin()  # a later turn of the new loop that holds it is handed over again
    assert calls.get(timeout=LONG) == "hand over"
    watch.end(held)


def test_turns_that_end_in_time_are_never_handed_over(watched: tuple[LoopWatch, queue.Queue[str]]) -> None:
    watch, calls = watched
    for _ in range(1000):
        watch.end(watch.begin())
    with pytest.raises(queue.Empty):
        calls.get(timeout=QUIET)


def test_an_old_turn_ending_late_does_not_end_the_new_loops_turn(watched: tuple[LoopWatch, queue.Queue[str]]) -> None:
    watch, calls = watched
    old = watch.begin()
    assert calls.get(timeout=LONG) == "hand over"
    new = watch.begin()  # the new loop's turn begins while the old one is still held
    watch.end(old)  # the held thread's turn ends: the new loop's turn is still watched
    assert calls.get(timeout=LONG) == "hand over"
    watch.end(new)


def test_stop_ends_the_watch_thread_while_it_sleeps() -> None:
    watch = LoopWatch(lambda: None, limit=LIMIT)
    watch.start()
    watch.stop(LONG)
    assert watch._thread is not None and not watch._thread.is_alive()
