"""Checking JSON values against schemas: jsonschema decides, a fast path answers the common case first.

Strategy: every rejection comes from jsonschema (Draft 2020-12), so the rules and edge cases are
jsonschema's. Most tool schemas are flat objects of scalars, though, and running the full validator
costs more than the rest of a call. For exactly those schemas a precompiled check runs first; it only
ever *accepts* values jsonschema would accept too (it is strictly narrower: `1.0` for an integer, say,
falls through to jsonschema), and anything it does not accept goes to jsonschema.

jsonschema is imported, and a schema compiled, only when a value first reaches it: importing it is a
large part of a server's start-up, and a server whose calls all take the fast path never needs it.

A rejection is a `Problem` told in bounded text, because the model reads it (arguments that fail a
tool's `inputSchema` are a tool execution error, `isError: true`, so the model can correct them) and
because the offending value may be huge: jsonschema's own message when it is short, otherwise the rule
(the schema keyword and its value) and a short prefix of the value. A value nested too deeply for
jsonschema to walk is reported as such, never as a RecursionError.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import McpsyncError
from .content import ToolError

if TYPE_CHECKING:
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

# JSON type → the Python types that certainly match it (bool is excluded from numbers by `type is`).
_EXACT_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}
# Keywords that do not constrain a value.
_ANNOTATIONS = frozenset({"type", "description", "title", "default", "examples", "format", "deprecated"})
_OBJECT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "description", "title", "$schema"})

_MAX_MESSAGE = 240
"""jsonschema messages up to this long are used as they are; longer ones quote the value themselves."""
_MAX_PATH = 120
"""Longest field path quoted (an unexpected key may be megabytes long)."""

FastCheck = Callable[[Any], bool]
_UNKNOWN: tuple[type, ...] = (object,)
"""What a fast check finds for a key the schema does not name (compared by identity)."""
SHOWN_ERRORS = 3
"""How many of a value's errors `FieldErrors` quotes; the rest are counted."""


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
    types: dict[str, tuple[type, ...] | None] = {}  # None: any value (a parameter its type validates)
    for name, prop in properties.items():
        if prop == {}:
            types[name] = None
            continue
        if not isinstance(prop, dict) or not set(prop) <= _ANNOTATIONS:
            return None
        if "format" in prop:  # formats may be asserted by some configurations: leave them to jsonschema
            return None
        allowed = _exact_types(prop.get("type"))
        if allowed is None:
            return None
        types[name] = allowed
    required_names = tuple(required)

    def check(arguments: Any) -> bool:
        if type(arguments) is not dict:
            return False
        for name in required_names:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            allowed = types.get(name, _UNKNOWN)
            if allowed is _UNKNOWN:
                if closed:
                    return False
                continue
            if allowed is not None and type(value) not in allowed:
                return False
        return True

    return check


def _exact_types(json_type: Any) -> tuple[type, ...] | None:
    """The Python types that certainly match a scalar `type` keyword: one name, or a list of names
    (`["string", "null"]` is what an optional `str | None` parameter gets); None for anything else."""
    names = [json_type] if isinstance(json_type, str) else json_type
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n in _EXACT_TYPES for n in names):
        return None
    return tuple(t for n in names for t in _EXACT_TYPES[n])


