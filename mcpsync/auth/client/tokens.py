"""The token endpoint: the authorization code grant with PKCE, refresh, and how the client authenticates.

Strategy: plain functions over `ServerMetadata` and `Registration`, one token request each, every
answer a `TokenSet` (a value: the flow stores it, `oauth` turns it into a header).

- PKCE (RFC 7636) is always S256: `pkce_pair()` makes a 43-character verifier from 32 random
  bytes and its SHA-256 challenge. A server whose metadata lists `code_challenge_methods_supported`
  without S256 is refused (the spec: clients MUST use S256 when technically capable, and a server
  that cannot check it gives no protection).
- `resource` (RFC 8707) goes in the authorization request and in every token request, with the one
  value the protected resource metadata published (or the endpoint URL without it).
- Client authentication (`client_fields`): `client_secret_basic` (HTTP Basic, each part
  form-encoded first, RFC 6749 section 2.3.1), `client_secret_post` (both in the body), `none`
  (`client_id` in the body). `private_key_jwt` is `client_credentials`' business (it needs PyJWT).
- `expires_in` becomes an absolute `expires_at` on the injected clock; a refresh answer without a
  new refresh token keeps the old one (RFC 6749 section 6). `expires_in` is the server's word,
  checked by `_fetch.parse_seconds`: 0 to 10**9 seconds (a quoted number counts), 0 meaning no
  known expiry as before; anything else (a bool, a negative, NaN, 10**400, "soon") is a
  `TokenError` naming it, never an OverflowError or a token that expires at infinity.

Errors are `TokenError` (an `OAuthError`) carrying the server's `error` code (`invalid_grant`
says "log in again"), never the code, verifier, secret or any token.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import secrets
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..b64token import is_b64token
from ..fetch import FetchError, parse_seconds, post_form, safe_url
from .discovery import OAuthError, ServerMetadata
from .registration import Registration, token_auth_method

__all__ = ["TokenError", "TokenSet", "authorization_url", "client_fields", "exchange_code", "pkce_pair", "refresh", "request_token"]

_VSCHARS = re.compile(r"[\x20-\x7e]+")
"""RFC 6749 appendix A.17: what a refresh token may be. It travels in a form body, never a header,
so any visible ASCII character (a space, a quote) is fine there; only control and non-ASCII ones are not."""


class TokenError(OAuthError):
    """The token endpoint refused (or answered nonsense); `error` is its OAuth error code, if any.
    `invalid_grant` on a refresh means the refresh token is no longer good: log in again."""

    def __init__(self, message: str, error: str | None = None) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True, slots=True)
class TokenSet:
    """What a token endpoint issued, with what it was for."""

    access_token: str = field(repr=False)
    token_type: str = "Bearer"
    expires_at: float | None = None
    refresh_token: str | None = field(default=None, repr=False)
    scopes: tuple[str, ...] | None = None
    """The scopes asked for (what a step-up unions with); None when the request named none."""
    granted: tuple[str, ...] | None = None
    """The `scope` the server said it granted, when it said."""
    issuer: str | None = None
    resource: str | None = None
    """The `resource` it was requested for."""

    def header(self) -> str:
        """The `Authorization` value: always the Bearer scheme (the spec's header method)."""
        return f"Bearer {self.access_token}"

    def expired(self, now: float, skew: float = 0.0) -> bool:
        return self.expires_at is not None and now >= self.expires_at - skew

    def to_dict(self) -> dict[str, Any]:
        value = asdict(self)
        for name in ("scopes", "granted"):
            if value[name] is not None:
                value[name] = list(value[name])
        return value

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> TokenSet | None:
        try:
            token = value["access_token"]
            if not isinstance(token, str) or not token:
                return None
            return cls(
                access_token=token,
                token_type=str(value.get("token_type") or "Bearer"),
                expires_at=_finite(float(value["expires_at"])) if value.get("expires_at") is not None else None,
                refresh_token=value.get("refresh_token") if isinstance(value.get("refresh_token"), str) else None,
                scopes=tuple(value["scopes"]) if value.get("scopes") is not None else None,
                granted=tuple(value["granted"]) if value.get("granted") is not None else None,
                issuer=value.get("issuer") if isinstance(value.get("issuer"), str) else None,
                resource=value.get("resource") if isinstance(value.get("resource"), str) else None,
            )
        except (KeyError, TypeError, ValueError, OverflowError):  # OverflowError: an integer too large for a float
            return None



def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("not a finite time")
    return value


def pkce_pair() -> tuple[str, str]:
    """A PKCE code verifier and its S256 challenge (RFC 7636 section 4)."""
    verifier = secrets.token_urlsafe(32)  # 43 characters of the unreserved alphabet
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def authorization_url(
    metadata: ServerMetadata,
    registration: Registration,
    *,
    redirect_uri: str,
    scopes: Iterable[str] | None,
    state: str,
    challenge: str,
    resource: str,
) -> str:
    """The URL the user's browser opens: response_type=code with PKCE S256, state and resource.

    Raises:
        OAuthError: the server has no authorization endpoint, or says it cannot do S256.
    """
    if metadata.authorization_endpoint is None:
        raise OAuthError(f"the authorization server {safe_url(metadata.issuer)} has no authorization_endpoint")
    methods = metadata.code_challenge_methods_supported
    if methods is not None and "S256" not in methods:
        raise OAuthError(f"the authorization server {safe_url(metadata.issuer)} does not support PKCE with S256: refusing to log in")
    query: dict[str, str] = {
        "response_type": "code",
        "client_id": registration.client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": resource,
    }
    scope_list = list(scopes or ())
    if scope_list:
        query["scope"] = " ".join(scope_list)
    endpoint = metadata.authorization_endpoint
    parts = urllib.parse.urlsplit(endpoint)
    existing = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    merged = [(k, v) for k, v in existing if k not in query] + list(query.items())
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, urllib.parse.urlencode(merged), ""))


