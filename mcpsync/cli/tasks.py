"""Tasks on the command line: `mcpsync call --task` follows the task its call made, and
`mcpsync tasks` lists the caller's tasks, shows one, waits for one or cancels one.

Following a task (`follow`) prints each change of its status or message on stderr, as the
handle's `statuses()` reports them, then prints its result as `call` does. Two things happen to a
task that do not happen to a call, and both are handled here:

- The connection drops while the task runs on (a proxy restarts, the network blinks). Over HTTP a
  poll that cannot reach the server fails alone, the session survives it, so the poll is tried
  again, waiting twice as long each time up to MAX_RETRY_WAIT, for as long as the server keeps
  the task (its TTL from its creation); each retry says so on stderr.
- The user presses Ctrl-C: the task is cancelled (`tasks/cancel`) before the command exits 130,
  so no work is left running for nobody.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from ._client_common import (
    _call_failure,
    _ClientFailure,
    _connection_options,
    _endpoint,
    _interruptible,
    _NeedsAnswer,
    _open,
    _print_json,
    _print_result,
    _UsageFailure,
)

if TYPE_CHECKING:
    from ..client import ClientSession, TaskHandle, TaskStatus

FIRST_RETRY_WAIT = 0.5
"""Seconds before a failed poll is tried again; doubled at each failure in a row."""
MAX_RETRY_WAIT = 10.0
"""The longest wait between two tries."""
CANCEL_TIMEOUT = 5.0
"""How long Ctrl-C waits for the server to take the cancel, at most (the --timeout if shorter)."""


def call_as_task(
    session: ClientSession, tool: str, arguments: dict[str, Any], progress: Callable[[float, float | None, str | None], None], *, over_http: bool
) -> dict[str, Any]:
    """`call --task`: make the task, follow it to its end (its id first); its result."""
    handle = session.call_tool(tool, arguments, progress=progress, task=True)
    if handle.task_id is None:
        click.echo("the server answered at once, without a task", err=True)
    return follow(session, handle, over_http=over_http)


def follow(session: ClientSession, handle: TaskHandle, *, over_http: bool) -> dict[str, Any]:
    """Print the task's status now, then each change, on stderr until it ends; its result. Ctrl-C
    cancels it; over HTTP, a poll that cannot reach the server is retried while the server keeps
    the task."""
    try:
        return _follow(session, handle, over_http)
    except KeyboardInterrupt:
        _cancel_on_interrupt(session, handle)
        raise


def _follow(session: ClientSession, handle: TaskHandle, over_http: bool) -> dict[str, Any]:
    from ..client import TaskCancelled
    from ..errors import MissingCallback
    from ..protocol.jsonrpc import McpError

    shown: tuple[str, str | None] | None = None
    ttl = handle.latest.ttl
    expires = None if ttl is None else time.monotonic() + ttl  # the server forgets the task then
    while True:
        try:
            for status in handle.statuses():
                if handle.task_id is not None and (status.status, status.message) != shown:
                    _say(status)
                    shown = (status.status, status.message)
            return handle.result()
        except MissingCallback as exc:  # a question only a person could answer: nobody is there
            _cancel_quietly(session, handle)
            raise _NeedsAnswer(f"{exc} (mcpsync call answers no elicitation, sampling or roots request; the task was cancelled)") from exc
        except TaskCancelled as exc:
            raise _ClientFailure(str(exc)) from exc
        except McpError as exc:
            if not (over_http and _unreachable(exc)):
                raise
            _reach_again(handle, exc, expires)


def _reach_again(handle: TaskHandle, error: Exception, expires: float | None) -> None:
    """Poll the task until the server answers, waiting FIRST_RETRY_WAIT, then twice as long after
    each failure (MAX_RETRY_WAIT at most), saying so each time; raise the last error once the
    server would have forgotten the task, or when it answers something else."""
    wait = FIRST_RETRY_WAIT
    while True:
        if expires is not None and time.monotonic() + wait >= expires:
            raise error
        click.echo(f"task {handle.task_id}: the server cannot be reached ({error}); trying again in {wait:g} s", err=True)
        time.sleep(wait)
        try:
            handle.refresh()
            return
        except Exception as again:
            if not _unreachable(again):
                raise
            error, wait = again, min(wait * 2, MAX_RETRY_WAIT)


def _unreachable(exc: Exception) -> bool:
    """Whether a failed request is the HTTP connection's own -32603, saying the server could not be
    reached, or a gateway in front of it could not (502, 503, 504), rather than the server's
    answer: `HttpConnection` fails one request so, naming the URL in `data`, and the session lives."""
    from ..protocol.jsonrpc import ErrorCode, McpError

    data = exc.data if isinstance(exc, McpError) and exc.code == ErrorCode.INTERNAL_ERROR else None
    if not isinstance(data, dict) or "url" not in data or data.get("unauthorized"):
        return False
    return data.get("status") in (None, 502, 503, 504)


def _cancel_on_interrupt(session: ClientSession, handle: TaskHandle) -> None:
    if handle.task_id is None:
        return
    click.echo(f"task {handle.task_id}: cancelling", err=True)
    status = _cancel_quietly(session, handle)
    if status is not None:
        _say(status)


def _cancel_quietly(session: ClientSession, handle: TaskHandle) -> TaskStatus | None:
    """Cancel the task; a failure is said on stderr, not raised (the command is ending anyway)."""
    from ..errors import McpsyncError

    if handle.task_id is None:
        return None
    try:
        return handle.cancel(timeout=min(session.timeout, CANCEL_TIMEOUT))
    except (McpsyncError, KeyboardInterrupt) as exc:
        click.echo(f"task {handle.task_id}: could not cancel it: {exc or 'interrupted'}", err=True)
        return None


def _say(status: TaskStatus) -> None:
    click.echo(f"task {status.task_id}: {status.status}{f': {status.message}' if status.message else ''}", err=True)


def _row(status: TaskStatus) -> str:
    return f"{status.task_id}  {status.status}{f'  {status.message}' if status.message else ''}"


@click.command(short_help="List, show, wait for or cancel the tasks of an MCP server (URL).")
@click.argument("target", nargs=-1, required=True, metavar="URL [TASK_ID] | -- COMMAND...")
@_connection_options
@click.option("--cancel", is_flag=True, help="Cancel TASK_ID, then show where it stands.")
@click.option("--wait", "wait_for", is_flag=True, help="Follow TASK_ID to its end, as call --task does, and print its result.")
@click.option("--json", "as_json", is_flag=True, help="Print the server's task objects (or, with --wait, the whole CallToolResult) as JSON.")
@_interruptible
def tasks(target: tuple[str, ...], mode: str, timeout: float, token_env: str | None, cancel: bool, wait_for: bool, as_json: bool) -> None:
    """List the tasks you made on the MCP server at URL, or show, wait for or cancel one of them
    (the id `mcpsync call --task` printed).

    A line per task: its id, its status, and its status message. Listing needs protocol
    2025-11-25 (2026-07-28 has no tasks/list): without --mode, `mcpsync tasks URL` speaks it.

    A server shows you your own tasks only. One that knows who calls (a token: --token-env, or
    mcpsync login) shows them to every command of yours. On an open endpoint a 2025-11-25 task is
    its session's, so a later command lists none; a TASK_ID still reaches a 2026-07-28 task (what
    call --task makes without --mode legacy). A server started from COMMAND is a new one, with no
    task yet.

    \b
    Exit status:
      0    done (with --wait: the tool succeeded)
      1    with --wait: the tool reported an error (isError), or asked for what
           mcpsync cannot give (elicitation, sampling, roots)
      2    a usage error: --cancel or --wait without TASK_ID, or both, a URL that
           cannot be used
      3    the server could not be started, reached or authorized, it answered a
           JSON-RPC error (an unknown TASK_ID is one), or --timeout passed; with
           --wait, a task that failed with such an error or was cancelled
      130  interrupted (Ctrl-C); with --wait, the task was cancelled first

    \b
    Examples:
      mcpsync tasks http://127.0.0.1:8000/mcp
      mcpsync tasks http://127.0.0.1:8000/mcp 5Qe1cS0vYJd2m1Yx0k2o3w
      mcpsync tasks http://127.0.0.1:8000/mcp 5Qe1cS0vYJd2m1Yx0k2o3w --cancel
    """
    from ..errors import McpsyncError

    server, task_id = _target(target)
    if (cancel or wait_for) and task_id is None:
        raise _UsageFailure(f"--{'cancel' if cancel else 'wait'} needs a TASK_ID after the URL")
    if cancel and wait_for:
        raise _UsageFailure("--cancel and --wait cannot go together")
    with _open(server, "legacy" if task_id is None and mode == "auto" else mode, timeout, token_env) as session:
        try:
            if task_id is None:
                listed = session.list_tasks()
                _show(listed, as_json)
                if not listed and not as_json:
                    click.echo("no tasks", err=True)
            elif wait_for:
                _print_result(follow(session, session.task(task_id), over_http=_endpoint(server) is not None), as_json)
            else:
                status = session.cancel_task(task_id) if cancel else session.get_task(task_id)
                _print_json(dict(status.wire)) if as_json else click.echo(_row(status))
        except McpsyncError as exc:
            raise _call_failure(exc) from exc


def _target(target: tuple[str, ...]) -> tuple[tuple[str, ...], str | None]:
    """The server (a URL, or a command) and the TASK_ID after a URL."""
    url = _endpoint(target[:1])
    if url is None:
        return target, None
    if len(target) > 2:
        raise click.UsageError(f"expected URL [TASK_ID], got {len(target)} arguments", click.get_current_context())
    return target[:1], target[1] if len(target) == 2 else None


def _show(statuses: list[TaskStatus], as_json: bool) -> None:
    if as_json:
        _print_json([dict(status.wire) for status in statuses])
        return
    for status in statuses:
        click.echo(_row(status))

