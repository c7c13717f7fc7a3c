"""Tool: a function a client calls, its input and output schemas, and what its return value becomes
on the wire (`CallToolResult`).

Strategy: the schemas come from the type hints and the description from the docstring unless they
are given; a schema given by hand is checked when the tool is built, so a bad one fails where it is
written, not at the first call. A call's arguments are checked against the input schema (`validate`)
before the function runs, and what it returns against the output schema (`to_result`).
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..auth.resource.principal import checked_scopes
from . import content
from ._entry import call_shaped, call_with_context, context_param, describe, has_positional_only
from .context import Context
from .icons import Icon, checked_icons
from .schema import FunctionShape, describe_function, structured_output, to_jsonable
from .validation import ArgumentValidator, FieldErrors, InvalidArguments, SchemaCheck, check_schema

_PASSTHROUGH = (content.Image, content.Audio, content.ToolResult)

TASK_SUPPORT = ("forbidden", "optional", "required")
"""A tool's `task=`: the 2025-11-25 `execution.taskSupport` values, which 2026-07-28 keeps as the
server's own policy (the extension leaves it to the server whether a call becomes a task)."""


class Tool:
    """A callable tool: its wire definition plus the function behind it."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        annotations: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        icons: Iterable[Icon | Mapping[str, Any]] = (),
        requires: dict[str, Any] | None = None,
        scopes: Iterable[str] = (),
        single_use_state: bool = False,
        task: str = "forbidden",
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.requires = requires or {}
        """Client capabilities this tool needs, e.g. `{"elicitation": {}}`; calls without them fail."""
        self.scopes = frozenset(checked_scopes(scopes, f"tool {self.name!r}: scopes"))
        """OAuth scopes a caller's token needs to see and call it (see `Auth`); none: every caller."""
        if not isinstance(single_use_state, bool):
            raise TypeError(f"tool {self.name!r}: single_use_state must be a bool")
        self.single_use_state = single_use_state
        """A 2026-07-28 retry's `requestState` runs it at most once, on any replica sharing the
        engine's store of used states: for a tool whose effect must not happen twice (a payment,
        a booking) when a client sends the same retry again. A second use is refused -32602
        (`data.reason: "replayed"`; see `mcpsync.engine.single_use`)."""
        if task not in TASK_SUPPORT:
            raise ValueError(f"tool {self.name!r}: task must be one of {', '.join(map(repr, TASK_SUPPORT))}, not {task!r}")
        self.task = task
        """Whether a call runs as a task the client polls (`mcpsync.tasks`): "forbidden" (never),
        "optional" (when the client can take one) or "required" (a client that cannot is refused)."""
        self._shape: FunctionShape | None = None
        if input_schema is None:
            self._shape = describe_function(fn, context_type=Context, passthrough_types=_PASSTHROUGH)
            input_schema = self._shape.input_schema
            self._context_param = self._shape.context_param
            if output_schema is None:
                output_schema = self._shape.output_schema
            doc = self._shape.description
        else:
            check_schema(input_schema)
            self._context_param = context_param(fn)
            doc = typing.cast(str, fn.__doc__ and fn.__doc__.strip()) or None
        self.description = description if description is not None else doc
        self.title = title
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.annotations = annotations
        self.meta = meta
        self.icons = checked_icons(icons, f"tool {self.name!r}")
        self._positional_only = has_positional_only(fn)
        self._validator = ArgumentValidator(input_schema if self._shape is None else self._shape.validation_schema, f"tool '{self.name}'")
        self._output_check = SchemaCheck(output_schema) if output_schema else None

    @property
    def takes_context(self) -> bool:
        """Whether the function has a `Context` parameter (and so may report progress, log, or
        watch for cancellation while it runs)."""
        return self._context_param is not None

    def definition(self) -> dict[str, Any]:
        """The `Tool` object of `tools/list`."""
        wire: dict[str, Any] = {"name": self.name, "inputSchema": self.input_schema}
        describe(wire, self.title, self.description, icons=self.icons)
        if self.output_schema:
            wire["outputSchema"] = self.output_schema
        if self.annotations:
            wire["annotations"] = self.annotations
        if self.meta:
            wire["_meta"] = self.meta
        if self.task != "forbidden":
            wire["execution"] = {"taskSupport": self.task}
        return wire

    def validate(self, arguments: dict[str, Any]) -> None:
        """Raise `InvalidArguments` (a `ToolError`: the call's result is `isError: true`) naming the
        field and the rule when the arguments do not match the input schema."""
        self._validator.validate(arguments)

    def invoke(self, arguments: dict[str, Any], ctx: Context | None) -> Any:
        """Run the function with validated arguments; returns what it returned. `ctx` may be None
        for a function that takes no Context (`takes_context`): the engine then makes none."""
        if self._shape is None:
            return call_with_context(self.fn, dict(arguments), self._context_param, ctx)
        return call_shaped(self.fn, self._shape, arguments, ctx, self._refuse, self._positional_only)

    def _refuse(self, errors: FieldErrors) -> InvalidArguments:
        return InvalidArguments(errors.describe(f"Invalid arguments for tool '{self.name}'"), errors.field)

    def to_result(self, value: Any) -> dict[str, Any]:
        """The `CallToolResult` for a return value."""
        if isinstance(value, content.ToolResult):
            blocks = [content.to_block(item) for item in value.content]
            result: dict[str, Any] = {"content": blocks, "isError": value.is_error}
            if value.structured is not None:
                result["structuredContent"] = to_jsonable(value.structured)
            return result
        if value is None:
            return {"content": [], "isError": False}
        if content.is_content_block(value) or isinstance(value, (str, bytes, bytearray)):
            return {"content": [content.to_block(value)], "isError": False}
        if content.is_block_list(value):
            return {"content": [content.to_block(item) for item in value], "isError": False}
        plain = to_jsonable(value)
        result = {"content": [{"type": "text", "text": content.dumps_text(plain)}], "isError": False}
        if self._shape is not None and self.output_schema is not None:
            structured = structured_output(self._shape, value)
        else:
            structured = plain if type(plain) is dict else None
        if structured is not None:
            problem = self._output_check.problem(structured) if self._output_check is not None else None
            if problem is not None:
                return error_result(problem.describe(f"Tool '{self.name}' returned output that does not match its outputSchema"))
            result["structuredContent"] = structured
        return result


def error_result(message: str) -> dict[str, Any]:
    """A `CallToolResult` that reports a failure to the model (`isError: true`), not as a protocol error."""
    return {"content": [{"type": "text", "text": message}], "isError": True}
