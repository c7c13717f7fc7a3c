"""Which of many sockets are ready, for the HTTP server's one loop thread; re-armed from any thread.

Why one-shot: a connection belongs to exactly one party at a time, the poller (waiting for bytes,
for room to write, or for its deadline) or the one worker serving it. A one-shot registration
reports a socket once and then stays silent until its owner arms it again, so no two workers are
ever handed the same connection, and a worker can give its connection back (`arm`) without waking
the loop: with epoll, re-arming from another thread is safe while the loop waits. Elsewhere
(`selectors`, e.g. kqueue on macOS) arming is queued and the loop is woken to apply it.

`wake()` interrupts `wait()` from any thread (through a pipe the poller owns).
"""

from __future__ import annotations

import collections
import os
import select
import selectors
import threading

READ = select.POLLIN
WRITE = select.POLLOUT


class Poller:
    """One-shot readiness of many file descriptors; `wait()` on one thread, `arm()` on any."""

    def __init__(self) -> None:
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._woken = False
        self._lock = threading.Lock()
        self._closed = False

    def watch(self, fd: int) -> None:
        """Start tracking `fd`, unarmed."""
        raise NotImplementedError

    def arm(self, fd: int, events: int) -> None:
        """Report `fd` once when one of `events` (READ, WRITE) holds; safe from any thread."""
        raise NotImplementedError

    def forget(self, fd: int) -> None:
        """Stop tracking `fd` (before it is closed)."""
        raise NotImplementedError

    def wait(self, timeout: float | None) -> list[tuple[int, int]]:
        """The (fd, events) that became ready, waiting at most `timeout` seconds; the wake-up
        pipe is drained here and never reported."""
        raise NotImplementedError

    def wake(self) -> None:
        with self._lock:
            if self._woken or self._closed:
                return
            self._woken = True
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass  # full: the loop is being woken anyway

    def _drain_wake(self) -> None:
        # Drained, then marked unwoken, under the lock wake() marks it under: were the flag cleared
        # first, a wake() between the two would write its byte only for this drain to eat it,
        # leaving the flag set and the pipe empty, and every later wake() would be dropped. A wake()
        # that comes after the drain writes its byte again: at worst one spurious wake.
        with self._lock:
            try:
                while os.read(self._wake_r, 4096):
                    pass
            except OSError:
                pass
            self._woken = False

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        os.close(self._wake_r)
        os.close(self._wake_w)


class EpollPoller(Poller):
    def __init__(self) -> None:
        super().__init__()
        self._epoll = select.epoll()
        self._epoll.register(self._wake_r, select.EPOLLIN)

    def watch(self, fd: int) -> None:
        self._epoll.register(fd, select.EPOLLONESHOT)

    def arm(self, fd: int, events: int) -> None:
        mask = select.EPOLLONESHOT
        if events & READ:
            mask |= select.EPOLLIN | select.EPOLLRDHUP
        if events & WRITE:
            mask |= select.EPOLLOUT
        try:
            self._epoll.modify(fd, mask)
        except (OSError, ValueError):
            pass  # closed meanwhile (a stop cut it): nothing to report

    def forget(self, fd: int) -> None:
        try:
            self._epoll.unregister(fd)
        except (OSError, ValueError):
            pass

    def wait(self, timeout: float | None) -> list[tuple[int, int]]:
        ready = []
        for fd, mask in self._epoll.poll(-1 if timeout is None else max(0.0, timeout)):
            if fd == self._wake_r:
                self._drain_wake()
                continue
            events = 0
            if mask & (select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR):
                events |= READ
            if mask & (select.EPOLLOUT | select.EPOLLERR):
                events |= WRITE
            ready.append((fd, events))
        return ready

    def close(self) -> None:
        super().close()
        self._epoll.close()


class QueuedPoller(Poller):
    """Where there is no epoll: `selectors`, changed only by the loop thread; `arm()` queues."""

    def __init__(self) -> None:
        super().__init__()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._pending: collections.deque[tuple[int, int]] = collections.deque()

    def watch(self, fd: int) -> None:
        pass

    def arm(self, fd: int, events: int) -> None:
        self._pending.append((fd, events))
        self.wake()

    def forget(self, fd: int) -> None:
        self._pending.append((fd, 0))
        self.wake()

    def wait(self, timeout: float | None) -> list[tuple[int, int]]:
        while self._pending:
            fd, events = self._pending.popleft()
            self._set(fd, events)
        ready = []
        for key, mask in self._selector.select(timeout):
            if key.fd == self._wake_r:
                self._drain_wake()
                continue
            self._set(key.fd, 0)  # one shot
            events = (READ if mask & selectors.EVENT_READ else 0) | (WRITE if mask & selectors.EVENT_WRITE else 0)
            ready.append((key.fd, events))
        return ready

    def _set(self, fd: int, events: int) -> None:
        mask = (selectors.EVENT_READ if events & READ else 0) | (selectors.EVENT_WRITE if events & WRITE else 0)
        try:
            if fd in self._selector.get_map():
                if mask:
                    self._selector.modify(fd, mask)
                else:
                    self._selector.unregister(fd)
            elif mask:
                self._selector.register(fd, mask)
        except (OSError, ValueError, KeyError):
            pass  # closed meanwhile

    def close(self) -> None:
        super().close()
        self._selector.close()


def new_poller() -> Poller:
    return EpollPoller() if hasattr(select, "epoll") else QueuedPoller()
