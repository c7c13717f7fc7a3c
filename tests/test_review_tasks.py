"""A review of MCP tasks (both forms) with fresh eyes: each test proves one defect and is marked
`xfail(strict=True)` until the product code is fixed.

Real threads, sockets and stores throughout (the runner's own pool, keeper and store, loopback HTTP
through `Server.start_http` or `mcpsync.hosting.run_http`); waits poll with a deadline, never sleep
to synchronise. Where two replicas are needed, two `TaskRunner`s share one `MemoryTaskStore`, as the
runner's own tests do.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcpsync import Context, Server, Service
from mcpsync.auth import Auth
from mcpsync.auth.resource.principal import Principal
from mcpsync.auth.resource.static import StaticTokens
from mcpsync.tasks import MemoryTaskStore, TaskLimits, TaskRecord, TaskRunner
from mcpsync.tasks.record import LEGACY, MODERN

from ._timeouts import LONG
from .tasks.http_client import Answer, Endpoint
from .tasks.test_runner import context

pytestmark = pytest.mark.timeout(90)

EXTENSION: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
ELICITING: dict[str, Any] = {"elicitation": {}, **EXTENSION}


def until(predicate: Callable[[], Any], what: str, within: float = LONG) -> Any:
    """Poll `predicate` until it holds (its value); fail after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def start(runner: TaskRunner, body: Callable[[Context], dict[str, Any]], *, form: str = MODERN) -> TaskRecord:
    return runner.create(form=form, tool="job", owner=None, requested_ttl=None, body=lambda control: body(context(control)))


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": False}


@pytest.fixture
def runners() -> Iterator[Callable[..., TaskRunner]]:
    made: list[TaskRunner] = []

    def make(store: Any = None, **options: Any) -> TaskRunner:
        runner = TaskRunner(store, **options)
        made.append(runner)
        return runner

    yield make
    for runner in made:
        runner.close(LONG)


class InThread:
    """A blocking call on a thread of its own: its value or exception once it returns."""

    def __init__(self, call: Callable[[], Any], name: str) -> None:
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.thread = threading.Thread(target=self._run, args=(call,), name=name, daemon=True)
        self.thread.start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self.future.set_result(call())
        except BaseException as exc:  # handed to the test, whatever it is
            self.future.set_exception(exc)

    def returned_within(self, seconds: float) -> bool:
        self.thread.join(seconds)
        return not self.thread.is_alive()


# -- 1. a task whose result cannot be encoded never ends ----------------------------------------------

def _pdf_report_service(go: threading.Event) -> Service:
    service = Service("reports")

    @service.tool(task="optional")
    def report() -> dict[str, Any]:
        """Builds a PDF report (and, by a bug of its author's, hands the PDF over as bytes)."""
        go.wait(LONG)
        return {"type": "resource", "resource": {"uri": "file:///report.pdf", "mimeType": "application/pdf", "blob": b"%PDF-1.7"}}

    return service


def test_a_task_whose_result_is_not_json_fails_and_its_waiting_tasks_result_is_answered() -> None:
    go = threading.Event()
    runner = TaskRunner(limits=TaskLimits(lease=600.0))  # a lease far past the test: only the runner itself can end the task
    with Server("reports", services=[_pdf_report_service(go)], tasks=runner, shutdown_timeout=1.0) as server:
        session = Endpoint(server.start_http("127.0.0.1", 0).port).session()
        task_id = session.request("tools/call", {"name": "report", "arguments": {}, "task": {}}).result["task"]["taskId"]
        waiting = InThread(lambda: session.request("tasks/result", {"taskId": task_id}), "review-tasks-result")
        until(lambda: (running := runner._running.get(task_id)) is not None and running.notifiers, "tasks/result waits on the task")
        go.set()  # the function returns its (unencodable) result now
        assert waiting.returned_within(LONG / 2), "tasks/result never returned: the task never ended"  # (the HTTP client gives up at LONG)
        answer: Answer = waiting.future.result()
        assert answer.code == -32603, answer.message
        assert session.request("tasks/get", {"taskId": task_id}).result["status"] == "failed"


# -- 2. the keeper runs cancel callbacks, so one slow callback lets every other lease lapse ------------

