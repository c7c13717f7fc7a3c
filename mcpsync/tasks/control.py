"""A running task as its function sees it: `TaskControl`, the engine's `Exchange` for a task, over
`Running`, what the runner's process holds of the task while its function runs.

The runner (`runner.py`) does the work: the control only hands the function's notifications and
questions to it, and gives the function the task's cancel signal. See the runner's strategy for
where each form's questions go.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from .record import LEGACY, RELATED_TASK, TaskRecord

Body = Callable[["TaskControl"], dict[str, Any]]
"""A task's work: given its control, returns the tool's `CallToolResult` (or raises `McpError`)."""
Carrier = Callable[[str, dict[str, Any]], "concurrent.futures.Future[dict[str, Any]]"]
"""How a waiting `tasks/result` sends the client a request on its own stream (its exchange's ask)."""

UNTOLD = object()
"""The progress token of a task whose call asked for no progress: its `ctx.progress` still sets the
task's `statusMessage`, and no notification is sent."""


class Host(Protocol):
    """What a task's control asks of the runner that runs it (`TaskRunner`): written here so this
    module need not import the runner, which imports it."""

    def set_message(self, running: Running, message: str) -> None: ...

    def enqueue(self, running: Running, method: str, params: dict[str, Any], future: concurrent.futures.Future[dict[str, Any]]) -> None: ...

    def put_question(self, running: Running, key: str, request: dict[str, Any], future: concurrent.futures.Future[dict[str, Any]]) -> None: ...


class Running:
    """What this process holds of a task while its function runs."""

    def __init__(self, record: TaskRecord) -> None:
        self.record = record
        self.cancel = threading.Event()
        self.changed = threading.Condition()
        self.on_cancel: list[Callable[[], None]] = []
        self.questions: dict[str, concurrent.futures.Future[dict[str, Any]]] = {}  # 2026-07-28, by key
        self.outbox: deque[tuple[str, dict[str, Any], concurrent.futures.Future[dict[str, Any]]]] = deque()  # 2025-11-25, unsent
        self.asking: set[concurrent.futures.Future[dict[str, Any]]] = set()  # 2025-11-25, sent or not, unanswered
        self.carriers: list[Carrier] = []
        self.remote_carriers: dict[str, Carrier] = {}  # tasks/result waiting on other replicas, by replica
        self.notifiers: list[Callable[[str, dict[str, Any]], None]] = []

    def add_remote_carrier(self, replica: str, make: Callable[[str, str], Carrier]) -> bool:
        """A tasks/result waiting on `replica` carries this task's questions (`make(task_id,
        replica)` is how they reach it); False when it already does."""
        with self.changed:
            if replica in self.remote_carriers:
                return False
            carrier = self.remote_carriers[replica] = make(self.record.task_id, replica)
            self.carriers.append(carrier)
            return True

    def drop_carrier(self, carrier: Carrier | None) -> None:
        """A carrier on another replica that is over carries nothing more."""
        with self.changed:
            self.remote_carriers = {where: kept for where, kept in self.remote_carriers.items() if kept is not carrier}
            if carrier in self.carriers:
                self.carriers.remove(carrier)


class TaskControl:
    """A running task as its function's `Context` sees it: the engine's `Exchange` for a task.

    Its cancel signal is the task's; its notifications and questions go where the task's form
    sends them (see the module's strategy), never to the request that created it, which has ended."""

    def __init__(self, runner: Host, running: Running) -> None:
        self._runner = runner
        self._running = running

    @property
    def task_id(self) -> str:
        return self._running.record.task_id

    @property
    def form(self) -> str:
        return self._running.record.form

    @property
    def cancel_event(self) -> threading.Event:
        return self._running.cancel

    @property
    def notify(self) -> Callable[[str, dict[str, Any]], None]:
        return self._notify

    @property
    def on_cancel(self) -> Callable[[Callable[[], None]], None]:
        return self._on_cancel

    @property
    def ask(self) -> Callable[[str, dict[str, Any]], concurrent.futures.Future[dict[str, Any]]] | None:
        return self._ask if self.form == LEGACY else None

    @property
    def release_stream(self) -> None:
        return None

    def _notify(self, method: str, params: dict[str, Any]) -> None:
        """Progress with a message becomes the task's `statusMessage` (what a polling client sees);
        in 2025-11-25 the notification also goes to every `tasks/result` waiting on the task."""
        if method == "notifications/progress" and isinstance(params.get("message"), str):
            self._runner.set_message(self._running, params["message"])
        if self.form == LEGACY and params.get("progressToken") is not UNTOLD:
            tagged = {**params, "_meta": {**params.get("_meta", {}), RELATED_TASK: {"taskId": self.task_id}}}
            with self._running.changed:
                notifiers = list(self._running.notifiers)
            for notify in notifiers:
                notify(method, tagged)

    def _on_cancel(self, callback: Callable[[], None]) -> None:
        with self._running.changed:
            if not self._running.cancel.is_set():
                self._running.on_cancel.append(callback)
                return
        callback()

    def _ask(self, method: str, params: dict[str, Any]) -> concurrent.futures.Future[dict[str, Any]]:
        """2025-11-25: queue a request to the client; the next `tasks/result` carries it."""
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        tagged = {**params, "_meta": {**params.get("_meta", {}), RELATED_TASK: {"taskId": self.task_id}}}
        self._runner.enqueue(self._running, method, tagged, future)
        return future

    def ask_keyed(self, key: str, request: dict[str, Any]) -> concurrent.futures.Future[dict[str, Any]]:
        """2026-07-28: put a question (`{method, params}`) into the task's `inputRequests` under
        `key`; `tasks/update` answers it."""
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        self._runner.put_question(self._running, key, request, future)
        return future
