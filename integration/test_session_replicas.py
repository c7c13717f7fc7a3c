"""Issue 16's multi-replica proof: any replica serves any request, in both eras.

The deployment, all real processes on loopback: one redis-server (tests/bus/redis_server.py,
Debian's binary, no persistence), TWO `python -m mcpsync serve --http 127.0.0.1:0 --processes 2
--bus redis://... integration/fixtures/replicas_app.py` instances (gunicorn masters of two workers
each, one requestState secret in MCPSYNC_REQUEST_STATE_SECRET), and one nginx in front
(integration/fixtures/nginx.py: round-robin, no affinity, one nginx worker so consecutive requests
alternate between the instances). Each test builds its own (two of them kill an instance or
restart Redis).

Which process answered: every tool of the app returns its pid; which instance got an HTTP request:
the balancer here adds the response header `X-Upstream: $upstream_addr` (a subclass of the
fixture, this file's only change to its config). A kept-alive connection straight to an instance
stays with the worker that accepted it, which is how a list is read from each of the four workers.

Nothing sleeps to synchronise: stream reads have socket timeouts (LONG), processes are waited for
by what they print, and conditions are awaited with deadlines.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures.instances import Balancer, Instance, deployed
from fixtures.replica_http import HANDSHAKE, MODERN, Http, Stream
from wire import REPO_ROOT

from mcpsync.bus.store import RETRY_AFTER
from tests._timeouts import LONG
from tests.bus.redis_server import RedisServer

pytestmark = pytest.mark.timeout(120)

APP = Path(__file__).parent / "fixtures" / "replicas_app.py"
DRIVER = Path(__file__).parent / "fixtures" / "replicas_sdk_driver.py"
SECRET = "the one requestState secret of every replica in this test"
URI = "notes://board"
ATTEMPTS = 200  # fresh connections tried to reach each worker of an instance


# -- the deployment -----------------------------------------------------------------------------

class Deployment:
    def __init__(self, redis: RedisServer, instances: list[Instance], balancer: Balancer) -> None:
        self.redis = redis
        self.instances = instances
        self.balancer = balancer
        self.lb = Http(balancer.port)

    def instance_at(self, upstream: str | None) -> Instance:
        found = [instance for instance in self.instances if instance.address == upstream]
        assert found, f"no instance at {upstream!r}:\n{self.balancer.access_log()}"
        return found[0]

    def owner_of(self, pid: int) -> Instance:
        found = [instance for instance in self.instances if pid in instance.pids]
        assert found, f"pid {pid} is no worker of the instances"
        return found[0]


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    with deployed(APP, {"MCPSYNC_REQUEST_STATE_SECRET": SECRET, "REPLICAS_STATE": str(tmp_path / "unlocked")}) as (redis, instances, balancer):
        yield Deployment(redis, instances, balancer)


# -- raw HTTP -----------------------------------------------------------------------------------

def workers_of(instance: Instance) -> dict[int, http.client.HTTPConnection]:
    """A kept-alive connection to each worker of `instance` (fresh connections until the kernel
    has handed one to each, bounded in attempts and time), keyed by the worker's pid."""
    direct = Http(instance.port)
    held: dict[int, http.client.HTTPConnection] = {}
    deadline = time.monotonic() + LONG
    for _ in range(ATTEMPTS):
        connection = direct.connect()
        pid = int(direct.call("pid", modern=True, connection=connection))
        if pid in held:
            connection.close()
        else:
            held[pid] = connection
        if len(held) == len(instance.pids) or time.monotonic() > deadline:
            break
    assert sorted(held) == sorted(instance.pids), f"reached only {sorted(held)} of {instance.pids}"
    return held


def tool_names(answer: Any) -> list[str]:
    return sorted(tool["name"] for tool in answer["result"]["tools"])


# -- 1 and 2: the official SDK through the balancer ------------------------------------------------