def test_a_blocking_cancel_callback_does_not_stop_the_keeper_renewing_the_other_tasks_leases(runners: Callable[..., TaskRunner]) -> None:
    store = MemoryTaskStore()
    here = runners(store, limits=TaskLimits(lease=1.5))  # the keeper renews every 0.5 s
    elsewhere = runners(store, limits=TaskLimits(lease=1.5))
    in_callback, unblock, release = threading.Event(), threading.Event(), threading.Event()

    def forwarding(ctx: Context) -> dict[str, Any]:
        def cancel_upstream() -> None:  # what the gateway's relay does: a request to an upstream that does not answer
            in_callback.set()
            unblock.wait(LONG * 2)

        ctx.on_cancel(cancel_upstream)
        ctx.wait_cancelled(LONG * 2)
        return text("stopped")

    try:
        stuck = start(here, forwarding)
        other = start(here, lambda ctx: (release.wait(LONG * 2), text("done"))[1])
        elsewhere.cancel(stuck.task_id, None)  # the keeper on `here` sees it within a third of the lease
        assert in_callback.wait(LONG), "the cancel never reached the function"
        lease = store.load_task(other.task_id).lease_until  # type: ignore[union-attr]
        assert lease is not None
        until(lambda: (store.load_task(other.task_id).lease_until or 0) > lease,  # type: ignore[union-attr]
              "the running task's lease is renewed while another task's cancel callback blocks")
        assert elsewhere.load(other.task_id, None).status == "working", "a task running fine was taken for lost"
    finally:
        unblock.set()
        release.set()


# -- 3. a tasks/result on the running replica ignores a cancel made through another ------------------

def test_a_tasks_result_on_the_running_replica_returns_once_another_replica_cancels(runners: Callable[..., TaskRunner]) -> None:
    store = MemoryTaskStore()
    here = runners(store, limits=TaskLimits(lease=0.6))  # the keeper reads the record every 0.2 s
    elsewhere = runners(store)
    release = threading.Event()
    try:
        record = start(here, lambda ctx: (release.wait(LONG * 3), text("one long step"))[1], form=LEGACY)
        waiting = InThread(lambda: here.wait(record.task_id, None, cancelled=lambda: False, notify=lambda m, p: None, slice_seconds=0.05),
                           "review-tasks-result")
        assert elsewhere.cancel(record.task_id, None).status == "cancelled"
        until(lambda: here._running[record.task_id].cancel.is_set(), "the keeper signals the function")
        assert here.load(record.task_id, None).status == "cancelled", "tasks/get on the running replica says cancelled"
        assert waiting.returned_within(LONG), "tasks/result on the running replica still waits for a cancelled task"
        assert waiting.future.result().status == "cancelled"
    finally:
        release.set()


# -- 4. `mcpsync serve` gives tasks no time at shutdown ------------------------------------------------

def test_run_http_keeps_the_result_of_a_task_that_returns_within_the_shutdown_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpsync import hosting

    monkeypatch.setattr(hosting, "_leave_unless", lambda clean: None)  # never os._exit the test run, whatever happens
    started = threading.Event()
    service = Service("reports")

    @service.tool(task="required")
    def report(ctx: Context) -> str:
        """Runs until cancelled, then saves what it has (a short write) and returns it."""
        started.set()
        ctx.wait_cancelled(LONG * 2)
        time.sleep(0.3)  # the work itself: saving the partial report
        return "partial report saved"

    server = Server("reports", services=[service], shutdown_timeout=LONG)
    ready: concurrent.futures.Future[str] = concurrent.futures.Future()
    serving = InThread(lambda: hosting.run_http(server, "127.0.0.1", 0, on_ready=ready.set_result), "review-run-http")
    try:
        port = urllib.parse.urlsplit(ready.result(LONG)).port
        assert port is not None
        task_id = Endpoint(port).modern("tools/call", {"name": "report", "arguments": {}}).result["taskId"]
        assert started.wait(LONG)
        server.shutdown()  # what SIGTERM asks of the transport
        assert serving.returned_within(LONG * 2), "run_http did not return"
        serving.future.result()
        kept = server.engine.tasks.load(task_id, None)
        assert (kept.status, kept.status_message) == ("completed", None), (kept.status, kept.status_message)
        assert kept.result is not None and kept.result["content"][0]["text"] == "partial report saved"
    finally:
        server.close(timeout=1.0)


# -- 5. run_task: the task's first question is answered with the answer to the question before it -----

def _deploy_service() -> Service:
    service = Service("deploys")
    target_schema = {"type": "object", "properties": {"target": {"type": "string"}}, "required": ["target"]}
    sure_schema = {"type": "object", "properties": {"sure": {"type": "boolean"}}}

    @service.tool
    def deploy(ctx: Context) -> Any:
        """Asks where to deploy (before any task), then deploys as a task after a confirmation."""
        target = ctx.elicit("Which target?", target_schema)["content"]["target"]

        def rollout(task_ctx: Context) -> str:
            sure = task_ctx.elicit(f"Really deploy to {target}? This cannot be undone.", sure_schema)
            if sure["action"] != "accept":  # the user declined or dismissed the dialog
                return f"not deployed to {target}"
            return f"deployed to {target}"

        return ctx.run_task(rollout)

    return service


