"""The server's own requests to a client (handshake era: `roots/list`, `sampling/createMessage`,
`elicitation/create`, `ping`), answered by the session's callbacks on a bounded pool; and the
capabilities those callbacks declare, in both eras.

Why a pool with a refusal: the server chooses how many requests it sends, so one thread per
request would let it make the client start threads at will, and an unbounded queue would only
move the flood into memory. At most MAX_CALLBACKS callbacks run at once and CALLBACK_BACKLOG more
wait in order; a request beyond those is answered -32603 ("the client is busy") at once. Refused
rather than waited for, because the caller is the connection's reader, which must keep reading:
it carries the answers that let running callbacks finish.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from .._pool import WorkerPool
from ..errors import CallTimeout, ConnectionLost
from ..protocol import jsonrpc
from ..protocol.jsonrpc import ErrorCode, McpError, Request

log = logging.getLogger("mcpsync.client")

MAX_CALLBACKS = 8
"""How many of the server's requests the callbacks answer at once."""
CALLBACK_BACKLOG = 32
"""How many more wait for a free callback thread; beyond that the server is answered -32603 at once."""

Handler = Callable[[dict[str, Any]], dict[str, Any]]
"""Answers a server request (its params) with a result; raise McpError to answer an error."""


class Callbacks(Protocol):
    """What `declared` reads of a session's settings (`SessionOptions` has it): named here so
    this module need not import the options, which name its `Handler`."""

    @property
    def roots(self) -> Handler | None: ...

    @property
    def sampling(self) -> Handler | None: ...

    @property
    def elicitation(self) -> Handler | None: ...

    @property
    def elicitation_modes(self) -> Sequence[str]: ...

    @property
    def roots_list_changed(self) -> bool: ...

    @property
    def sampling_tools(self) -> bool: ...


def declared(options: Callbacks) -> tuple[dict[str, Handler], dict[str, Any]]:
    """The callbacks `options` gives, by the method each answers, and the capabilities that
    declare them: `{}` each, but elicitation names its modes unless it is forms only (which `{}`
    means), and roots says `listChanged` when the client will tell. ValueError for an unknown
    elicitation mode."""
    handlers: dict[str, Handler] = {}
    capabilities: dict[str, Any] = {}
    for method, handler, capability in (
        ("roots/list", options.roots, "roots"),
        ("sampling/createMessage", options.sampling, "sampling"),
        ("elicitation/create", options.elicitation, "elicitation"),
    ):
        if handler is not None:
            handlers[method] = handler
            capabilities[capability] = {}
    modes = tuple(options.elicitation_modes)
    if not modes or set(modes) - {"form", "url"}:
        raise ValueError("elicitation_modes must name 'form', 'url' or both")
    if options.elicitation is not None and modes != ("form",):  # {} alone means forms only
        capabilities["elicitation"] = {mode: {} for mode in modes}
    if options.roots is not None and options.roots_list_changed:
        capabilities["roots"] = {"listChanged": True}
    if options.sampling is not None and options.sampling_tools:
        capabilities["sampling"] = {"tools": {}}
    return handlers, capabilities


class Served(Protocol):
    """The telemetry's watch over one server request the client answers (`mcpsync.telemetry`):
    current on the thread that answers it until `leave()`, ended once with the answer."""

    def leave(self) -> None: ...

    def end(self, result: Any, error: BaseException | None) -> None: ...


class ServerRequests:
    """Answers the server's requests with `handlers` (by method) over `connection` (its `send`);
    `ping` at once, a method without a handler -32601 at once, the rest on the pool. `watch`,
    when the session is traced, begins the watch of each request on the thread that answers it."""

    def __init__(self, handlers: Mapping[str, Handler], connection: Any, watch: Callable[[Request], Served] | None = None) -> None:
        self._handlers = handlers
        self._connection = connection
        self._watch = watch
        self._pool = WorkerPool("mcpsync-client-callback", workers=MAX_CALLBACKS, backlog=CALLBACK_BACKLOG)
        self._closed = False

    def handle(self, request: Request) -> None:
        """Called on the connection's reader: never waits for a callback."""
        if request.method == "ping":
            self._settle(request, self._watched(request), {}, None)
            return
        handler = self._handlers.get(request.method)
        if handler is None:
            self._settle(request, self._watched(request), None, jsonrpc.method_not_found(request.method))
            return
        if self._pool.submit(lambda: self._run(handler, request)) or self._closed:
            return  # (a closed session has nobody to answer)
        busy = MAX_CALLBACKS + CALLBACK_BACKLOG
        log.warning("refused the server's %s: the client is busy with %d of its requests", request.method, busy)
        self._answer_error(request.id, McpError(ErrorCode.INTERNAL_ERROR, f"the client is busy: {busy} requests of the server are already waiting"))

    def close(self, budget: float) -> None:
        """Drop the requests still waiting for a callback (the connection is closed: nobody to
        answer) and wait up to `budget` seconds for callbacks still running (daemon threads: one
        that waits for a person cannot hold the interpreter, but a closed session should not leave
        work running behind it when it can help it)."""
        self._closed = True
        survivors = self._pool.close(budget)
        if survivors:
            log.warning("%d client callback(s) still running after the session closed", len(survivors))

    def _run(self, handler: Handler, request: Request) -> None:
        watched = self._watched(request)
        try:
            result, error = handler(request.params), None
        except McpError as exc:
            result, error = None, exc
        except Exception as exc:
            log.exception("the %s callback failed", request.method)
            result, error = None, McpError(ErrorCode.INTERNAL_ERROR, f"client callback failed: {type(exc).__name__}")
        self._settle(request, watched, result, error)

    def _watched(self, request: Request) -> Served | None:
        return self._watch(request) if self._watch is not None else None

    def _settle(self, request: Request, watched: Served | None, result: dict[str, Any] | None, error: McpError | None) -> None:
        """Answer the request, then end its watch."""
        if error is None:
            assert result is not None
            self._answer(request.id, result)
        else:
            self._answer_error(request.id, error)
        if watched is not None:
            watched.leave()
            watched.end(result, error)

    def _answer(self, request_id: Any, result: dict[str, Any]) -> None:
        self._send(jsonrpc.result_frame(request_id, result))

    def _answer_error(self, request_id: Any, error: McpError) -> None:
        self._send(jsonrpc.error_frame(request_id, error))

    def _send(self, frame: dict[str, Any]) -> None:
        try:
            self._connection.send(frame)
        except (ConnectionLost, CallTimeout) as exc:  # a gone or deaf server: nobody to tell
            log.debug("could not answer the server's request %r: %s", frame.get("id"), exc)
