"""The two protocol eras and the 2026-07-28 request envelope.

Strategy: version lists and `_meta` key names live here and nowhere else. `read_envelope()` turns a
request's `params._meta` into an `Envelope` or raises the `-32602` the spec asks for; whether the
version is supported is a separate step (`-32022`) because HTTP header checks sit between the two.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

from .jsonrpc import ErrorCode, McpError, invalid_params

HANDSHAKE_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[0]
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
LATEST_MODERN_VERSION = MODERN_VERSIONS[0]

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

LOG_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LOG_LEVEL_RANK = {name: rank for rank, name in enumerate(LOG_LEVELS)}


def is_log_level(value: object) -> TypeGuard[str]:
    return type(value) is str and value in LOG_LEVEL_RANK


class Era(enum.Enum):
    HANDSHAKE = "handshake"  # initialize, 2024-11-05 .. 2025-11-25
    MODERN = "modern"  # per-request _meta envelope, 2026-07-28


HANDSHAKE_ERA: Final = Era.HANDSHAKE
MODERN_ERA: Final = Era.MODERN
"""The two eras as plain names, for the request path: on Python 3.11 `Era.MODERN` goes through
the enum metaclass's `__getattr__` hook, about 100 ns against a global's 15, and a request
compares its era a dozen times."""


def version_at_least(version: str | None, minimum: str) -> bool:
    """Versions are ISO dates, so string order is release order. Unknown (None) counts as newest."""
    return version is None or version >= minimum


@dataclass(slots=True)
class Envelope:
    """The validated `_meta` of one 2026-07-28 request. (Made per request: slotted, not frozen,
    which would cost an `object.__setattr__` per field; read-only by convention.)"""

    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None


def claims_modern(params: dict[str, Any]) -> bool:
    """A request claims the 2026-07-28 era when its `_meta` names a protocol version."""
    meta = params.get("_meta")
    return type(meta) is dict and META_PROTOCOL_VERSION in meta


def read_envelope(params: dict[str, Any]) -> Envelope:
    """Validate the shape of the envelope; raises -32602 naming what is missing or malformed."""
    meta = params.get("_meta")
    if type(meta) is not dict:
        raise invalid_params(
            f"params._meta is missing the required envelope key(s): {META_PROTOCOL_VERSION}, {META_CLIENT_CAPABILITIES}"
        )
    if META_PROTOCOL_VERSION not in meta or META_CLIENT_CAPABILITIES not in meta:
        missing = [key for key in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if key not in meta]
        raise invalid_params(f"params._meta is missing the required envelope key(s): {', '.join(missing)}")
    version = meta[META_PROTOCOL_VERSION]
    if type(version) is not str:
        raise invalid_params(f"params._meta[{META_PROTOCOL_VERSION!r}] must be a string")
    capabilities = meta[META_CLIENT_CAPABILITIES]
    if type(capabilities) is not dict:
        raise invalid_params(f"params._meta[{META_CLIENT_CAPABILITIES!r}] must be an object")
    client_info = meta.get(META_CLIENT_INFO)
    if client_info is not None and type(client_info) is not dict:
        raise invalid_params(f"params._meta[{META_CLIENT_INFO!r}] must be an object")
    log_level = meta.get(META_LOG_LEVEL)
    if log_level is not None and not is_log_level(log_level):
        raise invalid_params(f"params._meta[{META_LOG_LEVEL!r}] must be one of {', '.join(LOG_LEVELS)}")
    return Envelope(version, capabilities, client_info, log_level)


def check_modern_version(version: str) -> None:
    if version not in MODERN_VERSIONS:
        raise unsupported_version(version)


def unsupported_version(requested: object) -> McpError:
    data: dict[str, Any] = {"supported": list(MODERN_VERSIONS)}
    if requested is not None:
        data["requested"] = requested
    return McpError(ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", data)


def negotiate_handshake(requested: object) -> str:
    """Echo a handshake version we speak, otherwise counter-offer the latest; never a modern one."""
    return requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE_VERSION
