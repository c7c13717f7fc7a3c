"""Where to log in: the 401's challenge, protected resource metadata and authorization server metadata.

Strategy: three pure steps and two fetches, each a function, so the flow (`oauth`) reads as the
spec's sequence and each rule is tested on its own.

- `parse_challenges(header)`: a `WWW-Authenticate` value (RFC 9110 section 11.6.1: several
  challenges, each a scheme with `name=value` or `name="quoted"` parameters) as `Challenge`s;
  `bearer_challenge` picks the Bearer one (its `resource_metadata`, `scope`, `error`).
- `discover_resource(endpoint, hint)`: RFC 9728 protected resource metadata. The challenge's
  `resource_metadata` URL first; else the two well-known URLs in the spec's order (the path-suffixed
  `/.well-known/oauth-protected-resource/<path>`, then the root one). The document's `resource` must
  name this endpoint (`resource_matches`): a server that publishes another resource's metadata is
  refused (`OAuthError`), as the spec requires before any authorization request.
- `discover_authorization_server(issuer)`: RFC 8414 / OpenID Connect Discovery in the spec's order
  (`metadata_urls`), and the document's `issuer` must be identical to the one the URL was built from
  (RFC 8414 section 3.3): a document that fails this is never used, and when no other one is found
  the flow stops with an `OAuthError` naming the mismatch.

The 2025-03-26 fallbacks (no protected resource metadata at all): the endpoint's origin is the
authorization server, and when it publishes no metadata either, its `/authorize`, `/token` and
`/register` are assumed (`legacy_metadata`).

Every URL a server names here is checked once, where it is parsed, by `check_endpoint` (the rule
of `_fetch.endpoint_problem`: `https`, or `http` on loopback; no credentials or fragment): each
endpoint of the authorization server's metadata (`ENDPOINT_FIELDS`: authorization, token,
registration, JWKS, introspection, revocation, userinfo), the endpoints `legacy_metadata` assumes,
and each issuer the protected resource metadata lists in `authorization_servers`. Metadata that
breaks it is refused as a whole with an `OAuthError` naming the field and the rule, before
anything it names is fetched or opened in the browser, so every caller (the `OAuth` client,
`mcpsync login`, `ClientCredentials`, the gateway) gets the check. A challenge's
`resource_metadata` that breaks it (and is not on the endpoint's own origin) is not fetched; the
well-known URLs are tried instead.

Nothing here logs or raises a token or a secret; URLs in messages go through `safe_url`.
"""

from __future__ import annotations

import logging
import re
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import McpsyncError
from ..fetch import ENDPOINT_RULE, FetchError, endpoint_problem, get_json, safe_url

log = logging.getLogger("mcpsync")

__all__ = [
    "ENDPOINT_FIELDS",
    "Challenge",
    "Discovered",
    "OAuthError",
    "ResourceMetadata",
    "ServerMetadata",
    "bearer_challenge",
    "check_endpoint",
    "discover",
    "discover_authorization_server",
    "discover_resource",
    "legacy_metadata",
    "metadata_urls",
    "origin",
    "parse_challenges",
    "resource_matches",
    "resource_metadata_urls",
]


class OAuthError(McpsyncError):
    """Logging in failed: discovery found nothing usable or something refused by the rules (a
    resource or issuer mismatch, a wrong `state` or `iss`), registration or the token endpoint
    refused, or the user did not finish in time. The message says which; it never holds a token,
    a secret or a code. Retrying is safe, but usually needs the cause fixed first."""


def check_endpoint(url: str, name: str, source: str) -> str:
    """`url` if it may be used as the endpoint or issuer `name` that `source` (a metadata
    document, named in the message) gave; else an `OAuthError` naming both and the rule.

    Raises:
        OAuthError: `url` breaks `_fetch.ENDPOINT_RULE`.
    """
    problem = endpoint_problem(url)
    if problem is None:
        return url
    shown = safe_url(url) if isinstance(url, str) else type(url).__name__
    raise OAuthError(f"{source} gives {name} {shown[:80]!r}, which is refused ({problem}): {ENDPOINT_RULE}")


