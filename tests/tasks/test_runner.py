"""TaskRunner on real threads, without a transport: what a client polling a task would see.

Each test drives the runner the way the `tasks/*` operations do (`create`, `load`, `cancel`,
`answer`, `wait`, `list`, `close`) with task functions that block on events the test holds, so no
step depends on timing; the store's clock is injected where time to live and leases matter.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcpsync import Context
from mcpsync.catalog.questions import Question
from mcpsync.errors import McpsyncError
from mcpsync.protocol.jsonrpc import ErrorCode, McpError
from mcpsync.protocol.versions import Era
from mcpsync.tasks import MemoryTaskStore, TaskLimits, TaskRecord, TaskRunner
from mcpsync.tasks.record import LEGACY, MODERN, RELATED_TASK, legacy_task, modern_task
from mcpsync.tasks.control import UNTOLD, TaskControl

from .._timeouts import LONG, SHORT

pytestmark = pytest.mark.timeout(60)

ELICIT = {"type": "object", "properties": {"name": {"type": "string"}}}


class Clock:
    """A wall clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class WatchedStore(MemoryTaskStore):
    """A memory store that tells the test of every write attempted (and what is stored after it)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.saves: list[tuple[str, str]] = []  # (status written, status stored)
        self.saved = threading.Condition()

    def save_task(self, record: TaskRecord) -> TaskRecord:
        stored = super().save_task(record)
        with self.saved:
            self.saves.append((record.status, stored.status))
            self.saved.notify_all()
        return stored

    def wait_for_save(self, status: str) -> tuple[str, str]:
        """The first write of `status` attempted (and the status then stored)."""
        with self.saved:
            assert self.saved.wait_for(lambda: any(written == status for written, _ in self.saves), LONG), f"no {status} was ever written"
            return next(save for save in self.saves if save[0] == status)


@pytest.fixture
def runners() -> Iterator[Callable[..., TaskRunner]]:
    made: list[TaskRunner] = []

    def make(store: Any = None, **options: Any) -> TaskRunner:
        limits = options.pop("limits", TaskLimits())
        runner = TaskRunner(store, limits=limits, **options)
        made.append(runner)
        return runner

    yield make
    for runner in made:
        runner.close(LONG)


def until(predicate: Callable[[], Any], what: str) -> Any:
    """Poll `predicate` until it holds (its value), failing after LONG."""
    deadline = time.monotonic() + LONG
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def task_threads() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name.startswith("mcpsync-task")]


def context(control: TaskControl) -> Context:
    """The function's `Context` on a task's control, as the engine builds it (`make_context`)."""
    legacy = control.form == LEGACY
    return Context(
        request_id=1,
        era=Era.HANDSHAKE if legacy else Era.MODERN,
        protocol_version=control.form,
        client_info=None,
        client_capabilities={"elicitation": {}},
        progress_token=UNTOLD,
        notify=control.notify,
        cancel_event=control.cancel_event,
        wants_log=lambda level: True,
        on_cancel=control.on_cancel,
        ask_client=control.ask,
        ask_keyed=None if legacy else control.ask_keyed,
    )


def text(value: str, *, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": error}


def start(runner: TaskRunner, body: Callable[[Context], dict[str, Any]], *, form: str = MODERN, owner: str | None = None,
          ttl: Any = None) -> TaskRecord:
    return runner.create(form=form, tool="job", owner=owner, requested_ttl=ttl, body=lambda control: body(context(control)))


def settled(runner: TaskRunner, task_id: str, owner: str | None = None) -> TaskRecord:
    return until(lambda: (record := runner.load(task_id, owner)).terminal and record, f"task {task_id} ends")


def not_found(call: Callable[[], Any]) -> McpError:
    with pytest.raises(McpError) as caught:
        call()
    assert caught.value.code == ErrorCode.INVALID_PARAMS and "not found" in caught.value.message
    return caught.value


# -- creation and the end of a task ---------------------------------------------------------------

def test_a_task_is_readable_before_its_creation_returns_and_while_it_works(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    seen: list[str] = []
    release = threading.Event()

    def body(control: TaskControl) -> dict[str, Any]:
        seen.append(runner.load(control.task_id, None).status)  # may run before create() has returned
        release.wait(LONG)
        return text("done")

    record = runner.create(form=MODERN, tool="job", owner=None, requested_ttl=None, body=body)
    assert record.status == "working" and runner.load(record.task_id, None).status == "working"
    until(lambda: seen, "the function starts")
    assert seen == ["working"]
    assert runner.load(record.task_id, None).status == "working"
    release.set()
    done = settled(runner, record.task_id)
    assert (done.status, done.result) == ("completed", text("done"))
    assert modern_task(done, detailed=True)["result"] == text("done")


def test_task_ids_are_long_random_and_distinct(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    ids = {start(runner, lambda ctx: text("x")).task_id for _ in range(20)}
    assert len(ids) == 20 and all(len(task_id) >= 22 for task_id in ids)


@pytest.mark.parametrize(("form", "status"), [(LEGACY, "failed"), (MODERN, "completed")])
def test_a_tool_error_result_fails_a_2025_task_and_completes_a_2026_one(runners: Callable[..., TaskRunner], form: str, status: str) -> None:
    runner = runners()
    record = start(runner, lambda ctx: text("the disk is full", error=True), form=form)
    done = settled(runner, record.task_id)
    assert done.status == status
    assert done.result == text("the disk is full", error=True), "the tool's result is kept either way"
    assert done.error is None
    if form == LEGACY:
        assert legacy_task(done)["statusMessage"] == "the disk is full"
    else:
        assert modern_task(done, detailed=True)["result"]["isError"] is True


def test_an_mcp_error_fails_the_task_with_that_error(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()

    def body(ctx: Context) -> dict[str, Any]:
        raise McpError(-32042, "the upstream refused", {"why": "quota"})

    done = settled(runner, start(runner, body).task_id)
    assert done.status == "failed" and done.result is None
    assert done.error == {"code": -32042, "message": "the upstream refused", "data": {"why": "quota"}}
    assert done.status_message == "the upstream refused"
    wire = modern_task(done, detailed=True)
    assert wire["error"] == done.error and "result" not in wire


def test_an_unexpected_exception_fails_the_task_is_logged_and_tells_the_client_nothing_of_it(
    runners: Callable[..., TaskRunner], caplog: pytest.LogCaptureFixture
) -> None:
    runner = runners()

    def body(ctx: Context) -> dict[str, Any]:
        raise ValueError("password=hunter2 at /srv/secret/path")

    with caplog.at_level(logging.ERROR, logger="mcpsync"):
        done = settled(runner, start(runner, body).task_id)
    assert done.status == "failed" and done.error is not None
    assert done.error["code"] == ErrorCode.INTERNAL_ERROR
    told = repr([legacy_task(done), modern_task(done, detailed=True)])
    assert "hunter2" not in told and "Traceback" not in told and "/srv/secret" not in told
    logged = [record for record in caplog.records if record.exc_info]
    assert logged and "hunter2" in str(logged[0].exc_info[1]), "the server's log keeps what happened"


# -- cancellation ---------------------------------------------------------------------------------

def test_cancel_is_answered_cancelled_at_once_signals_the_function_and_drops_its_late_result(runners: Callable[..., TaskRunner]) -> None:
    store = WatchedStore()
    runner = runners(store)
    running, noticed, finish = threading.Event(), threading.Event(), threading.Event()

    def body(ctx: Context) -> dict[str, Any]:
        running.set()
        if ctx.wait_cancelled(LONG):
            noticed.set()
            finish.wait(LONG)  # still working when the cancel has been answered
        return text("late")

    record = start(runner, body)
    assert running.wait(LONG)
    answered = runner.cancel(record.task_id, None)
    assert answered.status == "cancelled", "the task is cancelled before cancel returns"
    assert runner.load(record.task_id, None).status == "cancelled"
    assert noticed.wait(LONG), "the function never saw the cancellation"
    finish.set()
    assert store.wait_for_save("completed") == ("completed", "cancelled"), "the late result must not replace cancelled"
    final = runner.load(record.task_id, None)
    assert (final.status, final.result) == ("cancelled", None)


def test_cancel_reaches_a_function_through_ctx_cancelled_and_on_cancel(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    registered, polled, called = threading.Event(), threading.Event(), threading.Event()

    def body(ctx: Context) -> dict[str, Any]:
        ctx.on_cancel(called.set)
        registered.set()
        until(lambda: ctx.cancelled, "ctx.cancelled turns true")
        polled.set()
        return text("stopped")

    record = start(runner, body)
    assert registered.wait(LONG)
    runner.cancel(record.task_id, None)
    assert polled.wait(LONG) and called.wait(LONG)


def test_cancelling_a_finished_task_leaves_it_as_it_ended(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    record = start(runner, lambda ctx: text("done"))
    settled(runner, record.task_id)
    again = runner.cancel(record.task_id, None)
    assert (again.status, again.result) == ("completed", text("done"))
    assert runner.load(record.task_id, None).status == "completed"


def test_a_task_cancelled_before_a_worker_took_it_never_runs(runners: Callable[..., TaskRunner]) -> None:
    runner = runners(limits=TaskLimits(max_running=1, max_waiting=4))
    release, ran = threading.Event(), []
    first = start(runner, lambda ctx: (release.wait(LONG), text("first"))[1])
    queued = start(runner, lambda ctx: (ran.append("queued"), text("queued"))[1])
    runner.cancel(queued.task_id, None)
    release.set()
    settled(runner, first.task_id)
    until(lambda: not runner._running, "the queued job has been taken and dropped")
    assert runner.load(queued.task_id, None).status == "cancelled" and ran == []


# -- time to live, caps and a full pool ----------------------------------------------------------

def test_a_task_past_its_time_to_live_is_gone(runners: Callable[..., TaskRunner]) -> None:
    clock = Clock()
    runner = runners(MemoryTaskStore(clock=clock), clock=clock, limits=TaskLimits(default_ttl_ms=60_000, max_ttl_ms=120_000))
    asked = start(runner, lambda ctx: text("kept"), ttl=90_000)
    default = start(runner, lambda ctx: text("kept"))
    capped = start(runner, lambda ctx: text("kept"), ttl=10**12)
    assert (asked.ttl_ms, default.ttl_ms, capped.ttl_ms) == (90_000, 60_000, 120_000)
    for record in (asked, default, capped):
        settled(runner, record.task_id)
    clock.advance(61)
    not_found(lambda: runner.load(default.task_id, None))
    assert runner.load(asked.task_id, None).status == "completed"
    clock.advance(30)
    not_found(lambda: runner.load(asked.task_id, None))
    not_found(lambda: runner.cancel(asked.task_id, None))
    assert [record.task_id for record in runner.list(None, None, 10)[0]] == [capped.task_id]


@pytest.mark.parametrize("ttl", [-5, 0, 1.5, True, "60000", None, [1], {"ms": 1}])
def test_a_ttl_that_is_not_a_positive_integer_gets_the_default(runners: Callable[..., TaskRunner], ttl: Any) -> None:
    runner = runners(limits=TaskLimits(default_ttl_ms=5_000))
    assert start(runner, lambda ctx: text("x"), ttl=ttl).ttl_ms == 5_000


def test_limits_refuse_a_default_ttl_beyond_the_longest() -> None:
    with pytest.raises(ValueError, match="default_ttl_ms"):
        TaskLimits(default_ttl_ms=10_000, max_ttl_ms=5_000)


def test_one_caller_at_its_cap_is_refused_while_others_still_create_until_the_store_is_full(runners: Callable[..., TaskRunner]) -> None:
    clock = Clock()
    runner = runners(MemoryTaskStore(clock=clock), clock=clock, limits=TaskLimits(max_kept_per_owner=2, max_kept=3, default_ttl_ms=1_000))
    first = [start(runner, lambda ctx: text("a"), owner="alice") for _ in range(2)]
    with pytest.raises(McpError) as mine:
        start(runner, lambda ctx: text("a"), owner="alice")
    assert mine.value.code == ErrorCode.INVALID_REQUEST and "this caller holds 2 tasks" in mine.value.message
    start(runner, lambda ctx: text("b"), owner="bob")
    with pytest.raises(McpError) as full:
        start(runner, lambda ctx: text("c"), owner="carol")
    assert "the server holds as many as it keeps" in full.value.message
    assert len(runner.list("alice", None, 10)[0]) == 2 and len(runner.list("carol", None, 10)[0]) == 0
    for record in first:
        settled(runner, record.task_id, "alice")
    clock.advance(2)  # their time to live is over: their places are free again
    start(runner, lambda ctx: text("c"), owner="carol")
    start(runner, lambda ctx: text("a"), owner="alice")


def test_a_full_pool_refuses_clearly_and_keeps_no_record_of_the_refused_task(runners: Callable[..., TaskRunner]) -> None:
    runner = runners(limits=TaskLimits(max_running=1, max_waiting=1, max_kept_per_owner=3))
    release = threading.Event()
    running = start(runner, lambda ctx: (release.wait(LONG), text("1"))[1], owner="alice")
    waiting = start(runner, lambda ctx: text("2"), owner="alice")
    with pytest.raises(McpError) as refused:
        start(runner, lambda ctx: text("3"), owner="alice")
    assert "too many tasks waiting to run" in refused.value.message
    kept = runner.list("alice", None, 10)[0]
    assert [record.task_id for record in kept] == [running.task_id, waiting.task_id], "the refused task's id was never told: keep nothing"
    release.set()
    settled(runner, running.task_id, "alice")
    settled(runner, waiting.task_id, "alice")
    start(runner, lambda ctx: text("4"), owner="alice")  # the refusal took no place of the caller's


def test_a_closed_runner_starts_no_task(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    runner.close(LONG)
    with pytest.raises(McpError, match="shutting down"):
        start(runner, lambda ctx: text("x"))
    assert runner.list(None, None, 10) == ([], None)


# -- leases ---------------------------------------------------------------------------------------

def _orphan(clock: Clock, *, lease_in: float) -> TaskRecord:
    return TaskRecord(task_id="orphan-task-0123456789", form=MODERN, tool="job", created_at=clock.now, updated_at=clock.now,
                      ttl_ms=3_600_000, poll_interval_ms=500, runner="gone-replica:1234:abcdef", lease_until=clock.now + lease_in)


def test_a_task_whose_replica_is_gone_is_failed_once_its_lease_has_passed(runners: Callable[..., TaskRunner]) -> None:
    clock = Clock()
    store = MemoryTaskStore(clock=clock)
    runner = runners(store, clock=clock)
    assert store.create_task(_orphan(clock, lease_in=30), cap=10, owner_cap=10)
    assert runner.load("orphan-task-0123456789", None).status == "working", "its replica still vouches for it"
    clock.advance(31)
    lost = runner.load("orphan-task-0123456789", None)
    assert lost.status == "failed" and lost.error is not None and lost.error["code"] == ErrorCode.INTERNAL_ERROR
    assert "stopped before it finished" in (lost.status_message or "")
    assert store.load_task("orphan-task-0123456789") == lost, "the failure is stored, for every replica"


def test_a_task_running_here_is_not_failed_by_its_own_replica_past_the_lease(runners: Callable[..., TaskRunner]) -> None:
    clock = Clock()
    store = MemoryTaskStore(clock=clock)
    here, elsewhere = runners(store, clock=clock), runners(store, clock=clock)
    release = threading.Event()
    record = start(here, lambda ctx: (release.wait(LONG), text("done"))[1])
    clock.advance(here.limits.lease + 1)  # the keeper has not renewed it yet (it runs every lease/3 s of real time)
    assert here.load(record.task_id, None).status == "working"
    assert elsewhere.load(record.task_id, None).status == "failed", "another replica sees a lapsed lease"
    release.set()
    until(lambda: not here._running, "the function returns")
    assert here.load(record.task_id, None).status == "failed", "a failed record is never overwritten"


def test_the_keeper_renews_the_lease_of_a_running_task(runners: Callable[..., TaskRunner]) -> None:
    clock = Clock()  # the keeper runs every lease/3 s of real time; leases are read on this clock
    store = MemoryTaskStore(clock=clock)
    runner = runners(store, clock=clock, limits=TaskLimits(lease=0.3))
    other = runners(store, clock=clock)
    release = threading.Event()
    record = start(runner, lambda ctx: (release.wait(LONG), text("done"))[1])
    clock.advance(0.2)
    until(lambda: store.load_task(record.task_id).lease_until == clock.now + 0.3, "the lease is renewed")  # type: ignore[union-attr]
    clock.advance(0.2)  # past the first lease, within the renewed one
    assert other.load(record.task_id, None).status == "working"
    release.set()
    assert settled(runner, record.task_id).status == "completed"


def test_a_task_cancelled_through_another_replica_is_stopped_by_its_keeper(runners: Callable[..., TaskRunner]) -> None:
    clock = Clock()  # standing still: the lease never lapses, however slow the machine
    store = MemoryTaskStore(clock=clock)
    runner = runners(store, clock=clock, limits=TaskLimits(lease=0.3))
    other = runners(store, clock=clock)
    stopped = threading.Event()

    def body(ctx: Context) -> dict[str, Any]:
        if ctx.wait_cancelled(LONG):
            stopped.set()
        return text("late")

    record = start(runner, body)
    assert other.cancel(record.task_id, None).status == "cancelled"
    assert stopped.wait(LONG), "the function was never told"
    until(lambda: not runner._running, "the function returns")
    assert runner.load(record.task_id, None).status == "cancelled"


# -- shutdown -------------------------------------------------------------------------------------

def test_close_cancels_keeps_what_returns_in_time_fails_the_rest_and_leaves_no_thread() -> None:
    runner = TaskRunner(limits=TaskLimits(max_running=2, max_running_per_owner=2, max_waiting=2))
    release = threading.Event()
    started = threading.Semaphore(0)

    def polite(ctx: Context) -> dict[str, Any]:
        started.release()
        ctx.wait_cancelled(LONG)
        return text("stopped cleanly")

    def stubborn(ctx: Context) -> dict[str, Any]:
        started.release()
        release.wait(LONG)
        return text("too late")

    try:
        kept = start(runner, polite)
        lost = start(runner, stubborn)
        queued = start(runner, polite)
        assert started.acquire(timeout=LONG) and started.acquire(timeout=LONG)
        runner.close(LONG / 5)  # the polite one returns at once; the stubborn one is waited for this long
        assert runner.load(kept.task_id, None).result == text("stopped cleanly")
        for record in (lost, queued):
            failed = runner.load(record.task_id, None)
            assert failed.status == "failed" and "shut down" in (failed.status_message or "")
    finally:
        release.set()
    until(lambda: not task_threads(), "the stubborn function's worker ends once it returns")
    assert runner.load(lost.task_id, None).status == "failed"


def test_close_with_cooperative_tasks_leaves_no_task_thread_when_it_returns() -> None:
    runner = TaskRunner()
    started = threading.Event()

    def body(ctx: Context) -> dict[str, Any]:
        started.set()
        ctx.wait_cancelled(LONG)
        return text("stopped")

    record = start(runner, body)
    assert started.wait(LONG)
    runner.close(LONG)
    assert task_threads() == []
    assert runner.load(record.task_id, None).status == "completed"
    runner.close(LONG)  # again: nothing to do


# -- 2026-07-28 questions: inputRequests and tasks/update -----------------------------------------

def test_questions_appear_in_input_requests_and_an_update_answers_them_one_by_one(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()

    def body(ctx: Context) -> dict[str, Any]:
        name, city = ctx.ask(Question.elicitation("Your name?", ELICIT, key="name"), Question.elicitation("Your city?", ELICIT, key="city"))
        return text(f"{name['content']['name']} of {city['content']['name']}")

    record = start(runner, body)
    asking = until(lambda: (r := runner.load(record.task_id, None)).input_requests.keys() == {"name", "city"} and r, "both questions")
    assert asking.status == "input_required"
    wire = modern_task(asking, detailed=True)
    assert wire["inputRequests"]["name"] == {"method": "elicitation/create", "params": {"message": "Your name?", "requestedSchema": ELICIT}}
    runner.answer(record.task_id, None, {"name": {"action": "accept", "content": {"name": "Ada"}}, "unknown": {"ignored": True}})
    partial = runner.load(record.task_id, None)  # at once: an answered key is gone before answer() returns
    assert (partial.status, list(partial.input_requests)) == ("input_required", ["city"])
    runner.answer(record.task_id, None, {"name": {"action": "accept", "content": {"name": "Eve"}}})  # no longer outstanding: ignored
    runner.answer(record.task_id, None, {"city": {"action": "accept", "content": {"name": "London"}}})
    done = settled(runner, record.task_id)
    assert done.result == text("Ada of London") and done.input_requests == {}


def test_a_question_answered_goes_back_to_working_until_the_next(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    go_on, asked_again = threading.Event(), threading.Event()

    def body(ctx: Context) -> dict[str, Any]:
        first = ctx.elicit("first?", ELICIT, key="first")
        go_on.wait(LONG)
        asked_again.set()
        second = ctx.elicit("second?", ELICIT, key="second")
        return text(first["content"]["name"] + second["content"]["name"])

    record = start(runner, body)
    until(lambda: "first" in runner.load(record.task_id, None).input_requests, "the first question")
    runner.answer(record.task_id, None, {"first": {"action": "accept", "content": {"name": "a"}}})
    assert runner.load(record.task_id, None).status == "working"
    go_on.set()
    until(lambda: "second" in runner.load(record.task_id, None).input_requests, "the second question")
    assert list(runner.load(record.task_id, None).input_requests) == ["second"]
    runner.answer(record.task_id, None, {"second": {"action": "accept", "content": {"name": "b"}}})
    assert settled(runner, record.task_id).result == text("ab")


def test_a_question_the_function_gave_up_on_leaves_input_requests(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    release = threading.Event()

    def body(ctx: Context) -> dict[str, Any]:
        try:
            ctx.elicit("anyone?", ELICIT, key="q", timeout=0.05)
        except McpsyncError:
            pass
        release.wait(LONG)  # goes on without the answer
        return text("went on")

    record = start(runner, body)
    until(lambda: (r := runner.load(record.task_id, None)).status == "working" and not r.input_requests and r.updated_at > record.updated_at,
          "the withdrawn question leaves inputRequests and the task works again")
    runner.answer(record.task_id, None, {"q": {"action": "accept", "content": {"name": "late"}}})  # ignored
    release.set()
    assert settled(runner, record.task_id).result == text("went on")


def test_cancel_while_asking_ends_the_question_and_the_task_stays_cancelled(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    ended: list[BaseException] = []

    def body(ctx: Context) -> dict[str, Any]:
        try:
            ctx.elicit("wait?", ELICIT, key="q")
        except McpsyncError as exc:
            ended.append(exc)
        return text("after")

    record = start(runner, body)
    until(lambda: runner.load(record.task_id, None).status == "input_required", "the question")
    runner.cancel(record.task_id, None)
    until(lambda: ended, "the question ends")
    final = runner.load(record.task_id, None)
    assert (final.status, final.input_requests) == ("cancelled", {})


# -- 2025-11-25 questions: carried by a waiting tasks/result ------------------------------------

class Carrier:
    """A `tasks/result` request's exchange.ask, as the test sees it: each request sent, with a
    future the test answers or fails."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any], concurrent.futures.Future[dict[str, Any]]]] = []
        self.changed = threading.Condition()

    def __call__(self, method: str, params: dict[str, Any]) -> concurrent.futures.Future[dict[str, Any]]:
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        with self.changed:
            self.sent.append((method, params, future))
            self.changed.notify_all()
        return future

    def next(self, count: int = 1) -> tuple[str, dict[str, Any], concurrent.futures.Future[dict[str, Any]]]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.sent) >= count, LONG), "nothing was sent on this carrier"
            return self.sent[count - 1]


