"""Running tasks: a bounded pool of their own, their questions and answers, their leases.

Strategy: a task is a plain blocking function run on a worker of the runner's pool (`mcpsync-task-N`,
owned and joined by `close`), not on a request's worker, so a long job holds no request and no
connection. Everything another request may ask about it goes through the store's record (the one
truth, readable on any replica); what only the running process can do (set the function's cancel
signal, hand it an answer) goes through the `Running` entry this process keeps while it runs.

- Questions. A function asks as it does in a request (`ctx.elicit`, `ctx.sample`, `ctx.roots`) and
  blocks until answered. In 2026-07-28 the question is written into the record (`inputRequests`,
  status `input_required`) and `tasks/update` answers it. In 2025-11-25 it is a real request to the
  client, sent on the stream of a `tasks/result` waiting for the task (the spec's way) and tied to
  the task by the related-task `_meta`; it waits in the task's queue until such a request comes.
- Cancellation. `tasks/cancel` writes `cancelled` into the record before it answers (terminal: the
  function's late result is dropped) and sets the function's cancel signal here; a replica that
  does not run the task signals the one that does over the bus (`relay_with`), and the keeper, which
  reads its tasks' records, catches a signal the bus lost.
- Other replicas. A `tasks/update` landing elsewhere hands its answers over the bus too, and a
  2025-11-25 `tasks/result` waiting elsewhere carries the task's questions (`remote`).
- Leases. The keeper renews `lease_until` of every task this process runs (every third of the
  lease); a reader that finds a task unfinished past its lease marks it failed, so a task whose
  process died is failed within one lease, never left `working`.
- Shutdown. `close(timeout)` signals every running function as cancelled, waits up to `timeout`
  for them to return (what they return is kept), and fails the rest, as requests are answered.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextvars
import dataclasses
import functools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import ujson

from .._creation import Creation
from .._pool import WorkerPool
from ..errors import McpsyncError
from ..protocol.jsonrpc import ErrorCode, McpError
from .control import Body, Carrier, Running, TaskControl
from .limits import TaskLimits
from .record import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, WORKING, TaskRecord, tool_error_status
from .remote import CarrierGone, RemoteCarriage
from .store import MemoryTaskStore, TaskStore, reaching_store

log = logging.getLogger("mcpsync")

SHUT_DOWN = "the server shut down before the task finished"
LOST = "the server running this task stopped before it finished"


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
        self.replica = replica or f"{os.uname().nodename}:{os.getpid()}:{os.urandom(3).hex()}"
        self._clock = clock
        # create() admits at most max_running + max_waiting; the slack covers a worker that has
        # ended its task but not yet come back for the next, so the pool refuses only once closed.
        self._pool = WorkerPool("mcpsync-task", workers=self.limits.max_running, backlog=self.limits.max_waiting + self.limits.max_running)
        self._listeners: list[Callable[[TaskRecord], None]] = []
        self._relay: Callable[[dict[str, Any]], None] | None = None
        self._remote = RemoteCarriage(self.replica, lambda: self._relay)
        self._lock = threading.Lock()
        self._running: dict[str, Running] = {}  # running or waiting for a worker
        self._starting = 0  # places in the pool held by creations under way
        self._held: dict[str | None, int] = {}  # each owner's tasks handed to the pool, running or queued there
        self._parked: dict[str | None, deque[tuple[Running, Body]]] = {}  # each owner's tasks past its share
        self._callbacks = WorkerPool("mcpsync-task-cancel", workers=4, backlog=1024)  # cancel callbacks, off the keeper
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
    @property
    def active(self) -> int:
        """The tasks running or waiting for a worker here now."""
        with self._lock:
            return len(self._running)

    @reaching_store
    def create(self, *, form: str, tool: str, owner: str | None, requested_ttl: Any, body: Body) -> TaskRecord:
        """Keep a new task's record, then run `body` on the pool; returns the record as created
        (readable by `tasks/get` on any replica before this returns). Refusals are `McpError`s the
        caller answers: the caller's or the store's count of kept tasks, or a full pool."""
        if self._closing.is_set():
            raise McpError(ErrorCode.INTERNAL_ERROR, "the server is shutting down: no new task is started")
        body = _in_context_of_now(body)
        with self._lock:  # a place in the pool first: a task refused for want of one leaves no record
            if len(self._running) + self._starting >= self.limits.max_running + self.limits.max_waiting:
                raise McpError(ErrorCode.INTERNAL_ERROR, "too many tasks waiting to run; try again later")
            self._starting += 1
        try:
            record = self._created(form=form, tool=tool, owner=owner, requested_ttl=requested_ttl)
        except BaseException:
            with self._lock:
                self._starting -= 1
            raise
        running = Running(record)
        with self._lock:
            self._starting -= 1
            self._running[record.task_id] = running
            self._start_keeper_locked()
            if self._held.get(owner, 0) >= self.limits.running_share:  # past the caller's share: its own turn
                self._parked.setdefault(owner, deque()).append((running, body))
                return record
            self._held[owner] = self._held.get(owner, 0) + 1
        if not self._pool.submit(lambda: self._run(running, body)):  # closed meanwhile
            with self._lock:
                self._running.pop(record.task_id, None)
            self._next_of(owner)  # its place in the caller's share is given back
            self._finish(running, status=FAILED, error={"code": ErrorCode.INTERNAL_ERROR, "message": "the server shut down before the task started"})
            raise McpError(ErrorCode.INTERNAL_ERROR, "the server is shutting down: no new task is started")
        return record

    def _next_of(self, owner: str | None) -> None:
        """A task of `owner` ended: its next parked task, if any, takes the worker place it left."""
        with self._lock:
            parked = self._parked.get(owner)
            if not parked:
                self._held[owner] -= 1
                if not self._held[owner]:
                    del self._held[owner]
                return
            running, body = parked.popleft()
            if not parked:
                del self._parked[owner]
        self._pool.submit(lambda: self._run(running, body))  # refused only once closed: close() fails it

    def _created(self, *, form: str, tool: str, owner: str | None, requested_ttl: Any) -> TaskRecord:
        """A new task's record, kept in the store; the store's refusals as the caller answers them."""
        now = self._clock()
        record = TaskRecord(
            task_id=new_task_id(),
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

    def _run(self, running: Running, body: Body) -> None:
        control = TaskControl(self, running)
        try:
            if running.cancel.is_set():
                return
            result = body(control)
            size = len(ujson.dumps(result))  # a result JSON cannot write fails here, as a call's would
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
            if size > self.limits.max_result_bytes:  # kept for its whole TTL: the caps bound how many, this how big
                message = f"the task's result is {size} bytes, more than the {self.limits.max_result_bytes} a task may keep"
                self._finish(running, status=FAILED, error={"code": ErrorCode.INTERNAL_ERROR, "message": message}, message=message)
                return
            is_error = bool(result.get("isError"))
            status = tool_error_status(running.record.form) if is_error else COMPLETED
            self._finish(running, status=status, result=result, message=_first_text(result) if is_error else None)
        finally:
            with self._lock:
                self._running.pop(running.record.task_id, None)
            self._next_of(running.record.owner)
            for future in list(running.questions.values()):
                future.cancel()
            for _, _, future in running.outbox:
                future.cancel()

    def _finish(self, running: Running, *, status: str, result: dict[str, Any] | None = None,
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
    def _save(self, running: Running, **changes: Any) -> None:
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

    def set_message(self, running: Running, message: str) -> None:
        if running.record.status_message != message:
            self._save(running, status_message=message)

    def put_question(self, running: Running, key: str, request: dict[str, Any], future: concurrent.futures.Future[dict[str, Any]]) -> None:
        with running.changed:
            running.questions[key] = future
            asked = {**running.record.input_requests, key: request}
            self._save(running, status=INPUT_REQUIRED, input_requests=asked)
        future.add_done_callback(functools.partial(self._withdrawn, running))

    def enqueue(self, running: Running, method: str, params: dict[str, Any], future: concurrent.futures.Future[dict[str, Any]]) -> None:
        with running.changed:
            running.outbox.append((method, params, future))
            running.asking.add(future)
            self._save(running, status=INPUT_REQUIRED)
        future.add_done_callback(functools.partial(self._withdrawn, running))
        self._flush(running)

    def _withdrawn(self, running: Running, future: concurrent.futures.Future[dict[str, Any]]) -> None:
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

    def _asked(self, running: Running, settled: Iterable[str] = ()) -> None:
        """Write what is still asked (under the task's condition): the questions `settled` leave
        `inputRequests`, and a task waiting for no answer works again."""
        left = {key: request for key, request in running.record.input_requests.items() if key not in settled}
        running.asking = {future for future in running.asking if not future.done()}
        status = INPUT_REQUIRED if left or running.asking else WORKING
        if (left, status) != (running.record.input_requests, running.record.status) and not running.record.terminal:
            self._save(running, input_requests=left, status=status)

    def _flush(self, running: Running, skip: Carrier | None = None) -> None:
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

    def _answered(self, running: Running, carrier: Carrier, asked: tuple[str, dict[str, Any], concurrent.futures.Future[dict[str, Any]]],
                  done: concurrent.futures.Future[dict[str, Any]]) -> None:
        future = asked[2]
        if done.cancelled() or (done.exception() is not None and not isinstance(done.exception(), McpError)):
            with running.changed:  # the carrier ended before the client answered: another asks again
                if not done.cancelled() and isinstance(done.exception(), CarrierGone):  # a replica's tasks/result that is over
                    running.drop_carrier(carrier)
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
    @reaching_store
    def load(self, task_id: Any, owner: str | None) -> TaskRecord:
        """The task's record for its owner; -32602 for an unknown id, an expired task and another
        caller's task alike (a task's existence is not told to whoever guesses its id). A task
        unfinished past its lease is marked failed first."""
        record = self.store.load_task(task_id) if isinstance(task_id, str) else None
        if record is None or record.owner != owner:
            raise McpError(ErrorCode.INVALID_PARAMS, "Failed to retrieve task: Task not found", _quoted("taskId", task_id))
        if not record.terminal and record.lease_until is not None and self._clock() > record.lease_until and record.task_id not in self._running:
            lost = record.changed(self._clock(), status=FAILED, lease_until=None, input_requests={}, status_message=LOST,
                                  error={"code": ErrorCode.INTERNAL_ERROR, "message": LOST})
            before, record = record, self.store.save_task(lost)
            self._tell(before, record)
        return record

    @reaching_store
    def cancel(self, task_id: Any, owner: str | None, *, refuse_ended: bool = False) -> TaskRecord:
        """Mark the task cancelled (before answering, so it is terminal at once) and signal its
        function; returns the record as it now stands (terminal: already finished, unchanged, or
        with `refuse_ended` -32602, as 2025-11-25 answers)."""
        record = self.load(task_id, owner)
        if record.terminal and refuse_ended:
            raise McpError(ErrorCode.INVALID_PARAMS, f"Cannot cancel task: already in terminal status '{record.status}'", _quoted("taskId", task_id))
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

    @reaching_store
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
        to = signal.get("to")
        if not isinstance(task_id, str) or (to is not None and to != self.replica):
            return
        if isinstance(signal.get("question"), dict):
            self._remote.question(task_id, signal["question"])
        if isinstance(signal.get("answer"), dict):
            self._remote.answered(signal["answer"])
        with self._lock:
            running = self._running.get(task_id)
        if running is None:
            return
        self._remote_carrier(running, signal.get("carrier"), signal.get("carrier_gone"))
        answers = signal.get("answers")
        if isinstance(answers, dict):
            self._hand_answers(running, answers)
        if signal.get("cancel") is True:
            stored = self.store.load_task(running.record.task_id)
            if stored is None or stored.terminal:
                self._ended_elsewhere(running, stored)

    def _remote_carrier(self, running: Running, arrived: Any, gone: Any) -> None:
        """A tasks/result waiting on another replica for this task announced itself (`arrived`), or
        ended (`gone`): it carries the task's questions, as a local one does, while it lasts."""
        if isinstance(gone, str):
            running.drop_carrier(running.remote_carriers.get(gone))
        if isinstance(arrived, str) and arrived != self.replica and running.add_remote_carrier(arrived, self._remote.carrier):
            self._flush(running)

    def _hand_answers(self, running: Running, responses: dict[str, Any]) -> None:
        with running.changed:
            answered = [key for key in responses if key in running.questions]
            for key in answered:
                try:
                    running.questions.pop(key).set_result(responses[key])
                except concurrent.futures.InvalidStateError:
                    pass  # the function gave up on it meanwhile: it leaves inputRequests all the same
            if answered:
                self._asked(running, answered)

    @reaching_store
    def wait(self, task_id: Any, owner: str | None, *, cancelled: Callable[[], bool], carrier: Carrier | None = None,
             notify: Callable[[str, dict[str, Any]], None] | None = None, slice_seconds: float = 1.0) -> TaskRecord:
        """2025-11-25 `tasks/result`: block until the task is terminal (or `cancelled()`), carrying its
        questions to the client on `carrier` and its notifications on `notify` meanwhile."""
        record = self.load(task_id, owner)
        with self._lock:
            running = self._running.get(record.task_id)
        if running is None:  # runs elsewhere: read its record at its pace, carrying its questions
            if carrier is not None and self._relay is not None:
                return self._remote.wait(record, carrier, lambda: self.load(task_id, owner), cancelled, slice_seconds)
            while not record.terminal and not cancelled():
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

    @reaching_store
    def list(self, owner: str | None, cursor: Any, limit: int) -> tuple[list[TaskRecord], str | None]:
        """A page of the caller's own tasks; -32602 for a cursor this did not give."""
        if cursor is not None and not isinstance(cursor, str):
            raise McpError(ErrorCode.INVALID_PARAMS, "tasks/list: params.cursor must be a string")
        try:
            return self.store.list_tasks(owner, cursor, limit)
        except LookupError:
            raise McpError(ErrorCode.INVALID_PARAMS, "tasks/list: invalid cursor", _quoted("cursor", cursor)) from None

    # -- cancellation, leases, shutdown ----------------------------------------------------------
    def _signal_cancel(self, running: Running) -> None:
        with running.changed:
            if running.cancel.is_set():
                return
            running.cancel.set()
            callbacks, running.on_cancel = running.on_cancel, []
            for future in running.questions.values():
                future.cancel()
            running.changed.notify_all()
        if callbacks and not self._callbacks.submit(lambda: _run_callbacks(callbacks)):
            _run_callbacks(callbacks)  # closed, or a thousand waiting: this thread, as a last resort

    def _ended_elsewhere(self, running: Running, stored: TaskRecord | None) -> None:
        """The task's record says it ended (cancelled through another replica) or is gone: what
        waits on it here (a tasks/result) sees the record, and the function its cancel."""
        if stored is not None:
            with running.changed:
                running.record = stored
                running.changed.notify_all()
        self._signal_cancel(running)

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
                        self._ended_elsewhere(task, stored)
                    else:
                        self._renew(task)
                except McpsyncError as exc:  # the store is away: the lease runs on; next round
                    log.warning("renewing task %s's lease failed: %s", task.record.task_id, exc)

    def _renew(self, running: Running) -> None:
        """Push the task's lease out: nothing a client sees changes, `lastUpdatedAt` included."""
        with running.changed:
            stored = self.store.save_task(dataclasses.replace(running.record, lease_until=self._clock() + self.limits.lease))
            running.record = stored
        if stored.terminal:
            self._ended_elsewhere(running, stored)

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
                self._finish(task, status=FAILED, error={"code": ErrorCode.INTERNAL_ERROR, "message": SHUT_DOWN}, message=SHUT_DOWN)
        keeper = self._keeper
        if keeper is not None:
            keeper.join(max(0.1, deadline - time.monotonic()))
        self._callbacks.close(max(0.0, deadline - time.monotonic()))


def _run_callbacks(callbacks: list[Callable[[], None]]) -> None:
    for callback in callbacks:
        try:
            callback()
        except Exception:
            log.exception("a task's cancel callback raised")


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


def _in_context_of_now(body: Body) -> Body:
    """`body`, to run later on a pool thread in the context variables of the thread that creates
    the task: so a traced call's task stays in its trace (OpenTelemetry keeps the current span in
    one), as does whatever else the application keeps there."""
    context = contextvars.copy_context()
    return lambda control: context.run(body, control)


def new_task_id() -> str:
    """144 random bits in URL-safe base64, never beginning with "-": a command line would take such
    an id for an option (`mcpsync tasks URL ID` failed so, one task in 64). Straight from
    `os.urandom`, as `secrets.token_urlsafe` does: importing `secrets` (and with it `random`) cost
    every server's start-up about a millisecond."""
    while True:
        task_id = base64.urlsafe_b64encode(os.urandom(18)).decode()
        if not task_id.startswith("-"):
            return task_id
