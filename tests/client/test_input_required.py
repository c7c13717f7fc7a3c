"""2026-07-28 `input_required` results answered by the session's callbacks, over stdio and HTTP.

The stdio tests script the fake server (`fake/script`): each "scripted" call takes the next queued
result, and what the client sent is read back with `fake/received`. The HTTP tests script the mock
server with a route. The same callbacks answer handshake-era server requests (last section), so a
script sees one API in both eras. Every wait is an Event or a bounded join; the two deadline tests
measure time, with margins far wider than the difference they prove.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import mcpsync
from mcpsync import CallTimeout, McpError, McpsyncError, ProtocolViolation, SessionClosed
from mcpsync.client import ClientSession
from mcpsync.client import _input_required as input_rounds
from mcpsync.client._input_required import MAX_INPUT_ROUNDS
from mcpsync.client.http import HttpConnection
from mcpsync import InputRoundsExceeded, MissingCallback

from .._timeouts import LONG, SHORT
from .fake_server import ask, received, script
from .mock_http_server import MODERN, META_PROTOCOL_VERSION, MockServer, Recorded, Reply

pytestmark = pytest.mark.timeout(60)

META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ELICIT = {"method": "elicitation/create", "params": {"mode": "form", "message": "What is your name?", "requestedSchema": NAME_SCHEMA}}
SAMPLE = {"method": "sampling/createMessage", "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}], "maxTokens": 100}}
ROOTS = {"method": "roots/list"}
ACCEPT = {"action": "accept", "content": {"name": "Ada"}}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris."}, "model": "test-model", "stopReason": "endTurn"}
ROOT_LIST = {"roots": [{"uri": "file:///work", "name": "work"}]}
# Quotes, backslashes, base64 punctuation, non-ASCII, a line separator: echoed exactly or not at all.
STATE = 'ms1.eyJ2IjoxfQ+/==."quoted" \\back\\slash é 🙂 \u2028 end'

# (session method, its arguments, the wire method, the original params)
CALLS = {
    "call_tool": (("scripted", {"city": "Paris"}), "tools/call", {"name": "scripted", "arguments": {"city": "Paris"}}),
    "get_prompt": (("scripted", {"topic": "x"}), "prompts/get", {"name": "scripted", "arguments": {"topic": "x"}}),
    "read_resource": (("fake://scripted",), "resources/read", {"uri": "fake://scripted"}),
}


def input_required(requests: dict[str, Any] | None = None, state: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"resultType": "input_required"}
    if requests is not None:
        result["inputRequests"] = requests
    if state is not None:
        result["requestState"] = state
    return result


class Recorder:
    """Callbacks that record what they were asked and answer fixed results."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def elicitation(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("elicitation", params))
        return ACCEPT

    def sampling(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("sampling", params))
        return SAMPLED

    def roots(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("roots", params))
        return ROOT_LIST

    def all(self) -> dict[str, Any]:
        return {"elicitation": self.elicitation, "sampling": self.sampling, "roots": self.roots}


@pytest.fixture
def open_fake(open_fake: Callable[..., ClientSession]) -> Callable[..., ClientSession]:
    """The shared `open_fake`, opening 2026-07-28 sessions unless told otherwise."""
    return lambda *flags, **options: open_fake(*flags, **{"mode": "modern", **options})


def sent(session: ClientSession, wire_method: str) -> list[dict[str, Any]]:
    """The requests of `wire_method` the fake has read, "scripted" ones only."""
    return [m for m in received(session, wire_method) if m["params"].get("name", m["params"].get("uri")) in ("scripted", "fake://scripted")]


def without_meta(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != "_meta"}


# -- stdio: the rounds ----------------------------------------------------------------------------
@pytest.mark.parametrize("call", sorted(CALLS))
def test_one_elicitation_round_is_answered_and_retried(open_fake, call: str) -> None:
    args, wire_method, original = CALLS[call]
    recorder = Recorder()
    session = open_fake(elicitation=recorder.elicitation)
    script(session, input_required({"user_name": ELICIT}))

    result = getattr(session, call)(*args)

    assert result["resultType"] == "complete" and result["echo"]["inputResponses"] == {"user_name": ACCEPT}
    assert recorder.calls == [("elicitation", ELICIT["params"])]
    first, retry = sent(session, wire_method)
    assert without_meta(first["params"]) == original
    assert without_meta(retry["params"]) == {**original, "inputResponses": {"user_name": ACCEPT}}  # no requestState: none sent


