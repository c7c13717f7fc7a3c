"""mcpsync's 2025-11-25 tasks as a program on the official TypeScript SDK sees them, and that SDK as
a task server for mcpsync's client to be proved against.

``ts_tasks_driver.mjs`` (scripts/peers-npm's pinned SDK, its experimental ``client.experimental.tasks``;
software nobody here wrote) drives ``integration/fixtures/tasks_app.py`` served by a real
``mcpsync serve --http 127.0.0.1:0`` (the URL read from its stderr) and by ``mcpsync serve`` over
stdio (the SDK's StdioClientTransport starts it), one run per transport, and reports what each
call gave back. The tests check what a user of the SDK would see: tasks created ``working`` and
polled to their end, the elicitation a task asks carried by ``tasks/result`` and answered through
the SDK's own callback, cancellation, the listing, ``tasks/result`` answering as the call would
have (its result or its error, tied to the task), the refusals of calls against a tool's task
support, and ``callToolStream``'s messages.

``ts_tasks_server.mjs`` is the other direction: the SDK's ``registerToolTask`` with its
``InMemoryTaskStore``, over stdio and Streamable HTTP. Here it is only smoke-tested with raw
JSON-RPC (``wire.ServerProcess`` lines, urllib POSTs), so a client test can rely on it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from wire import FIXTURES, HANDSHAKE_VERSION, HttpServer, ServerProcess, base_env, has_traceback, legacy_init, serve_argv, spawn_http_server

pytestmark = pytest.mark.timeout(120)

DRIVER = Path(__file__).with_name("ts_tasks_driver.mjs")
TS_SERVER = Path(__file__).with_name("ts_tasks_server.mjs")
APP = FIXTURES / "tasks_app.py"
DRIVER_TIMEOUT = 100.0  # the driver bounds itself at 90 s; this is the backstop
LONG = 20.0 if os.environ.get("CI") else 10.0

RELATED_TASK = "io.modelcontextprotocol/related-task"
TASKS_CAPABILITY = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
CONFIRM_FORM = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "description": "Really delete it?"}},
    "required": ["confirm"],
}
STATUSES = {"working", "input_required", "completed", "failed", "cancelled"}
PAGE_SIZE = 100  # mcpsync serve's default --page-size; the driver makes more tasks than one page


@pytest.fixture(scope="module")
def sdk_dir(node: str, npm_entry: Callable[[str], str], repo_root: Path) -> Path:
    npm_entry("everything")  # scripts/peers-npm installs the pinned SDK with the servers
    return repo_root / ".peers-npm" / "node_modules" / "@modelcontextprotocol" / "sdk"


@pytest.fixture(scope="module")
def run_for(node: str, sdk_dir: Path, bounded: Any, repo_root: Path) -> Callable[[str], dict[str, Any]]:
    """transport -> {"report", "serverStderr"}. Each transport runs once per module, on first use; a
    failed run fails every test that needs it, each time with the driver's output."""
    runs: dict[str, Any] = {}

    def get(transport: str) -> dict[str, Any]:
        if transport not in runs:
            runs[transport] = _run(transport)
        outcome = runs[transport]
        if isinstance(outcome, str):
            pytest.fail(outcome, pytrace=False)
        return outcome

    def _run(transport: str) -> Any:
        args = [node, str(DRIVER), str(sdk_dir)]
        server = None
        if transport == "http":
            try:
                server = HttpServer(spawn_http_server(str(APP)), LONG)
            except pytest.fail.Exception as not_started:  # remembered like a driver failure
                return str(not_started)
            args += ["--url", server.url]
        else:
            args += ["--", *serve_argv(str(APP))]
        try:
            done = bounded(args, timeout=DRIVER_TIMEOUT, cwd=repo_root, env=base_env())
        except pytest.fail.Exception as timed_out:  # remembered, so a hang costs one timeout, not one per test
            return str(timed_out) + (f"\n--- server stderr ---\n{server.stop()}" if server else "")
        server_stderr = server.stop() if server else done.stderr  # over stdio the SDK passes the server's stderr on
        if done.returncode != 0:
            return f"the TypeScript SDK driver ({transport}) failed, exit status {done.returncode}:\n{done.stderr[-12000:]}" + (
                f"\n--- server stderr ---\n{server_stderr[-4000:]}" if server else "")
        return {"report": json.loads(done.stdout), "serverStderr": server_stderr}

    return get


