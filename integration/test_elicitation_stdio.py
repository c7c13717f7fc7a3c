"""Handshake-era elicitation, sampling and roots end to end: `python -m mcpsync serve app.py` as a
child process, driven with raw JSON lines.

The test plays the client: it reads the server's `elicitation/create`, `sampling/createMessage` or
`roots/list` request off the child's stdout and writes the JSON-RPC response to its stdin. The
fixture app is written into the test's tmp_path, so this file holds everything it relies on.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from wire import ServerProcess, has_traceback, is_notification, is_response, modern_meta, same_id, serve_argv

pytestmark = pytest.mark.timeout(60)

APP = '''
"""Tools that ask the client: the user (elicitation), its model (sampling), its roots."""

import json

from mcpsync import Context, McpError, Question, Server, Service

USER_SCHEMA = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}

service = Service("asking")


@service.tool
def test_elicitation(ctx: Context, message: str) -> str:
    """Ask the user for a name and an email."""
    answer = ctx.elicit(message, USER_SCHEMA)
    return f"User response: {json.dumps(answer, sort_keys=True)}"


@service.tool
def test_sampling(ctx: Context, prompt: str) -> str:
    """Ask the client's model."""
    answer = ctx.sample(prompt, max_tokens=100)
    return f"LLM response: {answer['content']['text']}"


@service.tool
def list_roots(ctx: Context) -> str:
    """The client's roots, as JSON."""
    return json.dumps(ctx.roots())


@service.tool
def everything(ctx: Context) -> str:
    """Three questions at once."""
    name, greeting, roots = ctx.ask(
        Question.elicitation("What is your name?", {"type": "object", "properties": {"name": {"type": "string"}}}),
        Question.sampling("Generate a greeting", max_tokens=50),
        Question.roots(),
    )
    return f"{greeting['content']['text']} {name['content']['name']} in {roots[0]['uri']}"


@service.tool
def polite(ctx: Context) -> str:
    """Takes no for an answer."""
    try:
        ctx.elicit("May I?")
    except McpError as exc:
        return f"refused {exc.code}: {exc.message}"
    return "allowed"


