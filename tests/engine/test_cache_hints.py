"""Cache hints per method and per resource (SEP-2549), over a real pipe: a method's own hint wins
over the server's, a resource's own over the method's for its reads, an authenticated caller is
told "private" whatever the hint, a retry that brought input and the handshake era carry none; a
hint that is no hint is refused when it is written."""

from __future__ import annotations

import pytest

from mcpsync import CacheHint, Context, Server, Service

from ..transport.pipes import PipeClient, modern

pytestmark = pytest.mark.timeout(60)


def _server() -> Server:
    service = Service("cached")

    @service.tool
    def echo(text: str) -> str:
        return text

    @service.resource("docs://stable", cache=CacheHint(86_400_000, "public"))
    def stable() -> str:
        return "stable"

    @service.resource("docs://plain")
    def plain() -> str:
        return "plain"

    @service.resource("docs://ask", cache=CacheHint(5_000, "public"))
    def ask(ctx: Context) -> str:
        return str(ctx.elicit("Sure?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})["action"])

    return Server("cached", services=[service], ttl_ms=1_000, cache_scope="private", cache_hints={"tools/list": CacheHint(60_000, "public")})


def _hints(result: dict) -> tuple[object, object]:
    return result.get("ttlMs"), result.get("cacheScope")


def test_each_result_carries_its_own_hint() -> None:
    with PipeClient(_server()) as client:
        assert _hints(client.request("tools/list", modern())[0]["result"]) == (60_000, "public")  # the method's
        assert _hints(client.request("prompts/list", modern())[0]["result"]) == (1_000, "private")  # the server's
        assert _hints(client.request("resources/read", modern({"uri": "docs://stable"}))[0]["result"]) == (86_400_000, "public")  # the resource's
        assert _hints(client.request("resources/read", modern({"uri": "docs://plain"}))[0]["result"]) == (1_000, "private")


def test_a_retry_with_answers_and_the_handshake_era_carry_none() -> None:
    with PipeClient(_server()) as client:
        def asking(params: dict) -> dict:
            enveloped = modern(params)
            enveloped["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {"elicitation": {}}
            return enveloped

        asked = client.request("resources/read", asking({"uri": "docs://ask"}))[0]["result"]
        assert asked["resultType"] == "input_required" and _hints(asked) == (None, None)
        [key] = asked["inputRequests"]
        answered = client.request("resources/read", asking(
            {"uri": "docs://ask", "inputResponses": {key: {"action": "accept", "content": {"ok": True}}}, "requestState": asked["requestState"]},
        ))[0]["result"]
        assert answered["contents"][0]["text"] == "accept" and _hints(answered) == (None, None)
    with PipeClient(_server()) as client:
        client.initialize()
        for method, params in (("tools/list", {}), ("resources/read", {"uri": "docs://stable"})):
            assert _hints(client.request(method, params)[0]["result"]) == (None, None)


def test_an_authenticated_caller_is_told_private_whatever_the_hint() -> None:
    engine = _server().engine
    dressed = engine.dress_modern("resources/read", {"contents": [], **CacheHint(5_000, "public").wire()}, private=True)
    assert _hints(dressed) == (5_000, "private")
    assert _hints(engine.dress_modern("tools/list", {"tools": []}, private=True)) == (60_000, "private")


@pytest.mark.parametrize(("make", "error"), [
    (lambda: CacheHint(-1), ValueError),
    (lambda: CacheHint(1.5), ValueError),  # type: ignore[arg-type]
    (lambda: CacheHint(True), ValueError),  # type: ignore[arg-type]
    (lambda: CacheHint(10, "shared"), ValueError),
    (lambda: Server("s", cache_hints={"tools/call": CacheHint(10)}), ValueError),
    (lambda: Server("s", cache_hints={"tools/list": 10}), TypeError),  # type: ignore[dict-item]
    (lambda: Service("s").resource("x://y", cache=60)(lambda: "x"), TypeError),  # type: ignore[arg-type]
])
def test_a_hint_that_is_no_hint_is_refused_where_it_is_written(make: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        make()  # type: ignore[operator]
