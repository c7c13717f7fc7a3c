"""A small threaded HTTP/1.1 server for one WSGI application: what `mcpsync serve --http` runs.

Why our own: an MCP POST is one small JSON body in and one out, so the HTTP server's own work
decides the request rate. cheroot, which served here first, spent about 200 µs of CPU on each
such request; the official SDK's uvicorn parses HTTP in C. This server does only what the WSGI
transport needs, in few Python steps per request, and writes each response in one `sendall`
when it can.

Strategy: one thread per connection (`mcpsync-http-conn-N`), at most `max_connections` (one more
is answered 503 and closed); the acceptor (`mcpsync-http-accept`) only accepts. A connection's
thread reads a request head through a buffered reader, builds the environ, runs the application
on that same thread and writes what it yields at once, then reads the next request (keep-alive,
pipelining). Framing of the response: the application's `Content-Length` when it gives one, else
chunked transfer coding on HTTP/1.1 (each yielded chunk leaves as one chunk: SSE events are not
held back), else the body ends with the connection; writing a response is `_wsgi_response`'s job.

Limits: the request head (431), a chunked body (413 past `max_body_bytes`; a `Content-Length`
body is the application's to refuse, it is read only as the application reads it), and every
read and write on a socket (`timeout`; an idle keep-alive connection is closed after it, a
client that stops reading a stream makes the write fail, and the body is closed, which the
transport takes as the client going away).

Refused at the HTTP level, with `Connection: close`: a malformed request line or header (400),
both `Content-Length` and `Transfer-Encoding`, or a bad length (400: no request smuggling), a
transfer coding other than chunked (501), an HTTP version other than 1.0 and 1.1 (505).

Answering from another thread: `environ["mcpsync.respond_now"]` (`RESPOND_NOW`) writes a whole
response from the calling thread, for an application whose own thread is stuck (a shutdown
answering a request while user code holds the connection's thread). It succeeds only before the
connection's thread has sent any byte of the response; the connection then closes, and whatever
that thread sends for the request later is dropped. So a response is written by one thread only.

Stopping: `stop()` closes the listener, wakes the idle connections (their read returns end of
file), lets the busy ones finish their response until the deadline (those already answered through
`respond_now` have nothing left to finish), then cuts them, and joins every thread it started.
"""

from __future__ import annotations

import io
import logging
import os
import re
import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import unquote_to_bytes, urlsplit

from ._wsgi_response import Clock, Response, _Gone, plain_response
from .http_options import WsgiApp

log = logging.getLogger("mcpsync")

DEFAULT_TIMEOUT = 10.0
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100
LINGER = 2.0
"""Seconds a closing connection keeps reading (and dropping) what the client still sends, so the
client reads the answer instead of a reset (RFC 9112 §9.6)."""
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
RESPOND_NOW = "mcpsync.respond_now"
"""The environ key of `Response.respond_now`: (status, headers, body) -> whether it was written."""
LATE_JOIN = 1.0
"""Seconds `stop()` still waits for the threads of the connections it had to cut, all together."""


