"""The demo service end to end, in both eras, over a real `python -m mcpsync serve` subprocess.

Tools (plain, structured, failing, unknown, bad arguments: an `isError` result), prompts, resources (static and
template), completion, progress and logging. The modern connection probes with `server/discover`
first, as a dual-era client does, so its requests run concurrently like the handshake era's.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from wire import (
    META_LOG_LEVEL,
    EraClient,
    ServerProcess,
    fixture,
    is_notification,
    is_response,
    legacy_init,
    serve_argv,
)

pytestmark = pytest.mark.timeout(60)

ERAS = ["handshake", "modern"]
DEMO_TOOLS = ["echo", "add", "word_stats", "countdown", "fail"]
LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


@pytest.fixture(scope="module")
def servers():
    """One demo server per era for the read-only tests of this module (started on first use)."""
    started: dict[str, tuple[ServerProcess, EraClient]] = {}
    yield started
    for proc, _ in started.values():
        proc.cleanup()


@pytest.fixture(params=ERAS)
def client(request, servers) -> EraClient:
    era = request.param
    if era not in servers or servers[era][0].proc.poll() is not None:
        proc = ServerProcess(serve_argv()).__enter__()
        servers[era] = (proc, EraClient(proc, era))
    proc, era_client = servers[era]
    assert not proc._backlog, list(proc._backlog)
    return era_client


def text_of(result: dict) -> str:
    assert [block["type"] for block in result["content"]] == ["text"], result
    return result["content"][0]["text"]


# -- tools ----------------------------------------------------------------------------------------

def test_tools_list(client: EraClient) -> None:
    tools = {tool["name"]: tool for tool in client.result("tools/list")["tools"]}
    assert list(tools) == DEMO_TOOLS
    add = tools["add"]
    assert add["inputSchema"]["properties"]["a"]["type"] == "integer"
    assert sorted(add["inputSchema"]["required"]) == ["a", "b"]
    assert add["description"].startswith("Add two integers")
    assert add["annotations"] == {"readOnlyHint": True, "idempotentHint": True}
    stats = tools["word_stats"]
    assert stats["outputSchema"]["type"] == "object"
    assert set(stats["outputSchema"]["properties"]) == {"words", "characters", "lines", "most_common"}
    assert "outputSchema" not in tools["echo"]
    for tool in tools.values():
        jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])


def test_add(client: EraClient) -> None:
    result = client.call_tool("add", {"a": 40, "b": 2})
    assert result["isError"] is False
    assert text_of(result) == "42"
    assert result["structuredContent"] == {"result": 42}


def test_echo_round_trips_text(client: EraClient) -> None:
    text = "naïve ☃ — \"quotes\" \\ and\nnewlines\t🎉"
    result = client.call_tool("echo", {"text": text})
    assert result == {**result, "isError": False}
    assert text_of(result) == text
    assert "structuredContent" not in result


def test_word_stats_structured_content_matches_its_output_schema(client: EraClient) -> None:
    schema = next(tool for tool in client.result("tools/list")["tools"] if tool["name"] == "word_stats")["outputSchema"]
    result = client.call_tool("word_stats", {"text": "the cat and the hat\nthe end", "top": 2})
    structured = result["structuredContent"]
    assert structured == {"words": 7, "characters": 27, "lines": 2, "most_common": ["the", "cat"]}
    jsonschema.validate(structured, schema)
    assert json.loads(text_of(result)) == structured  # the text block carries the same data


def test_failing_tool_is_a_tool_error_not_a_protocol_error(client: EraClient) -> None:
    result = client.call_tool("fail", {})
    assert result["isError"] is True
    assert text_of(result) == "this tool always fails"
    assert text_of(client.call_tool("fail", {"message": "custom failure"})) == "custom failure"


def test_unknown_tool_is_invalid_params(client: EraClient) -> None:
    error = client.error("tools/call", {"name": "no_such_tool", "arguments": {}})
    assert error["code"] == -32602
    assert "no_such_tool" in error["message"]


@pytest.mark.parametrize(
    "tool, arguments, field",
    [
        ("add", {"a": "one", "b": 2}, "a"),
        ("add", {"a": 1, "b": 2.5}, "b"),
        ("add", {"a": True, "b": 2}, "a"),
        ("add", {"a": 1}, "b"),
        ("add", {"a": 1, "b": 2, "c": 3}, "c"),
        ("word_stats", {"text": "x", "top": "3"}, "top"),
        ("echo", {}, "text"),
        ("echo", {"text": None}, "text"),
    ],
    ids=["wrong-type", "float-for-int", "bool-for-int", "missing", "unexpected", "string-for-int", "missing-only", "null"],
)
def test_bad_arguments_are_an_error_result_naming_the_field(client: EraClient, tool: str, arguments: dict, field: str) -> None:
    result = client.call_tool(tool, arguments)
    assert result["isError"] is True, result
    assert text_of(result).startswith(f"Invalid arguments for tool '{tool}'") and f"'{field}'" in text_of(result), result


def test_tool_definitions_follow_the_negotiated_handshake_version() -> None:
    with ServerProcess(serve_argv()) as proc:
        legacy_init(proc, version="2025-03-26")  # before outputSchema and structuredContent
        tools = {tool["name"]: tool for tool in proc.result("tools/list")["tools"]}
        assert "outputSchema" not in tools["word_stats"] and "annotations" in tools["add"]
        result = proc.result("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})
        assert "structuredContent" not in result and text_of(result) == "2"
    with ServerProcess(serve_argv()) as proc:
        legacy_init(proc, version="2024-11-05")  # before annotations too
        tools = {tool["name"]: tool for tool in proc.result("tools/list")["tools"]}
        assert "annotations" not in tools["add"] and "outputSchema" not in tools["word_stats"]


# -- prompts --------------------------------------------------------------------------------------

def test_prompts_list_and_get(client: EraClient) -> None:
    prompts = client.result("prompts/list")["prompts"]
    assert [prompt["name"] for prompt in prompts] == ["review_code"]
    arguments = {argument["name"]: argument["required"] for argument in prompts[0]["arguments"]}
    assert arguments == {"code": True, "language": False}

    result = client.result("prompts/get", {"name": "review_code", "arguments": {"code": "fn main() {}", "language": "rust"}})
    assert len(result["messages"]) == 1
    message = result["messages"][0]
    assert message["role"] == "user" and message["content"]["type"] == "text"
    assert "rust" in message["content"]["text"] and "fn main() {}" in message["content"]["text"]
    default = client.result("prompts/get", {"name": "review_code", "arguments": {"code": "x = 1"}})
    assert "python" in default["messages"][0]["content"]["text"]


@pytest.mark.parametrize(
    "params",
    [
        {"name": "review_code", "arguments": {}},
        {"name": "review_code", "arguments": {"code": 5}},
        {"name": "review_code", "arguments": {"code": "x", "colour": "red"}},
        {"name": "no_such_prompt", "arguments": {}},
        {"arguments": {}},
    ],
    ids=["missing", "not-a-string", "unknown-argument", "unknown-prompt", "no-name"],
)
def test_bad_prompt_requests_are_invalid_params(client: EraClient, params: dict) -> None:
    assert client.error("prompts/get", params)["code"] == -32602


# -- resources ------------------------------------------------------------------------------------

def test_resources_list_and_read_static(client: EraClient) -> None:
    resources = client.result("resources/list")["resources"]
    assert [(r["uri"], r["name"], r.get("mimeType")) for r in resources] == [("demo://readme", "readme", "text/markdown")]
    contents = client.result("resources/read", {"uri": "demo://readme"})["contents"]
    assert len(contents) == 1
    assert contents[0]["uri"] == "demo://readme" and contents[0]["mimeType"] == "text/markdown"
    assert contents[0]["text"].startswith("# mcpsync demo")


def test_resource_templates_list_and_read(client: EraClient) -> None:
    templates = client.result("resources/templates/list")["resourceTemplates"]
    assert [(t["uriTemplate"], t["name"]) for t in templates] == [("demo://greeting/{name}", "greeting")]
    contents = client.result("resources/read", {"uri": "demo://greeting/Grace"})["contents"]
    assert contents == [{"uri": "demo://greeting/Grace", "text": "Hello, Grace!", "mimeType": "text/plain"}]
    contents = client.result("resources/read", {"uri": "demo://greeting/Ada%20L"})["contents"]
    assert contents[0]["uri"] == "demo://greeting/Ada%20L"


@pytest.mark.parametrize("uri", ["demo://nothing", "demo://greeting/", "demo://greeting/a/b", "other://readme"])
def test_resource_not_found_code_depends_on_the_era(client: EraClient, uri: str) -> None:
    error = client.error("resources/read", {"uri": uri})
    assert error["code"] == (-32602 if client.modern else -32002), error
    assert error["data"]["uri"] == uri


def test_resource_read_without_uri_is_invalid_params(client: EraClient) -> None:
    assert client.error("resources/read", {})["code"] == -32602


# -- completion -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "ref, argument, values",
    [
        ({"type": "ref/prompt", "name": "review_code"}, {"name": "language", "value": "py"}, ["python"]),
        ({"type": "ref/prompt", "name": "review_code"}, {"name": "language", "value": "j"}, ["java", "javascript"]),
        ({"type": "ref/prompt", "name": "review_code"}, {"name": "language", "value": "zz"}, []),
        ({"type": "ref/prompt", "name": "review_code"}, {"name": "code", "value": "x"}, []),
        ({"type": "ref/resource", "uri": "demo://greeting/{name}"}, {"name": "name", "value": "G"}, ["Grace", "Guido"]),
        ({"type": "ref/resource", "uri": "demo://greeting/{name}"}, {"name": "name", "value": ""}, ["Ada", "Alan", "Barbara", "Grace", "Guido", "Linus"]),
    ],
)
def test_completion(client: EraClient, ref: dict, argument: dict, values: list) -> None:
    completion = client.result("completion/complete", {"ref": ref, "argument": argument})["completion"]
    assert completion["values"] == values
    assert completion["total"] == len(values)
    assert completion["hasMore"] is False


@pytest.mark.parametrize(
    "ref, argument",
    [
        ({"type": "ref/prompt", "name": "nope"}, {"name": "language", "value": ""}),
        ({"type": "ref/prompt", "name": "review_code"}, {"name": "colour", "value": ""}),
        ({"type": "ref/resource", "uri": "demo://nope/{x}"}, {"name": "x", "value": ""}),
        ({"type": "ref/other"}, {"name": "x", "value": ""}),
    ],
    ids=["unknown-prompt", "unknown-argument", "unknown-template", "unknown-ref-type"],
)
def test_bad_completion_requests_are_invalid_params(client: EraClient, ref: dict, argument: dict) -> None:
    assert client.error("completion/complete", {"ref": ref, "argument": argument})["code"] == -32602


# -- progress -------------------------------------------------------------------------------------

@pytest.mark.parametrize("token", ["tok-1", 17], ids=["string-token", "int-token"])
def test_progress_only_with_a_token_increasing_and_never_after_the_response(client: EraClient, token) -> None:
    proc = client.proc
    result = client.result("tools/call", {"name": "countdown", "arguments": {"steps": 4, "delay": 0}}, progressToken=token)
    assert text_of(result) == "counted down 4 steps"
    progress = [n["params"] for n in proc.notifications if n["method"] == "notifications/progress"]
    assert len(progress) == 4, proc.notifications
    for params in progress:
        assert type(params["progressToken"]) is type(token) and params["progressToken"] == token
        assert params["total"] == 4
        assert params["message"].startswith("step ")
    values = [params["progress"] for params in progress]
    assert values == sorted(set(values)) and values[-1] == 4

    # Without a token: no progress at all.
    client.result("tools/call", {"name": "countdown", "arguments": {"steps": 3, "delay": 0}})
    assert not [n for n in proc.notifications if n["method"] == "notifications/progress"]
    # Nothing arrives later either: the next request's answer is the next frame.
    client.result("tools/list")
    assert proc.notifications == []


def test_progress_stops_with_the_response_under_concurrency() -> None:
    """Many countdowns at once: each one's progress precedes its own response, never follows it."""
    with ServerProcess(serve_argv()) as proc:
        legacy_init(proc)
        ids = [f"c{i}" for i in range(8)]
        for request_id in ids:
            proc.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "countdown", "arguments": {"steps": 5, "delay": 0.001}, "_meta": {"progressToken": request_id}}})
        code, frames = proc.finish()
        assert code == 0
        for request_id in ids:
            answered_at = next(i for i, frame in enumerate(frames) if is_response(frame, request_id))
            late = [f for f in frames[answered_at:] if is_notification(f, "notifications/progress") and f["params"]["progressToken"] == request_id]
            assert late == [], f"progress after the response of {request_id}: {late!r}"
            values = [f["params"]["progress"] for f in frames[:answered_at] if is_notification(f, "notifications/progress") and f["params"]["progressToken"] == request_id]
            assert values == [1, 2, 3, 4, 5]


