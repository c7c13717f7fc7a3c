"""The Store contract, run against MemoryStore and RedisStore alike, then RedisStore on its own: its
keys and their expiry in Redis, corrupt entries, one round trip a call, and outages.

Each contract test gets a `Backend`: one deployment's store, a `replica()` (another handle on the
same shared state, as a second process has: the same `MemoryStore`, or another `RedisStore` on the
same Redis and namespace) and `advance(seconds)`, which makes time pass without waiting: the
MemoryStore's injected clock moves on, and in Redis every key of the namespace has its remaining
ttl, and every sorted-set score (an expiry in ms), moved that much closer. So expiry is tested to
the millisecond's logic with no sleep; that Redis's own ttls are what the store set is checked on
its own (PTTL and PEXPIRETIME)."""

from __future__ import annotations

import json
import logging
import selectors
import socket
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from mcpsync.bus.memory_store import MemoryStore
from mcpsync.bus.redis_store import RedisStore
from mcpsync.bus.store import Creation, SessionRecord, Store, StoreUnavailable

from .._timeouts import LONG
from .redis_server import RedisServer
from .silent_proxy import SilentProxy

LOG_CAP = 5
TTL = 60.0
CAP = 100
RECORD = SessionRecord(protocol_version="2025-11-25")
FULL = SessionRecord(
    protocol_version="2025-06-18",
    client_capabilities={"roots": {"listChanged": True}, "sampling": {}, "ünï": [1, 2.5, None]},
    client_info={"name": "client", "version": "1.0"},
    principal_key="issuer|subject",
    log_level="debug",
    subscriptions=frozenset({"file:///b", "file:///a", "ünï://ç"}),
    cursor="opaque-cursor",
)


