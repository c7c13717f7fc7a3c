"""OAuth 2.1 for the blocking client: `OAuth`, the `HttpCredentials` that logs in when refused.

Strategy: the connection asks `authorization(resource)` before every request (a dict lookup and
a string: the header is computed once per token) and calls `refused(...)` on a 401 or 403; all
the work happens there, on the refused request's worker thread, one flow per resource at a time
(a lock per resource, acquired with a bound). A thread that finds the token already replaced
(`sent` differs from the current header) returns True at once, so many refusals cause one login.

What a refusal leads to:

- 401 with a token that has a refresh token, from the same authorization server the resource
  still names: a refresh (RFC 6749 section 6). A refresh token is also used *before* expiry, in
  `authorization`, when the access token is within `REFRESH_MARGIN` seconds of `expires_at`. A
  refresh asks for the grant as it is (no `scope`), and a refresh token the server refuses for
  good (`invalid_grant`, `invalid_scope`, ...) is dropped at the first refusal.
- 401 otherwise: a login (`interactive=False`: never; the refusal stands). Discovery runs again
  on every login (`discovery.discover`), so a resource that now names another authorization server
  is noticed: registrations are kept per issuer, and a new issuer means a new registration (the
  old server's client ID is never shown to the new one).
- 403 `insufficient_scope`: a step-up login asking for the union of the scopes asked for before
  and the challenge's. A challenge that adds no scope is retried once (`MAX_REPEATED_STEP_UPS`);
  after that the refusal stands (the spec's retry limit). And whatever the reasons, no more than
  `MAX_LOGINS_PER_MINUTE` logins start per resource per minute.

The login itself (`_authorize`): the scopes (the challenge's `scope`, else the resource's
`scopes_supported`, else none; `offline_access` added when the authorization server lists it),
a registration (`registration.obtain_registration`), PKCE S256 and a fresh `state`, the
authorization URL with `resource`, the browser (`redirect_handler`) and the redirect
(`callback`), then the checks before the code goes anywhere: `state` identical, RFC 9207 `iss`
per the spec's table (present: identical to the recorded issuer, by simple string comparison;
absent: refused only when the server advertises `authorization_response_iss_parameter_supported`),
and an `error` answer reported by its code only once `iss` passed. Then the code exchange.

Tokens and registrations are saved in the `TokenStore` under the resource URL. Nothing is logged
or raised that holds a token, a secret, a code or a verifier; `repr` shows none.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..fetch import FetchError, check_url, endpoint_problem, probe, safe_url
from .browser import LoopbackListener, open_browser
from .discovery import (
    Challenge,
    Discovered,
    OAuthError,
    ServerMetadata,
    bearer_challenge,
    discover,
    discover_authorization_server,
    legacy_metadata,
)
from .registration import AUTH_METHODS, Registration, obtain_registration
from .store import FileTokenStore, TokenStore
from .tokens import TokenError, TokenSet, authorization_url, exchange_code, pkce_pair, refresh

log = logging.getLogger("mcpsync")

__all__ = ["MAX_LOGINS_PER_MINUTE", "MAX_REPEATED_STEP_UPS", "REFRESH_MARGIN", "OAuth", "OAuthError"]

REFRESH_MARGIN = 30.0
"""Seconds before `expires_at` at which a held refresh token is used."""
MAX_REPEATED_STEP_UPS = 1
"""How often a 403 `insufficient_scope` that asks for nothing new leads to another login."""
MAX_LOGINS_PER_MINUTE = 3
"""Logins started for one resource within 60 s, at most: a server that refuses every token
cannot keep a browser opening."""

_REFRESH_TOKEN_REFUSED = ("invalid_grant", "invalid_scope", "invalid_client", "unauthorized_client")
"""Token endpoint errors after which a refresh token is dropped: the same request would be refused
again (RFC 6749 section 5.2), and `authorization` would otherwise send it before every request."""

_PROBE = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "ping"}).encode()


@dataclass
class _Session:
    """What the flow knows about one resource (guarded by that resource's flow lock)."""

    tokens: TokenSet | None = None
    header: str | None = None
    registrations: dict[str, Registration] = field(default_factory=dict)
    repeated_step_ups: int = 0
    logins: list[float] = field(default_factory=list)

    def hold(self, tokens: TokenSet | None) -> None:
        self.tokens = tokens
        self.header = tokens.header() if tokens is not None else None


class OAuth:
    """Log in with OAuth 2.1 when a server asks for it: `mcpsync.connect(url, auth=OAuth())`.

    Args:
        client_id: a client registered in advance with the authorization server (used first).
        client_secret: its secret, for a confidential pre-registered client.
        client_metadata_url: an HTTPS URL of this client's metadata document, used as the client ID
            when the authorization server supports Client ID Metadata Documents.
        client_name: the name dynamic client registration gives (shown on consent pages).
        scopes: the scopes to ask for; None: the spec's choice (the challenge's, else the
            resource's `scopes_supported`, else none).
        redirect_uri: where the authorization server sends the browser back; default a loopback
            listener on http://127.0.0.1:<free port>/callback. Required with `callback`.
        redirect_handler: given the authorization URL (default: open the browser, or print the URL).
        callback: returns the URL the browser was redirected to (with `code`, `state`, `iss`);
            default: the loopback listener's, waiting at most `login_timeout`.
        token_store: where tokens and registrations are kept (default `FileTokenStore()`).
        token_endpoint_auth_method: "client_secret_basic", "client_secret_post" or "none"; None:
            chosen from the registration and the server's metadata.
        interactive: False: only stored or refreshed tokens, never a browser.
        login_timeout: how long a login may wait for the user.
        timeout: each HTTP request's limit (metadata, registration, token endpoint).
        clock: seconds since the epoch (token expiry); injectable for tests.
    """

    def __init__(
        self,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        client_metadata_url: str | None = None,
        client_name: str = "mcpsync",
        scopes: Iterable[str] | None = None,
        redirect_uri: str | None = None,
        redirect_handler: Callable[[str], None] | None = None,
        callback: Callable[[], str] | None = None,
        token_store: TokenStore | None = None,
        token_endpoint_auth_method: str | None = None,
        interactive: bool = True,
        login_timeout: float = 300.0,
        timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if client_secret is not None and client_id is None:
            raise ValueError("client_secret needs client_id")
        if client_metadata_url is not None:
            parts = urllib.parse.urlsplit(client_metadata_url)
            if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/") or endpoint_problem(client_metadata_url):
                raise ValueError("client_metadata_url must be an https URL with a path and no credentials or fragment (the client ID metadata document)")
        if callback is not None and redirect_uri is None:
            raise ValueError("a callback needs the redirect_uri the authorization server sends the browser to")
        if redirect_uri is not None and callback is None:
            LoopbackListener.check(redirect_uri)
        if token_endpoint_auth_method is not None and token_endpoint_auth_method not in AUTH_METHODS:
            raise ValueError(f"token_endpoint_auth_method must be one of {', '.join(AUTH_METHODS)}")
        if login_timeout <= 0 or timeout <= 0:
            raise ValueError("timeouts must be positive")
        self._client_id = client_id
        self._client_secret = client_secret
        self._client_metadata_url = client_metadata_url
        self._client_name = client_name
        self._scopes = tuple(scopes) if scopes is not None else None
        self._redirect_uri = redirect_uri
        self._redirect_handler = redirect_handler or open_browser
        self._callback = callback
        self._store: TokenStore = token_store if token_store is not None else FileTokenStore()
        self._auth_method = token_endpoint_auth_method
        self._interactive = interactive
        self._login_timeout = float(login_timeout)
        self._timeout = float(timeout)
        self._clock = clock
        self._lock = threading.Lock()  # guards the two dicts below, never held during I/O
        self._sessions: dict[str, _Session] = {}
        self._flows: dict[str, threading.Lock] = {}
        self._servers: dict[str, ServerMetadata] = {}

    def __repr__(self) -> str:
        who = "pre-registered" if self._client_id else "metadata document" if self._client_metadata_url else "registered"
        return f"OAuth({who} client, interactive={self._interactive})"

    # -- HttpCredentials -----------------------------------------------------------------------

    def authorization(self, resource: str) -> str | None:
        """The `Authorization` header for `resource`: "Bearer <token>", or None before a login.
        A token about to expire is refreshed first when a refresh token is held (and no flow is
        running for this resource)."""
        session = self._session(resource)
        tokens = session.tokens
        if tokens is not None and tokens.refresh_token and tokens.expired(self._clock(), REFRESH_MARGIN):
            flow = self._flow(resource)
            if flow.acquire(blocking=False):  # a running flow will answer for it
                try:
                    if session.tokens is tokens:
                        self._refresh(resource, session, None)
                finally:
                    flow.release()
        return session.header

    def refused(self, resource: str, status: int, www_authenticate: str | None, sent: str | None) -> bool:
        """A refusal of `resource`: refresh, log in or step up, then True to retry; False when
        the refusal stands (not a 401/403, a retry limit reached, more scopes a non-interactive
        client cannot ask for).

        Raises:
            OAuthError: the flow failed (discovery, registration, the user, the token endpoint),
                or a login is needed and `interactive=False` forbids one (the message says to run
                `mcpsync login URL`).
        """
        if status not in (401, 403):
            return False
        flow = self._flow(resource)
        if not flow.acquire(timeout=self._login_timeout + 8 * self._timeout):
            log.warning("OAuth: gave up waiting for another login to %s", safe_url(resource))
            return False
        try:
            session = self._session(resource)
            if session.header is not None and session.header != sent:
                return True  # replaced meanwhile (another thread logged in or refreshed)
            challenge = bearer_challenge(www_authenticate) or Challenge("bearer")
            if status == 403:
                return self._step_up(resource, session, challenge)
            tokens = session.tokens
            refreshable = tokens is not None and tokens.refresh_token is not None and sent is not None
            if not self._interactive and not refreshable:
                raise _needs_login(resource)
            found = discover(resource, challenge.params.get("resource_metadata"), timeout=self._timeout)
            same_server = tokens is not None and tokens.issuer == found.server.issuer
            if same_server and sent is not None and self._refresh(resource, session, found):
                return True
            if tokens is not None and tokens.issuer is not None and tokens.issuer != found.server.issuer:
                log.info("OAuth: %s now names another authorization server; logging in there", safe_url(resource))
            if not self._interactive:
                raise _needs_login(resource)
            if not self._may_log_in(resource, session):
                return False
            previous = tokens.scopes if tokens is not None and same_server else None  # keep what was granted
            self._authorize(resource, session, found, self._scopes_for(found, challenge, previous))
            return True
        finally:
            flow.release()

    # -- the CLI's verbs -----------------------------------------------------------------------

    def login(self, resource: str) -> None:
        """Log in to `resource` now (ask the endpoint what it needs, then the whole flow) and keep
        the tokens: what `mcpsync login URL` does.

        Raises:
            OAuthError: as `refused`, or the endpoint does not ask for a login, or
                `interactive=False` (which forbids any login).
        """
        check_url(resource)
        if not self._interactive:
            raise OAuthError("login() starts a login in the browser, which interactive=False forbids")
        try:
            status, header = probe(resource, _PROBE, timeout=self._timeout)
        except FetchError as exc:
            raise OAuthError(f"cannot reach {safe_url(resource)}: {exc}") from None
        challenge = (bearer_challenge(header) if status in (401, 403) else None) or Challenge("bearer")
        flow = self._flow(resource)
        if not flow.acquire(timeout=self._login_timeout + 8 * self._timeout):
            raise OAuthError(f"another login to {safe_url(resource)} is still running")
        try:
            found = discover(resource, challenge.params.get("resource_metadata"), timeout=self._timeout)
            if found.resource_metadata is None and status not in (401, 403):
                raise OAuthError(f"{safe_url(resource)} does not ask for a login (HTTP {status}, no protected resource metadata)")
            session = self._session(resource)
            self._authorize(resource, session, found, self._scopes_for(found, challenge, None))
        finally:
            flow.release()

    def logout(self, resource: str) -> bool:
        """Forget the tokens and registrations kept for `resource`; True if there were any."""
        flow = self._flow(resource)
        with _acquired(flow, self._login_timeout + 8 * self._timeout):
            with self._lock:
                session = self._sessions.pop(resource, None)
            held = session is not None and (session.tokens is not None or bool(session.registrations))
            try:
                stored = self._store.delete(resource)
            except OSError as exc:
                raise OAuthError(f"cannot forget the tokens of {safe_url(resource)}: {type(exc).__name__}") from None
            return stored or held

    # -- the parts -----------------------------------------------------------------------------

    def _flow(self, resource: str) -> threading.Lock:
        with self._lock:
            flow = self._flows.get(resource)
            if flow is None:
                flow = self._flows[resource] = threading.Lock()
            return flow

    def _session(self, resource: str) -> _Session:
        session = self._sessions.get(resource)
        if session is not None:
            return session
        loaded = self._load(resource)
        with self._lock:
            return self._sessions.setdefault(resource, loaded)

    def _load(self, resource: str) -> _Session:
        session = _Session()
        try:
            stored = self._store.load(resource)
        except OSError as exc:
            log.warning("OAuth: the token store failed (%s); starting without stored tokens", type(exc).__name__)
            stored = None
        if not stored:
            return session
        tokens = stored.get("tokens")
        session.hold(TokenSet.from_dict(tokens) if isinstance(tokens, dict) else None)
        registrations = stored.get("registrations")
        if isinstance(registrations, dict):
            for issuer, value in registrations.items():
                registration = Registration.from_dict(value) if isinstance(value, dict) else None
                if registration is not None and registration.issuer == issuer:
                    session.registrations[issuer] = registration
        return session

    def _save(self, resource: str, session: _Session) -> None:
        value: dict[str, Any] = {
            "version": 1,
            "tokens": session.tokens.to_dict() if session.tokens is not None else None,
            "registrations": {issuer: r.to_dict() for issuer, r in session.registrations.items() if r.kind != "pre-registered"},
        }
        try:
            self._store.save(resource, value)
        except OSError as exc:
            log.warning("OAuth: the token store failed (%s); the login lasts only this process", type(exc).__name__)

    def _server(self, issuer: str) -> ServerMetadata:
        """`issuer`'s metadata (for a refresh without discovery), fetched once per process."""
        with self._lock:
            known = self._servers.get(issuer)
        if known is not None:
            return known
        found = discover_authorization_server(issuer, timeout=self._timeout) or legacy_metadata(issuer)
        with self._lock:
            self._servers[issuer] = found
        return found

    def _registration_for(self, session: _Session, issuer: str) -> Registration | None:
        if self._client_id is not None:
            return Registration(issuer, self._client_id, self._client_secret, self._auth_method, (), "pre-registered")
        return session.registrations.get(issuer)

    def _refresh(self, resource: str, session: _Session, found: Discovered | None) -> bool:
        """Trade the held refresh token for new tokens; False (and the refresh token dropped when
        the server says it is no longer good) when that fails."""
        tokens = session.tokens
        if tokens is None or tokens.refresh_token is None or tokens.issuer is None:
            return False
        try:
            server = found.server if found is not None else self._server(tokens.issuer)
            registration = self._registration_for(session, tokens.issuer)
            if registration is None:
                return False
            fresh = refresh(server, registration, tokens, resource=tokens.resource or resource, timeout=self._timeout, clock=self._clock)
        except TokenError as exc:
            log.info("OAuth: refreshing the token of %s failed: %s", safe_url(resource), exc)
            if exc.error in _REFRESH_TOKEN_REFUSED:
                session.hold(replace(tokens, refresh_token=None))  # asked once: never again on every request
                self._save(resource, session)
            return False
        except OAuthError as exc:
            log.info("OAuth: cannot refresh the token of %s: %s", safe_url(resource), exc)
            return False
        session.hold(fresh)
        self._save(resource, session)
        log.debug("OAuth: refreshed the token of %s", safe_url(resource))
        return True

    def _step_up(self, resource: str, session: _Session, challenge: Challenge) -> bool:
        if challenge.params.get("error") != "insufficient_scope":
            return False
        if not self._interactive:
            log.info("OAuth: %s asks for more scopes, and this client is not interactive", safe_url(resource))
            return False
        before = tuple(session.tokens.scopes or ()) if session.tokens is not None else ()
        wanted = _union(before, self._scopes or (), challenge.scopes or ())
        if set(wanted) <= set(before):
            if session.repeated_step_ups >= MAX_REPEATED_STEP_UPS:
                log.warning("OAuth: %s still refuses the scopes it asked for; giving up", safe_url(resource))
                return False
            session.repeated_step_ups += 1
        else:
            session.repeated_step_ups = 0
        if not self._may_log_in(resource, session):
            return False
        found = discover(resource, challenge.params.get("resource_metadata"), timeout=self._timeout)
        self._authorize(resource, session, found, self._with_offline_access(found.server, wanted))
        return True

    def _may_log_in(self, resource: str, session: _Session) -> bool:
        now = time.monotonic()
        session.logins = [started for started in session.logins if now - started < 60.0]
        if len(session.logins) >= MAX_LOGINS_PER_MINUTE:
            log.warning("OAuth: %d logins to %s within a minute; not starting another", len(session.logins), safe_url(resource))
            return False
        session.logins.append(now)
        return True

    def _scopes_for(self, found: Discovered, challenge: Challenge, previous: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """The spec's scope choice: the challenge's `scope` (with the application's and those asked
        for before), else the resource's `scopes_supported`, else none."""
        asked = _union(previous or (), self._scopes or (), challenge.scopes or ())
        if not asked and found.resource_metadata is not None:
            asked = found.resource_metadata.scopes_supported or ()
        return self._with_offline_access(found.server, asked)

    @staticmethod
    def _with_offline_access(server: ServerMetadata, scopes: tuple[str, ...]) -> tuple[str, ...] | None:
        """`scopes` plus `offline_access` when the authorization server lists it (for a refresh
        token); None for no scopes (the `scope` parameter is then omitted)."""
        if not scopes:
            return None
        if server.scopes_supported and "offline_access" in server.scopes_supported and "offline_access" not in scopes:
            return (*scopes, "offline_access")
        return scopes

    def _authorize(self, resource: str, session: _Session, found: Discovered, scopes: tuple[str, ...] | None) -> None:
        """The authorization code flow with PKCE, checked and exchanged; the tokens are kept."""
        server = found.server
        log.info("OAuth: logging in to %s at %s", safe_url(resource), safe_url(server.issuer))
        with self._redirect_target(session, server.issuer) as (redirect_uri, wait):
            registration = self._registration(session, server, redirect_uri)
            verifier, code_challenge = pkce_pair()
            state = secrets.token_urlsafe(32)
            expected_issuer = server.issuer  # recorded with the verifier and the state, before the redirect
            url = authorization_url(server, registration, redirect_uri=redirect_uri, scopes=scopes, state=state,
                                    challenge=code_challenge, resource=found.resource)
            self._redirect_handler(url)
            returned = wait()
        code = _check_response(returned, state, expected_issuer, server.iss_parameter_supported)
        tokens = exchange_code(server, registration, code=code, verifier=verifier, redirect_uri=redirect_uri,
                               resource=found.resource, scopes=scopes, timeout=self._timeout, clock=self._clock)
        session.hold(replace(tokens, issuer=expected_issuer))
        with self._lock:
            self._servers[server.issuer] = server
        self._save(resource, session)
        log.info("OAuth: logged in to %s", safe_url(resource))

    @contextlib.contextmanager
    def _redirect_target(self, session: _Session, issuer: str) -> Iterator[tuple[str, Callable[[], str]]]:
        """The redirect URI and how to wait for the redirect: the application's callback, or a
        loopback listener (on the port the registration for `issuer` knows, when it is free)."""
        if self._callback is not None:
            assert self._redirect_uri is not None
            yield self._redirect_uri, self._callback
            return
        listener: LoopbackListener | None = None
        wanted = [self._redirect_uri] if self._redirect_uri is not None else []
        known = session.registrations.get(issuer)
        if self._redirect_uri is None and known is not None:
            wanted += [uri for uri in known.redirect_uris if uri.startswith("http://127.0.0.1:")]
        for uri in wanted:
            try:
                listener = LoopbackListener(uri)
                break
            except OSError:
                if uri == self._redirect_uri:
                    raise OAuthError(f"cannot listen on {uri} for the login's redirect (is the port in use?)") from None
        if listener is None:
            listener = LoopbackListener(None)
        try:
            yield listener.redirect_uri, lambda: listener.wait(self._login_timeout)
        finally:
            listener.close()

    def _registration(self, session: _Session, server: ServerMetadata, redirect_uri: str) -> Registration:
        pre = self._registration_for(session, server.issuer) if self._client_id is not None else None
        if pre is not None:
            return pre
        known = session.registrations.get(server.issuer)
        if known is not None and known.kind == "cimd" and not server.client_id_metadata_document_supported:
            known = None
        if known is not None and known.usable(server.issuer, redirect_uri, self._clock()):
            return known
        registration = obtain_registration(
            server,
            redirect_uri=redirect_uri,
            client_id=None,
            client_secret=None,
            client_metadata_url=self._client_metadata_url,
            client_name=self._client_name,
            token_endpoint_auth_method=self._auth_method,
            timeout=self._timeout,
        )
        session.registrations[server.issuer] = registration  # saved with the tokens
        return registration


def _needs_login(resource: str) -> OAuthError:
    """A refusal a non-interactive client cannot answer: it says what would (a failure the
    caller sees, rather than the server's bare 401, so a gateway's log and a script's traceback
    name the fix)."""
    return OAuthError(f"a login is needed, which this client may not start (interactive=False); run: mcpsync login {safe_url(resource)}")


def _union(*groups: Iterable[str]) -> tuple[str, ...]:
    """The scopes of all groups, each once, in order of first appearance."""
    seen: dict[str, None] = {}
    for group in groups:
        for scope in group:
            seen.setdefault(scope, None)
    return tuple(seen)


def _check_response(url: str, state: str, issuer: str, iss_required: bool) -> str:
    """The authorization code of the redirect `url`, after the checks: `state` identical, then
    RFC 9207 `iss` by the spec's table, then an `error` reported (by its code). Never puts the
    code or the state in a message.

    Raises:
        OAuthError: any check failed, or the server answered an error.
    """
    try:
        fields = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query, keep_blank_values=True, strict_parsing=False)
    except ValueError:
        raise OAuthError("the authorization response could not be parsed") from None
    for name in ("state", "code", "iss", "error"):
        if len(fields.get(name, ())) > 1:
            raise OAuthError(f"the authorization response has more than one {name!r}: refused")
    returned_state = fields.get("state", [""])[0]
    if not secrets.compare_digest(returned_state.encode(), state.encode()):
        raise OAuthError("the authorization response's state does not match this login's: refused")
    iss = fields.get("iss", [None])[0]
    if iss is not None:
        if iss != issuer:
            raise OAuthError(f"the authorization response comes from another issuer than {safe_url(issuer)} (RFC 9207 iss): refused")
    elif iss_required:
        raise OAuthError(f"the authorization response has no iss, which {safe_url(issuer)} says it sends (RFC 9207): refused")
    error = fields.get("error", [None])[0]
    if error is not None:
        shown = error if error.isascii() and error.replace("_", "").isalnum() and len(error) <= 64 else "an error"
        raise OAuthError(f"the authorization server refused the login: {shown}")
    code = fields.get("code", [""])[0]
    if not code:
        raise OAuthError("the authorization response has no code")
    return code


@contextlib.contextmanager
def _acquired(lock: threading.Lock, timeout: float) -> Iterator[None]:
    if not lock.acquire(timeout=timeout):
        raise OAuthError("another login is still running")
    try:
        yield
    finally:
        lock.release()
