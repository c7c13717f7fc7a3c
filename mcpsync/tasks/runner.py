"""Running tasks: a bounded pool of their own, their questions and answers, their leases.

Strategy: a task is a plain blocking function run on a worker of the runner's pool (`mcpsync-task-N`,
owned and joined by `close`), not on a request's worker, so a long job holds no request and no
connection. Everything another request may ask about it goes through the store's record (the one
truth, readable on any replica); what only the running process can do (set the function's cancel
signal, hand it an answer) goes through the `_Running` entry this process keeps while it runs.

- Questions. A function asks as it does in a request (`ctx.elicit`, `ctx.sample`, `ctx.roots`) and
  blocks until answered. In 2026-07-28 the question is written into the record (`inputRequests`,
  status `input_required`) and `tasks/update` answers it. In 2025-11-25 it is a real request to the
  client, sent on the stream of a `tasks/result` waiting for the task (the spec's way) and tied to
  the task by the related-task `_meta`; it waits in the task's queue until such a request comes.
- Cancellation. `tasks/cancel` writes `cancelled` into the record before it answers (terminal: the
  function's late result is dropped) and sets the function's cancel signal here; a replica that
  does not run the task leaves the signal to the runner's keeper, which reads its tasks' records.
- Leases. The keeper renews `lease_until` of every task this process runs (every third of the
  lease); a reader that finds a task unfinished past its lease marks it failed, so a task whose
  process died is failed within one lease, never left `working`.
- Shutdown. `close(timeout)` signals every running function as cancelled, waits up to `timeout`
  for them to return (what they return is kept), and fails the rest, as requests are answered.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from .._creation import Creation
from .._pool import WorkerPool
from ..errors import McpsyncError
from ..protocol.jsonrpc import ErrorCode, McpError
from .record import CANCELLED, FAILED, INPUT_REQUIRED, LEGACY, RELATED_TASK, WORKING, TaskRecord, tool_error_status
from .store import MemoryTaskStore, TaskStore

log = logging.getLogger("mcpsync")

Body = Callable[["TaskControl"], dict[str, Any]]
"""A task's work: given its control, returns the tool's `CallToolResult` (or raises `McpError`)."""
Carrier = Callable[[str, dict[str, Any]], "concurrent.futures.Future[dict[str, Any]]"]
"""How a waiting `tasks/result` sends the client a request on its own stream (its exchange's ask)."""


P = ParamSpec("P")
R = TypeVar("R")


class TaskStoreDown(McpError):
    """The task store cannot be reached (a Redis away), so a request about a task was not served:
    nothing was read or changed. -32603 (the request is fine: the same one works once the store
    answers), which the HTTP transport answers 503 with `Retry-After`, as it does the session
    store's outages."""

    def __init__(self) -> None:
        super().__init__(ErrorCode.INTERNAL_ERROR, "the task store cannot be reached; nothing was read or changed, retry later")


def _reaching_store(method: Callable[P, R]) -> Callable[P, R]:
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


UNTOLD = object()
"""The progress token of a task whose call asked for no progress: its `ctx.progress` still sets the
task's `statusMessage`, and no notification is sent."""


@dataclass(frozen=True, slots=True)
class TaskLimits:
    """What one process's tasks may take. The counts of kept tasks are the store's, so they hold
    across the replicas sharing it."""

    max_running: int = 32
    """Tasks whose functions run at once in this process; more wait for a worker."""
    max_waiting: int = 1024
    """Tasks created but waiting for a worker; past it a call that would make one is refused."""
    max_kept: int = 10_000
    """Tasks kept (running or finished, until their TTL ends), across the store."""
    max_kept_per_owner: int = 1_000
    """Of those, held by one caller (one principal; every caller of an open endpoint is one)."""
    default_ttl_ms: int = 3_600_000
    """How long a finished task's result is kept when the client asks for no TTL (1 hour)."""
    max_ttl_ms: int = 86_400_000
    """The longest TTL granted (1 day): a client asking for more gets this."""
    poll_interval_ms: int = 500
    """The polling pace suggested to clients."""
    lease: float = 30.0
    """Seconds a running task's process vouches for it; a task unfinished past it has lost its process."""

    def __post_init__(self) -> None:
        for name in ("max_running", "max_kept", "max_kept_per_owner", "default_ttl_ms", "max_ttl_ms", "poll_interval_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"TaskLimits.{name} must be at least 1")
        if self.default_ttl_ms > self.max_ttl_ms:
            raise ValueError("TaskLimits.default_ttl_ms must not exceed max_ttl_ms")
        if self.max_waiting < 0:
            raise ValueError("TaskLimits.max_waiting must be at least 0")
        if not self.lease > 0:
            raise ValueError("TaskLimits.lease must be positive")

    def granted_ttl(self, requested: Any) -> int:
        """The TTL a client's request gets: its own, within bounds, else the default."""
        if isinstance(requested, int) and not isinstance(requested, bool) and requested > 0:
            return min(requested, self.max_ttl_ms)
        return self.default_ttl_ms


class _Running:
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
        self.notifiers: list[Callable[[str, dict[str, Any]], None]] = []


class TaskControl:
    """A running task as its function's `Context` sees it: the engine's `Exchange` for a task.

    Its cancel signal is the task's; its notifications and questions go where the task's form
    sends them (see the module's strategy), never to the request that created it, which has ended."""

    def __init__(self, runner: TaskRunner, running: _Running) -> None:
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
            self._runner._set_message(self._running, params["message"])
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
        self._runner._enqueue(self._running, method, tagged, future)
        return future

    def ask_keyed(self, key: str, request: dict[str, Any]) -> concurrent.futures.Future[dict[str, Any]]:
        """2026-07-28: put a question (`{method, params}`) into the task's `inputRequests` under
        `key`; `tasks/update` answers it."""
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        self._runner._question(self._running, key, request, future)
        return future


class TaskRunner:
    """Creates tasks, runs their functions, and answers what is asked about them, on one store.

    One per server (`Server(tasks=...)`); `close()` stops it. `replica` names this process in the
    records it runs (default: host and pid)."""

    def __init__(
        self,
        store: TaskStore | None = None,
        *,
        limits: TaskLimits | None = None,
        replica: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store: TaskStore = store if store is not None else MemoryTaskStore()
        self._store_given = store is not None
        self.limits = limits or TaskLimits()
        self.replica = replica or f"{os.uname().nodename}:{os.getpid()}:{secrets.token_hex(3)}"
        self._clock = clock
        # create() admits at most max_running + max_waiting; the slack covers a worker that has
        # ended its task but not yet come back for the next, so the pool refuses only once closed.
        self._pool = WorkerPool("mcpsync-task", workers=self.limits.max_running, backlog=self.limits.max_waiting + self.limits.max_running)
        self._listeners: list[Callable[[TaskRecord], None]] = []
        self._relay: Callable[[dict[str, Any]], None] | None = None
        self._lock = threading.Lock()
        self._running: dict[str, _Running] = {}  # running or waiting for a worker
        self._starting = 0  # places in the pool held by creations under way
        self._closing = threading.Event()
        self._keeper: threading.Thread | None = None

    def add_listener(self, listener: Callable[[TaskRecord], None]) -> None:
        """Call `listener(record)` whenever a task this process handles changes what a client sees
        (status, message, questions), on the thread that changed it: the server tells the task's
        listens (`notifications/tasks`). It must be quick and never raise."""
        self._listeners.append(listener)

    def _tell(self, before: TaskRecord, after: TaskRecord) -> None:
        seen = (before.status, before.status_message, tuple(before.input_requests))
        if seen == (after.status, after.status_message, tuple(after.input_requests)):
            return  # a lease renewed, nothing a client sees
        for listener in self._listeners:
            try:
                listener(after)
            except Exception:
                log.exception("a task listener raised")

    # -- creating --------------------------------------------------------------------------------
    @_reaching_store
    def create(self, *, form: str, tool: str, owner: str | None, requested_ttl: Any, body: Body) -> TaskRecord:
        """Keep a new task's record, then run `body` on the pool; returns the record as created
        (readable by `tasks/get` on any replica before this returns). Refusals are `McpError`s the
        caller answers: the caller's or the store's count of kept tasks, or a full pool."""
        if self._closing.is_set():
            raise McpError(ErrorCode.INTERNAL_ERROR, "the server is shutting down: no new task is started")
        with self._lock:  # a place in the pool first: a task refused for want of one leaves no record
            if len(self._running) + self._starting >= self.limits.max_running + self.limits.max_waiting:
                raise McpError(ErrorCode.INTERNAL_ERROR, "too many tasks waiting to run; try again later")
            self._starting += 1
        try:
            record = self._created(form=form, tool=tool, owner=owner, requested_ttl=requested_ttl)
            running = _Running(record)
            with self._lock:
                self._running[record.task_id] = running
                self._start_keeper_locked()
        finally:
            with self._lock:
                self._starting -= 1
        if not self._pool.submit(lambda: self._run(running, body)):  # closed meanwhile
            with self._lock:
                self._running.pop(record.task_id, None)
            self._finish(running, status=FAILED, error={"code": ErrorCode.INTERNAL_ERROR, "message": "the server shut down before the task started"})
            raise McpError(ErrorCode.INTERNAL_ERROR, "the server is shutting down: no new task is started")
        return record

    def _created(self, *, form: str, tool: str, owner: str | None, requested_ttl: Any) -> TaskRecord:
        """A new task's record, kept in the store; the store's refusals as the caller answers them."""
        now = self._clock()
        record = TaskRecord(
            task_id=secrets.token_urlsafe(18),
            form=form,
            tool=tool,
            created_at=now,
            updated_at=now,
            ttl_ms=self.limits.granted_ttl(requested_ttl),
            poll_interval_ms=self.limits.poll_interval_ms,
            owner=owner,
            runner=self.replica,
            lease_until=now + self.limits.lease,
        )
        created = self.store.create_task(record, cap=self.limits.max_kept, owner_cap=self.limits.max_kept_per_owner)
        if created is Creation.CALLER_FULL:
            raise McpError(
                ErrorCode.INVALID_REQUEST,
                f"too many tasks: this caller holds {self.limits.max_kept_per_owner} tasks; cancel some or wait for their results to expire",
            )
        if not created:
            raise McpError(ErrorCode.INTERNAL_ERROR, "too many tasks: the server holds as many as it keeps; try again later")
        return record

    def _run(self, running: _Running, body: Body) -> None:
        control = TaskControl(self, running)
        try:
            if running.cancel.is_set():
                return
            result = body(control)
        except McpError as exc:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            self._finish(running, status=FAILED, error=error, message=exc.message)
        except Exception as exc:
            log.exception("task %s (%s) raised", running.record.task_id, running.record.tool)
            self._finish(running, status=FAILED, error={"code": ErrorCode.INTERNAL_ERROR, "message": f"Internal error: {type(exc).__name__}"},
                         message=f"the task failed: {type(exc).__name__}")
        else:
            is_error = bool(result.get("isError"))
            status = tool_error_status(running.record.form) if is_error else "completed"
            self._finish(running, status=status, result=result, message=_first_text(result) if is_error else None)
        finally:
            with self._lock:
                self._running.pop(running.record.task_id, None)
            for future in list(running.questions.values()):
                future.cancel()
            for _, _, future in running.outbox:
                future.cancel()

    def _finish(self, running: _Running, *, status: str, result: dict[str, Any] | None = None,
                error: dict[str, Any] | None = None, message: str | None = None) -> None:
        with running.changed:
            record = running.record.changed(self._clock(), status=status, result=result, error=error, input_requests={},
                                            status_message=message if message is not None else running.record.status_message, lease_until=None)
            try:
                stored = self.store.save_task(record)
            except McpsyncError as exc:  # the store is away: a reader elsewhere finds the lease over and fails it
                log.warning("task %s ended %s, but its record could not be written: %s", record.task_id, status, exc)
                stored = record
            before, running.record = running.record, stored
            running.changed.notify_all()
        self._tell(before, running.record)

    # -- what a running task does ----------------------------------------------------------------
    def _save(self, running: _Running, **changes: Any) -> None:
        """Write a change of a running task (under its condition); a record found terminal (cancelled
        on another replica) cancels the function."""
        with running.changed:
            before = running.record
            stored = self.store.save_task(before.changed(self._clock(), **changes))
            running.record = stored
            running.changed.notify_all()
        self._tell(before, stored)
        if stored.terminal:
            self._signal_cancel(running)

    def _set_message(self, running: _Running, message: str) -> None:
        if running.record.status_message != message:
            self._save(running, status_message=message)

    def _question(self, running: _Running, key: str, request: dict[str, Any], future: concurrent.futures.Future[dict[str, Any]]) -> None:
        with running.changed:
            running.questions[key] = future
            asked = {**running.record.input_requests, key: request}
            self._save(running, status=INPUT_REQUIRED, input_requests=asked)
        future.add_done_callback(functools.partial(self._withdrawn, running))

    def _enqueue(self, running: _Running, method: str, params: dict[str, Any], future: concurrent.futures.Future[dict[str, Any]]) -> None:
        with running.changed:
            running.outbox.append((method, params, future))
            running.asking.add(future)
            self._save(running, status=INPUT_REQUIRED)
        future.add_done_callback(functools.partial(self._withdrawn, running))
        self._flush(running)

    def _withdrawn(self, running: _Running, future: concurrent.futures.Future[dict[str, Any]]) -> None:
        """A question's future is done; one the function gave up on (its timeout) leaves
        `inputRequests` and the outbox, so the client is not asked what nobody waits for."""
        if not future.cancelled():
            return
        with running.changed:
            running.asking.discard(future)
            if running.cancel.is_set() or running.record.terminal:
                return  # the task is over: its record says so already
            keys = [key for key, asked in running.questions.items() if asked is future]
            for key in keys:
                del running.questions[key]
            running.outbox = deque(entry for entry in running.outbox if entry[2] is not future)
            self._asked(running, keys)

    def _asked(self, running: _Running, settled: Iterable[str] = ()) -> None:
        """Write what is still asked (under the task's condition): the questions `settled` leave
        `inputRequests`, and a task waiting for no answer works again."""
        left = {key: request for key, request in running.record.input_requests.items() if key not in settled}
        running.asking = {future for future in running.asking if not future.done()}
        status = INPUT_REQUIRED if left or running.asking else WORKING
        if (left, status) != (running.record.input_requests, running.record.status) and not running.record.terminal:
            self._save(running, input_requests=left, status=status)

    def _flush(self, running: _Running, skip: Carrier | None = None) -> None:
        """Send the task's queued 2025-11-25 requests on a waiting `tasks/result` (`skip`: not this
        one); an answer goes to the function, a carrier that goes away puts its unanswered
        requests back for another."""
        with running.changed:
            carriers = [carrier for carrier in running.carriers if carrier is not skip]
        for carrier in carriers:
            while True:
                with running.changed:
                    if not running.outbox:
                        return
                    method, params, future = running.outbox.popleft()
                try:
                    sent = carrier(method, params)
                except McpsyncError:  # this one has ended: the next
                    with running.changed:
                        running.outbox.appendleft((method, params, future))
                    break
                sent.add_done_callback(functools.partial(self._answered, running, carrier, (method, params, future)))
                future.add_done_callback(functools.partial(_cancel_with, sent))

    def _answered(self, running: _Running, carrier: Carrier, asked: tuple[str, dict[str, Any], concurrent.futures.Future[dict[str, Any]]],
                  done: concurrent.futures.Future[dict[str, Any]]) -> None:
        future = asked[2]
        if done.cancelled() or (done.exception() is not None and not isinstance(done.exception(), McpError)):
            with running.changed:  # the carrier ended before the client answered: another asks again
                if running.cancel.is_set() or future.done():
                    return
                running.outbox.appendleft(asked)
            self._flush(running, skip=carrier)
            return
        try:
            error = done.exception()
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(done.result())
        except concurrent.futures.InvalidStateError:
            return  # the function gave up on it meanwhile (see _withdrawn)
        with running.changed:
            self._asked(running)

    # -- requests about a task -------------------------------------------------------------------
    @_reaching_store
    def load(self, task_id: Any, owner: str | None) -> TaskRecord:
        """The task's record for its owner; -32602 for an unknown id, an expired task and another
        caller's task alike (a task's existence is not told to whoever guesses its id). A task
        unfinished past its lease is marked failed first."""
        record = self.store.load_task(task_id) if isinstance(task_id, str) else None
        if record is None or record.owner != owner:
            raise McpError(ErrorCode.INVALID_PARAMS, "Failed to retrieve task: Task not found", _quoted("taskId", task_id))
        if not record.terminal and record.lease_until is not None and self._clock() > record.lease_until and record.task_id not in self._running:
            lost = record.changed(self._clock(), status=FAILED, lease_until=None, input_requests={},
                                  status_message="the server running this task stopped before it finished",
                                  error={"code": ErrorCode.INTERNAL_ERROR, "message": "the server running this task stopped before it finished"})
            before, record = record, self.store.save_task(lost)
            self._tell(before, record)
        return record

    @_reaching_store
    def cancel(self, task_id: Any, owner: str | None) -> TaskRecord:
        """Mark the task cancelled (before answering, so it is terminal at once) and signal its
        function; returns the record as it now stands (terminal: already finished, unchanged)."""
        record = self.load(task_id, owner)
        if record.terminal:
            return record
        stored = self.store.save_task(record.changed(self._clock(), status=CANCELLED, input_requests={}, lease_until=None,
                                                      status_message="cancelled by the client"))
        self._tell(record, stored)
        with self._lock:
            running = self._running.get(record.task_id)
        if running is not None:
            with running.changed:
                running.record = stored
                running.changed.notify_all()
            self._signal_cancel(running)
        elif self._relay is not None and stored.status == CANCELLED:
            self._relay({"taskId": record.task_id, "cancel": True})  # its keeper would see it within a third of the lease
        return stored

    @_reaching_store
    def answer(self, task_id: Any, owner: str | None, responses: dict[str, Any]) -> None:
        """2026-07-28 `tasks/update`: hand the answers of outstanding questions to the function and
        take them out of `inputRequests` before returning (what is not outstanding is ignored)."""
        record = self.load(task_id, owner)
        with self._lock:
            running = self._running.get(record.task_id)
        if record.terminal:
            return
        if running is not None:
            self._hand_answers(running, responses)
        elif self._relay is not None:
            self._answer_elsewhere(record, responses)

    def _answer_elsewhere(self, record: TaskRecord, responses: dict[str, Any]) -> None:
        """The task runs on another replica: its questions leave the record here and now (what a
        tasks/get anywhere shows next), and the answers go to that replica over the bus."""
        answered = {key: value for key, value in responses.items() if key in record.input_requests}
        if not answered:
            return
        left = {key: request for key, request in record.input_requests.items() if key not in answered}
        stored = self.store.save_task(record.changed(self._clock(), input_requests=left, status=INPUT_REQUIRED if left else WORKING))
        self._tell(record, stored)
        if self._relay is not None:
            self._relay({"taskId": record.task_id, "answers": answered})

    def relay_with(self, send: Callable[[dict[str, Any]], None]) -> None:
        """Reach the replica running a task through `send` (the server's bus): a `tasks/update` or
        `tasks/cancel` that lands on another replica sends `{"taskId", "answers"}` or
        `{"taskId", "cancel": true}`, which that replica's `relayed` acts on. At most once, as the
        bus is: a lost cancel still reaches the task through its keeper's next read of the record."""
        self._relay = send

    def relayed(self, signal: dict[str, Any]) -> None:
        """A signal another replica sent about a task: acted on when the task runs here, else ignored."""
        task_id = signal.get("taskId")
        with self._lock:
            running = self._running.get(task_id) if isinstance(task_id, str) else None
        if running is None:
            return
        answers = signal.get("answers")
        if isinstance(answers, dict):
            self._hand_answers(running, answers)
        if signal.get("cancel") is True:
            stored = self.store.load_task(running.record.task_id)
            if stored is None or stored.terminal:
                self._signal_cancel(running)

    def _hand_answers(self, running: _Running, responses: dict[str, Any]) -> None:
        with running.changed:
            answered = [key for key in responses if key in running.questions]
            for key in answered:
                try:
                    running.questions.pop(key).set_result(responses[key])
                except concurrent.futures.InvalidStateError:
                    pass  # the function gave up on it meanwhile: it leaves inputRequests all the same
            if answered:
                self._asked(running, answered)

    @_reaching_store
    def wait(self, task_id: Any, owner: str | None, *, cancelled: Callable[[], bool], carrier: Carrier | None = None,
             notify: Callable[[str, dict[str, Any]], None] | None = None, slice_seconds: float = 1.0) -> TaskRecord:
        """2025-11-25 `tasks/result`: block until the task is terminal (or `cancelled()`), carrying its
        questions to the client on `carrier` and its notifications on `notify` meanwhile."""
        record = self.load(task_id, owner)
        with self._lock:
            running = self._running.get(record.task_id)
        if running is None:
            while not record.terminal and not cancelled():  # runs elsewhere: read its record at its pace
                time.sleep(min(slice_seconds, record.poll_interval_ms / 1000))
                record = self.load(task_id, owner)
            return record
        with running.changed:
            if carrier is not None:
                running.carriers.append(carrier)
            if notify is not None:
                running.notifiers.append(notify)
        try:
            if carrier is not None:
                self._flush(running)
            with running.changed:
                while not running.record.terminal and not cancelled():
                    running.changed.wait(slice_seconds)
                return running.record
        finally:
            with running.changed:
                if carrier is not None:
                    running.carriers.remove(carrier)
                if notify is not None:
                    running.notifiers.remove(notify)

    @_reaching_store
    def list(self, owner: str | None, cursor: Any, limit: int) -> tuple[list[TaskRecord], str | None]:
        """A page of the caller's own tasks; -32602 for a cursor this did not give."""
        if cursor is not None and not isinstance(cursor, str):
            raise McpError(ErrorCode.INVALID_PARAMS, "tasks/list: params.cursor must be a string")
        try:
            return self.store.list_tasks(owner, cursor, limit)
        except LookupError:
            raise McpError(ErrorCode.INVALID_PARAMS, "tasks/list: invalid cursor", _quoted("cursor", cursor)) from None

    # -- cancellation, leases, shutdown ----------------------------------------------------------
    def _signal_cancel(self, running: _Running) -> None:
        with running.changed:
            if running.cancel.is_set():
                return
            running.cancel.set()
            callbacks, running.on_cancel = running.on_cancel, []
            for future in running.questions.values():
                future.cancel()
            running.changed.notify_all()
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("a task's cancel callback raised")

    def _start_keeper_locked(self) -> None:
        if self._keeper is None:
            self._keeper = threading.Thread(target=self._keep, name="mcpsync-task-keeper", daemon=True)
            self._keeper.start()

    def _keep(self) -> None:
        """Renew the lease of every task running here, and cancel those found terminal (cancelled
        through another replica), every third of the lease until `close`."""
        while not self._closing.wait(self.limits.lease / 3):
            with self._lock:
                running = list(self._running.values())
            for task in running:
                try:
                    stored = self.store.load_task(task.record.task_id)
                    if stored is None or stored.terminal:
                        self._signal_cancel(task)
                    else:
                        self._save(task, lease_until=self._clock() + self.limits.lease)
                except McpsyncError as exc:  # the store is away: the lease runs on; next round
                    log.warning("renewing task %s's lease failed: %s", task.record.task_id, exc)

    def share_store(self, store: TaskStore) -> None:
        """Keep the records in `store`, the one the server's replicas share (`Server.use_bus`
        brings it), rather than in this process: only for a runner made without a store and before
        its first task, whose record `store` would not have; otherwise nothing changes."""
        with self._lock:
            if not self._store_given and self._keeper is None:
                self.store, self._store_given = store, True

    def close(self, timeout: float = 5.0) -> None:
        """Cancel every running task, give them `timeout` seconds to return (their results are
        kept), fail the rest, and stop the pool and the keeper. Idempotent."""
        self._closing.set()
        deadline = time.monotonic() + timeout
        with self._lock:
            running = list(self._running.values())
        for task in running:
            self._signal_cancel(task)
        self._pool.close(max(0.0, deadline - time.monotonic()))
        with self._lock:
            left = list(self._running.values())
            self._running.clear()
        for task in left:
            if not task.record.terminal:
                self._finish(task, status=FAILED, error={"code": ErrorCode.INTERNAL_ERROR, "message": "the server shut down before the task finished"},
                             message="the server shut down before the task finished")
        keeper = self._keeper
        if keeper is not None:
            keeper.join(max(0.1, deadline - time.monotonic()))


def _quoted(name: str, value: Any) -> dict[str, str] | None:
    """A refusal's `data` naming the id or cursor it refused, if it is a string short enough to be
    one (a task's id is 24 characters): a caller's megabyte is not sent back to it."""
    return {name: value} if isinstance(value, str) and len(value) <= 128 else None


def _cancel_with(sent: concurrent.futures.Future[dict[str, Any]], given: concurrent.futures.Future[dict[str, Any]]) -> None:
    """A question the function gave up on is withdrawn from the client too (the transport tells it)."""
    if given.cancelled():
        sent.cancel()


def _first_text(result: dict[str, Any]) -> str | None:
    for block in result.get("content") or ():
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            text: str = block["text"]
            return text[:500]
    return None
