"""Which thread runs a request over stdio: a tool without a `Context` runs on the reader itself (no
hand-off at all), a tool with one on a worker; a tool without a Context that is slow after all
does not hold the requests behind it (a worker reads meanwhile, and the reading comes back to the
reader thread afterwards); and neither a shutdown nor end of input waits on a tool that holds the
reader. Real pipes, the real transport."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpsync import Server

from .._timeouts import LONG
from .thread_tools import ThreadTools, tools  # noqa: F401 - tools is a fixture
from .pipes import PipeClient, modern

pytestmark = pytest.mark.timeout(60)

READER = "mcpsync-stdio-reader"
WORKER = "mcpsync-worker"


def _client(tools: ThreadTools, **options: Any) -> PipeClient:
    return PipeClient(Server("threads", services=[tools.service], **options))


def _params(era: str, tool: str) -> dict[str, Any]:
    params = {"name": tool, "arguments": {}}
    return modern(params) if era == "modern" else params


def _ran_on(client: PipeClient, era: str, tool: str, id: Any) -> str:
    response, _ = client.request("tools/call", _params(era, tool), id=id)
    return str(response["result"]["content"][0]["text"])


def _open(client: PipeClient, era: str) -> None:
    """Settle the era: its first request must finish before the next is read, so it runs on a worker."""
    if era == "handshake":
        client.initialize()
    else:
        _ran_on(client, era, "where", id="first")


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_a_tool_without_a_context_runs_on_the_reader_and_one_with_a_context_on_a_worker(tools: ThreadTools, era: str) -> None:
    with _client(tools) as client:
        _open(client, era)
        assert _ran_on(client, era, "where", id=1) == READER
        assert _ran_on(client, era, "where_with_context", id=2).startswith(WORKER)
        assert _ran_on(client, era, "where", id=3) == READER


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_a_slow_tool_without_a_context_does_not_hold_the_requests_behind_it(tools: ThreadTools, era: str) -> None:
    with _client(tools) as client:
        _open(client, era)
        client.request_nowait("tools/call", _params(era, "hold"), id="held")
        assert tools.holding.wait(LONG)
        # The reader is held in the tool: a worker reads, and answers, what comes next.
        assert _ran_on(client, era, "where", id=1).startswith(WORKER)
        listing, _ = client.request("tools/list", modern() if era == "modern" else None, id=2)
        assert "tools" in listing["result"], listing
        tools.release.set()
        answer = client.recv()
        assert answer["id"] == "held" and answer["result"]["content"][0]["text"] == READER
        # The reading goes home once the held turn is over (the next request may still find the worker reading).
        ran_on = [_ran_on(client, era, "where", id=f"after-{attempt}") for attempt in range(3)]
        for attempt in range(3, 200):
            if ran_on[-1] == READER:
                break
            ran_on.append(_ran_on(client, era, "where", id=f"after-{attempt}"))
        assert ran_on[-1] == READER, ran_on


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_answers_read_together_with_a_slow_request_are_not_held_behind_it(tools: ThreadTools, era: str) -> None:
    """Requests that arrive in one read are answered a few to a write, but none waits behind a
    request among them that holds the reader: those before it go out while it runs, and those
    after it are read and answered by a worker meanwhile."""
    with _client(tools) as client:
        _open(client, era)
        before, after = [f"before-{n}" for n in range(20)], [f"after-{n}" for n in range(3)]
        calls = [(id, "where") for id in before] + [("held", "hold")] + [(id, "where") for id in after]
        client.send(b"".join(json.dumps({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": _params(era, tool)}).encode() + b"\n"
                             for id, tool in calls))
        answered = {client.recv()["id"] for _ in range(len(before) + len(after))}  # fails past LONG if held
        assert answered == set(before + after)
        assert tools.holding.is_set()
        tools.release.set()
        answer = client.recv()
        assert answer["id"] == "held" and answer["result"]["content"][0]["text"] == READER


def test_a_cancelled_request_held_on_the_reader_is_never_answered(tools: ThreadTools) -> None:
    with _client(tools) as client:
        client.initialize()
        client.request_nowait("tools/call", _params("handshake", "hold"), id="held")
        assert tools.holding.wait(LONG)
        client.notify("notifications/cancelled", {"requestId": "held"})  # read by the worker reading meanwhile
        pong, before = client.request("ping", id=1)
        assert pong["result"] == {} and before == []
        tools.release.set()
        pong, before = client.request("ping", id=2)
        assert pong["result"] == {} and before == []  # the held call's answer was dropped


def test_shutdown_does_not_wait_for_a_tool_holding_the_reader(tools: ThreadTools) -> None:
    client = _client(tools, shutdown_timeout=0.2)
    try:
        client.initialize()
        client.request_nowait("tools/call", _params("handshake", "hold"), id="held")
        assert tools.holding.wait(LONG)
        assert client.transport.shutdown() is False  # the held request outlived the deadline
        answer = client.recv()
        assert answer["id"] == "held" and answer["error"]["message"] == "the server is shutting down"
    finally:
        tools.release.set()
        client.finish()


def test_end_of_input_while_a_tool_holds_the_reader_lets_it_finish(tools: ThreadTools) -> None:
    client = _client(tools)
    client.initialize()
    client.request_nowait("tools/call", _params("handshake", "hold"), id="held")
    assert tools.holding.wait(LONG)
    client.close_input()  # the worker reading meanwhile sees the end of input
    tools.release.set()
    answer = client.recv()
    assert answer["id"] == "held" and answer["result"]["content"][0]["text"] == READER
    assert client.finish() == []


def test_with_every_worker_busy_the_reader_runs_nothing_itself(tools: ThreadTools) -> None:
    """No worker could read in its place should the call hold it: the call queues for a worker."""
    with _client(tools, workers=1) as client:
        client.initialize()
        client.request_nowait("tools/call", _params("handshake", "hold_with_context"), id="held")
        assert tools.holding.wait(LONG)
        client.request_nowait("tools/call", _params("handshake", "where"), id="queued")
        client.send(b"{broken\n")  # the reader answers this itself, once it has placed the call before it
        frames = [client.recv()]
        while frames[-1]["id"] is not None:  # with a worker free, the call may be answered first
            frames.append(client.recv())
        assert frames[-1]["error"]["code"] == -32700
        tools.release.set()
        while len(frames) < 3:
            frames.append(client.recv())
        answers = {frame["id"]: frame["result"]["content"][0]["text"] for frame in frames if frame["id"] is not None}
        assert answers["held"].startswith(WORKER) and answers["queued"].startswith(WORKER)
