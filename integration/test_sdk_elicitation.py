"""The official MCP Python SDK client answers mcpsync's questions (elicitation, sampling, roots)
through its own callbacks, in both eras, over stdio and over HTTP.

``sdk_elicitation_driver.py`` runs in the peers venv (it imports ``mcp``, never mcpsync) against
``integration/fixtures/asking_app.py`` served by ``python -m mcpsync serve`` (stdio) or
``python -m mcpsync serve --http 127.0.0.1:0`` (the URL read from its stderr), once per transport
and mode:

* ``legacy``: ``Client(mode="legacy")``. The server asks with JSON-RPC requests on the connection
  (stdio lines; over HTTP, SSE events on the tools/call POST, answered by POSTs) and the tool's
  worker thread waits for the answers.
* ``pinned``: ``Client(mode="2026-07-28")``. The server never sends a request: it answers
  ``input_required`` with ``inputRequests`` and a sealed ``requestState``, and the SDK calls the
  same callbacks and retries on its own (``Client.call_tool``/``get_prompt``/``read_resource``).

The driver records what each callback got and every round on the wire; the tests check the
callbacks saw the tool's question, the tool saw the callback's answer, and the rounds were the
ones the era prescribes (one request in the handshake era; in 2026-07-28, a batch in one round,
two rounds for a tool whose second question needs the first answer, and the state echoed).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from wire import FIXTURES, HttpServer, has_traceback, spawn_http_server

pytestmark = pytest.mark.timeout(120)

DRIVER = Path(__file__).with_name("sdk_elicitation_driver.py")
APP = FIXTURES / "asking_app.py"
DRIVER_TIMEOUT = 90.0  # the driver bounds itself at 40 s (+15 s watchdog); this is the backstop
LONG = 20.0 if os.environ.get("CI") else 10.0

RUNS = [("stdio", "legacy"), ("stdio", "pinned"), ("http", "legacy"), ("http", "pinned")]
RUN_IDS = [f"{transport}-{mode}" for transport, mode in RUNS]

# What the fixture asks (asking_app.py) and what the driver's callbacks answer (sdk_elicitation_driver.py).
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string", "description": "Your name"}}, "required": ["name"]}
AGE_FORM = {
    "type": "object",
    "properties": {"age": {"type": "integer", "minimum": 0, "description": "Your age in years"}},
    "required": ["age"],
}
NAME = "Ada Lovelace"
AGE = 36
SAMPLE_TEXT = "waves fold into foam"
SAMPLE_MODEL = "sdk-test-model"
ROOTS = [{"uri": "file:///work/project", "name": "project"}, {"uri": "file:///tmp/scratch"}]
SIGN_IN_URL = "https://example.com/sign-in?session=asking-app"
ASKING_STEPS = ("ask_name", "confirm_delete", "ask_url", "ask_model", "list_roots", "ask_all", "two_step", "greeting", "roots_resource")


@pytest.fixture(scope="module")
def run_for(peers_python: str, bounded: Any, repo_root: Path) -> Any:
    """(transport, mode) -> {"summary", "serverStderr"}. Each runs once per module, on first use;
    a failed run fails every test that needs it, each time with the driver's report."""
    runs: dict[tuple[str, str], Any] = {}

    def get(transport: str, mode: str) -> dict[str, Any]:
        key = (transport, mode)
        if key not in runs:
            runs[key] = _run(transport, mode)
        outcome = runs[key]
        if isinstance(outcome, str):
            pytest.fail(outcome, pytrace=False)
        return outcome

    def _run(transport: str, mode: str) -> Any:
        args = [peers_python, str(DRIVER), "--mode", mode]
        server = None
        if transport == "http":
            try:
                server = HttpServer(spawn_http_server(str(APP)), LONG)
            except pytest.fail.Exception as not_started:  # remembered like a driver failure
                return str(not_started)
            args += ["--url", server.url]
        else:
            args += ["--cwd", str(repo_root), "--", sys.executable, "-m", "mcpsync", "serve", str(APP)]
        try:
            result = bounded(args, timeout=DRIVER_TIMEOUT, cwd=repo_root)
        except pytest.fail.Exception as timed_out:  # remembered, so a hang costs one timeout, not one per test
            return str(timed_out) + (f"\n--- server stderr ---\n{server.stop()}" if server else "")
        finally:
            server_stderr = server.stop() if server and server.proc.poll() is None else None
        if server is None:
            server_stderr = result.stderr  # the SDK passes the server's stderr through to the driver's
        if result.returncode != 0:
            return (
                f"official SDK client ({transport}, {mode}) failed, exit status {result.returncode}:\n"
                f"{result.stderr[-12000:]}" + (f"\n--- server stderr ---\n{server_stderr[-4000:]}" if server else "")
            )
        return {"summary": json.loads(result.stdout), "serverStderr": server_stderr or ""}

    return get


