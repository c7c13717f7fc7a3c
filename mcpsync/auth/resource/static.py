"""A fixed set of bearer tokens, from code or a file: for development, tests and closed deployments.

Strategy: a token is known by its SHA-256 digest, never kept itself: the verifier holds a map of
digest -> `Principal` and a lookup hashes the presented token. So a memory dump, a repr or a
debugger shows no usable token, and the lookup's timing depends on the digest, not on how much of
a guessed token matches.

Tokens must look like tokens: at least 16 characters (a short one is guessable), only RFC 6750's
b64token characters (what a client can send in `Authorization: Bearer`), each once. The same rules
hold for the constructor's mapping and for the file; a file's errors say `PATH:LINE: what`, and no
error ever quotes the token.

The file is UTF-8 text, one token a line, then optional fields:

    # comment lines and blank lines are ignored; so is anything after a field starting with '#'
    TOKEN [sub=NAME] [client_id=ID] [SCOPE ...]

A token without `sub=` stands for "token-" followed by the first 12 hex digits of its digest, so
logs can tell tokens apart without showing one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from ..b64token import is_b64token
from ._cache import token_digest
from .principal import Principal

__all__ = ["MIN_TOKEN_LENGTH", "StaticTokens"]

MIN_TOKEN_LENGTH = 16


class StaticTokens:
    """Verifies tokens against a fixed set: token -> its `Principal`, or just its scopes.

    Raises:
        ValueError: a token is too short, has characters a bearer token cannot have, or is given
            twice; or its `Principal` names neither a subject nor a client (no one in particular).
    """

    __slots__ = ("_principals",)

    def __init__(self, tokens: Mapping[str, Principal | Iterable[str]]) -> None:
        self._principals: dict[bytes, Principal] = {}
        for number, (token, given) in enumerate(tokens.items(), start=1):
            problem = _problem(token)
            if problem:
                raise ValueError(f"static token {number}: {problem}")
            if isinstance(given, Principal) and not given.subject and not given.client_id:
                raise ValueError(f"static token {number}: its principal names no subject and no client (Auth would refuse it)")
            self._principals[token_digest(token)] = given if isinstance(given, Principal) else _principal(token, None, None, given)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> StaticTokens:
        """The tokens listed in the file at `path` (format in the module docstring).

        Raises:
            OSError: the file cannot be read.
            ValueError: "PATH:LINE: what is wrong" (or "PATH: ..." for the file as a whole).
        """
        where = os.fspath(path)
        with open(where, "rb") as file:
            data = file.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{where}: not UTF-8 text") from None
        if text.startswith("\ufeff"):
            text = text[1:]
        principals: dict[bytes, Principal] = {}
        first_line: dict[bytes, int] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            fields = []
            for item in line.split():
                if item.startswith("#"):
                    break
                fields.append(item)
            if not fields:
                continue
            token, options = fields[0], fields[1:]
            problem = _problem(token)
            if problem:
                raise ValueError(f"{where}:{number}: {problem}")
            digest = token_digest(token)
            if digest in first_line:
                raise ValueError(f"{where}:{number}: the same token as line {first_line[digest]}")
            first_line[digest] = number
            principals[digest] = _parse_fields(token, options, f"{where}:{number}")
        if not principals:
            raise ValueError(f"{where}: no tokens")
        verifier = cls({})
        verifier._principals = principals
        return verifier

    def __len__(self) -> int:
        return len(self._principals)

    def __repr__(self) -> str:
        return f"StaticTokens({len(self._principals)} tokens)"

    def verify(self, token: str) -> Principal | None:
        """The `Principal` listed for `token`, or None if it is not one of these tokens."""
        return self._principals.get(token_digest(token))


def _problem(token: object) -> str | None:
    """What is wrong with `token` as a static bearer token (never quoting it), or None."""
    if not isinstance(token, str):
        return "a token must be a string"
    if len(token) < MIN_TOKEN_LENGTH:
        return f"the token is shorter than {MIN_TOKEN_LENGTH} characters"
    if not is_b64token(token):
        return "the token has characters a bearer token cannot have (allowed: A-Z a-z 0-9 - . _ ~ + / and trailing =)"
    return None


def _parse_fields(token: str, options: list[str], where: str) -> Principal:
    subject: str | None = None
    client_id: str | None = None
    scopes: list[str] = []
    for option in options:
        name, equals, value = option.partition("=")
        if equals and name in ("sub", "client_id"):
            if not value:
                raise ValueError(f"{where}: {name}= needs a value")
            if (subject if name == "sub" else client_id) is not None:
                raise ValueError(f"{where}: {name}= is given twice")
            if name == "sub":
                subject = value
            else:
                client_id = value
        else:
            scopes.append(option)
    return _principal(token, subject, client_id, scopes)


def _principal(token: str, subject: str | None, client_id: str | None, scopes: Iterable[str]) -> Principal:
    if isinstance(scopes, str):
        scopes = scopes.split()  # one space-separated string, as in a token's "scope" claim
    return Principal(subject=subject or "token-" + token_digest(token).hex()[:12], client_id=client_id, scopes=frozenset(scopes))
