"""The non-waiting writer of a child's stdin (mcpsync.client._outbox), on a real os.pipe().

The test plays the child: it reads the pipe's other end, or does not. A full pipe is made by
writing into it until it refuses (non-blocking), so no test depends on the pipe's size.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from mcpsync.client._outbox import Outbox
from mcpsync.errors import CallTimeout, ConnectionLost

from .._timeouts import LONG, SHORT

pytestmark = pytest.mark.timeout(60)


class Pipe:
    """An os.pipe whose write end an Outbox owns; the test reads (or not) the other end."""

    def __init__(self, **options: object) -> None:
        self.read_fd, write_fd = os.pipe()
        self.cuts = threading.Event()
        self.outbox = Outbox(os.fdopen(write_fd, "wb", buffering=0), "child", on_cut=self.cuts.set, **options)  # type: ignore[arg-type]

    def fill(self) -> int:
        """Fill the pipe to the brim, behind the outbox's back; returns how many bytes it holds."""
        os.set_blocking(self.read_fd, False)
        filler = b"." * 65536
        total = 0
        while True:
            try:
                total += os.write(self.outbox._fd, filler)
            except BlockingIOError:
                return total

    def read_exactly(self, count: int) -> bytes:
        """Read `count` bytes (blocking reads, bounded by LONG)."""
        os.set_blocking(self.read_fd, True)
        data = bytearray()
        deadline = time.monotonic() + LONG
        while len(data) < count:
            assert time.monotonic() < deadline, f"only {len(data)} of {count} bytes arrived"
            data += os.read(self.read_fd, count - len(data))
        return bytes(data)

    def close(self) -> None:
        self.outbox.close(SHORT, on_stuck=lambda: None)
        os.close(self.read_fd)


@pytest.fixture
def pipe():
    made: list[Pipe] = []

    def make(**options: object) -> Pipe:
        made.append(Pipe(**options))
        return made[-1]

    yield make
    for each in made:
        each.close()


def test_a_frame_that_does_not_fit_is_queued_and_written_in_order_once_the_child_reads(pipe) -> None:
    p = pipe()
    held = p.fill()
    started = time.monotonic()
    p.outbox.put(b"first\n", time.monotonic() + LONG)
    p.outbox.put(b"second\n", time.monotonic() + LONG)
    assert time.monotonic() - started < SHORT, "put waited for the pipe"
    assert p.read_exactly(held) == b"." * held
    assert p.read_exactly(len(b"first\nsecond\n")) == b"first\nsecond\n"


def test_a_frame_nothing_of_which_went_out_by_its_deadline_is_dropped_and_the_stream_stays_whole(pipe) -> None:
    p = pipe()
    held = p.fill()
    p.outbox.put(b"late\n", time.monotonic() + 0.05)
    writer = p.outbox._writer
    assert writer is not None
    writer.join(LONG)  # it gives up at the deadline: nothing of the frame went out
    assert not writer.is_alive()
    p.outbox.put(b"next\n", time.monotonic() + LONG)  # the pipe is still full: queued again
    assert p.read_exactly(held) == b"." * held
    assert p.read_exactly(len(b"next\n")) == b"next\n"
    assert not p.cuts.is_set()


def test_a_frame_cut_halfway_stops_the_child_and_refuses_what_follows(pipe) -> None:
    p = pipe()
    held = p.fill()
    assert p.read_exactly(4096) == b"." * 4096  # room for the start of the next frame only
    p.outbox.put(b"x" * (held * 2), time.monotonic() + 0.05)
    assert p.cuts.wait(LONG), "a frame cut halfway did not stop the child"
    with pytest.raises(ConnectionLost, match="in the middle of a message"):
        p.outbox.put(b"after\n", time.monotonic() + LONG)


def test_a_full_backlog_refuses_at_once(pipe) -> None:
    p = pipe(max_backlog=10)
    p.fill()
    p.outbox.put(b"0123456789abc\n", time.monotonic() + LONG)  # the first is taken, whatever its size
    with pytest.raises(CallTimeout, match="not reading its input"):
        p.outbox.put(b"more\n", time.monotonic() + LONG)


def test_a_broken_pipe_is_a_lost_connection(pipe) -> None:
    p = pipe()
    os.close(p.read_fd)
    p.read_fd = os.open(os.devnull, os.O_RDONLY)  # for the fixture to close
    with pytest.raises(ConnectionLost, match="stopped reading"):
        p.outbox.put(b"hello\n", time.monotonic() + LONG)
