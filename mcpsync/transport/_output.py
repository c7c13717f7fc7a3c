"""The single writer of a stdio wire.

Strategy: one re-entrant lock guards every write and everything that must be ordered with writes
(the in-flight table's completions, the subscription registry, the era lock's commit). Callers
serialize outside the lock, then hold it for exactly one write of one frame. A failed write (the
client went away) marks the output broken; later writes are dropped silently and the owner is told
once, so it can shut down.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger("mcpsync")


class Output:
    def __init__(self, fd: int, on_broken: Callable[[], None]) -> None:
        self.lock = threading.RLock()
        self._fd = fd
        self._on_broken = on_broken
        self._broken = False
        self._closed = False

    @property
    def usable(self) -> bool:
        return not (self._broken or self._closed)

    def write_locked(self, frame: bytes) -> bool:
        """Write one whole frame; the caller holds `lock`. False if nothing could be written."""
        if self._broken or self._closed:
            return False
        try:
            written = os.write(self._fd, frame)
            if written < len(frame):  # a pipe with less room than the frame: the rest, in turn
                view = memoryview(frame)[written:]
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
        except OSError as exc:
            self._broken = True
            log.info("output closed by the peer (%s); stopping", exc.strerror or exc)
            self._on_broken()
            return False
        return True

    def write(self, frame: bytes) -> bool:
        with self.lock:
            return self.write_locked(frame)

    def close(self) -> None:
        """No more writes; later ones are dropped. The fd itself belongs to the caller."""
        with self.lock:
            self._closed = True
