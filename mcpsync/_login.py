"""The command line's OAuth: `mcpsync login` and `logout`, and the stored tokens the client
commands (`tools`, `call`, `listen`) use.

Strategy: one `FileTokenStore` (the default directory) holds what `login` got; the client
commands reach a URL with the token a `--token-env` variable holds, else with an `OAuth` that
only uses and refreshes those tokens (`interactive=
False`: a command that lists tools must never open a browser; a refusal it cannot answer fails
saying to run `mcpsync login URL`). Imported only by those commands.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from .auth.browser import browser_url
from .auth.credentials import BearerToken, HttpCredentials
from .auth.oauth import OAuth
from .auth.store import FileTokenStore


def credentials_for(token_env: str | None) -> HttpCredentials:
    """The client commands' credentials for a URL: the bearer token in the environment variable
    `token_env` (a token the user was given), else the tokens `mcpsync login` kept, refreshed when
    they expire, never a new login. ValueError when the variable is not set."""
    if token_env is None:
        return OAuth(interactive=False)
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
    oauth.login(url)
    return str(store.directory)


def log_out(url: str) -> bool:
    """Forget what was kept for `url`; whether there was anything."""
    return OAuth(interactive=False).logout(url)


def _print_url(url: str) -> None:
    browser_url(url)  # the same rule as the browser's: never a file: or javascript: URL to paste
    print(f"Open this URL in a browser to log in (waiting for it here):\n\n    {url}\n", file=sys.stderr, flush=True)
