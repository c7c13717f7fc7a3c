"""What one HTTP exchange of the client is made of, apart from the connection that runs it: the
socket registration that lets a cancel or close() cut a blocked read, the request in flight, and
the readers of what came back (bodies, JSON-RPC messages, a failure put in words).

Why apart: none of it holds the connection's state, so `HttpConnection` keeps only the protocol's
decisions (eras, sessions, which failure means what).
"""

from __future__ import annotations

import http.client
import io
import logging
import socket
import ssl
from collections.abc import Mapping
from typing import Any, Protocol

import ujson

from ..errors import McpsyncError
from ..protocol import jsonrpc
from ..protocol.jsonrpc import Invalid, Message
from ..protocol.sse import TooLarge

log = logging.getLogger("mcpsync.client")

MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest JSON body or SSE event accepted from the server."""


class Aborted(McpsyncError):
    """The exchange was cut (cancelled, or the connection closed) before it got going. The
    connection catches it and turns it into the call's outcome; it never reaches the caller."""


class Unreachable(McpsyncError):
    """Connecting (DNS, TCP, TLS) failed; `reason` says how. The connection turns it into
    `ConnectionLost` for the caller."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotAuthorized(McpsyncError):
    """The credentials could not get a token the server accepts (a login that failed, metadata
    that does not check out): `reason` says why, without a secret. The connection fails the
    request with it; the server was reached, so nothing is lost."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Answer(Protocol):
    """What the connection reads of an HTTP response: an `http.client.HTTPResponse`, or a refusal
    already read (`Refusal`) once the credentials have had their say."""

    @property
    def status(self) -> int: ...

    @property
    def reason(self) -> str: ...

    def getheader(self, name: str) -> str | None: ...

    def read(self, amt: int | None = None) -> bytes: ...

    def read1(self, n: int = -1) -> bytes: ...


class Refusal:
    """A 401 or 403 response read whole (it is small), so its connection can be closed while the
    credentials log in, and then read like the response it was."""

    def __init__(self, response: http.client.HTTPResponse, limit: int = 64 * 1024) -> None:
        self.status = response.status
        self.reason = response.reason
        self._headers = response.headers
        self._body = io.BytesIO(response.read(limit))

    def getheader(self, name: str, default: str | None = None) -> str | None:
        value = self._headers.get(name)
        return default if value is None else str(value)

    def read(self, amt: int | None = None) -> bytes:
        return self._body.read(amt)

    def read1(self, n: int = -1) -> bytes:
        return self._body.read1(n)


class Stream:
    """One HTTP exchange in use: its socket, so cancellation and close() can shut it down."""

    __slots__ = ("sock", "aborted")

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.aborted = False


class Exchange:
    """One request in flight."""

    __slots__ = ("request_id", "method", "modern", "session_sent", "stream", "answered", "cancelled")

    def __init__(self, request_id: Any, method: str, modern: bool, session_sent: bool) -> None:
        self.request_id = request_id
        self.method = method
        self.modern = modern
        self.session_sent = session_sent
        self.stream = Stream()
        self.answered = False
        self.cancelled = False


def shut(stream: Stream) -> None:
    """Cut a stream (the caller holds the connection's lock, so the socket is still open)."""
    stream.aborted = True
    if stream.sock is not None:
        try:
            socket.socket.shutdown(stream.sock, socket.SHUT_RDWR)  # not SSLSocket's: no TLS state change
        except OSError:
            pass


def media_type(response: Answer) -> str:
    return (response.getheader("Content-Type") or "").split(";", 1)[0].strip().lower()


def is_json(media_type: str) -> bool:
    return media_type in ("application/json", "") or media_type.endswith("+json")


def read_body(response: Answer, limit: int = MAX_BODY_BYTES) -> bytes:
    body = response.read(limit + 1)
    if len(body) > limit:
        raise TooLarge(f"the server sent a body over {limit} bytes")
    return body


def messages_from(data: bytes, exchange: Exchange | None) -> list[Message]:
    """The JSON-RPC messages in a body or event: one object, or a list (a 2025-03-26 batch).
    An error without an id answering a single request's POST is that request's error."""
    try:
        obj = ujson.loads(data)
    except (ValueError, OverflowError, RecursionError):
        return []
    messages: list[Message] = []
    for item in obj if isinstance(obj, list) else [obj]:
        if not isinstance(item, dict):
            continue
        if exchange is not None and "error" in item and "method" not in item and item.get("id") is None:
            item = {**item, "id": exchange.request_id}
        message = jsonrpc.decode_object(item)
        if isinstance(message, Invalid):
            log.debug("dropped a malformed message from the server: %s", message.error.message)
            continue
        messages.append(message)
    return messages


def same_id(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def snippet(body: bytes, limit: int = 200) -> str:
    text = body[: limit * 4].decode("utf-8", "replace")
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unsendable_header(headers: Mapping[str, str]) -> str | None:
    """The name of the first header whose value HTTP cannot carry as is (a line break or NUL, which
    would end the header or smuggle another, or a character latin-1 lacks); None when all can go.
    For an error that names the header but never quotes its value (an `Authorization` value is
    a secret)."""
    for name, value in headers.items():
        try:
            encoded = value.encode("latin-1")
        except UnicodeEncodeError:
            return name
        if b"\r" in encoded or b"\n" in encoded or b"\0" in encoded:
            return name
    return None


def describe(exc: BaseException) -> str:
    """A short, human reason for a network failure."""
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host name ({exc.strerror or exc})"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate verification failed ({exc.verify_message or exc})"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or exc})"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(exc, http.client.IncompleteRead):
        return "the server closed the connection in the middle of the response"
    if isinstance(exc, http.client.HTTPException):
        return f"malformed HTTP response ({type(exc).__name__})"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    return str(exc) or type(exc).__name__
