"""Single-use `requestState` (2026-07-28 MRTR retries), through real transports.

A tool marked `single_use_state=True` (or every tool, by `Engine.single_use_state`) runs once per
state: the first retry carrying a state claims a mark for it in the store of used states and runs;
the same state again, on this server or on another replica sharing the store, is refused -32602
with `data.reason: "replayed"`, and the tool does not run. A store that cannot answer runs
nothing either (-32603, `data.reason: "unchecked"`), and a retry refused for any other reason
leaves its state unused.

Servers are real `Server`s over real pipes (`PipeClient`: the stdio transport) and, once, over
HTTP (`start_http` on a free port); two replicas are two servers in this process sharing one
`MemoryStore` and one secret, as replicas share Redis. Tools count what they did; clocks are
injected where a lifetime is measured. Nothing sleeps.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest

from mcpsync import Context, Server, Service
from mcpsync.bus.memory_store import MemoryStore
from mcpsync.bus.store import StoreUnavailable
from mcpsync.catalog.catalog import Catalog
from mcpsync.catalog.questions import InputRequired
from mcpsync.catalog.service import Tool
from mcpsync.engine.engine import Engine
from mcpsync.engine.request_state import RequestStateSealer
from mcpsync.engine.single_use import CLAIM_MARGIN, ClaimsFull, LocalClaims, claim_key
from mcpsync.protocol.jsonrpc import Request

from .._timeouts import LONG
from ..transport.pipes import PipeClient

pytestmark = pytest.mark.timeout(60)

SECRET = "one secret shared by every replica, 32+ bytes"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}
ACCEPT = {"action": "accept", "content": {}}


class Ledger:
    """What the tools did: each completed run is one entry (a payment made, a message sent)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done: list[str] = []

    def add(self, entry: str) -> str:
        with self.lock:
            self.done.append(entry)
        return entry


def make_service(ledger: Ledger) -> Service:
    service = Service("payments")

    @service.tool(single_use_state=True)
    def pay(amount: int, ctx: Context) -> str:
        """Asks, then pays: the payment must happen once per confirmation."""
        ctx.elicit(f"Pay {amount}?", key="confirm")
        return ledger.add(f"paid {amount}")

    @service.tool
    def note(text: str, ctx: Context) -> str:
        """Asks, then records: harmless to repeat, so its state may be replayed (the default)."""
        ctx.elicit(f"Note {text!r}?", key="confirm")
        return ledger.add(f"noted {text}")

    @service.tool(single_use_state=True)
    def transfer(ctx: Context) -> str:
        """Two rounds: a state of each round is single-use."""
        ctx.elicit("From which account?", key="source")
        ctx.elicit("Really?", key="really")
        return ledger.add("transferred")

    @service.tool(single_use_state=True)
    def batch(ctx: Context) -> Any:
        """Takes no question, only time: returns a state to be called back with (load shedding)."""
        if ctx.state is None:
            return InputRequired(state={"job": 7})
        return ledger.add(f"job {ctx.state['job']}")

    return service


def make_server(ledger: Ledger, name: str = "replica", **options: Any) -> Server:
    return Server(name, services=[make_service(ledger)], request_state_secret=SECRET, **options)


def call(client: PipeClient, name: str, arguments: dict[str, Any] | None = None, *, id: Any, **retry: Any) -> dict[str, Any]:
    """A 2026-07-28 tools/call over the pipes; `retry` adds inputResponses / requestState."""
    params: dict[str, Any] = {"_meta": dict(META), "name": name, "arguments": arguments or {}, **retry}
    response, _ = client.request("tools/call", params, id=id)
    return response


def first_round(client: PipeClient, name: str, arguments: dict[str, Any] | None = None, *, id: Any = "first") -> str:
    """Call a tool that asks, and return the state its `input_required` result carries."""
    result = call(client, name, arguments, id=id)["result"]
    assert result["resultType"] == "input_required", result
    return str(result["requestState"])


