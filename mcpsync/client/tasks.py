"""A tool call that runs as a task, from the client's side, in both protocol forms: `TaskHandle`
(what `ClientSession.call_tool(..., task=True)` returns), the `TaskStatus` values it reports, and
the requests about a task a session makes (`tasks/get`, `tasks/result`, `tasks/list`,
`tasks/cancel`, `tasks/update`).

Strategy: a task is polled. The handle asks `tasks/get` at the task's suggested interval and
reports each change of status or message, on the waiting thread; the two forms differ in who
decides, in how the task's questions reach the session's callbacks (elicitation, sampling, roots)
and in where the outcome is read:

- 2025-11-25: the client asks for a task (`params.task`), and only of a tool whose listing allows
  one (`execution.taskSupport` optional or required) on a server offering `tasks.requests.tools.call`.
  A question is a request the server sends on the stream of a `tasks/result`: while the task is
  `input_required`, the handle keeps one `tasks/result` open, never waited on (it blocks until the
  task ends), and the session answers what arrives on it as it answers any request of the server's.
  The outcome is what `tasks/result` answers: the call's result, or its error.
- 2026-07-28 (`io.modelcontextprotocol/tasks`): the server decides, for a request declaring the
  extension. Only requests about tasks declare it (a `call_tool` without `task=True` could not take
  a task for an answer). A question is an entry of `inputRequests` in `tasks/get`, answered by the
  same callbacks on the waiting thread, as an `input_required` result's are (`_input_required`),
  and sent back with `tasks/update`. The outcome is inlined in `tasks/get`.
"""

from __future__ import annotations

import datetime
import math
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import CallTimeout, McpsyncError, ProtocolViolation
from ..protocol.jsonrpc import ErrorCode, McpError
from ..protocol.versions import META_CLIENT_CAPABILITIES, Era
from ..tasks.record import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, RELATED_TASK, TASKS_EXTENSION, TERMINAL, WORKING
from ._input_required import Session as RoundsSession
from ._input_required import answer_questions, parse_input_required
from ._pending import PendingCall, Progress

DEFAULT_POLL_INTERVAL = 1.0
"""Seconds between two polls of a task whose server suggests no interval (as the TypeScript SDK)."""
MIN_POLL_INTERVAL = 0.05
"""The shortest interval honoured: a server suggesting 0 does not make the client spin."""
STATUSES = frozenset({WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELLED})


class TaskCancelled(McpsyncError):
    """The task was cancelled (by this client or another): it has no result."""


class TaskTimeout(McpsyncError, TimeoutError):
    """The task had not ended by the deadline given to `wait`, `result` or `statuses`. Nothing was
    cancelled: the task runs on; wait again, or `cancel()` it."""


@dataclass(frozen=True, slots=True)
class TaskStatus:
    """What the server last said of a task: one step of its life.

    `ttl` is how long the server keeps the task from its creation, in seconds (None: no limit, or
    not said); `poll_interval` the pace it suggests, in seconds. `wire` is the server's own object
    (in 2026-07-28 from `tasks/get`, with the inlined `result`, `error` or `inputRequests`)."""

    task_id: str | None
    """None only for a call the server answered at once, without making a task."""
    status: str
    """working, input_required, completed, failed or cancelled."""
    message: str | None = None
    created_at: datetime.datetime | None = None
    updated_at: datetime.datetime | None = None
    ttl: float | None = None
    poll_interval: float | None = None
    wire: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def terminal(self) -> bool:
        """Whether the task has ended (completed, failed or cancelled): it never changes again."""
        return self.status in TERMINAL


class Session(RoundsSession, Protocol):
    """The session as the tasks see it (a `ClientSession`): as the input rounds see it (a task's
    questions are answered the same way), and what it says the server offers."""

    server_capabilities: dict[str, Any]

    def start_request(
        self, method: str, params: dict[str, Any] | None = None, *, progress: Progress | None = None, timeout: float | None = None
    ) -> PendingCall: ...


# -- the wire --------------------------------------------------------------------------------------

