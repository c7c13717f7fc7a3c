"""mcpsync as an OAuth 2.1 resource server, over real sockets, in both eras.

A real authorization server stand-in (`tests/auth/authority.py`: RS256 and ES256 keys made with
`cryptography`, its JWKS and an RFC 7662 introspection endpoint served over HTTP on loopback)
signs the tokens; mcpsync's own HTTP server serves `fixtures/protected_app.py` behind
`Auth(JwtVerifier(...))`. Every rule a client would notice: the metadata documents, the 401 and
403 challenges and their reasons, tokens only from the header, per-entry scopes (hidden from the
lists, refused with the scopes to step up to), the principal in the code and in interceptors, a
handshake session and a 2026-07-28 requestState bound to the principal that made them, a key
rotation and an unreachable JWKS, introspection, and a gateway that never passes a client's token
upstream.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from wire import REPO_ROOT, modern_meta, read_serving_url, spawn_http_server

import mcpsync
from mcpsync import Server
from mcpsync.auth import Auth, Principal
from mcpsync.auth.resource.introspection import IntrospectionVerifier
from mcpsync.auth.resource.jwt import JwtVerifier
from mcpsync.auth.resource.static import StaticTokens
from mcpsync.engine.interceptors import Call, Interceptor
from mcpsync.errors import McpsyncError
from mcpsync.protocol.versions import META_CLIENT_CAPABILITIES
from tests.auth.authority import OMIT, Authority, SigningKey, unreachable_url

from fixtures.protected_app import service as protected_service

LONG = 10.0
RESOURCE = "https://mcp.example.test/mcp"
METADATA_URL = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"
HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"


# -- a small HTTP client that shows what a client sees --------------------------------------------

class Answer:
    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.status = response.status
        self.headers = response.headers
        raw = response.read()
        self.body: Any = json.loads(raw) if raw.strip() else None

    @property
    def challenge(self) -> dict[str, str]:
        """The `WWW-Authenticate: Bearer k="v", ...` parameters (our values hold no commas but in scope lists)."""
        value = self.headers.get("WWW-Authenticate")
        assert value is not None and value.startswith("Bearer "), value
        params = {}
        for part in value[len("Bearer "):].split('", '):
            name, _, quoted = part.partition("=")
            params[name.strip()] = quoted.strip('"')
        return params


def send(url: str, method: str = "POST", body: Any = None, token: str | None = None, headers: dict[str, str] | None = None, path: str | None = None) -> Answer:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=LONG)
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    sent.update(headers or {})
    try:
        connection.request(method, path or parts.path, json.dumps(body).encode() if body is not None else None, sent)
        return Answer(connection.getresponse())
    finally:
        connection.close()


def modern(url: str, method: str, params: dict[str, Any] | None = None, token: str | None = None, capabilities: dict[str, Any] | None = None) -> Answer:
    """One 2026-07-28 request, with its envelope (declaring `capabilities`) and routing headers."""
    meta = modern_meta(**{META_CLIENT_CAPABILITIES: capabilities or {}})
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": meta}}
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if "name" in (params or {}):
        headers["Mcp-Name"] = params["name"]  # type: ignore[index]
    elif "uri" in (params or {}):
        headers["Mcp-Name"] = params["uri"]  # type: ignore[index]
    return send(url, body=body, token=token, headers=headers)


def handshake(url: str, method: str, params: dict[str, Any] | None, token: str | None, session_id: str, request_id: int = 2) -> Answer:
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
    return send(url, body=body, token=token, headers={"MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session_id})


def initialize(url: str, token: str | None) -> Answer:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": HANDSHAKE, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}}}
    return send(url, body=body, token=token, headers={"MCP-Protocol-Version": HANDSHAKE})


def open_session(url: str, token: str) -> str:
    answer = initialize(url, token)
    assert answer.status == 200, answer.body
    session_id = answer.headers["Mcp-Session-Id"]
    note = send(url, body={"jsonrpc": "2.0", "method": "notifications/initialized"}, token=token,
                headers={"MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session_id})
    assert note.status == 202
    return session_id


def tool_names(answer: Answer) -> set[str]:
    assert answer.status == 200, answer.body
    return {tool["name"] for tool in answer.body["result"]["tools"]}


# -- fixtures ------------------------------------------------------------------------------------

@pytest.fixture
def authority() -> Iterator[Authority]:
    with Authority(audience=RESOURCE) as running:
        yield running


def jwt_auth(authority: Authority, **options: Any) -> Auth:
    verifier = JwtVerifier(jwks_url=authority.jwks_url, issuer=authority.issuer, audience=RESOURCE, min_refresh_interval=0.001)
    return Auth(verifier, resource=RESOURCE, authorization_servers=[authority.issuer], **options)


class Endpoint:
    """mcpsync's HTTP server on a free port, serving the protected app behind `auth`."""

    def __init__(self, auth: Auth, interceptors: tuple[Interceptor, ...] = ()) -> None:
        self.server = Server("protected", services=[protected_service], auth=auth, interceptors=interceptors, shutdown_timeout=LONG)
        self.url = self.server.start_http("127.0.0.1", 0, keepalive=0.2, threads=8).url

    def close(self) -> None:
        assert self.server.close(LONG)


