"""mcpsync's exceptions: one root, and builtin bases where a builtin `except` should catch them too.

Strategy: `McpError` (protocol/jsonrpc.py) is a JSON-RPC error, whichever side raised it: the server
answers it to the client, and the client raises it when the server answered one. The rest are the
client's local failures.
"""

from __future__ import annotations


class McpsyncError(Exception):
    """The root of every exception mcpsync raises on purpose."""


class CallTimeout(McpsyncError, TimeoutError):
    """No answer before the deadline; the request was cancelled. Safe to retry only if idempotent."""


class ConnectionLost(McpsyncError):
    """The server went away (exited, closed its output, or the HTTP endpoint failed); every pending
    call fails with this at once. Retrying needs a new connection."""


class ProtocolViolation(McpsyncError):
    """The server broke the protocol (an unusable handshake, a malformed result)."""


class SessionClosed(McpsyncError, RuntimeError):
    """The session was closed by its owner; it cannot be used again."""


class MissingCallback(ProtocolViolation):
    """A 2026-07-28 `input_required` result asked for input the session has no callback for (so
    it never declared that capability); the call fails and is not retried."""


class InputRoundsExceeded(McpsyncError):
    """The server still answered `input_required` after `max_input_rounds` retries; the call was
    abandoned. Calling again starts over from the first round."""
