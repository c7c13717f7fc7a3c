"""The TaskStore contract, run against MemoryTaskStore and RedisTaskStore (a real redis-server) alike,
then RedisTaskStore on its own: its keys' expiry, outages, and deployments sharing one Redis.

Each contract test gets a `Backend`: one deployment's task store and `replica()`, another handle on
the same records as a second process has (the same `MemoryTaskStore`, or another `RedisTaskStore`
on the same Redis and namespace). Records carry wall-clock times, as the runner writes them, so
expiry is real time: a short ttl, then a poll with a deadline."""

from __future__ import annotations

import logging
import secrets
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
import redis

from mcpsync.bus.redis_task_store import RedisTaskStore
from mcpsync.bus.store import Creation, StoreUnavailable
from mcpsync.tasks.record import CANCELLED, COMPLETED, INPUT_REQUIRED, MODERN, WORKING, TaskRecord
from mcpsync.tasks.store import MemoryTaskStore, TaskStore

from .._timeouts import wait_until
from .redis_server import RedisServer
from .test_store import run_together

pytestmark = pytest.mark.timeout(60)

TTL_MS = 60_000
CAP = 1000
RACERS = 16


def task(owner: str | None = None, *, ttl_ms: int | None = TTL_MS, **fields: Any) -> TaskRecord:
    now = time.time()
    return TaskRecord(task_id=secrets.token_urlsafe(18), form=MODERN, tool="slow", created_at=now, updated_at=now,
                      ttl_ms=ttl_ms, poll_interval_ms=500, owner=owner, runner="replica-a", lease_until=now + 30, **fields)


class Backend:
    """One deployment's task records as the tests see them; see the module docstring."""

    name: str
    store: TaskStore

    def replica(self) -> TaskStore:
        raise NotImplementedError

    def close(self) -> None:
        pass


class MemoryBackend(Backend):
    name = "memory"

    def __init__(self) -> None:
        self.store = MemoryTaskStore()

    def replica(self) -> TaskStore:
        return self.store


class RedisBackend(Backend):
    name = "redis"

    def __init__(self, url: str, namespace: str) -> None:
        self.url, self.namespace = url, namespace
        self._made: list[RedisTaskStore] = []
        self.store = self.replica()

    def replica(self) -> RedisTaskStore:
        store = RedisTaskStore(self.url, namespace=self.namespace)
        self._made.append(store)
        return store

    def close(self) -> None:
        for store in self._made:
            store.close()


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest, namespace: str) -> Iterator[Backend]:
    made: Backend
    if request.param == "memory":
        made = MemoryBackend()
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        made = RedisBackend(server.url, namespace)
    try:
        yield made
    finally:
        made.close()


def everything(store: TaskStore, owner: str | None) -> list[TaskRecord]:
    """Every live task of `owner`, page by page."""
    found, cursor = store.list_tasks(owner, None, 3)
    while cursor is not None:
        page, cursor = store.list_tasks(owner, cursor, 3)
        found += page
    return found


# -- the contract ----------------------------------------------------------------------------------
def test_a_record_comes_back_as_it_went_in_on_every_replica(backend: Backend) -> None:
    record = task("issuer|ünï", status=INPUT_REQUIRED, status_message="Your name? ✓",
                  input_requests={"name": {"method": "elicitation/create", "params": {"message": "ü", "n": [1, 2.5, None]}}})
    assert backend.store.create_task(record, cap=CAP, owner_cap=CAP) is Creation.CREATED
    assert backend.replica().load_task(record.task_id) == record
    done = record.changed(time.time(), status=COMPLETED, result={"content": [{"type": "text", "text": "é"}], "isError": False},
                          input_requests={}, lease_until=None)
    assert backend.replica().save_task(done) == done
    assert backend.store.load_task(record.task_id) == done


def test_an_unknown_task_loads_as_none_and_a_save_does_not_bring_it_into_being(backend: Backend) -> None:
    assert backend.store.load_task("nobody") is None
    record = task()
    assert backend.store.save_task(record) == record
    assert backend.store.load_task(record.task_id) is None
    assert everything(backend.store, None) == []


def test_an_owner_at_its_cap_is_refused_while_others_still_create(backend: Backend) -> None:
    for _ in range(2):
        assert backend.store.create_task(task("alice"), cap=4, owner_cap=2)
    assert backend.replica().create_task(task("alice"), cap=4, owner_cap=2) is Creation.CALLER_FULL
    assert backend.replica().create_task(task("bob"), cap=4, owner_cap=2) is Creation.CREATED
    assert backend.replica().create_task(task(None), cap=4, owner_cap=2) is Creation.CREATED
    assert backend.store.create_task(task("carol"), cap=4, owner_cap=2) is Creation.FULL
    assert backend.store.create_task(task("alice"), cap=4, owner_cap=2) is Creation.CALLER_FULL  # its own bound first
    assert [len(everything(backend.store, owner)) for owner in ("alice", "bob", None, "carol")] == [2, 1, 1, 0]


