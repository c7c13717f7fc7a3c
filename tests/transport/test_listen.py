"""subscriptions/listen on stdio, and list changes reaching every client in its era's form.

Every test runs a real Server over real pipes (tests/transport/pipes.py), with real threads.
"""

from __future__ import annotations

import threading

import pytest

from mcpsync import Interceptor, McpError, Server, Service
from mcpsync.engine.interceptors import TransportInfo
from mcpsync.engine.operations import accepted_filter
from mcpsync.engine.outcome import Subscribed
from mcpsync.engine.session import Session
from mcpsync.protocol.jsonrpc import Request
from mcpsync.protocol.versions import Era

from .._timeouts import LONG
from .pipes import SUB_KEY, PipeClient, modern

pytestmark = pytest.mark.timeout(60)


def make_service(name: str = "svc") -> Service:
    service = Service(name)

    @service.tool
    def echo(text: str) -> str:
        return text

    @service.prompt
    def greet(who: str) -> str:
        return f"hello {who}"

    return service


def extra_tool_service(name: str) -> Service:
    service = Service(name)

    @service.tool(name=f"{name}_tool")
    def tool() -> str:
        return name

    return service


@pytest.fixture
def server() -> Server:
    return Server("listen-test", services=[make_service()])


@pytest.fixture
def client(server: Server):
    with PipeClient(server) as pipe:
        yield pipe


def tagged(method: str, sub_id: object, **params: object) -> dict:
    return {"jsonrpc": "2.0", "method": method, "params": {**params, "_meta": {SUB_KEY: sub_id}}}


def test_discover_advertises_list_changes_and_resource_subscriptions(client: PipeClient) -> None:
    response, _ = client.request("server/discover", modern())
    capabilities = response["result"]["capabilities"]
    assert capabilities["tools"] == {"listChanged": True}
    assert capabilities["prompts"] == {"listChanged": True}
    assert capabilities["resources"] == {"subscribe": True, "listChanged": True}


def test_ack_is_the_accepted_subset_false_flags_and_unknown_keys_dropped(client: PipeClient) -> None:
    ack = client.listen(
        "L", {"toolsListChanged": True, "promptsListChanged": False, "bogus": True, "resourceSubscriptions": []}
    )
    assert ack == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {SUB_KEY: "L"}, "notifications": {"toolsListChanged": True}},
    }


def test_ack_drops_types_the_transport_cannot_deliver() -> None:
    capabilities = {"tools": {"listChanged": True}, "prompts": {}, "resources": {}}
    requested = {"toolsListChanged": True, "promptsListChanged": True, "resourcesListChanged": True, "resourceSubscriptions": ["a://b"]}
    assert accepted_filter(requested, capabilities) == {"toolsListChanged": True}


def test_ack_keeps_resources_when_requested(client: PipeClient) -> None:
    ack = client.listen("L", {"resourcesListChanged": True, "resourceSubscriptions": ["file:///a"]})
    assert ack["params"]["notifications"] == {"resourcesListChanged": True, "resourceSubscriptions": ["file:///a"]}


def test_subscription_ids_keep_their_json_type(server: Server, client: PipeClient) -> None:
    client.listen(7, {"toolsListChanged": True})
    client.listen("7", {"toolsListChanged": True})
    server.refresh_tools()
    received = [client.recv(), client.recv()]
    assert tagged("notifications/tools/list_changed", 7) in received
    assert tagged("notifications/tools/list_changed", "7") in received
    assert {type(frame["params"]["_meta"][SUB_KEY]) for frame in received} == {int, str}


@pytest.mark.parametrize(
    "notifications",
    [None, "all", {"toolsListChanged": "yes"}, {"resourceSubscriptions": "file:///a"}, {"resourceSubscriptions": [1]}],
)
def test_invalid_filters_are_invalid_params(client: PipeClient, notifications: object) -> None:
    params = modern() if notifications is None else modern({"notifications": notifications})
    response, before = client.request("subscriptions/listen", params, id="bad")
    assert response["error"]["code"] == -32602
    assert before == []


def test_empty_accepted_filter_is_still_acknowledged(client: PipeClient) -> None:
    ack = client.listen("L", {"toolsListChanged": False})
    assert ack["params"] == {"_meta": {SUB_KEY: "L"}, "notifications": {}}


def test_listen_on_a_handshake_connection_is_method_not_found(client: PipeClient) -> None:
    client.initialize()
    response, _ = client.request("subscriptions/listen", modern({"notifications": {"toolsListChanged": True}}), id=2)
    assert response["error"]["code"] == -32601


def test_duplicate_active_id_is_rejected_and_the_active_one_keeps_working(server: Server, client: PipeClient) -> None:
    client.listen("L", {"toolsListChanged": True})
    response, _ = client.request("subscriptions/listen", modern({"notifications": {"promptsListChanged": True}}), id="L")
    assert response["error"]["code"] == -32600
    server.refresh_tools()
    assert client.recv() == tagged("notifications/tools/list_changed", "L")


