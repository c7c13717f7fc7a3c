"""Tokens made by an attacker, or by an authorization server that signs what it is told, against a
protected mcpsync endpoint on a real loopback socket.

Every token here is really signed (the `Authority` of authority.py, with its JWKS over HTTP) or
really introspected, and every answer is what a client on the wire gets: a validly signed token is
still hostile input. What must hold:

- Identities never collide: the parts of `Principal.key` cannot be rearranged by a claim that holds
  a separator, and a token that names no one (no subject, no client) is refused by every verifier,
  since all such tokens would otherwise share one identity and each other's sessions.
- Whatever a registered claim holds, the answer is 401 `invalid_token` or a harmless 200, never a
  500.
- A JOSE header that marks an extension critical (RFC 7515 section 4.1.11) is refused: mcpsync
  understands none.
- A JWKS endpoint that stalls holds no request longer than the fetch's own timeout.
"""

from __future__ import annotations

import base64
import http.client
import json
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from jwt.algorithms import RSAAlgorithm

from mcpsync import Context, Server, Service
from mcpsync.auth import Auth, Principal
from mcpsync.auth.resource import jwt as jwt_module
from mcpsync.auth.resource.introspection import IntrospectionVerifier
from mcpsync.auth.resource.jwt import JwtVerifier
from mcpsync.auth.resource.static import StaticTokens
from mcpsync.protocol.versions import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION

from .._timeouts import LONG
from .authority import OMIT, Authority

RESOURCE = "https://mcp.example.test/mcp"
HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"

service = Service("attacked")


@service.tool
def whoami(ctx: Context) -> dict[str, Any]:
    """The caller as the code sees it: what a hostile claim could reach."""
    principal = ctx.principal
    assert principal is not None
    return {"subject": principal.subject, "client": principal.client_id, "scopes": sorted(principal.scopes), "expires": principal.expires_at}


@service.tool(scopes=["admin"])
def reset() -> str:
    """Something only a token with the `admin` scope may do."""
    return "reset done"


# -- the wire ------------------------------------------------------------------------------------

@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: Any

    @property
    def error(self) -> str | None:
        """The `error` of the `WWW-Authenticate: Bearer` challenge, if any."""
        challenge = self.headers.get("WWW-Authenticate") or ""
        for part in challenge.split(", "):
            name, _, value = part.partition("=")
            if name.strip() in ("error", "Bearer error"):
                return value.strip('"')
        return None


def send(url: str, body: Any, token: str | None, headers: dict[str, str] | None = None, method: str = "POST") -> Answer:
    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=LONG)
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    try:
        connection.request(method, "/mcp", json.dumps(body).encode() if body is not None else None, sent)
        response = connection.getresponse()
        raw = response.read()
        return Answer(response.status, response.headers, json.loads(raw) if raw.strip() else None)
    finally:
        connection.close()


def call_whoami(url: str, token: str) -> Answer:
    """One 2026-07-28 `tools/call whoami`: the principal reaches the code and comes back in the answer."""
    params = {"name": "whoami", "arguments": {}, "_meta": {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}}}
    return send(url, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, token,
                {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "whoami"})


def initialize(url: str, token: str) -> Answer:
    params = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    return send(url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}, token, {"MCP-Protocol-Version": HANDSHAKE})


