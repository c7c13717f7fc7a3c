"""Fixtures for the bus tests: real redis-servers, and buses that are always closed.

`redis_server` is one server for a module (the tests use their own namespaces, so they cannot hear
each other); `own_redis` is a server for one test, which it may stop and start again on its port.
`make_bus` makes `RedisBus`es that are closed after the test, and the suite's leak check then sees
that each one's thread has ended.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from mcpsync.bus import RedisBus

from .._timeouts import LONG
from .redis_server import RedisServer

_namespaces = itertools.count()


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        yield server.start()
    finally:
        server.close()


@pytest.fixture
def namespace() -> str:
    return f"test{next(_namespaces)}:"


@pytest.fixture
def make_bus(namespace: str) -> Iterator[Callable[[str], RedisBus]]:
    made: list[RedisBus] = []

    def make(url: str) -> RedisBus:
        bus = RedisBus(url, namespace=namespace)
        made.append(bus)
        return bus

    yield make
    for bus in made:
        bus.close(LONG)
