"""Server-to-client requests over stdio (handshake era): `ctx.elicit`, `ctx.sample`, `ctx.roots`.

Driven over real pipes (`PipeClient`): the test plays the client, reads the server's request off
the wire and answers it with a JSON-RPC response. Ordering comes from frames and events, never from
sleeping: a tool's request on the wire proves it is waiting, a ping answered proves the reader
handled everything sent before it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import pytest

from mcpsync import AskTimeout, Context, McpError, McpsyncError, Question, Server, Service
from mcpsync.engine.session import Session
from mcpsync.protocol.jsonrpc import Request
from mcpsync.protocol.versions import Era
from mcpsync.transport.stdio._output import Output
from mcpsync.transport.stdio._exchange import Asks as _Asks, Exchange as _Exchange

from .._timeouts import LONG, SHORT
from .pipes import PipeClient, modern

pytestmark = pytest.mark.timeout(60)

ALL_CAPABILITIES = {"elicitation": {}, "sampling": {}, "roots": {"listChanged": True}}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ACCEPT = {"action": "accept", "content": {"name": "Ada"}}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "test-model", "stopReason": "endTurn"}
ROOTS = {"roots": [{"uri": "file:///work", "name": "Work"}]}


# -- helpers ----------------------------------------------------------------------------------------

def handshake(client: PipeClient, capabilities: dict[str, Any] | None = None) -> None:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": ALL_CAPABILITIES if capabilities is None else capabilities,
        "clientInfo": {"name": "t", "version": "1"},
    }
    response, _ = client.request("initialize", params, id="init")
    assert "result" in response, response
    client.notify("notifications/initialized")


def is_request(frame: dict[str, Any]) -> bool:
    return "method" in frame and "id" in frame


def next_request(client: PipeClient) -> dict[str, Any]:
    """The next frame, which must be a request from the server."""
    frame = client.recv()
    assert is_request(frame), f"expected a request from the server, got {frame}"
    return frame


def answer(client: PipeClient, request_id: Any, result: Any) -> None:
    client.send({"jsonrpc": "2.0", "id": request_id, "result": result})


def answer_error(client: PipeClient, request_id: Any, code: int, message: str, data: Any = None) -> None:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    client.send({"jsonrpc": "2.0", "id": request_id, "error": error})


def response_to(client: PipeClient, request_id: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Frames up to the response to `request_id`: (the response, the frames before it)."""
    before = []
    while True:
        frame = client.recv()
        if "method" not in frame and frame.get("id") == request_id and type(frame.get("id")) is type(request_id):
            return frame, before
        before.append(frame)


def text_of(response: dict[str, Any]) -> str:
    assert "result" in response, response
    return response["result"]["content"][0]["text"]


def call(client: PipeClient, name: str, request_id: Any, arguments: dict[str, Any] | None = None) -> None:
    client.request_nowait("tools/call", {"name": name, "arguments": arguments or {}}, id=request_id)


def cancelled_notifications(frames: list[dict[str, Any]]) -> list[Any]:
    return [f["params"]["requestId"] for f in frames if f.get("method") == "notifications/cancelled" and "id" not in f]


