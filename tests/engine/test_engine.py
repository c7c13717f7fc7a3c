"""Tests for mcpsync.engine.engine: the era rules, the era lock and the order of the checks.

Every row of BEHAVIOR.md's "Eras and the era lock" section is pinned here through `Engine.execute`
and a `Session`, with `EngineHarness` playing the transport (it commits an era only when the
outcome claims one, the way the stdio transport does once the response is written).
"""

from __future__ import annotations

from typing import Any

import pytest

from mcpsync.catalog.service import Service
from mcpsync.engine.engine import CACHEABLE_METHODS, Engine
from mcpsync.engine.outcome import Failure, Success
from mcpsync.protocol.jsonrpc import ErrorCode, McpError, Request
from mcpsync.protocol.versions import (
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    Era,
)
from tests.helpers import MODERN, NO_PUSH, SERVER_INFO, EngineHarness, FakeExchange, envelope

pytestmark = pytest.mark.timeout(30)

V = META_PROTOCOL_VERSION
CAPS = META_CLIENT_CAPABILITIES


def make_service() -> Service:
    service = Service("era", instructions="Era test service.")

    @service.tool
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    @service.prompt
    def greet(name: str) -> str:
        return f"Hello {name}"

    @service.resource("mem://a", mime_type="text/plain")
    def a() -> str:
        return "A"

    @service.resource("mem://items/{item}")
    def item(item: str) -> str:
        return f"item {item}"

    return service


@pytest.fixture
def h() -> EngineHarness:
    return EngineHarness([make_service()])


def handshake_locked(h: EngineHarness, version: str = "2025-11-25") -> EngineHarness:
    h.ok(h.initialize(version))
    assert h.session.era is Era.HANDSHAKE
    return h


def modern_locked(h: EngineHarness) -> EngineHarness:
    h.ok(h.modern("tools/list"))
    assert h.session.era is Era.MODERN
    return h


# -- era-distinctive messages and the lock point -----------------------------------------------------

def test_a_new_connection_is_unlocked(h: EngineHarness) -> None:
    assert h.session.era is None


def test_a_successful_initialize_claims_the_handshake_era(h: EngineHarness) -> None:
    outcome = h.initialize(commit=False)
    assert isinstance(outcome, Success) and outcome.claims is Era.HANDSHAKE
    assert h.session.era is None  # nothing is locked until the transport has written the result
    h.commit(outcome)
    assert h.session.era is Era.HANDSHAKE
    assert h.session.initialized


@pytest.mark.parametrize("method, params", [
    ("server/discover", {}),
    ("tools/list", {}),
    ("tools/call", {"name": "echo", "arguments": {"text": "x"}}),
    ("prompts/get", {"name": "greet", "arguments": {"name": "n"}}),
    ("resources/read", {"uri": "mem://a"}),
])
def test_a_successful_modern_request_claims_the_modern_era(h: EngineHarness, method: str, params: dict) -> None:
    outcome = h.modern(method, params, commit=False)
    assert isinstance(outcome, Success) and outcome.claims is Era.MODERN
    h.commit(outcome)
    assert h.session.era is Era.MODERN
    assert not h.session.initialized  # the untagged-notification gate opens only for initialize


@pytest.mark.parametrize("method, params", [
    ("tools/list", {}),
    ("tools/call", {"name": "echo", "arguments": {"text": "x"}}),
    ("ping", {}),
    ("resources/read", {"uri": "mem://a"}),
    ("logging/setLevel", {"level": "info"}),
])
def test_a_request_without_a_claim_is_served_under_handshake_rules_and_locks_nothing(h: EngineHarness, method: str, params: dict) -> None:
    outcome = h.request(method, params)
    assert isinstance(outcome, Success) and outcome.claims is None
    assert "resultType" not in outcome.result
    assert h.session.era is None


