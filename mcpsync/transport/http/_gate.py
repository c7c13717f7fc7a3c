"""What a request to the endpoint's paths is let in by, from its head alone: the Host and Origin
(DNS rebinding), CORS for the listed origins, the method, the token, and the public metadata.

Why the head alone: none of it depends on the body, so all of it is decided before `wsgi.input`
is read, and a caller refused costs no body under any WSGI server (under mcpsync's own, not even
its receipt: `WsgiTransport.check_head`). A request the head check let in is remembered in its
environ (`ADMITTED`), so the app does not check its token twice.

The token also bounds what it opened: a stream ends when it expires (`token_end`), and an update
is told to a stream only if its token may read the entry (`required_scopes`, `may_be_told`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ...auth.resource.guard import AuthRefusal
from ...protocol import jsonrpc
from ..lifecycle.inflight import SHUTTING_DOWN
from ._cors import Cors
from ._replies import _Refused, json_reply
from ._rules import normalize_hosts, normalize_origins, rebinding_refusal, rebinding_remedy
from ._state import EndpointState

if TYPE_CHECKING:
    from ...auth.resource.guard import Auth
    from ...auth.resource.principal import Principal

log = logging.getLogger("mcpsync")

ADMITTED = "mcpsync.admitted"
"""The environ key where `check_head` leaves (the gate, the principal) for `__call__`."""


def token_end(principal: Principal | None) -> float | None:
    """When a stream opened with this principal's token must end (`time.monotonic()`), or None."""
    if principal is None or principal.expires_at is None:
        return None
    return time.monotonic() + max(0.0, principal.expires_at - time.time())


def required_scopes(auth: Auth | None) -> frozenset[str]:
    """The scopes every token must hold on this endpoint (none without `Auth`)."""
    return frozenset(auth.required_scopes) if auth is not None else frozenset()


class Gate:
    """The head rules of one endpoint at `path`: see `WsgiTransport` for `allowed_hosts`,
    `allowed_origins` and `auth`."""

    def __init__(
        self, state: EndpointState, path: str, auth: Auth | None, allowed_hosts: Iterable[str] | None, allowed_origins: Iterable[str] | None
    ) -> None:
        self._state = state
        self._path = path
        self._auth = auth
        self.metadata_paths = auth.metadata_paths(path) if auth is not None else frozenset()
        self._allowed_hosts = normalize_hosts(allowed_hosts)
        self._allowed_origins = normalize_origins(allowed_origins)
        self._cors = Cors(self._allowed_origins) if self._allowed_origins else None

    def serves(self, path: str) -> bool:
        """The endpoint's own path or one of its metadata paths (the rest is the fallback's)."""
        return path == self._path or path in self.metadata_paths

    def allow_origin(self, environ: dict[str, Any]) -> str | None:
        """The `Access-Control-Allow-Origin` the answer carries, or None: no CORS for this caller."""
        return None if self._cors is None else self._cors.allow_origin(environ)

    def check_rebinding(self, environ: dict[str, Any]) -> None:
        """Refuse 403 a Host or Origin that may be DNS rebinding; at once for a request whose
        head this gate let in already (`admit_head`, which checked them)."""
        admitted = environ.get(ADMITTED)
        if admitted is not None and admitted[0] is self:
            return
        refusal = rebinding_refusal(environ, self._allowed_hosts, self._allowed_origins)
        if refusal is not None:
            log.warning("refused a request from %s: %s; %s", environ.get("REMOTE_ADDR"), refusal, rebinding_remedy(refusal))
            raise _Refused(403, f"Forbidden: {refusal}")

    def admit_head(self, environ: dict[str, Any]) -> None:
        """`check_head`'s part: the request's head is let in (else `_Refused`), and the principal
        is remembered for `admit`, which `__call__` asks moments later."""
        self.check_rebinding(environ)
        principal = self.admit(environ, environ.get("REQUEST_METHOD", "GET").upper())
        environ[ADMITTED] = (self, principal)

    def admit(self, environ: dict[str, Any], method: str) -> Principal | None:
        """A request to the endpoint that may be served, by whom (None without `Auth`); from its
        head alone, before its body is read."""
        if self._state.closing:
            raise _Refused(503, SHUTTING_DOWN)
        admitted = environ.get(ADMITTED)
        if admitted is not None and admitted[0] is self:  # check_head has, moments ago
            principal: Principal | None = admitted[1]
            if principal is None or principal.expires_at is None or principal.expires_at > time.time():
                return principal
        if method not in ("POST", "GET", "DELETE"):
            raise _Refused(405, f"Method Not Allowed: {method}", headers=[("Allow", "GET, POST, DELETE")])
        return self._authenticate(environ)

    def _authenticate(self, environ: dict[str, Any]) -> Principal | None:
        """Who holds the request's token, before anything else of it is read; None without `Auth`."""
        if self._auth is None:
            return None
        try:
            return self._auth.authenticate(environ, self._path)
        except AuthRefusal as refusal:
            if refusal.status != 401 or "HTTP_AUTHORIZATION" in environ:  # a first request without a token is routine
                log.info("refused a request from %s: %s", environ.get("REMOTE_ADDR"), refusal.message)
            raise _Refused(refusal.status, refusal.message, headers=refusal.headers()) from None

    def metadata(self, environ: dict[str, Any], start_response: Callable[..., Any], method: str) -> Iterable[bytes]:
        """The protected resource metadata (RFC 9728), public: no token needed to read it."""
        assert self._auth is not None, "metadata paths exist only with Auth"
        if method not in ("GET", "HEAD"):
            raise _Refused(405, f"Method Not Allowed: {method}", headers=[("Allow", "GET, HEAD")])
        body = jsonrpc.encode(self._auth.metadata(environ, self._path))
        reply = json_reply(start_response, 200, body, [("Cache-Control", "max-age=300")])
        return [] if method == "HEAD" else reply