@pytest.fixture(params=RUNS, ids=RUN_IDS)
def run(request: pytest.FixtureRequest, run_for: Any) -> dict[str, Any]:
    return run_for(*request.param)


@pytest.fixture(params=[r for r in RUNS if r[1] == "legacy"], ids=[i for i in RUN_IDS if i.endswith("legacy")])
def legacy_run(request: pytest.FixtureRequest, run_for: Any) -> dict[str, Any]:
    return run_for(*request.param)


@pytest.fixture(params=[r for r in RUNS if r[1] == "pinned"], ids=[i for i in RUN_IDS if i.endswith("pinned")])
def pinned_run(request: pytest.FixtureRequest, run_for: Any) -> dict[str, Any]:
    return run_for(*request.param)


def step(run: dict[str, Any], name: str) -> dict[str, Any]:
    """One step of the driver's script; a step the SDK gave up on fails with what it raised."""
    record = run["summary"]["steps"][name]
    if "error" in record:
        pytest.fail(
            f"{name}: the SDK client raised {record['error']}\nrounds: {json.dumps(record['rounds'])[:3000]}\n"
            f"callbacks: {json.dumps(record['callbacks'])[:2000]}\n{record.get('traceback', '')}",
            pytrace=False,
        )
    return record


def tool_json(record: dict[str, Any]) -> Any:
    """The tool's answer: its one text block, parsed (the fixture's tools return JSON text)."""
    result = record["result"]
    assert not result.get("isError", False), result
    (block,) = result["content"]
    assert block["type"] == "text", block
    return json.loads(block["text"])


def callback_params(record: dict[str, Any], kind: str) -> list[Any]:
    return [call["params"] for call in record["callbacks"] if call["kind"] == kind]


def is_modern(run: dict[str, Any]) -> bool:
    return run["summary"]["mode"] == "pinned"


# --- every transport and era ----------------------------------------------------------------------


def test_the_client_is_in_the_era_it_was_told(run: dict[str, Any]) -> None:
    summary = run["summary"]
    if is_modern(run):
        assert (summary["era"], summary["protocolVersion"]) == ("modern", "2026-07-28")
    else:
        assert summary["era"] == "handshake" and summary["protocolVersion"].startswith("2025-"), summary["protocolVersion"]


def test_form_elicitation_reaches_the_callback_and_its_answer_the_tool(run: dict[str, Any]) -> None:
    record = step(run, "ask_name")
    assert callback_params(record, "elicitation") == [{"mode": "form", "message": "What is your name?", "requestedSchema": NAME_FORM}]
    assert [call["kind"] for call in record["callbacks"]] == ["elicitation"]
    assert tool_json(record) == {"action": "accept", "content": {"name": NAME}}


def test_a_declined_confirmation_reaches_the_tool(run: dict[str, Any]) -> None:
    record = step(run, "confirm_delete")
    assert callback_params(record, "elicitation") == [
        {"mode": "form", "message": "Delete everything?", "requestedSchema": {"type": "object", "properties": {}}}
    ]
    assert tool_json(record) == {"action": "decline"}


def test_url_elicitation_reaches_the_callback(run: dict[str, Any]) -> None:
    record = step(run, "ask_url")
    (params,) = callback_params(record, "elicitation")
    elicitation_id = params.pop("elicitationId", None)
    assert params == {"mode": "url", "message": "Please sign in", "url": SIGN_IN_URL}
    if is_modern(run):
        assert elicitation_id is None, "2026-07-28 URL-mode elicitation has no elicitationId"
    else:
        assert isinstance(elicitation_id, str) and elicitation_id, "2025-11-25 URL-mode elicitation needs an elicitationId"
    assert tool_json(record) == {"action": "accept"}