# -- WWW-Authenticate ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Challenge:
    """One challenge of a `WWW-Authenticate` header: its scheme (lower-cased) and parameters
    (names lower-cased, values unquoted)."""

    scheme: str
    params: Mapping[str, str] = field(default_factory=dict)

    @property
    def scopes(self) -> tuple[str, ...] | None:
        """The `scope` parameter split on spaces; None when absent or empty."""
        value = self.params.get("scope", "").split()
        return tuple(value) or None


_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_PARAM = re.compile(rf'\s*({_TOKEN})\s*=\s*(?:"((?:[^"\\]|\\.)*)"|({_TOKEN}=*))\s*')
_SCHEME = re.compile(rf"\s*({_TOKEN})(?=\s|,|$)")
_TOKEN68 = re.compile(r"\s*([A-Za-z0-9\-._~+/]+=*)\s*(?=,|$)")


def parse_challenges(header: str | None) -> list[Challenge]:
    """Every challenge of a `WWW-Authenticate` value, in order; what cannot be parsed is skipped."""
    challenges: list[Challenge] = []
    if not header:
        return challenges
    text, pos = header, 0
    while pos < len(text):
        if text[pos] in ", \t":
            pos += 1
            continue
        scheme = _SCHEME.match(text, pos)
        if scheme is None:  # garbage: skip to the next comma
            comma = text.find(",", pos)
            pos = len(text) if comma < 0 else comma + 1
            continue
        pos = scheme.end()
        params: dict[str, str] = {}
        token68 = _TOKEN68.match(text, pos)
        if token68 is not None and not _PARAM.match(text, pos):
            pos = token68.end()
        else:
            while True:
                param = _PARAM.match(text, pos)
                if param is None:
                    break
                name, quoted, bare = param.group(1).lower(), param.group(2), param.group(3)
                value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else (bare or "")
                params.setdefault(name, value)
                pos = param.end()
                if pos < len(text) and text[pos] == ",":
                    after = _PARAM.match(text, pos + 1)
                    if after is None:  # the comma ends this challenge
                        break
                    pos += 1
                else:
                    break
        challenges.append(Challenge(scheme.group(1).lower(), params))
    return challenges


def bearer_challenge(header: str | None) -> Challenge | None:
    """The first Bearer challenge of a `WWW-Authenticate` value (None if it has none)."""
    for challenge in parse_challenges(header):
        if challenge.scheme == "bearer":
            return challenge
    return None


# -- protected resource metadata (RFC 9728) ------------------------------------------------------

WELL_KNOWN_RESOURCE = "/.well-known/oauth-protected-resource"


@dataclass(frozen=True, slots=True)
class ResourceMetadata:
    """The parts of a protected resource metadata document the flow uses."""

    resource: str
    """The resource identifier, exactly as published: what `resource=` carries (RFC 8707)."""
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None
    url: str
    """Where it was found."""


def origin(url: str) -> str:
    """`scheme://host[:port]` of `url`."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def resource_metadata_urls(endpoint: str) -> list[str]:
    """The well-known URLs to try, in the spec's order: suffixed with the endpoint's path (when it
    has one), then at the root."""
    parts = urllib.parse.urlsplit(endpoint)
    path = parts.path.rstrip("/")
    base = origin(endpoint)
    urls = [base + WELL_KNOWN_RESOURCE + path] if path else []
    urls.append(base + WELL_KNOWN_RESOURCE)
    return urls


def resource_matches(published: str, endpoint: str) -> bool:
    """Whether metadata publishing `published` may speak for `endpoint`: the same origin (scheme and
    host compared case-insensitively, default ports made explicit), and the endpoint's path is the
    published path or below it (RFC 9728 section 3.3 with the root-document case of MCP)."""
    try:
        a, b = urllib.parse.urlsplit(published), urllib.parse.urlsplit(endpoint)
        a_port, b_port = a.port, b.port
    except ValueError:
        return False
    if a.fragment or not a.scheme or not a.hostname:
        return False
    defaults = {"http": 80, "https": 443}
    if a.scheme.lower() != b.scheme.lower() or (a.hostname or "").lower() != (b.hostname or "").lower():
        return False
    if (a_port or defaults.get(a.scheme.lower())) != (b_port or defaults.get(b.scheme.lower())):
        return False
    base, path = a.path.rstrip("/"), b.path.rstrip("/")
    return not base or path == base or path.startswith(base + "/")


def discover_resource(endpoint: str, hint: str | None, *, timeout: float) -> ResourceMetadata | None:
    """The endpoint's protected resource metadata: from `hint` (the challenge's
    `resource_metadata`) when given and usable, else from the well-known URLs in order. None when
    none is published (the 2025-03-26 case).

    Raises:
        OAuthError: a document was found but names another resource, or lists no authorization server.
    """
    if hint and endpoint_problem(hint) is not None and origin(hint) != origin(endpoint):
        log.warning("the challenge's resource_metadata %s is refused (%s); trying the well-known URLs",
                    safe_url(hint), endpoint_problem(hint))
        hint = None
    candidates = ([hint] if hint else []) + [url for url in resource_metadata_urls(endpoint) if url != hint]
    for url, body in _documents(candidates, "protected resource metadata", timeout):
        return _resource_metadata(body, url, endpoint)
    return None


def _documents(urls: Iterable[str], what: str, timeout: float) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each of `urls` that answers a JSON object, with it, in order (fetched as they are asked
    for: a caller that takes the first fetches no more)."""
    for url in urls:
        try:
            body = get_json(url, timeout=timeout).body
        except (FetchError, ValueError) as exc:
            log.debug("no %s at %s: %s", what, safe_url(url), exc)
            continue
        if isinstance(body, dict):
            yield url, body
        else:
            log.debug("the %s at %s is not an object", what, safe_url(url))