def client_fields(registration: Registration, metadata: ServerMetadata, fields: dict[str, str]) -> tuple[dict[str, str], tuple[str, str] | None]:
    """`fields` with the client's authentication added, and the HTTP Basic pair (or None)."""
    method = token_auth_method(registration, metadata)
    if method == "client_secret_basic" and registration.client_secret is not None:
        return fields, (registration.client_id, registration.client_secret)
    if method == "client_secret_post" and registration.client_secret is not None:
        return {**fields, "client_id": registration.client_id, "client_secret": registration.client_secret}, None
    if method not in ("none", "client_secret_basic", "client_secret_post"):
        raise OAuthError(f"token endpoint authentication {method!r} is not supported for this flow")
    return {**fields, "client_id": registration.client_id}, None


def request_token(
    metadata: ServerMetadata,
    fields: Mapping[str, str],
    *,
    basic_auth: tuple[str, str] | None,
    timeout: float,
    clock: Callable[[], float],
    scopes: tuple[str, ...] | None,
    resource: str | None,
    previous: TokenSet | None = None,
) -> TokenSet:
    """POST `fields` to the token endpoint and read the answer as a `TokenSet`.

    Raises:
        TokenError: refused, unreachable, or an answer without a usable access token.
    """
    grant = fields.get("grant_type", "?")
    try:
        body = post_form(metadata.token_endpoint, fields, timeout=timeout, basic_auth=basic_auth).body
    except FetchError as exc:
        raise TokenError(f"the token request ({grant}) to {safe_url(metadata.token_endpoint)} failed: {exc}", exc.oauth_error) from None
    return parse_token_answer(body, metadata.issuer, clock=clock, scopes=scopes, resource=resource, previous=previous, where=metadata.token_endpoint)