def task_params(era: Era | None, params: dict[str, Any]) -> dict[str, Any]:
    """`params` of a request about tasks: in 2026-07-28, declaring the extension for this request
    alone (the session adds a request's own `clientCapabilities.extensions` to its envelope)."""
    if era is not Era.MODERN:
        return params
    return {**params, "_meta": {META_CLIENT_CAPABILITIES: {"extensions": {TASKS_EXTENSION: {}}}}}


def task_support(tools: list[dict[str, Any]]) -> dict[str, str]:
    """Each listed tool's 2025-11-25 `execution.taskSupport` (absent: forbidden), by name."""
    support: dict[str, str] = {}
    for tool in tools:
        execution = tool.get("execution") if isinstance(tool, dict) else None
        given = execution.get("taskSupport") if isinstance(execution, dict) else None
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            support[tool["name"]] = given if isinstance(given, str) else "forbidden"
    return support


def offers_tool_tasks(capabilities: Mapping[str, Any]) -> bool:
    """Whether a 2025-11-25 server takes `tools/call` as a task (`tasks.requests.tools.call`)."""
    tasks = capabilities.get("tasks")
    requests = tasks.get("requests") if isinstance(tasks, dict) else None
    tools = requests.get("tools") if isinstance(requests, dict) else None
    return isinstance(tools, dict) and isinstance(tools.get("call"), dict)


def task_request(ttl: float | None) -> dict[str, Any]:
    """The 2025-11-25 `params.task`: the retention asked for, in ms (the server may grant another)."""
    if ttl is None:
        return {}
    if not ttl > 0:
        raise ValueError("task_ttl must be a positive number of seconds")
    return {"ttl": max(1, round(ttl * 1000))}


def parse_status(method: str, wire: Any) -> TaskStatus:
    """A `Task` of either form as a TaskStatus; ProtocolViolation when it is not one."""
    if not isinstance(wire, dict) or not isinstance(wire.get("taskId"), str) or wire.get("status") not in STATUSES:
        raise ProtocolViolation(f"{method}: the server's answer is not a task (a taskId and a known status)")
    message = wire.get("statusMessage")
    return TaskStatus(
        task_id=wire["taskId"],
        status=wire["status"],
        message=message if isinstance(message, str) else None,
        created_at=_moment(wire.get("createdAt")),
        updated_at=_moment(wire.get("lastUpdatedAt")),
        ttl=_seconds(wire.get("ttlMs", wire.get("ttl"))),
        poll_interval=_seconds(wire.get("pollIntervalMs", wire.get("pollInterval"))),
        wire=wire,
    )


def created(era: Era | None, result: dict[str, Any]) -> TaskStatus | None:
    """The task a `tools/call` answer created (2025-11-25 `{task: ...}`, 2026-07-28
    `resultType: "task"`), or None for an ordinary result."""
    if era is Era.MODERN:
        return parse_status("tools/call", result) if result.get("resultType") == "task" else None
    return parse_status("tools/call", result["task"]) if "task" in result and "content" not in result else None


