"""A `Server` of this process as a client's connection: `connect(server)`, for a program's own tests.

Why: a user testing their tools wants the whole path a client takes (the handshake, the eras,
validation, `Context`, listens), without a port to pick, a child to start or stop, or a process
boundary between the test and the code under it (a breakpoint in a tool stops the test). So the
server is served in this process by its own stdio transport, on two `os.pipe()`s: the same
framing, reader, workers and shutdown as `mcpsync serve`, with nothing faked.

Threads: the transport runs on its own thread (`Server.serve_fds`), and this connection's reader
(`mcpsync-memory-reader`) reads the server's output as `StdioConnection`'s reads a child's. Frames
go to the server through an `Outbox`, so a sender never waits on a server that reads slowly.
`close()` ends the server's input, which ends its transport as end of input does (running requests
drained within its `drain_timeout`, or shut down after `timeout`), then joins the reader and
closes every descriptor. The `Server` itself stays open: close it as usual.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from ..errors import ConnectionLost
from ..protocol import jsonrpc
from ..protocol.framing import TOO_LARGE, FrameSplitter
from ..protocol.jsonrpc import Message
from ._outbox import Outbox

log = logging.getLogger("mcpsync.client")

OnMessage = Callable[[Message], None]
OnLost = Callable[[Exception], None]

CLOSE_TIMEOUT = 5.0
"""Seconds `close()` waits for the server's transport to end once its input has ended, before
shutting it down (the requests still running are then cancelled)."""
_MAX_FRAME_BYTES = 64 * 1024 * 1024
_SEND_TIMEOUT = 30.0


class FdTransport(Protocol):
    """What serving a pair of descriptors gives back (`StdioServer`): a way to wait and to stop."""

    def wait(self, timeout: float) -> bool: ...

    def shutdown(self, timeout: float | None = None) -> bool: ...


class InProcessServer(Protocol):
    """What `connect()` needs of a server in this process: `mcpsync.Server` is one."""

    @property
    def name(self) -> str: ...

    def serve_fds(self, read_fd: int, write_fd: int, *, on_stopped: Callable[[], None] | None = None, start: bool = True) -> FdTransport: ...


class MemoryConnection:
    """A connection to `server`, served in this process over two pipes (see the module docstring)."""

    def __init__(self, server: InProcessServer, *, close_timeout: float = CLOSE_TIMEOUT) -> None:
        self.server = server
        self._close_timeout = close_timeout
        self._lock = threading.Lock()  # start() against close()
        self._transport: FdTransport | None = None
        self._outbox: Outbox | None = None
        self._reader: threading.Thread | None = None
        self._fds: list[int] = []  # the server's input (read end) and our reading end of its output
        self._output: int | None = None  # the server's output (write end): closed once it stops, the reader's EOF
        self._closed = False

    def start(self, on_message: OnMessage, on_lost: OnLost) -> None:
        with self._lock:
            if self._closed:
                raise ConnectionLost("the connection is closed")
            to_server_read, to_server_write = os.pipe()
            from_server_read, from_server_write = os.pipe()
            self._fds, self._output = [to_server_read, from_server_read], from_server_write
            try:
                self._transport = self.server.serve_fds(to_server_read, from_server_write, on_stopped=self._server_stopped)
            except BaseException:
                for fd in (to_server_read, from_server_read, from_server_write, to_server_write):
                    os.close(fd)
                self._fds, self._output = [], None
                raise
            self._outbox = Outbox(os.fdopen(to_server_write, "wb", buffering=0), self.server.name, on_cut=self._cut)
            self._reader = threading.Thread(target=self._read, args=(from_server_read, on_message, on_lost), name="mcpsync-memory-reader", daemon=True)
            self._reader.start()

    def _read(self, fd: int, on_message: OnMessage, on_lost: OnLost) -> None:
        splitter = FrameSplitter(_MAX_FRAME_BYTES)
        try:
            while True:
                data = os.read(fd, 1 << 16)
                for frame in splitter.feed(data) if data else splitter.finish():
                    if frame is TOO_LARGE:
                        log.warning("the server %r sent a frame over %d bytes; dropped", self.server.name, _MAX_FRAME_BYTES)
                        continue
                    message = jsonrpc.decode(frame)
                    if isinstance(message, jsonrpc.Invalid):
                        log.warning("the server %r wrote a line that is not a JSON-RPC message: %.200r", self.server.name, frame)
                        continue
                    on_message(message)
                if not data:
                    break
        except OSError as exc:
            log.debug("reading from the server %r failed: %s", self.server.name, exc)
        except Exception:
            log.exception("client reader failed")
        on_lost(ConnectionLost(f"the server {self.server.name!r} stopped serving this connection"))

    def _server_stopped(self) -> None:
        """The transport ended (end of input, or the server shut down): its output ends, so the
        reader reads to the end and reports the connection lost."""
        with self._lock:
            output, self._output = self._output, None
        if output is not None:
            os.close(output)

    def _cut(self) -> None:
        """A frame was cut halfway: the stream cannot be repaired, so the server's transport stops."""
        transport = self._transport
        if transport is not None:
            transport.shutdown(0)

    def send(self, message: dict[str, Any], timeout: float | None = None) -> None:
        """Send one frame without waiting on the server (as `StdioConnection.send`). Raises
        ConnectionLost once the connection is closed or the server stopped reading."""
        outbox = self._outbox
        if outbox is None or self._closed:
            raise ConnectionLost("the connection is closed")
        outbox.put(jsonrpc.encode(message), time.monotonic() + (_SEND_TIMEOUT if timeout is None else timeout))

    def close(self, timeout: float | None = None) -> None:
        """End the server's input and wait up to `timeout` seconds (default `close_timeout`) for its
        transport to end, then shut it down; join the reader and close the pipes. Idempotent."""
        grace = self._close_timeout if timeout is None else timeout
        with self._lock:
            if self._closed:
                return
            self._closed = True
            transport, outbox, reader, fds = self._transport, self._outbox, self._reader, self._fds
            self._fds = []
        if transport is None or outbox is None:
            return
        outbox.close(grace, on_stuck=self._cut)  # the server's end of input
        if not transport.wait(grace):
            transport.shutdown(grace)
            transport.wait(grace)
        self._server_stopped()  # already, unless it outlived the shutdown: the reader ends either way
        if reader is not None and reader is not threading.current_thread():
            reader.join(grace)
            if reader.is_alive():
                log.warning("the reader of the in-process server %r was still running %g s after close", self.server.name, grace)
        for fd in fds:
            os.close(fd)
