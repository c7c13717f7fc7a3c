"""What an http(s) URL given on the command line or in a config looks like, for the checks made
before it is used (the client commands' SERVER, `--upstream`, an upstream's `url`).

Strategy: a regular expression finds `scheme://authority` at the start; no parsing beyond it,
since the checks are about mistakes a person makes (a misspelt scheme, `user:password@` in the
URL) and the messages must never repeat a password. Shared by cli.py and config.py, which import
nothing else of each other here.
"""

from __future__ import annotations

import re

HTTP_SCHEMES = ("http", "https")
_START = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)")
"""scheme://authority at the start of a string: a URL, whatever its scheme."""


def url_scheme(text: str) -> str | None:
    """The scheme of `text`, lower-cased, when it starts like a URL (`scheme://`); else None (a
    command, a path)."""
    found = _START.match(text)
    return None if found is None else found.group(1).lower()


def shown(url: str) -> str:
    """`url` without its user:password@, for a message."""
    return _START.sub(lambda found: f"{found.group(1)}://{found.group(2).rpartition('@')[2]}", url, count=1)


def has_credentials(url: str) -> bool:
    """Whether the authority of `url` holds a user (and password): `http://user:pw@host/`."""
    found = _START.match(url)
    return found is not None and "@" in found.group(2)


def unknown_scheme(text: str) -> str | None:
    """The message for `text` when it looks like a URL of a scheme other than http(s) (a typo such
    as htp://, which would otherwise be taken for a program to start); else None."""
    found = _START.match(text)
    if found is None or found.group(1).lower() in HTTP_SCHEMES:
        return None
    return f"{shown(text)!r} looks like a URL with an unknown scheme {found.group(1)!r}: only http:// and https:// URLs are supported"


def lower_scheme(url: str) -> str:
    """`url` with its scheme lower-cased (`HTTPS://` is https), which the client matches exactly."""
    scheme = url_scheme(url)
    return url if scheme is None else scheme + url[len(scheme) :]