def test_cancel_ends_delivery_and_matches_the_id_type(server: Server, client: PipeClient) -> None:
    client.listen(7, {"toolsListChanged": True})
    client.listen("8", {"toolsListChanged": True})
    client.notify("notifications/cancelled", {"requestId": "7"})  # not subscription 7
    client.notify("notifications/cancelled", {"requestId": 8})  # not subscription "8"
    client.notify("notifications/cancelled", {"requestId": "unknown"})
    client.notify("notifications/cancelled", {})
    server.refresh_tools()
    received = [client.recv(), client.recv()]
    assert tagged("notifications/tools/list_changed", 7) in received
    assert tagged("notifications/tools/list_changed", "8") in received

    client.notify("notifications/cancelled", {"requestId": 7})
    response, before = client.request("tools/list", modern(), id="sync")  # the cancel was read before this
    assert "result" in response
    server.refresh_tools()
    assert client.recv() == tagged("notifications/tools/list_changed", "8")
    client.expect_silence()


def test_graceful_shutdown_completes_open_subscriptions(client: PipeClient) -> None:
    client.listen("L", {"toolsListChanged": True})
    client.listen(9, {"promptsListChanged": True})
    frames = client.stop()
    results = {frame["id"]: frame["result"] for frame in frames}
    assert set(results) == {"L", 9}
    for sub_id, result in results.items():
        assert result["resultType"] == "complete"
        assert result["_meta"][SUB_KEY] == sub_id
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "listen-test"


def test_end_of_input_drops_subscriptions_silently(client: PipeClient) -> None:
    client.listen("L", {"toolsListChanged": True})
    assert client.finish() == []


def test_untagged_changes_only_after_initialize(server: Server, client: PipeClient) -> None:
    client.request("tools/list", {}, id=1)  # served under handshake rules, but no initialize yet
    server.refresh_tools()
    client.expect_silence()
    client.initialize()
    server.refresh_tools()
    assert client.recv() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


def test_a_modern_connection_gets_only_what_it_subscribed_to(server: Server, client: PipeClient) -> None:
    client.listen("T", {"toolsListChanged": True})
    server.refresh_prompts()
    server.refresh_resources()
    client.expect_silence()
    server.refresh_tools()
    assert client.recv() == tagged("notifications/tools/list_changed", "T")


def test_remote_style_changes_reach_only_matching_subscriptions_with_their_own_tag(server: Server, client: PipeClient) -> None:
    client.listen("tools", {"toolsListChanged": True})
    client.listen("prompts", {"promptsListChanged": True})
    server.catalog.refresh({"prompts"})  # the hook a proxied server's list_changed goes through
    assert client.recv() == tagged("notifications/prompts/list_changed", "prompts")
    client.expect_silence()


def test_resource_updates_route_to_subscribers_of_the_uri_or_a_parent(server: Server, client: PipeClient) -> None:
    client.listen("A", {"resourceSubscriptions": ["file:///a"]})
    client.listen("B", {"resourceSubscriptions": ["file:///b/c"]})
    server.notify_resource_updated("file:///a/x.txt")
    assert client.recv() == tagged("notifications/resources/updated", "A", uri="file:///a/x.txt")
    server.notify_resource_updated("file:///b")  # a parent of B's URI is not under it
    server.notify_resource_updated("file:///ab")  # a sibling that shares a prefix is not under A's
    client.expect_silence()
    server.notify_resource_updated("file:///b/c")
    assert client.recv() == tagged("notifications/resources/updated", "B", uri="file:///b/c")


def test_handshake_resource_subscribe_and_unsubscribe(server: Server, client: PipeClient) -> None:
    client.initialize()
    response, _ = client.request("resources/subscribe", {"uri": "file:///a"}, id=2)
    assert response["result"] == {}
    server.notify_resource_updated("file:///a/b")
    assert client.recv() == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a/b"}}
    client.request("resources/unsubscribe", {"uri": "file:///a"}, id=3)
    server.notify_resource_updated("file:///a/b")
    client.expect_silence()


def test_local_changes_reach_tool_and_prompt_subscribers(server: Server, client: PipeClient) -> None:
    client.listen("T", {"toolsListChanged": True})
    client.listen("P", {"promptsListChanged": True})
    server.add_service(make_service("second"))  # adds tools and prompts
    received = [client.recv(), client.recv()]
    assert tagged("notifications/tools/list_changed", "T") in received
    assert tagged("notifications/prompts/list_changed", "P") in received
    client.expect_silence()


def test_a_service_changing_its_own_tools_notifies(server: Server, client: PipeClient) -> None:
    service = server.catalog.services[0]
    client.listen("T", {"toolsListChanged": True})

    @service.tool
    def late() -> str:
        return "late"

    assert client.recv() == tagged("notifications/tools/list_changed", "T")
    service.remove_tool("late")
    assert client.recv() == tagged("notifications/tools/list_changed", "T")
    response, _ = client.request("tools/list", modern(), id=5)
    assert [tool["name"] for tool in response["result"]["tools"]] == ["echo"]


