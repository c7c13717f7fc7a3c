"""Issue 26's multi-replica proof for tasks: a task is one task whichever replica is asked about it.

The deployment is integration/test_session_replicas.py's, all real processes on loopback: one
redis-server (tests/bus/redis_server.py, Debian's binary, no persistence), TWO `python -m mcpsync
serve --http 127.0.0.1:0 --processes 2 --bus redis://... integration/fixtures/replica_tasks_app.py`
instances (gunicorn masters of two workers each, every worker a task runner whose records live in
Redis, with a lease of LEASE seconds), and one nginx in front (integration/fixtures/nginx.py:
round-robin, no affinity, one nginx worker, so consecutive requests alternate between the
instances). Each test builds its own (two of them kill an instance or restart Redis).

The client is raw 2026-07-28 HTTP (the official Python SDK has no tasks): every request declares the
tasks extension and form elicitation in its `_meta`, and names its tool or task in `Mcp-Name`.

Which instance got a request: nginx adds `X-Upstream: $upstream_addr` to each response, and
`Front.on(instance, ...)` steers a request there through the balancer (a `tools/list` first when the
round robin would send it to the other one), then checks that header. Which process runs a task: the
task functions say their pid (in the question, the status message, the result or the report file).

Nothing sleeps to synchronise: processes are waited for by what they print, stream reads have socket
timeouts (LONG), and conditions are polled with deadlines.
"""

from __future__ import annotations

import http.client
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from fixtures.instances import Balancer, Instance, deployed

from mcpsync.bus.store import RETRY_AFTER
from mcpsync.tasks.record import TASKS_EXTENSION
from tests._timeouts import LONG
from tests.bus.redis_server import RedisServer
from tests.sse_stream import SseStream

pytestmark = pytest.mark.timeout(120)

APP = Path(__file__).parent / "fixtures" / "replica_tasks_app.py"
VERSION = "2026-07-28"
LEASE = 4.0
"""Seconds of a task's lease (the app's REPLICA_TASKS_LEASE): its keeper renews it every third, so
a live task is taken for lost only if its worker stalls for two thirds of it."""
MARGIN = 0.5
"""Seconds past a killed task's lease after which no tasks/get may still say it works. The kill is
timed once every process of the instance has exited (its stderr closed), and the servers' clock is
this machine's, so this covers only the clock's granularity."""
POLL = 0.1
"""Seconds between two polls (the tasks' own pollIntervalMs)."""
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "task-replicas-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {"form": {}}},
}
NAMED = {"tools/call": "name", "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}

T = TypeVar("T")


# -- raw 2026-07-28 HTTP ----------------------------------------------------------------------------

@dataclass
class Answer:
    """One request's answer: the HTTP status, the JSON-RPC response, and who answered."""

    status: int
    message: dict[str, Any]
    upstream: str | None
    retry_after: str | None = None
    sent_at: float = field(default=0.0)
    """time.time() just before the request was sent."""

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.message, (self.status, self.message, self.upstream)
        result: dict[str, Any] = self.message["result"]
        return result

    @property
    def error(self) -> dict[str, Any]:
        assert "error" in self.message, (self.status, self.message, self.upstream)
        error: dict[str, Any] = self.message["error"]
        return error


def _frame(method: str, params: dict[str, Any], request_id: int | str = 1) -> tuple[bytes, dict[str, str]]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": VERSION, "Mcp-Method": method}
    if method in NAMED:
        headers["Mcp-Name"] = str(params[NAMED[method]])
    frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": META}}
    return json.dumps(frame).encode(), headers


def send(port: int, method: str, params: dict[str, Any]) -> Answer:
    """One request on a new connection to `port` (the balancer's or an instance's), its whole answer."""
    body, headers = _frame(method, params)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=LONG)
    try:
        sent_at = time.time()
        connection.request("POST", "/mcp", body, headers)
        response = connection.getresponse()
        upstream, retry_after = response.getheader("X-Upstream"), response.getheader("Retry-After")
        if response.getheader("Content-Type") == "text/event-stream":
            stream = SseStream(response)
            while True:
                message = stream.message()[1]
                if "id" in message and "method" not in message:
                    return Answer(response.status, message, upstream, retry_after, sent_at)
        raw = response.read()
        try:
            message = json.loads(raw)
        except ValueError:
            pytest.fail(f"{method}: HTTP {response.status} with no JSON-RPC answer: {raw[:2000]!r}", pytrace=False)
        return Answer(response.status, message, upstream, retry_after, sent_at)
    finally:
        connection.close()


