"""What an HTTP connection asks of its credentials: the seam between the client and any login.

Strategy: the connection knows nothing of OAuth. Before every HTTP request it asks its
credentials for the `Authorization` header (`authorization`), and when the server refuses one with
401 or 403 it tells them (`refused`) and sends the same request again if they say so. A static
token (`BearerToken`) never retries; an OAuth login (`mcpsync.auth.oauth.OAuth`) discovers, logs
in, refreshes or steps up inside `refused`, and the retried request carries the new token. Why
this shape: the flow may need the browser and minutes, so it runs on the worker thread of the
request that was refused (never the caller's, never a reader's), and every other request just
waits for the same header; and `sent` lets a credentials object tell "my token was refused" from
"a token I already replaced was refused", so ten requests refused at once cause one login, not ten.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["MAX_AUTH_RETRIES", "BearerToken", "HttpCredentials"]

MAX_AUTH_RETRIES = 4
"""How often the connection sends one request again after a refusal, whatever `refused` says: a
credentials object that always says "try again" cannot loop forever."""


@runtime_checkable
class HttpCredentials(Protocol):
    """Credentials for a Streamable HTTP endpoint (`mcpsync.connect(url, auth=...)`)."""

    def authorization(self, resource: str) -> str | None:
        """The `Authorization` value for the next request to `resource` (the endpoint's URL as
        given to `connect`), such as "Bearer abc"; None to send none. Asked before every
        request, from any thread: it must be quick when a token is held."""
        ...

    def refused(self, resource: str, status: int, www_authenticate: str | None, sent: str | None) -> bool:
        """The server answered `status` (401 or 403) to a request sent with `sent` (its
        `Authorization` value, or None) and this `WWW-Authenticate` header (or None). True: send
        the request again; False: the refusal is its answer. May block (an interactive login,
        bounded by its own timeout); called from several threads at once."""
        ...


class BearerToken:
    """A fixed token: sent as `Authorization: Bearer <token>` on every request, never renewed (a
    refusal is final). For tokens issued out of band: an API key, a token a script was given."""

    __slots__ = ("_value",)

    def __init__(self, token: str) -> None:
        if not isinstance(token, str) or not token or any(c.isspace() or not c.isprintable() for c in token) or not token.isascii():
            raise ValueError("a bearer token is a non-empty string of visible ASCII characters")
        self._value = f"Bearer {token}"

    def __repr__(self) -> str:
        return "BearerToken(...)"  # never the token

    def authorization(self, resource: str) -> str | None:
        return self._value

    def refused(self, resource: str, status: int, www_authenticate: str | None, sent: str | None) -> bool:
        return False
