"""Resource and ResourceTemplate: functions that return what lives at a URI, one fixed URI or every
URI an RFC 6570 template matches (all four levels: `{var}`, `{+path}`, `{/segments*}`, `{.ext}`,
`{?q,lang}`, `{var:3}`..., see `mcpsync.protocol.uri_template`).

Strategy: both are a function described the same way (`_FunctionResource`); a template adds its
parsed `UriTemplate`, which matches a URI in linear time, and the variables a client may complete.
The gateway matches an upstream's templates the same way.

The values a URI gives are the client's words, and a function often makes a path of them. So,
unless a template exempts a variable (`paths=`), a value holding a `..` segment, an absolute path
or a NUL is refused (-32602) before the function runs, however it was encoded (`%2E%2E%2F`
decodes to `../`); refused, not passed over, so a later, more permissive template is never tried.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..auth.resource.principal import checked_scopes
from ..protocol.jsonrpc import ErrorCode, McpError, invalid_params
from ..protocol.uri_template import UriTemplate
from . import content
from ._entry import call_with_context, context_param, describe
from .cache_hint import CacheHint
from .completion import Completer, completion_result
from .context import Context
from .icons import Icon, checked_icons

_DRIVE = re.compile(r"[A-Za-z]:[\\/]")


class _FunctionResource:
    """What a resource and a resource template share: the function behind them and how they are
    described (name from the function, description from its docstring unless given)."""

    def __init__(
        self, fn: Callable[..., Any], name: str | None, title: str | None, description: str | None, mime_type: str | None, scopes: Iterable[str],
        icons: Iterable[Icon | Mapping[str, Any]], meta: dict[str, Any] | None, cache: CacheHint | None,
    ) -> None:
        self.fn = fn
        if cache is not None and not isinstance(cache, CacheHint):
            raise TypeError(f"resource {name or fn.__name__!r}: cache must be a CacheHint")
        self.cache = cache
        """How long a 2026-07-28 client may keep what a read of it gives (None: the server's hint)."""
        self.name = name or fn.__name__
        self.icons = checked_icons(icons, f"resource {self.name!r}")
        self.meta = meta
        self.scopes = frozenset(checked_scopes(scopes, f"resource {self.name!r}: scopes"))
        """OAuth scopes a caller's token needs to see and read it (see `Auth`)."""
        self.title = title
        self.description = description if description is not None else (fn.__doc__ and fn.__doc__.strip()) or None
        self.mime_type = mime_type
        self._context_param = context_param(fn)

    def _definition(self, key: str, value: str) -> dict[str, Any]:
        wire: dict[str, Any] = {key: value, "name": self.name}
        describe(wire, self.title, self.description, self.mime_type, self.icons, self.meta)
        return wire

    def _contents(self, uri: str, variables: dict[str, str | list[str]], ctx: Context) -> list[dict[str, Any]]:
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
        icons: Iterable[Icon | Mapping[str, Any]] = (),
        meta: dict[str, Any] | None = None,
        cache: CacheHint | None = None,
    ) -> None:
        super().__init__(fn, name, title, description, mime_type, scopes, icons, meta, cache)
        self.uri = uri

    def definition(self) -> dict[str, Any]:
        return self._definition("uri", self.uri)

    def read(self, uri: str, variables: dict[str, str | list[str]], ctx: Context) -> list[dict[str, Any]]:
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
        paths: Iterable[str] = (),
        icons: Iterable[Icon | Mapping[str, Any]] = (),
        meta: dict[str, Any] | None = None,
        cache: CacheHint | None = None,
    ) -> None:
        """`paths`: variables whose values may be any path (`..` segments, absolute paths); the
        others' are refused them (see the module's docstring).

        Raises:
            ValueError: a malformed template or one that cannot be matched (`UriTemplate`), or
                completions or `paths` naming a variable the template does not have.
        """
        super().__init__(fn, name, title, description, mime_type, scopes, icons, meta, cache)
        self.uri_template = uri_template
        self._template = UriTemplate(uri_template)
        self._template.check_matchable()
        self.variables = self._template.variables
        self.completions: dict[str, Completer] = dict(complete or {})
        self.paths = frozenset(paths)
        for what, names in (("completions", self.completions), ("paths", self.paths)):
            unknown = set(names) - set(self.variables)
            if unknown:
                raise ValueError(f"resource template {uri_template!r}: {what} for unknown variable(s) {sorted(unknown)}")

    def definition(self) -> dict[str, Any]:
        return self._definition("uriTemplate", self.uri_template)

    def match(self, uri: str) -> dict[str, str | list[str]] | None:
        """The URI's values, or None if it is not this template's.

        Raises:
            McpError: -32602, a value that is a path where none may be (see the module's docstring).
        """
        values = self._template.match(uri)
        if values is not None:
            refuse_paths(values, self.paths, self.uri_template)
        return values

    def complete(self, argument: str, value: str, given: Mapping[str, str]) -> dict[str, Any]:
        """The `completion/complete` result for one of this template's variables."""
        if argument not in self.variables:
            raise invalid_params(f"Resource template '{self.uri_template}' has no variable '{argument}'")
        return completion_result(self.completions.get(argument), value, given)

    def read(self, uri: str, variables: dict[str, str | list[str]], ctx: Context) -> list[dict[str, Any]]:
        return self._contents(uri, variables, ctx)


def refuse_paths(values: Mapping[str, str | list[str]], exempt: frozenset[str], template: str) -> None:
    """-32602 for the first value (or list item) of a variable not in `exempt` that holds a `..`
    segment, an absolute path (POSIX, Windows or UNC) or a NUL."""
    for name, value in values.items():
        if name in exempt:
            continue
        for item in value if isinstance(value, list) else (value,):
            if _is_path_attack(item):
                raise invalid_params(f"URI template {template!r}: the value of {name!r} is a path it may not be (.., absolute, or NUL)")


def _is_path_attack(value: str) -> bool:
    if "\0" in value or value.startswith(("/", "\\")) or _DRIVE.match(value):
        return True
    return ".." in re.split(r"[\\/]", value)


def resource_not_found(uri: str, *, modern: bool) -> McpError:
    """The error for a URI nothing here serves, with the URI in its data: -32602 in the 2026-07-28
    era, the handshake era's own -32002 before it."""
    if modern:
        return McpError(ErrorCode.INVALID_PARAMS, "Resource not found", {"uri": uri})
    return McpError(ErrorCode.RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})
