"""Machine-to-machine: `ClientCredentials`, the OAuth client credentials grant as `HttpCredentials`.

Strategy: no user and no browser. On a 401 the same discovery as `OAuth` runs (the challenge's
protected resource metadata, else the well-known URLs; the authorization server's metadata with
its issuer checked), then one token request: `grant_type=client_credentials` with `resource`
(RFC 8707) and the scopes (the application's, else the challenge's, else the resource's
`scopes_supported`). The client authenticates with

- `client_secret_basic` when given a secret (HTTP Basic, RFC 6749 section 2.3.1), or
- `private_key_jwt` when given a PEM private key (RFC 7523 section 2.2): a short-lived JWT signed
  with it, `iss` = `sub` = the client ID, `aud` = the authorization server's issuer, a random
  `jti`, sent as `client_assertion`. PyJWT (the `mcpsync[auth]` extra) is imported only then.

A 403 `insufficient_scope` asks once more with the union of scopes (the spec's MAY for clients
acting on their own behalf), then the refusal stands. The token is kept in the `TokenStore`
(default in memory: it is cheap to get again). Nothing logs or raises the secret, the key or a token.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ..fetch import safe_url
from .discovery import Challenge, Discovered, OAuthError, bearer_challenge, discover
from .store import MemoryTokenStore, TokenStore
from .tokens import TokenSet, request_token

log = logging.getLogger("mcpsync")

__all__ = ["ASSERTION_TYPE", "ClientCredentials"]

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ASSERTION_LIFETIME = 300
"""Seconds a `private_key_jwt` assertion is valid."""


class ClientCredentials:
    """The client credentials grant: a script's own identity, no user.

    Args:
        client_id: the client registered with the authorization server.
        client_secret: its secret (`client_secret_basic`).
        private_key: a PEM private key instead (`private_key_jwt`, RFC 7523; needs PyJWT).
        signing_algorithm: the assertion's JWS algorithm ("ES256", "RS256", ...).
        scopes: the scopes to ask for; None: the challenge's, else the resource's `scopes_supported`.
        token_store: where the token is kept (default: in memory).
        timeout: each HTTP request's limit.
        clock: seconds since the epoch; injectable for tests.
    """

    def __init__(
        self,
        client_id: str,
        *,
        client_secret: str | None = None,
        private_key: str | None = None,
        signing_algorithm: str = "ES256",
        scopes: Iterable[str] | None = None,
        token_store: TokenStore | None = None,
        timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not client_id:
            raise ValueError("client_id is required")
        if (client_secret is None) == (private_key is None):
            raise ValueError("give exactly one of client_secret (client_secret_basic) and private_key (private_key_jwt)")
        self._client_id = client_id
        self._secret = client_secret
        self._key = private_key
        self._algorithm = signing_algorithm
        self._scopes = tuple(scopes) if scopes is not None else None
        self._store: TokenStore = token_store if token_store is not None else MemoryTokenStore()
        self._timeout = float(timeout)
        self._clock = clock
        self._lock = threading.Lock()
        self._flows: dict[str, threading.Lock] = {}
        self._headers: dict[str, str | None] = {}
        self._tokens: dict[str, TokenSet] = {}
        self._step_ups: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"ClientCredentials({self._client_id!r}, {'private_key_jwt' if self._key else 'client_secret_basic'})"

    def authorization(self, resource: str) -> str | None:
        if resource not in self._headers:
            self._load(resource)
        tokens = self._tokens.get(resource)
        if tokens is not None and tokens.expired(self._clock(), 10.0):
            return None  # expired: the refusal will fetch a new one
        return self._headers.get(resource)

    def refused(self, resource: str, status: int, www_authenticate: str | None, sent: str | None) -> bool:
        """Get a (new) token on a 401, or once with more scopes on a 403 `insufficient_scope`.

        Raises:
            OAuthError: discovery or the token endpoint failed.
        """
        if status not in (401, 403):
            return False
        with self._lock:
            flow = self._flows.setdefault(resource, threading.Lock())
        if not flow.acquire(timeout=8 * self._timeout):
            return False
        try:
            current = self._headers.get(resource)
            if current is not None and current != sent:
                return True
            challenge = bearer_challenge(www_authenticate) or Challenge("bearer")
            previous = self._tokens.get(resource)
            if status == 403:
                if challenge.params.get("error") != "insufficient_scope" or self._step_ups.get(resource, 0) >= 1:
                    return False
                self._step_ups[resource] = self._step_ups.get(resource, 0) + 1
            found = discover(resource, challenge.params.get("resource_metadata"), timeout=self._timeout)
            scopes = self._scopes_for(found, challenge, previous.scopes if previous is not None and status == 403 else None)
            tokens = self._request(found, scopes)
            self._tokens[resource] = tokens
            self._headers[resource] = tokens.header()
            try:
                self._store.save(resource, {"version": 1, "tokens": tokens.to_dict()})
            except OSError as exc:
                log.warning("ClientCredentials: the token store failed (%s)", type(exc).__name__)
            return True
        finally:
            flow.release()

    def _load(self, resource: str) -> None:
        try:
            stored = self._store.load(resource)
        except OSError:
            stored = None
        tokens = TokenSet.from_dict(stored["tokens"]) if stored and isinstance(stored.get("tokens"), dict) else None
        if tokens is not None:
            self._tokens[resource] = tokens
        self._headers.setdefault(resource, tokens.header() if tokens is not None else None)

    def _scopes_for(self, found: Discovered, challenge: Challenge, previous: tuple[str, ...] | None) -> tuple[str, ...] | None:
        seen: dict[str, None] = dict.fromkeys(previous or ())
        seen.update(dict.fromkeys(self._scopes or ()))
        seen.update(dict.fromkeys(challenge.scopes or ()))
        if not seen and found.resource_metadata is not None:
            seen.update(dict.fromkeys(found.resource_metadata.scopes_supported or ()))
        return tuple(seen) or None

    def _request(self, found: Discovered, scopes: tuple[str, ...] | None) -> TokenSet:
        server = found.server
        fields: dict[str, str] = {"grant_type": "client_credentials", "resource": found.resource}
        if scopes:
            fields["scope"] = " ".join(scopes)
        basic: tuple[str, str] | None = None
        if self._secret is not None:
            basic = (self._client_id, self._secret)
        else:
            fields["client_id"] = self._client_id
            fields["client_assertion_type"] = ASSERTION_TYPE
            fields["client_assertion"] = self._assertion(server.issuer)
        log.info("ClientCredentials: requesting a token for %s from %s", safe_url(found.resource), safe_url(server.issuer))
        return request_token(server, fields, basic_auth=basic, timeout=self._timeout, clock=self._clock, scopes=scopes,
                             resource=found.resource)

    def _assertion(self, audience: str) -> str:
        """An RFC 7523 client assertion signed with the private key."""
        try:
            import jwt
        except ImportError:
            raise OAuthError("private_key_jwt needs PyJWT: pip install 'mcpsync[auth]'") from None
        key = self._key
        if key is None:
            raise OAuthError("no private key for private_key_jwt")
        now = int(self._clock())
        claims: dict[str, Any] = {"iss": self._client_id, "sub": self._client_id, "aud": audience, "iat": now,
                                  "exp": now + ASSERTION_LIFETIME, "jti": secrets.token_urlsafe(16)}
        try:
            return str(jwt.encode(claims, key, algorithm=self._algorithm))
        except (ValueError, TypeError, jwt.PyJWTError) as exc:
            raise OAuthError(f"cannot sign the client assertion with {self._algorithm} ({type(exc).__name__})") from None
