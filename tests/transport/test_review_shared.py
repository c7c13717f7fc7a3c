"""Review of the shared handshake-era sessions and resumable streams (issue 16): defects found,
each shown by a test marked xfail(strict) until it is fixed. Two replicas in one process, each on
its own loopback port, joined by `MemoryBus` peers and one `MemoryStore`, as in
test_http_shared_sessions.py (whose helpers these reuse).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from mcpsync import Server
from mcpsync.bus import MemoryBus, MemoryStore, StoreUnavailable
from mcpsync.transport.http._directory import SharedDirectory
from mcpsync.transport.http._stream import Event
from mcpsync.transport.lifecycle.subscriptions import LOCAL

from .._timeouts import LONG
from ..sse_stream import SseStream
from .test_http_shared_sessions import Asked, Pair, Replica, gated_service, service, text

pytestmark = pytest.mark.timeout(60)


class CursorCount(MemoryStore):
    """Counts the cursors the replicas record when a session's GET stream ends."""

    def __init__(self) -> None:
        super().__init__()
        self.cond = threading.Condition()
        self.cursors: list[Any] = []

    def update_session(self, session_id: str, **changes: Any) -> None:
        super().update_session(session_id, **changes)
        if "cursor" in changes:
            with self.cond:
                self.cursors.append(changes["cursor"])
                self.cond.notify_all()

    def wait_cursors(self, count: int) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: len(self.cursors) >= count, LONG)


def test_a_stream_without_last_event_id_on_a_replica_that_streamed_before_repeats_nothing() -> None:
    store = CursorCount()
    replicas = Pair(store)
    try:
        session = replicas.a.initialize()
        first = SseStream(replicas.a.get(session))
        assert first.next()[1] is None
        replicas.a.server.refresh_tools()
        assert first.message()[1]["method"] == "notifications/tools/list_changed"
        first.close()
        assert store.wait_cursors(1)  # A recorded where its stream ended
        second = SseStream(replicas.b.get(session))  # the client's next stream lands on B
        assert second.next()[1] is None
        replicas.a.server.refresh_prompts()
        assert second.message()[1]["method"] == "notifications/prompts/list_changed"
        second.close()
        assert store.wait_cursors(2)  # B recorded where its stream ended: after the prompts change
        replicas.a.server.refresh_resources()  # while no stream is open
        third = SseStream(replicas.a.get(session))  # and the next one lands on A again
        # scaling.rst: "one that reconnects without it is sent what arrived since its last stream ended"
        assert third.message()[1]["method"] == "notifications/resources/list_changed"  # A sends prompts again
        third.close()
    finally:
        replicas.close()


class LoadHook(MemoryStore):
    """Runs `hook` once, right after a `load_session` has read a record and before it is returned."""

    def __init__(self) -> None:
        super().__init__()
        self.hook: Callable[[], None] | None = None

    def load_session(self, session_id: str, *, ttl: float) -> Any:
        record = super().load_session(session_id, ttl=ttl)
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return record


def test_a_delete_that_races_a_load_on_the_other_replica_still_ends_the_session_there() -> None:
    store = LoadHook()
    replicas = Pair(store)
    try:
        session = replicas.a.initialize()
        deleted: list[int] = []
        # A's DELETE completes (and its session_ended reaches B) between B's load and B's adopt
        store.hook = lambda: deleted.append(replicas.a.delete(session))
        replicas.b.request("ping", session=session)  # raced the DELETE: either answer is fair
        assert deleted == [204]
        status, _ = replicas.b.request("ping", session=session, id=2)
        assert status == 404  # "DELETE on one replica ends the session everywhere"; B answers 200
    finally:
        replicas.close()


class MeetingStore(MemoryStore):
    """Holds each change of a session's subscriptions until two have arrived (two replicas
    subscribing at once, each having loaded the record first), at most LONG."""

    def __init__(self) -> None:
        super().__init__()
        self.barrier: threading.Barrier | None = None

    def change_subscription(self, session_id: str, uri: str, subscribed: bool) -> None:
        barrier = self.barrier
        if barrier is not None:
            try:
                barrier.wait(LONG)
            except threading.BrokenBarrierError:
                pass
        super().change_subscription(session_id, uri, subscribed)


def test_two_subscriptions_made_at_once_on_two_replicas_are_both_kept() -> None:
    store = MeetingStore()
    replicas = Pair(store)
    try:
        session = replicas.a.initialize()
        assert replicas.b.request("ping", session=session)[0] == 200  # both replicas hold a copy
        store.barrier = threading.Barrier(2)
        statuses: list[int] = []

        def subscribe(replica: Any, uri: str) -> None:
            statuses.append(replica.request("resources/subscribe", {"uri": uri}, session=session, id=uri)[0])

        callers = [
            threading.Thread(target=subscribe, args=(replicas.a, "notes://welcome")),
            threading.Thread(target=subscribe, args=(replicas.b, "notes://other")),
        ]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(LONG)
        assert statuses == [200, 200]
        # What decides who hears an update (`deliver` reads the audience from the store):
        assert store.session_subscriptions()[session] == frozenset({"notes://welcome", "notes://other"})
    finally:
        replicas.close()


