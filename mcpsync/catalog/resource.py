"""Resource and ResourceTemplate: functions that return what lives at a URI, one fixed URI or every
URI an RFC 6570 level-1/2 template (`{var}`, `{+var}`) matches.

Strategy: both are a function described the same way (`_FunctionResource`); a template adds the
regex its URIs are matched with, built once from the template, and the variables a client may
complete. The gateway matches an upstream's templates with the same regex (`template_pattern`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..auth.resource.principal import checked_scopes
from ..protocol.jsonrpc import ErrorCode, McpError, invalid_params
from . import content
from ._entry import call_with_context, context_param, describe
from .completion import Completer, completion_result
from .context import Context

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
        self._context_param = context_param(fn)

    def _definition(self, key: str, value: str) -> dict[str, Any]:
        wire: dict[str, Any] = {key: value, "name": self.name}
        describe(wire, self.title, self.description, self.mime_type)
        return wire

    def _contents(self, uri: str, variables: dict[str, str], ctx: Context) -> list[dict[str, Any]]:
        return content.text_contents(uri, call_with_context(self.fn, dict(variables), self._context_param, ctx), self.mime_type)


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
        self.variables = template_variables(uri_template)
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


def template_variables(template: str) -> tuple[str, ...]:
    """The names of a URI template's variables, in order; none: the URI is a fixed one."""
    return tuple(match.group(2) for match in _TEMPLATE_VAR.finditer(template))


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


def resource_not_found(uri: str, *, modern: bool) -> McpError:
    """The error for a URI nothing here serves, with the URI in its data: -32602 in the 2026-07-28
    era, the handshake era's own -32002 before it."""
    if modern:
        return McpError(ErrorCode.INVALID_PARAMS, "Resource not found", {"uri": uri})
    return McpError(ErrorCode.RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})
