"""A remote MCP server's tools, prompts and resources, mirrored into the catalog.

Strategy: a `RemoteSource` owns one client session with the upstream and one supervisor thread
(`mcpsync-remote-NAME`) that (re)connects it with backoff. Lists are fetched lazily and cached per
kind; the upstream's own change notifications arrive on its reader thread, where the cache is marked
stale *before* the change is relayed, so a client that re-lists on the notification sees fresh
data, and the relay precedes the result of the call that caused it. The next listing refreshes once
(concurrent listers share one fetch); a failed refresh is an error, repeated without asking the
upstream again until a cooldown passes. A lost upstream's entries disappear from the lists (a
change is published), while a call by a name it had is answered "upstream 'NAME' is unavailable"
(not "Unknown tool": the client may retry); the supervisor reconnects it.

Closing stops the upstream in whatever state the supervisor is: a session being opened is closed
too (its child stopped), so a restart that races the gateway's exit leaves nothing running. A
command upstream's process group is also told to the catalog's `Watchdog` (`self.watchdog`), which
stops it should the gateway be killed before it could (mcpsync._process_groups). The
supervisor also tells a handshake-era upstream that the client's roots changed
(`notifications/roots/list_changed`), on its own thread: the downstream's reader never waits on
an upstream for it.

Calls are forwarded through the source's `Relay` (relay.py), which also carries the questions an
upstream asks during a call (elicitation, sampling, roots; a handshake-era upstream's requests, a
2026-07-28 upstream's `input_required`) to the call's client: as real requests to a handshake-era
client, as `input_required` rounds to a 2026-07-28 one. `question_handlers()` are the callbacks the
upstream's client session answers with; giving them declares those capabilities to the upstream.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._process_groups import Watchdog
from ..catalog.catalog import STALE
from ..catalog.context import Context
from ..errors import McpsyncError
from ..protocol.jsonrpc import ErrorCode, McpError
from ..protocol.uri_template import UriTemplate
from .forwarded import ForwardedCall, strip_era_fields
from .relay import ClientRoots, Relay, parked_call_id
from .upstream_tasks import run_upstream_task

if TYPE_CHECKING:
    from ..engine.seams import ForwardedTool

__all__ = ["ForwardedCall", "RemoteOptions", "RemoteSource", "RemoteTool", "strip_era_fields"]

log = logging.getLogger("mcpsync")

KINDS = ("tools", "prompts", "resources")
_LIST_METHOD = {"tools": "list_tools", "prompts": "list_prompts", "resources": "list_resources"}
_KIND_OF = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
}

@dataclass(frozen=True)
class RemoteOptions:
    """How one upstream is exposed."""

    prefix: str = ""
    allow: frozenset[str] | None = None  # upstream tool names to expose (None: all)
    deny: frozenset[str] = frozenset()
    call_timeout: float = 60.0
    refresh_cooldown: float = 5.0
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    start_timeout: float = 30.0
    roots: tuple[dict[str, Any], ...] | None = None  # what roots/list answers; None: the client's roots


def parse_roots(value: Any) -> tuple[dict[str, str], ...]:
    """Roots given for an upstream (a config's `roots`, `Server.add_remote(roots=...)`): a list of
    `file://` URIs, each a string or a table with `uri` and an optional `name`, as MCP's `Root`.
    Raises ValueError saying what is wrong."""
    if not isinstance(value, list):
        raise ValueError("must be a list of file:// URIs (or tables with uri and name)")
    roots = []
    for entry in value:
        root = {"uri": entry} if isinstance(entry, str) else entry
        if not isinstance(root, dict) or set(root) - {"uri", "name"} or not all(isinstance(v, str) for v in root.values()):
            raise ValueError(f"{entry!r}: a root is a file:// URI, or a table with uri and an optional name")
        if not root.get("uri", "").startswith("file://"):
            raise ValueError(f"{entry!r}: a root's uri must start with file://")
        roots.append(dict(root))
    return tuple(roots)


class RemoteTool:
    """A tool of an upstream, under the name the gateway exposes."""

    scopes: frozenset[str] = frozenset()  # an upstream's entries need no scope of the gateway's own

    def __init__(self, source: RemoteSource, definition: dict[str, Any]) -> None:
        self.source = source
        self.upstream_name = definition["name"]
        self.name = source.options.prefix + self.upstream_name
        self.requires: dict[str, Any] = {}
        execution = definition.get("execution")
        support = execution.get("taskSupport") if isinstance(execution, dict) else None
        self.task = support if support in ("optional", "required") else "forbidden"
        """What the upstream's listing says of tasks: such a tool runs as a task of the gateway's
        (`run_task`) for a downstream that can take one."""
        self._definition = {k: v for k, v in definition.items() if k != "execution"}
        self._definition["name"] = self.name
        if self.task != "forbidden":
            self._definition["execution"] = {"taskSupport": self.task}

    def definition(self) -> dict[str, Any]:
        return dict(self._definition)

    def validate(self, arguments: dict[str, Any]) -> None:
        """The upstream validates its own arguments."""

    def invoke(self, arguments: dict[str, Any], ctx: Context) -> Any:
        """Forward and wait (used when an interceptor wraps tool calls)."""
        return self.start(arguments, ctx).result(self.source.options.call_timeout + 1.0)

    def start(self, arguments: dict[str, Any], ctx: Context) -> ForwardedCall:
        """Forward without waiting: the engine answers the client when the upstream does."""
        return self.source.start_forward("tools/call", {"name": self.upstream_name, "arguments": arguments}, ctx)

    def run_task(self, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """As the function of a task of the gateway's: the upstream's tool as an upstream task,
        waited for (see `upstream_tasks`)."""
        return self.source.run_task(self.upstream_name, arguments, ctx)

    def to_result(self, value: dict[str, Any]) -> dict[str, Any]:
        return value  # the upstream's CallToolResult already


if TYPE_CHECKING:
    _FORWARDS: type[ForwardedTool] = RemoteTool  # mypy checks that the engine may start its calls


class RemotePrompt:
    scopes: frozenset[str] = frozenset()

    def __init__(self, source: RemoteSource, definition: dict[str, Any]) -> None:
        self.source = source
        self.upstream_name = definition["name"]
        self.name = source.options.prefix + self.upstream_name
        self.arguments = tuple(definition.get("arguments") or ())
        self._definition = {**definition, "name": self.name}

    def definition(self) -> dict[str, Any]:
        return dict(self._definition)

    def get(self, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return self.source.forward("prompts/get", {"name": self.upstream_name, "arguments": arguments}, ctx)

    def complete(self, argument: str, value: str, given: dict[str, Any]) -> dict[str, Any]:
        ref = {"type": "ref/prompt", "name": self.upstream_name}
        return self.source.complete(ref, argument, value, given)


class RemoteResource:
    scopes: frozenset[str] = frozenset()

    def __init__(self, source: RemoteSource, definition: dict[str, Any]) -> None:
        self.source = source
        self.uri = definition["uri"]
        self.name = definition.get("name", self.uri)
        self._definition = definition

    def definition(self) -> dict[str, Any]:
        return dict(self._definition)

    def read(self, uri: str, variables: dict[str, str | list[str]], ctx: Context) -> list[dict[str, Any]] | dict[str, Any]:
        """The contents; or, when the upstream asked a 2026-07-28 client something, the
        `input_required` result (which the engine answers as it is)."""
        result = self.source.forward("resources/read", {"uri": uri}, ctx)
        if result.get("resultType") == "input_required":
            return result
        contents: list[dict[str, Any]] = result.get("contents", [])
        return contents


class RemoteTemplate(RemoteResource):
    def __init__(self, source: RemoteSource, definition: dict[str, Any]) -> None:
        self.source = source
        self.uri_template = definition["uriTemplate"]
        self.uri = self.uri_template
        self.name = definition.get("name", self.uri_template)
        self._definition = definition
        try:
            self._template: UriTemplate | None = UriTemplate(self.uri_template)
            self._template.check_matchable()
        except ValueError as exc:  # listed as it is, but no URI is routed to it by the template
            log.warning("upstream %s: its resource template cannot be matched: %s", source.name, exc)
            self._template = None

    def match(self, uri: str) -> dict[str, str | list[str]] | None:
        """The URI's values, or None. The upstream checks them: it knows which may be paths."""
        return self._template.match(uri) if self._template is not None else None

    def complete(self, argument: str, value: str, given: dict[str, Any]) -> dict[str, Any]:
        ref = {"type": "ref/resource", "uri": self.uri_template}
        return self.source.complete(ref, argument, value, given)


@dataclass
class _Cache:
    entries: tuple[Any, ...] = ()
    by_name: dict[str, Any] = field(default_factory=dict)  # tools and prompts, by exposed name
    generation: int = 0  # bumped by every upstream change, so a fetch can tell it raced one
    stale: bool = True
    failed_at: float | None = None
    failure: McpError | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


Connector = Callable[[Callable[[str, dict[str, Any]], None], Callable[[Exception], None]], Any]
"""Makes a client session with the upstream, not yet open, wiring the given change and loss
callbacks (the session's `on_change` and `on_lost`); the supervisor opens it (`open()`), so that
`close()` can reach a session while it is being opened."""


class RemoteSource:
    """One upstream MCP server behind the gateway."""

    def __init__(self, name: str, connector: Connector, options: RemoteOptions | None = None, client_roots: ClientRoots | None = None) -> None:
        self.name = name
        self.options = options or RemoteOptions()
        self._connector = connector
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)  # close(), a lost session, the client's roots changing
        self._session: Any = None
        self._opening: Any = None  # the session the supervisor is opening, for close() to reach
        self._caches = {kind: _Cache() for kind in (*KINDS, "templates")}
        self._on_change: Callable[[frozenset[str]], None] = lambda kinds: None
        self._on_updated: Callable[[str], None] = lambda uri: None
        self._closing = False
        self._roots_changed = False
        self._first_attempt = threading.Event()
        self._thread: threading.Thread | None = None
        self.watchdog: Watchdog | None = None  # given by start(): told of each child process group
        self._relay = Relay(name, self.options.call_timeout, self._failure, roots=self.options.roots, client_roots=client_roots)
        self.last_error: Exception | None = None

    def question_handlers(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        """The `roots`, `sampling` and `elicitation` callbacks for the upstream's client session:
        its questions during a forwarded call reach that call's client (see relay.py)."""
        return self._relay.handlers()

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self, on_change: Callable[[frozenset[str]], None], on_updated: Callable[[str], None], *, watchdog: Watchdog | None = None) -> None:
        """Connect (waiting up to `start_timeout` for the first attempt) and keep it connected;
        a child process it starts is told to `watchdog`."""
        self._on_change, self._on_updated = on_change, on_updated
        self.watchdog = watchdog
        self._thread = threading.Thread(target=self._supervise, name=f"mcpsync-remote-{self.name}", daemon=True)
        self._thread.start()
        self._first_attempt.wait(self.options.start_timeout)

    @property
    def connected(self) -> bool:
        return self._session is not None

    def close(self, timeout: float = 5.0) -> None:
        """Stop the upstream (the open session, or the one being opened) and the supervisor."""
        with self._lock:
            self._closing = True
            sessions = [self._session, self._opening]
            self._session = self._opening = None
            self._wake.notify_all()
        self._relay.close()
        for session in sessions:
            if session is not None:
                session.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("upstream %r: its supervisor was still running %g s after close", self.name, timeout)

    def client_roots_changed(self) -> None:
        """The downstream client's roots changed: the supervisor tells the upstream (unless the
        configuration sets its roots)."""
        if self.options.roots is not None:
            return
        with self._lock:
            self._roots_changed = True
            self._wake.notify_all()

    def server_shutting_down(self, shutting_down: bool) -> None:
        """While the server shuts down, a cancelled call says so (not "cancelled by the client")."""
        self._relay.shutting_down = shutting_down

    def _supervise(self) -> None:
        delay = self.options.backoff_initial
        while not self._closing:
            lost = threading.Event()
            try:
                session = self._open(lost)
            except Exception as exc:  # whatever it is, the gateway keeps serving and tries again
                if self._closing:
                    return
                self.last_error = exc
                log.warning("upstream %r: cannot connect (%s); retrying in %.1f s", self.name, exc, delay)
            else:
                if session is None:  # closed while it was being opened
                    return
                self._serve_session(session, lost)
                if self._closing:
                    return
                delay = self.options.backoff_initial
            self._first_attempt.set()
            with self._lock:
                if self._wake.wait_for(lambda: self._closing, delay):
                    return
            delay = min(delay * 2, self.options.backoff_max)

    def _open(self, lost: threading.Event) -> Any:
        """A new open session, published as the source's; None (and nothing left running) if
        the source closed meanwhile. Raises whatever opening raised."""
        session = self._connector(self._upstream_changed, lambda error: self._lost(lost, error))
        if not self._hand_over(session, "_opening"):
            return None
        try:
            session.open()
        except BaseException:
            with self._lock:
                self._opening = None
            session.close()
            raise
        return session if self._hand_over(session, "_session") else None

    def _hand_over(self, session: Any, slot: str) -> bool:
        """Put `session` in `slot` (`_opening`, then `_session` once open) under the lock, unless
        the source is closing: then it is closed, and False."""
        with self._lock:
            self._opening = None
            closing = self._closing
            if not closing:
                setattr(self, slot, session)
        if closing:
            session.close()
        return not closing

    def _lost(self, lost: threading.Event, error: Exception) -> None:
        with self._lock:
            self.last_error = error
            lost.set()
            self._wake.notify_all()

    def _serve_session(self, session: Any, lost: threading.Event) -> None:
        """Publish the upstream's entries, serve until it is lost (or we close), withdraw them."""
        self._mark_all_stale()
        self._first_attempt.set()
        log.info("upstream %r connected (%s era)", self.name, session.era.value if session.era else "?")
        self._on_change(frozenset(KINDS))
        while self._serving(session, lost):
            session.expire_overdue()  # forwarded calls nobody blocks on still end by their deadline
            self._relay.expire()  # and so do parked ones nobody retried
        with self._lock:
            current, self._session = self._session, None
        if current is not None:
            current.close()
        if not self._closing:
            self._mark_all_stale()
            log.warning("upstream %r was lost; its entries are withdrawn; reconnecting", self.name)
            self._on_change(frozenset(KINDS))

    def _serving(self, session: Any, lost: threading.Event) -> bool:
        """Wait up to a second for something to do; False once the session is lost or we close."""
        with self._lock:
            self._wake.wait_for(lambda: self._closing or lost.is_set() or self._roots_changed, 1.0)
            if self._closing or lost.is_set():
                return False
            tell, self._roots_changed = self._roots_changed, False
        if tell:
            try:
                session.notify_roots_changed()
            except McpsyncError as exc:  # the loss, if it is one, is reported on its own
                log.debug("upstream %r: could not say the roots changed: %s", self.name, exc)
        return True

    def _mark_all_stale(self) -> None:
        for cache in self._caches.values():
            cache.stale, cache.failure, cache.failed_at = True, None, None

    def _upstream_changed(self, method: str, params: dict[str, Any]) -> None:
        """On the upstream's reader thread: invalidate first, then relay (our own frames, never
        the upstream's tag)."""
        kind = _KIND_OF.get(method)
        if kind is not None:
            cache = self._caches[kind]
            # Already stale and nobody fetching: clients were told and have not re-listed yet, so a
            # second notice says nothing new (an upstream may send one change on two streams).
            unseen = cache.stale and not cache.lock.locked()
            for affected in (kind, "templates") if kind == "resources" else (kind,):
                cache = self._caches[affected]
                cache.generation += 1
                cache.stale = True
                cache.failure = None  # the upstream changed: a refresh may work now
            if not unseen:
                self._on_change(frozenset((kind,)))
        elif method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
            self._on_updated(params["uri"])

    # -- listing ---------------------------------------------------------------------------------
    def tools(self) -> tuple[RemoteTool, ...]:
        return self._entries("tools")

    def prompts(self) -> tuple[RemotePrompt, ...]:
        return self._entries("prompts")

    def resources(self) -> tuple[RemoteResource, ...]:
        return self._entries("resources")

    def templates(self) -> tuple[RemoteTemplate, ...]:
        return self._entries("templates")

    def find(self, kind: str, name: str) -> Any:
        """The tool or prompt exposed as `name` (fetching the list first if it is stale). While the
        upstream is reconnecting, the entry it had: calling it says the upstream is unavailable."""
        cache = self._caches[kind]
        if cache.stale:
            self._entries(kind)
        return cache.by_name.get(name) if not self._closing else None

    def find_known(self, kind: str, name: str) -> Any:
        """Without asking the upstream: the entry exposed as `name` if the list is known and fresh,
        None if it is not there; `STALE` when only a fetch could tell."""
        cache = self._caches[kind]
        if cache.stale or self._session is None:
            return STALE
        return cache.by_name.get(name)

    def known(self, kind: str) -> tuple[Any, ...]:
        """The entries of `kind` as last fetched, without asking the upstream (none while it is
        disconnected)."""
        return () if self._session is None or self._closing else self._caches[kind].entries

    def _entries(self, kind: str) -> tuple[Any, ...]:
        cache = self._caches[kind]
        session = self._session
        if session is None:
            return ()
        if not cache.stale:
            return cache.entries
        if not cache.lock.acquire(timeout=self.options.call_timeout):
            raise McpError(ErrorCode.INTERNAL_ERROR, f"upstream '{self.name}': listing {kind} is taking too long")
        try:
            if not cache.stale:  # another lister refreshed it while we waited
                return cache.entries
            if cache.failure is not None and cache.failed_at is not None and time.monotonic() - cache.failed_at < self.options.refresh_cooldown:
                raise cache.failure
            try:
                generation = cache.generation
                cache.entries = self._fetch(session, kind)
                cache.by_name = {entry.name: entry for entry in cache.entries}
                cache.failure = cache.failed_at = None
                cache.stale = cache.generation != generation  # a change during the fetch: fetch again next time
            except McpsyncError as exc:
                cache.stale = True
                cache.failure = McpError(ErrorCode.INTERNAL_ERROR, f"upstream '{self.name}' could not list its {kind}: {exc}")
                cache.failed_at = time.monotonic()
                raise cache.failure from exc
            return cache.entries
        finally:
            cache.lock.release()

    def _fetch(self, session: Any, kind: str) -> tuple[Any, ...]:
        capability = "resources" if kind == "templates" else kind
        if capability not in session.server_capabilities:
            return ()
        timeout = self.options.call_timeout
        if kind == "tools":
            return tuple(RemoteTool(self, d) for d in session.list_tools(timeout=timeout) if self._exposed(d))
        if kind == "prompts":
            return tuple(RemotePrompt(self, d) for d in session.list_prompts(timeout=timeout) if isinstance(d.get("name"), str))
        if kind == "resources":
            return tuple(RemoteResource(self, d) for d in session.list_resources(timeout=timeout) if isinstance(d.get("uri"), str))
        return tuple(
            RemoteTemplate(self, d) for d in session.list_resource_templates(timeout=timeout) if isinstance(d.get("uriTemplate"), str)
        )

    def _exposed(self, definition: dict[str, Any]) -> bool:
        name = definition.get("name")
        if not isinstance(name, str):
            return False
        if self.options.allow is not None and name not in self.options.allow:
            return False
        return name not in self.options.deny

    # -- forwarding ------------------------------------------------------------------------------
    def run_task(self, name: str, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Call the upstream tool `name` as a task and wait for its outcome (a gateway task's function)."""
        session = self._session
        if session is None:
            raise self._unavailable()
        return run_upstream_task(self.name, session, name, arguments, ctx, self.options.call_timeout, self._relay)

    def forward(self, method: str, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Send one request upstream on behalf of a client and wait for the answer."""
        return self.start_forward(method, params, ctx).result(self.options.call_timeout + 1.0)

    def start_forward(self, method: str, params: dict[str, Any], ctx: Context) -> ForwardedCall:
        """Send one request upstream on behalf of a client: progress relayed, the client's cancel
        forwarded, the upstream's questions relayed, failures turned into errors that name the
        upstream. The retry of a request that answered `input_required` for the upstream's
        question continues that upstream call instead (relay.py)."""
        session = self._session
        if session is None and parked_call_id(ctx) is None:  # a parked call's retry still gets its answer
            raise self._unavailable()
        try:
            return self._relay.forward(session, method, params, ctx)
        except McpError:
            raise
        except McpsyncError as exc:
            raise self._failure(exc) from exc

    def _unavailable(self) -> McpError:
        """The answer while there is no session: the supervisor is reconnecting (or the source closed)."""
        if self._closing:
            return McpError(ErrorCode.INTERNAL_ERROR, f"upstream '{self.name}' is unavailable: it was removed", {"upstream": self.name})
        why = f" ({self.last_error})" if self.last_error is not None else ""
        return McpError(ErrorCode.INTERNAL_ERROR, f"upstream '{self.name}' is unavailable: it is restarting{why}", {"upstream": self.name})

    def _failure(self, error: BaseException) -> McpError:
        if isinstance(error, McpError):
            return error
        return McpError(ErrorCode.INTERNAL_ERROR, f"upstream '{self.name}' failed: {error}", {"upstream": self.name})

    def complete(self, ref: dict[str, Any], argument: str, value: str, given: dict[str, Any]) -> dict[str, Any]:
        session = self._session
        if session is None:
            raise self._unavailable()
        try:
            completion = session.complete(ref, argument, value, context=given or None, timeout=self.options.call_timeout)
        except McpError:
            raise
        except McpsyncError as exc:
            raise McpError(ErrorCode.INTERNAL_ERROR, f"upstream '{self.name}' failed: {exc}") from exc
        return {"completion": completion}
