"""Single-use `requestState` across replicas that share a real Redis (`RedisStore.claim`).

Two servers in this process, each with its own `RedisStore` on one `redis-server` (as two
processes would have), one secret, a client on each over real pipes. A state used on one is
refused on the other; with Redis stopped, a single-use retry runs nothing and says its state could
not be checked, and once Redis is back the same retry runs. The Redis fixture is the bus tests'
(`tests/bus/redis_server.py`: Debian's binary on a free port).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ..bus.redis_server import RedisServer
from ..transport.pipes import PipeClient
from .test_single_use_state import ACCEPT, Ledger, call, completed, first_round, make_server, refused

redis_store = pytest.importorskip("mcpsync.bus.redis_store", reason="RedisStore (mcpsync[redis]) is not in this tree")

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def test_a_state_used_through_one_redis_store_is_refused_through_another(redis: RedisServer) -> None:
    ledger = Ledger()
    stores = [redis_store.RedisStore(redis.url), redis_store.RedisStore(redis.url)]
    try:
        with make_server(ledger, "a") as a, make_server(ledger, "b") as b:
            a.engine.use_claims(stores[0].claim)
            b.engine.use_claims(stores[1].claim)
            with PipeClient(a) as near, PipeClient(b) as far:
                state = first_round(near, "pay", {"amount": 21})
                answered = call(far, "pay", {"amount": 21}, id=2, inputResponses={"confirm": ACCEPT}, requestState=state)
                assert completed(answered) == "paid 21"
                replayed = call(near, "pay", {"amount": 21}, id=3, inputResponses={"confirm": ACCEPT}, requestState=state)
                assert refused(replayed)["data"] == {"reason": "replayed"}
    finally:
        for store in stores:
            store.close()
    assert ledger.done == ["paid 21"]


def test_with_redis_down_a_single_use_retry_runs_nothing_until_it_is_back(redis: RedisServer) -> None:
    ledger = Ledger()
    store: Any = redis_store.RedisStore(redis.url)
    try:
        with make_server(ledger) as server, PipeClient(server) as client:
            server.engine.use_claims(store.claim)
            state = first_round(client, "pay", {"amount": 9})
            redis.stop()
            down = call(client, "pay", {"amount": 9}, id=2, inputResponses={"confirm": ACCEPT}, requestState=state)
            error = refused(down, -32603)
            assert error["data"] == {"reason": "unchecked"} and "could not be checked" in error["message"]
            assert ledger.done == []
            # the other tools do not need the store: a replayable tool's retry still runs
            note = first_round(client, "note", {"text": "x"}, id=3)
            assert completed(call(client, "note", {"text": "x"}, id=4, inputResponses={"confirm": ACCEPT}, requestState=note)) == "noted x"
            redis.start()
            back = call(client, "pay", {"amount": 9}, id=5, inputResponses={"confirm": ACCEPT}, requestState=state)
            assert completed(back) == "paid 9"
    finally:
        store.close()
    assert ledger.done == ["noted x", "paid 9"]
