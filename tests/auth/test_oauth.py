"""OAuth's flow through its HttpCredentials face (refused/authorization), against a real loopback
authorization server and a real protected resource metadata server."""

from __future__ import annotations

import contextlib
import http.client
import logging
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from mcpsync.auth.client.discovery import OAuthError
from mcpsync.auth.resource.jwt import JwtVerifier
from mcpsync.auth.client.oauth import OAuth
from mcpsync.auth.client.store import MemoryTokenStore

from .._timeouts import LONG
from .authority import FakeClock
from .oauth_server import Client, OAuthServer, ResourceMetadataServer

REDIRECT = "http://127.0.0.1:9/callback"  # never listened on: the stand-in browser brings the redirect back


class Browser:
    """The user's browser for a server that approves at once: GET the authorization URL, keep the redirect."""

    def __init__(self, tamper: dict[str, str] | None = None) -> None:
        self.opened: list[str] = []
        self._location: str | None = None
        self._tamper = tamper or {}

    def open(self, url: str) -> None:
        self.opened.append(url)
        parts = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=LONG)
        try:
            conn.request("GET", f"{parts.path}?{parts.query}")
            response = conn.getresponse()
            response.read()
            location = response.getheader("Location")
        finally:
            conn.close()
        assert location, f"no redirect: HTTP {response.status}"
        if self._tamper:
            p = urllib.parse.urlsplit(location)
            fields = dict(urllib.parse.parse_qsl(p.query))
            fields.update(self._tamper)
            location = urllib.parse.urlunsplit((p.scheme, p.netloc, p.path, urllib.parse.urlencode(fields), ""))
        self._location = location

    def callback(self) -> str:
        assert self._location is not None
        return self._location


class World:
    def __init__(self, server: OAuthServer, rs: ResourceMetadataServer) -> None:
        self.server = server
        self.rs = rs
        self.browser = Browser()
        self.store = MemoryTokenStore()

    @property
    def url(self) -> str:
        return self.rs.endpoint

    def oauth(self, **kwargs: Any) -> OAuth:
        options: dict[str, Any] = {"redirect_uri": REDIRECT, "redirect_handler": self.browser.open, "callback": self.browser.callback,
                                   "token_store": self.store, "timeout": LONG, "login_timeout": LONG}
        options.update(kwargs)
        return OAuth(**options)

    def challenge(self, scope: str | None = None, error: str | None = None) -> str:
        value = f'Bearer resource_metadata="{self.rs.base_url}{self.rs.metadata_paths[0]}"'
        if error:
            value += f', error="{error}"'
        if scope:
            value += f', scope="{scope}"'
        return value

    def claims(self, header: str | None) -> dict[str, Any]:
        assert header is not None and header.startswith("Bearer ")
        verifier = JwtVerifier(jwks_url=self.server.base_url + "/jwks.json", issuer=self.server.issuer, audience=self.url)
        principal = verifier.verify(header[7:])
        assert principal is not None
        return dict(principal.claims)


@contextlib.contextmanager
def world(rs_scopes: list[str] | None = None, **server_options: Any) -> Iterator[World]:
    with OAuthServer(**server_options) as server, ResourceMetadataServer(authorization_servers=[], scopes_supported=rs_scopes) as rs:
        rs.authorization_servers = [server.issuer]
        yield World(server, rs)


def log_in(w: World, oauth: OAuth, **challenge: Any) -> str:
    assert oauth.refused(w.url, 401, w.challenge(**challenge), None) is True
    header = oauth.authorization(w.url)
    assert header is not None
    return header


# -- the whole flow --------------------------------------------------------------------------------

