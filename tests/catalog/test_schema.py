"""Tests for mcpsync.catalog.schema: schemas from type hints, argument binding, result conversion.

This module uses `from __future__ import annotations`, so every `def` below exercises string
annotations; `_schema_of` sets real annotation objects to cover the other path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from enum import Enum, IntEnum
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, Optional, Required, TypedDict, Union

import pytest
from jsonschema import Draft202012Validator

from mcpsync.catalog.schema import (FunctionShape, bind_arguments, describe_function, invoke,
                                    structured_output, to_jsonable)

pytestmark = pytest.mark.timeout(30)


class Color(Enum):
    RED = "red"
    GREEN = "green"


class Level(IntEnum):
    LOW = 1
    HIGH = 2


@dataclass
class Point:
    x: float
    y: float = 0.0


@dataclass
class Polygon:
    name: str
    points: list[Point]
    color: Color = Color.RED
    tags: list[str] = field(default_factory=list)


@dataclass
class Stats:
    count: int
    mean: float = 0.0
    label: str = field(init=False, default="stats")


@dataclass
class Node:
    value: int
    children: list[Node]


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


class Options(TypedDict, total=False):
    verbose: bool
    level: Required[Level]


class Ctx:
    """Stands in for the catalog's context type."""


class Image:
    """Stands in for a content type the caller turns into MCP content itself."""


class Thumbnail(Image):
    pass


def _schema_of(annotation: Any) -> dict[str, Any]:
    """The property schema `describe_function` gives a parameter annotated `annotation`."""
    def fn(value):  # real annotation objects, set below, not strings
        return value
    fn.__annotations__ = {"value": annotation}
    return describe_function(fn).input_schema["properties"]["value"]


POINT = {"type": "object", "properties": {"x": {"type": "number"},
                                          "y": {"type": "number", "default": 0.0}},
         "required": ["x"], "additionalProperties": False}

