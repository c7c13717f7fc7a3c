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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures.oidc_provider import Browser, OidcProvider, peers_dir

import mcpsync
from mcpsync import Context, Server, Service
from mcpsync.auth import Auth, MemoryTokenStore, OAuth
from mcpsync.auth.jwt import JwtVerifier
from tests._timeouts import LONG
from tests.auth.authority import unreachable_url

MCP_SCOPES = ("mcp:tools", "mcp:admin")
CALLBACK = "http://127.0.0.1:9/callback"  # the client's page (OAuth(callback=...)): never connected to


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
