"""Tests for mcpsync.catalog.service: tools, prompts and resources built from plain functions.

Entry classes can be built directly; the `Service` decorators only build and register them and
return the function unchanged. Schemas come from catalog.schema (tested in test_schema.py); here
we pin what the entries do with them: definitions, validation, invocation and result mapping.
"""

from __future__ import annotations

import base64
import threading
from dataclasses import dataclass
from datetime import date
from typing import Any, Mapping

import jsonschema
import pytest

from mcpsync.catalog.content import Audio, Image, ToolError, ToolResult
from mcpsync.catalog.context import Context
from mcpsync.catalog.service import (
    Prompt,
    Resource,
    ResourceTemplate,
    Service,
    Tool,
    completion_result,
    error_result,
    resource_not_found,
)
from mcpsync.catalog.validation import InvalidArguments
from mcpsync.protocol.jsonrpc import ErrorCode, McpError
from mcpsync.protocol.versions import Era

pytestmark = pytest.mark.timeout(30)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x01" * 8
PNG_B64 = base64.b64encode(PNG).decode()


def make_context(**overrides: Any) -> Context:
    options: dict[str, Any] = dict(
        request_id=1,
        era=Era.HANDSHAKE,
        protocol_version=None,
        client_info=None,
        client_capabilities={},
        progress_token=None,
        notify=lambda method, params: None,
        cancel_event=threading.Event(),
        wants_log=lambda level: True,
    )
    options.update(overrides)
    return Context(**options)


@dataclass
class Point:
    x: int
    y: int = 0


# -- Tool: definition ----------------------------------------------------------------------------------

def test_a_tool_from_a_function() -> None:
    def scale(factor: float, point: Point, ctx: Context) -> Point:
        """Scale a point.

        Args:
            factor: how much to scale by.
        """
        return Point(int(point.x * factor), int(point.y * factor))

    tool = Tool(scale)
    wire = tool.definition()
    assert wire["name"] == "scale"
    assert wire["description"] == "Scale a point."
    assert set(wire["inputSchema"]["properties"]) == {"factor", "point"}
    assert wire["inputSchema"]["properties"]["factor"]["description"] == "how much to scale by."
    assert wire["inputSchema"]["required"] == ["factor", "point"]
    assert wire["outputSchema"]["type"] == "object"
    assert set(wire["outputSchema"]["properties"]) == {"x", "y"}
    assert "title" not in wire and "annotations" not in wire and "_meta" not in wire


def test_tool_options_override_what_the_function_says() -> None:
    def f(a: int) -> int:
        """Docstring."""
        return a

    tool = Tool(f, name="renamed", title="Nice title", description="Explicit.", annotations={"readOnlyHint": True}, meta={"x/y": 1})
    assert tool.definition() == {
        "name": "renamed",
        "title": "Nice title",
        "description": "Explicit.",
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": {"readOnlyHint": True},
        "_meta": {"x/y": 1},
    }


def test_an_explicit_input_schema_is_used_as_given_and_checked() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "minLength": 2}}, "required": ["q"]}
    tool = Tool(lambda q: q.upper(), name="search", input_schema=schema)
    assert tool.definition()["inputSchema"] is schema
    assert tool.invoke({"q": "ab"}, make_context()) == "AB"
    with pytest.raises(InvalidArguments, match="'q': 'a' is too short"):
        tool.validate({"q": "a"})
    with pytest.raises(jsonschema.SchemaError):
        Tool(lambda: None, name="bad", input_schema={"type": 5})


def test_a_tool_with_an_explicit_schema_still_gets_its_context() -> None:
    def raw(ctx: Context, **arguments: Any) -> dict:
        return {"id": ctx.request_id, **arguments}

    tool = Tool(raw, input_schema={"type": "object"})
    assert tool.invoke({"z": 1}, make_context(request_id="r")) == {"id": "r", "z": 1}


# -- Tool: validation and invocation ----------------------------------------------------------------------

