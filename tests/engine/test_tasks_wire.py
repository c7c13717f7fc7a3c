"""Tasks on the wire, through real transports, in both forms.

The handshake era's form (2025-11-25) through `mcpsync.connect(server)` (the server's own stdio
transport on a pair of pipes) and over HTTP with raw requests; the 2026-07-28 extension
(`io.modelcontextprotocol/tasks`) over HTTP with raw requests; and a 2025-06-18 session, which has
no tasks at all. What is checked is what a client reads: capabilities, `execution.taskSupport`,
the creation result's shape, `tasks/*` answers and their error codes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import mcpsync
from mcpsync import Context, McpError, Server, Service
from mcpsync.catalog.questions import Question
from mcpsync.client import ClientSession
from mcpsync.tasks.record import RELATED_TASK, TASKS_EXTENSION

from .._timeouts import LONG
from ..tasks.http_client import Answer, Endpoint

pytestmark = pytest.mark.timeout(60)

released = threading.Event()
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}


def jobs() -> Service:
    service = Service("jobs")

    @service.tool
    def greet(name: str) -> str:
        """Never a task."""
        return f"Hello, {name}!"

    @service.tool(task="optional")
    def slow(ctx: Context, seconds: float = 0.0) -> str:
        """A task when the client can take one."""
        ctx.wait_cancelled(seconds)
        return "cancelled" if ctx.cancelled else f"slept {seconds:g}"

    @service.tool(task="required")
    def hold(ctx: Context) -> str:
        """Runs until the test releases it, or it is cancelled."""
        while not (released.is_set() or ctx.cancelled):
            ctx.wait_cancelled(0.02)
        return "released"

    @service.tool(task="required")
    def failing() -> str:
        """A tool error."""
        raise mcpsync.ToolError("the disk is full")

    @service.tool(task="required")
    def protocol_error() -> str:
        """A JSON-RPC error."""
        raise McpError(-32042, "the upstream refused", {"why": "quota"})

    @service.tool(task="required")
    def confirm(ctx: Context, filename: str) -> str:
        """Asks before it deletes."""
        answer = ctx.elicit(f"Delete '{filename}'?", CONFIRM)
        return f"deleted {filename}" if answer["content"]["confirm"] else "kept"

    @service.tool(task="required")
    def two_questions(ctx: Context) -> str:
        """Asks two questions at once."""
        name, sure = ctx.ask(Question.elicitation("Name?", NAME, key="name"), Question.elicitation("Sure?", CONFIRM, key="sure"))
        return f"{name['content']['name']} {sure['content']['confirm']}"

    @service.tool
    def later(ctx: Context) -> Any:
        """Asks first (before any task exists), then runs the rest as a task if the client can take one."""
        name = ctx.elicit("What is your name?", NAME)["content"]["name"]
        return ctx.run_task(lambda task_ctx: f"Hello, {name}! ({'inline' if task_ctx is ctx else 'in a task'})")

    return service


@pytest.fixture
def server() -> Iterator[Server]:
    released.clear()
    with Server("jobs", services=[jobs()], page_size=2, shutdown_timeout=LONG) as made:
        yield made
    released.set()


@pytest.fixture
def http(server: Server) -> Endpoint:
    serving = server.start_http("127.0.0.1", 0)
    return Endpoint(serving.port)


def until(predicate: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + LONG
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)
    return value


def _answer_confirm(params: dict[str, Any]) -> dict[str, Any]:
    seen_meta.append(params.get("_meta", {}))
    return {"action": "accept", "content": {"confirm": True, "name": "Ada"}}


seen_meta: list[dict[str, Any]] = []


@pytest.fixture
def stdio(server: Server) -> Iterator[ClientSession]:
    seen_meta.clear()
    with mcpsync.connect(server, mode="legacy", elicitation=_answer_confirm, timeout=LONG) as session:
        yield session


def code_of(call: Callable[[], Any]) -> McpError:
    with pytest.raises(McpError) as caught:
        call()
    return caught.value


# -- 2025-11-25 through connect(server) ---------------------------------------------------------

def test_2025_capabilities_and_task_support_are_advertised(stdio: ClientSession) -> None:
    assert stdio.protocol_version == "2025-11-25"
    assert stdio.server_capabilities["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    listed = _all_tools(stdio)
    assert listed["slow"]["execution"] == {"taskSupport": "optional"}
    assert listed["hold"]["execution"] == {"taskSupport": "required"}
    assert "execution" not in listed["greet"]


def _all_tools(session: ClientSession) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    cursor = None
    while True:
        page = session.request("tools/list", {"cursor": cursor} if cursor else {})
        found.update({tool["name"]: tool for tool in page["tools"]})
        cursor = page.get("nextCursor")
        if cursor is None:
            return found


def test_2025_a_tool_called_in_the_wrong_mode_is_refused_method_not_found(stdio: ClientSession) -> None:
    forbidden = code_of(lambda: stdio.request("tools/call", {"name": "greet", "arguments": {"name": "x"}, "task": {}}))
    assert forbidden.code == -32601 and "without params.task" in forbidden.message
    required = code_of(lambda: stdio.request("tools/call", {"name": "hold", "arguments": {}}))
    assert required.code == -32601 and "send params.task" in required.message
    assert stdio.request("tools/call", {"name": "slow", "arguments": {}})["content"][0]["text"] == "slept 0", "optional without task: a plain call"
    malformed = code_of(lambda: stdio.request("tools/call", {"name": "slow", "arguments": {}, "task": "yes"}))
    assert malformed.code == -32602


def test_2025_a_task_is_created_polled_and_its_result_fetched_tied_to_it(stdio: ClientSession) -> None:
    created = stdio.request("tools/call", {"name": "slow", "arguments": {"seconds": 0.2}, "task": {"ttl": 60_000}})
    task = created["task"]
    assert set(created) == {"task"}, "the 2025-11-25 creation result nests the task"
    assert task["status"] == "working" and task["ttl"] == 60_000 and isinstance(task["pollInterval"], int)
    assert task["createdAt"].endswith("Z") and task["lastUpdatedAt"].endswith("Z")
    got = stdio.request("tasks/get", {"taskId": task["taskId"]})
    assert got["taskId"] == task["taskId"] and got["status"] in ("working", "completed") and "ttl" in got
    result = stdio.request("tasks/result", {"taskId": task["taskId"]})  # blocks until it ends
    assert result["content"][0]["text"] == "slept 0.2"
    assert result["_meta"][RELATED_TASK] == {"taskId": task["taskId"]}
    assert stdio.request("tasks/get", {"taskId": task["taskId"]})["status"] == "completed"


def test_2025_a_tool_error_fails_the_task_and_tasks_result_answers_the_call_s_result(stdio: ClientSession) -> None:
    task = stdio.request("tools/call", {"name": "failing", "arguments": {}, "task": {}})["task"]
    result = stdio.request("tasks/result", {"taskId": task["taskId"]})
    assert result["isError"] is True and "the disk is full" in result["content"][0]["text"]
    assert result["_meta"][RELATED_TASK] == {"taskId": task["taskId"]}
    got = stdio.request("tasks/get", {"taskId": task["taskId"]})
    assert got["status"] == "failed" and "the disk is full" in got["statusMessage"]


def test_2025_a_protocol_error_is_what_tasks_result_answers(stdio: ClientSession) -> None:
    task = stdio.request("tools/call", {"name": "protocol_error", "arguments": {}, "task": {}})["task"]
    error = code_of(lambda: stdio.request("tasks/result", {"taskId": task["taskId"]}))
    assert (error.code, error.message, error.data) == (-32042, "the upstream refused", {"why": "quota"})
    assert stdio.request("tasks/get", {"taskId": task["taskId"]})["status"] == "failed"


def test_2025_a_task_s_question_goes_out_on_tasks_result_tied_to_the_task(stdio: ClientSession) -> None:
    task = stdio.request("tools/call", {"name": "confirm", "arguments": {"filename": "a.txt"}, "task": {}})["task"]
    until(lambda: stdio.request("tasks/get", {"taskId": task["taskId"]})["status"] == "input_required", "the task asks")
    assert seen_meta == [], "nothing is asked before a tasks/result carries it"
    result = stdio.request("tasks/result", {"taskId": task["taskId"]})
    assert result["content"][0]["text"] == "deleted a.txt"
    assert seen_meta == [{RELATED_TASK: {"taskId": task["taskId"]}}]


def test_2025_cancel_answers_the_cancelled_task_and_refuses_a_finished_one(stdio: ClientSession) -> None:
    task = stdio.request("tools/call", {"name": "hold", "arguments": {}, "task": {}})["task"]
    cancelled = stdio.request("tasks/cancel", {"taskId": task["taskId"]})
    assert cancelled["taskId"] == task["taskId"] and cancelled["status"] == "cancelled"
    again = code_of(lambda: stdio.request("tasks/cancel", {"taskId": task["taskId"]}))
    assert again.code == -32602 and "terminal status 'cancelled'" in again.message
    unknown = code_of(lambda: stdio.request("tasks/get", {"taskId": "no-such-task"}))
    assert unknown.code == -32602
    ended = code_of(lambda: stdio.request("tasks/result", {"taskId": task["taskId"]}))
    assert ended.code == -32600 and "cancelled" in ended.message


def test_2025_tasks_list_pages_and_refuses_a_bad_cursor(stdio: ClientSession) -> None:
    made = [stdio.request("tools/call", {"name": "slow", "arguments": {}, "task": {}})["task"]["taskId"] for _ in range(3)]
    first = stdio.request("tasks/list")
    assert [task["taskId"] for task in first["tasks"]] == made[:2] and "nextCursor" in first
    second = stdio.request("tasks/list", {"cursor": first["nextCursor"]})
    assert [task["taskId"] for task in second["tasks"]] == made[2:] and "nextCursor" not in second
    for cursor in ("nonsense", 5):
        assert code_of(lambda cursor=cursor: stdio.request("tasks/list", {"cursor": cursor})).code == -32602


def test_2025_tasks_update_is_not_a_method_of_the_handshake_era(stdio: ClientSession) -> None:
    assert code_of(lambda: stdio.request("tasks/update", {"taskId": "x", "inputResponses": {}})).code == -32601


# -- 2026-07-28 over HTTP ------------------------------------------------------------------------

def test_2026_discover_names_the_extension_and_no_tasks_capability(http: Endpoint) -> None:
    capabilities = http.modern("server/discover").result["capabilities"]
    assert capabilities["extensions"][TASKS_EXTENSION] == {}
    assert "tasks" not in capabilities


def test_2026_a_client_declaring_the_extension_gets_a_task_and_others_a_plain_result(http: Endpoint) -> None:
    created = http.modern("tools/call", {"name": "slow", "arguments": {"seconds": 0.2}}).result
    assert created["resultType"] == "task" and "task" not in created
    assert created["status"] == "working" and isinstance(created["ttlMs"], int) and isinstance(created["pollIntervalMs"], int)
    assert not {"result", "error", "inputRequests"} & set(created)
    got = http.modern("tasks/get", {"taskId": created["taskId"]}).result  # at once: gettable once created
    assert got["resultType"] == "complete" and got["taskId"] == created["taskId"]
    done = until(lambda: (r := http.modern("tasks/get", {"taskId": created["taskId"]}).result)["status"] == "completed" and r, "it completes")
    assert done["result"]["content"][0]["text"] == "slept 0.2"
    assert RELATED_TASK not in done["result"].get("_meta", {})
    plain = http.modern("tools/call", {"name": "slow", "arguments": {"seconds": 0}}, capabilities={}).result
    assert plain["resultType"] == "complete" and plain["content"][0]["text"] == "slept 0"


def test_2026_a_required_tool_without_the_extension_is_refused_naming_it(http: Endpoint) -> None:
    answer = http.modern("tools/call", {"name": "hold", "arguments": {}}, capabilities={})
    assert answer.code == -32021
    assert answer.error["data"]["requiredCapabilities"] == {"extensions": {TASKS_EXTENSION: {}}}


def test_2026_a_legacy_task_param_is_ignored(http: Endpoint) -> None:
    greeted = http.modern("tools/call", {"name": "greet", "arguments": {"name": "legacy-hint"}, "task": {"ttl": 60_000}}).result
    assert greeted["resultType"] == "complete" and "taskId" not in greeted and greeted["content"][0]["text"] == "Hello, legacy-hint!"
    assert http.modern("tools/call", {"name": "greet", "arguments": {"name": "x"}, "task": "garbage"}).result["resultType"] == "complete"


def test_2026_tool_errors_complete_and_protocol_errors_fail(http: Endpoint) -> None:
    failing = http.modern("tools/call", {"name": "failing", "arguments": {}}).result["taskId"]
    broken = http.modern("tools/call", {"name": "protocol_error", "arguments": {}}).result["taskId"]
    done = until(lambda: (r := http.modern("tasks/get", {"taskId": failing}).result)["status"] != "working" and r, "failing ends")
    assert done["status"] == "completed" and done["result"]["isError"] is True
    bad = until(lambda: (r := http.modern("tasks/get", {"taskId": broken}).result)["status"] != "working" and r, "protocol_error ends")
    assert bad["status"] == "failed" and "result" not in bad
    assert bad["error"] == {"code": -32042, "message": "the upstream refused", "data": {"why": "quota"}}


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
def test_2026_tasks_result_and_list_do_not_exist(http: Endpoint, method: str) -> None:
    assert http.modern(method, {"taskId": "tasks-conformance-isolation-probe"} if method == "tasks/result" else {}).code == -32601


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_2026_every_tasks_method_needs_the_extension_before_the_id_is_looked_up(http: Endpoint, method: str) -> None:
    real = http.modern("tools/call", {"name": "hold", "arguments": {}}).result["taskId"]
    for task_id in (real, "no-such-task"):
        params: dict[str, Any] = {"taskId": task_id, "inputResponses": {}} if method == "tasks/update" else {"taskId": task_id}
        answer = http.modern(method, params, capabilities={})
        assert answer.code == -32021 and answer.error["data"]["requiredCapabilities"] == {"extensions": {TASKS_EXTENSION: {}}}
    assert http.modern("tasks/get", {"taskId": real}).result["status"] == "working", "the refused cancel did nothing"
    assert http.modern("tasks/get", {"taskId": "no-such-task"}).code == -32602


def test_2026_a_mismatched_mcp_name_on_tasks_get_is_a_400(http: Endpoint) -> None:
    task_id = http.modern("tools/call", {"name": "hold", "arguments": {}}).result["taskId"]
    answer = http.modern("tasks/get", {"taskId": task_id}, name="sep-2663-wrong-task-id-for-routing-header-mismatch")
    assert answer.status == 400 and answer.code == -32020


def test_2026_cancel_acknowledges_working_and_finished_tasks_alike(http: Endpoint) -> None:
    task_id = http.modern("tools/call", {"name": "hold", "arguments": {}}).result["taskId"]
    ack = http.modern("tasks/cancel", {"taskId": task_id}).result
    assert ack["resultType"] == "complete" and not {"taskId", "status"} & set(ack)
    assert http.modern("tasks/get", {"taskId": task_id}).result["status"] == "cancelled"
    assert http.modern("tasks/cancel", {"taskId": task_id}).result["resultType"] == "complete"
    assert http.modern("tasks/cancel", {"taskId": "no-such-task"}).code == -32602


def test_2026_questions_are_answered_by_tasks_update_one_at_a_time(http: Endpoint) -> None:
    capabilities = {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}}
    task_id = http.modern("tools/call", {"name": "two_questions", "arguments": {}}, capabilities=capabilities).result["taskId"]
    asking = until(lambda: (r := http.modern("tasks/get", {"taskId": task_id}).result).get("inputRequests", {}).keys() == {"name", "sure"} and r, "both")
    assert asking["status"] == "input_required"
    assert asking["inputRequests"]["name"]["method"] == "elicitation/create"
    ack = http.modern("tasks/update", {"taskId": task_id, "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}},
                                                                           "unknown-key": {"ignored": True}}}).result
    assert ack["resultType"] == "complete" and not {"taskId", "status", "inputRequests"} & set(ack)
    partial = http.modern("tasks/get", {"taskId": task_id}).result  # at once
    assert partial["status"] == "input_required" and list(partial["inputRequests"]) == ["sure"]
    http.modern("tasks/update", {"taskId": task_id, "inputResponses": {"sure": {"action": "accept", "content": {"confirm": True}}}})
    done = until(lambda: (r := http.modern("tasks/get", {"taskId": task_id}).result)["status"] == "completed" and r, "it completes")
    assert done["result"]["content"][0]["text"] == "Ada True" and "inputRequests" not in done


@pytest.mark.parametrize("declared", [True, False], ids=["extension", "no extension"])
def test_2026_a_question_before_the_task_is_mrtr_then_run_task_starts_one(http: Endpoint, declared: bool) -> None:
    capabilities: dict[str, Any] = {"elicitation": {}, **({"extensions": {TASKS_EXTENSION: {}}} if declared else {})}
    first = http.modern("tools/call", {"name": "later", "arguments": {}}, capabilities=capabilities).result
    assert first["resultType"] == "input_required" and "taskId" not in first
    (key,) = first["inputRequests"]
    retry = {"name": "later", "arguments": {}, "inputResponses": {key: {"action": "accept", "content": {"name": "Alice"}}},
             "requestState": first["requestState"]}
    second = http.modern("tools/call", retry, capabilities=capabilities).result
    if not declared:
        assert second["resultType"] == "complete" and second["content"][0]["text"] == "Hello, Alice! (inline)"
        return
    assert second["resultType"] == "task" and not {"requestState", "inputRequests"} & set(second)
    done = until(lambda: (r := http.modern("tasks/get", {"taskId": second["taskId"]}).result)["status"] == "completed" and r, "it completes")
    assert done["result"]["content"][0]["text"] == "Hello, Alice! (in a task)"


def test_2025_run_task_runs_inline_the_call_itself_is_the_task_or_not(stdio: ClientSession) -> None:
    """In 2025-11-25 the client decides before the function runs: a call without params.task runs
    `run_task`'s function inline, and params.task on a tool not marked for tasks is refused."""
    assert stdio.request("tools/call", {"name": "later", "arguments": {}})["content"][0]["text"].endswith("(inline)")
    assert code_of(lambda: stdio.request("tools/call", {"name": "later", "arguments": {}, "task": {}})).code == -32601


