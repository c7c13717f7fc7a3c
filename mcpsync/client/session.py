"""A blocking MCP client session that speaks both protocol eras.

Strategy: the connection's reader thread hands every message to `_on_message`, which completes the
waiting call (by id), routes progress to that call's callback, turns list changes into listen events,
and answers the server's own requests (handshake era) on the session's bounded callback pool so the
reader never blocks. Callers block in `request()` on a `PendingCall` with a deadline; on timeout the
request is cancelled on the wire and `CallTimeout` is raised. When the connection is lost, every
pending call fails at once with `ConnectionLost`.

Opening (`mode`): "auto" probes `server/discover` and falls back to `initialize` when the server
does not speak 2026-07-28; "legacy" and "modern" force an era (see `_negotiation`).

Two 2026-07-28 rules concern what a request means rather than how it travels, so the session
applies them: a request the server refuses for its protocol version (-32022, `data.supported`
naming a version we speak) is sent once more with that version, which the session then keeps
(`request()`); and over HTTP a tool whose `x-mcp-header` annotations are invalid is left out of
`list_tools()` and refused by `call_tool()` (see `_tool_headers`).

Questions from the server (elicitation, sampling, roots) reach the same callbacks in both eras: as
JSON-RPC requests in the handshake era (answered off the reader thread, on a bounded pool: see
`_server_requests`), as the `inputRequests` of an `input_required` result in 2026-07-28 (answered
on the caller's thread, then the request is retried: see `_input_required`); see `ClientSession`.

A call may run as a task the server keeps (`call_tool(..., task=True)`): `tasks` holds the handle
that polls it and the `tasks/*` requests. In 2026-07-28 only the requests about tasks declare the
tasks extension, each in its own envelope (`envelope(extensions)`): a session that declared it
on every request would get tasks for calls that expect a result.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, overload

from .._version import __version__
from ..errors import CallTimeout, ConnectionLost, ProtocolViolation, SessionClosed
from ..protocol import jsonrpc
from ..protocol.jsonrpc import McpError, Message, Notification, Request, Response
from ..protocol.versions import (
    LATEST_MODERN_VERSION,
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SUBSCRIPTION_ID,
    Era,
    is_log_level,
)
from ._calls import Calls
from ._input_required import request_with_input
from ._listening import Listening
from ._negotiation import PROBE_TIMEOUT as PROBE_TIMEOUT
from ._negotiation import discover, initialize, version_to_retry
from ._pending import PendingCall as PendingCall
from ._pending import Progress, SessionWatch
from ._response_cache import ResponseCache
from ._server_requests import Served, ServerRequests, declared
from ._tool_headers import ToolHeaders
from .listen import Listener
from .options import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from .options import SessionOptions, session_options
from .tasks import TaskHandle, TaskStatus, cancel_task, created, get_task, offers_tool_tasks, parse_status, task_params, task_request, task_support

log = logging.getLogger("mcpsync.client")

_CLOSE_SEND_TIMEOUT = 0.5  # closing never waits long to tell a server that stopped reading
_CALLBACK_JOIN_TIMEOUT = 2.0  # close() waits this long for callbacks still answering the server
MODES = ("auto", "legacy", "modern")


_CHANGE_METHODS = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    }
)


class ClientSession:
    """One conversation with one MCP server. Thread-safe: many threads may call at once.

    Args:
        connection: a `StdioConnection`, `HttpConnection` or `MemoryConnection` (not started).
        options: the settings below as one `SessionOptions`; the keywords replace its fields.
        mode: "auto", "legacy" or "modern" (see the module docstring).
        timeout: the default deadline of every call, in seconds.
        client_info: what the client says about itself.
        roots, sampling, elicitation: callbacks answering the server's `roots/list`,
            `sampling/createMessage` and `elicitation/create`, in both eras (below); giving one
            declares the capability (`roots: {}`, `sampling: {}`, `elicitation: {}`, which is
            form mode only). Each gets the request's params (`{}` for roots/list) and returns the
            result dict; raising McpError refuses. Without one, a handshake-era request is
            answered -32601.
        roots_list_changed: with `roots`, also declare `roots: {"listChanged": true}`: this
            client calls `notify_roots_changed()` when its roots change.
        sampling_tools: with `sampling`, also declare `sampling: {"tools": {}}`: the server may
            offer the model tools, and the callback may answer with `tool_use` blocks.
        on_log: called with the params of each `notifications/message`.
        on_change: called on the connection's reader thread with (method, params) of every list
            change and resource update, before any response that arrives after it is delivered
            (a gateway relays changes this way, ahead of the result of the call that caused them).
        on_lost: called once when the connection is lost, after every pending call has failed.
        on_elicitation_complete: called on the reader thread with the id of a URL-mode
            elicitation the server says is done (`notifications/elicitation/complete`, handshake era).
        telemetry: a `mcpsync.telemetry.Telemetry`: an OpenTelemetry CLIENT span and a duration
            for every request, whose trace context goes into the request's `params._meta`.
        extensions: the extensions this client supports (`{"io.modelcontextprotocol/ui":
            {"mimeTypes": [...]}}`), declared in its capabilities in both eras (SEP-2133);
            `server_extensions` says which the server offers.
        cache: keep the lists (and pages) and resource reads a 2026-07-28 server gives a
            `ttlMs` for, that long, unless it says the list changed or the resource was updated
            meanwhile; off by default (see `mcpsync.client._response_cache`).
        log_level: in 2026-07-28, the `logLevel` every request asks for (a server sends
            `notifications/message` only when asked); the handshake era uses logging/setLevel.
        max_input_rounds: how many `input_required` rounds one call may take (below).
        elicitation_modes: what the `elicitation` callback handles: ("form",) (declared as
            `elicitation: {}`), or ("form", "url") / ("url",) to be sent URL-mode elicitations too
            (`{"mode": "url", "message", "url"}`: open the URL for the user, answer `accept`).

    The server's questions, in both eras (one API for scripts):

    - Handshake era: the server sends `elicitation/create`, `sampling/createMessage` or
      `roots/list` as a JSON-RPC request, during a call or not. The callback runs on the session's
      callback pool (never the reader), so it may call the server itself; its result is the
      response (over HTTP it is POSTed with the session id). McpError becomes an error response;
      any other exception is logged and answered -32603 without its text. A bounded pool runs
      the callbacks; a server that sends more at once than it holds is answered -32603 ("the
      client is busy"), see `mcpsync.client._server_requests`.
    - 2026-07-28: `call_tool`, `get_prompt` and `read_resource` (not the raw `request()` and
      `start_request()`, which return any result as it is, for a gateway to relay) follow
      `resultType: "input_required"`. Each entry of `inputRequests` (key -> {method, params}) is
      answered by the same callback, with the same params, one after another on the caller's
      thread, in the server's order: a person answering elicitations sees one question at a time,
      a callback may call the server, and its exceptions reach the caller unchanged. Then the
      request is sent again with a new id, the original params, a fresh `_meta` envelope,
      `inputResponses` (this round's answers only, key -> the callback's result) and the
      `requestState` exactly as the server sent it (omitted when it sent none). A result with
      only a `requestState` (the server is busy) is retried after a short wait (50 ms doubling to
      250 ms; `close()` ends it at once). This repeats until a final result, which is what the call
      returns. The call's timeout covers every round, callbacks included (a callback cannot be
      interrupted; the deadline is checked when it returns); `progress` hears every round.
    - Failures end the call without a retry: a question without its callback raises
      `MissingCallback` (before any callback runs), a callback's McpError (or any exception) is
      raised as it is, `max_input_rounds` retries still answered `input_required` raise
      `InputRoundsExceeded`, a malformed `input_required` result raises ProtocolViolation.
    """

    def __init__(self, connection: Any, *, options: SessionOptions | None = None, **settings: Any) -> None:
        chosen = session_options(options, **settings)
        mode, timeout, client_info = chosen.mode, chosen.timeout, chosen.client_info
        log_level, max_input_rounds = chosen.log_level, chosen.max_input_rounds
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if not (isinstance(max_input_rounds, int) and max_input_rounds >= 0):
            raise ValueError("max_input_rounds must be an int >= 0")
        self.max_input_rounds = max_input_rounds
        self._connection = connection
        self._mode = mode
        self.timeout = timeout
        self.client_info = dict(client_info or {"name": "mcpsync", "version": __version__})
        self._handlers, self.capabilities = declared(chosen)  # the callbacks by method, and what they declare
        if chosen.extensions:
            self.capabilities["extensions"] = {str(name): dict(settings) for name, settings in chosen.extensions.items()}
        self._on_log = chosen.on_log
        if log_level is not None and not is_log_level(log_level):
            raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}")
        self.log_level = log_level
        self._on_change = chosen.on_change
        self._on_lost_callback = chosen.on_lost
        self._on_elicitation_complete = chosen.on_elicitation_complete
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._calls = Calls(self._lock)  # the calls waiting for their end
        self._listening = Listening(self)  # the open listeners, under self._lock
        self._lost: Exception | None = None
        self._closed = False
        self._ending = threading.Event()  # set by close() and a lost connection: ends waits at once
        self._observer = chosen.telemetry.client_observer() if chosen.telemetry is not None else None
        watch = self._watch_served if self._observer is not None else None
        self._asked = ServerRequests(self._handlers, self._connection, watch)  # answers the server's requests
        self._tool_headers = ToolHeaders(connection, self._lock)  # what the last list_tools() said of the tools' headers
        self._task_support: dict[str, str] | None = None  # each tool's execution.taskSupport, from the last list_tools()
        self._session_watch: SessionWatch | None = None  # the session's duration, from open() to close()
        self._cache = ResponseCache() if chosen.cache else None

        self.era: Era | None = None
        self.protocol_version: str | None = None
        self.server_info: dict[str, Any] = {}
        self.server_capabilities: dict[str, Any] = {}
        self.instructions: str | None = None

    @property
    def server_extensions(self) -> dict[str, Any]:
        """The extensions the server offers (its `capabilities.extensions`), by id, with their
        settings; empty before the session is open, or when it offers none."""
        offered = self.server_capabilities.get("extensions")
        return dict(offered) if isinstance(offered, dict) else {}

    # -- opening and closing ---------------------------------------------------------------------
    def open(self) -> ClientSession:
        """Start the connection and agree on an era; returns self."""
        self._connection.start(self._on_message, self._on_lost)
        self._session_watch = self._observer.session_began(self._connection) if self._observer is not None else None
        try:
            if self._mode == "legacy":
                initialize(self)
            else:
                discover(self, LATEST_MODERN_VERSION, fall_back=self._mode == "auto")
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """End the session: close listeners, fail pending calls, stop the connection. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            listeners = self._listening.detach()
        self._ending.set()
        for listener in listeners:
            listener._finish()
        with self._lock:
            lost = self._lost  # what ended the session, if it ended before this close (not this close's own end)
            in_flight = self._calls.on_wire() if lost is None else []
        for request_id in in_flight:  # so the server stops their work instead of finishing it for nobody
            self._cancel_on_wire(request_id, "the client closed the session", timeout=_CLOSE_SEND_TIMEOUT)
        self._calls.fail_all(SessionClosed("the session was closed"))
        self._connection.close()
        self._asked.close(_CALLBACK_JOIN_TIMEOUT)
        if self._session_watch is not None:
            self._session_watch.end(self.protocol_version, lost)

    def __enter__(self) -> ClientSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- requests --------------------------------------------------------------------------------
    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Send a request and wait for its result; raises McpError for an error answer,
        CallTimeout at the deadline (after cancelling the request), ConnectionLost if the server
        goes away.

        In 2026-07-28, a request refused for its protocol version (-32022) whose `data.supported`
        names a version this client speaks is sent once more, with a new id, with the first such
        version (in this client's order of preference), and the session speaks that version from
        then on. Once: a second refusal is raised. Both tries share the one deadline."""
        cache = self._cache
        if cache is not None and (kept := cache.get(method, params)) is not None:
            return kept
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        try:
            result = self.start_request(method, params, progress=progress, timeout=timeout).result(timeout)
            if cache is not None:
                cache.put(method, params, result)
            return result
        except McpError as exc:
            version = version_to_retry(self.era, exc)
            if version is None:
                raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise
            log.info("%s: the server refused protocol version %s; retrying with %s", method, self.protocol_version, version)
            self.protocol_version = version
            return self.start_request(method, params, progress=progress, timeout=remaining).result(remaining)

    def start_request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        progress: Progress | None = None,
        timeout: float | None = None,
    ) -> PendingCall:
        """Send a request without waiting; the returned call can be waited for, given a done
        callback, or cancelled. With `timeout`, the call has a deadline even if nobody waits for it:
        `expire_overdue()`, called now and then by the session's owner, fails it with CallTimeout
        (and cancels it on the wire) once the deadline has passed."""
        call = self.prepare_request(method, params, progress=progress, timeout=timeout)
        call.send()
        return call

    def prepare_request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        progress: Progress | None = None,
        timeout: float | None = None,
    ) -> PendingCall:
        """`start_request` without the sending: the call is registered (and its deadline runs)
        but goes out only at `PendingCall.send()`, so a caller can hook `on_done` and finish its
        own bookkeeping first. (A gateway does: the upstream may answer before the sending
        thread has returned from the write.) Raises SessionClosed or ConnectionLost."""
        return self._register(next(self._ids), method, params, progress, timeout)  # it unregisters itself as it ends

    def expire_overdue(self) -> int:
        """Fail every call whose `start_request` deadline has passed; returns how many."""
        overdue = self._calls.overdue()
        for call in overdue:
            call._expire(call.timeout_given)
        return len(overdue)

    def _register(
        self, request_id: Any, method: str, params: dict[str, Any] | None, progress: Progress | None = None, timeout: float | None = None
    ) -> PendingCall:
        watch = None
        if self._observer is not None:  # its span begins here, in the caller's context, and goes in _meta
            watch, params = self._observer.begin(method, request_id, params, self._connection, self.protocol_version)
        pending = PendingCall(self, request_id, method, params, progress, timeout)
        try:
            with self._lock:
                if self._closed:
                    raise SessionClosed("the session is closed")
                if self._lost is not None:
                    raise ConnectionLost(str(self._lost)) from self._lost
                self._calls.add(pending)
        except Exception as exc:
            if watch is not None:
                watch.end(None, exc)
            raise
        pending.watch = watch  # ended as the call settles, before its caller wakes
        return pending

    def _take_pending(self, request_id: Any) -> PendingCall | None:
        """Forget a call without settling it (a closed listener: a late answer is dropped); its
        span, if traced, ends here, as the caller's part in it does."""
        pending = self._calls.take(request_id)
        if pending is not None:
            pending.forget_watch()
        return pending

    def _unregister(self, pending: PendingCall) -> None:
        self._calls.remove(pending)

    def _send_request(self, request_id: Any, method: str, params: dict[str, Any] | None, progress_token: Any, timeout: float | None = None) -> None:
        modern = self.era is Era.MODERN
        if progress_token is not None or modern:  # a new _meta (the caller's params stay as they are)
            meta = params.get("_meta") if params else None
            meta = {**meta} if meta else {}
            if progress_token is not None:
                meta["progressToken"] = progress_token
            if modern:  # a request's own clientCapabilities.extensions add to the session's (tasks)
                asked = meta.get(META_CLIENT_CAPABILITIES)
                meta.update(self.envelope(asked.get("extensions") if isinstance(asked, dict) else None))
            params = {**params, "_meta": meta} if params else {"_meta": meta}
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params:
            message["params"] = params
        self._connection.send(message, timeout)

    def envelope(self, extensions: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The 2026-07-28 `_meta` keys every request of this session carries; `extensions` adds
        to its capabilities for one request (`call_tool(..., task=True)` declares the tasks one)."""
        capabilities = self.capabilities
        if extensions:
            capabilities = {**capabilities, "extensions": {**capabilities.get("extensions", {}), **extensions}}
        envelope = {
            META_PROTOCOL_VERSION: self.protocol_version,
            META_CLIENT_CAPABILITIES: capabilities,
            META_CLIENT_INFO: self.client_info,
        }
        if self.log_level is not None:
            envelope[META_LOG_LEVEL] = self.log_level
        return envelope

    def _cancel_on_wire(self, request_id: Any, reason: str, timeout: float | None = None) -> None:
        try:
            self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason}, timeout=timeout)
        except (ConnectionLost, CallTimeout):
            pass

    def notify(self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None) -> None:
        """Send a notification (no answer); `timeout` bounds the wait for a server slow to read.
        Traced, its span covers the sending and its context goes in `_meta`."""
        if self._observer is None:
            self._connection.send(jsonrpc.notification_frame(method, params), timeout)
            return
        watch, params = self._observer.begin(method, None, params, self._connection, self.protocol_version)
        try:
            self._connection.send(jsonrpc.notification_frame(method, params), timeout)
        except BaseException as exc:
            watch.end(None, exc)
            raise
        watch.end(None, None)

    def notify_roots_changed(self) -> None:
        """Tell a handshake-era server that the roots changed, so it asks `roots/list` again. (A
        2026-07-28 server asks within each request; nothing to tell.)"""
        if self.era is Era.HANDSHAKE and "roots" in self.capabilities:
            self.notify("notifications/roots/list_changed")

    # -- the catalog -----------------------------------------------------------------------------
    def _list_all(self, method: str, key: str, timeout: float | None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            result = self.request(method, {"cursor": cursor} if cursor is not None else {}, timeout=timeout)
            items.extend(result.get(key) or [])
            cursor = result.get("nextCursor")
            if cursor is None:
                return items
            if cursor in seen:
                raise ProtocolViolation(f"{method}: the server repeated a cursor; stopping instead of looping")
            seen.add(cursor)

    def list_tools(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """Every tool, following pagination. Over HTTP in 2026-07-28, the connection also learns
        which arguments a call repeats as `Mcp-Param-*` headers, and a tool whose `x-mcp-header`
        annotations are invalid is left out, with a warning naming it and the reason (the spec's
        rule: its calls could not carry the headers; `call_tool` refuses it, see `InvalidTool`)."""
        tools = self._tool_headers.listed(self._list_all("tools/list", "tools", timeout), self.era)
        self._task_support = task_support(tools)
        return tools

    @overload
    def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, progress: Progress | None = None, timeout: float | None = None,
        task: Literal[False] = False, task_ttl: float | None = None,
    ) -> dict[str, Any]: ...

    @overload
    def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, progress: Progress | None = None, timeout: float | None = None,
        task: Literal[True], task_ttl: float | None = None,
    ) -> TaskHandle: ...

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: Progress | None = None,
        timeout: float | None = None,
        task: bool = False,
        task_ttl: float | None = None,
    ) -> dict[str, Any] | TaskHandle:
        """Call a tool; returns its `CallToolResult` (check `isError` for tool failures).
        In 2026-07-28 an `input_required` answer is followed (see the class docstring).
        Raises `InvalidTool`, sending nothing, for a tool the last `list_tools()` left out.

        With `task=True`, the call may run as a task the server keeps (`mcpsync.client.tasks`):
        returns a `TaskHandle` as soon as the server made it, to poll, wait for and cancel. In
        2026-07-28 the call declares the tasks extension and the server decides; in 2025-11-25 it
        asks for a task (kept `task_ttl` seconds, if given) when the server offers tasks for
        `tools/call` and the tool's listing allows one (the tools are listed first if this session
        has not). A call answered at once is a finished handle (`task_id` None). `progress`
        hears the call until the task exists; the task's progress messages become its status
        messages."""
        self._tool_headers.refuse_invalid(name)
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        if task:
            params = self._as_task(params, task_ttl, timeout)
        try:
            result = request_with_input(self, "tools/call", params, progress=progress, timeout=timeout)
        except McpError as exc:  # a -32020 the tools' listed schemas explain goes once more
            if not self._tool_headers.learned(exc, name, lambda: self.list_tools(timeout=timeout)):
                raise
            result = request_with_input(self, "tools/call", params, progress=progress, timeout=timeout)
        if not task:
            return result
        made = created(self.era, result)
        return TaskHandle(self, made) if made is not None else TaskHandle.finished(self, result)

    def _as_task(self, params: dict[str, Any], ttl: float | None, timeout: float | None) -> dict[str, Any]:
        """The params of a call that may become a task, in this session's era (see `call_tool`)."""
        asked = task_request(ttl)
        if self.era is Era.MODERN:
            return task_params(self.era, params)
        if not offers_tool_tasks(self.server_capabilities):
            return params
        if self._task_support is None:
            self.list_tools(timeout=timeout)
        if (self._task_support or {}).get(params["name"]) == "forbidden":  # a tool not listed: the server decides
            return params
        return {**params, "task": asked}

    # -- tasks -----------------------------------------------------------------------------------
    def task(self, task_id: str, *, timeout: float | None = None) -> TaskHandle:
        """A handle on a task made earlier, by its id (kept across a reconnect, say): its status
        is asked at once (McpError -32602 for an unknown, expired or another caller's task)."""
        return TaskHandle(self, get_task(self, task_id, timeout))

    def get_task(self, task_id: str, *, timeout: float | None = None) -> TaskStatus:
        """Where a task stands (`tasks/get`)."""
        return get_task(self, task_id, timeout)

    def cancel_task(self, task_id: str, *, timeout: float | None = None) -> TaskStatus:
        """Cancel a task (`tasks/cancel`); see `TaskHandle.cancel`."""
        return cancel_task(self, task_id, timeout)

    def list_tasks(self, *, timeout: float | None = None) -> list[TaskStatus]:
        """This caller's tasks, following pagination (2025-11-25 `tasks/list`; 2026-07-28 has no
        such method: the server answers -32601)."""
        return [parse_status("tasks/list", task) for task in self._list_all("tasks/list", "tasks", timeout)]

    def list_prompts(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return self._list_all("prompts/list", "prompts", timeout)

    def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None, *, timeout: float | None = None) -> dict[str, Any]:
        """Get a prompt; `input_required` is followed as for `call_tool`."""
        return request_with_input(self, "prompts/get", {"name": name, "arguments": dict(arguments or {})}, timeout=timeout)

    def list_resources(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return self._list_all("resources/list", "resources", timeout)

    def list_resource_templates(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return self._list_all("resources/templates/list", "resourceTemplates", timeout)

    def read_resource(self, uri: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Read a resource; `input_required` is followed as for `call_tool`."""
        return request_with_input(self, "resources/read", {"uri": uri}, timeout=timeout)

    def complete(
        self,
        ref: Mapping[str, Any],
        argument: str,
        value: str,
        *,
        context: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """`completion/complete`: `ref` is {"type": "ref/prompt", "name": ...} or
        {"type": "ref/resource", "uri": ...}; returns the `completion` object."""
        params: dict[str, Any] = {"ref": dict(ref), "argument": {"name": argument, "value": value}}
        if context:
            params["context"] = {"arguments": dict(context)}
        completion: dict[str, Any] = self.request("completion/complete", params, timeout=timeout).get("completion", {})
        return completion

    # -- listening -------------------------------------------------------------------------------
    def listen(
        self,
        *,
        tools: bool = True,
        prompts: bool = True,
        resources: bool = False,
        resource_uris: tuple[str, ...] | list[str] = (),
        timeout: float | None = None,
        queue_events: bool = True,
    ) -> Listener:
        """Subscribe to changes; returns an iterator of events (close it to unsubscribe).

        In 2026-07-28 this opens a `subscriptions/listen`; in the handshake era it delivers the
        server's unsolicited list changes and subscribes to `resource_uris` with resources/subscribe.
        With `queue_events=False` the listener only keeps the subscription open (for a session
        whose `on_change` callback consumes the changes).
        """
        wanted = {"tools": tools, "prompts": prompts, "resources": resources}
        uris = tuple(resource_uris)
        if self.era is Era.MODERN:
            return self._listening.listen_modern(wanted, uris, self.timeout if timeout is None else timeout, queue_events)
        return self._listening.listen_handshake(wanted, uris, timeout)

    # -- the reader's side -----------------------------------------------------------------------
    def _on_server_request(self, request: Request) -> None:
        self._asked.handle(request)

    def _on_message(self, message: Message) -> None:
        if isinstance(message, Response):
            self._calls.answer(message)
        elif isinstance(message, Notification):
            self._on_notification(message)
        elif isinstance(message, Request):
            self._on_server_request(message)

    def _watch_served(self, message: Request | Notification) -> Served:
        """The SERVER span of a message the server sent (traced sessions only)."""
        assert self._observer is not None
        request_id = message.id if isinstance(message, Request) else None
        return self._observer.serving(message.method, request_id, message.params, self._connection, self.protocol_version)

    def _on_notification(self, notification: Notification) -> None:
        if self._observer is None:
            self._deliver_notification(notification)
            return
        watched = self._watch_served(notification)
        try:
            self._deliver_notification(notification)
        finally:
            watched.leave()
            watched.end(None, None)

    def _deliver_notification(self, notification: Notification) -> None:
        method, params = notification.method, notification.params
        if method == "notifications/progress":
            pending = self._calls.with_token(params.get("progressToken"))
            if pending is not None and pending.progress is not None:
                _safely(pending.progress, params.get("progress"), params.get("total"), params.get("message"))
            return
        if method == "notifications/message":
            if self._on_log is not None:
                _safely(self._on_log, params)
            return
        if method == "notifications/elicitation/complete":
            if self._on_elicitation_complete is not None and isinstance(params.get("elicitationId"), str):
                _safely(self._on_elicitation_complete, params["elicitationId"])
            return
        if self._cache is not None and method in _CHANGE_METHODS:  # what the server says changed is kept no more
            if method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
                self._cache.resource_updated(params["uri"])
            else:
                self._cache.list_changed(method.split("/")[1])
        if self._on_change is not None and method in _CHANGE_METHODS:
            _safely(self._on_change, method, params)
        given = params.get("_meta")
        meta: dict[str, Any] = given if isinstance(given, dict) else {}
        for listener in self._listening.targets(meta.get(META_SUBSCRIPTION_ID)):
            listener._deliver(method, params)

    def _on_lost(self, error: Exception) -> None:
        with self._lock:
            self._lost = error
            listeners = self._listening.detach()
        self._ending.set()
        self._calls.fail_all(error)
        for listener in listeners:
            listener._finish(error)
        if self._on_lost_callback is not None:
            _safely(self._on_lost_callback, error)


def _safely(callback: Callable[..., Any], *args: Any) -> None:
    try:
        callback(*args)
    except Exception:
        log.exception("a client callback raised")