class _Reject(Exception):
    """The request cannot be served: answer `status` and close the connection."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


class FixedBody(io.RawIOBase):
    """`wsgi.input` of a request with a `Content-Length`: its bytes and no more, read as the
    application asks (a `100 Continue` goes out first when the client waits for one)."""

    def __init__(self, reader: io.BufferedReader, length: int, send_continue: Callable[[], None] | None) -> None:
        super().__init__()
        self._reader = reader
        self.remaining = length
        self._send_continue = send_continue

    def readable(self) -> bool:
        return True

    @property
    def continue_pending(self) -> bool:
        """The client waits for `100 Continue` before it sends the body (never read, so never sent)."""
        return self._send_continue is not None

    def read(self, size: int | None = -1) -> bytes:
        if self._send_continue is not None:
            self._send_continue()
            self._send_continue = None
        if size is None or size < 0 or size > self.remaining:
            size = self.remaining
        if size == 0:
            return b""
        data = self._reader.read(size)
        self.remaining -= len(data)
        if len(data) < size:
            self.remaining = 0
            raise _Gone("the body ended early")
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def readline(self, size: int | None = -1) -> bytes:
        limit = self.remaining if size is None or size < 0 else min(size, self.remaining)
        if self._send_continue is not None:
            self._send_continue()
            self._send_continue = None
        line = self._reader.readline(limit) if limit else b""
        self.remaining -= len(line)
        return line


class WsgiServer:
    """Serves one WSGI application on `host:port` (port 0: any free one; see `.port`).

    Binds at construction, so a busy port fails in the caller. `serve()` runs the accept loop on
    the calling thread until `stop()`; the connection threads are its own.
    """

    def __init__(
        self,
        app: WsgiApp,
        host: str,
        port: int,
        *,
        max_connections: int = 64,
        timeout: float = DEFAULT_TIMEOUT,
        max_body_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self._app = app
        self._max_connections = max_connections
        self._timeout = timeout
        self._max_body = max_body_bytes
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        if host not in ("", "0.0.0.0", "::") and ":" not in host:
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        self._listener = socket.create_server((host, port), family=family, backlog=128)
        bound = self._listener.getsockname()
        self.host, self.port = bound[0], bound[1]
        self._base_environ = {
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            "wsgi.input_terminated": True,
            "SCRIPT_NAME": "",
            "SERVER_NAME": self.host,
            "SERVER_PORT": str(self.port),
            "SERVER_SOFTWARE": "mcpsync",
        }
        self.clock = Clock()
        self._lock = threading.Lock()
        self._connections: dict[_Connection, threading.Thread] = {}
        self._count = 0
        self._stopping = False
        self._closed = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    @property
    def stopping(self) -> bool:
        return self._stopping

    # -- accepting -------------------------------------------------------------------------------
    def serve(self) -> None:
        """Accept connections until `stop()`; each gets a thread of its own."""
        try:
            while not self._stopping:
                watched: list[socket.socket | int] = [self._listener, self._wake_r]
                readable, _, _ = select.select(watched, [], [], 3600.0)
                if self._wake_r in readable or self._stopping:
                    break
                if self._listener in readable:
                    self._accept()
        finally:
            self._listener.close()

    def _accept(self) -> None:
        try:
            sock, address = self._listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        except OSError as exc:  # e.g. out of file descriptors: say so, pause, and keep serving
            log.warning("HTTP accept failed: %s", exc)
            select.select([self._wake_r], [], [], 0.5)
            return
        sock.settimeout(self._timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass  # not TCP (a test's socket pair)
        with self._lock:
            full = len(self._connections) >= self._max_connections
            if not full and not self._stopping:
                self._count += 1
                connection = _Connection(self, sock, address)
                thread = threading.Thread(target=connection.run, name=f"mcpsync-http-conn-{self._count}", daemon=True)
                self._connections[connection] = thread
                thread.start()
                return
        if full:
            log.warning("HTTP: %d connections are open, the limit; refused one from %s", self._max_connections, address[0])
        why = "too many connections" if full else "the server is stopping"
        try:
            sock.sendall(plain_response(503, why, self.clock.header()))
        except OSError:
            pass
        _linger_close(sock, 0.1)  # briefly: the acceptor has others to accept

    def _release(self, connection: _Connection) -> None:
        with self._lock:
            self._connections.pop(connection, None)

    # -- stopping --------------------------------------------------------------------------------
    def stop(self, timeout: float = 2.0) -> bool:
        """Stop accepting, close idle connections, give busy ones until `timeout` to finish their
        response, then cut them; join every connection thread. True if all ended in time."""
        with self._lock:
            self._stopping = True
            connections = list(self._connections.items())
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        for connection, _ in connections:
            connection.interrupt_if_idle()
        deadline = time.monotonic() + timeout
        for connection, thread in connections:
            if not connection.answered_elsewhere:  # else its thread is stuck in the app: nothing to finish
                thread.join(max(0.0, deadline - time.monotonic()))
        late = [(c, t) for c, t in connections if t.is_alive()]
        for connection, _ in late:
            connection.interrupt()
        deadline = time.monotonic() + LATE_JOIN
        for _, thread in late:
            thread.join(max(0.0, deadline - time.monotonic()))
        clean = not any(t.is_alive() for _, t in late)
        if not clean:
            log.warning("HTTP: %d connection thread(s) did not end in time", sum(t.is_alive() for _, t in late))
        return clean

    def close(self) -> None:
        """Release the listener and the wake-up pipe (after `serve()` has returned); once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._listener.close()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)


