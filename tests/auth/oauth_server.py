"""A real OAuth 2.1 authorization server (and a protected resource's metadata) on loopback, for the client tests.

`OAuthServer` runs a stdlib HTTP server on 127.0.0.1 (a free port, a thread of its own, stopped
by a wake-up and joined with a timeout) that plays whichever role a test needs:

- metadata at RFC 8414 and/or OpenID Connect paths (`metadata_at`: "oauth", "openid-insert",
  "openid-append"), for an issuer with or without a path (`issuer_path`), with a wrong `issuer`
  when told (`metadata_issuer`), listing `scopes_supported`, `token_endpoint_auth_methods_supported`,
  `code_challenge_methods_supported`, `client_id_metadata_document_supported` (`cimd`) and
  `authorization_response_iss_parameter_supported` (`iss_supported`: True, False or None to omit);
- `/register` (RFC 7591; `registration=False`: none), recording each request body;
- `/authorize`: checks the client, its redirect URI and PKCE S256, auto-approves and redirects
  with `code` and `state`, and `iss` as told (`iss_mode`: "correct", "missing", "wrong", "normalized");
- `/token`: the authorization code grant (PKCE verified, single-use codes, redirect URI and
  resource checked), refresh tokens (rotated) and the client credentials grant, with client
  authentication `client_secret_basic`, `client_secret_post`, `none` or `private_key_jwt`
  (verified against the client's public key); access tokens are JWTs signed with a
  `tests.auth.authority.SigningKey` (`aud` = the `resource` asked for, `scope`, `exp` from the
  injectable clock + `expires_in`), so mcpsync's own `JwtVerifier` accepts them; `/jwks.json`.

Every request is recorded (`requests`; `authorization_requests()`, `token_requests()`).
`ResourceMetadataServer` serves a protected resource metadata document at chosen paths.
Nothing here sleeps.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import jwt

from .._timeouts import LONG
from .authority import SigningKey, _default_rsa_key
from .loopback import LoopbackServer

__all__ = ["Client", "OAuthServer", "Recorded", "ResourceMetadataServer"]


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    form: dict[str, str]
    body: Any
    headers: dict[str, str]


@dataclass
class Client:
    client_id: str
    secret: str | None = None
    method: str = "none"
    redirect_uris: list[str] = field(default_factory=list)
    public_key: Any = None
    """For private_key_jwt: the key that verifies its assertions."""


@dataclass
class _Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


class _Loopback(LoopbackServer):
    """A loopback HTTP server on its own thread; subclasses answer `handle(Recorded)`."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()

    def start(self) -> Any:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            timeout = LONG

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._do("GET")

            def do_POST(self) -> None:
                self._do("POST")

            def _do(self, method: str) -> None:
                parts = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                form: dict[str, str] = {}
                body: Any = None
                kind = self.headers.get("Content-Type", "")
                if kind.startswith("application/x-www-form-urlencoded"):
                    form = dict(urllib.parse.parse_qsl(raw.decode("ascii")))
                elif kind.startswith("application/json") and raw:
                    body = json.loads(raw)
                recorded = Recorded(method, parts.path, dict(urllib.parse.parse_qsl(parts.query)), form, body,
                                    {k.lower(): v for k, v in self.headers.items()})
                with owner._lock:
                    owner.requests.append(recorded)
                reply = owner.handle(recorded)
                data = b"" if reply.body is None else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self._run(HTTPServer(("127.0.0.1", 0), Handler), f"test-{type(self).__name__}")
        return self

    def handle(self, request: Recorded) -> _Reply:
        raise NotImplementedError

    def paths(self, method: str | None = None) -> list[str]:
        with self._lock:
            return [r.path for r in self.requests if method is None or r.method == method]


