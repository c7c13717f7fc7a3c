"""What the `mcpsync serve` child tests of this folder share: its environment and a first frame."""

from __future__ import annotations

import json
import os
from pathlib import Path

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
