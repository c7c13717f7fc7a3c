"""Tests for mcpsync.catalog.models: pydantic types where type hints go, in-process.

The stdio and official-SDK tests (integration/test_pydantic_tools.py, test_sdk_pydantic.py) cover
what a client sees; these cover the shapes and edges one by one: where pydantic is recognised, the
inlining of its `$defs`, the checks it replaces, and the errors it reports.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import date
from collections.abc import Callable
from typing import Annotated, Any, Optional

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic_core import core_schema

from mcpsync import McpError
from mcpsync.catalog.models import PydanticType, _Inliner, is_pydantic, is_pydantic_class
from mcpsync.catalog.schema import describe_function, to_jsonable
from mcpsync.catalog.service import Prompt, Tool
from mcpsync.catalog.validation import FieldErrors, InvalidArguments

pytestmark = pytest.mark.timeout(30)


class Point(BaseModel):
    """A point on the plane."""

    x: int = Field(ge=0, description="across")
    y: int = Field(default=0, alias="Y", title="Up")


class Path_(BaseModel):
    points: list[Point] = Field(min_length=2)


class Node(BaseModel):
    value: int
    children: list[Node] = []


class Holder(BaseModel):
    thing: object = Field(default_factory=object)


class Hook(BaseModel):
    call: Callable[[], None]


class Strict(BaseModel):
    model_config = ConfigDict(strict=True)
    when: date


class Word(BaseModel):
    text: str

    @field_validator("text")
    @classmethod
    def _no_spaces(cls, text: str) -> str:
        if " " in text:
            raise ValueError("one word, no spaces")
        return text


@pydantic_dataclass
class Size:
    width: int = Field(gt=0)


@dataclasses.dataclass
class Frame:
    """A plain dataclass holding a model."""
    corner: Point
    label: str = ""


class Celsius(float):
    """A type of one's own that tells pydantic its schema."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        return core_schema.no_info_after_validator_function(cls, core_schema.float_schema(ge=-273.15))


def call(tool: Tool, arguments: dict[str, Any]) -> Any:
    """What the engine does for a call: validate, invoke, make the result."""
    tool.validate(arguments)
    return tool.to_result(tool.invoke(arguments, None))  # type: ignore[arg-type]


def refusal(tool: Tool, arguments: dict[str, Any]) -> InvalidArguments:
    with pytest.raises(InvalidArguments) as caught:
        call(tool, arguments)
    return caught.value


# -- recognising pydantic -------------------------------------------------------------------------

@pytest.mark.parametrize("tp", [Point, list[Point], Optional[Point], dict[str, Point], Annotated[int, Field(ge=1)], Size,
                                RootModel[list[int]], tuple[int, Point]])
def test_annotations_involving_pydantic_are_recognised(tp: Any) -> None:
    assert is_pydantic(tp)


@pytest.mark.parametrize("tp", [int, list[int], Frame, Annotated[int, "a note"], Optional[str], Any])
def test_annotations_without_pydantic_are_not(tp: Any) -> None:
    assert not is_pydantic(tp)


def test_a_class_that_tells_pydantic_its_schema_is_pydantics() -> None:
    def warm(to: Celsius) -> str:
        return f"{type(to).__name__} {to}"

    tool = Tool(warm)
    assert tool.input_schema["properties"]["to"] == {"minimum": -273.15, "type": "number"}
    assert call(tool, {"to": 21.5})["content"][0]["text"] == "Celsius 21.5"
    assert str(refusal(tool, {"to": -300})) == "Invalid arguments for tool 'warm' at 'to': Input should be greater than or equal to -273.15"


def test_instances_of_pydantic_classes_are_recognised_by_their_class() -> None:
    assert is_pydantic_class(Point) and is_pydantic_class(Size) and is_pydantic_class(RootModel[int])
    assert not is_pydantic_class(Frame) and not is_pydantic_class(dict)


# -- schemas --------------------------------------------------------------------------------------

def test_a_model_parameter_is_pydantics_schema_inlined_by_alias() -> None:
    def draw(path: Path_, start: Point | None = None) -> None: ...

    shape = describe_function(draw)
    Draft202012Validator.check_schema(shape.input_schema)
    assert "$ref" not in json.dumps(shape.input_schema) and "$defs" not in json.dumps(shape.input_schema)
    point = {"description": "A point on the plane.", "title": "Point", "type": "object", "required": ["x"],
             "properties": {"x": {"description": "across", "minimum": 0, "type": "integer"},
                            "Y": {"default": 0, "title": "Up", "type": "integer"}}}  # the title given, none made up
    assert shape.input_schema["properties"]["path"] == {
        "properties": {"points": {"items": point, "minItems": 2, "type": "array"}},
        "required": ["points"], "title": "Path_", "type": "object"}
    assert shape.input_schema["properties"]["start"] == {"anyOf": [point, {"type": "null"}], "default": None}
    assert shape.input_schema["required"] == ["path"]