class Waiter:
    """A `tasks/result` waiting on its own thread."""

    def __init__(self, runner: TaskRunner, task_id: str, carrier: Carrier | None) -> None:
        self.cancel = threading.Event()
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.result: list[TaskRecord] = []
        self.thread = threading.Thread(
            target=lambda: self.result.append(
                runner.wait(task_id, None, cancelled=self.cancel.is_set, carrier=carrier, notify=lambda m, p: self.notes.append((m, p)), slice_seconds=0.05)
            ),
            name="test-tasks-result",
        )
        self.thread.start()

    def end(self) -> TaskRecord:
        self.thread.join(LONG)
        assert not self.thread.is_alive() and self.result
        return self.result[0]


def _asking_task(runner: TaskRunner) -> TaskRecord:
    def body(ctx: Context) -> dict[str, Any]:
        answer = ctx.elicit("Your name?", ELICIT)
        return text(f"hello {answer['content']['name']}")

    return start(runner, body, form=LEGACY)


def test_a_2025_question_waits_for_a_tasks_result_and_goes_out_tied_to_the_task(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    record = _asking_task(runner)
    until(lambda: runner.load(record.task_id, None).status == "input_required", "the task waits for input")
    carrier = Carrier()
    waiter = Waiter(runner, record.task_id, carrier)
    method, params, future = carrier.next()
    assert method == "elicitation/create" and params["message"] == "Your name?"
    assert params["_meta"][RELATED_TASK] == {"taskId": record.task_id}
    future.set_result({"action": "accept", "content": {"name": "Ada"}})
    done = waiter.end()
    assert (done.status, done.result) == ("completed", text("hello Ada"))


def test_a_2025_carrier_that_goes_away_hands_the_question_to_the_next(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    record = _asking_task(runner)
    first = Carrier()
    leaving = Waiter(runner, record.task_id, first)
    _, _, lost = first.next()
    leaving.cancel.set()  # the client dropped its tasks/result: the transport fails its asks
    leaving.end()
    lost.set_exception(McpsyncError("the request it belongs to was answered"))
    assert runner.load(record.task_id, None).status == "input_required"
    second = Carrier()
    waiter = Waiter(runner, record.task_id, second)
    method, params, future = second.next()
    assert method == "elicitation/create" and params["_meta"][RELATED_TASK] == {"taskId": record.task_id}
    future.set_result({"action": "accept", "content": {"name": "Bo"}})
    assert waiter.end().result == text("hello Bo")


def test_a_2025_question_lost_by_one_carrier_goes_to_another_already_waiting(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    record = _asking_task(runner)
    until(lambda: runner.load(record.task_id, None).status == "input_required", "the task waits for input")
    first, second = Carrier(), Carrier()
    one = Waiter(runner, record.task_id, first)
    _, _, lost = first.next()
    two = Waiter(runner, record.task_id, second)
    one.cancel.set()
    one.end()
    lost.set_exception(McpsyncError("the client went away"))
    _, params, future = second.next()
    future.set_result({"action": "accept", "content": {"name": "Cy"}})
    assert two.end().result == text("hello Cy")


@pytest.mark.parametrize("sent", [True, False], ids=["sent", "queued"])
def test_a_2025_question_the_function_gave_up_on_is_withdrawn(runners: Callable[..., TaskRunner], sent: bool) -> None:
    runner = runners()
    asking, release = threading.Event(), threading.Event()

    def body(ctx: Context) -> dict[str, Any]:
        asking.wait(LONG)
        try:
            ctx.elicit("anyone?", ELICIT, timeout=0.05)
        except McpsyncError:
            pass
        release.wait(LONG)
        return text("went on")

    record = start(runner, body, form=LEGACY)
    carrier = Carrier()
    waiter = Waiter(runner, record.task_id, carrier) if sent else None
    if waiter is not None:
        until(lambda: runner._running[record.task_id].carriers, "the tasks/result is waiting")
    asking.set()
    until(lambda: (r := runner.load(record.task_id, None)).status == "working" and r.updated_at > record.updated_at, "the task works again")
    if waiter is not None:
        assert carrier.next()[2].cancelled(), "the client is told the question is withdrawn"
    later = Carrier()
    last = Waiter(runner, record.task_id, later)
    release.set()
    assert last.end().result == text("went on")
    assert later.sent == [], "a withdrawn question is never asked again"
    if waiter is not None:
        waiter.end()


def test_a_2025_client_refusing_a_question_is_told_to_the_function(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()

    def body(ctx: Context) -> dict[str, Any]:
        try:
            ctx.elicit("Your name?", ELICIT)
        except McpError as exc:
            return text(f"refused {exc.code}")
        return text("answered")

    record = start(runner, body, form=LEGACY)
    carrier = Carrier()
    waiter = Waiter(runner, record.task_id, carrier)
    carrier.next()[2].set_exception(McpError(-32600, "no"))
    assert waiter.end().result == text("refused -32600")


def test_a_2025_tasks_result_gets_the_task_s_log_tied_to_the_task(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    go = threading.Event()

    def body(ctx: Context) -> dict[str, Any]:
        go.wait(LONG)
        ctx.progress(1, 2, "half way")
        ctx.info("a line")
        return text("done")

    record = start(runner, body, form=LEGACY)
    waiter = Waiter(runner, record.task_id, Carrier())
    until(lambda: runner._running[record.task_id].notifiers, "the waiter is registered")
    go.set()
    waiter.end()
    assert [method for method, _ in waiter.notes] == ["notifications/message"], "progress without a token is the statusMessage only"
    assert waiter.notes[0][1]["_meta"][RELATED_TASK] == {"taskId": record.task_id}
    assert runner.load(record.task_id, None).status_message == "half way"


def test_a_progress_message_becomes_the_status_message(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    release = threading.Event()

    def body(ctx: Context) -> dict[str, Any]:
        ctx.progress(1, 3, "step 1 of 3")
        release.wait(LONG)
        return text("done")

    record = start(runner, body)
    until(lambda: runner.load(record.task_id, None).status_message == "step 1 of 3", "the message")
    assert modern_task(runner.load(record.task_id, None), detailed=False)["statusMessage"] == "step 1 of 3"
    release.set()
    settled(runner, record.task_id)


def test_a_tasks_result_waiting_is_ended_by_its_own_cancellation(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    release = threading.Event()
    record = start(runner, lambda ctx: (release.wait(LONG), text("x"))[1], form=LEGACY)
    waiter = Waiter(runner, record.task_id, None)
    time.sleep(SHORT)  # it must still be waiting: nothing ended the task
    assert waiter.thread.is_alive()
    waiter.cancel.set()
    assert waiter.end().status == "working"
    release.set()
    settled(runner, record.task_id)


# -- owners and listing ---------------------------------------------------------------------------

def test_another_owner_s_task_is_not_found_and_not_listed(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    release = threading.Event()
    record = start(runner, lambda ctx: (release.wait(LONG), text("x"))[1], owner="alice")
    not_found(lambda: runner.load(record.task_id, "bob"))
    not_found(lambda: runner.cancel(record.task_id, "bob"))
    not_found(lambda: runner.answer(record.task_id, "bob", {}))
    not_found(lambda: runner.load(record.task_id, None))
    assert runner.list("bob", None, 10) == ([], None)
    assert runner.load(record.task_id, "alice").status == "working"
    release.set()
    settled(runner, record.task_id, "alice")


def test_list_pages_through_one_s_own_tasks_and_refuses_a_foreign_cursor(runners: Callable[..., TaskRunner]) -> None:
    runner = runners()
    mine = [start(runner, lambda ctx: text("x"), owner="alice").task_id for _ in range(5)]
    theirs = start(runner, lambda ctx: text("y"), owner="bob").task_id
    seen, cursor = [], None
    while True:
        page, cursor = runner.list("alice", cursor, 2)
        seen.extend(record.task_id for record in page)
        if cursor is None:
            break
    assert seen == mine
    for bad in (theirs, "garbage", 12, {"a": 1}):
        with pytest.raises(McpError) as caught:
            runner.list("alice", bad, 2)
        assert caught.value.code == ErrorCode.INVALID_PARAMS


@pytest.mark.parametrize("form", [LEGACY, MODERN])
def test_a_result_past_max_result_bytes_fails_the_task_saying_so_and_is_not_kept(runners: Callable[..., TaskRunner], form: str) -> None:
    runner = runners(limits=TaskLimits(max_result_bytes=10_000))
    small = settled(runner, start(runner, lambda ctx: text("x" * 9_000), form=form).task_id)
    assert small.status == "completed" and small.result is not None
    big = settled(runner, start(runner, lambda ctx: text("x" * 20_000), form=form).task_id)
    assert big.status == "failed" and big.result is None
    assert big.error is not None and big.error["code"] == ErrorCode.INTERNAL_ERROR
    assert "more than the 10000 a task may keep" in big.error["message"] == big.status_message
