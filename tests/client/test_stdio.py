"""StdioConnection with real child processes: what is left running after close, and start errors.

A launcher (like `npm exec`, which runs the real server as a grandchild) is played by a Python
child that starts a grandchild in its own process group and tells its pid on stdout, then exits
when its stdin closes. Waits are bounded (tests._timeouts); a process group's end is polled with a
deadline, since nothing signals when a grandchild exits.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import tempfile
import time
from typing import Any

import pytest

import mcpsync
from mcpsync import ConnectionLost
from mcpsync.client import StdioConnection
from mcpsync.protocol.jsonrpc import Notification

from .._timeouts import LONG

pytestmark = pytest.mark.timeout(60)

# The grandchild ignores SIGTERM and never reads: only SIGKILL ends it.
GRANDCHILD = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: signal.pause()"
LAUNCHER = f"""
import json, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {GRANDCHILD!r}], stdin=subprocess.DEVNULL)
print(json.dumps({{"jsonrpc": "2.0", "method": "started", "params": {{"pid": child.pid}}}}), flush=True)
sys.stdin.read()  # the launcher itself ends with its input; its child does not
"""


def group_alive(pgid: int) -> bool:
    """Whether a process of the group is left that is not a zombie (/proc)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # state ppid pgrp ...
        if int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def wait_group_gone(pgid: int, timeout: float) -> bool:
    """Whether every process of the group is gone within `timeout`. A bounded poll of /proc:
    nothing signals this process when a grandchild (not its own child) exits."""
    deadline = time.monotonic() + timeout
    while group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_close_stops_what_the_child_started_in_its_process_group() -> None:
    messages: queue.Queue[Any] = queue.Queue()
    connection = StdioConnection([sys.executable, "-c", LAUNCHER], close_grace=0.5)
    connection.start(messages.put, lambda error: None)
    pgid = connection.pid
    assert pgid is not None and os.getpgid(pgid) == pgid, "the child leads a process group of its own"
    try:
        started = messages.get(timeout=LONG)
        assert isinstance(started, Notification) and started.method == "started", started
        grandchild = started.params["pid"]
        assert os.getpgid(grandchild) == pgid
        connection.close()
        assert wait_group_gone(pgid, LONG), "a process of the child's group outlived close()"
    finally:
        kill_group(pgid)


def test_a_connection_closed_before_it_starts_never_starts_a_child() -> None:
    connection = StdioConnection([sys.executable, "-c", LAUNCHER])
    connection.close()
    try:
        with pytest.raises(ConnectionLost, match="closed"):
            connection.start(lambda message: None, lambda error: None)
        assert connection.pid is None
    finally:
        if connection.pid is not None:  # what a failure would have left running
            kill_group(connection.pid)


def test_a_working_directory_that_does_not_exist_is_named() -> None:
    with tempfile.TemporaryDirectory() as parent:
        missing = os.path.join(parent, "no-such-dir")
        with pytest.raises(ConnectionLost) as raised:
            mcpsync.connect([sys.executable, "-c", "pass"], cwd=missing)
    message = str(raised.value)
    assert missing in message and "working directory" in message, message
    assert message.startswith(f"cannot start {sys.executable!r}"), message


def test_a_program_that_does_not_exist_is_still_named_as_the_problem() -> None:
    with pytest.raises(ConnectionLost, match="cannot start 'no-such-program-mcpsync': No such file or directory"):
        mcpsync.connect(["no-such-program-mcpsync"], cwd=os.getcwd())
