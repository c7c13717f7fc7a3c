"""The command line's log handler: lines to stderr that never make a logging thread wait on its reader.

Why: a host that pipes a server's stderr and does not read it (or a log collector that stalls)
fills the pipe (64 KiB on Linux), and a `logging.StreamHandler` then blocks in its write while
holding the handler's lock; every thread that logs next waits on that lock, the shutdown path
included, so SIGTERM could not end `mcpsync serve`.

Strategy: when stderr is a pipe, a socket or a terminal (anything but a regular file, whose writes
do not wait on a reader), `PipeHandler` formats each record in the logging thread and hands the
whole line to an owned writer thread (`mcpsync-stderr`) through a queue bounded in bytes; a line
that does not fit is dropped and counted, never cut, and once lines fit again the next one is
preceded by one line saying how many were dropped ("N log line(s) dropped: stderr is not read").
The writer writes to the stream's file descriptor directly (`os.write`, not through `sys.stderr`,
so a writer stuck on a full pipe holds no lock of Python's own `sys.stderr`). At exit
(`logging.shutdown`) what is queued gets `DEADLINE` seconds to be written; past it, it is lost and
the writer, a daemon thread, ends with the process. File descriptor 2 itself is left blocking
(setting O_NONBLOCK would change it for everyone sharing it: the host's terminal, `print()`).

A stream without a file descriptor (a test's captured stderr) or a regular file keeps a plain
`logging.StreamHandler`: nothing there can wait on a reader, and its writes stay in step with the
caller.
"""

from __future__ import annotations

import collections
import logging
import os
import stat
import sys
import threading
import time
import weakref
from typing import TextIO

__all__ = ["DEADLINE", "FORMAT", "QUEUE_BYTES", "PipeHandler", "stderr_handler"]

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The command line's log line."""

QUEUE_BYTES = 1 << 20
"""Log lines held for a slow stderr reader before lines are dropped (a line larger than this
still goes when nothing else waits)."""

DEADLINE = 1.0
"""Seconds `flush` (and so the exit) waits for queued lines to be written."""

WRITER_THREAD = "mcpsync-stderr"


def stderr_handler(stream: TextIO | None = None, *, json: bool = False) -> logging.Handler:
    """The handler for `stream` (default `sys.stderr`), with the command line's format (`json`:
    one JSON object per line, `mcpsync._json_log`): a `PipeHandler` when the stream's descriptor
    could make a write wait (pipe, socket, terminal), else a `logging.StreamHandler`."""
    stream = sys.stderr if stream is None else stream
    handler: logging.Handler
    fd = _descriptor(stream)
    if fd is not None and not stat.S_ISREG(os.fstat(fd).st_mode):
        handler = PipeHandler(fd, encoding=getattr(stream, "encoding", None) or "utf-8")
    else:
        handler = logging.StreamHandler(stream)
    if json:
        from ._json_log import JsonFormatter

        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(FORMAT))
    return handler


def _descriptor(stream: TextIO) -> int | None:
    try:
        fd = stream.fileno()
        os.fstat(fd)
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    return fd


class PipeHandler(logging.Handler):
    """Log lines to file descriptor `fd` through a bounded queue and an owned writer thread; see
    the module docstring. `emit` never waits on the reader: it queues the line or drops it."""

    def __init__(self, fd: int, *, encoding: str = "utf-8", bound: int = QUEUE_BYTES, deadline: float = DEADLINE) -> None:
        super().__init__()
        self._fd = fd
        self._encoding = encoding
        self._bound = bound
        self._deadline = deadline
        self._reset()
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _after_fork(ref))

    def _reset(self) -> None:
        """Fresh state: at creation, and in a forked child (the parent writes what it had queued,
        and a lock the parent's writer held would stay held here)."""
        self._cond = threading.Condition(threading.Lock())
        self._lines: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._dropped = 0
        self._busy = False  # the writer holds a line it is writing
        self._closing = False
        self._stalled = False  # a flush gave up: close does not wait again
        self._broken = False  # the reader is gone (EPIPE): lines go nowhere
        self._writer: threading.Thread | None = None

    # -- the logging thread's side ---------------------------------------------------------------
    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = (self.format(record) + "\n").encode(self._encoding, "backslashreplace")
        except Exception:
            self.handleError(record)
            return
        with self._cond:
            if self._closing or self._broken:
                return
            if self._lines and self._queued + len(line) > self._bound:
                self._dropped += 1
                return
            if self._dropped:
                self._put(self._notice())
            self._put(line)
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_lines, name=WRITER_THREAD, daemon=True)
                self._writer.start()
            self._cond.notify()

    def _put(self, line: bytes) -> None:
        self._lines.append(line)
        self._queued += len(line)

    def _notice(self) -> bytes:
        """The line saying how many lines were dropped since the last one written (resets the count)."""
        count, self._dropped = self._dropped, 0
        record = logging.LogRecord("mcpsync", logging.WARNING, __file__, 0, "%d log line(s) dropped: stderr is not read", (count,), None)
        return (self.format(record) + "\n").encode(self._encoding, "backslashreplace")

    # -- the writer ----------------------------------------------------------------------------------
    def _write_lines(self) -> None:
        while True:
            with self._cond:
                self._busy = False
                self._cond.notify_all()  # a flush may be waiting for the queue to empty
                while not self._lines and not self._closing:
                    self._cond.wait()
                if not self._lines:
                    return
                line = self._lines.popleft()
                self._queued -= len(line)
                self._busy = True
            if not self._write(line):
                with self._cond:
                    self._broken = True
                    self._lines.clear()
                    self._queued = 0
                    self._busy = False
                    self._cond.notify_all()
                return

    def _write(self, line: bytes) -> bool:
        """Write all of `line` (os.write may take part of it); False when the reader is gone."""
        view = memoryview(line)
        while view:
            try:
                view = view[os.write(self._fd, view):]
            except OSError:  # EPIPE, EBADF: nobody will read any more
                return False
        return True

    # -- flushing and closing --------------------------------------------------------------------
    def flush(self) -> None:
        """Wait up to `deadline` for the queued lines to be written (logging.shutdown calls this
        at exit); past it they are given up."""
        end = time.monotonic() + self._deadline
        with self._cond:
            while self._lines or self._busy:
                left = end - time.monotonic()
                if left <= 0:
                    self._stalled = True
                    return
                self._cond.wait(left)

    def close(self) -> None:
        """Write what is queued (a last count of dropped lines included) within the deadline, then
        stop and join the writer; a writer still stuck on the reader is left to end with the process."""
        with self._cond:
            if self._dropped and not self._broken and not self._closing:
                self._put(self._notice())
                self._cond.notify()
        if not self._stalled:
            self.flush()
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            writer = self._writer
        if writer is not None and writer is not threading.current_thread():
            writer.join(0 if self._stalled else self._deadline)
        super().close()


def _after_fork(ref: weakref.ref[PipeHandler]) -> None:
    handler = ref()
    if handler is not None:
        handler._reset()