class Front:
    """Requests through the balancer. nginx's one worker alternates strictly between the two
    instances, so `on(instance, ...)` knows where a request goes: when the last one went there,
    a `tools/list` goes to the other first; the answer's X-Upstream then proves where it went."""

    def __init__(self, balancer: Balancer) -> None:
        self.port = balancer.port
        self.last: str | None = None

    def request(self, method: str, params: dict[str, Any]) -> Answer:
        answer = send(self.port, method, params)
        self.last = answer.upstream
        return answer

    def on(self, instance: Instance, method: str, params: dict[str, Any]) -> Answer:
        if self.last is None or self.last == instance.address:
            filler = self.request("tools/list", {})
            assert filler.status == 200 and filler.upstream != instance.address, (filler, instance.address)
        answer = self.request(method, params)
        assert answer.upstream == instance.address, f"{method} went to {answer.upstream}, not {instance.address}"
        return answer

    def listen(self, instance: Instance, task_ids: list[str]) -> tuple[SseStream, http.client.HTTPConnection]:
        """A subscriptions/listen for `task_ids`, held by `instance`: the stream past its acknowledgement."""
        if self.last is None or self.last == instance.address:
            self.request("tools/list", {})
        body, headers = _frame("subscriptions/listen", {"notifications": {"taskIds": task_ids}}, "listen")
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=LONG)
        connection.request("POST", "/mcp", body, headers)
        response = connection.getresponse()
        self.last = response.getheader("X-Upstream")
        assert self.last == instance.address, (self.last, instance.address)
        stream = SseStream(response)
        ack = stream.message()[1]
        assert ack["method"] == "notifications/subscriptions/acknowledged", ack
        assert ack["params"]["notifications"] == {"taskIds": task_ids}, ack
        return stream, connection


class Deployment:
    def __init__(self, redis: RedisServer, instances: list[Instance], balancer: Balancer, state: Path) -> None:
        self.redis = redis
        self.instances = instances
        self.balancer = balancer
        self.state = state
        self.front = Front(balancer)

    def instance_at(self, upstream: str | None) -> Instance:
        found = [instance for instance in self.instances if instance.address == upstream]
        assert found, f"no instance at {upstream!r}:\n{self.balancer.access_log()}"
        return found[0]

    def other(self, instance: Instance) -> Instance:
        (other,) = [each for each in self.instances if each is not instance]
        return other

    def create(self, tool: str, arguments: dict[str, Any]) -> tuple[str, Instance]:
        """A task of `tool` made through the balancer: its id and the instance that made it."""
        created = self.front.request("tools/call", {"name": tool, "arguments": arguments})
        assert created.status == 200, created
        assert created.result["resultType"] == "task" and created.result["status"] == "working", created
        return created.result["taskId"], self.instance_at(created.upstream)


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    with deployed(APP, {"REPLICA_TASKS_STATE": str(tmp_path), "REPLICA_TASKS_LEASE": str(LEASE)}) as (redis, instances, balancer):
        yield Deployment(redis, instances, balancer, tmp_path)


