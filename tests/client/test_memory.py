"""connect(server): a `Server` of this process as the session's peer, over its own stdio transport
on a pair of pipes, in both eras; no port, no child process, and nothing left running after close."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest

import mcpsync
from mcpsync import ConnectionLost, Context, Server, Service
from mcpsync.client import SessionOptions

from .._timeouts import LONG

service = Service("in-process")
holding = threading.Event()


@service.tool
def pid() -> int:
    """The process the tool runs in."""
    return os.getpid()


@service.tool
def ask_name(ctx: Context) -> str:
    """A question to the client, answered in either era."""
    answer = ctx.elicit("name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    return str(answer["content"]["name"])


@service.tool
def hold(ctx: Context) -> str:
    """Runs until cancelled."""
    holding.set()
    ctx.wait_cancelled(LONG)
    return "cancelled" if ctx.cancelled else "not cancelled"


@pytest.fixture
def server() -> Iterator[Server]:
    with Server("in-process", services=[service], shutdown_timeout=LONG) as made:
        yield made


def _connection_threads() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name.startswith(("mcpsync-memory", "mcpsync-stdio"))]


def _answer(params: dict) -> dict:
    return {"action": "accept", "content": {"name": "Ada"}}


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_a_server_object_is_called_in_this_process_in_both_eras(server: Server, mode: str) -> None:
    with mcpsync.connect(server, mode=mode, elicitation=_answer, timeout=LONG) as session:
        assert session.era is (mcpsync.Era.HANDSHAKE if mode == "legacy" else mcpsync.Era.MODERN)
        assert session.server_info["name"] == "in-process"
        assert session.call_tool("pid", {})["structuredContent"] == {"result": os.getpid()}, "the tool ran in another process"
        assert session.call_tool("ask_name", {})["content"][0]["text"] == "Ada"


def test_closing_the_session_stops_its_transport_and_threads_and_leaves_the_server_open(server: Server) -> None:
    before = _connection_threads()
    with mcpsync.connect(server, timeout=LONG) as session:
        session.call_tool("pid", {})
        assert len(_connection_threads()) > len(before)
    assert server.wait(LONG), "the server still serves the closed session"
    assert _connection_threads() == before, "a thread of the closed connection is still running"
    with mcpsync.connect(server, timeout=LONG) as again:  # the server is still there for the next one
        assert again.call_tool("pid", {})["isError"] is False


def test_two_sessions_have_a_transport_each(server: Server) -> None:
    with mcpsync.connect(server, mode="legacy", timeout=LONG) as first, mcpsync.connect(server, mode="modern", timeout=LONG) as second:
        assert (first.era, second.era) == (mcpsync.Era.HANDSHAKE, mcpsync.Era.MODERN)
        assert first.call_tool("pid", {})["structuredContent"] == second.call_tool("pid", {})["structuredContent"]


def test_a_server_shut_down_under_the_session_answers_its_call_then_the_session_is_lost(server: Server) -> None:
    """As over stdio: the running call sees its cancellation and is answered, then the connection
    ends, and a call after that fails at once."""
    lost = threading.Event()
    with mcpsync.connect(server, mode="legacy", timeout=LONG, on_lost=lambda error: lost.set()) as session:
        results: list[object] = []
        caller = threading.Thread(target=lambda: results.append(session.call_tool("hold", {})))
        holding.clear()
        caller.start()
        assert holding.wait(LONG), "the call never reached the tool"
        assert server.shutdown(LONG)
        caller.join(LONG)
        assert lost.wait(LONG), "the session never heard that its server stopped"
        assert [result["content"][0]["text"] for result in results] == ["cancelled"]  # type: ignore[index]
        with pytest.raises(ConnectionLost):
            session.call_tool("pid", {})


def test_options_for_a_child_or_a_url_are_refused_for_a_server_object(server: Server) -> None:
    with pytest.raises(TypeError, match="a Server of this process"):
        mcpsync.connect(server, env={"A": "1"})


def test_a_session_takes_its_settings_as_one_value_which_keywords_replace(server: Server) -> None:
    options = SessionOptions(mode="legacy", timeout=LONG, elicitation=_answer)
    with mcpsync.connect(server, options=options) as by_value, mcpsync.connect(server, options=options, mode="modern") as replaced:
        assert (by_value.era, replaced.era) == (mcpsync.Era.HANDSHAKE, mcpsync.Era.MODERN)
        assert replaced.call_tool("ask_name", {})["content"][0]["text"] == "Ada", "the value's callback is kept"
    with pytest.raises(TypeError):
        mcpsync.connect(server, mdoe="legacy")
