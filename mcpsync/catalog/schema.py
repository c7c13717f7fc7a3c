"""JSON Schemas for MCP tools and prompts, derived from plain Python functions.

Strategy: one walk over a function's type hints produces, for every parameter, a JSON Schema
(draft 2020-12) *and* a converter that turns an already validated JSON value back into the Python
value the annotation promises (a dataclass, an enum member, a tuple, ...). Keeping both in the same
walk means the schema a client sees and the objects a tool receives can never drift apart.

- Everything is decided once, in `describe_function`; calls only run the stored converters.
- Schemas are inlined, never `$ref`: many MCP clients handle references poorly. A dataclass or
  TypedDict that contains itself therefore cannot be described and raises `TypeError`.
- Whatever cannot be described raises `TypeError` naming the function, the parameter (or the
  return value) and the annotation, so a bad tool fails when it is registered, not when called.
- Return values follow the official Python SDK: object-shaped results (dataclass, TypedDict,
  `dict[str, X]`) are the structured content; anything else is wrapped as `{"result": value}`.
  `None`, `str`, `bytes`, the caller's own content types and unions of these get no output
  schema at all: the caller turns them into content blocks.
- An annotation that involves pydantic (a `BaseModel`, `Field(...)` metadata, ...) is pydantic's
  whole: its schema, its conversion and its validation come from `models`, which imports pydantic
  only for annotations made with it. Such a parameter is left open in `validation_schema`, so
  jsonschema does not check it first and the client reads pydantic's messages.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import textwrap
from collections import abc
from collections.abc import Callable
from datetime import date, datetime
from enum import Enum
from pathlib import Path, PurePath
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, NotRequired, Required, Union, get_args, get_origin, get_type_hints, is_typeddict

from .models import PydanticType, dump, is_pydantic, is_pydantic_class
from .validation import FieldErrors, SchemaCheck, quote

Convert = Callable[[Any], Any]
"""Turns one validated JSON value into the Python value its annotation asks for."""


def _same(value: Any) -> Any:
    return value


# Annotation -> (schema, converter). Schemas are copied on use, so this table stays constant.
_SCALARS: dict[Any, tuple[dict[str, Any], Convert]] = {
    str: ({"type": "string"}, _same),
    int: ({"type": "integer"}, int),  # JSON 1.0 is a valid integer; the tool still gets 1
    float: ({"type": "number"}, float),  # JSON 3 is a valid number; the tool still gets 3.0
    bool: ({"type": "boolean"}, _same),
    NoneType: ({"type": "null"}, _same),
    bytes: ({"type": "string"}, str.encode),  # UTF-8 text; binary belongs in resources
    datetime: ({"type": "string", "format": "date-time"}, datetime.fromisoformat),
    date: ({"type": "string", "format": "date"}, date.fromisoformat),
    Path: ({"type": "string"}, Path),
    object: ({}, _same),  # like Any: every JSON value is an object
}
# Python types allowed as Literal / Enum values, and the JSON type each one has.
_ENUM_VALUE_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean",
                     NoneType: "null"}
# Container origin -> the Python type a JSON array is rebuilt as.
_SEQUENCES: dict[Any, type] = {
    list: list, abc.Sequence: list, abc.MutableSequence: list, tuple: tuple,
    set: set, abc.Set: set, abc.MutableSet: set, frozenset: frozenset,
}
_MAPPINGS = (dict, abc.Mapping, abc.MutableMapping)
_UNIONS = (Union, UnionType)
_UNSTRUCTURED_RETURNS = (NoneType, str, bytes)
# A Google-style "Args:" header and the indented (or blank) lines under it.
_ARGS_SECTION = re.compile(r"^(?:Args|Arguments):[ \t]*\n(?P<body>(?:[ \t].*(?:\n|$)|\n)*)",
                           re.MULTILINE)
_ARG_LINE = re.compile(r"\*{0,2}(?P<name>\w+)\s*(?:\([^)]*\))?\s*:\s*(?P<text>.*)")


@dataclasses.dataclass(frozen=True, slots=True)
class FunctionShape:
    """Everything the catalog needs to list a function as a tool or prompt and to call it."""

    input_schema: dict[str, Any]
    """JSON Schema object for the arguments; unknown arguments are rejected."""
    output_schema: dict[str, Any] | None
    """Schema of `structuredContent`, or None when the return type gives none."""
    wrap_output: bool
    """True when a return value is sent as `{"result": value}` (non-object return types)."""
    context_param: str | None
    """The parameter that receives the context object; it is not part of the schema."""
    description: str | None
    """The docstring without its `Args:` section, or None when there is nothing left."""
    param_descriptions: dict[str, str]
    """Per-parameter text from the docstring's Google-style `Args:` section."""
    converters: dict[str, Convert] = dataclasses.field(compare=False, repr=False)
    """Parameter name -> converter from validated JSON to the annotated Python value."""
    validation_schema: dict[str, Any] = dataclasses.field(compare=False, repr=False)
    """What jsonschema checks before the converters run: `input_schema`, but with the parameters
    pydantic validates (in their converters) accepting any value."""


