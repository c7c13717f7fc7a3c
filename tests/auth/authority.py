"""A pretend OAuth authorization server on loopback, for the verifier tests and the integration tests.

`Authority` runs a real HTTP server (127.0.0.1, a free port, a thread of its own, one short-lived
thread per request) that serves

- `/jwks.json`: the public halves of its current `SigningKey`s. `add_key`, `remove_key` and
  `rotate` change them between requests; `jwks_fetches` counts the fetches; `jwks_failure` makes the
  endpoint answer that status (or `"drop"`: close the connection without an answer);
  `jwks_cache_control` adds a `Cache-Control` header.
- `/introspect`: RFC 7662, answering what `register(token, answer)` said for each token (or
  `{"active": false}`), after checking HTTP Basic client credentials when the authority has them;
  `introspections` counts calls, `introspection_requests` keeps each call's form fields,
  `introspection_failure` makes it answer a status instead.

`mint(...)` signs a JWT with one of its keys, with default claims (`iss` = its issuer, `aud` =
its audience, `sub`, `scope`, `iat` = now, `exp` = now + 300) that each call may override or,
with the value `OMIT`, leave out. Its clock is injectable and meant to be the verifier's.

    with Authority(audience="http://127.0.0.1:8000/mcp") as authority:
        verifier = JwtVerifier(jwks_url=authority.jwks_url, issuer=authority.issuer, audience=authority.audience)
        verifier.verify(authority.mint(claims={"scope": "read"}))

`FakeClock` is a clock for both that moves only when told. `unreachable_url()` gives a URL on
which nothing listens, `silent_url()` one that never answers, for the "authorization server is
down" tests.
Nothing here sleeps; stopping joins the server thread with a timeout and fails if it survives.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import secrets
import socket
import socketserver
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from .._timeouts import LONG
from .loopback import LoopbackServer

__all__ = ["OMIT", "Authority", "FakeClock", "SigningKey", "silent_url", "unreachable_url"]

OMIT: Any = object()
"""A claim (or header) value meaning "leave this one out" in `Authority.mint`."""

_DEFAULT: Any = object()


class FakeClock:
    """Seconds since the epoch that move only when told: give the same one to the verifier and the Authority."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


@dataclass(frozen=True)
class SigningKey:
    """An asymmetric key pair: the private half signs, the public half goes in the JWKS."""

    kid: str
    alg: str
    private_key: Any = field(repr=False)
    publish_alg: bool = True
    """Whether its JWK states `alg` (a JWK without it serves any algorithm of its key type)."""

    @classmethod
    def rsa(cls, kid: str | None = None, alg: str = "RS256", *, publish_alg: bool = True) -> SigningKey:
        return cls(kid or f"rsa-{secrets.token_hex(4)}", alg, rsa.generate_private_key(public_exponent=65537, key_size=2048), publish_alg)

    @classmethod
    def ec(cls, kid: str | None = None, alg: str = "ES256", *, publish_alg: bool = True) -> SigningKey:
        curve = {"ES256": ec.SECP256R1(), "ES384": ec.SECP384R1(), "ES512": ec.SECP521R1()}[alg]
        return cls(kid or f"ec-{secrets.token_hex(4)}", alg, ec.generate_private_key(curve), publish_alg)

    def with_kid(self, kid: str) -> SigningKey:
        """The same key pair under another kid."""
        return SigningKey(kid, self.alg, self.private_key, self.publish_alg)

    def public_jwk(self) -> dict[str, Any]:
        public = self.private_key.public_key()
        algorithm = RSAAlgorithm if isinstance(public, rsa.RSAPublicKey) else ECAlgorithm
        jwk: dict[str, Any] = dict(algorithm.to_jwk(public, as_dict=True))
        jwk.update(kid=self.kid, use="sig")
        if self.publish_alg:
            jwk["alg"] = self.alg
        return jwk

    def sign(self, claims: Mapping[str, Any], *, alg: str | None = None, headers: Mapping[str, Any] | None = None) -> str:
        return jwt.encode(dict(claims), self.private_key, algorithm=alg or self.alg, headers=dict(headers or {}))


