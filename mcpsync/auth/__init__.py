"""Authorization for the HTTP endpoint: mcpsync as an OAuth 2.1 resource server (see `resource`)."""

from .principal import InvalidToken, Principal, TokenVerifier, VerifierUnavailable

__all__ = ["InvalidToken", "Principal", "TokenVerifier", "VerifierUnavailable"]