def test_is_era_distinctive(h: EngineHarness) -> None:
    assert h.engine.is_era_distinctive(Request(1, "initialize", {}))
    assert h.engine.is_era_distinctive(Request(1, "tools/list", {"_meta": envelope()}))
    assert h.engine.is_era_distinctive(Request(1, "server/discover", {"_meta": envelope()}))
    assert h.engine.is_era_distinctive(Request(1, "tools/list", {"_meta": {V: "1999-01-01"}}))
    assert not h.engine.is_era_distinctive(Request(1, "tools/list", {}))
    assert not h.engine.is_era_distinctive(Request(1, "tools/list", {"_meta": {"progressToken": 1}}))


FAILED_PROBES = [
    pytest.param("modern", "tools/list", {}, {"version": "1999-01-01"}, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, id="unsupported-version"),
    pytest.param("modern", "tools/list", {}, {"capabilities": "none"}, ErrorCode.INVALID_PARAMS, id="bad-envelope"),
    pytest.param("modern", "no/such/method", {}, {}, ErrorCode.METHOD_NOT_FOUND, id="unknown-method"),
    pytest.param("modern", "ping", {}, {}, ErrorCode.METHOD_NOT_FOUND, id="removed-method"),
    pytest.param("modern", "tools/call", {"name": "nope"}, {}, ErrorCode.INVALID_PARAMS, id="unknown-tool"),
    pytest.param("modern", "resources/read", {"uri": "mem://missing"}, {}, ErrorCode.INVALID_PARAMS, id="resource-not-found"),
    pytest.param("modern", "initialize", {"protocolVersion": "2025-11-25"}, {}, ErrorCode.METHOD_NOT_FOUND, id="enveloped-initialize"),
    pytest.param("plain", "initialize", {"protocolVersion": 5}, {}, ErrorCode.INVALID_PARAMS, id="initialize-bad-version-type"),
    pytest.param("plain", "initialize", {"protocolVersion": "2025-11-25", "capabilities": []}, {}, ErrorCode.INVALID_PARAMS, id="initialize-bad-capabilities"),
]


@pytest.mark.parametrize("kind, method, params, options, code", FAILED_PROBES)
def test_a_failed_era_distinctive_request_claims_no_era(h: EngineHarness, kind: str, method: str, params: dict, options: dict, code: int) -> None:
    outcome = h.modern(method, params, **options) if kind == "modern" else h.request(method, params)
    h.fails(outcome, code)
    assert h.session.era is None
    assert not h.session.initialized


@pytest.mark.parametrize("kind, method, params, options, code", FAILED_PROBES)
def test_after_a_failed_probe_the_client_can_still_choose_either_era(kind: str, method: str, params: dict, options: dict, code: int) -> None:
    first = EngineHarness([make_service()])
    first.fails(first.modern(method, params, **options) if kind == "modern" else first.request(method, params), code)
    handshake_locked(first)

    second = EngineHarness([make_service()])
    second.fails(second.modern(method, params, **options) if kind == "modern" else second.request(method, params), code)
    modern_locked(second)


def test_a_result_that_was_never_written_locks_nothing(h: EngineHarness) -> None:
    # The transport commits only after writing; if the write failed, the era stays open.
    h.ok(h.modern("tools/list", commit=False))
    assert h.session.era is None
    handshake_locked(h)


def test_the_first_committed_success_wins(h: EngineHarness) -> None:
    modern_outcome = h.modern("tools/list", commit=False)
    init_outcome = h.initialize(commit=False)  # both ran while unlocked; the first written wins
    h.commit(modern_outcome)
    h.commit(init_outcome)
    assert h.session.era is Era.MODERN
    assert not h.session.initialized


# -- violations ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("method, params", [
    ("tools/list", {}),
    ("tools/call", {"name": "echo", "arguments": {"text": "x"}}),
    ("resources/read", {"uri": "mem://a"}),
    ("prompts/list", {}),
])
def test_a_modern_envelope_on_a_handshake_locked_connection_is_invalid_request(h: EngineHarness, method: str, params: dict) -> None:
    handshake_locked(h)
    error = h.fails(h.modern(method, params), ErrorCode.INVALID_REQUEST)
    assert "handshake" in error.message
    assert h.session.era is Era.HANDSHAKE