def flat(a: int, b: str, c: float = 1.0, d: bool = False) -> str:
    return "ok"


VALIDATION_CASES = [
    {"a": 1, "b": "x"},
    {"a": 1, "b": "x", "c": 2, "d": True},
    {"a": 1, "b": "x", "c": 2.5},
    {"a": 1.0, "b": "x"},
    {"a": True, "b": "x"},
    {"a": "1", "b": "x"},
    {"a": 1},
    {"b": "x"},
    {"a": 1, "b": "x", "e": 0},
    {"a": 1, "b": None},
    {"a": 1, "b": "x", "d": 0},
    {"a": 2**70, "b": "x"},
    {},
]


@pytest.mark.parametrize("arguments", VALIDATION_CASES)
def test_validation_agrees_with_jsonschema(arguments: dict) -> None:
    tool = Tool(flat)
    expected_valid = jsonschema.Draft202012Validator(tool.input_schema).is_valid(arguments)
    try:
        tool.validate(arguments)
        valid = True
    except InvalidArguments:
        valid = False
    assert valid is expected_valid


@pytest.mark.parametrize("arguments", ["text", [1], None, 5])
def test_arguments_that_are_not_an_object_are_invalid(arguments: Any) -> None:
    with pytest.raises(InvalidArguments, match="is not of type 'object'"):
        Tool(flat).validate(arguments)


def test_a_validation_error_is_a_tool_error_naming_the_tool_the_field_and_the_rule() -> None:
    with pytest.raises(ToolError) as caught:  # a ToolError: the call's result is isError, not -32602
        Tool(flat).validate({"a": "one", "b": "x"})
    assert str(caught.value) == "Invalid arguments for tool 'flat' at 'a': 'one' is not of type 'integer'"
    assert isinstance(caught.value, InvalidArguments) and caught.value.field == "a"


def test_a_value_its_type_refuses_is_invalid_arguments_naming_the_parameter() -> None:
    def on(day: date) -> str:
        return day.isoformat()

    with pytest.raises(InvalidArguments, match="tool 'on': parameter 'day': .*'not a date'"):
        Tool(on).invoke({"day": "not a date"}, make_context())


def test_a_prompt_argument_its_type_refuses_stays_invalid_params() -> None:
    def agenda(day: date) -> str:
        return day.isoformat()

    with pytest.raises(McpError) as caught:
        Prompt(agenda).get({"day": "not a date"}, make_context())
    assert caught.value.code == ErrorCode.INVALID_PARAMS and "parameter 'day'" in caught.value.message


def test_invoke_converts_json_to_the_annotated_types_and_passes_the_context() -> None:
    received: list[Any] = []

    def f(point: Point, ctx: Context, scale: float = 1.0) -> None:
        received.extend([point, ctx.request_id, scale])

    Tool(f).invoke({"point": {"x": 1, "y": 2}, "scale": 3}, make_context(request_id=9))
    assert received == [Point(1, 2), 9, 3.0]
    assert type(received[2]) is float


def test_invoke_leaves_out_arguments_the_client_did_not_send() -> None:
    def f(a: int, b: int = 10) -> int:
        return a + b

    assert Tool(f).invoke({"a": 1}, make_context()) == 11


def test_an_integral_float_reaches_an_int_parameter_as_an_int() -> None:
    def f(a: int) -> str:
        return type(a).__name__

    tool = Tool(f)
    tool.validate({"a": 1.0})
    assert tool.invoke({"a": 1.0}, make_context()) == "int"


def test_the_decorated_function_is_returned_unchanged_and_stays_callable() -> None:
    service = Service("s")

    def original(a: int) -> int:
        return a * 2

    assert service.tool(original) is original
    assert service.tool(name="other")(original) is original
    assert original(4) == 8
    assert [t.name for t in service.tools] == ["original", "other"]


