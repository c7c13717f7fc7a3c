"""What changed, to whoever must hear it: this process's transports, and through the bus the
other replicas'. The `Server` owns one.

Strategy: a change made here (a list changed, a resource was updated, a task moved on) is delivered
to the local transports at once and published on the bus; one published by another replica is
delivered to the local transports only (never published again, and never back to its publisher:
each reaches each listener once). After the bus comes back from an outage, every local listener is
told that every list changed: it may have missed a change, and a re-list costs less than a stale
list. A task's change travels as its id (its record is in the shared store), and what only the
replica running a task can do (hand it an answer, stop it) travels to that replica as a signal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ujson

from .catalog.catalog import KINDS, Catalog
from .engine.task_operations import status_notification
from .tasks.record import TaskRecord
from .tasks.runner import TaskRunner
from .transport.lifecycle.subscriptions import LOCAL, REMOTE, RESYNC

if TYPE_CHECKING:
    from .bus import Bus
    from .bus.store import Store
    from .tasks.store import TaskStore

log = logging.getLogger("mcpsync")

LIST_CHANGED_CHANNEL = "list_changed"
"""The bus channel of list changes: a JSON list of the kinds that changed."""
RESOURCE_UPDATED_CHANNEL = "resource_updated"
"""The bus channel of resource updates: the URI, UTF-8."""
TASK_CHANNEL = "task"
"""A task changed on the replica running it (the payload is its id): the others tell their listens."""
TASK_SIGNAL_CHANNEL = "task_signal"
"""To the replica running a task: answers to its questions or its cancellation (JSON, see
`TaskRunner.relay_with`); the others ignore it."""


class Fanout:
    """Delivers the server's changes; `use_bus` shares them with the other replicas."""

    def __init__(self, catalog: Catalog, tasks: TaskRunner, transports: Callable[[], tuple[Any, ...]]) -> None:
        self._catalog = catalog
        self._tasks = tasks
        self._transports = transports
        self.bus: Bus | None = None
        self.store: Store | None = None
        self._task_store: TaskStore | None = None
        catalog.add_listener(self._changed)
        catalog.add_update_listener(self._updated)
        tasks.add_listener(self._task_changed)

    def use_bus(self, bus: Bus, store: Store | None, task_store: TaskStore | None) -> None:
        """Publish on `bus` and hear the others on it from now on; `store` holds the sessions and
        `task_store` the task records of a runner that has neither a store of its own nor a task
        yet. Owned from now on: `close()` closes them."""
        if task_store is not None:
            self._tasks.share_store(task_store)  # unless it has a store of its own or a task
            self._task_store = task_store
        bus.subscribe(LIST_CHANGED_CHANNEL, self._remote_changed)
        bus.subscribe(RESOURCE_UPDATED_CHANNEL, self._remote_updated)
        bus.subscribe(TASK_CHANNEL, self._remote_task)
        bus.subscribe(TASK_SIGNAL_CHANNEL, self._task_signal)
        bus.on_reconnect(lambda: self._publish(KINDS, RESYNC))
        self._tasks.relay_with(lambda signal: bus.publish(TASK_SIGNAL_CHANNEL, ujson.dumps(signal).encode()))
        self.bus, self.store = bus, store

    def close(self) -> None:
        for owned in (self.bus, self.store, self._task_store):
            if owned is not None:
                owned.close()

    # -- made here -------------------------------------------------------------------------------
    def _changed(self, kinds: frozenset[str]) -> None:
        self._publish(kinds)
        if self.bus is not None:
            self.bus.publish(LIST_CHANGED_CHANNEL, ujson.dumps(sorted(kinds)).encode())

    def _updated(self, uri: str) -> None:
        self._publish_update(uri)
        if self.bus is not None:
            self.bus.publish(RESOURCE_UPDATED_CHANNEL, uri.encode("utf-8", "surrogatepass"))

    def _task_changed(self, record: TaskRecord) -> None:
        self._publish_task(record)
        if self.bus is not None:
            self.bus.publish(TASK_CHANNEL, record.task_id.encode())

    # -- made elsewhere (on the bus's thread) ----------------------------------------------------
    def _remote_changed(self, channel: str, payload: bytes) -> None:
        try:
            kinds = frozenset(kind for kind in ujson.loads(payload) if kind in KINDS)
        except (ValueError, TypeError):
            log.warning("ignored a malformed list change from the bus")
            return
        if kinds:
            self._catalog.refresh(kinds, announce=False)  # entries computed from shared state: read them again
            self._publish(kinds, REMOTE)

    def _remote_updated(self, channel: str, payload: bytes) -> None:
        self._publish_update(payload.decode("utf-8", "surrogatepass"), REMOTE)

    def _remote_task(self, channel: str, payload: bytes) -> None:
        record = self._tasks.store.load_task(payload.decode("utf-8", "replace"))
        if record is not None:
            self._publish_task(record, REMOTE)

    def _task_signal(self, channel: str, payload: bytes) -> None:
        try:
            signal = ujson.loads(payload)
        except ValueError:
            log.warning("ignored a malformed task signal from the bus")
            return
        if isinstance(signal, dict):
            self._tasks.relayed(signal)

    # -- to this process's transports ------------------------------------------------------------
    def _publish(self, kinds: frozenset[str], origin: str = LOCAL) -> None:
        for transport in self._transports():
            transport.publish_list_changed(kinds, origin)

    def _publish_update(self, uri: str, origin: str = LOCAL) -> None:
        for transport in self._transports():
            transport.publish_resource_updated(uri, origin)

    def _publish_task(self, record: TaskRecord, origin: str = LOCAL) -> None:
        params = status_notification(record)
        for transport in self._transports():
            transport.publish_task_status(record.task_id, params, origin)