def describe_function(fn: Callable[..., Any], *, context_type: type | None = None,
                      passthrough_types: tuple[type, ...] = ()) -> FunctionShape:
    """Derive the tool/prompt shape of `fn` from its signature, type hints and docstring.

    Args:
        fn: The function to describe; `from __future__ import annotations` is fine.
        context_type: The parameter annotated with exactly this type (or `Optional` of it) is
            the context parameter, recognised by annotation, never by name.
        passthrough_types: Return types (their subclasses, lists and unions of them) that the
            caller turns into MCP content itself. They, `None`, `str`, `bytes` and unions of
            these get no output schema.

    Returns:
        The shape; its schemas pass `Draft202012Validator.check_schema`.

    Raises:
        TypeError: `fn` has `*args`/`**kwargs`, more than one context parameter, hints that
            cannot be resolved, or an annotation with no JSON Schema equivalent. Any other
            exception is a bug.
    """
    name = getattr(fn, "__qualname__", None) or repr(fn)
    hints = _type_hints(fn, f"{name}()")
    description, param_docs = _split_docstring(inspect.getdoc(fn) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    converters: dict[str, Convert] = {}
    self_validated: list[str] = []
    context_param = None
    for param in inspect.signature(fn).parameters.values():
        where = f"{name}(): parameter {param.name!r}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{where}: *args and **kwargs are not supported")
        hint = hints.get(param.name, Any)
        if context_type is not None and _is_context(hint, context_type):
            if context_param is not None:
                raise TypeError(f"{where}: {context_param!r} already takes the context")
            context_param = param.name
            continue
        schema, converters[param.name] = _Mapper(where, output=False).map(hint)
        if is_pydantic(hint):
            self_validated.append(param.name)
        if param.name in param_docs and "description" not in schema:
            schema["description"] = param_docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        else:
            _add_default(schema, param.default)
        properties[param.name] = schema
    input_schema = _object(properties, required, additionalProperties=False)
    validation_schema = input_schema
    if self_validated:
        validation_schema = input_schema | {"properties": properties | {key: {} for key in self_validated}}
    output_schema, wrap = _output_schema(hints, passthrough_types, f"{name}(): return value")
    return FunctionShape(input_schema, output_schema, wrap, context_param, description,
                         param_docs, converters, validation_schema)


def bind_arguments(shape: FunctionShape, arguments: dict[str, Any]) -> dict[str, Any]:
    """Turn arguments already validated against `shape.input_schema` into Python values.

    Returns:
        Keyword arguments by parameter name, without the context parameter; arguments the
        client left out are absent, so the function's own defaults apply.

    Raises:
        FieldErrors: A pydantic type refused a value; its paths start with the parameter's name.
        ValueError: A value fits the schema but not its type, e.g. a string that is not an ISO
            date, or a dataclass whose `__post_init__` rejects it; the message starts with the
            parameter's name. Other exceptions come from the user's own constructors, or mean
            the arguments were never validated.
    """
    bound = {}
    for name, convert in shape.converters.items():
        if name in arguments:
            try:
                bound[name] = convert(arguments[name])
            except FieldErrors as exc:
                raise exc.within(name) from None
            except ValueError as exc:
                raise ValueError(f"parameter '{name}': {exc}") from exc
    return bound


