"""Agreeing on a protocol version with the server: when a session opens (`server/discover`, or
`initialize` for the handshake era), and again when a 2026-07-28 server refuses the version a
request carried (-32022 naming the versions it speaks).

Why apart from the session: which version to speak, and what the server's answer sets on the
session, are the protocol's rules for one moment of a session's life; the session only picks the
mode and calls in.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ..errors import CallTimeout, ProtocolViolation
from ..protocol.jsonrpc import ErrorCode, McpError
from ..protocol.versions import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE_VERSION, META_SERVER_INFO, MODERN_VERSIONS, Era

log = logging.getLogger("mcpsync.client")

PROBE_TIMEOUT = 10.0
"""How long `server/discover` may take before "auto" falls back to `initialize`, in seconds (at
most the session's timeout)."""


class Session(Protocol):
    """The session as the negotiation sees it (a `ClientSession`): what it asks with, and what
    the agreement sets."""

    timeout: float
    era: Era | None
    protocol_version: str | None
    server_info: dict[str, Any]
    server_capabilities: dict[str, Any]
    instructions: str | None

    @property
    def capabilities(self) -> dict[str, Any]: ...

    @property
    def client_info(self) -> dict[str, Any]: ...

    def request(self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None) -> dict[str, Any]: ...

    def notify(self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None) -> None: ...


def discover(session: Session, version: str, *, fall_back: bool) -> None:
    """Speak 2026-07-28 (`version`) if the server answers `server/discover`; with `fall_back`,
    `initialize` instead when it refuses or stays silent past PROBE_TIMEOUT (but not when the
    credentials failed to log in: initialize would only ask them again)."""
    session.era, session.protocol_version = Era.MODERN, version
    try:  # a -32022 naming a version we speak has been retried with it by request()
        result = session.request("server/discover", {}, timeout=min(session.timeout, PROBE_TIMEOUT))
    except McpError as exc:
        if not fall_back or (isinstance(exc.data, dict) and exc.data.get("unauthorized") is True):
            raise  # a login that failed would only be asked again by initialize
        log.debug("server/discover failed (%s); falling back to initialize", exc)
        return initialize(session)
    except CallTimeout:
        if not fall_back:
            raise
        log.debug("server/discover timed out; falling back to initialize")
        return initialize(session)
    session.server_capabilities = result.get("capabilities") or {}
    session.instructions = result.get("instructions")
    session.server_info = (result.get("_meta") or {}).get(META_SERVER_INFO) or {}


def initialize(session: Session) -> None:
    """The handshake era's `initialize`, then `notifications/initialized`; ProtocolViolation when
    the server offers a version this client does not speak."""
    session.era, session.protocol_version = Era.HANDSHAKE, None
    params = {"protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": session.capabilities, "clientInfo": session.client_info}
    result = session.request("initialize", params)
    version = result.get("protocolVersion")
    if version not in HANDSHAKE_VERSIONS:
        raise ProtocolViolation(f"the server offered protocol version {version!r}, which this client does not speak")
    session.protocol_version = version
    session.server_capabilities = result.get("capabilities") or {}
    session.server_info = result.get("serverInfo") or {}
    session.instructions = result.get("instructions")
    session.notify("notifications/initialized")


def version_to_retry(era: Era | None, refusal: McpError) -> str | None:
    """The version to send a request again with after `refusal`, or None: not a 2026-07-28
    version refusal, or the server supports no version this client speaks."""
    if era is not Era.MODERN or refusal.code != ErrorCode.UNSUPPORTED_PROTOCOL_VERSION:
        return None
    supported = refusal.data.get("supported") if isinstance(refusal.data, dict) else None
    if not isinstance(supported, list):
        return None
    return next((version for version in MODERN_VERSIONS if version in supported), None)