def unreachable_url(path: str = "/jwks.json") -> str:
    """An http URL on 127.0.0.1 where nothing listens (a port just bound and released): connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


@contextlib.contextmanager
def silent_url(path: str = "/jwks.json") -> Iterator[str]:
    """An http URL on 127.0.0.1 that accepts connections (the kernel's backlog) but never answers:
    for timeouts. Closed on exit."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}{path}"


@functools.cache
def _default_rsa_key() -> Any:
    """The default Authority's RSA key, made once per test run: a 2048-bit key takes ~30 ms, and
    most tests need some key rather than a new one (`SigningKey.rsa()` always makes a new one)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class _Server(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = False
    block_on_close = True  # server_close() joins the request threads (each bounded by its socket timeout)
    authority: Authority


class Authority(LoopbackServer):
    """A loopback authorization server: JWKS, introspection and token minting (see the module docstring)."""

    def __init__(self, *, keys: Iterable[SigningKey] | None = None, audience: str = "https://mcp.example.test/mcp",
                 client_id: str | None = "mcpsync-resource", client_secret: str | None = "resource-secret-1234",
                 issuer: str | None = None, clock: Callable[[], float] = time.time) -> None:
        self.keys: list[SigningKey] = list(keys) if keys is not None else [SigningKey("key-1", "RS256", _default_rsa_key())]
        self.audience = audience
        self.client_id = client_id
        self.client_secret = client_secret
        self.clock = clock
        self._issuer = issuer
        self._lock = threading.Lock()
        self._answers: dict[str, dict[str, Any]] = {}
        self.jwks_fetches = 0
        self.jwks_failure: int | str | None = None
        self.jwks_cache_control: str | None = None
        self.introspections = 0
        self.introspection_requests: list[dict[str, str]] = []
        self.introspection_authorizations: list[str | None] = []
        """Each introspection call's Authorization header (None when it had none)."""
        self.introspection_failure: int | None = None
        self.introspection_body: bytes | None = None
        """When set, /introspect answers 200 with exactly these bytes (for malformed answers)."""
        self.user_agents: list[str] = []
        """The User-Agent of every request, in order."""

    # -- lifetime ------------------------------------------------------------------------------

    def start(self) -> Authority:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.authority = self
        self._run(server, "test-authority")
        return self

    # -- addresses -----------------------------------------------------------------------------

    @property
    def issuer(self) -> str:
        return self._issuer or self.base_url

    @property
    def jwks_url(self) -> str:
        return self.base_url + "/jwks.json"

    @property
    def introspection_url(self) -> str:
        return self.base_url + "/introspect"

    # -- keys ----------------------------------------------------------------------------------

    @property
    def key(self) -> SigningKey:
        """The key `mint` signs with by default: the newest one published."""
        return self.keys[-1]

    def add_key(self, key: SigningKey) -> SigningKey:
        with self._lock:
            self.keys.append(key)
        return key

    def remove_key(self, kid: str) -> None:
        with self._lock:
            self.keys = [key for key in self.keys if key.kid != kid]

    def rotate(self, new: SigningKey | None = None) -> SigningKey:
        """Publish `new` (default: a fresh key like the current one) and withdraw every other key."""
        new = new or (SigningKey.rsa() if self.key.alg.startswith(("RS", "PS")) else SigningKey.ec(alg=self.key.alg))
        with self._lock:
            self.keys = [new]
        return new

    def jwks(self) -> dict[str, Any]:
        with self._lock:
            return {"keys": [key.public_jwk() for key in self.keys]}

    # -- tokens --------------------------------------------------------------------------------

    def claims(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The default claims with `overrides` applied (a value of `OMIT` removes that claim)."""
        now = int(self.clock())
        claims: dict[str, Any] = {"iss": self.issuer, "aud": self.audience, "sub": "alice", "client_id": "test-client",
                                  "scope": "read write", "iat": now, "exp": now + 300}
        claims.update(overrides or {})
        return {name: value for name, value in claims.items() if value is not OMIT}

    def mint(self, claims: Mapping[str, Any] | None = None, *, key: SigningKey | None = None, kid: Any = _DEFAULT,
             alg: str | None = None, headers: Mapping[str, Any] | None = None) -> str:
        """A JWT signed by `key` (default: `self.key`), its header naming `kid` (default the key's;
        OMIT for none) and `alg` (default the key's), plus `headers`; claims as `claims()`."""
        key = key or self.key
        header: dict[str, Any] = {"typ": "at+jwt"}
        kid = key.kid if kid is _DEFAULT else kid
        if kid is not OMIT:
            header["kid"] = kid
        header.update(headers or {})
        header = {name: value for name, value in header.items() if value is not OMIT}
        return key.sign(self.claims(claims), alg=alg, headers=header)

    def register(self, token: str | None = None, answer: Mapping[str, Any] | None = None) -> str:
        """Make /introspect answer `answer` (default: active, with the default claims) for `token`
        (default: a fresh opaque token); returns the token."""
        token = token or secrets.token_urlsafe(24)
        if answer is None:
            answer = {"active": True, **self.claims()}
        with self._lock:
            self._answers[token] = dict(answer)
        return token

    def answer_for(self, token: str) -> dict[str, Any]:
        with self._lock:
            return dict(self._answers.get(token, {"active": False}))

    def count(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = LONG  # every read of a request thread is bounded, so server_close's join is too

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: pytest shows failures, not access logs

    def do_GET(self) -> None:
        authority = self.server.authority
        authority.user_agents.append(self.headers.get("User-Agent", ""))
        if self.path != "/jwks.json":
            return self._reply(404, {"error": "not_found"})
        authority.count("jwks_fetches")
        failure = authority.jwks_failure
        if failure == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if failure is not None:
            return self._reply(int(failure), {"error": "server_error"})
        extra = {"Cache-Control": authority.jwks_cache_control} if authority.jwks_cache_control else {}
        self._reply(200, authority.jwks(), extra)

    def do_POST(self) -> None:
        authority = self.server.authority
        authority.user_agents.append(self.headers.get("User-Agent", ""))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("ascii")
        if self.path != "/introspect":
            return self._reply(404, {"error": "not_found"})
        fields = dict(urllib.parse.parse_qsl(body))
        with authority._lock:
            authority.introspections += 1
            authority.introspection_requests.append(fields)
            authority.introspection_authorizations.append(self.headers.get("Authorization"))
        if authority.introspection_failure is not None:
            return self._reply(authority.introspection_failure, {"error": "server_error"})
        if authority.client_id is not None and self._basic() != (authority.client_id, authority.client_secret):
            return self._reply(401, {"error": "invalid_client"}, {"WWW-Authenticate": 'Basic realm="introspection"'})
        if authority.introspection_body is not None:
            return self._raw(200, authority.introspection_body)
        self._reply(200, authority.answer_for(fields.get("token", "")))

    def _basic(self) -> tuple[str, str] | None:
        value = self.headers.get("Authorization", "")
        scheme, _, encoded = value.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            user, _, password = base64.b64decode(encoded, validate=True).decode("utf-8").partition(":")
        except ValueError:
            return None
        return urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(password)

    def _reply(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        self._raw(status, json.dumps(body).encode(), headers)

    def _raw(self, status: int, data: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
