"""mcpsync's exceptions: one root, and builtin bases where a builtin `except` should catch them too.

Strategy: everything mcpsync raises on purpose is a `McpsyncError`, so `except McpsyncError`
catches it all. One branch of it, `McpError` (protocol/jsonrpc.py), is a JSON-RPC error with a
code that travels on the wire: the server answers it to the client, and the client raises it when
the server answered one, so it means "the peer said so". The classes here are this side's own
findings (a deadline, a lost connection, a local cancel), which no peer ever sent. The rest of the
family lives beside the code that raises it, each keeping the builtin base an `except` may already
name: `ToolError` and `ResourceNotFound` (a LookupError) in catalog/content.py, `ConfigError` (a
ValueError) in config.py, `TargetError` in loader.py, `EncodeError` (a ValueError) in
protocol/jsonrpc.py.
"""

from __future__ import annotations


class McpsyncError(Exception):
    """The root of every exception mcpsync raises on purpose: catch it for any failure of mcpsync's.

    `McpError` is the branch the peer sent (or is to be sent): it carries a JSON-RPC code. The
    other subclasses happened on this side and never crossed the wire."""


class CallTimeout(McpsyncError, TimeoutError):
    """No answer before the deadline; the request was cancelled. Safe to retry only if idempotent."""


class ConnectionLost(McpsyncError):
    """The server went away (exited, closed its output, or the HTTP endpoint failed); every pending
    call fails with this at once. Retrying needs a new connection."""


class ProtocolViolation(McpsyncError):
    """The server broke the protocol (an unusable handshake, a malformed result)."""


class CallCancelled(McpsyncError):
    """This side withdrew the call (`PendingCall.cancel()`): the server was told to stop, and no
    answer will come. Not an `McpError`, since the server said nothing; a retry is a new call."""


class SessionClosed(McpsyncError, RuntimeError):
    """The session was closed by its owner; it cannot be used again."""


class MissingCallback(ProtocolViolation):
    """A 2026-07-28 `input_required` result asked for input the session has no callback for (so
    it never declared that capability); the call fails and is not retried."""


class InputRoundsExceeded(McpsyncError):
    """The server still answered `input_required` after `max_input_rounds` retries; the call was
    abandoned. Calling again starts over from the first round."""


class InvalidTool(ProtocolViolation, ValueError):
    """The server's definition of this tool breaks the protocol's rules (over HTTP in 2026-07-28:
    invalid `x-mcp-header` annotations), so it was left out of `list_tools()` and `call_tool()`
    refused it without sending anything. Retrying helps only once the server fixes the tool."""


class InvalidUrl(McpsyncError, ValueError):
    """An endpoint URL that `connect()` cannot use, refused before anything is sent: not http(s),
    no host, an invalid port, a path that is not percent-encoded ASCII, or credentials in it
    (`user:password@`, which mcpsync never sends: pass `auth=` or an `Authorization` header in
    `headers=`). Also a ValueError, what it was raised as before it had a class of its own."""