def check_schema(schema: dict[str, Any]) -> None:
    """Raise `jsonschema.SchemaError` unless `schema` is a valid draft 2020-12 schema."""
    import jsonschema  # deferred: see the module docstring

    jsonschema.Draft202012Validator.check_schema(schema)


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a value fails a schema, in text of bounded length."""

    where: str
    """The `/`-separated path of the value that broke the rule ("" for the value itself)."""
    field: str | None
    """The path of the field to fix: `where`, ended by the key a missing or unexpected key is about."""
    rule: str
    """What is wrong, e.g. `'two' is not of type 'integer'`."""

    def describe(self, subject: str) -> str:
        """`subject`, where the problem is, and the rule: one line a model or a person can act on."""
        at = f" at '{self.where}'" if self.where else ""
        return f"{subject}{at}: {self.rule}"


class SchemaCheck:
    """One schema, checked by the fast path when it is flat and by jsonschema otherwise.

    The jsonschema validator is built on first need; two threads needing it at once may both build
    one, which is harmless (they are equal, and the attribute is set atomically).
    """

    __slots__ = ("schema", "_fast", "_validator")

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self._fast = _compile_fast_check(schema)
        self._validator: Validator | None = None

    def accepts(self, instance: Any) -> bool:
        """Whether `instance` is valid; one too deeply nested to check is not."""
        if self._fast is not None and self._fast(instance):
            return True
        try:
            return self._jsonschema().is_valid(instance)
        except RecursionError:
            return False

    def problem(self, instance: Any) -> Problem | None:
        """Why `instance` is invalid (jsonschema's most relevant error), or None when it is valid."""
        if self._fast is not None and self._fast(instance):
            return None
        from jsonschema.exceptions import best_match  # deferred: see the module docstring

        try:
            error = best_match(self._jsonschema().iter_errors(instance))
        except RecursionError:  # raised while jsonschema quotes (repr) or walks the value
            return _too_deep(instance)
        return None if error is None else _problem_of(error)

    def _jsonschema(self) -> Validator:
        if self._validator is None:
            import jsonschema  # deferred: see the module docstring

            self._validator = jsonschema.Draft202012Validator(self.schema)
        return self._validator


class InvalidArguments(ToolError):
    """Arguments that fail a tool's input schema (or that its parameter types refuse).

    A `ToolError`: the call's result is `isError: true` with this message, which names the field and
    the rule, so the model can correct the call (2025-11-25 tools.mdx, SEP-1303), not a JSON-RPC error.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        """The `/`-separated path of the argument at fault, when it is known."""


class ArgumentValidator:
    """Validates the arguments of one tool; raises `InvalidArguments` naming the offending field."""

    def __init__(self, schema: dict[str, Any], what: str) -> None:
        self._check = SchemaCheck(schema)
        self._what = what

    def validate(self, instance: Any) -> None:
        problem = self._check.problem(instance)
        if problem is not None:
            raise InvalidArguments(problem.describe(f"Invalid arguments for {self._what}"), problem.field)


class FieldErrors(McpsyncError, ValueError):
    """Why a parameter's type refused a value: the first few (path, message) pairs, each bounded,
    and how many there were in all. For types that validate themselves (pydantic's), whose
    messages are theirs; `str()` is `describe("Invalid value")`.
    """

    def __init__(self, errors: Sequence[tuple[str, str]], total: int) -> None:
        self.errors = tuple((clip(where, _MAX_PATH), clip(rule)) for where, rule in errors[:SHOWN_ERRORS]) or (("", "invalid"),)
        """(the `/`-separated path of the value at fault, "" for the value itself; what is wrong)."""
        self.total = max(total, len(self.errors))
        super().__init__(self.describe("Invalid value"))

    @property
    def field(self) -> str | None:
        """The path of the first value at fault, when there is one."""
        return self.errors[0][0] or None

    def within(self, name: str) -> FieldErrors:
        """The same errors, for the value under key `name` of an object."""
        return FieldErrors([(f"{name}/{where}" if where else name, rule) for where, rule in self.errors], self.total)

    def describe(self, subject: str) -> str:
        """`subject`, then each error as `Problem.describe` tells one, and how many more there were."""
        (where, rule), *rest = self.errors
        text = Problem(where, where or None, rule).describe(subject)
        text += "".join(f"; at '{where}': {rule}" if where else f"; {rule}" for where, rule in rest)
        if self.total > len(self.errors):
            text += f"; and {self.total - len(self.errors)} more"
        return text


def _problem_of(error: ValidationError) -> Problem:
    path = [str(part) for part in error.absolute_path]
    offending = _offending_property(error)
    where = "/".join(path)
    field = "/".join([*path, offending]) if offending is not None else (where or None)
    rule = error.message
    if len(rule) > _MAX_MESSAGE:  # jsonschema quoted the whole value
        broken = {error.validator: error.validator_value} if error.validator is not None else False  # a `false` schema
        rule = f"{quote(error.instance)} does not satisfy {_SHORT.repr1(broken, _RULE_LEVELS)}"
    return Problem(clip(where, _MAX_PATH), None if field is None else clip(field, _MAX_PATH), rule)


def _offending_property(error: ValidationError) -> str | None:
    """For an error about an object's keys (missing or unexpected), the key it is about."""
    instance = error.instance
    if not isinstance(instance, dict):
        return None
    if error.validator == "required" and isinstance(error.validator_value, list):
        return next((name for name in error.validator_value if name not in instance), None)
    if error.validator == "additionalProperties" and isinstance(error.schema, Mapping):
        known = error.schema.get("properties", {})
        return next((name for name in instance if name not in known), None)
    return None


def _too_deep(instance: Any) -> Problem:
    """The problem for a value jsonschema could not walk: the key under which it nests deepest, and
    how deep."""
    rule = TOO_DEEP
    if not (isinstance(instance, dict) and instance):
        return Problem("", None, rule.format(nesting(instance)))
    depths = {key: nesting(value) for key, value in instance.items()}
    deepest = max(depths, key=depths.__getitem__)
    where = clip(str(deepest), _MAX_PATH)
    return Problem(where, where, rule.format(depths[deepest]))


def nesting(value: Any) -> int:
    """How many levels of arrays and objects `value` has, counted without recursion (it may nest
    deeper than Python's recursion limit)."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            pending.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


class _ShortRepr(reprlib.Repr):
    """`reprlib`, bounded in length; a long string keeps only its start (what a reader recognises),
    where reprlib would keep both ends. Callers pass the depth (`repr1`)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlist = self.maxdict = 4
        self.maxstring = self.maxother = 40

    def repr_str(self, x: str, level: int) -> str:
        if len(x) <= self.maxstring:
            return repr(x)
        return repr(x[: self.maxstring]) + self.fillvalue


TOO_DEEP = "nests {} levels of arrays and objects, too deep to check"
"""The rule a value too deeply nested to check breaks, with its depth (`nesting`)."""

_SHORT = _ShortRepr()
_VALUE_LEVELS = 1
"""A quoted value shows its scalars and the outline of its arrays and objects, nothing deeper."""
_RULE_LEVELS = 2
"""A quoted rule (the schema's own, not the client's) may show one level more."""


def quote(value: Any) -> str:
    """A short quote of `value` for an error message: bounded whatever its size or depth, with the
    length of a long string, so the message never grows with the value."""
    text = _SHORT.repr1(value, _VALUE_LEVELS)
    if isinstance(value, str) and len(value) > _SHORT.maxstring:
        text += f" ({len(value)} characters)"
    return text


def clip(text: str, limit: int = _MAX_MESSAGE) -> str:
    """`text`, cut to `limit` characters (and "...") when it is longer."""
    return text if len(text) <= limit else text[:limit] + "..."
