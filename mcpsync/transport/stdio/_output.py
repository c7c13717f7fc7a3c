"""The one writer of a stdio wire: frames in order, and never a wait on the client past a deadline.

Strategy: one re-entrant lock (`lock`) orders everything that must be ordered with the wire (the
in-flight table's completions, the subscription registry, the era lock's commit). A caller
serializes outside it, then holds it to hand over one frame (`write_locked`); frames reach the wire
in the order they were handed over, which is what the callers' critical sections rely on (a
listen's acknowledgement before its tagged notifications, a list change's untagged copy before the
tagged ones). Handing a frame over never makes its caller wait on the client for long:

- With nothing waiting, the frame is written at once by the caller, in one non-blocking `os.write`
  (the usual case: one system call, no other thread).
- What the pipe does not take waits in a queue, in order, for the writer thread
  (`mcpsync-stdio-writer`, started the first time a frame must wait), which owns every wait for
  room in the pipe. Handing a frame over never waits, so the output lock is never held while the
  client is waited for (the reader can always cancel, and always see the end of its input).
  The queue's bound in bytes (`max_queued`) is kept by the threads that make the bulk of the
  output, tools' answers and notifications, which wait for room (`wait_for_room`) before they take
  the lock, while the client reads, however slowly; everything is delivered, once, in order. What
  the reader writes itself (a parse error, a refusal) is bounded by what it reads, and it stops
  reading while the queue is far past its bound (`backlogged`).
- A client that has read nothing for `write_timeout` seconds while frames waited is treated as
  gone: the output breaks (logged once), later frames are dropped, and the owner is told once
  (`on_broken`), as when the client closes its end.
- Shutting down, and at the end of input: `stop_waiting()` (safe from a signal handler) ends every
  wait for room at once: an answer then goes in past the bound (one per request, and the `complete`
  results and shutdown answers must be queued whatever the client does), and a notification that
  finds no room is dropped (`wait_for_room` says so), so the queue stays bounded while running
  tools finish; `finish(timeout)` then gives the writer that long to deliver the queue, stops it
  and joins it. No thread waits on the client past that.

Only a pipe or a socket can be written without blocking, so only they get these deadlines; a
terminal or a file is written directly, as it takes what it is given. The descriptor is made
non-blocking while serving, and `finish` puts its mode back.
"""

from __future__ import annotations

import collections
import logging
import os
import select
import stat
import threading
import time
from collections.abc import Callable

log = logging.getLogger("mcpsync")

DEFAULT_WRITE_TIMEOUT = 60.0
"""Seconds a client may leave its output unread, while frames wait, before it is treated as gone."""
DEFAULT_MAX_QUEUED = 8 * 1024 * 1024
"""Bytes that may wait for the client before a tool's answer or notification waits for room (a
larger frame still goes in alone, once the queue is empty)."""
READER_ALLOWANCE = 1024 * 1024
"""Bytes past `max_queued` at which the reader stops reading its input until the client reads."""
WRITER_THREAD = "mcpsync-stdio-writer"
_CHUNK = 1 << 16  # bytes the writer joins into one write, from frames queued behind each other
_CORK_FRAMES = 8
"""Answers `cork` holds before it writes them: enough to spare most system calls and the client's
wake-ups, few enough that the client works on the first ones while the rest are made (holding a
whole read's worth made a pipelining client wait for all of them: at concurrency 16, 20 % fewer
requests a second than holding 8)."""
_IDLE_WAIT = 5.0  # seconds an idle writer or a caller waiting for room sleeps before looking again