# -- logging --------------------------------------------------------------------------------------

def logged_levels(proc: ServerProcess) -> list[str]:
    return [n["params"]["level"] for n in proc.notifications if n["method"] == "notifications/message"]


def test_handshake_logging_set_level_filters_messages() -> None:
    with ServerProcess(serve_argv(fixture("toolbox.py"))) as proc:
        legacy_init(proc)
        call = {"name": "log_all", "arguments": {}}
        proc.result("tools/call", call)
        assert logged_levels(proc) == LEVELS  # every level before any logging/setLevel
        message = next(n for n in proc.notifications if n["method"] == "notifications/message")
        assert message["params"] == {"level": "debug", "data": "debug message", "logger": "toolbox"}
        for level in ["warning", "emergency", "debug", "info"]:
            assert proc.result("logging/setLevel", {"level": level}) == {}
            proc.result("tools/call", call)
            assert logged_levels(proc) == LEVELS[LEVELS.index(level):], level
        assert proc.error("logging/setLevel", {"level": "verbose"})["code"] == -32602
        assert proc.error("logging/setLevel", {})["code"] == -32602


def test_handshake_logging_from_the_demo_countdown() -> None:
    with ServerProcess(serve_argv()) as proc:
        legacy_init(proc)
        proc.result("tools/call", {"name": "countdown", "arguments": {"steps": 2, "delay": 0}})
        assert [n["params"]["data"] for n in proc.notifications] == ["countdown: 1 to go", "countdown: 0 to go"]
        proc.result("logging/setLevel", {"level": "warning"})
        proc.result("tools/call", {"name": "countdown", "arguments": {"steps": 2, "delay": 0}})
        assert proc.notifications == []