def test_a_modern_envelope_with_a_bad_version_on_a_handshake_locked_connection_is_still_invalid_request(h: EngineHarness) -> None:
    handshake_locked(h)
    h.fails(h.modern("tools/list", version="1999-01-01"), ErrorCode.INVALID_REQUEST)


def test_initialize_on_a_modern_locked_connection_is_unsupported_version(h: EngineHarness) -> None:
    modern_locked(h)
    error = h.fails(h.initialize("2025-06-18"), ErrorCode.UNSUPPORTED_PROTOCOL_VERSION)
    assert error.data == {"supported": [MODERN], "requested": "2025-06-18"}
    assert h.session.era is Era.MODERN
    assert h.session.negotiated_version is None


def test_initialize_on_a_modern_locked_connection_echoes_whatever_was_requested(h: EngineHarness) -> None:
    modern_locked(h)
    assert h.fails(h.initialize("2026-07-28"), -32022).data == {"supported": [MODERN], "requested": "2026-07-28"}
    assert h.fails(h.request("initialize", {}), -32022).data["supported"] == [MODERN]


@pytest.mark.parametrize("state", ["unlocked", "handshake", "modern"])
def test_initialize_carrying_a_modern_envelope_is_method_not_found(h: EngineHarness, state: str) -> None:
    if state == "handshake":
        handshake_locked(h)
    elif state == "modern":
        modern_locked(h)
    before = h.session.era
    h.fails(h.modern("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}), ErrorCode.METHOD_NOT_FOUND)
    assert h.session.era is before


def test_a_second_initialize_is_invalid_request_and_leaves_the_first_untouched(h: EngineHarness) -> None:
    h.ok(h.request("initialize", {"protocolVersion": "2025-03-26", "capabilities": {"roots": {}}, "clientInfo": {"name": "first", "version": "1"}}))
    error = h.fails(
        h.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}, "clientInfo": {"name": "second", "version": "2"}}),
        ErrorCode.INVALID_REQUEST,
    )
    assert "already initialized" in error.message
    assert h.session.era is Era.HANDSHAKE
    assert h.session.negotiated_version == "2025-03-26"
    assert h.session.client_capabilities == {"roots": {}}
    assert h.session.client_info == {"name": "first", "version": "1"}


def test_initialize_while_another_is_running_is_already_initialized(h: EngineHarness) -> None:
    assert h.session.claim_initialize()  # a first initialize is being served on another worker
    h.fails(h.initialize(), ErrorCode.INVALID_REQUEST)
    assert h.session.negotiated_version is None


def test_a_failed_initialize_can_be_retried(h: EngineHarness) -> None:
    h.fails(h.request("initialize", {"protocolVersion": 2025}), ErrorCode.INVALID_PARAMS)
    h.ok(h.initialize("2025-06-18"))
    assert h.session.negotiated_version == "2025-06-18"


@pytest.mark.parametrize("params, missing", [
    ({}, [V, CAPS]),
    ({"_meta": {}}, [V, CAPS]),
    ({"_meta": {"progressToken": "p"}}, [V, CAPS]),
    ({"_meta": {CAPS: {}}}, [V]),
])
def test_a_request_without_the_envelope_on_a_modern_locked_connection_is_invalid_params(h: EngineHarness, params: dict, missing: list[str]) -> None:
    modern_locked(h)
    error = h.fails(h.request("tools/list", params), ErrorCode.INVALID_PARAMS)
    for key in missing:
        assert key in error.message
    assert h.session.era is Era.MODERN