class Output:
    """The wire's write side; see the module docstring."""

    def __init__(self, fd: int, on_broken: Callable[[], None], *, write_timeout: float = DEFAULT_WRITE_TIMEOUT,
                 max_queued: int = DEFAULT_MAX_QUEUED, on_room: Callable[[], None] = lambda: None) -> None:
        if write_timeout <= 0:
            raise ValueError("write_timeout must be positive")
        self.lock = threading.RLock()
        self._fd = fd
        self._on_broken = on_broken
        self._on_room = on_room  # told, from the writer thread, when the queue is no longer `backlogged`
        self._write_timeout = write_timeout
        self._max_queued = max_queued
        # Re-entrant: `stop_waiting` may run in a signal handler on a thread that holds it.
        self._state_lock = threading.RLock()
        """`_state`'s lock, entered directly where every frame or read passes (`write_locked`,
        `cork`, `uncork`): a Condition's `__enter__` is Python code, a call more per frame."""
        self._state = threading.Condition(self._state_lock)
        self._queue: collections.deque[memoryview] = collections.deque()
        self._queued = 0  # bytes in `_queue`
        self._waiting_since = 0.0  # when the queue last had to start waiting, or last moved
        self._writing = False  # the writer is writing the queue's head, outside `_state`
        self._broken = False
        self._closed = False  # `finish` began: nothing more is taken
        self._unbounded = False  # `stop_waiting`: nobody waits for room any more
        self._give_up_at: float | None = None  # `finish`: the writer's deadline
        self._corked: list[bytes] | None = None  # frames held while the reader works through one read (`cork`)
        self._corked_size = 0
        self._writer: threading.Thread | None = None
        self._wake_r = self._wake_w = -1  # the writer's wake-up pipe, made with the writer
        kind = os.fstat(fd).st_mode
        self._deadlines = stat.S_ISFIFO(kind) or stat.S_ISSOCK(kind)
        self._was_blocking = os.get_blocking(fd)
        if self._deadlines:
            os.set_blocking(fd, False)

    @property
    def usable(self) -> bool:
        return not (self._broken or self._closed)

    def write_locked(self, frame: bytes) -> bool:
        """Hand over one whole frame, never waiting; the caller holds `lock`. False if it will not be
        written (the client went away, or the output is finishing)."""
        if self._broken or self._closed:
            return False
        if not self._deadlines:
            return self._write_through(frame)
        with self._state_lock:
            corked = self._corked
            if corked is not None:
                corked.append(frame)
                self._corked_size += len(frame)
                if self._corked_size >= _CHUNK or len(corked) >= _CORK_FRAMES:
                    return self._flush_corked()
                return True
            return self._hand_to_pipe(frame)

    def cork(self) -> None:
        """Hold what is handed over from now until `uncork`, and write it then, in one system call
        (the reader, before it runs the requests one read brought: at concurrency their answers
        come out together instead of a write, and a wake-up of the client, each). Frames stay in
        the order handed over, whichever thread hands them; at most `_CORK_FRAMES` frames and `_CHUNK`
        bytes are held before they are written."""
        if self._deadlines:
            with self._state_lock:
                if self._corked is None and not (self._broken or self._closed):
                    self._corked = []

    def uncork(self) -> None:
        """Write what `cork` held, and hold nothing more (any thread: the reader once it has run
        what it read, the watch when a request holds the reader, `finish`)."""
        if self._corked is not None:
            with self._state_lock:
                if self._corked is not None:
                    self._flush_corked()
                    self._corked = None

    def _flush_corked(self) -> bool:
        """Under `_state`: the held frames to the pipe, as one."""
        assert self._corked is not None
        held, self._corked, self._corked_size = self._corked, [], 0
        if not held:
            return True
        return self._hand_to_pipe(held[0] if len(held) == 1 else b"".join(held))

    def _hand_to_pipe(self, data: bytes) -> bool:
        """Under `_state`: written now when nothing waits ahead of it, else queued for the writer."""
        if self._broken or self._closed:
            return False
        if not self._queue and not self._writing:  # nothing ahead of it: the pipe, now
            written = self._write_now(data)
            if written is None:
                return False
            if written == len(data):
                return True
            self._enqueue(memoryview(data)[written:])
            return True
        self._enqueue(memoryview(data))
        return True

    def wait_for_room(self, size: int) -> bool:
        """Before taking `lock` to hand over `size` bytes: wait while the queue holds more than
        `max_queued` with them, for as long as the client reads. True when there is room; False
        when there is none and no waiting either (`stop_waiting`, or the output broke or is
        finishing): an answer then goes in all the same, a notification is better dropped. Never
        call it holding `lock`: the reader must be able to take it meanwhile."""
        if not self._deadlines or not self._queue:  # nothing queued is room (read unlocked: as if just before a frame was queued)
            return not (self._broken or self._closed)
        with self._state:
            while self._queue and self._queued + size > self._max_queued:
                if self._unbounded or self._broken or self._closed:
                    return False
                self._state.wait(_IDLE_WAIT)  # the writer's progress, a break, or stop_waiting()
            return not (self._broken or self._closed)

    @property
    def backlogged(self) -> bool:
        """Whether the queue is so far past its bound that the reader should stop reading its input
        (what it would answer itself, a parse error or a refusal, only adds to the queue)."""
        return self._queued > self._max_queued + READER_ALLOWANCE

    def write(self, frame: bytes) -> bool:
        with self.lock:
            return self.write_locked(frame)

    def stop_waiting(self) -> None:
        """From now on frames are queued without waiting for room (shutdown: the last answers must
        go in whatever the client does). Safe from a signal handler and any thread."""
        with self._state:
            self._unbounded = True
            self._state.notify_all()

    def finish(self, timeout: float) -> bool:
        """Take nothing more, give the writer `timeout` seconds to deliver what is queued, stop it
        and join it; True when everything handed over was written. The fd stays the caller's."""
        self.uncork()
        with self._state:
            self._closed = self._unbounded = True
            self._give_up_at = time.monotonic() + max(0.0, timeout)
            writer = self._writer
            self._state.notify_all()
        if writer is not None:
            self._wake()
            writer.join(timeout + 1.0)
            if writer.is_alive():  # cannot be: its every wait ends by the deadline
                log.error("the stdio writer did not stop in time")
        with self._state:
            left = self._queued
            self._queue.clear()
            self._queued = 0
        if left:
            log.warning("the client did not read the last %d bytes of output in time; they were dropped", left)
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1
        if self._deadlines:
            try:
                os.set_blocking(self._fd, self._was_blocking)
            except OSError:
                pass
        return not left and not self._broken

    def close(self) -> None:
        """No more writes, at once: what is queued is dropped (`finish(0)`)."""
        self.finish(0.0)

    # -- writing -----------------------------------------------------------------------------------
    def _write_through(self, frame: bytes) -> bool:
        """A terminal or a file: write the whole frame now, as it comes."""
        try:
            view = memoryview(frame)
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as exc:
            self._break(f"output closed by the peer ({exc.strerror or exc}); stopping")
            return False
        return True

    def _write_now(self, data: bytes | memoryview) -> int | None:
        """One non-blocking write: how much went out (0 when the pipe is full); None when the
        pipe is broken (and the output breaks)."""
        try:
            return os.write(self._fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            self._break(f"output closed by the peer ({exc.strerror or exc}); stopping")
            return None

    def _enqueue(self, data: memoryview) -> None:
        """Under `_state`: queue `data` behind the rest, and have the writer see to it."""
        if not self._queue:
            self._waiting_since = time.monotonic()
        self._queue.append(data)
        self._queued += len(data)
        if self._writer is None:
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_r, False)
            os.set_blocking(self._wake_w, False)
            self._writer = threading.Thread(target=self._run, name=WRITER_THREAD, daemon=True)
            self._writer.start()
        self._state.notify_all()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass  # full: the writer is being woken already

    def _run(self) -> None:
        """The writer thread: write the queue as the client makes room, until `finish` or a break."""
        poller = select.poll()
        poller.register(self._fd, select.POLLOUT)
        poller.register(self._wake_r, select.POLLIN)
        while True:
            with self._state:
                while not self._queue and not self._closed and not self._broken:
                    self._state.wait(_IDLE_WAIT)
                if not self._queue or self._broken:
                    return
                data = self._head()
                self._writing = True
            written = self._write_now(data)
            relieved, wait = False, None
            with self._state:
                self._writing = False
                if written:
                    was_backlogged = self.backlogged
                    self._consume(written)
                    self._waiting_since = time.monotonic()
                    self._state.notify_all()  # room for the callers waiting
                    relieved = was_backlogged and not self.backlogged
                elif written is not None:
                    wait = self._patience()
            if relieved:
                self._on_room()  # the reader may read its input again
            if written:
                continue
            if wait is None:
                return
            for fd, _ in poller.poll(wait * 1000):
                if fd == self._wake_r:
                    drain_pipe(self._wake_r)

    def _head(self) -> memoryview | bytes:
        """Under `_state`: what to write next, the head frame joined with those behind it up to _CHUNK."""
        head = self._queue[0]
        if len(head) >= _CHUNK or len(self._queue) == 1:
            return head
        parts, size = [], 0
        for part in self._queue:
            if size + len(part) > _CHUNK:
                break
            parts.append(part)
            size += len(part)
        return b"".join(parts)

    def _consume(self, count: int) -> None:
        """Under `_state`: `count` bytes of the queue went out."""
        self._queued -= count
        while count:
            head = self._queue[0]
            if len(head) <= count:
                self._queue.popleft()
                count -= len(head)
            else:
                self._queue[0] = head[count:]
                count = 0

    def _patience(self) -> float | None:
        """Under `_state`, with the pipe full: seconds to wait for room, or None when the client
        has stalled past `write_timeout` or `finish`'s deadline has come (the output breaks)."""
        now = time.monotonic()
        until = self._waiting_since + self._write_timeout
        if self._give_up_at is not None and self._give_up_at < until:
            if self._give_up_at <= now:
                self._broken = True  # finishing: the rest is dropped by finish(), quietly
                self._state.notify_all()
                return None
            return self._give_up_at - now
        if until <= now:
            self._break(f"the client has not read its output for {self._write_timeout:g} s; ending the connection as if it had closed it",
                        level=logging.WARNING)
            return None
        return until - now

    def _break(self, why: str, level: int = logging.INFO) -> None:
        """The client is gone: drop what waits, refuse what comes, tell the owner once."""
        with self._state:
            if self._broken:
                return
            self._broken = True
            self._queue.clear()
            self._queued = 0
            if self._corked is not None:
                self._corked = []
                self._corked_size = 0
            self._state.notify_all()
        log.log(level, why)
        self._on_broken()


def drain_pipe(fd: int) -> None:
    """Read a non-blocking wake-up pipe empty (its bytes only ever mean "look again")."""
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass
