"""Authorization for the HTTP endpoint: mcpsync as an OAuth 2.1 resource server.

Both sides, a folder each. The server's, `resource/`: `Auth` (in `guard`) protects an endpoint
with a `TokenVerifier` (`principal`): `JwtVerifier` (in `jwt`, needs the `mcpsync[auth]` extra),
`IntrospectionVerifier` (`introspection`), `StaticTokens` (`static`), or your own. The client's,
`client/`: `connect(url, auth=...)` takes `HttpCredentials` (in `credentials`): `BearerToken`,
`OAuth` (`oauth`: the whole login flow), `ClientCredentials` (`client_credentials`), with tokens
kept in a `TokenStore` (`store`). `fetch` is the blocking JSON GET and form POST both sides use.
All but the principal's vocabulary are imported from here on first use, so that importing mcpsync (which a
stdio server does) loads none of them, nor the HTTP client they fetch with.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .resource.principal import InsufficientScope, InvalidToken, Principal, TokenVerifier, VerifierUnavailable

if TYPE_CHECKING:
    from .client.client_credentials import ClientCredentials
    from .client.credentials import BearerToken, HttpCredentials
    from .client.discovery import OAuthError
    from .client.oauth import OAuth
    from .client.store import FileTokenStore, MemoryTokenStore, TokenStore
    from .resource.guard import Auth, AuthRefusal
    from .resource.introspection import IntrospectionVerifier
    from .resource.jwt import JwtVerifier
    from .resource.static import StaticTokens

__all__ = [
    "Auth",
    "AuthRefusal",
    "BearerToken",
    "ClientCredentials",
    "FileTokenStore",
    "HttpCredentials",
    "InsufficientScope",
    "IntrospectionVerifier",
    "InvalidToken",
    "JwtVerifier",
    "MemoryTokenStore",
    "OAuth",
    "OAuthError",
    "Principal",
    "StaticTokens",
    "TokenStore",
    "TokenVerifier",
    "VerifierUnavailable",
]

_LAZY = {
    "Auth": ".resource.guard",
    "AuthRefusal": ".resource.guard",
    "BearerToken": ".client.credentials",
    "HttpCredentials": ".client.credentials",
    "JwtVerifier": ".resource.jwt",
    "IntrospectionVerifier": ".resource.introspection",
    "StaticTokens": ".resource.static",
    "OAuth": ".client.oauth",
    "OAuthError": ".client.discovery",
    "ClientCredentials": ".client.client_credentials",
    "TokenStore": ".client.store",
    "FileTokenStore": ".client.store",
    "MemoryTokenStore": ".client.store",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mcpsync.auth' has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