def test_modern_logging_only_with_a_log_level_in_the_envelope() -> None:
    with ServerProcess(serve_argv(fixture("toolbox.py"))) as proc:
        client = EraClient(proc, "modern")
        call = {"name": "log_all", "arguments": {}}
        client.result("tools/call", call)
        assert logged_levels(proc) == []
        for level in ["debug", "warning", "emergency"]:
            client.result("tools/call", call, **{META_LOG_LEVEL: level})
            assert logged_levels(proc) == LEVELS[LEVELS.index(level):], level
        # The level is per request: the next request without one gets nothing.
        client.result("tools/call", call)
        assert logged_levels(proc) == []
        assert client.error("tools/call", call, **{META_LOG_LEVEL: "verbose"})["code"] == -32602
        assert client.error("logging/setLevel", {"level": "debug"})["code"] == -32601


# -- concurrency ----------------------------------------------------------------------------------

@pytest.mark.parametrize("era", ERAS)
def test_requests_run_concurrently(era: str) -> None:
    with ServerProcess(serve_argv(fixture("toolbox.py"))) as proc:
        client = EraClient(proc, era)
        proc.send({"jsonrpc": "2.0", "id": "blocked", "method": "tools/call", "params": client.params({"name": "block", "arguments": {"key": "cc"}}, progressToken="cc")})
        proc.expect(lambda f: is_notification(f, "notifications/progress"), what="block's progress")
        who = client.call_tool("whoami")
        assert who["structuredContent"]["era"] == era
        assert who["structuredContent"]["protocolVersion"] == ("2026-07-28" if client.modern else "2025-11-25")
        assert text_of(client.call_tool("release", {"key": "cc"})) == "ok"
        assert text_of(proc.response("blocked")["result"]) == "released"
