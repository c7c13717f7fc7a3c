"""mcpsync's OAuth, both sides, against oidc-provider: panva's OpenID Certified authorization server
(npm, pinned by scripts/peers-oidc, configured by integration/oidc/provider.mjs as an MCP
deployment would: dynamic registration, PKCE S256, resource indicators issuing JWT access tokens
for the MCP endpoint, refresh tokens, introspection, client credentials, an interaction that
approves at once). Nobody here wrote it, so it reads the RFCs its own way; the project's loopback
server (tests/auth/oauth_server.py) stays for failure injection.

The MCP endpoint is mcpsync's own (`Server.start_http` with `Auth`), its tokens checked by a
`JwtVerifier` on the provider's JWKS (or by an `IntrospectionVerifier` at its introspection
endpoint, for the opaque tokens it issues for an /opaque/ resource). The user's browser is a
stand-in that keeps cookies and follows redirects (`fixtures.oidc_provider.Browser` in process,
`oidc/browser_standin.py` for the CLI). Expiry is driven by the client's injected clock, never by
sleeping; what the provider did is read from the events it prints.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures.oidc_provider import Browser, OidcProvider, peers_dir
from wire import REPO_ROOT, base_env

import mcpsync
from mcpsync import Context, Server, Service
from mcpsync.auth import Auth, ClientCredentials, IntrospectionVerifier, MemoryTokenStore, OAuth
from mcpsync.auth.client.discovery import discover_authorization_server
from mcpsync.auth.resource.jwt import JwtVerifier
from tests._timeouts import LONG
from tests.auth.authority import unreachable_url

MCP_SCOPES = ("mcp:tools", "mcp:admin")
CALLBACK = "http://127.0.0.1:9/callback"  # the client's page (OAuth(callback=...)): never connected to
BROWSER = Path(__file__).parent / "oidc" / "browser_standin.py"
WORKER_SECRET = "worker-secret-0123456789abcdef0123456789abcdef"
RS_SECRET = "resource-server-secret-0123456789abcdef0123456789"


def guarded_service() -> Service:
    service = Service("guarded")

    @service.tool
    def whoami(ctx: Context) -> dict[str, Any]:
        principal = ctx.principal
        assert principal is not None
        return {"subject": principal.subject, "client": principal.client_id, "scopes": sorted(principal.scopes)}

    @service.tool(scopes=["mcp:admin"])
    def reset() -> str:
        return "reset done"

    return service


@contextlib.contextmanager
def jwt_endpoint(provider: OidcProvider) -> Iterator[str]:
    """mcpsync's endpoint accepting the provider's JWT access tokens for this very URL with
    `mcp:tools`; its URL."""
    url = unreachable_url("/mcp")  # a free port, bound next: the audience must be this very URL
    verifier = JwtVerifier(jwks_url=provider.discovery["jwks_uri"], issuer=provider.issuer, audience=url)
    with serving(url, Auth(verifier, resource=url, authorization_servers=[provider.issuer], required_scopes=["mcp:tools"])):
        yield url


@contextlib.contextmanager
def serving(url: str, auth: Auth) -> Iterator[None]:
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    path = "/" + url.split("/", 3)[3]
    server = Server("guarded", services=[guarded_service()], auth=auth)
    server.start_http("127.0.0.1", port, path=path, threads=4)
    try:
        yield
    finally:
        assert server.close(LONG)


def whoami(session: Any) -> dict[str, Any]:
    result = session.call_tool("whoami", {})
    assert result["isError"] is False, result
    structured: dict[str, Any] = result["structuredContent"]
    return structured


@pytest.fixture(scope="module")
def peers() -> Path:
    return peers_dir()


@pytest.fixture(scope="module")
def signer_key() -> tuple[str, dict[str, Any]]:
    """An EC P-256 key of the `signer` client (private_key_jwt): its PEM and its public JWK."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from jwt.algorithms import ECAlgorithm

    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    public: dict[str, Any] = json.loads(ECAlgorithm.to_jwk(key.public_key()))
    return pem, {**public, "kid": "signer-1", "use": "sig", "alg": "ES256"}


