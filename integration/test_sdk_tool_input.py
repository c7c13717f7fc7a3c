"""Bad tool arguments as a program built on the official MCP Python SDK client sees them.

``sdk_tool_input_driver.py`` (in the peers venv, a separate process) calls the demo's ``add`` with a
wrongly typed and a missing argument, and an unknown tool, against ``python -m mcpsync serve``, once
per client mode. Bad arguments must come back as a result with ``isError`` (the program can hand the
text to the model, which corrects its call) instead of an exception; an unknown tool still raises
-32602.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(120)

DRIVER = Path(__file__).with_name("sdk_tool_input_driver.py")
SERVER_CMD = [sys.executable, "-m", "mcpsync", "serve"]
DRIVER_TIMEOUT = 60.0  # the driver bounds itself at 30 s (+15 s watchdog); this is the backstop


@pytest.fixture(scope="module", params=["legacy", "modern", "pinned"])
def report(request: pytest.FixtureRequest, peers_python: str, bounded: Any, repo_root: Path) -> dict[str, Any]:
    args = [peers_python, str(DRIVER), "--mode", request.param, "--cwd", str(repo_root), "--", *SERVER_CMD]
    done = bounded(args, timeout=DRIVER_TIMEOUT, cwd=repo_root)
    assert done.returncode == 0, done.stderr[-8000:]
    return json.loads(done.stdout)


def test_a_wrongly_typed_argument_is_a_result_the_model_can_read(report: dict[str, Any]) -> None:
    assert report["wrongType"] == {"isError": True, "text": "Invalid arguments for tool 'add' at 'a': 'two' is not of type 'integer'"}


def test_a_missing_argument_is_a_result_naming_it(report: dict[str, Any]) -> None:
    assert report["missing"] == {"isError": True, "text": "Invalid arguments for tool 'add': 'b' is a required property"}


def test_an_unknown_tool_still_raises_invalid_params(report: dict[str, Any]) -> None:
    assert report["unknown"]["code"] == -32602, report["unknown"]
    assert "Unknown tool: no_such_tool" in report["unknown"]["raised"]
