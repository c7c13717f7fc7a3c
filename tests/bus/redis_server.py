"""A real redis-server for the bus tests: Debian's binary, on a free loopback port, in a temp dir.

`RedisServer().start()` runs `redis-server` with no persistence (no RDB, no AOF) and returns once it
logs that it accepts connections (read from its stdout with a deadline: no polling). `stop()` ends it
(SIGTERM, then SIGKILL past the deadline) and `start()` again brings it back on the same port, which
is what the outage tests need. A missing binary is a failure that says how to install it, never a
skip: these tests are the proof that the bus works.
"""

from __future__ import annotations

import selectors
import shutil
import socket
import subprocess
import tempfile
import time

from .._timeouts import LONG

READY = b"Ready to accept connections"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One redis-server process at a time, on one port for its whole life."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: apt-get install redis-server (Debian's package)")
        self.binary = binary
        self.port = free_port()
        self._dir = tempfile.TemporaryDirectory(prefix="mcpsync-redis-")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        assert self._process is None, "already running"
        process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self._dir.name,
             "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "notice", "--logfile", ""],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        self._process = process
        assert process.stdout is not None
        seen = b""
        deadline = time.monotonic() + LONG
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while READY not in seen:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    self.stop()
                    raise RuntimeError(f"redis-server did not get ready within {LONG} s:\n{seen.decode(errors='replace')}")
                chunk = process.stdout.read1(65536)
                if not chunk:
                    self._process = None
                    process.wait(LONG)
                    raise RuntimeError(f"redis-server exited at start ({process.returncode}):\n{seen.decode(errors='replace')}")
                seen += chunk
        return self

    @property
    def running(self) -> bool:
        return self._process is not None

    def stop(self) -> None:
        """End the server and wait for it; a no-op when it is not running."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.communicate(timeout=LONG)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate(timeout=LONG)

    def close(self) -> None:
        self.stop()
        self._dir.cleanup()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