def test_a_modern_locked_connection_checks_every_request_on_its_own(h: EngineHarness) -> None:
    modern_locked(h)
    h.fails(h.modern("tools/list", version="2025-11-25"), ErrorCode.UNSUPPORTED_PROTOCOL_VERSION)
    h.ok(h.modern("tools/list"))
    h.fails(h.modern("tools/list", capabilities=None), ErrorCode.INVALID_PARAMS)
    h.ok(h.modern("tools/list"))


@pytest.mark.parametrize("state", ["unlocked", "modern"])
@pytest.mark.parametrize("version", ["1999-01-01", "2025-11-25", "2024-11-05", "2026-07-29", ""])
def test_an_unsupported_version_is_answered_with_the_supported_ones(h: EngineHarness, state: str, version: str) -> None:
    if state == "modern":
        modern_locked(h)
    error = h.fails(h.modern("tools/list", version=version), ErrorCode.UNSUPPORTED_PROTOCOL_VERSION)
    assert error.data == {"supported": [MODERN], "requested": version}


BAD_ENVELOPES = [
    pytest.param({"_meta": {V: 20260728, CAPS: {}}}, id="version-number"),
    pytest.param({"_meta": {V: None, CAPS: {}}}, id="version-null"),
    pytest.param({"_meta": {V: ["2026-07-28"], CAPS: {}}}, id="version-array"),
    pytest.param({"_meta": {V: MODERN}}, id="capabilities-missing"),
    pytest.param({"_meta": {V: MODERN, CAPS: None}}, id="capabilities-null"),
    pytest.param({"_meta": {V: MODERN, CAPS: ["sampling"]}}, id="capabilities-array"),
    pytest.param({"_meta": {V: MODERN, CAPS: {}, "io.modelcontextprotocol/clientInfo": "me"}}, id="client-info-string"),
    pytest.param({"_meta": {V: MODERN, CAPS: {}, META_LOG_LEVEL: "loud"}}, id="log-level-unknown"),
    pytest.param({"_meta": {V: MODERN, CAPS: {}, META_LOG_LEVEL: 7}}, id="log-level-number"),
]


@pytest.mark.parametrize("state", ["unlocked", "modern"])
@pytest.mark.parametrize("params", BAD_ENVELOPES)
def test_a_malformed_envelope_is_invalid_params(h: EngineHarness, state: str, params: dict) -> None:
    if state == "modern":
        modern_locked(h)
    h.fails(h.request("tools/list", params), ErrorCode.INVALID_PARAMS)


@pytest.mark.parametrize("state", ["unlocked", "handshake", "modern"])
@pytest.mark.parametrize("meta", ["x", 5, [1], True])
def test_meta_that_is_not_an_object_is_invalid_params(h: EngineHarness, state: str, meta: Any) -> None:
    if state == "handshake":
        handshake_locked(h)
    elif state == "modern":
        modern_locked(h)
    h.fails(h.request("tools/list", {"_meta": meta}), ErrorCode.INVALID_PARAMS)


@pytest.mark.parametrize("level", [[], {}, ["debug"]])
def test_an_unhashable_log_level_in_the_envelope_is_invalid_params(h: EngineHarness, level: Any) -> None:
    h.fails(h.modern("tools/list", log_level=level), ErrorCode.INVALID_PARAMS)


