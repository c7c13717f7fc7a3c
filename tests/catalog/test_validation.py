"""Tests for mcpsync.catalog.validation: what a rejection says, how long it may be, and when
jsonschema is imported.

The rules themselves are jsonschema's (test_service.py checks the fast path agrees with it); here
we pin that every rejection names the field and the rule in bounded text, whatever the size or the
depth of the value, and that jsonschema stays unimported until a value needs it.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from mcpsync.catalog.validation import ArgumentValidator, InvalidArguments, SchemaCheck, quote

pytestmark = pytest.mark.timeout(30)

FLAT = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a"], "additionalProperties": False}
NESTED = {"type": "object", "properties": {"rows": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}}}
BOUND = 300
"""No rejection text here may be longer, whatever the value."""


def deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def refusal(schema: dict[str, Any], arguments: Any) -> InvalidArguments:
    with pytest.raises(InvalidArguments) as caught:
        ArgumentValidator(schema, "tool 't'").validate(arguments)
    return caught.value


def test_a_short_jsonschema_message_is_kept_with_the_field() -> None:
    error = refusal(FLAT, {"a": "two"})
    assert str(error) == "Invalid arguments for tool 't' at 'a': 'two' is not of type 'integer'"
    assert error.field == "a"


@pytest.mark.parametrize("arguments, field", [({}, "a"), ({"a": 1, "c": 2}, "c"), ({"a": 1, "b": 2}, "b")])
def test_the_field_of_a_missing_or_unexpected_key_is_that_key(arguments: dict, field: str) -> None:
    assert refusal(FLAT, arguments).field == field


def test_a_huge_wrongly_typed_string_is_quoted_by_a_short_prefix_and_its_length() -> None:
    text = str(refusal(FLAT, {"a": "y" + "x" * 10_000_000}))
    assert len(text) < BOUND, text[:BOUND]
    assert text.startswith("Invalid arguments for tool 't' at 'a': 'yxxx")
    assert "(10000001 characters)" in text and "{'type': 'integer'}" in text


def test_a_huge_unexpected_key_is_cut_short_in_the_text_and_the_field() -> None:
    key = "k" * 5_000_000
    error = refusal(FLAT, {"a": 1, key: 0})
    assert len(str(error)) < BOUND and "additionalProperties" in str(error)
    assert error.field is not None and error.field.startswith("kkk") and len(error.field) < BOUND


def test_a_long_rule_is_cut_short_but_still_named() -> None:
    colours = [f"colour-{n}" for n in range(500)]
    schema = {"type": "object", "properties": {"c": {"enum": colours}}}
    text = str(refusal(schema, {"c": "blue"}))
    assert len(text) < BOUND and "at 'c'" in text and "'blue'" in text and "'enum'" in text


@pytest.mark.parametrize("schema", [FLAT, NESTED], ids=["flat", "nested"])
@pytest.mark.parametrize("levels", [900, 1000, 3000])
def test_arguments_nested_deeper_than_python_recurses_get_a_bounded_answer(schema: dict[str, Any], levels: int) -> None:
    field = "a" if schema is FLAT else "rows"
    error = refusal(schema, {field: deep(levels)})  # jsonschema may manage a few levels, or none
    assert str(error).startswith(f"Invalid arguments for tool 't' at '{field}")
    assert len(str(error)) < BOUND
    assert error.field is not None and error.field.startswith(field)


def test_a_deep_value_under_a_schema_that_allows_it_is_accepted() -> None:
    check = SchemaCheck({"type": "object", "properties": {"blob": {}}})
    assert check.problem({"blob": deep(3000)}) is None
    assert check.accepts({"blob": deep(3000)})


def test_accepts_is_false_for_a_value_too_deep_to_check() -> None:
    assert not SchemaCheck({"type": "integer"}).accepts(deep(3000))


def test_quote_keeps_only_the_start_of_a_long_string_and_bounds_depth() -> None:
    assert quote("short") == "'short'"
    assert quote("a" * 41 + "z") == "'" + "a" * 40 + "'... (42 characters)"
    assert len(quote(deep(5000))) < 20
    assert len(quote({"k" * 1000: ["v" * 1000] * 1000})) < BOUND


def run_child(code: str) -> str:
    """Run `code` in a fresh interpreter (jsonschema is already imported in this one)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_jsonschema_is_imported_only_when_a_value_needs_it() -> None:
    out = run_child(
        "import sys\n"
        "import mcpsync.cli\n"
        "from mcpsync.catalog.validation import SchemaCheck\n"
        "from mcpsync.cli.demo import build_demo_service\n"
        "build_demo_service()\n"
        f"flat = SchemaCheck({FLAT!r})\n"
        "assert flat.accepts({'a': 1}), 'the fast path accepts'\n"
        "print('jsonschema' in sys.modules, end=' ')\n"
        f"assert not SchemaCheck({NESTED!r}).accepts({{'rows': 'x'}})\n"
        "print('jsonschema' in sys.modules)\n"
    )
    assert out == "False True"


# -- optional parameters: a list-valued `type` ---------------------------------------------------------

def test_a_tool_with_an_optional_parameter_registers_and_checks_it() -> None:
    """`b: str | None = None` gets `"type": ["string", "null"]`; such a tool could not even be
    registered while the fast path looked the list up as a dict key."""
    from mcpsync import Service

    service = Service("optional")

    @service.tool()
    def pad(a: int, b: str | None = None) -> str:
        return f"{a}{b or ''}"

    validator = ArgumentValidator(service.tools[0].input_schema, "tool 'pad'")
    for good in ({"a": 1}, {"a": 1, "b": None}, {"a": 1, "b": "x"}):
        validator.validate(good)
    assert "'b'" in str(refusal(service.tools[0].input_schema, {"a": 1, "b": 2}))


@pytest.mark.parametrize(
    ("json_type", "accepted", "refused"),
    [
        (["string", "null"], ["x", None], [1, True, [], {}]),
        (["integer", "boolean"], [1, True], ["1", None, 1.5]),
        (["number"], [1, 1.5], ["1", None]),
    ],
)
def test_a_list_valued_type_is_checked_like_jsonschema(json_type: list[str], accepted: list[Any], refused: list[Any]) -> None:
    check = SchemaCheck({"type": "object", "properties": {"v": {"type": json_type}}})
    for value in accepted:
        assert check.accepts({"v": value}), value
    for value in refused:
        assert not check.accepts({"v": value}), value