class ResourceMetadataServer(_Loopback):
    """Serves `document()` (RFC 9728) at each of `paths`; 404 elsewhere."""

    def __init__(self, *, paths: Iterable[str] = ("/.well-known/oauth-protected-resource/mcp",),
                 authorization_servers: Iterable[str] = (), scopes_supported: Iterable[str] | None = None,
                 resource: str | None = None) -> None:
        super().__init__()
        self.metadata_paths = list(paths)
        self.authorization_servers = list(authorization_servers)
        self.scopes_supported = list(scopes_supported) if scopes_supported is not None else None
        self._resource = resource
        self.challenge_scope: str | None = None

    @property
    def endpoint(self) -> str:
        return self.base_url + "/mcp"

    @property
    def resource(self) -> str:
        return self._resource or self.endpoint

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"resource": self.resource, "authorization_servers": list(self.authorization_servers)}
        if self.scopes_supported is not None:
            doc["scopes_supported"] = self.scopes_supported
        return doc

    def challenge(self) -> str:
        """The 401's `WWW-Authenticate` for /mcp: the first metadata path as `resource_metadata`."""
        value = f'Bearer resource_metadata="{self.base_url}{self.metadata_paths[0]}"' if self.metadata_paths else "Bearer"
        if self.challenge_scope:
            value += f', scope="{self.challenge_scope}"'
        return value

    def handle(self, request: Recorded) -> _Reply:
        if request.method == "GET" and request.path in self.metadata_paths:
            return _Reply(200, self.document())
        if request.method == "POST" and request.path == "/mcp":  # any POST without a good token: a challenge
            return _Reply(401, {"error": "invalid_token"}, {"WWW-Authenticate": self.challenge()})
        return _Reply(404, {"error": "not_found"})


