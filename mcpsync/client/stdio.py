"""A connection to an MCP server running as a child process, over its stdin and stdout.

Strategy: one reader thread (`mcpsync-client-reader`) reads the child's stdout as raw bytes, splits
lines with the server's own frame splitter and hands each decoded message to the session's callback;
when the child's output ends it reports the loss once. Writes go through an `Outbox` (_outbox.py):
what the pipe takes goes out at once, the rest waits for the outbox's writer thread, so sending
never waits on the child. The child runs in a session, so a process group, of its own (a
launcher such as `npm exec` runs the real server as a grandchild). `close()` closes its stdin and
gives it `close_grace` seconds (CLOSE_GRACE) to exit by itself, then sends SIGTERM to the whole
group, SIGKILL after `term_grace` more (TERM_GRACE), and joins the reader: nothing of the group is
left running, whatever the child started. CLOSE_GRACE is longer than a gateway needs to stop its
own upstreams (gateway/upstream.py), so a `mcpsync serve --upstream ...` child ends its upstreams
itself before it exits; those run in groups of their own, which a kill of the child's group does
not reach. `start()` and `close()` take one lock, so a connection closed while it is being started
stops the child it started, or never starts one. A `watchdog` (mcpsync._process_groups) is told of
the group while it runs, so it can stop it if this process is killed.
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

from .._process_groups import Watchdog, signal_group, stop_groups
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
CLOSE_GRACE = 3.0
"""Seconds a closed child gets to exit by itself (its stdin closed) before its group gets SIGTERM:
more than a gateway's own worst case for stopping its upstreams (gateway.upstream.STOP_BUDGET)."""
TERM_GRACE = 1.0
"""Seconds between SIGTERM and SIGKILL to the child's process group."""
KILL_WAIT = 1.0
"""Seconds `close()` looks for the group to be gone after SIGKILL (a process stuck in the kernel
outlives it: then it warns and returns)."""


class StdioConnection:
    """Starts `command` and speaks newline-delimited JSON-RPC with it.

    `close_grace`: seconds the child gets to exit by itself once `close()` closed its stdin, before
    its process group gets SIGTERM; `term_grace`: seconds from SIGTERM to SIGKILL. `watchdog` (the
    gateway's, mcpsync._process_groups) is told of the child's process group while it runs.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: IO[Any] | int | None = None,
        close_grace: float = CLOSE_GRACE,
        term_grace: float = TERM_GRACE,
        watchdog: Watchdog | None = None,
    ) -> None:
        if isinstance(command, str) or not command:
            raise ValueError("command must be a non-empty list of program and arguments")
        self.command = list(command)
        self._env = None if env is None else {**os.environ, **env}
        self._cwd = cwd
        self._stderr = stderr
        self._close_grace = close_grace
        self._term_grace = term_grace
        self._watchdog = watchdog
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
            if self._watchdog is not None:
                self._watchdog.start()  # first: from the spawn on, its group must be known to it
            self._process = process = self._spawn()
            if self._watchdog is not None:
                self._watchdog.watch(process.pid)
            assert process.stdin is not None  # _spawn asks for a pipe
            self._outbox = Outbox(process.stdin, self.command[0], on_cut=lambda: signal_group(process.pid, signal.SIGKILL))
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
        """Close stdin (after what waits to be written), give the child `timeout` seconds (default
        `close_grace`) to exit by itself, then SIGTERM its process group, SIGKILL what is left
        after `term_grace`, and join the reader. Returns within about `timeout + term_grace +
        KILL_WAIT` (a child that stopped reading its input costs up to `timeout` more). Idempotent."""
        grace = self._close_grace if timeout is None else timeout
        deadline = time.monotonic() + grace
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            process, outbox = self._process, self._outbox
        if process is None or outbox is None:
            return
        outbox.close(grace, on_stuck=lambda: signal_group(process.pid, signal.SIGKILL))  # a child that does not read is stopped
        try:
            process.wait(max(0.0, deadline - time.monotonic()))  # with its stdin closed it should exit by itself
        except subprocess.TimeoutExpired:
            pass
        left = stop_groups((process.pid,), self._term_grace, KILL_WAIT, reap=process.poll)  # a launcher's own children too
        if left:
            log.warning("the process group %d of %r outlived SIGKILL", process.pid, self.command[0])
        elif self._watchdog is not None:
            self._watchdog.release(process.pid)  # gone: nothing for the watchdog to stop, whatever happens next
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(max(grace, KILL_WAIT))
        if process.stdout is not None:
            process.stdout.close()
