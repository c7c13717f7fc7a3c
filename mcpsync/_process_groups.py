"""Process groups: stopping one (SIGTERM, then SIGKILL, each wait bounded), and a watchdog process
that stops the groups it was told about when the process that told it dies, however it dies.

Strategy: a child MCP server runs in a session (so a process group) of its own, and a launcher
such as `npm exec` runs the real server as a grandchild in the same group: stopping the group
stops all of it (`stop_group`). Nothing signals when a grandchild exits, so whether a group is
gone is looked at again and again with a deadline (`group_gone`); while any member lives, the
kernel keeps the group's id from being reused, so signalling a group that was seen alive reaches
no stranger.

A gateway's upstreams are such groups, outside the gateway's own group: a client that kills the
gateway's group does not reach them, and a gateway killed outright (SIGKILL) cannot stop them.
The `Watchdog` covers that. It is a small process of its own (this file run as a script, stdlib
only, so it starts in tens of milliseconds; in a session of its own, so a kill of the gateway's
group spares it). The gateway tells it over a pipe which groups it runs (`watch`) and which it
has stopped (`release`). The pipe's write end exists in the gateway alone (it is not inheritable,
so no child holds it), so the watchdog reads the end of it exactly when the gateway exits, or
closes it: it then stops every group it still knows of (SIGTERM, `term_grace`, SIGKILL) and exits.
An orderly gateway has released them all by then, so its watchdog just exits.

This is POSIX (Linux and macOS alike): process groups, `killpg`, and a pipe's end of file when
its last writer dies. What it cannot reach: a process that moved itself to a session or group of
its own (a daemonizing server); a group started in the instant between the gateway starting it
and telling the watchdog (microseconds: the watchdog itself is started before the child); and
anything, once the watchdog itself was killed with SIGKILL before its gateway.

Linux's PR_SET_PDEATHSIG is not used: it reaches only the direct child (`npm exec`, not the `sh`
and `node` it starts: fork clears it), it fires when the *thread* that started the child ends
(the supervisor thread that restarts an upstream), not the process, and setting it needs a
`preexec_fn`, which is unsafe in a process with threads.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess  # imported where a watchdog is started: a server with no upstream needs none

log = logging.getLogger("mcpsync")

POLL_MAX = 0.05
"""Seconds between looks at a process group that is still ending (backing off from 1 ms)."""
WATCHDOG_TERM_GRACE = 0.5
"""Seconds the watchdog gives the groups it stops between SIGTERM and SIGKILL."""
WATCHDOG_KILL_WAIT = 1.0
"""Seconds the watchdog looks for killed groups to be gone before it exits anyway."""
WATCHDOG_ARG = "watchdog"
"""The watchdog's first argument: what `ps` shows it is (`python ... mcpsync/_process_groups.py watchdog ...`)."""
WATCHDOG_EXIT_WAIT = 5.0
"""Seconds `Watchdog.close()` waits for the watchdog to exit (it has nothing to stop, normally)."""


def signal_group(pgid: int, signum: int) -> None:
    """Signal every process of the group; SIGTERM also continues a stopped one, so it hears it."""
    try:
        os.killpg(pgid, signum)
        if signum == signal.SIGTERM:
            os.killpg(pgid, signal.SIGCONT)
    except ProcessLookupError:
        pass
    except PermissionError as exc:  # a member that changed its user: not ours to stop
        log.warning("cannot signal process group %d: %s", pgid, exc)


def group_gone(pgid: int, deadline: float, reap: Callable[[], object] = lambda: None) -> bool:
    """Whether no process of the group is left running, looking until `deadline`. `reap` collects
    the leader once it has exited, when it is our child. A zombie still counts as a member for
    `killpg`, and an orphan's zombie waits for PID 1 to reap it (some inits look only every second
    or so): where /proc tells (Linux), a group of zombies alone is gone."""
    delay = 0.001
    while True:
        reap()
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        if delay >= POLL_MAX and _only_zombies(pgid):  # once it takes a while: a scan of /proc costs more than a look
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(delay, remaining))  # nothing signals a grandchild's exit: a bounded poll
        delay = min(delay * 2, POLL_MAX)