@pytest.fixture(scope="module")
def provider(peers: Path, signer_key: tuple[str, dict[str, Any]]) -> Iterator[OidcProvider]:
    """The provider as deployed for MCP: its own scope list is OpenID's, the MCP scopes are the
    resource server's; three clients registered in advance (client credentials with a secret, with
    private_key_jwt, and a resource server that introspects); mounted under /oidc, as its docs
    show, so only OpenID Connect discovery finds it."""
    machine = {"grant_types": ["client_credentials"], "response_types": [], "redirect_uris": []}
    clients = [
        {"client_id": "worker", "client_secret": WORKER_SECRET, "token_endpoint_auth_method": "client_secret_basic", **machine},
        {"client_id": "signer", "token_endpoint_auth_method": "private_key_jwt", "token_endpoint_auth_signing_alg": "ES256",
         "jwks": {"keys": [signer_key[1]]}, **machine},
        {"client_id": "mcp-rs", "client_secret": RS_SECRET, "grant_types": [], "response_types": [], "redirect_uris": []},
    ]
    with OidcProvider(peers, clients=clients, mount_path="/oidc") as started:
        yield started


@pytest.fixture(scope="module")
def listing(peers: Path) -> Iterator[OidcProvider]:
    """A provider that lists the MCP scopes among its own, so a registration may name them (and
    is then held to them)."""
    with OidcProvider(peers, static_scopes=MCP_SCOPES) as provider:
        yield provider


def test_a_login_in_process_then_a_tool_call_with_its_jwt(listing: OidcProvider) -> None:
    browser = Browser(CALLBACK)
    oauth = OAuth(redirect_uri=CALLBACK, redirect_handler=browser.open, callback=browser.returned, token_store=MemoryTokenStore())
    before = len(listing.events())
    with jwt_endpoint(listing) as url, mcpsync.connect(url, auth=oauth) as session:
        caller = whoami(session)
    [opened] = browser.opened
    assert "code_challenge_method=S256" in opened and "resource=" in opened
    registered, issued = [event for event in listing.events()[before:] if event["event"] != "interaction"]
    assert (registered["event"], issued["event"], issued["grant_type"]) == ("registration_create.success", "grant.success", "authorization_code")
    assert caller == {"subject": "alice", "client": registered["client_id"], "scopes": ["mcp:tools"]}


def in_process_login(*, clock: Any = time.time, browser: Browser | None = None) -> tuple[OAuth, Browser, MemoryTokenStore]:
    browser = browser or Browser(CALLBACK)
    store = MemoryTokenStore()
    oauth = OAuth(redirect_uri=CALLBACK, redirect_handler=browser.open, callback=browser.returned, token_store=store, clock=clock)
    return oauth, browser, store


