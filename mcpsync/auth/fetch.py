"""Blocking JSON over HTTP for the verifiers and the OAuth client: GETs, form and JSON POSTs.

The verifiers GET a JWKS and POST introspection forms; the OAuth client (`oauth`, `discovery`,
`tokens`, `registration`) also GETs metadata, POSTs JSON (dynamic client registration) and forms
(the token endpoint), and needs to know *why* an answer failed: `FetchError.status` is the HTTP
status (None when there was no answer) and `FetchError.oauth_error` the RFC 6749 section 5.2
`error` code of a JSON error body (a short registered token such as `invalid_grant`, safe to show;
the body's `error_description` is never kept, since a server may echo what it was sent).

Strategy: the standard library only (`urllib.request`, so the usual `*_proxy` environment
variables apply), one request per call, every failure one exception. A verifier runs on the
thread serving a request, so `timeout` bounds the whole exchange, not each read: one deadline is
computed when the call starts, and every socket operation (the connect, the TLS handshake, sending
the request, each read of the status line, the headers and the body) is given only what is left
of it (`_Deadline`, through urllib handlers whose connections and responses apply it). A server
that drips its answer a byte at a time is cut off at `timeout`, as is one that reads the request
slowly. (Name resolution is the one step the deadline cannot interrupt: `getaddrinfo` blocks in C.)
The body is capped (`MAX_BYTES`): a JWKS or an introspection answer is a few KiB, and a verifier
must not buffer whatever an endpoint sends.

What the server says is data, never trusted to be sane: `Cache-Control: max-age` counts only as
ASCII digits and is capped at 2**31 s (RFC 9111 section 1.2.2), and `parse_seconds` is the one
check for a number of seconds in a JSON answer (`expires_in`, `client_secret_expires_at`).

`endpoint_problem(url)` is the rule for a URL an authorization server's (or a protected
resource's) metadata names, which the client will fetch or open in the user's browser: `https`,
or `http` on a loopback address only (`ENDPOINT_RULE`); `discovery` refuses metadata that breaks it
and `browser.open_browser` refuses to open such a URL.

Redirects are not followed: the endpoints are configured URLs, an introspection POST carries the
client's credentials, and urllib would replay a redirected POST as a GET to wherever the
`Location` points. A 3xx is a `FetchError` that says so. Only http and https URLs are accepted
(urllib also opens `file:` and `ftp:`).

`FetchError` messages name the URL without its query or credentials and never include the
request or response body, so they can be logged as they are.
"""

from __future__ import annotations

import base64
import functools
import http.client
import io
import ipaddress
import json
import math
import socket
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

__all__ = [
    "ENDPOINT_RULE",
    "MAX_BYTES",
    "MAX_SECONDS",
    "MAX_TIMESTAMP",
    "USER_AGENT",
    "FetchError",
    "JsonReply",
    "check_url",
    "endpoint_problem",
    "get_json",
    "is_loopback_host",
    "parse_seconds",
    "post_form",
    "post_json",
    "probe",
    "safe_url",
]

MAX_BYTES = 1 << 20
"""The largest body read (1 MiB); a longer one is a `FetchError`."""

USER_AGENT = f"mcpsync/{__version__}"

_CHUNK = 64 * 1024
_MAX_AGE = 2147483648.0
"""The largest `max-age` believed (2**31 s, RFC 9111 section 1.2.2's value for one too large)."""

MAX_SECONDS = 1_000_000_000
"""The largest number of seconds `parse_seconds` accepts (about 31 years): anything more is nonsense."""

MAX_TIMESTAMP = 253_402_300_799
"""The latest time (seconds since the epoch) a server may name: the last second of the year 9999."""

ENDPOINT_RULE = (
    "an endpoint must be an https URL, or http on a loopback address (127.0.0.0/8, ::1 or localhost), "
    "with no user name, password, fragment, space or control character"
)
"""What `endpoint_problem` enforces, as the error messages say it."""


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