def test_constraints_in_annotated_fields_and_a_string_note() -> None:
    def pick(count: Annotated[int, Field(ge=1, le=5)], where: Annotated[Point, "where to pick"]) -> None: ...

    properties = describe_function(pick).input_schema["properties"]
    assert properties["count"] == {"maximum": 5, "minimum": 1, "type": "integer"}
    assert properties["where"]["description"] == "where to pick"


def test_a_model_inside_a_plain_dataclass_is_inlined_there() -> None:
    def hang(frame: Frame) -> None: ...

    frame = describe_function(hang).input_schema["properties"]["frame"]
    assert frame["properties"]["corner"]["title"] == "Point"
    assert frame["additionalProperties"] is False  # the dataclass's own convention


def test_a_model_that_contains_itself_is_refused_at_registration() -> None:
    def grow(tree: Node) -> None: ...

    with pytest.raises(TypeError, match=r"grow\(\): parameter 'tree': Node contains itself; recursive types are not supported"):
        describe_function(grow)


def test_a_model_without_a_json_schema_is_refused_at_registration() -> None:
    def keep(hook: Hook) -> None: ...

    with pytest.raises(TypeError, match=r"keep\(\): parameter 'hook': no JSON Schema for this annotation"):
        describe_function(keep)


def test_a_returned_model_has_its_serialization_schema_and_a_list_is_wrapped() -> None:
    def where() -> Point: ...
    def route() -> list[Point]: ...

    assert describe_function(where).output_schema == {
        "description": "A point on the plane.", "title": "Point", "type": "object", "required": ["x"],
        "properties": {"x": {"description": "across", "minimum": 0, "type": "integer"}, "Y": {"default": 0, "title": "Up", "type": "integer"}}}
    shape = describe_function(route)
    assert shape.wrap_output and shape.output_schema is not None
    assert shape.output_schema["properties"]["result"]["items"]["title"] == "Point"


def test_refs_inside_data_stay_and_a_discriminators_mapping_goes() -> None:
    defs = {"A": {"type": "object", "title": "A"}}
    schema = {"oneOf": [{"$ref": "#/$defs/A"}], "discriminator": {"propertyName": "kind", "mapping": {"a": "#/$defs/A"}},
              "default": {"$ref": "#/$defs/A"}, "examples": [{"$ref": "#/$defs/A"}]}
    assert _Inliner(defs, "here").expand(schema, ()) == {
        "oneOf": [{"type": "object", "title": "A"}], "discriminator": {"propertyName": "kind"},
        "default": {"$ref": "#/$defs/A"}, "examples": [{"$ref": "#/$defs/A"}]}


def test_a_single_all_of_as_older_pydantic_wrote_it_is_merged() -> None:
    defs = {"A": {"type": "object", "title": "A"}}
    expand = _Inliner(defs, "here").expand
    assert expand({"allOf": [{"$ref": "#/$defs/A"}], "description": "d"}, ()) == {"type": "object", "title": "A", "description": "d"}
    assert expand({"allOf": [{"$ref": "#/$defs/A"}], "title": "B"}, ()) == {"allOf": [{"type": "object", "title": "A"}], "title": "B"}


# -- calls ----------------------------------------------------------------------------------------

def test_a_call_gets_the_instance_and_a_returned_model_is_structured_by_alias() -> None:
    def mirror(point: Point) -> Point:
        assert isinstance(point, Point)
        return Point(x=point.x + 1, Y=point.y * 2)

    tool = Tool(mirror)
    result = call(tool, {"point": {"x": 1, "Y": 2}})
    assert result["structuredContent"] == {"x": 2, "Y": 4}
    assert json.loads(result["content"][0]["text"]) == {"x": 2, "Y": 4}


def test_pydantic_validates_instead_of_jsonschema_and_its_messages_name_the_field() -> None:
    def draw(path: Path_) -> None: ...

    tool = Tool(draw)
    error = refusal(tool, {"path": {"points": [{"x": -1}, {"x": 1, "Y": "up"}]}})
    assert str(error) == ("Invalid arguments for tool 'draw' at 'path/points/0/x': Input should be greater than or equal to 0; "
                          "at 'path/points/1/Y': Input should be a valid integer, unable to parse string as an integer")
    assert error.field == "path/points/0/x"


