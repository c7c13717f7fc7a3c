"""Who the client is at an authorization server: pre-registered, a metadata document, or registered now.

Strategy: the spec's priority order (client-registration, "Clients supporting all options"), as
one function, `obtain_registration`:

1. a pre-registered `client_id` (and secret) the application was given;
2. a Client ID Metadata Document: the application's HTTPS URL used as the `client_id`, when the
   authorization server says `client_id_metadata_document_supported`;
3. RFC 7591 dynamic client registration at its `registration_endpoint`, with
   `application_type: "native"` (the spec's MUST; a loopback redirect is a native client),
   `redirect_uris`, `grant_types` including `refresh_token` (so refresh tokens may be issued) and
   the `token_endpoint_auth_method` chosen from the server's metadata, and no `scope`: RFC 7591
   makes a registered `scope` the set the client may ever ask for, so naming the first login's
   scopes would refuse every later step-up (`invalid_scope`), and a server whose own scope list
   lacks them (the MCP scopes are often its resource server's) refuses the registration itself
   (`invalid_client_metadata`). Each authorization request names the scopes it needs instead;
4. else an `OAuthError` saying a client ID is needed.

A `Registration` is bound to the issuer that issued it (the spec's "Authorization Server
Binding"): the flow keeps registrations per issuer and never offers one to another server.
`token_auth_method` decides how the token endpoint is authenticated: what the registration said,
else the first of `client_secret_basic`, `client_secret_post` the server supports when there is a
secret, else `none`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..fetch import MAX_TIMESTAMP, FetchError, parse_seconds, post_json, safe_url
from .discovery import OAuthError, ServerMetadata

log = logging.getLogger("mcpsync")

__all__ = ["AUTH_METHODS", "Registration", "obtain_registration", "token_auth_method"]

AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
"""The token endpoint authentication methods of the authorization code flow."""


@dataclass(frozen=True, slots=True)
class Registration:
    """A client identity at one authorization server."""

    issuer: str
    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    token_endpoint_auth_method: str | None = None
    """What the registration answer (or the application) said; None: choose from the metadata."""
    redirect_uris: tuple[str, ...] = ()
    kind: str = "pre-registered"
    """"pre-registered", "cimd" or "dcr"."""
    secret_expires_at: float | None = None
    """`client_secret_expires_at` (None or 0: never)."""

    def to_dict(self) -> dict[str, Any]:
        value = asdict(self)
        value["redirect_uris"] = list(self.redirect_uris)
        return value

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Registration | None:
        try:
            return cls(
                issuer=str(value["issuer"]),
                client_id=str(value["client_id"]),
                client_secret=value.get("client_secret") if isinstance(value.get("client_secret"), str) else None,
                token_endpoint_auth_method=value.get("token_endpoint_auth_method") or None,
                redirect_uris=tuple(str(uri) for uri in value.get("redirect_uris") or ()),
                kind=str(value.get("kind") or "dcr"),
                secret_expires_at=float(value["secret_expires_at"]) if value.get("secret_expires_at") else None,
            )
        except (KeyError, TypeError, ValueError):
            return None

    def usable(self, issuer: str, redirect_uri: str, now: float) -> bool:
        """Whether this registration may be used with `issuer` and `redirect_uri` at `now`."""
        if self.issuer != issuer:
            return False
        if self.secret_expires_at and now >= self.secret_expires_at:
            return False
        return self.kind != "dcr" or redirect_uri in self.redirect_uris


def token_auth_method(registration: Registration, metadata: ServerMetadata) -> str:
    """How to authenticate at the token endpoint: the registration's method; else, with a secret,
    the first of basic and post the server lists (RFC 8414's default when it lists none is basic);
    else `none`."""
    if registration.token_endpoint_auth_method:
        return registration.token_endpoint_auth_method
    if registration.client_secret is None:
        return "none"
    supported = metadata.token_endpoint_auth_methods_supported
    if supported is None:
        return "client_secret_basic"
    for method in AUTH_METHODS:
        if method in supported:
            return method
    return "client_secret_basic"


def _requested_method(metadata: ServerMetadata, wanted: str | None) -> str:
    """The `token_endpoint_auth_method` to ask for when registering."""
    if wanted:
        return wanted
    supported = metadata.token_endpoint_auth_methods_supported
    if supported is None:
        return "none"  # a native client has no way to keep a secret; servers that insist will say so
    for method in ("none", "client_secret_basic", "client_secret_post"):
        if method in supported:
            return method
    return supported[0] if supported else "none"


def obtain_registration(
    metadata: ServerMetadata,
    *,
    redirect_uri: str,
    client_id: str | None,
    client_secret: str | None,
    client_metadata_url: str | None,
    client_name: str,
    token_endpoint_auth_method: str | None,
    timeout: float,
) -> Registration:
    """A client identity at `metadata.issuer`, in the spec's priority order (see the module docstring).

    Raises:
        OAuthError: no option is available, or the registration endpoint refused.
    """
    issuer = metadata.issuer
    if client_id is not None:
        return Registration(issuer, client_id, client_secret, token_endpoint_auth_method, (redirect_uri,), "pre-registered")
    if client_metadata_url is not None and metadata.client_id_metadata_document_supported:
        return Registration(issuer, client_metadata_url, None, token_endpoint_auth_method or "none", (redirect_uri,), "cimd")
    if metadata.registration_endpoint is None:
        raise OAuthError(
            f"the authorization server {safe_url(issuer)} offers no dynamic client registration"
            + ("" if client_metadata_url is None else " and does not accept client metadata documents")
            + ": give OAuth(client_id=...) a client registered there"
        )
    method = _requested_method(metadata, token_endpoint_auth_method)
    request: dict[str, Any] = {
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
        "application_type": "native",
    }
    try:
        answer = post_json(metadata.registration_endpoint, request, timeout=timeout).body
    except FetchError as exc:
        raise OAuthError(f"dynamic client registration at {safe_url(issuer)} failed: {exc}") from None
    if not isinstance(answer, dict) or not isinstance(answer.get("client_id"), str) or not answer["client_id"]:
        raise OAuthError(f"dynamic client registration at {safe_url(issuer)} answered no client_id")
    secret = answer.get("client_secret") if isinstance(answer.get("client_secret"), str) else None
    granted_method = answer.get("token_endpoint_auth_method")
    uris = answer.get("redirect_uris")
    try:  # the server's number: checked, never float() of 10**400
        expires = parse_seconds(answer.get("client_secret_expires_at"), "client_secret_expires_at", maximum=MAX_TIMESTAMP)
    except ValueError as exc:
        raise OAuthError(f"dynamic client registration at {safe_url(issuer)} answered what cannot be used: {exc}") from None
    registration = Registration(
        issuer=issuer,
        client_id=answer["client_id"],
        client_secret=secret or None,
        token_endpoint_auth_method=granted_method if isinstance(granted_method, str) and granted_method else None,
        redirect_uris=tuple(u for u in uris if isinstance(u, str)) if isinstance(uris, list) and uris else (redirect_uri,),
        kind="dcr",
        secret_expires_at=expires or None,  # 0: never (RFC 7591 section 3.2.1)
    )
    log.info("registered with %s as a new OAuth client", safe_url(issuer))
    return registration
