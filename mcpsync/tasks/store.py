"""Where task records are kept: the protocol every backend keeps, and the one in this process.

Strategy: the store holds records, never threads. A task runs in the process that created it
(`TaskRunner`); its record is what every other request about it reads (`tasks/get`, `tasks/list`,
a `tasks/result` waiting on it), so a record must be written before the task's id is handed out
(SEP-2663: a task is gettable once its creation is answered). Two rules keep replicas honest
without a lock held between calls: a record in a terminal status is never overwritten (a task
cancelled on one replica stays cancelled whatever its runner finishes with), and a record past its
time to live is gone, to every reader at once.

Every method is one round trip, as for the session store (`mcpsync.bus.store`), so a key-value
server can keep the same promises in a script.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import ParamSpec, Protocol, TypeVar

from .._creation import Creation
from ..errors import McpsyncError
from ..protocol.jsonrpc import ErrorCode, McpError
from .record import TaskRecord

__all__ = ["MemoryTaskStore", "TaskStore", "TaskStoreDown"]

SWEEP_EVERY = 1.0
"""Seconds between two sweeps of expired records in `MemoryTaskStore` (made on the next access)."""


class TaskStore(Protocol):
    """What the task runner and the task operations need of a backend."""

    def create_task(self, record: TaskRecord, *, cap: int, owner_cap: int) -> Creation:
        """Keep a new record unless `cap` live tasks exist (`FULL`) or its owner holds `owner_cap`
        (`CALLER_FULL`); the count and the write are one step."""
        ...

    def load_task(self, task_id: str) -> TaskRecord | None:
        """The record, or None when there is none or its time to live is over."""
        ...

    def save_task(self, record: TaskRecord) -> TaskRecord:
        """Write `record` over the stored one unless that one is terminal or gone; returns what is
        stored now (the stored terminal record, `record`, or `record` again when it is gone: a
        task past its TTL is not brought back)."""
        ...

    def list_tasks(self, owner: str | None, after: str | None, limit: int) -> tuple[list[TaskRecord], str | None]:
        """Up to `limit` live records of `owner`, oldest first, after the task `after` (a cursor
        this returned); and the cursor of the next page, or None at the end. A cursor naming no
        live task of `owner` raises `LookupError`."""
        ...

    def close(self) -> None:
        """Let go of what the store holds open (a connection); the records stay where they are."""
        ...


class MemoryTaskStore:
    """Task records in this process (the default; the servers handed one instance share it, as
    two replicas in a test do). Expired records are swept at most once a second, on access."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._records: dict[str, TaskRecord] = {}  # in creation order
        self._owned: dict[str | None, dict[str, None]] = {}  # each owner's task ids, in creation order
        self._swept = 0.0

    def _drop_locked(self, task_id: str) -> None:
        record = self._records.pop(task_id)
        owned = self._owned[record.owner]
        del owned[task_id]
        if not owned:
            del self._owned[record.owner]

    def _sweep_locked(self, now: float, *, force: bool = False) -> None:
        if not force and now - self._swept < SWEEP_EVERY:
            return
        self._swept = now
        for task_id in [task_id for task_id, record in self._records.items() if record.expired(now)]:
            self._drop_locked(task_id)

    def _live_locked(self, task_id: str, now: float) -> TaskRecord | None:
        record = self._records.get(task_id)
        if record is not None and record.expired(now):
            self._drop_locked(task_id)
            return None
        return record

    def _full_locked(self, owner: str | None, cap: int, owner_cap: int) -> Creation | None:
        if len(self._owned.get(owner, ())) >= owner_cap:
            return Creation.CALLER_FULL
        if len(self._records) >= cap:
            return Creation.FULL
        return None

    def create_task(self, record: TaskRecord, *, cap: int, owner_cap: int) -> Creation:
        """Counted as kept, not scanned: a creation costs the same with 10 or 10,000 tasks kept
        (what expired since the last sweep is swept at once when a cap would refuse)."""
        now = self._clock()
        with self._lock:
            self._sweep_locked(now)
            if self._full_locked(record.owner, cap, owner_cap) is not None:
                self._sweep_locked(now, force=True)
            full = self._full_locked(record.owner, cap, owner_cap)
            if full is not None:
                return full
            self._records[record.task_id] = record
            self._owned.setdefault(record.owner, {})[record.task_id] = None
            return Creation.CREATED

    def load_task(self, task_id: str) -> TaskRecord | None:
        now = self._clock()
        with self._lock:
            return self._live_locked(task_id, now)

    def save_task(self, record: TaskRecord) -> TaskRecord:
        now = self._clock()
        with self._lock:
            stored = self._live_locked(record.task_id, now)
            if stored is None:
                return record
            if stored.terminal:
                return stored
            self._records[record.task_id] = record
            return record

    def list_tasks(self, owner: str | None, after: str | None, limit: int) -> tuple[list[TaskRecord], str | None]:
        now = self._clock()
        with self._lock:
            self._sweep_locked(now)
            owned = [self._records[task_id] for task_id in self._owned.get(owner, ())]
        mine = [record for record in owned if not record.expired(now)]
        start = 0
        if after is not None:
            start = next((i + 1 for i, record in enumerate(mine) if record.task_id == after), -1)
            if start < 0:
                raise LookupError(after)
        page = mine[start : start + limit]
        more = start + limit < len(mine)
        return page, (page[-1].task_id if more and page else None)

    def close(self) -> None:
        """Nothing to let go of: the records live as long as this object."""


P = ParamSpec("P")
R = TypeVar("R")


class TaskStoreDown(McpError):
    """The task store cannot be reached (a Redis away), so a request about a task was not served:
    nothing was read or changed. -32603 (the request is fine: the same one works once the store
    answers), which the HTTP transport answers 503 with `Retry-After`, as it does the session
    store's outages."""

    def __init__(self) -> None:
        super().__init__(ErrorCode.INTERNAL_ERROR, "the task store cannot be reached; nothing was read or changed, retry later")


def reaching_store(method: Callable[P, R]) -> Callable[P, R]:
    """A request's method on the runner, whose store's failure (its `StoreUnavailable`, an
    `McpsyncError` that is no `McpError`) it raises as `TaskStoreDown`, not as a bug's -32603."""

    @functools.wraps(method)
    def reaching(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except McpError:
            raise
        except McpsyncError as exc:
            raise TaskStoreDown() from exc

    return reaching