def test_several_rounds_echo_each_state_exactly_and_send_only_that_rounds_answers(open_fake) -> None:
    answers = iter([{"action": "accept", "content": {"name": "Ada"}}, {"action": "accept", "content": {"color": "blue"}}])
    session = open_fake(elicitation=lambda params: next(answers))
    step2 = {"method": "elicitation/create", "params": {"message": "Favourite colour?", "requestedSchema": NAME_SCHEMA}}
    script(session, input_required({"step1": ELICIT}, STATE), input_required({"step2": step2}, STATE + " round 2"))

    result = session.call_tool("scripted", {"city": "Paris"})

    assert result["resultType"] == "complete"
    first, second, third = sent(session, "tools/call")
    original = {"name": "scripted", "arguments": {"city": "Paris"}}
    assert without_meta(first["params"]) == original
    assert without_meta(second["params"]) == {
        **original, "inputResponses": {"step1": {"action": "accept", "content": {"name": "Ada"}}}, "requestState": STATE,
    }
    assert without_meta(third["params"]) == {
        **original, "inputResponses": {"step2": {"action": "accept", "content": {"color": "blue"}}}, "requestState": STATE + " round 2",
    }


def test_every_retry_is_a_new_request_with_a_fresh_envelope(open_fake) -> None:
    recorder = Recorder()
    session = open_fake(client_info={"name": "probe", "version": "9"}, log_level="info", **recorder.all())
    script(session, input_required({"a": ELICIT}, "s1"), input_required({"b": ROOTS}, "s2"), input_required(state="s3"))

    session.call_tool("scripted", {"city": "Paris"})

    requests = sent(session, "tools/call")
    assert len(requests) == 4
    ids = [r["id"] for r in requests]
    assert len(set(ids)) == len(ids)
    for request in requests:
        meta = request["params"]["_meta"]
        assert meta[META_PROTOCOL_VERSION] == MODERN
        assert meta[META_CAPABILITIES] == session.capabilities == {"roots": {}, "sampling": {}, "elicitation": {}}
        assert meta[META_CLIENT_INFO] == {"name": "probe", "version": "9"}
        assert meta["io.modelcontextprotocol/logLevel"] == "info"


def test_all_three_kinds_in_one_round_get_their_callbacks_in_the_servers_order(open_fake) -> None:
    recorder = Recorder()
    session = open_fake(**recorder.all())
    script(session, input_required({"login": ELICIT, "capital": SAMPLE, "where": ROOTS}, "s"))

    session.call_tool("scripted")

    # The same params a handshake-era request would carry: roots/list without params gets {}.
    assert recorder.calls == [("elicitation", ELICIT["params"]), ("sampling", SAMPLE["params"]), ("roots", {})]
    _, retry = sent(session, "tools/call")
    assert retry["params"]["inputResponses"] == {"login": ACCEPT, "capital": SAMPLED, "where": ROOT_LIST}
    assert retry["params"]["requestState"] == "s"


def test_a_state_only_result_is_retried_with_its_state_after_a_short_wait(open_fake) -> None:
    session = open_fake()  # no callbacks needed: nothing is asked
    script(session, input_required(state="busy, come back"))

    started = time.monotonic()
    result = session.call_tool("scripted")

    assert time.monotonic() - started >= input_rounds.STATE_ONLY_FIRST_WAIT
    assert result["resultType"] == "complete"
    _, retry = sent(session, "tools/call")
    assert without_meta(retry["params"]) == {"name": "scripted", "arguments": {}, "requestState": "busy, come back"}


