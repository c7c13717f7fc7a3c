"""A connection to an MCP server running as a child process, over its stdin and stdout.

Strategy: one reader thread (`mcpsync-client-reader`) reads the child's stdout as raw bytes, splits
lines with the server's own frame splitter and hands each decoded message to the session's callback;
when the child's output ends it reports the loss once. Writes go through an `Outbox` (_outbox.py):
what the pipe takes goes out at once, the rest waits for the outbox's writer thread, so sending
never waits on the child. The child runs in a process group of its own (a launcher such as
`npm exec` runs the real server as a grandchild). `close()` closes its stdin, waits briefly for
it to exit, then sends SIGTERM and finally SIGKILL to the whole group, and joins the reader:
nothing is left running, whatever the child started. `start()` and `close()` take one lock, so a
connection closed while it is being started stops the child it started, or never starts one.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from ..errors import ConnectionLost
from ..protocol import jsonrpc
from ..protocol.framing import TOO_LARGE, FrameSplitter
from ..protocol.jsonrpc import Message
from ._outbox import Outbox

log = logging.getLogger("mcpsync.client")

OnMessage = Callable[[Message], None]
OnLost = Callable[[Exception], None]

_MAX_FRAME_BYTES = 64 * 1024 * 1024
_SEND_TIMEOUT = 30.0
_GROUP_POLL_MAX = 0.05  # seconds between looks at a process group that is still ending


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
        self._state_lock = threading.Lock()  # start() against close()
        self._process: subprocess.Popen[bytes] | None = None
        self._outbox: Outbox | None = None
        self._reader: threading.Thread | None = None
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The child's pid, which is also its process group's id."""
        return self._process.pid if self._process else None

    def start(self, on_message: OnMessage, on_lost: OnLost) -> None:
        """Start the child and its reader. Raises ConnectionLost if it cannot be started, or if
        the connection was closed first."""
        with self._state_lock:
            if self._closed:
                raise ConnectionLost("the connection is closed")
            self._process = process = self._spawn()
            assert process.stdin is not None  # _spawn asks for a pipe
            self._outbox = Outbox(process.stdin, self.command[0], on_cut=lambda: _signal_group(process.pid, signal.SIGKILL))
            self._reader = threading.Thread(target=self._read, args=(on_message, on_lost), name="mcpsync-client-reader", daemon=True)
            self._reader.start()

    def _spawn(self) -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=self._env,
                cwd=self._cwd,
                start_new_session=True,  # its own group: a Ctrl-C meant for the caller is the caller's to pass on, and close() stops all of it
            )
        except OSError as exc:
            reason = exc.strerror or str(exc)
            if self._cwd is not None and exc.filename == os.fspath(self._cwd):  # the child could not enter it
                raise ConnectionLost(f"cannot start {self.command[0]!r}: working directory {os.fspath(self._cwd)!r}: {reason}") from exc
            raise ConnectionLost(f"cannot start {self.command[0]!r}: {reason}") from exc

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
                    message = jsonrpc.decode(frame)
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
        """Send one frame without waiting on the child: what its pipe cannot take now is written
        by the outbox's thread within `timeout` seconds (default 30), or dropped if none of it
        could be (the child is not reading; a request then goes unanswered until its own
        deadline). Raises ConnectionLost if the child is gone, stopped reading in the middle of a
        frame (it is stopped then: the stream is cut) or the connection is closed; CallTimeout
        when too much already waits for a child that does not read."""
        frame = jsonrpc.encode(message)
        outbox = self._outbox
        if outbox is None or self._closed:
            raise ConnectionLost("the connection is closed")
        outbox.put(frame, time.monotonic() + (_SEND_TIMEOUT if timeout is None else timeout))

    def close(self, timeout: float | None = None) -> None:
        """Close stdin (after what waits to be written, within the grace), wait for the child,
        then SIGTERM and SIGKILL its process group, and join the reader. Idempotent."""
        grace = self._close_grace if timeout is None else timeout
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            process, outbox = self._process, self._outbox
        if process is None or outbox is None:
            return
        outbox.close(grace, on_stuck=lambda: _signal_group(process.pid, signal.SIGKILL))  # a child that does not read is stopped
        _stop_group(process, grace, self.command[0])
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(grace)
        if process.stdout is not None:
            process.stdout.close()


def _stop_group(process: subprocess.Popen[bytes], grace: float, name: str) -> None:
    """With its stdin closed the child should exit by itself; whatever of its process group is
    left after `grace` gets SIGTERM, then SIGKILL (a launcher's own children too)."""
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    for signum in (signal.SIGTERM, signal.SIGKILL):
        if _group_gone(process, time.monotonic()):
            return
        _signal_group(process.pid, signum)
        if _group_gone(process, time.monotonic() + grace):
            return
    log.warning("the process group %d of %r outlived SIGKILL", process.pid, name)


def _signal_group(pgid: int, signum: int) -> None:
    """Signal every process of the group; SIGTERM also continues a stopped one, so it hears it."""
    try:
        os.killpg(pgid, signum)
        if signum == signal.SIGTERM:
            os.killpg(pgid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    except PermissionError as exc:  # a member that changed its user: not ours to stop
        log.warning("cannot signal process group %d: %s", pgid, exc)


def _group_gone(process: subprocess.Popen[bytes], deadline: float) -> bool:
    """Whether no process of the child's group is left, looking until `deadline`. Nothing signals
    when a grandchild exits, so this looks again and again, backing off from 1 to 50 ms. While
    any member lives, the kernel keeps the group's id from being reused."""
    delay = 0.001
    while True:
        process.poll()  # reap the leader once it has exited: a zombie still counts as a member
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, _GROUP_POLL_MAX)
