"""Tests for mcpsync.engine.request_state: sealing and opening the MRTR `requestState`.

The sealer is pure (an injected clock, no I/O), so every case here is a direct call. What a token must
survive, and what it must not: a round trip in each of the three MRTR methods; any change to any part
(tampered); a token used past its lifetime (expired); a token replayed on another method, other
params, another audience or principal (mismatched); and anything that is not a token at all
(malformed). Each failure surfaces as -32602 with `data.reason`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import pytest

from mcpsync.engine import request_state
from mcpsync.engine.request_state import (
    DEFAULT_TTL,
    EXPIRED,
    MALFORMED,
    MISMATCHED,
    MRTR_METHODS,
    TAMPERED,
    RequestStateError,
    RequestStateSealer,
    SealedState,
    request_digest,
)
from mcpsync.errors import McpsyncError
from mcpsync.protocol.jsonrpc import ErrorCode, McpError

pytestmark = pytest.mark.timeout(30)

SECRET = b"0123456789abcdef0123456789abcdef"  # exactly the 32-byte minimum
OTHER_SECRET = b"fedcba9876543210fedcba9876543210"
START = 1_000_000.0

CALL = {"name": "book", "arguments": {"city": "Paris", "nights": 2, "options": {"late": True, "floor": [1, 2]}}}
PROMPT = {"name": "review", "arguments": {"code": "print(1)"}}
READ = {"uri": "mem://items/7"}
ANSWERS = {
    "user_name": {"action": "accept", "content": {"name": "Alice"}},
    "capital": {"role": "assistant", "content": {"type": "text", "text": "Paris."}, "model": "m", "stopReason": "endTurn"},
    "roots": {"roots": [{"uri": "file:///home/a", "name": "a"}]},
}


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def sealer(clock: Clock) -> RequestStateSealer:
    return RequestStateSealer(SECRET, clock=clock)


def reason_of(call: Any) -> str:
    with pytest.raises(RequestStateError) as caught:
        call()
    return caught.value.reason


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def forge(payload: bytes, secret: bytes = SECRET) -> str:
    """A token with a valid MAC over arbitrary payload bytes, as only a secret holder could mint."""
    key = hmac.new(secret, b"mcpsync/request-state/v1", hashlib.sha256).digest()
    signed = f"ms1.{b64u(payload)}"
    return f"{signed}.{b64u(hmac.new(key, signed.encode('ascii'), hashlib.sha256).digest())}"


def good_payload(**changes: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "v": 1,
        "m": "tools/call",
        "d": request_digest("tools/call", CALL),
        "x": int((START + 60) * 1000),
        "a": {},
    }
    payload.update(changes)
    return {key: value for key, value in payload.items() if value is not ...}


# -- round trips --------------------------------------------------------------------------------------

@pytest.mark.parametrize("method, params", [("tools/call", CALL), ("prompts/get", PROMPT), ("resources/read", READ)])
def test_round_trip_in_each_mrtr_method(sealer: RequestStateSealer, method: str, params: dict[str, Any]) -> None:
    token = sealer.seal(method, params, ANSWERS, {"step": 2, "cart": ["a", "b"]}, asked={"user_name": "q1"})
    state = sealer.open(token, method, params)
    assert state == SealedState(
        answers=ANSWERS, app_state={"step": 2, "cart": ["a", "b"]}, expires_at=START + DEFAULT_TTL, asked={"user_name": "q1"}
    )


def test_first_round_state_has_no_answers(sealer: RequestStateSealer) -> None:
    state = sealer.open(sealer.seal("tools/call", CALL, {}), "tools/call", CALL)
    assert state.answers == {} and state.app_state is None and state.asked == {}


def test_none_answers_mean_none_collected(sealer: RequestStateSealer) -> None:
    assert sealer.open(sealer.seal("tools/call", CALL, None), "tools/call", CALL).answers == {}


def test_token_is_a_compact_versioned_base64url_string(sealer: RequestStateSealer) -> None:
    token = sealer.seal("tools/call", CALL, ANSWERS)
    prefix, payload, mac = token.split(".")
    assert prefix == "ms1"
    assert token.isascii() and "=" not in token
    assert set(payload + mac) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert len(mac) == 43  # a whole SHA-256, unpadded


def test_every_json_value_survives_exactly(sealer: RequestStateSealer) -> None:
    answers = {
        "k": {"big": 2**80, "neg": -(2**70), "float": 95.5, "tiny": 1e-300, "t": True, "f": False, "null": None},
        "list": {"action": "accept", "content": {"multi": ["option1", "option2"], "empty": []}},
        "": {"action": "cancel"},  # the key is the server's own; even an empty one round-trips
    }
    state = sealer.open(sealer.seal("tools/call", CALL, answers, [1, "two", None]), "tools/call", CALL)
    assert state.answers == answers and state.app_state == [1, "two", None]
    assert type(state.answers["k"]["float"]) is float and type(state.answers["k"]["big"]) is int


@pytest.mark.parametrize("app_state", [0, "", False, [], {}, "opaque-string", 3.25])
def test_falsy_and_scalar_app_states_round_trip(sealer: RequestStateSealer, app_state: Any) -> None:
    assert sealer.open(sealer.seal("tools/call", CALL, {}, app_state), "tools/call", CALL).app_state == app_state


def test_unicode_everywhere(sealer: RequestStateSealer) -> None:
    params = {"name": "répondre-✓", "arguments": {"ville": "Zürich", "emoji": "🎉", "cjk": "東京", "lone": "\ud800x"}}
    answers = {"ключ": {"action": "accept", "content": {"name": "Zoë 🚀", "lone": "\udfff"}}}
    token = sealer.seal("tools/call", params, answers, {"note": "naïve ☃"})
    assert token.isascii()
    state = sealer.open(token, "tools/call", params)
    assert state.answers == answers and state.app_state == {"note": "naïve ☃"}


def test_large_answers_round_trip(sealer: RequestStateSealer) -> None:
    image = base64.b64encode(bytes(range(256)) * 4096).decode("ascii")  # about 1.4 MB of base64
    answers = {f"shot{n}": {"role": "assistant", "content": {"type": "image", "data": image, "mimeType": "image/png"},
                            "model": "m"} for n in range(3)}
    state = sealer.open(sealer.seal("tools/call", CALL, answers), "tools/call", CALL)
    assert state.answers == answers


def test_opened_state_is_a_fresh_copy(sealer: RequestStateSealer) -> None:
    answers = {"a": {"action": "accept", "content": {"x": "1"}}}
    token = sealer.seal("tools/call", CALL, answers, asked={"a": "q"})
    answers["a"]["content"]["x"] = "changed after sealing"
    first = sealer.open(token, "tools/call", CALL)
    first.answers["b"] = "added"
    first.asked["b"] = "added"
    second = sealer.open(token, "tools/call", CALL)
    assert second.answers == {"a": {"action": "accept", "content": {"x": "1"}}} and second.asked == {"a": "q"}


def test_each_round_gets_a_different_token(sealer: RequestStateSealer) -> None:
    first = sealer.seal("tools/call", CALL, {})
    second = sealer.seal("tools/call", CALL, {"step1": {"action": "accept", "content": {"name": "Alice"}}})
    assert first != second


def test_state_is_signed_not_encrypted(sealer: RequestStateSealer) -> None:
    """Documented behaviour: a client can read its own answers back out of the token."""
    payload = sealer.seal("tools/call", CALL, {"k": {"action": "accept", "content": {"name": "Alice"}}}).split(".")[1]
    assert b"Alice" in base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))


# -- tampering ----------------------------------------------------------------------------------------

def test_the_conformance_suites_tampering_is_rejected(sealer: RequestStateSealer) -> None:
    """input-required-result-tampered-state appends "-TAMPERED"; `-` is base64url, so only the MAC can tell."""
    token = sealer.seal("tools/call", CALL, {})
    with pytest.raises(RequestStateError) as caught:
        sealer.open(token + "-TAMPERED", "tools/call", CALL)
    assert caught.value.reason == TAMPERED
    assert caught.value.code == -32602 and caught.value.data == {"reason": "tampered"}


def test_flipping_any_single_character_is_detected(sealer: RequestStateSealer) -> None:
    token = sealer.seal("tools/call", CALL, {"a": {"action": "accept", "content": {"n": "1"}}}, "s")
    for index, char in enumerate(token):
        if char == ".":
            continue
        replacement = "A" if char != "A" else "B"
        changed = token[:index] + replacement + token[index + 1:]
        reason = reason_of(lambda: sealer.open(changed, "tools/call", CALL))
        assert reason in (TAMPERED, MALFORMED), (index, reason)
        if index > 3:  # past the "ms1." prefix every flip keeps the shape: only the MAC catches it
            assert reason == TAMPERED, index


def test_a_forged_payload_under_the_old_mac_is_tampered(sealer: RequestStateSealer) -> None:
    token = sealer.seal("tools/call", CALL, {"pay": {"action": "decline"}})
    prefix, payload, mac = token.split(".")
    decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    decoded["a"]["pay"] = {"action": "accept", "content": {"amount": 1_000_000}}
    decoded["x"] += 10**9  # and live forever
    forged = f"{prefix}.{b64u(json.dumps(decoded).encode())}.{mac}"
    assert reason_of(lambda: sealer.open(forged, "tools/call", CALL)) == TAMPERED


def test_swapping_payload_and_mac_between_tokens_is_tampered(sealer: RequestStateSealer) -> None:
    one = sealer.seal("tools/call", CALL, {"a": {"action": "decline"}}).split(".")
    two = sealer.seal("tools/call", CALL, {"a": {"action": "accept"}}).split(".")
    assert reason_of(lambda: sealer.open(f"ms1.{one[1]}.{two[2]}", "tools/call", CALL)) == TAMPERED


@pytest.mark.parametrize("cut", [1, 10, 42])
def test_a_truncated_mac_is_tampered(sealer: RequestStateSealer, cut: int) -> None:
    token = sealer.seal("tools/call", CALL, {})
    assert reason_of(lambda: sealer.open(token[:-cut], "tools/call", CALL)) == TAMPERED


def test_a_truncated_payload_is_tampered(sealer: RequestStateSealer) -> None:
    prefix, payload, mac = sealer.seal("tools/call", CALL, {}).split(".")
    assert reason_of(lambda: sealer.open(f"{prefix}.{payload[:-3]}.{mac}", "tools/call", CALL)) == TAMPERED


def test_another_format_version_is_not_a_token(sealer: RequestStateSealer) -> None:
    _, payload, mac = sealer.seal("tools/call", CALL, {}).split(".")
    assert reason_of(lambda: sealer.open(f"ms2.{payload}.{mac}", "tools/call", CALL)) == MALFORMED


def test_a_token_under_another_secret_is_tampered(clock: Clock) -> None:
    theirs = RequestStateSealer(OTHER_SECRET, clock=clock).seal("tools/call", CALL, {})
    ours = RequestStateSealer(SECRET, clock=clock)
    assert reason_of(lambda: ours.open(theirs, "tools/call", CALL)) == TAMPERED


def test_macs_are_compared_in_constant_time(sealer: RequestStateSealer, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, Any]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    token = sealer.seal("tools/call", CALL, {})
    sealer.open(token, "tools/call", CALL)
    assert any(b == token.rsplit(".", 1)[1].encode() for _, b in calls), "the MAC went through hmac.compare_digest"
    calls.clear()
    with pytest.raises(RequestStateError):
        sealer.open(token[:-1] + ("A" if token[-1] != "A" else "B"), "tools/call", CALL)
    assert calls, "a wrong MAC is rejected by hmac.compare_digest, not by =="


# -- binding -------------------------------------------------------------------------------------------

def test_a_token_for_another_method_is_mismatched(sealer: RequestStateSealer) -> None:
    token = sealer.seal("tools/call", {"name": "review"}, {})
    assert reason_of(lambda: sealer.open(token, "prompts/get", {"name": "review"})) == MISMATCHED


@pytest.mark.parametrize(
    "method, sealed, retried",
    [
        ("tools/call", CALL, {**CALL, "name": "cancel"}),
        ("tools/call", CALL, {**CALL, "arguments": {**CALL["arguments"], "nights": 3}}),
        ("tools/call", CALL, {**CALL, "arguments": {**CALL["arguments"], "extra": 1}}),
        ("tools/call", CALL, {"name": "book"}),
        ("tools/call", CALL, {**CALL, "arguments": {**CALL["arguments"], "nights": "2"}}),  # types count
        ("tools/call", CALL, {**CALL, "task": {"ttl": 1000}}),  # any other field is bound too
        ("prompts/get", PROMPT, {"name": "review", "arguments": {"code": "print(2)"}}),
        ("resources/read", READ, {"uri": "mem://items/8"}),
        ("resources/read", READ, {}),
    ],
)
def test_a_token_for_other_params_is_mismatched(
    sealer: RequestStateSealer, method: str, sealed: dict[str, Any], retried: dict[str, Any]
) -> None:
    token = sealer.seal(method, sealed, {})
    assert reason_of(lambda: sealer.open(token, method, retried)) == MISMATCHED


def test_params_order_does_not_matter(sealer: RequestStateSealer) -> None:
    token = sealer.seal("tools/call", CALL, {})
    reordered = {
        "arguments": {"options": {"floor": [1, 2], "late": True}, "nights": 2, "city": "Paris"},
        "name": "book",
    }
    assert sealer.open(token, "tools/call", reordered).answers == {}


def test_list_order_does_matter(sealer: RequestStateSealer) -> None:
    token = sealer.seal("tools/call", CALL, {})
    swapped = {"name": "book", "arguments": {**CALL["arguments"], "options": {"late": True, "floor": [2, 1]}}}
    assert reason_of(lambda: sealer.open(token, "tools/call", swapped)) == MISMATCHED


def test_the_retry_only_fields_are_not_bound(sealer: RequestStateSealer) -> None:
    first_round = {**CALL, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "progressToken": 1}}
    token = sealer.seal("tools/call", first_round, {})
    retry = {
        **CALL,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/logLevel": "info"},
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
        "requestState": token,
    }
    assert sealer.open(token, "tools/call", retry).answers == {}


@pytest.mark.parametrize("method", ["tools/call", "prompts/get"])
def test_empty_or_null_arguments_mean_no_arguments(sealer: RequestStateSealer, method: str) -> None:
    answers = {"q": {"action": "accept"}}
    token = sealer.seal(method, {"name": "x"}, answers, app_state="s")
    for retry in ({"name": "x", "arguments": {}}, {"name": "x", "arguments": None}, {"name": "x"}):
        opened = sealer.open(token, method, retry)  # the binding matches: nothing raised
        assert (opened.answers, opened.app_state) == (answers, "s"), retry
    token = sealer.seal(method, {"name": "x", "arguments": {}}, answers)
    assert sealer.open(token, method, {"name": "x"}).answers == answers
    assert reason_of(lambda: sealer.open(token, method, {"name": "x", "arguments": {"a": 1}})) == MISMATCHED


def test_none_params_are_empty_params(sealer: RequestStateSealer) -> None:
    answers = {"q": {"action": "decline"}}
    assert sealer.open(sealer.seal("resources/read", None, answers), "resources/read", {}).answers == answers
    assert sealer.open(sealer.seal("resources/read", {}, answers), "resources/read", None).answers == answers


def test_audiences_must_match(clock: Clock) -> None:
    alpha = RequestStateSealer(SECRET, clock=clock, audience="alpha")
    beta = RequestStateSealer(SECRET, clock=clock, audience="beta")
    plain = RequestStateSealer(SECRET, clock=clock)
    token = alpha.seal("tools/call", CALL, {})
    assert alpha.open(token, "tools/call", CALL).answers == {}
    assert reason_of(lambda: beta.open(token, "tools/call", CALL)) == MISMATCHED
    assert reason_of(lambda: plain.open(token, "tools/call", CALL)) == MISMATCHED
    assert reason_of(lambda: alpha.open(plain.seal("tools/call", CALL, {}), "tools/call", CALL)) == MISMATCHED


def test_principals_must_match(sealer: RequestStateSealer) -> None:
    token = sealer.seal("tools/call", CALL, {}, principal="alice@example.com")
    assert sealer.open(token, "tools/call", CALL, principal="alice@example.com").answers == {}
    assert reason_of(lambda: sealer.open(token, "tools/call", CALL, principal="bob@example.com")) == MISMATCHED
    assert reason_of(lambda: sealer.open(token, "tools/call", CALL)) == MISMATCHED
    anonymous = sealer.seal("tools/call", CALL, {})
    assert reason_of(lambda: sealer.open(anonymous, "tools/call", CALL, principal="alice@example.com")) == MISMATCHED


def test_the_principal_is_not_readable_in_the_token(sealer: RequestStateSealer) -> None:
    payload = sealer.seal("tools/call", CALL, {}, principal="alice@example.com").split(".")[1]
    assert b"alice" not in base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))


# -- expiry -------------------------------------------------------------------------------------------

def test_expiry_is_exclusive_at_the_ttl(sealer: RequestStateSealer, clock: Clock) -> None:
    token = sealer.seal("tools/call", CALL, {})
    clock.now = START + DEFAULT_TTL - 0.001
    assert sealer.open(token, "tools/call", CALL).expires_at == START + DEFAULT_TTL
    clock.now = START + DEFAULT_TTL
    assert reason_of(lambda: sealer.open(token, "tools/call", CALL)) == EXPIRED
    clock.now = START + 10 * DEFAULT_TTL
    assert reason_of(lambda: sealer.open(token, "tools/call", CALL)) == EXPIRED


def test_a_custom_ttl(clock: Clock) -> None:
    sealer = RequestStateSealer(SECRET, clock=clock, ttl=2.5)
    assert sealer.ttl == 2.5
    token = sealer.seal("tools/call", CALL, {})
    clock.now = START + 2.4
    assert sealer.open(token, "tools/call", CALL).expires_at == START + 2.5
    clock.now = START + 2.5
    assert reason_of(lambda: sealer.open(token, "tools/call", CALL)) == EXPIRED


def test_the_expiry_is_the_sealers_not_the_openers(clock: Clock) -> None:
    """A token carries its own deadline: a sealer with a longer ttl does not extend it."""
    short = RequestStateSealer(SECRET, clock=clock, ttl=1)
    long = RequestStateSealer(SECRET, clock=clock, ttl=3600)
    token = short.seal("tools/call", CALL, {})
    clock.now = START + 2
    assert reason_of(lambda: long.open(token, "tools/call", CALL)) == EXPIRED


def test_expired_is_reported_before_mismatched(sealer: RequestStateSealer, clock: Clock) -> None:
    token = sealer.seal("tools/call", CALL, {})
    clock.now = START + DEFAULT_TTL + 1
    assert reason_of(lambda: sealer.open(token, "prompts/get", PROMPT)) == EXPIRED


def test_tampered_is_reported_before_expired(sealer: RequestStateSealer, clock: Clock) -> None:
    token = sealer.seal("tools/call", CALL, {})
    clock.now = START + DEFAULT_TTL + 1
    assert reason_of(lambda: sealer.open(token + "x", "tools/call", CALL)) == TAMPERED


# -- secrets: sharing, rotation, ephemeral ------------------------------------------------------------

def test_two_sealers_sharing_a_secret_open_each_others_tokens(clock: Clock) -> None:
    worker_a = RequestStateSealer(SECRET, clock=clock)
    worker_b = RequestStateSealer(SECRET.decode("ascii"), clock=clock)  # the same secret, as str
    assert worker_b.open(worker_a.seal("tools/call", CALL, ANSWERS), "tools/call", CALL).answers == ANSWERS
    assert worker_a.open(worker_b.seal("tools/call", CALL, ANSWERS), "tools/call", CALL).answers == ANSWERS


def test_a_str_secret_is_utf8(clock: Clock) -> None:
    text = "päßwörd-" * 4
    assert len(text) == 32
    by_str = RequestStateSealer(text, clock=clock)
    by_bytes = RequestStateSealer(text.encode("utf-8"), clock=clock)
    by_bytearray = RequestStateSealer(bytearray(text.encode("utf-8")), clock=clock)
    token = by_str.seal("tools/call", CALL, {})
    by_bytes.open(token, "tools/call", CALL)
    by_bytearray.open(token, "tools/call", CALL)


def test_rotation_with_previous_secrets(clock: Clock) -> None:
    old = RequestStateSealer(OTHER_SECRET, clock=clock)
    rotated = RequestStateSealer(SECRET, clock=clock, previous_secrets=[OTHER_SECRET])
    in_flight = old.seal("tools/call", CALL, {"a": {"action": "cancel"}})
    assert rotated.open(in_flight, "tools/call", CALL).answers == {"a": {"action": "cancel"}}
    fresh = rotated.seal("tools/call", CALL, {})
    assert reason_of(lambda: old.open(fresh, "tools/call", CALL)) == TAMPERED  # sealed with the new secret
    assert RequestStateSealer(SECRET, clock=clock).open(fresh, "tools/call", CALL).answers == {}


def test_a_principal_sealed_under_a_previous_secret_still_matches(clock: Clock) -> None:
    old = RequestStateSealer(OTHER_SECRET, clock=clock)
    rotated = RequestStateSealer(SECRET, clock=clock, previous_secrets=[OTHER_SECRET])
    token = old.seal("tools/call", CALL, {}, principal="alice")
    rotated.open(token, "tools/call", CALL, principal="alice")
    assert reason_of(lambda: rotated.open(token, "tools/call", CALL, principal="bob")) == MISMATCHED


def test_default_secrets_are_random_per_sealer(clock: Clock) -> None:
    one, two = RequestStateSealer(clock=clock), RequestStateSealer(clock=clock)
    assert one.ephemeral and two.ephemeral and not RequestStateSealer(SECRET).ephemeral
    token = one.seal("tools/call", CALL, {})
    assert one.open(token, "tools/call", CALL).answers == {}
    assert reason_of(lambda: two.open(token, "tools/call", CALL)) == TAMPERED


def test_the_same_secret_used_elsewhere_gives_unrelated_macs(sealer: RequestStateSealer) -> None:
    """The MAC key is derived for this purpose, so a plain HMAC under the raw secret does not verify."""
    token = sealer.seal("tools/call", CALL, {})
    signed, mac = token.rsplit(".", 1)
    assert mac != b64u(hmac.new(SECRET, signed.encode(), hashlib.sha256).digest())


def test_the_repr_shows_no_key_material(clock: Clock) -> None:
    sealer = RequestStateSealer("s3cr3t-value-" * 3, clock=clock, audience="svc", previous_secrets=[OTHER_SECRET])
    text = repr(sealer)
    assert "s3cr3t" not in text and OTHER_SECRET.decode() not in text
    assert "keys=2" in text and "svc" in text


# -- malformed input ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "token",
    [
        None, 0, 12345, 1.5, True, b"ms1.abc.def", ["ms1.a.b"], {"requestState": "x"},
        "", " ", "ms1", "ms1.", "ms1..", "ms1.abc", "ms1.abc.", "ms1..abc", ".abc.def", "ms1.abc.def.ghi",
        "ms1.ab c.def", "ms1.abc.de=f", "ms1.abc.def=", "ms1.ab+c.def", "ms1.ab/c.def", "MS1.abc.def",
        " ms1.abc.def", "ms1.abc.def\n", "ms1.abç.def", "ms1.abc.d\u00e9f", "v1.abc.def", "ms1-abc-def",
        "not a token at all", "\ud800",
    ],
)
def test_anything_but_a_token_is_malformed(sealer: RequestStateSealer, token: Any) -> None:
    with pytest.raises(RequestStateError) as caught:
        sealer.open(token, "tools/call", CALL)
    assert caught.value.reason == MALFORMED
    assert caught.value.data == {"reason": "malformed"}


def test_a_token_longer_than_the_limit_is_malformed(clock: Clock) -> None:
    sealer = RequestStateSealer(SECRET, clock=clock, max_token_length=200)
    token = sealer.seal("tools/call", CALL, {})
    assert len(token) <= 200
    assert reason_of(lambda: sealer.open(token + "A" * 200, "tools/call", CALL)) == MALFORMED


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"\xff\xfe",
        b"[1,2,3]",
        b'"a string"',
        b"null",
        b'{"v":1,"m":"tools/call"}',
        b'{"v":1,"m":"tools/call","d":"x","x":1} trailing',
    ],
)
def test_an_authentic_but_unreadable_payload_is_malformed(sealer: RequestStateSealer, payload: bytes) -> None:
    assert reason_of(lambda: sealer.open(forge(payload), "tools/call", CALL)) == MALFORMED


@pytest.mark.parametrize(
    "changes",
    [
        {"v": 2},
        {"v": "1"},
        {"v": ...},
        {"m": 5},
        {"m": ...},
        {"d": None},
        {"d": "é-not-ascii"},
        {"x": "1000"},
        {"x": 1.5e9},
        {"x": True},
        {"x": ...},
        {"a": []},
        {"a": "answers"},
        {"a": ...},
        {"q": ["user_name"]},
        {"q": {"user_name": 1}},
    ],
)
def test_an_authentic_payload_missing_a_field_is_malformed(sealer: RequestStateSealer, changes: dict[str, Any]) -> None:
    forged = forge(json.dumps(good_payload(**changes), ensure_ascii=False).encode("utf-8"))
    assert reason_of(lambda: sealer.open(forged, "tools/call", CALL)) == MALFORMED


def test_the_forging_helper_matches_the_real_format(sealer: RequestStateSealer) -> None:
    """Guards the malformed-payload tests above: a well-formed forged payload does open."""
    state = sealer.open(forge(json.dumps(good_payload(a={"k": {"action": "cancel"}})).encode()), "tools/call", CALL)
    assert state.answers == {"k": {"action": "cancel"}} and state.expires_at == START + 60


def test_an_authentic_payload_with_a_non_string_principal_tag_is_mismatched(sealer: RequestStateSealer) -> None:
    forged = forge(json.dumps(good_payload(p=42)).encode())
    assert reason_of(lambda: sealer.open(forged, "tools/call", CALL, principal="alice")) == MISMATCHED


# -- the error -----------------------------------------------------------------------------------------

def test_the_error_is_an_invalid_params_mcp_error(sealer: RequestStateSealer) -> None:
    token = sealer.seal("tools/call", CALL, {})
    with pytest.raises(RequestStateError) as caught:
        sealer.open(token + "-TAMPERED", "tools/call", CALL)
    error = caught.value
    assert isinstance(error, McpError) and isinstance(error, McpsyncError) and isinstance(error, ValueError)
    assert error.code == ErrorCode.INVALID_PARAMS == -32602
    assert error.to_error() == {
        "code": -32602,
        "message": "requestState failed its integrity check",
        "data": {"reason": "tampered"},
    }
    assert "TAMPERED" not in error.message  # the client's input is never echoed


@pytest.mark.parametrize("reason", [TAMPERED, EXPIRED, MISMATCHED, MALFORMED])
def test_each_reason_has_a_fixed_message(reason: str) -> None:
    error = RequestStateError(reason)
    assert error.reason == reason and error.data == {"reason": reason} and error.message and str(error) == error.message


def test_the_reasons_are_the_issues_strings() -> None:
    assert (TAMPERED, EXPIRED, MISMATCHED, MALFORMED) == ("tampered", "expired", "mismatched", "malformed")


# -- misuse by the caller (local errors, not RequestStateError) ---------------------------------------

@pytest.mark.parametrize("method", ["tools/list", "prompts/list", "server/discover", "initialize", ""])
def test_only_mrtr_methods_can_be_sealed(sealer: RequestStateSealer, method: str) -> None:
    with pytest.raises(ValueError, match="input_required"):
        sealer.seal(method, {}, {})
    assert MRTR_METHODS == {"tools/call", "prompts/get", "resources/read"}


@pytest.mark.parametrize(
    "answers, app_state",
    [
        ([("k", 1)], None),
        ("answers", None),
        ({1: {"action": "accept"}}, None),
        ({"k": float("nan")}, None),
        ({"k": b"bytes"}, None),
        ({"k": {1, 2}}, None),
        ({}, object()),
        ({}, float("inf")),
    ],
)
def test_sealing_needs_json_values(sealer: RequestStateSealer, answers: Any, app_state: Any) -> None:
    with pytest.raises(TypeError):
        sealer.seal("tools/call", CALL, answers, app_state)


@pytest.mark.parametrize("asked", [{"k": 1}, {1: "q"}, ["k"]])
def test_asked_must_map_str_to_str(sealer: RequestStateSealer, asked: Any) -> None:
    with pytest.raises(TypeError):
        sealer.seal("tools/call", CALL, {}, asked=asked)


def test_a_principal_must_be_a_str(sealer: RequestStateSealer) -> None:
    with pytest.raises(TypeError):
        sealer.seal("tools/call", CALL, {}, principal=42)  # type: ignore[arg-type]


def test_sealing_refuses_a_token_over_the_limit(clock: Clock) -> None:
    sealer = RequestStateSealer(SECRET, clock=clock, max_token_length=500)
    with pytest.raises(ValueError, match="over the limit"):
        sealer.seal("tools/call", CALL, {"big": {"action": "accept", "content": {"text": "x" * 1000}}})


@pytest.mark.parametrize("secret", [b"", b"short", "x" * 31, bytearray(31)])
def test_short_secrets_are_refused(secret: Any) -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        RequestStateSealer(secret)


@pytest.mark.parametrize("secret", [32, 1.0, ["x" * 32], memoryview(SECRET), True])
def test_secrets_of_other_types_are_refused(secret: Any) -> None:
    with pytest.raises(TypeError):
        RequestStateSealer(secret)


def test_previous_secrets_are_checked_too() -> None:
    with pytest.raises(ValueError, match=r"previous_secrets\[1\]"):
        RequestStateSealer(SECRET, previous_secrets=[OTHER_SECRET, b"short"])
    with pytest.raises(TypeError):
        RequestStateSealer(SECRET, previous_secrets=[None])  # type: ignore[list-item]


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), True, "600", None])
def test_bad_ttls_are_refused(ttl: Any) -> None:
    with pytest.raises(ValueError, match="ttl"):
        RequestStateSealer(SECRET, ttl=ttl)


def test_other_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        RequestStateSealer(SECRET, max_token_length=0)
    with pytest.raises(TypeError):
        RequestStateSealer(SECRET, clock=1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RequestStateSealer(SECRET, audience=7)  # type: ignore[arg-type]


# -- request_digest -----------------------------------------------------------------------------------

def test_digest_is_canonical() -> None:
    a = request_digest("tools/call", {"name": "n", "arguments": {"b": 1, "a": {"y": 2, "x": [3, {"q": 1, "p": 2}]}}})
    b = request_digest("tools/call", {"arguments": {"a": {"x": [3, {"p": 2, "q": 1}], "y": 2}, "b": 1}, "name": "n"})
    assert a == b and len(a) == 43


def test_digest_ignores_the_envelope_and_retry_fields() -> None:
    plain = request_digest("resources/read", READ)
    assert plain == request_digest("resources/read", {**READ, "_meta": {"k": 1}, "inputResponses": {}, "requestState": "s"})
    assert plain != request_digest("resources/read", {"uri": "mem://items/70"})


def test_digest_copes_with_any_wire_text() -> None:
    assert request_digest("tools/call", {"name": "\ud800", "arguments": {"\udfff": "\u0000"}})


def test_the_module_keeps_no_mutable_global_state() -> None:
    """One sealer per server, no registry: the module's globals are constants, functions and classes."""
    mutable = {
        name for name, value in vars(request_state).items()
        if not name.startswith("__") and isinstance(value, (dict, list, set, bytearray))
    }
    assert not mutable
