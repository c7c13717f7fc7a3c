"""The catalog: one immutable snapshot of everything served, swapped whole on every change.

Strategy: requests read `catalog.snapshot` once and use it to the end, so a listing never sees half
a change. Writers (add/remove a service, a service changing its own entries) rebuild the snapshot
under a lock, swap it in, and only then tell the listeners which kinds changed: a client that
re-lists on the notification sees the new data. Earlier services win name clashes, with a warning.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .._process_groups import Watchdog
from ..protocol.jsonrpc import invalid_params
from .service import Prompt, Resource, ResourceTemplate, Service, Tool

log = logging.getLogger("mcpsync")

KINDS = frozenset({"tools", "prompts", "resources"})
ChangeListener = Callable[[frozenset[str]], None]
"""Told which kinds of list changed: a subset of {"tools", "prompts", "resources"}."""
UpdateListener = Callable[[str], None]
"""Told the URI of a resource whose content changed."""

CLOSE_REMOTES_WAIT = 10.0
"""Seconds `close_remotes()` waits for its remotes to stop (each bounds its own stop far below)."""

STALE = object()
"""What a remote source's `find_known` returns when its list is not known (or not fresh): only a
fetch could say. The catalog then declines to answer from what it knows."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Snapshot:
    tools: tuple[Tool, ...]
    prompts: tuple[Prompt, ...]
    resources: tuple[Resource, ...]
    templates: tuple[ResourceTemplate, ...]
    tool_index: dict[str, Tool]
    prompt_index: dict[str, Prompt]
    resource_index: dict[str, Resource]
    instructions: str | None

    def find_resource(self, uri: str) -> tuple[Resource | ResourceTemplate, dict[str, str | list[str]]] | None:
        """The resource at `uri`, or the first template matching it with its variables."""
        resource = self.resource_index.get(uri)
        if resource is not None:
            return resource, {}
        for template in self.templates:
            variables = template.match(uri)
            if variables is not None:
                return template, variables
        return None

    def find_template(self, uri_template: str) -> ResourceTemplate | None:
        for template in self.templates:
            if template.uri_template == uri_template:
                return template
        return None


def _merge(groups: Iterable[tuple[str, Iterable[T]]], key: Callable[[T], str], kind: str) -> tuple[tuple[T, ...], dict[str, T]]:
    index: dict[str, T] = {}
    owner: dict[str, str] = {}
    for service_name, entries in groups:
        for entry in entries:
            name = key(entry)
            if name in index:
                log.warning("%s %r of service %r is shadowed by service %r", kind, name, service_name, owner[name])
                continue
            index[name] = entry
            owner[name] = service_name
    return tuple(index.values()), index


def build_snapshot(services: Sequence[Service]) -> Snapshot:
    tools, tool_index = _merge(((s.name, s.tools) for s in services), lambda t: t.name, "tool")
    prompts, prompt_index = _merge(((s.name, s.prompts) for s in services), lambda p: p.name, "prompt")
    resources, resource_index = _merge(((s.name, s.resources) for s in services), lambda r: r.uri, "resource")
    templates, _ = _merge(((s.name, s.templates) for s in services), lambda t: t.uri_template, "resource template")
    instructions = "\n\n".join(s.instructions for s in services if s.instructions) or None
    return Snapshot(tools, prompts, resources, templates, tool_index, prompt_index, resource_index, instructions)


