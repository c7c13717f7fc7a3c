"""Prompt: a function that turns named arguments into the messages of a prompt template.

Strategy: prompt arguments travel as strings, so a parameter typed `int`, `float` or `bool` is
converted here before the function is called; the arguments a client may send, and whether each is
required, are read from the function's signature, as a tool's input schema is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..auth.resource.principal import checked_scopes
from ..protocol.jsonrpc import McpError, invalid_params
from . import content
from ._entry import call_shaped, describe, has_positional_only
from .completion import Completer, completion_result
from .context import Context
from .icons import Icon, checked_icons
from .schema import describe_function
from .validation import FieldErrors


@dataclass(frozen=True, slots=True)
class _Argument:
    name: str
    description: str | None
    required: bool
    json_type: str | None


class Prompt:
    """A prompt template: named string arguments in, messages out."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        complete: Mapping[str, Completer] | None = None,
        scopes: Iterable[str] = (),
        icons: Iterable[Icon | Mapping[str, Any]] = (),
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.icons = checked_icons(icons, f"prompt {self.name!r}")
        self.meta = meta
        self.scopes = frozenset(checked_scopes(scopes, f"prompt {self.name!r}: scopes"))
        """OAuth scopes a caller's token needs to see and get it (see `Auth`)."""
        self._shape = describe_function(fn, context_type=Context)
        self._positional_only = has_positional_only(fn)
        schema = self._shape.input_schema
        required = set(schema.get("required", ()))
        self.arguments = tuple(
            _Argument(arg, prop.get("description"), arg in required, prop.get("type") if isinstance(prop.get("type"), str) else None)
            for arg, prop in schema.get("properties", {}).items()
        )
        self.title = title
        self.description = description if description is not None else self._shape.description
        self.completions: dict[str, Completer] = dict(complete or {})
        unknown = set(self.completions) - {arg.name for arg in self.arguments}
        if unknown:
            raise ValueError(f"prompt {self.name!r}: completions for unknown argument(s) {sorted(unknown)}")

    def definition(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name}
        describe(wire, self.title, self.description, icons=self.icons, meta=self.meta)
        arguments = []
        for arg in self.arguments:
            entry: dict[str, Any] = {"name": arg.name, "required": arg.required}
            if arg.description:
                entry["description"] = arg.description
            arguments.append(entry)
        if arguments:
            wire["arguments"] = arguments
        return wire

    def complete(self, argument: str, value: str, given: Mapping[str, str]) -> dict[str, Any]:
        """The `completion/complete` result for one of this prompt's arguments."""
        if argument not in {arg.name for arg in self.arguments}:
            raise invalid_params(f"Prompt '{self.name}' has no argument '{argument}'")
        return completion_result(self.completions.get(argument), value, given)

    def get(self, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """The `GetPromptResult`; raises -32602 for missing, unknown or mistyped arguments."""
        known = {arg.name: arg for arg in self.arguments}
        unknown = sorted(set(arguments) - set(known))
        if unknown:
            raise invalid_params(f"Unknown argument(s) for prompt '{self.name}': {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for arg in self.arguments:
            if arg.name not in arguments:
                if arg.required:
                    raise invalid_params(f"Missing required argument '{arg.name}' for prompt '{self.name}'")
                continue
            raw = arguments[arg.name]
            if not isinstance(raw, str):
                raise invalid_params(f"Argument '{arg.name}' of prompt '{self.name}' must be a string")
            values[arg.name] = _from_string(raw, arg, self.name)
        value = call_shaped(self.fn, self._shape, values, ctx, self._refuse, self._positional_only)
        messages = content.prompt_messages(value)
        result: dict[str, Any] = {"messages": messages}
        if self.description:
            result["description"] = self.description
        return result

    def _refuse(self, errors: FieldErrors) -> McpError:
        return invalid_params(errors.describe(f"Invalid arguments for prompt '{self.name}'"))


def _from_string(raw: str, arg: _Argument, prompt: str) -> Any:
    """Prompt arguments travel as strings; convert to the parameter's declared JSON type."""
    try:
        if arg.json_type == "integer":
            return int(raw)
        if arg.json_type == "number":
            return float(raw)
        if arg.json_type == "boolean":
            lowered = raw.strip().lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(raw)
            return lowered in ("true", "1", "yes")
    except ValueError:
        raise invalid_params(f"Argument '{arg.name}' of prompt '{prompt}' must be a {arg.json_type}, got {raw!r}") from None
    return raw
