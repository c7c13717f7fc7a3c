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

import threading
import time
from collections.abc import Callable
from typing import Protocol

from .._creation import Creation
from .record import TaskRecord

__all__ = ["MemoryTaskStore", "TaskStore"]

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
        self._swept = 0.0

    def _sweep_locked(self, now: float) -> None:
        if now - self._swept < SWEEP_EVERY:
            return
        self._swept = now
        for task_id in [task_id for task_id, record in self._records.items() if record.expired(now)]:
            del self._records[task_id]

    def _live_locked(self, task_id: str, now: float) -> TaskRecord | None:
        record = self._records.get(task_id)
        if record is not None and record.expired(now):
            del self._records[task_id]
            return None
        return record

    def create_task(self, record: TaskRecord, *, cap: int, owner_cap: int) -> Creation:
        now = self._clock()
        with self._lock:
            self._sweep_locked(now)
            live = [held for held in self._records.values() if not held.expired(now)]
            if sum(1 for held in live if held.owner == record.owner) >= owner_cap:
                return Creation.CALLER_FULL
            if len(live) >= cap:
                return Creation.FULL
            self._records[record.task_id] = record
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
            mine = [record for record in self._records.values() if record.owner == owner and not record.expired(now)]
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