def test_2026_a_question_asked_inside_run_task_is_asked_not_answered_by_the_question_before_the_task() -> None:
    with Server("deploys", services=[_deploy_service()], shutdown_timeout=1.0) as server:
        http = Endpoint(server.start_http("127.0.0.1", 0).port)
        first = http.modern("tools/call", {"name": "deploy", "arguments": {}}, capabilities=ELICITING).result
        assert first["resultType"] == "input_required"
        (key,) = first["inputRequests"]
        retry = {"name": "deploy", "arguments": {}, "requestState": first["requestState"],
                 "inputResponses": {key: {"action": "accept", "content": {"target": "production"}}}}
        task = http.modern("tools/call", retry, capabilities=ELICITING).result
        assert task["resultType"] == "task"
        now = until(lambda: (r := http.modern("tasks/get", {"taskId": task["taskId"]}).result)["status"] != "working" and r,
                    "the task asks or ends")
        assert now["status"] == "input_required", f"the task never asked for the confirmation: {now.get('result')}"
        (asked,) = now["inputRequests"].values()
        assert asked["params"]["message"].startswith("Really deploy to production?")
        http.modern("tasks/cancel", {"taskId": task["taskId"]})


# -- 6. lastUpdatedAt moves with every lease renewal ---------------------------------------------------

def test_last_updated_at_does_not_move_when_only_the_lease_is_renewed() -> None:
    release = threading.Event()
    service = Service("jobs")

    @service.tool(task="required")
    def hold() -> str:
        """Works, silently, until released."""
        release.wait(LONG * 2)
        return "done"

    runner = TaskRunner(limits=TaskLimits(lease=0.6))  # renewed every 0.2 s
    try:
        with Server("jobs", services=[service], tasks=runner, shutdown_timeout=1.0) as server:
            http = Endpoint(server.start_http("127.0.0.1", 0).port)
            task_id = http.modern("tools/call", {"name": "hold", "arguments": {}}).result["taskId"]
            before = http.modern("tasks/get", {"taskId": task_id}).result
            lease = runner.store.load_task(task_id).lease_until  # type: ignore[union-attr]
            until(lambda: (runner.store.load_task(task_id).lease_until or 0) > (lease or 0), "the lease is renewed")  # type: ignore[union-attr]
            after = http.modern("tasks/get", {"taskId": task_id}).result
            assert (after["status"], after.get("statusMessage")) == (before["status"], before.get("statusMessage"))
            assert after["lastUpdatedAt"] == before["lastUpdatedAt"], "nothing changed but the server's own bookkeeping"
    finally:
        release.set()


# -- 7. one caller's tasks, within its own cap, keep every other caller's from running -----------------

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"


def test_another_caller_s_task_runs_while_one_caller_s_tasks_fill_the_pool_within_its_cap() -> None:
    release, bob_ran = threading.Event(), threading.Event()
    service = Service("jobs")

    @service.tool(task="required")
    def report(ctx: Context) -> str:
        """A long report (here: until released)."""
        if ctx.principal is not None and ctx.principal.subject == "bob":
            bob_ran.set()
            return "bob's report"
        release.wait(LONG * 3)
        return "alice's report"

    auth = Auth(StaticTokens({ALICE: Principal("alice", scopes=frozenset({"mcp"})), BOB: Principal("bob", scopes=frozenset({"mcp"}))}),
                required_scopes=["mcp"])
    runner = TaskRunner(limits=TaskLimits(max_running=2, max_waiting=20, max_kept_per_owner=6, max_kept=50))
    try:
        with Server("jobs", services=[service], auth=auth, tasks=runner, shutdown_timeout=1.0) as server:
            port = server.start_http("127.0.0.1", 0).port
            alice, bob = Endpoint(port, ALICE), Endpoint(port, BOB)
            for _ in range(6):  # alice stays within her own cap
                assert alice.modern("tools/call", {"name": "report", "arguments": {}}).result["resultType"] == "task"
            assert bob.modern("tools/call", {"name": "report", "arguments": {}}).result["resultType"] == "task"
            assert bob_ran.wait(LONG), "bob's task never ran while alice's held every worker"
    finally:
        release.set()