def test_first_refusal_registers_logs_in_and_the_token_is_accepted() -> None:
    with world() as w:
        oauth = w.oauth()
        assert oauth.authorization(w.url) is None
        header = log_in(w, oauth)
        claims = w.claims(header)
        assert claims["aud"] == w.url
        (registration,) = w.server.registration_requests()
        body = registration.body
        assert body["application_type"] == "native"
        assert body["redirect_uris"] == [REDIRECT]
        assert "refresh_token" in body["grant_types"] and "authorization_code" in body["grant_types"]
        assert body["token_endpoint_auth_method"] == "none"
        (authorize,) = w.server.authorization_requests()
        q = authorize.query
        assert q["code_challenge_method"] == "S256" and len(q["code_challenge"]) == 43
        assert q["resource"] == w.url and q["state"] and q["redirect_uri"] == REDIRECT
        (token,) = w.server.token_requests()
        assert token.form["grant_type"] == "authorization_code" and token.form["resource"] == w.url
        assert len(token.form["code_verifier"]) >= 43


def test_a_replaced_token_means_retry_at_once() -> None:
    with world() as w:
        oauth = w.oauth()
        header = log_in(w, oauth)
        before = len(w.server.requests)
        assert oauth.refused(w.url, 401, w.challenge(), "Bearer something-older") is True
        assert oauth.authorization(w.url) == header and len(w.server.requests) == before


def test_not_a_refusal_status() -> None:
    with world() as w:
        assert w.oauth().refused(w.url, 500, None, None) is False


# -- registration paths and token endpoint authentication ----------------------------------------

def test_pre_registered_client_with_client_secret_basic() -> None:
    with world(registration=False, auth_methods=["client_secret_basic"],
               clients=[Client("pre-client", "pre-secret", "client_secret_basic")]) as w:
        log_in(w, w.oauth(client_id="pre-client", client_secret="pre-secret"))
        assert w.server.registration_requests() == []
        (token,) = w.server.token_requests()
        assert token.headers["authorization"].startswith("Basic ") and "client_secret" not in token.form


def test_client_secret_post_when_that_is_all_the_server_takes() -> None:
    with world(auth_methods=["client_secret_post"]) as w:
        log_in(w, w.oauth())
        assert w.server.registration_requests()[0].body["token_endpoint_auth_method"] == "client_secret_post"
        (token,) = w.server.token_requests()
        assert token.form["client_secret"] and "authorization" not in token.headers


def test_client_secret_basic_after_registration() -> None:
    with world(auth_methods=["client_secret_basic"]) as w:
        log_in(w, w.oauth())
        (token,) = w.server.token_requests()
        assert token.headers["authorization"].startswith("Basic ") and "client_secret" not in token.form


def test_public_client_sends_only_its_id() -> None:
    with world(auth_methods=["none"]) as w:
        log_in(w, w.oauth())
        (token,) = w.server.token_requests()
        assert token.form["client_id"].startswith("dcr-") and "authorization" not in token.headers


def test_client_id_metadata_document_when_supported() -> None:
    url = "https://client.example.com/mcpsync.json"
    with world(cimd=True) as w:
        log_in(w, w.oauth(client_metadata_url=url))
        assert w.server.registration_requests() == []
        assert w.server.authorization_requests()[0].query["client_id"] == url


def test_registration_when_metadata_documents_are_not_supported() -> None:
    with world() as w:
        log_in(w, w.oauth(client_metadata_url="https://client.example.com/mcpsync.json"))
        assert len(w.server.registration_requests()) == 1


def test_no_way_to_register_is_an_error() -> None:
    with world(registration=False) as w, pytest.raises(OAuthError, match="client_id"):
        w.oauth().refused(w.url, 401, w.challenge(), None)


# -- the checks before the code goes anywhere ------------------------------------------------------

@pytest.mark.parametrize(("supported", "mode", "accepted"), [
    (True, "correct", True),
    (True, "missing", False),
    (True, "wrong", False),
    (True, "normalized", False),
    (False, "missing", True),
    (None, "missing", True),
    (False, "correct", True),
    (None, "wrong", False),
    (False, "wrong", False),
])
def test_iss_rules(supported: bool | None, mode: str, accepted: bool) -> None:
    with world(iss_supported=supported, iss_mode=mode) as w:
        oauth = w.oauth()
        if accepted:
            log_in(w, oauth)
        else:
            with pytest.raises(OAuthError, match="iss"):
                oauth.refused(w.url, 401, w.challenge(), None)
            assert w.server.token_requests() == [] and oauth.authorization(w.url) is None


