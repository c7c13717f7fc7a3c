"""The operator's gauges a traced server reports as the meter collects: the requests in flight, the
open listens, the handshake-era sessions, the tasks and the request workers taken (of how many) of all
its connections, and whether the
replicas' store answers; each point named for its server, and back to zero once it is all over."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mcpsync import Context, Server, Service
from mcpsync.bus import MemoryBus

from .._timeouts import LONG, wait_until
from ..bus.redis_server import RedisServer
from ..bus.unreachable_store import UnreachableStore
from ..transport.pipes import PipeClient, modern
from .recording import Recorded

pytestmark = pytest.mark.timeout(60)

GAUGES = ("requests", "streams", "sessions", "tasks")


def _gauges(recorded: Recorded) -> dict[str, dict[str, Any]]:
    data = recorded.metrics.get_metrics_data()
    assert data is not None
    found: dict[str, dict[str, Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name.startswith("mcpsync.server."):
                    found[metric.name] = {point.attributes["mcpsync.server.name"]: point.value for point in metric.data.data_points}
    return found


def _values(recorded: Recorded, server: str) -> dict[str, Any]:
    gauges = _gauges(recorded)
    return {kind: gauges[f"mcpsync.server.{kind}.active"][server] for kind in GAUGES}


def _workers(recorded: Recorded, server: str) -> tuple[int, int]:
    """The request workers taken, and their number: saturated when the two are equal."""
    gauges = _gauges(recorded)
    return gauges["mcpsync.server.workers.busy"][server], gauges["mcpsync.server.workers.max"][server]


def test_the_gauges_count_what_the_server_holds_across_its_connections(recorded: Recorded) -> None:
    holding, release = threading.Event(), threading.Event()
    service = Service("held")

    @service.tool
    def hold(ctx: Context) -> str:
        """Waits for the test."""
        holding.set()
        release.wait(LONG)
        return "released"

    server = Server("gauged", services=[service], telemetry=recorded.telemetry, workers=3)
    try:
        with PipeClient(server) as handshake, PipeClient(server) as listening:
            handshake.initialize()
            handshake.request_nowait("tools/call", {"name": "hold", "arguments": {}}, id="held")
            assert holding.wait(LONG)
            ack = listening.listen("L", {"toolsListChanged": True})
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert _values(recorded, "gauged") == {"requests": 1, "streams": 1, "sessions": 1, "tasks": 0}
            wait_until(lambda: _workers(recorded, "gauged") == (1, 6))  # one of the two connections' three each (the listen's worker frees itself after its ack)
            release.set()
            assert handshake.recv()["id"] == "held"
            listening.notify("notifications/cancelled", {"requestId": "L"})
            listening.request("tools/list", modern(), id="after")  # read after the cancel: the listen is gone
            wait_until(lambda: _workers(recorded, "gauged") == (0, 6))  # the worker frees itself after its answer
        assert _values(recorded, "gauged") == {"requests": 0, "streams": 0, "sessions": 0, "tasks": 0}
        assert "mcpsync.server.store.reachable" not in _gauges(recorded)  # no shared store, no such gauge
    finally:
        release.set()
        server.close()


def test_the_store_gauge_follows_the_shared_store(recorded: Recorded) -> None:
    store = UnreachableStore()
    server = Server("replica", bus=MemoryBus(), store=store, telemetry=recorded.telemetry)
    try:
        assert _gauges(recorded)["mcpsync.server.store.reachable"] == {"replica": 1}
        store.down = True
        assert _gauges(recorded)["mcpsync.server.store.reachable"] == {"replica": 0}
    finally:
        server.close()


def test_the_store_gauge_reads_a_real_redis_going_away_and_coming_back(recorded: Recorded) -> None:
    redis = RedisServer()
    redis.start()
    server = Server("replica", bus=redis.url, telemetry=recorded.telemetry)
    try:
        reachable = lambda: _gauges(recorded)["mcpsync.server.store.reachable"]  # noqa: E731 - read again each time
        assert reachable() == {"replica": 1}
        redis.stop()
        assert reachable() == {"replica": 0}  # one PING, refused or timed out: never a hang
        redis.start()  # the same port, empty
        wait_until(lambda: reachable() == {"replica": 1})  # its pool reconnects at the next PING or the one after
    finally:
        server.close()
        redis.close()