def test_sampling_reaches_the_callback_and_the_completion_the_tool(run: dict[str, Any]) -> None:
    record = step(run, "ask_model")
    assert callback_params(record, "sampling") == [
        {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Write a haiku about the sea."}}],
            "maxTokens": 64,
            "systemPrompt": "You are a terse poet.",
            "temperature": 0.5,
        }
    ]
    assert tool_json(record) == {"role": "assistant", "model": SAMPLE_MODEL, "text": SAMPLE_TEXT, "stopReason": "endTurn"}


def test_roots_come_from_the_callback(run: dict[str, Any]) -> None:
    record = step(run, "list_roots")
    assert [call["kind"] for call in record["callbacks"]] == ["roots"]
    assert tool_json(record) == ROOTS


def test_three_questions_asked_together_are_all_answered(run: dict[str, Any]) -> None:
    record = step(run, "ask_all")
    assert sorted(call["kind"] for call in record["callbacks"]) == ["elicitation", "roots", "sampling"]
    assert callback_params(record, "elicitation") == [{"mode": "form", "message": "Who is asking?", "requestedSchema": NAME_FORM}]
    assert callback_params(record, "sampling") == [
        {"messages": [{"role": "user", "content": {"type": "text", "text": "Say hello."}}], "maxTokens": 16}
    ]
    assert tool_json(record) == {"name": {"action": "accept", "content": {"name": NAME}}, "sample": SAMPLE_TEXT, "roots": ROOTS}


def test_a_second_question_built_from_the_first_answer(run: dict[str, Any]) -> None:
    record = step(run, "two_step")
    assert callback_params(record, "elicitation") == [
        {"mode": "form", "message": "What is your name?", "requestedSchema": NAME_FORM},
        {"mode": "form", "message": f"How old are you, {NAME}?", "requestedSchema": AGE_FORM},
    ]
    answer = tool_json(record)
    assert (answer["name"], answer["age"]) == (NAME, AGE)
    # The function runs once per round: once in the handshake era (it waits for each answer),
    # three times in 2026-07-28 (from the top on each retry: asks, asks again, completes).
    assert answer["runs"] == (3 if is_modern(run) else 1)


def test_a_tool_that_is_not_ready_twice_completes(run: dict[str, Any]) -> None:
    record = step(run, "patient")
    assert record["callbacks"] == []
    assert tool_json(record) == {"states": 2, "runs": 3}


def test_a_prompt_elicits(run: dict[str, Any]) -> None:
    record = step(run, "greeting")
    assert callback_params(record, "elicitation") == [{"mode": "form", "message": "What is your name?", "requestedSchema": NAME_FORM}]
    messages = record["result"]["messages"]
    assert messages == [{"role": "user", "content": {"type": "text", "text": f"Please greet {NAME} warmly."}}]


def test_a_resource_lists_the_roots(run: dict[str, Any]) -> None:
    record = step(run, "roots_resource")
    assert [call["kind"] for call in record["callbacks"]] == ["roots"]
    (contents,) = record["result"]["contents"]
    assert contents["uri"] == "asking://roots"
    assert json.loads(contents["text"]) == ROOTS


def test_nothing_arrives_outside_a_request(run: dict[str, Any]) -> None:
    assert run["summary"]["unexpected"] == []


def test_the_server_logged_no_traceback(run: dict[str, Any]) -> None:
    assert not has_traceback(run["serverStderr"]), run["serverStderr"][-4000:]


# --- handshake era: JSON-RPC requests to the client --------------------------------------------------


def test_handshake_era_asks_with_requests_answered_by_the_callbacks(legacy_run: dict[str, Any]) -> None:
    methods = {"elicitation": "elicitation/create", "sampling": "sampling/createMessage", "roots": "roots/list"}
    for name in ASKING_STEPS:
        record = step(legacy_run, name)
        # One request from the client, answered once, with no multi round-trip fields either way.
        (only,) = record["rounds"]
        assert (only["inputResponses"], only["requestState"], only["resultType"]) == (None, False, None), (name, only)
        assert "resultType" not in record["result"], (name, record["result"])
        # Each callback call was a request of the server's, with that request's id, and the client
        # answered each of them.
        server_requests = {json.dumps(r["id"]): r["method"] for r in record["serverRequests"]}
        assert len(server_requests) == len(record["serverRequests"]), f"{name}: request ids reused: {record['serverRequests']}"
        called = {json.dumps(call["requestId"]): methods[call["kind"]] for call in record["callbacks"]}
        assert called == server_requests, name
        assert sorted(map(json.dumps, record["clientResponses"])) == sorted(server_requests), name


