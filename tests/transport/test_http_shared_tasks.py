"""Tasks shared by replicas on a real Redis: two servers in one process, each given the Redis URL as
its bus (as `mcpsync serve --bus redis://...` gives it) and each on its own loopback HTTP port; the
client picks the replica of each request, as a load balancer without affinity would. The Redis is
the bus tests' (`tests/bus/redis_server.py`: Debian's binary on a free port).

A task created through one replica is its record in Redis: the other answers `tasks/get` and
`tasks/list` about it, and its `tasks/cancel` reaches the function running on the first, through
the record its keeper reads every third of the lease."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mcpsync import Context, Server, Service
from mcpsync.tasks import TaskLimits, TaskRunner
from mcpsync.tasks.record import TASKS_EXTENSION

from .._timeouts import LONG
from ..bus.redis_server import RedisServer
from ..sse_stream import SseStream

pytestmark = pytest.mark.timeout(60)

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
}
LEASE = 6.0
"""Seconds: the keeper reads its tasks' records every 2 s; a replica's lease outlives any stall of a
busy machine, so the task is never taken for lost."""


class Replica:
    """One server on a free loopback port, and plain 2026-07-28 requests to it."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.port = server.start_http("127.0.0.1", 0).port

    def request(self, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
        """The result of a request (answered in JSON or SSE); fails on an error."""
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": VERSION, "Mcp-Method": method}
        if name is not None:
            headers["Mcp-Name"] = name
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=LONG)
        try:
            frame = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
            connection.request("POST", "/mcp", json.dumps(frame), headers)
            response = connection.getresponse()
            if response.getheader("Content-Type") == "text/event-stream":
                stream = SseStream(response)
                message = stream.message()[1]
                while message.get("id") != 1:
                    message = stream.message()[1]
            else:
                message = json.loads(response.read())
        finally:
            connection.close()
        assert "result" in message, message
        result: dict[str, Any] = message["result"]
        return result


class Ran:
    """What the function running on a replica reports back to the test."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = threading.Event()


def service(ran: Ran) -> Service:
    service = Service("jobs")

    @service.tool(task="optional")
    def long_job(ctx: Context) -> str:
        """Works until cancelled."""
        ran.started.set()
        if ctx.wait_cancelled(LONG):
            ran.cancelled.set()
        return "over"

    return service


@pytest.fixture
def redis_url() -> Iterator[str]:
    with RedisServer() as server:
        yield server.url


def test_a_task_made_on_one_replica_is_read_and_cancelled_through_the_other(redis_url: str) -> None:
    ran = Ran()
    replicas = [Replica(Server(name, services=[service(ran)], bus=redis_url, tasks=TaskRunner(limits=TaskLimits(lease=LEASE))))
                for name in ("a", "b")]
    a, b = replicas
    try:
        created = a.request("tools/call", {"name": "long_job", "arguments": {}}, name="long_job")
        assert created["resultType"] == "task" and created["status"] == "working"
        task_id = created["taskId"]
        assert ran.started.wait(LONG)

        got = b.request("tasks/get", {"taskId": task_id}, name=task_id)
        assert (got["resultType"], got["taskId"], got["status"]) == ("complete", task_id, "working")
        assert got["createdAt"] == created["createdAt"] and got["ttlMs"] == created["ttlMs"]

        assert b.request("tasks/cancel", {"taskId": task_id}, name=task_id)["resultType"] == "complete"
        assert ran.cancelled.wait(LONG), "the function running on the other replica never saw the cancel"
        for replica in replicas:
            assert replica.request("tasks/get", {"taskId": task_id}, name=task_id)["status"] == "cancelled"
    finally:
        for replica in replicas:
            replica.server.close(LONG)
