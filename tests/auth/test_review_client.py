"""Review of issue 23 item 3 (the OAuth client trusts no server): a token answer whose access token
cannot be sent. It failed before `parse_token_answer` checked tokens; its docstring says what the user saw.

The authorization server is the suite's hostile loopback one (`HostileServer`), the login the real
`mcpsync login` command in a child process, as in test_attack_client.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import mcpsync
from mcpsync import Server
from mcpsync.errors import McpsyncError

from .._timeouts import LONG
from .test_attack_client import BROWSER_STANDIN, REPO_ROOT, HostileServer, assert_one_clear_line, mcpsync_login, resource_for

pytestmark = pytest.mark.timeout(60)

UNSENDABLE = {"a line break": "at-secret\r\nX-Injected: 1", "a character latin-1 lacks": "at-secret-\u20ac"}


@pytest.mark.parametrize("token", list(UNSENDABLE.values()), ids=list(UNSENDABLE))
def test_a_token_answer_whose_access_token_cannot_be_sent_fails_the_login_clearly(token: str, tmp_path: Path) -> None:
    """A hostile (or broken) authorization server answers the code exchange with an `access_token`
    that is not an RFC 6750 b64token (a CR LF and a header after it, or a character HTTP cannot
    carry). Today `mcpsync login` says "logged in" and keeps it; every later `mcpsync tools`
    then fails with `initialize failed: Invalid header value b'Bearer at-secret\\r\\nX-Injected:
    1'` (or a latin-1 codec error), printing the whole Authorization header, token included, on
    stderr, and the user is never told to log in again. login.rst: "Any value a server sends is
    checked" (what the client takes from a server).

    Fix: `tokens.parse_token_answer` refuses an access token (and a refresh token) that is not a
    b64token, as it refuses an unusable `expires_in` (a `TokenError` naming the field, never the
    value); and the HTTP client's error for a header it cannot send never quotes the value."""
    with HostileServer(token_answer={"access_token": token}) as server:
        rs = resource_for(server)
        try:
            run = mcpsync_login(rs.endpoint, tmp_path, f"{sys.executable} {BROWSER_STANDIN} %s")
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
            env["XDG_CONFIG_HOME"] = str(tmp_path)
            later = subprocess.run([sys.executable, "-m", "mcpsync", "tools", rs.endpoint], capture_output=True, text=True, env=env,
                                   cwd=REPO_ROOT, timeout=LONG * 3, stdin=subprocess.DEVNULL)
        finally:
            rs.stop()
    assert "at-secret" not in run.stderr + later.stderr, (run.stderr, later.stderr)
    assert_one_clear_line(run, "access_token")


class Unsendable:
    """Credentials that hold a token no header can carry (one kept by an older version, say)."""

    def __init__(self, token: str) -> None:
        self.value = f"Bearer {token}"

    def authorization(self, resource: str) -> str | None:
        return self.value

    def refused(self, resource: str, status: int, www_authenticate: str | None, sent: str | None) -> bool:
        return False


@pytest.mark.parametrize("mode", ["modern", "legacy"])
@pytest.mark.parametrize("token", list(UNSENDABLE.values()), ids=list(UNSENDABLE))
def test_the_client_names_a_header_it_cannot_send_without_quoting_its_value(token: str, mode: str) -> None:
    """The HTTP client's error for an `Authorization` value http.client refuses names the header,
    never the value (http.client's own message quotes it: the token on stderr)."""
    server = Server("plain", shutdown_timeout=LONG)
    url = server.start_http("127.0.0.1", 0, threads=2).url
    try:
        with pytest.raises(McpsyncError) as failed, mcpsync.connect(url, mode=mode, auth=Unsendable(token), timeout=LONG):
            pass
    finally:
        assert server.close(LONG)
    assert "Authorization header cannot be sent" in str(failed.value), str(failed.value)
    assert "at-secret" not in str(failed.value) and "at-secret" not in repr(failed.value.__cause__)


@pytest.mark.parametrize(("refresh", "usable"), [
    ("rt with spaces and \"quotes\"", True),  # RFC 6749 A.17: any visible ASCII; it travels in a form body
    ("rt\r\nX-Injected: 1", False),
    ("rt-\u00e9", False),
])
def test_a_refresh_token_may_be_any_visible_ascii_and_nothing_else(refresh: str, usable: bool) -> None:
    from mcpsync.auth.client.tokens import TokenError, parse_token_answer

    answer = {"access_token": "at-0123456789", "token_type": "Bearer", "refresh_token": refresh}
    options: dict[str, Any] = {"clock": lambda: 0.0, "scopes": ("mcp:tools",), "resource": "http://127.0.0.1:1/mcp", "where": "http://127.0.0.1:1/token"}
    if usable:
        assert parse_token_answer(answer, "http://127.0.0.1:1", **options).refresh_token == refresh
    else:
        with pytest.raises(TokenError, match="unusable refresh_token") as refused:
            parse_token_answer(answer, "http://127.0.0.1:1", **options)
        assert refresh not in str(refused.value)
