"""An upstream's tasks through the gateway: a tool whose upstream listing says it takes tasks runs
as a task of the gateway's own, in the downstream's form, whose function calls the upstream tool as
an upstream task and waits for it. Every pairing of eras, over real connections: the upstream is a
`Server` of this process on a loopback HTTP port (so the test sees its functions run and stop), the
gateway another, and the client mcpsync's over a pair of pipes (`connect(server)`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

import mcpsync
from mcpsync import Context, ErrorCode, McpError, Server, Service
from mcpsync.client.tasks import TaskCancelled

from .._timeouts import LONG

pytestmark = pytest.mark.timeout(60)

ERAS = ("legacy", "modern")


class Upstream:
    """A server whose task tools tell the test when they run and when they see a cancel."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = threading.Event()
        self.release = threading.Event()
        service = Service("jobs")

        @service.tool(task="optional")
        def report(month: str, ctx: Context) -> str:
            """Three steps, each a status message."""
            for number, step in enumerate(("north", "south", "east"), 1):
                ctx.progress(number, 3, f"{step} done")
            return f"report for {month}"

        @service.tool(task="required")
        def long_job(ctx: Context) -> str:
            """Runs until released or cancelled."""
            self.started.set()
            ctx.progress(1, message="waiting")
            while not self.release.is_set():
                if ctx.wait_cancelled(0.05):
                    self.cancelled.set()
                    return "cancelled"
            return "released"

        @service.tool(task="optional")
        def broken(ctx: Context) -> str:
            """Fails with a protocol error of its own."""
            raise McpError(ErrorCode.INVALID_PARAMS, "no such month", {"month": "13"})

        @service.tool(task="required")
        def confirm(ctx: Context) -> str:
            """Asks the user first."""
            answer = ctx.elicit("Go on?", {"type": "object", "properties": {"yes": {"type": "boolean"}}})
            return f"answered {answer['action']}"

        @service.tool
        def plain() -> str:
            """No tasks here."""
            return "plain"

        self.server = Server("upstream", services=[service])
        self.url = self.server.start_http("127.0.0.1", 0).url


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    up = Upstream()
    try:
        yield up
    finally:
        up.release.set()
        up.server.close(LONG)


def gateway(upstream: Upstream, mode: str) -> Server:
    server = Server("gateway")
    server.add_remote("up", upstream.url, mode=mode)
    return server


@pytest.mark.parametrize("up_mode", ERAS)
@pytest.mark.parametrize("down_mode", ERAS)
def test_an_upstream_task_is_relayed_in_the_downstreams_form(upstream: Upstream, up_mode: str, down_mode: str) -> None:
    server = gateway(upstream, up_mode)
    try:
        with mcpsync.connect(server, mode=down_mode) as session:
            listed = {tool["name"]: tool.get("execution") for tool in session.list_tools()}
            assert listed == {"report": {"taskSupport": "optional"}, "long_job": {"taskSupport": "required"},
                              "broken": {"taskSupport": "optional"}, "confirm": {"taskSupport": "required"}, "plain": None}

            task = session.call_tool("report", {"month": "2026-11"}, task=True)
            assert task.task_id is not None and task.status == "working"
            final = task.wait(timeout=LONG)
            assert (final.status, final.message) == ("completed", "east done"), "the upstream's last message is the gateway task's"
            assert task.result(timeout=LONG)["content"][0]["text"] == "report for 2026-11"

            assert session.call_tool("plain", {})["content"][0]["text"] == "plain"
    finally:
        server.close(LONG)


@pytest.mark.parametrize("up_mode", ERAS)
@pytest.mark.parametrize("down_mode", ERAS)
def test_cancelling_the_gateways_task_cancels_the_upstreams(upstream: Upstream, up_mode: str, down_mode: str) -> None:
    server = gateway(upstream, up_mode)
    try:
        with mcpsync.connect(server, mode=down_mode) as session:
            task = session.call_tool("long_job", {}, task=True)
            assert upstream.started.wait(LONG)
            task.cancel()
            assert upstream.cancelled.wait(LONG), "the upstream's function never saw the cancel"
            with pytest.raises(TaskCancelled):
                task.result(timeout=LONG)
    finally:
        server.close(LONG)


@pytest.mark.parametrize("down_mode", ERAS)
def test_an_upstream_tasks_error_is_the_gateway_tasks(upstream: Upstream, down_mode: str) -> None:
    server = gateway(upstream, "modern")
    try:
        with mcpsync.connect(server, mode=down_mode) as session:
            task = session.call_tool("broken", {}, task=True)
            with pytest.raises(McpError) as failed:
                task.result(timeout=LONG)
            assert (failed.value.code, failed.value.message, failed.value.data) == (-32602, "no such month", {"month": "13"})
    finally:
        server.close(LONG)


def test_a_required_upstream_task_tool_is_refused_to_a_client_that_cannot_take_tasks(upstream: Upstream) -> None:
    server = gateway(upstream, "modern")
    try:
        with mcpsync.connect(server, mode="modern") as session:
            with pytest.raises(McpError) as refused:
                session.call_tool("long_job", {})
            assert refused.value.code == -32021
            assert refused.value.data == {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
        assert not upstream.started.is_set(), "nothing ran upstream"
    finally:
        server.close(LONG)


@pytest.mark.parametrize("up_mode", ERAS)
@pytest.mark.parametrize("down_mode", ERAS)
def test_an_upstream_tasks_question_is_asked_of_the_gateway_tasks_client(upstream: Upstream, up_mode: str, down_mode: str) -> None:
    """The upstream task's question names its task, so the gateway asks it through its own task:
    an inputRequests entry (2026-07-28) or a request on the tasks/result (2025-11-25), answered
    by the client's callback; the answer goes up, and the result carries no upstream _meta."""
    asked: list[dict[str, Any]] = []

    def elicitation(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"yes": True}}

    server = gateway(upstream, up_mode)
    try:
        with mcpsync.connect(server, mode=down_mode, elicitation=elicitation) as session:
            task = session.call_tool("confirm", {}, task=True)
            result = task.result(timeout=LONG)
            assert (result["content"], result["isError"]) == ([{"type": "text", "text": "answered accept"}], False)
            assert result.get("_meta", {}).get("io.modelcontextprotocol/related-task", {"taskId": task.task_id}) == {"taskId": task.task_id}, \
                "a 2025-11-25 tasks/result names the gateway's task, never the upstream's"
            assert [params["message"] for params in asked] == ["Go on?"]
    finally:
        server.close(LONG)
