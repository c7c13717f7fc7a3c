"""What the client asks an authorization server for, beyond the first login: a registration that
names no scope (RFC 7591 would make it the client's allowed set, and a step-up beyond it an
`invalid_scope`), a refresh that names none (RFC 6749 section 6: the grant as it is; asking again
for scopes the server did not grant is refused), and a refresh token that is refused for good
dropped at the first refusal, never sent again before every request. The loopback server here
injects the refusals; integration/test_oidc_provider.py meets the same cases in oidc-provider."""

from __future__ import annotations

from typing import Any

from mcpsync.auth.client.oauth import OAuth

from .authority import FakeClock
from .oauth_server import OAuthServer, Recorded, ResourceMetadataServer, _Reply
from .test_oauth import World, log_in, world


class RefusesRefresh(OAuthServer):
    """Answers every refresh with this OAuth error (400)."""

    def __init__(self, error: str, **options: Any) -> None:
        super().__init__(**options)
        self.error = error

    def handle(self, request: Recorded) -> _Reply:
        if request.method == "POST" and request.form.get("grant_type") == "refresh_token":
            return _Reply(400, {"error": self.error})
        return super().handle(request)


def refresh_requests(w: World) -> list[Recorded]:
    return [request for request in w.server.token_requests() if request.form["grant_type"] == "refresh_token"]


def test_a_registration_names_no_scope_though_the_login_asks_for_some() -> None:
    with world(scopes_supported=["read", "admin", "offline_access"]) as w:
        log_in(w, w.oauth(), scope="read")
        (registration,) = w.server.registration_requests()
        assert "scope" not in registration.body
        (authorize,) = w.server.authorization_requests()
        assert authorize.query["scope"].split() == ["read", "offline_access"]


def test_a_refresh_names_no_scope_when_the_server_granted_fewer_than_asked() -> None:
    clock = FakeClock()
    granted_only_read = lambda asked: [scope for scope in asked if scope != "offline_access"]  # noqa: E731
    with world(scopes_supported=["read", "offline_access"], grant=granted_only_read, expires_in=60, clock=clock) as w:
        oauth = w.oauth(clock=clock)
        first = log_in(w, oauth, scope="read")
        clock.advance(120)
        assert oauth.authorization(w.url) not in (None, first)
        (refreshed,) = refresh_requests(w)
        assert "scope" not in refreshed.form and refreshed.form["resource"] == w.url


def test_a_refresh_token_refused_invalid_scope_is_dropped_at_once() -> None:
    for error in ("invalid_scope", "invalid_grant"):
        clock = FakeClock()
        with RefusesRefresh(error, expires_in=60, clock=clock) as server, \
                ResourceMetadataServer(authorization_servers=[server.issuer], scopes_supported=None) as rs:
            w = World(server, rs)
            oauth: OAuth = w.oauth(clock=clock)
            first = log_in(w, oauth, scope="read")
            clock.advance(120)
            for _ in range(3):
                assert oauth.authorization(w.url) == first  # the old token, still sent: the server will say
            assert len(refresh_requests(w)) == 1, error
            kept = w.store.load(w.url)
            assert kept is not None and kept["tokens"]["refresh_token"] is None
