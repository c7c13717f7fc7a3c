"""The Server face over real pipes: runtime changes, shutdown from any thread, required capabilities."""

from __future__ import annotations

import threading

import pytest

import mcpsync
from mcpsync import Context, Server, Service, Tool

from .._timeouts import LONG
from .pipes import PipeClient, modern

pytestmark = pytest.mark.timeout(60)


def service_with(name: str, **tool_options: object) -> Service:
    service = Service(name)
    service.add_tool(Tool(lambda: name, name=name, **tool_options))  # type: ignore[arg-type]
    return service


def test_add_and_remove_service_at_runtime_change_what_is_listed_and_callable() -> None:
    server = Server("api", services=[service_with("first")])
    with PipeClient(server) as client:
        client.initialize()
        server.add_service(service_with("second"))
        response, before = client.request("tools/list", {}, id=2)
        assert before == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]
        assert [tool["name"] for tool in response["result"]["tools"]] == ["first", "second"]
        server.remove_service("first")
        response, _ = client.request("tools/call", {"name": "first"}, id=3)
        assert response["error"]["code"] == -32602


def test_a_tool_filter_change_is_announced_by_refresh_tools() -> None:
    hidden = {"secret"}
    server = Server("api", services=[service_with("open"), service_with("secret")], tool_filter=lambda tool: tool.name not in hidden)
    with PipeClient(server) as client:
        client.initialize()
        response, _ = client.request("tools/list", {}, id=2)
        assert [tool["name"] for tool in response["result"]["tools"]] == ["open"]
        hidden.clear()
        server.refresh_tools()
        response, before = client.request("tools/list", {}, id=3)
        assert before == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]
        assert [tool["name"] for tool in response["result"]["tools"]] == ["open", "secret"]


def test_shutdown_from_another_thread_cancels_running_tools_and_answers_them() -> None:
    started = threading.Event()
    service = Service("slow")

    @service.tool
    def wait_for_cancel(ctx: Context) -> str:
        started.set()
        return "cancelled" if ctx.wait_cancelled(LONG) else "timed out"

    server = Server("api", services=[service])
    client = PipeClient(server)
    client.initialize()
    client.request_nowait("tools/call", {"name": "wait_for_cancel"}, id="slow")
    assert started.wait(LONG)
    stopper = threading.Thread(target=server.shutdown, args=(LONG,), name="test-stopper")
    stopper.start()
    stopper.join(LONG)
    assert not stopper.is_alive()
    assert server.wait(0)
    frames = client.finish()
    assert frames == [{"jsonrpc": "2.0", "id": "slow", "result": {"content": [{"type": "text", "text": "cancelled"}], "isError": False}}]


SHUTTING_DOWN = {"code": -32603, "message": "the server is shutting down"}


def stubborn_service(started: threading.Event, release: threading.Event, returned: threading.Event) -> Service:
    """One tool that ignores cancellation: it runs until `release`, then says so with `returned`."""
    service = Service("stubborn")

    @service.tool
    def stubborn(ctx: Context) -> str:
        started.set()
        release.wait(LONG)
        returned.set()
        return "finished late"

    return service


@pytest.mark.parametrize("ending", ["shutdown", "end of input"])
def test_a_tool_past_the_deadline_is_answered_once_and_its_late_result_dropped(ending: str) -> None:
    started, release, returned = threading.Event(), threading.Event(), threading.Event()
    server = Server("api", services=[stubborn_service(started, release, returned)], shutdown_timeout=0.2, drain_timeout=0.2)
    client = PipeClient(server)
    try:
        client.initialize()
        client.request_nowait("tools/call", {"name": "stubborn"}, id="late")
        assert started.wait(LONG)
        if ending == "shutdown":
            assert server.shutdown(LONG) is False  # the tool outlived the deadline
        else:
            client.close_input()
            assert server.wait(LONG)
        assert client.recv() == {"jsonrpc": "2.0", "id": "late", "error": SHUTTING_DOWN}
        release.set()
        assert returned.wait(LONG)
    finally:
        release.set()
    assert client.finish() == []  # what it returned went nowhere