def test_2026_tasks_update_on_an_unknown_task_is_invalid_params(http: Endpoint) -> None:
    assert http.modern("tasks/update", {"taskId": "no-such-task", "inputResponses": {}}).code == -32602


# -- the handshake era over HTTP --------------------------------------------------------------------

def test_2025_over_http_the_task_s_result_and_question_come_on_tasks_result(http: Endpoint) -> None:
    session = http.session("2025-11-25", capabilities={"elicitation": {}})
    assert session.initialized["capabilities"]["tasks"]["requests"] == {"tools": {"call": {}}}
    task = session.request("tools/call", {"name": "confirm", "arguments": {"filename": "b.txt"}, "task": {"ttl": 30_000}}).result["task"]
    assert task["ttl"] == 30_000
    stream = session.stream("tasks/result", {"taskId": task["taskId"]})
    try:
        asked = stream.message()[1]
        assert asked["method"] == "elicitation/create" and asked["params"]["_meta"][RELATED_TASK] == {"taskId": task["taskId"]}
        session.reply(asked["id"], {"action": "accept", "content": {"confirm": False}})
        answered = stream.message()[1]
    finally:
        stream.close()
    assert answered["result"]["content"][0]["text"] == "kept"
    assert answered["result"]["_meta"][RELATED_TASK] == {"taskId": task["taskId"]}