class OAuthServer(_Loopback):
    """A configurable loopback authorization server (see the module docstring)."""

    def __init__(
        self,
        *,
        key: SigningKey | None = None,
        issuer_path: str = "",
        metadata_at: Iterable[str] = ("oauth",),
        metadata_issuer: str | None = None,
        registration: bool = True,
        cimd: bool = False,
        auth_methods: Iterable[str] | None = ("none", "client_secret_basic", "client_secret_post"),
        scopes_supported: Iterable[str] | None = None,
        iss_supported: bool | None = True,
        iss_mode: str = "correct",
        code_challenge_methods: Iterable[str] | None = ("S256",),
        expires_in: int = 3600,
        refresh_tokens: bool = True,
        clients: Iterable[Client] = (),
        clock: Callable[[], float] = time.time,
        grant: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        super().__init__()
        self.key = key or SigningKey("as-key-1", "RS256", _default_rsa_key())
        self.issuer_path = issuer_path
        self.metadata_at = set(metadata_at)
        self.metadata_issuer = metadata_issuer
        self.registration = registration
        self.cimd = cimd
        self.auth_methods = list(auth_methods) if auth_methods is not None else None
        self.scopes_supported = list(scopes_supported) if scopes_supported is not None else None
        self.iss_supported = iss_supported
        self.iss_mode = iss_mode
        self.code_challenge_methods = list(code_challenge_methods) if code_challenge_methods is not None else None
        self.expires_in = expires_in
        self.refresh_tokens = refresh_tokens
        self.clients: dict[str, Client] = {c.client_id: c for c in clients}
        self.clock = clock
        self.grant = grant or (lambda asked: asked)
        self._codes: dict[str, dict[str, Any]] = {}
        self._refresh: dict[str, dict[str, Any]] = {}
        self.issued: list[str] = []
        """Every access token issued, in order."""

    # -- addresses -----------------------------------------------------------------------------

    @property
    def issuer(self) -> str:
        return self.base_url + self.issuer_path

    def metadata_paths(self) -> dict[str, str]:
        path = self.issuer_path
        return {
            "oauth": "/.well-known/oauth-authorization-server" + path,
            "openid-insert": "/.well-known/openid-configuration" + path if path else "/.well-known/openid-configuration",
            "openid-append": path + "/.well-known/openid-configuration",
        }

    def metadata(self) -> dict[str, Any]:
        base = self.issuer
        doc: dict[str, Any] = {
            "issuer": self.metadata_issuer or self.issuer,
            "authorization_endpoint": base + "/authorize",
            "token_endpoint": base + "/token",
            "jwks_uri": self.base_url + "/jwks.json",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        }
        if self.registration:
            doc["registration_endpoint"] = base + "/register"
        if self.auth_methods is not None:
            doc["token_endpoint_auth_methods_supported"] = self.auth_methods
        if self.code_challenge_methods is not None:
            doc["code_challenge_methods_supported"] = self.code_challenge_methods
        if self.scopes_supported is not None:
            doc["scopes_supported"] = self.scopes_supported
        if self.iss_supported is not None:
            doc["authorization_response_iss_parameter_supported"] = self.iss_supported
        if self.cimd:
            doc["client_id_metadata_document_supported"] = True
        return doc

    def authorization_requests(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path == self.issuer_path + "/authorize"]

    def token_requests(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path == self.issuer_path + "/token"]

    def registration_requests(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path == self.issuer_path + "/register"]

    # -- the endpoints -------------------------------------------------------------------------

    def handle(self, request: Recorded) -> _Reply:
        prefix = self.issuer_path
        if request.method == "GET":
            for name, path in self.metadata_paths().items():
                if request.path == path and name in self.metadata_at:
                    return _Reply(200, self.metadata())
            if request.path == "/jwks.json":
                return _Reply(200, {"keys": [self.key.public_jwk()]})
            if request.path == prefix + "/authorize":
                return self._authorize(request.query)
        elif request.method == "POST":
            if request.path == prefix + "/register" and self.registration:
                return self._register(request.body)
            if request.path == prefix + "/token":
                return self._token(request)
        return _Reply(404, {"error": "not_found"})

    def _register(self, body: Any) -> _Reply:
        if not isinstance(body, dict) or not body.get("redirect_uris"):
            return _Reply(400, {"error": "invalid_redirect_uri"})
        method = body.get("token_endpoint_auth_method") or "client_secret_basic"
        if self.auth_methods is not None and method not in self.auth_methods:
            method = self.auth_methods[0]
        client = Client(f"dcr-{secrets.token_hex(6)}", None if method == "none" else secrets.token_urlsafe(16), method,
                        list(body["redirect_uris"]))
        with self._lock:
            self.clients[client.client_id] = client
        answer = {"client_id": client.client_id, "redirect_uris": client.redirect_uris, "token_endpoint_auth_method": method,
                  "client_name": body.get("client_name")}
        if client.secret:
            answer["client_secret"] = client.secret
        return _Reply(201, answer)

    def _client(self, client_id: str | None) -> Client | None:
        if client_id is None:
            return None
        with self._lock:
            known = self.clients.get(client_id)
        if known is None and self.cimd and client_id.startswith("https://"):
            return Client(client_id, None, "none", [])  # a metadata document we pretend to have fetched
        return known

    def _authorize(self, query: Mapping[str, str]) -> _Reply:
        client = self._client(query.get("client_id"))
        redirect_uri = query.get("redirect_uri", "")
        if client is None:
            return _Reply(400, {"error": "invalid_client"})
        if client.redirect_uris and redirect_uri not in client.redirect_uris:
            return _Reply(400, {"error": "invalid_request", "error_description": "unregistered redirect_uri"})
        if query.get("response_type") != "code" or query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            return _Reply(400, {"error": "invalid_request"})
        code = secrets.token_urlsafe(16)
        with self._lock:
            self._codes[code] = {"client_id": client.client_id, "redirect_uri": redirect_uri, "challenge": query["code_challenge"],
                                 "scope": query.get("scope"), "resource": query.get("resource")}
        answer = {"code": code}
        if "state" in query:
            answer["state"] = query["state"]
        iss = {"correct": self.issuer, "wrong": "https://evil.example.com", "normalized": self.issuer + "/"}.get(self.iss_mode)
        if iss is not None:
            answer["iss"] = iss
        separator = "&" if "?" in redirect_uri else "?"
        return _Reply(302, None, {"Location": redirect_uri + separator + urllib.parse.urlencode(answer)})

    def _authenticate(self, request: Recorded) -> Client | None:
        """The client of a token request, authenticated by its registered method; None if it fails."""
        form = request.form
        header = request.headers.get("authorization", "")
        if header.lower().startswith("basic "):
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
            client = self._client(urllib.parse.unquote_plus(user))
            if client and client.method == "client_secret_basic" and client.secret == urllib.parse.unquote_plus(password):
                return client
            return None
        if "client_assertion" in form:
            client = self._client(form.get("client_id"))
            if client is None or client.method != "private_key_jwt" or client.public_key is None:
                return None
            try:
                claims = jwt.decode(form["client_assertion"], client.public_key, algorithms=["ES256", "RS256"], audience=self.issuer)
            except jwt.PyJWTError:
                return None
            ok = form.get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
            return client if ok and claims.get("iss") == claims.get("sub") == client.client_id else None
        client = self._client(form.get("client_id"))
        if client is None:
            return None
        if client.method == "client_secret_post":
            return client if form.get("client_secret") == client.secret else None
        return client if client.method == "none" and "client_secret" not in form else None

    def _token(self, request: Recorded) -> _Reply:
        form = request.form
        client = self._authenticate(request)
        if client is None:
            return _Reply(401, {"error": "invalid_client"})
        grant = form.get("grant_type")
        if grant == "authorization_code":
            with self._lock:
                issued = self._codes.pop(form.get("code", ""), None)
            if issued is None or issued["client_id"] != client.client_id or issued["redirect_uri"] != form.get("redirect_uri"):
                return _Reply(400, {"error": "invalid_grant"})
            verifier = form.get("code_verifier", "")
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if challenge != issued["challenge"] or issued["resource"] != form.get("resource"):
                return _Reply(400, {"error": "invalid_grant"})
            return self._issue(client, (issued["scope"] or "").split(), form.get("resource") or "", refresh=True)
        if grant == "refresh_token":
            with self._lock:
                held = self._refresh.pop(form.get("refresh_token", ""), None)
            if held is None or held["client_id"] != client.client_id:
                return _Reply(400, {"error": "invalid_grant"})
            return self._issue(client, held["scopes"], form.get("resource") or held["resource"], refresh=True)
        if grant == "client_credentials":
            if client.method not in ("client_secret_basic", "private_key_jwt"):
                return _Reply(401, {"error": "invalid_client"})
            return self._issue(client, (form.get("scope") or "").split(), form.get("resource") or "", refresh=False)
        return _Reply(400, {"error": "unsupported_grant_type"})

    def _issue(self, client: Client, asked: list[str], resource: str, *, refresh: bool) -> _Reply:
        scopes = [s for s in self.grant(asked) if s != "offline_access"]
        now = int(self.clock())
        claims = {"iss": self.issuer, "aud": resource, "sub": "alice", "client_id": client.client_id, "scope": " ".join(scopes),
                  "iat": now, "exp": now + self.expires_in, "jti": secrets.token_hex(8)}
        token = self.key.sign(claims, headers={"kid": self.key.kid, "typ": "at+jwt"})
        answer: dict[str, Any] = {"access_token": token, "token_type": "Bearer", "expires_in": self.expires_in, "scope": " ".join(scopes)}
        if refresh and self.refresh_tokens:
            refresh_token = secrets.token_urlsafe(24)
            with self._lock:
                self._refresh[refresh_token] = {"client_id": client.client_id, "scopes": asked, "resource": resource}
            answer["refresh_token"] = refresh_token
        with self._lock:
            self.issued.append(token)
        return _Reply(200, answer, {"Cache-Control": "no-store"})

    def revoke_refresh_tokens(self) -> None:
        with self._lock:
            self._refresh.clear()


@contextlib.contextmanager
def protected_endpoint(server: OAuthServer, *, clock: Callable[[], float] = time.time, leeway: float = 30.0) -> Iterator[str]:
    """mcpsync's own endpoint (on `start_http`) accepting only `server`'s tokens for this very
    URL with the scope `read`; its URL. Tools: `whoami` ("alice") and `reset` (needs `admin`)."""
    from mcpsync import Server, Service, Tool
    from mcpsync.auth import Auth
    from mcpsync.auth.resource.jwt import JwtVerifier

    from .authority import unreachable_url

    service = Service("guarded")
    service.add_tool(Tool(lambda: "alice", name="whoami"))
    service.add_tool(Tool(lambda: "reset done", name="reset", scopes=["admin"]))
    url = unreachable_url("/mcp")  # a free port, bound next: the audience must be this very URL
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    verifier = JwtVerifier(jwks_url=server.base_url + "/jwks.json", issuer=server.issuer, audience=url, leeway=leeway, clock=clock)
    mcp = Server("guarded", services=[service], auth=Auth(verifier, resource=url, authorization_servers=[server.issuer], required_scopes=["read"]))
    mcp.start_http("127.0.0.1", port, threads=4)
    try:
        yield url
    finally:
        assert mcp.close(LONG)
