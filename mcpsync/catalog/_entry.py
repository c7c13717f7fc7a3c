"""What tools, prompts and resources share: how the function behind an entry is called (its
arguments bound to the parameters' types, its `Context` passed) and the optional fields every
definition carries.

Why apart: the three kinds call their functions the same way and describe themselves on the wire
with the same fields; each kind's module keeps only what is its own.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from .context import Context
from .schema import FunctionShape, bind_arguments, invoke
from .validation import FieldErrors, clip


def context_param(fn: Callable[..., Any]) -> str | None:
    """The name of the function's `Context` parameter, if it has one (for a function described by
    a schema given by hand, which `describe_function` did not read)."""
    hints = typing.get_type_hints(fn)
    for name, hint in hints.items():
        if name != "return" and (hint is Context or Context in typing.get_args(hint)):
            return name
    return None


def call_with_context(fn: Callable[..., Any], kwargs: dict[str, Any], context_param: str | None, ctx: Context | None) -> Any:
    if context_param is not None:
        kwargs[context_param] = ctx
    return fn(**kwargs)


def has_positional_only(fn: Callable[..., Any]) -> bool:
    return any(p.kind is inspect.Parameter.POSITIONAL_ONLY for p in inspect.signature(fn).parameters.values())


Refuse = Callable[[FieldErrors], Exception]
"""Turns why a value the schema allowed is refused by its type into the exception to raise."""


def _bind(shape: FunctionShape, arguments: dict[str, Any], refuse: Refuse) -> dict[str, Any]:
    """Validated JSON → Python arguments; a value the schema allowed but the type refuses (a string
    that is no ISO date, say, or a model pydantic rejects) is `refuse`d, with the converter's
    message cut short (it may quote the whole value)."""
    try:
        return bind_arguments(shape, arguments)
    except FieldErrors as exc:
        raise refuse(exc) from None
    except ValueError as exc:
        raise refuse(FieldErrors([("", clip(str(exc)))], 1)) from None


def call_shaped(fn: Callable[..., Any], shape: FunctionShape, arguments: dict[str, Any], ctx: Context | None, refuse: Refuse, positional_only: bool) -> Any:
    """Call a function its shape was read from, with its arguments converted to the parameters' types."""
    kwargs = _bind(shape, arguments, refuse)
    if positional_only:  # rare: let the schema module map names onto positions
        return invoke(shape, fn, arguments, ctx)
    return call_with_context(fn, kwargs, shape.context_param, ctx)


def describe(
    wire: dict[str, Any], title: str | None, description: str | None, mime_type: str | None = None,
    icons: tuple[dict[str, Any], ...] = (), meta: dict[str, Any] | None = None,
) -> None:
    """Add the optional fields of a definition, each only when set (an empty one is left out)."""
    if title:
        wire["title"] = title
    if description:
        wire["description"] = description
    if mime_type:
        wire["mimeType"] = mime_type
    if icons:
        wire["icons"] = [dict(icon) for icon in icons]
    if meta:
        wire["_meta"] = meta