@pytest.mark.parametrize("decorator", ["tool", "prompt"])
def test_a_decorator_rejects_an_unknown_keyword_naming_it(decorator: str) -> None:
    with pytest.raises(TypeError, match="nonsense_option"):
        getattr(Service("s"), decorator)(nonsense_option=1)
    with pytest.raises(TypeError, match="nonsense_option"):
        Service("s").resource("mem://x", nonsense_option=1)  # type: ignore[call-arg]


# -- Tool: what a return value becomes ----------------------------------------------------------------------

def returns(annotation: Any) -> Tool:
    def fn() -> None:
        return None

    fn.__annotations__ = {"return": annotation}
    return Tool(fn, name="fn")


TO_RESULT = [
    pytest.param(str, "hi", [{"type": "text", "text": "hi"}], None, id="str"),
    pytest.param(str, "", [{"type": "text", "text": ""}], None, id="empty-str"),
    pytest.param(int, 7, [{"type": "text", "text": "7"}], {"result": 7}, id="int-wrapped"),
    pytest.param(float, 0.5, [{"type": "text", "text": "0.5"}], {"result": 0.5}, id="float-wrapped"),
    pytest.param(bool, False, [{"type": "text", "text": "false"}], {"result": False}, id="bool-wrapped"),
    pytest.param(list[int], [1, 2], [{"type": "text", "text": "[1,2]"}], {"result": [1, 2]}, id="list-wrapped"),
    pytest.param(Point, Point(1, 2), [{"type": "text", "text": '{"x":1,"y":2}'}], {"x": 1, "y": 2}, id="dataclass"),
    pytest.param(dict, {"a": [1, "é"]}, [{"type": "text", "text": '{"a":[1,"é"]}'}], {"a": [1, "é"]}, id="dict"),
    pytest.param(dict[str, int], {}, [{"type": "text", "text": "{}"}], {}, id="empty-dict"),
    pytest.param(None, None, [], None, id="none"),
    pytest.param(Image, Image(PNG), [{"type": "image", "data": PNG_B64, "mimeType": "image/png"}], None, id="image"),
    pytest.param(Audio, Audio(b"RIFF", "audio/wav"), [{"type": "audio", "data": base64.b64encode(b"RIFF").decode(), "mimeType": "audio/wav"}], None, id="audio"),
    pytest.param(bytes, PNG, [{"type": "image", "data": PNG_B64, "mimeType": "image/png"}], None, id="png-bytes"),
    pytest.param(list[Image], [Image(PNG), Image(PNG, "image/gif")],
                 [{"type": "image", "data": PNG_B64, "mimeType": "image/png"}, {"type": "image", "data": PNG_B64, "mimeType": "image/gif"}], None, id="image-list"),
    pytest.param(dict, {"type": "text", "text": "a block"}, [{"type": "text", "text": "a block"}], None, id="block-dict"),
    pytest.param(list, [{"type": "text", "text": "a"}, {"type": "resource_link", "uri": "mem://x", "name": "x"}],
                 [{"type": "text", "text": "a"}, {"type": "resource_link", "uri": "mem://x", "name": "x"}], None, id="block-list"),
    pytest.param(ToolResult, ToolResult(["a", PNG], structured=Point(3)),
                 [{"type": "text", "text": "a"}, {"type": "image", "data": PNG_B64, "mimeType": "image/png"}], {"x": 3, "y": 0}, id="tool-result"),
]


@pytest.mark.parametrize("annotation, value, content, structured", TO_RESULT)
def test_to_result(annotation: Any, value: Any, content: list, structured: Any) -> None:
    result = returns(annotation).to_result(value)
    assert result["content"] == content
    assert result["isError"] is False
    if structured is None:
        assert "structuredContent" not in result
    else:
        assert result["structuredContent"] == structured


def test_an_unannotated_tool_returning_a_dict_gets_structured_content_but_no_schema() -> None:
    tool = Tool(lambda: {"k": 1}, name="loose")
    assert "outputSchema" not in tool.definition()
    assert tool.to_result({"k": 1})["structuredContent"] == {"k": 1}
    assert "structuredContent" not in tool.to_result([1, 2])