@pytest.fixture
def endpoint(authority: Authority) -> Iterator[Endpoint]:
    served = Endpoint(jwt_auth(authority))
    yield served
    served.close()


# -- metadata and challenges ---------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"])
def test_the_protected_resource_metadata_is_served_without_a_token(endpoint: Endpoint, authority: Authority, path: str) -> None:
    answer = send(endpoint.url, "GET", path=path)
    assert answer.status == 200
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.body == {"resource": RESOURCE, "authorization_servers": [authority.issuer], "bearer_methods_supported": ["header"]}
    assert send(endpoint.url, "POST", body={}, path=path).status == 405


def test_the_metadata_names_scopes_and_a_name_and_is_found_where_the_challenge_says(authority: Authority) -> None:
    """Without a configured resource, the metadata and the challenge name the URL the client used."""
    tokens = StaticTokens({"reader-token-0123456789": ["read"]})
    served = Endpoint(Auth(tokens, required_scopes=["read"], resource_name="Protected notes"))
    try:
        challenge = send(served.url).challenge
        metadata_url = challenge["resource_metadata"]
        assert metadata_url == served.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        assert challenge["scope"] == "read"
        document = send(served.url, "GET", path=urlsplit(metadata_url).path).body
        assert document == {"resource": served.url, "scopes_supported": ["read"], "bearer_methods_supported": ["header"], "resource_name": "Protected notes"}
    finally:
        served.close()


@pytest.mark.parametrize("era", ["modern", "handshake"])
def test_a_request_without_a_token_is_challenged_401(endpoint: Endpoint, era: str) -> None:
    answer = modern(endpoint.url, "tools/list") if era == "modern" else initialize(endpoint.url, None)
    assert answer.status == 401
    assert answer.challenge == {"resource_metadata": METADATA_URL}  # no error code: no token was given (RFC 6750 §3.1)
    assert answer.body["error"]["message"] == "Unauthorized: an access token is required"
    assert "Mcp-Session-Id" not in answer.headers  # nothing was created


def test_a_valid_token_is_served_in_both_eras_and_the_code_sees_its_principal(endpoint: Endpoint, authority: Authority) -> None:
    token = authority.mint()
    answer = modern(endpoint.url, "tools/call", {"name": "whoami", "arguments": {}}, token)
    assert answer.status == 200, answer.body
    assert answer.body["result"]["structuredContent"] == {"subject": "alice", "client": "test-client", "scopes": ["read", "write"]}
    with mcpsync.connect(endpoint.url, mode="legacy", headers={"Authorization": f"Bearer {token}"}, timeout=LONG) as session:
        assert session.call_tool("whoami", {})["structuredContent"]["subject"] == "alice"


