"""Services: named groups of tools, prompts and resources built from plain functions.

Strategy: the entry classes (`Tool`, `Prompt`, `Resource`, `ResourceTemplate`, each in a module of
its own) can be built directly; the `Service` decorators are sugar that build one from a function
(schema from type hints, description from the docstring) and return the function unchanged, so it
stays unit-testable. Entries are immutable once built; a service that changes its own entries at
runtime tells its listeners, and the catalog above it swaps in a new snapshot.

The entry classes and their helpers are importable from here too, where they were first defined.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal, TypeVar, overload

from ..protocol.uri_template import UriTemplate
from .cache_hint import CacheHint as CacheHint
from .completion import Completer as Completer
from .completion import completion_result as completion_result
from .icons import Icon as Icon
from .prompt import Prompt as Prompt
from .resource import Resource as Resource
from .resource import ResourceTemplate as ResourceTemplate
from .resource import resource_not_found as resource_not_found
from .tool import Tool as Tool
from .tool import error_result as error_result

F = TypeVar("F", bound=Callable[..., Any])
"""A function the decorators register: they return it unchanged."""

E = TypeVar("E")
"""The entry a decorator builds from the function."""

Listener = Callable[[frozenset[str]], None]
"""Called with the kinds that changed: a subset of {"tools", "prompts", "resources"}."""


def _registrar(entry: Callable[..., E], options: dict[str, Any], add: Callable[[E], None]) -> Callable[[F], F]:
    """A decorator that builds `entry(func, **options)`, hands it to `add`, and returns the function
    unchanged (its type too). The keywords are checked against the entry's now, so an unknown one
    fails at the decorator's call, where it is written, not later when the decorator is applied."""
    inspect.signature(entry).bind_partial(**options)

    def register(func: F) -> F:
        add(entry(func, **options))
        return func

    return register


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
    # The overloads are the signatures callers and the reference see; the implementations pass the
    # keywords on to the entry's class, which holds each keyword's default and meaning.
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
        icons: Iterable[Icon | Mapping[str, Any]] = (),
        requires: dict[str, Any] | None = None,
        scopes: Iterable[str] = (),
        single_use_state: bool = False,
        task: Literal["forbidden", "optional", "required"] = "forbidden",
    ) -> Callable[[F], F]: ...

    def tool(self, fn: F | None = None, **options: Any) -> F | Callable[[F], F]:
        """Register a function as a tool: `@service.tool` or `@service.tool(name=..., ...)`.

        The keywords are those of `Tool`. The function is returned unchanged (its type too, for
        type checkers).
        """
        register = _registrar(Tool, options, self.add_tool)
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
        icons: Iterable[Icon | Mapping[str, Any]] = (),
        meta: dict[str, Any] | None = None,
    ) -> Callable[[F], F]: ...

    def prompt(self, fn: F | None = None, **options: Any) -> F | Callable[[F], F]:
        """Register a function as a prompt: `@service.prompt` or `@service.prompt(complete={...})`;
        the keywords are those of `Prompt`."""
        register = _registrar(Prompt, options, self.add_prompt)
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
        paths: Iterable[str] = (),
        icons: Iterable[Icon | Mapping[str, Any]] = (),
        meta: dict[str, Any] | None = None,
        cache: CacheHint | None = None,
    ) -> Callable[[F], F]:
        """Register a function as a resource; a URI with `{variables}` (RFC 6570) makes it a
        template (and only a template has variables to `complete`, or `paths`). The keywords are
        those of `Resource` and `ResourceTemplate`.

        Raises:
            ValueError: a malformed URI template, or one that cannot be matched (`UriTemplate`).
        """

        def register(func: F) -> F:
            if UriTemplate(uri).variables:
                self.add_template(ResourceTemplate(
                    func, uri, name=name, title=title, description=description, mime_type=mime_type, complete=complete, scopes=scopes, paths=paths,
                    icons=icons, meta=meta, cache=cache,
                ))
            else:
                if complete is not None or paths:
                    raise TypeError(f"resource {uri!r} has no template variables to complete or to take paths")
                self.add_resource(Resource(
                    func, uri, name=name, title=title, description=description, mime_type=mime_type, scopes=scopes, icons=icons, meta=meta,
                    cache=cache,
                ))
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
        with self._changing(kind):
            table[key] = entry

    def _drop(self, table: dict[str, Any], key: str, kind: str) -> None:
        with self._changing(kind):
            if table.pop(key, None) is None:
                raise KeyError(f"service {self.name!r} has no {kind[:-1]} {key!r}")

    @contextmanager
    def _changing(self, kind: str) -> Iterator[None]:
        """Change a table under the lock, then tell the listeners of that moment, outside it (a
        listener may read the service); a change that raises tells no one."""
        with self._lock:
            yield
            listeners = tuple(self._listeners)
        for listener in listeners:
            listener(frozenset((kind,)))
