"""What the `mcpsync serve` child tests of this folder share: its environment and a first frame."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .._timeouts import LONG

REPO_ROOT = Path(__file__).resolve().parents[2]


def serve_env() -> dict[str, str]:
    """This environment, with the repo root importable (the child runs `python -m mcpsync`)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def initialize_line(client_name: str) -> bytes:
    """A handshake-era `initialize` (id 1) as one wire line."""
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": client_name, "version": "0"}}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode() + b"\n"


def serve_initialize_on_a_pipe(*args: str, python: tuple[str, ...] = (), cwd: Path | None = None) -> tuple[int, bytes, bytes]:
    """Run `python [PYTHON] -m mcpsync serve ARGS` on pipes, send it one `initialize` and end its
    input; answer its exit status, stdout and stderr. A child still running after LONG is killed."""
    proc = subprocess.Popen(
        [sys.executable, *python, "-m", "mcpsync", "serve", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=serve_env(),
        cwd=cwd,
    )
    try:
        out, err = proc.communicate(initialize_line("pipe"), timeout=LONG)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=LONG)
    return proc.returncode, out, err