def invoke(shape: FunctionShape, fn: Callable[..., Any], arguments: dict[str, Any],
           context: Any = None) -> Any:
    """Call `fn` with validated JSON `arguments` and, if it takes one, the context.

    This is `fn(**bind_arguments(...))` that also works for positional-only parameters.

    Raises:
        ValueError: As for `bind_arguments`. Anything else comes from `fn` itself.
    """
    bound = inspect.signature(fn).bind_partial()
    bound.arguments.update(bind_arguments(shape, arguments))
    if shape.context_param is not None:
        bound.arguments[shape.context_param] = context
    bound.apply_defaults()  # so a missing positional-only argument cannot shift the others
    return fn(*bound.args, **bound.kwargs)


def to_jsonable(value: Any) -> Any:
    """Convert a return value into plain JSON data (dict, list, str, int, float, bool, None).

    Dataclasses become dicts of all their fields, enum members their values, tuples and sets
    lists, dates ISO strings, paths strings; dict keys become strings. Pydantic models (and
    pydantic's other types) are dumped by pydantic, by alias.

    Raises:
        TypeError: Some part of `value` has no JSON form; the message names its type.
    """
    if isinstance(value, Enum):
        return to_jsonable(value.value)
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (date, PurePath)):
        return value.isoformat() if isinstance(value, date) else str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if is_pydantic_class(type(value)):
            return dump(value)
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, abc.Mapping):
        return {key if isinstance(key, str) else str(to_jsonable(key)): to_jsonable(item)
                for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(item) for item in value]
    if is_pydantic_class(type(value)):
        return dump(value)
    raise TypeError(f"cannot convert {type(value).__qualname__} to JSON: {value!r:.80}")


def structured_output(shape: FunctionShape, value: Any) -> Any | None:
    """The `structuredContent` for a return value, or None when the tool declares none.

    Raises:
        TypeError: As for `to_jsonable`.
    """
    if shape.output_schema is None:
        return None
    data = to_jsonable(value)
    return {"result": data} if shape.wrap_output else data


