"""Tasks as the engine serves them: which calls become tasks, and the `tasks/*` methods of both eras.

Strategy: the two forms share one runner (`mcpsync.tasks.TaskRunner`) and differ only in who
decides and in what the wire says (`mcpsync.tasks.record`):

- 2025-11-25: the client decides, with `params.task` on `tools/call`, within the tool's
  `execution.taskSupport`; a forbidden tool asked for a task, or a required one asked without,
  is -32601 (the task page's rule). `tasks/get`, `tasks/result` (blocks until the task ends, then
  answers as the call would have), `tasks/list` and `tasks/cancel` exist from 2025-11-25 on.
- 2026-07-28 (`io.modelcontextprotocol/tasks`): the server decides, per request, for a client whose
  request declares the extension: an optional or required tool becomes a task, answered
  `resultType: "task"`; a required tool for a client without it is -32021 naming the extension.
  `tasks/get` inlines the outcome, `tasks/update` answers questions, `tasks/cancel` acknowledges;
  every `tasks/*` request without the extension is -32021, whatever its task.

A task belongs to the caller that made it (`Principal.key`; everyone on an open endpoint): another
caller's id is the same -32602 as an unknown one, and `tasks/list` shows one's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..catalog.context import Context, TaskStarted
from ..catalog.extension import Extension
from ..catalog.questions import NeedAnswers
from ..catalog.tool import Tool
from ..protocol.jsonrpc import ErrorCode, McpError, invalid_params
from ..protocol.versions import HANDSHAKE_ERA, MODERN_ERA, version_at_least
from ..tasks.control import TaskControl
from ..tasks.record import LEGACY, MODERN, RELATED_TASK, TASKS_EXTENSION, TaskRecord, legacy_task, modern_task
from ..tasks.store import TaskStoreDown
from .interceptors import Call
from .seams import ForwardedTool
from .served import Served

FIRST_TASK_VERSION = "2025-11-25"
"""The first handshake-era version with tasks."""

LEGACY_CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
"""The 2025-11-25 server capability: tasks for `tools/call`, listed and cancellable."""

ContextFor = Callable[[TaskControl], Context]
"""Builds the function's `Context` for a task, on the task's control instead of the request's exchange."""
Runs = Callable[[Context], dict[str, Any]]
"""Runs the tool (behind its interceptors) with a context; returns its `CallToolResult`."""


TASKS = Extension(TASKS_EXTENSION, eras=frozenset({MODERN_ERA}))
"""Tasks as 2026-07-28 has them, an extension the engine offers (advertised in that era's
`capabilities.extensions`); its methods are the core ones 2025-11-25 already has (OPERATIONS)."""


def advertised(call: Call, capabilities: dict[str, Any]) -> None:
    """Add what the handshake era says of tasks to the server's capabilities, from 2025-11-25 on (the
    2026-07-28 era's is the `TASKS` extension's advertisement)."""
    if call.era is HANDSHAKE_ERA and version_at_least(call.protocol_version, FIRST_TASK_VERSION):
        capabilities["tasks"] = {key: dict(value) for key, value in LEGACY_CAPABILITY.items()}


