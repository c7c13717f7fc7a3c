"""Auth: the resource server's answers as functions of a WSGI environ (no sockets: the HTTP tests
in integration/test_auth_http.py show the same rules on the wire)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mcpsync.auth import Auth, AuthRefusal, InvalidToken, Principal, VerifierUnavailable

ENDPOINT = "/mcp"


class Verifier:
    """Answers from a table; raises what the table says."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.seen: list[str] = []

    def verify(self, token: str) -> Principal | None:
        self.seen.append(token)
        answer = self.answers.get(token)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]


def environ(authorization: str | None = None, query: str = "", host: str = "mcp.example.test") -> dict[str, Any]:
    env: dict[str, Any] = {"QUERY_STRING": query, "HTTP_HOST": host, "wsgi.url_scheme": "https", "SCRIPT_NAME": ""}
    if authorization is not None:
        env["HTTP_AUTHORIZATION"] = authorization
    return env


def refusal(auth: Auth, env: dict[str, Any]) -> AuthRefusal:
    with pytest.raises(AuthRefusal) as refused:
        auth.authenticate(env, ENDPOINT)
    return refused.value


ALICE = Principal("alice", scopes=frozenset({"read"}))


@pytest.mark.parametrize("header", ["Bearer tok.en-1_~+/==", "bearer tok.en-1_~+/==", "BEARER   tok.en-1_~+/==", "  Bearer tok.en-1_~+/==  "])
def test_the_bearer_scheme_is_case_insensitive_and_the_token_a_b64token(header: str) -> None:
    verifier = Verifier({"tok.en-1_~+/==": ALICE})
    assert Auth(verifier).authenticate(environ(header), ENDPOINT) == ALICE
    assert verifier.seen == ["tok.en-1_~+/=="]


@pytest.mark.parametrize(
    "header", ["Bearer", "Bearer ", "Bearer a b", "Bearer a,b", "Bearer =abc", 'Bearer "abc"', "Bearer a=b", "Bearer t\u00f6k", "Bearer ab\x7f", "Bearer ===="]
)
def test_a_malformed_bearer_header_is_400_invalid_request_and_reaches_no_verifier(header: str) -> None:
    verifier = Verifier({})
    refused = refusal(Auth(verifier), environ(header))
    assert refused.status == 400
    assert 'error="invalid_request"' in (refused.challenge or "")
    assert verifier.seen == []


@pytest.mark.parametrize("header", [None, "Basic dXNlcjpwYXNz", "Token abc", "Bearerabc", "Bearer\tabc"])
def test_no_bearer_credentials_is_401_without_an_error_code(header: str | None) -> None:
    refused = refusal(Auth(Verifier({}), resource="https://mcp.example.test/mcp", required_scopes=["read"]), environ(header))
    assert refused.status == 401
    assert refused.challenge == 'Bearer resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp", scope="read"'


def test_a_token_in_the_query_string_is_refused_even_beside_a_header() -> None:
    verifier = Verifier({"good-token": ALICE})
    refused = refusal(Auth(verifier), environ("Bearer good-token", query="a=1&access_token=good-token"))
    assert refused.status == 400
    assert verifier.seen == []
    assert Auth(verifier).authenticate(environ("Bearer good-token", query="tokens=access_token"), ENDPOINT) == ALICE


def test_the_verifiers_reason_reaches_the_challenge_without_quotes_or_control_characters() -> None:
    verifier = Verifier({"t": InvalidToken('the "token"\r\nX-Injected: yes \\ expired')})
    refused = refusal(Auth(verifier), environ("Bearer t"))
    assert refused.status == 401
    assert refused.challenge is not None and "\r" not in refused.challenge and "\n" not in refused.challenge
    assert 'error_description="the token' in refused.challenge
    assert 'X-Injected: yes  expired"' in refused.challenge


def test_none_is_a_generic_invalid_token() -> None:
    refused = refusal(Auth(Verifier({})), environ("Bearer unknown"))
    assert (refused.status, refused.message) == (401, "Unauthorized: the access token is not valid")
    assert 'error="invalid_token"' in (refused.challenge or "")