def test_a_tool_result_can_be_an_error() -> None:
    assert returns(ToolResult).to_result(ToolResult(["bad"], is_error=True)) == {"content": [{"type": "text", "text": "bad"}], "isError": True}


def test_output_that_breaks_the_output_schema_is_an_error_result() -> None:
    result = returns(Point).to_result({"x": "not an int"})
    assert result["isError"] is True
    assert "outputSchema" in result["content"][0]["text"]
    assert "structuredContent" not in result


def test_an_explicit_output_schema_is_enforced() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    tool = Tool(lambda: None, name="t", input_schema={"type": "object"}, output_schema=schema)
    assert tool.definition()["outputSchema"] == schema
    assert tool.to_result({"n": 1})["structuredContent"] == {"n": 1}
    assert tool.to_result({"n": "x"})["isError"] is True


def test_error_result() -> None:
    assert error_result("went wrong") == {"content": [{"type": "text", "text": "went wrong"}], "isError": True}


# -- Prompt -------------------------------------------------------------------------------------------------

def test_a_prompt_from_a_function() -> None:
    def summarize(text: str, words: int = 50, ctx: Context | None = None) -> str:
        """Summarize a text.

        Args:
            text: what to summarize.
        """
        return f"Summarize in {words} words: {text}"

    prompt = Prompt(summarize, title="Summary")
    assert prompt.definition() == {
        "name": "summarize",
        "title": "Summary",
        "description": "Summarize a text.",
        "arguments": [{"name": "text", "required": True, "description": "what to summarize."}, {"name": "words", "required": False}],
    }
    result = prompt.get({"text": "abc", "words": "10"}, make_context())
    assert result == {"description": "Summarize a text.", "messages": [{"role": "user", "content": {"type": "text", "text": "Summarize in 10 words: abc"}}]}


@pytest.mark.parametrize("annotation, raw, value", [
    (int, "42", 42),
    (int, "-3", -3),
    (float, "2.5", 2.5),
    (bool, "true", True),
    (bool, "No", False),
    (bool, "1", True),
    (str, "  spaced  ", "  spaced  "),
])
def test_prompt_arguments_arrive_as_strings_and_are_converted(annotation: type, raw: str, value: Any) -> None:
    seen: list[Any] = []

    def fn(v):  # type: ignore[no-untyped-def]
        seen.append(v)
        return "x"

    fn.__annotations__ = {"v": annotation, "return": str}
    Prompt(fn, name="p").get({"v": raw}, make_context())
    assert seen == [value] and type(seen[0]) is type(value)


@pytest.mark.parametrize("annotation, raw", [(int, "4.5"), (int, "four"), (float, "x"), (bool, "maybe")])
def test_a_prompt_argument_that_does_not_convert_is_invalid_params(annotation: type, raw: str) -> None:
    def fn(v):  # type: ignore[no-untyped-def]
        return "x"

    fn.__annotations__ = {"v": annotation}
    with pytest.raises(McpError) as caught:
        Prompt(fn, name="p").get({"v": raw}, make_context())
    assert caught.value.code == ErrorCode.INVALID_PARAMS
    assert "'v'" in caught.value.message


@pytest.mark.parametrize("arguments, words", [
    ({}, ["Missing", "'a'"]),
    ({"a": "x", "zz": "y"}, ["Unknown", "zz"]),
    ({"a": 1}, ["'a'", "string"]),
])
def test_bad_prompt_arguments(arguments: dict, words: list[str]) -> None:
    def fn(a: str, b: str = "") -> str:
        return a

    with pytest.raises(McpError) as caught:
        Prompt(fn).get(arguments, make_context())
    assert caught.value.code == ErrorCode.INVALID_PARAMS
    for word in words:
        assert word in caught.value.message