def endpoint_problem(url: str) -> str | None:
    """Why `url` may not be an OAuth endpoint or issuer taken from a server's metadata; None when it
    may. The rule (`ENDPOINT_RULE`): `https`, or `http` on a loopback host (an address of
    127.0.0.0/8, ::1, or the name `localhost`); no credentials, fragment, whitespace or control
    character. This is what stands between a hostile authorization server and the user's browser
    (`file:`, `javascript:`, `data:` URLs, the class of CVE-2025-6514) and the tokens (plain http
    across a network)."""
    if not isinstance(url, str) or not url:
        return "not a URL"
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return "it holds a space or a control character"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not one
    except ValueError:
        return "it cannot be parsed"
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        return f"its scheme is {scheme + ':' if scheme else 'missing'}"
    if not parts.hostname:
        return "it names no host"
    if "@" in parts.netloc:
        return "it carries a user name or password"
    if parts.fragment or url.endswith("#"):
        return "it has a fragment"
    if scheme == "http" and not is_loopback_host(parts.hostname):
        return "it is plain http to a host that is not loopback"
    return None


def is_loopback_host(host: str) -> bool:
    """Whether `host` (a URL's hostname, brackets removed) is `localhost`, 127.0.0.0/8 or ::1."""
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address in _LOOPBACK_V4 if address.version == 4 else address == _LOOPBACK_V6


_LOOPBACK_V4 = ipaddress.ip_network("127.0.0.0/8")
_LOOPBACK_V6 = ipaddress.ip_address("::1")


def parse_seconds(value: Any, name: str, *, maximum: float = MAX_SECONDS) -> float | None:
    """A number of seconds a server sent in JSON (`expires_in`, or with `maximum=MAX_TIMESTAMP` a
    time such as `client_secret_expires_at`): None when absent (None), else a finite number from 0
    to `maximum`. A string of ASCII digits counts as its number (some servers quote it).

    Raises:
        ValueError: anything else (a bool, a negative, NaN or infinity, a number too large to be a
            lifetime, a string that is not digits, a list...), with a message naming `name`.
    """
    if value is None:
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 12:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} is not a number of seconds")
    if (isinstance(value, float) and not math.isfinite(value)) or not 0 <= value <= maximum:
        raise ValueError(f"{name} is not a number of seconds from 0 to {maximum:.0f}")
    return float(value)


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
    try:
        with _opener(timeout).open(request, timeout=timeout) as response:
            return int(response.status), response.headers.get("WWW-Authenticate")
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code, exc.headers.get("WWW-Authenticate")
    except urllib.error.URLError as exc:
        raise _failure(safe_url(url), exc.reason, timeout, "probing") from exc
    except (OSError, ValueError) as exc:
        raise _failure(safe_url(url), exc, timeout, "probing") from exc


# -- one deadline for the whole exchange ------------------------------------------------------

class _Deadline:
    """The end of one exchange: each socket operation is given what is left (`remaining`)."""

    __slots__ = ("_end", "timeout")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._end = time.monotonic() + timeout

    def remaining(self) -> float:
        """Seconds left; TimeoutError once none are (so the operation about to start never does)."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no answer within {self.timeout:g} s")
        return left


class _DeadlineReader(io.RawIOBase):
    """A response's bytes from the socket, every read bounded by what is left of the deadline
    (http.client reads the status line, the headers and the body through this)."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline
        self._raw = sock.makefile("rb", buffering=0)  # holds the socket open while the response is read

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._sock.fileno()

    def readinto(self, buffer: Any) -> int | None:
        self._sock.settimeout(self._deadline.remaining())
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _Response(http.client.HTTPResponse):
    def __init__(self, sock: socket.socket, debuglevel: int = 0, method: str | None = None, url: str | None = None, *,
                 deadline: _Deadline) -> None:
        super().__init__(sock, debuglevel, method, url)
        self.fp.close()
        self.fp = io.BufferedReader(_DeadlineReader(sock, deadline))


