"""`mcpsync serve` typed at a terminal says on stderr what it waits for; under a client it is silent.

Real processes on a real pseudo-terminal (`pty`): the child's stdin is the terminal, as in a shell,
and it owns the terminal (a session leader with it as controlling terminal), so Ctrl-D and Ctrl-C
typed into it reach the child the way a user's keys would. stdout and stderr are pipes, so what
goes where can be told apart.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import subprocess
import sys
import termios
import time
from typing import Iterator

import pytest

from .._timeouts import LONG
from ._serving import initialize_line, serve_env, serve_initialize_on_a_pipe

INITIALIZE = initialize_line("tty")


def _take_terminal() -> None:
    """In the child, after setsid(): make its stdin, the pty, its controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _read_line(fd: int, timeout: float) -> bytes:
    """One line from a pipe, waiting at most `timeout` seconds for it."""
    deadline = time.monotonic() + timeout
    data = b""
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            pytest.fail(f"no complete line within {timeout}s; got {data!r}")
        chunk = os.read(fd, 1)
        if not chunk:
            pytest.fail(f"end of output before a complete line; got {data!r}")
        data += chunk
    return data


def _rest(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """What is left on stdout and stderr once the child has exited."""
    assert proc.stdout is not None and proc.stderr is not None
    return proc.stdout.read(), proc.stderr.read()


@pytest.fixture
def on_terminal() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`mcpsync serve` with a pty as stdin and controlling terminal; yields it and the pty's master."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpsync", "serve"],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=serve_env(),
        start_new_session=True,
        preexec_fn=_take_terminal,
    )
    os.close(slave)
    try:
        yield proc, master
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(LONG)
        for stream in (proc.stdout, proc.stderr):
            assert stream is not None
            stream.close()
        os.close(master)


@pytest.mark.parametrize("key, name", [(b"\x04", "Ctrl-D"), (b"\x03", "Ctrl-C")])
def test_on_a_terminal_it_says_on_stderr_what_it_waits_for_and_the_key_it_names_stops_it(
    on_terminal: tuple[subprocess.Popen[bytes], int], key: bytes, name: str
) -> None:
    proc, terminal = on_terminal
    assert proc.stdout is not None and proc.stderr is not None
    line = _read_line(proc.stderr.fileno(), LONG).decode()
    assert "MCP" in line and "stdin/stdout" in line and name in line, line

    os.write(terminal, INITIALIZE)  # typed at the terminal, it is served
    response = json.loads(_read_line(proc.stdout.fileno(), LONG))
    assert response["id"] == 1 and response["result"]["serverInfo"]["name"] == "mcpsync-demo"

    os.write(terminal, key)
    assert proc.wait(LONG) == 0
    assert _rest(proc) == (b"", b""), "only frames on stdout, and one line on stderr"


def test_on_a_pipe_it_writes_nothing_to_stderr() -> None:
    returncode, out, err = serve_initialize_on_a_pipe()
    assert returncode == 0
    assert json.loads(out)["id"] == 1
    assert err == b""
