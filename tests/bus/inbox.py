"""What a bus delivered, kept in order, with bounded waits for it (no sleeps)."""

from __future__ import annotations

import threading

from .._timeouts import LONG


class Inbox:
    """A bus handler that records (channel, payload) and lets a test wait for a count."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes]] = []
        self._cond = threading.Condition()

    def __call__(self, channel: str, payload: bytes) -> None:
        with self._cond:
            self.messages.append((channel, payload))
            self._cond.notify_all()

    def wait_for(self, count: int, timeout: float = LONG) -> list[tuple[str, bytes]]:
        """The first `count` messages; fails if they have not all come within `timeout`."""
        with self._cond:
            arrived = self._cond.wait_for(lambda: len(self.messages) >= count, timeout)
            assert arrived, f"{len(self.messages)} of {count} message(s) within {timeout} s: {self.messages[:5]}"
            return list(self.messages[:count])

    def payloads(self) -> list[bytes]:
        with self._cond:
            return [payload for _, payload in self.messages]
