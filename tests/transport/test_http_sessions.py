"""The handshake-era session table under pressure: who is evicted when it is full, who never is.

The table reads time only through its `clock`, so every test here drives a `Clock` by hand: "past
the grace" and "idle too long" are a line of arithmetic, never a sleep. The last two tests run the
same policy over real HTTP (`Server.start_http` on port 0), with the transport's table built on
such a clock; threads there are ordered with Events, and every wait has a timeout.
"""

from __future__ import annotations

import functools
import http.client
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from mcpsync import Context, Server, Service
from mcpsync.errors import McpsyncError
from mcpsync.protocol.jsonrpc import Request
from mcpsync.transport.http import endpoint as http_transport
from mcpsync.transport.http._sessions import EVICTION_GRACE, HttpSession, SessionTable
from mcpsync.transport.http._stream import Exchange

from .._timeouts import LONG

pytestmark = pytest.mark.timeout(60)

GRACE = 5.0
TIMEOUT = 100.0  # idle_timeout: far beyond GRACE, so eviction is never mistaken for expiry


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def table_of(clock: Clock, max_sessions: int) -> SessionTable:
    return SessionTable(idle_timeout=TIMEOUT, max_sessions=max_sessions, capacity=4, clock=clock, eviction_grace=GRACE)


def created(table: SessionTable) -> HttpSession:
    """What one successful `initialize` does to the table."""
    session = table.new()
    assert session is not None, "the table refused a new session"
    table.add(session)
    return session


def in_flight(table: SessionTable, session: HttpSession, request_id: int = 1) -> Exchange:
    exchange = Exchange(Request(request_id, "tools/call"), streams=True, capacity=4)
    assert table.find(session.id) is session and table.begin(session, exchange)
    return exchange


def assert_ended(table: SessionTable, session: HttpSession) -> None:
    """Ended as an expired session is: unknown to the table, its stream closed, asks refused."""
    assert table.find(session.id) is None
    assert session.events.closed
    with pytest.raises(McpsyncError):
        session.asks.open(None, "elicitation/create")


def test_the_default_grace_is_short_and_named() -> None:
    assert 0 < EVICTION_GRACE <= 30


def test_a_full_table_evicts_the_session_that_never_came_back_and_waited_longest() -> None:
    clock = Clock()
    table = table_of(clock, 3)
    oldest = created(table)
    clock.advance(1)
    used = created(table)
    clock.advance(1)
    younger = created(table)
    assert table.find(used.id) is used  # it came back: no longer a candidate before the grace
    newcomer = created(table)  # at once: no waiting for the idle timeout
    assert_ended(table, oldest)
    assert table.find(used.id) is used and table.find(younger.id) is younger and table.find(newcomer.id) is newcomer
    assert len(table) == 3


def test_never_used_sessions_go_first_even_when_a_used_one_is_older() -> None:
    clock = Clock()
    table = table_of(clock, 2)
    used = created(table)
    assert table.find(used.id) is used
    clock.advance(GRACE * 2)  # `used` is now evictable too, yet the never-used one goes first
    fresh = created(table)
    created(table)
    assert_ended(table, fresh)
    assert table.find(used.id) is used


def test_without_never_used_sessions_the_least_recently_used_past_the_grace_goes() -> None:
    clock = Clock()
    table = table_of(clock, 2)
    first, second = created(table), created(table)
    assert table.find(first.id) is first and table.find(second.id) is second
    assert table.new() is None  # both used within the grace: really full
    clock.advance(GRACE / 2)
    assert table.find(first.id) is first  # now `second` is the least recently used
    clock.advance(GRACE / 2 + 0.1)  # `second` idle just past the grace, `first` not
    newcomer = created(table)
    assert_ended(table, second)
    assert table.find(first.id) is first and table.find(newcomer.id) is newcomer


def test_sessions_in_active_use_are_never_evicted() -> None:
    clock = Clock()
    table = table_of(clock, 2)
    running, streaming = created(table), created(table)
    exchange = in_flight(table, running)
    assert table.find(streaming.id) is streaming
    streaming.streaming = True  # as the transport does when the GET stream opens
    clock.advance(TIMEOUT * 10)  # long past the grace (and the idle timeout): busy all the same
    assert table.new() is None
    assert table.find(running.id) is running and table.find(streaming.id) is streaming
    table.end(running, exchange)  # its request answered: idle from now, so within the grace
    assert table.new() is None
    clock.advance(GRACE + 1)
    created(table)
    assert_ended(table, running)
    assert table.find(streaming.id) is streaming


def test_a_closed_get_stream_counts_as_use_and_idles_from_its_close() -> None:
    clock = Clock()
    table = table_of(clock, 2)
    watcher, other = created(table), created(table)
    assert table.find(watcher.id) is watcher and table.find(other.id) is other
    watcher.streaming = True
    clock.advance(GRACE * 3)
    watcher.streaming = False  # the stream closed just now: the grace starts again
    assert not watcher.streaming
    created(table)
    assert_ended(table, other)
    assert table.find(watcher.id) is watcher


def test_idle_expiry_still_applies_to_both_kinds_of_idle_session() -> None:
    clock = Clock()
    table = table_of(clock, 10)
    fresh, used = created(table), created(table)
    assert table.find(used.id) is used
    clock.advance(TIMEOUT / 2)
    kept = created(table)
    clock.advance(TIMEOUT / 2 + 1)
    assert table.find(kept.id) is kept  # the lookup expires the other two
    assert_ended(table, fresh)
    assert_ended(table, used)
    assert len(table) == 1


