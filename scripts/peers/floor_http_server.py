#!/usr/bin/env python3
"""The HTTP floor: a one-thread Python selector loop answering MCP POSTs with a fixed JSON body over
HTTP/1.1 keep-alive, for scripts/bench-http.

    python scripts/peers/floor_http_server.py [--host 127.0.0.1] [--port 0]

Why it exists: scripts/bench-http measures mcpsync's HTTP endpoint beside this loop, in the same run
and on the same core, to show how much of a request's cost is a Python process's own (accepting,
reading a socket, finding the end of the head and the Content-Length, writing an answer) and how
much is mcpsync's. It is the ceiling, not a server: no JSON is parsed, no header checked, the answer
to a `tools/call` is always the same bytes (shaped like a 2026-07-28 echo result, about the size of
mcpsync's). That is the floor the issue's targets are stated against (issue 27: "a one-thread Python
selector loop answering a fixed JSON body").

Just enough of the handshake era for the bench's set-up step: a body naming `"initialize"` gets an
initialize result and an `Mcp-Session-Id`; a notification (no `"id"`) gets 202 with no body. Those
are byte searches, cheap beside the rest. A request whose head has no `Content-Length` (or a
chunked body) is answered 411 and the connection closed: nothing the bench sends.

Prints `floor_http_server: serving MCP over HTTP at http://HOST:PORT/mcp` on stderr once bound;
exits on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import selectors
import signal
import socket
import sys
import types

CALL_RESULT = (
    b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello bench"}],"isError":false,'
    b'"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpsync-floor","version":"1"}}}}'
)
INIT_RESULT = (
    b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},'
    b'"serverInfo":{"name":"mcpsync-floor","version":"1"}}}'
)


def response(status: bytes, body: bytes, extra: bytes = b"") -> bytes:
    return (b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)


CALL_ANSWER = response(b"200 OK", CALL_RESULT)
INIT_ANSWER = response(b"200 OK", INIT_RESULT, b"Mcp-Session-Id: floor-session\r\n")
ACCEPTED = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
NO_LENGTH = b"HTTP/1.1 411 Length Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def content_length(head: bytes) -> int | None:
    """The Content-Length of a request head (bytes up to the blank line), None when there is none."""
    lower = head.lower()
    at = lower.find(b"\r\ncontent-length:")
    if at < 0 or b"\r\ntransfer-encoding:" in lower:
        return None
    end = lower.find(b"\r\n", at + 2)
    try:
        return int(lower[at + 17:end if end >= 0 else len(lower)])
    except ValueError:
        return None


def answer(body: bytes) -> bytes:
    if b'"id"' not in body:
        return ACCEPTED
    if b'"initialize"' in body:
        return INIT_ANSWER
    return CALL_ANSWER


class Connection:
    """One client connection: its unparsed input and its unsent output."""

    __slots__ = ("sock", "inbox", "outbox", "closing")

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.inbox, self.outbox, self.closing = sock, bytearray(), bytearray(), False

    def take_requests(self) -> None:
        """Answer every complete request in the input, in order (pipelining allowed)."""
        inbox = self.inbox
        while True:
            end = inbox.find(b"\r\n\r\n")
            if end < 0:
                return
            length = content_length(bytes(inbox[:end]))
            if length is None:
                self.outbox += NO_LENGTH
                self.closing = True
                del inbox[:]
                return
            total = end + 4 + length
            if len(inbox) < total:
                return
            self.outbox += answer(bytes(inbox[end + 4:total]))
            del inbox[:total]


def serve(listener: socket.socket, stop: types.SimpleNamespace) -> None:
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, None)
    try:
        while not stop.now:
            for key, events in selector.select(timeout=0.5):
                if key.data is None:
                    try:
                        sock, _ = listener.accept()
                    except BlockingIOError:
                        continue
                    sock.setblocking(False)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    selector.register(sock, selectors.EVENT_READ, Connection(sock))
                    continue
                conn: Connection = key.data
                if events & selectors.EVENT_READ:
                    try:
                        data = conn.sock.recv(65536)
                    except (BlockingIOError, InterruptedError):
                        data = None
                    except OSError:
                        data = b""
                    if data == b"":
                        selector.unregister(conn.sock)
                        conn.sock.close()
                        continue
                    if data:
                        conn.inbox += data
                        conn.take_requests()
                if conn.outbox:
                    try:
                        sent = conn.sock.send(conn.outbox)
                    except (BlockingIOError, InterruptedError):
                        sent = 0
                    except OSError:
                        selector.unregister(conn.sock)
                        conn.sock.close()
                        continue
                    del conn.outbox[:sent]
                if not conn.outbox and conn.closing:
                    selector.unregister(conn.sock)
                    conn.sock.close()
                    continue
                wanted = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outbox else 0)
                if key.events != wanted:
                    selector.modify(conn.sock, wanted, conn)
    finally:
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        selector.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    listener = socket.create_server((args.host, args.port), backlog=128)
    listener.setblocking(False)
    stop = types.SimpleNamespace(now=False)

    def on_signal(signum: int, frame: object) -> None:
        stop.now = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    host, port = listener.getsockname()[:2]
    print(f"floor_http_server: serving MCP over HTTP at http://{host}:{port}/mcp", file=sys.stderr, flush=True)
    serve(listener, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