def test_handshake_connection_gets_one_untagged_notification_per_change(server: Server, client: PipeClient) -> None:
    client.initialize()
    for index in range(3):
        server.add_service(extra_tool_service(f"s{index}"))
        assert client.recv() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    server.remove_service("s0")
    assert client.recv() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    client.expect_silence()


def test_a_connection_in_both_states_gets_the_untagged_copy_first(server: Server, client: PipeClient) -> None:
    # The era lock keeps a real client from doing both; the ordering still holds for the registry.
    client.listen("T", {"toolsListChanged": True})
    client.transport.session.commit_era(Era.HANDSHAKE)
    client.transport.session._initialized = True  # as if initialize had also completed
    server.refresh_tools()
    assert client.recv() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert client.recv() == tagged("notifications/tools/list_changed", "T")


class HoldListen(Interceptor):
    """Holds every listen in before_execute until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def before_execute(self, call):  # type: ignore[no-untyped-def]
        if call.method == "subscriptions/listen":
            self.entered.set()
            assert self.release.wait(LONG)
        return None


def test_a_change_racing_activation_never_precedes_the_ack() -> None:
    hold = HoldListen()
    server = Server("race", services=[make_service()], interceptors=[hold])
    with PipeClient(server) as client:
        client.request_nowait("subscriptions/listen", modern({"notifications": {"toolsListChanged": True}}), id="L")
        assert hold.entered.wait(LONG)
        server.refresh_tools()  # published while the listen is still being processed
        hold.release.set()
        assert client.recv()["method"] == "notifications/subscriptions/acknowledged"
        client.expect_silence()  # the earlier change was not delivered to it
        server.refresh_tools()
        assert client.recv() == tagged("notifications/tools/list_changed", "L")


class RejectListen(Interceptor):
    def before_execute(self, call):  # type: ignore[no-untyped-def]
        if call.method == "subscriptions/listen":
            raise McpError(-32003 - 1000, "listen refused by policy")
        return None


def test_an_interceptor_can_reject_a_listen_and_nothing_is_registered() -> None:
    server = Server("reject", services=[make_service()], interceptors=[RejectListen()])
    with PipeClient(server) as client:
        response, before = client.request("subscriptions/listen", modern({"notifications": {"toolsListChanged": True}}), id="L")
        assert response["error"] == {"code": -33003, "message": "listen refused by policy"}
        assert before == []
        server.refresh_tools()
        client.expect_silence()
        # and the failed listen locked nothing: initialize still works
        assert "result" in client.initialize()


def test_the_engine_returns_no_response_for_an_accepted_listen(server: Server) -> None:
    class Exchange:
        cancel_event = threading.Event()
        on_cancel = ask = release_stream = trace_headers = None

        def notify(self, method: str, params: dict) -> None:
            raise AssertionError("a listen writes nothing itself")

    request = Request("L", "subscriptions/listen", modern({"notifications": {"toolsListChanged": True}}))
    transport = TransportInfo("test", supports_subscriptions=True)
    outcome = server.engine.execute(request, Session(), Exchange(), transport)
    assert outcome == Subscribed("L", {"toolsListChanged": True})


class HoldListenUntilShutdown(Interceptor):
    """Holds every listen until the server starts shutting down (which cancels running requests)."""

    def __init__(self) -> None:
        self.entered = threading.Event()

    def before_execute(self, call):  # type: ignore[no-untyped-def]
        if call.method == "subscriptions/listen":
            self.entered.set()
            assert call.exchange.cancel_event.wait(LONG)
        return None


def test_a_listen_arriving_during_shutdown_is_completed_not_registered() -> None:
    hold = HoldListenUntilShutdown()
    server = Server("closing", services=[make_service()], interceptors=[hold])
    client = PipeClient(server)
    client.request_nowait("subscriptions/listen", modern({"notifications": {"toolsListChanged": True}}), id="late")
    assert hold.entered.wait(LONG)
    frames = client.stop()
    assert [frame.get("id") for frame in frames] == ["late"]
    assert frames[0]["result"]["resultType"] == "complete"
    assert frames[0]["result"]["_meta"][SUB_KEY] == "late"


def test_the_subscription_cap_is_enforced_before_any_ack() -> None:
    server = Server("cap", services=[make_service()], subscription_cap=2)
    with PipeClient(server) as client:
        client.listen(1, {"toolsListChanged": True})
        client.listen(2, {"toolsListChanged": True})
        response, before = client.request("subscriptions/listen", modern({"notifications": {"toolsListChanged": True}}), id=3)
        assert response["error"] == {"code": -32603, "message": "Subscription limit reached"}
        assert before == []
