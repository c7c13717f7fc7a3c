"""A store call that loses the race with the store's close raises `StoreUnavailable`, never what
redis-py happens to raise for a connection its pool disconnected under the call.

Seen in CI: at a replica's shutdown, the OpenTelemetry reader's PING (the `store.reachable` gauge)
ran while `RedisStore.close()` disconnected the pool, and redis-py failed inside `read_response`
with `AttributeError: 'NoneType' object has no attribute 'readline'`; the metrics SDK logged the
traceback. The race is injected here (a call that closes the store and fails that way), against a
real redis-server; a failure of the same kind while the store is open is a bug and still raises.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcpsync.bus.redis_store import RedisStore
from mcpsync.bus.redis_task_store import RedisTaskStore
from mcpsync.bus.store import StoreUnavailable

from .redis_server import RedisServer

pytestmark = pytest.mark.timeout(60)


def close_midway_and_fail(store: RedisStore | RedisTaskStore) -> None:
    """Make the store's next PING close the store while it runs, and then fail as redis-py did."""

    def ping(*args: Any, **kwargs: Any) -> Any:
        store.close()
        raise AttributeError("'NoneType' object has no attribute 'readline'")

    store._client.ping = ping


def test_the_reachable_gauge_at_shutdown_reads_false(redis_server: RedisServer, namespace: str) -> None:
    store = RedisStore(redis_server.url, namespace=namespace)
    try:
        assert store.reachable() is True
        close_midway_and_fail(store)
        assert store.reachable() is False
        assert store.reachable() is False  # closed: at once, from then on
    finally:
        store.close()


def test_a_task_store_call_running_when_it_closes_is_store_unavailable(redis_server: RedisServer, namespace: str) -> None:
    store = RedisTaskStore(redis_server.url, namespace=namespace)
    try:
        close_midway_and_fail(store)
        with pytest.raises(StoreUnavailable, match="is closed"), store._redis.reaching():
            store._client.ping()
    finally:
        store.close()


def test_the_same_failure_while_the_store_is_open_is_not_hidden(redis_server: RedisServer, namespace: str) -> None:
    store = RedisStore(redis_server.url, namespace=namespace)
    try:
        def broken(*args: Any, **kwargs: Any) -> Any:
            raise AttributeError("a bug")

        store._client.ping = broken
        with pytest.raises(AttributeError, match="a bug"):
            store.reachable()
    finally:
        store.close()
