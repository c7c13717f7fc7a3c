"""`Server.start_task`: a program starts a task itself, outside any request, and a client follows
it by its id, over real connections (mcpsync's client over a loopback HTTP port, and over a pair of
pipes in the handshake era)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import mcpsync
from mcpsync import Context, McpError, Server
from mcpsync.auth import Auth, Principal, StaticTokens

from .._timeouts import LONG

pytestmark = pytest.mark.timeout(60)

ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789"


def report(ctx: Context) -> str:
    """The month's report, made at the press of a button."""
    ctx.progress(1, 2, "half way")
    return "the report"


@pytest.fixture
def server() -> Iterator[Server]:
    with Server("jobs") as made:
        yield made


def test_a_task_a_program_started_is_followed_by_its_id_over_http(server: Server) -> None:
    url = server.start_http("127.0.0.1", 0).url
    task_id = server.start_task(report)
    with mcpsync.connect(url, mode="modern") as session:
        task = session.task(task_id)
        assert task.wait(timeout=LONG).status == "completed"
        assert task.result(timeout=LONG)["content"] == [{"type": "text", "text": "the report"}]
        assert task.latest.message == "half way"


def test_a_2025_11_25_task_started_by_a_program_is_read_with_tasks_result(server: Server) -> None:
    task_id = server.start_task(report, form="2025-11-25")
    with mcpsync.connect(server, mode="legacy") as session:
        assert session.task(task_id).result(timeout=LONG)["content"][0]["text"] == "the report"


def test_a_task_started_for_a_principal_is_that_principals_alone() -> None:
    alice, bob = Principal("alice", scopes=frozenset({"mcp"})), Principal("bob", scopes=frozenset({"mcp"}))
    auth = Auth(StaticTokens({ALICE: alice, BOB: bob}), required_scopes=["mcp"])
    with Server("jobs", auth=auth) as server:
        url = server.start_http("127.0.0.1", 0).url
        task_id = server.start_task(report, owner=alice)
        with mcpsync.connect(url, mode="modern", headers={"Authorization": f"Bearer {BOB}"}) as session:
            with pytest.raises(McpError) as refused:
                session.task(task_id)
            assert refused.value.code == -32602
        with mcpsync.connect(url, mode="modern", headers={"Authorization": f"Bearer {ALICE}"}) as session:
            assert session.task(task_id).result(timeout=LONG)["content"][0]["text"] == "the report"


def test_closing_the_server_cancels_a_started_task(server: Server) -> None:
    started, saw_cancel = threading.Event(), threading.Event()

    def long_job(ctx: Context) -> str:
        started.set()
        if ctx.wait_cancelled(LONG):
            saw_cancel.set()
        return "stopped"

    server.start_task(long_job)
    assert started.wait(LONG)
    server.close(LONG)
    assert saw_cancel.is_set()


def test_a_function_that_needs_arguments_is_refused_at_once(server: Server) -> None:
    def needs(month: str) -> str:
        return month

    with pytest.raises(TypeError, match="must take no arguments"):
        server.start_task(needs)

    def needs_beside_its_context(ctx: Context, month: str) -> str:
        return month

    with pytest.raises(TypeError, match="must take no arguments"):
        server.start_task(needs_beside_its_context)
    with pytest.raises(ValueError, match="form must be"):
        server.start_task(report, form="2024-11-05")


def test_a_started_task_has_no_client_to_ask_so_its_question_fails_it(server: Server) -> None:
    def asks(ctx: Context) -> str:
        return str(ctx.elicit("Sure?", {"type": "object", "properties": {"yes": {"type": "boolean"}}}))

    task_id = server.start_task(asks)
    with mcpsync.connect(server, mode="modern") as session:
        with pytest.raises(McpError) as failed:
            session.task(task_id).result(timeout=LONG)
        assert failed.value.code == -32021