@pytest.fixture(params=["http", "stdio"])
def run(request: pytest.FixtureRequest, run_for: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    return run_for(request.param)


def scenario(run: dict[str, Any], name: str) -> dict[str, Any]:
    """One scenario of the driver's report; one the SDK threw in fails with what it threw."""
    record = run["report"][name]
    if "threw" in record:
        pytest.fail(f"{name}: {record['threw']}\n{record.get('stack')}", pytrace=False)
    return record


def text_of(result: dict[str, Any]) -> str:
    (block,) = result["content"]
    assert block["type"] == "text", block
    return block["text"]


def related(message: dict[str, Any]) -> Any:
    return (message.get("_meta") or {}).get(RELATED_TASK)


# -- the TypeScript SDK's client against mcpsync --------------------------------------------------


def test_the_sdk_sees_the_task_capability_and_each_tools_task_support(run: dict[str, Any]) -> None:
    record = scenario(run, "handshake")
    assert run["report"]["wire"]["protocolVersion"] == HANDSHAKE_VERSION
    assert record["capabilities"]["tasks"] == TASKS_CAPABILITY
    assert record["taskSupport"] == {
        "slow": "optional", "release": None, "confirm_delete": "required", "failing": "optional", "protocol_error": "optional", "greet": None,
    }


def test_a_task_is_created_working_and_polled_to_completed(run: dict[str, Any]) -> None:
    record = scenario(run, "poll")
    created = record["created"]
    assert created["status"] == "working"
    assert (created["ttl"], created["pollInterval"]) == (60_000, 100)  # the TTL asked for; the fixture's pace
    assert created["createdAt"].endswith("Z") and created["lastUpdatedAt"] >= created["createdAt"]
    assert record["seen"][-1] == "completed" and set(record["seen"]) <= {"working", "completed"}, record["seen"]
    assert record["last"]["taskId"] == created["taskId"]
    assert record["last"]["statusMessage"] == "step 3 of 3"  # the last progress message, for a poller to show


def test_tasks_result_is_the_call_tool_result_tied_to_its_task(run: dict[str, Any]) -> None:
    record = scenario(run, "poll")
    result = record["result"]
    assert text_of(result) == "done after 3 steps" and result["isError"] is False
    assert related(result) == {"taskId": record["created"]["taskId"]}


def test_progress_reaches_a_client_waiting_on_tasks_result(run: dict[str, Any]) -> None:
    """The tools/call's progress token stays valid for the task: its progress comes to the SDK's
    onprogress while a tasks/result waits, each notification tied to the task, in order, the last
    sent before the result."""
    record = scenario(run, "progress")
    task_id = record["taskId"]
    heard = record["heard"]
    assert heard, "no progress notification reached the SDK"
    assert all(related(note) == {"taskId": task_id} for note in heard), heard
    values = [note["progress"] for note in heard]
    assert values == sorted(set(values)), values
    assert heard[-1] == {"_meta": {RELATED_TASK: {"taskId": task_id}}, "progress": values[-1], "total": values[-1],
                         "message": "released after 2 steps"}
    assert text_of(record["result"]).startswith("released: progress-")
    assert related(record["result"]) == {"taskId": task_id}
    assert (record["last"]["status"], record["last"]["statusMessage"]) == ("completed", "released after 2 steps")


def test_call_tool_stream_yields_task_created_statuses_and_the_result(run: dict[str, Any]) -> None:
    messages = scenario(run, "stream")["messages"]
    kinds = [message["type"] for message in messages]
    assert kinds[0] == "taskCreated" and kinds[-1] == "result" and set(kinds[1:-1]) == {"taskStatus"}, kinds
    task_id = messages[0]["task"]["taskId"]
    assert {message["task"]["taskId"] for message in messages[:-1]} == {task_id}
    assert messages[-2]["task"]["status"] == "completed"
    assert text_of(messages[-1]["result"]) == "done after 2 steps"
    assert related(messages[-1]["result"]) == {"taskId": task_id}


def test_a_tasks_question_is_carried_by_tasks_result_and_answered_by_the_sdks_callback(run: dict[str, Any]) -> None:
    """confirm_delete is a required task: callToolStream sends it as one on its own (from the
    tools/list it read), polls it to input_required, and its tasks/result carries the task's
    elicitation/create to the SDK's elicitation callback; the answer reaches the tool."""
    record = scenario(run, "elicitation")
    accepted, declined = record["accepted"], record["declined"]
    for messages in (accepted, declined):
        kinds = [message["type"] for message in messages]
        assert kinds[0] == "taskCreated" and kinds[-1] == "result" and set(kinds[1:-1]) == {"taskStatus"}, kinds
        assert messages[-2]["task"]["status"] == "input_required"
    accepted_id, declined_id = accepted[0]["task"]["taskId"], declined[0]["task"]["taskId"]
    assert record["asked"] == [
        {"_meta": {RELATED_TASK: {"taskId": accepted_id}}, "message": "Delete notes.txt?", "requestedSchema": CONFIRM_FORM},
        {"_meta": {RELATED_TASK: {"taskId": declined_id}}, "message": "Delete keep.txt?", "requestedSchema": CONFIRM_FORM},
    ]
    assert run["report"]["wire"]["elicitations"][:2] == record["asked"]  # as sent, not as the SDK parsed it
    assert text_of(accepted[-1]["result"]) == "Deleted notes.txt"
    assert related(accepted[-1]["result"]) == {"taskId": accepted_id}
    assert text_of(declined[-1]["result"]) == "Kept keep.txt"
    assert record["after"]["status"] == "completed"


def test_a_cancelled_task_stays_cancelled_and_a_second_cancel_is_refused(run: dict[str, Any]) -> None:
    record = scenario(run, "cancel")
    task_id = record["created"]["taskId"]
    assert record["before"]["status"] == "working"
    cancelled = record["cancelled"]["value"]
    assert (cancelled["taskId"], cancelled["status"], cancelled["statusMessage"]) == (task_id, "cancelled", "cancelled by the client")
    assert record["after"] == cancelled
    assert record["again"]["error"]["code"] == -32602
    assert "terminal status 'cancelled'" in record["again"]["error"]["message"]
    assert record["result"]["error"]["data"] == {"taskId": task_id, "status": "cancelled"}  # a cancelled task has no result


def test_cancelling_a_task_waiting_for_an_answer_withdraws_the_question(run: dict[str, Any]) -> None:
    """The task is cancelled while the SDK's callback holds its question: the waiting tasks/result
    ends with an error, the server cancels its elicitation (the callback's abort signal fires), and
    the answer given afterwards changes nothing."""
    record = scenario(run, "cancelWhileAsking")
    assert record["seen"][-1] == "input_required"
    assert record["cancelled"]["value"]["status"] == "cancelled"
    assert record["resultAfterCancel"]["error"]["data"]["status"] == "cancelled"
    assert record["questionWithdrawn"] == {"value": True}
    assert record["after"]["status"] == "cancelled"


def test_a_question_left_by_an_abandoned_tasks_result_is_asked_again_on_the_next(run: dict[str, Any]) -> None:
    """The SDK aborts the tasks/result carrying a question (its AbortSignal: notifications/cancelled):
    the server withdraws the question, the task still waits for input, and the next tasks/result
    asks it again and ends with the result."""
    record = scenario(run, "resumeAsking")
    assert record["firstResult"]["error"]["message"].endswith("the user closed the dialog")
    assert record["questionWithdrawn"] == {"value": True}
    assert record["during"]["status"] == "input_required"
    assert text_of(record["result"]["value"]).startswith("Deleted hang-")
    assert record["timesAsked"] == 2


def test_a_question_left_by_an_abandoned_tasks_result_goes_to_another_already_waiting(run: dict[str, Any]) -> None:
    """Two tasks/result wait on one task (a second window): when the one carrying its question is
    abandoned, the question is asked again on the other, which ends with the result (it used to
    wait for the task's end, which never came: nobody was asked)."""
    record = scenario(run, "twoWaiters")
    assert record["firstResult"]["error"]["message"].endswith("the first window closed")
    assert record["questionWithdrawn"] == {"value": True}
    assert text_of(record["secondResult"]["value"]).startswith("Deleted hang-")
    assert record["timesAsked"] == 2


def test_a_tool_error_fails_the_task_and_tasks_result_returns_it(run: dict[str, Any]) -> None:
    record = scenario(run, "failures")["failing"]
    task = record["task"]
    assert (task["status"], task["statusMessage"]) == ("failed", "the disk is full")
    result = record["result"]["value"]
    assert (text_of(result), result["isError"]) == ("the disk is full", True)
    assert related(result) == {"taskId": task["taskId"]}


def test_a_protocol_error_fails_the_task_and_tasks_result_answers_with_it(run: dict[str, Any]) -> None:
    record = scenario(run, "failures")["protocolError"]
    assert (record["task"]["status"], record["task"]["statusMessage"]) == ("failed", "no such record")
    error = record["result"]["error"]
    assert (error["code"], error["data"]) == (-32602, {"record": 42})
    assert error["message"].endswith("no such record")


def test_call_tool_stream_reports_a_failed_task_as_an_error(run: dict[str, Any]) -> None:
    messages = scenario(run, "failures")["stream"]
    kinds = [message["type"] for message in messages]
    assert (kinds[0], kinds[-1]) == ("taskCreated", "error"), kinds
    assert messages[-2]["task"]["status"] == "failed"
    assert messages[-1]["error"]["message"].endswith(f"Task {messages[0]['task']['taskId']} failed")


def test_calls_against_a_tools_task_support_are_refused(run: dict[str, Any]) -> None:
    record = scenario(run, "refusals")
    assert record["requiredViaCallTool"]["error"]["code"] == -32600  # the SDK's own guard, from tools/list
    assert record["requiredWithoutTask"]["error"]["code"] == -32601  # past the guard: mcpsync's refusal
    assert "must be called as a task" in record["requiredWithoutTask"]["error"]["message"]
    assert record["forbiddenWithTask"]["error"]["code"] == -32601
    assert text_of(record["optionalWithoutTask"]["value"]) == "done after 1 steps"  # an optional tool called plainly
    assert text_of(record["plain"]["value"]) == "Hello, Ada!"


def test_unknown_tasks_and_cursors_are_invalid_params(run: dict[str, Any]) -> None:
    record = scenario(run, "refusals")
    for key in ("unknownGet", "unknownResult", "unknownCancel"):
        assert record[key]["error"]["code"] == -32602, (key, record[key])
        assert record[key]["error"]["message"].endswith("Task not found"), (key, record[key])
    assert record["badCursor"]["error"]["code"] == -32602


def test_tasks_list_pages_through_every_task_made(run: dict[str, Any]) -> None:
    record = scenario(run, "list")
    assert record["made"] > PAGE_SIZE
    assert record["pageSizes"][0] == PAGE_SIZE and len(record["pageSizes"]) >= 2, record["pageSizes"]
    assert record["cursors"][-1] is None and all(record["cursors"][:-1])
    assert record["missing"] == []
    assert record["distinct"] == record["listed"]
    assert set(record["statuses"]) <= STATUSES


def test_the_server_logged_no_traceback(run: dict[str, Any]) -> None:
    assert not has_traceback(run["serverStderr"]), run["serverStderr"][-4000:]


# -- the TypeScript SDK as a task server (the fixture for mcpsync's client) -----------------------


def poll_task(get: Callable[[str], dict[str, Any]], task_id: str, until: set[str]) -> dict[str, Any]:
    """tasks/get until the status is one of `until`, within LONG seconds."""
    deadline = time.monotonic() + LONG
    while True:
        task = get(task_id)
        if task["status"] in until:
            return task
        assert time.monotonic() < deadline, f"task {task_id} still {task['status']} after {LONG}s"
        time.sleep(task.get("pollInterval", 100) / 1000)  # the server's suggested pace, not a synchronisation


def test_the_typescript_task_server_over_stdio(node: str, sdk_dir: Path) -> None:
    with ServerProcess([node, str(TS_SERVER), str(sdk_dir), "stdio"]) as server:
        opened = legacy_init(server, capabilities={"elicitation": {}})
        assert opened["capabilities"]["tasks"] == TASKS_CAPABILITY
        support = {tool["name"]: tool["execution"]["taskSupport"] for tool in server.result("tools/list")["tools"]}
        assert support == {"greet": "forbidden", "slow_compute": "optional", "confirm_delete": "required"}

        created = server.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}, "task": {"ttl": 30_000}})["task"]
        assert (created["status"], created["ttl"]) == ("working", 30_000)
        poll_task(lambda task_id: server.result("tasks/get", {"taskId": task_id}), created["taskId"], {"completed"})
        result = server.result("tasks/result", {"taskId": created["taskId"]})
        assert result["content"] == [{"type": "text", "text": "done after 0s"}]
        assert related(result) == {"taskId": created["taskId"]}

        asking = server.result("tools/call", {"name": "confirm_delete", "arguments": {"filename": "a.txt"}, "task": {}})["task"]
        poll_task(lambda task_id: server.result("tasks/get", {"taskId": task_id}), asking["taskId"], {"input_required"})
        waiting = server.request_frame("tasks/result", {"taskId": asking["taskId"]})
        server.send(waiting)
        question = server.expect(lambda frame: frame.get("method") == "elicitation/create", LONG, "the task's elicitation")
        assert related(question["params"]) == {"taskId": asking["taskId"]}
        server.send({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"confirm": True}}})
        answer = server.response(waiting["id"], LONG)
        assert answer["result"]["content"] == [{"type": "text", "text": "Deleted a.txt"}], answer


