"""Sealing and opening the MRTR `requestState` (2026-07-28 multi round-trip requests).

Strategy: in 2026-07-28 a handler that needs the user, the client's model or its roots does not send a
request. The server answers `input_required` and the client retries later, maybe against another
process. Whatever the server must remember between rounds travels inside `requestState`:

- the answers collected in earlier rounds (the client sends only the current round's), and
- optionally an opaque value of the application's own.

The spec calls that string attacker-controlled, so it is sealed:

- HMAC-SHA256 under a per-server secret. By default the secret is random per process; pass a shared
  one when several processes answer the same clients.
- Bound to the method and a digest of the request's salient params, and optionally to an audience
  (the server's identity) and a principal (the authenticated caller).
- Valid until an expiry.

Opening checks, in order: the token's shape (malformed), the MAC (tampered), the payload (malformed),
the expiry (expired), then the binding (mismatched). It raises `RequestStateError`. That is an
`McpError` carrying -32602 and `data: {"reason": ...}`, so the engine answers it like any other error
the peer caused. A token that opens is still refused as "replayed" when its tool is single-use and
the token was used before (`single_use`, which needs a shared store: the sealer alone cannot tell).

The token of a single-use tool carries a random nonce (`seal(..., unique=True)`), so no two seals
give the same token, even for the same answers in the same millisecond: a single-use mark (a digest
of the token) then never hits a later round's fresh token. Other tokens stay without one, shorter.

Sealed means signed, not encrypted: the client can read what is inside. That is fine for the
client's own answers; an application must not put secrets in `app_state`.

Token: ``ms1.<base64url payload>.<base64url HMAC>``, without padding. The version prefix is covered
by the MAC, so a token cannot be replayed as another format. Nothing here does I/O or keeps global
state, and a sealer is immutable, so one instance can serve every thread.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import ujson

from ..protocol.jsonrpc import ErrorCode, McpError

__all__ = [
    "DEFAULT_TTL",
    "EXPIRED",
    "MALFORMED",
    "MISMATCHED",
    "MRTR_METHODS",
    "REPLAYED",
    "TAMPERED",
    "RequestStateError",
    "RequestStateSealer",
    "SealedState",
    "request_digest",
]

MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The only methods whose result may be `input_required` (the MRTR spec, "Supported Requests")."""

DEFAULT_TTL = 600.0
"""Ten minutes: long enough for a person to answer a form, short enough to bound a replay."""

MIN_SECRET_BYTES = 32
"""A shorter secret is refused: the MAC is only as strong as the key behind it."""

MAX_TOKEN_LENGTH = 16 * 1024 * 1024
"""The default frame limit: no longer token can reach the server, so none is ever minted."""

TAMPERED = "tampered"
"""The MAC does not verify: the token was changed, or sealed under a secret this server lacks."""
EXPIRED = "expired"
"""The MAC verifies, but the token's lifetime is over."""
MISMATCHED = "mismatched"
"""The MAC verifies, but the token was issued for another method, params, audience or principal."""
MALFORMED = "malformed"
"""The value is not a token at all (wrong type, prefix, alphabet or payload)."""
REPLAYED = "replayed"
"""The token opens, but its tool is single-use and it was used before (on any replica sharing the
store of used states); the MRTR page's one-time operations (see `single_use`)."""

_MESSAGES = MappingProxyType({
    TAMPERED: "requestState failed its integrity check",
    EXPIRED: "requestState has expired",
    MISMATCHED: "requestState was issued for a different request",
    MALFORMED: "requestState is not a valid token",
    REPLAYED: "requestState has already been used",
})

_PREFIX = "ms1"
_KEY_LABEL = b"mcpsync/request-state/v1"
_PRINCIPAL_LABEL = b"mcpsync/request-state/principal\x00"
_PAYLOAD_VERSION = 1
_NONCE_BYTES = 12  # 96 random bits: tokens never repeat, so neither do their single-use marks
_TOKEN_SHAPE = re.compile(re.escape(_PREFIX) + r"\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)")  # base64url, unpadded
# What the retry adds to the original params, and the envelope that changes every round.
_UNBOUND_PARAMS = frozenset({"_meta", "inputResponses", "requestState"})
# Clients differ on sending `arguments: {}` or no arguments at all; both mean "no arguments".
_EMPTY_MEANS_ABSENT = MappingProxyType({"tools/call": "arguments", "prompts/get": "arguments"})