def mcpsync_cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**base_env(), "XDG_CONFIG_HOME": str(home), "BROWSER": f"{sys.executable} {BROWSER} %s"}
    return subprocess.run([sys.executable, "-m", "mcpsync", *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT,
                          timeout=LONG * 3, stdin=subprocess.DEVNULL)


# -- defect 1: a refresh asks for what was granted, and a refused refresh token is dropped once ---------

def test_a_refresh_after_expiry_asks_for_no_more_than_was_granted(listing: OidcProvider) -> None:
    """mcpsync asks `mcp:tools offline_access`; oidc-provider grants `mcp:tools` (it keeps
    offline_access only with prompt=consent) and a refresh token. A refresh that asks for
    offline_access again is refused invalid_scope (RFC 6749 section 6); one that asks for no more
    than the grant is served, once, however many requests follow."""
    now = [time.time()]
    oauth, browser, _ = in_process_login(clock=lambda: now[0])
    before = len(listing.events())
    with jwt_endpoint(listing) as url, mcpsync.connect(url, auth=oauth) as session:
        whoami(session)
        for _ in range(2):  # twice: the second refresh uses the token the first rotated in
            now[0] += 3600  # far past the access token's 60 s, by the client's clock alone
            for _ in range(3):
                assert whoami(session)["scopes"] == ["mcp:tools"]
    refreshes = [event for event in listing.events()[before:] if event.get("grant_type") == "refresh_token"]
    assert [(event["event"], event.get("error")) for event in refreshes] == [("grant.success", None)] * 2
    assert len(browser.opened) == 1  # no second login


def test_a_revoked_refresh_token_is_dropped_after_one_refusal(provider: OidcProvider) -> None:
    now = [time.time()]
    oauth, _, store = in_process_login(clock=lambda: now[0])
    with jwt_endpoint(provider) as url, mcpsync.connect(url, auth=oauth) as session:
        whoami(session)
        kept = store.load(url)
        assert kept is not None
        [registration] = kept["registrations"].values()
        revoked = urllib.parse.urlencode({"token": kept["tokens"]["refresh_token"], "token_type_hint": "refresh_token",
                                          "client_id": registration["client_id"]}).encode()
        with urllib.request.urlopen(provider.discovery["revocation_endpoint"], revoked, timeout=LONG) as answer:
            assert answer.status == 200
        before = len(provider.events())
        now[0] += 3600
        for _ in range(3):
            whoami(session)  # the access token itself is still good to the endpoint's own clock
    refreshes = [event for event in provider.events()[before:] if event.get("grant_type") == "refresh_token"]
    assert [(event["event"], event.get("error")) for event in refreshes] == [("grant.error", "invalid_grant")]


# -- defect 2: a registration does not lock the first scopes in -------------------------------------

def test_a_login_from_the_cli_where_the_mcp_scopes_are_the_resource_servers(provider: OidcProvider, tmp_path: Path) -> None:
    """oidc-provider refuses a registration whose `scope` names scopes outside its own list
    (400 invalid_client_metadata); the MCP scopes are the resource server's, so a registration
    must name none. Also the discovery fallback: oidc-provider has no RFC 8414 document, only
    OpenID Connect discovery."""
    before = len(provider.events())
    with jwt_endpoint(provider) as url:
        login = mcpsync_cli("login", url, home=tmp_path)
        assert login.returncode == 0, login.stderr + provider.stderr()
        called = mcpsync_cli("call", "whoami", url, home=tmp_path)
        assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["subject"] == "alice"
    assert [event["event"] for event in provider.events()[before:] if event["event"].endswith("error")] == []
    assert "eyJ" not in login.stdout + login.stderr + called.stdout + called.stderr


def test_a_step_up_to_mcp_admin_is_granted(listing: OidcProvider) -> None:
    """A provider that lists the MCP scopes holds a client to the `scope` it registered with
    (RFC 7591); a registration naming only the first login's scopes makes the step-up to
    mcp:admin an invalid_scope."""
    oauth, browser, _ = in_process_login()
    with jwt_endpoint(listing) as url, mcpsync.connect(url, auth=oauth) as session:
        assert whoami(session)["scopes"] == ["mcp:tools"]
        result = session.call_tool("reset", {})
        assert result["content"][0]["text"] == "reset done", result
        assert whoami(session)["scopes"] == ["mcp:admin", "mcp:tools"]
    first, second = (urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["scope"][0].split() for url in browser.opened)
    assert "mcp:admin" not in first and {"mcp:tools", "mcp:admin"} <= set(second)


def test_a_step_up_from_the_cli(listing: OidcProvider, tmp_path: Path) -> None:
    with jwt_endpoint(listing) as url:
        assert mcpsync_cli("login", url, home=tmp_path).returncode == 0
        refused = mcpsync_cli("call", "reset", url, home=tmp_path)
        assert refused.returncode != 0 and "mcp:admin" in refused.stderr
        stepped = mcpsync_cli("login", "--scope", "mcp:admin", url, home=tmp_path)
        assert stepped.returncode == 0, stepped.stderr
        called = mcpsync_cli("call", "reset", url, home=tmp_path)
        assert (called.returncode, called.stdout.strip()) == (0, "reset done"), called.stderr


# -- defect 3: a token the introspection endpoint will not take is an invalid token -------------------

def test_introspection_checks_opaque_tokens_and_a_jwt_it_will_not_take_is_401(provider: OidcProvider) -> None:
    """oidc-provider introspects the opaque tokens it issues for an /opaque/ resource; a JWT it
    answers 400 unsupported_token_type, which is the client's token at fault (401, log in), not the
    verifier's (503 with Retry-After, try later)."""
    url = unreachable_url("/opaque/mcp")
    verifier = IntrospectionVerifier(provider.discovery["introspection_endpoint"], client_id="mcp-rs", client_secret=RS_SECRET,
                                     audience=url, issuer=provider.issuer)
    worker = ClientCredentials("worker", client_secret=WORKER_SECRET)
    with serving(url, Auth(verifier, resource=url, authorization_servers=[provider.issuer], required_scopes=["mcp:tools"])):
        with mcpsync.connect(url, auth=worker) as session:
            assert whoami(session) == {"subject": None, "client": "worker", "scopes": ["mcp:tools"]}
        with jwt_endpoint(provider) as jwt_url:
            jwt = client_credentials_token(provider, jwt_url)
        assert jwt.count(".") == 2
        status, headers = post_ping(url, jwt)
    assert status == 401 and "retry-after" not in headers, (status, headers)
    assert 'error="invalid_token"' in headers["www-authenticate"]


def client_credentials_token(provider: OidcProvider, resource: str) -> str:
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "resource": resource, "scope": "mcp:tools"}).encode()
    request = urllib.request.Request(provider.discovery["token_endpoint"], form)
    request.add_header("Authorization", "Basic " + __import__("base64").b64encode(f"worker:{WORKER_SECRET}".encode()).decode())
    with urllib.request.urlopen(request, timeout=LONG) as answer:
        token: str = json.load(answer)["access_token"]
    return token


