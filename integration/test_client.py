"""The blocking client (`mcpsync.connect`) against a real `python -m mcpsync serve`, in all three modes.

- every method against the demo service (tools, prompts, resources, templates, completion),
  errors with code/message/data, progress, pagination, deadlines;
- listen against `integration/dynamic_app.py` in both eras: `add_tool` brings a tools event,
  `touch` a resource update for a watched URI (and nothing for others), filters, closing;
- 16 threads calling at once on one session each get their own answer;
- closing leaves no child (the pid is gone) and no thread; a killed server or a close fails every
  pending call at once.

The server writes a change notification before the result of the call that caused it, and the
client hands notifications over before it completes the response that follows them, so once a call
returns, every event it caused is already queued: `next_event(0)` checks "nothing else" without
waiting.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import mcpsync
from mcpsync import CallTimeout, ConnectionLost, ListChanged, McpError, ResourceUpdated, SessionClosed
from mcpsync.client import StdioConnection
from mcpsync.protocol.versions import Era

from wire import DEFAULT_TIMEOUT as LONG
from wire import REPO_ROOT, base_env, children_of, fixture

pytestmark = pytest.mark.timeout(60)

MODES = ["auto", "legacy", "modern"]
ERA_OF = {"auto": Era.MODERN, "legacy": Era.HANDSHAKE, "modern": Era.MODERN}
DEMO_TOOLS = ["echo", "add", "word_stats", "countdown", "fail"]
DYNAMIC_APP = str(Path(__file__).with_name("dynamic_app.py"))


@pytest.fixture(autouse=True)
def no_thread_left():
    """Everything the client started (reader, callbacks) is gone once the test's sessions closed."""
    before = set(threading.enumerate())
    yield
    leaked = [thread for thread in threading.enumerate() if thread not in before]
    for thread in leaked:
        thread.join(LONG)
    assert not [thread.name for thread in leaked if thread.is_alive()], "threads left running"


@pytest.fixture
def connect():
    """connect(*serve_args, mode=...) -> a session with `python -m mcpsync serve ARGS`; closed afterwards."""
    sessions: list[mcpsync.ClientSession] = []

    def open_(*serve_args: str, mode: str = "auto", **options: Any) -> mcpsync.ClientSession:
        options.setdefault("timeout", LONG)
        argv = [sys.executable, "-m", "mcpsync", "serve", *serve_args]
        session = mcpsync.connect(argv, mode=mode, env=base_env(), cwd=REPO_ROOT, **options)
        sessions.append(session)
        return session

    yield open_
    for session in sessions:
        session.close()