class _Connection:
    """One client connection, served by one thread from its first request to its close."""

    def __init__(self, server: WsgiServer, sock: socket.socket, address: Any) -> None:
        self._server = server
        self._sock = sock
        # typeshed types makefile() with a buffer size as IOBase; with "rb" it is a BufferedReader
        self._reader = cast(io.BufferedReader, sock.makefile("rb", buffering=65536))
        self._busy = False
        self._response: Response | None = None  # the latest request's
        self._lock = threading.Lock()
        self._environ = dict(server._base_environ)
        self._environ["REMOTE_ADDR"] = str(address[0])
        self._environ["REMOTE_PORT"] = str(address[1])

    @property
    def answered_elsewhere(self) -> bool:
        """The current request was answered by another thread (`respond_now`)."""
        response = self._response
        return response is not None and response.answered_elsewhere

    def interrupt_if_idle(self) -> None:
        with self._lock:
            if not self._busy:
                self.interrupt()

    def interrupt(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _set_busy(self, busy: bool) -> None:
        with self._lock:
            self._busy = busy

    def run(self) -> None:
        linger = False
        try:
            while not self._server.stopping:
                try:
                    environ, keep_alive = self._read_request()
                except _Gone:
                    return
                except _Reject as reject:
                    self._send_quietly(plain_response(reject.status, str(reject), self._server.clock.header()))
                    linger = True
                    return
                try:
                    if not self._respond(environ, keep_alive):
                        linger = True
                        return
                finally:
                    self._set_busy(False)
        except (OSError, _Gone):
            pass  # the client went away or timed out: nothing more to say to it
        except Exception:
            log.exception("HTTP connection failed")
        finally:
            self._reader.close()
            if linger:
                _linger_close(self._sock)
            else:
                self._sock.close()
            self._server._release(self)

    # -- reading ---------------------------------------------------------------------------------
    def _readline(self, what: str) -> bytes:
        try:
            line = self._reader.readline(MAX_HEAD_BYTES + 1)
        except (TimeoutError, OSError) as exc:
            raise _Gone(str(exc)) from exc
        if len(line) > MAX_HEAD_BYTES:
            raise _Reject(431, f"the {what} is too long")
        return line

    def _read_request(self) -> tuple[dict[str, Any], bool]:
        line = self._readline("request line")
        self._set_busy(True)  # from its first byte, a request is let finish by stop()
        total = len(line)
        while line in (b"\r\n", b"\n"):  # RFC 9112 §2.2: empty lines before a request are ignored
            line = self._readline("request line")
            total += len(line)
            if total > MAX_HEAD_BYTES:
                raise _Reject(431, "the request head is too long")
        if not line:
            raise _Gone("closed")
        if not line.endswith(b"\n"):
            raise _Gone("closed in the middle of a request")
        parts = line.rstrip(b"\r\n").split(b" ")
        if len(parts) != 3:
            raise _Reject(400, "malformed request line")
        method, target, version = (part.decode("latin-1") for part in parts)
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            if version.startswith("HTTP/"):
                raise _Reject(505, f"{version} is not supported")
            raise _Reject(400, "malformed request line")
        environ = dict(self._environ)
        environ["REQUEST_METHOD"] = method
        environ["SERVER_PROTOCOL"] = version
        _set_target(environ, target)
        hosts = 0
        count = 0
        while True:
            line = self._readline("request head")
            total += len(line)
            if total > MAX_HEAD_BYTES:
                raise _Reject(431, "the request head is too long")
            if line in (b"\r\n", b"\n"):
                break
            if not line.endswith(b"\n"):
                raise _Gone("closed in the middle of a request head")
            count += 1
            if count > MAX_HEADERS:
                raise _Reject(431, "too many header fields")
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip() or b" " in name or b"\t" in name:
                raise _Reject(400, "malformed header field")
            text_name = name.decode("latin-1")
            if "_" in text_name:
                continue  # an underscore would pose as a dash in the environ: dropped, as gunicorn does
            key = text_name.upper().replace("-", "_")
            if key == "HOST":
                hosts += 1
            text = value.strip(b" \t\r\n").decode("latin-1")
            if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                key = "HTTP_" + key
            previous = environ.get(key)
            environ[key] = text if previous is None else f"{previous}, {text}"
        if version == "HTTP/1.1" and hosts != 1:  # RFC 9112 §3.2
            raise _Reject(400, "an HTTP/1.1 request carries exactly one Host header")
        return environ, self._frame_body(environ, version)

    def _frame_body(self, environ: dict[str, Any], version: str) -> bool:
        """Give the environ its `wsgi.input`; whether the connection may stay open after."""
        connection = environ.get("HTTP_CONNECTION", "").lower()
        keep_alive = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        length_text = environ.get("CONTENT_LENGTH")
        coding = environ.get("HTTP_TRANSFER_ENCODING")
        send_continue = None
        if version == "HTTP/1.1" and environ.get("HTTP_EXPECT", "").lower() == "100-continue":
            send_continue = self._send_continue
        if coding is not None:
            if length_text is not None:
                raise _Reject(400, "both Content-Length and Transfer-Encoding")
            if coding.strip().lower() != "chunked":
                raise _Reject(501, f"transfer coding {coding!r} is not supported")
            if send_continue is not None:
                send_continue()
            environ["wsgi.input"] = io.BytesIO(self._read_chunked())
            environ["mcpsync.body"] = None
            return keep_alive
        length = 0
        if length_text is not None:
            values = {v.strip() for v in length_text.split(",")}
            if len(values) != 1 or not (value := values.pop()).isdigit() or not value.isascii():
                raise _Reject(400, "malformed Content-Length")
            length = int(value)
            environ["CONTENT_LENGTH"] = value
        body = FixedBody(self._reader, length, send_continue if length else None)
        environ["wsgi.input"] = body
        environ["mcpsync.body"] = body
        return keep_alive

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            size_text = self._readline("chunk size").split(b";", 1)[0].strip()
            if not _CHUNK_SIZE.fullmatch(size_text):  # no 0x, +, _: read as every proxy would
                raise _Reject(400, "malformed chunk size")
            size = int(size_text, 16)
            if size == 0:
                break
            total += size
            if total > self._server._max_body:
                raise _Reject(413, f"the body is over {self._server._max_body} bytes")
            data = self._reader.read(size + 2)
            if len(data) < size + 2:
                raise _Gone("the body ended early")
            if not data.endswith(b"\r\n"):
                raise _Reject(400, "malformed chunk")
            parts.append(data[:-2])
        trailers = 0
        while self._readline("trailer") not in (b"\r\n", b"\n", b""):
            trailers += 1  # trailers are dropped, but count against the head's limits
            if trailers > MAX_HEADERS:
                raise _Reject(431, "too many trailer fields")
        return b"".join(parts)

    def _send_continue(self) -> None:
        self._sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")

    # -- answering -------------------------------------------------------------------------------
    def _respond(self, environ: dict[str, Any], keep_alive: bool) -> bool:
        """Run the application and write its response; whether the connection stays open."""
        body: FixedBody | None = environ.get("mcpsync.body")
        response = self._response = Response(self._sock, environ, keep_alive, self._server, body)
        environ[RESPOND_NOW] = response.respond_now
        try:
            result = self._server._app(environ, response.start_response)
        except _Gone:
            return False
        except Exception:
            log.exception("the WSGI application failed on %s %s", environ["REQUEST_METHOD"], environ.get("PATH_INFO"))
            self._send_quietly(plain_response(500, "internal server error", self._server.clock.header()))
            return False
        try:
            response.write_all(result)
        except _Gone:
            return False  # the client went away: the body is closed below, which the app notices
        except Exception:
            log.exception("the WSGI application failed while answering %s %s", environ["REQUEST_METHOD"], environ.get("PATH_INFO"))
            if not response.started:
                self._send_quietly(plain_response(500, "internal server error", self._server.clock.header()))
            return False
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    log.exception("closing a WSGI response failed")
        if not response.keep_alive:
            return False
        if body is not None and body.remaining:
            body.read()  # small, and no 100 Continue is pending (else keep_alive is False)
        return True

    def _send_quietly(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError:
            pass


def _set_target(environ: dict[str, Any], target: str) -> None:
    """PATH_INFO and QUERY_STRING from an origin-form, absolute-form or asterisk-form target."""
    if target == "*":
        environ["PATH_INFO"], environ["QUERY_STRING"] = "", ""
        return
    if not target.startswith("/"):
        if "://" not in target:
            environ["PATH_INFO"], environ["QUERY_STRING"] = target, ""
            return
        parts = urlsplit(target)  # absolute-form (RFC 9112 §3.2.2): the path is what follows the authority
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    path, _, query = target.partition("?")
    environ["PATH_INFO"] = unquote_to_bytes(path).decode("latin-1") if "%" in path else path
    environ["QUERY_STRING"] = query


def _linger_close(sock: socket.socket, budget: float = LINGER) -> None:
    """Close after the answer without resetting it away: stop sending, then read and drop what
    the client still sends, for up to `budget` seconds, before closing (RFC 9112 §9.6)."""
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + budget
        while (remaining := deadline - time.monotonic()) > 0:
            sock.settimeout(remaining)
            if not sock.recv(65536):
                break
    except OSError:
        pass
    finally:
        sock.close()