def test_2025_over_http_a_failed_task_s_tasks_result_is_its_json_rpc_error(http: Endpoint) -> None:
    session = http.session()
    task = session.request("tools/call", {"name": "protocol_error", "arguments": {}, "task": {}}).result["task"]
    answer = session.request("tasks/result", {"taskId": task["taskId"]})
    assert answer.code == -32042 and answer.error["data"] == {"why": "quota"}


def test_2025_06_18_has_no_tasks(http: Endpoint) -> None:
    session = http.session("2025-06-18")
    assert "tasks" not in session.initialized["capabilities"]
    tools = session.request("tools/list", {}).result["tools"]
    assert tools and all("execution" not in tool for tool in tools), "taskSupport means nothing before 2025-11-25"
    for method in ("tasks/get", "tasks/result", "tasks/list", "tasks/cancel"):
        answer: Answer = session.request(method, {"taskId": "x"})
        assert answer.code == -32601, (method, answer.message)
    assert session.request("tools/call", {"name": "hold", "arguments": {}, "task": {}}).code == -32601
    plain = session.request("tools/call", {"name": "slow", "arguments": {}, "task": {"ttl": 5}}).result
    assert plain["content"][0]["text"] == "slept 0" and "task" not in plain, "before 2025-11-25 params.task means nothing"
    odd = session.request("tools/call", {"name": "slow", "arguments": {}, "task": "not an object"}).result
    assert odd["content"][0]["text"] == "slept 0", "an unknown parameter is ignored, whatever its shape"


def test_2025_over_http_tasks_result_waits_past_the_request_timeout(server: Server) -> None:
    endpoint = Endpoint(server.start_http("127.0.0.1", 0, request_timeout=0.5).port)
    session = endpoint.session()
    task = session.request("tools/call", {"name": "hold", "arguments": {}, "task": {}}).result["task"]
    timer = threading.Timer(1.5, released.set)
    timer.start()
    try:
        answer = session.request("tasks/result", {"taskId": task["taskId"]})
    finally:
        timer.join(LONG)
    assert answer.result["content"][0]["text"] == "released", answer.message