def completed(response: dict[str, Any]) -> str:
    result = response["result"]
    assert result["resultType"] == "complete" and result["isError"] is False, result
    return str(result["content"][0]["text"])


def refused(response: dict[str, Any], code: int = -32602) -> dict[str, Any]:
    error = response["error"]
    assert error["code"] == code, error
    return dict(error)


class RecordingClaims:
    """A claim function that records its calls before handing them to a real store (or failing)."""

    def __init__(self, store: Any = None) -> None:
        self.store = store if store is not None else MemoryStore()
        self.calls: list[tuple[str, float]] = []
        self.down = False

    def claim(self, key: str, ttl: float) -> bool:
        self.calls.append((key, ttl))
        if self.down:
            raise StoreUnavailable("the store did not answer")
        return bool(self.store.claim(key, ttl))


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# -- one server -------------------------------------------------------------------------------------

def test_the_first_retry_runs_and_the_same_state_again_is_refused_as_replayed() -> None:
    ledger = Ledger()
    with make_server(ledger) as server, PipeClient(server) as client:
        state = first_round(client, "pay", {"amount": 30})
        assert completed(call(client, "pay", {"amount": 30}, id=2, inputResponses={"confirm": ACCEPT}, requestState=state)) == "paid 30"
        error = refused(call(client, "pay", {"amount": 30}, id=3, inputResponses={"confirm": ACCEPT}, requestState=state))
        assert error == {"code": -32602, "message": "requestState has already been used", "data": {"reason": "replayed"}}
        assert ledger.done == ["paid 30"]  # the replay did not pay again


def test_a_tool_not_marked_single_use_may_replay_its_state_as_before() -> None:
    ledger = Ledger()
    with make_server(ledger) as server, PipeClient(server) as client:
        state = first_round(client, "note", {"text": "hi"})
        for request_id in (2, 3):
            answered = call(client, "note", {"text": "hi"}, id=request_id, inputResponses={"confirm": ACCEPT}, requestState=state)
            assert completed(answered) == "noted hi"
        assert ledger.done == ["noted hi", "noted hi"]


def test_the_engine_setting_makes_every_tool_single_use() -> None:
    ledger = Ledger()
    with make_server(ledger) as server, PipeClient(server) as client:
        server.engine.single_use_state = True
        state = first_round(client, "note", {"text": "once"})
        assert completed(call(client, "note", {"text": "once"}, id=2, inputResponses={"confirm": ACCEPT}, requestState=state)) == "noted once"
        error = refused(call(client, "note", {"text": "once"}, id=3, inputResponses={"confirm": ACCEPT}, requestState=state))
        assert error["data"] == {"reason": "replayed"}
        assert ledger.done == ["noted once"]


def test_a_first_call_without_a_state_is_never_refused() -> None:
    """Only a state is single-use: calling the tool afresh asks afresh, as often as the client likes."""
    ledger = Ledger()
    with make_server(ledger) as server, PipeClient(server) as client:
        assert first_round(client, "pay", {"amount": 1}, id=1) != first_round(client, "pay", {"amount": 1}, id=2)


def test_each_round_of_a_multi_round_call_is_single_use() -> None:
    ledger = Ledger()
    with make_server(ledger) as server, PipeClient(server) as client:
        first = first_round(client, "transfer")
        second = call(client, "transfer", id=2, inputResponses={"source": ACCEPT}, requestState=first)["result"]
        assert second["resultType"] == "input_required" and list(second["inputRequests"]) == ["really"]
        # the first round's state, sent again (a fork of the call), is refused: it was used
        replayed = call(client, "transfer", id=3, inputResponses={"source": ACCEPT}, requestState=first)
        assert refused(replayed)["data"] == {"reason": "replayed"}
        done = call(client, "transfer", id=4, inputResponses={"really": ACCEPT}, requestState=second["requestState"])
        assert completed(done) == "transferred"
        assert refused(call(client, "transfer", id=5, inputResponses={"really": ACCEPT}, requestState=second["requestState"]))["data"] == {
            "reason": "replayed"
        }
        assert ledger.done == ["transferred"]


