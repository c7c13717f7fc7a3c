"""The browser's side of a login: a one-shot loopback listener for the redirect, and the browser itself.

Strategy: `LoopbackListener` is the default `callback`: an HTTP server on 127.0.0.1 (the port of
the redirect URI, or any free one) that the flow starts before sending the user to the
authorization server and stops right after. It serves from a thread of its own
("mcpsync-oauth-callback"), so a `redirect_handler` that follows the redirect itself (a test's
stand-in browser) cannot deadlock the flow; `wait(timeout)` blocks the flow's thread until the
redirect arrives or the deadline passes. The first request to the callback path that carries a
`code` or an `error` is the answer; the browser gets a small page saying it may close the window,
and any other request a 404. Stopping is a flag plus a wake-up (a socket pair in the selector),
and the thread is joined with a timeout.

`open_browser(url)` is the default `redirect_handler`: `webbrowser.open`, and when no browser
opens (a server, a container), the URL printed to stderr for the user to open elsewhere. It is
printed, not logged: a log may be collected, and the URL carries the login's `state`. It opens
only what `browser_url` lets through (https, or http on loopback: `_fetch.ENDPOINT_RULE`), a
second line behind discovery's check of the metadata: whatever builds the URL, the user's browser
is never handed a `file:`, `javascript:` or `data:` URL, nor one with credentials.
"""

from __future__ import annotations

import logging
import selectors
import socket
import sys
import threading
import time
import urllib.parse
import webbrowser
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from ..fetch import ENDPOINT_RULE, endpoint_problem, safe_url
from .discovery import OAuthError

log = logging.getLogger("mcpsync")

__all__ = ["LoopbackListener", "browser_url", "open_browser"]

_PAGE = (b"<!doctype html><html><head><meta charset='utf-8'><title>mcpsync</title></head>"
         b"<body><p>The login is complete: you can close this window.</p></body></html>")
_READ_TIMEOUT = 5.0
"""How long one browser connection may take to send its request (bounds the thread's every read)."""


def browser_url(url: str) -> str:
    """`url` if it may be shown to the user's browser (https, or http on loopback).

    Raises:
        OAuthError: it may not (the message names the rule, never the query).
    """
    problem = endpoint_problem(url)
    if problem is not None:
        raise OAuthError(f"refusing to open {safe_url(url)[:80]!r} in the browser ({problem}): {ENDPOINT_RULE}")
    return url


def open_browser(url: str) -> None:
    """Open `url` in the user's browser; print it to stderr when none opens.

    Raises:
        OAuthError: `url` is not https or loopback http (`browser_url`); nothing was opened.
    """
    browser_url(url)
    try:
        opened = webbrowser.open(url)
    except webbrowser.Error:
        opened = False
    if not opened:
        print(f"Open this URL in a browser to log in:\n\n    {url}\n", file=sys.stderr, flush=True)


class _Server(HTTPServer):
    listener: LoopbackListener


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = _READ_TIMEOUT

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request line carries the authorization code: never logged

    def do_GET(self) -> None:
        listener = self.server.listener
        parts = urllib.parse.urlsplit(self.path)
        fields = urllib.parse.parse_qs(parts.query)
        if parts.path != listener.path or not ("code" in fields or "error" in fields):
            self._answer(404, b"not found")
            return
        self._answer(200, _PAGE, "text/html; charset=utf-8")
        listener._deliver(urllib.parse.urlunsplit(("http", f"{listener.host}:{listener.port}", parts.path, parts.query, "")))

    def _answer(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True


class LoopbackListener:
    """A one-shot HTTP listener on loopback for the authorization redirect (see the module docstring).

    Args:
        redirect_uri: the `http://127.0.0.1:<port>/<path>` (or localhost) URI to listen on; None:
            127.0.0.1, a free port, `/callback`.
    """

    def __init__(self, redirect_uri: str | None = None) -> None:
        host, port, path = self.check(redirect_uri) if redirect_uri is not None else ("127.0.0.1", 0, "/callback")
        self.path = path
        self._display_host = host
        bind = "127.0.0.1" if host == "localhost" else host
        family_server = _Server6 if ":" in bind else _Server
        self._server = family_server((bind, port), _Handler)
        self._server.listener = self
        self.host = f"[{bind}]" if ":" in bind else self._display_host
        self.port: int = self._server.server_address[1]
        self._result: str | None = None
        self._arrived = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="mcpsync-oauth-callback")
        self._thread.start()

    @staticmethod
    def check(redirect_uri: str) -> tuple[str, int, str]:
        """The host, port and path of a loopback `redirect_uri`; ValueError if it is not one."""
        parts = urllib.parse.urlsplit(redirect_uri)
        try:
            port = parts.port or 80
        except ValueError:
            raise ValueError("the redirect URI has an invalid port") from None
        if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("without a callback, redirect_uri must be an http://127.0.0.1, [::1] or localhost URI (a loopback listener)")
        return parts.hostname, port, parts.path or "/"

    @property
    def redirect_uri(self) -> str:
        return f"http://{self.host}:{self.port}{self.path}"

    def wait(self, timeout: float) -> str:
        """The URL the authorization server redirected the browser to (with its query).

        Raises:
            OAuthError: nothing arrived within `timeout` seconds.
        """
        if not self._arrived.wait(max(0.0, timeout)):
            raise OAuthError(f"no login arrived at {self.redirect_uri} within {timeout:g} s")
        assert self._result is not None
        return self._result

    def _deliver(self, url: str) -> None:
        if self._result is None:
            self._result = url
            self._arrived.set()

    def _serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._server.socket, selectors.EVENT_READ, "accept")
            selector.register(self._wake_r, selectors.EVENT_READ, "wake")
            while True:
                for key, _ in selector.select():
                    if key.data == "wake":
                        return
                    try:
                        self._server.handle_request()
                    except Exception:  # a broken browser connection must not end the listener
                        log.debug("loopback listener: a request failed", exc_info=True)

    def close(self, timeout: float = 10.0) -> None:
        """Stop listening and join the thread (at most `timeout` seconds). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._wake_w.send(b"x")
        deadline = time.monotonic() + timeout
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            log.warning("loopback listener: its thread did not stop within %g s", timeout)
        self._server.server_close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> LoopbackListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Server6(_Server):
    address_family = socket.AF_INET6
