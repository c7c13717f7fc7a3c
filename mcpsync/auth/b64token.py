"""RFC 6750 §2.1's b64token, what a Bearer token is: `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" /
"+" / "/" ) *"="`. One check for everything that holds a token to it: the resource server's
`Authorization` header (every protected request), a static token list, a token endpoint's answer.

Why not a regular expression: the characters are checked by deleting them (`bytes.translate`, a few
instructions a byte), where a character class costs about forty a byte, some 25,000 instructions
for a typical 700-byte JWT on every request.
"""

from __future__ import annotations

_CHARACTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/"


def is_b64token(text: str) -> bool:
    """Whether `text` is a b64token: one or more of its characters, then only `=` padding."""
    characters = text.rstrip("=")
    return bool(characters) and characters.isascii() and not characters.encode("ascii").translate(None, _CHARACTERS)