def test_a_retry_that_is_asked_again_gets_a_fresh_state_that_works() -> None:
    """A retry without the answer runs the tool (its state is used) and asks again; the new
    state differs from the old even within one millisecond (a nonce), so it is not refused."""
    clock = Clock()
    ledger = Ledger()
    with make_server(ledger) as server, PipeClient(server) as client:
        server.engine.request_states = RequestStateSealer(SECRET, clock=clock)  # time stands still
        state = first_round(client, "pay", {"amount": 5})
        again = call(client, "pay", {"amount": 5}, id=2, requestState=state)["result"]
        assert again["resultType"] == "input_required" and again["requestState"] != state
        answered = call(client, "pay", {"amount": 5}, id=3, inputResponses={"confirm": ACCEPT}, requestState=again["requestState"])
        assert completed(answered) == "paid 5"


def test_a_state_only_round_is_single_use_too() -> None:
    ledger = Ledger()
    with make_server(ledger) as server, PipeClient(server) as client:
        result = call(client, "batch", id=1)["result"]
        assert result["resultType"] == "input_required" and "inputRequests" not in result
        assert completed(call(client, "batch", id=2, requestState=result["requestState"])) == "job 7"
        assert refused(call(client, "batch", id=3, requestState=result["requestState"]))["data"] == {"reason": "replayed"}
        assert ledger.done == ["job 7"]


# -- replicas ---------------------------------------------------------------------------------------

@contextmanager
def two_replicas(ledger: Ledger, claim: Any) -> Iterator[tuple[PipeClient, PipeClient]]:
    """Two servers with one secret and one store of used states, a client on each."""
    with make_server(ledger, "a") as a, make_server(ledger, "b") as b:
        a.engine.use_claims(claim)
        b.engine.use_claims(claim)
        with PipeClient(a) as near, PipeClient(b) as far:
            yield near, far


def test_a_state_used_on_one_replica_is_refused_on_the_other() -> None:
    ledger = Ledger()
    store = MemoryStore()
    with two_replicas(ledger, store.claim) as (near, far):
        state = first_round(near, "pay", {"amount": 12})
        assert completed(call(far, "pay", {"amount": 12}, id=2, inputResponses={"confirm": ACCEPT}, requestState=state)) == "paid 12"
        for client in (near, far):  # back on the replica that asked, and again where it ran
            error = refused(call(client, "pay", {"amount": 12}, id=3, inputResponses={"confirm": ACCEPT}, requestState=state))
            assert error["data"] == {"reason": "replayed"}
        assert ledger.done == ["paid 12"]


def test_two_replicas_racing_with_one_state_run_the_tool_once() -> None:
    """The same retry sent to both replicas at once: the store's claim is atomic, one wins."""
    ledger = Ledger()
    store = MemoryStore()
    with two_replicas(ledger, store.claim) as (near, far):
        state = first_round(near, "pay", {"amount": 99})
        params = {"_meta": dict(META), "name": "pay", "arguments": {"amount": 99}, "inputResponses": {"confirm": ACCEPT}, "requestState": state}
        near.request_nowait("tools/call", params, id="race")
        far.request_nowait("tools/call", params, id="race")
        answers = [near.recv(), far.recv()]
        outcomes = sorted("result" if "result" in answer else answer["error"]["data"]["reason"] for answer in answers)
        assert outcomes == ["replayed", "result"]
        assert ledger.done == ["paid 99"]


# -- the store's faults -----------------------------------------------------------------------------