def test_sixteen_replicas_creating_at_once_never_exceed_the_cap(backend: Backend) -> None:
    stores = [backend.replica() for _ in range(RACERS)]
    answers: list[Creation] = []

    def create(n: int) -> None:
        answers.append(stores[n].create_task(task(f"owner{n % 4}"), cap=5, owner_cap=CAP))

    run_together(RACERS, create)
    assert sorted(answer.value for answer in answers) == sorted(["created"] * 5 + ["full"] * (RACERS - 5))
    assert sum(len(everything(backend.store, f"owner{n}")) for n in range(4)) == 5


def test_sixteen_replicas_creating_for_one_owner_at_once_never_exceed_its_cap(backend: Backend) -> None:
    stores = [backend.replica() for _ in range(RACERS)]
    answers: list[Creation] = []

    def create(n: int) -> None:
        answers.append(stores[n].create_task(task("alice"), cap=CAP, owner_cap=3))

    run_together(RACERS, create)
    assert sorted(answer.value for answer in answers) == sorted(["created"] * 3 + ["caller_full"] * (RACERS - 3))
    assert len(everything(backend.store, "alice")) == 3


def test_a_terminal_record_is_never_overwritten(backend: Backend) -> None:
    record = task()
    backend.store.create_task(record, cap=CAP, owner_cap=CAP)
    working = record.changed(time.time(), status_message="half way")
    assert backend.store.save_task(working) == working
    cancelled = working.changed(time.time(), status=CANCELLED, lease_until=None)
    assert backend.replica().save_task(cancelled) == cancelled
    late = working.changed(time.time(), status=COMPLETED, result={"content": []})
    assert backend.store.save_task(late) == cancelled  # the late result is dropped; the cancel stands
    assert backend.store.load_task(record.task_id) == cancelled


def race_a_cancel_against_progress(backend: Backend) -> None:
    """One replica cancels a task while another saves its progress 30 times, released at once."""
    record = task()
    backend.store.create_task(record, cap=CAP, owner_cap=CAP)
    canceller, runner = backend.replica(), backend.replica()
    cancelled = record.changed(time.time(), status=CANCELLED, lease_until=None)
    seen: list[TaskRecord] = []

    def race(n: int) -> None:
        if n == 0:
            assert canceller.save_task(cancelled) == cancelled  # it was not terminal: written
            return
        for step in range(30):
            seen.append(runner.save_task(record.changed(time.time(), status=WORKING, status_message=f"step {step}")))

    run_together(2, race)
    assert backend.store.load_task(record.task_id) == cancelled
    statuses = [answer.status for answer in seen]
    # once the cancel is stored, every later save answers it (and writes nothing)
    assert statuses == sorted(statuses, key=lambda status: status == CANCELLED)
    assert all(answer == cancelled for answer in seen if answer.status == CANCELLED)


def test_a_cancel_racing_a_runner_s_progress_always_stands(backend: Backend) -> None:
    for _ in range(10):
        race_a_cancel_against_progress(backend)


def test_a_task_past_its_ttl_is_gone_to_every_reader_and_no_longer_counts(backend: Backend) -> None:
    short = task("alice", ttl_ms=400)
    keeps = task("alice", ttl_ms=None)
    assert backend.store.create_task(short, cap=2, owner_cap=CAP)
    assert backend.store.create_task(keeps, cap=2, owner_cap=CAP)
    assert backend.store.create_task(task("bob"), cap=2, owner_cap=CAP) is Creation.FULL
    saved = short.changed(time.time(), status_message="still here")
    assert backend.store.save_task(saved) == saved  # a save keeps the expiry creation set
    other = backend.replica()
    wait_until(lambda: other.load_task(short.task_id) is None)
    assert backend.store.load_task(short.task_id) is None
    assert backend.store.save_task(saved) == saved and backend.store.load_task(short.task_id) is None  # not brought back
    assert everything(backend.store, "alice") == [keeps]  # a task without a ttl stays, and counts
    assert backend.store.create_task(task("bob"), cap=2, owner_cap=CAP) is Creation.CREATED
    assert backend.store.create_task(task("bob"), cap=2, owner_cap=CAP) is Creation.FULL
    with pytest.raises(LookupError):
        backend.store.list_tasks("alice", short.task_id, 10)  # an expired task is no cursor


