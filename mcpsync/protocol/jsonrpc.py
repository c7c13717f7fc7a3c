"""JSON-RPC 2.0 frames for MCP: decode once, encode compactly.

Strategy: `decode()` is the only place where raw bytes become typed messages. It never raises: a
frame that cannot be served becomes an `Invalid` carrying the error to answer with (or none, for a
broken notification, which is never answered). Nothing downstream re-validates the envelope.
`encode()` produces one compact UTF-8 line ending in `\\n` and raises `EncodeError` for values JSON
cannot carry (NaN, infinities), so the caller can answer with an internal error instead.

Ids keep their JSON type: `7` and `"7"` are different ids. Python's `True` is an `int`, so bools are
rejected before ints.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import ujson

from ..errors import McpsyncError

RequestId = str | int


class ErrorCode(enum.IntEnum):
    """The JSON-RPC and MCP error codes mcpsync emits."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    RESOURCE_NOT_FOUND = -32002  # handshake era only
    HEADER_MISMATCH = -32020  # 2026-07-28, HTTP only
    MISSING_CLIENT_CAPABILITY = -32021  # 2026-07-28
    UNSUPPORTED_PROTOCOL_VERSION = -32022  # 2026-07-28


class McpError(McpsyncError):
    """A JSON-RPC error, with its `code`, `message` and `data`.

    On the server side it is raised when the *peer* got something wrong (or when a handler wants the
    client to see a specific error); the engine answers it. On the client side it is what a call
    raises when the server answered with an error.

    So an McpError means "the peer said so". Its root, `McpsyncError`, also covers what this side
    found on its own and no peer sent (`CallTimeout`, `ConnectionLost`, `CallCancelled`, ...):
    catch McpError for the server's refusals, McpsyncError for any failure mcpsync raises.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self) -> str:
        return f"McpError({self.code}, {self.message!r}, data={self.data!r})"


def invalid_params(message: str, data: Any = None) -> McpError:
    return McpError(ErrorCode.INVALID_PARAMS, message, data)


def method_not_found(method: str) -> McpError:
    return McpError(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}", {"method": method})


# The messages of every frame are plain slotted dataclasses, not frozen ones: a frozen one pays an
# `object.__setattr__` call per field at creation, on every request and response. Read-only by
# convention.
@dataclass(slots=True)
class Request:
    id: RequestId
    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Notification:
    method: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Response:
    """A response from the peer to a request we sent (handshake-era server-to-client requests)."""

    id: RequestId
    result: Any = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Invalid:
    """A frame that cannot be served. `answer_id` is the id to answer with (None → `"id": null`);
    `answer` is False for broken notifications, which are never answered."""

    error: McpError
    answer_id: RequestId | None = None
    answer: bool = True


Message = Request | Notification | Response | Invalid


def is_request_id(value: object) -> bool:
    """True for a usable request id: a string or an integer, never a bool, float or null."""
    return type(value) is str or type(value) is int


def decode(line: bytes) -> Message:
    """Turn one line (without its newline) into a typed message. Never raises."""
    try:
        # ASCII (the usual frame) needs no UTF-8 check of its own; anything else is decoded
        # strictly first, so that lone surrogates and bad bytes are a parse error.
        text = line if line.isascii() else line.decode("utf-8")
        obj = ujson.loads(text)
        if (line.find(b"NaN") >= 0 or line.find(b"Infinity") >= 0) and _has_non_json_constant(text):  # (`in` on bytes tries int first)
            raise ValueError("NaN and Infinity are not JSON")
    except (ValueError, UnicodeDecodeError, RecursionError, OverflowError):
        return Invalid(McpError(ErrorCode.PARSE_ERROR, "Parse error"))
    if type(obj) is not dict:
        kind = "batch arrays are not supported" if type(obj) is list else "a message must be a JSON object"
        return Invalid(McpError(ErrorCode.INVALID_REQUEST, f"Invalid Request: {kind}"))
    return decode_object(obj)


def _has_non_json_constant(text: str | bytes) -> bool:
    """ujson accepts NaN and ±Infinity; the strict parser decides whether they appear outside strings."""
    def reject(constant: str) -> None:
        raise ValueError(constant)

    import json  # deferred: only a frame holding "NaN" or "Infinity" gets here, and json costs start-up 1.5 ms

    try:
        json.loads(text, parse_constant=reject)
    except ValueError:
        return True
    return False


def decode_object(obj: dict[str, Any]) -> Message:
    """Classify an already parsed JSON object (shared by stdio and HTTP bodies)."""
    has_id = "id" in obj
    msg_id = obj.get("id")
    method = obj.get("method")
    if method is None and "method" not in obj:
        if has_id and ("result" in obj or "error" in obj):
            return _decode_response(obj, msg_id)
        return Invalid(McpError(ErrorCode.INVALID_REQUEST, "Invalid Request: neither a request, a notification nor a response"))
    if has_id:
        if type(msg_id) is not str and type(msg_id) is not int:  # is_request_id, inline: every request
            return Invalid(McpError(ErrorCode.INVALID_REQUEST, "Invalid Request: id must be a string or an integer"))
        params = obj.get("params")
        if obj.get("jsonrpc") == "2.0" and type(method) is str and type(params) is dict:  # the usual request
            return Request(msg_id, method, params)
        checked = _checked_method(obj, method)
        if isinstance(checked, McpError):
            return Invalid(checked, answer_id=msg_id)
        return Request(msg_id, checked, {} if params is None else params)
    checked = _checked_method(obj, method)
    if isinstance(checked, McpError):
        return Invalid(checked, answer=False)
    params = obj.get("params")
    return Notification(checked, {} if params is None else params)


def _checked_method(obj: dict[str, Any], method: object) -> str | McpError:
    """The method of a request or notification whose envelope is sound, or the error it earns."""
    if obj.get("jsonrpc") != "2.0":
        return McpError(ErrorCode.INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"')
    if type(method) is not str:
        return McpError(ErrorCode.INVALID_REQUEST, 'Invalid Request: "method" must be a string')
    if "params" in obj and type(obj["params"]) is not dict:
        return McpError(ErrorCode.INVALID_PARAMS, 'Invalid params: "params" must be an object')
    return method


def _decode_response(obj: dict[str, Any], msg_id: object) -> Message:
    if (type(msg_id) is not str and type(msg_id) is not int) or obj.get("jsonrpc") != "2.0":
        return Invalid(McpError(ErrorCode.INVALID_REQUEST, "Invalid Request: malformed response"), answer=False)
    error = obj.get("error")
    if error is not None and type(error) is not dict:
        return Invalid(McpError(ErrorCode.INVALID_REQUEST, "Invalid Request: malformed error"), answer=False)
    return Response(msg_id, obj.get("result"), error)


class EncodeError(McpsyncError, ValueError):
    """A value that JSON cannot carry (NaN, an infinity, an unknown type) was about to be sent."""


def encode(message: dict[str, Any]) -> bytes:
    """One compact JSON line, UTF-8, ending in a single `\\n`."""
    try:
        # ujson.dumps(message, ensure_ascii=False, escape_forward_slashes=False, allow_nan=False),
        # by position: matching keywords costs a third of encoding a small frame. The order
        # (ensure_ascii, encode_html_chars, escape_forward_slashes, sort_keys, indent, allow_nan)
        # is ujson's; tests/protocol/test_jsonrpc.py pins it.
        # types-ujson puts double_precision second, which the C function does not: hence the ignore
        text = ujson.dumps(message, False, False, False, False, 0, False)  # type: ignore[arg-type]
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # lone surrogates: keep them, escaped, rather than fail the message
        text = ujson.dumps(message, ensure_ascii=True, escape_forward_slashes=False, allow_nan=False)
        return text.encode("ascii") + b"\n"
    except (OverflowError, TypeError, ValueError) as exc:
        raise EncodeError(str(exc)) from exc


def result_frame(request_id: RequestId, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_frame(request_id: RequestId | None, error: McpError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error()}


def notification_frame(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        frame["params"] = params
    return frame
