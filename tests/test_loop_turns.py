"""`LoopWatch`: a loop (the HTTP server's, the stdio reader's) is handed over when one turn holds it
past the limit, once per turn (a loop just handed over may idle in its poller: handing it over
again would leave two threads polling), and never for turns that end in time. `LoopBaton`: the
loop goes home when the borrower gives it back, never twice to two threads, and a home thread
waiting for it stops waiting when the loop ends."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import pytest

from mcpsync._loop_turns import LoopBaton, LoopWatch

from ._timeouts import LONG

pytestmark = pytest.mark.timeout(30)

LIMIT = 0.01
QUIET = 0.2  # twenty looks of the watch: long enough for a second hand-over to have come


@pytest.fixture
def watched() -> Iterator[tuple[LoopWatch, queue.Queue[str]]]:
    calls: queue.Queue[str] = queue.Queue()
    watch = LoopWatch(lambda: calls.put("hand over"), "test-watch", limit=LIMIT)
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
    watch = LoopWatch(lambda: None, "test-watch", limit=LIMIT)
    watch.start()
    watch.stop(LONG)
    assert watch._thread is not None and not watch._thread.is_alive()


def test_a_lent_loop_comes_home_when_the_borrower_gives_it_back() -> None:
    wakes: list[str] = []
    baton = LoopBaton(lambda: wakes.append("wake"))
    lent = baton.lend(lambda: True)
    assert lent == 1 and baton.epoch == 1  # the home loop (epoch 0) leaves at its next look
    running, stop = threading.Event(), threading.Event()

    def borrowed_loop() -> None:
        running.set()
        stop.wait(LONG)

    worker = threading.Thread(target=baton.borrow, args=(lent, borrowed_loop))
    worker.start()
    assert running.wait(LONG)
    back: queue.Queue[int | None] = queue.Queue()
    home = threading.Thread(target=lambda: back.put(baton.take_back()))
    home.start()
    with pytest.raises(queue.Empty):  # home waits while the worker still runs the loop
        back.get(timeout=QUIET)
    assert baton.home_waiting and wakes == ["wake"]  # and has told the running loop to look
    stop.set()  # the borrowed loop sees home waiting and returns: borrow gives the loop back
    assert back.get(timeout=LONG) == 2 == baton.epoch
    for thread in (worker, home):
        thread.join(LONG)
    assert not baton.home_waiting


def test_a_loop_lent_on_is_not_given_back_by_the_first_borrower() -> None:
    baton = LoopBaton(lambda: None)
    first = baton.lend(lambda: True)
    second = baton.lend(lambda: True)  # the first borrower's turn held the loop too
    assert first is not None and second == first + 1
    baton.give_back(first)  # the first borrower leaves: the second still runs the loop
    assert baton.epoch == second


def test_no_loan_when_the_owner_says_no_or_the_loop_ended() -> None:
    baton = LoopBaton(lambda: None)
    assert baton.lend(lambda: False) is None and baton.epoch == 0
    baton.end()
    assert baton.lend(lambda: True) is None


def test_home_waiting_for_an_ended_loop_stops_waiting() -> None:
    baton = LoopBaton(lambda: None)
    baton.lend(lambda: True)
    back: queue.Queue[int | None] = queue.Queue()
    home = threading.Thread(target=lambda: back.put(baton.take_back()))
    home.start()
    baton.end()  # the borrower ended the loop (end of input, shutdown)
    assert back.get(timeout=LONG) is None
    home.join(LONG)


def test_reclaim_brings_home_a_loan_whose_worker_never_began() -> None:
    baton = LoopBaton(lambda: None)
    never_ran = baton.lend(lambda: True)
    baton.reclaim()
    assert never_ran is not None and baton.epoch == never_ran + 1
    began = baton.lend(lambda: True)
    assert began is not None
    seen: list[int] = []

    def reclaim_while_running() -> None:
        baton.reclaim()  # a worker that began gives the loop back itself
        seen.append(baton.epoch)

    baton.borrow(began, reclaim_while_running)
    assert seen == [began] and baton.epoch == began + 1  # given back when its loop returned


class _CountingEvent(threading.Event):
    """The watch's wake-up event, counting how often the loop sets it and telling when the watch
    has gone to sleep on it."""

    def __init__(self) -> None:
        super().__init__()
        self.sets = 0
        self.slept = threading.Event()

    def set(self) -> None:
        self.sets += 1
        super().set()

    def wait(self, timeout: float | None = None) -> bool:
        self.slept.set()
        return super().wait(timeout)


def test_a_sleeping_watch_is_woken_once_not_at_every_turn_until_it_runs() -> None:
    """Waking the watch takes a lock and a notify; until the woken thread gets the interpreter back
    (up to its switch interval) a busy loop must not pay that again at every turn."""
    watch = LoopWatch(lambda: None, "test-watch", limit=LIMIT)
    wake = _CountingEvent()
    watch._wake = wake  # the watch's own event, swapped for one that counts its sets
    watch.start()
    try:
        assert wake.slept.wait(LONG), "the watch never went to sleep"
        for _ in range(2000):
            watch.end(watch.begin())
    finally:
        watch.stop(LONG)
    assert 1 <= wake.sets <= 5, f"the loop set the watch's event {wake.sets} times in 2000 turns"
