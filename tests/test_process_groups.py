"""mcpsync._process_groups with real processes: the watchdog stops what it was told of and not
yet released once its owner closes it (or dies: integration/test_process_tree.py), and leaves a
released group alone; the gateway's budget for stopping an upstream fits in a client's patience.

The watched group is a Python child in a session of its own that ignores SIGTERM (only SIGKILL
ends it), with a grandchild in its group that does the same. Its end is waited for with
`Popen.wait(timeout)`; the grandchild's with a bounded poll (nothing signals its exit here).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from mcpsync._process_groups import Watchdog, group_gone, stop_groups
from mcpsync.client.stdio import CLOSE_GRACE
from mcpsync.gateway.upstream import STOP_BUDGET

from ._timeouts import LONG

pytestmark = pytest.mark.timeout(60)

STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
LEADER = f"""
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", {STUBBORN!r}])
print("ready", flush=True)
time.sleep(60)
"""


def stubborn_group() -> subprocess.Popen[bytes]:
    """A group of two processes that only SIGKILL ends, once both run."""
    leader = subprocess.Popen([sys.executable, "-c", LEADER], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)
    assert leader.stdout is not None and leader.stdout.readline() == b"ready\n"
    return leader


def end(leader: subprocess.Popen[bytes]) -> None:
    """What a failing test would leave behind."""
    try:
        os.killpg(leader.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    leader.wait(LONG)
    assert leader.stdout is not None
    leader.stdout.close()


def test_a_watched_group_is_stopped_when_its_owner_closes_the_watchdog() -> None:
    leader = stubborn_group()
    watchdog = Watchdog(term_grace=0.2, kill_wait=LONG)
    try:
        watchdog.watch(leader.pid)
        started = time.monotonic()
        watchdog.close()  # returns once the watchdog exited: it stopped the group first
        assert leader.wait(LONG) == -signal.SIGKILL, "SIGTERM is ignored: SIGKILL after the grace"
        assert group_gone(leader.pid, time.monotonic() + LONG), "the grandchild is stopped too"
        assert time.monotonic() - started < LONG
    finally:
        end(leader)


def test_a_released_group_is_left_alone() -> None:
    leader = stubborn_group()
    watchdog = Watchdog(term_grace=0.2)
    try:
        watchdog.watch(leader.pid)
        watchdog.release(leader.pid)
        watchdog.close()
        assert leader.poll() is None, "the owner stopped it itself (or means to): not the watchdog's"
    finally:
        end(leader)


def test_stop_groups_kills_what_ignores_sigterm_and_reports_nothing_left() -> None:
    leader = stubborn_group()
    try:
        assert stop_groups((leader.pid,), 0.2, LONG, reap=leader.poll) == set()
        assert leader.returncode == -signal.SIGKILL
    finally:
        end(leader)


def test_a_watchdog_never_started_closes_at_once() -> None:
    watchdog = Watchdog()
    watchdog.close()
    watchdog.watch(12345)  # after close: ignored, no process started
    watchdog.close()


def test_the_gateway_stops_an_upstream_within_what_a_client_waits_for_its_server() -> None:
    # A client closing a gateway gives it CLOSE_GRACE to exit by itself; the gateway stops all its
    # upstreams at once within STOP_BUDGET first, so an orderly gateway is never cut short.
    assert STOP_BUDGET < CLOSE_GRACE