@pytest.mark.parametrize("method", ["ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "initialize", "no/such/method"])
def test_methods_the_modern_era_does_not_have_are_method_not_found(h: EngineHarness, method: str) -> None:
    params = {"level": "info", "uri": "mem://a", "protocolVersion": "2025-11-25"}
    error = h.fails(h.modern(method, params), ErrorCode.METHOD_NOT_FOUND)
    assert error.data == {"method": method}
    modern_locked(h)
    h.fails(h.modern(method, params), ErrorCode.METHOD_NOT_FOUND)


@pytest.mark.parametrize("method", ["server/discover", "subscriptions/listen"])
@pytest.mark.parametrize("state", ["unlocked", "handshake"])
def test_modern_only_methods_do_not_exist_in_the_handshake_era(h: EngineHarness, method: str, state: str) -> None:
    if state == "handshake":
        handshake_locked(h)
    h.fails(h.request(method, {"notifications": {}}), ErrorCode.METHOD_NOT_FOUND)


@pytest.mark.parametrize("method", ["server/discover", "subscriptions/listen"])
def test_enveloped_modern_only_methods_on_a_handshake_locked_connection_are_method_not_found(h: EngineHarness, method: str) -> None:
    handshake_locked(h)
    h.fails(h.modern(method, {"notifications": {}}), ErrorCode.METHOD_NOT_FOUND)
    assert h.session.era is Era.HANDSHAKE


def test_unknown_methods_in_the_handshake_era(h: EngineHarness) -> None:
    error = h.fails(h.request("tools/frobnicate"), ErrorCode.METHOD_NOT_FOUND)
    assert error.data == {"method": "tools/frobnicate"}
    handshake_locked(h)
    h.fails(h.request("tools/frobnicate"), ErrorCode.METHOD_NOT_FOUND)


# -- the order of the checks for a modern request ----------------------------------------------------

def _header_mismatch(request: Request, env: Any) -> None:
    raise McpError(ErrorCode.HEADER_MISMATCH, "Header mismatch")


CHECK_ORDER = [
    # envelope shape (-32602) beats everything after it
    pytest.param("no/such", {"_meta": {V: "1999-01-01", CAPS: "x"}}, None, ErrorCode.INVALID_PARAMS, id="envelope-before-version-and-method"),
    pytest.param("no/such", {"_meta": {V: 1, CAPS: {}}}, _header_mismatch, ErrorCode.INVALID_PARAMS, id="envelope-before-headers"),
    # headers (-32020, HTTP only) come before the version check
    pytest.param("tools/list", {"_meta": envelope("v999.0.0")}, _header_mismatch, ErrorCode.HEADER_MISMATCH, id="headers-before-version"),
    # version (-32022) before method (-32601)
    pytest.param("no/such", {"_meta": envelope("1999-01-01")}, None, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, id="version-before-method"),
    pytest.param("ping", {"_meta": envelope("1999-01-01")}, None, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, id="version-before-removed-method"),
    # method (-32601) before params (-32602)
    pytest.param("no/such", {"_meta": envelope(), "name": 5}, None, ErrorCode.METHOD_NOT_FOUND, id="method-before-params"),
    pytest.param("logging/setLevel", {"_meta": envelope(), "level": "nope"}, None, ErrorCode.METHOD_NOT_FOUND, id="removed-method-before-params"),
    # and the params themselves last
    pytest.param("tools/call", {"_meta": envelope(), "name": 5}, None, ErrorCode.INVALID_PARAMS, id="params"),
    pytest.param("tools/call", {"_meta": envelope(), "name": "echo", "arguments": [1]}, None, ErrorCode.INVALID_PARAMS, id="arguments"),
]


@pytest.mark.parametrize("method, params, header_check, code", CHECK_ORDER)
def test_the_checks_of_a_modern_request_run_in_the_fixed_order(h: EngineHarness, method: str, params: dict, header_check: Any, code: int) -> None:
    outcome = h.engine.execute(Request(1, method, params), h.session, FakeExchange(), h.transport, header_check)
    h.fails(outcome, code)


def test_a_header_check_sees_the_validated_envelope(h: EngineHarness) -> None:
    seen = []
    outcome = h.engine.execute(
        Request(1, "tools/list", {"_meta": envelope(capabilities={"elicitation": {}})}),
        h.session,
        FakeExchange(),
        h.transport,
        lambda request, env: seen.append((request.method, env.protocol_version, env.client_capabilities)),
    )
    h.ok(outcome)
    assert seen == [("tools/list", MODERN, {"elicitation": {}})]


def test_the_no_envelope_check_on_a_modern_locked_connection_comes_before_the_method_check(h: EngineHarness) -> None:
    modern_locked(h)
    h.fails(h.request("ping"), ErrorCode.INVALID_PARAMS)
    h.fails(h.request("no/such"), ErrorCode.INVALID_PARAMS)


# -- initialize -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("requested, answered", [
    ("2025-11-25", "2025-11-25"),
    ("2025-06-18", "2025-06-18"),
    ("2025-03-26", "2025-03-26"),
    ("2024-11-05", "2024-11-05"),
    ("2026-07-28", "2025-11-25"),
    ("1999-01-01", "2025-11-25"),
    ("2099-12-31", "2025-11-25"),
])
def test_initialize_negotiates_a_handshake_version(h: EngineHarness, requested: str, answered: str) -> None:
    result = h.ok(h.initialize(requested))
    assert result["protocolVersion"] == answered
    assert h.session.negotiated_version == answered


