"""Services: named groups of tools, prompts and resources built from plain functions.

Strategy: the entry classes (`Tool`, `Prompt`, `Resource`, `ResourceTemplate`) can be built directly;
the `Service` decorators are sugar that build one from a function (schema from type hints, description
from the docstring) and return the function unchanged, so it stays unit-testable. Entries are
immutable once built; a service that changes its own entries at runtime tells its listeners, and the
catalog above it swaps in a new snapshot.
"""

from __future__ import annotations

import inspect
import logging
import re
import threading
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from ..auth.resource.principal import checked_scopes
from ..protocol.jsonrpc import ErrorCode, McpError, invalid_params
from . import content
from .context import Context
from .schema import FunctionShape, bind_arguments, describe_function, invoke, structured_output, to_jsonable
from .validation import ArgumentValidator, FieldErrors, InvalidArguments, SchemaCheck, check_schema, clip

log = logging.getLogger("mcpsync")

Completer = Iterable[str] | Callable[[str, Mapping[str, str]], Iterable[str]]
"""Completion values for one argument: a fixed list filtered by prefix, or a function of the
partial value and the other arguments already given."""

F = TypeVar("F", bound=Callable[..., Any])
"""A function the decorators register: they return it unchanged."""

Listener = Callable[[frozenset[str]], None]
"""Called with the kinds that changed: a subset of {"tools", "prompts", "resources"}."""

_PASSTHROUGH = (content.Image, content.Audio, content.ToolResult)
_MAX_COMPLETIONS = 100


def _context_param(fn: Callable[..., Any]) -> str | None:
    hints = typing.get_type_hints(fn)
    for name, hint in hints.items():
        if name != "return" and (hint is Context or Context in typing.get_args(hint)):
            return name
    return None


def _call_with_context(fn: Callable[..., Any], kwargs: dict[str, Any], context_param: str | None, ctx: Context) -> Any:
    if context_param is not None:
        kwargs[context_param] = ctx
    return fn(**kwargs)


def _has_positional_only(fn: Callable[..., Any]) -> bool:
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


def _call_shaped(fn: Callable[..., Any], shape: FunctionShape, arguments: dict[str, Any], ctx: Context, refuse: Refuse, positional_only: bool) -> Any:
    kwargs = _bind(shape, arguments, refuse)
    if positional_only:  # rare: let the schema module map names onto positions
        return invoke(shape, fn, arguments, ctx)
    return _call_with_context(fn, kwargs, shape.context_param, ctx)


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
        requires: dict[str, Any] | None = None,
        scopes: Iterable[str] = (),
        single_use_state: bool = False,
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
            self._context_param = _context_param(fn)
            doc = typing.cast(str, fn.__doc__ and fn.__doc__.strip()) or None
        self.description = description if description is not None else doc
        self.title = title
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.annotations = annotations
        self.meta = meta
        self._positional_only = _has_positional_only(fn)
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
        if self.title:
            wire["title"] = self.title
        if self.description:
            wire["description"] = self.description
        if self.output_schema:
            wire["outputSchema"] = self.output_schema
        if self.annotations:
            wire["annotations"] = self.annotations
        if self.meta:
            wire["_meta"] = self.meta
        return wire

    def validate(self, arguments: dict[str, Any]) -> None:
        """Raise `InvalidArguments` (a `ToolError`: the call's result is `isError: true`) naming the
        field and the rule when the arguments do not match the input schema."""
        self._validator.validate(arguments)

    def invoke(self, arguments: dict[str, Any], ctx: Context) -> Any:
        """Run the function with validated arguments; returns what it returned."""
        if self._shape is None:
            return _call_with_context(self.fn, dict(arguments), self._context_param, ctx)
        return _call_shaped(self.fn, self._shape, arguments, ctx, self._refuse, self._positional_only)

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
    return {"content": [{"type": "text", "text": message}], "isError": True}


def _filter_completions(source: Completer, value: str, arguments: Mapping[str, str]) -> list[str]:
    if callable(source):
        return [str(item) for item in source(value, arguments)]
    return [item for item in source if item.startswith(value)]


def completion_result(source: Completer | None, value: str, arguments: Mapping[str, str]) -> dict[str, Any]:
    values = _filter_completions(source, value, arguments) if source is not None else []
    completion: dict[str, Any] = {"values": values[:_MAX_COMPLETIONS], "total": len(values)}
    completion["hasMore"] = len(values) > _MAX_COMPLETIONS
    return {"completion": completion}


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
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.scopes = frozenset(checked_scopes(scopes, f"prompt {self.name!r}: scopes"))
        """OAuth scopes a caller's token needs to see and get it (see `Auth`)."""
        self._shape = describe_function(fn, context_type=Context)
        self._positional_only = _has_positional_only(fn)
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
        if self.title:
            wire["title"] = self.title
        if self.description:
            wire["description"] = self.description
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
        value = _call_shaped(self.fn, self._shape, values, ctx, self._refuse, self._positional_only)
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


