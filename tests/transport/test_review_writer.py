"""Review of the stdio writer (issue 30): a real `mcpsync serve` child over pipes, played by a client
that stops reading. Each test is a strict xfail that fails on today's main; its docstring says what
the user sees.

Every wait is a read on a pipe with a deadline, or a wait for the process with a timeout.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .._timeouts import LONG

pytestmark = pytest.mark.timeout(60)

REPO_ROOT = Path(__file__).resolve().parents[2]
SHUTDOWN_TIMEOUT = 1.0
MARGIN = 8.0  # the exit of a Python process on a busy machine, on top of the server's own deadline
HUGE = 9_500_000  # one answer larger than the writer's 8 MiB queue: what follows it must wait for room

APP = f"""
from mcpsync import Server, Service

service = Service("review")


@service.tool
def bulk(size: int) -> str:
    \"\"\"A text of `size` bytes.\"\"\"
    return "x" * size


server = Server("review", services=[service], shutdown_timeout={SHUTDOWN_TIMEOUT})
"""


class Child:
    """`mcpsync serve APP` with pipes; stdout is read only as the test says."""

    def __init__(self, tmp_path: Path, *args: str, app_text: str = APP, stderr_pipe: bool = False) -> None:
        app = tmp_path / "review_app.py"
        app.write_text(app_text)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        self.stderr = (tmp_path / "stderr.txt").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpsync", "serve", str(app), *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE if stderr_pipe else self.stderr, env=env, cwd=tmp_path,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.out = self.proc.stdout.fileno()
        self.buffer = b""
        self.log_path = tmp_path / "stderr.txt"

    def send(self, *messages: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        for message in messages:
            self.proc.stdin.write(message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def read_at_least(self, size: int) -> bytes:
        """At least `size` bytes of stdout (a little more at most: reads of `size` at a time)."""
        deadline = time.monotonic() + LONG
        while len(self.buffer) < size:
            ready, _, _ = select.select([self.out], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"no output within {LONG} s; stderr:\n{self.log()}"
            chunk = os.read(self.out, size - len(self.buffer))
            assert chunk, f"stdout ended; stderr:\n{self.log()}"
            self.buffer += chunk
        return self.buffer

    def read_line(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            self.read_at_least(len(self.buffer) + 1)
        line, _, self.buffer = self.buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(LONG)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self.stderr.close()


@pytest.fixture
def child(tmp_path: Path) -> Iterator[Child]:
    made = Child(tmp_path, "--write-timeout", "600")
    try:
        yield made
    finally:
        made.close()


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "review", "version": "1"}}}


def _fill_the_queue(child: Child) -> None:
    """Initialize (read), then one answer of 9.5 MB that the client does not read: 64 KiB of it
    go into the pipe, the rest waits in the writer's queue, over its 8 MiB bound, so any further
    frame must wait for room. Reading the answer's first bytes proves it was handed over (the
    rest is queued in the same step); the few bytes read leave the queue over its bound."""
    child.send(INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert child.read_line()["id"] == 1
    child.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "bulk", "arguments": {"size": HUGE}}})
    assert child.read_at_least(64).startswith(b'{"jsonrpc":"2.0","id":2'), child.buffer[:100]


def test_end_of_input_ends_the_server_even_after_a_frame_the_reader_must_answer(child: Child) -> None:
    """A client stops reading while the server has more than 8 MiB of output for it (one large
    tool result), sends one more line that the reader thread answers itself (a malformed line: its
    parse error), and closes its end of stdin, as a host that gives up does. The docs
    (dev/threading.rst, "Writer"): a client that stops reading cannot keep `mcpsync serve` from
    exiting at the end of its input. Today the reader waits for room in the queue to hand over
    the parse error (`StdioServer._dispatch` -> `_send` -> `Output.write`, which waits while the
    queue is over its bound) and never reads the end of input, so the server runs on until
    `--write-timeout` (600 s here, 60 s by default) instead of exiting within `shutdown_timeout`.

    The same holds for every step the reader takes under the output lock: a duplicate id's error,
    and `_cancel` (it takes the lock), which waits while a worker whose answer is waiting for room
    holds the lock: a client that cancels its slow requests and then closes its input (what an
    SDK client does on a request timeout) keeps the server running for `--write-timeout`.

    Fix: the reader never waits on the client: its own frames go in without waiting for room
    (they are bounded by what it reads), and it takes the output lock only where no producer can
    hold it while waiting (or a producer waits for room without holding the lock)."""
    _fill_the_queue(child)
    child.send(b"this is not json\n")
    assert child.proc.stdin is not None
    child.proc.stdin.close()
    started = time.monotonic()
    try:
        child.proc.wait(timeout=SHUTDOWN_TIMEOUT + MARGIN)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"mcpsync serve still running {time.monotonic() - started:.1f} s after the end of its input; stderr:\n{child.log()}") from None


FLOOD_APP = f"""
import atexit, sys

from mcpsync import Context, Server, Service

service = Service("review")


