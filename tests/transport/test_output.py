"""The stdio wire's writer (`transport/stdio/_output.Output`) on real pipes: order kept however many threads
write and however late the reader reads, a client that reads nothing is given up on once, and no
caller and no shutdown waits on a pipe past its deadline."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Iterator

import pytest

from mcpsync.transport.stdio._output import WRITER_THREAD, Output
from tests._timeouts import LONG

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    for fd in (read_fd, write_fd):
        try:
            os.close(fd)
        except OSError:
            pass


def _read_all(fd: int, size: int) -> bytes:
    got = bytearray()
    while len(got) < size:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        got += chunk
    return bytes(got)


def test_frames_from_many_threads_arrive_whole_and_in_each_threads_order(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    output = Output(write_fd, lambda: None)
    threads, per_thread = 8, 200

    def produce(who: int) -> None:
        for n in range(per_thread):
            assert output.write(f"{who}:{n}:".encode() + b"y" * (n * 37 % 5000) + b"\n")

    workers = [threading.Thread(target=produce, args=(who,)) for who in range(threads)]
    for worker in workers:
        worker.start()
    expected = sum(len(f"{who}:{n}:") + n * 37 % 5000 + 1 for who in range(threads) for n in range(per_thread))
    data = _read_all(read_fd, expected)  # read only now: most of it waited for the writer thread
    for worker in workers:
        worker.join(LONG)
    assert output.finish(LONG)
    seen: dict[int, list[int]] = {}
    for line in data.split(b"\n")[:-1]:
        who, n, body = line.split(b":")
        assert body == b"y" * (int(n) * 37 % 5000)
        seen.setdefault(int(who), []).append(int(n))
    assert seen == {who: list(range(per_thread)) for who in range(threads)}


def test_a_reader_that_reads_nothing_is_given_up_on_once(pipe: tuple[int, int]) -> None:
    _, write_fd = pipe
    broken = threading.Event()
    calls = []
    output = Output(write_fd, lambda: (calls.append(1), broken.set()), write_timeout=0.3)
    frame = b"z" * 60_000 + b"\n"
    for _ in range(4):  # more than the pipe holds: the rest waits for a reader that never comes
        assert output.write(frame)
    assert broken.wait(LONG)
    assert not output.usable and output.write(frame) is False
    assert output.finish(1.0) is False
    assert calls == [1]


def test_a_caller_waiting_for_room_is_let_through_by_stop_waiting(pipe: tuple[int, int]) -> None:
    _, write_fd = pipe
    output = Output(write_fd, lambda: None, write_timeout=600, max_queued=120_000)
    frame = b"w" * 60_000 + b"\n"
    for _ in range(3):  # the pipe full (64 KiB), and the queue near its bound (114,467 bytes)
        output.write(frame)
    accepted = threading.Event()
    waiting = threading.Thread(target=lambda: output.write(frame) and accepted.set())
    waiting.start()
    output.stop_waiting()  # a shutdown: the last answers go in whatever the client reads
    assert accepted.wait(LONG)
    waiting.join(LONG)
    started = time.monotonic()
    assert output.finish(0.5) is False  # nobody read: given up at the deadline, not later
    assert time.monotonic() - started < LONG


def test_finish_delivers_what_is_queued_to_a_late_reader(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    output = Output(write_fd, lambda: None)
    frames = [bytes([65 + n % 26]) * 50_000 + b"\n" for n in range(20)]
    for frame in frames:
        output.write(frame)
    reader = threading.Thread(target=lambda: received.append(_read_all(read_fd, sum(map(len, frames)))))
    received: list[bytes] = []
    reader.start()
    assert output.finish(LONG)
    reader.join(LONG)
    assert received == [b"".join(frames)]
    assert not any(thread.name == WRITER_THREAD for thread in threading.enumerate())
    assert os.get_blocking(write_fd)  # the descriptor's mode is put back


def test_a_closed_reader_breaks_the_output_and_tells_the_owner(pipe: tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    broken = threading.Event()
    output = Output(write_fd, broken.set)
    os.close(read_fd)
    assert output.write(b"{}\n") is False
    assert broken.is_set() and not output.usable
    output.finish(0)


def test_a_file_is_written_through_without_a_writer_thread() -> None:
    with tempfile.TemporaryFile() as file:
        output = Output(file.fileno(), lambda: None)
        for n in range(100):
            assert output.write(b"%d\n" % n)
        assert output.finish(0)
        file.seek(0)
        assert file.read() == b"".join(b"%d\n" % n for n in range(100))
    assert not any(thread.name == WRITER_THREAD for thread in threading.enumerate())
