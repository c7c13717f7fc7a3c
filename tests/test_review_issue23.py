"""Review of issue 23 (what a caller spends before it is known): attacks that still get through.

Each test is a strict xfail: it fails on today's main and says, in its docstring, what a user or an
attacker sees. Over real sockets against mcpsync's own HTTP server (`Server.start_http`), with the
static tokens the body-budget tests use.
"""

from __future__ import annotations

import json

import pytest

from mcpsync.auth.resource import METADATA_PATH
from tests.auth.test_attack_bodies import GOOD, Endpoint, initialize
from tests.transport.raw_http import request

pytestmark = pytest.mark.timeout(60)

BODY = 1024 * 1024


def _post(path: str, length: int, *, token: str | None = None, method: str = "POST", extra: tuple[tuple[str, str], ...] = ()) -> bytes:
    headers = [*extra, ("Host", "127.0.0.1"), ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"),
               ("Content-Length", str(length)), ("Expect", "100-continue")]
    if token is not None:
        headers.append(("Authorization", f"Bearer {token}"))
    return request(method, path, headers=headers, host=False)


@pytest.mark.xfail(strict=True, reason="review: a body to a path other than the endpoint is read and budgeted before anything checks its caller")
@pytest.mark.parametrize(("method", "path", "extra"), [
    ("POST", "/elsewhere", ()),
    ("POST", METADATA_PATH + "/mcp", ()),
    ("OPTIONS", "/mcp", (("Origin", "https://evil.example"),)),
], ids=["unknown path", "metadata path", "a preflight with a body"])
def test_a_caller_without_a_token_cannot_take_the_body_budget_through_another_path(method: str, path: str, extra: tuple[tuple[str, str], ...]) -> None:
    """An attacker with no token sends `POST /elsewhere` (or a POST to the public metadata path)
    declaring a 1 MiB body, and never sends it. `check_head` lets every path but the endpoint's
    through (`WsgiTransport.check_head` returns None for them), so the server answers `100
    Continue` and reserves the whole declared body from the server-wide budget, although the
    answer can only be 404 (no fallback) or 405 (the metadata); the same for an `OPTIONS` to the
    endpoint itself that carries an `Origin` (a "preflight", which `check_head` lets through before
    even the Host/Origin check, with CORS not configured at all). A client *with* a valid token is
    then refused 503 at its head for want of budget: bodies held by nobody's token lock the
    authenticated callers out, for `timeout` seconds per connection, again and again. (Here the
    budget is one body; the default 64 MiB takes 16 such connections of 4 MiB, plus 64 of 64 KiB
    for the reserve.) What the docs promise (auth.rst, "What a caller spends before it is known"):
    a request with a body is authenticated on its head, and nothing is spent on a caller before
    that.

    Fix: `WsgiTransport.check_head` answers at the head what the head alone decides for every
    path it owns (404 without a fallback, 405 for a POST to the metadata, a preflight with a
    body refused or its body never budgeted), and the server reads no body for a request whose
    answer cannot depend on it."""
    served = Endpoint(max_body_bytes=BODY, max_buffered_bytes=BODY + 1)
    try:
        attacker = served.connect()
        attacker.send(_post(path, BODY, method=method, extra=extra))
        first = attacker.read_response()  # today 100 Continue (its body's share is held); a fix: 404/405 at the head
        user = served.connect()
        body = initialize(padding=BODY - 1000)
        user.send(_post("/mcp", len(body), token=GOOD))
        reply = user.read_response()
        assert reply.status == 100, (first.status, reply.status, reply.raw_head)
        user.send(body)
        answer = user.read_response()
        assert answer.status == 200 and json.loads(answer.body)["result"]["serverInfo"]["name"] == "bodies"
    finally:
        served.close()
