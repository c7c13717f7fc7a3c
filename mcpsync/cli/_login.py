"""The command line's OAuth: `mcpsync login` and `logout`, and the stored tokens the client
commands (`tools`, `call`, `listen`) use.

Strategy: one `FileTokenStore` (the default directory) holds what `login` got; the client
commands reach a URL with the token a `--token-env` variable holds, else with an `OAuth` that
only uses and refreshes those tokens (`interactive=
False`: a command that lists tools must never open a browser; a refusal it cannot answer fails
saying to run `mcpsync login URL`, or, when the server names no authorization server to log in
to, saying to pass a token with `--token-env`: `nothing_to_log_in_to`). Imported only by those
commands.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable
from typing import Any

from ..auth.client.browser import browser_url
from ..auth.client.credentials import BearerToken, HttpCredentials
from ..auth.client.discovery import OAuthError, bearer_challenge, discover_authorization_server, discover_resource, origin
from ..auth.client.oauth import OAuth
from ..auth.client.store import FileTokenStore
from ..errors import McpsyncError

TOKEN_ENV_HINT = "pass the token you were given in an environment variable, with --token-env VARIABLE"
"""What the client commands' errors say when a login cannot help."""
TOKENS_GO_TO = "mcpsync tools, call and listen with --token-env VARIABLE"
DISCOVERY_TIMEOUT = 30.0
"""Seconds each request of `login`'s second look takes at most (`nothing_to_log_in_to`)."""


def credentials_for(token_env: str | None, *, timeout: float = 30.0) -> HttpCredentials:
    """The client commands' credentials for a URL: the bearer token in the environment variable
    `token_env` (a token the user was given), else the tokens `mcpsync login` kept, refreshed when
    they expire, never a new login. ValueError when the variable is not set."""
    if token_env is None:
        return _KeptTokens(timeout)
    token = os.environ.get(token_env)
    if not token:
        raise ValueError(f"the environment variable {token_env} is not set")
    return BearerToken(token)


def log_in(url: str, *, client_id: str | None, client_metadata_url: str | None, scopes: Iterable[str], print_url: bool, timeout: float) -> str:
    """Log in to `url` and keep the tokens; where they are kept."""
    store = FileTokenStore()
    oauth = OAuth(
        client_id=client_id,
        client_secret=os.environ.get("MCPSYNC_CLIENT_SECRET") or None,
        client_metadata_url=client_metadata_url,
        scopes=list(scopes) or None,
        redirect_handler=_print_url if print_url else None,
        token_store=store,
        login_timeout=timeout,
    )
    try:
        oauth.login(url)
    except OAuthError:
        challenge = _challenge(url, DISCOVERY_TIMEOUT)  # None: it asks for no token (OAuth's error says so)
        reason = None if challenge is None else nothing_to_log_in_to(url, challenge, timeout=DISCOVERY_TIMEOUT)
        if reason is None:
            raise
        raise OAuthError(f"{reason}, so there is nothing to log in to: a token you were given goes to {TOKENS_GO_TO}") from None
    return str(store.directory)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer (not a 401), never followed: the endpoint must not send this
    request elsewhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _challenge(url: str, timeout: float) -> str | None:
    """The `WWW-Authenticate` of the 401 that `url` answers a tokenless `ping` with ("" when it
    sends none), or None when it does not answer 401."""
    ping = b'{"jsonrpc":"2.0","id":0,"method":"ping"}'
    request = urllib.request.Request(url, ping, {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}, method="POST")
    try:
        with urllib.request.build_opener(_NoRedirects).open(request, timeout=timeout):
            return None
    except urllib.error.HTTPError as exc:
        return (exc.headers.get("WWW-Authenticate") or "") if exc.code == 401 else None
    except (OSError, ValueError):
        return None


class _KeptTokens:
    """The tokens `mcpsync login` kept (an `OAuth` that never starts a login), whose refusal says
    what would help: `mcpsync login URL` (`OAuth`'s own message) when the server names an
    authorization server, else `--token-env`, since a login there can only fail."""

    def __init__(self, timeout: float) -> None:
        self._oauth = OAuth(interactive=False, timeout=timeout)
        self._timeout = timeout

    def authorization(self, resource: str) -> str | None:
        return self._oauth.authorization(resource)

    def refused(self, resource: str, status: int, www_authenticate: str | None, sent: str | None) -> bool:
        try:
            return self._oauth.refused(resource, status, www_authenticate, sent)
        except OAuthError:
            reason = nothing_to_log_in_to(resource, www_authenticate, timeout=self._timeout)
            if reason is None:
                raise
            raise OAuthError(f"{reason}, so there is nothing to log in to: {TOKEN_ENV_HINT}") from None


def nothing_to_log_in_to(url: str, www_authenticate: str | None, *, timeout: float) -> str | None:
    """Why a login to the endpoint `url`, which refused a request, can only fail; None when it
    names somewhere to log in.

    Asked only once a login would be needed, so an ordinary refusal costs nothing more: protected
    resource metadata (where the 401's challenge says, else at the well-known URLs) that names no
    authorization server, or that is refused (it names another resource); or no such metadata,
    and no authorization server metadata at the endpoint's origin either (the 2025-03-26 fallback
    would guess endpoints that are not there). A server that checks static tokens (`mcpsync
    serve --auth-token-file`) is the common case."""
    challenge = bearer_challenge(www_authenticate)
    hint = challenge.params.get("resource_metadata") if challenge is not None else None
    try:
        if discover_resource(url, hint, timeout=timeout) is not None:
            return None
    except OAuthError as exc:  # found, but it names no authorization server (or one refused)
        return str(exc)
    except McpsyncError:
        return None
    issuer = origin(url)
    try:
        if discover_authorization_server(issuer, timeout=timeout) is not None:
            return None
    except McpsyncError:
        return None  # there is one; the login's own error says what is wrong with it
    return f"{url} publishes no protected resource metadata, and {issuer} no authorization server metadata"


def log_out(url: str) -> bool:
    """Forget what was kept for `url`; whether there was anything."""
    return OAuth(interactive=False).logout(url)


def _print_url(url: str) -> None:
    browser_url(url)  # the same rule as the browser's: never a file: or javascript: URL to paste
    print(f"Open this URL in a browser to log in (waiting for it here):\n\n    {url}\n", file=sys.stderr, flush=True)