def test_an_unavailable_verifier_is_503_and_warned_once_per_streak(caplog: pytest.LogCaptureFixture) -> None:
    verifier = Verifier({"down": VerifierUnavailable("the JWKS is unreachable"), "up": ALICE})
    auth = Auth(verifier)
    with caplog.at_level(logging.WARNING, logger="mcpsync"):
        for _ in range(3):
            refused = refusal(auth, environ("Bearer down"))
            assert (refused.status, refused.challenge, refused.headers()) == (503, None, [("Retry-After", "5")])
        auth.authenticate(environ("Bearer up"), ENDPOINT)
        refusal(auth, environ("Bearer down"))
    warnings = [record.getMessage() for record in caplog.records]
    assert warnings == [
        "cannot check access tokens: the JWKS is unreachable; answering 503 until it can",
        "access tokens can be checked again",
        "cannot check access tokens: the JWKS is unreachable; answering 503 until it can",
    ]


def test_a_verifier_answering_something_else_is_a_bug_said_plainly() -> None:
    with pytest.raises(TypeError, match=r"returned str, not a Principal or None"):
        Auth(Verifier({"t": "alice"})).authenticate(environ("Bearer t"), ENDPOINT)


def test_server_wide_scopes_are_required_and_the_403_names_them() -> None:
    auth = Auth(Verifier({"t": ALICE}), required_scopes=["read", "mcp:use"])
    refused = refusal(auth, environ("Bearer t"))
    assert refused.status == 403
    assert 'scope="read mcp:use", error="insufficient_scope"' in (refused.challenge or "")


def test_an_entrys_403_names_the_server_wide_scopes_too() -> None:
    auth = Auth(Verifier({}), required_scopes=["read"])
    refused = auth.insufficient(environ(), ENDPOINT, ["admin"], "tool 'reset' needs the scope(s) admin")
    assert 'scope="read admin"' in (refused.challenge or "")


def test_scope_implies_is_followed_transitively_and_survives_a_cycle() -> None:
    auth = Auth(Verifier({}), scope_implies={"owner": ["admin"], "admin": ["write", "read"], "write": ["owner"]})
    widened = auth.widen(Principal("root", scopes=frozenset({"owner"})))
    assert widened.scopes == {"owner", "admin", "write", "read"}
    plain = Principal("bob", scopes=frozenset({"other"}))
    assert auth.widen(plain) is plain


def test_without_a_resource_the_metadata_names_the_url_the_request_used() -> None:
    auth = Auth(Verifier({}), authorization_servers=["https://as.example.test"])
    env = environ(host="mcp.example.test:8443")
    env["SCRIPT_NAME"] = "/tools"
    assert auth.metadata(env, ENDPOINT) == {
        "resource": "https://mcp.example.test:8443/tools/mcp",
        "authorization_servers": ["https://as.example.test"],
        "bearer_methods_supported": ["header"],
    }
    assert auth.metadata_url(env, ENDPOINT) == "https://mcp.example.test:8443/.well-known/oauth-protected-resource/tools/mcp"


def test_the_metadata_is_served_at_the_well_known_paths_of_the_endpoint_and_the_resource() -> None:
    auth = Auth(Verifier({}), resource="https://mcp.example.test/api/mcp/")
    assert auth.metadata_paths("/mcp") == {
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource/api/mcp",
    }


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"resource": "mcp.example.com"}, ValueError),
        ({"resource": "https://mcp.example.com/mcp#frag"}, ValueError),
        ({"resource": "ftp://mcp.example.com"}, ValueError),
        ({"authorization_servers": "https://as.example"}, TypeError),
        ({"authorization_servers": ["as.example"]}, ValueError),
        ({"required_scopes": "read write"}, TypeError),
        ({"required_scopes": ["read write"]}, ValueError),
        ({"required_scopes": ['say"hi']}, ValueError),
        ({"scope_implies": {"admin": ["bad scope"]}}, ValueError),
    ],
)
def test_bad_settings_fail_at_construction(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        Auth(Verifier({}), **options)


def test_something_without_verify_is_not_a_verifier() -> None:
    with pytest.raises(TypeError, match="verify"):
        Auth(object())  # type: ignore[arg-type]