def text_of(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


def one_new_child(before: set[int]) -> int:
    new = set(children_of(os.getpid())) - before
    assert len(new) == 1, f"expected one server child, found {sorted(new)}"
    return new.pop()


def run_in_thread(outcome: dict[str, Any], key: str, call: Any) -> threading.Thread:
    def body() -> None:
        try:
            outcome[key] = call()
        except BaseException as exc:  # noqa: BLE001 - inspected by the test
            outcome[key] = exc

    thread = threading.Thread(target=body, name=f"test-{key}")
    thread.start()
    return thread


# -- every method ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_every_method_against_the_demo(connect, mode: str) -> None:
    session = connect(mode=mode)
    assert session.era is ERA_OF[mode]
    assert session.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert session.server_info["name"] == "mcpsync-demo"
    assert "demo" in (session.instructions or "")
    assert session.server_capabilities["tools"]["listChanged"] is True

    tools = session.list_tools()
    assert [tool["name"] for tool in tools] == DEMO_TOOLS
    assert all(tool["inputSchema"]["type"] == "object" for tool in tools)
    added = session.call_tool("add", {"a": 2, "b": 3})
    assert text_of(added) == "5" and added["structuredContent"] == {"result": 5} and added["isError"] is False
    stats = session.call_tool("word_stats", {"text": "a b a", "top": 1})
    assert stats["structuredContent"] == {"words": 3, "characters": 5, "lines": 1, "most_common": ["a"]}
    failed = session.call_tool("fail", {"message": "on purpose"})
    assert failed["isError"] is True and text_of(failed) == "on purpose"

    assert [prompt["name"] for prompt in session.list_prompts()] == ["review_code"]
    prompt = session.get_prompt("review_code", {"code": "x = 1", "language": "rust"})
    assert "rust" in prompt["messages"][0]["content"]["text"]

    assert [resource["uri"] for resource in session.list_resources()] == ["demo://readme"]
    readme = session.read_resource("demo://readme")
    assert readme["contents"][0]["text"].startswith("# mcpsync demo")
    assert [t["uriTemplate"] for t in session.list_resource_templates()] == ["demo://greeting/{name}"]
    assert session.read_resource("demo://greeting/Ada")["contents"][0]["text"] == "Hello, Ada!"

    assert session.complete({"type": "ref/prompt", "name": "review_code"}, "language", "py")["values"] == ["python"]
    names = session.complete({"type": "ref/resource", "uri": "demo://greeting/{name}"}, "name", "G")
    assert names["values"] == ["Grace", "Guido"]


@pytest.mark.parametrize("mode", MODES)
def test_errors_carry_code_message_and_data(connect, mode: str) -> None:
    session = connect(mode=mode)
    with pytest.raises(McpError) as unknown:
        session.call_tool("nosuch")
    assert (unknown.value.code, unknown.value.message, unknown.value.data) == (-32602, "Unknown tool: nosuch", {"name": "nosuch"})
    invalid = session.call_tool("add", {"a": 1})  # a tool execution error: the model reads it and retries
    assert invalid["isError"] is True and text_of(invalid) == "Invalid arguments for tool 'add': 'b' is a required property"
    with pytest.raises(McpError) as missing:
        session.read_resource("demo://nope")
    assert missing.value.code == (-32002 if mode == "legacy" else -32602)
    assert missing.value.data == {"uri": "demo://nope"}
    with pytest.raises(McpError) as method:
        session.request("no/such")
    assert method.value.code == -32601
    assert text_of(session.call_tool("echo", {"text": "after the errors"})) == "after the errors"


@pytest.mark.parametrize("mode", MODES)
def test_progress_reaches_the_callback(connect, mode: str) -> None:
    session = connect(mode=mode)
    seen: list[tuple[Any, Any, Any]] = []
    result = session.call_tool("countdown", {"steps": 3, "delay": 0}, progress=lambda *update: seen.append(update))
    assert text_of(result) == "counted down 3 steps"
    assert seen == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]


@pytest.mark.parametrize("mode", MODES)
def test_lists_follow_pagination(connect, mode: str) -> None:
    session = connect("--page-size", "2", mode=mode)
    assert [tool["name"] for tool in session.list_tools()] == DEMO_TOOLS


@pytest.mark.parametrize("mode", MODES)
def test_a_call_past_its_deadline_raises_and_the_session_goes_on(connect, mode: str) -> None:
    session = connect(mode=mode)
    start = time.monotonic()
    with pytest.raises(CallTimeout):
        session.call_tool("countdown", {"steps": 400, "delay": 0.05}, timeout=0.3)
    assert time.monotonic() - start < LONG
    assert text_of(session.call_tool("echo", {"text": "still here"})) == "still here"