def test_a_store_that_cannot_be_reached_runs_nothing_and_says_the_state_was_not_checked() -> None:
    ledger = Ledger()
    claims = RecordingClaims()
    with make_server(ledger) as server, PipeClient(server) as client:
        server.engine.use_claims(claims.claim)
        state = first_round(client, "pay", {"amount": 7})
        claims.down = True
        error = refused(call(client, "pay", {"amount": 7}, id=2, inputResponses={"confirm": ACCEPT}, requestState=state), -32603)
        assert error["data"] == {"reason": "unchecked"}
        assert "could not be checked" in error["message"] and "did not run" in error["message"]
        assert ledger.done == []
        # the outage used nothing up: once the store answers, the same retry runs (once)
        claims.down = False
        assert completed(call(client, "pay", {"amount": 7}, id=3, inputResponses={"confirm": ACCEPT}, requestState=state)) == "paid 7"
        assert refused(call(client, "pay", {"amount": 7}, id=4, inputResponses={"confirm": ACCEPT}, requestState=state))["data"] == {
            "reason": "replayed"
        }
        assert ledger.done == ["paid 7"]


def test_a_claim_that_breaks_runs_nothing_and_is_an_internal_error() -> None:
    ledger = Ledger()

    def broken(key: str, ttl: float) -> bool:
        raise RuntimeError("a bug in the store")

    with make_server(ledger) as server, PipeClient(server) as client:
        server.engine.use_claims(broken)
        state = first_round(client, "pay", {"amount": 3})
        error = refused(call(client, "pay", {"amount": 3}, id=2, inputResponses={"confirm": ACCEPT}, requestState=state), -32603)
        assert error["message"] == "Internal error" and "correlationId" in error["data"]
        assert ledger.done == []


def test_a_full_local_store_refuses_to_check_rather_than_forget_a_mark() -> None:
    ledger = Ledger()
    with make_server(ledger) as server, PipeClient(server) as client:
        server.engine.use_claims(LocalClaims(capacity=1).claim)
        one, two = first_round(client, "pay", {"amount": 1}, id=1), first_round(client, "pay", {"amount": 2}, id=2)
        assert completed(call(client, "pay", {"amount": 1}, id=3, inputResponses={"confirm": ACCEPT}, requestState=one)) == "paid 1"
        error = refused(call(client, "pay", {"amount": 2}, id=4, inputResponses={"confirm": ACCEPT}, requestState=two), -32603)
        assert error["data"] == {"reason": "unchecked"}
        assert ledger.done == ["paid 1"]


# -- what is claimed, when, for how long ------------------------------------------------------------

def test_the_mark_lives_as_long_as_the_state_could_still_open() -> None:
    clock = Clock()
    claims = RecordingClaims()
    ledger = Ledger()
    with make_server(ledger) as server, PipeClient(server) as client:
        server.engine.request_states = RequestStateSealer(SECRET, ttl=60, clock=clock)
        server.engine.use_claims(claims.claim)
        state = first_round(client, "pay", {"amount": 4})
        clock.now += 20
        call(client, "pay", {"amount": 4}, id=2, inputResponses={"confirm": ACCEPT}, requestState=state)
        call(client, "pay", {"amount": 4}, id=3, inputResponses={"confirm": ACCEPT}, requestState=state)
        [(key, ttl), (again, _)] = claims.calls
        assert ttl == pytest.approx(40 + CLAIM_MARGIN)  # the state's remaining life, and the margin for clocks
        assert key == again == claim_key(state)
        assert state not in key and state.split(".")[1] not in key and state.split(".")[2] not in key  # a digest, never the token


def test_a_refused_retry_claims_nothing_and_leaves_its_state_usable() -> None:
    claims = RecordingClaims()
    ledger = Ledger()
    with make_server(ledger) as server, PipeClient(server) as client:
        server.engine.use_claims(claims.claim)
        state = first_round(client, "pay", {"amount": 8})
        tampered = state[:-2] + ("AA" if state[-2:] != "AA" else "BB")
        assert refused(call(client, "pay", {"amount": 8}, id=2, inputResponses={"confirm": ACCEPT}, requestState=tampered))["data"] == {
            "reason": "tampered"
        }
        other_arguments = call(client, "pay", {"amount": 800}, id=3, inputResponses={"confirm": ACCEPT}, requestState=state)
        assert refused(other_arguments)["data"] == {"reason": "mismatched"}
        bad_arguments = call(client, "pay", {"amount": "eight"}, id=4, inputResponses={"confirm": ACCEPT}, requestState=state)
        assert bad_arguments["result"]["isError"] is True  # the input schema refused it: the tool did not run
        assert claims.calls == []
        assert completed(call(client, "pay", {"amount": 8}, id=5, inputResponses={"confirm": ACCEPT}, requestState=state)) == "paid 8"
        assert len(claims.calls) == 1