def post_ping(url: str, token: str) -> tuple[int, dict[str, str]]:
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=LONG)
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        connection.request("POST", parts.path, body, {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                                                      "Accept": "application/json, text/event-stream"})
        answer = connection.getresponse()
        answer.read()
        return answer.status, {name.lower(): value for name, value in answer.getheaders()}
    finally:
        connection.close()


# -- the other flows -------------------------------------------------------------------------------

def test_discovery_falls_back_from_rfc8414_to_openid_connect_discovery(provider: OidcProvider) -> None:
    """The issuer http://127.0.0.1:PORT/oidc: RFC 8414's /.well-known/oauth-authorization-server/oidc
    and OpenID's path insertion are absent; OpenID's path appending answers."""
    origin, path = provider.issuer.rsplit("/", 1)
    for absent in (f"{origin}/.well-known/oauth-authorization-server/{path}", f"{origin}/.well-known/openid-configuration/{path}"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(absent, timeout=LONG)
        assert refused.value.code == 404
    found = discover_authorization_server(provider.issuer, timeout=LONG)
    assert found is not None and found.issuer == provider.issuer
    assert found.token_endpoint == provider.discovery["token_endpoint"]
    assert found.registration_endpoint == provider.discovery["registration_endpoint"]
    assert tuple(found.code_challenge_methods_supported or ()) == ("S256",)


def test_client_credentials_with_a_secret(provider: OidcProvider) -> None:
    with jwt_endpoint(provider) as url, mcpsync.connect(url, auth=ClientCredentials("worker", client_secret=WORKER_SECRET)) as session:
        assert whoami(session) == {"subject": "worker", "client": "worker", "scopes": ["mcp:tools"]}  # RFC 9068: sub is the client
        stepped = session.call_tool("reset", {})  # a step-up (403 insufficient_scope) the provider grants
        assert stepped["content"][0]["text"] == "reset done", stepped


def test_client_credentials_with_private_key_jwt(provider: OidcProvider, signer_key: tuple[str, dict[str, Any]]) -> None:
    signer = ClientCredentials("signer", private_key=signer_key[0], signing_algorithm="ES256", scopes=["mcp:tools"])
    before = len(provider.events())
    with jwt_endpoint(provider) as url, mcpsync.connect(url, auth=signer) as session:
        assert whoami(session)["client"] == "signer"
    [issued] = [event for event in provider.events()[before:] if event["event"].startswith("grant.")]
    assert (issued["event"], issued["grant_type"], issued["client_id"]) == ("grant.success", "client_credentials", "signer")


def test_a_forged_client_assertion_is_refused(provider: OidcProvider) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    other = ec.generate_private_key(ec.SECP256R1()).private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                                   serialization.NoEncryption()).decode()
    forger = ClientCredentials("signer", private_key=other, signing_algorithm="ES256")
    with jwt_endpoint(provider) as url, pytest.raises(mcpsync.McpError, match="invalid_client"), mcpsync.connect(url, auth=forger):
        pass


def test_the_typescript_sdk_logs_in_through_oidc_provider_and_calls_mcpsync(listing: OidcProvider, node: str,
                                                                         npm_entry: Any, bounded: Any) -> None:
    """The official TypeScript SDK client (1.32.2, its auth() and an OAuthClientProvider) does the
    discovery, registration, PKCE and token request itself against oidc-provider, then calls a
    tool on mcpsync's endpoint with the JWT it got (integration/oidc/sdk_oauth_driver.mjs).

    On `listing`: the SDK puts the challenge's scope in its registration, which the provider that
    keeps the MCP scopes to its resource server refuses (invalid_client_metadata), as it refused
    mcpsync's before registration stopped naming scopes."""
    provider = listing
    npm_entry("everything")  # scripts/peers-npm: the SDK is installed with the servers
    sdk = REPO_ROOT / ".peers-npm" / "node_modules" / "@modelcontextprotocol" / "sdk"
    before = len(provider.events())
    with jwt_endpoint(provider) as url:
        run = bounded([node, str(Path(__file__).parent / "oidc" / "sdk_oauth_driver.mjs"), str(sdk), url], timeout=LONG * 2)
    assert run.returncode == 0, run.stderr + provider.stderr()
    seen = json.loads(run.stdout)
    registered = [event["client_id"] for event in provider.events()[before:] if event["event"] == "registration_create.success"]
    assert seen["clientId"] in registered
    assert seen["whoami"] == {"subject": "alice", "client": seen["clientId"], "scopes": ["mcp:tools"]}
    assert (seen["resource"], seen["codeChallengeMethod"]) == (url, "S256")
    assert "mcp:tools" in seen["scope"].split()
