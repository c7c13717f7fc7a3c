"""A connection to an MCP server over Streamable HTTP, in both protocol eras.

Strategy: every JSON-RPC request is POSTed on a worker of the connection's request pool
(`mcpsync-http-request-N`, at most MAX_REQUESTS at once), so `send()` returns at once, as it does
over stdio; the worker reads the answer (one JSON body, or an SSE stream parsed incrementally) and
hands each message to the session's callback in arrival order. Requests beyond MAX_REQUESTS wait in
order for a worker (up to REQUEST_BACKLOG of them; one more fails at once with a synthesized -32603
error): a queue, not a refusal, because the caller chose to send them and each caller is waiting
for its own, and the bound keeps a runaway caller from growing it without end.
Other notifications and responses are POSTed before `send()` returns, so they reach the server in
the order they were sent (`notifications/initialized` before the next request); a handshake-era
`notifications/cancelled` is POSTed on a small pool of its own (`mcpsync-http-cancel-N`), since
timers send it, and it must not wait behind the requests it cancels (should that pool be full too,
the request's stream is cut without the POST). Each exchange uses a fresh `http.client` connection
whose socket is registered while in use: cancelling a request or closing the connection shuts that
socket down, which wakes the blocked reader (see `_http_dial`, which also lets the credentials
retry a refused request).

Eras: a message whose `params._meta` names a protocol version is 2026-07-28 and carries the routing
headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`); closing its response stream is how it is
cancelled. Otherwise it is the handshake era: after `initialize` the connection keeps the server's
`Mcp-Session-Id` and the negotiated version, sends both on every later request, opens the session's
GET stream (`mcpsync-http-stream`) once `notifications/initialized` is sent, and DELETEs the
session on close (see `_http_handshake`). An HTTP 404 to a request carrying the session id means the session expired: the
connection is lost.

Failures: an HTTP error that carries a JSON-RPC error is delivered as it is; any other failure of a
request (an HTTP error without a usable body, a stream that ends before the response, a refused
connection once the server has answered before) is delivered as a synthesized -32603 error response
for that request only. Failing to reach the server before it ever answered is systemic: the
connection is lost. No `http.client`, `ssl` or socket exception escapes; they become `ConnectionLost`
or a synthesized error.
"""

from __future__ import annotations

import http.client
import logging
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .._pool import WorkerPool
from ..auth.client.credentials import HttpCredentials
from ..errors import ConnectionLost
from ..protocol import jsonrpc
from ..protocol.jsonrpc import ErrorCode, Message, Response
from ..protocol.param_headers import ParamHeader, param_headers
from ..protocol.sse import SseParser, TooLarge
from ._http_dial import Endpoint, Outgoing
from ._http_handshake import HandshakeSession
from ._http_headers import checked_headers, merged, routing_headers, trace_headers
from ._http_wire import (
    Aborted,
    Answer,
    Exchange,
    NotAuthorized,
    Stream,
    Unreachable,
    describe,
    is_json,
    media_type,
    messages_from,
    read_body,
    same_id,
    shut,
    snippet,
)

log = logging.getLogger("mcpsync.client")

OnMessage = Callable[[Message], None]
OnLost = Callable[[Exception], None]

CLOSE_GRACE = 5.0
"""How long `close()` waits for the worker threads by default, in seconds."""
MAX_REQUESTS = 32
"""How many requests are POSTed (and their answers read) at once; more wait for a worker."""
REQUEST_BACKLOG = 1024
"""How many requests may wait for a worker; one more fails at once."""
_CANCEL_WORKERS, _CANCEL_BACKLOG = 2, 64
_READ_SIZE = 64 * 1024
_DEFAULT_RETRY = 1.0  # seconds between stream reconnections when the server named no `retry`