@pytest.fixture
def sdk_run(deployment: Deployment, peers_python: str, bounded: Any) -> dict[str, Any]:
    result = bounded([peers_python, str(DRIVER), deployment.balancer.mcp_url], timeout=90.0, cwd=REPO_ROOT)
    try:
        summary: dict[str, Any] = json.loads(result.stdout)
    except ValueError:
        pytest.fail(f"the SDK driver printed no summary ({result.returncode}):\n{result.stderr[-8000:]}", pytrace=False)
    assert not summary["errors"], f"{summary['errors']}\n{result.stderr[-8000:]}\n{json.dumps(summary)[:6000]}"
    summary["_deployment"] = deployment
    return summary


def test_the_sdk_in_legacy_mode_keeps_one_session_across_every_replica(sdk_run: dict[str, Any]) -> None:
    """initialize, list, calls, an answered elicitation and a resource update, each request going
    to the next instance in turn: the session is the same wherever it lands."""
    deployment: Deployment = sdk_run["_deployment"]
    legacy = sdk_run["legacy"]
    assert legacy["protocolVersion"] == HANDSHAKE
    assert {"pid", "ask_name", "unlock", "announce", "touch", "book"} <= set(legacy["tools"]) and "extra" not in legacy["tools"]
    pids = set(legacy["pids"])
    assert len(pids) >= 2 and {deployment.owner_of(pid).port for pid in pids} == {i.port for i in deployment.instances}

    requests = [entry for entry in sdk_run["http"] if entry["session"]]
    sessions = {entry["session"] for entry in requests}
    assert len(sessions) == 1, sessions  # the legacy client's one session (2026-07-28 has none)
    legacy_session = requests[0]["session"]
    legacy_requests = [entry for entry in requests if entry["session"] == legacy_session]
    assert all(entry["status"] in (200, 202, 204) for entry in legacy_requests), json.dumps(legacy_requests, indent=1)
    assert legacy_requests[-1]["verb"] == "DELETE" and legacy_requests[-1]["status"] == 204  # the SDK ended it, on some replica

    # the elicitation: asked on the stream of the call, answered by a POST of its own, elsewhere
    assert legacy["ask"]["name"] == "Ada" and legacy["ask"]["action"] == "accept" and len(legacy["elicited"]) == 1
    (call,) = [entry for entry in legacy_requests if entry["what"] == "tools/call:ask_name"]
    (answer,) = [entry for entry in legacy_requests if entry["what"].startswith("response:")]
    assert answer["status"] == 202 and answer["upstream"] != call["upstream"], (call, answer)
    assert deployment.owner_of(legacy["ask"]["pid"]).address == call["upstream"]

    # the resource update: made where `touch` ran, heard on the GET stream, held by the other instance
    assert legacy["updated"] == [URI]
    (get,) = [entry for entry in legacy_requests if entry["verb"] == "GET"]
    (touch,) = [entry for entry in legacy_requests if entry["what"] == "tools/call:touch"]
    assert deployment.owner_of(legacy["touchPid"]).address == touch["upstream"]
    assert {get["upstream"], touch["upstream"]} == {i.address for i in deployment.instances}, (get, touch)

    # the SDK's DELETE, on one instance, ended the session on both
    ended = set()
    for _ in deployment.instances:
        response = deployment.lb.post({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}}, session=legacy_session)
        response.read()
        assert response.status == 404
        ended.add(response.getheader("X-Upstream"))
    assert ended == {i.address for i in deployment.instances}


