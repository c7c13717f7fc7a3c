"""Tests for multi round-trip requests through the engine: one synchronous function body, both eras.

2026-07-28 (`EngineHarness.modern`): a function's first unanswered question makes the request answer
`input_required` with its `inputRequests` and a sealed `requestState`; the retry brings the answers,
and earlier rounds' answers come back from the sealed state. Bad retries are -32602 with a reason,
undeclared capabilities -32021.

Handshake era (`EngineHarness.initialize`): the same body sends real requests through the exchange's
`ask()` and waits, with a timeout and cancellation. `AskingExchange` plays that part: it records each
request and answers it from a script (or leaves it pending for the test to resolve or cancel).
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any, Callable

import pytest

from mcpsync.catalog.context import Context
from mcpsync.catalog.questions import InputRequired, Question
from mcpsync.catalog.service import Service
from mcpsync.engine.engine import Engine
from mcpsync.engine.request_state import RequestStateSealer
from mcpsync.protocol.jsonrpc import McpError
from mcpsync.protocol.versions import META_SERVER_INFO
from mcpsync.transport.lifecycle.cancellation import Cancellable
from tests._timeouts import LONG
from tests.helpers import SERVER_INFO, EngineHarness, FakeExchange

pytestmark = pytest.mark.timeout(30)

SECRET = "a shared secret of at least thirty-two bytes"
OTHER_SECRET = "another secret, also thirty-two bytes or more"

ALL_CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ACCEPT = {"action": "accept", "content": {"name": "octocat"}}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris."}, "model": "m", "stopReason": "endTurn"}
ROOTS = {"roots": [{"uri": "file:///home/user/project", "name": "project"}]}
EMPTY_FORM = {"type": "object", "properties": {}}


class Counter:
    def __init__(self) -> None:
        self.runs = 0


def make_service(runs: Counter | None = None) -> Service:
    runs = runs if runs is not None else Counter()
    service = Service("asking")

    @service.tool
    def confirm(ctx: Context) -> str:
        """One form, default key."""
        answer = ctx.elicit("Proceed?")
        return f"confirm: {answer['action']}"

    @service.tool
    def login(ctx: Context) -> str:
        """One form, explicit key."""
        answer = ctx.elicit("Your GitHub username?", SCHEMA, key="github_login")
        return f"hello {answer['content']['name']}"

    @service.tool
    def url_login(ctx: Context) -> str:
        answer = ctx.elicit_url("Sign in", "https://example.com/login")
        return f"url: {answer['action']}"

    @service.tool
    def capital(ctx: Context) -> str:
        answer = ctx.sample("What is the capital of France?", max_tokens=10)
        return f"capital: {answer['content']['text']}"

    @service.tool
    def where(ctx: Context) -> str:
        return "roots: " + ",".join(root["uri"] for root in ctx.roots())

    @service.tool
    def steps(ctx: Context) -> str:
        """Three questions, one after the other: three rounds, then the result."""
        name = ctx.elicit("Name?")["content"]["name"]
        city = ctx.sample("Capital?", max_tokens=5)["content"]["text"]
        uris = [root["uri"] for root in ctx.roots()]
        return f"{name} {city} {uris}"

    @service.tool
    def batch(ctx: Context) -> str:
        """Three kinds asked together."""
        form, sampled, roots = ctx.ask(Question.elicitation("Name?"), Question.sampling("Capital?", max_tokens=5), Question.roots())
        return f"{form['action']} {sampled['content']['text']} {len(roots)}"

    @service.tool
    def numbered(ctx: Context) -> str:
        ctx.ask(
            Question.elicitation("first"),
            Question.sampling("s", max_tokens=1),
            Question.elicitation("second"),
            Question.roots(),
            Question.elicitation("mine", key="custom"),
            Question.elicitation("third"),
        )
        return "all answered"

    @service.tool
    def swallow(ctx: Context) -> str:
        try:
            ctx.elicit("Proceed?")
        except Exception:  # a handler's own catch-all must not stop the unwinding
            return "swallowed"
        return "answered"

    @service.tool
    def careful(ctx: Context) -> str:
        try:
            answer = ctx.elicit("Proceed?")
        except McpError as exc:
            return f"refused {exc.code} {exc.message}"
        return f"confirm: {answer['action']}"

    @service.tool
    def impatient(ctx: Context) -> str:
        return str(ctx.elicit("Quick!", timeout=0.1))

    @service.tool
    def travel(city: str, ctx: Context) -> str:
        return f"{city}: {ctx.elicit('Book it?')['action']}"

    @service.tool
    def shedding(ctx: Context) -> Any:
        runs.runs += 1
        if ctx.state is None:
            return InputRequired(state={"job": 7})
        return f"job {ctx.state['job']}"

    @service.tool
    def two_step(ctx: Context) -> Any:
        runs.runs += 1
        if ctx.state is None:
            return InputRequired([Question.elicitation("Really?")], state=1)
        answer = ctx.elicit("Really?")
        return f"state {ctx.state}, {answer['action']}"

    @service.tool
    def wants_roots(ctx: Context) -> Any:
        if ctx.state is None:
            return InputRequired([Question.roots()], state="r")
        return "never"

    @service.tool
    def no_context(topic: str) -> Any:  # takes no Context: the engine makes one only for its InputRequired
        runs.runs += 1
        if runs.runs == 1:
            return InputRequired([Question.elicitation(f"Really {topic}?")], state=1)
        return f"{topic}: run {runs.runs}"

    @service.tool
    def forever(ctx: Context) -> Any:
        runs.runs += 1
        return InputRequired(state=runs.runs)

    @service.prompt
    def intro(ctx: Context) -> str:
        name = ctx.elicit("Your name?", SCHEMA)["content"]["name"]
        return f"Introduce {name}"

    @service.resource("mem://plain", mime_type="text/plain")
    def plain() -> str:
        return "plain"

    @service.resource("mem://greeting/{who}", mime_type="text/plain")
    def greeting(who: str, ctx: Context) -> str:
        answer = ctx.elicit(f"Greet {who}?")
        return f"{answer['action']} {who}"

    return service


@pytest.fixture
def runs() -> Counter:
    return Counter()


@pytest.fixture
def h(runs: Counter) -> EngineHarness:
    return EngineHarness([make_service(runs)])


def call(
    h: EngineHarness, name: str, arguments: dict[str, Any] | None = None, *, caps: Any = ALL_CAPS, exchange: Any = None, **retry: Any
) -> Any:
    """A 2026-07-28 tools/call; `retry` adds inputResponses / requestState as given."""
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    params.update(retry)
    return h.modern("tools/call", params, capabilities=caps, exchange=exchange)


def text(result: dict[str, Any]) -> str:
    assert result["resultType"] == "complete", result
    assert result.get("isError") is False, result
    return result["content"][0]["text"]


def input_required(h: EngineHarness, outcome: Any) -> dict[str, Any]:
    result = h.ok(outcome)
    assert result["resultType"] == "input_required", result
    assert isinstance(result["requestState"], str) and result["requestState"]
    assert "ttlMs" not in result and "cacheScope" not in result
    assert result["_meta"][META_SERVER_INFO] == SERVER_INFO
    return result


def reason(h: EngineHarness, outcome: Any) -> str:
    error = h.fails(outcome, -32602)
    return error.data["reason"]


# == 2026-07-28 ======================================================================================

# -- the first round --------------------------------------------------------------------------------

def test_a_question_answers_input_required_with_its_request(h: EngineHarness) -> None:
    result = input_required(h, call(h, "login"))
    assert result["inputRequests"] == {
        "github_login": {
            "method": "elicitation/create",
            "params": {"message": "Your GitHub username?", "requestedSchema": SCHEMA},
        }
    }
    assert set(result) == {"resultType", "inputRequests", "requestState", "_meta"}


@pytest.mark.parametrize(
    ("tool", "key", "entry"),
    [
        ("confirm", "elicitation-1", {"method": "elicitation/create", "params": {"message": "Proceed?", "requestedSchema": EMPTY_FORM}}),
        (
            "capital",
            "sampling-1",
            {
                "method": "sampling/createMessage",
                "params": {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
                    "maxTokens": 10,
                },
            },
        ),
        ("where", "roots-1", {"method": "roots/list"}),
        (
            "url_login",
            "elicitation-1",
            {"method": "elicitation/create", "params": {"mode": "url", "message": "Sign in", "url": "https://example.com/login"}},
        ),
    ],
)
def test_default_keys_and_exact_entries(h: EngineHarness, tool: str, key: str, entry: dict[str, Any]) -> None:
    result = input_required(h, call(h, tool))
    assert result["inputRequests"] == {key: entry}  # exactly {method, params}: no jsonrpc, no id
    assert "elicitationId" not in str(result["inputRequests"])


def test_default_keys_are_numbered_per_kind(h: EngineHarness) -> None:
    result = input_required(h, call(h, "numbered"))
    assert list(result["inputRequests"]) == ["elicitation-1", "sampling-1", "elicitation-2", "roots-1", "custom", "elicitation-3"]
    assert result["inputRequests"]["elicitation-2"]["params"]["message"] == "second"
    assert result["inputRequests"]["custom"]["params"]["message"] == "mine"


# -- retries ----------------------------------------------------------------------------------------

def test_the_retry_with_the_answer_completes(h: EngineHarness) -> None:
    first = input_required(h, call(h, "login"))
    result = h.ok(call(h, "login", inputResponses={"github_login": ACCEPT}, requestState=first["requestState"]))
    assert text(result) == "hello octocat"


def test_three_rounds_each_sending_only_the_current_answer(h: EngineHarness) -> None:
    first = input_required(h, call(h, "steps"))
    assert list(first["inputRequests"]) == ["elicitation-1"]
    second = input_required(h, call(h, "steps", inputResponses={"elicitation-1": ACCEPT}, requestState=first["requestState"]))
    assert list(second["inputRequests"]) == ["sampling-1"]
    # round 3 carries only round 2's answer: the form's answer comes back from the sealed state
    third = input_required(h, call(h, "steps", inputResponses={"sampling-1": SAMPLED}, requestState=second["requestState"]))
    assert third["inputRequests"] == {"roots-1": {"method": "roots/list"}}
    result = h.ok(call(h, "steps", inputResponses={"roots-1": ROOTS}, requestState=third["requestState"]))
    assert text(result) == "octocat Paris. ['file:///home/user/project']"


def test_ask_batches_three_kinds_in_one_round(h: EngineHarness) -> None:
    first = input_required(h, call(h, "batch"))
    assert {key: entry["method"] for key, entry in first["inputRequests"].items()} == {
        "elicitation-1": "elicitation/create",
        "sampling-1": "sampling/createMessage",
        "roots-1": "roots/list",
    }
    answers = {"elicitation-1": ACCEPT, "sampling-1": SAMPLED, "roots-1": ROOTS}
    assert text(h.ok(call(h, "batch", inputResponses=answers, requestState=first["requestState"]))) == "accept Paris. 1"


def test_a_partly_answered_batch_keeps_the_given_answers(h: EngineHarness) -> None:
    first = input_required(h, call(h, "batch"))
    second = input_required(
        h, call(h, "batch", inputResponses={"elicitation-1": ACCEPT, "sampling-1": SAMPLED}, requestState=first["requestState"])
    )
    assert list(second["inputRequests"]) == ["roots-1"]  # only what is still missing is asked
    outcome = call(h, "batch", inputResponses={"roots-1": ROOTS}, requestState=second["requestState"])
    assert text(h.ok(outcome)) == "accept Paris. 1"


@pytest.mark.parametrize("responses", [{}, {"something-else": ACCEPT}])
def test_a_missing_answer_asks_again(h: EngineHarness, responses: dict[str, Any]) -> None:
    first = input_required(h, call(h, "login"))
    again = input_required(h, call(h, "login", inputResponses=responses, requestState=first["requestState"]))
    assert again["inputRequests"] == first["inputRequests"]
    assert text(h.ok(call(h, "login", inputResponses={"github_login": ACCEPT}, requestState=again["requestState"]))) == "hello octocat"


def test_a_retry_with_the_state_only_asks_again(h: EngineHarness) -> None:
    first = input_required(h, call(h, "confirm"))
    again = input_required(h, call(h, "confirm", requestState=first["requestState"]))
    assert list(again["inputRequests"]) == ["elicitation-1"]


def test_extra_unknown_answers_are_ignored(h: EngineHarness) -> None:
    first = input_required(h, call(h, "login"))
    responses = {"github_login": ACCEPT, "bogus": 12345, "elicitation-9": {"action": "maybe"}}
    assert text(h.ok(call(h, "login", inputResponses=responses, requestState=first["requestState"]))) == "hello octocat"


def test_input_responses_without_a_request_state_are_accepted(h: EngineHarness) -> None:
    input_required(h, call(h, "login"))
    assert text(h.ok(call(h, "login", inputResponses={"github_login": ACCEPT}))) == "hello octocat"


def test_a_retry_result_carries_no_cache_hints_but_the_server_info(h: EngineHarness) -> None:
    result = h.ok(call(h, "login", inputResponses={"github_login": ACCEPT}))
    assert result["_meta"][META_SERVER_INFO] == SERVER_INFO
    assert "ttlMs" not in result and "cacheScope" not in result


def test_the_handlers_own_except_exception_does_not_swallow_the_unwinding(h: EngineHarness) -> None:
    result = input_required(h, call(h, "swallow"))
    assert list(result["inputRequests"]) == ["elicitation-1"]
    assert text(h.ok(call(h, "swallow", inputResponses={"elicitation-1": ACCEPT}))) == "answered"


# -- bad retries ------------------------------------------------------------------------------------

@pytest.mark.parametrize("responses", [None, [ACCEPT], "github_login", 3])
def test_input_responses_must_be_an_object(h: EngineHarness, responses: Any) -> None:
    first = input_required(h, call(h, "login"))
    error = h.fails(call(h, "login", inputResponses=responses, requestState=first["requestState"]), -32602)
    assert "inputResponses" in error.message


@pytest.mark.parametrize(("answer", "problem"), [(12345, "not an object"), ({"action": "maybe"}, "action")])
def test_a_malformed_answer_is_invalid_params_naming_the_key(h: EngineHarness, answer: Any, problem: str) -> None:
    first = input_required(h, call(h, "login"))
    error = h.fails(call(h, "login", inputResponses={"github_login": answer}, requestState=first["requestState"]), -32602)
    assert "github_login" in error.message and problem in error.message
    assert error.data == {"key": "github_login"}


def test_a_malformed_sampling_answer_is_invalid_params(h: EngineHarness) -> None:
    error = h.fails(call(h, "capital", inputResponses={"sampling-1": {"role": "assistant", "content": "Paris."}}), -32602)
    assert "sampling-1" in error.message


def test_a_tampered_state_is_refused(h: EngineHarness) -> None:
    first = input_required(h, call(h, "login"))
    token = first["requestState"]
    tampered = token[:-2] + ("AA" if token[-2:] != "AA" else "BB")
    assert reason(h, call(h, "login", inputResponses={"github_login": ACCEPT}, requestState=tampered)) == "tampered"


@pytest.mark.parametrize("token", ["not a token", 42, None, ""])
def test_a_state_that_is_no_token_is_malformed(h: EngineHarness, token: Any) -> None:
    assert reason(h, call(h, "login", inputResponses={"github_login": ACCEPT}, requestState=token)) == "malformed"


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_an_expired_state_is_refused(h: EngineHarness) -> None:
    clock = Clock()
    h.engine.request_states = RequestStateSealer(SECRET, ttl=60, clock=clock)
    first = input_required(h, call(h, "login"))
    clock.now += 59
    assert text(h.ok(call(h, "login", inputResponses={"github_login": ACCEPT}, requestState=first["requestState"]))) == "hello octocat"
    clock.now += 1
    assert reason(h, call(h, "login", inputResponses={"github_login": ACCEPT}, requestState=first["requestState"])) == "expired"


def test_the_engine_takes_the_state_lifetime() -> None:
    h = EngineHarness([make_service()], request_state_ttl=5.0)
    assert h.engine.request_states.ttl == 5.0


def test_a_state_from_another_tool_is_mismatched(h: EngineHarness) -> None:
    first = input_required(h, call(h, "confirm"))
    assert reason(h, call(h, "login", inputResponses={"github_login": ACCEPT}, requestState=first["requestState"])) == "mismatched"


def test_a_state_for_other_arguments_is_mismatched(h: EngineHarness) -> None:
    first = input_required(h, call(h, "travel", {"city": "Paris"}))
    retry = {"inputResponses": {"elicitation-1": ACCEPT}, "requestState": first["requestState"]}
    assert reason(h, call(h, "travel", {"city": "Rome"}, **retry)) == "mismatched"
    assert text(h.ok(call(h, "travel", {"city": "Paris"}, **retry))) == "Paris: accept"


def test_a_state_from_a_tool_is_mismatched_on_a_prompt(h: EngineHarness) -> None:
    first = input_required(h, call(h, "confirm"))
    outcome = h.modern("prompts/get", {"name": "intro", "requestState": first["requestState"]}, capabilities=ALL_CAPS)
    assert reason(h, outcome) == "mismatched"


def test_engines_sharing_a_secret_accept_each_others_state() -> None:
    one = EngineHarness([make_service()], request_state_secret=SECRET)
    two = EngineHarness([make_service()], request_state_secret=SECRET)
    other = EngineHarness([make_service()], request_state_secret=OTHER_SECRET)
    first = input_required(one, call(one, "steps"))
    retry = {"inputResponses": {"elicitation-1": ACCEPT}, "requestState": first["requestState"]}
    second = input_required(two, call(two, "steps", **retry))
    assert list(second["inputRequests"]) == ["sampling-1"]
    assert reason(other, call(other, "steps", **retry)) == "tampered"


def test_engines_without_a_secret_do_not_accept_each_others_state() -> None:
    one, two = EngineHarness([make_service()]), EngineHarness([make_service()])
    first = input_required(one, call(one, "confirm"))
    assert reason(two, call(two, "confirm", requestState=first["requestState"])) == "tampered"


# -- capabilities -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("tool", "caps", "required"),
    [
        ("confirm", {}, {"elicitation": {}}),
        ("confirm", {"sampling": {}, "roots": {}}, {"elicitation": {}}),
        ("confirm", {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
        ("url_login", {"elicitation": {}}, {"elicitation": {"url": {}}}),  # {} means form only
        ("url_login", {"elicitation": {"form": {}}}, {"elicitation": {"url": {}}}),
        ("capital", {"elicitation": {}, "roots": {}}, {"sampling": {}}),
        ("where", {"elicitation": {}, "sampling": {}}, {"roots": {}}),
        ("batch", {"elicitation": {}, "sampling": {}}, {"roots": {}}),
        ("wants_roots", {"elicitation": {}}, {"roots": {}}),  # a returned InputRequired is checked too
    ],
)
def test_an_undeclared_capability_is_32021(h: EngineHarness, tool: str, caps: dict[str, Any], required: dict[str, Any]) -> None:
    error = h.fails(call(h, tool, caps=caps), -32021)
    assert error.data == {"requiredCapabilities": required}


@pytest.mark.parametrize(
    ("tool", "caps"),
    [
        ("confirm", {"elicitation": {}}),
        ("confirm", {"elicitation": {"form": {}}}),
        ("url_login", {"elicitation": {"url": {}}}),
        ("capital", {"sampling": {}}),
        ("where", {"roots": {}}),
    ],
)
def test_a_declared_capability_is_enough(h: EngineHarness, tool: str, caps: dict[str, Any]) -> None:
    input_required(h, call(h, tool, caps=caps))


# -- which methods ----------------------------------------------------------------------------------

def test_a_prompt_can_ask(h: EngineHarness) -> None:
    first = input_required(h, h.modern("prompts/get", {"name": "intro"}, capabilities=ALL_CAPS))
    assert list(first["inputRequests"]) == ["elicitation-1"]
    params = {"name": "intro", "inputResponses": {"elicitation-1": ACCEPT}, "requestState": first["requestState"]}
    result = h.ok(h.modern("prompts/get", params, capabilities=ALL_CAPS))
    assert result["resultType"] == "complete"
    assert result["messages"] == [{"role": "user", "content": {"type": "text", "text": "Introduce octocat"}}]


def test_a_resource_template_function_can_ask(h: EngineHarness) -> None:
    uri = "mem://greeting/ada"
    first = input_required(h, h.modern("resources/read", {"uri": uri}, capabilities=ALL_CAPS))
    assert first["inputRequests"]["elicitation-1"]["params"]["message"] == "Greet ada?"
    params = {"uri": uri, "inputResponses": {"elicitation-1": ACCEPT}, "requestState": first["requestState"]}
    result = h.ok(h.modern("resources/read", params, capabilities=ALL_CAPS))
    assert result["resultType"] == "complete"
    assert result["contents"] == [{"uri": uri, "mimeType": "text/plain", "text": "accept ada"}]
    assert "ttlMs" not in result and "cacheScope" not in result  # a retry's result is not cacheable


def test_a_plain_read_carries_cache_hints(h: EngineHarness) -> None:
    result = h.ok(h.modern("resources/read", {"uri": "mem://plain"}, capabilities=ALL_CAPS))
    assert result["resultType"] == "complete"
    assert result["contents"] == [{"uri": "mem://plain", "mimeType": "text/plain", "text": "plain"}]
    assert "ttlMs" in result and "cacheScope" in result


def test_a_resource_state_from_another_uri_is_mismatched(h: EngineHarness) -> None:
    first = input_required(h, h.modern("resources/read", {"uri": "mem://greeting/ada"}, capabilities=ALL_CAPS))
    params = {"uri": "mem://greeting/bob", "inputResponses": {"elicitation-1": ACCEPT}, "requestState": first["requestState"]}
    assert reason(h, h.modern("resources/read", params, capabilities=ALL_CAPS)) == "mismatched"


def test_a_modern_request_never_sends_a_request_to_the_client(h: EngineHarness) -> None:
    exchange = AskingExchange([ACCEPT])  # it could ask, but 2026-07-28 must not
    input_required(h, call(h, "confirm", exchange=exchange))
    assert exchange.asked == []


@pytest.mark.parametrize(
    ("method", "key"),
    [("tools/list", "tools"), ("prompts/list", "prompts"), ("resources/list", "resources"), ("resources/templates/list", "resourceTemplates")],
)
def test_list_methods_never_answer_input_required(h: EngineHarness, method: str, key: str) -> None:
    result = h.ok(h.modern(method, {}, capabilities=ALL_CAPS))
    assert result["resultType"] == "complete" and result[key]
    assert "inputRequests" not in result and "requestState" not in result


# -- InputRequired returned by the function ---------------------------------------------------------

def test_a_returned_input_required_without_questions_carries_only_the_state(h: EngineHarness, runs: Counter) -> None:
    first = input_required(h, call(h, "shedding"))
    assert "inputRequests" not in first
    assert set(first) == {"resultType", "requestState", "_meta"}
    result = h.ok(call(h, "shedding", requestState=first["requestState"]))
    assert text(result) == "job 7"  # ctx.state on the retry is the returned state
    assert "ttlMs" not in result
    assert runs.runs == 2


def test_a_returned_input_required_with_questions_asks_them(h: EngineHarness) -> None:
    first = input_required(h, call(h, "two_step"))
    assert first["inputRequests"] == {
        "elicitation-1": {"method": "elicitation/create", "params": {"message": "Really?", "requestedSchema": EMPTY_FORM}}
    }
    result = h.ok(call(h, "two_step", inputResponses={"elicitation-1": ACCEPT}, requestState=first["requestState"]))
    assert text(result) == "state 1, accept"


def test_a_tool_without_a_context_may_return_input_required_too(h: EngineHarness, runs: Counter) -> None:
    first = input_required(h, call(h, "no_context", {"topic": "cake"}))
    assert first["inputRequests"] == {
        "elicitation-1": {"method": "elicitation/create", "params": {"message": "Really cake?", "requestedSchema": EMPTY_FORM}}
    }
    result = h.ok(call(h, "no_context", {"topic": "cake"}, inputResponses={"elicitation-1": ACCEPT}, requestState=first["requestState"]))
    assert text(result) == "cake: run 2"


# == handshake era ===================================================================================

class AskingExchange(FakeExchange, Cancellable):
    """A FakeExchange that can ask the client: `ask()` records each request and returns a future.

    `answers` is a script, used in order: a dict resolves the future, an exception fails it. The
    futures of a group of `batch` requests are resolved only once the whole group was asked (so a
    Context that waited before sending the rest would never get its answers). With no script left
    the futures stay pending, for the test to resolve or cancel. Cancellation works like the
    transports' (it is a `Cancellable`): `cancel()` sets the event and runs the `on_cancel` callbacks.
    """

    on_cancel = Cancellable.on_cancel  # the transports', not FakeExchange's None

    def __init__(self, answers: list[Any] | None = None, *, batch: int = 1) -> None:
        Cancellable.__init__(self)  # its own cancel_event, as the transports' exchanges
        self.notifications: list[tuple[str, dict[str, Any]]] = []
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.futures: list[concurrent.futures.Future[dict[str, Any]]] = []
        self.asked_event = threading.Event()
        self._script = list(answers or [])
        self._batch = batch
        self._pending: list[concurrent.futures.Future[dict[str, Any]]] = []

    def ask(self, method: str, params: dict[str, Any]) -> concurrent.futures.Future[dict[str, Any]]:
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        self.asked.append((method, params))
        self.futures.append(future)
        self._pending.append(future)
        if len(self._pending) >= self._batch and len(self._script) >= len(self._pending):
            for waiting in self._pending:
                answer = self._script.pop(0)
                if isinstance(answer, BaseException):
                    waiting.set_exception(answer)
                else:
                    waiting.set_result(answer)
            self._pending = []
        self.asked_event.set()
        return future


def handshake(version: str = "2025-11-25", caps: Any = ALL_CAPS, **engine_options: Any) -> EngineHarness:
    h = EngineHarness([make_service()], **engine_options)
    h.ok(h.initialize(version, capabilities=caps))
    return h


def tool_text(h: EngineHarness, outcome: Any) -> str:
    result = h.ok(outcome)
    assert "resultType" not in result
    assert result["isError"] is False, result
    return result["content"][0]["text"]


def test_elicit_sends_one_request_and_returns_the_answer() -> None:
    h = handshake()
    exchange = AskingExchange([ACCEPT])
    assert tool_text(h, h.call_tool("login", exchange=exchange)) == "hello octocat"
    assert exchange.asked == [("elicitation/create", {"message": "Your GitHub username?", "requestedSchema": SCHEMA})]


def test_an_answer_arriving_later_from_another_thread_is_returned() -> None:
    h = handshake(ask_timeout=LONG)
    exchange = AskingExchange()

    def client() -> None:
        assert exchange.asked_event.wait(LONG)
        exchange.futures[0].set_result(SAMPLED)

    thread = threading.Thread(target=client, name="test-client")
    thread.start()
    try:
        assert tool_text(h, h.call_tool("capital", exchange=exchange)) == "capital: Paris."
    finally:
        thread.join(LONG)
    assert exchange.asked[0][0] == "sampling/createMessage"


def test_sequential_questions_are_sent_one_by_one() -> None:
    h = handshake()
    exchange = AskingExchange([ACCEPT, SAMPLED, ROOTS])
    assert tool_text(h, h.call_tool("steps", exchange=exchange)) == "octocat Paris. ['file:///home/user/project']"
    assert [method for method, _ in exchange.asked] == ["elicitation/create", "sampling/createMessage", "roots/list"]


def test_ask_sends_every_question_before_waiting_for_any() -> None:
    h = handshake(ask_timeout=LONG)
    exchange = AskingExchange([ACCEPT, SAMPLED, ROOTS], batch=3)  # answered only once all three are out
    assert tool_text(h, h.call_tool("batch", exchange=exchange)) == "accept Paris. 1"
    assert exchange.asked == [
        ("elicitation/create", {"message": "Name?", "requestedSchema": EMPTY_FORM}),
        ("sampling/createMessage", {"messages": [{"role": "user", "content": {"type": "text", "text": "Capital?"}}], "maxTokens": 5}),
        ("roots/list", {}),
    ]


def test_a_url_mode_request_carries_an_elicitation_id() -> None:
    h = handshake()
    exchange = AskingExchange([{"action": "accept"}])
    assert tool_text(h, h.call_tool("url_login", exchange=exchange)) == "url: accept"
    [(method, params)] = exchange.asked
    assert method == "elicitation/create"
    assert isinstance(params.pop("elicitationId"), str)
    assert params == {"mode": "url", "message": "Sign in", "url": "https://example.com/login"}


def test_an_error_answer_reaches_the_tool() -> None:
    h = handshake()
    exchange = AskingExchange([McpError(-1, "User rejected the request")])
    assert tool_text(h, h.call_tool("careful", exchange=exchange)) == "refused -1 User rejected the request"


def test_an_uncaught_error_answer_fails_the_tool_naming_the_question() -> None:
    # the client's code is not passed off as the tool's answer to the call
    h = handshake()
    exchange = AskingExchange([McpError(-1, "User rejected the request", {"why": "no"})])
    result = h.ok(h.call_tool("confirm", exchange=exchange))
    assert result["isError"] is True
    assert result["content"][0]["text"] == "Tool 'confirm': the client refused elicitation/create: User rejected the request"


def test_a_malformed_answer_is_invalid_params() -> None:
    h = handshake()
    error = h.fails(h.call_tool("login", exchange=AskingExchange([12345])), -32602)
    assert "github_login" in error.message


def test_no_answer_within_the_ask_timeout_is_a_tool_error_naming_the_method() -> None:
    h = handshake(ask_timeout=0.2)
    exchange = AskingExchange()  # never answers
    started = time.monotonic()
    result = h.ok(h.call_tool("confirm", exchange=exchange))
    assert time.monotonic() - started < LONG
    text = result["content"][0]["text"]
    assert result["isError"] is True and "elicitation/create" in text and "0.2" in text
    assert [future.cancelled() for future in exchange.futures] == [True]


def test_a_per_call_timeout_overrides_the_engines() -> None:
    h = handshake(ask_timeout=LONG * 10)
    exchange = AskingExchange()
    result = h.ok(h.call_tool("impatient", exchange=exchange))
    text = result["content"][0]["text"]
    assert result["isError"] is True and "elicitation/create" in text and "0.1" in text
    assert exchange.futures[0].cancelled()


def test_the_ask_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Engine(EngineHarness().catalog, dict(SERVER_INFO), ask_timeout=0)


def test_cancelling_the_request_ends_the_wait_and_cancels_the_requests(caplog: pytest.LogCaptureFixture) -> None:
    h = handshake(ask_timeout=LONG * 10)
    exchange = AskingExchange()  # never answers

    def client() -> None:
        assert exchange.asked_event.wait(LONG)
        exchange.cancel()

    thread = threading.Thread(target=client, name="test-canceller")
    started = time.monotonic()
    thread.start()
    try:
        outcome = h.call_tool("batch", exchange=exchange)
    finally:
        thread.join(LONG)
    assert time.monotonic() - started < LONG
    assert len(exchange.futures) == 3 and all(future.cancelled() for future in exchange.futures)
    result = h.ok(outcome)  # nobody reads it (the client cancelled); the tool ended as an error
    assert result["isError"] is True and "cancelled" in result["content"][0]["text"]
    assert not [record for record in caplog.records if record.levelname in ("ERROR", "CRITICAL")]  # not a crash


def test_a_request_cancelled_before_asking_does_not_wait() -> None:
    h = handshake(ask_timeout=LONG * 10)
    exchange = AskingExchange()
    exchange.cancel()
    started = time.monotonic()
    result = h.ok(h.call_tool("confirm", exchange=exchange))
    assert time.monotonic() - started < LONG
    assert result["isError"] is True
    assert all(future.cancelled() for future in exchange.futures)


def test_a_transport_that_cannot_ask_fails_the_tool() -> None:
    h = handshake()
    result = h.ok(h.call_tool("confirm", exchange=FakeExchange()))
    assert result["isError"] is True and "cannot send requests" in result["content"][0]["text"]


@pytest.mark.parametrize(
    ("tool", "caps", "what"),
    [
        ("confirm", {}, "elicitation"),
        ("url_login", {"elicitation": {}}, "URL-mode elicitation"),
        ("capital", {"roots": {}}, "sampling"),
        ("where", {"sampling": {}}, "roots"),
    ],
)
def test_an_undeclared_capability_fails_the_tool_without_asking(tool: str, caps: dict[str, Any], what: str) -> None:
    # -32021 is a 2026-07-28 code: in the handshake era the tool fails, as for Tool(requires=...)
    h = handshake(caps=caps)
    exchange = AskingExchange([ACCEPT])
    result = h.ok(h.call_tool(tool, exchange=exchange))
    assert result["isError"] is True
    assert f"client capability {what}," in result["content"][0]["text"]
    assert exchange.asked == []


def test_an_undeclared_capability_refuses_a_prompt_without_asking() -> None:
    h = handshake(caps={})
    exchange = AskingExchange([ACCEPT])
    error = h.fails(h.request("prompts/get", {"name": "intro"}, exchange=exchange), -32021)
    assert "elicitation" in error.message
    assert exchange.asked == []


@pytest.mark.parametrize(
    ("version", "tool", "caps", "needed"),
    [
        ("2025-03-26", "confirm", {"elicitation": {}}, "2025-06-18"),
        ("2024-11-05", "confirm", {"elicitation": {}}, "2025-06-18"),
        ("2025-06-18", "url_login", {"elicitation": {"url": {}}}, "2025-11-25"),
    ],
)
def test_elicitation_is_refused_on_a_version_without_it(version: str, tool: str, caps: dict[str, Any], needed: str) -> None:
    h = handshake(version, caps=caps)
    exchange = AskingExchange([ACCEPT])
    result = h.ok(h.call_tool(tool, exchange=exchange))
    assert result["isError"] is True
    message = result["content"][0]["text"]
    assert version in message and needed in message
    assert exchange.asked == []


def test_sampling_and_roots_work_on_the_oldest_version() -> None:
    h = handshake("2024-11-05", caps={"sampling": {}, "roots": {}})
    assert tool_text(h, h.call_tool("capital", exchange=AskingExchange([SAMPLED]))) == "capital: Paris."
    assert tool_text(h, h.call_tool("where", exchange=AskingExchange([ROOTS]))) == "roots: file:///home/user/project"


def test_a_returned_input_required_is_asked_and_the_function_runs_again() -> None:
    runs = Counter()
    h = EngineHarness([make_service(runs)])
    h.ok(h.initialize(capabilities=ALL_CAPS))
    exchange = AskingExchange([ACCEPT])
    assert tool_text(h, h.call_tool("two_step", exchange=exchange)) == "state 1, accept"
    assert exchange.asked == [("elicitation/create", {"message": "Really?", "requestedSchema": EMPTY_FORM})]  # asked once
    assert runs.runs == 2


def test_a_returned_input_required_without_questions_runs_again_at_once() -> None:
    runs = Counter()
    h = EngineHarness([make_service(runs)])
    h.ok(h.initialize(capabilities=ALL_CAPS))
    exchange = AskingExchange()
    assert tool_text(h, h.call_tool("shedding", exchange=exchange)) == "job 7"
    assert exchange.asked == [] and runs.runs == 2


def test_a_tool_without_a_context_returning_input_required_is_asked_and_runs_again() -> None:
    runs = Counter()
    h = EngineHarness([make_service(runs)])
    h.ok(h.initialize(capabilities=ALL_CAPS))
    exchange = AskingExchange([ACCEPT])
    assert tool_text(h, h.call_tool("no_context", {"topic": "tea"}, exchange=exchange)) == "tea: run 2"
    assert exchange.asked == [("elicitation/create", {"message": "Really tea?", "requestedSchema": EMPTY_FORM})]


def test_a_function_that_never_stops_asking_ends_after_8_rounds() -> None:
    runs = Counter()
    h = EngineHarness([make_service(runs)])
    h.ok(h.initialize(capabilities=ALL_CAPS))
    error = h.fails(h.call_tool("forever", exchange=AskingExchange()), -32603)
    assert "8 rounds" in error.message and "tools/call" in error.message
    assert runs.runs == 8


def test_a_prompt_and_a_resource_ask_in_the_handshake_era() -> None:
    h = handshake()
    exchange = AskingExchange([ACCEPT])
    result = h.ok(h.request("prompts/get", {"name": "intro"}, exchange=exchange))
    assert result["messages"] == [{"role": "user", "content": {"type": "text", "text": "Introduce octocat"}}]
    exchange = AskingExchange([{"action": "decline"}])
    result = h.ok(h.request("resources/read", {"uri": "mem://greeting/ada"}, exchange=exchange))
    assert result["contents"] == [{"uri": "mem://greeting/ada", "mimeType": "text/plain", "text": "decline ada"}]
    assert exchange.asked[0][1]["message"] == "Greet ada?"


def test_handshake_requests_ignore_mrtr_fields() -> None:
    h = handshake()
    exchange = AskingExchange([ACCEPT])
    params = {"name": "login", "inputResponses": {"github_login": {"action": "decline"}}, "requestState": "junk"}
    assert tool_text(h, h.request("tools/call", params, exchange=exchange)) == "hello octocat"
    assert len(exchange.asked) == 1