@pytest.mark.parametrize("value, messages", [
    ("hi", [{"role": "user", "content": {"type": "text", "text": "hi"}}]),
    ({"role": "assistant", "content": "sure"}, [{"role": "assistant", "content": {"type": "text", "text": "sure"}}]),
    (["a", {"role": "assistant", "content": Image(PNG)}],
     [{"role": "user", "content": {"type": "text", "text": "a"}}, {"role": "assistant", "content": {"type": "image", "data": PNG_B64, "mimeType": "image/png"}}]),
])
def test_what_a_prompt_returns_becomes_messages(value: Any, messages: list) -> None:
    assert Prompt(lambda: value, name="p").get({}, make_context())["messages"] == messages


def test_a_prompt_with_completions_for_an_unknown_argument_is_refused() -> None:
    with pytest.raises(ValueError):
        Prompt(lambda a: a, name="p", complete={"b": ["x"]})


def test_a_prompt_gets_its_context() -> None:
    def fn(ctx: Context) -> str:
        return f"era {ctx.era.value}"

    prompt = Prompt(fn)
    assert prompt.arguments == ()
    assert prompt.get({}, make_context(era=Era.MODERN))["messages"][0]["content"]["text"] == "era modern"


# -- Resource and ResourceTemplate ------------------------------------------------------------------------------

def test_a_resource_definition_and_read() -> None:
    def readme() -> str:
        """The readme."""
        return "# hi"

    resource = Resource(readme, "mem://readme", title="Readme", mime_type="text/markdown")
    assert resource.definition() == {"uri": "mem://readme", "name": "readme", "title": "Readme", "description": "The readme.", "mimeType": "text/markdown"}
    assert resource.read("mem://readme", {}, make_context()) == [{"uri": "mem://readme", "mimeType": "text/markdown", "text": "# hi"}]


def test_a_resource_gets_its_context() -> None:
    def who(ctx: Context) -> str:
        return f"for {ctx.request_id}"

    resource = Resource(who, "mem://ctx")
    assert resource.read("mem://ctx", {}, make_context(request_id="r9"))[0]["text"] == "for r9"


@pytest.mark.parametrize("template, uri, variables", [
    ("mem://items/{id}", "mem://items/42", {"id": "42"}),
    ("mem://items/{id}", "mem://items/4/2", None),
    ("mem://items/{id}", "mem://items/", None),
    ("mem://items/{id}", "mem://items/a?b", None),
    ("mem://{a}/{b}.json", "mem://x/y.json", {"a": "x", "b": "y"}),
    ("mem://{a}/{b}.json", "mem://x/yxjson", None),
    ("file:///{+path}", "file:///a/b/c.txt", {"path": "a/b/c.txt"}),
    ("file:///{+path}", "file:///", None),
    ("a+b://{x}", "a+b://1", {"x": "1"}),
    ("a+b://{x}", "aab://1", None),
])
def test_template_matching(template: str, uri: str, variables: dict | None) -> None:
    assert ResourceTemplate(lambda **kw: "", template).match(uri) == variables


def test_a_template_reads_with_its_variables() -> None:
    def post(user: str, post: str) -> dict:
        return {"user": user, "post": post}

    template = ResourceTemplate(post, "mem://users/{user}/posts/{post}", mime_type="application/json")
    assert template.variables == ("user", "post")
    assert template.definition() == {"uriTemplate": "mem://users/{user}/posts/{post}", "name": "post", "mimeType": "application/json"}
    uri = "mem://users/ada/posts/7"
    assert template.read(uri, template.match(uri), make_context()) == [{"uri": uri, "mimeType": "application/json", "text": '{"user":"ada","post":"7"}'}]


def test_a_template_with_completions_for_an_unknown_variable_is_refused() -> None:
    with pytest.raises(ValueError):
        ResourceTemplate(lambda x: x, "mem://{x}", complete={"y": ["a"]})