class _WatchedEvent(threading.Event):
    """The session's wake-up event, telling the test when someone starts waiting on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        return super().wait(timeout)


def test_close_ends_the_state_only_wait_at_once(open_fake, monkeypatch) -> None:
    monkeypatch.setattr(input_rounds, "STATE_ONLY_FIRST_WAIT", LONG * 2)
    session = open_fake(timeout=LONG * 4)
    session._ending = _WatchedEvent()
    script(session, input_required(state="busy"))
    outcome: dict[str, Any] = {}

    def call() -> None:
        try:
            outcome["result"] = session.call_tool("scripted")
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome["error"] = exc

    thread = threading.Thread(target=call, name="test-caller")
    thread.start()
    assert session._ending.waiting.wait(LONG)
    started = time.monotonic()
    session.close()
    thread.join(LONG)
    assert not thread.is_alive() and time.monotonic() - started < LONG
    assert isinstance(outcome.get("error"), SessionClosed)


# -- stdio: failures ------------------------------------------------------------------------------
def test_a_question_without_its_callback_fails_the_call_before_any_callback(open_fake) -> None:
    recorder = Recorder()
    session = open_fake(elicitation=recorder.elicitation)
    script(session, input_required({"login": ELICIT, "capital": SAMPLE}, "s"))

    with pytest.raises(MissingCallback) as raised:
        session.call_tool("scripted")

    assert "sampling" in str(raised.value) and isinstance(raised.value, ProtocolViolation)
    assert recorder.calls == []
    assert len(sent(session, "tools/call")) == 1  # no retry


def test_a_callback_mcp_error_fails_the_call_without_retry(open_fake) -> None:
    refusal = McpError(-32000, "the user closed the dialog", {"why": "busy"})

    def elicitation(params: dict[str, Any]) -> dict[str, Any]:
        raise refusal

    session = open_fake(elicitation=elicitation)
    script(session, input_required({"login": ELICIT}, "s"))

    with pytest.raises(McpError) as raised:
        session.call_tool("scripted")

    assert raised.value is refusal
    assert len(sent(session, "tools/call")) == 1


@pytest.mark.parametrize("limit", [MAX_INPUT_ROUNDS, 0, 2])
def test_more_rounds_than_the_limit_fail_the_call_naming_it(open_fake, limit: int) -> None:
    recorder = Recorder()
    options = {} if limit == MAX_INPUT_ROUNDS else {"max_input_rounds": limit}
    session = open_fake(elicitation=recorder.elicitation, **options)
    script(session, *[input_required({f"q{i}": ELICIT}, f"s{i}") for i in range(limit + 1)])

    with pytest.raises(InputRoundsExceeded) as raised:
        session.call_tool("scripted")

    assert str(limit) in str(raised.value) and "max_input_rounds" in str(raised.value)
    assert isinstance(raised.value, McpsyncError)
    assert len(sent(session, "tools/call")) == limit + 1
    assert len(recorder.calls) == limit


def test_the_limit_allows_exactly_that_many_rounds(open_fake) -> None:
    session = open_fake(elicitation=Recorder().elicitation, max_input_rounds=2)
    script(session, input_required({"a": ELICIT}), input_required({"b": ELICIT}))
    assert session.call_tool("scripted")["resultType"] == "complete"


def test_the_deadline_covers_every_round(open_fake) -> None:
    """A slow callback (1 s) and a retry nobody answers: the call ends 1.5 s after it began, not
    1.5 s after the retry was sent."""
    never = threading.Event()

    def elicitation(params: dict[str, Any]) -> dict[str, Any]:
        never.wait(1.0)
        return ACCEPT

    session = open_fake(elicitation=elicitation)
    script(session, input_required({"login": ELICIT}, "s"), "hang")

    started = time.monotonic()
    with pytest.raises(CallTimeout) as raised:
        session.call_tool("scripted", timeout=1.5)
    elapsed = time.monotonic() - started

    assert 1.5 <= elapsed < 2.4, elapsed
    assert "1.5 s" in str(raised.value)
    _, retry = sent(session, "tools/call")
    cancels = [m["params"]["requestId"] for m in received(session, "notifications/cancelled")]
    assert retry["id"] in cancels  # the unanswered retry was withdrawn on the wire


def test_a_callback_running_past_the_deadline_fails_the_call_without_retry(open_fake) -> None:
    never = threading.Event()

    def elicitation(params: dict[str, Any]) -> dict[str, Any]:
        never.wait(SHORT * 2)
        return ACCEPT

    session = open_fake(elicitation=elicitation)
    script(session, input_required({"login": ELICIT}, "s"))

    with pytest.raises(CallTimeout):
        session.call_tool("scripted", timeout=SHORT)
    assert len(sent(session, "tools/call")) == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"resultType": "input_required"},
        input_required({}),
        input_required({"x": {"method": "ping"}}, "s"),
        input_required({"x": {"method": ["roots/list"]}}, "s"),
        input_required({"x": "not a request"}, "s"),
        input_required({"x": {"method": "roots/list", "params": [1]}}, "s"),
        {"resultType": "input_required", "requestState": 42},
    ],
)
def test_a_malformed_input_required_result_is_a_protocol_violation(open_fake, bad: dict[str, Any]) -> None:
    session = open_fake(**Recorder().all())
    script(session, bad)
    with pytest.raises(ProtocolViolation):
        session.call_tool("scripted")
    assert len(sent(session, "tools/call")) == 1


def test_the_raw_request_returns_input_required_as_it_is(open_fake) -> None:
    """A gateway relays `input_required` to its own client, so `request()` must not follow it."""
    session = open_fake(elicitation=Recorder().elicitation)
    asked = input_required({"login": ELICIT}, "s")
    script(session, asked)
    assert session.request("tools/call", {"name": "scripted"}) == asked


# -- the same callback in both eras ---------------------------------------------------------------
def test_one_callback_answers_both_eras_with_the_same_params(open_fake) -> None:
    recorder = Recorder()
    legacy = open_fake(mode="legacy", elicitation=recorder.elicitation)
    modern = open_fake(mode="modern", elicitation=recorder.elicitation)

    assert ask(legacy, "elicitation/create", ELICIT["params"])["result"] == ACCEPT
    script(modern, input_required({"login": ELICIT}))
    modern.call_tool("scripted")

    assert recorder.calls == [("elicitation", ELICIT["params"])] * 2
    (initialize,) = received(legacy, "initialize")
    (first, _) = sent(modern, "tools/call")
    assert initialize["params"]["capabilities"] == first["params"]["_meta"][META_CAPABILITIES] == {"elicitation": {}}


# -- HTTP -----------------------------------------------------------------------------------------
def http_session(url: str, mode: str, **options: Any) -> ClientSession:
    return ClientSession(HttpConnection(url), mode=mode, timeout=LONG, **options).open()


def test_http_rounds_are_new_posts_with_routing_headers_envelope_and_state() -> None:
    recorder = Recorder()
    with MockServer() as server:

        @server.route("tools/call")
        def scripted(request: Recorded, reply: Reply) -> None:
            rounds = len(server.posts("tools/call"))
            if rounds == 1:
                return reply.result(request.rpc_id, input_required({"login": ELICIT, "where": ROOTS}, STATE))
            if rounds == 2:
                return reply.result(request.rpc_id, input_required({"capital": SAMPLE}))
            reply.start_sse()  # the final answer on a stream, as a server may send it
            reply.event({"jsonrpc": "2.0", "id": request.rpc_id, "result": {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}})

        with http_session(server.url, "modern", **recorder.all()) as client:
            result = client.call_tool("echo", {"city": "Paris"})
            capabilities = client.capabilities

    assert result["content"][0]["text"] == "done"
    assert recorder.calls == [("elicitation", ELICIT["params"]), ("roots", {}), ("sampling", SAMPLE["params"])]
    first, second, third = server.posts("tools/call")
    assert len({first.rpc_id, second.rpc_id, third.rpc_id}) == 3
    for post in (first, second, third):
        assert post.header("Mcp-Method") == "tools/call" and post.header("Mcp-Name") == "echo"
        assert post.header("MCP-Protocol-Version") == MODERN and post.header("Mcp-Session-Id") is None
        assert post.params["_meta"][META_PROTOCOL_VERSION] == MODERN
        assert post.params["_meta"][META_CAPABILITIES] == capabilities
        assert post.params["arguments"] == {"city": "Paris"}
    assert "inputResponses" not in first.params and "requestState" not in first.params
    assert second.params["inputResponses"] == {"login": ACCEPT, "where": ROOT_LIST}
    assert second.params["requestState"] == STATE
    assert third.params["inputResponses"] == {"capital": SAMPLED} and "requestState" not in third.params


def test_http_a_missing_callback_fails_without_a_retry_post() -> None:
    with MockServer() as server:

        @server.route("tools/call")
        def ask_roots(request: Recorded, reply: Reply) -> None:
            reply.result(request.rpc_id, input_required({"where": ROOTS}, "s"))

        with http_session(server.url, "modern", elicitation=Recorder().elicitation) as client:
            with pytest.raises(MissingCallback, match="roots"):
                client.call_tool("echo")
    assert len(server.posts("tools/call")) == 1


def test_http_handshake_era_elicitation_on_a_post_stream_is_answered_by_post() -> None:
    """The handshake-era form of the same question: a request on the tools/call stream, answered
    by the same callback, its result POSTed back with the session id."""
    recorder = Recorder()
    with MockServer() as server:

        def answered() -> list[Recorded]:
            return [r for r in server.posts() if r.rpc_id == "srv-1" and r.rpc_method is None]

        @server.route("tools/call")
        def elicit_first(request: Recorded, reply: Reply) -> None:
            reply.start_sse()
            reply.event({"jsonrpc": "2.0", "id": "srv-1", "method": "elicitation/create", "params": ELICIT["params"]})
            text = "answered" if server.seen(answered) else "no answer"
            reply.event({"jsonrpc": "2.0", "id": request.rpc_id, "result": {"content": [{"type": "text", "text": text}]}})

        with http_session(server.url, "legacy", elicitation=recorder.elicitation) as client:
            assert client.call_tool("echo")["content"][0]["text"] == "answered"
            session_id = client._connection.session_id
        (initialize,) = server.posts("initialize")

    assert initialize.params["capabilities"] == {"elicitation": {}}
    assert recorder.calls == [("elicitation", ELICIT["params"])]
    (answer,) = answered()
    assert answer.message == {"jsonrpc": "2.0", "id": "srv-1", "result": ACCEPT}
    assert session_id is not None and answer.header("Mcp-Session-Id") == session_id
    assert answer.header("MCP-Protocol-Version") == "2025-06-18"
