"""IntrospectionVerifier against the loopback authority's RFC 7662 endpoint.

The authority counts introspection calls, so "answered from the cache" is a count that did not
move; time is a `FakeClock` shared with the verifier.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from mcpsync.auth.resource.introspection import IntrospectionVerifier
from mcpsync.auth.resource.principal import InvalidToken, VerifierUnavailable

from .authority import Authority, FakeClock, silent_url, unreachable_url

NOW = 1_800_000_000.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def authority(clock: FakeClock):
    with Authority(keys=[], clock=clock) as running:
        yield running


def make(authority: Authority, clock: FakeClock, endpoint: str | None = None, **settings: Any) -> IntrospectionVerifier:
    options: dict[str, Any] = {"client_id": authority.client_id, "client_secret": authority.client_secret,
                               "audience": authority.audience, "clock": clock}
    options.update(settings)
    return IntrospectionVerifier(endpoint or authority.introspection_url, **options)


def refused(verifier: IntrospectionVerifier, token: str) -> str:
    with pytest.raises(InvalidToken) as caught:
        verifier.verify(token)
    assert token not in str(caught.value)
    return str(caught.value)


def test_an_active_token_becomes_its_principal(authority: Authority, clock: FakeClock) -> None:
    token = authority.register(answer={"active": True, "sub": "bob", "client_id": "app", "scope": "read write",
                                       "iss": authority.issuer, "aud": authority.audience, "exp": NOW + 600, "extra": 1})
    principal = make(authority, clock).verify(token)
    assert (principal.subject, principal.client_id, principal.scopes) == ("bob", "app", {"read", "write"})
    assert principal.issuer == authority.issuer and principal.expires_at == NOW + 600
    assert principal.claims["extra"] == 1
    assert authority.introspection_requests == [{"token": token, "token_type_hint": "access_token"}]
    assert authority.user_agents[0].startswith("mcpsync/")


def test_username_stands_in_for_a_missing_sub(authority: Authority, clock: FakeClock) -> None:
    token = authority.register(answer={"active": True, "username": "carol", "aud": authority.audience})
    assert make(authority, clock).verify(token).subject == "carol"


def test_an_inactive_token_is_refused_and_remembered_for_cache_ttl(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock, cache_ttl=60)
    token = "never-registered-token-0001"
    assert refused(verifier, token) == "the token is not active"
    assert refused(verifier, token) == "the token is not active"
    assert authority.introspections == 1
    authority.register(token)  # the authorization server changes its mind ...
    clock.advance(60)
    assert verifier.verify(token).subject == "alice"  # ... which is heard after cache_ttl
    assert authority.introspections == 2


def test_an_active_answer_is_cached_until_exp_or_cache_ttl(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock, cache_ttl=60)
    short = authority.register(answer={"active": True, "sub": "a", "aud": authority.audience, "exp": NOW + 20})
    long = authority.register(answer={"active": True, "sub": "b", "aud": authority.audience, "exp": NOW + 10_000})
    verifier.verify(short)
    verifier.verify(long)
    clock.advance(19)
    verifier.verify(short)
    verifier.verify(long)
    assert authority.introspections == 2
    clock.advance(1)
    verifier.verify(short)  # past its exp: asked again (the authority still says active, within leeway)
    assert authority.introspections == 3
    clock.advance(40)
    verifier.verify(long)  # past cache_ttl: asked again, so a revocation is heard
    assert authority.introspections == 4


def test_a_revoked_token_stops_working_within_cache_ttl(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock, cache_ttl=30)
    token = authority.register()
    verifier.verify(token)
    authority.register(token, {"active": False})
    clock.advance(29)
    verifier.verify(token)
    clock.advance(1)
    assert refused(verifier, token) == "the token is not active"


@pytest.mark.parametrize(("answer", "reason"), [
    ({"aud": "https://other.test/mcp"}, "wrong audience"),
    ({"aud": ["https://a.test", "https://b.test"]}, "wrong audience"),
    ({"aud": None}, "the token has no audience"),
    ({"iss": "https://evil.test"}, "wrong issuer"),
    ({"exp": NOW - 31}, "the token has expired"),
    ({"nbf": NOW + 31}, "the token is not valid yet"),
])
def test_the_answer_is_checked(authority: Authority, clock: FakeClock, answer: dict[str, Any], reason: str) -> None:
    full = {"active": True, **authority.claims(), **answer}
    token = authority.register(answer={key: value for key, value in full.items() if value is not None})
    assert refused(make(authority, clock, issuer=authority.issuer), token) == reason


def test_audience_none_accepts_any_audience_and_a_list_needs_one(authority: Authority, clock: FakeClock) -> None:
    elsewhere = authority.register(answer={"active": True, "sub": "x", "aud": "https://other.test"})
    assert make(authority, clock, audience=None).verify(elsewhere).subject == "x"
    listed = authority.register(answer={"active": True, "sub": "y", "aud": ["https://other.test", authority.audience]})
    assert make(authority, clock).verify(listed).subject == "y"


def test_audience_must_be_passed_explicitly(authority: Authority) -> None:
    with pytest.raises(TypeError):
        IntrospectionVerifier(authority.introspection_url)  # type: ignore[call-arg]


def test_no_issuer_configured_accepts_any_issuer(authority: Authority, clock: FakeClock) -> None:
    token = authority.register(answer={"active": True, **authority.claims({"iss": "https://somewhere.test"})})
    assert make(authority, clock).verify(token).issuer == "https://somewhere.test"


def test_wrong_client_credentials_are_unavailable_not_the_clients_fault(authority: Authority, clock: FakeClock) -> None:
    token = authority.register()
    with pytest.raises(VerifierUnavailable):
        make(authority, clock, client_secret="not-the-secret").verify(token)
    with pytest.raises(VerifierUnavailable):
        make(authority, clock, client_id=None, client_secret=None).verify(token)


def test_credentials_are_form_encoded_inside_basic(clock: FakeClock) -> None:
    with Authority(keys=[], client_id="client:one", client_secret="s3cret with spaces & %", clock=clock) as authority:
        assert make(authority, clock).verify(authority.register()).subject == "alice"
        sent = base64.b64decode(str(authority.introspection_authorizations[0]).removeprefix("Basic ")).decode()
        assert sent == "client%3Aone:s3cret+with+spaces+%26+%25"


def test_without_credentials_no_authorization_is_sent(clock: FakeClock) -> None:
    with Authority(keys=[], client_id=None, client_secret=None, clock=clock) as authority:
        assert make(authority, clock).verify(authority.register()).subject == "alice"
        assert authority.introspection_authorizations == [None]


def test_a_client_id_needs_its_secret(authority: Authority, clock: FakeClock) -> None:
    with pytest.raises(ValueError):
        make(authority, clock, client_secret=None)
    with pytest.raises(ValueError):
        make(authority, clock, endpoint="ftp://127.0.0.1/introspect")


def test_the_repr_shows_no_secret(authority: Authority, clock: FakeClock) -> None:
    assert authority.client_secret not in repr(make(authority, clock))


@pytest.mark.parametrize(("failure", "body"), [
    (500, None), (503, None), (302, None), (404, None),
    (None, b"<html>not json</html>"), (None, b"[]"), (None, b'{"sub": "x"}'), (None, b'{"active": "true"}'),
    (None, b'{"active": true, "pad": "' + b"x" * (1 << 20) + b'"}'),
])
def test_an_unusable_answer_is_unavailable_and_not_cached(authority: Authority, clock: FakeClock, failure: int | None,
                                                          body: bytes | None) -> None:
    verifier = make(authority, clock)
    token = authority.register()
    authority.introspection_failure, authority.introspection_body = failure, body
    with pytest.raises(VerifierUnavailable):
        verifier.verify(token)
    authority.introspection_failure = authority.introspection_body = None
    assert verifier.verify(token).subject == "alice"  # asked again at once: the failure was not remembered
    assert authority.introspections == 2


def test_an_unreachable_endpoint_is_unavailable(clock: FakeClock) -> None:
    verifier = IntrospectionVerifier(unreachable_url("/introspect"), audience="https://mcp.test", clock=clock)
    with pytest.raises(VerifierUnavailable):
        verifier.verify("some-opaque-token-value")


def test_an_endpoint_that_never_answers_times_out(clock: FakeClock) -> None:
    with silent_url("/introspect") as url:
        verifier = IntrospectionVerifier(url, audience="https://mcp.test", timeout=0.2, clock=clock)
        with pytest.raises(VerifierUnavailable):
            verifier.verify("some-opaque-token-value")
