"""Authorization for the HTTP endpoint: mcpsync as an OAuth 2.1 resource server.

`Auth` (in `resource`) protects an endpoint with a `TokenVerifier`: `JwtVerifier` (in `jwt`, needs
the `mcpsync[auth]` extra), `IntrospectionVerifier` (`introspection`), `StaticTokens` (`static`),
or your own. Importing this package imports none of them: only the one you use is loaded.
"""

from .principal import InsufficientScope, InvalidToken, Principal, TokenVerifier, VerifierUnavailable
from .resource import Auth, AuthRefusal

__all__ = ["Auth", "AuthRefusal", "InsufficientScope", "InvalidToken", "Principal", "TokenVerifier", "VerifierUnavailable"]
