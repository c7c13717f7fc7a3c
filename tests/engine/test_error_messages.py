"""Errors a hand-written or hostile client gets from the engine: each names what is wrong and
stays bounded (a 2026-07-28 method sent without its envelope; a completion/complete whose ref
nests a thousand deep), with the codes the era rules pin (BEHAVIOR.md)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcpsync.protocol.jsonrpc import ErrorCode
from tests.engine.test_operations import make_service
from tests.helpers import EngineHarness

ENVELOPE_KEYS = ("io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities")


@pytest.fixture
def h() -> EngineHarness:
    return EngineHarness([make_service()])


def nested(depth: int) -> Any:
    value: Any = "review"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("method, params", [("server/discover", {}), ("subscriptions/listen", {"notifications": {"toolsListChanged": True}})])
def test_a_2026_method_without_the_envelope_is_method_not_found_naming_the_envelope(h: EngineHarness, method: str, params: dict) -> None:
    error = h.fails(h.request(method, params), ErrorCode.METHOD_NOT_FOUND)
    assert error.message.startswith(f"Method not found: {method} is a 2026-07-28 method"), error.message
    assert "params._meta" in error.message and all(key in error.message for key in ENVELOPE_KEYS), error.message
    assert error.data == {"method": method}
    assert h.session.era is None, "a failed request locks no era"
    h.ok(h.modern("server/discover"))  # what the message says works


def test_a_2026_method_on_an_initialized_connection_says_it_serves_the_handshake_era(h: EngineHarness) -> None:
    h.ok(h.initialize())
    for outcome in (h.request("server/discover"), h.modern("server/discover")):
        error = h.fails(outcome, ErrorCode.METHOD_NOT_FOUND)
        assert error.message == (
            "Method not found: server/discover is a 2026-07-28 method, and this connection serves the handshake protocol era (it was initialized)"
        )


def test_a_method_neither_era_has_is_still_plain_method_not_found(h: EngineHarness) -> None:
    error = h.fails(h.request("nosuch/method"), ErrorCode.METHOD_NOT_FOUND)
    assert error.message == "Method not found: nosuch/method"


@pytest.mark.parametrize("modern", [False, True])
@pytest.mark.parametrize(
    "ref, words",
    [({"type": "ref/prompt", "name": nested(1000)}, "ref.name"), ({"type": "ref/resource", "uri": nested(1000)}, "ref.uri")],
    ids=["prompt-name", "template-uri"],
)
def test_a_completion_ref_nested_a_thousand_deep_is_invalid_params_not_an_internal_error(
    h: EngineHarness, modern: bool, ref: dict, words: str, caplog: pytest.LogCaptureFixture
) -> None:
    params = {"ref": ref, "argument": {"name": "language", "value": ""}}
    with caplog.at_level(logging.ERROR, logger="mcpsync"):
        outcome = h.modern("completion/complete", params) if modern else h.request("completion/complete", params)
    error = h.fails(outcome, ErrorCode.INVALID_PARAMS)
    assert error.message == f"completion/complete: {words} must be a string"
    assert not caplog.records, "no RecursionError traceback in the log"


def test_an_unknown_prompt_that_is_a_string_is_still_named(h: EngineHarness) -> None:
    error = h.fails(h.request("completion/complete", {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "x"}}), ErrorCode.INVALID_PARAMS)
    assert error.message == "Unknown prompt: nope"
