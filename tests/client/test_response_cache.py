"""The client's cache of what a 2026-07-28 server says may be kept (`connect(..., cache=True)`): a
second listing or read within the server's `ttlMs` asks nothing (counted at the server), a change
the server announces makes the next one ask, nothing is kept without a ttl, in the handshake era,
for a retry, or when the cache is off; an entry expires, the cache is bounded, and a hostile
server's ttl is capped (on a clock the test moves)."""

from __future__ import annotations

from typing import Any

import pytest

import mcpsync
from mcpsync import CacheHint, Call, Interceptor, Server, Service
from mcpsync.client._response_cache import MAX_ENTRIES, MAX_TTL, ResponseCache
from mcpsync.client import ListChanged, ResourceUpdated

pytestmark = pytest.mark.timeout(60)


class Counting(Interceptor):
    """Counts the requests the server answers, by method."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def before_execute(self, call: Call) -> dict[str, Any] | None:
        self.seen[call.method] = self.seen.get(call.method, 0) + 1
        return None


def _server(counting: Counting, ttl_ms: int = 60_000) -> tuple[Server, Service]:
    service = Service("kept")

    @service.tool
    def echo(text: str) -> str:
        return text

    @service.resource("notes://today", cache=CacheHint(ttl_ms, "public"))
    def today() -> str:
        return "sunny"

    server = Server("kept", services=[service], interceptors=[counting], ttl_ms=ttl_ms, page_size=1)
    return server, service


def test_a_second_listing_and_read_within_the_ttl_ask_nothing() -> None:
    counting = Counting()
    server, _ = _server(counting)
    with mcpsync.connect(server, cache=True) as session:
        for _ in range(3):
            assert [tool["name"] for tool in session.list_tools()] == ["echo"]
            assert session.read_resource("notes://today")["contents"][0]["text"] == "sunny"
    assert counting.seen["tools/list"] == 1 and counting.seen["resources/read"] == 1


def test_what_the_server_says_changed_is_asked_again() -> None:
    counting = Counting()
    server, service = _server(counting)
    with mcpsync.connect(server, cache=True) as session:
        listener = session.listen(tools=True, prompts=False, resource_uris=["notes://today"])
        try:
            session.list_tools()
            session.read_resource("notes://today")

            @service.tool
            def added() -> str:
                return "new"

            assert listener.next_event(10) == ListChanged("tools")
            assert {tool["name"] for tool in session.list_tools()} == {"echo", "added"}
            server.notify_resource_updated("notes://today")
            assert listener.next_event(10) == ResourceUpdated("notes://today")
            session.read_resource("notes://today")
        finally:
            listener.close()
    assert counting.seen["tools/list"] == 1 + 2  # once, then both pages again (page_size=1)
    assert counting.seen["resources/read"] == 2


@pytest.mark.parametrize(("mode", "cache", "ttl_ms"), [("modern", False, 60_000), ("legacy", True, 60_000), ("modern", True, 0)])
def test_nothing_is_kept_off_in_the_handshake_era_or_without_a_ttl(mode: str, cache: bool, ttl_ms: int) -> None:
    counting = Counting()
    server, _ = _server(counting, ttl_ms)
    with mcpsync.connect(server, mode=mode, cache=cache) as session:
        session.list_tools()
        session.list_tools()
    assert counting.seen["tools/list"] == 2


def test_an_entry_expires_a_retry_is_never_kept_and_a_copy_is_handed_out() -> None:
    now = [100.0]
    cache = ResponseCache(clock=lambda: now[0])
    result = {"tools": [{"name": "a"}], "ttlMs": 2_000, "cacheScope": "private", "resultType": "complete"}
    cache.put("tools/list", {}, result)
    got = cache.get("tools/list", None)
    assert got == result
    got["tools"].append({"name": "mine"})  # the caller's copy
    assert cache.get("tools/list", {}) == result
    now[0] += 2.0
    assert cache.get("tools/list", {}) is None and len(cache) == 0
    cache.put("resources/read", {"uri": "u", "requestState": "s"}, {**result, "contents": []})
    cache.put("resources/read", {"uri": "u"}, {"contents": [], "resultType": "input_required", "ttlMs": 5})
    cache.put("tools/call", {"name": "x"}, result)
    assert len(cache) == 0


@pytest.mark.parametrize("ttl", [True, -5, 1.5, "60000", None])
def test_a_ttl_that_is_no_whole_positive_number_keeps_nothing(ttl: Any) -> None:
    cache = ResponseCache()
    cache.put("tools/list", {}, {"tools": [], "ttlMs": ttl, "cacheScope": "public"})
    cache.put("prompts/list", {}, {"prompts": [], "ttlMs": 5_000, "cacheScope": "everyone"})
    assert len(cache) == 0


def test_a_hostile_ttl_is_capped_and_the_cache_is_bounded() -> None:
    now = [0.0]
    cache = ResponseCache(clock=lambda: now[0])
    cache.put("tools/list", {}, {"tools": [], "ttlMs": 10**15, "cacheScope": "public"})
    now[0] += MAX_TTL
    assert cache.get("tools/list", {}) is None
    for index in range(MAX_ENTRIES + 10):
        cache.put("resources/read", {"uri": f"u{index}"}, {"contents": [], "ttlMs": 60_000, "cacheScope": "public"})
    assert len(cache) == MAX_ENTRIES and cache.get("resources/read", {"uri": "u0"}) is None