class _Connection(http.client.HTTPConnection):
    """An HTTP connection whose connect, sends and response reads share one deadline."""

    def __init__(self, host: str, *, deadline: _Deadline, **options: Any) -> None:
        super().__init__(host, **options)
        self._deadline = deadline
        self._create_connection = self._open_socket
        self.response_class = functools.partial(_Response, deadline=deadline)  # type: ignore[assignment]

    def _open_socket(self, address: tuple[str, int], timeout: object = None, source_address: tuple[str, int] | None = None) -> socket.socket:
        """TCP to the first of `address`'s addresses that answers, within the deadline; the socket
        then has what is left (what a TLS handshake, done next, may take in all)."""
        failure: OSError = OSError(f"no address for {address[0]}")
        for family, kind, protocol, _, where in socket.getaddrinfo(*address, 0, socket.SOCK_STREAM):
            sock = socket.socket(family, kind, protocol)
            try:
                sock.settimeout(self._deadline.remaining())
                if source_address:
                    sock.bind(source_address)
                sock.connect(where)
                sock.settimeout(self._deadline.remaining())
                return sock
            except OSError as exc:
                sock.close()
                failure = exc
        raise failure

    def send(self, data: Any) -> None:
        if self.sock is not None:
            self.sock.settimeout(self._deadline.remaining())  # sendall: the timeout bounds the whole send
        super().send(data)


class _TlsConnection(_Connection, http.client.HTTPSConnection):
    """HTTPS the same way: the handshake has what is left after the connect (the ssl module
    bounds a whole handshake by the socket's timeout)."""


class _HttpHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_Connection, deadline=self._deadline), req)


class _HttpsHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_TlsConnection, deadline=self._deadline), req)


def _opener(timeout: float) -> urllib.request.OpenerDirector:
    """An opener for one exchange: redirects refused, every socket operation within `timeout` of now."""
    deadline = _Deadline(timeout)
    return urllib.request.build_opener(_NoRedirects, _HttpHandler(deadline), _HttpsHandler(deadline))


def _headers() -> dict[str, str]:
    return {"Accept": "application/json", "User-Agent": USER_AGENT}


def _send(request: urllib.request.Request, *, timeout: float, max_bytes: int) -> JsonReply:
    where = safe_url(request.full_url)
    try:
        with _opener(timeout).open(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            if length is not None and length.isascii() and length.isdigit() and (len(length) > 18 or int(length) > max_bytes):
                raise FetchError(f"{where}: the answer is larger than {max_bytes} bytes")
            body = _read(response, max_bytes, where)
            max_age = _max_age(response.headers.get_all("Cache-Control") or [])
    except urllib.error.HTTPError as exc:
        code = _oauth_error_code(exc)
        exc.close()
        extra = " (redirects are not followed)" if 300 <= exc.code < 400 else ""
        said = f" ({code})" if code else ""
        raise FetchError(f"{where}: HTTP {exc.code}{said}{extra}", status=exc.code, oauth_error=code) from exc
    except urllib.error.URLError as exc:
        raise _failure(where, exc.reason, timeout, "fetching") from exc
    except (OSError, ValueError) as exc:  # timeouts, resets, http.client's malformed-response errors
        raise _failure(where, exc, timeout, "fetching") from exc
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


def _read(response: Any, max_bytes: int, where: str) -> bytes:
    """The body, in chunks, refusing it once it passes `max_bytes` (the deadline is the reads')."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = response.read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > max_bytes:
            raise FetchError(f"{where}: the answer is larger than {max_bytes} bytes")
        chunks.append(chunk)


def _failure(where: str, reason: object, timeout: float, doing: str) -> FetchError:
    """The `FetchError` for a failed exchange: a timeout says so, anything else names its kind."""
    if isinstance(reason, TimeoutError):
        return FetchError(f"{where}: no answer within {timeout:g} s")
    if isinstance(reason, OSError | ValueError):
        return FetchError(f"{where}: {type(reason).__name__} while {doing}")
    return FetchError(f"{where}: unreachable ({reason})")


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
                if argument.isascii() and argument.isdigit():  # str.isdigit alone admits "²" and other scripts' digits
                    seconds = _MAX_AGE if len(argument) > 10 else min(_MAX_AGE, float(argument))
                    found = seconds if found is None else min(found, seconds)
    return found