server = Server("asking-app", services=[service])
'''

CAPABILITIES = {"elicitation": {}, "sampling": {}, "roots": {"listChanged": True}}


@pytest.fixture
def app(tmp_path: Path) -> str:
    path = tmp_path / "asking_app.py"
    path.write_text(textwrap.dedent(APP))
    return str(path)


def handshake(proc: ServerProcess, capabilities: dict[str, Any] = CAPABILITIES) -> None:
    result = proc.result(
        "initialize", {"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "wire", "version": "0"}}
    )
    assert result["protocolVersion"] == "2025-11-25"
    proc.notify("notifications/initialized")


def is_server_request(frame: dict[str, Any], method: str | None = None) -> bool:
    return "id" in frame and "method" in frame and (method is None or frame["method"] == method)


def call(proc: ServerProcess, request_id: Any, name: str, arguments: dict[str, Any] | None = None, **meta: Any) -> None:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if meta:
        params["_meta"] = meta
    proc.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


def server_request(proc: ServerProcess, method: str) -> dict[str, Any]:
    return proc.expect(lambda frame: is_server_request(frame, method), what=f"the server's {method} request")


def reply(proc: ServerProcess, request_id: Any, result: Any) -> None:
    proc.send({"jsonrpc": "2.0", "id": request_id, "result": result})


def text(response: dict[str, Any]) -> str:
    assert "result" in response, response
    assert response["result"].get("isError") in (None, False), response
    [block] = response["result"]["content"]
    return block["text"]


def finish_cleanly(proc: ServerProcess) -> list[dict[str, Any]]:
    code, frames = proc.finish()
    assert code == 0, proc.stderr_tail()
    assert not has_traceback(proc.stderr_text()), proc.stderr_tail()
    return frames


# -- round trips ----------------------------------------------------------------------------------

def test_elicitation_round_trip(app: str) -> None:
    with ServerProcess(serve_argv(app)) as proc:
        handshake(proc)
        call(proc, 1, "test_elicitation", {"message": "Please provide your information"})
        request = server_request(proc, "elicitation/create")
        assert request["jsonrpc"] == "2.0"
        assert isinstance(request["id"], str)
        assert request["params"]["message"] == "Please provide your information"
        assert request["params"]["requestedSchema"]["required"] == ["username", "email"]
        answer = {"action": "accept", "content": {"username": "testuser", "email": "test@example.com"}}
        reply(proc, request["id"], answer)
        assert text(proc.response(1)) == f"User response: {json.dumps(answer, sort_keys=True)}"
        finish_cleanly(proc)


def test_sampling_round_trip(app: str) -> None:
    with ServerProcess(serve_argv(app)) as proc:
        handshake(proc)
        call(proc, 1, "test_sampling", {"prompt": "Test prompt for sampling"})
        request = server_request(proc, "sampling/createMessage")
        assert request["params"] == {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Test prompt for sampling"}}],
            "maxTokens": 100,
        }
        reply(proc, request["id"], {
            "role": "assistant",
            "content": {"type": "text", "text": "This is a test response from the client"},
            "model": "test-model",
            "stopReason": "endTurn",
        })
        assert text(proc.response(1)) == "LLM response: This is a test response from the client"
        finish_cleanly(proc)


def test_roots_round_trip(app: str) -> None:
    with ServerProcess(serve_argv(app)) as proc:
        handshake(proc)
        call(proc, 1, "list_roots")
        request = server_request(proc, "roots/list")
        roots = [{"uri": "file:///test/root", "name": "Test Root"}]
        reply(proc, request["id"], {"roots": roots})
        assert json.loads(text(proc.response(1))) == roots
        finish_cleanly(proc)


def test_three_questions_at_once_answered_in_reverse(app: str) -> None:
    with ServerProcess(serve_argv(app)) as proc:
        handshake(proc)
        call(proc, 1, "everything")
        requests = [server_request(proc, method) for method in ("elicitation/create", "sampling/createMessage", "roots/list")]
        assert len({request["id"] for request in requests}) == 3
        answers = [
            {"action": "accept", "content": {"name": "Alice"}},
            {"role": "assistant", "content": {"type": "text", "text": "Hello there,"}, "model": "m", "stopReason": "endTurn"},
            {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]},
        ]
        for request, answer in reversed(list(zip(requests, answers))):
            reply(proc, request["id"], answer)
        assert text(proc.response(1)) == "Hello there, Alice in file:///test/root"
        finish_cleanly(proc)


def test_concurrent_calls_answered_out_of_order(app: str) -> None:
    with ServerProcess(serve_argv(app)) as proc:
        handshake(proc)
        for n in range(4):
            call(proc, n, "test_sampling", {"prompt": f"prompt-{n}"})
        requests = [server_request(proc, "sampling/createMessage") for _ in range(4)]
        for request in reversed(requests):
            prompt = request["params"]["messages"][0]["content"]["text"]
            reply(proc, request["id"], {"role": "assistant", "content": {"type": "text", "text": f"re {prompt}"}, "model": "m"})
        for n in range(4):
            assert text(proc.response(n)) == f"LLM response: re prompt-{n}"
        finish_cleanly(proc)


def test_an_error_answer_reaches_the_tool(app: str) -> None:
    with ServerProcess(serve_argv(app)) as proc:
        handshake(proc)
        call(proc, 1, "polite")
        request = server_request(proc, "elicitation/create")
        proc.send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -1, "message": "User rejected the request"}})
        assert text(proc.response(1)) == "refused -1: User rejected the request"
        finish_cleanly(proc)


def test_a_stray_response_is_ignored(app: str) -> None:
    with ServerProcess(serve_argv(app)) as proc:
        handshake(proc)
        reply(proc, "mcpsync-424242", {"action": "accept"})
        reply(proc, 99, {})
        proc.ping()
        call(proc, 1, "list_roots")
        request = server_request(proc, "roots/list")
        reply(proc, request["id"], {"roots": []})
        assert json.loads(text(proc.response(1))) == []
        finish_cleanly(proc)


# -- giving up ------------------------------------------------------------------------------------

def test_cancelling_the_call_cancels_the_servers_request(app: str) -> None:
    with ServerProcess(serve_argv(app)) as proc:
        handshake(proc)
        call(proc, "c", "test_elicitation", {"message": "wait for me"})
        request = server_request(proc, "elicitation/create")
        proc.cancel("c", "the user closed the dialog")
        cancelled = proc.expect(lambda frame: is_notification(frame, "notifications/cancelled"), what="the server's cancel")
        assert same_id(cancelled["params"]["requestId"], request["id"])
        reply(proc, request["id"], {"action": "accept", "content": {"username": "late", "email": "x@y"}})  # ignored
        proc.ping()
        code, frames = proc.finish()
        assert code == 0, proc.stderr_tail()
        assert not any(is_response(frame, "c") for frame in frames), frames


def test_a_cancelled_question_is_not_logged_as_a_crash(app: str) -> None:
    with ServerProcess(serve_argv(app)) as proc:
        handshake(proc)
        call(proc, "c", "test_elicitation", {"message": "wait for me"})
        server_request(proc, "elicitation/create")
        proc.cancel("c")
        proc.expect(lambda frame: is_notification(frame, "notifications/cancelled"), what="the server's cancel")
        proc.ping()
        finish_cleanly(proc)


def test_end_of_input_while_a_tool_waits_exits_promptly(app: str) -> None:
    with ServerProcess(serve_argv(app)) as proc:
        handshake(proc)
        call(proc, 1, "test_elicitation", {"message": "nobody will answer"})
        server_request(proc, "elicitation/create")
        started = time.monotonic()
        proc.close_stdin()
        code = proc.wait_exit(10)
        assert code == 0, proc.stderr_tail()
        assert time.monotonic() - started < 5.0
        frames = proc.drain()
        [response] = [frame for frame in frames if is_response(frame, 1)]
        assert response["result"]["isError"] is True  # the tool's wait ended with an error


def test_without_the_capability_nothing_is_sent(app: str) -> None:
    with ServerProcess(serve_argv(app)) as proc:
        handshake(proc, capabilities={"roots": {}})
        response = proc.request("tools/call", {"name": "test_sampling", "arguments": {"prompt": "p"}})
        assert "sampling" in json.dumps(response)
        assert "error" in response or response["result"]["isError"] is True
        frames = finish_cleanly(proc)
        assert not any(is_server_request(frame) for frame in [*proc.notifications, *frames])


def test_a_2026_client_gets_no_request_on_the_wire(app: str) -> None:
    with ServerProcess(serve_argv(app)) as proc:
        meta = modern_meta()
        meta["io.modelcontextprotocol/clientCapabilities"] = CAPABILITIES
        call(proc, 1, "test_elicitation", {"message": "hi"}, **meta)
        response = proc.response(1)
        assert "result" in response or "error" in response
        frames = finish_cleanly(proc)
        assert not any(is_server_request(frame) for frame in [*proc.notifications, *frames])