def until(what: str, check: Callable[[], T | None], within: float = LONG) -> T:
    """Poll `check()` every POLL seconds until it returns something true, for at most `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"not within {within} s: {what}", pytrace=False)
        time.sleep(POLL)


def status_on(front: Front, instance: Instance, task_id: str, wanted: str) -> Callable[[], dict[str, Any] | None]:
    """A poll: tasks/get through the balancer onto `instance`, the task once its status is `wanted`."""

    def check() -> dict[str, Any] | None:
        got = front.on(instance, "tasks/get", {"taskId": task_id})
        assert got.status == 200 and got.result["taskId"] == task_id, got
        return got.result if got.result["status"] == wanted else None

    return check


def held_by(front: Front, instance: Instance, task_id: str) -> int:
    """The pid a `hold` task says it runs in (its status message), read through `instance`."""
    def check() -> int | None:
        got = front.on(instance, "tasks/get", {"taskId": task_id}).result
        assert got["status"] == "working", got
        found = re.fullmatch(r"held by pid (\d+)", got.get("statusMessage") or "")
        return int(found.group(1)) if found else None

    return until(f"the task {task_id} reports its pid", check)


# -- 1: made on one instance, polled, answered and read through the other -------------------------

def test_a_task_made_on_one_instance_is_polled_answered_and_read_through_the_other(deployment: Deployment) -> None:
    """`confirm` is created through the balancer on A and runs in one of A's workers (its question
    names the pid); every later request is steered through the balancer to B: the question shows
    in tasks/get, the tasks/update with its answer reaches the function on A (over the bus), and
    tasks/get inlines the result; a listen held by B (opened after the creation, so it may miss the
    question) hears the task's changes made on A, to its completion."""
    front = deployment.front
    task_id, maker = deployment.create("confirm", {"filename": "report.txt"})
    other = deployment.other(maker)
    stream, connection = front.listen(other, [task_id])

    asked = until("the question, through the other instance", status_on(front, other, task_id, "input_required"))
    assert set(asked["inputRequests"]) == {"confirm"}, asked
    question = asked["inputRequests"]["confirm"]
    assert question["method"] == "elicitation/create", question
    found = re.fullmatch(r"Delete report\.txt\? \(asked by pid (\d+)\)", question["params"]["message"])
    assert found is not None, question
    runner = int(found.group(1))
    assert runner in maker.pids, (runner, maker.pids)  # the task runs where it was made

    updated = front.on(other, "tasks/update", {"taskId": task_id, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}}})
    assert updated.status == 200 and updated.result["resultType"] == "complete", updated
    after = front.on(other, "tasks/get", {"taskId": task_id})
    assert "inputRequests" not in after.result, after  # answered: out of the record at once

    done = until("the result, through the other instance", status_on(front, other, task_id, "completed"))
    assert json.loads(done["result"]["content"][0]["text"]) == {"filename": "report.txt", "confirmed": True, "pid": runner}, done
    made_there = front.on(maker, "tasks/get", {"taskId": task_id})
    assert made_there.result["status"] == "completed" and made_there.result["result"] == done["result"], made_there

    statuses = []
    while "completed" not in statuses:  # each read bounded by LONG
        message = stream.message()[1]
        assert message["method"] == "notifications/tasks" and message["params"]["taskId"] == task_id, message
        statuses.append(message["params"]["status"])
    assert set(statuses) <= {"input_required", "working", "completed"}, statuses  # completed: made on A, heard on B
    connection.close()


# -- 2: cancelled through the other instance ---------------------------------------------------------

def test_a_task_cancelled_through_the_other_instance_stops_its_function_and_is_cancelled_everywhere(deployment: Deployment) -> None:
    """`hold` runs on A; tasks/cancel through the balancer to B: the function on A sees the cancel
    (its report file, holding its pid), and tasks/get through either instance says cancelled."""
    front = deployment.front
    task_id, maker = deployment.create("hold", {"tag": "cancel-me"})
    other = deployment.other(maker)
    runner = held_by(front, other, task_id)
    assert runner in maker.pids, (runner, maker.pids)

    cancelled = front.on(other, "tasks/cancel", {"taskId": task_id})
    assert cancelled.status == 200 and cancelled.result["resultType"] == "complete", cancelled
    report = deployment.state / "cancel-me.cancelled"
    until("the function on the maker sees the cancel", report.exists)
    assert int(report.read_text()) == runner

    for instance in deployment.instances:  # the balancer's alternation, and each instance directly
        got = front.on(instance, "tasks/get", {"taskId": task_id})
        assert got.result["status"] == "cancelled", got
        direct = send(instance.port, "tasks/get", {"taskId": task_id})
        assert direct.result["status"] == "cancelled", direct


