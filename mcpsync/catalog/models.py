"""Pydantic (v2) types where type hints go: their JSON Schema, their validation and their dump,
without mcpsync depending on pydantic.

Strategy: mcpsync never imports pydantic by itself. An annotation is pydantic's only when pydantic is
already loaded (`sys.modules`) and the annotation, or something nested in it, is a class from
pydantic's modules or a subclass of one (`BaseModel`, `RootModel`, `HttpUrl`, ...), a pydantic
dataclass, a class that tells pydantic its schema (`__get_pydantic_core_schema__`), or `Annotated`
metadata from pydantic or annotated_types (`Field(ge=1)`). Only then is `pydantic.TypeAdapter`
asked, once, when the tool is registered. An app without pydantic pays one dict lookup per
annotation when it registers a tool, and one per dataclass a tool returns.

A pydantic annotation is pydantic's from end to end, so what a client is shown, what the function
receives and what a client gets back come from the same model:

- Its schema is pydantic's own JSON Schema by alias (the wire uses the aliases), in validation mode
  for arguments and serialization mode for results, with `$defs` inlined as all of mcpsync's schemas
  are (a model that contains itself raises `TypeError`) and without the titles pydantic makes up
  from field names (a model keeps its own title).
- Its arguments are validated by pydantic in JSON mode (what the client sent is JSON), not by
  jsonschema: custom validators run, and a rejection is a `FieldErrors` with pydantic's messages,
  each naming the field. The messages never quote the value (`include_input=False`).
- Its values are dumped by pydantic (`model_dump(mode="json", by_alias=True)`).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Annotated, Any, get_args, get_origin

import ujson

from .validation import SHOWN_ERRORS, TOO_DEEP, FieldErrors, nesting

_PYDANTIC_PACKAGES = frozenset({"pydantic", "pydantic_core", "annotated_types"})
_DATA_KEYWORDS = frozenset({"default", "examples", "const", "enum"})
"""Schema keywords whose values are JSON data, never schemas: nothing in them is a reference."""
_DEFS = "#/$defs/"
_DEEP = 100
"""Pydantic's JSON parser stops at 200 levels. JSON written by mcpsync that it calls invalid was too
deep for it when the value nests deeper than this; otherwise the error is pydantic's to tell."""


def _from_pydantic(obj: Any) -> bool:
    """Whether `obj` (a class) is defined in pydantic's packages or hooks into pydantic's schemas."""
    module = getattr(obj, "__module__", None)
    return (isinstance(module, str) and module.partition(".")[0] in _PYDANTIC_PACKAGES) or hasattr(obj, "__get_pydantic_core_schema__")


def is_pydantic_class(cls: Any) -> bool:
    """Whether `cls` is a class pydantic validates and dumps: defined in pydantic or a subclass of
    one of its classes, a pydantic dataclass, or a class of its own that tells pydantic its schema
    (`__get_pydantic_core_schema__`, as pydantic-extra-types do). Never imports pydantic."""
    if "pydantic" not in sys.modules or not isinstance(cls, type):
        return False
    if dataclasses.is_dataclass(cls) and "__pydantic_validator__" in vars(cls):
        return True
    return any(_from_pydantic(base) for base in cls.__mro__[:-1])


def is_pydantic(tp: Any) -> bool:
    """Whether annotation `tp` involves pydantic anywhere: a pydantic class (see `is_pydantic_class`),
    or pydantic or annotated_types metadata (or metadata hooking into pydantic) in an `Annotated`, at
    any depth (`list[Model] | None`)."""
    if "pydantic" not in sys.modules:
        return False
    if is_pydantic_class(tp):
        return True
    if get_origin(tp) is Annotated and any(_from_pydantic(type(item)) for item in tp.__metadata__):
        return True
    return any(is_pydantic(arg) for arg in get_args(tp))


def dump(value: Any) -> Any:
    """The JSON form of a value of a pydantic class, as pydantic writes it (by alias).

    Raises:
        TypeError: pydantic cannot serialize it (a field holding an arbitrary object, say).
    """
    import pydantic_core  # loaded already: `value` is an instance of one of pydantic's classes

    try:
        if hasattr(value, "model_dump"):
            return value.model_dump(mode="json", by_alias=True)
        return pydantic_core.to_jsonable_python(value, by_alias=True)
    except pydantic_core.PydanticSerializationError as exc:
        raise TypeError(f"cannot convert {type(value).__qualname__} to JSON: {exc!s:.200}") from None