def open_session(url: str, token: str) -> str:
    answer = initialize(url, token)
    assert answer.status == 200, answer.body
    session_id = answer.headers["Mcp-Session-Id"]
    note = send(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, token,
                {"MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session_id})
    assert note.status == 202, note.body
    return session_id


def in_session(url: str, token: str, session_id: str, method: str = "POST") -> Answer:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}} if method == "POST" else None
    return send(url, body, token, {"MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session_id}, method)


def assert_invalid_token(answer: Answer) -> None:
    assert answer.status == 401, (answer.status, answer.body)
    assert answer.error == "invalid_token", answer.headers.get("WWW-Authenticate")


# -- fixtures ------------------------------------------------------------------------------------

@pytest.fixture
def authority() -> Iterator[Authority]:
    with Authority(audience=RESOURCE) as running:
        yield running


class Endpoint:
    """mcpsync's HTTP server on a free loopback port, serving `service` behind `Auth(verifier)`."""

    def __init__(self, verifier: Any) -> None:
        self.server = Server("attacked", services=[service], auth=Auth(verifier, resource=RESOURCE), shutdown_timeout=LONG)
        self.url = self.server.start_http("127.0.0.1", 0, threads=8).url

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.server.close(LONG)


def jwt_verifier(authority: Authority, **options: Any) -> JwtVerifier:
    return JwtVerifier(jwks_url=authority.jwks_url, issuer=authority.issuer, audience=RESOURCE, **options)


def introspection_verifier(authority: Authority) -> IntrospectionVerifier:
    return IntrospectionVerifier(authority.introspection_url, client_id=authority.client_id, client_secret=authority.client_secret, audience=RESOURCE)


class Table:
    """A verifier of the application's own: token -> the Principal it answers."""

    def __init__(self, principals: dict[str, Principal]) -> None:
        self.principals = principals

    def verify(self, token: str) -> Principal | None:
        return self.principals.get(token)


# -- 1. identities that collide ------------------------------------------------------------------

COLLIDING = [
    ((None, "carol\x00cli-z", "c"), (None, "carol", "cli-z\x00c")),
    (("https://as.example", "carol", None), ("https://as.example", "carol", "")),
    (("https://as.example\x00carol", None, "c"), ("https://as.example", "carol", "c")),
    ((None, "1:a", None), (None, "a", None)),
    ((None, "-", "x"), (None, None, "-x")),
]


@pytest.mark.parametrize(("one", "other"), COLLIDING)
def test_different_identities_never_share_a_key(one: tuple[str | None, ...], other: tuple[str | None, ...]) -> None:
    first, second = (Principal(subject=subject, client_id=client, issuer=issuer) for issuer, subject, client in (one, other))
    assert first.key != second.key
    issuer, subject, client = one
    assert Principal(subject=subject, client_id=client, issuer=issuer, scopes=frozenset({"new"})).key == first.key  # a refresh keeps it


def test_tokens_whose_parts_collide_cannot_use_each_others_session(authority: Authority) -> None:
    carol = authority.mint({"sub": "carol\x00cli-z", "client_id": "c"})
    mallory = authority.mint({"sub": "carol", "client_id": "cli-z\x00c"})
    with Endpoint(jwt_verifier(authority)) as endpoint:
        session_id = open_session(endpoint.url, carol)
        for method in ("POST", "GET", "DELETE"):
            stolen = in_session(endpoint.url, mallory, session_id, method)
            assert stolen.status == 404, (method, stolen.body)  # what an unknown session gets
        assert in_session(endpoint.url, carol, session_id).status == 200


def test_an_issuer_that_swallows_the_subject_cannot_use_the_session_either() -> None:
    """A verifier of the application's own that trusts several issuers: the issuer is part of the key too."""
    tokens = {
        "owner-token": Principal(subject="b\x00c", issuer="https://a.example"),
        "other-token": Principal(subject="c", issuer="https://a.example\x00b"),
    }
    with Endpoint(Table(tokens)) as endpoint:
        session_id = open_session(endpoint.url, "owner-token")
        assert in_session(endpoint.url, "other-token", session_id).status == 404
        assert in_session(endpoint.url, "owner-token", session_id).status == 200


NO_ONE = [
    pytest.param({"sub": OMIT, "client_id": OMIT}, id="absent"),
    pytest.param({"sub": "", "client_id": ""}, id="empty"),
    pytest.param({"sub": 42, "client_id": ["app"], "azp": {}, "username": None}, id="not-strings"),
]


@pytest.mark.parametrize("claims", NO_ONE)
@pytest.mark.parametrize("kind", ["jwt", "introspection"])
def test_a_token_naming_no_subject_and_no_client_is_refused(authority: Authority, kind: str, claims: dict[str, Any]) -> None:
    if kind == "jwt":
        verifier: Any = jwt_verifier(authority)
        tokens = [authority.mint(claims), authority.mint({**claims, "jti": "another"})]
    else:
        verifier = introspection_verifier(authority)
        tokens = [authority.register(answer={"active": True, **authority.claims(claims)}) for _ in range(2)]
    with Endpoint(verifier) as endpoint:
        for token in tokens:
            assert_invalid_token(initialize(endpoint.url, token))
            assert_invalid_token(call_whoami(endpoint.url, token))


def test_an_applications_verifier_answering_no_one_is_refused_too() -> None:
    with Endpoint(Table({"anyone-token": Principal(None, scopes=frozenset({"read"})), "client-token": Principal(None, client_id="app")})) as endpoint:
        answer = initialize(endpoint.url, "anyone-token")
        assert_invalid_token(answer)
        assert "names no subject and no client" in answer.headers["WWW-Authenticate"]
        assert call_whoami(endpoint.url, "client-token").status == 200  # a client alone names someone


def test_static_tokens_refuse_a_principal_naming_no_one_at_construction() -> None:
    with pytest.raises(ValueError, match="static token 2: its principal names no subject and no client"):
        StaticTokens({"first-token-0123456789": ["read"], "second-token-0123456789": Principal(None, scopes=frozenset({"read"}))})


# -- 2. claims that overflow, or are anything else --------------------------------------------------

HOSTILE: list[Any] = [
    10**400, -(10**400), 10**300, 2**63, 2**64 + 1, -1, 0, 1.5, 1e308, -1e308, float("inf"), float("-inf"), float("nan"),
    True, False, None, [], [1], ["a", None, 3], {}, {"a": {"b": [1, {"c": None}]}}, "", " ", "x" * 8000, "x" * 20000,
    "\u00fcn\u00efc\u00f8d\u00e9 \u2603 \U0001f600", "\x00", "a\x00b", "\ud800", "\r\nX-Injected: 1", "a b", "read\x00admin",
]

CLAIMS = ["exp", "nbf", "iat", "iss", "aud", "sub", "client_id", "azp", "cid", "scope", "scp", "username", "jti"]


def check_harmless(answer: Answer, what: str) -> None:
    """A refusal said properly (401 invalid_token), or an answer whose principal is plain data."""
    assert answer.status in (200, 401), (what, answer.status, answer.body)
    if answer.status == 401:
        assert answer.error == "invalid_token", (what, answer.headers.get("WWW-Authenticate"))
        return
    result = answer.body["result"]
    assert not result.get("isError"), (what, result)
    seen = result["structuredContent"]
    assert seen["subject"] is None or isinstance(seen["subject"], str), what
    assert seen["subject"] or seen["client"], what  # someone in particular
    assert all(isinstance(scope, str) for scope in seen["scopes"]), what
    assert seen["expires"] is None or isinstance(seen["expires"], float), what


@pytest.mark.parametrize("claim", CLAIMS)
def test_every_hostile_value_of_a_registered_claim_is_refused_or_harmless(authority: Authority, claim: str) -> None:
    with Endpoint(jwt_verifier(authority)) as endpoint:
        for value in HOSTILE:
            check_harmless(call_whoami(endpoint.url, sign(authority, {claim: value})), f"{claim}={value!r:.60}")


@pytest.mark.parametrize("claim", CLAIMS)
def test_every_hostile_value_in_an_introspection_answer_is_refused_or_harmless(authority: Authority, claim: str) -> None:
    with Endpoint(introspection_verifier(authority)) as endpoint:
        for value in HOSTILE:
            token = authority.register(answer={"active": True, **authority.claims({claim: value})})
            check_harmless(call_whoami(endpoint.url, token), f"{claim}={value!r:.60}")


@pytest.mark.parametrize("scope", ["read\u2003admin", "read\u00a0admin", "read\x0badmin", "read\x1fadmin", "read\x85admin", "read\tadmin", "read\nadmin"])
def test_a_scope_is_split_at_spaces_alone(authority: Authority, scope: str) -> None:
    """RFC 6749 section 3.3: scope tokens are separated by a space (%x20); other whitespace is
    part of a (malformed) scope, which grants nothing, not a separator that grants `admin`."""
    with Endpoint(jwt_verifier(authority)) as endpoint:
        for claims in ({"scope": scope}, {"scope": OMIT, "scp": scope}, {"scope": OMIT, "scp": [scope]}):
            token = sign(authority, claims)
            assert call_whoami(endpoint.url, token).body["result"]["structuredContent"]["scopes"] == [], claims
            params = {"name": "reset", "arguments": {}, "_meta": {META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: {}}}
            refused = send(endpoint.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, token,
                           {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "reset"})
            assert (refused.status, refused.error) == (403, "insufficient_scope"), (claims, refused.body)
        granted = call_whoami(endpoint.url, sign(authority, {"scope": "read admin"}))
        assert granted.body["result"]["structuredContent"]["scopes"] == ["admin", "read"]


def test_a_400_digit_expiry_is_a_401_not_a_500(authority: Authority) -> None:
    """The one that used to be a 500 (OverflowError converting it to a float), for the record."""
    with Endpoint(jwt_verifier(authority)) as endpoint:
        answer = call_whoami(endpoint.url, authority.mint({"exp": 10**400}))
        assert_invalid_token(answer)
        assert "malformed token" in answer.headers["WWW-Authenticate"]


def sign_raw(authority: Authority, payload: str, header: dict[str, Any] | None = None) -> str:
    """A JWT whose payload is exactly the text `payload` and whose header is the authority's plus
    `header`, signed by the authority's key: PyJWT's encoder refuses to write some of what a
    hostile (or careless) signer can, so this one writes it by hand."""
    key = authority.key
    fields = {"alg": key.alg, "typ": "at+jwt", "kid": key.kid, **(header or {})}
    signing_input = _b64(json.dumps(fields).encode()) + b"." + _b64(payload.encode("utf-8", "surrogatepass"))
    signature = RSAAlgorithm(RSAAlgorithm.SHA256).sign(signing_input, key.private_key)
    return (signing_input + b"." + _b64(signature)).decode("ascii")


def sign(authority: Authority, claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    """The authority's default claims with `claims` over them, signed whatever they hold."""
    return sign_raw(authority, json.dumps(authority.claims(claims)), header)


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


@pytest.mark.parametrize(
    "claim_text",
    [
        pytest.param('"exp": 1e400', id="exp-1e400"),  # Python's json reads this as inf
        pytest.param('"exp": -1e400', id="exp-minus-1e400"),
        pytest.param('"exp": NaN', id="exp-NaN"),
        pytest.param('"exp": Infinity', id="exp-Infinity"),
        pytest.param('"exp": ' + "9" * 5000, id="exp-5000-digits"),  # past Python's int-from-text digit limit: json refuses it
        pytest.param('"nbf": ' + "9" * 400, id="nbf-400-digits"),
        pytest.param('"iat": -' + "9" * 400, id="iat-minus-400-digits"),
        pytest.param('"aud": ' + "[" * 3000 + "]" * 3000, id="aud-nested-3000-deep"),  # deeper than the decoder recurses
        pytest.param('"sub": "\\ud800\\udfff\\u0000"', id="sub-escapes"),
        pytest.param('"exp": 1, "exp": ' + "1" * 400, id="exp-repeated"),  # a repeated name: the last one counts
    ],
)
def test_claims_json_dumps_would_never_write_are_refused_or_harmless(authority: Authority, claim_text: str) -> None:
    base = authority.claims({"exp": OMIT, "nbf": OMIT, "iat": OMIT, "sub": OMIT, "aud": OMIT})
    name = claim_text.split('"')[1]
    defaults = {"exp": int(authority.clock()) + 300, "aud": RESOURCE, "sub": "alice"}
    rest = {key: value for key, value in defaults.items() if key != name}
    payload = json.dumps({**base, **rest})[:-1] + ", " + claim_text + "}"
    with Endpoint(jwt_verifier(authority)) as endpoint:
        check_harmless(call_whoami(endpoint.url, sign_raw(authority, payload)), claim_text[:60])


@pytest.mark.parametrize(
    "header",
    [{"kid": 10**400}, {"kid": ["key-1"]}, {"kid": ""}, {"kid": "x" * 5000}, {"typ": 1}, {"typ": ["jwt"]}, {"typ": "JWT\x00"}, {"jku": "http://127.0.0.1:9/x"},
     {"x5u": "http://127.0.0.1:9/x"}, {"jwk": {"kty": "RSA", "n": "AQAB", "e": "AQAB"}}, {"b64": False}],
)
def test_hostile_header_parameters_are_refused_or_harmless(authority: Authority, header: dict[str, Any]) -> None:
    with Endpoint(jwt_verifier(authority)) as endpoint:
        check_harmless(call_whoami(endpoint.url, sign(authority, {}, header)), repr(header)[:60])


# -- 3. critical header extensions ----------------------------------------------------------------

@pytest.mark.parametrize(
    "header",
    [
        pytest.param({"crit": ["x-unknown"], "x-unknown": True}, id="unknown-extension"),
        pytest.param({"crit": ["x-unknown"]}, id="listed-but-absent"),
        pytest.param({"crit": ["exp"], "exp": 1}, id="a-registered-name"),
        pytest.param({"crit": []}, id="empty"),
        pytest.param({"crit": "x-unknown", "x-unknown": 1}, id="not-a-list"),
    ],
)
def test_a_critical_extension_mcpsync_does_not_understand_is_refused(authority: Authority, header: dict[str, Any]) -> None:
    """RFC 7515 section 4.1.11: a JWS naming in `crit` an extension the recipient does not
    understand is invalid. mcpsync understands none, so every such token is a 401."""
    with Endpoint(jwt_verifier(authority)) as endpoint:
        assert call_whoami(endpoint.url, authority.mint()).status == 200
        assert_invalid_token(call_whoami(endpoint.url, sign(authority, {}, header)))


# -- 4. a JWKS endpoint that stalls ---------------------------------------------------------------

class StalledJwks:
    """A JWKS endpoint that reads each request, starts an answer, then sends one more byte of a
    header every `pace` seconds until `stop` is set: under a per-read socket timeout, a fetch of
    it never ends by itself. Counts the connections it accepted."""

    def __init__(self, pace: float = 0.1) -> None:
        self.pace = pace
        self.requested = threading.Event()
        self.stop = threading.Event()
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._wake_r, self._wake_w = socket.socketpair()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name="stalled-jwks")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/jwks.json"

    def __enter__(self) -> StalledJwks:
        self._acceptor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._wake_w.send(b"x")
        self._acceptor.join(LONG)
        for thread in self._threads:
            thread.join(LONG)
        alive = [thread.name for thread in (self._acceptor, *self._threads) if thread.is_alive()]
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()
        assert not alive, alive

    def _accept(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ, "accept")
            selector.register(self._wake_r, selectors.EVENT_READ, "wake")
            while not self.stop.is_set():
                for key, _ in selector.select(timeout=LONG):
                    if key.data == "wake":
                        return
                    connection, _ = self._listener.accept()
                    self.connections += 1
                    thread = threading.Thread(target=self._drip, args=(connection,), name=f"stalled-jwks-{self.connections}")
                    self._threads.append(thread)
                    thread.start()

    def _drip(self, connection: socket.socket) -> None:
        with connection:
            connection.settimeout(LONG)
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = connection.recv(4096)
                if not chunk:
                    return
                received += chunk
            self.requested.set()
            try:
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Pad: ")
                while not self.stop.wait(self.pace):  # the pace of the drip, not a synchronisation
                    connection.sendall(b"a")
            except OSError:
                return  # the client gave up and closed


def timed(action: Callable[[], Answer]) -> tuple[int, float]:
    began = time.monotonic()
    status = action().status
    return status, time.monotonic() - began


@pytest.mark.parametrize("fetch", ["bounded", "overrunning"])
def test_a_stalled_jwks_fetch_holds_no_other_request_past_its_timeout(authority: Authority, monkeypatch: pytest.MonkeyPatch, fetch: str) -> None:
    """One request's JWKS fetch is stuck on an endpoint that drips its answer; the others that
    need the keys meanwhile wait for it at most until its own timeout, then get 503, and those
    that come after that are answered at once, without piling up fetches of their own.

    "bounded": the fetch as it is, cut off at its timeout. "overrunning": the same real fetch,
    but one that takes longer than its timeout, as one whose name lookup blocks (getaddrinfo
    cannot be interrupted) would: no other request may wait for it past the timeout all the same."""
    timeout = 2.5  # the waiters of the code before took 2 * timeout + 1; margins here are generous for a loaded machine
    token = authority.mint()
    if fetch == "overrunning":
        real_get_json = jwt_module.get_json
        monkeypatch.setattr(jwt_module, "get_json", lambda url, *, timeout: real_get_json(url, timeout=LONG))
    with StalledJwks() as jwks:
        verifier = JwtVerifier(jwks_url=jwks.url, issuer=authority.issuer, audience=RESOURCE, timeout=timeout, min_refresh_interval=60.0)
        fetcher_saw: list[BaseException] = []

        def fetch_first() -> None:
            try:
                verifier.verify(token)
            except Exception as exc:  # VerifierUnavailable, asserted below
                fetcher_saw.append(exc)

        fetcher = threading.Thread(target=fetch_first, name="first-fetcher")
        fetch_began = time.monotonic()
        fetcher.start()
        try:
            assert jwks.requested.wait(LONG), "the JWKS endpoint was never asked"
            with Endpoint(verifier) as endpoint:
                results: list[tuple[int, float]] = []
                lock = threading.Lock()

                def one() -> None:
                    status, _ = timed(lambda: call_whoami(endpoint.url, token))
                    with lock:
                        results.append((status, time.monotonic() - fetch_began))

                waiters = [threading.Thread(target=one, name=f"waiter-{n}") for n in range(6)]
                for waiter in waiters:
                    waiter.start()
                for waiter in waiters:
                    waiter.join(LONG)
                assert not any(waiter.is_alive() for waiter in waiters)
                assert [status for status, _ in results] == [503] * 6
                slowest = max(finished for _, finished in results)
                assert slowest < timeout + 2.0, f"a request waited {slowest:.2f}s on a fetch whose timeout is {timeout}s"
                for _ in range(3):  # past the fetch's deadline: nothing left to wait for
                    status, took = timed(lambda: call_whoami(endpoint.url, token))
                    assert (status, took < 2.0) == (503, True), took
                assert jwks.connections == 1  # one fetch at a time, even a stuck one
        finally:
            jwks.stop.set()
            fetcher.join(LONG)
        assert not fetcher.is_alive()
    assert [type(exc).__name__ for exc in fetcher_saw] == ["VerifierUnavailable"]
