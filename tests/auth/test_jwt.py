"""JwtVerifier against a real loopback authority: signatures, claims, the JWKS cache, the token cache.

Time is a `FakeClock` shared by the authority (it stamps `iat`/`exp`) and the verifier; JWKS
fetches are counted by the authority, so "no refetch" and "exactly one refetch" are facts, not
timings.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import subprocess
import sys
import threading
from typing import Any

import jwt as pyjwt
import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from mcpsync.auth.resource.jwt import JwtVerifier
from mcpsync.auth.resource.principal import InvalidToken, VerifierUnavailable

from .._timeouts import LONG
from .authority import OMIT, Authority, FakeClock, SigningKey, silent_url, unreachable_url

NOW = 1_800_000_000.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def authority(clock: FakeClock):
    with Authority(clock=clock) as running:
        yield running


def make(authority: Authority, clock: FakeClock, **settings: Any) -> JwtVerifier:
    options: dict[str, Any] = {"jwks_url": authority.jwks_url, "issuer": authority.issuer, "audience": authority.audience, "clock": clock}
    options.update(settings)
    return JwtVerifier(**options)


def refused(verifier: JwtVerifier, token: str) -> str:
    with pytest.raises(InvalidToken) as caught:
        verifier.verify(token)
    assert not token or token not in str(caught.value)
    return str(caught.value)


# -- valid tokens ------------------------------------------------------------------------------


def test_an_rs256_token_verifies_into_its_principal(authority: Authority, clock: FakeClock) -> None:
    principal = make(authority, clock).verify(authority.mint(claims={"sub": "bob", "client_id": "app", "scope": "read tools:call"}))
    assert principal.subject == "bob"
    assert principal.client_id == "app"
    assert principal.scopes == {"read", "tools:call"}
    assert principal.issuer == authority.issuer
    assert principal.expires_at == NOW + 300
    assert principal.claims["aud"] == authority.audience


def test_an_es256_token_verifies(clock: FakeClock) -> None:
    with Authority(keys=[SigningKey.ec("ec-1")], clock=clock) as authority:
        assert make(authority, clock).verify(authority.mint()).subject == "alice"


def test_a_jwk_without_alg_serves_the_allowed_algorithms_of_its_type(clock: FakeClock) -> None:
    with Authority(keys=[SigningKey.rsa("bare", publish_alg=False)], clock=clock) as authority:
        verifier = make(authority, clock)
        assert verifier.verify(authority.mint(alg="PS256")).subject == "alice"
        assert verifier.verify(authority.mint(alg="RS512")).subject == "alice"


def test_a_jwks_alg_restricts_its_key(authority: Authority, clock: FakeClock) -> None:
    assert refused(make(authority, clock), authority.mint(alg="PS256")) == "unsupported algorithm"


def test_the_algorithms_setting_restricts_tokens(clock: FakeClock) -> None:
    with Authority(keys=[SigningKey.ec("ec-1")], clock=clock) as authority:
        assert refused(make(authority, clock, algorithms=["RS256"]), authority.mint()) == "unsupported algorithm"


def test_scopes_come_from_scope_or_scp(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock)
    assert verifier.verify(authority.mint(claims={"scope": OMIT, "scp": ["a", "b"]})).scopes == {"a", "b"}
    assert verifier.verify(authority.mint(claims={"scope": OMIT, "scp": "c d"})).scopes == {"c", "d"}
    assert verifier.verify(authority.mint(claims={"scope": OMIT})).scopes == frozenset()


@pytest.mark.parametrize("typ", ["at+jwt", "JWT", "application/at+jwt", "AT+JWT", OMIT])
def test_access_token_types_are_accepted(authority: Authority, clock: FakeClock, typ: Any) -> None:
    assert make(authority, clock).verify(authority.mint(headers={"typ": typ})).subject == "alice"


@pytest.mark.parametrize("typ", ["id+jwt", "logout+jwt", 7])
def test_other_token_types_are_refused(authority: Authority, clock: FakeClock, typ: Any) -> None:
    assert refused(make(authority, clock), authority.mint(headers={"typ": typ})) == "not an access token"


def test_one_of_several_audiences_is_enough(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock, audience=["https://other.test/mcp", authority.audience])
    assert verifier.verify(authority.mint(claims={"aud": ["https://third.test", authority.audience]})).subject == "alice"


# -- refusals ----------------------------------------------------------------------------------


def test_a_signature_by_another_key_with_the_same_kid_is_refused(authority: Authority, clock: FakeClock) -> None:
    impostor = SigningKey.rsa(authority.key.kid)
    assert refused(make(authority, clock), authority.mint(key=impostor)) == "bad signature"


def test_a_changed_payload_is_refused(authority: Authority, clock: FakeClock) -> None:
    header, _, signature = authority.mint().split(".")
    forged = base64.urlsafe_b64encode(json.dumps(authority.claims({"sub": "root"})).encode()).rstrip(b"=").decode()
    assert refused(make(authority, clock), f"{header}.{forged}.{signature}") == "bad signature"


@pytest.mark.parametrize(("claims", "reason"), [
    ({"iss": "https://evil.test"}, "wrong issuer"),
    ({"iss": OMIT}, "wrong issuer"),
    ({"aud": "https://other.test/mcp"}, "wrong audience"),
    ({"aud": ["https://a.test", "https://b.test"]}, "wrong audience"),
    ({"aud": 42}, "wrong audience"),
    ({"aud": OMIT}, "the token has no audience"),
    ({"exp": OMIT}, "the token has no expiry"),
    ({"exp": "tomorrow"}, "malformed token"),
    ({"exp": NOW - 31}, "the token has expired"),
    ({"nbf": NOW + 31}, "the token is not valid yet"),
    ({"iat": NOW + 31}, "the token is not valid yet"),
])
def test_claims_are_checked(authority: Authority, clock: FakeClock, claims: dict[str, Any], reason: str) -> None:
    assert refused(make(authority, clock), authority.mint(claims=claims)) == reason


def test_the_leeway_is_honoured_both_ways(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock, leeway=30)
    assert verifier.verify(authority.mint(claims={"exp": NOW - 29})).subject == "alice"
    assert verifier.verify(authority.mint(claims={"nbf": NOW + 29, "iat": NOW + 29})).subject == "alice"
    strict = make(authority, clock, leeway=0)
    assert refused(strict, authority.mint(claims={"exp": NOW - 1})) == "the token has expired"
    assert refused(strict, authority.mint(claims={"nbf": NOW + 1})) == "the token is not valid yet"


def test_alg_none_is_refused(authority: Authority, clock: FakeClock) -> None:
    unsigned = pyjwt.encode(authority.claims(), None, algorithm="none", headers={"kid": authority.key.kid})
    assert refused(make(authority, clock), unsigned) == "unsupported algorithm"


def test_hs256_signed_with_the_public_key_is_refused(authority: Authority, clock: FakeClock) -> None:
    """Algorithm confusion: an HMAC "signed" with what anyone can read from the JWKS."""
    public_pem = authority.key.private_key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    signing_input = b".".join(
        base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=")
        for part in ({"alg": "HS256", "typ": "JWT", "kid": authority.key.kid}, authority.claims()))
    mac = base64.urlsafe_b64encode(hmac.new(public_pem, signing_input, hashlib.sha256).digest()).rstrip(b"=")
    confused = (signing_input + b"." + mac).decode()
    assert refused(make(authority, clock), confused) == "unsupported algorithm"
    assert authority.jwks_fetches == 0  # refused before any key was looked up


@pytest.mark.parametrize("algorithms", [["HS256"], ["RS256", "HS512"], ["none"], [], ["RS257"]])
def test_symmetric_none_and_unknown_algorithms_are_refused_at_construction(authority: Authority, clock: FakeClock,
                                                                            algorithms: list[str]) -> None:
    with pytest.raises(ValueError):
        make(authority, clock, algorithms=algorithms)


@pytest.mark.parametrize("settings", [{"jwks_url": "file:///etc/passwd"}, {"jwks_url": "jwks.json"}, {"issuer": ""},
                                      {"audience": []}, {"audience": ""}, {"timeout": 0}, {"leeway": -1}])
def test_unusable_settings_are_refused_at_construction(authority: Authority, clock: FakeClock, settings: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        make(authority, clock, **settings)


@pytest.mark.parametrize("token", ["", "abc", "a.b", "a.b.c", "e30.e30.", "a.b.c.d.e", "x" * 20_000 + ".e30.sig", "Zm9v!.e30.sig"])
def test_malformed_tokens_are_refused(authority: Authority, clock: FakeClock, token: str) -> None:
    assert refused(make(authority, clock), token) in ("malformed token", "unsupported algorithm")


def test_a_non_object_payload_is_malformed(authority: Authority, clock: FakeClock) -> None:
    signed_list = pyjwt.PyJWS().encode(b"[1, 2]", authority.key.private_key, algorithm="RS256", headers={"kid": authority.key.kid})
    assert refused(make(authority, clock), signed_list) == "malformed token"


def test_a_token_without_kid_uses_the_only_key(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock)
    assert verifier.verify(authority.mint(kid=OMIT)).subject == "alice"
    authority.add_key(SigningKey.rsa("key-2"))
    clock.advance(3601)  # the key set is refreshed with age
    assert refused(verifier, authority.mint(kid=OMIT, key=authority.keys[0])) == "unknown signing key"


# -- the JWKS cache ----------------------------------------------------------------------------


def test_the_jwks_is_fetched_on_first_use_not_at_construction(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock)
    assert authority.jwks_fetches == 0
    verifier.verify(authority.mint())
    verifier.verify(authority.mint(claims={"sub": "bob"}))
    assert authority.jwks_fetches == 1
    assert authority.user_agents == ["mcpsync/" + __import__("mcpsync._version").__version__]


def test_an_unknown_kid_triggers_one_refetch_then_waits_out_the_interval(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock, min_refresh_interval=10)
    verifier.verify(authority.mint())
    assert authority.jwks_fetches == 1
    stranger = SigningKey.rsa("random-1")
    clock.advance(10)
    assert refused(verifier, authority.mint(key=stranger)) == "unknown signing key"
    assert authority.jwks_fetches == 2
    for n in range(20):  # an attacker's random kids: no fetch each
        assert refused(verifier, authority.mint(key=stranger.with_kid(f"random-{n}"))) == "unknown signing key"
    assert authority.jwks_fetches == 2
    clock.advance(9.9)
    refused(verifier, authority.mint(key=stranger))
    assert authority.jwks_fetches == 2
    clock.advance(0.1)
    refused(verifier, authority.mint(key=stranger))
    assert authority.jwks_fetches == 3


def test_key_rotation_the_new_kid_verifies_after_one_refetch(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock, cache_ttl=120)
    old_key = authority.key
    old_token = authority.mint()
    assert verifier.verify(old_token).subject == "alice"
    new_key = authority.rotate()
    clock.advance(10)
    assert verifier.verify(authority.mint(claims={"sub": "bob"})).subject == "bob"
    assert authority.jwks_fetches == 2
    # The old key is gone from the set: a token of it not seen before is refused at once ...
    assert refused(verifier, authority.mint(key=old_key, claims={"sub": "carol"})) == "unknown signing key"
    # ... and the one verified before keeps working only while cache_ttl allows.
    assert verifier.verify(old_token).subject == "alice"
    clock.advance(111)
    assert refused(verifier, old_token) == "unknown signing key"
    assert new_key.kid != old_key.kid


def test_the_key_set_is_refreshed_after_max_age(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock, jwks_max_age=600, cache_ttl=0)
    token = authority.mint(claims={"exp": NOW + 10_000})
    verifier.verify(token)
    clock.advance(599)
    verifier.verify(token)
    assert authority.jwks_fetches == 1
    clock.advance(1)
    verifier.verify(token)
    assert authority.jwks_fetches == 2


@pytest.mark.parametrize(("cache_control", "refetch_after"), [("public, max-age=60", 60), ("max-age=1", 10), ("no-store", 10),
                                                              ("max-age=99999", 600)])
def test_cache_control_can_shorten_the_max_age(authority: Authority, clock: FakeClock, cache_control: str, refetch_after: float) -> None:
    authority.jwks_cache_control = cache_control
    verifier = make(authority, clock, jwks_max_age=600, min_refresh_interval=10, cache_ttl=0)
    token = authority.mint(claims={"exp": NOW + 10_000})
    verifier.verify(token)
    clock.advance(refetch_after - 0.5)
    verifier.verify(token)
    assert authority.jwks_fetches == 1
    clock.advance(0.5)
    verifier.verify(token)
    assert authority.jwks_fetches == 2


def test_concurrent_first_uses_share_one_fetch(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock)
    tokens = [authority.mint(claims={"sub": f"user-{n}"}) for n in range(8)]
    start = threading.Barrier(len(tokens), timeout=LONG)
    results: list[str | None] = []
    lock = threading.Lock()

    def use(token: str) -> None:
        start.wait()
        subject = verifier.verify(token).subject
        with lock:
            results.append(subject)

    threads = [threading.Thread(target=use, args=(token,)) for token in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LONG)
    assert sorted(results, key=str) == sorted(f"user-{n}" for n in range(8))
    assert authority.jwks_fetches == 1


# -- the authority out of reach ----------------------------------------------------------------


@pytest.mark.parametrize("failure", [500, 404, "drop"])
def test_no_keys_and_a_failing_jwks_is_unavailable(authority: Authority, clock: FakeClock, failure: int | str) -> None:
    authority.jwks_failure = failure
    verifier = make(authority, clock)
    with pytest.raises(VerifierUnavailable):
        verifier.verify(authority.mint())


def test_no_keys_and_an_unreachable_jwks_is_unavailable(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock, jwks_url=unreachable_url())
    with pytest.raises(VerifierUnavailable):
        verifier.verify(authority.mint())


def test_a_jwks_that_never_answers_times_out_as_unavailable(authority: Authority, clock: FakeClock) -> None:
    with silent_url() as url:
        verifier = make(authority, clock, jwks_url=url, timeout=0.2)
        with pytest.raises(VerifierUnavailable):
            verifier.verify(authority.mint())


def test_a_jwks_without_usable_keys_is_unavailable(clock: FakeClock) -> None:
    with Authority(keys=[], clock=clock) as authority:
        with pytest.raises(VerifierUnavailable):
            make(authority, clock).verify(SigningKey.ec("ec-1").sign(authority.claims()))


def test_failed_fetches_are_rate_limited_and_recovery_follows(authority: Authority, clock: FakeClock) -> None:
    authority.jwks_failure = 500
    verifier = make(authority, clock, min_refresh_interval=10)
    token = authority.mint()
    for _ in range(5):
        with pytest.raises(VerifierUnavailable):
            verifier.verify(token)
    assert authority.jwks_fetches == 1  # a down authority is not asked once per request
    authority.jwks_failure = None
    clock.advance(10)
    assert verifier.verify(token).subject == "alice"
    assert authority.jwks_fetches == 2


def test_keys_held_keep_working_while_the_jwks_is_down(authority: Authority, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    verifier = make(authority, clock, jwks_max_age=60, min_refresh_interval=10)
    verifier.verify(authority.mint())
    authority.jwks_failure = 503
    with caplog.at_level(logging.INFO, logger="mcpsync.auth.resource.jwt"):
        for step in range(3):
            clock.advance(61)
            assert verifier.verify(authority.mint(claims={"sub": f"user-{step}"})).subject == f"user-{step}"
        assert authority.jwks_fetches == 4
        warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
        assert len(warnings) == 1  # once per failure streak
        authority.jwks_failure = None
        clock.advance(61)
        verifier.verify(authority.mint(claims={"sub": "again"}))
    assert authority.jwks_fetches == 5
    assert any("again" in record.getMessage() for record in caplog.records if record.levelno == logging.INFO)


# -- the verified-token cache ------------------------------------------------------------------


def test_a_second_verify_of_the_same_token_does_no_key_work(authority: Authority, clock: FakeClock) -> None:
    """Shown by behaviour: once the key is withdrawn and the set refreshed, a fresh token of that
    key is refused, but the token already verified is still answered from the cache."""
    verifier = make(authority, clock, jwks_max_age=60, cache_ttl=300)
    old_key = authority.key
    token = authority.mint()
    first = verifier.verify(token)
    authority.rotate()
    clock.advance(61)
    assert refused(verifier, authority.mint(key=old_key, claims={"sub": "fresh"})) == "unknown signing key"
    assert verifier.verify(token) is first
    authority.jwks_failure = "drop"
    clock.advance(61)
    assert verifier.verify(token) is first


def test_an_expired_cached_token_is_refused(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock, leeway=30, cache_ttl=3600)
    token = authority.mint(claims={"exp": NOW + 100})
    verifier.verify(token)
    clock.advance(129)
    verifier.verify(token)
    clock.advance(1)
    assert refused(verifier, token) == "the token has expired"


def test_cache_size_bounds_the_cache(authority: Authority, clock: FakeClock) -> None:
    verifier = make(authority, clock, cache_size=2, jwks_max_age=60)
    old_key = authority.key
    tokens = [authority.mint(claims={"sub": f"user-{n}"}) for n in range(3)]
    for token in tokens:
        verifier.verify(token)
    authority.rotate()
    clock.advance(61)
    assert refused(verifier, tokens[0]) == "unknown signing key"  # pushed out by the two later ones
    assert verifier.verify(tokens[2]).subject == "user-2"
    assert old_key is not authority.key


# -- packaging ---------------------------------------------------------------------------------


def test_importing_the_auth_package_does_not_import_pyjwt() -> None:
    code = (
        "import sys, mcpsync.auth; assert 'mcpsync.auth.resource.jwt' not in sys.modules, 'the verifiers load on first use';"
        "from mcpsync.auth import JwtVerifier; assert 'jwt' not in sys.modules, 'jwt imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=LONG)
    assert done.returncode == 0, done.stderr


def test_without_pyjwt_the_constructor_says_what_to_install(authority: Authority, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jwt", None)
    with pytest.raises(ImportError, match=r"mcpsync\[auth\]"):
        make(authority, clock)
