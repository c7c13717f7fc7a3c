"""`mcpsync call --task` and `mcpsync tasks`: real `mcpsync` processes against real `mcpsync serve`
children (stdio, and HTTP with and without tokens) serving tests/cli/tasks_app.py; what a user
reads on stdout and stderr, and the exit statuses `--help` documents."""

from __future__ import annotations

import itertools
import json
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

import pytest

import mcpsync
from mcpsync.auth import BearerToken

from .._timeouts import LONG
from ._http_child import HttpChild
from ._serving import REPO_ROOT, serve_env

pytestmark = pytest.mark.timeout(LONG * 6)

APP = str(REPO_ROOT / "tests" / "cli" / "tasks_app.py")
STDIO = ["--", sys.executable, "-m", "mcpsync", "serve", APP]
TOKEN = "tasks-0123456789abcdef"
_names = itertools.count()


def _unique(what: str) -> str:
    return f"{what}-{next(_names)}"


def mcpsync_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m mcpsync ARGS` to its end."""
    return subprocess.run(
        [sys.executable, "-m", "mcpsync", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
        env={**serve_env(), **env}, cwd=REPO_ROOT, timeout=LONG * 3,
    )


class Running:
    """`python -m mcpsync ARGS` running: its stderr read line by line as it comes, its stdout kept."""

    def __init__(self, *args: str, **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpsync", *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env={**serve_env(), **env}, cwd=REPO_ROOT,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        self._stdout: list[str] = []
        assert self.proc.stderr is not None and self.proc.stdout is not None
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stderr,), name="test-stderr-reader"),
            threading.Thread(target=self._stdout.extend, args=(self.proc.stdout,), name="test-stdout-reader"),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, start: str) -> str:
        """The next stderr line starting with `start` (the lines before it are kept in .stderr)."""
        deadline = time.monotonic() + LONG
        while True:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            assert line is not None, f"mcpsync ended without saying {start!r}:\n" + "\n".join(self.stderr)
            self.stderr.append(line)
            if line.startswith(start):
                return line

    def finish(self) -> tuple[int, str, list[str]]:
        """Its exit status, stdout, and every stderr line."""
        status = self.proc.wait(LONG * 2)
        for reader in self._readers:
            reader.join(LONG)
        while (line := self.lines.get_nowait()) is not None:
            self.stderr.append(line)
        return status, "".join(self._stdout), self.stderr

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(LONG)
        for reader in self._readers:
            reader.join(LONG)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def _task_id(line: str) -> str:
    """The id in a `task ID: ...` line."""
    return line.split()[1].rstrip(":")


@pytest.fixture(scope="module")
def served() -> Iterator[HttpChild]:
    with HttpChild(APP) as child:
        yield child


def _advance(url: str, name: str, step: int) -> None:
    with mcpsync.connect(url, timeout=LONG) as session:
        session.call_tool("advance", {"name": name, "step": step})


# -- call --task ----------------------------------------------------------------------------------


def test_call_task_shows_the_id_at_once_then_each_change_then_the_result(served: HttpChild) -> None:
    name = _unique("steps")
    run = Running("call", "stepper", "--task", "--args", json.dumps({"name": name}), served.url)
    try:
        first = run.expect("task ")
        task_id = _task_id(first)
        assert first == f"task {task_id}: working"
        run.expect(f"task {task_id}: working: step 1 of 2")
        _advance(served.url, name, 1)
        run.expect(f"task {task_id}: working: step 2 of 2")
        _advance(served.url, name, 2)
        status, out, stderr = run.finish()
    finally:
        run.stop()
    assert (status, out) == (0, "2 steps done\n")
    assert [line for line in stderr if line.startswith("task ")] == [
        f"task {task_id}: working",
        f"task {task_id}: working: step 1 of 2",
        f"task {task_id}: working: step 2 of 2",
        f"task {task_id}: completed: step 2 of 2",
    ]


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_call_task_over_stdio_exits_as_call_does_in_both_eras(mode: str) -> None:
    failed = mcpsync_cli("call", "full_disk", "--task", "--mode", mode, *STDIO)
    lines = failed.stderr.splitlines()
    assert (failed.returncode, failed.stdout) == (1, "the disk is full\n"), failed.stderr
    task_id = _task_id(lines[0])
    assert lines[0] == f"task {task_id}: working"
    assert lines[-1] == f"task {task_id}: {'failed' if mode == 'legacy' else 'completed'}: the disk is full"

    broken = mcpsync_cli("call", "broken", "--task", "--mode", mode, *STDIO)
    assert (broken.returncode, broken.stdout) == (3, "")
    assert broken.stderr.splitlines()[-1] == "Error: no such record"

    at_once = mcpsync_cli("call", "plain", "--task", "--json", "--mode", mode, *STDIO)
    assert at_once.returncode == 0 and json.loads(at_once.stdout)["content"] == [{"type": "text", "text": "plain answer"}]
    assert at_once.stderr == "the server answered at once, without a task\n"


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_call_task_of_a_tool_that_asks_exits_1_as_call_does(mode: str) -> None:
    result = mcpsync_cli("call", "ask_name", "--task", "--mode", mode, *STDIO)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "elicitation" in result.stdout + result.stderr


def test_ctrl_c_cancels_the_task_and_exits_130(served: HttpChild) -> None:
    name = _unique("held")
    run = Running("call", "hold", "--task", "--args", json.dumps({"name": name}), served.url)
    try:
        task_id = _task_id(run.expect("task "))
        run.proc.send_signal(signal.SIGINT)
        status, out, stderr = run.finish()
    finally:
        run.stop()
    assert (status, out) == (130, ""), stderr
    assert stderr[-3:] == [f"task {task_id}: cancelling", f"task {task_id}: cancelled: cancelled by the client", "interrupted"], stderr
    shown = mcpsync_cli("tasks", served.url, task_id)
    assert (shown.returncode, shown.stdout) == (0, f"{task_id}  cancelled  cancelled by the client\n")


class DroppingProxy:
    """A TCP proxy to `url`'s host and port that, while `dropping` is set, closes each connection
    it accepts at once (a server that cannot be reached for a while)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._target = (parts.hostname or "", parts.port or 80)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}{parts.path}"
        self.dropping = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, name="test-proxy-accept")]
        self._threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.dropping.is_set():
                client.close()
                continue
            upstream = socket.create_connection(self._target, timeout=LONG)
            self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                pump = threading.Thread(target=self._pump, args=(source, sink), name="test-proxy-pump")
                self._threads.append(pump)
                pump.start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (closing alone would not, on Linux)
        self._listener.close()
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(LONG)


def test_call_task_survives_a_server_out_of_reach_for_a_while(served: HttpChild) -> None:
    name = _unique("dropped")
    proxy = DroppingProxy(served.url)
    run = Running("call", "stepper", "--task", "--args", json.dumps({"name": name, "steps": 1}), proxy.url)
    try:
        task_id = _task_id(run.expect("task "))
        run.expect(f"task {task_id}: working: step 1 of 1")
        proxy.dropping.set()
        for wait in ("0.5", "1"):  # twice as long each time
            retry = run.expect(f"task {task_id}: ")
            assert retry.startswith(f"task {task_id}: the server cannot be reached (") and retry.endswith(f"; trying again in {wait} s"), retry
        proxy.dropping.clear()
        _advance(served.url, name, 1)
        status, out, stderr = run.finish()
    finally:
        run.stop()
        proxy.close()
    assert (status, out) == (0, "1 steps done\n"), stderr
    assert stderr[-1] == f"task {task_id}: completed: step 1 of 1"


# -- mcpsync tasks --------------------------------------------------------------------------------


def test_tasks_lists_shows_and_cancels_the_callers_tasks(tmp_path: Path) -> None:
    """On an endpoint that knows its callers (a token), a task is the caller's in any session: a
    call following a task another command cancels ends with 3."""
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"{TOKEN} sub=ada\n")
    env = {"TASKS_TOKEN": TOKEN}
    with HttpChild(APP, "--auth-token-file", str(tokens)) as child:
        auth = ("--token-env", "TASKS_TOKEN")
        held = Running("call", "hold", "--task", "--args", json.dumps({"name": _unique("listed")}), *auth, child.url, **env)
        try:
            task_id = _task_id(held.expect("task "))
            listed = mcpsync_cli("tasks", *auth, child.url, **env)
            assert listed.returncode == 0 and f"{task_id}  working\n" in listed.stdout, listed.stderr
            shown = mcpsync_cli("tasks", *auth, "--json", child.url, task_id, **env)
            assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == "working"
            cancelled = mcpsync_cli("tasks", *auth, child.url, task_id, "--cancel", **env)
            assert (cancelled.returncode, cancelled.stdout) == (0, f"{task_id}  cancelled  cancelled by the client\n")
            status, out, stderr = held.finish()
        finally:
            held.stop()
        assert (status, out) == (3, "")
        assert stderr[-1] == f"Error: task {task_id} was cancelled: cancelled by the client"
        with mcpsync.connect(child.url, mode="legacy", auth=BearerToken(TOKEN), timeout=LONG) as session:
            assert session.get_task(task_id).status == "cancelled", "not the caller's in another session"


def test_tasks_wait_follows_a_task_made_earlier_to_its_result(served: HttpChild) -> None:
    name = _unique("later")
    with mcpsync.connect(served.url, timeout=LONG) as session:
        task_id = session.call_tool("stepper", {"name": name, "steps": 1}, task=True).task_id
    assert task_id is not None
    run = Running("tasks", served.url, task_id, "--wait")
    try:
        run.expect(f"task {task_id}: working: step 1 of 1")
        _advance(served.url, name, 1)
        status, out, stderr = run.finish()
    finally:
        run.stop()
    assert (status, out) == (0, "1 steps done\n"), stderr


def test_tasks_says_what_it_cannot_do_with_its_exit_status(served: HttpChild) -> None:
    unknown = mcpsync_cli("tasks", served.url, "no-such-task")
    assert (unknown.returncode, unknown.stdout, unknown.stderr) == (3, "", "Error: Failed to retrieve task: Task not found\n")
    for flag in ("--cancel", "--wait"):
        usage = mcpsync_cli("tasks", served.url, flag)
        assert (usage.returncode, usage.stderr) == (2, f"Error: {flag} needs a TASK_ID after the URL\n")
    both = mcpsync_cli("tasks", served.url, "some-id", "--cancel", "--wait")
    assert (both.returncode, both.stderr) == (2, "Error: --cancel and --wait cannot go together\n")
    nothing = mcpsync_cli("tasks", served.url)
    assert (nothing.returncode, nothing.stdout, nothing.stderr) == (0, "", "no tasks\n")
