"""The authorization side of `scripts/bench-http --auth`: an RSA key, its JWKS on loopback, tokens.

`Authority` generates an RSA-2048 key, serves its public half as a JWKS from a stdlib
`http.server` thread on 127.0.0.1 (port 0), and mints RS256 access tokens (RFC 9068 shape:
`iss`, `aud` = the resource, `sub`, `client_id`, `scope`, `iat`, `exp` an hour ahead, a `jti`) for
the bench's clients. Its issuer is the JWKS server's own origin.

`uncached_server()` is a serve target (`mcpsync serve scripts/bench_http_auth.py:uncached_server`):
the demo service behind the same `Auth` as `serve --auth-jwks-url ...` builds, but with
`JwtVerifier(cache_ttl=0)`, so every request pays the whole check (what the cache saves). It reads
its settings from the environment (`BENCH_HTTP_AUTH_*`), set by the bench.

`verify_costs()` times, in this process, what one request's token costs the server: the
`JwtVerifier.verify` of a token seen before (the cache), of a token seen for the first time (the
whole RS256 check), and `Auth.authenticate` (header parsing, verify, scopes) for a cached token.

Only the standard library at import: PyJWT and cryptography (the `auth` and `test` extras) are
imported by `Authority()` and `verify_costs()`, mcpsync by the functions that build its objects.
"""

from __future__ import annotations

import json
import threading
import time
import timeit
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

RESOURCE = "https://mcp.bench-http.invalid/mcp"
"""The resource the protected servers are (their --auth-resource) and the tokens' audience. A name, not
an address: the servers listen on port 0, and a resource server does not check its own URL against it."""
SCOPE = "mcp:tools"
"""The scope every protected server requires (--auth-scope) and every token carries."""
JWKS_PATH = "/jwks.json"
TOKEN_LIFETIME_S = 3600
ENV_PREFIX = "BENCH_HTTP_AUTH_"


def missing_dependencies() -> str | None:
    """Why the auth mode cannot run here (None: it can)."""
    try:
        import jwt  # noqa: F401
        from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: F401
        from jwt.algorithms import has_crypto
    except ImportError as exc:
        return f"{exc}"
    if not has_crypto:
        return "PyJWT is installed without cryptography"
    return None


class MissingDependencies(Exception):
    """PyJWT or cryptography is not installed in the interpreter the bench runs on."""


def start() -> Authority:
    """A started `Authority`, or `MissingDependencies` saying what is missing and how to run the
    bench instead (the message both benches print)."""
    problem = missing_dependencies()
    if problem is not None:
        raise MissingDependencies(f"--auth needs PyJWT and cryptography ({problem}): run it with .venv/bin/python "
                                  "(pip install -e '.[test]' or '.[auth]')")
    return Authority()


class Authority:
    """One signing key, its JWKS served on loopback, and tokens minted with it. `close()` stops the server."""

    def __init__(self) -> None:
        import jwt
        from cryptography.hazmat.primitives.asymmetric import rsa
        from jwt.algorithms import RSAAlgorithm

        self._jwt = jwt
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = uuid.uuid4().hex[:16]
        jwk = RSAAlgorithm.to_jwk(self._key.public_key(), as_dict=True)
        jwk.update(kid=self.kid, alg="RS256", use="sig")
        body = json.dumps({"keys": [jwk]}).encode()
        self.fetches = 0
        authority = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                if self.path != JWKS_PATH:
                    self.send_error(404)
                    return
                authority.fetches += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", "max-age=3600")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        self.issuer = f"http://{host}:{port}"
        self.jwks_url = self.issuer + JWKS_PATH
        self._thread = threading.Thread(target=self._server.serve_forever, name="bench-http-jwks", daemon=True)
        self._thread.start()

    def mint(self, subject: str) -> str:
        """A fresh RS256 access token for `subject` (a new `jti`: never one a server has cached)."""
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": RESOURCE, "sub": subject, "client_id": "bench-http", "scope": SCOPE,
                  "iat": now, "exp": now + TOKEN_LIFETIME_S, "jti": uuid.uuid4().hex}
        return self._jwt.encode(claims, self._key, algorithm="RS256", headers={"kid": self.kid, "typ": "at+jwt"})

    def serve_options(self) -> list[str]:
        """`mcpsync serve --http` options protecting the endpoint with this authority's tokens."""
        return ["--auth-jwks-url", self.jwks_url, "--auth-issuer", self.issuer, "--auth-resource", RESOURCE,
                "--auth-scope", SCOPE]

    def environment(self) -> dict[str, str]:
        """What `uncached_server()` reads."""
        return {ENV_PREFIX + "JWKS_URL": self.jwks_url, ENV_PREFIX + "ISSUER": self.issuer}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _auth(jwks_url: str, issuer: str, **verifier_options: Any) -> Any:
    from mcpsync.auth import Auth
    from mcpsync.auth.resource.jwt import JwtVerifier

    verifier = JwtVerifier(jwks_url=jwks_url, issuer=issuer, audience=RESOURCE, **verifier_options)
    return Auth(verifier, resource=RESOURCE, authorization_servers=[issuer], required_scopes=[SCOPE])


def uncached_server() -> Any:
    """A serve target: the demo service, every token checked in full (JwtVerifier's cache off)."""
    import os

    from mcpsync import Server
    from mcpsync.cli.demo import build_demo_service

    auth = _auth(os.environ[ENV_PREFIX + "JWKS_URL"], os.environ[ENV_PREFIX + "ISSUER"], cache_ttl=0)
    return Server("mcpsync-demo", services=[build_demo_service()], auth=auth)


def verify_costs(authority: Authority, fresh_tokens: int = 200, cached_calls: int = 20000) -> dict[str, float]:
    """µs per call, measured in this process: verify of a cached token, of a never-seen one, and
    Auth.authenticate (what a request runs) with a cached token. The key set is fetched first; each
    figure is the least of three rounds (timeit's advice: the others were disturbed)."""
    auth = _auth(authority.jwks_url, authority.issuer)
    verifier = auth.verifier
    token = authority.mint("verify-cached")
    verifier.verify(token)  # fetches the JWKS, caches the token
    cached_s = min(timeit.repeat(lambda: verifier.verify(token), number=cached_calls, repeat=3))
    environ = {"HTTP_AUTHORIZATION": "Bearer " + token, "QUERY_STRING": "", "wsgi.url_scheme": "http",
               "HTTP_HOST": "127.0.0.1", "SCRIPT_NAME": ""}
    authenticate_s = min(timeit.repeat(lambda: auth.authenticate(environ, "/mcp"), number=cached_calls, repeat=3))
    batches = []  # CPU time (not wall: a busy machine preempts) of each batch of never-seen tokens; the least is kept
    for batch in range(3):
        tokens = [authority.mint(f"verify-fresh-{batch}-{i}") for i in range(fresh_tokens)]
        start = time.process_time()
        for fresh in tokens:
            verifier.verify(fresh)
        batches.append(time.process_time() - start)
    return {
        "verify_cached_us": cached_s / cached_calls * 1e6,
        "verify_fresh_us": min(batches) / fresh_tokens * 1e6,
        "authenticate_cached_us": authenticate_s / cached_calls * 1e6,
    }
