"""The resource server's side of OAuth: who a request is from (`principal`), how its bearer token is
checked (`jwt`, `introspection`, `static`, or the application's own `TokenVerifier`), and how an
endpoint refuses and describes itself (`guard`: `Auth`, challenges, RFC 9728 metadata).
"""
