"""Raw HTTP/1.1 over real sockets, for the tests of `WsgiServer` (its behaviour, refusals, deadlines
and fuzzing).

`RawClient` writes exact bytes and parses what comes back by hand; `Servers` starts `WsgiServer`s
(the loop on a thread of ours), stops and closes them, and checks that no `mcpsync-http-*` thread
is left. Every blocking wait is a socket timeout or a select with a bound; nothing sleeps to
synchronise.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from mcpsync.httpd.server import WsgiServer

from .._timeouts import LONG


@dataclass
class Reply:
    """One parsed response: its status, head and body, and the chunks as framed when chunked."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    raw_head: bytes = b""
    body: bytes = b""
    chunks: list[bytes] | None = None

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name.lower()]

    def header(self, name: str) -> str | None:
        values = self.all(name)
        assert len(values) <= 1, f"{name} sent {len(values)} times: {values}"
        return values[0] if values else None

    @property
    def closes(self) -> bool:
        return any("close" in value.lower() for value in self.all("Connection"))


class Closed(EOFError):
    """The server closed (or reset) the connection before a whole response came."""


class RawClient:
    """A client socket that writes exact bytes and parses responses by hand."""

    def __init__(self, port: int, timeout: float = LONG) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray()
        self.reset = False  # a read ended in ECONNRESET

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_watching(self, data: bytes, piece: int = 16384) -> int:
        """Send `data`, but stop as soon as the server answers or closes (a refusal may come
        before the whole request is sent; sending on would only earn a reset). The bytes sent."""
        sent = 0
        deadline = time.monotonic() + LONG
        while sent < len(data):
            readable, writable, _ = select.select([self.sock], [self.sock], [], max(0.0, deadline - time.monotonic()))
            if readable:
                return sent
            if not writable:
                raise AssertionError(f"could not send for {LONG} s after {sent} of {len(data)} bytes")
            try:
                sent += self.sock.send(data[sent:sent + piece])
            except (BrokenPipeError, ConnectionResetError):
                return sent
        return sent

    def close(self) -> None:
        self.sock.close()

    def _more(self) -> bool:
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            self.reset = True
            return False
        if not data:
            return False
        self.buffer += data
        return True

    def read_until(self, marker: bytes) -> bytes:
        while (at := self.buffer.find(marker)) < 0:
            if not self._more():
                raise Closed(f"closed before {marker!r}; had {bytes(self.buffer)[:300]!r}")
        end = at + len(marker)
        data = bytes(self.buffer[:end])
        del self.buffer[:end]
        return data

    def read_exact(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if not self._more():
                raise Closed(f"closed after {len(self.buffer)} of {size} bytes")
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    def read_head(self) -> Reply:
        raw = self.read_until(b"\r\n\r\n")
        head = raw[:-4].decode("latin-1")
        status_line, *lines = head.split("\r\n")
        version, code, reason = (status_line.split(" ", 2) + [""])[:3]
        assert version == "HTTP/1.1", f"not a status line: {status_line!r}"
        headers = []
        for line in lines:
            name, colon, value = line.partition(":")
            assert colon and name == name.strip(), f"malformed header line {line!r} in {raw!r}"
            headers.append((name, value.strip()))
        return Reply(int(code), reason, headers, raw_head=raw)

    def read_chunk(self) -> bytes:
        """One chunk's data; b"" for the last chunk (whose empty trailer is read too)."""
        size_line = self.read_until(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            assert self.read_until(b"\r\n") == b"\r\n", "unexpected trailer"
            return b""
        data = self.read_exact(size)
        assert self.read_exact(2) == b"\r\n", "chunk not followed by CRLF"
        return data

    def read_response(self, *, head_request: bool = False) -> Reply:
        """One response framed by Content-Length, chunks, or (with neither) the close."""
        reply = self.read_head()
        if head_request or reply.status in (204, 304) or reply.status < 200:
            return reply
        coding = reply.header("Transfer-Encoding")
        length = reply.header("Content-Length")
        if coding is not None:
            assert coding.lower() == "chunked" and length is None
            reply.chunks = []
            while chunk := self.read_chunk():
                reply.chunks.append(chunk)
            reply.body = b"".join(reply.chunks)
        else:
            reply.body = self.read_exact(int(length)) if length is not None else self.read_to_eof()
        return reply

    def expect_closed(self) -> None:
        """The server closes the connection and sends nothing more (end of file, or a reset)."""
        rest = self.read_to_eof()
        assert rest == b"", f"more bytes before the close: {rest[:200]!r}"

    def next_bytes(self) -> bytes:
        """What one read returns now: b"" when the server has closed (end of file or reset)."""
        if self.buffer:
            return self.read_exact(len(self.buffer))
        try:
            return self.sock.recv(65536)
        except ConnectionResetError:
            return b""

    def closed_or_next_response(self) -> Reply | None:
        """None if the server closes the connection, else the next response (well-formed)."""
        try:
            return self.read_response()
        except (EOFError, ConnectionResetError):
            return None

    def read_to_eof(self) -> bytes:
        while self._more():
            pass
        data = bytes(self.buffer)
        self.buffer.clear()
        return data

    def wait_closed(self) -> bytes:
        """Read until the server closes; what came before the close (b"" when nothing)."""
        return self.read_to_eof()

    def quiet_for(self, seconds: float) -> bool:
        """True if nothing arrives (no byte, no close) for `seconds`: for what must NOT happen."""
        if self.buffer:
            return False
        readable, _, _ = select.select([self.sock], [], [], seconds)
        return not readable


@dataclass
class Servers:
    """Starts servers (`serve()` on a thread of ours); stops and closes them all at the end."""

    running: list[tuple[WsgiServer, threading.Thread]] = field(default_factory=list)
    clients: list[Any] = field(default_factory=list)  # anything with close()

    def start(self, app: Callable[..., Iterable[bytes]], **options: Any) -> WsgiServer:
        server = WsgiServer(app, "127.0.0.1", 0, **options)
        thread = threading.Thread(target=server.serve, name="test-http-serve")
        thread.start()
        self.running.append((server, thread))
        return server

    def connect(self, server: WsgiServer, timeout: float = LONG) -> RawClient:
        client = RawClient(server.port, timeout)
        self.clients.append(client)
        return client

    def close(self) -> None:
        for client in self.clients:
            client.close()
        clean = []
        for server, thread in self.running:
            clean.append(server.stop())
            thread.join(LONG)
            server.close()
        assert all(clean), "stop() did not end every connection in time"
        assert not [t.name for _, t in self.running if t.is_alive()], "serve() did not return"
        left = [t.name for t in threading.enumerate() if t.name.startswith("mcpsync-http-")]
        assert not left, f"server threads left after stop(): {left}"


def request(
    method: str = "GET",
    target: str = "/",
    *,
    version: str = "HTTP/1.1",
    headers: Iterable[tuple[str, str]] = (),
    body: bytes = b"",
    host: bool = True,
) -> bytes:
    headers = list(headers)
    lines = [f"{method} {target} {version}"] + (["Host: test"] if host else [])
    lines += [f"{name}: {value}" for name, value in headers]
    framed = any(name.lower() in ("content-length", "transfer-encoding") for name, _ in headers)
    if body and not framed:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def chunked(*parts: bytes, trailer: bytes = b"") -> bytes:
    return b"".join(b"%x\r\n%b\r\n" % (len(part), part) for part in parts) + b"0\r\n" + trailer + b"\r\n"


def chunked_post(body: bytes, *, target: str = "/", headers: Iterable[tuple[str, str]] = ()) -> bytes:
    return request("POST", target, headers=[("Transfer-Encoding", "chunked"), *headers]) + body