def test_a_2026_listen_hears_a_change_made_through_the_other_instance_and_every_worker_lists_it(sdk_run: dict[str, Any]) -> None:
    """The SDK's `client.listen(tools_list_changed=True)` is held by one instance, `unlock` runs
    on the other; the re-list shows the tool. The lists are the same on all four workers, because
    each one's tool filter reads the shared state (a remote change only tells the listeners)."""
    deployment: Deployment = sdk_run["_deployment"]
    pinned = sdk_run["pinned"]
    assert pinned["protocolVersion"] == MODERN
    assert "extra" not in pinned["toolsBefore"] and "extra" in pinned["toolsAfter"]
    assert pinned["event"] == "ToolsListChanged"
    assert pinned["extra"].startswith("extra from ")
    (listen,) = [entry for entry in sdk_run["http"] if entry["what"] == "subscriptions/listen"]
    (unlock,) = [entry for entry in sdk_run["http"] if entry["what"] == "tools/call:unlock"]
    assert listen["upstream"] != unlock["upstream"], (listen, unlock)
    assert deployment.owner_of(pinned["unlockPid"]).address == unlock["upstream"]

    lists = {}
    for instance in deployment.instances:
        for pid, connection in workers_of(instance).items():
            status, answer = Http(instance.port).request("tools/list", modern=True, connection=connection)
            assert status == 200, answer
            lists[pid] = tool_names(answer)
            connection.close()
    assert sorted(lists) == sorted(pid for instance in deployment.instances for pid in instance.pids)
    assert all(names == pinned["toolsAfter"] for names in lists.values()), lists


# -- 3: a GET stream resumed elsewhere after its replica died ---------------------------------------

def test_a_get_stream_resumes_with_last_event_id_on_the_survivor_after_its_instance_is_killed(deployment: Deployment) -> None:
    """The session's GET stream, opened through the balancer, is held by one instance (its
    X-Upstream); that instance is killed (SIGKILL to its master and workers); a change made
    meanwhile (through the balancer: on the survivor) is in the session's event log in Redis, so
    the GET reopened with Last-Event-ID, on the survivor, is primed at that id and gets it."""
    lb = deployment.lb
    session = lb.initialize()
    stream = Stream(lb.get(session))
    holder = deployment.instance_at(stream.upstream)
    primed, message = stream.next()
    assert message is None and primed and stream.retry_ms is not None  # the priming event
    lb.call("announce", {"kind": "tools"}, session=session)
    seen, message = stream.message()
    assert message["method"] == "notifications/tools/list_changed" and seen not in (None, primed)

    holder.kill()
    with pytest.raises(EOFError):
        stream.message()  # the stream died with its instance
    stream.close()
    (survivor,) = [instance for instance in deployment.instances if instance is not holder]
    made_by = int(lb.call("announce", {"kind": "prompts"}, session=session))  # missed: no stream open
    assert made_by in survivor.pids

    resumed = Stream(lb.get(session, last_event_id=seen))
    assert resumed.upstream == survivor.address
    assert resumed.next() == (seen, None)  # primed where it resumes
    event_id, message = resumed.message()
    assert message["method"] == "notifications/prompts/list_changed" and event_id not in (None, seen)
    resumed.close()


# -- 4: single-use requestState across instances -------------------------------------------------

def test_a_single_use_state_runs_once_and_its_replay_on_the_other_instance_is_refused(deployment: Deployment) -> None:
    """`book` (single_use_state=True) asked through the second instance, its retry run by the
    first (one secret: any replica opens any state), the same retry replayed on the second:
    refused -32602, reason "replayed" (the claim is in Redis)."""
    first, second = (Http(instance.port) for instance in deployment.instances)
    status, asked = second.request("tools/call", {"name": "book", "arguments": {}}, modern=True)
    assert status == 200 and asked["result"]["resultType"] == "input_required", asked
    assert set(asked["result"]["inputRequests"]) == {"confirm"}
    retry = {"name": "book", "arguments": {}, "requestState": asked["result"]["requestState"],
             "inputResponses": {"confirm": {"action": "accept", "content": {}}}}

    status, ran = first.request("tools/call", retry, modern=True)  # asked by one instance, run by the other
    assert status == 200 and ran["result"]["resultType"] == "complete", ran
    booked_by = int(ran["result"]["content"][0]["text"].removeprefix("booked by "))
    assert booked_by in deployment.instances[0].pids

    status, replayed = second.request("tools/call", retry, modern=True)
    assert status == 400 and "result" not in replayed, replayed  # mcpsync answers a -32602 with 400
    assert replayed["error"]["code"] == -32602 and replayed["error"]["data"]["reason"] == "replayed", replayed