class Backend:
    """One deployment's shared state as the tests see it; see the module docstring."""

    name: str
    store: Store

    def replica(self) -> Store:
        raise NotImplementedError

    def advance(self, seconds: float) -> None:
        raise NotImplementedError

    def id_key(self, event_id: str) -> tuple[int, ...]:
        """The order of this backend's event ids (opaque to the transports, known to its tests)."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class MemoryBackend(Backend):
    name = "memory"

    def __init__(self) -> None:
        self.now = 1000.0
        self.store = MemoryStore(log_cap=LOG_CAP, clock=lambda: self.now)

    def replica(self) -> Store:
        return self.store

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def id_key(self, event_id: str) -> tuple[int, ...]:
        return (int(event_id),)


class RedisBackend(Backend):
    name = "redis"

    def __init__(self, url: str, namespace: str) -> None:
        self.url, self.namespace = url, namespace
        self.raw = redis.Redis.from_url(url)
        self._made: list[RedisStore] = []
        self.store = self.replica()

    def replica(self) -> RedisStore:
        store = RedisStore(self.url, namespace=self.namespace, log_cap=LOG_CAP)
        self._made.append(store)
        return store

    def advance(self, seconds: float) -> None:
        ms = round(seconds * 1000)
        for key in self.raw.scan_iter(match=f"{self.namespace}*"):
            if self.raw.type(key) == b"zset":
                scores: list[tuple[bytes, float]] = self.raw.zrange(key, 0, -1, withscores=True)  # type: ignore[assignment]
                if scores:
                    self.raw.zadd(key, {member: score - ms for member, score in scores})
                continue
            left = self.raw.pttl(key)
            if 0 < left <= ms:
                self.raw.delete(key)
            elif left > ms:
                self.raw.pexpire(key, left - ms)

    def id_key(self, event_id: str) -> tuple[int, ...]:
        ms, seq = event_id.split("-")
        return (int(ms), int(seq))

    def key(self, kind: str, name: str = "") -> str:
        return f"{self.namespace}{kind}{name}"

    def expire_time(self, key: str) -> int:
        return int(self.raw.pexpiretime(key))

    def close(self) -> None:
        for store in self._made:
            store.close()
        self.raw.close()


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


@pytest.fixture
def redis_backend(redis_server: RedisServer, namespace: str) -> Iterator[RedisBackend]:
    made = RedisBackend(redis_server.url, namespace)
    try:
        yield made
    finally:
        made.close()


def run_together(count: int, work: Callable[[int], None]) -> None:
    """Run work(0..count-1) on as many threads released at once by a barrier; re-raise a failure."""
    start = threading.Barrier(count)
    failures: list[BaseException] = []

    def run(n: int) -> None:
        try:
            start.wait(LONG)
            work(n)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(n,), name=f"store-test-{n}") for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LONG)
    assert not any(thread.is_alive() for thread in threads)
    if failures:
        raise failures[0]


# -- the contract: sessions ------------------------------------------------------------------------
def test_both_backends_are_stores(backend: Backend) -> None:
    assert isinstance(backend.store, Store)


def test_a_record_comes_back_as_it_went_in_on_every_replica(backend: Backend) -> None:
    assert backend.store.create_session("full", FULL, ttl=TTL, cap=CAP)
    assert backend.store.create_session("bare", RECORD, ttl=TTL, cap=CAP)
    other = backend.replica()
    assert other.load_session("full", ttl=TTL) == FULL
    bare = other.load_session("bare", ttl=TTL)
    assert bare == RECORD
    assert bare is not None and bare.client_info is None and bare.principal_key is None and bare.cursor is None
    assert bare.subscriptions == frozenset() and isinstance(bare.subscriptions, frozenset)


def test_an_unknown_session_loads_as_none_and_deletes_as_false(backend: Backend) -> None:
    assert backend.store.load_session("nobody", ttl=TTL) is None
    assert backend.store.delete_session("nobody") is False
    assert backend.store.session_subscriptions() == {}


def test_update_sets_the_named_fields_and_keeps_the_others(backend: Backend) -> None:
    backend.store.create_session("s", FULL, ttl=TTL, cap=CAP)
    backend.replica().update_session("s", log_level="warning", subscriptions=frozenset({"x://1"}), cursor=None)
    loaded = backend.store.load_session("s", ttl=TTL)
    assert loaded == SessionRecord(
        protocol_version=FULL.protocol_version, client_capabilities=FULL.client_capabilities, client_info=FULL.client_info,
        principal_key=FULL.principal_key, log_level="warning", subscriptions=frozenset({"x://1"}), cursor=None,
    )
    backend.store.update_session("s")  # no changes: nothing
    assert backend.store.load_session("s", ttl=TTL) == loaded


def test_update_of_a_field_a_record_does_not_have_is_a_type_error(backend: Backend) -> None:
    backend.store.create_session("s", RECORD, ttl=TTL, cap=CAP)
    with pytest.raises(TypeError):
        backend.store.update_session("s", colour="blue")
    assert backend.store.load_session("s", ttl=TTL) == RECORD


def test_update_of_a_missing_session_brings_nothing_back(backend: Backend) -> None:
    backend.store.update_session("nobody", log_level="info")
    backend.store.create_session("gone", RECORD, ttl=TTL, cap=CAP)
    assert backend.store.delete_session("gone")
    backend.replica().update_session("gone", cursor="5")
    assert backend.store.load_session("nobody", ttl=TTL) is None
    assert backend.store.load_session("gone", ttl=TTL) is None
    assert backend.store.session_subscriptions() == {}


def test_delete_on_one_replica_ends_the_session_everywhere(backend: Backend) -> None:
    backend.store.create_session("s", RECORD, ttl=TTL, cap=CAP)
    other = backend.replica()
    assert other.delete_session("s") is True
    assert backend.store.load_session("s", ttl=TTL) is None
    assert backend.store.delete_session("s") is False
    assert "s" not in backend.store.session_subscriptions()


def test_session_subscriptions_lists_every_live_session_fresh_or_used(backend: Backend) -> None:
    backend.store.create_session("fresh", RECORD, ttl=TTL, cap=CAP)
    backend.store.create_session("used", FULL, ttl=TTL, cap=CAP)
    backend.store.load_session("used", ttl=TTL)
    backend.store.create_session("changed", RECORD, ttl=TTL, cap=CAP)
    backend.store.update_session("changed", subscriptions=frozenset({"a://1", "a://2"}))
    backend.store.create_session("deleted", FULL, ttl=TTL, cap=CAP)
    backend.store.delete_session("deleted")
    assert backend.replica().session_subscriptions() == {
        "fresh": frozenset(), "used": FULL.subscriptions, "changed": frozenset({"a://1", "a://2"}),
    }


# -- expiry ----------------------------------------------------------------------------------------
def test_a_session_never_loaded_expires_after_its_ttl(backend: Backend) -> None:
    backend.store.create_session("s", RECORD, ttl=10, cap=CAP)
    backend.advance(9)
    assert "s" in backend.store.session_subscriptions()
    backend.advance(2)
    assert backend.store.load_session("s", ttl=10) is None
    assert backend.store.session_subscriptions() == {}
    assert backend.store.delete_session("s") is False


def test_each_load_pushes_the_expiry_to_ttl_from_then(backend: Backend) -> None:
    backend.store.create_session("s", RECORD, ttl=10, cap=CAP)
    for _ in range(3):
        backend.advance(8)
        assert backend.store.load_session("s", ttl=10) == RECORD
    backend.advance(8)
    assert backend.replica().load_session("s", ttl=30) == RECORD  # the ttl of this load, not of the create
    backend.advance(25)
    assert backend.store.load_session("s", ttl=10) == RECORD
    backend.advance(11)
    assert backend.store.load_session("s", ttl=10) is None


def test_an_expired_session_takes_its_log_and_its_updates_with_it(backend: Backend) -> None:
    backend.store.create_session("s", RECORD, ttl=10, cap=CAP)
    backend.store.load_session("s", ttl=10)
    assert set(backend.store.append_events({"s": b"one"})) == {"s"}
    backend.advance(11)
    assert backend.store.events_after("s", None, 10) == []
    assert backend.store.append_events({"s": b"two"}) == {}
    backend.store.update_session("s", log_level="debug")
    assert backend.store.load_session("s", ttl=10) is None
    assert backend.store.session_subscriptions() == {}


def test_an_expired_session_frees_its_place_under_the_cap(backend: Backend) -> None:
    for n in range(3):
        backend.store.create_session(f"s{n}", RECORD, ttl=10, cap=3)
        backend.store.load_session(f"s{n}", ttl=10)
    assert not backend.store.create_session("late", RECORD, ttl=10, cap=3)
    backend.advance(11)
    assert backend.store.create_session("late", RECORD, ttl=10, cap=3)
    assert set(backend.store.session_subscriptions()) == {"late"}


def test_a_claim_holds_for_its_ttl_and_not_after(backend: Backend) -> None:
    assert backend.store.claim("state-1", 10) is True
    backend.advance(9)
    assert backend.replica().claim("state-1", 10) is False
    assert backend.store.claim("state-2", 10) is True
    backend.advance(2)
    assert backend.store.claim("state-1", 10) is True
    assert backend.store.claim("state-2", 10) is False


# -- the cap ---------------------------------------------------------------------------------------
def test_at_the_cap_the_fresh_session_waiting_longest_is_evicted(backend: Backend) -> None:
    backend.store.create_session("old", RECORD, ttl=TTL, cap=3)
    backend.advance(1)
    backend.store.create_session("used", RECORD, ttl=TTL, cap=3)
    backend.store.load_session("used", ttl=TTL)
    backend.advance(1)
    backend.store.create_session("newer", RECORD, ttl=TTL, cap=3)
    backend.store.append_events({"old": b"lost"})
    assert backend.replica().create_session("newest", RECORD, ttl=TTL, cap=3)
    assert set(backend.store.session_subscriptions()) == {"used", "newer", "newest"}
    assert backend.store.load_session("old", ttl=TTL) is None
    assert backend.store.events_after("old", None, 10) == []
    assert backend.store.create_session("again", RECORD, ttl=TTL, cap=3)
    assert set(backend.store.session_subscriptions()) == {"used", "newest", "again"}


def test_at_the_cap_with_every_session_used_a_create_is_refused(backend: Backend) -> None:
    for n in range(3):
        assert backend.store.create_session(f"s{n}", RECORD, ttl=TTL, cap=3)
        assert backend.store.load_session(f"s{n}", ttl=TTL) is not None
    assert backend.store.create_session("refused", RECORD, ttl=TTL, cap=3) is Creation.FULL
    assert backend.store.load_session("refused", ttl=TTL) is None
    assert set(backend.store.session_subscriptions()) == {"s0", "s1", "s2"}
    backend.store.delete_session("s1")
    assert backend.store.create_session("room", RECORD, ttl=TTL, cap=3)


def test_creates_racing_on_two_replicas_never_exceed_the_cap(backend: Backend) -> None:
    cap, threads, attempts = 8, 6, 40
    stores = [backend.store, backend.replica()]
    used: list[str] = []
    refused: list[str] = []
    lock = threading.Lock()

    def create_and_use(n: int) -> None:
        store = stores[n % 2]
        for k in range(attempts):
            sid = f"t{n}-{k}"
            if not store.create_session(sid, RECORD, ttl=TTL, cap=cap):
                with lock:
                    refused.append(sid)
            elif store.load_session(sid, ttl=TTL) is not None:  # None: another create evicted it first
                with lock:
                    used.append(sid)

    run_together(threads, create_and_use)
    live = backend.store.session_subscriptions()
    assert len(live) == cap  # the first `cap` creates fill it; every later one evicts one or adds none
    assert set(used) <= set(live) and len(used) <= cap
    assert refused  # once every place was used, creates were refused


# -- one caller's bound (caller_cap) and the shared table's fairness ----------------------------
def mine(caller: str | None) -> SessionRecord:
    return SessionRecord(protocol_version="2025-11-25", principal_key=caller)


def test_a_caller_at_its_bound_gives_up_its_own_oldest_fresh_session_and_nobody_elses(backend: Backend) -> None:
    store = backend.store
    assert store.create_session("b", mine("B"), ttl=TTL, cap=CAP, caller_cap=2)  # B's is the oldest fresh one of all
    backend.advance(1)
    for n in range(5):
        assert backend.replica().create_session(f"a{n}", mine("A"), ttl=TTL, cap=CAP, caller_cap=2) is Creation.CREATED
        backend.advance(1)
    assert set(store.session_subscriptions()) == {"b", "a3", "a4"}
    assert store.load_session("a2", ttl=TTL) is None


def test_a_caller_whose_sessions_are_all_used_is_refused_alone_until_one_ends(backend: Backend) -> None:
    store = backend.store
    for n in range(2):
        store.create_session(f"a{n}", mine("A"), ttl=TTL, cap=CAP, caller_cap=2)
        store.load_session(f"a{n}", ttl=TTL)
    assert backend.replica().create_session("a2", mine("A"), ttl=TTL, cap=CAP, caller_cap=2) is Creation.CALLER_FULL
    assert store.load_session("a2", ttl=TTL) is None
    assert store.create_session("b", mine("B"), ttl=TTL, cap=CAP, caller_cap=2) is Creation.CREATED
    store.delete_session("a0")
    assert store.create_session("a2", mine("A"), ttl=TTL, cap=CAP, caller_cap=2) is Creation.CREATED
    assert set(store.session_subscriptions()) == {"a1", "a2", "b"}


def test_a_caller_at_its_bound_gives_up_its_own_session_idle_longest_once_past_caller_idle(backend: Backend) -> None:
    store = backend.store

    def create(on: Store, sid: str) -> Creation:
        return on.create_session(sid, mine("A"), ttl=TTL, cap=CAP, caller_cap=2, caller_idle=8.0)

    store.create_session("b", mine("B"), ttl=TTL, cap=CAP, caller_cap=2)
    store.load_session("b", ttl=TTL)  # B's, idle longest of all: never A's to give up
    backend.advance(1)
    for sid in ("a0", "a1"):
        create(store, sid)
        store.load_session(sid, ttl=TTL)
        backend.advance(5)
    # a0 was last loaded 10 s ago, past caller_idle: the client went away without DELETE
    assert create(backend.replica(), "a2") is Creation.CREATED
    assert store.load_session("a0", ttl=TTL) is None
    store.load_session("a2", ttl=TTL)
    # a1 was loaded 5 s ago: in use as far as any replica knows, so A is refused
    assert create(store, "a3") is Creation.CALLER_FULL
    backend.advance(4)
    assert create(store, "a3") is Creation.CREATED
    assert set(store.session_subscriptions()) == {"b", "a2", "a3"}


def test_an_expired_session_frees_its_place_under_its_callers_bound(backend: Backend) -> None:
    backend.store.create_session("a0", mine("A"), ttl=10, cap=CAP, caller_cap=1)
    backend.store.load_session("a0", ttl=10)
    assert backend.store.create_session("a1", mine("A"), ttl=10, cap=CAP, caller_cap=1) is Creation.CALLER_FULL
    backend.advance(11)
    assert backend.store.create_session("a1", mine("A"), ttl=10, cap=CAP, caller_cap=1) is Creation.CREATED


def test_each_load_keeps_a_used_session_counted_for_its_caller(backend: Backend) -> None:
    backend.store.create_session("a0", mine("A"), ttl=10, cap=CAP, caller_cap=1)
    for _ in range(3):  # 24 s in all, past the first ttl: the caller's count follows the pushed expiry
        backend.advance(8)
        assert backend.replica().load_session("a0", ttl=10) is not None
    assert backend.store.create_session("a1", mine("A"), ttl=10, cap=CAP, caller_cap=1) is Creation.CALLER_FULL


def test_the_unauthenticated_have_no_bound_of_their_own(backend: Backend) -> None:
    for n in range(4):
        assert backend.store.create_session(f"s{n}", mine(None), ttl=TTL, cap=CAP, caller_cap=2)
        backend.store.load_session(f"s{n}", ttl=TTL)
    assert len(backend.store.session_subscriptions()) == 4


def test_a_full_table_takes_a_fresh_session_only_from_a_caller_holding_more_than_the_newcomer_will(backend: Backend) -> None:
    store = backend.store
    store.create_session("b", mine("B"), ttl=TTL, cap=4, caller_cap=3)  # B's one fresh session, the oldest
    backend.advance(1)
    for n in range(3):
        store.create_session(f"a{n}", mine("A"), ttl=TTL, cap=4, caller_cap=3)
        backend.advance(1)
    assert backend.replica().create_session("c", mine("C"), ttl=TTL, cap=4, caller_cap=3) is Creation.CREATED
    assert set(store.session_subscriptions()) == {"b", "a1", "a2", "c"}  # A held 3 > 0 + 1: its oldest gave way
    assert store.create_session("d", mine("D"), ttl=TTL, cap=4, caller_cap=3) is Creation.CREATED
    assert set(store.session_subscriptions()) == {"b", "a2", "c", "d"}  # A held 2 > 1
    # now every caller holds one: none gives its only session to a newcomer, fresh or not
    assert store.create_session("e", mine("E"), ttl=TTL, cap=4, caller_cap=3) is Creation.FULL
    # but a caller's own fresh session still makes way for its next one
    assert store.create_session("d2", mine("D"), ttl=TTL, cap=4, caller_cap=3) is Creation.CREATED
    assert set(store.session_subscriptions()) == {"b", "a2", "c", "d2"}


def test_one_caller_creating_at_once_on_two_replicas_never_exceeds_its_bound(backend: Backend) -> None:
    bound, threads, attempts = 5, 6, 30
    stores = [backend.store, backend.replica()]
    outcomes: list[Creation] = []
    lock = threading.Lock()

    def create_and_use(n: int) -> None:
        store = stores[n % 2]
        for k in range(attempts):
            sid = f"t{n}-{k}"
            outcome = store.create_session(sid, mine("A"), ttl=TTL, cap=CAP, caller_cap=bound)
            with lock:
                outcomes.append(outcome)
            if outcome and k % 2:
                store.load_session(sid, ttl=TTL)

    run_together(threads, create_and_use)
    assert len(backend.store.session_subscriptions()) == bound
    assert Creation.FULL not in outcomes and Creation.CREATED in outcomes
    assert Creation.CALLER_FULL in outcomes  # once its bound was all used sessions


def test_two_callers_creating_at_once_keep_to_their_bounds_and_the_cap(backend: Backend) -> None:
    cap, bound, threads, attempts = 6, 4, 6, 30
    stores = [backend.store, backend.replica()]
    backend.store.create_session("b-first", mine("B"), ttl=TTL, cap=cap, caller_cap=bound)
    backend.store.load_session("b-first", ttl=TTL)

    def create_and_use(n: int) -> None:
        store, caller = stores[n % 2], "AB"[n % 2]
        for k in range(attempts):
            sid = f"{caller}-{n}-{k}"
            if store.create_session(sid, mine(caller), ttl=TTL, cap=cap, caller_cap=bound) and k % 3 == 0:
                store.load_session(sid, ttl=TTL)

    run_together(threads, create_and_use)
    live = backend.store.session_subscriptions()
    assert len(live) <= cap
    for caller in "AB":
        held = [sid for sid in live if sid.startswith(caller) or (caller == "B" and sid == "b-first")]
        assert 1 <= len(held) <= bound, (caller, held)
    assert "b-first" in live  # B's used session never gave way to A


def test_two_replicas_changing_different_fields_at_once_both_keep_theirs(backend: Backend) -> None:
    backend.store.create_session("s", FULL, ttl=TTL, cap=CAP)
    writers = [(backend.store, "log_level"), (backend.replica(), "cursor")]

    def write(n: int) -> None:
        store, name = writers[n]
        for k in range(200):
            store.update_session("s", **{name: f"{name}-{k}"})

    run_together(2, write)
    loaded = backend.store.load_session("s", ttl=TTL)
    assert loaded is not None
    assert (loaded.log_level, loaded.cursor) == ("log_level-199", "cursor-199")
    assert loaded.subscriptions == FULL.subscriptions and loaded.client_capabilities == FULL.client_capabilities


# -- event logs ------------------------------------------------------------------------------------
def test_events_come_back_oldest_first_with_increasing_ids_on_every_replica(backend: Backend) -> None:
    backend.store.create_session("s", RECORD, ttl=TTL, cap=CAP)
    other = backend.replica()
    ids = [(backend.store if n % 2 else other).append_events({"s": f"frame {n}".encode()})["s"] for n in range(4)]
    assert len(set(ids)) == 4 and ids == sorted(ids, key=backend.id_key)
    assert other.events_after("s", None, 10) == [(event_id, f"frame {n}".encode()) for n, event_id in enumerate(ids)]


def test_events_after_an_id_and_up_to_a_limit(backend: Backend) -> None:
    backend.store.create_session("s", RECORD, ttl=TTL, cap=CAP)
    ids = [backend.store.append_events({"s": bytes([n]) * 3})["s"] for n in range(4)]
    assert backend.store.events_after("s", ids[0], 10) == [(ids[n], bytes([n]) * 3) for n in (1, 2, 3)]
    assert backend.store.events_after("s", ids[1], 1) == [(ids[2], b"\x02\x02\x02")]
    assert backend.store.events_after("s", None, 2) == [(ids[0], b"\x00\x00\x00"), (ids[1], b"\x01\x01\x01")]
    assert backend.store.events_after("s", ids[3], 10) == []
    assert backend.store.events_after("s", None, 0) == []


@pytest.mark.parametrize("after", ["", "garbage", "-3", "1-x", "x-1", "1.5", "1-2-3", " 1", "(1-0", "\u0661\u0662\u0663", "\u00b2", "\u0661-\u0662"])
def test_an_after_not_of_the_backends_form_counts_as_from_the_oldest(backend: Backend, after: str) -> None:
    backend.store.create_session("s", RECORD, ttl=TTL, cap=CAP)
    first = backend.store.append_events({"s": b"first"})["s"]
    assert backend.store.events_after("s", after, 10) == [(first, b"first")]


def test_the_log_keeps_its_newest_log_cap_events(backend: Backend) -> None:
    backend.store.create_session("s", RECORD, ttl=TTL, cap=CAP)
    ids = [backend.store.append_events({"s": str(n).encode()})["s"] for n in range(LOG_CAP * 2 + 2)]
    kept = [(ids[n], str(n).encode()) for n in range(LOG_CAP + 2, LOG_CAP * 2 + 2)]
    assert backend.store.events_after("s", None, 100) == kept
    assert backend.store.events_after("s", ids[1], 100) == kept  # after an id the cap dropped: what is kept
    assert backend.store.events_after("s", ids[-3], 100) == kept[-2:]


def test_one_append_reaches_every_live_session_and_skips_the_others(backend: Backend) -> None:
    for sid in ("a", "b", "deleted"):
        backend.store.create_session(sid, RECORD, ttl=TTL, cap=CAP)
    backend.store.delete_session("deleted")
    ids = backend.replica().append_events({"a": b"to a", "b": b"to b", "deleted": b"x", "unknown": b"y"})
    assert set(ids) == {"a", "b"}
    assert backend.store.events_after("a", None, 10) == [(ids["a"], b"to a")]
    assert backend.store.events_after("b", None, 10) == [(ids["b"], b"to b")]
    assert backend.store.events_after("deleted", None, 10) == []
    assert backend.store.events_after("unknown", None, 10) == []
    assert backend.store.append_events({}) == {}


def test_an_append_retried_under_its_change_id_is_logged_once(backend: Backend) -> None:
    """A retry of an append that ran (a timeout says nothing of that) is skipped on every replica;
    another change, or an append with no id, is logged as before."""
    backend.store.create_session("s", RECORD, ttl=TTL, cap=CAP)
    first = backend.store.append_events({"s": b"change"}, change="c1")
    assert set(first) == {"s"}
    assert backend.replica().append_events({"s": b"change"}, change="c1") == {}
    backend.store.create_session("t", RECORD, ttl=TTL, cap=CAP)
    assert backend.store.append_events({"s": b"change", "t": b"change"}, change="c1") == {}
    second = backend.store.append_events({"s": b"again"}, change="c2")
    third = backend.store.append_events({"s": b"again"})
    assert [frame for _, frame in backend.store.events_after("s", None, 10)] == [b"change", b"again", b"again"]
    assert backend.store.events_after("s", None, 10)[1:] == [(second["s"], b"again"), (third["s"], b"again")]
    assert backend.store.events_after("t", None, 10) == []


def test_a_deleted_session_takes_its_log_with_it(backend: Backend) -> None:
    backend.store.create_session("s", RECORD, ttl=TTL, cap=CAP)
    first = backend.store.append_events({"s": b"before"})["s"]
    backend.store.delete_session("s")
    assert backend.store.events_after("s", None, 10) == []
    assert backend.store.events_after("s", first, 10) == []
    backend.store.create_session("s", RECORD, ttl=TTL, cap=CAP)  # the same id made again has a new log
    assert backend.store.events_after("s", None, 10) == []


def test_frames_are_bytes_exactly(backend: Backend) -> None:
    backend.store.create_session("s", RECORD, ttl=TTL, cap=CAP)
    frame = bytes(range(256)) + b"\r\n\r\ndata: \xff\x00"
    event_id = backend.store.append_events({"s": frame})["s"]
    assert backend.store.events_after("s", None, 1) == [(event_id, frame)]


# -- claims ----------------------------------------------------------------------------------------
def test_of_many_claims_at_once_on_two_replicas_exactly_one_wins(backend: Backend) -> None:
    stores = [backend.store, backend.replica()]
    wins: list[int] = []

    def claim(n: int) -> None:
        if stores[n % 2].claim("the-state", TTL):
            wins.append(n)

    run_together(8, claim)
    assert len(wins) == 1
    assert backend.store.claim("another-state", TTL) is True


def test_close_is_idempotent(backend: Backend) -> None:
    store = backend.replica()
    store.close()
    store.close()


# -- RedisStore's own: keys, expiry in Redis, corrupt entries, round trips ------------------------
def test_the_keys_are_a_hash_of_json_fields_with_the_sessions_expiry(redis_backend: RedisBackend) -> None:
    store, raw = redis_backend.store, redis_backend.raw
    store.create_session("s", FULL, ttl=30, cap=CAP)
    session, fresh, used = redis_backend.key("session:", "s"), redis_backend.key("sessions:fresh"), redis_backend.key("sessions:used")
    stored: dict[bytes, bytes] = raw.hgetall(session)  # type: ignore[assignment]
    assert {name.decode(): json.loads(value) for name, value in stored.items()} == FULL.to_json()
    assert 29_000 < raw.pttl(session) <= 30_000
    assert raw.zscore(fresh, "s") == redis_backend.expire_time(session) and raw.zscore(used, "s") is None

    store.load_session("s", ttl=90)
    assert 89_000 < raw.pttl(session) <= 90_000
    assert raw.zscore(used, "s") == redis_backend.expire_time(session) and raw.zscore(fresh, "s") is None
    assert not raw.exists(redis_backend.key("events:", "s"))  # no log until its first event

    store.append_events({"s": b"e"})
    events = redis_backend.key("events:", "s")
    assert raw.type(events) == b"stream"
    assert redis_backend.expire_time(events) == redis_backend.expire_time(session)
    store.load_session("s", ttl=120)
    assert redis_backend.expire_time(events) == redis_backend.expire_time(session) == raw.zscore(used, "s")
    assert 119_000 < raw.pttl(events) <= 120_000

    store.update_session("s", log_level="error")
    assert raw.hget(session, "log_level") == b'"error"' and 119_000 < raw.pttl(session) <= 120_000

    store.claim("k", 5)
    assert 4_000 < raw.pttl(redis_backend.key("claim:", "k")) <= 5_000


def test_a_callers_set_is_scored_like_its_sessions_and_ends_with_them(redis_backend: RedisBackend) -> None:
    store, raw = redis_backend.store, redis_backend.raw
    caller = redis_backend.key("caller:", json.dumps(FULL.principal_key))
    store.create_session("s", FULL, ttl=30, cap=CAP, caller_cap=4)
    store.create_session("t", FULL, ttl=60, cap=CAP, caller_cap=4)
    session = redis_backend.key("session:", "s")
    assert raw.zscore(caller, "s") == redis_backend.expire_time(session)
    assert redis_backend.expire_time(caller) == raw.zscore(caller, "t")  # its last session's expiry
    store.load_session("s", ttl=90)
    assert raw.zscore(caller, "s") == redis_backend.expire_time(session) == redis_backend.expire_time(caller)
    assert store.delete_session("s") and raw.zscore(caller, "s") is None
    store.create_session("t", RECORD, ttl=30, cap=CAP)  # the same id, now unauthenticated: moved to that set
    assert raw.zcard(caller) == 0
    assert raw.zscore(redis_backend.key("caller:", "null"), "t") is not None


def test_the_log_is_trimmed_exactly_to_log_cap(redis_backend: RedisBackend) -> None:
    redis_backend.store.create_session("s", RECORD, ttl=TTL, cap=CAP)
    for n in range(LOG_CAP * 40):
        redis_backend.store.append_events({"s": str(n).encode()})
    assert redis_backend.raw.xlen(redis_backend.key("events:", "s")) == LOG_CAP


def test_namespaces_keep_deployments_apart(redis_server: RedisServer, namespace: str) -> None:
    ours, theirs = RedisStore(redis_server.url, namespace=namespace), RedisStore(redis_server.url, namespace=namespace + "other:")
    try:
        assert ours.create_session("s", RECORD, ttl=TTL, cap=1)
        assert ours.load_session("s", ttl=TTL) is not None
        assert theirs.load_session("s", ttl=TTL) is None
        assert theirs.create_session("t", FULL, ttl=TTL, cap=1)  # ours's used session is not in their cap
        assert theirs.append_events({"s": b"x"}) == {}
        assert ours.claim("k", TTL) and theirs.claim("k", TTL)
        assert ours.session_subscriptions() == {"s": frozenset()}
    finally:
        ours.close()
        theirs.close()


def test_a_corrupt_record_is_logged_without_its_content_deleted_and_missing(
    redis_backend: RedisBackend, caplog: pytest.LogCaptureFixture
) -> None:
    store, raw = redis_backend.store, redis_backend.raw
    for sid, field, value in (("bad-json", "protocol_version", b"{secret-not-json"),
                              ("no-version", "protocol_version", None),
                              ("bad-utf8", "client_info", b'"\xff\xfesecret"')):
        store.create_session(sid, RECORD, ttl=TTL, cap=CAP)
        session = redis_backend.key("session:", sid)
        if value is None:
            raw.hdel(session, field)
        else:
            raw.hset(session, field, value)
        with caplog.at_level(logging.WARNING, logger="mcpsync"):
            assert store.load_session(sid, ttl=TTL) is None
        assert not raw.exists(session)
        assert sid not in store.session_subscriptions()
    warnings = [record.getMessage() for record in caplog.records if "corrupt" in record.getMessage()]
    assert len(warnings) == 3
    assert "secret" not in caplog.text and "bad-json" not in caplog.text


def test_corrupt_subscriptions_leave_that_session_out_of_the_audience(redis_backend: RedisBackend, caplog: pytest.LogCaptureFixture) -> None:
    store = redis_backend.store
    store.create_session("good", FULL, ttl=TTL, cap=CAP)
    store.create_session("bad", FULL, ttl=TTL, cap=CAP)
    redis_backend.raw.hset(redis_backend.key("session:", "bad"), "subscriptions", b'"secret://uri"')
    with caplog.at_level(logging.WARNING, logger="mcpsync"):
        assert store.session_subscriptions() == {"good": FULL.subscriptions}
    assert "corrupt subscriptions" in caplog.text and "secret" not in caplog.text


def test_a_session_whose_hash_vanished_is_dropped_from_the_index(redis_backend: RedisBackend) -> None:
    store, raw = redis_backend.store, redis_backend.raw
    store.create_session("s", RECORD, ttl=TTL, cap=1)
    raw.delete(redis_backend.key("session:", "s"))  # as Redis's maxmemory eviction would
    assert store.session_subscriptions() == {}
    assert raw.zscore(redis_backend.key("sessions:fresh"), "s") is None
    store.create_session("t", RECORD, ttl=TTL, cap=1)
    store.load_session("t", ttl=TTL)
    raw.delete(redis_backend.key("session:", "t"))
    assert store.load_session("t", ttl=TTL) is None
    assert raw.zscore(redis_backend.key("sessions:used"), "t") is None


def test_every_method_is_one_round_trip(redis_backend: RedisBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    store = redis_backend.store
    calls: dict[str, Callable[[], Any]] = {
        "create_session": lambda: store.create_session("s", FULL, ttl=TTL, cap=CAP),
        "load_session": lambda: store.load_session("s", ttl=TTL),
        "update_session": lambda: store.update_session("s", log_level="info", cursor="c"),
        "session_subscriptions": store.session_subscriptions,
        "append_events": lambda: store.append_events({"s": b"1", "t": b"2", "u": b"3"}),
        "events_after": lambda: store.events_after("s", None, 10),
        "claim": lambda: store.claim("k", TTL),
        "delete_session": lambda: store.delete_session("s"),
    }
    for call in calls.values():  # the scripts are loaded into Redis, the connection made
        call()
    sent: list[str] = []
    current = [""]
    original = redis.connection.AbstractConnection.send_packed_command

    def counting(self: Any, command: Any, check_health: bool = True) -> None:
        sent.append(current[0])
        original(self, command, check_health)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)
    for name, call in calls.items():
        current[0] = name
        call()
    assert {name: sent.count(name) for name in calls} == dict.fromkeys(calls, 1)


def test_a_malformed_url_or_setting_is_refused_without_repeating_the_url() -> None:
    for url in ("http://127.0.0.1:6379/0", "redis://user:s3cret@127.0.0.1:port/0", "redis://user:s3cret@127.0.0.1:6379/db"):
        with pytest.raises(ValueError) as info:
            RedisStore(url)
        assert "s3cret" not in str(info.value)
    with pytest.raises(ValueError):
        RedisStore("redis://127.0.0.1:6379/0", socket_timeout=0)
    with pytest.raises(ValueError):
        RedisStore("redis://127.0.0.1:6379/0", log_cap=0)


def test_without_redis_py_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(ImportError, match=r"pip install 'mcpsync\[redis\]'"):
        RedisStore("redis://127.0.0.1:6379/0")


def test_a_closed_store_refuses_rather_than_reconnecting(redis_backend: RedisBackend) -> None:
    store = redis_backend.replica()
    assert store.claim("k", TTL)
    store.close()
    with pytest.raises(StoreUnavailable, match="closed"):
        store.load_session("s", ttl=TTL)
    store.close()


# -- RedisStore when Redis is down -----------------------------------------------------------------
PASSWORD = "s3cret-pw"


def every_call(store: RedisStore) -> dict[str, Callable[[], Any]]:
    return {
        "create_session": lambda: store.create_session("new", RECORD, ttl=TTL, cap=CAP),
        "load_session": lambda: store.load_session("s", ttl=TTL),
        "update_session": lambda: store.update_session("s", log_level="info"),
        "delete_session": lambda: store.delete_session("s"),
        "session_subscriptions": store.session_subscriptions,
        "append_events": lambda: store.append_events({"s": b"frame"}),
        "events_after": lambda: store.events_after("s", None, 10),
        "claim": lambda: store.claim("k", TTL),
    }


def test_while_redis_is_down_every_call_raises_store_unavailable_and_after_a_restart_works_again(
    own_redis: RedisServer, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    # redis-server's default user has no password, which takes any: the URL's password is accepted
    url = f"redis://default:{PASSWORD}@127.0.0.1:{own_redis.port}/0"
    address = f"127.0.0.1:{own_redis.port}/0"
    store = RedisStore(url, namespace=namespace, socket_timeout=0.5)
    try:
        with caplog.at_level(logging.DEBUG, logger="mcpsync"):
            assert store.create_session("s", RECORD, ttl=TTL, cap=CAP)
            own_redis.stop()
            for name, call in every_call(store).items():
                with pytest.raises(StoreUnavailable) as info:
                    call()
                message = str(info.value)
                assert address in message, name
                whole = "".join(traceback.format_exception(info.value))
                assert PASSWORD not in whole and url not in whole, name
            own_redis.start()
            # the same store, no new one: Redis restarted empty (no persistence) and says so plainly
            assert store.load_session("s", ttl=TTL) is None
            for call in every_call(store).values():
                call()
            assert store.load_session("new", ttl=TTL) == RECORD
        assert PASSWORD not in caplog.text
    finally:
        store.close()


def test_after_a_partition_no_idle_pooled_connection_is_left_silent(redis_server: RedisServer, namespace: str) -> None:
    # Connections whose peer vanished without closing them look healthy to the pool (nothing to read),
    # so the first error drops the idle ones: after the partition each call connects afresh instead of
    # each pooled connection failing once more, a socket_timeout later.
    with SilentProxy(redis_server.port) as proxy:
        store = RedisStore(f"redis://127.0.0.1:{proxy.port}/0", namespace=namespace, socket_timeout=0.5)
        try:
            pool = store._client.connection_pool
            held = [pool.get_connection() for _ in range(4)]  # four connected and idle, as four threads leave them
            for connection in held:
                pool.release(connection)
            assert store.claim("before", TTL)
            proxy.cut()
            with pytest.raises(StoreUnavailable, match="TimeoutError"):
                store.claim("during", TTL)
            proxy.heal()
            held = [pool.get_connection() for _ in range(4)]
            try:
                for connection in held:
                    connection.send_command("PING")
                    assert connection.read_response() == b"PONG"
            finally:
                for connection in held:
                    pool.release(connection)
            assert store.claim("after", TTL)
        finally:
            store.close()


def test_a_redis_that_never_answers_raises_store_unavailable_after_the_socket_timeout(namespace: str) -> None:
    with socket.socket() as listener:  # accepts connections (the kernel's backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = listener.getsockname()[1]
        store = RedisStore(f"redis://127.0.0.1:{port}/0", namespace=namespace, socket_timeout=0.5)
        try:
            for name, call in every_call(store).items():
                with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{port}/0"):
                    call()
                assert name
        finally:
            store.close()


def test_a_subscription_changes_alone_and_only_while_the_session_lives(backend: Backend) -> None:
    backend.store.create_session("s", RECORD, ttl=TTL, cap=CAP)
    backend.store.change_subscription("s", "notes://b", True)
    backend.store.change_subscription("s", "notes://a", True)
    backend.store.change_subscription("s", "notes://a", True)  # twice: once
    backend.store.update_session("s", log_level="error")  # another field, untouched by them
    backend.store.change_subscription("s", "notes://b", False)
    backend.store.change_subscription("s", "notes://never", False)
    loaded = backend.store.load_session("s", ttl=TTL)
    assert loaded is not None and loaded.subscriptions == frozenset({"notes://a"}) and loaded.log_level == "error"
    backend.store.change_subscription("s", "notes://a", False)
    assert backend.store.session_subscriptions()["s"] == frozenset()
    backend.store.delete_session("s")
    backend.store.change_subscription("s", "notes://c", True)  # a session that is gone is not made again
    assert backend.store.load_session("s", ttl=TTL) is None


def test_two_replicas_subscribing_one_session_at_once_keep_both(backend: Backend) -> None:
    backend.store.create_session("s", RECORD, ttl=TTL, cap=CAP)
    uris = [f"notes://{n}" for n in range(16)]
    threads = [threading.Thread(target=backend.store.change_subscription, args=("s", uri, True)) for uri in uris]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LONG)
    assert backend.store.session_subscriptions()["s"] == frozenset(uris)
