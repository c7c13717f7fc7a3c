"""The HTTP-level answers of the MCP endpoint, before or instead of a JSON-RPC exchange: a
refusal (`_Refused`: a status with a JSON-RPC error body), a JSON or an empty response, and the
request body read within its limit (or taken decoded from `answers_at_once`).

Strategy: every refusal is raised as `_Refused` from wherever it is found (the body, the headers,
the session lookup) and turned into one response in one place, `WsgiTransport.__call__`; a body is
read only up to the limit, so an oversized one costs at most the limit plus one byte.
"""

from __future__ import annotations

import http
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...protocol import jsonrpc
from ...protocol.jsonrpc import ErrorCode, McpError, Message
from ._rules import header

if TYPE_CHECKING:
    from wsgiref.types import InputStream


class _Refused(Exception):
    """An HTTP-level refusal: `status`, with a JSON-RPC error body (code -32600 unless given) and
    any `headers` it needs (`Allow` for a 405, `WWW-Authenticate` for a 401)."""

    def __init__(
        self, status: int, message: str, request_id: Any = None, *, error: McpError | None = None, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error or McpError(ErrorCode.INVALID_REQUEST, message)
        self.request_id = request_id
        self.headers = list(headers)


DECODED = "mcpsync.decoded"
"""The environ key where `WsgiTransport.answers_at_once` leaves the body it read and decoded, as
(body, message), for the POST path (`decoded_body`)."""


def decoded_body(environ: dict[str, Any], max_body: int) -> tuple[bytes, Message]:
    """The POST's body and its message: decoded already by `answers_at_once` (taken out of the
    environ, which a listen's stream keeps as long as it is open), or read and decoded now."""
    decoded: tuple[bytes, Message] | None = environ.pop(DECODED, None)
    if decoded is not None:
        return decoded
    body = read_body(environ, max_body)
    return body, jsonrpc.decode(body)


def read_body(environ: dict[str, Any], max_body: int) -> bytes:
    """The whole body, by its `Content-Length` or (a server that says the input is terminated)
    to its end; refused 413 past `max_body`, 411 with neither, 400 when it ends early."""
    stream: InputStream = environ["wsgi.input"]
    length_text = header(environ, "Content-Length")
    try:
        if length_text:
            length = int(length_text)
            if length < 0:
                raise ValueError(length_text)
            if length > max_body:
                raise _Refused(413, f"Payload Too Large: the limit is {max_body} bytes")
            body = stream.read(length)
            if len(body) < length:
                raise _Refused(400, "Bad Request: the body ended early")
            return body
        if not environ.get("wsgi.input_terminated"):
            raise _Refused(411, "Length Required")
        body = stream.read(max_body + 1)
    except (OSError, ValueError) as exc:
        raise _Refused(400, f"Bad Request: cannot read the body ({exc})") from exc
    if len(body) > max_body:
        raise _Refused(413, f"Payload Too Large: the limit is {max_body} bytes")
    return body


_STATUS_LINES = {status.value: f"{status.value} {status.phrase}" for status in http.HTTPStatus}
"""Every status line, made once: looking the phrase up through the enum costs a microsecond a
response."""


def status_line(code: int) -> str:
    """`code` as the WSGI status string ("404 Not Found")."""
    line = _STATUS_LINES.get(code)
    return line if line is not None else f"{code} {http.HTTPStatus(code).phrase}"


def json_reply(start_response: Callable[..., Any], status: int, body: bytes, extra: list[tuple[str, str]] | None = None) -> list[bytes]:
    start_response(status_line(status), [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *(extra or [])])
    return [body]


def empty_reply(start_response: Callable[..., Any], status: int) -> list[bytes]:
    """A response without a body (202, 204, 404...): a zero length, except where none may be sent."""
    start_response(status_line(status), [("Content-Length", "0")] if status not in (204, 304) else [])
    return []