def test_a_wrong_state_is_refused_before_the_token_request() -> None:
    with world() as w:
        w.browser = Browser(tamper={"state": "forged"})
        with pytest.raises(OAuthError, match="state"):
            w.oauth().refused(w.url, 401, w.challenge(), None)
        assert w.server.token_requests() == []


def test_an_error_answer_names_only_its_code() -> None:
    with world() as w:
        w.browser = Browser(tamper={"error": "access_denied", "error_description": "a long <b>text</b>"})
        with pytest.raises(OAuthError, match="access_denied") as caught:
            w.oauth().refused(w.url, 401, w.challenge(), None)
        assert "<b>" not in str(caught.value)


def test_resource_mismatch_stops_before_authorization() -> None:
    with world() as w:
        w.rs._resource = "https://evil.example.com/mcp"
        with pytest.raises(OAuthError, match="evil"):
            w.oauth().refused(w.url, 401, w.challenge(), None)
        assert w.server.requests == []


def test_metadata_issuer_mismatch_stops_before_registration() -> None:
    with world(metadata_issuer="https://attacker.example.com") as w:
        with pytest.raises(OAuthError, match="issuer"):
            w.oauth().refused(w.url, 401, w.challenge(), None)
        assert w.server.registration_requests() == [] and w.server.authorization_requests() == []


def test_pkce_without_s256_is_refused() -> None:
    with world(code_challenge_methods=["plain"]) as w, pytest.raises(OAuthError, match="S256"):
        w.oauth().refused(w.url, 401, w.challenge(), None)


# -- scopes ----------------------------------------------------------------------------------------

def scope_asked(w: World, index: int = 0) -> str | None:
    return w.server.authorization_requests()[index].query.get("scope")


def test_scope_from_the_challenge() -> None:
    with world(rs_scopes=["a", "b"]) as w:
        log_in(w, w.oauth(), scope="files:read")
        assert scope_asked(w) == "files:read"


def test_scope_from_scopes_supported() -> None:
    with world(rs_scopes=["a", "b", "c"]) as w:
        log_in(w, w.oauth())
        assert scope_asked(w) == "a b c"


def test_scope_omitted_when_nothing_says() -> None:
    with world() as w:
        log_in(w, w.oauth())
        assert scope_asked(w) is None


def test_offline_access_added_only_when_the_server_lists_it() -> None:
    with world(rs_scopes=["a"], scopes_supported=["a", "offline_access"]) as w:
        log_in(w, w.oauth())
        assert scope_asked(w) == "a offline_access"
    with world(rs_scopes=["a"], scopes_supported=["a", "b"]) as w:
        log_in(w, w.oauth())
        assert scope_asked(w) == "a"


def test_step_up_asks_for_the_union() -> None:
    with world() as w:
        oauth = w.oauth()
        header = log_in(w, oauth, scope="read")
        assert oauth.refused(w.url, 403, w.challenge(scope="write", error="insufficient_scope"), header) is True
        assert scope_asked(w, 1) == "read write"
        assert set(w.claims(oauth.authorization(w.url))["scope"].split()) == {"read", "write"}


def test_step_up_retry_limit() -> None:
    with world() as w:
        oauth = w.oauth()
        log_in(w, oauth, scope="admin")
        refusals = 0
        while oauth.refused(w.url, 403, w.challenge(scope="admin", error="insufficient_scope"), oauth.authorization(w.url)):
            refusals += 1
            assert refusals < 5
        assert len(w.server.authorization_requests()) <= 3