# -- 3: the instance running a task is killed ---------------------------------------------------------

def test_a_task_whose_instance_is_killed_is_failed_by_the_survivor_within_its_lease(deployment: Deployment) -> None:
    """`hold` runs on A, whose keeper renews its lease: B reads it working for one and a half
    leases. Then A's whole process group is SIGKILLed; every tasks/get sent to B later than the
    kill plus the lease (plus MARGIN) says failed, and none before says anything but working."""
    front = deployment.front
    task_id, maker = deployment.create("hold", {"tag": "killed"})
    survivor = deployment.other(maker)
    assert held_by(front, survivor, task_id) in maker.pids

    renewed = time.monotonic() + 1.5 * LEASE  # a window past one lease: the keeper renews it
    while time.monotonic() < renewed:
        got = front.on(survivor, "tasks/get", {"taskId": task_id})
        assert got.result["status"] == "working", got
        time.sleep(POLL)

    maker.kill()
    killed_at = time.time()
    answers: list[Answer] = []

    def failed() -> bool:
        answers.append(send(survivor.port, "tasks/get", {"taskId": task_id}))
        return bool(answers[-1].result["status"] == "failed")

    until("the survivor marks the task failed", failed, within=LEASE + LONG)
    for answer in answers:
        status = answer.result["status"]
        assert status in ("working", "failed"), answer
        if answer.sent_at > killed_at + LEASE + MARGIN:
            assert status == "failed", (answer.sent_at - killed_at, answer)
    lost = answers[-1].result
    assert lost["error"]["code"] == -32603 and "stopped before it finished" in lost["error"]["message"], lost
    again = front.request("tasks/get", {"taskId": task_id})  # through the balancer: the survivor
    assert again.result["status"] == "failed" and again.result["error"] == lost["error"], again


# -- 4: Redis restarted -------------------------------------------------------------------------------

def test_a_redis_restart_refuses_task_requests_meanwhile_and_loses_its_tasks(deployment: Deployment) -> None:
    """During the outage, tasks/get, tasks/cancel, a listen for the task and a task's creation are
    refused on both instances as the store's outages are for sessions: 503 with Retry-After, -32603 naming the task store, no
    traceback logged. redis-server here keeps nothing on disk, so the task made before is gone
    after the restart: tasks/get is -32602 (400) on both instances, and its function, which its
    keeper finds without a record, is stopped (it reports the cancel). A new task works."""
    front = deployment.front
    task_id, maker = deployment.create("hold", {"tag": "lost"})
    runner = held_by(front, deployment.other(maker), task_id)

    deployment.redis.stop()
    asked: dict[str, dict[str, Any]] = {
        "tasks/get": {"taskId": task_id},
        "tasks/cancel": {"taskId": task_id},
        "subscriptions/listen": {"notifications": {"taskIds": [task_id]}},
        "tools/call": {"name": "quick", "arguments": {}},
    }
    refused: dict[str, set[str | None]] = {method: set() for method in asked}
    for method, params in asked.items():
        for instance in deployment.instances:
            answer = front.on(instance, method, params)
            assert answer.status == 503 and answer.retry_after == str(RETRY_AFTER), (method, answer)
            assert answer.error["code"] == -32603 and "task store" in answer.error["message"], (method, answer)
            refused[method].add(answer.upstream)
    assert all(where == {instance.address for instance in deployment.instances} for where in refused.values()), refused

    deployment.redis.start()  # same port, empty
    for instance in deployment.instances:
        gone = front.on(instance, "tasks/get", {"taskId": task_id})
        assert gone.status == 400 and gone.error["code"] == -32602, gone
    report = deployment.state / "lost.cancelled"
    until("the function of the lost task is stopped", report.exists, within=LEASE + LONG)
    assert int(report.read_text()) == runner

    fresh, made_on = deployment.create("quick", {})
    done = until("a new task completes", status_on(front, deployment.other(made_on), fresh, "completed"))
    assert int(done["result"]["content"][0]["text"]) in made_on.pids
