"""A loop that serves quick requests on its own thread, and lends itself to a worker when one of
them turns out slow: the HTTP server's poll loop (`httpd.server.WsgiServer`) and the stdio reader
(`transport.stdio.server.StdioServer`).

Why: a loop that runs, on its own thread, a request its application promises to answer at once
(a tool without a Context, a listing) spares the two thread switches of a hand-off to a worker;
but user code may break the promise (a tool without a Context that queries a slow database, a
client that stops reading a large answer). What waits beside it (other connections, the
cancellations and requests behind it on the pipe) must not wait for that turn. So:

- `LoopWatch` tells when one turn has held the loop for longer than `HAND_OVER_AFTER`;
- `LoopBaton` then says which thread runs the loop: a worker borrows it (`lend`), the held thread
  leaves the loop when its turn ends and waits to take it back (`take_back`), and the worker
  gives it back at its next round (`give_back`).

Cost: one watch thread, asleep while no turn runs; while turns come, it looks every
`HAND_OVER_AFTER` seconds at two attributes the loop sets (no lock, no wake-up per turn: the loop
only sets an event when the watch has gone to sleep). A loop reads the baton's `epoch` without a
lock each round.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

HAND_OVER_AFTER = 0.01
"""Seconds one turn may hold the loop before a worker takes the loop over. The watch looks this
often, and a thread running Python waits up to the interpreter's switch interval (5 ms) for its
turn, so a held loop is handed over within about two or three times this."""
IDLE_LOOK = 60.0
"""The longest the watch sleeps with no turn running (every wait has a deadline)."""


class LoopWatch:
    """Calls `hand_over()` (on its own thread) when a turn begun with `begin()` has not ended
    (`end()`) within `limit` seconds; once per turn, so only while the thread running the loop is
    inside a turn (a loop just handed over waits for its first). `start()` and `stop()` are its
    owner's."""

    def __init__(self, hand_over: Callable[[], None], name: str, limit: float = HAND_OVER_AFTER) -> None:
        self._hand_over = hand_over
        self._name = name
        self.limit = limit
        self._turn = 0  # the number of the last turn begun
        self._since: float | None = None  # when the running turn began; None between turns
        self._asleep = False
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the loop's side (the thread running it) -------------------------------------------------
    def begin(self) -> int:
        """A turn begins on the loop; its number, for `end()`."""
        self._turn += 1
        self._since = time.monotonic()
        if self._asleep:
            # Said awake here, not only by the watch once it runs again: until it gets the GIL back
            # (up to a switch interval, 5 ms), every turn would set the event again, a lock and a
            # notify each (two turns in five, counted under a profiler with a pipelining client).
            self._asleep = False
            self._wake.set()
        return self._turn

    def end(self, turn: int) -> None:
        """Turn `turn` has ended (unless another has begun since: the loop moved on without it)."""
        if self._turn == turn:
            self._since = None

    # -- the watch's own thread ------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _watch(self) -> None:
        looked_at = -1  # the turn seen at the last look
        handed = -1  # the last turn the loop was handed over for: never twice (the new loop may idle meanwhile)
        while not self._stopped.is_set():
            turn, since = self._turn, self._since
            if since is None and turn == looked_at:
                self._sleep_until_a_turn()
                continue
            looked_at = turn
            if (
                since is not None
                and turn != handed
                and time.monotonic() - since >= self.limit
                and self._turn == turn
                and self._since is not None
            ):
                handed = turn
                self._hand_over()
            self._stopped.wait(self.limit)

    def _sleep_until_a_turn(self) -> None:
        """No turn began since the last look: sleep until `begin()` wakes the watch."""
        self._asleep = True
        if self._since is None and not self._stopped.is_set():  # a turn that began meanwhile is seen
            self._wake.wait(IDLE_LOOK)
        self._asleep = False
        self._wake.clear()


class LoopBaton:
    """Which thread runs a loop: the one whose number is `epoch`. The home thread (the caller of
    the loop's `serve`) holds epoch 0 at first; `lend()` moves the loop to a new epoch for a worker;
    `borrow()` runs it on the worker and gives it back, `take_back()` waits for it at home, each
    return under a fresh epoch; `end()` says the loop is over for good, so a thread waiting to take
    it back stops waiting.

    A loop runs `while baton.epoch == my_epoch`, and a borrowed one also returns when
    `home_waiting`; the thread left behind by a hand-over calls `take_back()` when its turn ends."""

    def __init__(self, wake_loop: Callable[[], None]) -> None:
        self._wake_loop = wake_loop  # makes the running loop look at the baton now
        self._cond = threading.Condition()
        self.epoch = 0
        self.home_waiting = False
        self.ended = False
        self._home = 0  # the epoch handed back home
        self._borrower = 0  # the last epoch whose worker began running the loop

    def lend(self, may: Callable[[], bool]) -> int | None:
        """A new epoch for a worker to run the loop in, if `may()` (asked under the baton's lock);
        the running loop leaves at its next look."""
        with self._cond:
            if self.ended or not may():
                return None
            self.epoch += 1
            return self.epoch

    def borrow(self, epoch: int, run: Callable[[], object]) -> None:
        """On the worker lent `epoch`: `run()` the loop, then give it back (home takes it)."""
        with self._cond:
            self._borrower = epoch
        try:
            run()
        finally:
            self.give_back(epoch)

    def give_back(self, epoch: int) -> None:
        """The worker for `epoch` stops running the loop: home takes it (unless it was lent on)."""
        with self._cond:
            if self.epoch == epoch:
                self.epoch = self._home = epoch + 1
                self._cond.notify_all()

    def reclaim(self) -> None:
        """Stopping, the workers gone: a loan whose worker never began gives the loop back home,
        which would otherwise wait for it forever."""
        with self._cond:
            if self.epoch != self._home and self._borrower != self.epoch:
                self.epoch = self._home = self.epoch + 1
                self._cond.notify_all()

    def take_back(self) -> int | None:
        """Home, its held turn over: wait until the loop comes back, and return its epoch; None
        once the loop has ended (`end()`)."""
        with self._cond:
            self.home_waiting = True
            self._wake_loop()
            while self._home != self.epoch and not self.ended:
                self._cond.wait(IDLE_LOOK)
            self.home_waiting = False
            return None if self.ended else self.epoch

    def end(self) -> None:
        """The loop is over for good (from whichever thread ran it last)."""
        with self._cond:
            self.ended = True
            self._cond.notify_all()