# -- listen ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_listen_brings_tool_changes_and_watched_resource_updates(connect, mode: str) -> None:
    session = connect(DYNAMIC_APP, mode=mode)
    with session.listen(resource_uris=["file:///a"]) as listener:
        assert text_of(session.call_tool("add_tool")) == "dyn_1"
        assert listener.next_event(LONG) == ListChanged("tools")
        assert "dyn_1" in [tool["name"] for tool in session.list_tools()]
        assert text_of(session.call_tool("dyn_1")) == "dyn_1"

        session.call_tool("touch", {"uri": "file:///c"})  # not watched
        session.call_tool("touch", {"uri": "file:///a/b"})  # under a watched URI
        assert listener.next_event(LONG) == ResourceUpdated("file:///a/b")
        session.call_tool("touch", {"uri": "file:///a"})
        assert listener.next_event(LONG) == ResourceUpdated("file:///a")
        assert listener.next_event(0) is None
    assert listener.closed


@pytest.mark.parametrize("mode", MODES)
def test_listen_without_tools_hears_no_tool_change(connect, mode: str) -> None:
    session = connect(DYNAMIC_APP, mode=mode)
    listener = session.listen(tools=False, resource_uris=["file:///x"])
    session.call_tool("add_tool")
    session.call_tool("touch", {"uri": "file:///x"})
    assert listener.next_event(LONG) == ResourceUpdated("file:///x")  # the first event: no tools change before it
    assert listener.next_event(0) is None
    listener.close()


@pytest.mark.parametrize("mode", MODES)
def test_a_closed_listener_hears_nothing_and_a_new_one_does(connect, mode: str) -> None:
    session = connect(DYNAMIC_APP, mode=mode)
    old = session.listen(resource_uris=["file:///a"])
    old.close()
    session.call_tool("add_tool")
    session.call_tool("touch", {"uri": "file:///a"})
    assert old.next_event(0) is None
    new = session.listen()
    session.call_tool("add_tool")
    assert new.next_event(LONG) == ListChanged("tools")
    new.close()


@pytest.mark.parametrize("mode", MODES)
def test_two_listeners_on_one_session_both_hear_a_change(connect, mode: str) -> None:
    session = connect(DYNAMIC_APP, mode=mode)
    first, second = session.listen(), session.listen()
    session.call_tool("add_tool")
    assert first.next_event(LONG) == ListChanged("tools")
    assert second.next_event(LONG) == ListChanged("tools")
    first.close()
    second.close()


@pytest.mark.parametrize(
    "mode",
    [
        "auto",
        "legacy",
        "modern",
    ],
)
def test_closing_one_listener_keeps_anothers_resource_updates(connect, mode: str) -> None:
    session = connect(DYNAMIC_APP, mode=mode)
    first = session.listen(resource_uris=["file:///shared"])
    second = session.listen(resource_uris=["file:///shared"])
    first.close()
    session.call_tool("touch", {"uri": "file:///shared"})
    assert second.next_event(0) == ResourceUpdated("file:///shared")
    second.close()


# -- concurrency ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_sixteen_threads_on_one_session_get_their_own_answers(connect, mode: str) -> None:
    session = connect(mode=mode)
    count = 16
    barrier = threading.Barrier(count, timeout=LONG)
    outcome: dict[str, Any] = {}

    def work(index: int) -> tuple[Any, ...]:
        barrier.wait()
        added = session.call_tool("add", {"a": index, "b": 1000})["structuredContent"]["result"]
        echoed = text_of(session.call_tool("echo", {"text": f"thread-{index}"}))
        seen: list[Any] = []
        counted = text_of(session.call_tool("countdown", {"steps": 2, "delay": 0}, progress=lambda *u: seen.append(u[0])))
        listed = len(session.list_tools())
        return added, echoed, counted, seen, listed

    threads = [run_in_thread(outcome, str(i), lambda i=i: work(i)) for i in range(count)]
    for thread in threads:
        thread.join(LONG)
    assert not any(thread.is_alive() for thread in threads)
    expected = {str(i): (i + 1000, f"thread-{i}", "counted down 2 steps", [1, 2], len(DEMO_TOOLS)) for i in range(count)}
    assert outcome == expected


