"""The lifecycle of the requests a transport is running, the same over stdio and HTTP.

Strategy: a transport registers each request it accepts (`add`) and hands its work to the one
executor here (`submit`). A request leaves the table exactly once (`settle`, true for the first
caller only, and matched by identity, so a late end of an old request never removes a newer one
with the same id); over stdio that is also what decides who writes the request's one answer. At
shutdown, `drain` waits for the requests in flight with a deadline (cancelling them, or, after end
of input, only once shutdown is asked for); the transport answers each one that outlives it
-32603 `SHUTTING_DOWN` (`shutting_down_frame`), once, so whatever it returns later is dropped;
`stop_workers` then joins the executor, or, past the deadline, drops its queued work and leaves the
stuck threads behind. Nothing here waits without a deadline. A finished request's answer is
encoded the same way everywhere too (`answer_frame`).

The table has its own lock, held only for a lookup or a change: a transport may call in while
holding its output lock, and nothing here calls back out.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

from ...engine.outcome import Failure, Success
from ...protocol import jsonrpc
from ...protocol.jsonrpc import ErrorCode, McpError, Request

log = logging.getLogger("mcpsync")

SHUTTING_DOWN = "the server is shutting down"
"""The -32603 answer of a request that shutdown gave up on, or never ran."""


class Running(Protocol):
    """What the lifecycle needs of a request: a future resolved once it is over, and a cancel."""

    @property
    def answered(self) -> concurrent.futures.Future[None]: ...

    def cancel(self) -> None: ...


R = TypeVar("R", bound=Running)


class AnsweredOnDemand:
    """A request's `answered` future (`Running`), made only when something waits on it (a shutdown
    draining the requests in flight): most requests never are, and a future is a condition, its
    lock and a callback list, a few microseconds a request. It shares its request's `lock`."""

    __slots__ = ("_lock", "_future", "over")

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._future: concurrent.futures.Future[None] | None = None
        self.over = False
        """Whether the request is over (`end`); read under the lock to act on it."""

    def future(self) -> concurrent.futures.Future[None]:
        """The future, made now if it was not (resolved at once when the request is over)."""
        with self._lock:
            if self._future is None:
                self._future = concurrent.futures.Future()
                if self.over:
                    self._future.set_result(None)
            return self._future

    def end(self) -> None:
        """The request is over: its future, if one was made, resolves (once)."""
        with self._lock:
            self.over = True
            future = self._future
        if future is not None and not future.done():
            future.set_result(None)


def shutting_down_frame(request_id: Any) -> bytes:
    """The encoded -32603 answer of a request still unanswered when shutdown gave up on it."""
    return jsonrpc.encode(jsonrpc.error_frame(request_id, McpError(ErrorCode.INTERNAL_ERROR, SHUTTING_DOWN)))


def answer_frame(request: Request, outcome: Success | Failure) -> tuple[bytes, McpError | None]:
    """The encoded answer of a finished request, and its error when it failed. A result that is
    not JSON becomes -32603 (and is logged), so the client still gets its one answer."""
    if isinstance(outcome, Success):
        try:
            return jsonrpc.encode(jsonrpc.result_frame(request.id, outcome.result)), None
        except jsonrpc.EncodeError as exc:
            log.error("result of %s (id %r) is not JSON-serializable: %s", request.method, request.id, exc)
            outcome = Failure(McpError(ErrorCode.INTERNAL_ERROR, "Internal error: result is not JSON-serializable"))
    return jsonrpc.encode(jsonrpc.error_frame(request.id, outcome.error)), outcome.error


