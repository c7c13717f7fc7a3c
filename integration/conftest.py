"""Shared fixtures for the integration tests: bounded subprocesses and the peers venv.

The integration tests judge mcpsync with independent peers (the official MCP Python SDK) that live
in their own virtualenv, ``.venv-peers``, built by ``scripts/peers-venv``. Nothing here skips: a
missing peer is a broken test setup and must fail loudly, or CI would go green without testing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# Below the tests' 120 s pytest-timeout, so a slow build fails with its own output rather than a
# bare timeout. scripts/test builds the venv before pytest starts, so here it is normally ~1 s.
PEERS_VENV_TIMEOUT = 100.0
# The same for scripts/peers-npm; its own npm timeout is below that, so it cleans up after itself
# before the fixture gives up.
PEERS_NPM_TIMEOUT = 100.0
NPM_INSTALL_TIMEOUT = 90
THREAD_JOIN_TIMEOUT = 20.0  # how long a test's threads get to stop once it ended


@dataclass(frozen=True)
class Completed:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def run_bounded(args: list[str], timeout: float, **kwargs) -> Completed:
    """Run ``args`` to completion in a new process group; on timeout kill the whole group and fail.

    ``subprocess.run(timeout=...)`` kills only the direct child, which would leave a grandchild
    (pip under a bash script, a server under a client) holding the pipes open.
    """
    proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException as exc:
        _kill_group(proc.pid)
        try:
            # A process outside the group (say a server the SDK started in its own session) may
            # still hold a pipe; do not wait on it forever.
            stdout, stderr = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = "<unavailable: pipe still held open>", "<unavailable: pipe still held open>"
        if not isinstance(exc, subprocess.TimeoutExpired):
            raise
        pytest.fail(
            f"timed out after {timeout}s and was killed: {args}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
            pytrace=False,
        )
    return Completed(list(args), proc.returncode, stdout, stderr)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def bounded():
    """The ``run_bounded`` helper, as a fixture (test modules cannot import a conftest reliably)."""
    return run_bounded


@pytest.fixture(scope="session")
def peers_python() -> str:
    """Path of the python in ``.venv-peers`` (the official MCP SDK installed), built if needed."""
    result = run_bounded([str(REPO_ROOT / "scripts" / "peers-venv")], timeout=PEERS_VENV_TIMEOUT, cwd=REPO_ROOT)
    if result.returncode != 0:
        pytest.fail(
            f"scripts/peers-venv failed with exit status {result.returncode}\n{result.stderr}", pytrace=False
        )
    lines = result.stdout.strip().splitlines()
    python = lines[-1] if lines else ""
    if not (python and os.access(python, os.X_OK)):
        pytest.fail(f"scripts/peers-venv printed no usable python path: {result.stdout!r}", pytrace=False)
    return python


@pytest.fixture(scope="session")
def node() -> str:
    """The node on the PATH, which the npm peers run on."""
    found = shutil.which("node")
    if found is None:
        pytest.fail("node is not on the PATH; the npm peers need Node.js >= 18 (Debian: apt-get install nodejs npm)",
                    pytrace=False)
    return found


@pytest.fixture(scope="session")
def npm_entry() -> Callable[[str], str]:
    """``npm_entry("filesystem")``: the entry script of that pinned npm server (``scripts/peers-npm``
    installs them once; "everything", "filesystem" or "memory")."""
    env = {**os.environ, "PEERS_NPM_TIMEOUT": str(NPM_INSTALL_TIMEOUT)}

    def entry(server: str) -> str:
        result = run_bounded([str(REPO_ROOT / "scripts" / "peers-npm"), server], timeout=PEERS_NPM_TIMEOUT, cwd=REPO_ROOT, env=env)
        if result.returncode != 0:
            pytest.fail(f"scripts/peers-npm {server} failed with exit status {result.returncode}\n{result.stderr}", pytrace=False)
        lines = result.stdout.strip().splitlines()
        path = lines[-1] if lines else ""
        if not (path and Path(path).is_file()):
            pytest.fail(f"scripts/peers-npm {server} printed no usable entry path: {result.stdout!r}\n{result.stderr}",
                        pytrace=False)
        return path

    return entry


@pytest.fixture(autouse=True)
def no_leaked_mcpsync_threads() -> Iterator[None]:
    """The guard of tests/conftest.py, for mcpsync's own threads (all named ``mcpsync-...``): an
    in-process client, server or gateway a test started must have stopped every thread it owns
    when the test ends, and no thread may die with an exception. The harness's own threads (the
    readers of ``wire.ServerProcess``) belong to fixtures that may outlive a test, so they are not
    counted here; those fixtures stop them."""
    before = set(threading.enumerate())
    failures: list[str] = []
    previous_hook = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        failures.append(f"{args.thread.name if args.thread else '?'}: {args.exc_type.__name__}: {args.exc_value}")
        previous_hook(args)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous_hook
    started = [t for t in threading.enumerate() if t not in before and t.name.startswith("mcpsync")]
    for thread in started:
        thread.join(THREAD_JOIN_TIMEOUT)
    survivors = [t.name for t in started if t.is_alive()]
    assert not survivors, f"mcpsync threads left running: {survivors}"
    assert not failures, f"threads died with exceptions: {failures}"
