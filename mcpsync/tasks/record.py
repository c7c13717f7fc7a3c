"""A task's record: what any replica needs to answer a question about one task, and its two wire forms.

Strategy: one plain record for both protocol forms. The 2025-11-25 form (the `tasks` capability,
a `task` parameter on `tools/call`) and the 2026-07-28 extension (`io.modelcontextprotocol/tasks`)
describe the same life (working, input_required, then completed, failed or cancelled) with other
field names and one other rule: a tool's `isError` result ends a 2025-11-25 task `failed` and a
2026-07-28 one `completed`. The record keeps the form it was made in, so each reader renders it
as its creator expects; the store keeps it as JSON, so a replica in another process reads it too.

Times are wall-clock seconds (`time.time()`): a record is read by other processes and machines,
whose monotonic clocks mean nothing here.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

WORKING = "working"
INPUT_REQUIRED = "input_required"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
TERMINAL = frozenset({COMPLETED, FAILED, CANCELLED})
"""A task in one of these never changes again."""

LEGACY = "2025-11-25"
"""The handshake era's form: `execution.taskSupport`, `params.task`, `tasks/result`, `tasks/list`."""
MODERN = "2026-07-28"
"""The extension's form: the server decides, `resultType: "task"`, `tasks/get` inlines the outcome."""

RELATED_TASK = "io.modelcontextprotocol/related-task"
"""The `_meta` key that ties a 2025-11-25 message to its task."""
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The 2026-07-28 extension's name, in the capabilities of both sides."""


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One task, as stored. `owner` is the creator's principal key (None on an open endpoint);
    `runner` names the replica running it and `lease_until` how long that replica vouches for it:
    a task still running past its lease has lost its replica (see `TaskRunner`)."""

    task_id: str
    form: str
    tool: str
    created_at: float
    ttl_ms: int | None
    poll_interval_ms: int
    owner: str | None = None
    status: str = WORKING
    status_message: str | None = None
    updated_at: float = 0.0
    result: dict[str, Any] | None = None
    """The tool's result: a completed task's, and a 2025-11-25 task failed by an `isError` result."""
    error: dict[str, Any] | None = None
    """The JSON-RPC error (code, message, data) of a task that failed outside the tool's result."""
    input_requests: dict[str, Any] = field(default_factory=dict)
    """2026-07-28: the questions waiting for `tasks/update`, by key."""
    runner: str | None = None
    lease_until: float | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def expired(self, now: float) -> bool:
        """Whether the task's time to live, counted from its creation, is over."""
        return self.ttl_ms is not None and now >= self.created_at + self.ttl_ms / 1000

    def changed(self, now: float, **changes: Any) -> TaskRecord:
        """A copy with `changes`, updated at `now`."""
        return replace(self, updated_at=now, **changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "form": self.form,
            "tool": self.tool,
            "created_at": self.created_at,
            "ttl_ms": self.ttl_ms,
            "poll_interval_ms": self.poll_interval_ms,
            "owner": self.owner,
            "status": self.status,
            "status_message": self.status_message,
            "updated_at": self.updated_at,
            "result": self.result,
            "error": self.error,
            "input_requests": self.input_requests,
            "runner": self.runner,
            "lease_until": self.lease_until,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskRecord:
        return cls(
            task_id=data["task_id"],
            form=data["form"],
            tool=data["tool"],
            created_at=data["created_at"],
            ttl_ms=data["ttl_ms"],
            poll_interval_ms=data["poll_interval_ms"],
            owner=data.get("owner"),
            status=data.get("status", WORKING),
            status_message=data.get("status_message"),
            updated_at=data.get("updated_at", data["created_at"]),
            result=data.get("result"),
            error=data.get("error"),
            input_requests=dict(data.get("input_requests") or {}),
            runner=data.get("runner"),
            lease_until=data.get("lease_until"),
        )


def iso(seconds: float) -> str:
    """ISO 8601 in UTC with milliseconds, as both forms' `createdAt` and `lastUpdatedAt` are."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _common(record: TaskRecord) -> dict[str, Any]:
    task: dict[str, Any] = {"taskId": record.task_id, "status": record.status}
    if record.status_message is not None:
        task["statusMessage"] = record.status_message
    task["createdAt"] = iso(record.created_at)
    task["lastUpdatedAt"] = iso(record.updated_at or record.created_at)
    return task


def legacy_task(record: TaskRecord) -> dict[str, Any]:
    """The 2025-11-25 `Task`: `ttl` (ms, or null for unlimited) and `pollInterval`."""
    task = _common(record)
    task["ttl"] = record.ttl_ms
    task["pollInterval"] = record.poll_interval_ms
    return task


def modern_task(record: TaskRecord, *, detailed: bool) -> dict[str, Any]:
    """The 2026-07-28 `Task` (`ttlMs`, `pollIntervalMs`); `detailed`: the `DetailedTask` of
    `tasks/get`, which inlines what the status has: the questions, the result or the error."""
    task = _common(record)
    task["ttlMs"] = record.ttl_ms
    task["pollIntervalMs"] = record.poll_interval_ms
    if detailed:
        if record.status == INPUT_REQUIRED and record.input_requests:
            task["inputRequests"] = dict(record.input_requests)
        elif record.status == COMPLETED and record.result is not None:
            task["result"] = record.result
        elif record.status == FAILED and record.error is not None:
            task["error"] = record.error
    return task


def tool_error_status(form: str) -> str:
    """The status a tool's `isError` result ends a task in: `failed` in 2025-11-25 (the task page),
    `completed` with the result in 2026-07-28 (a tool error is a result, SEP-2663)."""
    return FAILED if form == LEGACY else COMPLETED