class WritesFail(MemoryStore):
    """A store whose writes fail once `down` is set (Redis gone, seen first by a write: the
    replica's copy of the session was checked moments ago, so the request needs no load)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def update_session(self, session_id: str, **changes: Any) -> None:
        if self.down:
            raise StoreUnavailable("the store is down (test)")
        super().update_session(session_id, **changes)

    def change_subscription(self, session_id: str, uri: str, subscribed: bool) -> None:
        if self.down:
            raise StoreUnavailable("the store is down (test)")
        super().change_subscription(session_id, uri, subscribed)


def test_a_subscription_the_store_cannot_record_is_503_with_retry_after() -> None:
    store = WritesFail()
    replicas = Pair(store)
    try:
        session = replicas.a.initialize()  # notifications/initialized loaded the record: A's copy is checked
        store.down = True
        response = replicas.a.post({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": "notes://welcome"}}, session)
        body = response.read()
        # scaling.rst: a handshake-era request that needs the store while it is away is 503 with Retry-After: 1
        assert response.status == 503 and response.getheader("Retry-After") == "1", body
        store.down = False
        status, _ = replicas.a.request("ping", session=session, id=2)
        assert status == 200 and store.session_subscriptions()[session] == frozenset()  # nothing half-done
    finally:
        replicas.close()


def _replica_directories(store: MemoryStore) -> tuple[SharedDirectory, SharedDirectory]:
    bus = MemoryBus()
    made = [SharedDirectory(store, each, ttl=60.0, cap=16, capacity=8, max_local=16) for each in (bus, bus.peer())]
    return made[0], made[1]


def test_what_a_stream_had_queued_but_not_sent_goes_to_the_next_stream() -> None:
    store = MemoryStore()
    a, b = _replica_directories(store)
    try:
        created = a.reserve()
        assert created is not None and a.commit(created)
        owner = a.find(created.id)
        assert owner is not None
        owner.streaming = True  # as WsgiTransport._get does
        a.open_stream(owner, None)
        frames = [b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}', b'{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}']
        a.deliver(frames, None, LOCAL)
        sent = owner.events.get(0.0)  # the body wrote the first event; then its client went away
        assert isinstance(sent, Event) and sent.frame == frames[0]
        owner.sent = sent.id  # as the GET stream's SseBody reports each event it writes (on_event)
        owner.streaming = False  # as WsgiTransport._release_get does
        a.stream_closed(owner)
        elsewhere = b.find(created.id)
        assert elsewhere is not None
        elsewhere.streaming = True
        b.open_stream(elsewhere, None)  # the client's next GET, without Last-Event-ID, on the other replica
        queued = elsewhere.events.get(0.0)
        # http.rst: "one that reconnects without it is sent what came after what its last stream was sent"
        assert isinstance(queued, Event) and queued.frame == frames[1]
    finally:
        a.close()
        b.close()


def test_a_resume_that_comes_before_the_lost_stream_is_noticed_takes_it_over() -> None:
    gate = threading.Event()
    server = Server("alone", services=[gated_service(gate)])
    replica = Replica(server)
    try:
        session = replica.initialize()
        response = replica.post({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "slow", "arguments": {}}}, session)
        lost = SseStream(response)
        seen, logged = lost.message()
        assert logged["method"] == "notifications/message" and seen is not None
        # The client's connection is dead to the client (it never sees another byte) but not yet to
        # the server: the client comes back after `retry`, naming the last event it saw.
        resumed = SseStream(replica.get(session, last_event_id=seen))
        assert resumed.next() == (seen, None)  # primed where it resumes: the old response was asked to end
        gate.set()
        _, answer = resumed.message()
        assert answer["id"] == 9 and text(answer) == "finished"
        lost.close()
    finally:
        gate.set()
        server.close(LONG)


class Partitioned(MemoryStore):
    """A store that, once `down`, fails every call and counts them: behind a partition each would
    take RedisStore's socket_timeout (2 s) before it failed."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.failed = 0

    def _check(self) -> None:
        if self.down:
            self.failed += 1
            raise StoreUnavailable("the store is down (test)")

    def session_subscriptions(self) -> dict[str, frozenset[str]]:
        self._check()
        return super().session_subscriptions()

    def events_after(self, session_id: str, after: str | None, limit: int) -> list[tuple[str, bytes]]:
        self._check()
        return super().events_after(session_id, after, limit)


def test_a_change_while_the_store_is_away_does_not_wait_on_it_once_per_stream() -> None:
    store = Partitioned()
    replicas = Pair(store)
    streams = []
    try:
        for _ in range(3):
            session = replicas.a.initialize()
            stream = SseStream(replicas.a.get(session))
            assert stream.next()[1] is None
            streams.append(stream)
        store.down = True
        replicas.a.server.refresh_tools()  # a tool, a WSGI request or the bus thread calling it waits for each
        assert store.failed <= 1  # the failed append already said the store is away; 4 calls are made
    finally:
        for stream in streams:
            stream.close()
        replicas.close()


def test_a_last_event_id_of_too_many_digits_is_ignored_not_500() -> None:
    server = Server("alone", services=[service(Asked())])
    replica = Replica(server)
    try:
        session = replica.initialize()
        response = replica.get(session, last_event_id="1" * 5000)
        assert response.status == 200, response.read(200)
        response.close()
    finally:
        server.close(LONG)