def test_an_es256_token_is_served_too(authority: Authority) -> None:
    es = authority.add_key(SigningKey.ec("ec-1"))
    served = Endpoint(jwt_auth(authority))
    try:
        answer = modern(served.url, "tools/call", {"name": "whoami", "arguments": {}}, authority.mint(key=es))
        assert answer.status == 200, answer.body
        assert answer.body["result"]["structuredContent"]["subject"] == "alice"
    finally:
        served.close()


def refusal_cases(authority: Authority) -> dict[str, tuple[str, str]]:
    stranger = SigningKey.rsa(authority.key.kid)  # same kid, a key the JWKS does not publish
    now = int(authority.clock())
    return {
        "bad signature": (authority.mint(key=stranger), "bad signature"),
        "wrong issuer": (authority.mint({"iss": "https://elsewhere.example"}), "wrong issuer"),
        "wrong audience": (authority.mint({"aud": "https://other.example/mcp"}), "wrong audience"),
        "expired": (authority.mint({"exp": now - 3600, "iat": now - 7200}), "the token has expired"),
        "not yet valid": (authority.mint({"nbf": now + 3600}), "the token is not valid yet"),
        "no expiry": (authority.mint({"exp": OMIT}), ""),
        "garbage": ("not.a.jwt", ""),
    }


@pytest.mark.parametrize("case", ["bad signature", "wrong issuer", "wrong audience", "expired", "not yet valid", "no expiry", "garbage"])
@pytest.mark.parametrize("era", ["modern", "handshake"])
def test_a_bad_token_is_refused_401_invalid_token_with_the_reason(endpoint: Endpoint, authority: Authority, case: str, era: str) -> None:
    token, reason = refusal_cases(authority)[case]
    answer = modern(endpoint.url, "tools/list", token=token) if era == "modern" else initialize(endpoint.url, token)
    assert answer.status == 401, answer.body
    challenge = answer.challenge
    assert challenge["error"] == "invalid_token"
    assert challenge["resource_metadata"] == METADATA_URL
    assert reason in challenge["error_description"]
    assert token not in answer.headers["WWW-Authenticate"] and token not in json.dumps(answer.body)