_TEMPLATE_VAR = re.compile(r"\{(\+?)([A-Za-z_][A-Za-z0-9_]*)\}")


class _FunctionResource:
    """What a resource and a resource template share: the function behind them and how they are
    described (name from the function, description from its docstring unless given)."""

    def __init__(
        self, fn: Callable[..., Any], name: str | None, title: str | None, description: str | None, mime_type: str | None, scopes: Iterable[str]
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.scopes = frozenset(checked_scopes(scopes, f"resource {self.name!r}: scopes"))
        """OAuth scopes a caller's token needs to see and read it (see `Auth`)."""
        self.title = title
        self.description = description if description is not None else (fn.__doc__ and fn.__doc__.strip()) or None
        self.mime_type = mime_type
        self._context_param = _context_param(fn)

    def _definition(self, key: str, value: str) -> dict[str, Any]:
        wire: dict[str, Any] = {key: value, "name": self.name}
        _describe(wire, self.title, self.description, self.mime_type)
        return wire

    def _contents(self, uri: str, variables: dict[str, str], ctx: Context) -> list[dict[str, Any]]:
        return content.text_contents(uri, _call_with_context(self.fn, dict(variables), self._context_param, ctx), self.mime_type)


class Resource(_FunctionResource):
    """A resource at a fixed URI."""

    def __init__(
        self,
        fn: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        scopes: Iterable[str] = (),
    ) -> None:
        super().__init__(fn, name, title, description, mime_type, scopes)
        self.uri = uri

    def definition(self) -> dict[str, Any]:
        return self._definition("uri", self.uri)

    def read(self, uri: str, variables: dict[str, str], ctx: Context) -> list[dict[str, Any]]:
        return self._contents(uri, {}, ctx)


class ResourceTemplate(_FunctionResource):
    """Resources whose URIs match an RFC 6570 level-1/2 template (`{var}`, `{+var}`)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        uri_template: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        complete: Mapping[str, Completer] | None = None,
        scopes: Iterable[str] = (),
    ) -> None:
        super().__init__(fn, name, title, description, mime_type, scopes)
        self.uri_template = uri_template
        self.variables = tuple(match.group(2) for match in _TEMPLATE_VAR.finditer(uri_template))
        self._pattern = template_pattern(uri_template)
        self.completions: dict[str, Completer] = dict(complete or {})
        unknown = set(self.completions) - set(self.variables)
        if unknown:
            raise ValueError(f"resource template {uri_template!r}: completions for unknown variable(s) {sorted(unknown)}")

    def definition(self) -> dict[str, Any]:
        return self._definition("uriTemplate", self.uri_template)

    def match(self, uri: str) -> dict[str, str] | None:
        found = self._pattern.fullmatch(uri)
        return found.groupdict() if found else None

    def complete(self, argument: str, value: str, given: Mapping[str, str]) -> dict[str, Any]:
        """The `completion/complete` result for one of this template's variables."""
        if argument not in self.variables:
            raise invalid_params(f"Resource template '{self.uri_template}' has no variable '{argument}'")
        return completion_result(self.completions.get(argument), value, given)

    def read(self, uri: str, variables: dict[str, str], ctx: Context) -> list[dict[str, Any]]:
        return self._contents(uri, variables, ctx)


def template_pattern(template: str) -> re.Pattern[str]:
    """A regex matching the URIs of an RFC 6570 level-1/2 template, with a group per variable."""
    return re.compile(_template_regex(template))


def _template_regex(template: str) -> str:
    parts, last = [], 0
    for match in _TEMPLATE_VAR.finditer(template):
        parts.append(re.escape(template[last : match.start()]))
        allowed = ".+?" if match.group(1) else "[^/?#]+"
        parts.append(f"(?P<{match.group(2)}>{allowed})")
        last = match.end()
    parts.append(re.escape(template[last:]))
    return "".join(parts)


def _describe(wire: dict[str, Any], title: str | None, description: str | None, mime_type: str | None) -> None:
    if title:
        wire["title"] = title
    if description:
        wire["description"] = description
    if mime_type:
        wire["mimeType"] = mime_type


class Service:
    """A named group of tools, prompts and resources.

    Build one, decorate functions onto it, and give it to a `Server`. Entries can be added and
    removed at any time; the server's clients are told about the change.
    """

    def __init__(self, name: str, *, instructions: str | None = None) -> None:
        self.name = name
        self.instructions = instructions
        self._lock = threading.Lock()
        self._tools: dict[str, Tool] = {}
        self._prompts: dict[str, Prompt] = {}
        self._resources: dict[str, Resource] = {}
        self._templates: dict[str, ResourceTemplate] = {}
        self._listeners: list[Listener] = []

    # -- reading ---------------------------------------------------------------------------------
    @property
    def tools(self) -> tuple[Tool, ...]:
        return tuple(self._tools.values())

    @property
    def prompts(self) -> tuple[Prompt, ...]:
        return tuple(self._prompts.values())

    @property
    def resources(self) -> tuple[Resource, ...]:
        return tuple(self._resources.values())

    @property
    def templates(self) -> tuple[ResourceTemplate, ...]:
        return tuple(self._templates.values())

    # -- decorators ------------------------------------------------------------------------------
    @overload
    def tool(self, fn: F) -> F: ...

    @overload
    def tool(
        self,
        fn: None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        annotations: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        requires: dict[str, Any] | None = None,
        scopes: Iterable[str] = (),
        single_use_state: bool = False,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        fn: F | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        annotations: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        requires: dict[str, Any] | None = None,
        scopes: Iterable[str] = (),
        single_use_state: bool = False,
    ) -> F | Callable[[F], F]:
        """Register a function as a tool: `@service.tool` or `@service.tool(name=..., ...)`.

        The keywords are those of `Tool`. The function is returned unchanged (its type too, for
        type checkers).
        """
        def register(func: F) -> F:
            tool = Tool(
                func,
                name=name,
                title=title,
                description=description,
                input_schema=input_schema,
                output_schema=output_schema,
                annotations=annotations,
                meta=meta,
                requires=requires,
                scopes=scopes,
                single_use_state=single_use_state,
            )
            self.add_tool(tool)
            return func

        return register(fn) if fn is not None else register

    @overload
    def prompt(self, fn: F) -> F: ...

    @overload
    def prompt(
        self,
        fn: None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        complete: Mapping[str, Completer] | None = None,
        scopes: Iterable[str] = (),
    ) -> Callable[[F], F]: ...

    def prompt(
        self,
        fn: F | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        complete: Mapping[str, Completer] | None = None,
        scopes: Iterable[str] = (),
    ) -> F | Callable[[F], F]:
        """Register a function as a prompt: `@service.prompt` or `@service.prompt(complete={...})`;
        the keywords are those of `Prompt`."""
        def register(func: F) -> F:
            self.add_prompt(Prompt(func, name=name, title=title, description=description, complete=complete, scopes=scopes))
            return func

        return register(fn) if fn is not None else register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        complete: Mapping[str, Completer] | None = None,
        scopes: Iterable[str] = (),
    ) -> Callable[[F], F]:
        """Register a function as a resource; a URI with `{variables}` makes it a template (and
        only a template has variables to `complete`). The keywords are those of `Resource` and
        `ResourceTemplate`."""
        def register(func: F) -> F:
            if _TEMPLATE_VAR.search(uri):
                self.add_template(
                    ResourceTemplate(func, uri, name=name, title=title, description=description, mime_type=mime_type, complete=complete, scopes=scopes)
                )
            else:
                if complete is not None:
                    raise TypeError(f"resource {uri!r} has no template variables to complete")
                self.add_resource(Resource(func, uri, name=name, title=title, description=description, mime_type=mime_type, scopes=scopes))
            return func

        return register

    # -- changing --------------------------------------------------------------------------------
    def add_tool(self, tool: Tool) -> None:
        self._put(self._tools, tool.name, tool, "tools")

    def remove_tool(self, name: str) -> None:
        self._drop(self._tools, name, "tools")

    def add_prompt(self, prompt: Prompt) -> None:
        self._put(self._prompts, prompt.name, prompt, "prompts")

    def remove_prompt(self, name: str) -> None:
        self._drop(self._prompts, name, "prompts")

    def add_resource(self, resource: Resource) -> None:
        self._put(self._resources, resource.uri, resource, "resources")

    def add_template(self, template: ResourceTemplate) -> None:
        self._put(self._templates, template.uri_template, template, "resources")

    def remove_resource(self, uri: str) -> None:
        """Remove a resource or a resource template by its URI (template)."""
        table = self._resources if uri in self._resources else self._templates
        self._drop(table, uri, "resources")

    def add_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def _put(self, table: dict[str, Any], key: str, entry: Any, kind: str) -> None:
        with self._lock:
            table[key] = entry
            listeners = tuple(self._listeners)
        for listener in listeners:
            listener(frozenset((kind,)))

    def _drop(self, table: dict[str, Any], key: str, kind: str) -> None:
        with self._lock:
            if table.pop(key, None) is None:
                raise KeyError(f"service {self.name!r} has no {kind[:-1]} {key!r}")
            listeners = tuple(self._listeners)
        for listener in listeners:
            listener(frozenset((kind,)))


def resource_not_found(uri: str, *, modern: bool) -> McpError:
    if modern:
        return McpError(ErrorCode.INVALID_PARAMS, "Resource not found", {"uri": uri})
    return McpError(ErrorCode.RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})