def _declares_extension(call: Call) -> bool:
    envelope = call.envelope
    extensions = envelope.client_capabilities.get("extensions") if envelope is not None else None
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def _missing_extension(what: str) -> McpError:
    return McpError(
        ErrorCode.MISSING_CLIENT_CAPABILITY,
        f"{what} needs the {TASKS_EXTENSION} extension, which this request's client capabilities do not declare",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def task_form(call: Call, tool: Tool | ForwardedTool) -> str | None:
    """The form this call of `tool` runs as a task in, or None for an ordinary call; raises the
    era's refusal for a call that cannot be served either way."""
    support = tool.task
    if call.era is MODERN_ERA:
        if support == "forbidden":
            return None  # a legacy `task` parameter is ignored (SEP-2663)
        if _declares_extension(call):
            return MODERN
        if support == "required":
            raise _missing_extension(f"tool '{tool.name}' runs only as a task: it")
        return None
    if not version_at_least(call.protocol_version, FIRST_TASK_VERSION):  # params.task is no parameter yet: ignored
        if support == "required":
            raise McpError(ErrorCode.METHOD_NOT_FOUND, f"tool '{tool.name}' runs only as a task, which needs protocol version {FIRST_TASK_VERSION}")
        return None
    asked = call.params.get("task")
    if asked is not None and not isinstance(asked, dict):
        raise invalid_params("tools/call: params.task must be an object")
    if asked is None:
        if support == "required":
            raise McpError(ErrorCode.METHOD_NOT_FOUND, f"tool '{tool.name}' must be called as a task: send params.task")
        return None
    if support == "forbidden":
        raise McpError(ErrorCode.METHOD_NOT_FOUND, f"tool '{tool.name}' does not run as a task: call it without params.task")
    return LEGACY


def start(served: Served, call: Call, tool_name: str, form: str, context_for: ContextFor, runs: Runs) -> dict[str, Any]:
    """Create the task, start its function, and answer the call with its creation result."""
    asked = call.params.get("task")
    requested_ttl = asked.get("ttl") if form == LEGACY and isinstance(asked, dict) else None

    def body(control: TaskControl) -> dict[str, Any]:
        try:
            return runs(context_for(control))
        except NeedAnswers:  # an InputRequired returned inside a task: a task asks, it does not return
            raise McpError(ErrorCode.INTERNAL_ERROR, f"tool '{tool_name}' returned InputRequired inside a task: ask with ctx.elicit") from None

    record = served.tasks.create(form=form, tool=tool_name, owner=_owner(call), requested_ttl=requested_ttl, body=body)
    if form == LEGACY:
        return {"task": legacy_task(record)}
    return {"resultType": "task", **modern_task(record, detailed=False)}


def starter(
    served: Served, call: Call, tool: Tool, context_for: ContextFor, wrap: Callable[[Any], dict[str, Any]]
) -> Callable[[Callable[[Context], Any]], TaskStarted] | None:
    """What `ctx.run_task(fn)` calls to start `fn` as a task, when this request's client can take
    one (a 2026-07-28 client declaring the extension); None otherwise (`run_task` then runs `fn`
    at once). A 2025-11-25 call never can: its client decides with `params.task` before the
    function runs (`task_form`), so a call that reaches the function without being a task stays
    one without. Decided once per call, on the call's hot path."""
    if call.era is not MODERN_ERA or not _declares_extension(call):
        return None

    def start_task(fn: Callable[[Context], Any]) -> TaskStarted:
        return TaskStarted(start(served, call, tool.name, MODERN, context_for, lambda ctx: wrap(fn(ctx))))

    return start_task


MAX_LISTENED_TASKS = 256
"""How many task ids one `subscriptions/listen` may ask to be told of."""


def listened_tasks(served: Served, call: Call, requested: Any) -> list[str]:
    """The ids of a listen's `notifications.taskIds` it will be told of (`notifications/tasks`):
    the caller's own live tasks among them; another caller's or an unknown id is left out, as
    tasks/get would not find it. Asking at all needs the extension (-32021)."""
    if requested is None:
        return []
    if not _declares_extension(call):  # before the shape, as for every tasks/* request
        raise _missing_extension("subscriptions/listen with notifications.taskIds")
    if not isinstance(requested, list) or not all(isinstance(task_id, str) for task_id in requested):
        raise invalid_params("subscriptions/listen: notifications.taskIds must be a list of strings")
    if len(requested) > MAX_LISTENED_TASKS:
        raise invalid_params(f"subscriptions/listen: at most {MAX_LISTENED_TASKS} taskIds")
    owner, found = _owner(call), []
    for task_id in dict.fromkeys(requested):
        try:
            served.tasks.load(task_id, owner)
        except TaskStoreDown:
            raise  # not an unknown task: the listen is refused, as the store cannot tell
        except McpError:
            continue
        found.append(task_id)
    return found


def status_notification(record: TaskRecord) -> dict[str, Any]:
    """The params of a 2026-07-28 `notifications/tasks`: the task as tasks/get details it."""
    return modern_task(record, detailed=True)


def _owner(call: Call) -> str | None:
    """Whose the call's tasks are: its token's principal; without one, its handshake-era HTTP
    session's (see `Session.tasks_owner`); else nobody's in particular (stdio's one client, or a
    2026-07-28 request to an open endpoint, where a task is whoever holds its unguessable id)."""
    if call.principal is not None:
        return call.principal.key
    return call.session.tasks_owner if call.era is HANDSHAKE_ERA else None


def _task_id(call: Call) -> Any:
    task_id = call.params.get("taskId")
    if not isinstance(task_id, str):
        raise invalid_params(f"{call.method}: params.taskId must be a string")
    return task_id


def _gate(call: Call) -> None:
    """The era's admission of a `tasks/*` request: 2026-07-28 needs the extension declared (before
    any lookup); the handshake era needs a version that has tasks."""
    if call.era is MODERN_ERA:
        if not _declares_extension(call):
            raise _missing_extension(call.method)
    elif not version_at_least(call.protocol_version, FIRST_TASK_VERSION):
        raise McpError(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {call.method} needs protocol version {FIRST_TASK_VERSION}", {"method": call.method})


# -- the methods ------------------------------------------------------------------------------------

def get_task(served: Served, call: Call) -> dict[str, Any]:
    _gate(call)
    record = served.tasks.load(_task_id(call), _owner(call))
    if call.era is MODERN_ERA:
        return {"resultType": "complete", **modern_task(record, detailed=True)}
    return legacy_task(record)


def task_result(served: Served, call: Call) -> dict[str, Any]:
    """2025-11-25: wait for the task to end, carrying its questions to the client on this request's
    stream; then answer as the call would have (its result, or its error), tied to the task."""
    _gate(call)
    task_id = _task_id(call)
    exchange = call.exchange
    record = served.tasks.wait(task_id, _owner(call), cancelled=exchange.cancel_event.is_set, carrier=exchange.ask, notify=exchange.notify)
    related = {RELATED_TASK: {"taskId": task_id}}
    if record.result is not None:
        return {**record.result, "_meta": {**record.result.get("_meta", {}), **related}}
    if record.error is not None:
        raise McpError(record.error.get("code", ErrorCode.INTERNAL_ERROR), record.error.get("message", "the task failed"), record.error.get("data"))
    if exchange.cancel_event.is_set():
        raise McpError(ErrorCode.INTERNAL_ERROR, "tasks/result was cancelled before the task ended", {"taskId": task_id})
    raise McpError(ErrorCode.INVALID_REQUEST, f"the task was {record.status}: it has no result", {"taskId": task_id, "status": record.status})


def list_tasks(served: Served, call: Call) -> dict[str, Any]:
    _gate(call)
    records, next_cursor = served.tasks.list(_owner(call), call.params.get("cursor"), served.page_size)
    result: dict[str, Any] = {"tasks": [legacy_task(record) for record in records]}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


def cancel_task(served: Served, call: Call) -> dict[str, Any]:
    _gate(call)
    task_id = _task_id(call)
    if call.era is MODERN_ERA:
        served.tasks.cancel(task_id, _owner(call))  # an ended task is acknowledged alike (SEP-2663)
        return {}
    return legacy_task(served.tasks.cancel(task_id, _owner(call), refuse_ended=True))


def update_task(served: Served, call: Call) -> dict[str, Any]:
    _gate(call)
    task_id = _task_id(call)
    responses = call.params.get("inputResponses")
    if not isinstance(responses, dict):
        raise invalid_params("tasks/update: params.inputResponses must be an object")
    served.tasks.answer(task_id, _owner(call), responses)
    return {}


OPERATIONS = {
    "tasks/get": get_task,
    "tasks/result": task_result,
    "tasks/list": list_tasks,
    "tasks/cancel": cancel_task,
    "tasks/update": update_task,
}
