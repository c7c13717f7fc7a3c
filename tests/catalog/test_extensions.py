"""Extensions (SEP-2133) and MCP Apps built on them, over a real pipe in both eras: a server's
extensions advertised in `capabilities.extensions` (the initialize result, server/discover), their
methods answered with the request's Context, the client's own extensions declared and seen by the
server; a method no extension has is still -32601; what would clash or is malformed is refused when
it is added. Apps: the page a tool names, served with its MIME type and `_meta.ui` (on the read
too), and a client that did not negotiate the extension still getting the tool's text."""

from __future__ import annotations

from typing import Any

import pytest

import mcpsync
from mcpsync import Context, Era, Extension, McpError, Server, Service, apps

pytestmark = pytest.mark.timeout(60)

NOTES = "com.example/notes"
UI_CLIENT = {apps.UI: {"mimeTypes": [apps.APP_MIME_TYPE]}}
PAGE = "<!doctype html><html><body><h1 id='city'>?</h1></body></html>"


def _count(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    if "_meta" in params:
        raise AssertionError("an extension method gets its params without _meta")
    declared = (ctx.client_capabilities or {}).get("extensions", {})
    return {"count": len(params.get("of", [])), "clientDeclared": sorted(declared), "apps": apps.client_renders_apps(ctx)}


def _server() -> Server:
    service = Service("weather")

    @service.tool(meta=apps.tool_meta("ui://weather/forecast", visibility=["model", "app"]))
    def forecast(city: str) -> dict[str, Any]:
        """Tomorrow's weather, with a page to show it."""
        return {"city": city, "sky": "sunny"}

    apps.add_page(service, "ui://weather/forecast", PAGE, name="forecast-page", csp={"resource_domains": ["https://cdn.example.com"]},
                  permissions=["geolocation"], prefers_border=True)
    notes = Extension(NOTES, {"version": 2}, {"notes/count": _count})
    return Server("weather", services=[service], extensions=[notes, apps.UI_EXTENSION])


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_extensions_are_advertised_answered_and_the_clients_declared(mode: str) -> None:
    with mcpsync.connect(_server(), mode=mode, extensions=UI_CLIENT) as session:
        assert session.server_extensions[NOTES] == {"version": 2}
        assert session.server_extensions[apps.UI] == {"mimeTypes": [apps.APP_MIME_TYPE]}
        answer = session.request("notes/count", {"of": [1, 2, 3]})
        assert (answer["count"], answer["clientDeclared"], answer["apps"]) == (3, [apps.UI], True)
        assert ("resultType" in answer) == (mode == "modern")  # dressed as its era dresses every result
        with pytest.raises(McpError) as unknown:
            session.request("notes/delete", {})
        assert unknown.value.code == -32601


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_an_app_is_a_tool_naming_a_page_and_a_client_without_the_extension_gets_its_text(mode: str) -> None:
    with mcpsync.connect(_server(), mode=mode, extensions=UI_CLIENT) as session:
        [tool] = session.list_tools()
        assert tool["_meta"] == {"ui": {"resourceUri": "ui://weather/forecast", "visibility": ["model", "app"]}}
        [page] = session.list_resources()
        ui = {"csp": {"resourceDomains": ["https://cdn.example.com"]}, "permissions": {"geolocation": {}}, "prefersBorder": True}
        assert (page["uri"], page["mimeType"], page["_meta"]) == ("ui://weather/forecast", apps.APP_MIME_TYPE, {"ui": ui})
        [content] = session.read_resource("ui://weather/forecast")["contents"]
        assert (content["text"], content["mimeType"], content["_meta"]) == (PAGE, apps.APP_MIME_TYPE, {"ui": ui})
    with mcpsync.connect(_server(), mode=mode) as plain:  # no extension negotiated: an ordinary tool
        result = plain.call_tool("forecast", {"city": "Lisbon"})
        assert result["structuredContent"] == {"city": "Lisbon", "sky": "sunny"} and "Lisbon" in result["content"][0]["text"]
        assert plain.request("notes/count", {})["apps"] is False


@pytest.mark.parametrize("mode", ["legacy", "modern"])
def test_an_extension_of_one_era_is_advertised_and_answered_in_that_era_only(mode: str) -> None:
    """As tasks are in 2026-07-28 (core in 2025-11-25, an extension there): mcpsync's own is one."""
    modern_only = Extension("com.example/modern", {"v": 1}, {"modern/ping": lambda params, ctx: {"pong": True}}, eras=frozenset({Era.MODERN}))
    with mcpsync.connect(Server("s", extensions=[modern_only]), mode=mode) as session:
        offered = session.server_extensions
        if mode == "modern":
            assert offered["com.example/modern"] == {"v": 1} and "io.modelcontextprotocol/tasks" in offered
            assert session.request("modern/ping")["pong"] is True
        else:
            assert "com.example/modern" not in offered and "io.modelcontextprotocol/tasks" not in offered
            assert session.server_capabilities["tasks"]["requests"] == {"tools": {"call": {}}}  # 2025-11-25's core tasks
            with pytest.raises(McpError) as missing:
                session.request("modern/ping")
            assert missing.value.code == -32601


@pytest.mark.parametrize(("make", "why"), [
    (lambda: Extension("notes", {}), "reverse-DNS prefix"),
    (lambda: Extension("Com.Example/x", {}), "reverse-DNS prefix"),
    (lambda: Extension("com.example/x", {}, {"count": _count}), "like 'prefix/verb'"),
    (lambda: Extension("com.example/x", {}, {"notifications/x": _count}), "like 'prefix/verb'"),
    (lambda: Server("s", extensions=[Extension("com.example/x", {}, {"tools/list": _count})]), "already answered"),
    (lambda: Server("s", extensions=[Extension("com.example/x"), Extension("com.example/x")]), "offered already"),
    (lambda: Server("s", extensions=[Extension("com.example/x", {}, {"a/b": _count}), Extension("com.example/y", {}, {"a/b": _count})]), "already answered"),
    (lambda: Extension("com.example/x", eras=frozenset()), "at least one Era"),
    (lambda: Server("s", extensions=[Extension("io.modelcontextprotocol/tasks")]), "offered already"),  # the engine's own
    (lambda: apps.tool_meta("https://x/page"), "ui:// resource"),
    (lambda: apps.tool_meta("ui://x", visibility=["everyone"]), "visibility"),
    (lambda: apps.add_page(Service("s"), "ui://x", PAGE, name="p", csp={"script_domains": ["https://x"]}), "CSP kinds"),
    (lambda: apps.add_page(Service("s"), "ui://x", PAGE, name="p", csp={"connect_domains": ["x.example"]}), "list of origins"),
    (lambda: apps.add_page(Service("s"), "ui://x", PAGE, name="p", permissions=["usb"]), "permissions are"),
])
def test_what_would_clash_or_is_malformed_is_refused_when_it_is_added(make: Any, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        make()
