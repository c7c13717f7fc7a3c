"""Blocking JSON over HTTP for the verifiers and the OAuth client: GETs, form and JSON POSTs.

The verifiers GET a JWKS and POST introspection forms; the OAuth client (`oauth`, `discovery`,
`tokens`, `registration`) also GETs metadata, POSTs JSON (dynamic client registration) and forms
(the token endpoint), and needs to know *why* an answer failed: `FetchError.status` is the HTTP
status (None when there was no answer) and `FetchError.oauth_error` the RFC 6749 section 5.2
`error` code of a JSON error body (a short registered token such as `invalid_grant`, safe to show;
the body's `error_description` is never kept, since a server may echo what it was sent).

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

__all__ = ["MAX_BYTES", "USER_AGENT", "FetchError", "JsonReply", "check_url", "get_json", "post_form", "post_json", "probe", "safe_url"]

MAX_BYTES = 1 << 20
"""The largest body read (1 MiB); a longer one is a `FetchError`."""

USER_AGENT = f"mcpsync/{__version__}"

_CHUNK = 64 * 1024


class FetchError(McpsyncError):
    """A JSON fetch failed: unreachable, timed out, a non-2xx status, too large, or not JSON.
    Nothing was learnt; a retry later is safe."""

    def __init__(self, message: str, *, status: int | None = None, oauth_error: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        """The HTTP status of a non-2xx answer; None when none came (or it was 2xx but unusable)."""
        self.oauth_error = oauth_error
        """The `error` code of an OAuth JSON error body (`invalid_grant`, ...), when it had one."""


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


def post_json(url: str, body: Mapping[str, Any], *, timeout: float, max_bytes: int = MAX_BYTES) -> JsonReply:
    """POST `body` as JSON to `url` (RFC 7591 client registration) and decode the JSON answer.

    Raises:
        FetchError: as `get_json`.
    """
    headers = _headers()
    headers["Content-Type"] = "application/json"
    data = json.dumps(dict(body)).encode("utf-8")
    request = urllib.request.Request(check_url(url), data=data, method="POST", headers=headers)
    return _send(request, timeout=timeout, max_bytes=max_bytes)


def probe(url: str, body: bytes, *, timeout: float) -> tuple[int, str | None]:
    """POST `body` (a JSON-RPC message) to `url` without credentials: its status and its
    `WWW-Authenticate` header (what a protected MCP endpoint says about logging in). Reads no body.

    Raises:
        FetchError: unreachable or timed out.
    """
    headers = {"User-Agent": USER_AGENT, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    request = urllib.request.Request(check_url(url), data=body, method="POST", headers=headers)
    opener = urllib.request.build_opener(_NoRedirects)
    try:
        with opener.open(request, timeout=timeout) as response:
            return int(response.status), response.headers.get("WWW-Authenticate")
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code, exc.headers.get("WWW-Authenticate")
    except urllib.error.URLError as exc:
        raise FetchError(f"{safe_url(url)}: unreachable ({exc.reason})") from exc
    except (OSError, ValueError) as exc:
        raise FetchError(f"{safe_url(url)}: {type(exc).__name__} while probing") from exc


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
        code = _oauth_error_code(exc)
        exc.close()
        extra = " (redirects are not followed)" if 300 <= exc.code < 400 else ""
        said = f" ({code})" if code else ""
        raise FetchError(f"{where}: HTTP {exc.code}{said}{extra}", status=exc.code, oauth_error=code) from exc
    except urllib.error.URLError as exc:
        raise FetchError(f"{where}: unreachable ({exc.reason})") from exc
    except (OSError, ValueError) as exc:  # timeouts, resets, http.client's malformed-response errors
        raise FetchError(f"{where}: {type(exc).__name__} while fetching") from exc
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise FetchError(f"{where}: the answer is not JSON") from exc
    return JsonReply(decoded, max_age)


def _oauth_error_code(exc: urllib.error.HTTPError) -> str | None:
    """The `error` of a small JSON error body, if it is a plain code (RFC 6749 section 5.2 allows
    only %x20-21 / %x23-5B / %x5D-7E; we keep word characters only, at most 64)."""
    try:
        raw = exc.read(16 * 1024)
        decoded = json.loads(raw)
    except (OSError, ValueError, RecursionError, AttributeError):
        return None
    code = decoded.get("error") if isinstance(decoded, dict) else None
    if isinstance(code, str) and 0 < len(code) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-.") for c in code):
        return code
    return None


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