class Catalog:
    """The services a server offers, as an atomically swapped snapshot plus change listeners."""

    def __init__(self, services: Iterable[Service] = ()) -> None:
        self._lock = threading.Lock()
        self._services: list[Service] = []
        self._listeners: list[ChangeListener] = []
        self._update_listeners: list[UpdateListener] = []
        self._remotes: list[Any] = []  # RemoteSource, in the order added: earlier ones win clashes
        self._watchdog = Watchdog()  # stops the remotes' child processes if this process is killed; idle until one starts
        self._warned: set[tuple[str, str, str]] = set()
        for service in services:
            self._attach(service)
        self._snapshot = build_snapshot(self._services)

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def services(self) -> tuple[Service, ...]:
        return tuple(self._services)

    def add_listener(self, listener: ChangeListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: ChangeListener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    # -- remote sources ------------------------------------------------------------------------
    @property
    def remotes(self) -> tuple[Any, ...]:
        return tuple(self._remotes)

    def add_remote(self, remote: Any) -> None:
        """Serve a `RemoteSource`'s entries after the local ones; connects it (bounded wait)."""
        with self._lock:
            if any(existing.name == remote.name for existing in self._remotes):
                raise ValueError(f"an upstream named {remote.name!r} is already served")
            self._remotes.append(remote)
        remote.start(self._remote_changed, self.resource_updated, watchdog=self._watchdog)

    def remove_remote(self, name: str) -> Any:
        with self._lock:
            found = next((r for r in self._remotes if r.name == name), None)
            if found is None:
                raise KeyError(f"no upstream named {name!r}")
            self._remotes.remove(found)
        found.close()
        self._remote_changed(KINDS)
        return found

    def close_remotes(self) -> None:
        """Stop every remote source, all at once: each one's stop waits for its child to end, so one
        after another their waits would add up. Then end their watchdog (a fresh one, idle, serves
        any added later)."""
        with self._lock:
            remotes, self._remotes = self._remotes, []
            watchdog, self._watchdog = self._watchdog, Watchdog()
        stoppers = [threading.Thread(target=remote.close, name=f"mcpsync-close-{remote.name}", daemon=True) for remote in remotes[1:]]
        for stopper in stoppers:
            stopper.start()
        if remotes:
            remotes[0].close()  # on this thread
        deadline = time.monotonic() + CLOSE_REMOTES_WAIT
        for stopper in stoppers:
            stopper.join(max(0.0, deadline - time.monotonic()))
            if stopper.is_alive():
                log.warning("%s was still stopping %g s after the server closed", stopper.name, CLOSE_REMOTES_WAIT)
        watchdog.close()

    def _remote_changed(self, kinds: frozenset[str]) -> None:
        with self._lock:
            listeners = tuple(self._listeners)
        for listener in listeners:
            listener(frozenset(kinds))

    # -- merged views: local entries first, then each upstream's, first one wins ----------------
    def list_tools(self) -> tuple[Any, ...]:
        return self._merged("tool", self._snapshot.tools, lambda r: r.tools(), lambda e: e.name)

    def find_tool(self, name: str) -> Any:
        """Local first, then each upstream in order: the first hit is the one `list_tools` shows."""
        tool = self._snapshot.tool_index.get(name)
        if tool is None:
            tool = next((t for r in tuple(self._remotes) if (t := r.find("tools", name)) is not None), None)
        return tool

    def find_tool_known(self, name: str) -> Any:
        """`find_tool` without asking any upstream: None unless the answer is already known (an
        upstream whose list is stale could be the one that has it)."""
        tool = self._snapshot.tool_index.get(name)
        if tool is not None:
            return tool
        for remote in tuple(self._remotes):
            found = remote.find_known("tools", name)
            if found is not None:
                return None if found is STALE else found
        return None

    def list_prompts(self) -> tuple[Any, ...]:
        return self._merged("prompt", self._snapshot.prompts, lambda r: r.prompts(), lambda e: e.name)

    def find_prompt(self, name: str) -> Any:
        prompt = self._snapshot.prompt_index.get(name)
        if prompt is None:
            prompt = next((p for r in tuple(self._remotes) if (p := r.find("prompts", name)) is not None), None)
        return prompt

    def list_resources(self) -> tuple[Any, ...]:
        return self._merged("resource", self._snapshot.resources, lambda r: r.resources(), lambda e: e.uri)

    def list_templates(self) -> tuple[Any, ...]:
        return self._merged("resource template", self._snapshot.templates, lambda r: r.templates(), lambda e: e.uri_template)

    def find_resource(self, uri: str) -> tuple[Any, dict[str, str | list[str]]] | None:
        """The resource at `uri` (local first), or the first template matching it, with its variables."""
        found = self._snapshot.find_resource(uri)
        if found is not None or not self._remotes:
            return found
        for resource in self.list_resources():
            if resource.uri == uri:
                return resource, {}
        for template in self.list_templates():
            variables = template.match(uri)
            if variables is not None:
                return template, variables
        return None

    def find_resource_known(self, uri: str) -> tuple[Any, dict[str, str | list[str]]] | None:
        """`find_resource` without asking any upstream: an upstream's entries as its last lists
        had them (None if it has not been listed since it connected). For what must not wait on
        an upstream: an update may arrive on that upstream's own reader thread."""
        found = self._snapshot.find_resource(uri)
        if found is not None:
            return found
        remotes = tuple(self._remotes)
        for remote in remotes:
            resource = next((r for r in remote.known("resources") if r.uri == uri), None)
            if resource is not None:
                return resource, {}
        for remote in remotes:
            for template in remote.known("templates"):
                variables = template.match(uri)
                if variables is not None:
                    return template, variables
        return None

    def find_template(self, uri_template: str) -> Any:
        return next((t for t in self.list_templates() if t.uri_template == uri_template), None)

    def _merged(self, kind: str, local: tuple[Any, ...], remote_entries: Callable[[Any], tuple[Any, ...]], key: Callable[[Any], str]) -> tuple[Any, ...]:
        if not self._remotes:
            return local
        merged = list(local)
        owner = {key(entry): "local services" for entry in local}
        for remote in tuple(self._remotes):
            for entry in remote_entries(remote):
                name = key(entry)
                if name in owner:
                    self._warn_shadowed(kind, name, remote.name, owner[name])
                    continue
                owner[name] = f"upstream {remote.name!r}"
                merged.append(entry)
        return tuple(merged)

    def _warn_shadowed(self, kind: str, name: str, loser: str, winner: str) -> None:
        marker = (kind, name, loser)
        if marker not in self._warned:
            self._warned.add(marker)
            log.warning("%s %r of upstream %r is shadowed by %s (use a prefix to expose both)", kind, name, loser, winner)

    def add_update_listener(self, listener: UpdateListener) -> None:
        with self._lock:
            self._update_listeners.append(listener)

    def resource_updated(self, uri: str) -> None:
        """Announce that the content of the resource at `uri` changed."""
        if not isinstance(uri, str):
            raise TypeError("uri must be a string")
        with self._lock:
            listeners = tuple(self._update_listeners)
        for listener in listeners:
            listener(uri)

    def add_service(self, service: Service) -> None:
        with self._lock:
            if any(existing is service for existing in self._services):
                raise ValueError(f"service {service.name!r} is already served")
            self._attach(service)
        self._rebuild(self._kinds_of(service))

    def remove_service(self, service: Service | str) -> Service:
        with self._lock:
            found = next((s for s in self._services if s is service or s.name == service), None)
            if found is None:
                raise KeyError(f"no service {service!r} is served")
            self._services.remove(found)
        found.remove_listener(self._service_changed)
        self._rebuild(self._kinds_of(found))
        return found

    def refresh(self, kinds: Iterable[str] = KINDS, *, announce: bool = True) -> None:
        """Rebuild and announce a change of `kinds`, e.g. after a service changed entries it computes.
        Without `announce`, rebuild only: another replica made the change and announced it (the
        server tells its own listeners once, as a change from elsewhere)."""
        kinds = frozenset(kinds)
        if not kinds <= KINDS:
            raise ValueError(f"unknown kind(s) {sorted(kinds - KINDS)}; use {sorted(KINDS)}")
        self._rebuild(kinds if announce else frozenset())

    def _attach(self, service: Service) -> None:
        self._services.append(service)
        service.add_listener(self._service_changed)

    def _service_changed(self, kinds: frozenset[str]) -> None:
        self._rebuild(kinds)

    @staticmethod
    def _kinds_of(service: Service) -> frozenset[str]:
        kinds = set()
        if service.tools:
            kinds.add("tools")
        if service.prompts:
            kinds.add("prompts")
        if service.resources or service.templates:
            kinds.add("resources")
        return frozenset(kinds)

    def _rebuild(self, kinds: frozenset[str]) -> None:
        with self._lock:
            self._snapshot = build_snapshot(self._services)
            listeners = tuple(self._listeners)
        if kinds:
            for listener in listeners:
                listener(kinds)


# -- pagination -----------------------------------------------------------------------------------

_CURSOR_PREFIX = "mcpsync:"


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{offset}".encode()).decode("ascii")


def decode_cursor(cursor: Any) -> int:
    """The offset an opaque cursor stands for; -32602 for anything we did not hand out."""
    if not isinstance(cursor, str):
        raise invalid_params("Invalid cursor: must be a string")
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii")
    except (binascii.Error, UnicodeError, ValueError):
        raise invalid_params("Invalid cursor") from None
    digits = text[len(_CURSOR_PREFIX) :]
    if not text.startswith(_CURSOR_PREFIX) or not digits.isdigit() or len(digits) > 12:
        raise invalid_params("Invalid cursor")
    return int(digits)


def paginate(items: Sequence[T], params: dict[str, Any], page_size: int) -> tuple[Sequence[T], str | None]:
    """One page of `items` for the request's `cursor`, and the cursor of the next page if any."""
    cursor = params.get("cursor")
    offset = 0 if cursor is None else decode_cursor(cursor)
    if offset > len(items):
        raise invalid_params("Invalid cursor: past the end of the list")
    end = offset + page_size
    return items[offset:end], (encode_cursor(end) if end < len(items) else None)
