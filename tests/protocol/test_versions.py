"""Tests for mcpsync.protocol.versions: the two eras, the version lists and the request envelope."""

from __future__ import annotations

from typing import Any

import pytest

from mcpsync.protocol.jsonrpc import ErrorCode, McpError
from mcpsync.protocol.versions import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    MODERN_VERSIONS,
    Envelope,
    check_modern_version,
    claims_modern,
    negotiate_handshake,
    read_envelope,
    unsupported_version,
    version_at_least,
)

pytestmark = pytest.mark.timeout(30)

V = META_PROTOCOL_VERSION
CAPS = META_CLIENT_CAPABILITIES
INFO = META_CLIENT_INFO
LEVEL = META_LOG_LEVEL


def test_the_version_lists() -> None:
    assert HANDSHAKE_VERSIONS == ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    assert LATEST_HANDSHAKE_VERSION == "2025-11-25"
    assert MODERN_VERSIONS == ("2026-07-28",)
    assert LATEST_MODERN_VERSION == "2026-07-28"
    assert not set(HANDSHAKE_VERSIONS) & set(MODERN_VERSIONS)


def test_the_meta_key_names_are_the_spec_ones() -> None:
    assert V == "io.modelcontextprotocol/protocolVersion"
    assert CAPS == "io.modelcontextprotocol/clientCapabilities"
    assert INFO == "io.modelcontextprotocol/clientInfo"
    assert LEVEL == "io.modelcontextprotocol/logLevel"


def test_log_levels_in_syslog_order() -> None:
    assert LOG_LEVELS == ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@pytest.mark.parametrize(
    "version, minimum, expected",
    [
        ("2025-06-18", "2025-06-18", True),
        ("2025-11-25", "2025-06-18", True),
        ("2026-07-28", "2025-06-18", True),
        ("2025-03-26", "2025-06-18", False),
        ("2024-11-05", "2025-03-26", False),
        (None, "2025-06-18", True),  # unknown counts as newest
    ],
)
def test_version_at_least(version: str | None, minimum: str, expected: bool) -> None:
    assert version_at_least(version, minimum) is expected


@pytest.mark.parametrize(
    "params, claims",
    [
        ({}, False),
        ({"_meta": {}}, False),
        ({"_meta": {"progressToken": 1}}, False),
        ({"_meta": {CAPS: {}}}, False),
        ({"_meta": {V: "2026-07-28"}}, True),
        ({"_meta": {V: "1999-01-01", CAPS: {}}}, True),  # claims the era even with an unsupported version
        ({"_meta": {V: None}}, True),  # the key names the claim, whatever its value
        ({"_meta": {V: 2026}}, True),
        ({"_meta": [V]}, False),
        ({"_meta": "x"}, False),
        ({V: "2026-07-28"}, False),  # outside _meta
    ],
)
def test_claims_modern(params: dict[str, Any], claims: bool) -> None:
    assert claims_modern(params) is claims


# -- read_envelope ----------------------------------------------------------------------------------

def test_a_full_envelope_is_read() -> None:
    envelope = read_envelope(
        {"_meta": {V: "2026-07-28", CAPS: {"elicitation": {}}, INFO: {"name": "c", "version": "1"}, LEVEL: "warning", "progressToken": 3}}
    )
    assert envelope == Envelope("2026-07-28", {"elicitation": {}}, {"name": "c", "version": "1"}, "warning")


def test_a_minimal_envelope_is_read_without_client_info() -> None:
    # clientInfo is optional in the finalized 2026-07-28 spec
    assert read_envelope({"_meta": {V: "2026-07-28", CAPS: {}}}) == Envelope("2026-07-28", {}, None, None)


def test_read_envelope_does_not_judge_the_version() -> None:
    # version support is a separate step (-32022), after the HTTP header checks
    assert read_envelope({"_meta": {V: "1999-01-01", CAPS: {}}}).protocol_version == "1999-01-01"


BAD_ENVELOPES = [
    pytest.param({}, [V, CAPS], id="no-meta"),
    pytest.param({"_meta": None}, [V, CAPS], id="meta-null"),
    pytest.param({"_meta": "x"}, [V, CAPS], id="meta-string"),
    pytest.param({"_meta": [1]}, [V, CAPS], id="meta-array"),
    pytest.param({"_meta": {}}, [V, CAPS], id="meta-empty"),
    pytest.param({"_meta": {CAPS: {}}}, [V], id="version-missing"),
    pytest.param({"_meta": {V: "2026-07-28"}}, [CAPS], id="capabilities-missing"),
    pytest.param({"_meta": {V: 20260728, CAPS: {}}}, [V], id="version-number"),
    pytest.param({"_meta": {V: None, CAPS: {}}}, [V], id="version-null"),
    pytest.param({"_meta": {V: "2026-07-28", CAPS: None}}, [CAPS], id="capabilities-null"),
    pytest.param({"_meta": {V: "2026-07-28", CAPS: []}}, [CAPS], id="capabilities-array"),
    pytest.param({"_meta": {V: "2026-07-28", CAPS: "all"}}, [CAPS], id="capabilities-string"),
    pytest.param({"_meta": {V: "2026-07-28", CAPS: {}, INFO: "me"}}, [INFO], id="client-info-string"),
    pytest.param({"_meta": {V: "2026-07-28", CAPS: {}, LEVEL: "verbose"}}, [LEVEL], id="log-level-unknown"),
    pytest.param({"_meta": {V: "2026-07-28", CAPS: {}, LEVEL: "INFO"}}, [LEVEL], id="log-level-uppercase"),
    pytest.param({"_meta": {V: "2026-07-28", CAPS: {}, LEVEL: 3}}, [LEVEL], id="log-level-number"),
]


@pytest.mark.parametrize("params, named", BAD_ENVELOPES)
def test_a_bad_envelope_is_invalid_params_naming_the_key(params: dict[str, Any], named: list[str]) -> None:
    with pytest.raises(McpError) as caught:
        read_envelope(params)
    assert caught.value.code == ErrorCode.INVALID_PARAMS
    for key in named:
        assert key in caught.value.message


@pytest.mark.parametrize("level", [[], {}, ["info"]])
def test_an_unhashable_log_level_is_invalid_params(level: Any) -> None:
    with pytest.raises(McpError) as caught:
        read_envelope({"_meta": {V: "2026-07-28", CAPS: {}, LEVEL: level}})
    assert caught.value.code == ErrorCode.INVALID_PARAMS


# -- version support and negotiation -------------------------------------------------------------------

def test_check_modern_version_accepts_only_modern_versions() -> None:
    check_modern_version("2026-07-28")
    for version in (*HANDSHAKE_VERSIONS, "2026-07-29", "", "v999.0.0"):
        with pytest.raises(McpError) as caught:
            check_modern_version(version)
        assert caught.value.code == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
        assert caught.value.data == {"supported": ["2026-07-28"], "requested": version}


def test_unsupported_version_lists_modern_versions_only() -> None:
    error = unsupported_version("2025-11-25")
    assert error.code == -32022
    assert error.data == {"supported": list(MODERN_VERSIONS), "requested": "2025-11-25"}
    assert unsupported_version(None).data == {"supported": list(MODERN_VERSIONS)}


@pytest.mark.parametrize(
    "requested, answered",
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2026-07-28", "2025-11-25"),  # never a modern version
        ("2024-10-07", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
        ("", "2025-11-25"),
        (None, "2025-11-25"),
        (20251125, "2025-11-25"),
    ],
)
def test_negotiate_handshake_echoes_a_handshake_version_else_offers_the_latest(requested: Any, answered: str) -> None:
    assert negotiate_handshake(requested) == answered
