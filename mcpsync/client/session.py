"""A blocking MCP client session that speaks both protocol eras.

Strategy: the connection's reader thread hands every message to `_on_message`, which completes the
waiting call (by id), routes progress to that call's callback, turns list changes into listen events,
and answers the server's own requests (handshake era) on the session's bounded callback pool so the
reader never blocks. Callers block in `request()` on a `Future` with a deadline; on timeout the request is
cancelled on the wire and `CallTimeout` is raised. When the connection is lost, every pending call
fails at once with `ConnectionLost`.

Opening (`mode`): "auto" probes `server/discover` and falls back to `initialize` when the server
does not speak 2026-07-28; "legacy" and "modern" force an era.

Two 2026-07-28 rules live here, since they concern what a request means rather than how it travels:
a request the server refuses for its protocol version (-32022, `data.supported` naming a version we
speak) is sent once more with that version, which the session then keeps (`request()`); and over
HTTP a tool whose `x-mcp-header` annotations are invalid is left out of `list_tools()` with a warning
and refused by `call_tool()` before anything is sent (`InvalidTool`), as the transport spec requires:
its calls could not carry the headers the server checks.

Questions from the server (elicitation, sampling, roots) reach the same callbacks in both eras: as
JSON-RPC requests in the handshake era (answered off the reader thread, on a bounded pool: see
`_server_requests`), as the `inputRequests` of
an `input_required` result in 2026-07-28 (answered on the caller's thread by `_request_with_input`,
which then retries the request); see `ClientSession`.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .._version import __version__
from ..errors import CallTimeout, ConnectionLost, InputRoundsExceeded, InvalidTool, ProtocolViolation, SessionClosed
from ..protocol import jsonrpc
from ..protocol.jsonrpc import ErrorCode, McpError, Message, Notification, Request, Response
from ..protocol.param_headers import split_invalid_tools
from ..protocol.versions import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    MODERN_VERSIONS,
    Era,
    is_log_level,
)
from ._input_required import STATE_ONLY_FIRST_WAIT, STATE_ONLY_MAX_WAIT, answer_questions, parse_input_required
from ._listening import Listening
from ._pending import PendingCall, Progress
from ._server_requests import Handler, ServerRequests
from .listen import Listener
from .options import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from .options import SessionOptions, session_options

log = logging.getLogger("mcpsync.client")

_CLOSE_SEND_TIMEOUT = 0.5  # closing never waits long to tell a server that stopped reading
_CALLBACK_JOIN_TIMEOUT = 2.0  # close() waits this long for callbacks still answering the server
PROBE_TIMEOUT = 10.0
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
        on_log: called with the params of each `notifications/message`.
        on_change: called on the connection's reader thread with (method, params) of every list
            change and resource update, before any response that arrives after it is delivered
            (a gateway relays changes this way, ahead of the result of the call that caused them).
        on_lost: called once when the connection is lost, after every pending call has failed.
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
        mode, timeout, client_info, log_level = chosen.mode, chosen.timeout, chosen.client_info, chosen.log_level
        roots, sampling, elicitation, max_input_rounds = chosen.roots, chosen.sampling, chosen.elicitation, chosen.max_input_rounds
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if not (isinstance(max_input_rounds, int) and max_input_rounds >= 0):
            raise ValueError("max_input_rounds must be an int >= 0")
        self.max_input_rounds = max_input_rounds
        self._connection = connection
        self._mode = mode
        self.timeout = timeout
        self.client_info = dict(client_info or {"name": "mcpsync", "version": __version__})
        self._handlers: dict[str, Handler] = {}
        self.capabilities: dict[str, Any] = {}
        for method, handler, capability in (
            ("roots/list", roots, "roots"),
            ("sampling/createMessage", sampling, "sampling"),
            ("elicitation/create", elicitation, "elicitation"),
        ):
            if handler is not None:
                self._handlers[method] = handler
                self.capabilities[capability] = {}
        modes = tuple(chosen.elicitation_modes)
        if not modes or set(modes) - {"form", "url"}:
            raise ValueError("elicitation_modes must name 'form', 'url' or both")
        if elicitation is not None and modes != ("form",):  # {} alone means forms only
            self.capabilities["elicitation"] = {mode: {} for mode in modes}
        if roots is not None and chosen.roots_list_changed:
            self.capabilities["roots"] = {"listChanged": True}
        self._on_log = chosen.on_log
        if log_level is not None and not is_log_level(log_level):
            raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}")
        self.log_level = log_level
        self._on_change = chosen.on_change
        self._on_lost_callback = chosen.on_lost
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[Any, PendingCall] = {}
        self._by_token: dict[Any, PendingCall] = {}
        self._listening = Listening(self)  # the open listeners, under self._lock
        self._lost: Exception | None = None
        self._closed = False
        self._ending = threading.Event()  # set by close() and a lost connection: ends waits at once
        self._asked = ServerRequests(self._handlers, self._connection)  # answers the server's requests
        self._invalid_tools: dict[str, str] = {}  # name -> why, from the last list_tools(); under self._lock

        self.era: Era | None = None
        self.protocol_version: str | None = None
        self.server_info: dict[str, Any] = {}
        self.server_capabilities: dict[str, Any] = {}
        self.instructions: str | None = None

    # -- opening and closing ---------------------------------------------------------------------
    def open(self) -> ClientSession:
        """Start the connection and agree on an era; returns self."""
        self._connection.start(self._on_message, self._on_lost)
        try:
            if self._mode == "legacy":
                self._initialize()
            elif self._mode == "modern":
                self._discover(LATEST_MODERN_VERSION, fall_back=False)
            else:
                self._discover(LATEST_MODERN_VERSION, fall_back=True)
        except BaseException:
            self.close()
            raise
        return self

    def _discover(self, version: str, *, fall_back: bool) -> None:
        self.era, self.protocol_version = Era.MODERN, version
        try:  # a -32022 naming a version we speak has been retried with it by request()
            result = self.request("server/discover", {}, timeout=min(self.timeout, PROBE_TIMEOUT))
        except McpError as exc:
            if not fall_back or (isinstance(exc.data, dict) and exc.data.get("unauthorized") is True):
                raise  # a login that failed would only be asked again by initialize
            log.debug("server/discover failed (%s); falling back to initialize", exc)
            return self._initialize()
        except CallTimeout:
            if not fall_back:
                raise
            log.debug("server/discover timed out; falling back to initialize")
            return self._initialize()
        self.server_capabilities = result.get("capabilities") or {}
        self.instructions = result.get("instructions")
        self.server_info = (result.get("_meta") or {}).get(META_SERVER_INFO) or {}

    def _initialize(self) -> None:
        self.era, self.protocol_version = Era.HANDSHAKE, None
        params = {"protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": self.capabilities, "clientInfo": self.client_info}
        result = self.request("initialize", params)
        version = result.get("protocolVersion")
        if version not in HANDSHAKE_VERSIONS:
            raise ProtocolViolation(f"the server offered protocol version {version!r}, which this client does not speak")
        self.protocol_version = version
        self.server_capabilities = result.get("capabilities") or {}
        self.server_info = result.get("serverInfo") or {}
        self.instructions = result.get("instructions")
        self.notify("notifications/initialized")

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
            in_flight = [request_id for request_id, call in self._pending.items() if call.on_wire] if self._lost is None else []
        for request_id in in_flight:  # so the server stops their work instead of finishing it for nobody
            self._cancel_on_wire(request_id, "the client closed the session", timeout=_CLOSE_SEND_TIMEOUT)
        self._fail_pending(SessionClosed("the session was closed"))
        self._connection.close()
        self._asked.close(_CALLBACK_JOIN_TIMEOUT)

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
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        try:
            return self.start_request(method, params, progress=progress, timeout=timeout).result(timeout)
        except McpError as exc:
            version = self._version_to_retry(exc)
            if version is None:
                raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise
            log.info("%s: the server refused protocol version %s; retrying with %s", method, self.protocol_version, version)
            self.protocol_version = version
            return self.start_request(method, params, progress=progress, timeout=remaining).result(remaining)

    def _version_to_retry(self, refusal: McpError) -> str | None:
        """The version to send a request again with after `refusal`, or None: not a 2026-07-28
        version refusal, or the server supports no version this client speaks."""
        if self.era is not Era.MODERN or refusal.code != ErrorCode.UNSUPPORTED_PROTOCOL_VERSION:
            return None
        supported = refusal.data.get("supported") if isinstance(refusal.data, dict) else None
        if not isinstance(supported, list):
            return None
        return next((version for version in MODERN_VERSIONS if version in supported), None)

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
        now = time.monotonic()
        with self._lock:
            overdue = [call for call in self._pending.values() if call.deadline is not None and call.deadline <= now]
        for call in overdue:
            call._expire(call.timeout_given)
        return len(overdue)

    def _register(
        self, request_id: Any, method: str, params: dict[str, Any] | None, progress: Progress | None = None, timeout: float | None = None
    ) -> PendingCall:
        pending = PendingCall(self, request_id, method, params, progress, timeout)
        with self._lock:
            if self._closed:
                raise SessionClosed("the session is closed")
            if self._lost is not None:
                raise ConnectionLost(str(self._lost)) from self._lost
            self._pending[request_id] = pending
            if pending.progress_token is not None:
                self._by_token[pending.progress_token] = pending
        return pending

    def _take_pending(self, request_id: Any) -> PendingCall | None:
        """Forget a call without ending it (a closed listener: a late answer is dropped)."""
        with self._lock:
            return self._pending.pop(request_id, None)

    def _unregister(self, pending: PendingCall) -> None:
        with self._lock:
            self._pending.pop(pending.id, None)
            if pending.progress_token is not None:
                self._by_token.pop(pending.progress_token, None)

    def _send_request(self, request_id: Any, method: str, params: dict[str, Any] | None, progress_token: Any, timeout: float | None = None) -> None:
        modern = self.era is Era.MODERN
        if progress_token is not None or modern:  # a new _meta (the caller's params stay as they are)
            meta = params.get("_meta") if params else None
            meta = {**meta} if meta else {}
            if progress_token is not None:
                meta["progressToken"] = progress_token
            if modern:
                meta.update(self.envelope())
            params = {**params, "_meta": meta} if params else {"_meta": meta}
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params:
            message["params"] = params
        self._connection.send(message, timeout)

    def envelope(self) -> dict[str, Any]:
        """The 2026-07-28 `_meta` keys every request of this session carries."""
        envelope = {
            META_PROTOCOL_VERSION: self.protocol_version,
            META_CLIENT_CAPABILITIES: self.capabilities,
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
        """Send a notification (no answer); `timeout` bounds the wait for a server slow to read."""
        self._connection.send(jsonrpc.notification_frame(method, params), timeout)

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
        tools = self._list_all("tools/list", "tools", timeout)
        know_tools = getattr(self._connection, "know_tools", None)
        if know_tools is None:
            return tools
        invalid: dict[str, str] = {}
        if self.era is Era.MODERN:
            tools, invalid = split_invalid_tools(tools)
            for name, reason in invalid.items():
                log.warning("leaving out tool %r: %s", name, reason)
        with self._lock:
            self._invalid_tools = invalid
        know_tools(tools)
        return tools

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: Progress | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Call a tool; returns its `CallToolResult` (check `isError` for tool failures).
        In 2026-07-28 an `input_required` answer is followed (see the class docstring).
        Raises `InvalidTool`, sending nothing, for a tool the last `list_tools()` left out."""
        self._refuse_invalid(name)
        params = {"name": name, "arguments": dict(arguments or {})}
        try:
            return self._request_with_input("tools/call", params, progress=progress, timeout=timeout)
        except McpError as exc:
            # -32020 over HTTP: the tool wants some arguments as Mcp-Param-* headers, which only
            # its listed schema tells. Refused before it ran, so it is safe to learn and retry once.
            knows_tool = getattr(self._connection, "knows_tool", None)
            if exc.code != ErrorCode.HEADER_MISMATCH or knows_tool is None or knows_tool(name):
                raise
            self.list_tools(timeout=timeout)
            self._refuse_invalid(name)
            if not knows_tool(name):
                raise
            return self._request_with_input("tools/call", params, progress=progress, timeout=timeout)

    def _refuse_invalid(self, name: str) -> None:
        with self._lock:
            reason = self._invalid_tools.get(name)
        if reason is not None:
            raise InvalidTool(f"tool {name!r} was left out of list_tools() and is not called: {reason}")

    def list_prompts(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return self._list_all("prompts/list", "prompts", timeout)

    def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None, *, timeout: float | None = None) -> dict[str, Any]:
        """Get a prompt; `input_required` is followed as for `call_tool`."""
        return self._request_with_input("prompts/get", {"name": name, "arguments": dict(arguments or {})}, timeout=timeout)

    def list_resources(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return self._list_all("resources/list", "resources", timeout)

    def list_resource_templates(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return self._list_all("resources/templates/list", "resourceTemplates", timeout)

    def read_resource(self, uri: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Read a resource; `input_required` is followed as for `call_tool`."""
        return self._request_with_input("resources/read", {"uri": uri}, timeout=timeout)

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

    # -- input_required (2026-07-28 multi round-trip requests) ------------------------------------
    def _request_with_input(
        self, method: str, params: dict[str, Any], *, progress: Progress | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """`request()`, then answer `input_required` rounds and retry until the final result,
        all within one deadline (see the class docstring)."""
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        result = self.request(method, params, progress=progress, timeout=timeout)
        rounds, wait = 0, STATE_ONLY_FIRST_WAIT
        while self.era is Era.MODERN and result.get("resultType") == "input_required":
            rounds += 1
            if rounds > self.max_input_rounds:
                raise InputRoundsExceeded(
                    f"{method}: the server still asked for input after {self.max_input_rounds} rounds "
                    f"(the limit, max_input_rounds={self.max_input_rounds})"
                )
            questions, state = parse_input_required(method, result)
            retry = dict(params)
            if questions:
                wait = STATE_ONLY_FIRST_WAIT
                retry["inputResponses"] = answer_questions(self._handlers, method, questions, deadline, limit)
            else:  # only a requestState: the server asks to be called again a little later
                self._ending.wait(max(0.0, min(wait, deadline - time.monotonic())))
                wait = min(wait * 2, STATE_ONLY_MAX_WAIT)
            if state is not None:
                retry["requestState"] = state
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CallTimeout(f"{method} did not complete within {limit} s ({rounds} input_required round(s))")
            try:
                result = self.request(method, retry, progress=progress, timeout=remaining)
            except CallTimeout as exc:
                raise CallTimeout(f"{method} did not complete within {limit} s ({rounds} input_required round(s))") from exc
        return result

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
            self._on_response(message)
        elif isinstance(message, Notification):
            self._on_notification(message)
        elif isinstance(message, Request):
            self._on_server_request(message)

    def _on_response(self, response: Response) -> None:
        with self._lock:
            pending = self._pending.get(response.id)
        if pending is None:
            return  # a call that timed out or was cancelled
        if response.error is not None:
            error = response.error
            pending.settle(error=McpError(error.get("code", ErrorCode.INTERNAL_ERROR), str(error.get("message", "")), error.get("data")))
        elif not isinstance(response.result, dict):
            pending.settle(error=ProtocolViolation(f"the result of request {response.id!r} is not an object"))
        else:
            pending.settle(result=response.result)

    def _on_notification(self, notification: Notification) -> None:
        method, params = notification.method, notification.params
        if method == "notifications/progress":
            with self._lock:
                pending = self._by_token.get(params.get("progressToken"))
            if pending is not None and pending.progress is not None:
                _safely(pending.progress, params.get("progress"), params.get("total"), params.get("message"))
            return
        if method == "notifications/message":
            if self._on_log is not None:
                _safely(self._on_log, params)
            return
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
        self._fail_pending(error)
        for listener in listeners:
            listener._finish(error)
        if self._on_lost_callback is not None:
            _safely(self._on_lost_callback, error)

    def _fail_pending(self, error: Exception) -> None:
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            self._by_token.clear()
        for entry in pending:
            entry.settle(error=error)


def _safely(callback: Callable[..., Any], *args: Any) -> None:
    try:
        callback(*args)
    except Exception:
        log.exception("a client callback raised")