def test_initialize_result_shape(h: EngineHarness) -> None:
    result = h.ok(h.initialize())
    assert result["serverInfo"] == SERVER_INFO
    assert result["instructions"] == "Era test service."
    assert set(result["capabilities"]) >= {"tools", "prompts", "resources", "completions", "logging"}
    for key in ("resultType", "_meta", "ttlMs", "cacheScope"):
        assert key not in result


def test_initialize_records_what_the_client_said(h: EngineHarness) -> None:
    h.ok(h.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {"roots": {"listChanged": True}}, "clientInfo": {"name": "c", "version": "2"}}))
    assert h.session.client_capabilities == {"roots": {"listChanged": True}}
    assert h.session.client_info == {"name": "c", "version": "2"}


def test_initialize_without_capabilities_or_client_info_is_accepted(h: EngineHarness) -> None:
    h.ok(h.request("initialize", {"protocolVersion": "2025-06-18"}))
    assert h.session.client_capabilities == {}


@pytest.mark.parametrize("params", [
    {},
    {"protocolVersion": 20250618},
    {"protocolVersion": None},
    {"protocolVersion": "2025-06-18", "capabilities": "all"},
    {"protocolVersion": "2025-06-18", "clientInfo": ["c"]},
])
def test_initialize_with_malformed_params_is_invalid_params(h: EngineHarness, params: dict) -> None:
    h.fails(h.request("initialize", params), ErrorCode.INVALID_PARAMS)
    assert h.session.era is None


def test_engine_instructions_override_the_services_ones() -> None:
    h = EngineHarness([make_service()], instructions="Engine says hi.")
    assert h.ok(h.initialize())["instructions"] == "Engine says hi."
    assert h.ok(EngineHarness([make_service()], instructions="X").modern("server/discover"))["instructions"] == "X"


def test_no_instructions_means_no_instructions_key() -> None:
    h = EngineHarness([Service("bare")])
    assert "instructions" not in h.ok(h.initialize())
    assert "instructions" not in h.ok(EngineHarness([Service("bare")]).modern("server/discover"))


# -- server/discover ----------------------------------------------------------------------------------------

def test_discover_lists_modern_versions_only(h: EngineHarness) -> None:
    result = h.ok(h.modern("server/discover"))
    assert result["supportedVersions"] == [MODERN]
    assert "serverInfo" not in result  # identity lives in _meta in 2026-07-28
    assert result["_meta"][META_SERVER_INFO] == SERVER_INFO


def test_discover_advertises_change_notifications_only_where_the_transport_can_deliver_them() -> None:
    capable = EngineHarness([make_service()])
    caps = capable.ok(capable.modern("server/discover"))["capabilities"]
    assert caps["tools"] == {"listChanged": True}
    assert caps["prompts"] == {"listChanged": True}
    assert caps["resources"] == {"subscribe": True, "listChanged": True}

    plain = EngineHarness([make_service()], transport=NO_PUSH)
    caps = plain.ok(plain.modern("server/discover"))["capabilities"]
    assert caps["tools"].get("listChanged") is not True
    assert caps["prompts"].get("listChanged") is not True
    assert caps["resources"].get("listChanged") is not True
    assert caps["resources"].get("subscribe") is not True


