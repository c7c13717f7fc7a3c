"""Authorization for the HTTP endpoint: mcpsync as an OAuth 2.1 resource server.

`Auth` (in `resource`) protects an endpoint with a `TokenVerifier`: `JwtVerifier` (in `jwt`, needs
the `mcpsync[auth]` extra), `IntrospectionVerifier` (`introspection`), `StaticTokens` (`static`),
or your own. The three are imported from here on first use, so that importing mcpsync (which a
stdio server does) loads none of them, nor the HTTP client they fetch keys with.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .credentials import BearerToken, HttpCredentials
from .principal import InsufficientScope, InvalidToken, Principal, TokenVerifier, VerifierUnavailable
from .resource import Auth, AuthRefusal

if TYPE_CHECKING:
    from .introspection import IntrospectionVerifier
    from .jwt import JwtVerifier
    from .static import StaticTokens

__all__ = [
    "Auth",
    "AuthRefusal",
    "BearerToken",
    "HttpCredentials",
    "InsufficientScope",
    "IntrospectionVerifier",
    "InvalidToken",
    "JwtVerifier",
    "Principal",
    "StaticTokens",
    "TokenVerifier",
    "VerifierUnavailable",
]

_LAZY = {"JwtVerifier": ".jwt", "IntrospectionVerifier": ".introspection", "StaticTokens": ".static"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mcpsync.auth' has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