class PydanticType:
    """One annotation pydantic handles: its schemas, and the converter that validates an argument.

    Built once per parameter or return value, when a tool is registered.

    Raises:
        TypeError: pydantic cannot build a validator or a JSON Schema for the annotation, or the
            schema is recursive; the message starts with `where`.
    """

    def __init__(self, tp: Any, where: str) -> None:
        import pydantic  # loaded already: `tp` involves one of its classes (see `is_pydantic`)

        self._where = where
        try:
            self._adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(tp)
        except (pydantic.PydanticUserError, NameError, TypeError) as exc:
            raise TypeError(f"{where}: pydantic cannot validate {tp!r}: {exc}") from exc

    def schema(self, *, output: bool) -> dict[str, Any]:
        """Pydantic's JSON Schema for arguments (validation mode) or results (serialization mode),
        by alias, inlined."""
        import pydantic
        from pydantic.json_schema import GenerateJsonSchema

        class _NoFieldTitles(GenerateJsonSchema):
            """Pydantic's generator without the titles it derives from field names ("Due Date"
            for `due_date`): noise a model reads with every listing. A `Field(title=...)` stays."""

            def field_title_should_be_set(self, schema: Any) -> bool:
                return False

        try:
            raw = self._adapter.json_schema(by_alias=True, mode="serialization" if output else "validation",
                                            schema_generator=_NoFieldTitles)
        except pydantic.PydanticUserError as exc:
            raise TypeError(f"{self._where}: no JSON Schema for this annotation: {exc}") from exc
        inlined: dict[str, Any] = _Inliner(raw.pop("$defs", {}), self._where).expand(raw, ())
        return inlined

    def convert(self, value: Any) -> Any:
        """Validate the JSON value a client sent, in pydantic's JSON mode, into what the annotation
        promises (the model instance).

        Raises:
            FieldErrors: pydantic refused it; at most `SHOWN_ERRORS` of its errors are quoted.
        """
        import pydantic

        try:
            # allow_nan: a number too large for a double arrives as inf, and pydantic reads it back
            # as such (`Infinity`); its own `allow_inf_nan` decides whether the field takes it.
            text = ujson.dumps(value, ensure_ascii=False, escape_forward_slashes=False, allow_nan=True)
            return self._adapter.validate_json(text)
        except pydantic.ValidationError as exc:
            depth = nesting(value) if _first_type(exc) == "json_invalid" else 0  # of JSON written just now
            if depth > _DEEP:
                raise FieldErrors([("", TOO_DEEP.format(depth))], 1) from None
            raise _field_errors(exc) from None
        except OverflowError:  # ujson refuses to write past 1024 levels
            raise FieldErrors([("", TOO_DEEP.format(nesting(value)))], 1) from None


def _first_type(exc: Any) -> str | None:
    """The type of a `ValidationError`'s first error, read without listing them all."""
    return next((str(error.get("type")) for error in _errors(exc, 1)), None)


def _field_errors(exc: Any) -> FieldErrors:
    """The first few of a `ValidationError`'s errors as (path, message).

    Read from the error's JSON, not `exc.errors()`: that builds a dict per error (some 800 bytes
    each, measured), and a frame of a million wrong list items has a million errors. The JSON is one
    string of about a hundred bytes per error, of which only the first few are parsed.
    """
    shown = [("/".join(str(part) for part in error.get("loc", ())), str(error.get("msg", ""))) for error in _errors(exc, SHOWN_ERRORS)]
    return FieldErrors(shown, exc.error_count())


def _errors(exc: Any, most: int) -> list[dict[str, Any]]:
    """The first `most` errors of a `ValidationError`, parsed from its compact JSON array."""
    import json  # deferred: only a pydantic model's refused argument gets here

    text = exc.json(include_url=False, include_context=False, include_input=False)
    decoder = json.JSONDecoder()
    errors: list[dict[str, Any]] = []
    at = 1  # past the "["
    while len(errors) < most and at < len(text) and text[at] != "]":
        error, at = decoder.raw_decode(text, at)
        while at < len(text) and text[at] in ", \n":
            at += 1
        errors.append(error)
    return errors


class _Inliner:
    """Replaces every `{"$ref": "#/$defs/Name"}` with a copy of that definition (the reference's
    sibling keywords, such as a field's description, kept over the definition's)."""

    def __init__(self, defs: dict[str, Any], where: str) -> None:
        self._defs = defs
        self._where = where

    def expand(self, node: Any, open_: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [self.expand(item, open_) for item in node]
        if not isinstance(node, dict):
            return node
        out = {key: value if key in _DATA_KEYWORDS else self.expand(value, open_)
               for key, value in node.items() if key != "$ref"}
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS) and ref[len(_DEFS):] in self._defs:
            name = ref[len(_DEFS):]
            if name in open_:
                raise TypeError(f"{self._where}: {name} contains itself; recursive types are not supported")
            out = self.expand(self._defs[name], (*open_, name)) | out
        elif ref is not None:
            out["$ref"] = ref
        discriminator = out.get("discriminator")
        if isinstance(discriminator, dict) and "mapping" in discriminator:  # its values are $refs into $defs
            out["discriminator"] = {key: value for key, value in discriminator.items() if key != "mapping"}
        return _merge_single_all_of(out)


def _merge_single_all_of(schema: dict[str, Any]) -> dict[str, Any]:
    """`{"allOf": [S], "description": ...}` (how pydantic before 2.9 described a field holding a
    model) as the one schema it means, when no keyword clashes."""
    all_of = schema.get("allOf")
    if not (isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict)):
        return schema
    rest = {key: value for key, value in schema.items() if key != "allOf"}
    if rest.keys() & all_of[0].keys():
        return schema
    return all_of[0] | rest
