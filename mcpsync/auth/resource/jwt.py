"""JWT access tokens (RFC 9068) checked against the authorization server's published keys (JWKS).

Strategy: a token is checked once, then remembered. The first time a token is seen, its header
names the algorithm and the key (`kid`); the signature is checked with that key from the JWKS,
then the claims (`iss`, `aud`, `exp`, `nbf`, `iat`) against the verifier's own clock, which is
injected so tests move time instead of waiting. PyJWT does the JOSE work (parsing, signature);
the claims are checked here, because PyJWT reads the system clock. The resulting `Principal` is
kept in a `TokenCache` by the token's digest until the token expires (plus leeway) or `cache_ttl`
passes, whichever is first: an RS256 check costs about as much as serving a small request, a
lookup almost nothing. `cache_ttl` also bounds how long a token signed by a key the authority has
since withdrawn keeps working.

Only asymmetric algorithms are allowed, and "none" and HS* are refused at construction: with a
public key set, a symmetric algorithm would let anyone who can read the JWKS sign tokens
(algorithm confusion, RFC 8725 section 2.1). The algorithm the token names must be in the allowed
list and, when the JWK says `alg`, be that one; a JWK without `alg` serves the allowed algorithms
of its key type.

The key set (`_KeySet`) is fetched on first use, not at construction, so a server starts while its
authorization server is down. It is refreshed when older than `jwks_max_age` (or the answer's
`Cache-Control: max-age` when shorter, but never more often than `min_refresh_interval`). A `kid`
the set does not have triggers one refetch (the authority may have rotated its keys), at most once
per `min_refresh_interval`: random `kid`s from an attacker cost a dict lookup, not a fetch each.
One thread fetches at a time, the thread of the request that needed it; the lock guards only the
bookkeeping, never the network. The others that need keys meanwhile wait for that fetch, but no
longer than until its own `timeout` runs out, and then use what it got or the keys already held:
an endpoint that stalls holds its one fetcher (as long as `get_json` lets it), never everyone; and
while a fetch is in flight, however late, no second one starts beside it. A failed fetch keeps the
keys already held (with one warning per failure streak), and with no keys at all the verifier
raises `VerifierUnavailable` (503, not 401: the token may be fine). Failed attempts are rate-limited the same way, so an authority that is down is not hammered
once per request.

PyJWT is an optional dependency (`mcpsync[auth]`): it is imported by `JwtVerifier()` itself, so
`import mcpsync.auth` works without it. Tokens and key material never reach a log or an error.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..fetch import FetchError, check_url, get_json, safe_url
from ._cache import TokenCache
from ._claims import check_claims
from .principal import InvalidToken, Principal, VerifierUnavailable, principal_from_claims

if TYPE_CHECKING:
    from jwt import PyJWK, PyJWS

__all__ = ["DEFAULT_ALGORITHMS", "JwtVerifier"]

log = logging.getLogger(__name__)

DEFAULT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")

MAX_TOKEN_LENGTH = 16 * 1024
"""A longer token is refused unread: access tokens are a few hundred bytes, rarely a few KiB."""

_COMPACT_JWS = re.compile(r"[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]*")
_TOKEN_TYPES = frozenset({"jwt", "at+jwt", "application/jwt", "application/at+jwt"})
_EC_CURVES = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512", "secp256k1": "ES256K"}


class JwtVerifier:
    """Verifies JWT access tokens signed by one issuer's keys, published at `jwks_url`.

    Args:
        jwks_url: the authorization server's JWKS (its metadata's `jwks_uri`).
        issuer: the exact `iss` its tokens carry.
        audience: this resource's identifier(s) (RFC 8707: the endpoint URL); a token's `aud`
            must contain one of them.
        algorithms: the signature algorithms accepted; asymmetric only.
        leeway: seconds of clock difference tolerated on `exp`, `nbf` and `iat`.
        timeout: seconds a JWKS fetch may take, and the longest a request waits for a fetch
            that another request started.
        jwks_max_age: seconds the key set is used before it is fetched again.
        min_refresh_interval: the least time between two fetches (after an unknown `kid` or a failure).
        cache_size, cache_ttl: how many verified tokens are remembered, and for how long at most.
        clock: seconds since the epoch; injected by tests.

    Raises:
        ImportError: PyJWT (with cryptography) is not installed.
        ValueError: a setting is unusable (a symmetric algorithm, a non-http URL, no audience).
    """

    def __init__(self, *, jwks_url: str, issuer: str, audience: str | Iterable[str], algorithms: Iterable[str] = DEFAULT_ALGORITHMS,
                 leeway: float = 30.0, timeout: float = 5.0, jwks_max_age: float = 3600.0, min_refresh_interval: float = 10.0,
                 cache_size: int = 10_000, cache_ttl: float = 300.0, clock: Callable[[], float] = time.time) -> None:
        try:
            import jwt
            from jwt.algorithms import get_default_algorithms, has_crypto
        except ImportError as exc:
            raise ImportError("JwtVerifier needs PyJWT: pip install 'mcpsync[auth]'") from exc
        if not has_crypto:
            raise ImportError("JwtVerifier needs PyJWT with cryptography: pip install 'mcpsync[auth]'")
        if not isinstance(issuer, str) or not issuer:
            raise ValueError("JwtVerifier needs the issuer (the exact 'iss' of its tokens)")
        self._issuer = issuer
        self._audiences = (audience,) if isinstance(audience, str) else tuple(audience)
        if not self._audiences or not all(isinstance(item, str) and item for item in self._audiences):
            raise ValueError("JwtVerifier needs at least one audience (this resource's URL)")
        self._algorithms = _checked_algorithms(algorithms, set(get_default_algorithms()))
        for name, value in (("leeway", leeway), ("cache_ttl", cache_ttl)):
            if value < 0:
                raise ValueError(f"{name} must not be negative")
        for name, value in (("timeout", timeout), ("min_refresh_interval", min_refresh_interval), ("jwks_max_age", jwks_max_age)):
            if value <= 0:
                raise ValueError(f"{name} must be positive")
        self._leeway = float(leeway)
        self._cache_ttl = float(cache_ttl)
        self._clock = clock
        self._jws: PyJWS = jwt.PyJWS(algorithms=sorted(self._algorithms))
        self._errors = _Errors(base=jwt.PyJWTError, signature=jwt.InvalidSignatureError, algorithm=jwt.InvalidAlgorithmError)
        self._keys = _KeySet(check_url(jwks_url), make_key=jwt.PyJWK, algorithms=self._algorithms, timeout=timeout,
                             max_age=max(jwks_max_age, min_refresh_interval), min_interval=min_refresh_interval, clock=clock)
        self._cache: TokenCache[Principal] = TokenCache(size=cache_size if cache_ttl > 0 else 0, clock=clock)

    @property
    def issuer(self) -> str:
        """The issuer this verifier trusts."""
        return self._issuer

    @property
    def audiences(self) -> tuple[str, ...]:
        """The audiences a token must name one of."""
        return self._audiences

    def verify(self, token: str) -> Principal:
        """The `Principal` `token` stands for.

        Raises:
            InvalidToken: the token is refused; the message says why in a few fixed words.
            VerifierUnavailable: the signing keys cannot be fetched and none are held.
        """
        cached = self._cache.get(token)
        if cached is not None:
            return cached
        if len(token) > MAX_TOKEN_LENGTH or not _COMPACT_JWS.fullmatch(token):
            raise InvalidToken("malformed token")
        errors = self._errors
        try:
            header = self._jws.get_unverified_header(token)
        except errors.base:
            raise InvalidToken("malformed token") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self._algorithms:
            raise InvalidToken("unsupported algorithm")
        typ = header.get("typ")
        if typ is not None and (not isinstance(typ, str) or typ.lower() not in _TOKEN_TYPES):
            raise InvalidToken("not an access token")
        key = self._keys.key_for(header.get("kid"), alg)
        try:
            decoded = self._jws.decode_complete(token, key=key, algorithms=[alg])
        except errors.signature:
            raise InvalidToken("bad signature") from None
        except errors.algorithm:
            raise InvalidToken("unsupported algorithm") from None
        except errors.base:
            raise InvalidToken("malformed token") from None
        try:
            claims = json.loads(decoded["payload"])
        except (ValueError, RecursionError):
            raise InvalidToken("malformed token") from None
        if not isinstance(claims, dict):
            raise InvalidToken("malformed token")
        now = self._clock()
        expires = self._check_claims(claims, now)
        principal = principal_from_claims(claims)
        self._cache.put(token, principal, min(expires + self._leeway, now + self._cache_ttl))
        return principal

    def _check_claims(self, claims: Mapping[str, Any], now: float) -> float:
        """Raise InvalidToken unless the claims are this issuer's, for this audience, and current; the expiry."""
        expires = check_claims(
            claims, now, leeway=self._leeway, issuer=self._issuer, audiences=self._audiences, expiry_required=True, not_before=("nbf", "iat")
        )
        assert expires is not None, "required above"
        return expires