class Record:
    """What a tool saw, reported back to the test thread."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.value: Any = None


def asking_service(record: Record | None = None) -> Service:
    service = Service("asks")

    @service.tool
    def elicit_name(ctx: Context, prompt: str = "Your name?") -> str:
        return json.dumps(ctx.elicit(prompt, SCHEMA))

    @service.tool
    def sample_capital(ctx: Context) -> str:
        return ctx.sample("What is the capital of France?", max_tokens=20)["content"]["text"]

    @service.tool
    def list_roots(ctx: Context) -> str:
        return json.dumps(ctx.roots())

    @service.tool
    def elicit_catching(ctx: Context) -> str:
        try:
            ctx.elicit("Your name?", SCHEMA)
        except McpError as exc:
            return f"McpError {exc.code} {exc.message} {json.dumps(exc.data)}"
        return "no error"

    @service.tool
    def elicit_recorded(ctx: Context) -> str:
        assert record is not None
        started = time.monotonic()
        try:
            record.value = ctx.elicit("Your name?", SCHEMA)
        except BaseException as exc:
            record.error = exc
            record.value = time.monotonic() - started
            raise
        finally:
            record.done.set()
        return "answered"

    @service.tool
    def ask_three(ctx: Context) -> str:
        answers = ctx.ask(Question.elicitation("Name?", SCHEMA), Question.sampling("Hi", max_tokens=5), Question.roots())
        return json.dumps(answers)

    return service


# -- round trips ------------------------------------------------------------------------------------

def test_an_elicitation_round_trip_reaches_the_tool() -> None:
    with PipeClient(Server("api", services=[asking_service()])) as client:
        handshake(client)
        call(client, "elicit_name", 2, {"prompt": "Who are you?"})
        request = next_request(client)
        assert set(request) == {"jsonrpc", "id", "method", "params"}
        assert request["jsonrpc"] == "2.0"
        assert isinstance(request["id"], str) and request["id"].startswith("mcpsync-")
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "Who are you?"
        assert request["params"]["requestedSchema"] == SCHEMA
        answer(client, request["id"], ACCEPT)
        response, before = response_to(client, 2)
        assert before == []
        assert json.loads(text_of(response)) == ACCEPT


def test_a_sampling_round_trip_reaches_the_tool() -> None:
    with PipeClient(Server("api", services=[asking_service()])) as client:
        handshake(client)
        call(client, "sample_capital", 2)
        request = next_request(client)
        assert request["method"] == "sampling/createMessage"
        assert request["params"] == {
            "messages": [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
            "maxTokens": 20,
        }
        answer(client, request["id"], SAMPLED)
        response, _ = response_to(client, 2)
        assert text_of(response) == "Paris"


def test_a_roots_round_trip_reaches_the_tool() -> None:
    with PipeClient(Server("api", services=[asking_service()])) as client:
        handshake(client)
        call(client, "list_roots", 2)
        request = next_request(client)
        assert request["method"] == "roots/list"
        assert request["params"] == {}
        answer(client, request["id"], ROOTS)
        response, _ = response_to(client, 2)
        assert json.loads(text_of(response)) == ROOTS["roots"]


def test_questions_asked_together_go_out_together_with_distinct_ids() -> None:
    with PipeClient(Server("api", services=[asking_service()])) as client:
        handshake(client)
        call(client, "ask_three", 2)
        requests = [next_request(client) for _ in range(3)]
        assert [r["method"] for r in requests] == ["elicitation/create", "sampling/createMessage", "roots/list"]
        assert len({r["id"] for r in requests}) == 3
        for request, result in reversed(list(zip(requests, [ACCEPT, SAMPLED, ROOTS]))):
            answer(client, request["id"], result)
        response, _ = response_to(client, 2)
        assert json.loads(text_of(response)) == [ACCEPT, SAMPLED, ROOTS["roots"]]


def test_ids_are_fresh_for_every_request_on_the_connection() -> None:
    with PipeClient(Server("api", services=[asking_service()])) as client:
        handshake(client)
        seen = []
        for n in range(3):
            call(client, "list_roots", n + 10)
            request = next_request(client)
            seen.append(request["id"])
            answer(client, request["id"], ROOTS)
            response_to(client, n + 10)
        assert len(set(seen)) == 3


# -- errors -----------------------------------------------------------------------------------------

def test_an_error_answer_reaches_the_tool_as_mcp_error() -> None:
    with PipeClient(Server("api", services=[asking_service()])) as client:
        handshake(client)
        call(client, "elicit_catching", 2)
        request = next_request(client)
        answer_error(client, request["id"], -32600, "User rejected", {"why": "busy"})
        response, _ = response_to(client, 2)
        assert text_of(response) == 'McpError -32600 User rejected {"why": "busy"}'


def test_an_uncaught_error_answer_fails_the_call() -> None:
    with PipeClient(Server("api", services=[asking_service()])) as client:
        handshake(client)
        call(client, "elicit_name", 2)
        request = next_request(client)
        answer_error(client, request["id"], -32601, "Method not found")
        response, _ = response_to(client, 2)
        failed = response.get("error") or (response["result"]["isError"] and response["result"])
        assert failed, response
        assert "Method not found" in json.dumps(response)


def test_a_result_that_is_not_an_object_is_an_error_for_the_tool() -> None:
    with PipeClient(Server("api", services=[asking_service()])) as client:
        handshake(client)
        call(client, "elicit_catching", 2)
        request = next_request(client)
        answer(client, request["id"], None)
        response, _ = response_to(client, 2)
        assert text_of(response).startswith("McpError -32603 ")
        assert "not an object" in text_of(response)


def test_a_response_with_an_unknown_id_is_ignored() -> None:
    with PipeClient(Server("api", services=[asking_service()])) as client:
        handshake(client)
        call(client, "elicit_name", 2)
        request = next_request(client)
        for stray in ("mcpsync-999", 1, "init", 2):
            answer(client, stray, ACCEPT)
        answer_error(client, "mcpsync-998", -1, "nobody asked")
        response, before = client.request("ping", {}, id="p")
        assert response == {"jsonrpc": "2.0", "id": "p", "result": {}}
        assert before == []  # the pending call was not answered by a stray
        answer(client, request["id"], {"action": "decline"})
        response, _ = response_to(client, 2)
        assert json.loads(text_of(response)) == {"action": "decline"}


def test_a_client_without_the_capability_is_refused_and_nothing_is_written() -> None:
    with PipeClient(Server("api", services=[asking_service()])) as client:
        handshake(client, capabilities={"sampling": {}})
        response, before = client.request("tools/call", {"name": "elicit_name", "arguments": {}}, id=2)
        assert not any(is_request(frame) for frame in before)
        assert "error" in response or response["result"]["isError"], response
        assert "elicitation" in json.dumps(response)
        client.expect_silence(SHORT)


# -- concurrency ------------------------------------------------------------------------------------

def test_concurrent_calls_answered_out_of_order_each_get_their_own_answer() -> None:
    count = 8
    with PipeClient(Server("api", services=[asking_service()])) as client:
        handshake(client)
        for n in range(count):
            call(client, "elicit_name", n, {"prompt": f"who-{n}"})
        requests = [next_request(client) for _ in range(count)]  # all waiting at once
        assert len({r["id"] for r in requests}) == count
        for request in reversed(requests):
            who = request["params"]["message"]
            answer(client, request["id"], {"action": "accept", "content": {"name": who}})
        answered = {}
        for _ in range(count):
            frame = client.recv()
            assert "method" not in frame, frame
            answered[frame["id"]] = json.loads(text_of(frame))["content"]["name"]
        assert answered == {n: f"who-{n}" for n in range(count)}


def test_answers_reach_tools_while_every_worker_waits_and_requests_queue_behind_them() -> None:
    with PipeClient(Server("api", services=[asking_service()], workers=2)) as client:
        handshake(client)
        call(client, "elicit_name", 1, {"prompt": "one"})
        call(client, "elicit_name", 2, {"prompt": "two"})
        requests = {r["params"]["message"]: r["id"] for r in (next_request(client), next_request(client))}
        # both workers wait for an answer, so this ping queues behind them; the answers must not
        client.request_nowait("ping", {}, id="p")
        answer(client, requests["two"], ACCEPT)
        answer(client, requests["one"], {"action": "cancel"})
        results = {}
        for _ in range(3):
            frame = client.recv()
            assert "method" not in frame, frame
            results[frame["id"]] = frame["result"]
        assert results["p"] == {}
        assert json.loads(results[1]["content"][0]["text"]) == {"action": "cancel"}
        assert json.loads(results[2]["content"][0]["text"]) == ACCEPT


# -- cancellation, end of input, shutdown -----------------------------------------------------------

def test_cancelling_the_call_cancels_the_servers_request_and_answers_nothing() -> None:
    record = Record()
    with PipeClient(Server("api", services=[asking_service(record)])) as client:
        handshake(client)
        call(client, "elicit_recorded", 7)
        request = next_request(client)
        client.notify("notifications/cancelled", {"requestId": 7, "reason": "user gave up"})
        frame = client.recv()
        assert frame == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request["id"], "reason": frame["params"]["reason"]},
        }
        assert isinstance(frame["params"]["reason"], str)
        assert record.done.wait(LONG)
        assert isinstance(record.error, McpsyncError) and not isinstance(record.error, McpError)
        answer(client, request["id"], ACCEPT)  # too late: ignored
        response, before = client.request("ping", {}, id="p")
        assert response["result"] == {}
        assert before == []  # no response to the cancelled call
        client.expect_silence(SHORT)


def test_a_timed_out_question_is_cancelled_on_the_wire() -> None:
    service = Service("slow")

    @service.tool
    def impatient(ctx: Context) -> str:
        try:
            ctx.elicit("Quick!", SCHEMA, timeout=0.2)
        except AskTimeout as exc:
            return f"gave up: {exc}"
        return "answered"

    with PipeClient(Server("api", services=[service])) as client:
        handshake(client)
        call(client, "impatient", 3)
        request = next_request(client)
        response, before = response_to(client, 3)
        assert cancelled_notifications(before) == [request["id"]]
        assert text_of(response).startswith("gave up:")
        answer(client, request["id"], ACCEPT)  # too late: ignored
        assert client.request("ping", {}, id="p")[0]["result"] == {}


def test_a_question_still_open_when_its_call_is_answered_is_failed_and_cancelled() -> None:
    service = Service("leaky")
    release = threading.Event()
    record = Record()
    helpers: list[threading.Thread] = []

    def ask_in_background(ctx: Context) -> None:
        try:
            record.value = ctx.elicit("Still there?", SCHEMA, timeout=LONG)
        except BaseException as exc:
            record.error = exc
        finally:
            record.done.set()

    @service.tool
    def leave_a_question(ctx: Context) -> str:
        helper = threading.Thread(target=ask_in_background, args=(ctx,), name="test-asker")
        helpers.append(helper)
        helper.start()
        assert release.wait(LONG)
        return "returned"

    with PipeClient(Server("api", services=[service])) as client:
        handshake(client)
        call(client, "leave_a_question", 4)
        request = next_request(client)
        release.set()
        response, _ = response_to(client, 4)
        assert text_of(response) == "returned"
        assert cancelled_notifications([client.recv()]) == [request["id"]]
        assert record.done.wait(LONG)
        assert isinstance(record.error, McpsyncError), record.error
        helpers[0].join(LONG)
        answer(client, request["id"], ACCEPT)  # too late: ignored
        assert client.request("ping", {}, id="p")[0]["result"] == {}


def test_end_of_input_ends_a_waiting_tool_promptly_and_the_server_exits() -> None:
    record = Record()
    server = Server("api", services=[asking_service(record)], ask_timeout=300.0)
    client = PipeClient(server)
    handshake(client)
    call(client, "elicit_recorded", 5)
    next_request(client)
    started = time.monotonic()
    client.close_input()
    assert record.done.wait(LONG), "the tool still waits for an answer after end of input"
    assert client.transport.wait(LONG), "the server did not stop"
    assert time.monotonic() - started < LONG
    assert isinstance(record.error, McpsyncError), record.error
    frames = client.finish()
    assert [f.get("id") for f in frames if "method" not in f] == [5]  # the call is still answered


def test_shutdown_ends_a_waiting_tool_and_answers_its_call() -> None:
    record = Record()
    server = Server("api", services=[asking_service(record)], ask_timeout=300.0)
    client = PipeClient(server)
    handshake(client)
    call(client, "elicit_recorded", 6)
    next_request(client)
    frames = client.stop()
    assert record.done.is_set()
    assert isinstance(record.error, McpsyncError), record.error
    responses = [f for f in frames if "method" not in f]
    assert [f["id"] for f in responses] == [6]


# -- 2026-07-28: never a request on the wire --------------------------------------------------------

def test_a_2026_connection_never_sees_a_request_from_the_server() -> None:
    with PipeClient(Server("api", services=[asking_service()])) as client:
        params = modern({"name": "elicit_name", "arguments": {}})
        params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = ALL_CAPABILITIES
        response, before = client.request("tools/call", params, id=1)
        assert not any(is_request(frame) for frame in before)
        assert "result" in response or "error" in response
        for name in ("sample_capital", "list_roots", "ask_three"):
            params = modern({"name": name, "arguments": {}})
            params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = ALL_CAPABILITIES
            response, before = client.request("tools/call", params, id=name)
            assert not any(is_request(frame) for frame in before)
        client.expect_silence(SHORT)


# -- the exchange itself: refusals write nothing ----------------------------------------------------

class Wire:
    """An `_Asks` on a real pipe, with what reached the pipe."""

    def __init__(self, era: Era | None) -> None:
        self.read_fd, write_fd = os.pipe()
        self._write_fd = write_fd
        os.set_blocking(self.read_fd, False)
        self.output = Output(write_fd, lambda: None)
        self.session = Session()
        if era is not None:
            self.session.commit_era(era)
        self.asks = _Asks(self.output, self.session)

    def exchange(self, params: dict[str, Any] | None = None) -> _Exchange:
        return _Exchange(Request(1, "tools/call", params or {}), self.output, self.asks)

    def written(self) -> bytes:
        try:
            return os.read(self.read_fd, 1 << 16)
        except BlockingIOError:
            return b""

    def close(self) -> None:
        os.close(self.read_fd)
        os.close(self._write_fd)


@pytest.fixture
def wire_factory():
    made: list[Wire] = []

    def make(era: Era | None) -> Wire:
        made.append(Wire(era))
        return made[-1]

    yield make
    for wire in made:
        wire.close()


@pytest.mark.parametrize("era", [Era.MODERN, None], ids=["2026-07-28", "unlocked"])
def test_ask_is_refused_without_a_completed_handshake(wire_factory, era) -> None:
    wire = wire_factory(era)
    with pytest.raises(McpsyncError, match="initialize"):
        wire.exchange().ask("elicitation/create", {"message": "hi"})
    assert wire.written() == b""


def test_ask_is_refused_for_a_request_carrying_the_2026_envelope(wire_factory) -> None:
    wire = wire_factory(Era.HANDSHAKE)
    exchange = wire.exchange(modern({"name": "x"}))
    with pytest.raises(McpsyncError):
        exchange.ask("roots/list", {})
    assert wire.written() == b""


def test_ask_is_refused_once_the_request_is_over_cancelled_or_closing(wire_factory) -> None:
    wire = wire_factory(Era.HANDSHAKE)
    finished = wire.exchange()
    finished.finish()
    cancelled = wire.exchange()
    cancelled.cancel()
    for exchange in (finished, cancelled):
        with pytest.raises(McpsyncError):
            exchange.ask("roots/list", {})
    closing = wire.exchange()
    wire.asks.close("the server is shutting down")
    with pytest.raises(McpsyncError, match="shutting down"):
        closing.ask("roots/list", {})
    assert wire.written() == b""


def test_ask_with_params_json_cannot_carry_is_refused(wire_factory) -> None:
    wire = wire_factory(Era.HANDSHAKE)
    with pytest.raises(McpsyncError, match="not JSON"):
        wire.exchange().ask("sampling/createMessage", {"temperature": float("nan")})
    assert wire.written() == b""


def test_closing_fails_every_open_ask_without_writing(wire_factory) -> None:
    wire = wire_factory(Era.HANDSHAKE)
    futures = [wire.exchange().ask("roots/list", {}) for _ in range(3)]
    sent = wire.written()
    assert sent.count(b"\n") == 3
    wire.asks.close("the connection closed")
    for future in futures:
        with pytest.raises(McpsyncError, match="connection closed"):
            future.result(0)
    assert wire.written() == b""
