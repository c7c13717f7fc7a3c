"""End to end: `mcpsync.connect(url, auth=OAuth(...))` against mcpsync's own protected endpoint
(`Auth(JwtVerifier(...))` on `start_http`), logging in at the loopback authorization server with a
stand-in browser that follows the redirect to OAuth's own loopback listener."""

from __future__ import annotations

import urllib.request

import pytest

import mcpsync
from mcpsync.auth.client.oauth import OAuth
from mcpsync.auth.client.store import MemoryTokenStore
from tests._timeouts import LONG

from .authority import FakeClock
from .oauth_server import OAuthServer, protected_endpoint

pytestmark = pytest.mark.timeout(60)


def follow(url: str) -> None:
    """The user's browser: open the authorization URL and follow its redirect to the listener."""
    with urllib.request.urlopen(url, timeout=LONG) as response:
        response.read()


def test_login_call_refresh_and_step_up_through_connect() -> None:
    clock = FakeClock(1_800_000_000.0)
    with OAuthServer(clock=clock, expires_in=600) as server, protected_endpoint(server, clock=clock, leeway=0) as url:
        oauth = OAuth(redirect_handler=follow, token_store=MemoryTokenStore(), clock=clock, timeout=LONG, login_timeout=LONG)
        with mcpsync.connect(url, auth=oauth, timeout=LONG) as session:
            assert session.call_tool("whoami", {})["content"][0]["text"] == "alice"
            assert len(server.authorization_requests()) == 1
            assert server.authorization_requests()[0].query["scope"] == "read"

            clock.advance(700)  # expired mid-session: refreshed before the next request (or on its 401)
            assert session.call_tool("whoami", {})["content"][0]["text"] == "alice"
            assert [r.form["grant_type"] for r in server.token_requests()] == ["authorization_code", "refresh_token"]
            assert len(server.authorization_requests()) == 1

            assert session.call_tool("reset", {})["content"][0]["text"] == "reset done"  # 403, step-up, retry
            assert len(server.authorization_requests()) == 2
            assert set(server.authorization_requests()[1].query["scope"].split()) == {"read", "admin"}


def test_not_interactive_without_a_login_is_refused() -> None:
    clock = FakeClock()
    with OAuthServer(clock=clock) as server, protected_endpoint(server, clock=clock, leeway=0) as url:
        opened: list[str] = []
        oauth = OAuth(interactive=False, redirect_handler=opened.append, token_store=MemoryTokenStore(), timeout=LONG)
        with pytest.raises(mcpsync.McpsyncError):
            with mcpsync.connect(url, auth=oauth, timeout=LONG) as session:
                session.list_tools()
        assert opened == [] and server.authorization_requests() == []
