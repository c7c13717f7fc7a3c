"""The claims every verifier checks the same way: issuer, audience, expiry, not-before.

Strategy: a JWT's claims and an RFC 7662 introspection answer use the same names (RFC 7662 section
2.2 borrows them from RFC 7519), so one function checks both, against the verifier's own clock and
leeway, and refuses with the same few words ("wrong audience", "the token has expired"). What
differs is passed in: a JWT must carry `exp` and must not be issued in the future (`iat`); an
introspection answer may omit what its authorization server does not say.

Whatever a claim holds, the answer is a refusal in those few words or a pass, never an exception
of another kind: a validly signed token is still hostile input (a NumericDate of 400 digits, which
`float()` cannot hold, is "malformed token", not an OverflowError).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .principal import InvalidToken, numeric_date


def check_claims(
    claims: Mapping[str, Any],
    now: float,
    *,
    leeway: float,
    issuer: str | None,
    audiences: tuple[str, ...] | None,
    expiry_required: bool,
    not_before: Iterable[str] = ("nbf",),
) -> float | None:
    """Raise InvalidToken unless the claims name `issuer` (when given) and one of `audiences`
    (when given), and are current at `now` give or take `leeway`; the expiry (`exp`), if any."""
    if issuer is not None and claims.get("iss") != issuer:
        raise InvalidToken("wrong issuer")
    if audiences is not None:
        audience = claims.get("aud")
        if audience is None:
            raise InvalidToken("the token has no audience")
        named = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
        if not any(isinstance(item, str) and item in audiences for item in named):
            raise InvalidToken("wrong audience")
    expires = _number(claims, "exp")
    if expires is None:
        if expiry_required:
            raise InvalidToken("the token has no expiry")
    elif expires <= now - leeway:
        raise InvalidToken("the token has expired")
    for name in not_before:
        moment = _number(claims, name)
        if moment is not None and moment > now + leeway:
            raise InvalidToken("the token is not valid yet")
    return expires


def _number(claims: Mapping[str, Any], name: str) -> float | None:
    """A NumericDate claim, None when absent; InvalidToken when it is not a number."""
    value = claims.get(name)
    if value is None:
        return None
    number = numeric_date(value)
    if number is None:
        raise InvalidToken("malformed token")
    return number