def test_an_expired_state_is_refused_as_expired_without_a_claim() -> None:
    clock = Clock()
    claims = RecordingClaims()
    ledger = Ledger()
    with make_server(ledger) as server, PipeClient(server) as client:
        server.engine.request_states = RequestStateSealer(SECRET, ttl=60, clock=clock)
        server.engine.use_claims(claims.claim)
        state = first_round(client, "pay", {"amount": 6})
        clock.now += 60
        assert refused(call(client, "pay", {"amount": 6}, id=2, inputResponses={"confirm": ACCEPT}, requestState=state))["data"] == {
            "reason": "expired"
        }
        assert claims.calls == []


# -- over HTTP --------------------------------------------------------------------------------------

def http_call(url: str, request_id: int, name: str, arguments: dict[str, Any], **retry: Any) -> tuple[int, dict[str, Any]]:
    """One 2026-07-28 tools/call POST; its status and JSON-RPC answer."""
    where = urlsplit(url)
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"_meta": dict(META), "name": name, "arguments": arguments, **retry}}
    conn = http.client.HTTPConnection(str(where.hostname), where.port, timeout=LONG)
    try:
        conn.request("POST", where.path, body=json.dumps(body).encode(), headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name,
        })
        response = conn.getresponse()
        data = response.read()
        assert response.getheader("Content-Type", "").startswith("application/json"), data
        return response.status, json.loads(data)
    finally:
        conn.close()


def test_over_http_two_replicas_refuse_a_replayed_state_with_400() -> None:
    ledger = Ledger()
    store = MemoryStore()
    with make_server(ledger, "a") as a, make_server(ledger, "b") as b:
        a.engine.use_claims(store.claim)
        b.engine.use_claims(store.claim)
        near, far = a.start_http("127.0.0.1", 0), b.start_http("127.0.0.1", 0)
        status, first = http_call(near.url, 1, "pay", {"amount": 50})
        assert status == 200 and first["result"]["resultType"] == "input_required"
        state = first["result"]["requestState"]
        status, answered = http_call(far.url, 2, "pay", {"amount": 50}, inputResponses={"confirm": ACCEPT}, requestState=state)
        assert status == 200 and completed(answered) == "paid 50"
        status, replayed = http_call(near.url, 3, "pay", {"amount": 50}, inputResponses={"confirm": ACCEPT}, requestState=state)
        assert status == 400 and refused(replayed)["data"] == {"reason": "replayed"}
        assert ledger.done == ["paid 50"]


def test_over_http_a_state_that_cannot_be_checked_is_503_so_the_client_retries() -> None:
    ledger = Ledger()
    claims = RecordingClaims()
    with make_server(ledger) as server:
        server.engine.use_claims(claims.claim)
        serving = server.start_http("127.0.0.1", 0)
        status, first = http_call(serving.url, 1, "pay", {"amount": 5})
        claims.down = True
        status, unchecked = http_call(serving.url, 2, "pay", {"amount": 5}, inputResponses={"confirm": ACCEPT}, requestState=first["result"]["requestState"])
        assert status == 503 and refused(unchecked, -32603)["data"] == {"reason": "unchecked"}
        assert ledger.done == []


# -- the pieces -------------------------------------------------------------------------------------

