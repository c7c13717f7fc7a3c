"""On an HTTP endpoint without `Auth`, a 2025-11-25 task is its handshake session's: nobody else's
session may read, list or cancel it, as no token says who is calling (the TypeScript SDK binds its
tasks to the session too). Real sessions of mcpsync's client over a real loopback port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import mcpsync
from mcpsync import Context, McpError, Server, Service

from .._timeouts import LONG

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def url() -> Iterator[str]:
    service = Service("jobs")

    @service.tool(task="optional")
    def job(ctx: Context) -> str:
        """Waits until cancelled."""
        ctx.wait_cancelled(LONG)
        return "over"

    server = Server(services=[service])
    serving = server.start_http("127.0.0.1", 0)
    try:
        yield serving.url
    finally:
        server.close(LONG)


def test_another_session_of_an_open_endpoint_cannot_see_a_sessions_task(url: str) -> None:
    with mcpsync.connect(url, mode="legacy") as mine, mcpsync.connect(url, mode="legacy") as theirs:
        task_id = mine.request("tools/call", {"name": "job", "arguments": {}, "task": {}})["task"]["taskId"]
        assert mine.request("tasks/get", {"taskId": task_id})["status"] == "working"
        assert [task["taskId"] for task in mine.request("tasks/list", {})["tasks"]] == [task_id]

        assert theirs.request("tasks/list", {})["tasks"] == []
        for method in ("tasks/get", "tasks/cancel"):
            with pytest.raises(McpError) as refused:
                theirs.request(method, {"taskId": task_id})
            assert (refused.value.code, refused.value.message) == (-32602, "Failed to retrieve task: Task not found")

        assert mine.request("tasks/cancel", {"taskId": task_id})["status"] == "cancelled"
