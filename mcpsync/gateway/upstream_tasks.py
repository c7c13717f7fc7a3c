"""An upstream's task behind a task of the gateway's own.

Strategy: a downstream call of an upstream tool that takes tasks (`execution.taskSupport` optional or
required, in the upstream's listing) becomes a task of the gateway's, in the downstream's form, like
a local tool's: the engine answers the call with the gateway's task, and the function it runs on the
task pool is this one, which calls the upstream tool as a task (`call_tool(task=True)`, in the
upstream's era) and waits for it. So the two eras and two forms meet only here: the downstream polls
the gateway, and the gateway polls the upstream.

- The upstream task's status messages become the gateway task's (`ctx.progress`, cut at
  `MAX_MESSAGE`), so a downstream poll shows what the upstream says.
- The gateway task's cancellation (`tasks/cancel` downstream, or a shutdown) cancels the upstream
  task, whose end then ends the wait.
- The upstream's outcome is the gateway task's: its result, or its JSON-RPC error; a lost upstream
  is an error naming it.
- An upstream that answers at once (it chose not to make a task) is answered at once too.

- The upstream task's questions are our task's: they name their task (related-task `_meta`), so
  the relay (`Relay.asking_for`) asks them through our task's context, as a local function's
  questions are asked (its `inputRequests`, or a request on its `tasks/result`).
"""

from __future__ import annotations

import logging
from typing import Any

from ..catalog.context import Context
from ..client.tasks import TaskCancelled, TaskHandle
from ..errors import McpsyncError
from ..protocol.jsonrpc import ErrorCode, McpError
from .forwarded import strip_era_fields
from .relay import Relay

log = logging.getLogger("mcpsync")

MAX_MESSAGE = 1000
"""Characters of an upstream task's status message passed on (cut with "…"): every poll of the
gateway's task repeats it, so an upstream's megabyte is not sent to each."""


def run_upstream_task(upstream: str, session: Any, name: str, arguments: dict[str, Any], ctx: Context, timeout: float,
                      questions: Relay) -> dict[str, Any]:
    """Call `name` on the upstream as a task and wait for it, as the gateway task's function;
    `timeout` bounds each request to the upstream (not the task, which runs as long as it runs);
    `questions`: the upstream's relay, told whose the upstream task's questions are."""
    try:
        handle: TaskHandle = session.call_tool(name, arguments, task=True, timeout=timeout)
        task_id = handle.task_id
        if task_id is None:
            return strip_era_fields(dict(handle.result()))
        ctx.on_cancel(lambda: _cancel(upstream, handle, timeout))
        questions.asking_for(task_id, ctx)  # the upstream task's questions are our task's to ask
        try:
            step = 0
            for status in handle.statuses():
                if status.message is not None:
                    step += 1
                    cut = status.message if len(status.message) <= MAX_MESSAGE else status.message[:MAX_MESSAGE] + "…"
                    ctx.progress(step, message=cut)
            return strip_era_fields(dict(handle.result(timeout=timeout)))  # its related-task _meta is the upstream's
        finally:
            questions.asking_for(task_id, None)
    except TaskCancelled as exc:
        raise McpError(ErrorCode.INTERNAL_ERROR, f"upstream '{upstream}' cancelled its task", {"upstream": upstream}) from exc
    except McpError:
        raise
    except McpsyncError as exc:
        raise McpError(ErrorCode.INTERNAL_ERROR, f"upstream '{upstream}' failed: {exc}", {"upstream": upstream}) from exc


def _cancel(upstream: str, handle: TaskHandle, timeout: float) -> None:
    """On the thread that cancelled the gateway's task: cancel the upstream's too."""
    try:
        handle.cancel(timeout=timeout)
    except McpsyncError as exc:  # it ends by itself, or with its connection: the wait ends either way
        log.info("cancelling the task of upstream %r failed: %s", upstream, exc)