def test_the_decorator_and_the_tool_class_carry_the_mark() -> None:
    service = make_service(Ledger())
    marks = {tool.name: tool.single_use_state for tool in service.tools}
    assert marks == {"pay": True, "note": False, "transfer": True, "batch": True}
    assert Tool(lambda: "x", name="plain").single_use_state is False
    assert Tool(lambda: "x", name="once", single_use_state=True).single_use_state is True
    assert "single_use_state" not in json.dumps(service.tools[0].definition())  # the mark is the server's, not on the wire
    with pytest.raises(TypeError, match="single_use_state"):
        Tool(lambda: "x", name="bad", single_use_state="yes")  # type: ignore[arg-type]


def test_the_engine_takes_the_setting_and_the_claim_and_checks_them() -> None:
    claims = RecordingClaims()
    engine = Engine(Catalog(), {"name": "e", "version": "1"}, single_use_state=True, claim=claims.claim)
    assert engine.single_use_state is True and engine.claim == claims.claim
    engine.single_use_state = False
    assert engine.served.single_use_state is False
    store = MemoryStore()
    engine.use_claims(store.claim)
    assert engine.served.claim == store.claim
    with pytest.raises(TypeError):
        engine.use_claims("redis://nope")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        engine.single_use_state = 1  # type: ignore[assignment]
    with pytest.raises(TypeError):
        Engine(Catalog(), {"name": "e", "version": "1"}, claim=42)  # type: ignore[arg-type]


def test_engines_have_their_own_local_marks_by_default() -> None:
    """No global state: two engines in one process share marks only when handed one store."""
    first, second = Engine(Catalog(), {"name": "a", "version": "1"}), Engine(Catalog(), {"name": "b", "version": "1"})
    assert first.claim("k", 60) is True and first.claim("k", 60) is False
    assert second.claim("k", 60) is True


def test_a_retry_of_a_single_use_tool_never_runs_on_the_reading_thread() -> None:
    """Its claim may wait on the store (a round trip, a socket timeout): a worker's job."""
    service = Service("inline")
    service.add_tool(Tool(lambda: "plain", name="plain"))
    service.add_tool(Tool(lambda: "once", name="once", single_use_state=True))
    engine = Engine(Catalog([service]), {"name": "e", "version": "1"})

    def inline(name: str, **retry: Any) -> bool:
        return engine.runs_inline(Request(1, "tools/call", {"_meta": dict(META), "name": name, **retry}))

    assert inline("plain") and inline("once") and inline("plain", requestState="s")
    assert not inline("once", requestState="s")
    engine.single_use_state = True
    assert not inline("plain", requestState="s")


def test_local_claims_expire_and_stay_bounded() -> None:
    clock = Clock()
    claims = LocalClaims(capacity=2, clock=clock)
    assert claims.claim("a", 10) is True and claims.claim("a", 10) is False
    assert claims.claim("b", 30) is True
    with pytest.raises(ClaimsFull):
        claims.claim("c", 10)
    clock.now += 10  # "a" has expired: its room is free again, and "a" may be claimed anew
    assert claims.claim("c", 10) is True and len(claims) == 2
    with pytest.raises(ClaimsFull):  # full again ("b" and "c" live): never a forgotten mark
        claims.claim("a", 10)
    clock.now += 30
    assert claims.claim("a", 10) is True and claims.claim("b", 10) is True
    with pytest.raises(ValueError):
        LocalClaims(capacity=0)


def test_every_unique_seal_is_a_different_token_even_in_the_same_millisecond() -> None:
    sealer = RequestStateSealer(SECRET, clock=Clock())
    tokens = {sealer.seal("tools/call", {"name": "pay"}, {"confirm": ACCEPT}, unique=True) for _ in range(50)}
    assert len(tokens) == 50 and len({claim_key(token) for token in tokens}) == 50
    plain = {sealer.seal("tools/call", {"name": "pay"}, {"confirm": ACCEPT}) for _ in range(2)}
    assert len(plain) == 1 and len(plain.pop()) < len(tokens.pop())  # others stay as short as before