def test_a_403_without_insufficient_scope_stands() -> None:
    with world() as w:
        oauth = w.oauth()
        header = log_in(w, oauth)
        assert oauth.refused(w.url, 403, 'Bearer error="invalid_token"', header) is False


# -- refresh ---------------------------------------------------------------------------------------

def test_refresh_before_expiry() -> None:
    clock = FakeClock()
    with world(expires_in=120, clock=clock) as w:
        oauth = w.oauth(clock=clock)
        first = log_in(w, oauth)
        clock.advance(60)
        assert oauth.authorization(w.url) == first  # not yet within the margin
        clock.advance(40)
        second = oauth.authorization(w.url)
        assert second != first
        assert [r.form["grant_type"] for r in w.server.token_requests()] == ["authorization_code", "refresh_token"]
        assert w.server.token_requests()[1].form["resource"] == w.url


def test_refresh_on_401() -> None:
    with world() as w:
        oauth = w.oauth()
        first = log_in(w, oauth)
        assert oauth.refused(w.url, 401, w.challenge(), first) is True
        assert oauth.authorization(w.url) != first
        assert len(w.server.authorization_requests()) == 1
        assert w.server.token_requests()[-1].form["grant_type"] == "refresh_token"


def test_a_refused_refresh_token_means_a_new_login() -> None:
    with world() as w:
        oauth = w.oauth()
        first = log_in(w, oauth)
        w.server.revoke_refresh_tokens()
        assert oauth.refused(w.url, 401, w.challenge(), first) is True
        assert len(w.server.authorization_requests()) == 2


def test_not_interactive_never_opens_a_browser_but_refreshes() -> None:
    with world() as w:
        opened: list[str] = []
        quiet = w.oauth(interactive=False, redirect_handler=opened.append)
        with pytest.raises(OAuthError, match=r"a login is needed, which this client may not start \(interactive=False\); run: mcpsync login http"):
            quiet.refused(w.url, 401, w.challenge(), None)
        assert opened == [] and w.server.authorization_requests() == []
        first = log_in(w, w.oauth())  # the same store: a token with a refresh token
        quiet = w.oauth(interactive=False, redirect_handler=opened.append)
        assert quiet.authorization(w.url) == first
        assert quiet.refused(w.url, 401, w.challenge(), first) is True
        assert opened == [] and quiet.authorization(w.url) != first
        assert quiet.refused(w.url, 403, w.challenge(scope="x", error="insufficient_scope"), quiet.authorization(w.url)) is False


# -- a changed authorization server --------------------------------------------------------------

def test_migration_to_a_new_authorization_server_registers_again() -> None:
    with world(refresh_tokens=False) as w, OAuthServer() as second:
        oauth = w.oauth()
        first = log_in(w, oauth)
        first_client = w.server.authorization_requests()[0].query["client_id"]
        w.rs.authorization_servers = [second.issuer]
        assert oauth.refused(w.url, 401, w.challenge(), first) is True
        assert len(second.registration_requests()) == 1
        assert second.authorization_requests()[0].query["client_id"] != first_client
        assert all(r.form.get("client_id") != first_client for r in second.token_requests())
        header = oauth.authorization(w.url)
        assert header is not None and header != first


def test_registrations_are_kept_per_issuer() -> None:
    with world(refresh_tokens=False) as w:
        log_in(w, w.oauth())
        log_in(w, w.oauth())  # a new OAuth, the same store: the registration is reused
        assert len(w.server.registration_requests()) == 1


# -- concurrency -----------------------------------------------------------------------------------

