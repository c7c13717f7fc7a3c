"""Tests for mcpsync.engine.operations: what each MCP method does, through the engine.

Tools (validation, errors, result mapping, version gating, progress, logging), pagination, prompts,
resources, completion, `subscriptions/listen` and `resources/subscribe`, and what a function's
`Context` sees. The era rules themselves are in test_engine.py.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass
from datetime import date
from typing import Any, Mapping

import pytest

from mcpsync.catalog.content import Image, ToolError, ToolResult
from mcpsync.catalog.context import Context
from mcpsync.catalog.service import Prompt, Service, Tool
from mcpsync.engine.outcome import Subscribed
from mcpsync.protocol.jsonrpc import ErrorCode, McpError
from mcpsync.protocol.versions import Era
from tests.helpers import MODERN, NO_PUSH, EngineHarness, FakeExchange

pytestmark = pytest.mark.timeout(30)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
LANGUAGES = ["c", "go", "java", "javascript", "python", "rust", "typescript"]


@dataclass
class Stats:
    words: int
    top: list[str]


def make_service() -> Service:
    service = Service("ops")

    @service.tool(title="Add two numbers", annotations={"readOnlyHint": True})
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @service.tool
    def echo(text: str) -> str:
        return text

    @service.tool
    def stats(text: str) -> Stats:
        words = text.split()
        return Stats(len(words), words[:1])

    @service.tool
    def mapping() -> dict:
        return {"k": "v", "n": 1}

    @service.tool
    def plain_dict():
        return {"k": "v"}

    @service.tool
    def image() -> Image:
        return Image(PNG)

    @service.tool
    def raw_png() -> bytes:
        return PNG

    @service.tool
    def raw_bytes() -> bytes:
        return b"\x00\x01binary"

    @service.tool
    def blocks() -> list:
        return [{"type": "text", "text": "see"}, Image(PNG, "image/png")]

    @service.tool
    def spelled_out() -> ToolResult:
        return ToolResult(["a", Image(PNG)], structured={"ok": True}, is_error=False)

    @service.tool
    def reported_error() -> ToolResult:
        return ToolResult(["nope"], is_error=True)

    @service.tool
    def nothing() -> None:
        return None

    @service.tool
    def boom() -> str:
        raise ValueError("kaput")

    @service.tool
    def tool_error(message: str = "") -> str:
        raise ToolError(message)

    @service.tool
    def protocol_error() -> str:
        raise McpError(ErrorCode.INVALID_PARAMS, "the tool refuses", {"why": "because"})

    @service.tool
    def steps(ctx: Context, values: list[float]) -> str:
        for value in values:
            ctx.progress(value, 3, f"at {value}")
        return "done"

    @service.tool
    def chatty(ctx: Context) -> str:
        for level in ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"):
            ctx.log(level, f"{level} message", logger="chatty")
        return "said"

    @service.tool
    def whoami(ctx: Context) -> dict:
        return {
            "request_id": ctx.request_id,
            "id_type": type(ctx.request_id).__name__,
            "era": ctx.era.value,
            "protocol_version": ctx.protocol_version,
            "client_info": ctx.client_info,
            "client_capabilities": ctx.client_capabilities,
            "cancelled": ctx.cancelled,
        }

    @service.prompt(complete={"language": LANGUAGES})
    def review(code: str, language: str = "python") -> str:
        """Review some code."""
        return f"Review this {language}: {code}"

    @service.prompt
    def repeat(word: str, times: int = 1, loud: bool = False) -> list:
        text = " ".join([word] * times)
        return [{"role": "user", "content": text.upper() if loud else text}, {"role": "assistant", "content": "ok"}]

    @service.prompt
    def broken() -> str:
        raise RuntimeError("prompt failed")

    def by_prefix(value: str, arguments: Mapping[str, str]) -> list[str]:
        return [f"{arguments.get('shelf', '?')}-{value}{i}" for i in range(3)]

    @service.prompt(complete={"book": by_prefix})
    def library(shelf: str, book: str) -> str:
        return f"{shelf}/{book}"

    @service.prompt(complete={"n": [str(i) for i in range(250)]})
    def many(n: str) -> str:
        return n

    @service.resource("mem://readme", mime_type="text/markdown", description="The readme")
    def readme() -> str:
        return "# Hello"

    @service.resource("mem://blob")
    def blob() -> bytes:
        return b"\x00\xffdata"

    @service.resource("mem://config")
    def config() -> dict:
        return {"debug": True}

    @service.resource("mem://failing")
    def failing() -> str:
        raise OSError("disk gone")

    @service.resource("mem://forbidden")
    def forbidden() -> str:
        raise McpError(ErrorCode.INVALID_PARAMS, "not for you")

    @service.resource("mem://users/{user}/posts/{post}", mime_type="text/plain", complete={"user": ["ada", "alan", "grace"]})
    def post(user: str, post: str) -> str:
        return f"{user}:{post}"

    @service.resource("file:///{+path}")
    def file(path: str) -> str:
        return f"file {path}"

    return service


@pytest.fixture
def h() -> EngineHarness:
    return EngineHarness([make_service()])


def text_of(result: dict[str, Any]) -> str:
    [block] = result["content"]
    assert block["type"] == "text"
    return block["text"]


# -- tools/list -------------------------------------------------------------------------------------

def test_tools_list_describes_each_tool(h: EngineHarness) -> None:
    tools = {tool["name"]: tool for tool in h.ok(h.request("tools/list"))["tools"]}
    add = tools["add"]
    assert add["description"] == "Add two integers."
    assert add["title"] == "Add two numbers"
    assert add["annotations"] == {"readOnlyHint": True}
    assert add["inputSchema"]["properties"] == {"a": {"type": "integer"}, "b": {"type": "integer"}}
    assert add["inputSchema"]["required"] == ["a", "b"]
    assert add["outputSchema"] == {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]}
    assert tools["stats"]["outputSchema"]["properties"].keys() == {"words", "top"}
    assert "outputSchema" not in tools["echo"]
    assert "outputSchema" not in tools["image"]
    assert "steps" in tools and "ctx" not in tools["steps"]["inputSchema"]["properties"]


@pytest.mark.parametrize("version, has_output_schema, has_title, has_annotations", [
    ("2025-11-25", True, True, True),
    ("2025-06-18", True, True, True),
    ("2025-03-26", False, False, True),
    ("2024-11-05", False, False, False),
])
def test_tools_list_drops_fields_the_negotiated_version_does_not_know(
    h: EngineHarness, version: str, has_output_schema: bool, has_title: bool, has_annotations: bool
) -> None:
    h.ok(h.initialize(version))
    add = next(tool for tool in h.ok(h.request("tools/list"))["tools"] if tool["name"] == "add")
    assert ("outputSchema" in add) is has_output_schema
    assert ("title" in add) is has_title
    assert ("annotations" in add) is has_annotations


def test_version_gating_does_not_change_the_tool_itself(h: EngineHarness) -> None:
    h.ok(h.initialize("2024-11-05"))
    h.ok(h.request("tools/list"))
    modern = EngineHarness(h.catalog.services)
    add = next(tool for tool in modern.ok(modern.modern("tools/list"))["tools"] if tool["name"] == "add")
    assert "outputSchema" in add and "title" in add and "annotations" in add


# -- tools/call: arguments ------------------------------------------------------------------------------

def test_a_tool_is_called_with_its_arguments(h: EngineHarness) -> None:
    result = h.ok(h.call_tool("add", {"a": 2, "b": 40}))
    assert result == {"content": [{"type": "text", "text": "42"}], "isError": False, "structuredContent": {"result": 42}}


@pytest.mark.parametrize("arguments, field, rule", [
    ({"a": "two", "b": 1}, "a", "is not of type 'integer'"),
    ({"a": 1, "b": 2.5}, "b", "is not of type 'integer'"),
    ({"a": True, "b": 1}, "a", "is not of type 'integer'"),
    ({"a": None, "b": 1}, "a", "is not of type 'integer'"),
    ({"a": 1}, "b", "is a required property"),
    ({"a": 1, "b": 2, "c": 3}, "c", "Additional properties are not allowed"),
])
@pytest.mark.parametrize("modern", [False, True])
def test_arguments_that_do_not_match_the_schema_are_an_error_result_naming_the_field_and_the_rule(
    h: EngineHarness, arguments: dict, field: str, rule: str, modern: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="mcpsync"):
        result = h.ok(h.call_tool("add", arguments, modern=modern))
    assert result["isError"] is True and "structuredContent" not in result
    text = text_of(result)
    assert text.startswith("Invalid arguments for tool 'add'")
    assert f"'{field}'" in text and rule in text
    assert not caplog.records, "the client's mistake is not the server's: nothing logged"


def test_a_nested_field_is_named_by_its_path() -> None:
    service = Service("nested")

    @service.tool
    def place(points: list[Stats]) -> int:
        return len(points)

    h = EngineHarness([service])
    result = h.ok(h.call_tool("place", {"points": [{"words": 1, "top": []}, {"words": "x", "top": []}]}))
    assert result["isError"] is True
    assert text_of(result) == "Invalid arguments for tool 'place' at 'points/1/words': 'x' is not of type 'integer'"


def test_a_wrongly_typed_huge_string_is_quoted_by_a_short_prefix(h: EngineHarness) -> None:
    result = h.ok(h.call_tool("add", {"a": "x" * 10_000_000, "b": 1}))
    text = text_of(result)
    assert result["isError"] is True and len(text) < 300, text[:300]
    assert text.startswith("Invalid arguments for tool 'add' at 'a': 'xxxx")
    assert "(10000000 characters)" in text and "'type': 'integer'" in text


@pytest.mark.parametrize("modern", [False, True])
def test_arguments_nested_a_thousand_deep_are_an_error_result_not_an_internal_error(
    h: EngineHarness, modern: bool, caplog: pytest.LogCaptureFixture
) -> None:
    deep: Any = 1
    for _ in range(1000):
        deep = [deep]
    with caplog.at_level(logging.ERROR, logger="mcpsync"):
        result = h.ok(h.call_tool("add", {"a": deep, "b": 1}, modern=modern))
    assert result["isError"] is True
    text = text_of(result)
    assert text.startswith("Invalid arguments for tool 'add' at 'a': ") and len(text) < 300, text[:300]
    assert "1000 levels" in text
    assert not caplog.records, "no RecursionError traceback in the log"


def test_a_value_its_type_refuses_is_an_error_result_naming_the_parameter() -> None:
    service = Service("dates")

    @service.tool
    def weekday(day: date) -> str:
        return day.strftime("%A")

    h = EngineHarness([service])
    result = h.ok(h.call_tool("weekday", {"day": "2025-13-45"}))
    assert result["isError"] is True
    assert text_of(result).startswith("Invalid arguments for tool 'weekday': parameter 'day': ")
    assert h.ok(h.call_tool("weekday", {"day": "2025-11-25"}))["content"] == [{"type": "text", "text": "Tuesday"}]


@pytest.mark.parametrize("params", [
    {"name": "add", "arguments": [1, 2]},
    {"name": "add", "arguments": "a=1"},
    {"name": 5},
    {"name": None},
    {},
])
def test_malformed_tools_call_params_are_invalid_params(h: EngineHarness, params: dict) -> None:
    h.fails(h.request("tools/call", params), ErrorCode.INVALID_PARAMS)


def test_arguments_may_be_omitted_or_null_for_a_tool_without_parameters(h: EngineHarness) -> None:
    assert h.ok(h.call_tool("nothing"))["isError"] is False
    assert h.ok(h.call_tool("nothing", None))["isError"] is False


def test_omitting_required_arguments_is_an_error_result_naming_them(h: EngineHarness) -> None:
    result = h.ok(h.call_tool("add"))
    assert result == {"content": [{"type": "text", "text": "Invalid arguments for tool 'add': 'a' is a required property"}], "isError": True}


@pytest.mark.parametrize("modern", [False, True])
def test_an_unknown_tool_is_invalid_params(h: EngineHarness, modern: bool) -> None:
    error = h.fails(h.call_tool("no_such_tool", {}, modern=modern), ErrorCode.INVALID_PARAMS)
    assert "no_such_tool" in error.message
    assert error.data == {"name": "no_such_tool"}


# -- tools/call: failures -----------------------------------------------------------------------------------

def test_an_exception_in_a_tool_is_an_error_result_not_a_protocol_error(h: EngineHarness, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="mcpsync"):
        result = h.ok(h.call_tool("boom"))
    assert result["isError"] is True
    assert "boom" in text_of(result) and "kaput" in text_of(result)
    assert any(record.exc_info for record in caplog.records), "the traceback goes to the log"


def test_a_tool_error_is_an_error_result_with_its_message(h: EngineHarness, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="mcpsync"):
        result = h.ok(h.call_tool("tool_error", {"message": "the disk is full"}))
    assert result == {"content": [{"type": "text", "text": "the disk is full"}], "isError": True}
    assert not any(record.exc_info for record in caplog.records), "a ToolError is not a bug: no traceback"


def test_a_tool_error_without_a_message_names_the_tool(h: EngineHarness) -> None:
    assert "tool_error" in text_of(h.ok(h.call_tool("tool_error", {"message": ""})))


def test_an_mcp_error_raised_by_a_tool_is_the_json_rpc_error(h: EngineHarness) -> None:
    error = h.fails(h.call_tool("protocol_error"), ErrorCode.INVALID_PARAMS)
    assert error.message == "the tool refuses"
    assert error.data == {"why": "because"}


def test_a_result_that_json_cannot_carry_is_an_error_result() -> None:
    service = Service("nan")

    @service.tool
    def ratio() -> float:
        return float("nan")

    h = EngineHarness([service])
    assert h.ok(h.call_tool("ratio"))["isError"] is True


# -- tools/call: what a return value becomes ------------------------------------------------------------

PNG_B64 = base64.b64encode(PNG).decode()

RESULT_MAPPING = [
    pytest.param("echo", {"text": "héllo"}, [{"type": "text", "text": "héllo"}], None, id="str-is-text"),
    pytest.param("add", {"a": 1, "b": 2}, [{"type": "text", "text": "3"}], {"result": 3}, id="int-is-wrapped"),
    pytest.param("stats", {"text": "a b c"}, [{"type": "text", "text": '{"words":3,"top":["a"]}'}], {"words": 3, "top": ["a"]}, id="dataclass"),
    pytest.param("mapping", {}, [{"type": "text", "text": '{"k":"v","n":1}'}], {"k": "v", "n": 1}, id="dict"),
    pytest.param("plain_dict", {}, [{"type": "text", "text": '{"k":"v"}'}], {"k": "v"}, id="unannotated-dict"),
    pytest.param("image", {}, [{"type": "image", "data": PNG_B64, "mimeType": "image/png"}], None, id="image"),
    pytest.param("raw_png", {}, [{"type": "image", "data": PNG_B64, "mimeType": "image/png"}], None, id="png-bytes-sniffed"),
    pytest.param("blocks", {}, [{"type": "text", "text": "see"}, {"type": "image", "data": PNG_B64, "mimeType": "image/png"}], None, id="block-list"),
    pytest.param("spelled_out", {}, [{"type": "text", "text": "a"}, {"type": "image", "data": PNG_B64, "mimeType": "image/png"}], {"ok": True}, id="tool-result"),
    pytest.param("nothing", {}, [], None, id="none"),
]


@pytest.mark.parametrize("name, arguments, content, structured", RESULT_MAPPING)
def test_what_a_return_value_becomes(h: EngineHarness, name: str, arguments: dict, content: list, structured: Any) -> None:
    result = h.ok(h.call_tool(name, arguments))
    assert result["content"] == content
    assert result["isError"] is False
    if structured is None:
        assert "structuredContent" not in result
    else:
        assert result["structuredContent"] == structured


def test_non_image_bytes_become_an_embedded_blob(h: EngineHarness) -> None:
    [block] = h.ok(h.call_tool("raw_bytes"))["content"]
    assert block["type"] == "resource"
    assert base64.b64decode(block["resource"]["blob"]) == b"\x00\x01binary"
    assert block["resource"]["mimeType"] == "application/octet-stream"


def test_a_tool_result_can_report_an_error(h: EngineHarness) -> None:
    assert h.ok(h.call_tool("reported_error")) == {"content": [{"type": "text", "text": "nope"}], "isError": True}


def test_a_list_of_text_and_images_becomes_content_blocks() -> None:
    service = Service("mixed")

    @service.tool
    def chart() -> list:
        return ["the chart:", Image(PNG)]

    h = EngineHarness([service])
    result = h.ok(h.call_tool("chart"))
    assert result["isError"] is False
    assert result["content"] == [{"type": "text", "text": "the chart:"}, {"type": "image", "data": PNG_B64, "mimeType": "image/png"}]


@pytest.mark.parametrize("version, structured", [
    ("2024-11-05", False),
    ("2025-03-26", False),
    ("2025-06-18", True),
    ("2025-11-25", True),
])
def test_structured_content_only_for_versions_that_know_it(h: EngineHarness, version: str, structured: bool) -> None:
    h.ok(h.initialize(version))
    result = h.ok(h.call_tool("stats", {"text": "a b"}))
    assert ("structuredContent" in result) is structured
    assert text_of(result) == '{"words":2,"top":["a"]}'  # the text form is always there


def test_structured_content_in_the_modern_era(h: EngineHarness) -> None:
    assert h.ok(h.call_tool("stats", {"text": "a"}, modern=True))["structuredContent"] == {"words": 1, "top": ["a"]}


# -- progress -------------------------------------------------------------------------------------------

def test_progress_is_sent_only_with_a_progress_token_and_only_increasing(h: EngineHarness) -> None:
    outcome = h.request("tools/call", {"name": "steps", "arguments": {"values": [1, 2, 2, 1.5, 3]}, "_meta": {"progressToken": "tok"}})
    h.ok(outcome)
    assert h.exchange.of("notifications/progress") == [
        {"progressToken": "tok", "progress": 1.0, "total": 3, "message": "at 1.0"},
        {"progressToken": "tok", "progress": 2.0, "total": 3, "message": "at 2.0"},
        {"progressToken": "tok", "progress": 3.0, "total": 3, "message": "at 3.0"},
    ]


def test_the_progress_token_keeps_its_json_type(h: EngineHarness) -> None:
    h.ok(h.request("tools/call", {"name": "steps", "arguments": {"values": [1]}, "_meta": {"progressToken": 7}}))
    assert [p["progressToken"] for p in h.exchange.of("notifications/progress")] == [7]


def test_no_progress_without_a_progress_token(h: EngineHarness) -> None:
    h.ok(h.call_tool("steps", {"values": [1, 2, 3]}))
    assert h.exchange.notifications == []
    h.ok(h.call_tool("steps", {"values": [1, 2, 3]}, modern=True))
    assert h.exchange.notifications == []


def test_progress_in_the_modern_era_uses_the_envelope_token(h: EngineHarness) -> None:
    h.ok(h.call_tool("steps", {"values": [1, 2]}, modern=True, progress_token="p-1"))
    assert [p["progress"] for p in h.exchange.of("notifications/progress")] == [1, 2]
    assert {p["progressToken"] for p in h.exchange.of("notifications/progress")} == {"p-1"}


# -- logging --------------------------------------------------------------------------------------------

ALL_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def logged_levels(h: EngineHarness) -> list[str]:
    return [params["level"] for params in h.exchange.of("notifications/message")]


def test_handshake_logs_every_level_before_any_set_level(h: EngineHarness) -> None:
    h.ok(h.initialize())
    h.ok(h.call_tool("chatty"))
    assert logged_levels(h) == ALL_LEVELS
    assert h.exchange.of("notifications/message")[0] == {"level": "debug", "data": "debug message", "logger": "chatty"}


@pytest.mark.parametrize("level", ALL_LEVELS)
def test_handshake_set_level_filters_what_a_tool_logs(h: EngineHarness, level: str) -> None:
    h.ok(h.initialize())
    assert h.ok(h.request("logging/setLevel", {"level": level})) == {}
    h.ok(h.call_tool("chatty"))
    assert logged_levels(h) == ALL_LEVELS[ALL_LEVELS.index(level):]


def test_set_level_can_be_changed_again(h: EngineHarness) -> None:
    h.ok(h.request("logging/setLevel", {"level": "emergency"}))
    h.ok(h.request("logging/setLevel", {"level": "debug"}))
    h.ok(h.call_tool("chatty"))
    assert logged_levels(h) == ALL_LEVELS


@pytest.mark.parametrize("level", ["verbose", "INFO", 3, None])
def test_set_level_with_an_unknown_level_is_invalid_params(h: EngineHarness, level: Any) -> None:
    h.fails(h.request("logging/setLevel", {"level": level}), ErrorCode.INVALID_PARAMS)


@pytest.mark.parametrize("level", [["info"], {"level": "info"}])
def test_set_level_with_an_unhashable_level_is_invalid_params(h: EngineHarness, level: Any) -> None:
    h.fails(h.request("logging/setLevel", {"level": level}), ErrorCode.INVALID_PARAMS)


def test_modern_requests_get_no_log_messages_without_a_log_level(h: EngineHarness) -> None:
    h.ok(h.call_tool("chatty", modern=True))
    assert h.exchange.of("notifications/message") == []


@pytest.mark.parametrize("level", ["debug", "warning", "emergency"])
def test_modern_requests_get_log_messages_at_or_above_the_envelope_level(h: EngineHarness, level: str) -> None:
    h.ok(h.call_tool("chatty", modern=True, log_level=level))
    assert logged_levels(h) == ALL_LEVELS[ALL_LEVELS.index(level):]


def test_the_envelope_log_level_is_per_request(h: EngineHarness) -> None:
    h.ok(h.call_tool("chatty", modern=True, log_level="error"))
    h.ok(h.call_tool("chatty", modern=True))
    assert h.exchange.of("notifications/message") == []


# -- what the function's context sees ----------------------------------------------------------------------

@pytest.mark.parametrize("request_id", [7, "7", 0, "", 2**64])
def test_the_context_request_id_keeps_its_json_type(h: EngineHarness, request_id: Any) -> None:
    seen = h.ok(h.call_tool("whoami", id=request_id))["structuredContent"]
    assert seen["request_id"] == request_id
    assert seen["id_type"] == type(request_id).__name__


def test_the_context_in_the_handshake_era(h: EngineHarness) -> None:
    h.ok(h.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {"roots": {}}, "clientInfo": {"name": "c", "version": "1"}}))
    seen = h.ok(h.call_tool("whoami"))["structuredContent"]
    assert seen["era"] == Era.HANDSHAKE.value
    assert seen["protocol_version"] == "2025-06-18"
    assert seen["client_info"] == {"name": "c", "version": "1"}
    assert seen["client_capabilities"] == {"roots": {}}
    assert seen["cancelled"] is False


def test_the_context_in_the_modern_era_comes_from_the_envelope(h: EngineHarness) -> None:
    seen = h.ok(h.call_tool("whoami", modern=True, capabilities={"elicitation": {}}, client_info={"name": "m", "version": "2"}))["structuredContent"]
    assert seen["era"] == Era.MODERN.value
    assert seen["protocol_version"] == MODERN
    assert seen["client_info"] == {"name": "m", "version": "2"}
    assert seen["client_capabilities"] == {"elicitation": {}}


def test_the_context_sees_the_exchange_cancellation(h: EngineHarness) -> None:
    exchange = FakeExchange()
    exchange.cancel_event.set()
    assert h.ok(h.call_tool("whoami", exchange=exchange))["structuredContent"]["cancelled"] is True


# -- pagination ------------------------------------------------------------------------------------------

def paged_service(count: int = 5) -> Service:
    service = Service("paged")
    for index in range(count):
        service.add_tool(Tool(lambda: "x", name=f"tool{index}"))
        service.add_prompt(Prompt(lambda: "p", name=f"prompt{index}"))
        service.resource(f"mem://r{index}")(lambda: "r")
        service.resource(f"mem://t{index}/{{x}}")(lambda x: x)
    return service


LISTS = [
    ("tools/list", "tools", "name", [f"tool{i}" for i in range(5)]),
    ("prompts/list", "prompts", "name", [f"prompt{i}" for i in range(5)]),
    ("resources/list", "resources", "uri", [f"mem://r{i}" for i in range(5)]),
    ("resources/templates/list", "resourceTemplates", "uriTemplate", [f"mem://t{i}/{{x}}" for i in range(5)]),
]


@pytest.mark.parametrize("modern", [False, True])
@pytest.mark.parametrize("method, key, field, expected", LISTS)
def test_lists_paginate_with_an_opaque_cursor(modern: bool, method: str, key: str, field: str, expected: list[str]) -> None:
    h = EngineHarness([paged_service()], page_size=2)
    pages = []
    params: dict[str, Any] = {}
    while True:
        result = h.ok(h.modern(method, params) if modern else h.request(method, params))
        pages.append([entry[field] for entry in result[key]])
        if "nextCursor" not in result:
            break
        assert isinstance(result["nextCursor"], str)
        params = {"cursor": result["nextCursor"]}
    assert pages == [expected[0:2], expected[2:4], expected[4:5]]


def test_a_list_that_fits_one_page_has_no_next_cursor() -> None:
    h = EngineHarness([paged_service(2)], page_size=2)
    assert "nextCursor" not in h.ok(h.request("tools/list"))
    assert "nextCursor" not in h.ok(h.request("tools/list", {"cursor": None}))


def test_an_empty_catalog_lists_nothing() -> None:
    h = EngineHarness([])
    assert h.ok(h.request("tools/list")) == {"tools": []}
    assert h.ok(h.request("prompts/list")) == {"prompts": []}
    assert h.ok(h.request("resources/list")) == {"resources": []}
    assert h.ok(h.request("resources/templates/list")) == {"resourceTemplates": []}


def test_a_cursor_can_be_used_again() -> None:
    h = EngineHarness([paged_service()], page_size=2)
    cursor = h.ok(h.request("tools/list"))["nextCursor"]
    first = h.ok(h.request("tools/list", {"cursor": cursor}))
    again = h.ok(h.request("tools/list", {"cursor": cursor}))
    assert first == again


def _cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


@pytest.mark.parametrize("method", ["tools/list", "prompts/list", "resources/list", "resources/templates/list"])
@pytest.mark.parametrize("cursor", [
    pytest.param("not a cursor!", id="garbage"),
    pytest.param("", id="empty"),
    pytest.param(5, id="number"),
    pytest.param(["c"], id="array"),
    pytest.param("é", id="non-ascii"),
    pytest.param(_cursor("other:2"), id="someone-elses"),
    pytest.param(_cursor("mcpsync:-2"), id="negative"),
    pytest.param(_cursor("mcpsync:two"), id="not-a-number"),
    pytest.param(_cursor("mcpsync:100"), id="past-the-end"),
    pytest.param(_cursor("mcpsync:6"), id="one-past-the-end"),
])
def test_an_invalid_cursor_is_invalid_params(method: str, cursor: Any) -> None:
    h = EngineHarness([paged_service()], page_size=2)
    h.fails(h.request(method, {"cursor": cursor}), ErrorCode.INVALID_PARAMS)


def test_a_cursor_with_thousands_of_digits_is_invalid_params() -> None:
    h = EngineHarness([paged_service()], page_size=2)
    h.fails(h.request("tools/list", {"cursor": _cursor("mcpsync:" + "9" * 5000)}), ErrorCode.INVALID_PARAMS)


# -- prompts ------------------------------------------------------------------------------------------------

def test_prompts_list_describes_arguments(h: EngineHarness) -> None:
    prompts = {prompt["name"]: prompt for prompt in h.ok(h.request("prompts/list"))["prompts"]}
    assert prompts["review"]["description"] == "Review some code."
    assert prompts["review"]["arguments"] == [{"name": "code", "required": True}, {"name": "language", "required": False}]
    assert "arguments" not in prompts["broken"]


def test_a_prompt_is_rendered(h: EngineHarness) -> None:
    result = h.ok(h.request("prompts/get", {"name": "review", "arguments": {"code": "x = 1", "language": "go"}}))
    assert result == {
        "description": "Review some code.",
        "messages": [{"role": "user", "content": {"type": "text", "text": "Review this go: x = 1"}}],
    }


def test_optional_prompt_arguments_take_their_defaults(h: EngineHarness) -> None:
    result = h.ok(h.request("prompts/get", {"name": "review", "arguments": {"code": "x"}}))
    assert result["messages"][0]["content"]["text"] == "Review this python: x"


def test_prompt_arguments_are_converted_to_their_declared_types(h: EngineHarness) -> None:
    result = h.ok(h.request("prompts/get", {"name": "repeat", "arguments": {"word": "hi", "times": "3", "loud": "true"}}))
    assert result["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "HI HI HI"}},
        {"role": "assistant", "content": {"type": "text", "text": "ok"}},
    ]


@pytest.mark.parametrize("arguments, words", [
    ({}, ["code", "Missing"]),
    ({"language": "go"}, ["code"]),
    ({"code": "x", "colour": "red"}, ["colour"]),
    ({"code": 5}, ["code", "string"]),
    ({"code": None}, ["code"]),
    ({"code": ["x"]}, ["code"]),
])
def test_bad_prompt_arguments_are_invalid_params(h: EngineHarness, arguments: dict, words: list[str]) -> None:
    error = h.fails(h.request("prompts/get", {"name": "review", "arguments": arguments}), ErrorCode.INVALID_PARAMS)
    for word in words:
        assert word in error.message


@pytest.mark.parametrize("arguments", [{"word": "a", "times": "three"}, {"word": "a", "times": "1.5"}, {"word": "a", "loud": "maybe"}])
def test_a_prompt_argument_that_does_not_convert_is_invalid_params(h: EngineHarness, arguments: dict) -> None:
    h.fails(h.request("prompts/get", {"name": "repeat", "arguments": arguments}), ErrorCode.INVALID_PARAMS)


@pytest.mark.parametrize("params", [{"name": "nope"}, {"name": 5}, {}, {"name": "review", "arguments": "code=x"}])
def test_unknown_prompt_or_malformed_params_are_invalid_params(h: EngineHarness, params: dict) -> None:
    h.fails(h.request("prompts/get", params), ErrorCode.INVALID_PARAMS)


def test_a_prompt_that_raises_is_an_internal_error(h: EngineHarness) -> None:
    error = h.fails(h.request("prompts/get", {"name": "broken"}), ErrorCode.INTERNAL_ERROR)
    assert "prompt failed" not in error.message  # no exception text leaks to the client


# -- resources ---------------------------------------------------------------------------------------------

def test_resources_list_and_templates_list(h: EngineHarness) -> None:
    resources = {r["uri"]: r for r in h.ok(h.request("resources/list"))["resources"]}
    assert resources["mem://readme"] == {"uri": "mem://readme", "name": "readme", "description": "The readme", "mimeType": "text/markdown"}
    assert "mem://users/{user}/posts/{post}" not in resources
    templates = {t["uriTemplate"]: t for t in h.ok(h.request("resources/templates/list"))["resourceTemplates"]}
    assert templates["mem://users/{user}/posts/{post}"] == {"uriTemplate": "mem://users/{user}/posts/{post}", "name": "post", "mimeType": "text/plain"}


@pytest.mark.parametrize("uri, contents", [
    ("mem://readme", [{"uri": "mem://readme", "mimeType": "text/markdown", "text": "# Hello"}]),
    ("mem://blob", [{"uri": "mem://blob", "mimeType": "application/octet-stream", "blob": base64.b64encode(b"\x00\xffdata").decode()}]),
    ("mem://config", [{"uri": "mem://config", "mimeType": "application/json", "text": '{"debug":true}'}]),
    ("mem://users/ada/posts/42", [{"uri": "mem://users/ada/posts/42", "mimeType": "text/plain", "text": "ada:42"}]),
    ("file:///etc/hosts", [{"uri": "file:///etc/hosts", "text": "file etc/hosts"}]),
])
@pytest.mark.parametrize("modern", [False, True])
def test_reading_resources(h: EngineHarness, uri: str, contents: list, modern: bool) -> None:
    result = h.ok(h.modern("resources/read", {"uri": uri}) if modern else h.request("resources/read", {"uri": uri}))
    assert result["contents"] == contents


@pytest.mark.parametrize("uri", ["mem://users/ada/posts", "mem://users/ada/posts/42/extra", "mem://users//posts/1", "mem://other", "file://etc"])
def test_a_uri_no_template_matches_is_not_found(h: EngineHarness, uri: str) -> None:
    error = h.fails(h.request("resources/read", {"uri": uri}), ErrorCode.RESOURCE_NOT_FOUND)
    assert error.data == {"uri": uri}


@pytest.mark.parametrize("params", [{}, {"uri": 5}, {"uri": None}, {"uri": ["mem://readme"]}])
def test_resources_read_without_a_string_uri_is_invalid_params(h: EngineHarness, params: dict) -> None:
    h.fails(h.request("resources/read", params), ErrorCode.INVALID_PARAMS)


def test_a_resource_that_raises_is_an_internal_error_naming_the_uri(h: EngineHarness) -> None:
    error = h.fails(h.request("resources/read", {"uri": "mem://failing"}), ErrorCode.INTERNAL_ERROR)
    assert error.data == {"uri": "mem://failing"}
    assert "disk gone" not in error.message


def test_a_resource_may_answer_with_its_own_protocol_error(h: EngineHarness) -> None:
    assert h.fails(h.request("resources/read", {"uri": "mem://forbidden"}), ErrorCode.INVALID_PARAMS).message == "not for you"


# -- completion ---------------------------------------------------------------------------------------------

def complete(h: EngineHarness, ref: dict, name: str, value: Any = "", **extra: Any) -> Any:
    return h.request("completion/complete", {"ref": ref, "argument": {"name": name, "value": value}, **extra})


PROMPT_REF = {"type": "ref/prompt", "name": "review"}
TEMPLATE_REF = {"type": "ref/resource", "uri": "mem://users/{user}/posts/{post}"}


@pytest.mark.parametrize("value, values", [
    ("", LANGUAGES),
    ("j", ["java", "javascript"]),
    ("java", ["java", "javascript"]),
    ("py", ["python"]),
    ("x", []),
    ("Py", []),
])
def test_prompt_argument_completion_filters_by_prefix(h: EngineHarness, value: str, values: list[str]) -> None:
    result = h.ok(complete(h, PROMPT_REF, "language", value))
    assert result == {"completion": {"values": values, "total": len(values), "hasMore": False}}


def test_template_variable_completion(h: EngineHarness) -> None:
    assert h.ok(complete(h, TEMPLATE_REF, "user", "a"))["completion"]["values"] == ["ada", "alan"]


def test_an_argument_without_a_completer_completes_to_nothing(h: EngineHarness) -> None:
    assert h.ok(complete(h, PROMPT_REF, "code", "x"))["completion"]["values"] == []
    assert h.ok(complete(h, TEMPLATE_REF, "post", "1"))["completion"]["values"] == []


def test_a_static_resource_completes_to_nothing(h: EngineHarness) -> None:
    assert h.ok(complete(h, {"type": "ref/resource", "uri": "mem://readme"}, "x"))["completion"]["values"] == []


def test_a_completion_function_sees_the_value_and_the_other_arguments(h: EngineHarness) -> None:
    result = h.ok(complete(h, {"type": "ref/prompt", "name": "library"}, "book", "b", context={"arguments": {"shelf": "s1"}}))
    assert result["completion"]["values"] == ["s1-b0", "s1-b1", "s1-b2"]
    result = h.ok(complete(h, {"type": "ref/prompt", "name": "library"}, "book", "b"))
    assert result["completion"]["values"] == ["?-b0", "?-b1", "?-b2"]


def test_completion_is_capped_at_100_values_with_has_more(h: EngineHarness) -> None:
    completion = h.ok(complete(h, {"type": "ref/prompt", "name": "many"}, "n", ""))["completion"]
    assert completion["values"] == [str(i) for i in range(100)]
    assert completion["total"] == 250
    assert completion["hasMore"] is True


def test_completion_of_exactly_100_values_has_no_more(h: EngineHarness) -> None:
    # "1".."199" minus the ones not starting with 1: "1", "10".."19", "100".."199" = 1 + 10 + 100 = 111
    completion = h.ok(complete(h, {"type": "ref/prompt", "name": "many"}, "n", "1"))["completion"]
    assert len(completion["values"]) == 100 and completion["total"] == 111 and completion["hasMore"] is True
    completion = h.ok(complete(h, {"type": "ref/prompt", "name": "many"}, "n", "2"))["completion"]
    assert completion["values"] == ["2"] + [str(i) for i in range(20, 30)] + [str(i) for i in range(200, 250)]
    assert completion["hasMore"] is False


@pytest.mark.parametrize("ref, name, value", [
    pytest.param({"type": "ref/prompt", "name": "nope"}, "x", "", id="unknown-prompt"),
    pytest.param(PROMPT_REF, "nope", "", id="unknown-prompt-argument"),
    pytest.param({"type": "ref/resource", "uri": "mem://nope/{x}"}, "x", "", id="unknown-template"),
    pytest.param(TEMPLATE_REF, "nope", "", id="unknown-template-variable"),
    pytest.param({"type": "ref/tool", "name": "add"}, "a", "", id="unknown-ref-type"),
    pytest.param({"name": "review"}, "language", "", id="no-ref-type"),
    pytest.param({"type": "ref/resource", "uri": 5}, "x", "", id="uri-not-string"),
    pytest.param(PROMPT_REF, "language", 5, id="value-not-string"),
    pytest.param(PROMPT_REF, 5, "", id="name-not-string"),
])
def test_bad_completion_requests_are_invalid_params(h: EngineHarness, ref: dict, name: Any, value: Any) -> None:
    h.fails(complete(h, ref, name, value), ErrorCode.INVALID_PARAMS)


@pytest.mark.parametrize("params", [{}, {"ref": "review", "argument": {"name": "x"}}, {"ref": PROMPT_REF, "argument": ["x"]}])
def test_malformed_completion_params_are_invalid_params(h: EngineHarness, params: dict) -> None:
    h.fails(h.request("completion/complete", params), ErrorCode.INVALID_PARAMS)


@pytest.mark.parametrize("name", [["review"], {"n": 1}])
def test_a_non_string_prompt_name_in_a_completion_ref_is_invalid_params(h: EngineHarness, name: Any) -> None:
    h.fails(complete(h, {"type": "ref/prompt", "name": name}, "language"), ErrorCode.INVALID_PARAMS)


# -- subscriptions/listen (the engine's part: the filter) ------------------------------------------------------

def listen(h: EngineHarness, notifications: Any, **options: Any) -> Any:
    return h.modern("subscriptions/listen", {"notifications": notifications}, **options)


@pytest.mark.parametrize("requested, accepted", [
    ({"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True},
     {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True}),
    ({"toolsListChanged": True, "promptsListChanged": False}, {"toolsListChanged": True}),
    ({"toolsListChanged": False}, {}),
    ({}, {}),
    ({"toolsListChanged": True, "somethingNew": True, "x": [1]}, {"toolsListChanged": True}),
    ({"resourceSubscriptions": ["mem://a", "mem://b", "mem://a"]}, {"resourceSubscriptions": ["mem://a", "mem://b"]}),
    ({"resourceSubscriptions": []}, {}),
])
def test_listen_accepts_the_deliverable_subset_of_the_filter(h: EngineHarness, requested: dict, accepted: dict) -> None:
    outcome = listen(h, requested, id="L1", commit=False)
    assert outcome == Subscribed("L1", accepted)
    assert h.session.era is None  # the transport locks the era once it has written the acknowledgement


@pytest.mark.parametrize("notifications", [
    pytest.param(None, id="missing"),
    pytest.param([], id="array"),
    pytest.param("all", id="string"),
    pytest.param({"toolsListChanged": "yes"}, id="flag-string"),
    pytest.param({"promptsListChanged": 1}, id="flag-number"),
    pytest.param({"resourcesListChanged": None}, id="flag-null"),
    pytest.param({"resourceSubscriptions": "mem://a"}, id="uris-string"),
    pytest.param({"resourceSubscriptions": ["mem://a", 5]}, id="uris-mixed"),
])
def test_an_invalid_listen_filter_is_invalid_params(h: EngineHarness, notifications: Any) -> None:
    params = {} if notifications is None else {"notifications": notifications}
    h.fails(h.modern("subscriptions/listen", params), ErrorCode.INVALID_PARAMS)
    assert h.session.era is None


def test_listen_on_a_transport_that_cannot_host_it_is_method_not_found() -> None:
    h = EngineHarness([make_service()], transport=NO_PUSH)
    h.fails(listen(h, {"toolsListChanged": True}), ErrorCode.METHOD_NOT_FOUND)


def test_listen_accepts_nothing_a_transport_cannot_deliver() -> None:
    h = EngineHarness([make_service()], transport=NO_PUSH)
    discover = h.ok(h.modern("server/discover"))
    assert discover["capabilities"]["tools"].get("listChanged") is not True


def test_listen_keeps_the_id_json_type(h: EngineHarness) -> None:
    assert listen(h, {}, id=7).request_id == 7
    assert listen(h, {}, id="7").request_id == "7"


# -- resources/subscribe (handshake era) ------------------------------------------------------------------------

def test_resources_subscribe_and_unsubscribe_in_the_handshake_era(h: EngineHarness) -> None:
    h.ok(h.initialize())
    assert h.ok(h.request("resources/subscribe", {"uri": "mem://readme"})) == {}
    assert h.session.resource_subscriptions() == {"mem://readme"}
    assert h.ok(h.request("resources/unsubscribe", {"uri": "mem://readme"})) == {}
    assert h.session.resource_subscriptions() == frozenset()
    assert h.ok(h.request("resources/unsubscribe", {"uri": "mem://never"})) == {}


@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
def test_resources_subscribe_needs_a_string_uri(h: EngineHarness, method: str) -> None:
    h.fails(h.request(method, {"uri": 5}), ErrorCode.INVALID_PARAMS)
    h.fails(h.request(method, {}), ErrorCode.INVALID_PARAMS)


def test_resources_subscribe_on_a_transport_without_push_is_method_not_found() -> None:
    h = EngineHarness([make_service()], transport=NO_PUSH)
    h.fails(h.request("resources/subscribe", {"uri": "mem://readme"}), ErrorCode.METHOD_NOT_FOUND)
