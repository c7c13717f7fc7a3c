"""A real `mcpsync serve --http 127.0.0.1:0 ...` child for the tests of this folder: started, its
URL read from its stderr once the port is bound, stopped with SIGTERM (killed after LONG), and
everything it wrote to stderr kept for the test to read."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from .._timeouts import LONG
from ._serving import serve_env

READY = b"serving MCP over HTTP at "


class HttpChild:
    """`with HttpChild(ARGS...) as child:` serves; `child.url` is its endpoint; after the block
    `child.stderr` holds all it logged."""

    def __init__(self, *args: str, cwd: Path | None = None) -> None:
        self._argv = [sys.executable, "-m", "mcpsync", "serve", "--http", "127.0.0.1:0", *args]
        self._cwd = cwd
        self.url = ""
        self.stderr = ""
        self._seen = b""
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> HttpChild:
        self._proc = subprocess.Popen(self._argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=serve_env(), cwd=self._cwd)
        try:
            self.url = self._read_url()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _read_url(self) -> str:
        assert self._proc is not None and self._proc.stderr is not None
        deadline = time.monotonic() + LONG
        while READY not in self._seen or b"\n" not in self._seen.split(READY, 1)[1]:
            ready, _, _ = select.select([self._proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(self._proc.stderr.fileno(), 4096) if ready else b""
            if not chunk:
                raise AssertionError(f"mcpsync serve --http did not start: {self._seen.decode(errors='replace')}")
            self._seen += chunk
        return self._seen.split(READY, 1)[1].split()[0].decode()

    def __exit__(self, *exc: object) -> None:
        proc = self._proc
        if proc is None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            _, rest = proc.communicate(timeout=LONG)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, rest = proc.communicate(timeout=LONG)
        self.stderr = (self._seen + rest).decode(errors="replace")