SCHEMAS = [
    (str, {"type": "string"}),
    (int, {"type": "integer"}),
    (float, {"type": "number"}),
    (bool, {"type": "boolean"}),
    (None, {"type": "null"}),
    (Any, {}),
    (object, {}),
    (bytes, {"type": "string"}),
    (datetime, {"type": "string", "format": "date-time"}),
    (date, {"type": "string", "format": "date"}),
    (Path, {"type": "string"}),
    (list[int], {"type": "array", "items": {"type": "integer"}}),
    (list, {"type": "array", "items": {}}),
    (Sequence[str], {"type": "array", "items": {"type": "string"}}),
    (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
    (tuple[int, str], {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                       "items": False, "minItems": 2}),
    (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
    (frozenset[int], {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
    (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
    (Mapping[str, list[float]], {"type": "object", "additionalProperties":
                                 {"type": "array", "items": {"type": "number"}}}),
    (dict, {"type": "object", "additionalProperties": {}}),
    (Optional[int], {"type": ["integer", "null"]}),
    (int | None, {"type": ["integer", "null"]}),
    (Union[int, str], {"type": ["integer", "string"]}),
    (Point | None, {"anyOf": [POINT, {"type": "null"}]}),
    (list[int] | str, {"anyOf": [{"type": "array", "items": {"type": "integer"}},
                                 {"type": "string"}]}),
    (Literal["a", "b"], {"enum": ["a", "b"], "type": "string"}),
    (Literal[1, "a"], {"enum": [1, "a"]}),
    (Color, {"enum": ["red", "green"], "type": "string"}),
    (Level, {"enum": [1, 2], "type": "integer"}),
    (Point, POINT),
    (Polygon, {"type": "object", "properties": {
        "name": {"type": "string"},
        "points": {"type": "array", "items": POINT},
        "color": {"enum": ["red", "green"], "type": "string", "default": "red"},
        "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["name", "points"], "additionalProperties": False}),
    (Stats, {"type": "object", "properties": {"count": {"type": "integer"},
                                              "mean": {"type": "number", "default": 0.0}},
             "required": ["count"], "additionalProperties": False}),
    (Movie, {"type": "object", "properties": {"title": {"type": "string"},
                                              "year": {"type": "integer"}},
             "required": ["title"]}),
    (Options, {"type": "object", "properties": {
        "verbose": {"type": "boolean"}, "level": {"enum": [1, 2], "type": "integer"}},
        "required": ["level"]}),
    (Annotated[int, "How many."], {"type": "integer", "description": "How many."}),
    (list[Annotated[str, "A tag."]], {"type": "array",
                                      "items": {"type": "string", "description": "A tag."}}),
]


@pytest.mark.parametrize(("annotation", "expected"), SCHEMAS, ids=lambda v: repr(v)[:40])
def test_annotation_maps_to_json_schema(annotation, expected):
    schema = _schema_of(annotation)
    Draft202012Validator.check_schema(schema)
    assert schema == expected


VALIDATION = [
    (int, [3, -1], ["3", 3.5, True, None]),
    (float, [3, 3.5], ["3", True]),
    (Optional[int], [None, 4], ["4"]),
    (list[int], [[], [1, 2]], [[1, "2"], {"a": 1}]),
    (tuple[int, str], [[1, "a"]], [[1], [1, "a", 2], ["a", 1]]),
    (set[str], [["a", "b"]], [["a", "a"]]),
    (dict[str, int], [{"a": 1}], [{"a": "x"}, [1]]),
    (Literal["a", "b"], ["a"], ["c", 1]),
    (Color, ["red"], ["RED", "blue"]),
    (Point, [{"x": 1}, {"x": 1.5, "y": 2}], [{"y": 1}, {"x": 1, "z": 2}, {"x": "1"}]),
    (Polygon, [{"name": "p", "points": [{"x": 1}], "color": "green"}],
     [{"name": "p", "points": [{"y": 1}]}, {"name": "p", "points": [], "color": "blue"}]),
    (Movie, [{"title": "Up"}, {"title": "Up", "year": 2009}], [{"year": 2009}]),
    (Options, [{"level": 1}, {"level": 2, "verbose": True}], [{}, {"level": 3}]),
]


@pytest.mark.parametrize(("annotation", "valid", "invalid"), VALIDATION,
                         ids=lambda v: repr(v)[:40])
def test_schema_accepts_valid_and_rejects_invalid_values(annotation, valid, invalid):
    validator = Draft202012Validator(_schema_of(annotation))
    assert [value for value in valid if not validator.is_valid(value)] == []
    assert [value for value in invalid if validator.is_valid(value)] == []


def plot(title: str, points: list[Point], color: Color = Color.GREEN, scale: float = 1.0,
         note: str | None = None, marker: object = object()) -> None:
    """Plot points."""


def test_parameters_without_defaults_are_required_and_defaults_are_advertised():
    schema = describe_function(plot).input_schema
    Draft202012Validator.check_schema(schema)
    assert schema["required"] == ["title", "points"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert (props["color"]["default"], props["scale"]["default"]) == ("green", 1.0)
    assert props["note"] == {"type": ["string", "null"], "default": None}
    assert "default" not in props["marker"]  # object() has no JSON form


def test_function_input_schema_accepts_valid_and_rejects_invalid_arguments():
    validator = Draft202012Validator(describe_function(plot).input_schema)
    assert validator.is_valid({"title": "t", "points": [{"x": 1}], "color": "red"})
    assert not validator.is_valid({"title": "t"})  # points missing
    assert not validator.is_valid({"title": "t", "points": [], "colour": "red"})  # typo
    assert not validator.is_valid({"title": 1, "points": []})


def test_function_without_parameters_takes_an_empty_object():
    def ping() -> None:
        pass
    shape = describe_function(ping)
    assert shape.input_schema == {"type": "object", "properties": {},
                                  "additionalProperties": False}
    assert Draft202012Validator(shape.input_schema).is_valid({})
    assert not Draft202012Validator(shape.input_schema).is_valid({"x": 1})


def search(query: str, limit: Annotated[int, "Maximum hits."] = 10, exact: bool = False):
    """Search the index.

    Matches are ranked by relevance.

    Args:
        query: What to look for,
            across two lines.
        limit (int): Ignored in favour of the Annotated text.
        exact: Match whole words only.

    Returns:
        The hits, best first.
    """


def test_docstring_args_section_becomes_parameter_descriptions():
    shape = describe_function(search)
    assert shape.description == ("Search the index.\n\nMatches are ranked by relevance.\n\n"
                                 "Returns:\n    The hits, best first.")
    assert shape.param_descriptions == {"query": "What to look for, across two lines.",
                                        "limit": "Ignored in favour of the Annotated text.",
                                        "exact": "Match whole words only."}
    props = shape.input_schema["properties"]
    assert props["query"]["description"] == "What to look for, across two lines."
    assert props["limit"]["description"] == "Maximum hits."  # Annotated wins
    assert props["exact"]["description"] == "Match whole words only."


def test_arguments_header_is_an_alias_and_a_docstring_of_only_args_has_no_description():
    def tag(name: str):
        """
        Arguments:
            name:
                The tag to add.
        """
    shape = describe_function(tag)
    assert (shape.description, shape.param_descriptions) == (None, {"name": "The tag to add."})


def test_function_without_docstring_has_no_description():
    def bare(x: int):
        return x
    shape = describe_function(bare)
    assert (shape.description, shape.param_descriptions) == (None, {})


def test_context_parameter_is_found_by_annotation_and_left_out_of_the_schema():
    def tool(count: int, ctx: Ctx, context: int = 0):
        return count
    def maybe(c: Ctx | None = None):
        return c
    shape = describe_function(tool, context_type=Ctx)
    assert shape.context_param == "ctx"
    assert list(shape.input_schema["properties"]) == ["count", "context"]
    assert shape.input_schema["required"] == ["count"]
    assert describe_function(maybe, context_type=Ctx).context_param == "c"
    assert describe_function(search, context_type=Ctx).context_param is None


def variadic(*items: int):
    return items


def keywords(**options: int):
    return options


def two_contexts(a: Ctx, b: Ctx):
    return a, b


def takes_class(thing: Ctx):
    return thing


def takes_node(root: Node):
    return root


def int_keys(table: dict[int, str]):
    return table


def bad_literal(kind: Literal[b"raw"]):
    return kind


def bad_forward_ref(x: Missing):  # noqa: F821 - unresolvable on purpose
    return x


def returns_class() -> Ctx:
    return Ctx()


@pytest.mark.parametrize(("fn", "message"), [
    (variadic, r"variadic\(\): parameter 'items': \*args and \*\*kwargs are not supported"),
    (keywords, r"keywords\(\): parameter 'options': \*args and \*\*kwargs are not supported"),
    (two_contexts, r"two_contexts\(\): parameter 'b': 'a' already takes the context"),
    (takes_class, r"takes_class\(\): parameter 'thing': no JSON Schema for .*Ctx"),
    (takes_node, r"takes_node\(\): parameter 'root': Node contains itself"),
    (int_keys, r"int_keys\(\): parameter 'table': JSON object keys are strings"),
    (bad_literal, r"bad_literal\(\): parameter 'kind': enum/Literal values must be"),
    (bad_forward_ref, r"bad_forward_ref\(\): cannot resolve the type hints"),
    (returns_class, r"returns_class\(\): return value: no JSON Schema for .*Ctx"),
])
def test_undescribable_functions_raise_type_error_naming_the_culprit(fn, message):
    context_type = Ctx if fn is two_contexts else None
    with pytest.raises(TypeError, match=message):
        describe_function(fn, context_type=context_type)


def draw(shape: Polygon, palette: list[Color], at: datetime, tags: set[str],
         size: tuple[int, int], scale: float, origin: Point | None = None,
         layers: dict[str, list[Point]] | None = None, movie: Movie | None = None,
         options: Options | None = None, blob: bytes = b"", where: Path = Path(".")):
    return shape


def test_bind_arguments_builds_the_annotated_python_values():
    shape = describe_function(draw)
    arguments = {
        "shape": {"name": "tri", "points": [{"x": 0}, {"x": 1, "y": 2}], "color": "green"},
        "palette": ["red", "green"], "at": "2025-01-02T03:04:05+00:00", "tags": ["a", "b"],
        "size": [3, 4], "scale": 2, "origin": None, "layers": {"top": [{"x": 5}]},
        "movie": {"title": "Up"}, "options": {"level": 2}, "blob": "hé", "where": "/tmp/x",
    }
    assert Draft202012Validator(shape.input_schema).is_valid(arguments)
    kwargs = bind_arguments(shape, arguments)
    assert kwargs == {
        "shape": Polygon("tri", [Point(0), Point(1, 2)], Color.GREEN),
        "palette": [Color.RED, Color.GREEN],
        "at": datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc), "tags": {"a", "b"},
        "size": (3, 4), "scale": 2.0, "origin": None, "layers": {"top": [Point(5)]},
        "movie": {"title": "Up"}, "options": {"level": Level.HIGH}, "blob": "hé".encode(),
        "where": Path("/tmp/x"),
    }
    assert type(kwargs["scale"]) is float and type(kwargs["options"]["level"]) is Level
    assert draw(**kwargs) == kwargs["shape"]


def test_bind_arguments_leaves_out_missing_arguments_so_defaults_apply():
    shape = describe_function(plot)
    assert bind_arguments(shape, {"title": "t", "points": []}) == {"title": "t", "points": []}


def test_union_arguments_are_built_as_the_first_member_that_fits():
    def pick(target: Point | int, number: int | float, label: Color | str):
        return target
    shape = describe_function(pick)
    assert bind_arguments(shape, {"target": {"x": 1}, "number": 2.5, "label": "red"}) == {
        "target": Point(1), "number": 2.5, "label": Color.RED}
    assert bind_arguments(shape, {"target": 7, "number": 2, "label": "blue"}) == {
        "target": 7, "number": 2, "label": "blue"}


def test_bind_arguments_raises_value_error_for_a_value_its_type_rejects():
    def on(day: date):
        return day
    with pytest.raises(ValueError):
        bind_arguments(describe_function(on), {"day": "not a date"})


def test_invoke_passes_context_and_supports_positional_only_parameters():
    def move(start: Point, step: int = 1, /, ctx: Ctx | None = None, *, scale: float = 1.0):
        return start, step, ctx, scale
    shape = describe_function(move, context_type=Ctx)
    ctx = Ctx()
    assert invoke(shape, move, {"start": {"x": 2}, "scale": 3}, ctx) == (Point(2), 1, ctx, 3.0)
    assert invoke(shape, move, {"start": {"x": 2}, "step": 5}) == (Point(2), 5, None, 1.0)


JSONABLE = [
    (Point(1, 2), {"x": 1, "y": 2}),
    (Polygon("p", [Point(1)], Color.GREEN), {"name": "p", "points": [{"x": 1, "y": 0.0}],
                                             "color": "green", "tags": []}),
    (Stats(3), {"count": 3, "mean": 0.0, "label": "stats"}),
    (Level.HIGH, 2),
    ((1, (2, 3)), [1, [2, 3]]),
    (frozenset({"a"}), ["a"]),
    (datetime(2025, 1, 2, 3, 4, 5), "2025-01-02T03:04:05"),
    (date(2025, 1, 2), "2025-01-02"),
    (Path("/tmp/x"), "/tmp/x"),
    ({1: "a", Color.RED: (1,), "k": None}, {"1": "a", "red": [1], "k": None}),
    ([True, 1.5, None, "s"], [True, 1.5, None, "s"]),
]


@pytest.mark.parametrize(("value", "expected"), JSONABLE, ids=lambda v: repr(v)[:40])
def test_to_jsonable_converts_return_values_to_plain_json(value, expected):
    assert to_jsonable(value) == expected


@pytest.mark.parametrize(("value", "type_name"), [(object(), "object"), (b"raw", "bytes"),
                                                  ({"k": [Ctx()]}, "Ctx")])
def test_to_jsonable_raises_type_error_naming_the_unconvertible_type(value, type_name):
    with pytest.raises(TypeError, match=f"cannot convert {type_name} to JSON"):
        to_jsonable(value)


def no_annotation():
    return 1


def returns_none() -> None:
    pass


def returns_str() -> str:
    return "s"


def returns_bytes() -> bytes:
    return b"s"


def returns_image() -> Image:
    return Image()


def returns_images() -> list[Thumbnail | Image]:
    return [Thumbnail()]


def returns_image_or_text() -> Image | str | None:
    return None


@pytest.mark.parametrize("fn", [no_annotation, returns_none, returns_str, returns_bytes,
                                returns_image, returns_images, returns_image_or_text])
def test_content_like_returns_have_no_output_schema(fn):
    shape = describe_function(fn, passthrough_types=(Image,))
    assert (shape.output_schema, shape.wrap_output) == (None, False)
    assert structured_output(shape, fn()) is None


def returns_stats() -> Stats:
    return Stats(2, 1.5)


def returns_movie() -> Movie:
    return {"title": "Up", "year": 2009}


def returns_table() -> dict[str, Point]:
    return {"a": Point(1)}


def returns_count() -> int:
    return 3


def returns_points() -> list[Point]:
    return [Point(1), Point(2, 3)]


def returns_maybe() -> Annotated[Color | None, "The colour, if any."]:
    return Color.RED


STRUCTURED = [
    (returns_stats, False, {"count": 2, "mean": 1.5, "label": "stats"}),
    (returns_movie, False, {"title": "Up", "year": 2009}),
    (returns_table, False, {"a": {"x": 1, "y": 0.0}}),
    (returns_count, True, {"result": 3}),
    (returns_points, True, {"result": [{"x": 1, "y": 0.0}, {"x": 2, "y": 3}]}),
    (returns_maybe, True, {"result": "red"}),
]


@pytest.mark.parametrize("annotation", [Any, dict, list, dict[str, Any], list[Any]], ids=repr)
def test_a_return_type_that_promises_nothing_gets_no_output_schema(annotation):
    # `-> dict` may well return content blocks; an outputSchema would oblige structured content.
    def tool():
        return None

    tool.__annotations__["return"] = annotation
    shape = describe_function(tool)
    assert shape.output_schema is None and shape.wrap_output is False
    assert structured_output(shape, {"type": "text", "text": "x"}) is None


@pytest.mark.parametrize(("fn", "wrapped", "expected"), STRUCTURED, ids=lambda v: repr(v)[:40])
def test_structured_output_matches_the_output_schema(fn, wrapped, expected):
    shape = describe_function(fn)
    Draft202012Validator.check_schema(shape.output_schema)
    assert shape.wrap_output is wrapped
    structured = structured_output(shape, fn())
    assert structured == expected
    Draft202012Validator(shape.output_schema).validate(structured)


def test_output_schema_lists_every_dataclass_field_as_present():
    schema = describe_function(returns_stats).output_schema
    assert schema["required"] == ["count", "mean", "label"]  # init=False fields included
    assert not Draft202012Validator(schema).is_valid({"count": 2})


def test_non_object_returns_are_wrapped_in_a_required_result():
    assert describe_function(returns_maybe).output_schema == {
        "type": "object",
        "properties": {"result": {"anyOf": [{"enum": ["red", "green"], "type": "string"},
                                            {"type": "null"}],
                                  "description": "The colour, if any."}},
        "required": ["result"]}


def test_function_shape_is_a_frozen_value():
    shape = describe_function(search)
    assert isinstance(shape, FunctionShape)
    assert shape == describe_function(search)
    with pytest.raises(AttributeError):
        shape.description = "changed"
