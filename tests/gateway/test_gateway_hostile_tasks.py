"""A gateway relaying the tasks of an upstream that lies about them (`hostile_task_upstream.py`, a
real child over stdio): the downstream's task of the gateway's ends with an error naming the
upstream, or is cancelled, but never hangs, never takes the gateway down, and never hands the
client what the upstream sent unchecked."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import mcpsync
from mcpsync import McpError, Server
from mcpsync.client.tasks import TaskCancelled
from mcpsync.gateway.upstream_tasks import MAX_MESSAGE

from .._timeouts import LONG

pytestmark = pytest.mark.timeout(60)

UPSTREAM = Path(__file__).with_name("hostile_task_upstream.py")


UPSTREAM_TIMEOUT = 3.0
"""Seconds the gateway gives each request to the upstream (a frame it cannot read is a request
that is never answered: it fails at this deadline)."""


def gateway(mode: str) -> Iterator[Server]:
    server = Server("gateway")
    server.add_remote("liar", [sys.executable, str(UPSTREAM), mode], mode="legacy", timeout=UPSTREAM_TIMEOUT)
    try:
        yield server
    finally:
        server.close(LONG)


@pytest.fixture
def not_a_task() -> Iterator[Server]:
    yield from gateway("not-a-task")


@pytest.fixture
def forever() -> Iterator[Server]:
    yield from gateway("forever")


@pytest.fixture
def huge() -> Iterator[Server]:
    yield from gateway("huge-message")


@pytest.fixture
def too_deep() -> Iterator[Server]:
    yield from gateway("too-deep")


def test_an_upstream_answering_no_task_fails_the_gateways_task_naming_it(not_a_task: Server) -> None:
    with mcpsync.connect(not_a_task, mode="modern") as session:
        task = session.call_tool("job", {}, task=True)
        with pytest.raises(McpError) as failed:
            task.result(timeout=LONG)
        assert failed.value.code == -32603 and "upstream 'liar' failed" in failed.value.message
        with pytest.raises(McpError, match="upstream 'liar' failed"):  # the gateway still serves, and fails alike
            session.call_tool("job", {}, task=True).result(timeout=LONG)


def test_an_upstream_task_that_never_ends_is_cancelled_through_the_gateway(forever: Server) -> None:
    with mcpsync.connect(forever, mode="modern") as session:
        task = session.call_tool("job", {}, task=True)
        assert task.refresh().status == "working"
        task.cancel()
        with pytest.raises(TaskCancelled):
            task.result(timeout=LONG)


def test_an_upstream_status_message_of_a_megabyte_reaches_the_client_cut_short(huge: Server) -> None:
    with mcpsync.connect(huge, mode="modern") as session:
        task = session.call_tool("job", {}, task=True)
        deadline = time.monotonic() + LONG
        while task.refresh().message is None:
            assert time.monotonic() < deadline, "the upstream's message never reached the gateway's task"
        assert 0 < len(task.latest.message or "") <= MAX_MESSAGE + 1
        task.cancel()


def test_an_upstream_result_too_deep_to_read_fails_the_task_at_the_upstreams_deadline(too_deep: Server) -> None:
    with mcpsync.connect(too_deep, mode="legacy") as session:
        task = session.call_tool("job", {}, task=True)
        with pytest.raises(McpError) as failed:
            task.result(timeout=LONG)
        assert failed.value.code == -32603 and "upstream 'liar' failed" in failed.value.message
