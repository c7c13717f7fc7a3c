"""mcpsync's client against a 2025-11-25 task server nobody here wrote: the official TypeScript SDK's
``registerToolTask`` on its ``InMemoryTaskStore`` (``ts_tasks_server.mjs``, scripts/peers-npm's
pinned SDK), over Streamable HTTP and stdio.

What a program calling ``call_tool(..., task=True)`` sees: tasks created ``working`` with the TTL it
asked for, polled to their end and read with ``tasks/result``; the elicitation the SDK queues on a
task, carried by the ``tasks/result`` the handle keeps open while the task is ``input_required`` and
answered by the session's own callback; cancelling (and cancelling again, which the SDK refuses
-32602 and the handle answers with the final status); the listing; a handle rebuilt from a task id;
and a tool the SDK lists ``forbidden`` called as an ordinary call.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from wire import read_serving_url

import mcpsync
from mcpsync.client import ClientSession, TaskCancelled

pytestmark = pytest.mark.timeout(120)

TS_SERVER = Path(__file__).with_name("ts_tasks_server.mjs")
LONG = 20.0 if os.environ.get("CI") else 10.0
POLL_MS = 100  # what the fixture's tasks suggest


@pytest.fixture(scope="module")
def sdk_dir(node: str, npm_entry: Callable[[str], str], repo_root: Path) -> Path:
    npm_entry("everything")  # scripts/peers-npm installs the pinned SDK with the servers
    return repo_root / ".peers-npm" / "node_modules" / "@modelcontextprotocol" / "sdk"


@pytest.fixture(scope="module")
def http_url(node: str, sdk_dir: Path) -> Iterator[str]:
    process = subprocess.Popen([node, str(TS_SERVER), str(sdk_dir), "http", "0"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        url, stderr = read_serving_url(process, LONG)
        if url is None:
            pytest.fail(f"ts_tasks_server.mjs did not start:\n{stderr.decode(errors='replace')}", pytrace=False)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.communicate(timeout=LONG)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=LONG)


@pytest.fixture(params=["http", "stdio"])
def target(request: pytest.FixtureRequest, node: str, sdk_dir: Path) -> Any:
    if request.param == "http":
        return request.getfixturevalue("http_url")
    return [node, str(TS_SERVER), str(sdk_dir), "stdio"]


asked: list[dict[str, Any]] = []


def _confirm(params: dict[str, Any]) -> dict[str, Any]:
    asked.append(params)
    return {"action": "accept", "content": {"confirm": True}}


def _open(target: Any) -> ClientSession:
    return mcpsync.connect(target, mode="legacy", timeout=LONG, elicitation=_confirm)


def _text(result: dict[str, Any]) -> str:
    (block,) = result["content"]
    return str(block["text"])


def test_a_task_is_created_polled_to_its_end_and_read(target: Any) -> None:
    with _open(target) as session:
        task = session.call_tool("slow_compute", {"seconds": 0.2}, task=True, task_ttl=30)
        assert isinstance(task.task_id, str) and task.status == "working"
        assert (task.latest.ttl, task.latest.poll_interval) == (30.0, POLL_MS / 1000)
        statuses = [status.status for status in task.statuses(LONG)]
        assert statuses[0] == "working" and statuses[-1] == "completed"
        assert _text(task.result()) == "done after 0.2s"
        again = session.task(task.task_id)  # a handle from the id
        assert (again.status, _text(again.result())) == ("completed", "done after 0.2s")


def test_the_tasks_question_is_answered_by_the_elicitation_callback(target: Any) -> None:
    before = len(asked)
    with _open(target) as session:
        task = session.call_tool("confirm_delete", {"filename": "notes.txt"}, task=True)
        statuses = [status.status for status in task.statuses(LONG)]
        assert "input_required" in statuses and statuses[-1] == "completed"
        assert _text(task.result()) == "Deleted notes.txt"
    (question,) = asked[before:]
    assert question["message"] == "Delete notes.txt?"
    assert question["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task.task_id}


def test_a_cancelled_task_has_no_result_and_a_second_cancel_returns_its_status(target: Any) -> None:
    with _open(target) as session:
        task = session.call_tool("slow_compute", {"seconds": 60}, task=True)
        cancelled = task.cancel()
        assert (cancelled.status, cancelled.message) == ("cancelled", "Client cancelled task execution.")
        with pytest.raises(TaskCancelled):
            task.result(LONG)
        assert session.cancel_task(task.task_id).status == "cancelled", "the SDK refuses -32602; the handle reads the status"
        assert {status.task_id: status.status for status in session.list_tasks()}[task.task_id] == "cancelled"


def test_a_tool_listed_forbidden_is_called_as_an_ordinary_call(target: Any) -> None:
    with _open(target) as session:
        handle = session.call_tool("greet", {"name": "Ada"}, task=True)
        assert (handle.task_id, _text(handle.result())) == (None, "Hello, Ada!")
