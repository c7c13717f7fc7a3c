"""Hooks around every execution and around tool calls.

Strategy: an interceptor observes, replaces or rejects. `before_execute` may raise `McpError` to
reject (the client sees that error) or return a result to answer in place of the method;
`after_execute` always runs, even after a rejection, and may replace the outcome; `around_tool_call`
wraps the tool itself (call `proceed(call)` to go on). Hooks run on the worker thread serving the
request, so they must be thread-safe. Any other exception from a hook is a bug: it is logged and the
client gets -32603.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..protocol.jsonrpc import Request
from ..protocol.versions import Envelope, Era

if TYPE_CHECKING:
    from ..auth.resource.principal import Principal
    from ..catalog.context import Context
    from .outcome import Outcome
    from .seams import Exchange
    from .session import Session


class Call:
    """One request being executed, as interceptors and operations see it.

    (A plain class: `method` and `params` are copied from the request once, not looked up
    through properties by every layer that reads them.)"""

    __slots__ = ("request", "session", "era", "envelope", "transport", "exchange", "principal", "method", "params")

    def __init__(
        self,
        request: Request,
        session: Session,
        era: Era,
        envelope: Envelope | None,
        transport: TransportInfo,
        exchange: Exchange,
        principal: Principal | None = None,
    ) -> None:
        self.request = request
        self.session = session
        self.era = era
        self.envelope = envelope
        self.transport = transport
        self.exchange = exchange  # the transport's per-request channel (see `Exchange`)
        self.principal = principal
        """Who made the request, on an endpoint with `Auth`; None on stdio and open endpoints."""
        self.method: str = request.method
        self.params: dict[str, Any] = request.params

    @property
    def protocol_version(self) -> str | None:
        return self.envelope.protocol_version if self.envelope is not None else self.session.negotiated_version

    def __repr__(self) -> str:
        return f"Call({self.method!r}, id={self.request.id!r}, era={self.era.name})"


@dataclass(frozen=True, slots=True)
class TransportInfo:
    """What the transport can do, as the engine needs to know it."""

    name: str
    supports_subscriptions: bool = False
    """It can host `subscriptions/listen` streams (2026-07-28)."""
    handshake_push: bool = False
    """It can deliver unsolicited notifications to a handshake-era client (list changes, updates)."""


@dataclass(slots=True)
class ToolCall:
    """A tool about to run: interceptors may change `arguments` before calling `proceed`."""

    name: str
    arguments: dict[str, Any]
    context: Context
    call: Call
    extra: dict[str, Any] = field(default_factory=dict)


ProceedTool = Callable[[ToolCall], dict[str, Any]]


class Interceptor:
    """Subclass and override what you need; every default does nothing."""

    def before_execute(self, call: Call) -> dict[str, Any] | None:
        """Return None to go on, a result dict to answer instead, or raise McpError to reject."""
        return None

    def after_execute(self, call: Call, outcome: Outcome) -> Outcome:
        """Always called; return the outcome to send (the one given, or another)."""
        return outcome

    def around_tool_call(self, tool_call: ToolCall, proceed: ProceedTool) -> dict[str, Any]:
        """Wrap a tool call; return a `CallToolResult` dict (usually `proceed(tool_call)`)."""
        return proceed(tool_call)
