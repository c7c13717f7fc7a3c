"""call_tool(task=True): a tool call the server runs as a task, followed by the client in both
protocol forms (2025-11-25: params.task, tasks/result; 2026-07-28: the tasks extension, tasks/get
inlining the outcome, tasks/update), against mcpsync's own server, in this process on a pair of
pipes (`connect(server)`) and over real HTTP sockets."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

import mcpsync
from mcpsync import ClientSession, Era, McpError, Server
from mcpsync.client import TaskCancelled, TaskHandle, TaskStatus, TaskTimeout

from .._timeouts import LONG, SHORT
from .task_tools import NAME_FORM, POLL_MS, gate, make_server

pytestmark = pytest.mark.timeout(LONG * 4)

MODES = ["legacy", "modern"]
_names = itertools.count()
asked: list[dict[str, Any]] = []


def _unique(what: str) -> str:
    return f"{what}-{next(_names)}"


def _elicit(params: dict[str, Any]) -> dict[str, Any]:
    asked.append(params)
    return {"action": "accept", "content": {"name": "Ada"}}


@pytest.fixture
def server() -> Iterator[Server]:
    made = make_server()
    try:
        yield made
    finally:
        made.close(LONG)


@pytest.fixture
def http_url(server: Server) -> str:
    return server.start_http(port=0).url


def _open(target: Any, mode: str, **options: Any) -> ClientSession:
    return mcpsync.connect(target, mode=mode, timeout=LONG, **options)


def _text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


# -- making a task and following it ---------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_the_call_answers_with_a_task_whose_statuses_follow_its_progress_to_its_result(server: Server, mode: str) -> None:
    name = _unique("steps")
    with _open(server, mode) as session:
        handle = session.call_tool("stepper", {"name": name}, task=True)
        assert isinstance(handle, TaskHandle) and isinstance(handle.task_id, str)
        assert (handle.status, handle.status_message) == ("working", None)
        assert handle.latest.poll_interval == POLL_MS / 1000 and handle.latest.created_at is not None
        seen: list[TaskStatus] = []
        for status in handle.statuses(LONG):
            seen.append(status)
            if status.message is not None and status.message.startswith("step ") and not status.terminal:
                session.call_tool("advance", {"name": name, "step": int(status.message.split()[1])})
        assert [(s.status, s.message) for s in seen[:-1]] == [("working", None), ("working", "step 1 of 2"), ("working", "step 2 of 2")]
        assert seen[-1].status == "completed" and seen[-1].terminal and handle.done
        assert {s.task_id for s in seen} == {handle.task_id}
        assert _text(handle.result()) == "2 steps done"
        assert handle.wait(LONG).status == "completed", "waiting on an ended task returns at once"


@pytest.mark.parametrize("mode", MODES)
def test_wait_returns_the_final_status_and_result_the_tools_result(server: Server, mode: str) -> None:
    name = _unique("wait")
    with _open(server, mode) as session:
        handle = session.call_tool("stepper", {"name": name, "steps": 1}, task=True)
        gate(f"{name}/1").set()
        final = handle.wait(LONG)
        assert (final.status, final.terminal) == ("completed", True)
        result = handle.result()
        assert (_text(result), result["isError"]) == ("1 steps done", False)


@pytest.mark.parametrize("mode", MODES)
def test_a_call_the_server_answers_at_once_is_a_finished_handle(server: Server, mode: str) -> None:
    with _open(server, mode) as session:
        handle = session.call_tool("plain", {}, task=True)
        assert (handle.task_id, handle.status, handle.done) == (None, "completed", True)
        assert _text(handle.result()) == "plain answer"
        assert handle.refresh() == handle.cancel() == handle.wait() == handle.latest


@pytest.mark.parametrize("mode", MODES)
def test_without_task_a_tool_that_may_run_as_one_answers_as_an_ordinary_call(server: Server, mode: str) -> None:
    with _open(server, mode) as session:
        result = session.call_tool("full_disk", {})
        assert "taskId" not in result and "task" not in result
        assert (result["isError"], _text(result)) == (True, "the disk is full")


def test_in_2025_11_25_a_tool_listed_without_tasks_is_called_without_asking_for_one(server: Server) -> None:
    with _open(server, "legacy") as session:
        assert session.call_tool("plain", {}, task=True).task_id is None, "the server refuses -32601 a task of a forbidden tool"
        assert isinstance(session.call_tool("hold", {"name": _unique("listed")}, task=True).cancel().task_id, str)


# -- questions ------------------------------------------------------------------------------------


def _asks_and_answers(session: ClientSession) -> None:
    before = len(asked)
    handle = session.call_tool("ask_name", {}, task=True)
    statuses = [status.status for status in handle.statuses(LONG)]
    assert "input_required" in statuses and statuses[-1] == "completed"
    assert _text(handle.result()) == "Hello, Ada!"
    assert [(q["message"], q["requestedSchema"]) for q in asked[before:]] == [("What is your name?", NAME_FORM)], "asked once"
    related = [q["_meta"]["io.modelcontextprotocol/related-task"] for q in asked[before:]]
    assert related == [{"taskId": handle.task_id}], "the callback is told whose question it is, in either era"


@pytest.mark.parametrize("mode", MODES)
def test_a_question_within_a_task_is_answered_by_the_elicitation_callback(server: Server, mode: str) -> None:
    with _open(server, mode, elicitation=_elicit) as session:
        _asks_and_answers(session)


@pytest.mark.parametrize("mode", MODES)
def test_over_http_a_question_within_a_task_is_answered_too(http_url: str, mode: str) -> None:
    """2025-11-25: the question comes on the SSE stream of a tasks/result. 2026-07-28: in tasks/get,
    answered with tasks/update; the server refuses -32020 a tasks/get|update whose Mcp-Name is not
    its taskId, so the client sends it."""
    with _open(http_url, mode, elicitation=_elicit) as session:
        _asks_and_answers(session)


def test_a_task_asking_a_client_without_the_callback_fails_as_a_call_would(server: Server) -> None:
    """As an ordinary call: in 2025-11-25 a tool error result (the task `failed` with it); in
    2026-07-28 the -32021 naming the capability."""
    with _open(server, "legacy") as session:
        handle = session.call_tool("ask_name", {}, task=True)
        assert handle.wait(LONG).status == "failed"
        assert handle.result()["isError"] is True and "elicitation" in _text(handle.result())
    with _open(server, "modern") as session:
        handle = session.call_tool("ask_name", {}, task=True)
        assert handle.wait(LONG).status == "failed"
        with pytest.raises(McpError) as failed:
            handle.result()
        assert (failed.value.code, failed.value.data) == (-32021, {"requiredCapabilities": {"elicitation": {}}})


# -- failures and cancelling ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_task_failing_with_a_json_rpc_error_raises_that_error(server: Server, mode: str) -> None:
    with _open(server, mode) as session:
        handle = session.call_tool("broken", {}, task=True)
        assert handle.wait(LONG).status == "failed"
        with pytest.raises(McpError) as failed:
            handle.result()
        assert (failed.value.code, failed.value.message, failed.value.data) == (-32602, "no such record", {"record": 42})


@pytest.mark.parametrize(("mode", "status"), [("legacy", "failed"), ("modern", "completed")])
def test_a_tool_error_ends_the_task_as_its_era_says_with_the_result_to_read(server: Server, mode: str, status: str) -> None:
    with _open(server, mode) as session:
        handle = session.call_tool("full_disk", {}, task=True)
        assert handle.wait(LONG).status == status
        result = handle.result()
        assert (result["isError"], _text(result)) == (True, "the disk is full")


@pytest.mark.parametrize("mode", MODES)
def test_cancel_stops_the_tool_and_result_then_raises_task_cancelled(server: Server, mode: str) -> None:
    name = _unique("cancel")
    with _open(server, mode) as session:
        handle = session.call_tool("hold", {"name": name}, task=True)
        assert gate(f"{name}/running").wait(LONG)
        assert handle.cancel().status == "cancelled"
        assert handle.wait(LONG).status == "cancelled" and handle.done
        with pytest.raises(TaskCancelled, match="cancelled by the client"):
            handle.result()
        assert gate(f"{name}/cancelled").wait(LONG), "the tool never saw the cancel"
        assert handle.cancel().status == "cancelled", "cancelling an ended task returns its final status"


@pytest.mark.parametrize("mode", MODES)
def test_wait_past_its_timeout_raises_task_timeout_and_the_task_runs_on(server: Server, mode: str) -> None:
    with _open(server, mode) as session:
        handle = session.call_tool("hold", {"name": _unique("timeout")}, task=True)
        with pytest.raises(TaskTimeout) as late:
            handle.wait(SHORT)
        assert isinstance(late.value, TimeoutError)
        assert handle.refresh().status == "working"
        handle.cancel()


# -- a task by its id -----------------------------------------------------------------------------


def test_another_session_rebuilds_a_handle_from_the_task_id(http_url: str) -> None:
    """2026-07-28 on an open endpoint: a task is whoever holds its id's (a 2025-11-25 task of an
    open endpoint is its HTTP session's: see the next test)."""
    name = _unique("rebuild")
    with _open(http_url, "modern") as first:
        task_id = first.call_tool("stepper", {"name": name, "steps": 1}, task=True).task_id
        assert task_id is not None
    with _open(http_url, "modern") as second:
        handle = second.task(task_id)
        assert (handle.task_id, handle.status) == (task_id, "working")
        assert second.get_task(task_id).status == "working"
        gate(f"{name}/1").set()
        assert _text(handle.result(LONG)) == "1 steps done"
        assert second.cancel_task(task_id).status == "completed", "an ended task keeps its status"