@dataclass(frozen=True, slots=True)
class _Errors:
    """PyJWT's exception classes, held by the verifier because PyJWT is imported in its constructor."""

    base: type[Exception]
    signature: type[Exception]
    algorithm: type[Exception]


def _checked_algorithms(algorithms: Iterable[str], known: set[str]) -> frozenset[str]:
    chosen = frozenset([algorithms] if isinstance(algorithms, str) else algorithms)
    if not chosen:
        raise ValueError("JwtVerifier needs at least one algorithm")
    for name in sorted(chosen):
        if name.lower() == "none" or name.upper().startswith("HS"):
            raise ValueError(f"JwtVerifier refuses {name!r}: only asymmetric algorithms can be checked with a public key set "
                             "(a symmetric one would let anyone who reads the JWKS sign tokens)")
        if name not in known:
            raise ValueError(f"unknown JWT algorithm {name!r}")
    return chosen


@dataclass(frozen=True, slots=True)
class _Key:
    """One usable JWK: its `kid` and a ready PyJWK for each algorithm it may verify."""

    kid: str | None
    by_alg: Mapping[str, PyJWK]


class _Keys:
    """One fetched key set and when it was fetched, immutable: replaced whole (one reference) by the next fetch."""

    __slots__ = ("keys", "fetched_at", "fresh_until")

    def __init__(self, keys: tuple[_Key, ...], fetched_at: float = 0.0, fresh_until: float = 0.0) -> None:
        self.keys = keys
        self.fetched_at = fetched_at
        self.fresh_until = fresh_until

    def fresh(self, now: float) -> bool:
        return self.fetched_at <= now < self.fresh_until

    def find(self, kid: str | None, alg: str) -> PyJWK | None:
        """The key for (`kid`, `alg`); None if the set has no such key. A token without `kid`
        gets the set's only key, if it has exactly one. InvalidToken if the key forbids `alg`."""
        only: tuple[_Key, ...] = self.keys if len(self.keys) == 1 else ()
        candidates = only if kid is None else tuple(key for key in self.keys if key.kid == kid)
        for key in candidates:
            found = key.by_alg.get(alg)
            if found is not None:
                return found
        if candidates:
            raise InvalidToken("unsupported algorithm")
        return None


