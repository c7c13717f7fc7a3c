"""A bounded pool of worker threads, owned and stopped by what made it: a client's session or
connection, or the HTTP server (`mcpsync-http-N`).

Why not one thread per job: the jobs come from the wire (a POST per request, a callback per server
request), so a server that floods the client would make it start threads at will. Why not
`concurrent.futures.ThreadPoolExecutor`: its queue has no bound (a flood only moves from threads to
memory), and its threads are joined when the interpreter exits, so a callback waiting for a person,
or a TCP connect that cannot be interrupted, would hold the process; these workers are daemons, and
`close()` joins them within a deadline instead.

At most `workers` threads run jobs; they start when work comes and end after `IDLE` seconds
without any. At most `backlog` jobs wait for a free worker; `submit()` beyond that refuses (returns
False) at once rather than block, since the caller is often a reader thread that must keep
reading. What a refusal means is the owner's to say.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("mcpsync")

IDLE = 5.0
"""Seconds a worker waits for another job before it ends."""


class WorkerPool:
    """Runs jobs on at most `workers` daemon threads named `<name>-N`, with at most `backlog` waiting."""

    def __init__(self, name: str, *, workers: int, backlog: int) -> None:
        if workers < 1 or backlog < 0:
            raise ValueError("a pool needs at least one worker and a backlog >= 0")
        self._name = name
        self._workers = workers
        self._backlog = backlog
        self._jobs: collections.deque[Callable[[], None]] = collections.deque()
        self._cond = threading.Condition()
        self._threads: set[threading.Thread] = set()
        self._idle = 0
        self._count = 0
        self._closed = False

    def submit(self, job: Callable[[], None]) -> bool:
        """Run `job` on a worker, now or once one is free; False (and nothing runs) when the pool
        is closed, or every worker is busy and the backlog is full."""
        with self._cond:
            if self._closed:
                return False
            if len(self._jobs) < self._idle:  # a free worker takes it
                self._jobs.append(job)
                self._cond.notify()
                return True
            if len(self._threads) < self._workers:
                self._count += 1
                thread = threading.Thread(target=self._work, name=f"{self._name}-{self._count}", daemon=True)
                self._threads.add(thread)
                self._idle += 1  # free until it takes the job
                self._jobs.append(job)
                thread.start()
                return True
            if len(self._jobs) - self._idle >= self._backlog:
                return False
            self._jobs.append(job)
            return True

    @property
    def has_room(self) -> bool:
        """A hint (read without the lock): a job submitted now would start at once, on a free
        worker or a new one."""
        return self._idle > len(self._jobs) or len(self._threads) < self._workers

    def close(self, timeout: float) -> list[str]:
        """Drop the jobs that have not started, wake idle workers, and wait up to `timeout` seconds
        for the running ones (not the calling thread, if it is a worker); returns the names of the
        workers still running then. Idempotent."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._closed = True
            self._jobs.clear()
            self._cond.notify_all()
            threads = [thread for thread in self._threads if thread is not threading.current_thread()]
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [thread.name for thread in threads if thread.is_alive()]

    def _work(self) -> None:
        current = threading.current_thread()
        while True:
            with self._cond:
                if not self._cond.wait_for(lambda: self._jobs or self._closed, IDLE) or not self._jobs:
                    self._idle -= 1
                    self._threads.discard(current)
                    return
                job = self._jobs.popleft()
                self._idle -= 1
            try:
                job()
            except Exception:
                log.exception("a %s job failed", self._name)
            with self._cond:
                self._idle += 1
