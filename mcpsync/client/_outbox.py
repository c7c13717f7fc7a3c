"""Frames for a child's stdin that never make their sender wait.

Strategy: `put` writes what the pipe takes at once, under a lock (the usual case: one `os.write`
of the whole frame). What does not fit waits in a backlog, in order, for the outbox's writer
thread (`mcpsync-client-writer`). It is started when a backlog forms, ends when the backlog is
empty, and owns every wait for room in the pipe. So a thread that must never block (the gateway's
stdio reader forwarding a call, or a cancel) never waits on a child that reads slowly.

Each frame keeps the deadline it was sent with. A frame none of which went out by then is dropped
(its sender's own deadline reports it: a request goes unanswered). A frame cut halfway leaves a
stream that cannot be repaired: the outbox calls `on_cut` (the connection stops the child) and
refuses everything after. With `max_backlog` bytes already waiting, `put` refuses a new frame at
once: the child is not reading its input.
"""

from __future__ import annotations

import collections
import logging
import os
import select
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from ..errors import CallTimeout, ConnectionLost

log = logging.getLogger("mcpsync.client")

MAX_BACKLOG = 64 * 1024 * 1024
"""Bytes that may wait for a child that does not read before new frames are refused."""


class _Waiting:
    """The unwritten rest of one frame."""

    __slots__ = ("data", "deadline", "started")

    def __init__(self, data: memoryview, deadline: float, started: bool) -> None:
        self.data = data
        self.deadline = deadline
        self.started = started  # part of it is on the wire: dropping the rest would cut the stream


class Outbox:
    """The write side of one child's stdin (non-blocking); see the module docstring."""

    def __init__(self, stream: IO[bytes], name: str, on_cut: Callable[[], None], max_backlog: int = MAX_BACKLOG) -> None:
        self._stream = stream
        self._fd = stream.fileno()
        os.set_blocking(self._fd, False)
        self._name = name
        self._on_cut = on_cut
        self._max_backlog = max_backlog
        self._lock = threading.Lock()
        self._backlog: collections.deque[_Waiting] = collections.deque()
        self._waiting_bytes = 0
        self._writer: threading.Thread | None = None
        self._refusal: str | None = None  # why frames are refused: the pipe broke, or the outbox closed
        self._close_when_idle = False

    def put(self, frame: bytes, deadline: float) -> None:
        """Send `frame`: written now, or queued for the writer. Raises ConnectionLost when the pipe
        is broken or the outbox closed, CallTimeout when the backlog is full."""
        with self._lock:
            if self._refusal is not None:
                raise ConnectionLost(self._refusal)
            written = 0
            if not self._backlog:  # nothing ahead of it: try the pipe now, without waiting
                written = self._write(frame)
                if written == len(frame):
                    return
            if not written and self._waiting_bytes >= self._max_backlog:
                raise CallTimeout(f"the server {self._name!r} is not reading its input")
            self._backlog.append(_Waiting(memoryview(frame)[written:], deadline, written > 0))
            self._waiting_bytes += len(frame) - written
            if self._writer is None:
                self._writer = threading.Thread(target=self._drain, name="mcpsync-client-writer", daemon=True)
                self._writer.start()

    def close(self, grace: float, on_stuck: Callable[[], None]) -> None:
        """Refuse new frames, give the backlog up to `grace` seconds to go out (a cancel sent just
        before closing, say), then `on_stuck()` (stop the child, which ends the writer's wait) and
        `grace` more. The pipe is closed now, or by the writer as it ends: never under its feet."""
        with self._lock:
            if self._refusal is None:
                self._refusal = "the connection is closed"
            writer = self._writer
        if writer is not None:
            writer.join(grace)
            if writer.is_alive():
                on_stuck()
                writer.join(grace)
        with self._lock:
            if self._writer is None:
                self._close_stream()
            else:
                log.warning("the writer to %r is still waiting to write; the pipe closes when it stops", self._name)
                self._close_when_idle = True

    # -- the writer thread -----------------------------------------------------------------------
    def _drain(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLOUT)
        while True:
            with self._lock:
                wait, cut = self._advance()
                if wait is None:
                    self._writer = None
                    if self._close_when_idle:
                        self._close_stream()
            if cut:
                self._on_cut()
            if wait is None:
                return
            poller.poll(wait * 1000)  # room in the pipe, a closed pipe, or the head frame's deadline

    def _advance(self) -> tuple[float | None, bool]:
        """Under the lock: write what the pipe takes. Returns (seconds to wait for room, or None
        when nothing is left to write; whether a frame was cut halfway)."""
        while self._backlog:
            head = self._backlog[0]
            try:
                written = self._write(head.data)
            except ConnectionLost:
                self._discard()
                return None, False
            head.data = head.data[written:]
            head.started = head.started or written > 0
            self._waiting_bytes -= written
            if not head.data:
                self._backlog.popleft()
                continue
            remaining = head.deadline - time.monotonic()
            if remaining > 0:
                return remaining, False
            if head.started:
                self._refusal = f"the server {self._name!r} stopped reading in the middle of a message"
                self._discard()
                return None, True
            self._backlog.popleft()
            self._waiting_bytes -= len(head.data)
            log.warning("the server %r did not read its input in time; a message to it was dropped", self._name)
        return None, False

    def _write(self, data: Any) -> int:
        """One non-blocking write; how much went out. Raises ConnectionLost (and refuses from then
        on) when the pipe is broken."""
        try:
            return os.write(self._fd, data)
        except BlockingIOError:
            return 0
        except (OSError, ValueError) as exc:
            self._refusal = f"the server {self._name!r} stopped reading: {exc}"
            raise ConnectionLost(self._refusal) from exc

    def _discard(self) -> None:
        self._backlog.clear()
        self._waiting_bytes = 0

    def _close_stream(self) -> None:
        try:
            self._stream.close()
        except OSError:
            pass
