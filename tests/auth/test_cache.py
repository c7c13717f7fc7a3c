"""TokenCache: keyed by digest, expiring by an injected clock, bounded, thread-safe."""

from __future__ import annotations

import threading

from mcpsync.auth.resource._cache import TokenCache, token_digest

from .._timeouts import LONG
from .authority import FakeClock


def test_entries_expire_at_their_deadline() -> None:
    clock = FakeClock(100.0)
    cache: TokenCache[str] = TokenCache(size=10, clock=clock)
    cache.put("token-a", "A", until=110.0)
    clock.advance(9.9)
    assert cache.get("token-a") == "A"
    clock.advance(0.1)
    assert cache.get("token-a") is None
    assert len(cache) == 0  # dropped when found expired


def test_a_deadline_not_in_the_future_stores_nothing() -> None:
    cache: TokenCache[str] = TokenCache(size=10, clock=FakeClock(100.0))
    cache.put("token-a", "A", until=100.0)
    assert cache.get("token-a") is None and len(cache) == 0


def test_the_least_recently_used_entry_goes_first() -> None:
    cache: TokenCache[str] = TokenCache(size=2, clock=FakeClock(0.0))
    cache.put("a", "A", 10)
    cache.put("b", "B", 10)
    assert cache.get("a") == "A"  # now b is the least recently used
    cache.put("c", "C", 10)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == ("A", None, "C")


def test_size_zero_disables_it() -> None:
    cache: TokenCache[str] = TokenCache(size=0, clock=FakeClock(0.0))
    cache.put("a", "A", 10)
    assert cache.get("a") is None


def test_keys_are_digests_and_discard_and_clear_forget() -> None:
    assert token_digest("abc") == bytes.fromhex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    cache: TokenCache[str] = TokenCache(size=5, clock=FakeClock(0.0))
    cache.put("a", "A", 10)
    cache.put("b", "B", 10)
    cache.discard("a")
    assert cache.get("a") is None and cache.get("b") == "B"
    cache.clear()
    assert len(cache) == 0


def test_concurrent_use_keeps_the_bound() -> None:
    cache: TokenCache[int] = TokenCache(size=50, clock=FakeClock(0.0))
    start = threading.Barrier(4, timeout=LONG)

    def work(offset: int) -> None:
        start.wait()
        for n in range(500):
            cache.put(f"t{offset}-{n}", n, 10)
            cache.get(f"t{offset}-{n // 2}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LONG)
    assert len(cache) == 50
