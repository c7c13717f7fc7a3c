"""The server scripts/bench-tasks serves: `mcpsync serve scripts/bench_tasks_app.py --http ...`.

One tool, `echo(text)`, marked `task="optional"`: a 2026-07-28 call whose client declares the
`io.modelcontextprotocol/tasks` extension runs it as a task (answered `resultType: "task"`), the
same call without the extension runs it as a plain call, so both measure the same body. The body
returns at once: a task ends as soon as a worker of the task pool takes it, and the pool never
fills.

The task limits are raised so that no creation is refused while the bench makes tens of thousands
of tasks from one caller (every caller of an open endpoint is one, for the per-owner cap): the
defaults (1,000 per caller, 10,000 in all) would refuse the bench's creations within a second. A
finished task's record is kept for its TTL (an hour, the default), so every task the bench made
is still readable by tasks/get when it ends.
"""

from __future__ import annotations

from mcpsync import Server, Service
from mcpsync.tasks import TaskLimits, TaskRunner

MAX_KEPT = 10_000_000
"""Kept tasks, in all and per caller: more than a run makes (a few thousand a second)."""

LIMITS = TaskLimits(
    max_kept=MAX_KEPT,
    max_kept_per_owner=MAX_KEPT,
    max_waiting=MAX_KEPT,
    default_ttl_ms=3_600_000,
)

service = Service("bench-tasks")


@service.tool(task="optional")
def echo(text: str) -> str:
    """The text back, at once: as a task when the client takes one, else as a plain call."""
    return text


server = Server("bench-tasks", services=[service], tasks=TaskRunner(limits=LIMITS))
