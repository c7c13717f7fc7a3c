"""Authorization for the HTTP endpoint: mcpsync as an OAuth 2.1 resource server.

Both sides. The server's: `Auth` (in `resource`) protects an endpoint with a `TokenVerifier`:
`JwtVerifier` (in `jwt`, needs the `mcpsync[auth]` extra), `IntrospectionVerifier`
(`introspection`), `StaticTokens` (`static`), or your own. The client's: `connect(url, auth=...)`
takes `HttpCredentials` (in `credentials`): `BearerToken`, `OAuth` (`oauth`: the whole login
flow), `ClientCredentials` (`client_credentials`), with tokens kept in a `TokenStore` (`store`).
All but the vocabulary are imported from here on first use, so that importing mcpsync (which a
stdio server does) loads none of them, nor the HTTP client they fetch with.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .credentials import BearerToken, HttpCredentials
from .principal import InsufficientScope, InvalidToken, Principal, TokenVerifier, VerifierUnavailable
from .resource import Auth, AuthRefusal

if TYPE_CHECKING:
    from .client_credentials import ClientCredentials
    from .discovery import OAuthError
    from .introspection import IntrospectionVerifier
    from .jwt import JwtVerifier
    from .oauth import OAuth
    from .static import StaticTokens
    from .store import FileTokenStore, MemoryTokenStore, TokenStore

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
    "JwtVerifier": ".jwt",
    "IntrospectionVerifier": ".introspection",
    "StaticTokens": ".static",
    "OAuth": ".oauth",
    "OAuthError": ".discovery",
    "ClientCredentials": ".client_credentials",
    "TokenStore": ".store",
    "FileTokenStore": ".store",
    "MemoryTokenStore": ".store",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mcpsync.auth' has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