def test_tokens_come_only_from_the_authorization_header(endpoint: Endpoint, authority: Authority) -> None:
    token = authority.mint()
    in_query = send(endpoint.url, path=f"/mcp?access_token={token}", body={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert in_query.status == 400
    assert in_query.challenge["error"] == "invalid_request"
    assert send(endpoint.url, headers={"Authorization": f"Basic {token}"}).status == 401
    malformed = send(endpoint.url, headers={"Authorization": "Bearer two words"})
    assert (malformed.status, malformed.challenge["error"]) == (400, "invalid_request")


def test_server_wide_scopes_are_required_and_challenged_403(authority: Authority) -> None:
    served = Endpoint(jwt_auth(authority, required_scopes=["mcp:use"]))
    try:
        assert send(served.url).challenge["scope"] == "mcp:use"  # the 401 says what to ask for
        answer = modern(served.url, "tools/list", token=authority.mint({"scope": "read"}))
        assert answer.status == 403
        assert answer.challenge["error"] == "insufficient_scope"
        assert answer.challenge["scope"] == "mcp:use"
        assert tool_names(modern(served.url, "tools/list", token=authority.mint({"scope": "mcp:use"}))) >= {"whoami"}
    finally:
        served.close()


# -- scopes per entry ----------------------------------------------------------------------------

def test_entries_a_token_cannot_use_are_absent_from_its_lists_in_both_eras(endpoint: Endpoint, authority: Authority) -> None:
    reader, admin = authority.mint({"scope": "read"}), authority.mint({"scope": "read admin", "sub": "root"})
    assert tool_names(modern(endpoint.url, "tools/list", token=reader)) == {"whoami", "confirm"}
    assert tool_names(modern(endpoint.url, "tools/list", token=admin)) == {"whoami", "confirm", "reset"}
    assert [p["name"] for p in modern(endpoint.url, "prompts/list", token=reader).body["result"]["prompts"]] == ["greeting"]
    assert [r["uri"] for r in modern(endpoint.url, "resources/list", token=reader).body["result"]["resources"]] == ["notes://public"]
    for token, expected in ((reader, {"whoami", "confirm"}), (admin, {"whoami", "confirm", "reset"})):
        with mcpsync.connect(endpoint.url, mode="legacy", headers={"Authorization": f"Bearer {token}"}, timeout=LONG) as session:
            assert {tool["name"] for tool in session.list_tools()} == expected


@pytest.mark.parametrize(
    ("method", "params", "what"),
    [
        ("tools/call", {"name": "reset", "arguments": {}}, "tool 'reset'"),
        ("prompts/get", {"name": "audit"}, "prompt 'audit'"),
        ("resources/read", {"uri": "notes://private"}, "resource 'notes://private'"),
    ],
)
def test_using_an_entry_without_its_scopes_is_a_403_challenge_naming_them(
    endpoint: Endpoint, authority: Authority, method: str, params: dict[str, Any], what: str
) -> None:
    answer = modern(endpoint.url, method, params, authority.mint({"scope": "read"}))
    assert answer.status == 403, answer.body
    assert answer.challenge["error"] == "insufficient_scope"
    assert answer.challenge["scope"] == "admin"
    assert answer.challenge["resource_metadata"] == METADATA_URL
    assert answer.body["error"]["data"] == {"error": "insufficient_scope", "scopes": ["admin"]}
    assert what in answer.body["error"]["message"]
    stepped_up = modern(endpoint.url, method, params, authority.mint({"scope": "read admin"}))
    assert stepped_up.status == 200 and "result" in stepped_up.body, stepped_up.body


def test_a_handshake_call_without_the_scope_is_a_403_too(endpoint: Endpoint, authority: Authority) -> None:
    token = authority.mint({"scope": "read"})
    session_id = open_session(endpoint.url, token)
    answer = handshake(endpoint.url, "tools/call", {"name": "reset", "arguments": {}}, token, session_id)
    assert answer.status == 403
    assert answer.challenge["scope"] == "admin"


def test_a_scope_hierarchy_grants_the_narrower_scopes(authority: Authority) -> None:
    served = Endpoint(jwt_auth(authority, scope_implies={"superuser": ["admin"]}))
    try:
        answer = modern(served.url, "tools/call", {"name": "whoami", "arguments": {}}, authority.mint({"scope": "superuser"}))
        assert answer.body["result"]["structuredContent"]["scopes"] == ["admin", "superuser"]
        assert "reset" in tool_names(modern(served.url, "tools/list", token=authority.mint({"scope": "superuser"})))
    finally:
        served.close()


def test_interceptors_see_the_principal_on_the_call(authority: Authority) -> None:
    seen: list[str | None] = []

    class Audit(Interceptor):
        def before_execute(self, call: Call) -> dict[str, Any] | None:
            seen.append(call.principal.subject if isinstance(call.principal, Principal) else None)
            return None

    served = Endpoint(jwt_auth(authority), interceptors=(Audit(),))
    try:
        modern(served.url, "tools/list", token=authority.mint({"sub": "carol"}))
    finally:
        served.close()
    assert seen == ["carol"]


# -- bindings ------------------------------------------------------------------------------------

def test_a_handshake_session_belongs_to_the_principal_that_created_it(endpoint: Endpoint, authority: Authority) -> None:
    alice = authority.mint()
    session_id = open_session(endpoint.url, alice)
    mallory = authority.mint({"sub": "mallory"})
    for method, body in (("POST", {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}}), ("GET", None), ("DELETE", None)):
        stolen = send(endpoint.url, method, body, mallory, {"MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session_id})
        assert stolen.status == 404, (method, stolen.body)  # exactly what an unknown session gets
    refreshed = authority.mint({"jti": "a-new-token"})  # the same caller with a new token keeps its session
    assert refreshed != alice
    assert tool_names(handshake(endpoint.url, "tools/list", {}, refreshed, session_id)) == {"whoami", "confirm"}


def test_a_request_state_opens_only_for_the_principal_it_was_sealed_for(endpoint: Endpoint, authority: Authority) -> None:
    alice, bob = authority.mint(), authority.mint({"sub": "bob"})
    asks = {"elicitation": {}}
    first = modern(endpoint.url, "tools/call", {"name": "confirm", "arguments": {}}, alice, asks)
    result = first.body["result"]
    assert result["resultType"] == "input_required", result
    (key,) = result["inputRequests"]
    retry = {"name": "confirm", "arguments": {}, "requestState": result["requestState"],
             "inputResponses": {key: {"action": "accept", "content": {"ok": True}}}}
    stolen = modern(endpoint.url, "tools/call", retry, bob, asks)
    assert stolen.body["error"]["code"] == -32602
    assert stolen.body["error"]["data"] == {"reason": "mismatched"}
    answered = modern(endpoint.url, "tools/call", retry, alice, asks)
    assert answered.body["result"]["content"][0]["text"] == "alice answered True"


# -- keys and verifiers --------------------------------------------------------------------------

def test_a_key_rotation_at_the_authorization_server_is_followed_without_a_restart(endpoint: Endpoint, authority: Authority) -> None:
    old = authority.mint()
    assert modern(endpoint.url, "tools/list", token=old).status == 200
    fetches = authority.jwks_fetches
    new_key = authority.rotate()
    answer = modern(endpoint.url, "tools/list", token=authority.mint(key=new_key))
    assert answer.status == 200, answer.body
    assert authority.jwks_fetches == fetches + 1  # the unknown kid was looked up once


def test_an_unreachable_jwks_is_a_503_not_a_bad_token(authority: Authority) -> None:
    verifier = JwtVerifier(jwks_url=unreachable_url(), issuer=authority.issuer, audience=RESOURCE, timeout=2.0)
    served = Endpoint(Auth(verifier, resource=RESOURCE))
    try:
        answer = modern(served.url, "tools/list", token=authority.mint())
        assert answer.status == 503
        assert answer.headers["Retry-After"] == "5"
        assert "WWW-Authenticate" not in answer.headers
    finally:
        served.close()


def test_introspected_opaque_tokens_are_served_and_inactive_ones_refused(authority: Authority) -> None:
    verifier = IntrospectionVerifier(
        authority.introspection_url, client_id=authority.client_id, client_secret=authority.client_secret, audience=RESOURCE
    )
    served = Endpoint(Auth(verifier, resource=RESOURCE))
    try:
        token = authority.register(answer={"active": True, **authority.claims({"sub": "dave", "scope": "read admin"})})
        answer = modern(served.url, "tools/call", {"name": "reset", "arguments": {}}, token)
        assert answer.body["result"]["content"][0]["text"] == "reset done"
        revoked = authority.register(answer={"active": False})
        refused = modern(served.url, "tools/list", token=revoked)
        assert (refused.status, refused.challenge["error"]) == (401, "invalid_token")
    finally:
        served.close()


# -- the gateway ---------------------------------------------------------------------------------

def test_the_gateway_never_passes_the_clients_token_upstream(authority: Authority) -> None:
    """The upstream is protected by its own static token, which the gateway holds; the client
    holds a JWT for the gateway. The upstream must see only the gateway's token."""
    seen_upstream: list[str] = []

    class Recording:
        def __init__(self) -> None:
            self.tokens = StaticTokens({"gateway-upstream-token-0123": Principal("the-gateway", scopes={"read"})})

        def verify(self, token: str) -> Principal | None:
            seen_upstream.append(token)
            return self.tokens.verify(token)

    upstream = Server("upstream", services=[protected_service], auth=Auth(Recording()), shutdown_timeout=LONG)
    upstream_url = upstream.start_http("127.0.0.1", 0, threads=4).url
    gateway = Server("gateway", auth=jwt_auth(authority), shutdown_timeout=LONG)
    try:
        gateway.add_remote("up", upstream_url, headers={"Authorization": "Bearer gateway-upstream-token-0123"}, prefix="up_", timeout=LONG)
        gateway_url = gateway.start_http("127.0.0.1", 0, threads=4).url
        client_token = authority.mint()
        answer = modern(gateway_url, "tools/call", {"name": "up_whoami", "arguments": {}}, client_token)
        assert answer.status == 200, answer.body
        assert json.loads(answer.body["result"]["content"][0]["text"])["subject"] == "the-gateway"
        assert client_token not in seen_upstream
        assert set(seen_upstream) == {"gateway-upstream-token-0123"}
        assert modern(gateway_url, "tools/call", {"name": "up_whoami", "arguments": {}}).status == 401
    finally:
        assert gateway.close(LONG)
        assert upstream.close(LONG)


def test_the_client_reports_a_401_clearly(endpoint: Endpoint) -> None:
    with pytest.raises(McpsyncError, match="Unauthorized: an access token is required"):
        mcpsync.connect(endpoint.url, mode="modern", timeout=LONG).list_tools()


# -- the official SDK's client, and the command line ---------------------------------------------

DRIVER = Path(__file__).with_name("sdk_auth_driver.py")


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_the_official_sdk_client_with_a_bearer_token(endpoint: Endpoint, authority: Authority, mode: str, peers_python: str, bounded: Any) -> None:
    env = {**os.environ, "MCP_TOKEN": authority.mint({"scope": "read"})}
    result = bounded([peers_python, str(DRIVER), "--mode", mode, endpoint.url], timeout=60.0, cwd=REPO_ROOT, env=env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["era"] == ("modern" if mode == "modern" else "handshake")
    assert summary["tools"] == ["confirm", "whoami"]  # reset needs admin: not listed
    assert summary["whoami"] == {"subject": "alice", "client": "test-client", "scopes": ["read"]}
    assert "403" in summary["resetError"] or "scope" in summary["resetError"], summary


def test_the_official_sdk_client_without_a_token_is_refused(endpoint: Endpoint, peers_python: str, bounded: Any) -> None:
    env = {**os.environ, "MCP_TOKEN": "not-a-valid-token-at-all"}
    result = bounded([peers_python, str(DRIVER), "--mode", "legacy", endpoint.url], timeout=60.0, cwd=REPO_ROOT, env=env)
    assert result.returncode == 1
    assert "Unauthorized: malformed token" in result.stderr, result.stderr[-2000:]


APP = Path(__file__).parent / "fixtures" / "protected_app.py"


class ServeProcess:
    """`mcpsync serve APP --http 127.0.0.1:0 ARGS...` as a child; stopped with SIGTERM."""

    def __init__(self, *args: str) -> None:
        self.proc = spawn_http_server(str(APP), *args)
        url, self.stderr = read_serving_url(self.proc, LONG)
        assert url is not None, self.stderr.decode(errors="replace")
        self.url = url

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        _, rest = self.proc.communicate(timeout=LONG)
        return self.proc.returncode, (self.stderr + rest).decode(errors="replace")


def test_serve_protects_its_endpoint_with_a_jwks_from_the_command_line(authority: Authority) -> None:
    served = ServeProcess("--auth-jwks-url", authority.jwks_url, "--auth-issuer", authority.issuer, "--auth-resource", RESOURCE, "--auth-scope", "read")
    try:
        refused = send(served.url)
        assert refused.status == 401
        assert refused.challenge == {"resource_metadata": METADATA_URL, "scope": "read"}
        metadata = send(served.url, "GET", path="/.well-known/oauth-protected-resource/mcp").body
        assert metadata == {"resource": RESOURCE, "authorization_servers": [authority.issuer], "scopes_supported": ["read"], "bearer_methods_supported": ["header"]}
        for mode in ("modern", "legacy"):
            with mcpsync.connect(served.url, mode=mode, headers={"Authorization": f"Bearer {authority.mint()}"}, timeout=LONG) as session:
                assert session.call_tool("whoami", {})["structuredContent"]["subject"] == "alice"
    finally:
        status, stderr = served.stop()
    assert status == 0, stderr
    assert authority.mint() not in stderr


def test_serve_protects_its_endpoint_with_a_token_file(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("# who may call\nops-token-0123456789abcdef sub=ops admin\nreader-token-0123456789abc sub=reader\n")
    served = ServeProcess("--auth-token-file", str(tokens))
    try:
        with mcpsync.connect(served.url, mode="modern", headers={"Authorization": "Bearer ops-token-0123456789abcdef"}, timeout=LONG) as session:
            assert session.call_tool("reset", {})["content"][0]["text"] == "reset done"
        with mcpsync.connect(served.url, mode="legacy", headers={"Authorization": "Bearer reader-token-0123456789abc"}, timeout=LONG) as session:
            assert "reset" not in {tool["name"] for tool in session.list_tools()}
            assert session.call_tool("whoami", {})["structuredContent"] == {"subject": "reader", "client": None, "scopes": []}
        assert send(served.url, token="wrong-token-0123456789abcdef").status == 401
    finally:
        status, stderr = served.stop()
    assert status == 0, stderr
    assert "ops-token-0123456789abcdef" not in stderr


def test_a_browser_preflight_needs_no_token_and_the_page_can_read_the_challenge(authority: Authority) -> None:
    page = "https://app.example.test"
    server = Server("protected", services=[protected_service], auth=jwt_auth(authority), shutdown_timeout=LONG)
    url = server.start_http("127.0.0.1", 0, allowed_origins=[page], threads=4).url
    try:
        preflight = send(url, "OPTIONS", headers={"Origin": page, "Access-Control-Request-Method": "POST",
                                                  "Access-Control-Request-Headers": "authorization, content-type"})
        assert preflight.status == 204
        assert "authorization" in preflight.headers["Access-Control-Allow-Headers"].lower()
        refused = send(url, headers={"Origin": page})
        assert refused.status == 401
        assert refused.headers["Access-Control-Allow-Origin"] == page
        assert "WWW-Authenticate" in refused.headers["Access-Control-Expose-Headers"]
        metadata = send(url, "GET", path="/.well-known/oauth-protected-resource/mcp", headers={"Origin": page})
        assert (metadata.status, metadata.headers["Access-Control-Allow-Origin"]) == (200, page)
    finally:
        assert server.close(LONG)


# -- open streams end with their token ------------------------------------------------------------

class ShortLived:
    """Tokens valid for `seconds` from when they are first checked (a verifier of the test's own)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def verify(self, token: str) -> Principal | None:
        return Principal(token, scopes=frozenset({"read"}), expires_at=time.time() + self.seconds) if token.startswith("short-") else None


def stream_events(url: str, body: Any, token: str, headers: dict[str, str], method: str = "POST") -> list[Any]:
    """Every SSE `data:` of the response, read until the server ends it (bounded by LONG)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=LONG)
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}", **headers}
    try:
        connection.request(method, parts.path, json.dumps(body).encode() if body is not None else None, sent)
        response = connection.getresponse()
        assert response.status == 200, response.read()
        assert response.headers["Content-Type"].startswith("text/event-stream")
        return [json.loads(line[6:]) for line in response.read().splitlines() if line.startswith(b"data: ") and line[6:].strip()]
    finally:
        connection.close()


def test_a_listen_ends_with_its_complete_result_when_its_token_expires() -> None:
    served = Endpoint(Auth(ShortLived(0.3)))
    try:
        listen = {"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
                  "params": {"_meta": modern_meta(), "notifications": {"toolsListChanged": True}}}
        frames = stream_events(served.url, listen, "short-alice", {"MCP-Protocol-Version": MODERN, "Mcp-Method": "subscriptions/listen"})
        assert frames[0]["method"] == "notifications/subscriptions/acknowledged"
        assert frames[-1]["id"] == 7 and frames[-1]["result"]["resultType"] == "complete"
    finally:
        served.close()


def test_a_get_stream_ends_when_its_token_expires_and_the_session_lives_on() -> None:
    served = Endpoint(Auth(ShortLived(0.3)))
    try:
        session_id = open_session(served.url, "short-alice")
        frames = stream_events(served.url, None, "short-alice", {"MCP-Protocol-Version": HANDSHAKE, "Mcp-Session-Id": session_id}, "GET")
        assert frames == []  # ended, with nothing to say
        assert tool_names(handshake(served.url, "tools/list", {}, "short-alice", session_id)) == {"whoami", "confirm"}
    finally:
        served.close()