def test_a_session_that_was_ended_is_not_brought_back_by_a_late_request_end() -> None:
    clock = Clock()
    table = table_of(clock, 2)
    session = created(table)
    exchange = in_flight(table, session)
    table.remove(session.id)  # DELETE while a request was in flight
    table.end(session, exchange)
    session.streaming = False
    assert table.find(session.id) is None
    first, second = created(table), created(table)  # the table holds exactly these two
    assert table.new() is not None
    assert_ended(table, first)
    assert table.find(second.id) is second


def test_eviction_logs_at_debug_and_a_refusal_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    table = table_of(clock, 1)
    caplog.set_level(logging.DEBUG, logger="mcpsync")
    created(table)
    created(table)
    evictions = [record for record in caplog.records if "evicted" in record.getMessage()]
    assert [record.levelno for record in evictions] == [logging.DEBUG]
    last = created(table)
    assert table.find(last.id) is last
    caplog.clear()
    assert table.new() is None and table.new() is None
    assert [record.levelno for record in caplog.records] == [logging.WARNING]
    clock.advance(GRACE + 1)
    created(table)  # room again: the next refusal warns again
    assert table.find(table.snapshot()[0].id) is not None
    caplog.clear()
    assert table.new() is None
    assert [record.levelno for record in caplog.records] == [logging.WARNING]


def test_many_creates_in_a_full_table_each_evict_one() -> None:
    clock = Clock()
    table = table_of(clock, 1024)
    for _ in range(1024):
        created(table)
    survivors = [created(table) for _ in range(5000)]
    assert len(table) == 1024
    assert {session.id for session in table.snapshot()} == {session.id for session in survivors[-1024:]}


# -- over real HTTP -----------------------------------------------------------------------------------

INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


class Client:
    """One HTTP connection to the endpoint: POSTs a JSON-RPC request, returns status, session id
    and the decoded body."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=LONG)

    def post(self, method: str, params: dict[str, Any], session: str | None = None, id: int = 1) -> tuple[int, str | None, Any]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if session is not None:
            headers["Mcp-Session-Id"] = session
        body = json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        self.connection.request("POST", "/mcp", body, headers)
        response = self.connection.getresponse()
        data = response.read()
        return response.status, response.getheader("Mcp-Session-Id"), json.loads(data) if data.strip() else None

    def initialize(self) -> tuple[int, str | None]:
        status, session, _ = self.post("initialize", INITIALIZE)
        return status, session

    def ping(self, session: str) -> int:
        return self.post("ping", {}, session)[0]

    def close(self) -> None:
        self.connection.close()


@dataclass
class Endpoint:
    port: int
    clock: Clock
    started: threading.Event  # the `hold` tool is running
    release: threading.Event  # lets it return


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Endpoint]:
    """A server on port 0 holding at most two sessions, its table on the test's clock."""
    clock, started, release = Clock(), threading.Event(), threading.Event()
    monkeypatch.setattr(http_transport, "SessionTable", functools.partial(SessionTable, clock=clock, eviction_grace=GRACE))
    service = Service("pressure")

    @service.tool
    def hold(ctx: Context) -> str:
        """Stay in flight until the test releases it."""
        started.set()
        ctx.on_cancel(release.set)
        release.wait(LONG)
        return "released"

    server = Server("pressure", services=[service], shutdown_timeout=LONG)
    serving = server.start_http("127.0.0.1", 0, threads=8, max_sessions=2, session_timeout=TIMEOUT)
    try:
        yield Endpoint(serving.port, clock, started, release)
    finally:
        release.set()
        assert serving.shutdown(LONG)


def test_over_http_a_flood_of_initialize_only_sessions_does_not_lock_out_a_new_client(endpoint: Endpoint) -> None:
    client = Client(endpoint.port)
    try:
        (status_1, first), (status_2, second) = client.initialize(), client.initialize()  # full of sessions nobody uses
        assert status_1 == status_2 == 200 and first and second
        status, newcomer = client.initialize()  # at once, not after the 30-minute idle timeout
        assert status == 200 and newcomer
        assert client.ping(first) == 404  # the oldest never-used session was evicted
        assert client.ping(second) == 200 and client.ping(newcomer) == 200
    finally:
        client.close()


def test_over_http_a_table_of_sessions_in_active_use_answers_503(endpoint: Endpoint) -> None:
    client, runner = Client(endpoint.port), Client(endpoint.port)
    watcher = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=LONG)
    outcome: list[int] = []
    try:
        (_, first), (_, second) = client.initialize(), client.initialize()
        assert first and second
        assert client.ping(first) == 200 and client.ping(second) == 200
        assert client.initialize()[0] == 503  # both used within the grace

        # Long past the grace, but one has a request in flight and the other its GET stream open.
        running = threading.Thread(target=lambda: outcome.append(runner.post("tools/call", {"name": "hold", "arguments": {}}, first, id=7)[0]))
        running.start()
        assert endpoint.started.wait(LONG)  # so the request is in flight
        watcher.request("GET", "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": second})
        assert watcher.getresponse().status == 200  # the stream is marked open before its headers go out
        endpoint.clock.advance(GRACE * 10)
        assert client.initialize()[0] == 503

        endpoint.release.set()
        running.join(LONG)
        assert not running.is_alive() and outcome == [200]
    finally:
        endpoint.release.set()
        watcher.close()
        runner.close()
        client.close()
