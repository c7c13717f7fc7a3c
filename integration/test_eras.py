"""The era lock of one stdio connection (BEHAVIOR.md, "Eras and the era lock"), over real subprocesses.

Each test drives one fresh `python -m mcpsync serve` connection, because the era lock lasts for the
connection's lifetime.
"""

from __future__ import annotations

import pytest

from wire import (
    HANDSHAKE_VERSION,
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    MODERN_VERSION,
    ServerProcess,
    encode,
    fixture,
    legacy_init,
    modern_meta,
    serve_argv,
)

pytestmark = pytest.mark.timeout(60)

HANDSHAKE_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
INIT_PARAMS = {"protocolVersion": HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
ERA_MARKERS = ("resultType", "ttlMs", "cacheScope")


@pytest.fixture
def proc():
    with ServerProcess(serve_argv()) as server:
        yield server
        assert "Traceback (most recent call last)" not in server.stderr_text()


def enveloped(params: dict | None = None, **meta) -> dict:
    return {**(params or {}), "_meta": modern_meta(**meta)}


def assert_unsupported(error: dict, requested) -> None:
    assert error["code"] == -32022, error
    assert error["data"]["supported"] == [MODERN_VERSION], error
    assert error["data"]["requested"] == requested, error


def assert_handshake_locked(proc: ServerProcess) -> None:
    error = proc.error("tools/list", enveloped())
    assert error["code"] == -32600 and "handshake" in error["message"], error


def assert_modern_locked(proc: ServerProcess) -> None:
    assert_unsupported(proc.error("initialize", INIT_PARAMS), HANDSHAKE_VERSION)


def assert_unlocked_then_initialize(proc: ServerProcess) -> None:
    """The connection is still unlocked: initialize succeeds (and locks the handshake era)."""
    result = proc.result("initialize", INIT_PARAMS)
    assert result["protocolVersion"] == HANDSHAKE_VERSION
    assert_handshake_locked(proc)


def assert_unlocked_then_discover(proc: ServerProcess) -> None:
    """The connection is still unlocked: an enveloped discover succeeds (and locks the modern era)."""
    result = proc.result("server/discover", enveloped())
    assert result["supportedVersions"] == [MODERN_VERSION]
    assert_modern_locked(proc)


# -- locking --------------------------------------------------------------------------------------

def test_initialize_locks_the_handshake_era(proc: ServerProcess) -> None:
    legacy_init(proc)
    for method, params in [("tools/list", {}), ("tools/call", {"name": "echo", "arguments": {"text": "x"}}), ("ping", {}), ("resources/read", {"uri": "demo://readme"})]:
        error = proc.error(method, enveloped(params))
        assert error["code"] == -32600, (method, error)
        assert "handshake" in error["message"], error
    # Requests without the envelope are served as usual.
    assert len(proc.result("tools/list")["tools"]) == 5


@pytest.mark.parametrize("enveloped_request", [True, False], ids=["enveloped", "plain"])
def test_modern_only_methods_on_a_handshake_connection_are_method_not_found(proc: ServerProcess, enveloped_request: bool) -> None:
    """engine.py: a method the handshake era does not have is -32601, envelope or not."""
    legacy_init(proc)
    for method, params in [("server/discover", {}), ("subscriptions/listen", {"notifications": {"toolsListChanged": True}})]:
        error = proc.error(method, enveloped(params) if enveloped_request else params)
        assert error["code"] == -32601, (method, error)
    assert proc.result("ping") == {}


def test_discover_locks_the_modern_era(proc: ServerProcess) -> None:
    discover = proc.result("server/discover", enveloped())
    assert discover["resultType"] == "complete"
    error = proc.error("initialize", {**INIT_PARAMS, "protocolVersion": "2025-06-18"})
    assert_unsupported(error, "2025-06-18")
    # The modern era keeps working.
    assert len(proc.result("tools/list", enveloped())["tools"]) == 5


def test_any_successful_enveloped_request_locks_the_modern_era(proc: ServerProcess) -> None:
    assert proc.result("tools/call", enveloped({"name": "add", "arguments": {"a": 1, "b": 2}}))["structuredContent"] == {"result": 3}
    assert_modern_locked(proc)


def test_initialize_without_protocol_version_on_a_modern_connection_has_no_requested(proc: ServerProcess) -> None:
    proc.result("server/discover", enveloped())
    error = proc.error("initialize", {"capabilities": {}})
    assert error["code"] == -32022
    assert error["data"]["supported"] == [MODERN_VERSION]


def test_initialize_carrying_the_envelope_is_method_not_found_and_locks_nothing(proc: ServerProcess) -> None:
    error = proc.error("initialize", enveloped(INIT_PARAMS))
    assert error["code"] == -32601, error
    assert_unlocked_then_initialize(proc)


def test_initialize_carrying_the_envelope_on_a_modern_connection_is_method_not_found(proc: ServerProcess) -> None:
    proc.result("server/discover", enveloped())
    assert proc.error("initialize", enveloped(INIT_PARAMS))["code"] == -32601


def test_second_initialize_is_rejected(proc: ServerProcess) -> None:
    legacy_init(proc)
    error = proc.error("initialize", INIT_PARAMS)
    assert error["code"] == -32600 and "already initialized" in error["message"], error
    # The connection is still the first initialize's.
    assert proc.result("ping") == {}


def test_pipelined_second_initialize_is_rejected(proc: ServerProcess) -> None:
    first = {"jsonrpc": "2.0", "id": "a", "method": "initialize", "params": INIT_PARAMS}
    second = {"jsonrpc": "2.0", "id": "b", "method": "initialize", "params": {**INIT_PARAMS, "protocolVersion": "2024-11-05"}}
    proc.write_raw(encode(first) + encode(second))
    assert proc.response("a")["result"]["protocolVersion"] == HANDSHAKE_VERSION
    assert proc.response("b")["error"]["code"] == -32600


def test_failed_initialize_can_be_retried(proc: ServerProcess) -> None:
    assert proc.error("initialize", {"protocolVersion": 2025, "capabilities": {}})["code"] == -32602
    assert_unlocked_then_initialize(proc)


def test_request_without_envelope_on_a_modern_connection_is_invalid_params(proc: ServerProcess) -> None:
    proc.result("server/discover", enveloped())
    for method, params in [("tools/list", None), ("tools/call", {"name": "echo", "arguments": {"text": "x"}}), ("ping", None), ("server/discover", {})]:
        error = proc.error(method, params)
        assert error["code"] == -32602, (method, error)
        assert META_PROTOCOL_VERSION in error["message"] and META_CLIENT_CAPABILITIES in error["message"], error
    # A partial envelope names what is missing.
    error = proc.error("tools/list", {"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION}})
    assert error["code"] == -32602 and META_CLIENT_CAPABILITIES in error["message"], error


def test_unsupported_version_is_rejected_and_leaves_the_connection_unlocked(proc: ServerProcess) -> None:
    error = proc.error("tools/list", {"_meta": modern_meta(**{META_PROTOCOL_VERSION: "2099-01-01"})})
    assert_unsupported(error, "2099-01-01")
    error = proc.error("server/discover", {"_meta": modern_meta(**{META_PROTOCOL_VERSION: HANDSHAKE_VERSION})})
    assert_unsupported(error, HANDSHAKE_VERSION)
    assert_unlocked_then_initialize(proc)


def test_every_modern_request_is_version_checked_on_its_own(proc: ServerProcess) -> None:
    proc.result("server/discover", enveloped())
    error = proc.error("tools/list", {"_meta": modern_meta(**{META_PROTOCOL_VERSION: "2099-01-01"})})
    assert_unsupported(error, "2099-01-01")
    assert proc.result("tools/list", enveloped())["tools"]


BAD_ENVELOPES = {
    "capabilities-missing": {META_PROTOCOL_VERSION: MODERN_VERSION},
    "capabilities-not-object": {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: []},
    "capabilities-null": {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: None},
    "version-not-string": {META_PROTOCOL_VERSION: 20260728, META_CLIENT_CAPABILITIES: {}},
    "version-null": {META_PROTOCOL_VERSION: None, META_CLIENT_CAPABILITIES: {}},
    "client-info-not-object": {**modern_meta(), "io.modelcontextprotocol/clientInfo": "me"},
    "log-level-unknown": {**modern_meta(), META_LOG_LEVEL: "loud"},
}


@pytest.mark.parametrize("name", list(BAD_ENVELOPES))
@pytest.mark.parametrize("fallback", ["initialize", "discover"])
def test_bad_envelope_is_invalid_params_and_leaves_the_connection_unlocked(proc: ServerProcess, name: str, fallback: str) -> None:
    error = proc.error("tools/list", {"_meta": BAD_ENVELOPES[name]})
    assert error["code"] == -32602, error
    if fallback == "initialize":
        assert_unlocked_then_initialize(proc)
    else:
        assert_unlocked_then_discover(proc)


def test_meta_that_is_not_an_object_is_invalid_params_and_locks_nothing(proc: ServerProcess) -> None:
    assert proc.error("tools/list", {"_meta": "2026-07-28"})["code"] == -32602
    assert proc.error("tools/list", {"_meta": [MODERN_VERSION]})["code"] == -32602
    assert_unlocked_then_discover(proc)


def test_bad_envelope_on_a_modern_connection_is_invalid_params(proc: ServerProcess) -> None:
    proc.result("server/discover", enveloped())
    for meta in BAD_ENVELOPES.values():
        assert proc.error("tools/list", {"_meta": meta})["code"] == -32602, meta
    assert proc.error("tools/list", {"_meta": 5})["code"] == -32602


def test_interceptor_rejection_of_an_era_distinctive_request_locks_nothing() -> None:
    with ServerProcess(serve_argv(fixture("toolbox.py"))) as proc:
        error = proc.error("tools/call", enveloped({"name": "forbidden", "arguments": {}}))
        assert error["code"] == -32001, error
        rejected = proc.error("initialize", {**INIT_PARAMS, "clientInfo": {"name": "rejected-client", "version": "0"}})
        assert rejected["code"] == -32001, rejected
        # Neither failure locked anything, and the rejected initialize did not use up the one initialize.
        assert_unlocked_then_initialize(proc)


# -- methods an era does not have ----------------------------------------------------------------

@pytest.mark.parametrize(
    "method, params",
    [
        ("ping", {}),
        ("logging/setLevel", {"level": "info"}),
        ("resources/subscribe", {"uri": "demo://readme"}),
        ("resources/unsubscribe", {"uri": "demo://readme"}),
        ("notifications/initialized", {}),
    ],
)
@pytest.mark.parametrize("locked", [False, True], ids=["unlocked", "modern-locked"])
def test_methods_removed_in_2026_are_method_not_found_with_the_envelope(proc: ServerProcess, method: str, params: dict, locked: bool) -> None:
    if locked:
        proc.result("server/discover", enveloped())
    error = proc.error(method, enveloped(params))
    assert error["code"] == -32601, error
    if not locked:
        assert_unlocked_then_initialize(proc)


@pytest.mark.parametrize("method", ["server/discover", "subscriptions/listen"])
def test_modern_only_methods_are_method_not_found_in_the_handshake_era(proc: ServerProcess, method: str) -> None:
    assert proc.error(method, {"notifications": {}})["code"] == -32601  # unlocked, no envelope
    legacy_init(proc)
    assert proc.error(method, {"notifications": {}})["code"] == -32601


def test_check_order_envelope_shape_then_version_then_method(proc: ServerProcess) -> None:
    # A removed method with a malformed envelope: the envelope is checked first (-32602).
    assert proc.error("ping", {"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION}})["code"] == -32602
    # A removed method with an unsupported version: the version is checked before the method (-32022).
    assert_unsupported(proc.error("ping", {"_meta": modern_meta(**{META_PROTOCOL_VERSION: "2099-01-01"})}), "2099-01-01")
    # A supported version and an unknown method: -32601; bad params of a known method: -32602.
    assert proc.error("no/such", enveloped())["code"] == -32601
    assert proc.error("tools/call", enveloped({"name": 7}))["code"] == -32602
    assert_unlocked_then_initialize(proc)


# -- requests that claim no era --------------------------------------------------------------------

def test_requests_without_a_claim_are_served_and_lock_nothing(proc: ServerProcess) -> None:
    assert proc.result("ping") == {}
    tools = proc.result("tools/list")
    assert "resultType" not in tools and len(tools["tools"]) == 5
    assert proc.result("tools/call", {"name": "echo", "arguments": {"text": "hi"}})["content"][0]["text"] == "hi"
    proc.notify("notifications/initialized")
    proc.notify("notifications/cancelled", {"requestId": 1, "_meta": modern_meta()})  # notifications claim nothing
    assert_unlocked_then_discover(proc)


def test_requests_without_a_claim_then_initialize(proc: ServerProcess) -> None:
    proc.result("tools/list")
    proc.result("ping")
    assert_unlocked_then_initialize(proc)


# -- negotiation ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "requested, offered",
    [(v, v) for v in HANDSHAKE_VERSIONS] + [("2026-07-28", "2025-11-25"), ("1999-01-01", "2025-11-25"), ("2030-01-01", "2025-11-25"), ("", "2025-11-25")],
)
def test_initialize_negotiates_a_handshake_version_only(proc: ServerProcess, requested: str, offered: str) -> None:
    result = proc.result("initialize", {**INIT_PARAMS, "protocolVersion": requested})
    assert result["protocolVersion"] == offered


def test_discover_lists_modern_versions_only(proc: ServerProcess) -> None:
    result = proc.result("server/discover", enveloped())
    assert result["supportedVersions"] == [MODERN_VERSION]
    assert "serverInfo" not in result  # server identity moved to _meta in 2026-07-28


# -- result dressing ------------------------------------------------------------------------------

def modern_calls() -> list[tuple[str, dict, bool]]:
    """(method, params, cacheable)"""
    return [
        ("server/discover", {}, True),
        ("tools/list", {}, True),
        ("prompts/list", {}, True),
        ("resources/list", {}, True),
        ("resources/templates/list", {}, True),
        ("resources/read", {"uri": "demo://readme"}, True),
        ("tools/call", {"name": "echo", "arguments": {"text": "x"}}, False),
        ("tools/call", {"name": "fail", "arguments": {}}, False),
        ("prompts/get", {"name": "review_code", "arguments": {"code": "x = 1"}}, False),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "review_code"}, "argument": {"name": "language", "value": "py"}}, False),
    ]


def test_modern_results_carry_result_type_server_info_and_cache_hints(proc: ServerProcess) -> None:
    for method, params, cacheable in modern_calls():
        result = proc.result(method, enveloped(params))
        assert result["resultType"] == "complete", (method, result)
        assert result["_meta"][META_SERVER_INFO]["name"] == "mcpsync-demo", (method, result)
        assert isinstance(result["_meta"][META_SERVER_INFO]["version"], str)
        if cacheable:
            assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0, (method, result)
            assert result["cacheScope"] in ("public", "private"), (method, result)
        else:
            assert "ttlMs" not in result and "cacheScope" not in result, (method, result)


def test_handshake_results_carry_no_modern_dressing(proc: ServerProcess) -> None:
    init = legacy_init(proc)
    assert set(init) <= {"protocolVersion", "capabilities", "serverInfo", "instructions"}, init
    assert init["serverInfo"]["name"] == "mcpsync-demo"
    assert proc.result("ping") == {}
    assert proc.result("logging/setLevel", {"level": "debug"}) == {}
    for method, params, _ in modern_calls()[1:]:
        result = proc.result(method, params)
        for key in ERA_MARKERS:
            assert key not in result, (method, result)
        assert META_SERVER_INFO not in (result.get("_meta") or {}), (method, result)


def test_results_before_any_lock_carry_no_modern_dressing(proc: ServerProcess) -> None:
    result = proc.result("tools/list")
    assert not any(key in result for key in ERA_MARKERS), result


# -- pipelining: the reader finishes era-distinctive requests before reading on ------------------

def test_pipelined_initialize_then_enveloped_request_is_rejected_deterministically(proc: ServerProcess) -> None:
    init = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": INIT_PARAMS}
    listing = {"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": enveloped()}
    plain = {"jsonrpc": "2.0", "id": "plain", "method": "tools/list"}
    proc.write_raw(encode(init) + encode(listing) + encode(plain))
    assert proc.response("init")["result"]["protocolVersion"] == HANDSHAKE_VERSION
    error = proc.response("list")["error"]
    assert error["code"] == -32600 and "handshake" in error["message"], error
    assert len(proc.response("plain")["result"]["tools"]) == 5


def test_pipelined_discover_then_initialize_is_rejected_deterministically(proc: ServerProcess) -> None:
    discover = {"jsonrpc": "2.0", "id": "disc", "method": "server/discover", "params": enveloped()}
    init = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": INIT_PARAMS}
    plain = {"jsonrpc": "2.0", "id": "plain", "method": "tools/list"}
    proc.write_raw(encode(discover) + encode(init) + encode(plain))
    assert proc.response("disc")["result"]["supportedVersions"] == [MODERN_VERSION]
    assert_unsupported(proc.response("init")["error"], HANDSHAKE_VERSION)
    assert proc.response("plain")["error"]["code"] == -32602


def test_pipelined_failed_probe_then_initialize_still_initializes(proc: ServerProcess) -> None:
    probe = {"jsonrpc": "2.0", "id": "probe", "method": "server/discover", "params": {"_meta": modern_meta(**{META_PROTOCOL_VERSION: "2099-01-01"})}}
    init = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": INIT_PARAMS}
    listing = {"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": enveloped()}
    proc.write_raw(encode(probe) + encode(init) + encode(listing))
    assert proc.response("probe")["error"]["code"] == -32022
    assert proc.response("init")["result"]["protocolVersion"] == HANDSHAKE_VERSION
    assert proc.response("list")["error"]["code"] == -32600


def test_pipelined_era_race_is_deterministic_over_many_connections() -> None:
    """Initialize and an enveloped request in one write, on several connections started together:
    always the initialize result first, always -32600 for the enveloped request."""
    payload = (
        encode({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS})
        + encode({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": enveloped({"name": "echo", "arguments": {"text": "x"}})})
    )
    procs = [ServerProcess(serve_argv()) for _ in range(6)]
    try:
        for p in procs:
            p.__enter__()
            p.write_raw(payload)
        for p in procs:
            first = p.recv()
            assert first["id"] == 1 and "result" in first, first
            assert p.response(2)["error"]["code"] == -32600
    finally:
        for p in procs:
            p.cleanup()