def _only_zombies(pgid: int) -> bool:
    """Whether /proc shows members of the group, none of them running (all zombies). False where
    there is no /proc, or when it shows none (the group ended meanwhile: killpg tells that)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return False
    members = 0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # state, ppid, pgrp, ...
        if len(fields) > 2 and fields[2] == b"%d" % pgid:
            if fields[0] != b"Z":
                return False
            members += 1
    return members > 0


def stop_groups(pgids: Iterable[int], term_grace: float, kill_wait: float, reap: Callable[[], object] = lambda: None) -> set[int]:
    """SIGTERM every group, SIGKILL those left after `term_grace` seconds, and return those still
    there `kill_wait` seconds later (a process stuck in the kernel outlives even SIGKILL)."""
    left = set(pgids)
    for signum, wait in ((signal.SIGTERM, term_grace), (signal.SIGKILL, kill_wait)):
        left = {pgid for pgid in left if not group_gone(pgid, 0.0, reap)}
        for pgid in left:
            signal_group(pgid, signum)
        deadline = time.monotonic() + wait
        left = {pgid for pgid in left if not group_gone(pgid, deadline, reap)}
        if not left:
            break
    return left


class Watchdog:
    """The parent's side of the watchdog (see the module docstring). Started by `start()` (or the
    first `watch`); `close()` ends it. Thread-safe; never blocks the caller on the watchdog: a message the pipe
    cannot take at once is dropped with a warning."""

    def __init__(self, term_grace: float = WATCHDOG_TERM_GRACE, kill_wait: float = WATCHDOG_KILL_WAIT) -> None:
        self._term_grace = term_grace
        self._kill_wait = kill_wait
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._failed = False  # it could not be started or it died: say so once, then do without
        self._closed = False

    def start(self) -> None:
        """Start the watchdog now (idempotent), before the first group it must watch is started:
        a caller killed after starting a group and before telling the watchdog leaves it running."""
        with self._lock:
            if not (self._closed or self._failed or self._process is not None):
                self._start()

    def watch(self, pgid: int) -> None:
        """The caller runs process group `pgid`: stop it if the caller dies before `release`."""
        self._tell(b"+%d\n" % pgid)

    def release(self, pgid: int) -> None:
        """The caller stopped group `pgid` itself (it is gone): the watchdog forgets it."""
        self._tell(b"-%d\n" % pgid)

    def _tell(self, line: bytes) -> None:
        with self._lock:
            if self._closed or self._failed:
                return
            process = self._process or self._start()
            if process is None or process.stdin is None:
                return
            try:
                os.write(process.stdin.fileno(), line)  # under PIPE_BUF: all of it or nothing
            except OSError as exc:  # full (it stopped reading) or broken (it died)
                self._failed = True
                log.warning("the watchdog of this process's child groups stopped listening (%s); "
                            "if this process is killed, its upstreams are left to exit by themselves", exc)

    def _start(self) -> subprocess.Popen[bytes] | None:
        import subprocess

        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", __file__, WATCHDOG_ARG, repr(self._term_grace), repr(self._kill_wait)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                cwd="/",  # it must not hold a directory someone wants to remove
                start_new_session=True,  # a kill of our own process group spares it: it is why it exists
            )
        except OSError as exc:
            self._failed = True
            log.warning("cannot start the watchdog of this process's child groups (%s); "
                        "if this process is killed, its upstreams are left to exit by themselves", exc)
            return None
        assert self._process.stdin is not None
        os.set_blocking(self._process.stdin.fileno(), False)
        return self._process

    def close(self) -> None:
        """Close the pipe: the watchdog stops any group not released yet, and exits; wait for it
        (bounded) so it is not left a zombie. Idempotent."""
        with self._lock:
            self._closed = True
            process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        import subprocess

        try:
            process.wait(WATCHDOG_EXIT_WAIT)
        except subprocess.TimeoutExpired:
            log.warning("the watchdog (pid %d) was still running %g s after it was told to end", process.pid, WATCHDOG_EXIT_WAIT)


def _watchdog_main(term_grace: float, kill_wait: float) -> int:
    """The watchdog process: read `+PGID`/`-PGID` lines from stdin until its end, then stop the
    groups still watched."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is its parent's to handle
    watched: set[int] = set()
    pending = b""
    while True:
        try:
            data = os.read(0, 4096)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            break
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            if line[:1] in (b"+", b"-") and line[1:].isdigit() and int(line[1:]) > 1:
                (watched.add if line[:1] == b"+" else watched.discard)(int(line[1:]))
    left = stop_groups(watched, term_grace, kill_wait)
    if left:
        sys.stderr.write(f"mcpsync watchdog: process group(s) {sorted(left)} outlived SIGKILL\n")
    return 0


if __name__ == "__main__" and sys.argv[1:2] == [WATCHDOG_ARG]:
    sys.exit(_watchdog_main(float(sys.argv[2]), float(sys.argv[3])))