# -- the connection --------------------------------------------------------------------------------
class HttpConnection:
    """Speaks JSON-RPC with an MCP server's Streamable HTTP endpoint; the same interface as
    `StdioConnection` (`start`, `send`, `close`), driven by a `ClientSession`.

    Args:
        url: the MCP endpoint, `http://` or `https://` (e.g. "http://127.0.0.1:8000/mcp").
        headers: added to every HTTP request (e.g. {"Authorization": "Bearer ..."}); the protocol's
            own headers win over same-named ones.
        timeout: seconds allowed to connect, send a request, and for short exchanges
            (notifications, DELETE).
        sse_read_timeout: seconds a response may stay silent (waiting for it, or between events of
            a stream) before the request fails.
        ssl_context: for https; the default verifies certificates against the system store.
        auth: credentials (`BearerToken`, `OAuth`, ...; see `HttpCredentials`): their
            `Authorization` header goes with every request, in place of one in `headers`, and a
            request refused 401 or 403 is sent again when they say so (after a login, a refresh,
            a step-up), at most MAX_AUTH_RETRIES times.

    Raises `InvalidUrl` (a ValueError) for a URL it cannot use (not http(s), no host, credentials
    in it), and ValueError for malformed headers.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        sse_read_timeout: float = 300.0,
        ssl_context: ssl.SSLContext | None = None,
        auth: HttpCredentials | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._endpoint = Endpoint(url, timeout=timeout, ssl_context=ssl_context, auth=auth, lock=self._lock, stopping=self._stopping)
        if not (timeout > 0 and sse_read_timeout > 0):
            raise ValueError("timeout and sse_read_timeout must be positive numbers of seconds")
        self.url = url
        self.timeout = timeout
        self.sse_read_timeout = sse_read_timeout
        self._user_headers = checked_headers(headers or {})
        if auth is not None:
            if not (callable(getattr(auth, "authorization", None)) and callable(getattr(auth, "refused", None))):
                raise TypeError("auth must have authorization() and refused() (see mcpsync.auth.HttpCredentials)")
            self._user_headers = {name: value for name, value in self._user_headers.items() if name.lower() != "authorization"}
        self._param_headers: dict[str, tuple[ParamHeader, ...]] = {}  # tool name -> its Mcp-Param-* headers
        self._on_message: OnMessage | None = None
        self._on_lost: OnLost | None = None
        self._exchanges: dict[Any, Exchange] = {}
        self._streams: set[Stream] = set()
        self._requests = WorkerPool("mcpsync-http-request", workers=MAX_REQUESTS, backlog=REQUEST_BACKLOG)
        self._cancels = WorkerPool("mcpsync-http-cancel", workers=_CANCEL_WORKERS, backlog=_CANCEL_BACKLOG)
        self._closing = threading.Event()
        self._closed = False
        self._lost: Exception | None = None
        self._modern = False  # the era of the last request sent
        self._handshake = HandshakeSession(self, self._endpoint, self._user_headers, self._lock)

    @property
    def session_id(self) -> str | None:
        """The handshake-era session id the server assigned (None without one)."""
        return self._handshake.id

    @property
    def protocol_version(self) -> str | None:
        """The version negotiated by `initialize` (handshake era), sent as MCP-Protocol-Version."""
        return self._handshake.version

    # -- the interface the session drives --------------------------------------------------------
    def start(self, on_message: OnMessage, on_lost: OnLost) -> None:
        """Keep the callbacks; nothing connects until the first `send()`."""
        with self._lock:
            if self._closed:
                raise ConnectionLost("the connection is closed")
            if self._on_message is not None:
                raise RuntimeError("the connection is already started")
            self._on_message, self._on_lost = on_message, on_lost

    def send(self, message: dict[str, Any], timeout: float | None = None) -> None:
        """POST one JSON-RPC message. A request, or a cancellation, returns at once (answers reach
        `on_message`); another notification or a response returns once the server took it, so
        they arrive in order. Raises ConnectionLost when the connection is closed or lost, or such
        a notification or response cannot be delivered."""
        body = jsonrpc.encode(message)
        with self._lock:
            if self._on_message is None or self._closed:
                raise ConnectionLost("the connection is closed")
            if self._lost is not None:
                raise ConnectionLost(str(self._lost)) from self._lost
        method = message.get("method")
        if isinstance(method, str) and "id" in message:
            self._start_request(message, method, body)
            return
        if method == "notifications/cancelled":
            self._cancel(message, body)
            return
        self._post_now(message, body)
        if method == "notifications/initialized":
            self._start_get_stream()

    def close(self, timeout: float | None = None) -> None:
        """DELETE the handshake session (if any), shut every open stream, join the workers within
        `timeout` seconds (default CLOSE_GRACE). Idempotent."""
        grace = CLOSE_GRACE if timeout is None else timeout
        deadline = time.monotonic() + grace
        with self._lock:
            if self._closed:
                return
            self._closed = True
            session_id = self._handshake.id if self._lost is None else None
        self._closing.set()
        if session_id is not None:
            self._handshake.end(max(0.1, min(self.timeout, grace)))
        with self._lock:
            for stream in list(self._streams):
                shut(stream)
        survivors = self._requests.close(max(0.0, deadline - time.monotonic()))
        survivors += self._cancels.close(max(0.0, deadline - time.monotonic()))
        survivors += self._handshake.join(max(0.0, deadline - time.monotonic()))
        if survivors:
            log.warning("HTTP connection to %s closed with threads still running: %s", self.url, survivors)

    # -- requests --------------------------------------------------------------------------------
    def _start_request(self, message: dict[str, Any], method: str, body: bytes) -> None:
        headers, modern, session_sent = self._headers_for(message)
        exchange = Exchange(message["id"], method, modern, session_sent)
        with self._lock:
            if self._closed:
                raise ConnectionLost("the connection is closed")
            self._modern = modern
            if method == "initialize":
                self._handshake.forget()
            self._exchanges[exchange.request_id] = exchange
            self._streams.add(exchange.stream)
        if not self._requests.submit(lambda: self._run_request(exchange, body, headers)):
            self._forget(exchange, None)
            self._fail(exchange, f"{method} was not sent: {MAX_REQUESTS + REQUEST_BACKLOG} requests are already in flight or waiting")

    def _run_request(self, exchange: Exchange, body: bytes, headers: dict[str, str]) -> None:
        conn: http.client.HTTPConnection | None = None
        try:
            try:
                conn, response = self._endpoint.open(Outgoing("POST", headers, body, exchange.stream, self.sse_read_timeout))
                parser = self._answer(exchange, response)
                self._handshake.resume(exchange, parser)
            except Aborted:
                pass
            except Unreachable as exc:
                if self._endpoint.reached:
                    self._fail(exchange, f"cannot reach {self.url}: {exc.reason}")
                else:
                    self._lose(ConnectionLost(f"cannot connect to {self.url}: {exc.reason}"))
            except TooLarge as exc:
                self._fail(exchange, str(exc))
            except NotAuthorized as exc:
                self._fail(exchange, f"not authorized: {exc.reason}", unauthorized=True)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                self._fail(exchange, f"{exchange.method} failed: {describe(exc)}")
            if not exchange.answered:
                self._fail(exchange, f"the server did not answer {exchange.method} (the HTTP response ended without a JSON-RPC response)")
        except Exception:  # a bug; the caller must still not wait forever
            log.exception("HTTP request worker failed")
            self._fail(exchange, f"{exchange.method} failed inside the client")
        finally:
            self._forget(exchange, conn)

    def _forget(self, exchange: Exchange, conn: http.client.HTTPConnection | None) -> None:
        with self._lock:
            if self._exchanges.get(exchange.request_id) is exchange:
                del self._exchanges[exchange.request_id]
        self._release(exchange.stream, conn)

    def _answer(self, exchange: Exchange, response: Answer) -> SseParser | None:
        """Deliver what one HTTP response says about `exchange`; returns the SSE parser when the
        answer was a stream (for resuming it), else None."""
        status = response.status
        if exchange.session_sent and status == 404:
            self._lose(ConnectionLost(f"the server at {self.url} ended the session (HTTP 404): session expired"))
            exchange.answered = True
            return None
        if exchange.method == "initialize" and 200 <= status < 300:
            self._handshake.capture(response)
        kind = media_type(response)
        if kind == "text/event-stream":
            parser = SseParser()
            self._pump(response, parser, exchange)
            return parser
        body = read_body(response)
        messages = messages_from(body, exchange) if body.strip() and is_json(kind) else []
        for message in messages:
            self._deliver(exchange, message)
        if not exchange.answered:
            if status >= 400:
                detail = snippet(body)
                self._fail(exchange, f"HTTP {status} {response.reason}" + (f": {detail}" if detail else ""), status)
            elif not messages:
                self._fail(exchange, f"the server answered {exchange.method} with HTTP {status} and no JSON-RPC response", status)
        return None

    def _pump(self, response: Answer, parser: SseParser, exchange: Exchange | None) -> int:
        """Read events until the stream ends, or (for a request) until its response arrived;
        returns how many bytes came (keep-alive comments included)."""
        received = 0
        while True:
            chunk = response.read1(_READ_SIZE)
            received += len(chunk)
            for event in parser.feed(chunk) if chunk else parser.finish():
                if event.event != "message" or not event.data.strip():
                    continue
                messages = messages_from(event.data, exchange)
                if not messages:
                    log.warning("%s sent an SSE event that is not a JSON-RPC message: %.200r", self.url, event.data)
                for message in messages:
                    self._deliver(exchange, message)
            if not chunk or (exchange is not None and exchange.answered):
                return received

    def _deliver(self, exchange: Exchange | None, message: Message) -> None:
        if exchange is not None and isinstance(message, Response) and same_id(message.id, exchange.request_id):
            if exchange.answered:
                return
            exchange.answered = True
            if exchange.method == "initialize" and message.error is None and isinstance(message.result, dict):
                self._handshake.agree(message.result)
        self._emit(message)

    def _fail(self, exchange: Exchange, reason: str, status: int | None = None, *, unauthorized: bool = False) -> None:
        """Answer `exchange` locally with an error, so its caller fails now instead of waiting.
        `unauthorized`: the credentials could not log in (`data.unauthorized`: the session does
        not fall back to the other era then, which would only ask them again)."""
        if exchange.answered or exchange.cancelled or exchange.stream.aborted:
            return
        exchange.answered = True
        data: dict[str, Any] = {"url": self.url}
        if status is not None:
            data["status"] = status
        if unauthorized:
            data["unauthorized"] = True
        error = {"code": int(ErrorCode.INTERNAL_ERROR), "message": reason, "data": data}
        self._emit(Response(exchange.request_id, None, error))

    # -- notifications, responses and cancellation -------------------------------------------------
    def _cancel_target(self, message: dict[str, Any]) -> tuple[Exchange | None, bool]:
        """The request a `notifications/cancelled` names (if still in flight) and whether it is
        of the 2026-07-28 era (then nothing is POSTed)."""
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        with self._lock:
            exchange = self._exchanges.get(request_id) if jsonrpc.is_request_id(request_id) else None
            modern = exchange.modern if exchange is not None else self._modern
        return exchange, modern

    def _cancel(self, message: dict[str, Any], body: bytes) -> None:
        """2026-07-28: close the request's stream, POST nothing. Handshake era: POST the
        notification on a worker (a cancel often comes from a timer thread, which must not wait
        on the network), then close the request's stream, which is of no use any more."""
        exchange, modern = self._cancel_target(message)
        if modern:
            if exchange is not None:
                self._cut(exchange)
            return
        with self._lock:
            if self._closed:
                raise ConnectionLost("the connection is closed")
        if not self._cancels.submit(lambda: self._post_cancel(message, body, exchange)):
            log.warning("too many cancellations waiting to be POSTed to %s; %s is cut without one", self.url, message.get("params"))
            if exchange is not None:
                self._cut(exchange)

    def _post_cancel(self, message: dict[str, Any], body: bytes, exchange: Exchange | None) -> None:
        try:
            self._post_now(message, body)
        except ConnectionLost as exc:
            log.debug("notifications/cancelled did not reach %s: %s", self.url, exc)
        except Exception:
            log.exception("HTTP cancel worker failed")
        finally:
            if exchange is not None:
                self._cut(exchange)

    def _cut(self, exchange: Exchange) -> None:
        exchange.cancelled = True
        with self._lock:
            shut(exchange.stream)

    def _post_now(self, message: dict[str, Any], body: bytes) -> None:
        """POST a notification or response and wait for the server to take it."""
        headers, _, session_sent = self._headers_for(message)
        what = message.get("method") or f"the response to {message.get('id')!r}"
        stream = Stream()
        conn = None
        try:
            self._register(stream)
            conn, response = self._endpoint.open(Outgoing("POST", headers, body, stream, self.timeout))
            status = response.status
            if session_sent and status == 404:
                lost = ConnectionLost(f"the server at {self.url} ended the session (HTTP 404): session expired")
                self._lose(lost)
                raise lost
            if status >= 400:
                detail = snippet(read_body(response, 4096)) if media_type(response) != "text/event-stream" else ""
                log.warning("%s refused %s: HTTP %d %s %s", self.url, what, status, response.reason, detail)
        except Aborted as exc:
            raise ConnectionLost("the connection is closed") from exc
        except (Unreachable, NotAuthorized) as exc:
            raise ConnectionLost(f"cannot send {what} to {self.url}: {exc.reason}") from exc
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise ConnectionLost(f"cannot send {what} to {self.url}: {describe(exc)}") from exc
        finally:
            self._release(stream, conn)

    # -- what the session tells it ---------------------------------------------------------------
    def know_tools(self, tools: list[dict[str, Any]]) -> None:
        """The tools the server listed: their `inputSchema`s say which arguments a 2026-07-28
        `tools/call` repeats as `Mcp-Param-<Token>` headers (the server checks them, -32020)."""
        known = {tool["name"]: param_headers(tool.get("inputSchema")) for tool in tools if isinstance(tool, dict) and isinstance(tool.get("name"), str)}
        with self._lock:
            self._param_headers = {name: plan for name, plan in known.items() if plan}

    def knows_tool(self, name: str) -> bool:
        """Whether `know_tools` has seen a tool that asks for headers under this name."""
        return name in self._param_headers

    # -- plumbing --------------------------------------------------------------------------------
    def _headers_for(self, message: dict[str, Any]) -> tuple[dict[str, str], bool, bool]:
        """The headers of a POST of `message`, whether it is 2026-07-28, and whether the session
        id went with it."""
        own = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **trace_headers(message)}
        routing = routing_headers(message, self._param_headers)
        if routing is not None:
            return merged(self._user_headers, {**own, **routing}), True, False
        if message.get("method") == "initialize":
            return merged(self._user_headers, own), False, False
        headers = self._handshake.headers(own)
        return headers, False, "Mcp-Session-Id" in headers

    def _start_get_stream(self) -> None:
        with self._lock:
            if not (self._closed or self._lost is not None):
                self._handshake.open_stream()

    def _register(self, stream: Stream) -> None:
        with self._lock:
            if self._closed or self._lost is not None:
                raise Aborted()
            self._streams.add(stream)

    def _release(self, stream: Stream, conn: http.client.HTTPConnection | None) -> None:
        with self._lock:
            self._streams.discard(stream)
            stream.sock = None
        if conn is not None:
            conn.close()

    def _stopping(self) -> bool:
        return self._closing.is_set() or self._lost is not None

    def _wait_retry(self, retry_ms: int | None) -> bool:
        """Wait before reconnecting a stream; True when the connection stopped meanwhile."""
        delay = _DEFAULT_RETRY if retry_ms is None else min(retry_ms / 1000.0, self.timeout)
        return self._closing.wait(delay) or self._lost is not None

    def _emit(self, message: Message) -> None:
        callback = self._on_message
        if callback is None or self._closed:
            return
        try:
            callback(message)
        except Exception:
            log.exception("the session's message callback raised")

    def _lose(self, error: Exception) -> None:
        """The connection as a whole failed: tell the session once and cut every stream."""
        with self._lock:
            if self._lost is not None or self._closed:
                return
            self._lost = error
            callback = self._on_lost
            for stream in list(self._streams):
                shut(stream)
        self._closing.set()
        if callback is not None:
            try:
                callback(error)
            except Exception:
                log.exception("the session's lost callback raised")