class RequestStateError(McpError, ValueError):
    """A `requestState` the server will not accept. It is the peer's fault, so the engine answers
    -32602 with `data.reason`. Retrying with the same token fails the same way. The client must
    start the request over without a state."""

    def __init__(self, reason: str) -> None:
        super().__init__(ErrorCode.INVALID_PARAMS, _MESSAGES[reason], {"reason": reason})
        self.reason = reason


@dataclass(frozen=True, slots=True)
class SealedState:
    """What an opened `requestState` carried. Each open returns fresh dicts the caller may keep."""

    answers: dict[str, Any]
    """Answers collected in earlier rounds, by input-request key, as the client sent them."""
    app_state: Any = None
    """The application's own value from `seal(..., app_state=...)`, or None."""
    expires_at: float = 0.0
    """When the token stops being accepted, in the sealer's clock (seconds)."""
    asked: dict[str, str] = field(default_factory=dict)
    """Whatever `seal(..., asked=...)` recorded, for example a digest of each question sent that round."""


def request_digest(method: str, params: Mapping[str, Any] | None) -> str:
    """A digest of the params a retry must repeat unchanged: everything except `_meta`,
    `inputResponses` and `requestState`.

    For tools/call and prompts/get that is the name and arguments; for resources/read it is the uri.
    Every other field counts too, so a future field cannot carry a token over to a different request.
    Keys whose value is null count as absent, and so does an empty `arguments`.

    The JSON is canonical: keys sorted at every depth, compact separators, and ASCII escapes. With
    those escapes a lone surrogate still encodes, so the digest never fails on client text.

    Raises:
        TypeError: `params` holds something that is not a JSON value (a caller bug, never wire input).
    """
    salient = {key: value for key, value in (params or {}).items() if key not in _UNBOUND_PARAMS and value is not None}
    optional = _EMPTY_MEANS_ABSENT.get(method)
    if optional is not None and salient.get(optional) == {}:
        del salient[optional]
    import json  # deferred: only a request that asks first gets here; json costs every start-up 1.5 ms

    text = json.dumps(salient, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return _b64u(hashlib.sha256(text.encode("ascii")).digest())


class RequestStateSealer:
    """Seals and opens `requestState` tokens under one secret.

    Args:
        secret: The key material, at least 32 bytes (a `str` is UTF-8 encoded). If None, this process
            draws 32 random bytes, and a token then opens only in the process that sealed it. Pass a
            shared secret when several processes serve the same clients (workers behind a load
            balancer, or a bridge that starts one child per request).
        ttl: How long a token stays valid, in seconds.
        clock: Returns the current time in seconds. Injected so tests need no sleeps.
        audience: The identity of this server. If set, it is sealed into every token and required
            on open, so two services sharing a secret cannot accept each other's tokens.
        previous_secrets: Older secrets still accepted on open but never used to seal. This allows
            rotating the secret without failing requests already in flight.
        max_token_length: Longer tokens are refused on open, and `seal` raises instead of minting one.

    Raises:
        TypeError: A secret is not bytes, bytearray or str. Other types are never coerced: for
            example `bytes(32)` would be an all-zero key.
        ValueError: A secret is too short, or ttl / max_token_length is not positive.
    """

    __slots__ = ("_keys", "_ttl", "_clock", "_audience", "_max_length", "_ephemeral")

    def __init__(
        self,
        secret: bytes | bytearray | str | None = None,
        *,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.time,
        audience: str | None = None,
        previous_secrets: Iterable[bytes | bytearray | str] = (),
        max_token_length: int = MAX_TOKEN_LENGTH,
    ) -> None:
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
            raise ValueError(f"request-state ttl must be a positive finite number of seconds, got {ttl!r}")
        if isinstance(max_token_length, bool) or not isinstance(max_token_length, int) or max_token_length <= 0:
            raise ValueError(f"max_token_length must be a positive int, got {max_token_length!r}")
        if not callable(clock):
            raise TypeError("clock must be a callable returning seconds")
        if audience is not None and not isinstance(audience, str):
            raise TypeError("audience must be a str or None")
        self._ephemeral = secret is None
        current = os.urandom(MIN_SECRET_BYTES) if secret is None else _secret_bytes(secret, "secret")
        older = [_secret_bytes(value, f"previous_secrets[{index}]") for index, value in enumerate(previous_secrets)]
        self._keys: tuple[bytes, ...] = tuple(_derive_key(material) for material in (current, *older))
        self._ttl = float(ttl)
        self._clock = clock
        self._audience = audience
        self._max_length = max_token_length

    @property
    def ttl(self) -> float:
        """The lifetime of each token sealed from now on, in seconds."""
        return self._ttl

    @property
    def ephemeral(self) -> bool:
        """True when the secret was drawn here: tokens then open only in this process."""
        return self._ephemeral

    def __repr__(self) -> str:  # never the key material
        return (
            f"RequestStateSealer(ttl={self._ttl!r}, audience={self._audience!r}, "
            f"keys={len(self._keys)}, ephemeral={self._ephemeral})"
        )

    def seal(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        answers: Mapping[str, Any] | None,
        app_state: Any = None,
        *,
        asked: Mapping[str, str] | None = None,
        principal: str | None = None,
        unique: bool = False,
    ) -> str:
        """Seal the state for the retry of one request.

        Args:
            method: tools/call, prompts/get or resources/read, the only methods that may answer
                `input_required`.
            params: The request's params as received. `_meta`, `inputResponses` and
                `requestState` are ignored (see `request_digest`).
            answers: Every answer the handler has so far, by input-request key. Each value is a JSON
                value (an ElicitResult, CreateMessageResult or ListRootsResult as the client sent it).
            app_state: Any JSON value the application wants back on the retry, or None.
            asked: Optional `key -> string` record of the questions sent this round, returned as
                `SealedState.asked`.
            principal: The authenticated caller, if any. The token then opens only for the same
                principal. A keyed digest is stored, never the name itself.
            unique: Add a random nonce, so the token differs from every other one, even sealed
                with the same answers in the same millisecond (a single-use state's mark must
                never match a later round's token).

        Returns:
            The token, ASCII only, to send as `requestState`.

        Raises:
            ValueError: The method cannot carry `input_required`, or the token would exceed
                max_token_length.
            TypeError: A key is not a str, or a value is not JSON (a NaN, bytes, a set, ...).
        """
        if method not in MRTR_METHODS:
            raise ValueError(f"{method!r} cannot answer input_required, so it has no requestState")
        payload: dict[str, Any] = {
            "v": _PAYLOAD_VERSION,
            "m": method,
            "d": request_digest(method, params),
            "x": round((self._clock() + self._ttl) * 1000),  # integer milliseconds
            "a": _str_keyed(answers or {}, "answers"),
        }
        if unique:
            payload["n"] = _b64u(os.urandom(_NONCE_BYTES))
        if app_state is not None:
            payload["s"] = app_state
        if asked:
            payload["q"] = _str_keyed(asked, "asked", values=str)
        if self._audience is not None:
            payload["u"] = self._audience
        if principal is not None:
            if not isinstance(principal, str):
                raise TypeError("principal must be a str or None")
            payload["p"] = _principal_tag(self._keys[0], principal)
        try:
            encoded = ujson.dumps(payload, ensure_ascii=True, escape_forward_slashes=False, allow_nan=False)
        except (TypeError, OverflowError, ValueError) as exc:
            raise TypeError(f"answers and app_state must be JSON values: {exc}") from exc
        signed = f"{_PREFIX}.{_b64u(encoded.encode('ascii'))}"
        token = f"{signed}.{_mac(self._keys[0], signed)}"
        if len(token) > self._max_length:
            raise ValueError(f"sealed requestState would be {len(token)} characters, over the limit of {self._max_length}")
        return token

    def open(
        self,
        token: Any,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        principal: str | None = None,
    ) -> SealedState:
        """Verify a `requestState` echoed by the client and return what it carried.

        Args:
            token: The `requestState` value exactly as received. Any JSON type is accepted, and
                anything other than a token is reported as malformed.
            method, params: The retry as received (params may include `inputResponses` and
                `requestState`; both are ignored by the binding).
            principal: The authenticated caller of this retry, or None. It must match the one given
                to `seal`.

        Returns:
            The answers, application state, expiry and `asked` record the token was sealed with.

        Raises:
            RequestStateError: `reason` is one of "malformed", "tampered", "expired", "mismatched".
        """
        if not isinstance(token, str) or len(token) > self._max_length:
            raise RequestStateError(MALFORMED)
        shape = _TOKEN_SHAPE.fullmatch(token)
        if shape is None:
            raise RequestStateError(MALFORMED)
        signed = token[: shape.start(2) - 1]
        key = self._verifying_key(signed, shape.group(2))
        if key is None:
            raise RequestStateError(TAMPERED)
        payload = _decode_payload(shape.group(1))  # only after the MAC: we minted these bytes
        if self._clock() * 1000 >= payload["x"]:
            raise RequestStateError(EXPIRED)
        if (
            payload["m"] != method
            or not hmac.compare_digest(payload["d"], request_digest(method, params))
            or payload.get("u") != self._audience
            or not _principal_matches(key, payload.get("p"), principal)
        ):
            raise RequestStateError(MISMATCHED)
        return SealedState(
            answers=dict(payload["a"]),
            app_state=payload.get("s"),
            expires_at=payload["x"] / 1000,
            asked=dict(payload.get("q") or {}),
        )

    def time_left(self, state: SealedState) -> float:
        """Seconds until `state` stops being accepted, in this sealer's clock (0 once expired):
        how long a single-use mark of it must be kept, since after that the token is refused as
        expired anyway."""
        return max(0.0, state.expires_at - self._clock())

    def _verifying_key(self, signed: str, mac: str) -> bytes | None:
        """The key whose MAC over `signed` equals `mac` (compared in constant time), or None."""
        found = None
        for key in self._keys:  # every key is tried, so timing does not tell which one matched
            if hmac.compare_digest(_mac(key, signed).encode("ascii"), mac.encode("ascii")) and found is None:
                found = key
        return found


def _secret_bytes(value: Any, name: str) -> bytes:
    if isinstance(value, str):
        material = value.encode("utf-8", "surrogatepass")
    elif isinstance(value, (bytes, bytearray)):
        material = bytes(value)
    else:
        raise TypeError(f"request-state {name} must be bytes, bytearray or str, not {type(value).__name__}")
    if len(material) < MIN_SECRET_BYTES:
        raise ValueError(
            f"request-state {name} must be at least {MIN_SECRET_BYTES} bytes of secret randomness, "
            f"got {len(material)} (secrets.token_hex(32) makes a good one)"
        )
    return material


def _derive_key(secret: bytes) -> bytes:
    """A key for this purpose alone, so the same secret used elsewhere yields unrelated MACs."""
    return hmac.new(secret, _KEY_LABEL, hashlib.sha256).digest()


def _mac(key: bytes, signed: str) -> str:
    return _b64u(hmac.new(key, signed.encode("ascii"), hashlib.sha256).digest())


def _principal_tag(key: bytes, principal: str) -> str:
    digest = hmac.new(key, _PRINCIPAL_LABEL + principal.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return _b64u(digest.digest()[:16])


def _principal_matches(key: bytes, tag: Any, principal: str | None) -> bool:
    if tag is None or principal is None:
        return tag is None and principal is None
    return isinstance(tag, str) and tag.isascii() and hmac.compare_digest(tag, _principal_tag(key, principal))


def _b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _decode_payload(text: str) -> dict[str, Any]:
    """Decode a verified payload and check the fields `open` relies on (malformed if absent)."""
    try:
        payload = ujson.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise RequestStateError(MALFORMED) from None
    if not (
        isinstance(payload, dict)
        and payload.get("v") == _PAYLOAD_VERSION
        and isinstance(payload.get("m"), str)
        and isinstance(payload.get("d"), str)
        and isinstance(payload.get("x"), int)
        and not isinstance(payload.get("x"), bool)
        and isinstance(payload.get("a"), dict)
        and all(isinstance(key, str) for key in payload["a"])
        and isinstance(payload.get("q", {}), dict)
        and all(isinstance(key, str) and isinstance(value, str) for key, value in payload.get("q", {}).items())
        and payload["d"].isascii()  # compare_digest takes ASCII str only
    ):
        raise RequestStateError(MALFORMED)
    return payload


def _str_keyed(mapping: Mapping[str, Any], name: str, values: type | None = None) -> dict[str, Any]:
    if not isinstance(mapping, Mapping):
        raise TypeError(f"{name} must be a mapping, not {type(mapping).__name__}")
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise TypeError(f"{name} keys must be str, got {key!r}")
        if values is not None and not isinstance(value, values):
            raise TypeError(f"{name}[{key!r}] must be {values.__name__}, got {type(value).__name__}")
    return dict(mapping)