class InFlight(Generic[R]):
    """One transport's requests in flight, keyed (a request id, or the request itself), and the
    executor that runs them."""

    def __init__(self, workers: int, thread_name_prefix: str) -> None:
        self._lock = threading.Lock()
        self._table: dict[Hashable, R] = {}
        self._work: set[concurrent.futures.Future[None]] = set()
        self._workers = workers
        self._executor = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix=thread_name_prefix)  # its threads start with the first request

    def add(self, key: Hashable, request: R) -> bool:
        """Register `request`; False (and nothing registered) if `key` is in flight already."""
        with self._lock:
            if key in self._table:
                return False
            self._table[key] = request
            return True

    def get(self, key: Hashable) -> R | None:
        with self._lock:
            return self._table.get(key)

    def settle(self, key: Hashable, request: R) -> bool:
        """`request` ends: it leaves the table. True for the first caller only, so only that one
        answers it. Compared by identity, so a late end of an old request never removes a newer
        one that reuses its id."""
        with self._lock:
            if self._table.get(key) is not request:
                return False
            del self._table[key]
            return True

    def __len__(self) -> int:
        """The requests in flight now."""
        with self._lock:
            return len(self._table)

    def unsettled(self) -> list[tuple[Hashable, R]]:
        """The requests in flight now, with their keys."""
        with self._lock:
            return list(self._table.items())

    def submit(self, fn: Callable[..., None], *args: Any) -> concurrent.futures.Future[None]:
        """Run `fn(*args)` on a worker; its future is waited for by `stop_workers`.

        Raises:
            RuntimeError: the executor has stopped (the transport is shutting down).
        """
        work = self._executor.submit(fn, *args)
        with self._lock:
            self._work.add(work)
        work.add_done_callback(self._work_done)
        return work

    @property
    def busy(self) -> int:
        """The workers taken: running work, or with work queued for them (at most `workers`)."""
        with self._lock:
            return min(len(self._work), self._workers)

    @property
    def workers(self) -> int:
        """How many workers run the work."""
        return self._workers

    @property
    def has_room(self) -> bool:
        """A worker is free, or may start: work submitted now begins at once. (Read without the
        lock: one `len`, and the answer may be stale the moment it is given either way.)"""
        return len(self._work) < self._workers

    def _work_done(self, work: concurrent.futures.Future[None]) -> None:
        with self._lock:
            self._work.discard(work)

    def drain(self, timeout: float, *, stop: concurrent.futures.Future[None] | None = None, grace: float = 0.0) -> int:
        """Let the requests in flight now end; return how many are still running at the end.

        Without `stop` (shutdown), they are cancelled at once and waited for `timeout` seconds.
        With it (end of input), they are left to finish for `timeout` seconds, unless `stop`
        resolves meanwhile (shutdown was asked for during the drain): then they are cancelled
        and get at most `grace` seconds more.
        """
        running = {request.answered for _, request in self.unsettled()}
        patient = stop is not None
        deadline = time.monotonic() + timeout
        while running:
            if stop is None or stop.done():
                if patient:
                    patient = False
                    deadline = min(deadline, time.monotonic() + grace)
                for _, request in self.unsettled():
                    request.cancel()
                waited = concurrent.futures.wait(running, timeout=max(0.0, deadline - time.monotonic()))
            else:
                waited = concurrent.futures.wait(
                    running | {stop}, timeout=max(0.0, deadline - time.monotonic()), return_when=concurrent.futures.FIRST_COMPLETED
                )
            running -= waited.done
            if time.monotonic() >= deadline or (not patient and running):
                break
        return len(running)

    def wait_workers(self, deadline: float) -> int:
        """Wait until `deadline` for the workers' work; return how many are still running."""
        with self._lock:
            work = set(self._work)
        return len(concurrent.futures.wait(work, timeout=max(0.0, deadline - time.monotonic())).not_done)

    def stop_workers(self, clean: bool) -> None:
        """Stop the executor: joined when everything finished in time (`clean`); otherwise queued
        work is dropped and the stuck threads are left to finish on their own."""
        if clean:
            self._executor.shutdown(wait=True)
        else:
            self._executor.shutdown(wait=False, cancel_futures=True)