def test_handshake_era_state_only_rounds_stay_inside_the_server(legacy_run: dict[str, Any]) -> None:
    record = step(legacy_run, "patient")
    (only,) = record["rounds"]
    assert only["resultType"] is None and record["serverRequests"] == []


# --- 2026-07-28: input_required and retries ------------------------------------------------------------


def check_rounds(record: dict[str, Any], expected: list[tuple[list[str] | None, str, dict[str, str]]]) -> None:
    """`expected`: per request sent, (the inputResponses keys it carried, the resultType that
    came back, the inputRequests {key: method} that came with it). Every retry echoes the
    previous round's requestState exactly."""
    rounds = record["rounds"]
    got = [(r["inputResponses"], r["resultType"], r.get("inputRequests") or {}) for r in rounds]
    assert got == expected, json.dumps(rounds, indent=1)[:4000]
    assert not rounds[0]["requestState"]
    for before, retry in zip(rounds, rounds[1:]):
        assert isinstance(before["returnedState"], str) and before["returnedState"], before
        assert retry["sentState"] == before["returnedState"], "the retry did not carry the server's requestState"


def test_modern_era_never_sends_a_request(pinned_run: dict[str, Any]) -> None:
    for name in (*ASKING_STEPS, "patient"):
        record = step(pinned_run, name)
        assert record["serverRequests"] == [], name
        assert record["clientResponses"] == [], name
        assert record["result"]["resultType"] == "complete", name


def test_modern_era_one_question_is_one_input_round(pinned_run: dict[str, Any]) -> None:
    for name, key, method in (
        ("ask_name", "elicitation-1", "elicitation/create"),
        ("confirm_delete", "elicitation-1", "elicitation/create"),
        ("ask_url", "elicitation-1", "elicitation/create"),
        ("ask_model", "sampling-1", "sampling/createMessage"),
        ("list_roots", "roots-1", "roots/list"),
        ("greeting", "elicitation-1", "elicitation/create"),
        ("roots_resource", "roots-1", "roots/list"),
    ):
        record = step(pinned_run, name)
        check_rounds(record, [(None, "input_required", {key: method}), ([key], "complete", {})])
        # The SDK's callback context names the inputRequests key (not a JSON-RPC id).
        assert [call["requestId"] for call in record["callbacks"]] == [key], name


def test_modern_era_batches_questions_asked_together(pinned_run: dict[str, Any]) -> None:
    record = step(pinned_run, "ask_all")
    batch = {"elicitation-1": "elicitation/create", "sampling-1": "sampling/createMessage", "roots-1": "roots/list"}
    check_rounds(record, [(None, "input_required", batch), (sorted(batch), "complete", {})])
    assert sorted(call["requestId"] for call in record["callbacks"]) == sorted(batch)


def test_modern_era_dependent_questions_take_two_rounds(pinned_run: dict[str, Any]) -> None:
    record = step(pinned_run, "two_step")
    check_rounds(
        record,
        [
            (None, "input_required", {"elicitation-1": "elicitation/create"}),
            # The SDK sends only this round's answers: the first one must travel in the state.
            (["elicitation-1"], "input_required", {"elicitation-2": "elicitation/create"}),
            (["elicitation-2"], "complete", {}),
        ],
    )
    assert record["rounds"][1]["inputResponseValues"] == {"elicitation-1": {"action": "accept", "content": {"name": NAME}}}
    assert record["rounds"][2]["inputResponseValues"] == {"elicitation-2": {"action": "accept", "content": {"age": AGE}}}
    assert [call["requestId"] for call in record["callbacks"]] == ["elicitation-1", "elicitation-2"]


def test_modern_era_state_only_rounds_are_retried_by_the_sdk(pinned_run: dict[str, Any]) -> None:
    record = step(pinned_run, "patient")
    check_rounds(record, [(None, "input_required", {}), (None, "input_required", {}), (None, "complete", {})])
