"""Argument validation: jsonschema decides, a fast path answers the common case first.

Strategy: every rejection comes from jsonschema (Draft 2020-12), so error messages and edge cases are
jsonschema's. Most tool schemas are flat objects of scalars, though, and running the full validator
costs more than the rest of a call. For exactly those schemas a precompiled check runs first; it only
ever *accepts* arguments jsonschema would accept too (it is strictly narrower: `1.0` for an integer,
say, falls through to jsonschema), and anything it does not accept goes to jsonschema.
"""

from __future__ import annotations

from typing import Any, Callable

import jsonschema

from ..protocol.jsonrpc import McpError, invalid_params

# JSON type → the Python types that certainly match it (bool is excluded from numbers by `type is`).
_EXACT_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}
# Keywords that do not constrain a value.
_ANNOTATIONS = frozenset({"type", "description", "title", "default", "examples", "format", "deprecated"})
_OBJECT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "description", "title", "$schema"})

FastCheck = Callable[[Any], bool]


def _compile_fast_check(schema: dict[str, Any]) -> FastCheck | None:
    """A check for a flat object of scalar properties, or None when the schema is anything richer."""
    if schema.get("type") != "object" or not set(schema) <= _OBJECT_KEYWORDS:
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    closed = schema.get("additionalProperties", True) is False
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    if schema.get("additionalProperties", True) not in (True, False):
        return None
    types: dict[str, tuple[type, ...]] = {}
    for name, prop in properties.items():
        if not isinstance(prop, dict) or not set(prop) <= _ANNOTATIONS or prop.get("type") not in _EXACT_TYPES:
            return None
        if "format" in prop:  # formats may be asserted by some configurations: leave them to jsonschema
            return None
        types[name] = _EXACT_TYPES[prop["type"]]
    required_names = tuple(required)

    def check(arguments: Any) -> bool:
        if type(arguments) is not dict:
            return False
        for name in required_names:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            allowed = types.get(name)
            if allowed is None:
                if closed:
                    return False
                continue
            if type(value) not in allowed:
                return False
        return True

    return check


class ArgumentValidator:
    """Validates one schema; raises -32602 naming the offending field."""

    def __init__(self, schema: dict[str, Any], what: str) -> None:
        self._validator = jsonschema.Draft202012Validator(schema)
        self._fast = _compile_fast_check(schema)
        self._what = what

    def validate(self, instance: Any) -> None:
        if self._fast is not None and self._fast(instance):
            return
        problem = self.problem(instance)
        if problem is not None:
            raise problem

    def problem(self, instance: Any) -> McpError | None:
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(instance))
        if error is None:
            return None
        path = [str(part) for part in error.absolute_path]
        offending = _offending_property(error)
        where = "/".join(path)
        field = f" at '{where}'" if where else ""
        return invalid_params(
            f"Invalid arguments for {self._what}{field}: {error.message}",
            {"field": "/".join(path + [offending]) if offending else (where or None)},
        )


def _offending_property(error: jsonschema.ValidationError) -> str | None:
    """For an error about an object's keys (missing or unexpected), the key it is about."""
    instance = error.instance
    if not isinstance(instance, dict):
        return None
    if error.validator == "required":
        return next((name for name in error.validator_value if name not in instance), None)
    if error.validator == "additionalProperties":
        known = error.schema.get("properties", {})
        return next((name for name in instance if name not in known), None)
    return None