def test_a_validator_of_the_models_own_runs() -> None:
    def say(word: Word) -> str:
        return word.text

    assert str(refusal(Tool(say), {"word": {"text": "two words"}})) == (
        "Invalid arguments for tool 'say' at 'word/text': Value error, one word, no spaces")


def test_arguments_are_validated_as_json_so_a_strict_model_takes_an_iso_date() -> None:
    def when(at: Strict) -> str:
        return at.when.isoformat()

    assert call(Tool(when), {"at": {"when": "2026-12-01"}})["content"][0]["text"] == "2026-12-01"


def test_a_constrained_scalar_and_a_pydantic_dataclass() -> None:
    def scale(size: Size, factor: Annotated[int, Field(ge=1)] = 1) -> Size:
        return Size(width=size.width * factor)

    tool = Tool(scale)
    assert call(tool, {"size": {"width": 2}, "factor": 3})["structuredContent"] == {"width": 6}
    assert str(refusal(tool, {"size": {"width": 2}, "factor": 0})) == (
        "Invalid arguments for tool 'scale' at 'factor': Input should be greater than or equal to 1")


def test_only_the_pydantic_parameters_are_left_to_pydantic() -> None:
    def draw(path: Path_, times: int) -> None: ...

    shape = describe_function(draw)
    assert shape.validation_schema["properties"] == {"path": {}, "times": {"type": "integer"}}
    assert shape.input_schema["properties"]["path"]["title"] == "Path_"  # what a client is shown stays whole
    assert str(refusal(Tool(draw), {"path": {"points": []}, "times": "2"})) == "Invalid arguments for tool 'draw' at 'times': '2' is not of type 'integer'"


def test_a_tool_without_pydantic_validates_exactly_as_before() -> None:
    def plain(frame: Frame) -> None: ...

    shape = describe_function(plain)
    assert shape.validation_schema is shape.input_schema


def test_a_prompt_argument_with_pydantic_constraints() -> None:
    def review(lines: Annotated[int, Field(ge=1, le=500)]) -> str:
        return f"review {lines} lines"

    prompt = Prompt(review)
    assert prompt.get({"lines": "20"}, None)["messages"][0]["content"]["text"] == "review 20 lines"  # type: ignore[arg-type]
    with pytest.raises(McpError) as caught:
        prompt.get({"lines": "900"}, None)  # type: ignore[arg-type]
    assert caught.value.code == -32602
    assert caught.value.message == "Invalid arguments for prompt 'review' at 'lines': Input should be less than or equal to 500"


# -- dumping --------------------------------------------------------------------------------------

def test_to_jsonable_dumps_pydantic_values_by_alias() -> None:
    assert to_jsonable({"p": Point(x=1, Y=2), "s": [Size(width=3)], "r": RootModel[list[int]]([1, 2])}) == {
        "p": {"x": 1, "Y": 2}, "s": [{"width": 3}], "r": [1, 2]}


def test_a_model_pydantic_cannot_dump_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="cannot convert Holder to JSON"):
        to_jsonable(Holder())


# -- bounded errors -------------------------------------------------------------------------------

def test_field_errors_quote_three_count_the_rest_and_cut_each_short() -> None:
    errors = FieldErrors([(str(n), "bad " + "x" * 1000) for n in range(10)], 10)
    text = errors.within("items").describe("Invalid arguments for tool 't'")
    assert text.startswith("Invalid arguments for tool 't' at 'items/0': bad xxx")
    assert text.count("at 'items/") == 3 and text.endswith("...; and 7 more")
    assert len(text) < 900


def test_a_number_too_large_for_a_double_is_pydantics_to_judge() -> None:
    """JSON's 1e400 parses as inf; it must reach pydantic as inf, not fail to be written back."""
    class Reading(BaseModel):
        value: float
        finite: float = Field(default=0.0, allow_inf_nan=False)

    assert PydanticType(Reading, "here").convert({"value": float("inf")}).value == float("inf")
    with pytest.raises(FieldErrors, match="at 'finite': Input should be a finite number"):
        PydanticType(Reading, "here").convert({"value": 1.0, "finite": float("-inf")})


def test_a_value_too_deep_for_pydantic_is_named_as_such() -> None:
    deep: Any = 1
    for _ in range(300):
        deep = [deep]
    with pytest.raises(FieldErrors, match="nests 300 levels of arrays and objects, too deep to check"):
        PydanticType(list[Any], "here").convert(deep)
