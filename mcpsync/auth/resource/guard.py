"""The resource-server side of MCP authorization: what a protected HTTP endpoint says and checks.

Strategy: one immutable `Auth` object holds a deployment's settings (the verifier, this endpoint's
canonical URL, its authorization servers, the scopes every request needs) and answers the HTTP
layer's three questions as plain functions of a WSGI environ:

- *Who is this?* `authenticate(environ, endpoint_path)`: the bearer token of the `Authorization` header (RFC 6750
  §2.1; never the query string, which is refused), checked by the verifier, its scopes widened by
  `scope_implies`, and the server-wide scopes required. A principal that names neither a subject
  nor a client is refused (401 `invalid_token`), whatever verifier answered it: it would be no one
  in particular, and all such callers would share one identity and so each other's sessions. A refusal is an `AuthRefusal` carrying the
  status and the `WWW-Authenticate` challenge: 401 without a token or with a bad one, 403
  `insufficient_scope` naming the scopes, 400 for a malformed header, 503 when the verifier cannot
  check now.
- *What may it do?* `insufficient(...)`: the 403 for an entry (a tool, prompt or resource)
  whose scopes the token lacks, so a client can step up (re-authorize with more scopes).
- *Where do I log in?* `metadata(environ, endpoint_path)`: the RFC 9728 protected resource metadata document, at
  `/.well-known/oauth-protected-resource` and at that path suffixed with the endpoint's path,
  naming this resource, its authorization servers, its scopes and that tokens go in the header.

The canonical URL (`resource`) is the audience tokens must be issued for (RFC 8707) and the
`resource` of the metadata. Without one (a static-token deployment), both come from the request
itself: its scheme, `Host` and path.

Nothing here does I/O but the verifier's own; nothing logs a token. Why no token passes through:
a gateway's upstream credentials are its own (`headers=`), never the client's token (the spec
forbids passing it on), so this module only ever reads the token it checks.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ...errors import McpsyncError
from ..b64token import is_b64token
from .principal import InvalidToken, Principal, TokenVerifier, VerifierUnavailable, checked_scopes

log = logging.getLogger("mcpsync")

__all__ = ["METADATA_PATH", "Auth", "AuthRefusal"]

METADATA_PATH = "/.well-known/oauth-protected-resource"
"""RFC 9728 §3: where protected resource metadata lives (suffixed with the resource's path)."""

RETRY_AFTER = "5"
"""Seconds a client is asked to wait when tokens cannot be checked (503)."""

# RFC 6750 §2.1: credentials = "Bearer" 1*SP b64token; b64token = 1*( ALPHA / DIGIT / "-" / "." /
# "_" / "~" / "+" / "/" ) *"=" (`is_b64token`). The scheme is case-insensitive (RFC 9110 §11.1).
# What may stand inside a quoted-string of the challenge: printable ASCII but the quote and the
# backslash (which would need escaping, and clients parse them differently).
_UNSAFE_IN_QUOTES = re.compile(r'[^\x20-\x7e]|["\\]')

_Where = tuple[Mapping[str, Any], str]  # a request's environ and the endpoint's path, for its challenge


class AuthRefusal(McpsyncError):
    """A request the endpoint will not serve: its `status`, its `WWW-Authenticate` challenge (None
    for 503) and a message for the JSON-RPC error body."""

    def __init__(self, status: int, challenge: str | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.challenge = challenge
        self.message = message

    def headers(self) -> list[tuple[str, str]]:
        if self.challenge is None:
            return [("Retry-After", RETRY_AFTER)]
        return [("WWW-Authenticate", self.challenge)]


class Auth:
    """Protect an HTTP endpoint: only requests with a valid bearer token are served.

    Args:
        verifier: checks each token (`JwtVerifier`, `IntrospectionVerifier`, `StaticTokens`, or
            your own `TokenVerifier`).
        resource: this endpoint's canonical URL (`https://mcp.example.com/mcp`): the audience
            tokens must name and the metadata's `resource`. None: the URL each request used.
        authorization_servers: the issuers clients get tokens from (the metadata's
            `authorization_servers`); none for static tokens handed out by hand.
        required_scopes: scopes every request needs (else 403 `insufficient_scope`); also what a
            401 challenge asks for.
        scopes_supported: the metadata's `scopes_supported` (default: `required_scopes`, the
            minimum for basic use; entries' own scopes are asked for by step-up).
        resource_name: a human-readable name for the metadata (`resource_name`).
        scope_implies: broader scopes and the narrower ones they grant (`{"admin": ["files:read",
            "files:write"]}`), followed transitively: a token with `admin` may call a tool that
            needs `files:read`, and `ctx.principal.scopes` lists all three.
    """

    def __init__(
        self,
        verifier: TokenVerifier,
        *,
        resource: str | None = None,
        authorization_servers: Iterable[str] = (),
        required_scopes: Iterable[str] = (),
        scopes_supported: Iterable[str] | None = None,
        resource_name: str | None = None,
        scope_implies: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        if not callable(getattr(verifier, "verify", None)):
            raise TypeError("verifier must have a verify(token) method (see mcpsync.auth.TokenVerifier)")
        if resource is not None:
            _check_resource(resource)
        self.verifier = verifier
        self.resource = resource
        self.authorization_servers: tuple[str, ...] = tuple(_checked_urls(authorization_servers, "authorization_servers"))
        self.required_scopes: tuple[str, ...] = checked_scopes(required_scopes, "required_scopes")
        self.scopes_supported: tuple[str, ...] = (
            self.required_scopes if scopes_supported is None else checked_scopes(scopes_supported, "scopes_supported")
        )
        self.resource_name = resource_name
        self._implied = _closure(scope_implies or {})
        audiences = getattr(verifier, "audiences", None)  # JwtVerifier's; a verifier of your own may say too
        if resource is not None and audiences and resource not in audiences:
            log.warning(
                "Auth: resource %r is not among the audiences %s the verifier accepts: tokens issued for this resource "
                "(RFC 8707) will be refused unless the authorization server names one of those",
                resource,
                list(audiences),
            )
        self._required = frozenset(self.required_scopes)
        # True while the verifier fails: warn once per streak. A plain flag, read on every request:
        # two threads that race on it log a line twice at worst.
        self._failing = False

    def __repr__(self) -> str:
        return f"Auth({type(self.verifier).__name__}, resource={self.resource!r}, required_scopes={list(self.required_scopes)!r})"

    # -- who is this? --------------------------------------------------------------------------
    def authenticate(self, environ: Mapping[str, Any], endpoint_path: str) -> Principal:
        """The principal of this request's bearer token, or `AuthRefusal`. Reads no body.
        (`endpoint_path`: the endpoint's path below the app's mount point, for the challenge.)"""
        where = (environ, endpoint_path)
        query = environ.get("QUERY_STRING")
        if query and _query_has_token(query):
            raise self._refusal(400, "invalid_request", "access tokens are accepted only in the Authorization header", where)
        token = self._bearer_token(where)
        try:
            principal = self.verifier.verify(token)
        except InvalidToken as exc:
            raise self._refusal(401, "invalid_token", str(exc) or "the access token is not valid", where) from None
        except VerifierUnavailable as exc:
            if not self._failing:
                self._failing = True
                log.warning("cannot check access tokens: %s; answering 503 until it can", exc)
            raise AuthRefusal(503, None, "Service Unavailable: access tokens cannot be checked now") from None
        if self._failing:
            self._failing = False
            log.warning("access tokens can be checked again")
        if principal is None:
            raise self._refusal(401, "invalid_token", "the access token is not valid", where)
        if not isinstance(principal, Principal):
            raise TypeError(f"{type(self.verifier).__name__}.verify() returned {type(principal).__name__}, not a Principal or None")
        if not principal.subject and not principal.client_id:
            # No one in particular: every such token would share one identity (`Principal.key`),
            # so one holder could use another's session. Refused here, whichever verifier said it.
            raise self._refusal(401, "invalid_token", "the token names no subject and no client", where)
        if self._implied:
            principal = self.widen(principal)
        if not self._required <= principal.scopes:
            raise self.insufficient(*where, (), "this server needs the scope(s) " + " ".join(self.required_scopes))
        return principal

    def _bearer_token(self, where: _Where) -> str:
        value = where[0].get("HTTP_AUTHORIZATION")
        if value is None:
            raise self._refusal(401, None, "an access token is required", where)
        value = str(value).strip(" \t")
        scheme, _, rest = value.partition(" ")
        if scheme.lower() != "bearer":
            raise self._refusal(401, None, "an access token is required (Authorization: Bearer)", where)
        token = rest.lstrip(" ")
        if not is_b64token(token):
            raise self._refusal(400, "invalid_request", "the Authorization header is not a valid bearer token", where)
        return token

    def widen(self, principal: Principal) -> Principal:
        """`principal` with the scopes its scopes imply (`scope_implies`)."""
        if not self._implied or not principal.scopes & self._implied.keys():
            return principal
        scopes = set(principal.scopes)
        for scope in principal.scopes:
            scopes |= self._implied.get(scope, frozenset())
        return replace(principal, scopes=frozenset(scopes))

    # -- challenges ----------------------------------------------------------------------------
    def insufficient(self, environ: Mapping[str, Any], endpoint_path: str, scopes: Iterable[str], description: str) -> AuthRefusal:
        """The 403 for a token that lacks `scopes`. The challenge names every scope the operation
        needs, the server-wide ones too, so a client steps up once."""
        needed = tuple(dict.fromkeys((*self.required_scopes, *scopes)))
        return self._refusal(403, "insufficient_scope", description, (environ, endpoint_path), scopes=needed)

    def _refusal(self, status: int, error: str | None, description: str, where: _Where, scopes: Iterable[str] | None = None) -> AuthRefusal:
        asked = tuple(self.required_scopes if scopes is None else scopes)
        params = [f'resource_metadata="{self.metadata_url(*where)}"']
        if asked:
            params.append(f'scope="{" ".join(asked)}"')
        if error is not None:
            params.append(f'error="{error}"')
            params.append(f'error_description="{_UNSAFE_IN_QUOTES.sub("", description)}"')
        title = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden"}[status]
        return AuthRefusal(status, "Bearer " + ", ".join(params), f"{title}: {description}")

    # -- where do I log in? --------------------------------------------------------------------
    def resource_url(self, environ: Mapping[str, Any], endpoint_path: str) -> str:
        """This endpoint's canonical URL: `resource`, or the one the request used."""
        if self.resource is not None:
            return self.resource
        return f"{_origin(environ)}{environ.get('SCRIPT_NAME', '')}{endpoint_path}"

    def metadata_url(self, environ: Mapping[str, Any], endpoint_path: str) -> str:
        """Where this endpoint's metadata is (RFC 9728 §3.1: the well-known path, then the
        resource's own path): what 401 and 403 challenges name in `resource_metadata`."""
        parts = urlsplit(self.resource_url(environ, endpoint_path))
        return f"{parts.scheme}://{parts.netloc}{METADATA_PATH}{parts.path.rstrip('/')}"

    def metadata_paths(self, endpoint_path: str) -> frozenset[str]:
        """The paths (below the app's mount point) that serve the metadata: the bare well-known
        one, suffixed with the endpoint's path, and suffixed with the resource's path when a
        proxy in front maps it elsewhere."""
        paths = {METADATA_PATH, METADATA_PATH + endpoint_path.rstrip("/")}
        if self.resource is not None:
            paths.add(METADATA_PATH + urlsplit(self.resource).path.rstrip("/"))
        return frozenset(paths)

    def metadata(self, environ: Mapping[str, Any], endpoint_path: str) -> dict[str, Any]:
        """The protected resource metadata document (RFC 9728 §2)."""
        document: dict[str, Any] = {"resource": self.resource_url(environ, endpoint_path)}
        if self.authorization_servers:
            document["authorization_servers"] = list(self.authorization_servers)
        if self.scopes_supported:
            document["scopes_supported"] = list(self.scopes_supported)
        document["bearer_methods_supported"] = ["header"]
        if self.resource_name:
            document["resource_name"] = self.resource_name
        return document


def _origin(environ: Mapping[str, Any]) -> str:
    scheme = environ.get("wsgi.url_scheme", "http")
    host = environ.get("HTTP_HOST") or f"{environ.get('SERVER_NAME', 'localhost')}:{environ.get('SERVER_PORT', '80')}"
    return f"{scheme}://{host}"


def _query_has_token(query: str) -> bool:
    return "access_token" in query and any(name == "access_token" for name, _ in parse_qsl(query, keep_blank_values=True))


def _check_resource(resource: str) -> None:
    """RFC 8707 §2: an absolute URI without a fragment; MCP's canonical form is http(s)."""
    parts = urlsplit(resource)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment or "#" in resource:
        raise ValueError(f"resource must be this endpoint's absolute http(s) URL without a fragment, not {resource!r}")


def _checked_urls(urls: Iterable[str], name: str) -> list[str]:
    if isinstance(urls, str):
        raise TypeError(f"{name} must be a list of URLs, not one string")
    checked = []
    for url in urls:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"{name}: {url!r} is not an http(s) URL")
        checked.append(url)
    return checked


def _closure(implies: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """Each broad scope with every scope it grants, directly or through others."""
    direct = {scope: frozenset(checked_scopes(narrower, f"scope_implies[{scope!r}]")) for scope, narrower in implies.items()}
    closed: dict[str, frozenset[str]] = {}
    for scope in direct:
        seen: set[str] = set()
        todo = list(direct[scope])
        while todo:
            narrower = todo.pop()
            if narrower not in seen:
                seen.add(narrower)
                todo.extend(direct.get(narrower, ()))
        closed[scope] = frozenset(seen)
    return closed
