"""Who made a request: the `Principal` a token verifier answers, and the verifier protocol.

Strategy: the HTTP layer asks one question, "who holds this token?", through a one-method protocol
(`TokenVerifier.verify`), so JWT access tokens, RFC 7662 introspection and a file of static tokens
are interchangeable answers and an application can bring its own. A verifier says "valid" with a
`Principal`, "not valid" with None, or why not by raising `InvalidToken` (its text goes to the
client as the challenge's `error_description`, so it is short and never quotes the token); it
raises `VerifierUnavailable` when it cannot tell now (its keys or its introspection endpoint are out
of reach), which the endpoint answers 503 rather than sending a client with a good token to log in
again.

A `Principal` is immutable and carries the token's claims read-only. Its `key` (issuer, subject,
client) is what a handshake-era session and a sealed `requestState` are bound to: a refreshed
token of the same caller keeps both, another caller's token opens neither. The key is an encoding
of the three parts that no other three parts share (each part length-prefixed, so no separator a
claim could contain joins them), and `Auth` refuses a principal that names neither a subject nor a
client, which would otherwise share one key with every other such token.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from ...errors import McpsyncError
from ...protocol.jsonrpc import ErrorCode, McpError

__all__ = [
    "InsufficientScope",
    "InvalidToken",
    "Principal",
    "TokenVerifier",
    "VerifierUnavailable",
    "checked_scopes",
    "is_scope",
    "principal_from_claims",
    "scopes_from_claims",
]

_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
"""RFC 6749 section 3.3: a scope is printable ASCII without space, quote or backslash."""

@dataclass(frozen=True, slots=True)
class Principal:
    """The caller a valid access token stands for, as tools, prompts, resources (`ctx.principal`)
    and interceptors (`call.principal`) see it."""

    subject: str | None
    """Whom the token was issued for: its `sub` (introspection: `sub`, else `username`)."""
    client_id: str | None = None
    """The OAuth client that holds it: `client_id`, else `azp`, else `cid`."""
    scopes: frozenset[str] = frozenset()
    """What it may do: the token's scopes (with those they imply, see `Auth(scope_implies=...)`)."""
    issuer: str | None = None
    """The authorization server that issued it (`iss`)."""
    expires_at: float | None = None
    """When it expires (`exp`), in seconds since the epoch."""
    claims: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Everything the token (or the introspection answer) said, read-only."""
    key: str = field(init=False, repr=False, compare=False)
    """The caller's identity, stable across token refreshes: issuer, subject and client, encoded so
    that two different triples never give the same key. A session or a `requestState` made for one
    key is refused to any other. (Made once: every request of a session and every sealed state
    asks for it.)"""

    def __post_init__(self) -> None:
        if not isinstance(self.scopes, frozenset):
            object.__setattr__(self, "scopes", frozenset(self.scopes))
        if not isinstance(self.claims, MappingProxyType):
            object.__setattr__(self, "claims", MappingProxyType(dict(self.claims)))
        object.__setattr__(self, "key", _identity_key(self.issuer, self.subject, self.client_id))

    def has_scopes(self, needed: Iterable[str]) -> bool:
        """Whether this principal holds every scope in `needed`."""
        return self.scopes.issuperset(needed)


def _identity_key(*parts: str | None) -> str:
    """`parts` as one string that no other sequence of parts gives: each is `-` when None, else
    its length, a colon and itself. (Joining with a separator would let a claim that contains the
    separator pose as two other claims.)"""
    return "".join("-" if part is None else f"{len(part)}:{part}" for part in parts)


@runtime_checkable
class TokenVerifier(Protocol):
    """Checks a bearer token: a `Principal` if it is valid, None if not.

    May raise `InvalidToken` to say why a token is refused, or `VerifierUnavailable` when it cannot
    check now. Called on the thread serving the request, from many threads at once: it must be
    thread-safe, and any wait in it must be bounded (the request waits for it).
    """

    def verify(self, token: str) -> Principal | None: ...


class InvalidToken(McpsyncError):
    """The token is not valid; the message says why in a few words ("the token has expired"). It
    reaches the client as `error_description`: never put the token or a key in it."""


class VerifierUnavailable(McpsyncError):
    """Tokens cannot be checked now (the signing keys or the introspection endpoint are out of
    reach); the endpoint answers 503 with `Retry-After`, and the client's token is not blamed."""


def scopes_from_claims(claims: Mapping[str, Any]) -> frozenset[str]:
    """The scopes a token grants: `scope` (RFC 8693 / RFC 9068: one space-separated string), else
    `scp` (a list, or a string, as some providers write it).

    Only RFC 6749 scope tokens count, and a string is split at spaces alone: `str.split()` would
    also split at every other Unicode whitespace, so a scope "read\u2003admin" that an authorization
    server let through as one (unknown) scope would grant `admin`. Anything else is ignored."""
    value = claims.get("scope")
    if value is None:
        value = claims.get("scp")
    if isinstance(value, str):
        items: list[Any] | tuple[Any, ...] = value.split(" ")
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        return frozenset()
    return frozenset(item for item in items if is_scope(item))


def principal_from_claims(claims: Mapping[str, Any]) -> Principal:
    """A `Principal` from a JWT's claims or an introspection answer (RFC 7662 uses the same names)."""
    subject = _text(claims.get("sub")) or _text(claims.get("username"))
    client_id = _text(claims.get("client_id")) or _text(claims.get("azp")) or _text(claims.get("cid"))
    return Principal(
        subject=subject,
        client_id=client_id,
        scopes=scopes_from_claims(claims),
        issuer=_text(claims.get("iss")),
        expires_at=numeric_date(claims.get("exp")),
        claims=claims,
    )


def numeric_date(value: Any) -> float | None:
    """A NumericDate claim's value as a float; None unless it is a finite number (a bool is not
    one, and an integer too large for a float, which `float()` refuses with OverflowError, is not
    either)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class InsufficientScope(McpError):
    """The caller's token lacks the scopes an entry (a tool, prompt or resource) needs: the HTTP
    endpoint answers 403 with an `insufficient_scope` challenge naming them, so the client can
    re-authorize with them (step-up)."""

    def __init__(self, scopes: Iterable[str], what: str) -> None:
        self.scopes = tuple(sorted(scopes))
        self.description = f"{what} needs the scope(s) {' '.join(self.scopes)}"
        super().__init__(ErrorCode.INVALID_REQUEST, f"Forbidden: {self.description}", {"error": "insufficient_scope", "scopes": list(self.scopes)})


def is_scope(value: object) -> bool:
    """Whether `value` is one scope token (RFC 6749 section 3.3)."""
    return isinstance(value, str) and _SCOPE_TOKEN.fullmatch(value) is not None


def checked_scopes(scopes: Iterable[str], what: str) -> tuple[str, ...]:
    """`scopes` in order without repeats, each checked to be a scope token; a typo in a scope would
    refuse every caller, so it fails here, naming `what`."""
    if isinstance(scopes, str):
        raise TypeError(f"{what} must be a list of scopes, not one string ({scopes!r})")
    checked = tuple(dict.fromkeys(scopes))
    for scope in checked:
        if not is_scope(scope):
            raise ValueError(f"{what}: {scope!r} is not a valid scope (printable ASCII, no spaces, quotes or backslashes)")
    return checked