def http_rpc(url: str, message: dict[str, Any], session: str | None = None) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """POST one JSON-RPC message with urllib: (lower-cased headers, the JSON-RPC messages of the
    answer, from a JSON body or an SSE stream); an HTTP error status fails."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session is not None:
        headers.update({"Mcp-Session-Id": session, "MCP-Protocol-Version": HANDSHAKE_VERSION})
    request = urllib.request.Request(url, data=json.dumps(message).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=LONG) as response:
            got, body = {k.lower(): v for k, v in response.headers.items()}, response.read().decode()
    except urllib.error.HTTPError as exc:
        pytest.fail(f"{message.get('method')}: HTTP {exc.code}: {exc.read()!r}", pytrace=False)
    if got.get("content-type", "").startswith("text/event-stream"):
        return got, [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:") and line[5:].strip()]
    return got, [json.loads(body)] if body.strip() else []


def test_the_typescript_task_server_over_http(node: str, sdk_dir: Path) -> None:
    process = subprocess.Popen([node, str(TS_SERVER), str(sdk_dir), "http", "0"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    server = HttpServer(process, LONG)
    try:
        init = {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "raw", "version": "0"}}
        headers, (opened,) = http_rpc(server.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        assert opened["result"]["capabilities"]["tasks"] == TASKS_CAPABILITY
        session = headers["mcp-session-id"]
        http_rpc(server.url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        ids = iter(range(2, 1000))

        def result(method: str, params: dict[str, Any]) -> dict[str, Any]:
            request_id = next(ids)
            _, messages = http_rpc(server.url, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, session)
            (answer,) = [message for message in messages if message.get("id") == request_id]
            assert "result" in answer, answer
            return answer["result"]

        created = result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}, "task": {"ttl": 30_000}})["task"]
        assert created["status"] == "working"
        poll_task(lambda task_id: result("tasks/get", {"taskId": task_id}), created["taskId"], {"completed"})
        done = result("tasks/result", {"taskId": created["taskId"]})
        assert done["content"] == [{"type": "text", "text": "done after 0s"}]
        assert related(done) == {"taskId": created["taskId"]}
        assert created["taskId"] in [task["taskId"] for task in result("tasks/list", {})["tasks"]]
    finally:
        server.stop()
