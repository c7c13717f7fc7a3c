"""The gateway carries an upstream's questions (elicitation/create, sampling/createMessage,
roots/list) to the downstream client in the form its era expects.

The upstream is fixtures/relay_upstream.py served by `mcpsync serve`. The `gateway` fixture runs
every test twice: with the gateway speaking to the upstream in the handshake era (`mode =
"legacy"` in its TOML config), so each question reaches the gateway as a JSON-RPC request during
a forwarded call, and in 2026-07-28, where it arrives as the call's `input_required` result. The
downstream client is raw JSON lines:

- handshake era: it receives the question as a request on its connection, answers it, and gets
  the call's result, built by the upstream from that answer;
- 2026-07-28: it gets `input_required` with the upstream's question under a key and a
  `requestState`, retries with `inputResponses` and that state, and gets the final result (two
  dependent questions take two rounds).

And the edges: a handshake-era upstream's question while two calls are in flight on it is refused
(the gateway cannot tell which call it is for; the upstream's tool sees the error), a missing
client capability is refused, a malformed answer is -32602 and a retry naming a call the gateway
no longer has is -32602, a parked call expires with its upstream call's deadline, a busy
2026-07-28 upstream (a state-only input_required) is retried; prompts, resources and an HTTP
upstream take the same ways.

Ordering comes from responses and notifications (a progress notification says a held call is
running upstream); the one sleep waits out a deadline on purpose.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from wire import (
    DEFAULT_TIMEOUT,

    META_CLIENT_CAPABILITIES,
    REPO_ROOT,
    base_env,
    ServerProcess,
    fixture,
    has_traceback,
    is_notification,
    legacy_init,
    modern_meta,
    serve_argv,
)

pytestmark = pytest.mark.timeout(90)

UPSTREAM = fixture("relay_upstream.py")
ALL_CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
AGE_FORM = {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}
ADA = {"action": "accept", "content": {"name": "Ada"}}
SAMPLE = {"role": "assistant", "content": {"type": "text", "text": "Waves fold on waves."}, "model": "m-1", "stopReason": "endTurn"}
ROOTS = {"roots": [{"uri": "file:///work/project", "name": "project"}]}


def write_config(tmp_path: Path, timeout: float = 30.0, mode: str = "legacy") -> Path:
    config = tmp_path / "gateway.toml"
    command = [sys.executable, "-m", "mcpsync", "serve", UPSTREAM]
    config.write_text(f'[upstreams.up]\ncommand = {json.dumps(command)}\nmode = "{mode}"\ntimeout = {timeout}\n')
    return config


class Gateway(ServerProcess):
    upstream_mode = "legacy"

    @property
    def legacy_upstream(self) -> bool:
        return self.upstream_mode == "legacy"


def start_gateway(tmp_path: Path, mode: str, timeout: float = 30.0, *options: str) -> Gateway:
    proc = Gateway(serve_argv(*options, "--config", str(write_config(tmp_path, timeout, mode))))
    proc.upstream_mode = mode
    return proc


@pytest.fixture(params=["legacy", "modern"], ids=["handshake-upstream", "modern-upstream"])
def gateway(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Gateway]:
    """The gateway in front of the upstream, spoken to in the handshake era (questions arrive as
    requests) or in 2026-07-28 (they arrive as input_required results of the forwarded call)."""
    with start_gateway(tmp_path, request.param) as proc:
        yield proc
    assert not has_traceback(proc.stderr_text()), proc.stderr_tail()


@pytest.fixture
def legacy_gateway(tmp_path: Path) -> Iterator[Gateway]:
    with start_gateway(tmp_path, "legacy") as proc:
        yield proc
    assert not has_traceback(proc.stderr_text()), proc.stderr_tail()


def text_of(response: dict[str, Any]) -> Any:
    """The JSON in the single text block of a tool result."""
    assert "result" in response, response
    [block] = response["result"]["content"]
    return json.loads(block["text"])


def answer(proc: ServerProcess, request: dict[str, Any], result: dict[str, Any]) -> None:
    proc.send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def asked(proc: ServerProcess, method: str) -> dict[str, Any]:
    """The next server-to-client request of `method` (other frames stay in the backlog)."""
    return proc.expect(lambda f: f.get("method") == method and "id" in f, what=f"a {method} request")


# -- the handshake era: real requests to the downstream -------------------------------------------

class Handshake:
    def __init__(self, proc: ServerProcess, capabilities: dict[str, Any] | None = None) -> None:
        self.proc = proc
        legacy_init(proc, capabilities=ALL_CAPS if capabilities is None else capabilities)

    def start(self, request_id: Any, name: str, arguments: dict[str, Any] | None = None, **meta: Any) -> None:
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        if meta:
            params["_meta"] = meta
        self.proc.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


def test_handshake_client_answers_the_upstreams_elicitation_as_a_request(gateway: Gateway) -> None:
    client = Handshake(gateway)
    client.start(1, "ask_name")
    request = asked(gateway, "elicitation/create")
    assert request["params"] == {"message": "What is your name?", "requestedSchema": NAME_FORM}
    answer(gateway, request, ADA)
    assert text_of(gateway.response(1)) == ADA


def test_handshake_client_answers_two_questions_one_after_the_other(gateway: Gateway) -> None:
    client = Handshake(gateway)
    client.start("two", "two_step")
    answer(gateway, asked(gateway, "elicitation/create"), ADA)
    second = asked(gateway, "elicitation/create")
    assert second["params"] == {"message": "How old are you, Ada?", "requestedSchema": AGE_FORM}
    answer(gateway, second, {"action": "accept", "content": {"age": 36}})
    assert text_of(gateway.response("two")) == {"name": "Ada", "age": 36}


def test_handshake_client_answers_sampling_and_roots(gateway: Gateway) -> None:
    client = Handshake(gateway)
    client.start(1, "ask_model", {"topic": "tides"})
    request = asked(gateway, "sampling/createMessage")
    assert request["params"]["messages"] == [{"role": "user", "content": {"type": "text", "text": "Write a haiku about tides."}}]
    assert request["params"]["maxTokens"] == 64 and request["params"]["systemPrompt"] == "Be terse."
    answer(gateway, request, SAMPLE)
    assert text_of(gateway.response(1)) == SAMPLE
    client.start(2, "list_roots")
    answer(gateway, asked(gateway, "roots/list"), ROOTS)
    assert text_of(gateway.response(2)) == ROOTS["roots"]


def test_handshake_client_answers_questions_asked_together(gateway: Gateway) -> None:
    client = Handshake(gateway)
    client.start(1, "ask_all")
    answers = {"elicitation/create": ADA, "sampling/createMessage": SAMPLE, "roots/list": ROOTS}
    for _ in range(3):
        request = gateway.expect(lambda f: f.get("method") in answers and "id" in f, what="a question")
        answer(gateway, request, answers.pop(request["method"]))
    assert text_of(gateway.response(1)) == {"name": "Ada", "sample": SAMPLE["content"]["text"], "roots": ROOTS["roots"]}


def test_handshake_clients_error_answer_reaches_the_upstreams_tool(gateway: Gateway) -> None:
    client = Handshake(gateway)
    client.start(1, "ask_name")
    request = asked(gateway, "elicitation/create")
    gateway.send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32600, "message": "the user walked away"}})
    response = gateway.response(1)
    if gateway.legacy_upstream:  # the upstream's own request got the error: its tool caught it
        assert text_of(response) == {"error": {"code": -32600, "message": "the user walked away"}}
    else:  # a 2026-07-28 upstream has no way to hear it: the call ends, as a local tool's would
        assert response["result"]["isError"] is True, response
        [block] = response["result"]["content"]
        assert "elicitation/create" in block["text"] and "the user walked away" in block["text"], response


def test_handshake_client_without_the_capability_is_never_asked(gateway: Gateway) -> None:
    client = Handshake(gateway, capabilities={"roots": {}})
    client.start(1, "ask_name")
    response = gateway.response(1)
    if gateway.legacy_upstream:  # the upstream's request was refused: its tool caught it
        refused = text_of(response)["error"]
        assert refused["code"] == -32021 and "elicitation" in refused["message"], response
    else:  # -32021 is a 2026-07-28 code: a handshake-era tool call ends with an error result
        assert response["result"]["isError"] is True, response
        assert "elicitation" in response["result"]["content"][0]["text"], response
    assert not any(f.get("method") == "elicitation/create" for f in gateway.notifications)


def test_handshake_prompt_and_resource_relay_their_questions(gateway: Gateway) -> None:
    Handshake(gateway)
    gateway.send({"jsonrpc": "2.0", "id": "p", "method": "prompts/get", "params": {"name": "greeting", "arguments": {}}})
    answer(gateway, asked(gateway, "elicitation/create"), ADA)
    prompt = gateway.response("p")["result"]
    assert prompt["messages"][0]["content"]["text"] == "Please greet Ada warmly."
    gateway.send({"jsonrpc": "2.0", "id": "r", "method": "resources/read", "params": {"uri": "relay://roots"}})
    answer(gateway, asked(gateway, "roots/list"), ROOTS)
    [content] = gateway.response("r")["result"]["contents"]
    assert json.loads(content["text"]) == ROOTS["roots"]


def test_a_handshake_clients_cancel_withdraws_the_question_and_the_upstream_call(gateway: Gateway) -> None:
    client = Handshake(gateway)
    client.start(1, "ask_name")
    request = asked(gateway, "elicitation/create")
    gateway.cancel(1, "changed my mind")
    withdrawn = gateway.expect(lambda f: is_notification(f, "notifications/cancelled"), what="the question withdrawn")
    assert withdrawn["params"]["requestId"] == request["id"]
    answer(gateway, request, ADA)  # too late: ignored
    client.start(2, "ask_name")  # the cancelled call left nothing in flight: this one is asked
    answer(gateway, asked(gateway, "elicitation/create"), ADA)
    assert text_of(gateway.response(2)) == ADA
    assert not any(f.get("id") == 1 for f in gateway.notifications), "the cancelled call was answered"


# -- 2026-07-28: input_required rounds ------------------------------------------------------------

class Modern:
    def __init__(self, proc: ServerProcess, capabilities: dict[str, Any] | None = None) -> None:
        self.proc = proc
        self.capabilities = ALL_CAPS if capabilities is None else capabilities
        self.ids = 0
        # Locks the connection's era, so the reader no longer finishes each request before the next.
        proc.result("server/discover", {"_meta": modern_meta()})

    def params(self, params: dict[str, Any], **meta: Any) -> dict[str, Any]:
        return {**params, "_meta": modern_meta(**{META_CLIENT_CAPABILITIES: self.capabilities}, **meta)}

    def request(self, method: str, params: dict[str, Any], **meta: Any) -> dict[str, Any]:
        self.ids += 1
        return self.proc.request(method, self.params(params, **meta), id=f"m{self.ids}")

    def call(self, name: str, arguments: dict[str, Any] | None = None, **retry: Any) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments or {}, **retry})


def input_required(response: dict[str, Any]) -> tuple[dict[str, Any], str]:
    result = response.get("result")
    assert result is not None and result.get("resultType") == "input_required", response
    assert isinstance(result["requestState"], str) and result["requestState"]
    return result["inputRequests"], result["requestState"]


def complete(response: dict[str, Any]) -> dict[str, Any]:
    result = response.get("result")
    assert result is not None and result.get("resultType") == "complete", response
    assert "inputRequests" not in result and "requestState" not in result, result
    return result


def test_modern_client_gets_the_upstreams_question_as_input_required_and_retries(gateway: Gateway) -> None:
    client = Modern(gateway)
    questions, state = input_required(client.call("ask_name"))
    assert questions == {
        "elicitation-1": {"method": "elicitation/create", "params": {"message": "What is your name?", "requestedSchema": NAME_FORM}}
    }
    final = client.call("ask_name", inputResponses={"elicitation-1": ADA}, requestState=state)
    assert json.loads(complete(final)["content"][0]["text"]) == ADA
    assert not any(f.get("method") in ("elicitation/create",) and "id" in f for f in gateway.notifications)


def test_two_dependent_questions_take_two_rounds(gateway: Gateway) -> None:
    client = Modern(gateway)
    first, state = input_required(client.call("two_step"))
    assert list(first) == ["elicitation-1"]
    second, state = input_required(client.call("two_step", inputResponses={"elicitation-1": ADA}, requestState=state))
    assert second == {"elicitation-2": {"method": "elicitation/create", "params": {"message": "How old are you, Ada?", "requestedSchema": AGE_FORM}}}
    final = client.call("two_step", inputResponses={"elicitation-2": {"action": "accept", "content": {"age": 36}}}, requestState=state)
    assert json.loads(complete(final)["content"][0]["text"]) == {"name": "Ada", "age": 36}


def test_modern_sampling_and_roots_and_url_elicitation(gateway: Gateway) -> None:
    client = Modern(gateway)
    questions, state = input_required(client.call("ask_model", {"topic": "tides"}))
    [(key, question)] = questions.items()
    assert key == "sampling-1" and question["method"] == "sampling/createMessage"
    assert question["params"]["maxTokens"] == 64
    final = client.call("ask_model", {"topic": "tides"}, inputResponses={key: SAMPLE}, requestState=state)
    assert json.loads(complete(final)["content"][0]["text"]) == SAMPLE

    questions, state = input_required(client.call("list_roots"))
    assert questions == {"roots-1": {"method": "roots/list", "params": {}}} or questions == {"roots-1": {"method": "roots/list"}}
    final = client.call("list_roots", inputResponses={"roots-1": ROOTS}, requestState=state)
    assert json.loads(complete(final)["content"][0]["text"]) == ROOTS["roots"]

    questions, state = input_required(client.call("ask_url"))
    assert questions == {
        "elicitation-1": {"method": "elicitation/create", "params": {"mode": "url", "message": "Please sign in", "url": "https://example.com/sign-in"}}
    }, "a 2026-07-28 URL-mode elicitation carries no elicitationId"
    final = client.call("ask_url", inputResponses={"elicitation-1": {"action": "accept"}}, requestState=state)
    assert json.loads(complete(final)["content"][0]["text"]) == {"action": "accept"}


def test_questions_the_upstream_sends_together_are_all_answered(gateway: Gateway) -> None:
    client = Modern(gateway)
    answers = {"elicitation/create": ADA, "sampling/createMessage": SAMPLE, "roots/list": ROOTS}
    response, rounds, asked_methods = client.call("ask_all"), 0, []
    while response["result"].get("resultType") == "input_required":
        rounds += 1
        assert rounds <= 3, response
        questions, state = input_required(response)
        asked_methods += [q["method"] for q in questions.values()]
        responses = {key: answers[q["method"]] for key, q in questions.items()}
        response = client.call("ask_all", inputResponses=responses, requestState=state)
    assert json.loads(complete(response)["content"][0]["text"]) == {"name": "Ada", "sample": SAMPLE["content"]["text"], "roots": ROOTS["roots"]}
    assert sorted(asked_methods) == sorted(answers), "each question is asked once"


def test_a_retry_without_the_answer_is_asked_again_and_a_malformed_answer_is_refused(gateway: Gateway) -> None:
    client = Modern(gateway)
    questions, state = input_required(client.call("ask_name"))
    again, state = input_required(client.call("ask_name", inputResponses={"unrelated": ADA}, requestState=state))
    assert again == questions
    refused = client.call("ask_name", inputResponses={"elicitation-1": {"action": "maybe"}}, requestState=state)
    assert refused["error"]["code"] == -32602 and "elicitation-1" in refused["error"]["message"], refused
    final = client.call("ask_name", inputResponses={"elicitation-1": ADA}, requestState=state)  # the same state still works
    assert json.loads(complete(final)["content"][0]["text"]) == ADA


def test_a_retry_of_a_call_that_already_ended_is_invalid_params(gateway: Gateway) -> None:
    client = Modern(gateway)
    _, state = input_required(client.call("ask_name"))
    complete(client.call("ask_name", inputResponses={"elicitation-1": ADA}, requestState=state))
    stale = client.call("ask_name", inputResponses={"elicitation-1": ADA}, requestState=state)
    assert stale["error"]["code"] == -32602, stale
    assert stale["error"]["data"]["reason"] == "unknown_upstream_call", stale


def test_a_modern_client_without_the_capability_is_never_asked(gateway: Gateway) -> None:
    client = Modern(gateway, capabilities={"roots": {}})
    response = client.call("ask_name")
    if gateway.legacy_upstream:  # the upstream's request is refused: its tool caught it
        complete(response)
        refused = text_of(response)["error"]
    else:  # the upstream's input_required asks what this client cannot answer
        refused = response["error"]
        assert refused["data"] == {"requiredCapabilities": {"elicitation": {}}}, response
    assert refused["code"] == -32021 and "elicitation" in refused["message"], response


def test_modern_prompt_and_resource_relay_their_questions(gateway: Gateway) -> None:
    client = Modern(gateway)
    questions, state = input_required(client.request("prompts/get", {"name": "greeting", "arguments": {}}))
    assert list(questions) == ["elicitation-1"]
    prompt = complete(client.request("prompts/get", {"name": "greeting", "arguments": {}, "inputResponses": {"elicitation-1": ADA}, "requestState": state}))
    assert prompt["messages"][0]["content"]["text"] == "Please greet Ada warmly."
    questions, state = input_required(client.request("resources/read", {"uri": "relay://roots"}))
    assert list(questions) == ["roots-1"]
    read = complete(client.request("resources/read", {"uri": "relay://roots", "inputResponses": {"roots-1": ROOTS}, "requestState": state}))
    assert json.loads(read["contents"][0]["text"]) == ROOTS["roots"]


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_a_parked_call_expires_with_its_deadline(tmp_path: Path, mode: str) -> None:
    with start_gateway(tmp_path, mode, 1.0, "--log-level", "info") as proc:
        client = Modern(proc)
        _, state = input_required(client.call("ask_name"))
        # The supervisor's sweep (once a second) forgets the call past its deadline and says so.
        deadline = time.monotonic() + DEFAULT_TIMEOUT
        while "parked call(s) the client did not retry" not in proc.stderr_text():
            assert time.monotonic() < deadline, f"the parked call was not expired within {DEFAULT_TIMEOUT}s\n{proc.stderr_tail()}"
            time.sleep(0.05)  # polling the child's stderr file: nothing signals a write to it
        stale = client.call("ask_name", inputResponses={"elicitation-1": ADA}, requestState=state)
        assert stale["error"]["code"] == -32602 and stale["error"]["data"]["reason"] == "unknown_upstream_call", stale
        client2 = Modern(proc)  # the upstream still serves: a new call works
        _, state = input_required(client2.call("ask_name"))
        assert json.loads(complete(client2.call("ask_name", inputResponses={"elicitation-1": ADA}, requestState=state))["content"][0]["text"]) == ADA
    assert not has_traceback(proc.stderr_text()), proc.stderr_tail()


def test_an_upstream_that_is_not_ready_yet_is_retried(gateway: Gateway) -> None:
    """`patient` answers input_required with only a requestState twice (a 2026-07-28 upstream's
    way of saying "busy, come back"): a 2026-07-28 client is told the same and comes back; a
    handshake-era client, which cannot be told, just gets the result (the gateway retries)."""
    client = Modern(gateway)
    response, rounds = client.call("patient"), 0
    while response["result"].get("resultType") == "input_required":
        assert "inputRequests" not in response["result"], response
        rounds += 1
        assert rounds <= 2, response
        response = client.call("patient", requestState=response["result"]["requestState"])
    assert complete(response)["content"][0]["text"] == "ready after 2"
    assert rounds == (0 if gateway.legacy_upstream else 2)  # a handshake-era upstream reruns it itself


def test_an_upstream_that_is_not_ready_yet_is_retried_for_a_handshake_client(gateway: Gateway) -> None:
    Handshake(gateway).start(1, "patient")
    assert gateway.response(1)["result"]["content"][0]["text"] == "ready after 2"


# -- which call? ----------------------------------------------------------------------------------

@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_a_question_while_two_calls_are_in_flight_is_refused(legacy_gateway: Gateway, era: str) -> None:
    """`hold` runs upstream (its progress says so) while `ask_name` asks: two calls in flight, so
    the gateway cannot tell which one the handshake-era question is for, and the upstream's tool
    is told."""
    gateway = legacy_gateway
    if era == "handshake":
        Handshake(gateway)
        params = lambda p, **meta: {**p, "_meta": meta} if meta else p  # noqa: E731
    else:
        params = Modern(gateway).params
    gateway.send({"jsonrpc": "2.0", "id": "hold", "method": "tools/call", "params": params({"name": "hold", "arguments": {"nonce": era}}, progressToken="h")})
    gateway.expect(lambda f: is_notification(f, "notifications/progress") and f["params"]["progressToken"] == "h", what="hold's progress")
    response = gateway.request("tools/call", params({"name": "ask_name", "arguments": {}}), id="ask")
    refused = text_of(response)
    assert refused["error"]["code"] == -32603, refused
    assert "cannot tell which call" in refused["error"]["message"], refused
    assert not any(f.get("method") == "elicitation/create" for f in gateway.notifications)
    released = gateway.request("tools/call", params({"name": "release", "arguments": {"nonce": era}}), id="release")
    assert released["result"]["content"][0]["text"] == f"releasing {era}"
    assert gateway.response("hold")["result"]["content"][0]["text"] == f"released {era}"


def test_a_modern_upstreams_questions_belong_to_their_call_even_with_others_in_flight(tmp_path: Path) -> None:
    """A 2026-07-28 upstream's question comes in its call's own result: no ambiguity."""
    with start_gateway(tmp_path, "modern") as gateway:
        client = Modern(gateway)
        hold_params = client.params({"name": "hold", "arguments": {"nonce": "m"}}, progressToken="h")
        gateway.send({"jsonrpc": "2.0", "id": "hold", "method": "tools/call", "params": hold_params})
        gateway.expect(lambda f: is_notification(f, "notifications/progress") and f["params"]["progressToken"] == "h", what="hold's progress")
        first, state1 = input_required(client.call("ask_name"))
        second, state2 = input_required(client.call("ask_model"))
        assert list(first) == ["elicitation-1"] and list(second) == ["sampling-1"]
        assert json.loads(complete(client.call("ask_model", inputResponses={"sampling-1": SAMPLE}, requestState=state2))["content"][0]["text"]) == SAMPLE
        assert json.loads(complete(client.call("ask_name", inputResponses={"elicitation-1": ADA}, requestState=state1))["content"][0]["text"]) == ADA
        assert complete(client.call("release", {"nonce": "m"}))["content"][0]["text"] == "releasing m"
        assert gateway.response("hold")["result"]["content"][0]["text"] == "released m"
    assert not has_traceback(gateway.stderr_text()), gateway.stderr_tail()


# -- an HTTP upstream -----------------------------------------------------------------------------

class HttpUpstream:
    """`mcpsync serve --http 127.0.0.1:0 relay_upstream.py` as a child; `url` once it listens. Its
    stderr is drained by a thread (so it never fills a pipe); leaving kills the child."""

    READY = "serving MCP over HTTP at "

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpsync", "serve", "--http", "127.0.0.1:0", UPSTREAM],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=base_env(),
            cwd=str(REPO_ROOT),
        )
        self.stderr = bytearray()
        self.ready = threading.Event()
        self._drain = threading.Thread(target=self._read, name="http-upstream-stderr", daemon=True)
        self._drain.start()
        if not self.ready.wait(DEFAULT_TIMEOUT):
            self.close()
            pytest.fail(f"the HTTP upstream did not start:\n{self.stderr.decode(errors='replace')}", pytrace=False)
        self.url = self.stderr.decode(errors="replace").split(self.READY, 1)[1].split()[0]

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in iter(self.proc.stderr.readline, b""):
            self.stderr += line
            if self.READY.encode() in line:
                self.ready.set()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(DEFAULT_TIMEOUT)
        self._drain.join(DEFAULT_TIMEOUT)

    def __enter__(self) -> "HttpUpstream":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_an_http_upstreams_questions_reach_clients_of_both_eras(tmp_path: Path, mode: str) -> None:
    """Over HTTP a handshake-era upstream asks on the SSE stream answering the forwarded call (the
    gateway's client answers with a POST); a 2026-07-28 one answers input_required."""
    with HttpUpstream() as upstream:
        config = tmp_path / "gateway.toml"
        config.write_text(f'[upstreams.up]\nurl = "{upstream.url}"\nmode = "{mode}"\ntimeout = 30\n')
        with ServerProcess(serve_argv("--config", str(config))) as gateway:
            client = Modern(gateway)
            questions, state = input_required(client.call("two_step"))
            assert list(questions) == ["elicitation-1"]
            questions, state = input_required(client.call("two_step", inputResponses={"elicitation-1": ADA}, requestState=state))
            assert questions["elicitation-2"]["params"]["message"] == "How old are you, Ada?"
            final = client.call("two_step", inputResponses={"elicitation-2": {"action": "accept", "content": {"age": 36}}}, requestState=state)
            assert json.loads(complete(final)["content"][0]["text"]) == {"name": "Ada", "age": 36}
        assert not has_traceback(gateway.stderr_text()), gateway.stderr_tail()
        with ServerProcess(serve_argv("--config", str(config))) as gateway:
            Handshake(gateway).start(1, "ask_model")
            answer(gateway, asked(gateway, "sampling/createMessage"), SAMPLE)
            assert text_of(gateway.response(1)) == SAMPLE
        assert not has_traceback(gateway.stderr_text()), gateway.stderr_tail()