def _resource_metadata(body: Mapping[str, Any], url: str, endpoint: str) -> ResourceMetadata:
    resource = body.get("resource")
    if not isinstance(resource, str) or not resource_matches(resource, endpoint):
        shown = safe_url(resource) if isinstance(resource, str) else repr(type(resource).__name__)
        raise OAuthError(
            f"the protected resource metadata at {safe_url(url)} is for {shown}, not {safe_url(endpoint)}: refusing to log in"
        )
    servers = body.get("authorization_servers")
    if not isinstance(servers, list) or not servers or not all(isinstance(s, str) and s for s in servers):
        raise OAuthError(f"the protected resource metadata at {safe_url(url)} names no authorization server")
    for server in servers:
        check_endpoint(server, "authorization_servers", f"the protected resource metadata at {safe_url(url)}")
    return ResourceMetadata(resource, tuple(servers), _strings(body.get("scopes_supported")), url)


def _strings(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    return tuple(item for item in value if isinstance(item, str) and item)


# -- authorization server metadata (RFC 8414, OpenID Connect Discovery) --------------------------

@dataclass(frozen=True, slots=True)
class ServerMetadata:
    """The parts of an authorization server's metadata the flow uses."""

    issuer: str
    authorization_endpoint: str | None
    token_endpoint: str
    registration_endpoint: str | None = None
    scopes_supported: tuple[str, ...] | None = None
    token_endpoint_auth_methods_supported: tuple[str, ...] | None = None
    code_challenge_methods_supported: tuple[str, ...] | None = None
    grant_types_supported: tuple[str, ...] | None = None
    iss_parameter_supported: bool = False
    """`authorization_response_iss_parameter_supported` (RFC 9207 section 3)."""
    client_id_metadata_document_supported: bool = False
    url: str | None = None
    """Where it was found (None: assumed, `legacy_metadata`)."""


def metadata_urls(issuer: str) -> list[str]:
    """The metadata URLs to try for `issuer`, in the spec's order: with a path, RFC 8414 path
    insertion, OpenID path insertion, OpenID path appending; without, RFC 8414 then OpenID."""
    parts = urllib.parse.urlsplit(issuer)
    base = origin(issuer)
    path = parts.path.rstrip("/")
    if path:
        return [
            f"{base}/.well-known/oauth-authorization-server{path}",
            f"{base}/.well-known/openid-configuration{path}",
            f"{base}{path}/.well-known/openid-configuration",
        ]
    return [f"{base}/.well-known/oauth-authorization-server", f"{base}/.well-known/openid-configuration"]


def discover_authorization_server(issuer: str, *, timeout: float) -> ServerMetadata | None:
    """`issuer`'s metadata from the first URL of `metadata_urls` that answers a document whose
    `issuer` is identical to `issuer`. None when no URL answers a document at all.

    Raises:
        OAuthError: documents were found but none names `issuer` (never used), or one lacks a token endpoint.
    """
    mismatched: list[str] = []
    for url, body in _documents(metadata_urls(issuer), "authorization server metadata", timeout):
        if body.get("issuer") != issuer:
            log.warning("authorization server metadata at %s names another issuer; not used", safe_url(url))
            mismatched.append(url)
            continue
        return _server_metadata(body, url)
    if mismatched:
        raise OAuthError(
            f"the authorization server metadata at {safe_url(mismatched[0])} does not name the issuer {safe_url(issuer)} "
            "it was looked up for: refusing to use it"
        )
    return None


ENDPOINT_FIELDS = ("authorization_endpoint", "token_endpoint", "registration_endpoint", "jwks_uri", "introspection_endpoint",
                   "revocation_endpoint", "userinfo_endpoint")
"""The authorization server metadata fields that name a URL the client may fetch or open; each
one present must pass `check_endpoint`."""


def _server_metadata(body: Mapping[str, Any], url: str) -> ServerMetadata:
    token_endpoint = body.get("token_endpoint")
    if not isinstance(token_endpoint, str) or not token_endpoint:
        raise OAuthError(f"the authorization server metadata at {safe_url(url)} has no token_endpoint")
    for name in ENDPOINT_FIELDS:
        if body.get(name) not in (None, ""):
            check_endpoint(body[name], name, f"the authorization server metadata at {safe_url(url)}")

    def text(name: str) -> str | None:
        value = body.get(name)
        return value if isinstance(value, str) and value else None

    return ServerMetadata(
        issuer=str(body["issuer"]),
        authorization_endpoint=text("authorization_endpoint"),
        token_endpoint=token_endpoint,
        registration_endpoint=text("registration_endpoint"),
        scopes_supported=_strings(body.get("scopes_supported")),
        token_endpoint_auth_methods_supported=_strings(body.get("token_endpoint_auth_methods_supported")),
        code_challenge_methods_supported=_strings(body.get("code_challenge_methods_supported")),
        grant_types_supported=_strings(body.get("grant_types_supported")),
        iss_parameter_supported=body.get("authorization_response_iss_parameter_supported") is True,
        client_id_metadata_document_supported=body.get("client_id_metadata_document_supported") is True,
        url=url,
    )


def legacy_metadata(issuer: str) -> ServerMetadata:
    """The 2025-03-26 default endpoints of a server that publishes no metadata: `/authorize`,
    `/token` and `/register` at its origin."""
    base = origin(issuer)
    return ServerMetadata(issuer=base, authorization_endpoint=f"{base}/authorize", token_endpoint=f"{base}/token",
                          registration_endpoint=f"{base}/register")


# -- both steps ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Discovered:
    """Where to get a token for one endpoint, and for which resource."""

    server: ServerMetadata
    resource: str
    """The `resource` parameter: the metadata's `resource` exactly as published, else the endpoint."""
    resource_metadata: ResourceMetadata | None
    """None: the endpoint publishes none (the 2025-03-26 fallback: its origin is the authorization server)."""


def discover(endpoint: str, hint: str | None, *, timeout: float) -> Discovered:
    """Protected resource metadata, then its (first) authorization server's metadata.

    Raises:
        OAuthError: as `discover_resource` and `discover_authorization_server`, or the server named
            by the resource's metadata publishes no metadata.
    """
    prm = discover_resource(endpoint, hint, timeout=timeout)
    if prm is None:
        issuer = origin(endpoint)
        server = discover_authorization_server(issuer, timeout=timeout)
        if server is None:
            server = legacy_metadata(issuer)
            for name in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
                check_endpoint(getattr(server, name), name, f"the default of {safe_url(issuer)}, which publishes no metadata,")
        return Discovered(server, urllib.parse.urldefrag(endpoint).url, None)
    issuer = prm.authorization_servers[0]
    found = discover_authorization_server(issuer, timeout=timeout)
    if found is None:
        raise OAuthError(f"the authorization server {safe_url(issuer)} publishes no metadata (RFC 8414 or OpenID Connect Discovery)")
    return Discovered(found, prm.resource, prm)