def _moment(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.datetime.fromisoformat(value)
    except ValueError:
        return None


def _seconds(ms: Any) -> float | None:
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not ms >= 0:
        return None
    return ms / 1000


# -- requests about a task -------------------------------------------------------------------------

def get_task(session: Session, task_id: str, timeout: float | None = None) -> TaskStatus:
    """`tasks/get`: where the task stands (McpError -32602 for an unknown, expired or foreign one)."""
    return parse_status("tasks/get", session.request("tasks/get", task_params(session.era, {"taskId": task_id}), timeout=timeout))


def cancel_task(session: Session, task_id: str, timeout: float | None = None) -> TaskStatus:
    """`tasks/cancel`, then where the task stands. A task that had already ended is not an error:
    its final status is returned (2025-11-25 refuses to cancel it, -32602; 2026-07-28 acknowledges).
    In 2026-07-28 cancelling is cooperative: the status may stay `working` a while."""
    try:
        answer = session.request("tasks/cancel", task_params(session.era, {"taskId": task_id}), timeout=timeout)
    except McpError as exc:
        if exc.code != ErrorCode.INVALID_PARAMS:
            raise
        status = get_task(session, task_id, timeout)  # -32602 again for a task that does not exist
        if not status.terminal:
            raise
        return status
    if session.era is Era.MODERN:  # an acknowledgement only
        return get_task(session, task_id, timeout)
    return parse_status("tasks/cancel", answer)


# -- the handle ------------------------------------------------------------------------------------

class TaskHandle:
    """A tool call the server runs as a task: poll it, wait for it, answer its questions, cancel it.

    `call_tool(..., task=True)` returns one; `ClientSession.task(task_id)` rebuilds one from an id
    kept earlier (after a reconnect, say). When the server answered the call at once instead of
    making a task (2026-07-28: its choice; 2025-11-25: a server or tool without tasks), the handle
    is already finished: `task_id` is None, `status` "completed", and `result()` is that answer.

    Questions the task asks (elicitation, sampling, roots) are answered by the session's callbacks
    while `statuses()`, `wait()` or `result()` run, in both forms (see the module docstring). A
    question the session has no callback for raises `MissingCallback` there, the task left waiting
    for its answer: cancel it, or answer it from a session that has the callback.

    Thread-safe; usually one thread waits while another may `cancel()`.
    """

    def __init__(self, session: Session, status: TaskStatus, *, result: dict[str, Any] | None = None) -> None:
        self._session = session
        self._lock = threading.Lock()
        self._latest = status
        self._result = result  # the answer of a call that made no task
        self._answered: set[str] = set()  # 2026-07-28: the keys of the questions answered (never reused)

    @classmethod
    def finished(cls, session: Session, result: dict[str, Any]) -> TaskHandle:
        """The handle of a call the server answered at once with `result`."""
        return cls(session, TaskStatus(task_id=None, status=COMPLETED), result=result)

    def __repr__(self) -> str:
        return f"<TaskHandle {self.task_id} {self.status}>"

    @property
    def task_id(self) -> str | None:
        """The server's id of the task (None: the server made no task)."""
        return self._latest.task_id

    @property
    def latest(self) -> TaskStatus:
        """The last status seen (no request is made)."""
        with self._lock:
            return self._latest

    @property
    def status(self) -> str:
        """The last status seen: working, input_required, completed, failed or cancelled."""
        return self.latest.status

    @property
    def status_message(self) -> str | None:
        """The last status message seen (a tool's progress messages become the task's message)."""
        return self.latest.message

    @property
    def done(self) -> bool:
        """Whether the last status seen is terminal."""
        return self.latest.terminal

    def refresh(self, *, timeout: float | None = None) -> TaskStatus:
        """Ask the server where the task stands (`tasks/get`; `timeout`: that request's deadline,
        the session's by default)."""
        task_id = self.task_id
        if task_id is None:
            return self.latest
        return self._seen(get_task(self._session, task_id, timeout))

    def cancel(self, *, timeout: float | None = None) -> TaskStatus:
        """Cancel the task (`tasks/cancel`) and return where it stands; a task that had ended keeps
        its final status (see `cancel_task`). In 2026-07-28 the server stops it when it can: the
        status returned may still be `working`; `wait()` sees it end."""
        task_id = self.task_id
        if task_id is None:
            return self.latest
        return self._seen(cancel_task(self._session, task_id, timeout))

    def statuses(self, timeout: float | None = None) -> Iterator[TaskStatus]:
        """The task's statuses as they change (status or message): the last one seen first, then
        each change, ending with the terminal one. Polls at the server's suggested interval, and
        answers the task's questions meanwhile. `timeout`: seconds for the whole iteration
        (None: until the task ends); past it, `TaskTimeout`. Each request has the session's
        deadline at most."""
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        carrier: PendingCall | None = None  # 2025-11-25: the tasks/result the questions come on
        current = self.latest
        try:
            yield current
            while not current.terminal:
                asked = False
                if current.status == INPUT_REQUIRED:
                    if self._session.era is Era.MODERN:
                        asked = self._answer(current, deadline, timeout)
                    elif carrier is None or carrier.done():
                        carrier = self._session.start_request("tasks/result", {"taskId": current.task_id})
                if not asked:  # just answered: see at once what the task does with it
                    self._pause(current, deadline, timeout, carrier)
                new = self.refresh(timeout=self._slice(deadline, timeout))
                if (new.status, new.message) != (current.status, current.message):
                    yield new
                current = new
        finally:
            if carrier is not None:
                carrier.cancel("the client stopped waiting for the task")

    def wait(self, timeout: float | None = None) -> TaskStatus:
        """Wait until the task ends (answering its questions meanwhile) and return its final
        status; `TaskTimeout` past `timeout` seconds (None: no deadline of its own)."""
        last = self.latest
        for status in self.statuses(timeout):
            last = status
        return last

    def result(self, timeout: float | None = None) -> dict[str, Any]:
        """Wait for the task to end and return its `CallToolResult` (check `isError`, as for
        `call_tool`; a 2025-11-25 task a tool error ended is `failed` but has its result). Raises
        McpError for a task that failed with a JSON-RPC error (the error the call would have
        answered), `TaskCancelled` for a cancelled task, `TaskTimeout` past `timeout`."""
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        final = self.wait(timeout)
        if self._result is not None:
            return self._result
        if final.status == CANCELLED:
            raise TaskCancelled(f"task {final.task_id} was cancelled" + (f": {final.message}" if final.message else ""))
        if self._session.era is not Era.MODERN:  # the answer the call would have had, or its error
            return self._session.request("tasks/result", {"taskId": final.task_id}, timeout=self._slice(deadline, timeout))
        inline = final.wire.get("result")
        if isinstance(inline, dict):
            return inline
        if final.status == FAILED:
            raise _failure(final)
        raise ProtocolViolation(f"tasks/get: task {final.task_id} is completed but carries no result")

    # -- plumbing --------------------------------------------------------------------------------
    def _seen(self, status: TaskStatus) -> TaskStatus:
        with self._lock:
            self._latest = status
        return status

    def _slice(self, deadline: float, timeout: float | None) -> float:
        """The deadline of one request within the wait's: the session's, or what is left."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TaskTimeout(f"task {self.task_id} had not ended within {timeout} s (it is {self.status}; it runs on)")
        return min(self._session.timeout, remaining)

    def _pause(self, current: TaskStatus, deadline: float, timeout: float | None, carrier: PendingCall | None) -> None:
        """Wait one poll interval, less if the deadline comes first; a 2025-11-25 `tasks/result`
        that ends (the task did) or a session that closes ends it early."""
        interval = max(MIN_POLL_INTERVAL, DEFAULT_POLL_INTERVAL if current.poll_interval is None else current.poll_interval)
        pause = min(interval, self._slice(deadline, timeout))
        if carrier is not None and not carrier.done():
            carrier.wait(pause)
        else:
            self._session._ending.wait(pause)

    def _answer(self, current: TaskStatus, deadline: float, timeout: float | None) -> bool:
        """2026-07-28: answer the task's new questions (`inputRequests` not answered yet) with the
        session's callbacks, in the server's order, and send them with `tasks/update`; whether
        there were any."""
        given = current.wire.get("inputRequests")
        fresh = {key: asked for key, asked in given.items() if key not in self._answered} if isinstance(given, dict) else {}
        if not fresh:
            return False
        questions, _ = parse_input_required("tasks/get", {"inputRequests": fresh})
        for question in questions.values():  # a callback knows whose question it is, as in 2025-11-25
            params = question.get("params") or {}
            question["params"] = {**params, "_meta": {**(params.get("_meta") or {}), RELATED_TASK: {"taskId": current.task_id}}}
        try:
            answers = answer_questions(self._session._handlers, "tasks/update", questions, deadline, math.inf if timeout is None else timeout)
        except CallTimeout as exc:
            raise TaskTimeout(f"task {self.task_id}: {exc}; the task runs on") from None
        params = task_params(Era.MODERN, {"taskId": current.task_id, "inputResponses": answers})
        self._session.request("tasks/update", params, timeout=self._slice(deadline, timeout))
        self._answered.update(answers)
        return True


def _failure(status: TaskStatus) -> McpError:
    """The JSON-RPC error a 2026-07-28 task failed with (its `error`), as McpError."""
    error = status.wire.get("error")
    if isinstance(error, dict) and isinstance(error.get("code"), int) and not isinstance(error.get("code"), bool):
        return McpError(error["code"], str(error.get("message", "")), error.get("data"))
    return McpError(ErrorCode.INTERNAL_ERROR, status.message or f"task {status.task_id} failed")
