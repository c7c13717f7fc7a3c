"""The official TypeScript SDK client with hundreds of calls in flight at once over stdio
(`ts_pipeline_driver.mjs`, one `Promise.all`), against `mcpsync serve` on the demo: the load the
stdio reader answers itself and corks a few answers to a write for, from a client nobody here wrote.

Every call gets its own answer (the SDK matches them by id, so a crossed answer is a wrong text),
the quick ones all before a slow call read with them, the slow call's progress reaches the SDK's
callback in order, a call cancelled through its AbortSignal rejects, the listing answers among them,
and the connection serves a call after it all.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from wire import REPO_ROOT, base_env

pytestmark = pytest.mark.timeout(120)

DRIVER = Path(__file__).with_name("ts_pipeline_driver.mjs")
CALLS = 500
PROCESS_LIMIT_S = 90  # the driver's own watchdog is 60 s


@pytest.fixture(scope="module")
def sdk_dir(node: str, npm_entry: Callable[[str], str]) -> Path:
    npm_entry("everything")  # scripts/peers-npm installs the pinned SDK with the servers
    return REPO_ROOT / ".peers-npm" / "node_modules" / "@modelcontextprotocol" / "sdk"


def test_hundreds_of_calls_in_flight_each_get_their_own_answer(bounded: Any, node: str, sdk_dir: Path) -> None:
    done = bounded([node, str(DRIVER), str(sdk_dir), str(CALLS), "--", sys.executable, "-m", "mcpsync", "serve"],
                   timeout=PROCESS_LIMIT_S, env=base_env(), cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)

    assert report["echoWrong"] == []
    assert sorted(report["echoed"]) == sorted(f"call {i} {'x' * (i % 97)}" for i in range(CALLS))
    assert report["sums"] == {"ok": CALLS // 10, "wrong": 0}
    assert report["quickBeforeSlow"] is True, "a quick answer waited for the slow call read with it"
    assert report["countdown"] == "counted down 3 steps"
    assert report["progress"][:2] == [[1, 3], [2, 3]] and report["progress"] in ([[1, 3], [2, 3]], [[1, 3], [2, 3], [3, 3]])
    assert report["cancelled"] == "MCP error -32001: enough", report["cancelled"]
    assert report["tools"] == ["add", "countdown", "echo", "fail", "word_stats"]
    assert report["after"] == "after"
