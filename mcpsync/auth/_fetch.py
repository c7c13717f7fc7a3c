"""Blocking JSON over HTTP for the verifiers: a GET (the JWKS) and a form POST (introspection).

Strategy: the standard library only (`urllib.request`, so the usual `*_proxy` environment
variables apply), one request per call, every failure one exception. A verifier runs on the
thread serving a request, so each call is bounded twice: the socket timeout bounds every connect
and read, and the body is read in chunks against a deadline computed once, so a server that drips
bytes cannot hold the thread much past `timeout`. The body is capped (`MAX_BYTES`): a JWKS or an
introspection answer is a few KiB, and a verifier must not buffer whatever an endpoint sends.

Redirects are not followed: the endpoints are configured URLs, an introspection POST carries the
client's credentials, and urllib would replay a redirected POST as a GET to wherever the
`Location` points. A 3xx is a `FetchError` that says so. Only http and https URLs are accepted
(urllib also opens `file:` and `ftp:`).

`FetchError` messages name the URL without its query or credentials and never include the
request or response body, so they can be logged as they are.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from typing import Any

from .._version import __version__
from ..errors import McpsyncError

__all__ = ["MAX_BYTES", "USER_AGENT", "FetchError", "JsonReply", "check_url", "get_json", "post_form", "safe_url"]

MAX_BYTES = 1 << 20
"""The largest body read (1 MiB); a longer one is a `FetchError`."""

USER_AGENT = f"mcpsync/{__version__}"

_CHUNK = 64 * 1024


class FetchError(McpsyncError):
    """A JSON fetch failed: unreachable, timed out, a non-2xx status, too large, or not JSON.
    Nothing was learnt; a retry later is safe."""


@dataclass(frozen=True, slots=True)
class JsonReply:
    """A successful answer: the decoded JSON body and how long it may be cached."""

    body: Any
    max_age: float | None = None
    """The response's `Cache-Control: max-age` in seconds; 0 for `no-store`/`no-cache`; None if it says nothing."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Message, newurl: str) -> None:
        return None  # urllib then raises HTTPError for the 3xx itself


def check_url(url: str) -> str:
    """`url` if it is an absolute http or https URL, else ValueError (said at construction, not at first use)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {safe_url(url)!r}")
    return url


def safe_url(url: str) -> str:
    """`url` without credentials, query or fragment: what may appear in a log line or an error."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<unparsable URL>"
    return urllib.parse.urlunsplit((parts.scheme, host + port, parts.path, "", ""))


def get_json(url: str, *, timeout: float, max_bytes: int = MAX_BYTES) -> JsonReply:
    """GET `url` and decode its JSON body.

    Raises:
        FetchError: unreachable, timed out, not 2xx, larger than `max_bytes`, or not JSON.
    """
    request = urllib.request.Request(check_url(url), method="GET", headers=_headers())
    return _send(request, timeout=timeout, max_bytes=max_bytes)


def post_form(url: str, fields: Mapping[str, str], *, timeout: float, basic_auth: tuple[str, str] | None = None,
              max_bytes: int = MAX_BYTES) -> JsonReply:
    """POST `fields` as `application/x-www-form-urlencoded` to `url` and decode the JSON answer.

    `basic_auth` (client id, secret) is sent as HTTP Basic, each part form-encoded first as
    RFC 6749 section 2.3.1 says.

    Raises:
        FetchError: as `get_json`.
    """
    headers = _headers()
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    if basic_auth is not None:
        user, password = (urllib.parse.quote_plus(part) for part in basic_auth)
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    data = urllib.parse.urlencode(dict(fields)).encode("ascii")
    request = urllib.request.Request(check_url(url), data=data, method="POST", headers=headers)
    return _send(request, timeout=timeout, max_bytes=max_bytes)


def _headers() -> dict[str, str]:
    return {"Accept": "application/json", "User-Agent": USER_AGENT}


def _send(request: urllib.request.Request, *, timeout: float, max_bytes: int) -> JsonReply:
    where = safe_url(request.full_url)
    deadline = time.monotonic() + timeout
    opener = urllib.request.build_opener(_NoRedirects)
    try:
        with opener.open(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            if length is not None and length.isdigit() and int(length) > max_bytes:
                raise FetchError(f"{where}: the answer is larger than {max_bytes} bytes")
            body = _read(response, deadline, max_bytes, where)
            max_age = _max_age(response.headers.get_all("Cache-Control") or [])
    except urllib.error.HTTPError as exc:
        exc.close()
        extra = " (redirects are not followed)" if 300 <= exc.code < 400 else ""
        raise FetchError(f"{where}: HTTP {exc.code}{extra}") from exc
    except urllib.error.URLError as exc:
        raise FetchError(f"{where}: unreachable ({exc.reason})") from exc
    except (OSError, ValueError) as exc:  # timeouts, resets, http.client's malformed-response errors
        raise FetchError(f"{where}: {type(exc).__name__} while fetching") from exc
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise FetchError(f"{where}: the answer is not JSON") from exc
    return JsonReply(decoded, max_age)


def _read(response: Any, deadline: float, max_bytes: int, where: str) -> bytes:
    """The body, in chunks, refusing it once it passes `max_bytes` or the deadline."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = response.read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > max_bytes:
            raise FetchError(f"{where}: the answer is larger than {max_bytes} bytes")
        if time.monotonic() > deadline:
            raise FetchError(f"{where}: the answer took too long")
        chunks.append(chunk)


def _max_age(values: list[str]) -> float | None:
    """What `Cache-Control` allows: its max-age, 0 for no-store/no-cache, None when it says nothing."""
    found: float | None = None
    for value in values:
        for directive in value.split(","):
            name, _, argument = directive.strip().partition("=")
            name = name.strip().lower()
            if name in ("no-store", "no-cache"):
                return 0.0
            if name == "max-age":
                argument = argument.strip().strip('"')
                if argument.isdigit():
                    found = float(argument) if found is None else min(found, float(argument))
    return found
