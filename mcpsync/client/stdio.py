"""A connection to an MCP server running as a child process, over its stdin and stdout.

Strategy: one reader thread (`mcpsync-client-reader`) reads the child's stdout as raw bytes, splits
lines with the server's own frame splitter and hands each decoded message to the session's callback;
when the child's output ends it reports the loss once. Writes take a lock so frames never interleave.
`close()` closes the child's stdin, waits briefly for it to exit, then terminates and finally kills
it, and joins the reader: nothing is left running.
"""

from __future__ import annotations

import logging
import os
import select
import subprocess
import threading
import time
from typing import IO, Any, Callable, Mapping, Sequence

from ..errors import CallTimeout, ConnectionLost
from ..protocol import jsonrpc
from ..protocol.jsonrpc import Message
from ..transport._frames import TOO_LARGE, FrameSplitter

log = logging.getLogger("mcpsync.client")

OnMessage = Callable[[Message], None]
OnLost = Callable[[Exception], None]

_MAX_FRAME_BYTES = 64 * 1024 * 1024
_SEND_TIMEOUT = 30.0


class StdioConnection:
    """Starts `command` and speaks newline-delimited JSON-RPC with it."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: IO[Any] | int | None = None,
        close_grace: float = 2.0,
    ) -> None:
        if isinstance(command, str) or not command:
            raise ValueError("command must be a non-empty list of program and arguments")
        self.command = list(command)
        self._env = None if env is None else {**os.environ, **env}
        self._cwd = cwd
        self._stderr = stderr
        self._close_grace = close_grace
        self._write_lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._closed = False

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self, on_message: OnMessage, on_lost: OnLost) -> None:
        try:
            self._process = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=self._env,
                cwd=self._cwd,
                start_new_session=True,  # a Ctrl-C meant for the caller is the caller's to pass on
            )
        except OSError as exc:
            raise ConnectionLost(f"cannot start {self.command[0]!r}: {exc.strerror or exc}") from exc
        os.set_blocking(self._process.stdin.fileno(), False)  # type: ignore[union-attr]  # sends have deadlines
        self._reader = threading.Thread(target=self._read, args=(on_message, on_lost), name="mcpsync-client-reader", daemon=True)
        self._reader.start()

    def _read(self, on_message: OnMessage, on_lost: OnLost) -> None:
        assert self._process is not None and self._process.stdout is not None
        fd = self._process.stdout.fileno()
        splitter = FrameSplitter(_MAX_FRAME_BYTES)
        try:
            while True:
                data = os.read(fd, 1 << 16)
                frames = splitter.feed(data) if data else splitter.finish()
                for frame in frames:
                    if frame is TOO_LARGE:
                        log.warning("%s sent a frame over %d bytes; dropped", self.command[0], _MAX_FRAME_BYTES)
                        continue
                    message = jsonrpc.decode(frame)  # type: ignore[arg-type]
                    if isinstance(message, jsonrpc.Invalid):
                        log.warning("%s wrote a line that is not a JSON-RPC message: %.200r", self.command[0], frame)
                        continue
                    on_message(message)
                if not data:
                    break
        except OSError as exc:
            log.debug("reading from %s failed: %s", self.command[0], exc)
        except Exception:
            log.exception("client reader failed")
        code = self._process.poll()
        detail = f"exited with status {code}" if code is not None else "closed its output"
        on_lost(ConnectionLost(f"the server {self.command[0]!r} {detail}"))

    def send(self, message: dict[str, Any], timeout: float | None = None) -> None:
        """Write one frame, waiting at most `timeout` seconds (default 30) for a child that reads
        slowly. Raises CallTimeout if nothing could be written in time, ConnectionLost if the child
        is gone or stopped reading half-way through a frame (it is stopped then: the stream is cut)."""
        frame = jsonrpc.encode(message)
        process = self._process
        if process is None or process.stdin is None or self._closed:
            raise ConnectionLost("the connection is closed")
        deadline = time.monotonic() + (_SEND_TIMEOUT if timeout is None else timeout)
        lock = self._write_lock
        if not lock.acquire(False) and not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise CallTimeout(f"the server {self.command[0]!r} is not reading its input")
        try:
            self._write(process, frame, deadline)
        finally:
            lock.release()

    def _write(self, process: "subprocess.Popen[bytes]", frame: bytes, deadline: float) -> None:
        total = len(frame)
        poller = None
        try:
            fd = process.stdin.fileno()  # type: ignore[union-attr]
            try:
                written = os.write(fd, frame)  # the usual case: the pipe has room for all of it
            except BlockingIOError:
                written = 0
            if written == total:
                return
            view = memoryview(frame)[written:]
            while view:
                try:
                    view = view[os.write(fd, view) :]
                    continue
                except BlockingIOError:
                    pass
                if poller is None:  # the pipe is full: wait for room, until the deadline
                    poller = select.poll()
                    poller.register(fd, select.POLLOUT)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not poller.poll(remaining * 1000):
                    if len(view) == total:
                        raise CallTimeout(f"the server {self.command[0]!r} is not reading its input")
                    process.kill()  # half a frame is on the wire: the stream cannot be repaired
                    raise ConnectionLost(f"the server {self.command[0]!r} stopped reading in the middle of a message")
        except (OSError, ValueError) as exc:
            raise ConnectionLost(f"the server {self.command[0]!r} stopped reading: {exc}") from exc

    def close(self, timeout: float | None = None) -> None:
        """Close stdin, wait for the child (then SIGTERM, then SIGKILL), join the reader. Idempotent."""
        grace = self._close_grace if timeout is None else timeout
        process = self._process
        if self._closed or process is None:
            self._closed = True
            return
        self._closed = True
        acquired = self._write_lock.acquire(timeout=grace)
        if not acquired:
            process.kill()  # a send is stuck on a child that does not read: end it, the send fails
            acquired = self._write_lock.acquire(timeout=grace)
        try:
            process.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        finally:
            if acquired:
                self._write_lock.release()
        for stop in (None, process.terminate, process.kill):
            if stop is not None:
                try:
                    stop()
                except ProcessLookupError:
                    pass
            try:
                process.wait(grace)
                break
            except subprocess.TimeoutExpired:
                continue
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(grace)
        if process.stdout is not None:
            process.stdout.close()