class _Mapper:
    """Maps one annotation (and everything nested in it) to a schema and a converter.

    `output=True` describes values `to_jsonable` produces: every dataclass field is present,
    including `init=False` ones. Input schemas list only the fields `__init__` accepts.
    """

    def __init__(self, where: str, *, output: bool) -> None:
        self._where = where
        self._output = output
        self._open: list[type] = []  # dataclasses / TypedDicts being expanded, for recursion

    def map(self, tp: Any) -> tuple[dict[str, Any], Convert]:
        if is_pydantic(tp):
            return self._pydantic(tp)
        origin, args = get_origin(tp), get_args(tp)
        if origin is Annotated:
            schema, convert = self.map(args[0])
            notes = [item for item in tp.__metadata__ if isinstance(item, str)]
            if notes:
                schema["description"] = notes[0]
            return schema, convert
        if tp is Any:
            return {}, _same
        if tp is None or tp in _SCALARS:
            schema, convert = _SCALARS[NoneType if tp is None else tp]
            return dict(schema), convert
        if origin is Literal:
            return self._enum(args), _same
        if origin in _UNIONS:
            return self._union(args)
        if isinstance(tp, type) and issubclass(tp, Enum):
            return self._enum([member.value for member in tp]), tp
        if isinstance(tp, type) and (dataclasses.is_dataclass(tp) or is_typeddict(tp)):
            return self._record(tp)
        container = origin or tp
        if container is tuple and args and args[-1] is not Ellipsis:
            return self._tuple(args)
        if container in _SEQUENCES:
            return self._array(_SEQUENCES[container], args[0] if args else Any)
        if container in _MAPPINGS:
            return self._mapping(args)
        raise TypeError(f"{self._where}: no JSON Schema for annotation {tp!r}")

    def _pydantic(self, tp: Any) -> tuple[dict[str, Any], Convert]:
        """Pydantic's schema and validation; an `Annotated` string note still describes it."""
        model = PydanticType(tp, self._where)
        schema = model.schema(output=self._output)
        if get_origin(tp) is Annotated:
            notes = [item for item in tp.__metadata__ if isinstance(item, str)]
            if notes:
                schema["description"] = notes[0]
        return schema, model.convert

    def _enum(self, values: Any) -> dict[str, Any]:
        kinds = {type(value) for value in values}
        if not kinds <= _ENUM_VALUE_TYPES.keys():
            raise TypeError(f"{self._where}: enum/Literal values must be str, int, float, "
                            f"bool or None, not {list(values)!r}")
        schema: dict[str, Any] = {"enum": list(values)}
        if len(kinds) == 1:
            schema["type"] = _ENUM_VALUE_TYPES[kinds.pop()]
        return schema

    def _union(self, args: tuple[Any, ...]) -> tuple[dict[str, Any], Convert]:
        nullable = NoneType in args
        members = [self.map(arg) for arg in args if arg is not NoneType]
        schemas = [schema for schema, _ in members] + ([{"type": "null"}] if nullable else [])
        if all(schema.keys() == {"type"} for schema in schemas):
            schema = {"type": list(dict.fromkeys(schema["type"] for schema in schemas))}
        else:
            schema = {"anyOf": schemas}
        if len(members) == 1:
            only = members[0][1]
            return schema, lambda value: None if value is None else only(value)
        choices = [(SchemaCheck(member), convert) for member, convert in members]

        def convert(value: Any) -> Any:  # the first member whose schema fits decides
            if nullable and value is None:
                return None
            for check, member_convert in choices:
                if check.accepts(value):
                    return member_convert(value)
            raise ValueError(f"{quote(value)} matches no member of the union")
        return schema, convert

    def _array(self, kind: type, item: Any) -> tuple[dict[str, Any], Convert]:
        items, convert = self.map(item)
        schema: dict[str, Any] = {"type": "array", "items": items}
        if kind in (set, frozenset):
            schema["uniqueItems"] = True
        return schema, lambda value: kind(convert(element) for element in value)

    def _tuple(self, args: tuple[Any, ...]) -> tuple[dict[str, Any], Convert]:
        """A fixed-length tuple such as `tuple[int, str]`; `tuple[X, ...]` is an array."""
        members = [self.map(arg) for arg in args]
        schema = {"type": "array", "prefixItems": [schema for schema, _ in members],
                  "items": False, "minItems": len(args)}
        converts = [convert for _, convert in members]
        return schema, lambda value: tuple(c(element) for c, element in zip(converts, value, strict=True))

    def _mapping(self, args: tuple[Any, ...]) -> tuple[dict[str, Any], Convert]:
        if args and args[0] not in (str, Any):
            raise TypeError(f"{self._where}: JSON object keys are strings, not {args[0]!r}")
        values, convert = self.map(args[1] if args else Any)
        return ({"type": "object", "additionalProperties": values},
                lambda value: {key: convert(item) for key, item in value.items()})

    def _record(self, cls: type) -> tuple[dict[str, Any], Convert]:
        if cls in self._open:
            raise TypeError(f"{self._where}: {cls.__qualname__} contains itself; recursive "
                            "types are not supported")
        self._open.append(cls)
        try:
            hints = _type_hints(cls, self._where)
            if is_typeddict(cls):
                return self._typeddict(cls, hints)
            return self._dataclass(cls, hints)
        finally:
            self._open.pop()

    def _typeddict(self, cls: Any, hints: dict[str, Any]) -> tuple[dict[str, Any], Convert]:
        """An open object (Python does not reject extra keys either), bound as a plain dict."""
        properties, required, converters = {}, [], {}
        for name, hint in hints.items():
            marker = get_origin(hint)
            if marker in (Required, NotRequired):
                hint = get_args(hint)[0]
            properties[name], converters[name] = self.map(hint)
            # Markers inside string annotations escape __required_keys__ before Python 3.14.
            if marker is Required or (marker is not NotRequired
                                      and name in cls.__required_keys__):
                required.append(name)
        return (_object(properties, required),
                lambda value: {key: converters.get(key, _same)(item)
                               for key, item in value.items()})

    def _dataclass(self, cls: type, hints: dict[str, Any]) -> tuple[dict[str, Any], Convert]:
        """A closed object (`__init__` rejects unknown keys), bound as `cls(**fields)`."""
        properties, required, converters = {}, [], {}
        for field in dataclasses.fields(cls):
            if not (field.init or self._output):
                continue
            properties[field.name], converters[field.name] = self.map(hints[field.name])
            if field.default is not dataclasses.MISSING:
                _add_default(properties[field.name], field.default)
            optional = (field.default is not dataclasses.MISSING
                        or field.default_factory is not dataclasses.MISSING)
            if self._output or not optional:  # to_jsonable always writes every field
                required.append(field.name)
        return (_object(properties, required, additionalProperties=False),
                lambda value: cls(**{name: convert(value[name])
                                     for name, convert in converters.items() if name in value}))


