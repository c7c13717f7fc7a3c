"""The watch over the HTTP server's loop thread: it tells when one connection's turn has held the
loop for longer than `HAND_OVER_AFTER`, so the loop can move to another thread.

Why: the loop serves, on its own thread, a request its application promises to answer at once
(`WsgiServer(answers_at_once=...)`), which spares the two thread switches of a hand-off to a
worker; but user code may break the promise (a tool without a Context that queries a slow
database, a client that stops reading a large answer). The connections parked beside it must not
wait for that turn: past the limit, a worker takes the loop over (`WsgiServer._hand_over`), and
the held thread leaves the loop when its turn ends.

Cost: one thread (`mcpsync-http-watch`), asleep while no turn runs; while turns come, it looks
every `HAND_OVER_AFTER` seconds at two attributes the loop sets (no lock, no wake-up per turn:
the loop only sets an event when the watch has gone to sleep).
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

    def __init__(self, hand_over: Callable[[], None], limit: float = HAND_OVER_AFTER) -> None:
        self._hand_over = hand_over
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
            self._wake.set()
        return self._turn

    def end(self, turn: int) -> None:
        """Turn `turn` has ended (unless another has begun since: the loop moved on without it)."""
        if self._turn == turn:
            self._since = None

    # -- the watch's own thread ------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name="mcpsync-http-watch", daemon=True)
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
