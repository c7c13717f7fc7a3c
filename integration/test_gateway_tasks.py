"""The gateway relays the tasks of an upstream nobody here wrote: the official TypeScript SDK's task
server (`ts_tasks_server.mjs`: its experimental `registerToolTask` on an `InMemoryTaskStore`,
2025-11-25), started by the gateway as a stdio child. A downstream client of either era calls its
task tool as a task of the gateway's, which runs the SDK's task and waits for it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import mcpsync
from mcpsync import Server

pytestmark = pytest.mark.timeout(120)

TS_SERVER = Path(__file__).with_name("ts_tasks_server.mjs")
LONG = 20.0 if os.environ.get("CI") else 10.0


@pytest.fixture(scope="module")
def sdk_dir(node: str, npm_entry: Callable[[str], str], repo_root: Path) -> Path:
    npm_entry("everything")  # scripts/peers-npm installs the pinned SDK with the servers
    return repo_root / ".peers-npm" / "node_modules" / "@modelcontextprotocol" / "sdk"


@pytest.mark.parametrize("down_mode", ["legacy", "modern"])
def test_the_gateway_runs_the_typescript_sdks_task_for_a_client_of_either_era(node: str, sdk_dir: Path, down_mode: str) -> None:
    gateway = Server("gateway")
    gateway.add_remote("sdk", [node, str(TS_SERVER), str(sdk_dir), "stdio"], mode="legacy")
    try:
        with mcpsync.connect(gateway, mode=down_mode) as session:
            listed = {tool["name"]: tool.get("execution") for tool in session.list_tools()}
            assert listed["slow_compute"] == {"taskSupport": "optional"}
            assert listed["confirm_delete"] == {"taskSupport": "required"}, "a required task tool is no longer hidden"

            task = session.call_tool("slow_compute", {"seconds": 0.2}, task=True)
            assert task.task_id is not None
            assert task.wait(timeout=LONG).status == "completed"
            assert task.result(timeout=LONG)["content"] == [{"type": "text", "text": "done after 0.2s"}]

            assert not session.call_tool("greet", {"name": "gateway"}).get("isError")
    finally:
        gateway.close(LONG)


def test_cancelling_through_the_gateway_cancels_the_sdks_task(node: str, sdk_dir: Path) -> None:
    gateway = Server("gateway")
    gateway.add_remote("sdk", [node, str(TS_SERVER), str(sdk_dir), "stdio"], mode="legacy")
    try:
        with mcpsync.connect(gateway, mode="modern") as session:
            task = session.call_tool("slow_compute", {"seconds": 60}, task=True)
            upstream_session = gateway.catalog.remotes[0]._session  # the gateway's own session with the SDK
            deadline = time.monotonic() + LONG
            while not upstream_session.request("tasks/list", {})["tasks"]:  # the gateway's task has made the SDK's
                assert time.monotonic() < deadline, "the SDK never got a task"
            task.cancel()
            assert task.wait(timeout=LONG).status == "cancelled"
            while True:  # the SDK's task is cancelled too: tasks/cancel reached it
                statuses = [sdk_task["status"] for sdk_task in upstream_session.request("tasks/list", {})["tasks"]]
                if statuses == ["cancelled"]:
                    break
                assert time.monotonic() < deadline, f"the SDK's task is {statuses}"
    finally:
        gateway.close(LONG)


@pytest.mark.parametrize("down_mode", ["legacy", "modern"])
def test_the_sdks_task_question_reaches_the_gateways_client(node: str, sdk_dir: Path, down_mode: str) -> None:
    """The SDK's `confirm_delete` task asks (its queued elicitation, carried by the gateway's
    tasks/result with related-task _meta); the gateway asks its own client through its task, and
    the answer goes back up to the SDK's task."""
    asked: list[dict[str, object]] = []

    def elicitation(params: dict[str, object]) -> dict[str, object]:
        asked.append(params)
        return {"action": "accept", "content": {"confirm": True}}

    gateway = Server("gateway")
    gateway.add_remote("sdk", [node, str(TS_SERVER), str(sdk_dir), "stdio"], mode="legacy")
    try:
        with mcpsync.connect(gateway, mode=down_mode, elicitation=elicitation) as session:
            task = session.call_tool("confirm_delete", {"filename": "old.log"}, task=True)
            assert task.result(timeout=LONG)["content"] == [{"type": "text", "text": "Deleted old.log"}]
            assert len(asked) == 1 and "old.log" in str(asked[0]["message"])
    finally:
        gateway.close(LONG)
