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


def asking_service(answers: list[Any]) -> Service:
    service = Service("forms")

    @service.tool(task="required")
    def confirm(filename: str, ctx: Context) -> str:
        """Asks before it deletes."""
        answer = ctx.elicit(f"Delete {filename}?", {"type": "object", "properties": {"confirm": {"type": "boolean"}}})
        answers.append(answer)
        return f"deleted {filename}" if answer.get("content", {}).get("confirm") else "kept"

    return service


def test_an_answer_sent_to_the_other_replica_reaches_the_function_and_its_listens_hear_the_task(redis_url: str) -> None:
    """The question of a task running on A is answered by a tasks/update to B: B takes it out of the
    record at once and sends the answer over the bus to A, whose function goes on; a listen opened
    on B hears the task's changes made on A."""
    answers: list[Any] = []
    meta = {**META, "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {}}}
    replicas = [Replica(Server(name, services=[asking_service(answers)], bus=redis_url, tasks=TaskRunner(limits=TaskLimits(lease=LEASE))))
                for name in ("a", "b")]
    a, b = replicas
    try:
        frame = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                 "params": {"name": "confirm", "arguments": {"filename": "a.txt"}, "_meta": meta}}
        answer = _post(a.port, frame, "tools/call", "confirm")
        assert "result" in answer, answer
        created = answer["result"]
        task_id = created["taskId"]
        listen = http.client.HTTPConnection("127.0.0.1", b.port, timeout=LONG)
        listen.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen",
                                                    "params": {"notifications": {"taskIds": [task_id]}, "_meta": meta}}),
                       {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                        "MCP-Protocol-Version": VERSION, "Mcp-Method": "subscriptions/listen"})
        stream = SseStream(listen.getresponse())
        assert stream.message()[1]["params"]["notifications"] == {"taskIds": [task_id]}

        got = _poll(b, task_id, lambda task: task["status"] == "input_required")
        (key,) = got["inputRequests"]
        assert b.request("tasks/update", {"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}}},
                         name=task_id) == {"resultType": "complete", "_meta": b.request("server/discover", {})["_meta"]}
        assert "inputRequests" not in b.request("tasks/get", {"taskId": task_id}, name=task_id)

        done = _poll(a, task_id, lambda task: task["status"] == "completed")
        assert done["result"]["content"][0]["text"] == "deleted a.txt"
        assert answers == [{"action": "accept", "content": {"confirm": True}}]
        statuses = []
        while "completed" not in statuses:
            message = stream.message()[1]
            assert message["method"] == "notifications/tasks" and message["params"]["taskId"] == task_id
            statuses.append(message["params"]["status"])
        listen.close()
    finally:
        for replica in replicas:
            replica.server.close(LONG)


def _post(port: int, frame: dict[str, Any], method: str, name: str) -> dict[str, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=LONG)
    try:
        connection.request("POST", "/mcp", json.dumps(frame), {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                                                              "MCP-Protocol-Version": VERSION, "Mcp-Method": method, "Mcp-Name": name})
        message: dict[str, Any] = json.loads(connection.getresponse().read())
        return message
    finally:
        connection.close()


def _poll(replica: Replica, task_id: str, until: Any) -> dict[str, Any]:
    """tasks/get until `until(task)`, for at most LONG seconds (a condition with a deadline, not a sleep)."""
    stop = threading.Event()
    deadline = threading.Timer(LONG, stop.set)
    deadline.start()
    try:
        while not stop.is_set():
            task = replica.request("tasks/get", {"taskId": task_id}, name=task_id)
            if until(task):
                return task
            stop.wait(0.05)
    finally:
        deadline.cancel()
    raise AssertionError(f"task {task_id} never reached the state awaited: {task}")


def test_a_2025_tasks_question_is_carried_by_a_tasks_result_waiting_on_the_other_replica(redis_url: str) -> None:
    """2025-11-25: the task runs on A, its client's tasks/result reaches B (one shared session):
    B announces itself over the bus, A sends the question there, B asks on its own stream, the
    client answers (its POST landing on A), and the answer goes back to A's function; then B's
    tasks/result answers with the task's result."""
    answers: list[Any] = []
    replicas = [Replica(Server(name, services=[asking_service(answers)], bus=redis_url, tasks=TaskRunner(limits=TaskLimits(lease=LEASE))))
                for name in ("a", "b")]
    a, b = replicas
    try:
        session = _handshake(a.port)
        created = _legacy(a.port, session, 1, "tools/call", {"name": "confirm", "arguments": {"filename": "b.txt"}, "task": {}})
        task_id = created["result"]["task"]["taskId"]

        waiting = http.client.HTTPConnection("127.0.0.1", b.port, timeout=LONG)
        waiting.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": task_id}}),
                        _legacy_headers(session))
        stream = SseStream(waiting.getresponse())
        question = stream.message()[1]
        assert question["method"] == "elicitation/create" and "id" in question
        assert question["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
        posted = _legacy(a.port, session, None, None, {"confirm": True}, answering=question["id"])
        assert posted is None, "an answer is accepted with 202 and no body"
        final = stream.message()[1]
        while final.get("id") != 2:
            final = stream.message()[1]
        assert final["result"]["content"][0]["text"] == "deleted b.txt"
        assert answers == [{"action": "accept", "content": {"confirm": True}}]
        waiting.close()
    finally:
        for replica in replicas:
            replica.server.close(LONG)


def _legacy_headers(session: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return headers


def _handshake(port: int) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=LONG)
    try:
        params = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}}
        connection.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}),
                           _legacy_headers(None))
        response = connection.getresponse()
        session = response.getheader("Mcp-Session-Id")
        response.read()
        assert session is not None
    finally:
        connection.close()
    assert _legacy(port, session, None, "notifications/initialized", {}) is None
    return session


def _legacy(port: int, session: str, request_id: Any, method: str | None, params: dict[str, Any], *, answering: Any = None) -> Any:
    """One handshake-era POST: a request (its response), a notification, or the answer to the
    server's request `answering` (`params` its result): None for a 202."""
    if answering is not None:
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": answering, "result": {"action": "accept", "content": params}}
    elif request_id is None:
        frame = {"jsonrpc": "2.0", "method": method, "params": params}
    else:
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=LONG)
    try:
        connection.request("POST", "/mcp", json.dumps(frame), _legacy_headers(session))
        response = connection.getresponse()
        if response.status == 202:
            response.read()
            return None
        if response.getheader("Content-Type") == "text/event-stream":
            stream = SseStream(response)
            message = stream.message()[1]
            while message.get("id") != request_id:
                message = stream.message()[1]
            return message
        return json.loads(response.read())
    finally:
        connection.close()