def test_service_resource_decorator_picks_resource_or_template() -> None:
    service = Service("s")

    @service.resource("mem://static")
    def static() -> str:
        return "s"

    @service.resource("mem://dyn/{x}", complete={"x": ["a"]})
    def dynamic(x: str) -> str:
        return x

    assert static() == "s" and dynamic("q") == "q"
    assert [r.uri for r in service.resources] == ["mem://static"]
    assert [t.uri_template for t in service.templates] == ["mem://dyn/{x}"]
    with pytest.raises(TypeError):
        service.resource("mem://plain", complete={"x": ["a"]})(lambda: "")


def test_resource_not_found_differs_by_era() -> None:
    handshake = resource_not_found("mem://x", modern=False)
    modern = resource_not_found("mem://x", modern=True)
    assert (handshake.code, handshake.data) == (ErrorCode.RESOURCE_NOT_FOUND, {"uri": "mem://x"})
    assert (modern.code, modern.data) == (ErrorCode.INVALID_PARAMS, {"uri": "mem://x"})


# -- Service: entries and change events ----------------------------------------------------------------------------

def test_service_changes_tell_its_listeners_the_kind() -> None:
    service = Service("s")
    events: list[frozenset[str]] = []
    service.add_listener(events.append)
    service.add_tool(Tool(lambda: "", name="t"))
    service.add_prompt(Prompt(lambda: "", name="p"))
    service.add_resource(Resource(lambda: "", "mem://r"))
    service.add_template(ResourceTemplate(lambda x: x, "mem://t/{x}"))
    service.remove_tool("t")
    service.remove_prompt("p")
    service.remove_resource("mem://r")
    service.remove_resource("mem://t/{x}")
    assert events == [frozenset({kind}) for kind in ("tools", "prompts", "resources", "resources", "tools", "prompts", "resources", "resources")]
    service.remove_listener(events.append)
    service.add_tool(Tool(lambda: "", name="quiet"))
    assert len(events) == 8


@pytest.mark.parametrize("remove", [
    lambda s: s.remove_tool("nope"),
    lambda s: s.remove_prompt("nope"),
    lambda s: s.remove_resource("mem://nope"),
])
def test_removing_a_missing_entry_raises_key_error(remove: Any) -> None:
    service = Service("s")
    events: list = []
    service.add_listener(events.append)
    with pytest.raises(KeyError):
        remove(service)
    assert events == []


def test_adding_a_tool_with_an_existing_name_replaces_it() -> None:
    service = Service("s")
    service.add_tool(Tool(lambda: "old", name="t"))
    service.add_tool(Tool(lambda: "new", name="t"))
    assert [t.fn() for t in service.tools] == ["new"]


def test_service_properties_are_snapshots() -> None:
    service = Service("s")
    service.add_tool(Tool(lambda: "", name="a"))
    tools = service.tools
    service.add_tool(Tool(lambda: "", name="b"))
    assert [t.name for t in tools] == ["a"]


# -- completion_result -------------------------------------------------------------------------------------------

def test_completion_from_a_list_filters_by_prefix() -> None:
    assert completion_result(["alpha", "beta", "alps"], "al", {}) == {"completion": {"values": ["alpha", "alps"], "total": 2, "hasMore": False}}


def test_completion_without_a_source_is_empty() -> None:
    assert completion_result(None, "x", {}) == {"completion": {"values": [], "total": 0, "hasMore": False}}


def test_completion_from_a_function_gets_the_value_and_arguments() -> None:
    def source(value: str, arguments: Mapping[str, str]) -> list[Any]:
        return [f"{arguments['kind']}:{value}", 5]

    assert completion_result(source, "v", {"kind": "k"})["completion"]["values"] == ["k:v", "5"]


@pytest.mark.parametrize("count, shown, has_more", [(99, 99, False), (100, 100, False), (101, 100, True), (1000, 100, True)])
def test_completion_is_capped_at_100(count: int, shown: int, has_more: bool) -> None:
    completion = completion_result([f"v{i}" for i in range(count)], "", {})["completion"]
    assert len(completion["values"]) == shown
    assert completion["total"] == count
    assert completion["hasMore"] is has_more
