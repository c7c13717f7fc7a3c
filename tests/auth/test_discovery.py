"""Discovery's rules: the challenge parser, both metadata orders and the refusals, over real loopback HTTP."""

from __future__ import annotations

import pytest

from mcpsync.auth.client.discovery import (
    OAuthError,
    bearer_challenge,
    discover,
    discover_authorization_server,
    discover_resource,
    metadata_urls,
    parse_challenges,
    resource_matches,
    resource_metadata_urls,
)

from .oauth_server import OAuthServer, ResourceMetadataServer

T = 5.0


# -- WWW-Authenticate ----------------------------------------------------------------------------

def test_challenges_with_quoted_bare_and_escaped_values() -> None:
    header = ('Basic realm="x", Bearer error="insufficient_scope", scope="files:read files:write", '
              'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", error_description="a \\"b\\"", max=3')
    basic, bearer = parse_challenges(header)
    assert basic.scheme == "basic" and basic.params == {"realm": "x"}
    assert bearer.scheme == "bearer"
    assert bearer.params["error"] == "insufficient_scope"
    assert bearer.scopes == ("files:read", "files:write")
    assert bearer.params["resource_metadata"] == "https://mcp.example.com/.well-known/oauth-protected-resource"
    assert bearer.params["error_description"] == 'a "b"'
    assert bearer.params["max"] == "3"


@pytest.mark.parametrize("header", ["Bearer", "bearer realm=example", 'Negotiate abc==, BEARER scope="a"'])
def test_bearer_found_whatever_the_case_and_company(header: str) -> None:
    assert bearer_challenge(header) is not None


def test_no_bearer_challenge() -> None:
    assert bearer_challenge(None) is None
    assert bearer_challenge('Basic realm="x"') is None
    assert bearer_challenge(",,, garbage") is None
    assert bearer_challenge("Bearer").scopes is None  # type: ignore[union-attr]


# -- orders ----------------------------------------------------------------------------------------

def test_resource_metadata_urls_path_first_then_root() -> None:
    assert resource_metadata_urls("https://x.example/api/mcp") == [
        "https://x.example/.well-known/oauth-protected-resource/api/mcp",
        "https://x.example/.well-known/oauth-protected-resource",
    ]
    assert resource_metadata_urls("https://x.example") == ["https://x.example/.well-known/oauth-protected-resource"]


def test_metadata_urls_in_the_spec_order() -> None:
    assert metadata_urls("https://auth.example.com/tenant1") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]
    assert metadata_urls("https://auth.example.com") == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize(("published", "endpoint", "ok"), [
    ("https://x.example/mcp", "https://x.example/mcp", True),
    ("https://x.example", "https://x.example/mcp", True),
    ("https://x.example/", "https://x.example/mcp", True),
    ("HTTPS://X.example/mcp", "https://x.example/mcp", True),
    ("https://x.example:443/mcp", "https://x.example/mcp", True),
    ("https://x.example/mcp", "https://x.example/mcp/", True),
    ("https://evil.example.com/mcp", "https://x.example/mcp", False),
    ("https://x.example/other", "https://x.example/mcp", False),
    ("https://x.example/mc", "https://x.example/mcp", False),
    ("http://x.example/mcp", "https://x.example/mcp", False),
    ("https://x.example:8443/mcp", "https://x.example/mcp", False),
    ("https://x.example/mcp#f", "https://x.example/mcp", False),
])
def test_resource_matches(published: str, endpoint: str, ok: bool) -> None:
    assert resource_matches(published, endpoint) is ok


# -- protected resource metadata over HTTP -------------------------------------------------------

def test_the_challenge_url_is_used_first() -> None:
    with ResourceMetadataServer(paths=["/custom/metadata.json"], authorization_servers=["https://as.example"]) as rs:
        found = discover_resource(rs.endpoint, rs.base_url + "/custom/metadata.json", timeout=T)
        assert found is not None and found.authorization_servers == ("https://as.example",)
        assert rs.paths() == ["/custom/metadata.json"]