# -- closing and dying ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_close_leaves_no_child_and_no_thread(connect, mode: str) -> None:
    before = set(children_of(os.getpid()))
    session = connect(mode=mode)
    pid = one_new_child(before)
    assert any(thread.name == "mcpsync-client-reader" for thread in threading.enumerate())
    session.list_tools()
    start = time.monotonic()
    session.close()
    assert time.monotonic() - start < LONG
    assert not os.path.exists(f"/proc/{pid}"), "the server is still there (running or a zombie)"
    assert set(children_of(os.getpid())) == before - {pid}
    assert not [thread.name for thread in threading.enumerate() if thread.name.startswith("mcpsync-client")]
    with pytest.raises(SessionClosed):
        session.list_tools()


def open_toolbox(mode: str, stderr: Any) -> mcpsync.ClientSession:
    """A session with the toolbox fixture (its `block` tool reports how it ended on stderr), with a
    short close grace so a server that does not exit on end of input is stopped quickly."""
    argv = [sys.executable, "-m", "mcpsync", "serve", fixture("toolbox.py")]
    connection = StdioConnection(argv, env=base_env(), cwd=REPO_ROOT, stderr=stderr, close_grace=0.5)
    return mcpsync.ClientSession(connection, mode=mode, timeout=LONG).open()


def close_with_a_call_in_flight(mode: str, key: str) -> tuple[dict[str, Any], int, str]:
    """Start block(key), close the session while it runs; (outcome, server pid, server stderr)."""
    before = set(children_of(os.getpid()))
    with tempfile.TemporaryFile() as stderr:
        session = open_toolbox(mode, stderr)
        try:
            pid = one_new_child(before)
            started = threading.Event()
            outcome: dict[str, Any] = {}
            caller = run_in_thread(
                outcome, "block", lambda: session.call_tool("block", {"key": key}, progress=lambda *_: started.set(), timeout=LONG * 3)
            )
            assert started.wait(LONG), "block never started"
        finally:
            session.close()
        caller.join(LONG)
        stderr.seek(0)
        return outcome, pid, stderr.read().decode("utf-8", "replace")


@pytest.mark.parametrize("mode", MODES)
def test_close_fails_pending_calls_and_still_stops_the_server(mode: str) -> None:
    outcome, pid, _ = close_with_a_call_in_flight(mode, "pending")
    assert isinstance(outcome["block"], SessionClosed), outcome
    assert not os.path.exists(f"/proc/{pid}")


@pytest.mark.parametrize("mode", MODES)
def test_close_cancels_a_call_in_flight_on_the_server(mode: str) -> None:
    _, _, stderr = close_with_a_call_in_flight(mode, "cancel-on-close")
    assert "BLOCK-ENDED key=cancel-on-close outcome=cancelled" in stderr, stderr[-2000:]


@pytest.mark.parametrize("mode", MODES)
def test_a_killed_server_fails_every_pending_call_at_once(connect, mode: str) -> None:
    before = set(children_of(os.getpid()))
    session = connect(mode=mode)
    pid = one_new_child(before)
    listener = session.listen()
    started = [threading.Event(), threading.Event()]
    outcome: dict[str, Any] = {}
    patient = LONG * 3  # failing before this deadline proves the death was noticed
    callers = [
        run_in_thread(
            outcome,
            f"call-{i}",
            lambda i=i: session.call_tool("countdown", {"steps": 400, "delay": 0.05}, progress=lambda *_: started[i].set(), timeout=patient),
        )
        for i in range(2)
    ]
    assert all(event.wait(LONG) for event in started)
    os.kill(pid, signal.SIGKILL)
    start = time.monotonic()
    for caller in callers:
        caller.join(LONG)
    assert time.monotonic() - start < LONG
    assert all(isinstance(outcome[f"call-{i}"], ConnectionLost) for i in range(2)), outcome
    assert listener.closed and isinstance(listener.error, ConnectionLost)
    with pytest.raises(ConnectionLost):
        session.call_tool("echo", {"text": "anyone?"})
