"""Tests for mcpsync.engine.served: operations run against what is served, without an engine."""

from __future__ import annotations

from typing import Any

from mcpsync.catalog.catalog import Catalog
from mcpsync.catalog.service import Service
from mcpsync.engine.engine import Engine
from mcpsync.engine.interceptors import Call
from mcpsync.engine.operations import call_tool, initialize, list_tools
from mcpsync.engine.request_state import RequestStateSealer
from mcpsync.engine.served import Served
from mcpsync.engine.session import Session
from mcpsync.protocol.jsonrpc import Request
from mcpsync.protocol.versions import Era
from tests.helpers import STDIO_LIKE, FakeExchange


def make_served(**changes: Any) -> Served:
    service = Service("s")

    @service.tool
    def shout(text: str) -> str:
        return text.upper()

    @service.tool
    def hidden() -> str:
        return "secret"

    settings: dict[str, Any] = {
        "catalog": Catalog([service]),
        "server_info": {"name": "bare", "version": "0"},
        "instructions": None,
        "interceptors": (),
        "tool_filter": lambda tool: tool.name != "hidden",
        "page_size": 100,
        "request_states": RequestStateSealer(None),
        "ask_timeout": 5.0,
    }
    return Served(**{**settings, **changes})


def handshake_call(method: str, params: dict[str, Any], session: Session | None = None) -> Call:
    return Call(Request(1, method, params), session or Session(), Era.HANDSHAKE, None, STDIO_LIKE, FakeExchange())


def test_initialize_names_the_served_server_and_records_the_client() -> None:
    session = Session()
    result = initialize(make_served(), handshake_call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}}, session))
    assert result["serverInfo"] == {"name": "bare", "version": "0"}
    assert session.negotiated_version == "2025-06-18"


def test_the_tool_filter_hides_a_tool_from_listing_and_calling() -> None:
    served = make_served()
    listed = list_tools(served, handshake_call("tools/list", {}))
    assert [tool["name"] for tool in listed["tools"]] == ["shout"]
    shout, hidden = served.catalog.find_tool("shout"), served.catalog.find_tool("hidden")
    assert shout is not None and served.visible(shout)
    assert hidden is not None and not served.visible(hidden)


def test_a_changed_page_size_is_what_the_next_listing_uses() -> None:
    served = make_served(tool_filter=None)
    served.page_size = 1
    first = list_tools(served, handshake_call("tools/list", {}))
    assert len(first["tools"]) == 1 and "nextCursor" in first


def test_a_tool_runs_with_nothing_but_what_is_served() -> None:
    result = call_tool(make_served(), handshake_call("tools/call", {"name": "shout", "arguments": {"text": "hi"}}))
    assert isinstance(result, dict)
    assert result["content"] == [{"type": "text", "text": "HI"}]
    assert not result.get("isError")


def test_what_the_engine_is_given_and_later_set_is_what_its_operations_read() -> None:
    engine = Engine(Catalog(), {"name": "e", "version": "1"}, page_size=7)
    engine.page_size = 3
    sealer = RequestStateSealer(b"k" * 32)
    engine.request_states = sealer
    assert engine.served.page_size == 3
    assert engine.served.request_states is sealer
    assert engine.served.server_info == {"name": "e", "version": "1"}