def test_well_known_urls_tried_in_order() -> None:
    with ResourceMetadataServer(paths=["/.well-known/oauth-protected-resource"], authorization_servers=["https://as.example"]) as rs:
        rs._resource = rs.base_url  # a root document speaks for the endpoint below it
        found = discover_resource(rs.endpoint, None, timeout=T)
        assert found is not None and found.resource == rs.base_url
        assert rs.paths() == ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]


def test_path_document_first_and_root_never_asked() -> None:
    with ResourceMetadataServer(authorization_servers=["https://as.example"], scopes_supported=["a", "b"]) as rs:
        found = discover_resource(rs.endpoint, None, timeout=T)
        assert found is not None and found.scopes_supported == ("a", "b")
        assert rs.paths() == ["/.well-known/oauth-protected-resource/mcp"]


def test_a_failing_hint_falls_back_to_the_well_known_urls() -> None:
    with ResourceMetadataServer(authorization_servers=["https://as.example"]) as rs:
        assert discover_resource(rs.endpoint, rs.base_url + "/nothing-here", timeout=T) is not None


def test_resource_mismatch_is_refused() -> None:
    with ResourceMetadataServer(authorization_servers=["https://as.example"], resource="https://evil.example.com/mcp") as rs:
        with pytest.raises(OAuthError, match="evil.example.com"):
            discover_resource(rs.endpoint, None, timeout=T)


def test_no_authorization_server_is_refused() -> None:
    with ResourceMetadataServer() as rs, pytest.raises(OAuthError, match="no authorization server"):
        discover_resource(rs.endpoint, None, timeout=T)


def test_no_metadata_at_all_is_none() -> None:
    with ResourceMetadataServer(paths=[]) as rs:
        assert discover_resource(rs.endpoint, None, timeout=T) is None


# -- authorization server metadata over HTTP -----------------------------------------------------

@pytest.mark.parametrize("where", ["oauth", "openid-insert", "openid-append"])
def test_each_location_with_an_issuer_path(where: str) -> None:
    with OAuthServer(issuer_path="/tenant1", metadata_at=[where]) as server:
        found = discover_authorization_server(server.issuer, timeout=T)
        assert found is not None and found.issuer == server.issuer
        tried = server.paths("GET")
        expected = list(server.metadata_paths().values())
        assert tried == expected[: expected.index(server.metadata_paths()[where]) + 1]
        assert "/.well-known/oauth-authorization-server" not in tried  # never the root for a path issuer


def test_openid_at_the_root_after_rfc8414() -> None:
    with OAuthServer(metadata_at=["openid-insert"]) as server:
        found = discover_authorization_server(server.issuer, timeout=T)
        assert found is not None
        assert server.paths("GET") == ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"]


def test_issuer_mismatch_is_never_used() -> None:
    with OAuthServer(metadata_issuer="https://attacker.example.com") as server:
        with pytest.raises(OAuthError, match="does not name the issuer"):
            discover_authorization_server(server.issuer, timeout=T)


def test_metadata_fields_read() -> None:
    with OAuthServer(cimd=True, scopes_supported=["a", "offline_access"], iss_supported=True) as server:
        found = discover_authorization_server(server.issuer, timeout=T)
        assert found is not None
        assert found.client_id_metadata_document_supported and found.iss_parameter_supported
        assert found.scopes_supported == ("a", "offline_access")
        assert found.registration_endpoint == server.issuer + "/register"


def test_discover_both_steps_and_the_2025_03_26_fallback() -> None:
    with OAuthServer() as server, ResourceMetadataServer(authorization_servers=[server.issuer]) as rs:
        found = discover(rs.endpoint, None, timeout=T)
        assert found.server.issuer == server.issuer and found.resource == rs.endpoint
    with ResourceMetadataServer(paths=[]) as rs:  # no metadata anywhere: the origin's default endpoints
        found = discover(rs.endpoint, None, timeout=T)
        assert found.resource_metadata is None and found.server.token_endpoint == rs.base_url + "/token"
        assert found.resource == rs.endpoint