def test_in_2025_11_25_a_handle_is_rebuilt_in_the_session_that_owns_the_task(http_url: str) -> None:
    name = _unique("rebuild")
    with _open(http_url, "legacy") as session:
        task_id = session.call_tool("stepper", {"name": name, "steps": 1}, task=True).task_id
        assert task_id is not None
        handle = session.task(task_id)
        gate(f"{name}/1").set()
        assert _text(handle.result(LONG)) == "1 steps done"
        assert session.cancel_task(task_id).status == "completed"


def test_in_2025_11_25_the_callers_tasks_are_listed(http_url: str) -> None:
    with _open(http_url, "legacy") as session:
        made = [session.call_tool("hold", {"name": _unique("listed")}, task=True) for _ in range(2)]
        listed = {status.task_id: status.status for status in session.list_tasks()}
        assert {handle.task_id for handle in made} <= listed.keys()
        for handle in made:
            handle.cancel()
        assert {listed_id: status for listed_id, status in ((s.task_id, s.status) for s in session.list_tasks()) if listed_id in {h.task_id for h in made}} == {
            handle.task_id: "cancelled" for handle in made
        }


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_task_id_is_the_servers_minus_32602(server: Server, mode: str) -> None:
    with _open(server, mode) as session:
        assert session.era is (Era.HANDSHAKE if mode == "legacy" else Era.MODERN)
        with pytest.raises(McpError) as unknown:
            session.task("no-such-task")
        assert unknown.value.code == -32602