def test_concurrent_refusals_cause_one_login() -> None:
    with world() as w:
        oauth = w.oauth()
        barrier = threading.Barrier(6)
        answers: list[bool] = []

        def refuse() -> None:
            barrier.wait(LONG)
            answers.append(oauth.refused(w.url, 401, w.challenge(), None))

        threads = [threading.Thread(target=refuse) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(LONG)
        assert answers == [True] * 6
        assert len(w.server.authorization_requests()) == 1 and len(w.server.registration_requests()) == 1


# -- the browser and the loopback listener ---------------------------------------------------------

def test_loopback_listener_end_to_end_with_a_browser_that_follows_the_redirect() -> None:
    pages: list[bytes] = []

    def browser(url: str) -> None:  # follows the 302 to the listener, like a real browser
        import urllib.request
        with urllib.request.urlopen(url, timeout=LONG) as response:
            pages.append(response.read())

    with world() as w:
        oauth = OAuth(redirect_handler=browser, token_store=w.store, timeout=LONG, login_timeout=LONG)
        assert oauth.refused(w.url, 401, w.challenge(), None) is True
        redirect = w.server.authorization_requests()[0].query["redirect_uri"]
        assert redirect.startswith("http://127.0.0.1:") and redirect.endswith("/callback")
        assert b"close this window" in pages[0]
        w.claims(oauth.authorization(w.url))
        assert not [t for t in threading.enumerate() if t.name == "mcpsync-oauth-callback"]


def test_loopback_listener_times_out() -> None:
    with world() as w:
        oauth = OAuth(redirect_handler=lambda url: None, token_store=w.store, timeout=LONG, login_timeout=0.2)
        with pytest.raises(OAuthError, match="no login arrived"):
            oauth.refused(w.url, 401, w.challenge(), None)


# -- the CLI's verbs and the store -----------------------------------------------------------------

def test_login_and_logout() -> None:
    with world() as w:
        oauth = w.oauth()
        oauth.login(w.url)
        w.claims(oauth.authorization(w.url))
        assert oauth.logout(w.url) is True
        assert oauth.authorization(w.url) is None and w.store.load(w.url) is None
        assert oauth.logout(w.url) is False


def test_tokens_survive_in_the_store() -> None:
    with world() as w:
        header = log_in(w, w.oauth())
        assert w.oauth().authorization(w.url) == header


def test_constructor_refusals() -> None:
    with pytest.raises(ValueError, match="redirect_uri"):
        OAuth(callback=lambda: "x")
    with pytest.raises(ValueError, match="https"):
        OAuth(client_metadata_url="http://client.example.com/x.json")
    with pytest.raises(ValueError, match="loopback"):
        OAuth(redirect_uri="https://app.example.com/cb")
    with pytest.raises(ValueError, match="token_endpoint_auth_method"):
        OAuth(token_endpoint_auth_method="private_key_jwt")
    assert "secret" not in repr(OAuth(client_id="c", client_secret="secret-value"))


# -- nothing secret in logs or errors --------------------------------------------------------------

def test_no_token_secret_or_code_in_logs_or_errors(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with world(auth_methods=["client_secret_post"]) as w:
        oauth = w.oauth()
        header = log_in(w, oauth)
        oauth.refused(w.url, 401, w.challenge(), header)  # a refresh
        w.server.revoke_refresh_tokens()
        w.browser = Browser(tamper={"iss": "https://evil.example.com"})
        oauth = w.oauth()  # the same store, the tampering browser
        with pytest.raises(OAuthError) as caught:
            oauth.refused(w.url, 401, w.challenge(), oauth.authorization(w.url))
        secrets_seen = {token for token in w.server.issued}
        for request in w.server.token_requests():
            secrets_seen.update(v for k, v in request.form.items() if k in ("code", "code_verifier", "client_secret", "refresh_token"))
        text = caplog.text + str(caught.value) + repr(oauth)
        assert secrets_seen and not [s for s in secrets_seen if s in text]


def test_login_is_a_login_and_not_interactive_forbids_it() -> None:
    with world() as w:
        opened: list[str] = []
        with pytest.raises(OAuthError, match="interactive=False forbids"):
            w.oauth(interactive=False, redirect_handler=opened.append).login(w.url)
        assert opened == [] and w.server.authorization_requests() == []