class _Fetch:
    """One JWKS fetch in flight: when it must be over by (`time.monotonic()`), and what its waiters wait on."""

    __slots__ = ("deadline", "done", "error")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.done = threading.Event()
        self.error: FetchError | None = None


class _KeySet:
    """The issuer's JWKS: fetched on first use, refreshed with age, refetched (rate-limited) on an unknown kid."""

    def __init__(self, url: str, *, make_key: Callable[..., PyJWK], algorithms: frozenset[str], timeout: float, max_age: float,
                 min_interval: float, clock: Callable[[], float]) -> None:
        self._url = url
        self._make_key = make_key
        self._algorithms = algorithms
        self._timeout = timeout
        self._max_age = max_age
        self._min_interval = min_interval
        self._clock = clock
        self._lock = threading.Lock()  # guards the fields below; never held across a fetch
        self._fetching: _Fetch | None = None  # the fetch in flight, if any
        self._current: _Keys | None = None
        self._last_attempt: float | None = None
        self._attempts = 0  # fetch attempts so far: a thread that sees it move knows someone just tried
        self._failures = 0  # failed attempts in a row (written only by the one thread fetching)

    def key_for(self, kid: Any, alg: str) -> PyJWK:
        """The key to check a token naming `kid` and `alg` with.

        Raises:
            InvalidToken: no such key (after one refetch, if allowed now), or it forbids `alg`.
            VerifierUnavailable: no key set could be fetched.
        """
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("malformed token")
        attempts = self._attempts
        current = self._current
        now = self._clock()
        if current is None or not current.fresh(now):
            current = self._refresh(attempts)
            refreshed = True
        else:
            refreshed = False
        key = current.find(kid, alg)
        if key is None and not refreshed and self._may_fetch(self._clock()):
            key = self._refresh(attempts).find(kid, alg)
        if key is None:
            raise InvalidToken("unknown signing key")
        return key

    def _may_fetch(self, now: float) -> bool:
        last = self._last_attempt
        return last is None or not last <= now < last + self._min_interval

    def _refresh(self, attempts_seen: int) -> _Keys:
        """The key set after at most one fetch: this thread's, or the one in flight on another
        thread (waited for until its deadline at most), or none when one was just made."""
        with self._lock:
            other = self._fetching
            if other is None:
                now = self._clock()
                if self._attempts != attempts_seen or not self._may_fetch(now):
                    return self._held("the last JWKS fetch failed")
                self._last_attempt = now
                self._attempts += 1
                self._fetching = mine = _Fetch(time.monotonic() + self._timeout)
        if other is not None:
            if not other.done.wait(max(0.0, other.deadline - time.monotonic())):
                return self._held("another thread's JWKS fetch did not finish in time")
            return self._held("the last JWKS fetch failed", cause=other.error)
        try:
            return self._fetch(now, mine)
        finally:
            with self._lock:
                self._fetching = None
            mine.done.set()

    def _fetch(self, now: float, fetch: _Fetch) -> _Keys:
        """Fetch the key set now (this thread is the one fetching): the new keys, else those held."""
        try:
            reply = get_json(self._url, timeout=self._timeout)
            keys = self._parse(reply.body)
        except FetchError as exc:
            fetch.error = exc
            self._failures += 1
            if self._failures == 1:
                log.warning("cannot fetch the JWKS: %s; %s", exc, "keeping the keys held" if self._current is not None else "tokens cannot be checked")
            return self._held(str(exc), cause=exc)
        if self._failures:
            log.info("fetched the JWKS from %s again after %d failed attempts", safe_url(self._url), self._failures)
        self._failures = 0
        max_age = self._max_age if reply.max_age is None else max(self._min_interval, min(self._max_age, reply.max_age))
        self._current = keys = _Keys(keys.keys, now, now + max_age)
        return keys

    def _held(self, why: str, cause: BaseException | None = None) -> _Keys:
        """The keys already held, else VerifierUnavailable."""
        if self._current is not None:
            return self._current
        raise VerifierUnavailable("the signing keys are unavailable") from (cause or FetchError(why))

    def _parse(self, body: Any) -> _Keys:
        """The usable signing keys of a JWKS document; FetchError when it has none."""
        where = safe_url(self._url)
        if not isinstance(body, dict) or not isinstance(body.get("keys"), list):
            raise FetchError(f"{where}: not a JWK set")
        keys = []
        for jwk in body["keys"]:
            if isinstance(jwk, dict) and jwk.get("use", "sig") == "sig":
                key = self._usable(jwk)
                if key is not None:
                    keys.append(key)
        if not keys:
            raise FetchError(f"{where}: the JWK set has no usable signing key")
        return _Keys(tuple(keys))

    def _usable(self, jwk: dict[str, Any]) -> _Key | None:
        """A JWK as a `_Key` for the allowed algorithms it may serve; None if it serves none."""
        kid = jwk.get("kid")
        if kid is not None and not isinstance(kid, str):
            return None
        declared = jwk.get("alg")
        if declared is not None:
            names = [declared] if declared in self._algorithms else []
        else:
            names = sorted(alg for alg in self._algorithms if alg in _algorithms_for(jwk))
        by_alg: dict[str, PyJWK] = {}
        for alg in names:
            try:
                by_alg[alg] = self._make_key(jwk, algorithm=alg)
            except Exception:  # any PyJWT or cryptography complaint: a key this verifier cannot use
                log.debug("skipping an unusable %s key (kid %r) in the JWKS", jwk.get("kty"), kid)
        return _Key(kid, by_alg) if by_alg else None


def _algorithms_for(jwk: Mapping[str, Any]) -> frozenset[str]:
    """The algorithms a JWK without `alg` can serve, by its key type and curve."""
    kty = jwk.get("kty")
    if kty == "RSA":
        return frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
    if kty == "EC":
        alg = _EC_CURVES.get(jwk.get("crv", ""))
        return frozenset({alg}) if alg else frozenset()
    if kty == "OKP" and jwk.get("crv") in ("Ed25519", "Ed448"):
        return frozenset({"EdDSA"})
    return frozenset()