def test_a_tool_needing_a_capability_is_32021_without_it_in_2026() -> None:
    server = Server("api", services=[service_with("asks", requires={"elicitation": {}})])
    with PipeClient(server) as client:
        response, _ = client.request("tools/call", modern({"name": "asks"}), id=1)
        assert response["error"]["code"] == -32021
        assert response["error"]["data"] == {"requiredCapabilities": {"elicitation": {}}}
        params = modern({"name": "asks"})
        params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {"elicitation": {"form": {}}}
        response, _ = client.request("tools/call", params, id=2)
        assert response["result"]["content"][0]["text"] == "asks"


def test_a_tool_needing_a_capability_is_a_tool_error_in_the_handshake_era() -> None:
    server = Server("api", services=[service_with("asks", requires={"sampling": {}})])
    with PipeClient(server) as client:
        client.initialize()
        response, _ = client.request("tools/call", {"name": "asks"}, id=2)
        assert response["result"]["isError"] is True
        assert "sampling" in response["result"]["content"][0]["text"]


def test_server_is_a_context_manager_that_shuts_down() -> None:
    with Server("api", services=[service_with("x")]) as server:
        client = PipeClient(server)
        client.initialize()
    assert server.wait(0)
    client.finish()


@pytest.mark.parametrize("method", ["wsgi_app", "start_http", "serve_http"])
def test_the_http_methods_reject_an_unknown_keyword_naming_it(method: str) -> None:
    with Server("api") as server, pytest.raises(TypeError, match="nonsense_option"):
        getattr(server, method)(nonsense_option=1)


def test_the_http_methods_return_the_types_the_package_exports() -> None:
    with Server("api") as server:
        assert isinstance(server.wsgi_app(keepalive=LONG), mcpsync.WsgiTransport)
        serving = server.start_http("127.0.0.1", 0, threads=4, max_streams=2)
        assert isinstance(serving, mcpsync.HttpServing) and serving.app.path == "/mcp"


def test_stdio_is_never_protected_even_when_the_server_has_auth() -> None:
    """The spec: a stdio server takes its credentials from its environment. Auth guards the
    server's HTTP endpoints only; over stdio every entry is served, scoped ones too, and the
    code sees no principal."""
    from mcpsync.auth import Auth, StaticTokens

    service = Service("guarded")

    @service.tool(scopes=["admin"])
    def reset(ctx: Context) -> str:
        return f"reset by {ctx.principal}"

    server = Server("api", services=[service], auth=Auth(StaticTokens({"only-http-token-0123456": ["admin"]})))
    with PipeClient(server) as client:
        client.initialize()
        response, _ = client.request("tools/list", {}, id=2)
        assert [tool["name"] for tool in response["result"]["tools"]] == ["reset"]
        response, _ = client.request("tools/call", {"name": "reset"}, id=3)
        assert response["result"]["content"][0]["text"] == "reset by None"


def test_an_http_endpoint_without_auth_warns_that_scoped_entries_are_open(caplog: pytest.LogCaptureFixture) -> None:
    service = Service("guarded")
    service.add_tool(Tool(lambda: "done", name="reset", scopes=["admin"]))
    server = Server("api", services=[service])
    with caplog.at_level("WARNING", logger="mcpsync"):
        server.wsgi_app()
    assert "checks no tokens (no auth=), so every caller may use reset, which declares scopes" in caplog.text
    caplog.clear()
    from mcpsync.auth import Auth, StaticTokens

    with caplog.at_level("WARNING", logger="mcpsync"):
        server.wsgi_app(auth=Auth(StaticTokens({"only-http-token-0123456": ["admin"]})))
    assert caplog.text == ""
    server.close()


def test_an_auth_whose_resource_its_jwt_verifier_would_refuse_warns(caplog: pytest.LogCaptureFixture) -> None:
    from mcpsync.auth import Auth, JwtVerifier

    verifier = JwtVerifier(jwks_url="https://as.example/jwks", issuer="https://as.example", audience="https://mcp.example/mcp")
    with caplog.at_level("WARNING", logger="mcpsync"):
        Auth(verifier, resource="https://mcp.example/mcp")
    assert caplog.text == ""
    with caplog.at_level("WARNING", logger="mcpsync"):
        Auth(verifier, resource="https://other.example/mcp")
    assert "is not among the audiences ['https://mcp.example/mcp'] the verifier accepts" in caplog.text
