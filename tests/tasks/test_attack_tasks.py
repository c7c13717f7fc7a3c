"""Attacks on tasks over real HTTP on loopback, with `Auth` and static tokens for three callers.

A task belongs to the principal that made it: another caller who learns (or guesses) its id is told
the same -32602 as for an id that never existed, in both forms, whatever it asks (get, result,
cancel, update, list). Hostile parameters are refused -32602 or given a sane value, never answered
-32603 or with a trace. And no caller can make the server keep more than the caps allow: one
caller's flood is refused at its own cap while the others go on, and the server's cap holds for
all of them together.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mcpsync import Context, Server, Service
from mcpsync.auth import Auth
from mcpsync.auth.resource.static import StaticTokens
from mcpsync.tasks import TaskLimits, TaskRunner

from .._timeouts import LONG
from .http_client import Answer, Endpoint

pytestmark = pytest.mark.timeout(60)

SCOPE = "mcp:tools"
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"
CAROL = "carol-token-0123456789abcdef"
PER_CALLER = 4
KEPT = 6
released = threading.Event()


def jobs() -> Service:
    service = Service("jobs")

    @service.tool(task="required")
    def hold(ctx: Context) -> str:
        """Runs until released or cancelled."""
        while not (released.is_set() or ctx.cancelled):
            ctx.wait_cancelled(0.02)
        return "released"

    @service.tool(task="required")
    def ask(ctx: Context) -> str:
        """Asks one question."""
        answer = ctx.elicit("name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return str(answer.get("content"))

    @service.tool(task="optional")
    def quick() -> str:
        """Returns at once."""
        return "quick"

    return service


@pytest.fixture
def server() -> Iterator[Server]:
    released.clear()
    auth = Auth(StaticTokens({ALICE: [SCOPE], BOB: [SCOPE], CAROL: [SCOPE]}), required_scopes=[SCOPE])
    runner = TaskRunner(limits=TaskLimits(max_kept_per_owner=PER_CALLER, max_kept=KEPT, max_running=KEPT, max_waiting=KEPT))
    with Server("jobs", services=[jobs()], auth=auth, page_size=2, shutdown_timeout=LONG, tasks=runner) as made:
        yield made
    released.set()


@pytest.fixture
def port(server: Server) -> int:
    return server.start_http("127.0.0.1", 0).port


def sane(answer: Answer) -> None:
    """No server error, no trace: the answer a hostile request may get is a refusal of it."""
    assert answer.status < 500, (answer.status, answer.message)
    if answer.message is not None and "error" in answer.message:
        assert answer.code != -32603, answer.message
    assert "Traceback" not in json.dumps(answer.message)


def not_found(answer: Answer) -> dict[str, Any]:
    assert answer.code == -32602 and answer.error["message"] == "Failed to retrieve task: Task not found", answer.message
    return answer.error


# -- one caller's tasks are not another's ----------------------------------------------------------

def test_2026_another_caller_is_told_a_task_does_not_exist(port: int) -> None:
    alice, bob = Endpoint(port, ALICE), Endpoint(port, BOB)
    task_id = alice.modern("tools/call", {"name": "hold", "arguments": {}}).result["taskId"]
    never = not_found(bob.modern("tasks/get", {"taskId": "never-existed-0123456789abc"}))
    theirs = not_found(bob.modern("tasks/get", {"taskId": task_id}))
    assert theirs["message"] == never["message"]
    not_found(bob.modern("tasks/update", {"taskId": task_id, "inputResponses": {"q": {"action": "accept"}}}))
    not_found(bob.modern("tasks/cancel", {"taskId": task_id}))
    assert alice.modern("tasks/get", {"taskId": task_id}).result["status"] == "working", "bob's cancel did nothing"
    assert alice.modern("tasks/cancel", {"taskId": task_id}).result["resultType"] == "complete"


def test_2026_another_caller_cannot_answer_a_task_s_question(port: int) -> None:
    alice, bob = Endpoint(port, ALICE), Endpoint(port, BOB)
    capabilities = {"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    task_id = alice.modern("tools/call", {"name": "ask", "arguments": {}}, capabilities=capabilities).result["taskId"]
    deadline = time.monotonic() + LONG
    while alice.modern("tasks/get", {"taskId": task_id}).result["status"] != "input_required":
        assert time.monotonic() < deadline, "the task never asked"
        time.sleep(0.02)
    (key,) = alice.modern("tasks/get", {"taskId": task_id}).result["inputRequests"]
    not_found(bob.modern("tasks/update", {"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"name": "bob"}}}}))
    asked = alice.modern("tasks/get", {"taskId": task_id}).result
    assert asked["status"] == "input_required" and list(asked["inputRequests"]) == [key], "bob's answer was not taken"


def test_2025_another_caller_cannot_get_wait_cancel_or_list_a_task(port: int) -> None:
    alice, bob = Endpoint(port, ALICE).session(), Endpoint(port, BOB).session()
    task = alice.request("tools/call", {"name": "hold", "arguments": {}, "task": {}}).result["task"]
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        not_found(bob.request(method, {"taskId": task["taskId"]}))
    assert bob.request("tasks/list").result["tasks"] == []
    mine = bob.request("tools/call", {"name": "hold", "arguments": {}, "task": {}}).result["task"]["taskId"]
    assert [listed["taskId"] for listed in bob.request("tasks/list").result["tasks"]] == [mine]
    assert [listed["taskId"] for listed in alice.request("tasks/list").result["tasks"]] == [task["taskId"]]
    cursor = bob.request("tasks/list", {"cursor": task["taskId"]})
    assert cursor.code == -32602, "another caller's task id is no cursor"
    assert alice.request("tasks/get", {"taskId": task["taskId"]}).result["status"] == "working"


def test_a_session_of_one_caller_sees_its_tasks_made_in_another_of_its_sessions(port: int) -> None:
    first, second = Endpoint(port, ALICE).session(), Endpoint(port, ALICE).session()
    task_id = first.request("tools/call", {"name": "quick", "arguments": {}, "task": {}}).result["task"]["taskId"]
    assert second.request("tasks/result", {"taskId": task_id}).result["content"][0]["text"] == "quick"


# -- hostile parameters --------------------------------------------------------------------------

DEEP = '{"a": ' * 1000 + '"x"' + "}" * 1000
"""An object nested 1000 deep, as JSON (Python's encoder would not write it)."""


class Raw(str):
    """A parameter value sent as the JSON text it is."""


HOSTILE_IDS = [12345, None, True, 1.5, ["a"], {"taskId": "x"}, "x" * 1_000_000, Raw(DEEP), ""]


def params_json(params: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{json.dumps(key)}: {value if isinstance(value, Raw) else json.dumps(value)}" for key, value in params.items()) + "}"


@pytest.mark.parametrize("task_id", HOSTILE_IDS, ids=["int", "null", "bool", "float", "list", "object", "1 MB", "1000 deep", "empty"])
@pytest.mark.parametrize("method", ["tasks/get", "tasks/result", "tasks/cancel"])
def test_2025_a_hostile_task_id_is_refused_invalid_params(port: int, method: str, task_id: Any) -> None:
    session = Endpoint(port, ALICE).session()
    answer = session.request_raw(method, params_json({"taskId": task_id}))
    sane(answer)
    assert answer.code == -32602, answer.message
    assert len(json.dumps(answer.message)) < 10_000, "the refusal does not echo a huge id back"


@pytest.mark.parametrize("task_id", [12345, None, ["a"], {"a": 1}, ""], ids=["int", "null", "list", "object", "empty"])
@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_2026_a_hostile_task_id_is_refused(port: int, method: str, task_id: Any) -> None:
    params = {"taskId": task_id, "inputResponses": {}} if method == "tasks/update" else {"taskId": task_id}
    answer = Endpoint(port, ALICE).modern(method, params)
    sane(answer)
    assert answer.code in (-32602, -32020), answer.message  # -32020: no Mcp-Name header can mirror a taskId that is no string


def test_2026_a_huge_task_id_is_refused_before_it_costs_anything(port: int) -> None:
    alice = Endpoint(port, ALICE)
    huge = "x" * 1_000_000
    sane(alice.modern("tasks/get", {"taskId": huge}, name="x"))
    sane(alice.modern("tasks/get", {"taskId": huge}))  # a 1 MB Mcp-Name header: refused by the HTTP server


@pytest.mark.parametrize("responses", ["text", 5, None, ["a"], {"q": "not an answer"}, {f"k{i}": {"action": "accept"} for i in range(100_000)}],
                         ids=["string", "int", "null", "list", "bad answer", "100k keys"])
def test_2026_hostile_input_responses_are_refused_or_ignored(port: int, responses: Any) -> None:
    alice = Endpoint(port, ALICE)
    task_id = alice.modern("tools/call", {"name": "hold", "arguments": {}}).result["taskId"]
    answer = alice.modern("tasks/update", {"taskId": task_id, "inputResponses": responses})
    sane(answer)
    if not isinstance(responses, dict):
        assert answer.code == -32602
    assert alice.modern("tasks/get", {"taskId": task_id}).result["status"] == "working"


@pytest.mark.parametrize("where", [
    "taskId",
    "inputResponses",
    "answer",
])
def test_2026_a_value_nested_1000_deep_is_refused_or_ignored(port: int, where: str) -> None:
    """A taskId 1000 deep is no id (-32602); responses 1000 deep are an object whose keys are
    not outstanding (ignored)."""
    alice = Endpoint(port, ALICE)
    task_id = alice.modern("tools/call", {"name": "hold", "arguments": {}}).result["taskId"]
    meta = '{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}'
    task = DEEP if where == "taskId" else json.dumps(task_id)
    responses = DEEP if where == "inputResponses" else '{"q": ' + DEEP + "}"
    body = f'{{"jsonrpc": "2.0", "id": 1, "method": "tasks/update", "params": {{"taskId": {task}, "inputResponses": {responses}, "_meta": {meta}}}}}'
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tasks/update"}
    if where != "taskId":
        headers["Mcp-Name"] = task_id
    answer = alice.post(body.encode(), headers)
    sane(answer)
    if where == "taskId":
        assert answer.code in (-32602, -32020), answer.message
    else:
        assert answer.result["resultType"] == "complete"
    assert alice.modern("tasks/get", {"taskId": task_id}).result["status"] == "working"


@pytest.mark.parametrize("cursor", [5, True, ["a"], {"a": 1}, "garbage", "x" * 100_000, ""], ids=["int", "bool", "list", "object", "garbage", "100 kB", "empty"])
def test_2025_a_garbage_cursor_is_refused_invalid_params(port: int, cursor: Any) -> None:
    session = Endpoint(port, ALICE).session()
    answer = session.request("tasks/list", {"cursor": cursor})
    sane(answer)
    assert answer.code == -32602
    assert len(json.dumps(answer.message)) < 10_000


@pytest.mark.parametrize("ttl", [-1, 0, 10**30, 1.5, 1e308, True, "60000", None, [1], {"ms": 5}])
def test_2025_a_hostile_ttl_gets_a_sane_one(port: int, ttl: Any) -> None:
    session = Endpoint(port, ALICE).session()
    answer = session.request("tools/call", {"name": "quick", "arguments": {}, "task": {"ttl": ttl}})
    sane(answer)
    granted = answer.result["task"]["ttl"]
    assert isinstance(granted, int) and 0 < granted <= TaskLimits().max_ttl_ms


@pytest.mark.parametrize("task", ["yes", 5, ["ttl"]], ids=["string", "int", "list"])
def test_2025_a_task_parameter_that_is_not_an_object_is_refused(port: int, task: Any) -> None:
    answer = Endpoint(port, ALICE).session().request("tools/call", {"name": "quick", "arguments": {}, "task": task})
    sane(answer)
    assert answer.code == -32602


# -- floods and memory -----------------------------------------------------------------------------

def test_one_caller_s_flood_hits_its_own_cap_while_others_still_create(port: int) -> None:
    alice, bob, carol = Endpoint(port, ALICE), Endpoint(port, BOB), Endpoint(port, CAROL)
    made = [alice.modern("tools/call", {"name": "hold", "arguments": {}}) for _ in range(PER_CALLER + 20)]
    created = [answer for answer in made if answer.message and "result" in answer.message]
    refused = [answer for answer in made if answer.message and "error" in answer.message]
    assert len(created) == PER_CALLER and len(refused) == 20
    assert all(answer.status < 500 and "this caller holds" in answer.error["message"] for answer in refused)
    assert bob.modern("tools/call", {"name": "hold", "arguments": {}}).result["resultType"] == "task", "another caller is still served"
    assert carol.modern("tools/call", {"name": "hold", "arguments": {}}).result["resultType"] == "task"
    full = carol.modern("tools/call", {"name": "hold", "arguments": {}})  # alice 4 + bob 1 + carol 1 = KEPT
    assert full.status < 500 and "the server holds as many as it keeps" in full.error["message"], "the server's cap holds for all callers"
    legacy = Endpoint(port, ALICE).session().request("tools/call", {"name": "quick", "arguments": {}, "task": {}})
    assert "this caller holds" in legacy.error["message"], "the cap is the caller's in both forms"


def test_a_cancelled_task_still_counts_until_its_ttl_ends_so_cancel_is_no_way_around_the_cap(port: int) -> None:
    alice = Endpoint(port, ALICE)
    for _ in range(PER_CALLER):
        task_id = alice.modern("tools/call", {"name": "hold", "arguments": {}}).result["taskId"]
        alice.modern("tasks/cancel", {"taskId": task_id})
    assert "this caller holds" in alice.modern("tools/call", {"name": "hold", "arguments": {}}).error["message"]


def test_a_caller_s_input_to_a_task_is_bounded_by_the_body_limit() -> None:
    """What a caller sends with a task (arguments, answers) is bounded by the endpoint's body
    limit: past it the request is refused 413 before it reaches a task. (What a task keeps is
    what its tool returns: bounded in count by the caps, in size by the tool alone.)"""
    released.clear()
    auth = Auth(StaticTokens({ALICE: [SCOPE]}), required_scopes=[SCOPE])
    with Server("jobs", services=[jobs()], auth=auth, max_frame_bytes=64 * 1024, shutdown_timeout=LONG) as server:
        alice = Endpoint(server.start_http("127.0.0.1", 0).port, ALICE)
        task_id = alice.modern("tools/call", {"name": "hold", "arguments": {}}).result["taskId"]
        big = alice.modern("tasks/update", {"taskId": task_id, "inputResponses": {"q": {"action": "accept", "content": {"x": "y" * 100_000}}}})
        assert big.status == 413 and big.message is None
        assert alice.modern("tasks/get", {"taskId": task_id}).result["status"] == "working"
        released.set()


def test_a_malformed_answer_to_an_outstanding_question_fails_only_that_caller_s_task(port: int) -> None:
    alice = Endpoint(port, ALICE)
    capabilities = {"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
    task_id = alice.modern("tools/call", {"name": "ask", "arguments": {}}, capabilities=capabilities).result["taskId"]
    deadline = time.monotonic() + LONG
    while not (asked := alice.modern("tasks/get", {"taskId": task_id}).result).get("inputRequests"):
        assert time.monotonic() < deadline, "the task never asked"
        time.sleep(0.02)
    (key,) = asked["inputRequests"]
    sane(alice.modern("tasks/update", {"taskId": task_id, "inputResponses": {key: "not an ElicitResult"}}))
    while (ended := alice.modern("tasks/get", {"taskId": task_id}).result)["status"] not in ("failed", "completed"):
        assert time.monotonic() < deadline, "the task never ended"
        time.sleep(0.02)
    assert ended["status"] == "failed" and ended["error"]["code"] == -32602 and key in ended["error"]["message"]