# -- 5: Redis restarted mid-test ---------------------------------------------------------------

KINDS = {"toolsListChanged": "tools", "promptsListChanged": "prompts", "resourcesListChanged": "resources"}


def test_a_redis_restart_is_503_for_sessions_meanwhile_then_every_listen_is_told_to_relist(deployment: Deployment) -> None:
    """During the outage: handshake requests that need the store are 503 with Retry-After on both
    instances (an initialize at once; a request in a session, once the worker's copy of it, checked
    within the recheck window while its bus had not yet seen Redis go, is no longer trusted), 2026-07-28 requests are served, and each instance's readiness
    probe says 503 (a balancer that probes takes both out of rotation) until Redis is back. After it: the open listen on
    each instance gets a list_changed for every kind it accepted (it may have missed a change).
    redis-server here keeps nothing on disk, so the sessions made before are gone: 404 on both
    instances, and a new initialize works."""
    lb = deployment.lb
    session = lb.initialize()
    assert lb.request("tools/list", session=session)[0] == 200
    listens: dict[str, Stream] = {}
    for request_id in ("L1", "L2"):  # consecutive: one on each instance
        stream, honored = lb.listen(request_id, {kind: True for kind in KINDS})
        assert {kind for kind, on in honored["notifications"].items() if on} == set(KINDS), honored
        listens[request_id] = stream
    assert {stream.upstream for stream in listens.values()} == {instance.address for instance in deployment.instances}

    deployment.redis.stop()
    everywhere = {instance.address for instance in deployment.instances}
    refused: dict[str, set[str | None]] = {"tools/list": set(), "initialize": set()}
    init = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    for _ in deployment.instances:  # consecutive: one on each instance; a session is made in the store, so none
        response = lb.post({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": init})
        body = response.read()
        assert response.status == 503 and response.getheader("Retry-After") == str(RETRY_AFTER), ("initialize", response.status, body)
        refused["initialize"].add(response.getheader("X-Upstream"))
    deadline = time.monotonic() + LONG
    while refused["tools/list"] != everywhere:
        # A worker whose copy of the session was checked within the recheck window, while its bus has
        # not yet seen Redis go, may still serve it from that copy for a moment: then 503 too.
        response = lb.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}, session=session)
        body = response.read()
        if response.status == 503:
            assert response.getheader("Retry-After") == str(RETRY_AFTER), body
            refused["tools/list"].add(response.getheader("X-Upstream"))
        else:
            assert response.status == 200 and time.monotonic() < deadline, ("tools/list", response.status, body)
    assert all(where == everywhere for where in refused.values()), refused
    served = set()
    for _ in deployment.instances:
        response = lb.post({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}, modern=True)
        answer = json.loads(response.read())
        assert response.status == 200 and "pid" in tool_names(answer), answer
        served.add(response.getheader("X-Upstream"))
    assert served == {instance.address for instance in deployment.instances}
    for instance in deployment.instances:  # a balancer's probe of each instance: out of rotation
        status, state = instance.readiness()
        assert (status, state) == (503, {"status": "not ready", "reason": "the session store is unreachable"}), instance.address

    deployment.redis.start()  # same port, empty
    for instance in deployment.instances:  # back in rotation: the store answers again
        assert instance.readiness() == (200, {"status": "ready"}), instance.address
    for request_id, stream in listens.items():
        told: set[str] = set()
        while told != set(KINDS.values()):
            _, message = stream.message()  # each read bounded by LONG
            assert message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == request_id, message
            told.add(message["method"].removeprefix("notifications/").removesuffix("/list_changed"))
        stream.close()

    for _ in deployment.instances:
        status, answer = lb.request("tools/list", session=session)
        assert status == 404, (status, answer)  # the restarted Redis has no sessions
    fresh = lb.initialize()
    ran_on = {deployment.owner_of(int(lb.call("pid", session=fresh))) for _ in range(2)}
    assert len(ran_on) == 2  # the new session, served by both instances
