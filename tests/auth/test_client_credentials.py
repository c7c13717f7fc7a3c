"""ClientCredentials: the client credentials grant with client_secret_basic and private_key_jwt, over real HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mcpsync.auth.client.client_credentials import ClientCredentials
from mcpsync.auth.client.discovery import OAuthError
from mcpsync.auth.resource.jwt import JwtVerifier

from .._timeouts import LONG
from .authority import FakeClock
from .oauth_server import Client, OAuthServer, ResourceMetadataServer


@contextlib.contextmanager
def world(client: Client, scopes: list[str] | None = None) -> Iterator[tuple[OAuthServer, ResourceMetadataServer]]:
    with OAuthServer(registration=False, clients=[client], auth_methods=[client.method]) as server, \
            ResourceMetadataServer(scopes_supported=scopes) as rs:
        rs.authorization_servers = [server.issuer]
        yield server, rs


def accepted(server: OAuthServer, rs: ResourceMetadataServer, header: str | None) -> dict[str, object]:
    assert header is not None and header.startswith("Bearer ")
    verifier = JwtVerifier(jwks_url=server.base_url + "/jwks.json", issuer=server.issuer, audience=rs.endpoint)
    principal = verifier.verify(header[7:])
    assert principal is not None
    return dict(principal.claims)


def test_client_secret_basic() -> None:
    with world(Client("machine", "machine-secret", "client_secret_basic"), scopes=["jobs"]) as (server, rs):
        auth = ClientCredentials("machine", client_secret="machine-secret", timeout=LONG)
        assert auth.authorization(rs.endpoint) is None
        assert auth.refused(rs.endpoint, 401, rs.challenge(), None) is True
        claims = accepted(server, rs, auth.authorization(rs.endpoint))
        assert claims["scope"] == "jobs" and claims["client_id"] == "machine"
        (request,) = server.token_requests()
        assert request.form["grant_type"] == "client_credentials" and request.form["resource"] == rs.endpoint
        assert request.headers["authorization"].startswith("Basic ") and "client_secret" not in request.form
        assert "machine-secret" not in repr(auth)


def test_private_key_jwt() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    with world(Client("signer", None, "private_key_jwt", public_key=key.public_key())) as (server, rs):
        auth = ClientCredentials("signer", private_key=pem, signing_algorithm="ES256", timeout=LONG)
        assert auth.refused(rs.endpoint, 401, rs.challenge(), None) is True
        accepted(server, rs, auth.authorization(rs.endpoint))
        (request,) = server.token_requests()
        assert request.form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        assert "authorization" not in request.headers and "BEGIN" not in repr(auth)


def test_a_wrong_secret_is_an_error_without_the_secret() -> None:
    with world(Client("machine", "right", "client_secret_basic")) as (_, rs):
        auth = ClientCredentials("machine", client_secret="wrong-secret-value", timeout=LONG)
        with pytest.raises(OAuthError, match="invalid_client") as caught:
            auth.refused(rs.endpoint, 401, rs.challenge(), None)
        assert "wrong-secret-value" not in str(caught.value)


def test_step_up_once_then_the_refusal_stands() -> None:
    with world(Client("machine", "s", "client_secret_basic")) as (server, rs):
        auth = ClientCredentials("machine", client_secret="s", timeout=LONG)
        assert auth.refused(rs.endpoint, 401, rs.challenge(), None)
        challenge = 'Bearer error="insufficient_scope", scope="admin"'
        assert auth.refused(rs.endpoint, 403, challenge, auth.authorization(rs.endpoint)) is True
        assert server.token_requests()[-1].form["scope"] == "admin"
        assert auth.refused(rs.endpoint, 403, challenge, auth.authorization(rs.endpoint)) is False


def test_an_expired_token_is_not_sent() -> None:
    clock = FakeClock()
    with world(Client("machine", "s", "client_secret_basic")) as (server, rs):
        server.clock = clock
        server.expires_in = 60
        auth = ClientCredentials("machine", client_secret="s", timeout=LONG, clock=clock)
        assert auth.refused(rs.endpoint, 401, rs.challenge(), None)
        assert auth.authorization(rs.endpoint) is not None
        clock.advance(55)
        assert auth.authorization(rs.endpoint) is None


def test_exactly_one_credential() -> None:
    with pytest.raises(ValueError):
        ClientCredentials("c")
    with pytest.raises(ValueError):
        ClientCredentials("c", client_secret="s", private_key="k")