# -- dressing: what modern and handshake results carry -------------------------------------------------------

ALL_METHODS = [
    ("server/discover", {}),
    ("tools/list", {}),
    ("prompts/list", {}),
    ("resources/list", {}),
    ("resources/templates/list", {}),
    ("resources/read", {"uri": "mem://a"}),
    ("tools/call", {"name": "echo", "arguments": {"text": "x"}}),
    ("prompts/get", {"name": "greet", "arguments": {"name": "n"}}),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": ""}}),
]
CACHEABLE = {"server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"}


def test_the_cacheable_methods_are_the_specs() -> None:
    assert CACHEABLE_METHODS == CACHEABLE


@pytest.mark.parametrize("method, params", ALL_METHODS)
def test_modern_results_carry_result_type_server_info_and_cache_hints_where_cacheable(method: str, params: dict) -> None:
    h = EngineHarness([make_service()], ttl_ms=60_000, cache_scope="public")
    result = h.ok(h.modern(method, params))
    assert result["resultType"] == "complete"
    assert result["_meta"][META_SERVER_INFO] == SERVER_INFO
    if method in CACHEABLE:
        assert result["ttlMs"] == 60_000
        assert result["cacheScope"] == "public"
    else:
        assert "ttlMs" not in result
        assert "cacheScope" not in result


def test_the_default_cache_hints(h: EngineHarness) -> None:
    result = h.ok(h.modern("tools/list"))
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")


@pytest.mark.parametrize("method, params", [m for m in ALL_METHODS if m[0] != "server/discover"])
@pytest.mark.parametrize("initialized", [False, True])
def test_handshake_results_carry_none_of_the_modern_dressing(h: EngineHarness, method: str, params: dict, initialized: bool) -> None:
    if initialized:
        handshake_locked(h)
    result = h.ok(h.request(method, params))
    for key in ("resultType", "ttlMs", "cacheScope"):
        assert key not in result
    assert META_SERVER_INFO not in result.get("_meta", {})


def test_handshake_empty_results_are_empty(h: EngineHarness) -> None:
    assert h.ok(h.request("ping")) == {}
    assert h.ok(h.request("logging/setLevel", {"level": "info"})) == {}


def test_engine_options_are_checked() -> None:
    with pytest.raises(ValueError):
        Engine(EngineHarness().catalog, SERVER_INFO, page_size=0)
    with pytest.raises(ValueError):
        Engine(EngineHarness().catalog, SERVER_INFO, cache_scope="shared")


# -- resource not found: the one error that differs by era -------------------------------------------------

def test_resource_not_found_in_the_handshake_era_is_32002(h: EngineHarness) -> None:
    error = h.fails(h.request("resources/read", {"uri": "mem://missing"}), ErrorCode.RESOURCE_NOT_FOUND)
    assert error.code == -32002
    assert error.data == {"uri": "mem://missing"}


def test_resource_not_found_in_the_modern_era_is_invalid_params_with_the_uri(h: EngineHarness) -> None:
    error = h.fails(h.modern("resources/read", {"uri": "mem://missing"}), ErrorCode.INVALID_PARAMS)
    assert error.data == {"uri": "mem://missing"}


# -- failures are values ------------------------------------------------------------------------------------

def test_every_answer_is_a_typed_outcome_never_none(h: EngineHarness) -> None:
    for method, params in ALL_METHODS + [("ping", {}), ("no/such", {}), ("tools/call", {"name": 1})]:
        outcome = h.request(method, params)
        assert isinstance(outcome, (Success, Failure))
        outcome = h.modern(method, params, commit=False)
        assert isinstance(outcome, (Success, Failure))
