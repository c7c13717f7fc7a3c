"""The blocking client session against a scripted fake server (tests/client/fake_server.py).

The fake plays what the real mcpsync server cannot: a handshake-only server, version rejections, a
server that never answers, one that dies mid-call, one that stops reading, one that asks the client
questions, odd paginators. What the client put on the wire is read back from the fake
(`fake/received`): the fake handles lines in order, so it has seen everything sent before.
Every wait is bounded by tests._timeouts; ordering comes from answers and progress notifications.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

import pytest

import mcpsync
from mcpsync import CallCancelled, CallTimeout, ConnectionLost, McpError, McpsyncError, ProtocolViolation, SessionClosed
from mcpsync.client import ClientSession, StdioConnection
from mcpsync.protocol.versions import Era

from .._timeouts import LONG
from .fake_server import ask, command, fake_pid, methods, process_gone, received

pytestmark = pytest.mark.timeout(60)

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
BIG = 1 << 20  # far more than a pipe holds


def start_thread(target: Any, name: str) -> threading.Thread:
    thread = threading.Thread(target=target, name=name)
    thread.start()
    return thread


def capture(outcome: dict[str, Any], key: str, call: Any) -> Any:
    """A thread body that stores what `call()` returned or raised under `key`."""

    def run() -> None:
        try:
            outcome[key] = call()
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome[key] = exc

    return run


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# -- agreeing on an era ---------------------------------------------------------------------------


def test_auto_probes_discover_and_keeps_the_modern_era(open_fake) -> None:
    session = open_fake()
    assert session.era is Era.MODERN
    assert session.protocol_version == "2026-07-28"
    assert session.server_info == {"name": "fake", "version": "1"}
    assert session.instructions == "fake (modern)"
    assert session.server_capabilities["tools"] == {"listChanged": True}
    session.list_tools()
    sent = received(session)
    assert [m["method"] for m in sent] == ["server/discover", "tools/list"]
    for message in sent:  # every request carries the envelope
        meta = message["params"]["_meta"]
        assert meta[META_VERSION] == "2026-07-28"
        assert meta[META_CAPABILITIES] == {}
        assert meta[META_CLIENT_INFO]["name"] == "mcpsync"


def test_auto_falls_back_to_initialize_for_a_handshake_only_server(open_fake) -> None:
    session = open_fake("handshake")
    assert session.era is Era.HANDSHAKE
    assert session.protocol_version == "2025-11-25"
    assert session.server_info == {"name": "fake", "version": "1"}
    assert session.instructions == "fake (handshake)"
    session.list_tools()
    sent = received(session)
    assert [m["method"] for m in sent] == ["server/discover", "initialize", "notifications/initialized", "tools/list"]
    initialize = sent[1]["params"]
    assert initialize["protocolVersion"] == "2025-11-25"
    assert initialize["capabilities"] == {}
    assert initialize["clientInfo"]["name"] == "mcpsync"
    assert "params" not in sent[3] or "_meta" not in sent[3]["params"]  # no envelope in the handshake era


def test_legacy_mode_never_probes(open_fake) -> None:
    session = open_fake(mode="legacy")  # the fake would accept discover; legacy must not ask
    assert session.era is Era.HANDSHAKE
    assert methods(session) == ["initialize", "notifications/initialized"]


def test_modern_mode_does_not_fall_back_and_stops_the_child() -> None:
    connection = StdioConnection(command("handshake"))
    with pytest.raises(McpError) as raised:
        ClientSession(connection, mode="modern", timeout=LONG).open()
    assert raised.value.code == -32601
    assert process_gone(connection.pid)


def test_unsupported_version_reprobes_with_one_the_server_names(open_fake, monkeypatch) -> None:
    from mcpsync.client import session as session_module

    monkeypatch.setattr(session_module, "LATEST_MODERN_VERSION", "2099-01-01")  # a version the fake rejects
    session = open_fake()
    assert session.era is Era.MODERN
    assert session.protocol_version == "2026-07-28"
    session.list_tools()
    sent = received(session)
    assert [m["method"] for m in sent] == ["server/discover", "server/discover", "tools/list"]
    assert [m["params"]["_meta"][META_VERSION] for m in sent] == ["2099-01-01", "2026-07-28", "2026-07-28"]


def test_auto_falls_back_when_no_offered_version_is_spoken(open_fake) -> None:
    session = open_fake("unsupported")
    assert session.era is Era.HANDSHAKE
    assert methods(session) == ["server/discover", "initialize", "notifications/initialized"]


def test_modern_mode_raises_the_unsupported_version_error_with_its_data() -> None:
    connection = StdioConnection(command("unsupported"))
    with pytest.raises(McpError) as raised:
        ClientSession(connection, mode="modern", timeout=LONG).open()
    assert raised.value.code == -32022
    assert raised.value.data["supported"] == ["2030-01-01"]
    assert process_gone(connection.pid)


def test_a_probe_nobody_answers_falls_back_after_the_timeout(open_fake) -> None:
    start = time.monotonic()
    session = open_fake("silent-discover", timeout=0.5)
    assert time.monotonic() - start < LONG
    assert session.era is Era.HANDSHAKE
    session.timeout = LONG  # the short default was for the probe; the checks below must not race it
    sent = received(session)
    discover_id = sent[0]["id"]
    assert [m.get("method") for m in sent] == ["server/discover", "notifications/cancelled", "initialize", "notifications/initialized"]
    assert sent[1]["params"]["requestId"] == discover_id


def test_an_unknown_handshake_version_is_a_protocol_violation_and_stops_the_child() -> None:
    connection = StdioConnection(command("handshake", "bogus-version"))
    with pytest.raises(ProtocolViolation, match="1999-01-01"):
        ClientSession(connection, timeout=LONG).open()
    assert process_gone(connection.pid)


def test_a_bad_mode_is_rejected_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="mode"):
        mcpsync.connect(command(), mode="newest")


def test_an_unknown_keyword_is_a_type_error_naming_it_before_anything_starts() -> None:
    with pytest.raises(TypeError, match="nonsense_option"):
        mcpsync.connect(["/nonexistent/mcp-server"], nonsense_option=1)  # type: ignore[call-arg]


def test_a_target_must_be_a_command_list() -> None:
    with pytest.raises(TypeError, match="list"):
        mcpsync.connect("python server.py")


def test_a_missing_program_is_connection_lost() -> None:
    with pytest.raises(ConnectionLost, match="cannot start"):
        mcpsync.connect(["/nonexistent/mcp-server"], timeout=LONG)


def test_a_server_that_exits_at_once_fails_fast() -> None:
    start = time.monotonic()
    with pytest.raises(ConnectionLost):
        mcpsync.connect([sys.executable, "-c", "pass"], timeout=LONG * 3)
    assert time.monotonic() - start < LONG  # not the call deadline


def test_env_adds_to_the_environment_and_cwd_is_used(open_fake, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_INHERITED", "yes")
    session = open_fake(env={"FAKE_COLOUR": "teal"}, cwd=tmp_path)
    seen = session.request("fake/env")
    assert seen["cwd"] == str(tmp_path)
    assert seen["env"] == {"FAKE_COLOUR": "teal", "FAKE_INHERITED": "yes"}


# -- calls ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_every_method_sends_what_the_spec_names(open_fake, mode: str) -> None:
    session = open_fake(mode=mode)
    assert session.call_tool("echo", {"text": "hi"})["content"] == [{"type": "text", "text": "hi"}]
    assert [t["name"] for t in session.list_tools()] == ["t1", "t2", "t3", "t4", "t5"]
    assert [p["name"] for p in session.list_prompts()] == ["p1", "p2", "p3"]
    assert [r["name"] for r in session.list_resources()] == ["r1", "r2", "r3"]
    assert [t["name"] for t in session.list_resource_templates()] == ["t1", "t2", "t3"]
    prompt = session.get_prompt("p1", {"who": "Ada"})
    read = session.read_resource("fake://r1")
    completion = session.complete({"type": "ref/prompt", "name": "p1"}, "who", "A", context={"lang": "en"})
    assert completion["values"] == ["a", "b"]

    def strip(params: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in params.items() if k != "_meta"}

    assert strip(prompt["echo"]) == {"name": "p1", "arguments": {"who": "Ada"}}
    assert strip(read["echo"]) == {"uri": "fake://r1"}
    assert strip(completion["echo"]) == {
        "ref": {"type": "ref/prompt", "name": "p1"},
        "argument": {"name": "who", "value": "A"},
        "context": {"arguments": {"lang": "en"}},
    }
    (call,) = received(session, "tools/call")
    assert strip(call["params"]) == {"name": "echo", "arguments": {"text": "hi"}}


def test_lists_follow_every_cursor(open_fake) -> None:
    session = open_fake("paginate")
    assert [t["name"] for t in session.list_tools()] == ["t1", "t2", "t3", "t4", "t5"]
    assert [p["name"] for p in session.list_prompts()] == ["p1", "p2", "p3"]
    assert [r["name"] for r in session.list_resources()] == ["r1", "r2", "r3"]
    assert [t["name"] for t in session.list_resource_templates()] == ["t1", "t2", "t3"]
    cursors = [m["params"].get("cursor") for m in received(session, "tools/list")]
    assert cursors == [None, "c1", "c2"]


def test_a_repeated_cursor_is_a_protocol_violation_not_a_loop(open_fake) -> None:
    session = open_fake("repeat-cursor")
    with pytest.raises(ProtocolViolation, match="cursor"):
        session.list_tools()
    assert len(received(session, "tools/list")) == 2
    assert session.call_tool("echo", {"text": "still fine"})["content"][0]["text"] == "still fine"


def test_an_error_answer_is_an_exception_with_code_message_and_data(open_fake) -> None:
    session = open_fake()
    with pytest.raises(McpError) as raised:
        session.call_tool("rpc_error")
    error = raised.value
    assert (error.code, error.message, error.data) == (-32099, "custom failure", {"why": "because", "n": 3})
    assert isinstance(error, McpsyncError)
    with pytest.raises(McpError) as unknown:
        session.request("no/such/method")
    assert unknown.value.code == -32601


def test_a_tool_error_is_a_result_not_an_exception(open_fake) -> None:
    result = open_fake().call_tool("tool_error")
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "it broke"}]


def test_a_result_that_is_not_an_object_is_a_protocol_violation(open_fake) -> None:
    session = open_fake()
    with pytest.raises(ProtocolViolation):
        session.call_tool("not_object")
    assert session.call_tool("echo", {"text": "after"})["content"][0]["text"] == "after"


def test_progress_reaches_the_callback_in_order_before_the_result(open_fake) -> None:
    session = open_fake()
    seen: list[tuple[Any, Any, Any]] = []
    result = session.call_tool("progress", progress=lambda *update: seen.append(update))
    assert result["content"][0]["text"] == "done"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    (call,) = received(session, "tools/call")
    assert call["params"]["_meta"]["progressToken"] is not None


def test_a_call_without_a_callback_asks_for_no_progress(open_fake) -> None:
    session = open_fake()
    session.call_tool("progress")
    (call,) = received(session, "tools/call")
    assert "progressToken" not in call["params"].get("_meta", {})


def test_a_failing_progress_callback_does_not_break_the_call(open_fake) -> None:
    def explode(*_update: Any) -> None:
        raise RuntimeError("callback bug")

    assert open_fake().call_tool("progress", progress=explode)["content"][0]["text"] == "done"


def test_a_duplicate_answer_is_ignored(open_fake) -> None:
    session = open_fake()
    assert session.call_tool("twice")["content"][0]["text"] == "first"
    assert session.call_tool("echo", {"text": "next"})["content"][0]["text"] == "next"


def test_log_messages_reach_on_log(open_fake) -> None:
    logs: list[dict[str, Any]] = []
    session = open_fake(on_log=logs.append)
    session.call_tool("log")
    assert logs == [{"level": "info", "logger": "fake", "data": "a log line"}]


def test_concurrent_callers_get_their_own_answers(open_fake) -> None:
    session = open_fake()
    count = 16
    barrier = threading.Barrier(count, timeout=LONG)
    outcome: dict[str, Any] = {}

    def call(index: int) -> Any:
        barrier.wait()
        return session.call_tool("echo", {"text": f"caller-{index}"})["content"][0]["text"]

    threads = [start_thread(capture(outcome, str(i), lambda i=i: call(i)), f"test-caller-{i}") for i in range(count)]
    for thread in threads:
        thread.join(LONG)
    assert outcome == {str(i): f"caller-{i}" for i in range(count)}
    ids = [m["id"] for m in received(session, "tools/call")]
    assert len(set(ids)) == count  # no id used twice


# -- deadlines ------------------------------------------------------------------------------------


def test_a_call_past_its_deadline_raises_and_is_cancelled_on_the_wire(open_fake) -> None:
    session = open_fake()
    start = time.monotonic()
    with pytest.raises(CallTimeout) as raised:
        session.call_tool("hang", timeout=0.3)
    assert 0.3 <= time.monotonic() - start < LONG
    assert isinstance(raised.value, TimeoutError) and isinstance(raised.value, McpsyncError)
    (call,) = received(session, "tools/call")
    (cancel,) = received(session, "notifications/cancelled")
    assert cancel["params"]["requestId"] == call["id"]
    assert isinstance(cancel["params"].get("reason"), str)


def test_every_call_has_the_sessions_default_deadline(open_fake) -> None:
    session = open_fake(timeout=0.3)
    start = time.monotonic()
    with pytest.raises(CallTimeout, match="0.3"):
        session.call_tool("hang")
    assert time.monotonic() - start < LONG


def test_an_answer_after_the_deadline_is_dropped(open_fake) -> None:
    session = open_fake()
    with pytest.raises(CallTimeout):
        session.call_tool("hang", timeout=0.3)
    session.request("fake/release")  # the fake now answers the timed-out call ("late")
    assert session.call_tool("echo", {"text": "mine"})["content"][0]["text"] == "mine"


def test_a_prepared_call_goes_out_only_when_sent_and_its_callbacks_are_already_in_place(open_fake) -> None:
    session = open_fake()
    seen: list[Any] = []
    call = session.prepare_request("tools/call", {"name": "echo", "arguments": {"text": "later"}})
    call.on_done(lambda result, error: seen.append((result, error)))
    assert received(session, "tools/call") == []  # registered, not sent
    call.send()
    call.send()  # once only
    assert call.result(LONG)["content"][0]["text"] == "later"
    assert seen == [(call.result(0), None)]
    assert len(received(session, "tools/call")) == 1


def test_a_prepared_call_cancelled_before_it_is_sent_never_reaches_the_server(open_fake) -> None:
    session = open_fake()
    call = session.prepare_request("tools/call", {"name": "echo", "arguments": {"text": "never"}})
    call.cancel("changed my mind")
    call.send()
    with pytest.raises(CallCancelled, match="changed my mind"):
        call.result(0)
    assert "tools/call" not in methods(session) and "notifications/cancelled" not in methods(session)


def test_a_call_cancelled_here_fails_with_call_cancelled_not_an_error_the_server_sent(open_fake) -> None:
    """The server said nothing: the caller can tell its own cancel from an McpError answer."""
    session = open_fake()
    call = session.start_request("tools/call", {"name": "hang"})
    call.cancel("changed my mind")
    with pytest.raises(CallCancelled, match="^tools/call was cancelled: changed my mind$") as raised:
        call.result(0)
    assert isinstance(raised.value, McpsyncError) and not isinstance(raised.value, McpError)
    (cancel,) = received(session, "notifications/cancelled")
    assert cancel["params"]["requestId"] == call.id and cancel["params"]["reason"] == "changed my mind"


def test_a_cancel_that_comes_while_the_request_is_being_written_reaches_the_server_after_it(open_fake, monkeypatch) -> None:
    """A gateway sends a forwarded call on one thread while its client's cancel arrives on another:
    the server must get the request first and then the cancel naming it, never the reverse (a
    cancel for an id it has not seen is ignored, and the call would run to its end)."""
    session = open_fake()
    writing, release = threading.Event(), threading.Event()
    real_send = session._send_request

    def held_send(request_id: Any, method: str, *args: Any, **kwargs: Any) -> None:
        if method == "tools/call":
            writing.set()
            assert release.wait(LONG), "the test never released the send"
        real_send(request_id, method, *args, **kwargs)

    monkeypatch.setattr(session, "_send_request", held_send)
    call = session.prepare_request("tools/call", {"name": "hang"})
    sender = start_thread(call.send, "test-sender")
    assert writing.wait(LONG), "the send never started"
    call.cancel("changed my mind")  # the request is half-way out
    release.set()
    sender.join(LONG)
    with pytest.raises(CallCancelled, match="changed my mind"):
        call.result(0)
    wire = [m for m in received(session) if m.get("method") in ("tools/call", "notifications/cancelled")]
    assert [m["method"] for m in wire] == ["tools/call", "notifications/cancelled"]
    assert wire[1]["params"]["requestId"] == wire[0]["id"] == call.id


# -- a server that goes away ----------------------------------------------------------------------


def test_a_dying_server_fails_every_pending_call_at_once(open_fake) -> None:
    session = open_fake()
    hanging = threading.Event()
    outcome: dict[str, Any] = {}
    patient = LONG * 3  # the calls' own deadline: failing before it proves the death was noticed
    first = start_thread(
        capture(outcome, "hang", lambda: session.call_tool("hang", progress=lambda *_: hanging.set(), timeout=patient)),
        "test-pending-call",
    )
    assert hanging.wait(LONG), "the fake never received the first call"
    start = time.monotonic()
    second = start_thread(capture(outcome, "die", lambda: session.call_tool("die", timeout=patient)), "test-dying-call")
    second.join(LONG)
    first.join(LONG)
    assert not first.is_alive() and not second.is_alive()
    assert isinstance(outcome["hang"], ConnectionLost), outcome
    assert isinstance(outcome["die"], ConnectionLost), outcome
    assert time.monotonic() - start < LONG
    later = time.monotonic()
    with pytest.raises(ConnectionLost):
        session.call_tool("echo", {"text": "anyone?"}, timeout=patient)
    assert time.monotonic() - later < LONG


def test_a_connection_lost_error_names_the_server(open_fake) -> None:
    session = open_fake()
    with pytest.raises(ConnectionLost) as raised:
        session.call_tool("die")
    assert sys.executable in str(raised.value)


def test_a_call_to_a_server_that_stopped_reading_still_ends_by_its_deadline(open_fake) -> None:
    session = open_fake()
    pid = fake_pid(session)
    session.call_tool("deafen")  # answered; from now on the fake reads nothing
    outcome: dict[str, Any] = {}
    caller = start_thread(capture(outcome, "call", lambda: session.call_tool("echo", {"text": "x" * BIG}, timeout=0.5)), "test-big-call")
    try:
        caller.join(LONG)
        assert not caller.is_alive(), "call_tool(timeout=0.5) was still blocked after LONG"
        assert isinstance(outcome["call"], (CallTimeout, ConnectionLost)), outcome
    finally:
        kill(pid)  # unblocks the write (EPIPE) so no thread is left behind
        caller.join(LONG)


def test_a_send_to_a_server_that_stopped_reading_returns_at_once_and_close_stays_bounded() -> None:
    connection = StdioConnection(command(), close_grace=0.2)
    session = ClientSession(connection, timeout=LONG).open()
    pid = fake_pid(session)
    session.call_tool("deafen")  # answered; from now on the fake reads nothing
    try:
        sent_at = time.monotonic()
        pending = session.start_request("tools/call", {"name": "echo", "arguments": {"text": "x" * BIG}}, timeout=LONG * 3)
        # BIG is more than the pipe holds: the rest waits for the connection's writer thread,
        # not for the caller (a gateway's reader forwarding a call must never wait on a child).
        assert time.monotonic() - sent_at < LONG
        assert not pending.done()
        assert "mcpsync-client-writer" in [thread.name for thread in threading.enumerate()]
        closer = start_thread(session.close, "test-closer")
        closer.join(LONG)
        assert not closer.is_alive(), "close() was still blocked after LONG"
        assert process_gone(pid)
        with pytest.raises(SessionClosed):
            pending.result(0)
        assert "mcpsync-client-writer" not in [thread.name for thread in threading.enumerate()]
    finally:
        kill(pid)
        session.close()


# -- server-to-client requests (handshake era) ----------------------------------------------------


def test_the_client_answers_ping(open_fake) -> None:
    session = open_fake(mode="legacy")
    response = ask(session, "ping")
    assert response["result"] == {}
    assert response["id"] == "s-1"


def test_registered_callbacks_answer_the_server_and_declare_capabilities(open_fake) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def roots(params: dict[str, Any]) -> dict[str, Any]:
        calls.append(("roots", params))
        return {"roots": [{"uri": "file:///work", "name": "work"}]}

    def sampling(params: dict[str, Any]) -> dict[str, Any]:
        calls.append(("sampling", params))
        return {"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "fake-model"}

    def elicitation(params: dict[str, Any]) -> dict[str, Any]:
        calls.append(("elicitation", params))
        return {"action": "accept", "content": {"name": "Ada"}}

    session = open_fake(mode="legacy", roots=roots, sampling=sampling, elicitation=elicitation)
    (initialize,) = received(session, "initialize")
    assert set(initialize["params"]["capabilities"]) == {"roots", "sampling", "elicitation"}

    assert ask(session, "roots/list")["result"] == {"roots": [{"uri": "file:///work", "name": "work"}]}
    sample_params = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}
    assert ask(session, "sampling/createMessage", sample_params)["result"]["content"]["text"] == "sampled"
    elicit_params = {"message": "Your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}
    assert ask(session, "elicitation/create", elicit_params)["result"] == {"action": "accept", "content": {"name": "Ada"}}
    assert calls == [("roots", {}), ("sampling", sample_params), ("elicitation", elicit_params)]


@pytest.mark.parametrize("method", ["roots/list", "sampling/createMessage", "elicitation/create", "some/other"])
def test_a_request_without_a_callback_is_method_not_found(open_fake, method: str) -> None:
    session = open_fake(mode="legacy")
    (initialize,) = received(session, "initialize")
    assert initialize["params"]["capabilities"] == {}
    response = ask(session, method, {})
    assert response["error"]["code"] == -32601
    assert method in response["error"]["message"]


def test_a_callback_mcp_error_is_the_answer(open_fake) -> None:
    def elicitation(params: dict[str, Any]) -> dict[str, Any]:
        raise McpError(-32042, "the user declined", {"reason": "busy"})

    session = open_fake(mode="legacy", elicitation=elicitation)
    error = ask(session, "elicitation/create", {"message": "?"})["error"]
    assert error == {"code": -32042, "message": "the user declined", "data": {"reason": "busy"}}


def test_a_crashing_callback_is_an_internal_error_without_its_text(open_fake) -> None:
    def roots(params: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("secret detail")

    session = open_fake(mode="legacy", roots=roots)
    error = ask(session, "roots/list")["error"]
    assert error["code"] == -32603
    assert "secret detail" not in error["message"]


def test_callbacks_run_off_the_reader_so_they_may_call_the_server(open_fake) -> None:
    holder: dict[str, ClientSession] = {}

    def sampling(params: dict[str, Any]) -> dict[str, Any]:
        text = holder["session"].call_tool("echo", {"text": "from the callback"}, timeout=LONG)["content"][0]["text"]
        return {"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"}

    # The fake is single-threaded: it must be free to answer the callback's call, so the ask is
    # answered only after the callback's echo; the reader must not be the thread running it.
    session = open_fake(mode="legacy", sampling=sampling)
    holder["session"] = session
    response = ask(session, "sampling/createMessage", {"messages": [], "maxTokens": 1})
    assert response["result"]["content"]["text"] == "from the callback"


def test_a_flood_of_server_requests_runs_on_a_bounded_pool_and_each_gets_one_answer(open_fake) -> None:
    """A server that sends many questions at once: MAX_CALLBACKS run, CALLBACK_BACKLOG wait, the
    rest are refused -32603 at once; no thread per request, and every request one answer."""
    from mcpsync.client import _server_requests

    running, most = 0, 0
    lock, release = threading.Condition(), threading.Event()

    def roots(params: dict[str, Any]) -> dict[str, Any]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            lock.notify_all()
        release.wait(LONG)
        with lock:
            running -= 1
        return {"roots": []}

    workers, backlog = _server_requests.MAX_CALLBACKS, _server_requests.CALLBACK_BACKLOG
    count = workers + backlog + 60
    before = set(threading.enumerate())
    session = open_fake(mode="legacy", roots=roots)
    outcome: dict[str, Any] = {}
    asker = start_thread(capture(outcome, "ask", lambda: session.request("fake/ask_many", {"method": "roots/list", "count": count})), "test-asker")
    try:
        with lock:
            assert lock.wait_for(lambda: running == workers, LONG)
        received(session)  # its answer follows every question on the pipe: all are dispatched now
        callbacks = [t for t in set(threading.enumerate()) - before if t.name.startswith("mcpsync-client-callback")]
        assert len(callbacks) == workers
    finally:
        release.set()
        asker.join(LONG)
    responses = outcome["ask"]["responses"]
    assert sorted(r["id"] for r in responses) == sorted(f"m-{n}" for n in range(1, count + 1))
    answered = [r for r in responses if "result" in r]
    refused = [r for r in responses if "error" in r]
    assert len(answered) == workers + backlog and all(r["result"] == {"roots": []} for r in answered)
    assert len(refused) == count - workers - backlog
    assert all(r["error"]["code"] == -32603 and "busy" in r["error"]["message"] for r in refused)
    assert most == workers


# -- closing --------------------------------------------------------------------------------------


def test_close_stops_the_child_and_is_idempotent(open_fake) -> None:
    session = open_fake()
    pid = fake_pid(session)
    session.close()
    assert process_gone(pid)
    session.close()
    with pytest.raises(SessionClosed) as raised:
        session.call_tool("echo", {"text": "late"})
    assert isinstance(raised.value, RuntimeError)


def test_the_context_manager_closes(open_fake) -> None:
    with mcpsync.connect(command(), timeout=LONG) as session:
        pid = fake_pid(session)
    assert process_gone(pid)
    with pytest.raises(SessionClosed):
        session.list_tools()


def test_close_fails_a_pending_call_at_once(open_fake) -> None:
    session = open_fake()
    hanging = threading.Event()
    outcome: dict[str, Any] = {}
    caller = start_thread(
        capture(outcome, "call", lambda: session.call_tool("hang", progress=lambda *_: hanging.set(), timeout=LONG * 3)),
        "test-pending-call",
    )
    assert hanging.wait(LONG)
    start = time.monotonic()
    session.close()
    caller.join(LONG)
    assert isinstance(outcome["call"], SessionClosed), outcome
    assert time.monotonic() - start < LONG


@pytest.mark.parametrize(
    "flags",
    [("linger",), ("linger", "ignore-term")],
    ids=["ignores-eof", "ignores-eof-and-sigterm"],
)
def test_close_stops_a_child_that_will_not_exit(flags: tuple[str, ...]) -> None:
    connection = StdioConnection(command(*flags), close_grace=0.2)
    session = ClientSession(connection, timeout=LONG).open()
    pid = fake_pid(session)
    start = time.monotonic()
    session.close()
    assert time.monotonic() - start < LONG
    assert process_gone(pid)