@service.tool
def flood(ctx: Context, count: int, size: int) -> str:
    \"\"\"Report `count` progress steps, each with a message of `size` bytes.\"\"\"
    for step in range(1, count + 1):
        ctx.progress(step, count, "p" * size)
    return "flooded"


def peak_rss_kb() -> str:
    # VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over an exec, so a child started
    # by vfork (subprocess does) reports its parent's RSS at the fork when that is larger: a
    # pytest process of the whole suite (about 200 MB) and not this server.
    with open("/proc/self/status") as status:
        return next(line.split()[1] for line in status if line.startswith("VmHWM:"))


atexit.register(lambda: print("PEAK_RSS_KB", peak_rss_kb(), file=sys.stderr, flush=True))
server = Server("review", services=[service], shutdown_timeout={SHUTDOWN_TIMEOUT}, drain_timeout=3.0)
"""
FLOOD_STEPS, FLOOD_STEP_BYTES = 200, 1_000_000


def test_output_a_client_never_reads_is_bounded_after_the_end_of_input(tmp_path: Path) -> None:
    """A client calls a tool that reports progress with large messages (200 steps of 1 MB), reads
    none of it, and closes its input. The docs (dev/threading.rst, "Writer"): what the pipe cannot
    take waits in a queue of at most 8 MiB. But end of input (and SIGTERM) calls
    `Output.stop_waiting()` first thing (`StdioServer._close`), which lifts the bound for
    everything from then on, not only the shutdown's own answers: for the whole drain
    (`drain_timeout`, 30 s by default) a running tool's notifications queue without limit, and the
    server's memory grows with whatever the tool writes (here about 200 MB; the process's peak RSS
    is what the test reads, as the server reports it at exit: its own VmHWM, since ru_maxrss would
    be the pytest process's RSS in a full run). A client that floods a server this
    way needs only a chatty tool.

    Fix: only the frames the shutdown itself writes (the `complete` results, the -32603 answers,
    the answers of requests already finished) may pass the bound; a running request's
    notifications after `stop_waiting` are dropped (or wait, within the drain's deadline)."""
    child = Child(tmp_path, "--write-timeout", "600", app_text=FLOOD_APP)
    try:
        child.send(INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert child.read_line()["id"] == 1
        child.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "flood", "arguments": {"count": FLOOD_STEPS, "size": FLOOD_STEP_BYTES}, "_meta": {"progressToken": "p"}}})
        assert child.proc.stdin is not None
        child.proc.stdin.close()  # and never read again
        child.proc.wait(timeout=LONG)
        said = [line for line in child.log_path.read_text(errors="replace").splitlines() if line.startswith("PEAK_RSS_KB ")]
        assert said, child.log()
        peak_mb = int(said[-1].split()[1]) / 1024
        assert peak_mb < 120, f"the server's peak RSS was {peak_mb:.0f} MB while its client read nothing"
    finally:
        child.close()


CHATTY_APP = f"""
import logging

from mcpsync import Server, Service

service = Service("review")


@service.tool
def chatty(lines: int) -> str:
    \"\"\"Log `lines` warnings of 1 KB, as a tool that logs through Python's logging does.\"\"\"
    for n in range(lines):
        logging.getLogger("review.app").warning("line %d %s", n, "w" * 1000)
    return "said"


server = Server("review", services=[service], shutdown_timeout={SHUTDOWN_TIMEOUT})
"""


def test_sigterm_ends_the_server_when_its_host_does_not_read_stderr(tmp_path: Path) -> None:
    """A host pipes the server's stderr and never reads it (or its log collector stalls), and a
    tool logs more than the pipe holds (200 lines of 1 KB; the pipe holds 64 KiB). The tool's
    thread then blocks in the stderr handler's write, holding the handler's lock. On SIGTERM the
    shutdown goes as far as its first log line (`StdioServer._close`: "request(s) still running
    after the shutdown deadline", since the tool cannot return) and waits on that lock for good:
    `mcpsync serve` never exits, only SIGKILL ends it. Issue 30 and dev/threading.rst promise a
    shutdown that finishes within `shutdown_timeout` whatever the client reads ("no thread waits
    on a write past its deadline"); the server's other pipe has no deadline at all.

    Fix: the CLI's stderr handler never blocks (non-blocking writes that drop, and count, what the
    pipe does not take, or a bounded queue with a writer thread and a deadline, as stdout has),
    and nothing on the shutdown path (nor the signal handler's log line) waits on it."""
    child = Child(tmp_path, app_text=CHATTY_APP, stderr_pipe=True)
    try:
        child.send(INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert child.read_line()["id"] == 1
        child.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "chatty", "arguments": {"lines": 200}}},
                   {"jsonrpc": "2.0", "id": 3, "method": "ping"})
        while child.read_line().get("id") != 3:  # the server answers: only its stderr is full (the call may come first)
            pass
        child.proc.send_signal(signal.SIGTERM)
        try:
            child.proc.wait(timeout=SHUTDOWN_TIMEOUT + MARGIN)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"mcpsync serve still running {SHUTDOWN_TIMEOUT + MARGIN:g} s after SIGTERM") from None
    finally:
        child.close()
