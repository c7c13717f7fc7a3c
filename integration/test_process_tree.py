"""What is left running once a client of a gateway is done: nothing of the gateway's process tree.

The tree is mcpsync's own client → `python -m mcpsync serve --upstream CMD` (the gateway) → the
upstream CMD, in a process group of its own, with whatever CMD starts in that group: `npm exec` →
`sh` → `node`, as `npx` runs a server; a `sh -c` wrapper that keeps running beside its `node`;
or integration/fixtures/lingering_upstream.py, which ignores the end of its input and SIGTERM and
starts a lingering child too. The upstream is server-everything (scripts/peers-npm) or that
fixture.

Every process of the tree is recorded while it runs (a walk of /proc by parent pid, each pid with
its start time, so a pid reused afterwards is not mistaken for it); afterwards each must be gone,
looked at with a bounded poll (nothing signals this process when a grandchild exits). Closing the
client, the CLI's `mcpsync tools`, and a gateway killed outright (SIGKILL) are covered. Whatever a
failing test leaves behind is killed before it returns.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from wire import base_env, children_of, stat_fields

import mcpsync
from mcpsync.client import ClientSession, StdioConnection

pytestmark = pytest.mark.timeout(60)

REPO_ROOT = Path(__file__).resolve().parent.parent
LINGERING = Path(__file__).parent / "fixtures" / "lingering_upstream.py"
GONE_WITHIN = 10.0  # seconds for every recorded process to be gone; the fixture lingers 60 s
WRAPPER = 'node "$0" stdio; exit $?'  # sh runs node as its child, and waits for it
LINGERING_WRAPPER = '"$0" "$@"; exit $?'
Process = tuple[int, bytes]  # a pid and its start time (/proc/PID/stat field 22)


def identity(pid: int) -> Process | None:
    fields = stat_fields(pid)
    return (pid, fields[19]) if fields is not None and len(fields) > 19 else None


def alive(process: Process) -> bool:
    """Whether that very process still runs (a zombie has stopped running; a reused pid is
    another process)."""
    fields = stat_fields(process[0])
    return fields is not None and len(fields) > 19 and fields[19] == process[1] and fields[0] != b"Z"


def tree(root: int) -> set[Process]:
    """`root` and every descendant of it, now."""
    found: set[Process] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        process = identity(pid)
        if process is not None and process not in found:
            found.add(process)
            todo.extend(children_of(pid))
    return found


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return "?"


def poll(condition: Callable[[], Any], timeout: float, what: Callable[[], str]) -> Any:
    """The first true value of `condition()`, looked at every 10 ms until `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout} s: {what()}")
        time.sleep(0.01)  # /proc signals nothing: a bounded poll


def assert_all_gone(processes: set[Process], timeout: float = GONE_WITHIN) -> None:
    poll(
        lambda: not any(alive(p) for p in processes),
        timeout,
        lambda: "still running: " + "; ".join(f"{pid} {command_line(pid)!r}" for pid, _ in sorted(processes) if alive((pid, _))),
    )


def kill_all(processes: set[Process]) -> None:
    """What a failing test would leave behind."""
    for process in processes:
        if alive(process):
            try:
                os.kill(process[0], signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def survivors() -> Iterator[set[Process]]:
    """The processes a test records; any still alive at its end are killed."""
    recorded: set[Process] = set()
    yield recorded
    kill_all(recorded)


def recorded_pids(path: Path) -> set[Process]:
    """The fixture's processes and its child's, from the file it appends them to."""
    return {(int(pid), started.encode()) for pid, started in (line.split() for line in path.read_text().splitlines())}


UPSTREAMS: dict[str, Callable[[str, Path], tuple[str, str]]] = {
    # name: (entry of server-everything, pid file) -> (the --upstream command line, a tool it has)
    "node": lambda entry, _: (f"node {shlex.quote(entry)} stdio", "echo"),
    # a shell that stays beside its node (no exec of the last command), as npx's own `sh -c` does
    "sh -c wrapper": lambda entry, _: (f"sh -c {shlex.quote(WRAPPER)} {shlex.quote(entry)}", "echo"),
    # the real npx shape, offline from the pinned install: npm exec → sh → node
    "npm exec": lambda entry, _: (
        f"npm exec --prefix {shlex.quote(str(REPO_ROOT / '.peers-npm'))} --offline --no-update-notifier -- mcp-server-everything stdio",
        "echo",
    ),
    "lingering": lambda _, pids: (f"{shlex.quote(sys.executable)} {shlex.quote(str(LINGERING))} {shlex.quote(str(pids))}", "linger"),
    # the same behind a shell that stays: sh → python → python, one process group
    "lingering behind sh": lambda _, pids: (
        f"sh -c {shlex.quote(LINGERING_WRAPPER)} {shlex.quote(sys.executable)} {shlex.quote(str(LINGERING))} {shlex.quote(str(pids))}",
        "linger",
    ),
}


SHAPE_OF = {  # what each upstream runs as (patterns matched at the start of a command line), one process each
    "node": (r"node \S+/server-everything/dist/index\.js stdio$",),
    "sh -c wrapper": (r"sh -c node ", r"node \S+/server-everything/dist/index\.js stdio$"),
    "npm exec": (r"npm exec mcp-server-everything stdio$", r"sh -c 'mcp-server-everything' stdio$", r"node \S+/\.bin/mcp-server-everything stdio$"),
    "lingering": (r"\S+ \S+/lingering_upstream\.py ", r"\S+ -c import signal, time"),
}
GATEWAY_AND_WATCHDOG = (r"\S+ -m mcpsync serve --upstream ", r"\S+ -I -S \S+/mcpsync/_process_groups\.py watchdog ")


def gateway_argv(upstream: str) -> list[str]:
    return [sys.executable, "-m", "mcpsync", "serve", "--upstream", upstream]


def open_gateway(upstream: str, tool: str) -> ClientSession:
    client = mcpsync.connect(gateway_argv(upstream), env=base_env(), cwd=REPO_ROOT, stderr=subprocess.DEVNULL)
    try:
        names = [t["name"] for t in client.list_tools()]
        assert tool in names, f"the upstream's tools are not served: {names}"
    except BaseException:
        client.close()
        raise
    return client


def gateway_pid(client: ClientSession) -> int:
    pid = client._connection.pid
    assert pid is not None
    return int(pid)


@pytest.mark.parametrize("shape", ["node", "sh -c wrapper", "npm exec", "lingering"])
def test_closing_a_client_of_a_gateway_leaves_no_process_of_its_tree(
    shape: str, npm_entry: Callable[[str], str], tmp_path: Path, survivors: set[Process]
) -> None:
    upstream, tool = UPSTREAMS[shape](npm_entry("everything"), tmp_path / "pids")
    client = open_gateway(upstream, tool)
    try:
        survivors |= tree(gateway_pid(client))
        commands = sorted(command_line(pid) for pid, _ in survivors)
        for pattern in (*GATEWAY_AND_WATCHDOG, *SHAPE_OF[shape]):
            assert sum(bool(re.match(pattern, command)) for command in commands) == 1, f"{pattern!r} in {commands}"
    finally:
        client.close()
    assert_all_gone(survivors)


def test_mcpsync_tools_through_a_gateway_leaves_no_process_behind(bounded: Any, tmp_path: Path, survivors: set[Process]) -> None:
    pids = tmp_path / "pids"
    upstream, tool = UPSTREAMS["lingering"]("", pids)
    try:
        done = bounded([sys.executable, "-m", "mcpsync", "tools", "--", *gateway_argv(upstream)], 40.0, env=base_env(), cwd=REPO_ROOT)
        assert done.returncode == 0, done.stderr
        assert tool in done.stdout, done.stdout
    finally:
        survivors |= recorded_pids(pids) if pids.exists() else set()
    assert len(survivors) == 2, "the fixture and its child wrote their pids"
    assert_all_gone(survivors)


@pytest.mark.parametrize("shape", ["lingering", "lingering behind sh"])
def test_a_gateway_killed_outright_leaves_no_upstream_running(
    shape: str, npm_entry: Callable[[str], str], tmp_path: Path, survivors: set[Process]
) -> None:
    upstream, tool = UPSTREAMS[shape](npm_entry("everything"), tmp_path / "pids")
    client = open_gateway(upstream, tool)
    try:
        gateway = gateway_pid(client)
        survivors |= tree(gateway)
        upstreams = {p for p in survivors if p[0] != gateway}
        assert upstreams, "the gateway has started its upstream"
        os.kill(gateway, signal.SIGKILL)
        assert_all_gone(upstreams)
    finally:
        client.close()


def test_a_client_that_does_not_wait_for_the_gateway_still_leaves_nothing(tmp_path: Path, survivors: set[Process]) -> None:
    """A client whose close grace is shorter than the gateway's own stop: the gateway gets SIGTERM
    (and then SIGKILL) while it is stopping its upstream, which is stopped all the same."""
    upstream, tool = UPSTREAMS["lingering"]("", tmp_path / "pids")
    connection = StdioConnection(gateway_argv(upstream), env=base_env(), cwd=REPO_ROOT, stderr=subprocess.DEVNULL, close_grace=0.2)
    client = ClientSession(connection).open()
    try:
        assert tool in [t["name"] for t in client.list_tools()]
        survivors |= tree(gateway_pid(client))
        assert len(survivors) >= 3, [command_line(pid) for pid, _ in survivors]
    finally:
        client.close()
    assert_all_gone(survivors)
