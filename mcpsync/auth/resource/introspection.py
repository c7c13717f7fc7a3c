"""Opaque (or any) access tokens checked by asking the authorization server (RFC 7662 introspection).

Strategy: the authorization server knows; this verifier asks it, trusts its `active`, and checks
the rest of the answer the way a JWT's claims are checked: `exp` and `nbf` against this side's
clock (with `leeway` for skew), `aud` against this resource (RFC 8707; an answer without `aud` is
refused when an audience is configured, since a token issued for another resource must not work
here), and `iss` when an issuer is configured. The answer becomes the `Principal`'s claims.

Each answer is remembered by the token's digest, so a client's stream of requests costs one
round trip per `cache_ttl`: an active token until its `exp` or `cache_ttl`, whichever is first
(so a revoked token stops working within `cache_ttl`), an inactive one for `cache_ttl`. Nothing
is remembered when the endpoint could not answer (unreachable, non-2xx, not JSON, no boolean
`active`): that is `VerifierUnavailable` (503), the client's token is not blamed, and the next
request asks again. The one refusal that does blame the token is RFC 7009's
`unsupported_token_type` (a 400 that says the server will never introspect a token of this kind:
oidc-provider answers it for any JWT): that is `InvalidToken` (401), remembered like an inactive
token. Concurrent first requests with one new token each ask; that is a handful of
calls once, not a flood.

The request is a form POST (`token`, `token_type_hint=access_token`) with HTTP Basic client
credentials when they are given, bounded by `timeout` (see `_fetch`). The secret is kept only
to build that header; it and the token never reach a log or an error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..fetch import FetchError, check_url, post_form
from ._cache import TokenCache
from ._claims import check_claims
from .principal import InvalidToken, Principal, VerifierUnavailable, principal_from_claims

__all__ = ["IntrospectionVerifier"]

log = logging.getLogger(__name__)


class IntrospectionVerifier:
    """Verifies tokens by RFC 7662 introspection at `endpoint`.

    Args:
        endpoint: the authorization server's introspection endpoint.
        client_id, client_secret: this resource server's credentials there (HTTP Basic); both or neither.
        audience: this resource's identifier(s); the answer's `aud` must contain one. Pass None
            explicitly to accept any audience (only for an authorization server that serves this
            resource alone).
        issuer: when given, the answer's `iss` must be exactly this.
        timeout: seconds an introspection call may take.
        cache_ttl, cache_size: how long (at most) and how many answers are remembered.
        leeway: seconds of clock difference tolerated on `exp` and `nbf`.
        clock: seconds since the epoch; injected by tests.

    Raises:
        ValueError: a setting is unusable (a non-http endpoint, a client id without secret).
    """

    def __init__(self, endpoint: str, *, client_id: str | None = None, client_secret: str | None = None,
                 audience: str | Iterable[str] | None, issuer: str | None = None, timeout: float = 5.0, cache_ttl: float = 60.0,
                 cache_size: int = 10_000, leeway: float = 30.0, clock: Callable[[], float] = time.time) -> None:
        self._endpoint = check_url(endpoint)
        if (client_id is None) != (client_secret is None):
            raise ValueError("IntrospectionVerifier needs both client_id and client_secret, or neither")
        self._credentials = (client_id, client_secret) if client_id is not None and client_secret is not None else None
        if audience is None:
            self._audiences: tuple[str, ...] | None = None
        else:
            self._audiences = (audience,) if isinstance(audience, str) else tuple(audience)
            if not self._audiences or not all(isinstance(item, str) and item for item in self._audiences):
                raise ValueError("audience must name this resource (or be None to accept any audience)")
        self._issuer = issuer
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if cache_ttl < 0 or leeway < 0:
            raise ValueError("cache_ttl and leeway must not be negative")
        self._timeout = timeout
        self._cache_ttl = float(cache_ttl)
        self._leeway = float(leeway)
        self._clock = clock
        self._cache: TokenCache[Principal | str] = TokenCache(size=cache_size if cache_ttl > 0 else 0, clock=clock)

    def __repr__(self) -> str:
        return f"IntrospectionVerifier({self._endpoint!r})"  # never the credentials

    def verify(self, token: str) -> Principal:
        """The `Principal` the authorization server says `token` stands for.

        Raises:
            InvalidToken: the token is not active, or not for this resource; the message says which.
            VerifierUnavailable: the introspection endpoint did not give a usable answer.
        """
        cached = self._cache.get(token)
        if isinstance(cached, Principal):
            return cached
        if cached is not None:
            raise InvalidToken(cached)
        try:
            reply = post_form(self._endpoint, {"token": token, "token_type_hint": "access_token"}, timeout=self._timeout,
                              basic_auth=self._credentials)
        except FetchError as exc:
            if exc.oauth_error == "unsupported_token_type":
                # The server will never introspect this token (oidc-provider says so of any JWT):
                # the client's token is at fault, so a 401 sends it to log in; a 503 would have it
                # retry the same token forever.
                refused = "the authorization server does not introspect tokens of this type"
                self._cache.put(token, refused, self._clock() + self._cache_ttl)
                raise InvalidToken(refused) from None
            log.warning("token introspection failed: %s", exc)
            raise VerifierUnavailable("the token cannot be checked now") from exc
        answer = reply.body
        if not isinstance(answer, dict) or not isinstance(answer.get("active"), bool):
            log.warning("token introspection answered without a boolean 'active'")
            raise VerifierUnavailable("the token cannot be checked now")
        now = self._clock()
        try:
            expires = self._check(answer, now)
        except InvalidToken as refused:
            if str(refused) != "the token is not valid yet":  # that one may change before cache_ttl passes
                self._cache.put(token, str(refused), now + self._cache_ttl)
            raise
        principal = principal_from_claims(answer)
        until = now + self._cache_ttl if expires is None else min(expires, now + self._cache_ttl)
        self._cache.put(token, principal, until)
        return principal

    def _check(self, answer: Mapping[str, Any], now: float) -> float | None:
        """Raise InvalidToken unless the answer says active, current, ours; the expiry if it gives one."""
        if answer["active"] is not True:
            raise InvalidToken("the token is not active")
        return check_claims(answer, now, leeway=self._leeway, issuer=self._issuer, audiences=self._audiences, expiry_required=False)