def test_tasks_are_listed_per_owner_in_creation_order_page_by_page(backend: Backend) -> None:
    alice: list[TaskRecord] = []
    for n in range(5):
        alice.append(task("alice", status_message=f"task {n}"))
        backend.replica().create_task(alice[-1], cap=CAP, owner_cap=CAP)
        backend.store.create_task(task("bob"), cap=CAP, owner_cap=CAP)
    other = backend.replica()
    first, cursor = other.list_tasks("alice", None, 2)
    assert first == alice[:2] and cursor == alice[1].task_id
    second, cursor = backend.store.list_tasks("alice", cursor, 2)
    assert second == alice[2:4] and cursor == alice[3].task_id
    last, cursor = other.list_tasks("alice", cursor, 2)
    assert last == alice[4:] and cursor is None
    assert backend.store.list_tasks("alice", None, 5) == (alice, None)  # an exact page has no next
    assert backend.store.list_tasks("alice", alice[-1].task_id, 5) == ([], None)
    assert backend.store.list_tasks("nobody", None, 5) == ([], None)
    done = alice[2].changed(time.time(), status=COMPLETED, result={"content": []})
    backend.store.save_task(done)
    assert everything(backend.store, "alice") == [*alice[:2], done, *alice[3:]]  # a save keeps its place


def test_a_cursor_that_is_no_live_task_of_the_owner_is_refused(backend: Backend) -> None:
    mine, theirs = task("alice"), task("bob")
    backend.store.create_task(mine, cap=CAP, owner_cap=CAP)
    backend.store.create_task(theirs, cap=CAP, owner_cap=CAP)
    for cursor in ("nope", "", theirs.task_id):
        with pytest.raises(LookupError):
            backend.store.list_tasks("alice", cursor, 10)
    with pytest.raises(LookupError):
        backend.store.list_tasks(None, mine.task_id, 10)  # the unauthenticated are an owner of their own


# -- RedisTaskStore on its own ---------------------------------------------------------------------
def test_a_record_s_key_expires_when_its_task_does_and_one_without_a_ttl_never(redis_server: RedisServer, namespace: str) -> None:
    raw = redis.Redis.from_url(redis_server.url)
    with RedisTaskStore(redis_server.url, namespace=namespace) as store:
        timed, forever = task(ttl_ms=TTL_MS), task(ttl_ms=None)
        store.create_task(timed, cap=CAP, owner_cap=CAP)
        store.create_task(forever, cap=CAP, owner_cap=CAP)
        store.save_task(timed.changed(time.time(), status_message="later"))
        expected = timed.created_at * 1000 + TTL_MS
        assert abs(int(raw.pexpiretime(f"{namespace}task:{timed.task_id}")) - expected) <= 1
        assert raw.pttl(f"{namespace}task:{forever.task_id}") == -1
    raw.close()


def test_deployments_on_one_redis_with_another_namespace_or_database_never_mix(redis_server: RedisServer, namespace: str) -> None:
    other_db = redis_server.url.rsplit("/", 1)[0] + "/3"
    stores = [RedisTaskStore(redis_server.url, namespace=namespace), RedisTaskStore(redis_server.url, namespace=namespace + "other:"),
              RedisTaskStore(other_db, namespace=namespace)]
    try:
        made = [task("alice") for _ in stores]
        for store, record in zip(stores, made, strict=True):
            assert store.create_task(record, cap=1, owner_cap=1) is Creation.CREATED  # each its own count
        for n, store in enumerate(stores):
            assert store.list_tasks("alice", None, 10) == ([made[n]], None)
            assert [store.load_task(record.task_id) for record in made] == [record if m == n else None for m, record in enumerate(made)]
            foreign = replace(made[(n + 1) % 3], status=CANCELLED)
            assert store.save_task(foreign) == foreign and store.load_task(foreign.task_id) is None
    finally:
        for store in stores:
            store.close()


PASSWORD = "s3cret-pw"


def test_while_redis_is_down_every_call_raises_store_unavailable_naming_no_password(own_redis: RedisServer, namespace: str,
                                                                                    caplog: pytest.LogCaptureFixture) -> None:
    # redis-server's default user has no password, which takes any: the URL's password is accepted
    url = f"redis://default:{PASSWORD}@127.0.0.1:{own_redis.port}/0"
    address = f"127.0.0.1:{own_redis.port}/0"
    store = RedisTaskStore(url, namespace=namespace, socket_timeout=0.5)
    record = task()
    calls: dict[str, Callable[[], object]] = {
        "create_task": lambda: store.create_task(task(), cap=CAP, owner_cap=CAP),
        "load_task": lambda: store.load_task(record.task_id),
        "save_task": lambda: store.save_task(record),
        "list_tasks": lambda: store.list_tasks(None, None, 10),
    }
    try:
        caplog.set_level(logging.DEBUG, logger="mcpsync")
        assert store.create_task(record, cap=CAP, owner_cap=CAP)
        own_redis.stop()
        for name, call in calls.items():
            with pytest.raises(StoreUnavailable) as info:
                call()
            assert address in str(info.value), name
            whole = "".join(traceback.format_exception(info.value))
            assert PASSWORD not in whole and url not in whole, name
        own_redis.start()
        # the same store, no new one: Redis restarted empty (no persistence) and says so plainly
        assert store.load_task(record.task_id) is None
        for call in calls.values():
            call()
        assert PASSWORD not in caplog.text
    finally:
        store.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        store.load_task(record.task_id)