def parse_token_answer(body: Any, issuer: str | None, *, clock: Callable[[], float], scopes: tuple[str, ...] | None,
                       resource: str | None, previous: TokenSet | None = None, where: str = "") -> TokenSet:
    """A token endpoint's JSON answer as a `TokenSet` (RFC 6749 section 5.1).

    Raises:
        TokenError: no access token, not a Bearer one, an access token that is not an RFC 6750
            b64token (it could not be sent in an `Authorization` header, or would smuggle another
            header into it), a refresh token with a control or non-ASCII character (RFC 6749's
            VSCHARs only), or an `expires_in` that is no lifetime.
    """
    if not isinstance(body, dict) or not isinstance(body.get("access_token"), str) or not body["access_token"]:
        raise TokenError(f"the token endpoint {safe_url(where)} answered no access_token")
    if not is_b64token(body["access_token"]):  # never quoted: it is a secret
        raise TokenError(f"the token endpoint {safe_url(where)} answered an unusable access_token: not an RFC 6750 b64token "
                         "(a Bearer token must be letters, digits and -._~+/ with = at the end)")
    refresh = body.get("refresh_token")
    if isinstance(refresh, str) and refresh and _VSCHARS.fullmatch(refresh) is None:
        raise TokenError(f"the token endpoint {safe_url(where)} answered an unusable refresh_token: "
                         "not visible ASCII (RFC 6749 appendix A.17)")
    token_type = body.get("token_type")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise TokenError(f"the token endpoint {safe_url(where)} issued a token of type {str(token_type)[:20]!r}, not Bearer")
    try:
        lifetime = parse_seconds(body.get("expires_in"), "expires_in")
    except ValueError as exc:
        raise TokenError(f"the token endpoint {safe_url(where)} answered an unusable token: {exc}") from None
    expires_at = clock() + lifetime if lifetime else None
    refresh_token = body.get("refresh_token") if isinstance(body.get("refresh_token"), str) and body.get("refresh_token") else None
    granted = tuple(body["scope"].split()) if isinstance(body.get("scope"), str) else None
    if refresh_token is None and previous is not None:
        refresh_token = previous.refresh_token
    return TokenSet(body["access_token"], "Bearer", expires_at, refresh_token, scopes, granted, issuer, resource)


def exchange_code(
    metadata: ServerMetadata,
    registration: Registration,
    *,
    code: str,
    verifier: str,
    redirect_uri: str,
    resource: str,
    scopes: tuple[str, ...] | None,
    timeout: float,
    clock: Callable[[], float],
) -> TokenSet:
    """Trade an authorization code (with its PKCE verifier) for tokens.

    Raises:
        TokenError: as `request_token`.
    """
    fields = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri, "code_verifier": verifier, "resource": resource}
    fields, basic = client_fields(registration, metadata, fields)
    return request_token(metadata, fields, basic_auth=basic, timeout=timeout, clock=clock, scopes=scopes, resource=resource)


def refresh(metadata: ServerMetadata, registration: Registration, tokens: TokenSet, *, resource: str, timeout: float,
            clock: Callable[[], float]) -> TokenSet:
    """A new access token for `tokens.refresh_token` (the same grant, the same resource).

    The request names no `scope`: RFC 6749 section 6 reads an omitted scope as the one the grant
    has, and a refresh may ask for no more. The scopes the login asked for are not that: a server
    may grant fewer (oidc-provider drops `offline_access` without `prompt=consent`), and asking for
    them again is refused `invalid_scope`, which would end the login at the first expiry.

    Raises:
        TokenError: as `request_token` (`invalid_grant`: the refresh token is no longer good).
        ValueError: `tokens` has no refresh token.
    """
    if tokens.refresh_token is None:
        raise ValueError("no refresh token")
    fields = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token, "resource": resource}
    fields, basic = client_fields(registration, metadata, fields)
    fresh = request_token(metadata, fields, basic_auth=basic, timeout=timeout, clock=clock, scopes=tokens.scopes,
                          resource=resource, previous=tokens)
    granted = fresh.granted if fresh.granted is not None else tokens.granted  # no `scope` answered: the grant's (RFC 6749 5.1)
    return replace(fresh, issuer=tokens.issuer or metadata.issuer, granted=granted)
