"""Where a client's MCP endpoint is, and how one HTTP request reaches it: the URL checked once, a
fresh `http.client` connection per request whose socket is registered on its `Stream` while in use
(so a cancel or close() can shut it down and wake the blocked reader), and the credentials' say
on a 401 or 403.

Why apart from the connection: none of it knows JSON-RPC or the eras; `HttpConnection` decides
what to send and what an answer means.
"""

from __future__ import annotations

import http.client
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..auth.client.credentials import MAX_AUTH_RETRIES, HttpCredentials
from ..errors import InvalidUrl, McpsyncError
from ._http_wire import Aborted, Answer, NotAuthorized, Refusal, Stream, Unreachable, describe, unsendable_header


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One HTTP request to make: every attempt sends it alike, but for the credentials'
    `Authorization`. Its socket is registered on `stream`; connecting and sending take at most
    `connect_timeout` seconds (the endpoint's `timeout` when None), the response head at most
    `read_timeout`."""

    method: str
    headers: dict[str, str]
    body: bytes | None
    stream: Stream
    read_timeout: float
    connect_timeout: float | None = None


class Endpoint:
    """One MCP endpoint, `http://` or `https://`, and the way there. Shares the connection's lock,
    under which a stream's socket is set and shut.

    Raises `InvalidUrl` (a ValueError) for a URL it cannot use (not http(s), no host, credentials
    in it, an invalid port, a path that is not percent-encoded ASCII)."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float,
        ssl_context: ssl.SSLContext | None,
        auth: HttpCredentials | None,
        lock: threading.Lock,
        stopping: Callable[[], bool],
    ) -> None:
        try:
            parts = urlsplit(url)
        except ValueError as exc:  # an unclosed [IPv6 bracket
            raise InvalidUrl(f"the URL {url!r} cannot be parsed: {exc}") from None
        if parts.scheme not in ("http", "https"):
            raise InvalidUrl(f"an MCP endpoint URL must start with http:// or https://, not {url!r}")
        if not parts.hostname:
            raise InvalidUrl(f"the URL {url!r} names no host")
        if parts.username is not None or parts.password is not None:
            raise InvalidUrl("credentials in the URL are not supported; pass auth= or an Authorization header in headers=")
        try:
            port = parts.port
        except ValueError as exc:
            raise InvalidUrl(f"the URL {url!r} has an invalid port") from exc
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if not target.isascii() or any(c.isspace() or not c.isprintable() for c in target):
            raise InvalidUrl(f"the path of {url!r} must be percent-encoded ASCII")
        self.url = url
        self.timeout = timeout
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = port
        self._target = target
        self._ssl_context = ssl_context
        self._auth = auth
        self._lock = lock
        self._stopping = stopping
        self._reached = False  # some HTTP response came back, so the endpoint exists

    @property
    def reached(self) -> bool:
        """Whether the server has ever answered (then failing to reach it is not fatal)."""
        with self._lock:
            return self._reached

    def open(self, request: Outgoing) -> tuple[http.client.HTTPConnection, Answer]:
        """Send `request` and wait for the response head, with the credentials' `Authorization`:
        a 401 or 403 is read whole and shown to them, and the request goes again while they say
        so (a login, a refresh, a step-up ran meanwhile), at most MAX_AUTH_RETRIES times; then
        the refusal is the answer. Raises NotAuthorized when they could not get a token (their
        reason, never a secret), and what `_send` raises."""
        auth = self._auth
        if auth is None:
            return self._send(request, request.headers)
        stream, attempt = request.stream, 0
        while True:
            sent = auth.authorization(self.url)
            conn, response = self._send(request, {**request.headers, "Authorization": sent} if sent else request.headers)
            if response.status not in (401, 403) or attempt >= MAX_AUTH_RETRIES:
                return conn, response
            attempt += 1
            refusal = Refusal(response)
            with self._lock:
                stream.sock = None
            conn.close()  # not held open while a login may take minutes
            try:
                again = auth.refused(self.url, refusal.status, refusal.getheader("WWW-Authenticate"), sent)
            except McpsyncError as exc:
                raise NotAuthorized(str(exc)) from None
            if not again or stream.aborted or self._stopping():
                return conn, refusal

    def _send(self, request: Outgoing, headers: dict[str, str]) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """One attempt of `request`, with these `headers`: connect and send within its connect
        timeout, then wait for the response head within its read timeout. Raises Unreachable when
        connecting fails, Aborted when the stream was cut, or the http.client/socket error
        otherwise."""
        stream = request.stream
        conn = self._new_http(self.timeout if request.connect_timeout is None else request.connect_timeout)
        try:
            try:
                conn.connect()
            except (OSError, ValueError) as exc:
                raise Unreachable(describe(exc)) from exc
            with self._lock:
                if stream.aborted:
                    raise Aborted()
                stream.sock = conn.sock
            try:
                conn.request(request.method, self._target, body=request.body, headers=headers)
            except ValueError:  # http.client's message quotes the value, which may be a token
                name = unsendable_header(headers)
                if name is None:
                    raise
                raise ValueError(f"the {name} header cannot be sent: its value holds a line break or a character HTTP cannot carry") from None
            conn.sock.settimeout(request.read_timeout)
            response = conn.getresponse()
        except BaseException:
            with self._lock:
                stream.sock = None
            conn.close()
            if stream.aborted:
                raise Aborted() from None
            raise
        with self._lock:
            self._reached = True
        return conn, response

    def _new_http(self, timeout: float) -> http.client.HTTPConnection:
        if not self._https:
            return http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        if self._ssl_context is None:
            self._ssl_context = ssl.create_default_context()
        return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl_context)
