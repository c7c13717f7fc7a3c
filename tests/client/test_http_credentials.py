"""The HTTP connection and its credentials (`auth=`), against a real protected mcpsync endpoint.

The endpoint is mcpsync's own HTTP server behind `Auth(StaticTokens(...))`; the credentials are
small objects of the test's own, so each rule of the seam (`HttpCredentials`) shows by itself:
the header on every request of both eras, a request sent again after `refused` says so, one
login for many requests refused at once, the refusal as the answer when it says no, its reason
when it cannot log in, and the bound on retries whatever it says.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import mcpsync
from mcpsync import Server, Service
from mcpsync.auth import Auth, BearerToken, Principal, StaticTokens
from mcpsync.auth.client.credentials import MAX_AUTH_RETRIES
from mcpsync.errors import McpsyncError
from tests._timeouts import LONG

pytestmark = pytest.mark.timeout(60)

READER, ADMIN, STALE = "reader-token-0123456789", "admin-token-0123456789ab", "stale-token-0123456789ab"


class Verifier:
    """StaticTokens that also counts what reached it."""

    def __init__(self) -> None:
        self.tokens = StaticTokens({READER: Principal("reader", scopes=frozenset({"read"})), ADMIN: Principal("reader", scopes=frozenset({"read", "admin"}))})
        self.seen: list[str] = []
        self.lock = threading.Lock()

    def verify(self, token: str) -> Principal | None:
        with self.lock:
            self.seen.append(token)
        return self.tokens.verify(token)


@pytest.fixture
def endpoint() -> Iterator[tuple[str, Verifier]]:
    service = Service("guarded")

    @service.tool
    def whoami() -> str:
        return "ok"

    @service.tool(scopes=["admin"])
    def reset() -> str:
        return "reset done"

    verifier = Verifier()
    server = Server("guarded", services=[service], auth=Auth(verifier), shutdown_timeout=LONG)
    url = server.start_http("127.0.0.1", 0, threads=8).url
    yield url, verifier
    assert server.close(LONG)


class Renewing:
    """Starts with `first` and, when refused, moves to `then` (a login), counting logins."""

    def __init__(self, first: str | None, then: str) -> None:
        self.token = first
        self.then = then
        self.logins = 0
        self.refusals: list[tuple[int, str | None, str | None]] = []
        self.lock = threading.Lock()

    def authorization(self, resource: str) -> str | None:
        return f"Bearer {self.token}" if self.token else None

    def refused(self, resource: str, status: int, www_authenticate: str | None, sent: str | None) -> bool:
        with self.lock:
            self.refusals.append((status, www_authenticate, sent))
            if sent != self.authorization(resource):
                return True  # someone logged in meanwhile
            self.logins += 1
            self.token = self.then
            return True


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_a_bearer_token_goes_with_every_request_and_wins_over_a_header(endpoint: tuple[str, Verifier], mode: str) -> None:
    url, verifier = endpoint
    with mcpsync.connect(url, mode=mode, auth=BearerToken(READER), headers={"Authorization": "Bearer ignored-token-0123456"}, timeout=LONG) as session:
        assert session.call_tool("whoami", {})["content"][0]["text"] == "ok"
    assert set(verifier.seen) == {READER}  # initialize, notifications, the GET stream and DELETE too


def test_a_refused_request_is_sent_again_once_the_credentials_logged_in(endpoint: tuple[str, Verifier]) -> None:
    url, _ = endpoint
    credentials = Renewing(None, READER)
    with mcpsync.connect(url, mode="modern", auth=credentials, timeout=LONG) as session:
        assert session.call_tool("whoami", {})["content"][0]["text"] == "ok"
    assert credentials.logins == 1
    status, challenge, sent = credentials.refusals[0]
    assert (status, sent) == (401, None)
    assert challenge is not None and challenge.startswith("Bearer resource_metadata=")


def test_many_requests_refused_at_once_cause_one_login(endpoint: tuple[str, Verifier]) -> None:
    url, _ = endpoint
    credentials = Renewing(READER, READER)
    with mcpsync.connect(url, mode="modern", auth=credentials, timeout=LONG) as session:
        credentials.token = STALE  # the token expires under the open session
        results: list[Any] = []
        threads = [threading.Thread(target=lambda: results.append(session.call_tool("whoami", {}))) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(LONG)
    assert [result["content"][0]["text"] for result in results] == ["ok"] * 8
    assert credentials.logins == 1


def test_a_403_is_shown_to_the_credentials_which_may_step_up(endpoint: tuple[str, Verifier]) -> None:
    url, _ = endpoint
    credentials = Renewing(READER, ADMIN)
    with mcpsync.connect(url, mode="modern", auth=credentials, timeout=LONG) as session:
        assert "reset" not in {tool["name"] for tool in session.list_tools()}
        assert session.call_tool("reset", {})["content"][0]["text"] == "reset done"
    [(status, challenge, sent)] = credentials.refusals
    assert (status, sent) == (403, f"Bearer {READER}")
    assert challenge is not None and 'error="insufficient_scope"' in challenge and 'scope="admin"' in challenge


def test_when_the_credentials_give_up_the_refusal_is_the_answer(endpoint: tuple[str, Verifier]) -> None:
    url, _ = endpoint
    with pytest.raises(McpsyncError, match="Unauthorized: the access token is not valid"):
        with mcpsync.connect(url, mode="modern", auth=BearerToken(STALE), timeout=LONG) as session:
            session.list_tools()


def test_when_the_credentials_cannot_log_in_the_call_fails_with_their_reason(endpoint: tuple[str, Verifier]) -> None:
    url, _ = endpoint

    class Broken(Renewing):
        def refused(self, resource: str, status: int, www_authenticate: str | None, sent: str | None) -> bool:
            raise McpsyncError("the authorization server's metadata names another issuer")

    with pytest.raises(McpsyncError, match=r"not authorized: the authorization server's metadata names another issuer"):
        with mcpsync.connect(url, mode="modern", auth=Broken(None, READER), timeout=LONG) as session:
            session.list_tools()


def test_a_request_is_sent_again_at_most_max_auth_retries_times(endpoint: tuple[str, Verifier]) -> None:
    url, verifier = endpoint

    class Hopeful(Renewing):
        def refused(self, resource: str, status: int, www_authenticate: str | None, sent: str | None) -> bool:
            self.refusals.append((status, www_authenticate, sent))
            return True

    credentials = Hopeful(STALE, STALE)
    with pytest.raises(McpsyncError, match="Unauthorized"):
        with mcpsync.connect(url, mode="modern", auth=credentials, timeout=LONG) as session:
            session.list_tools()
    per_request = MAX_AUTH_RETRIES + 1
    assert len(verifier.seen) % per_request == 0 and verifier.seen  # each request: the first send and its retries
    assert len(credentials.refusals) == len(verifier.seen) // per_request * MAX_AUTH_RETRIES


def test_auth_is_for_urls_only() -> None:
    with pytest.raises(TypeError, match="auth= is for an http"):
        mcpsync.connect(["mcpsync", "serve"], auth=BearerToken(READER))
    with pytest.raises(ValueError, match="bearer token"):
        BearerToken("two words")
    assert "0123" not in repr(BearerToken(READER))


def test_a_login_that_fails_is_not_tried_again_by_falling_back_to_the_other_era(endpoint: tuple[str, Verifier]) -> None:
    url, _ = endpoint

    class Failing(Renewing):
        def refused(self, resource: str, status: int, www_authenticate: str | None, sent: str | None) -> bool:
            self.logins += 1
            raise McpsyncError("the user closed the browser")

    credentials = Failing(None, READER)
    with pytest.raises(McpsyncError, match="the user closed the browser"):
        mcpsync.connect(url, mode="auto", auth=credentials, timeout=LONG)
    assert credentials.logins == 1  # server/discover's refusal only; no initialize asked again