def _object(properties: dict[str, Any], required: list[str], **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema | extra


def _type_hints(obj: Any, where: str) -> dict[str, Any]:
    try:
        return get_type_hints(obj, include_extras=True)
    except (NameError, TypeError) as exc:
        raise TypeError(f"{where}: cannot resolve the type hints of {obj!r}: {exc}") from exc


def _is_context(hint: Any, context_type: type) -> bool:
    if get_origin(hint) in _UNIONS:
        return set(get_args(hint)) == {context_type, NoneType}
    return hint is context_type


def _add_default(schema: dict[str, Any], default: Any) -> None:
    """Advertise `default` when it has a JSON form; otherwise the schema just omits it."""
    try:
        schema["default"] = to_jsonable(default)
    except TypeError:
        pass


def _output_schema(hints: dict[str, Any], passthrough: tuple[type, ...],
                   where: str) -> tuple[dict[str, Any] | None, bool]:
    if "return" not in hints:
        return None, False
    returns = hints["return"]
    bare = get_args(returns)[0] if get_origin(returns) is Annotated else returns
    members = get_args(bare) if get_origin(bare) in _UNIONS else (bare,)
    if all(member in _UNSTRUCTURED_RETURNS or _passes_through(member, passthrough)
           for member in members):
        return None, False
    schema, _ = _Mapper(where, output=True).map(returns)
    if _says_nothing(schema):
        return None, False  # `-> dict`, `-> list`, `-> Any`: no promise to make (and content may come back)
    if schema.get("type") == "object":
        return schema, False
    return _object({"result": schema}, ["result"]), True


def _says_nothing(schema: dict[str, Any]) -> bool:
    """A schema that constrains nothing beyond "an object" or "an array" (or not even that)."""
    keys = set(schema) - {"description", "title"}
    if not keys:
        return True
    if schema.get("type") == "object":
        return keys <= {"type", "additionalProperties"} and schema.get("additionalProperties", True) in (True, {})
    if schema.get("type") == "array":
        return keys <= {"type", "items"} and schema.get("items", {}) in (True, {})
    return False


def _passes_through(tp: Any, passthrough: tuple[type, ...]) -> bool:
    """True for `passthrough` types, their subclasses, and lists or unions made only of them."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        return _passes_through(args[0], passthrough)
    if origin in _UNIONS or _SEQUENCES.get(origin) is list:
        return bool(args) and all(_passes_through(arg, passthrough) for arg in args)
    return isinstance(tp, type) and issubclass(tp, passthrough)


def _split_docstring(doc: str) -> tuple[str | None, dict[str, str]]:
    """Split a cleaned docstring into (text without the `Args:` section, parameter texts)."""
    section = _ARGS_SECTION.search(doc)
    if section is None:
        return doc.strip() or None, {}
    params: dict[str, str] = {}
    name = None
    for line in textwrap.dedent(section["body"]).splitlines():
        entry = _ARG_LINE.fullmatch(line)  # entries are unindented now, continuations not
        if entry:
            name = entry["name"]
            params[name] = entry["text"]
        elif name is not None and line.strip():
            params[name] = f"{params[name]} {line.strip()}".strip()
    rest = doc[:section.start()] + doc[section.end():]
    return rest.strip() or None, params
