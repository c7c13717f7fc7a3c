"""Tests for mcpsync.catalog.catalog: snapshots, change events, name clashes and pagination cursors."""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest

from mcpsync.catalog.catalog import KINDS, Catalog, build_snapshot, decode_cursor, encode_cursor, paginate
from mcpsync.catalog.service import Prompt, Resource, ResourceTemplate, Service, Tool
from mcpsync.protocol.jsonrpc import ErrorCode, McpError

pytestmark = pytest.mark.timeout(30)


def tool(name: str, text: str = "x") -> Tool:
    return Tool(lambda: text, name=name)


def service_with(name: str, *, tools: tuple[str, ...] = (), prompts: tuple[str, ...] = (), resources: tuple[str, ...] = (),
                 templates: tuple[str, ...] = (), instructions: str | None = None) -> Service:
    service = Service(name, instructions=instructions)
    for tool_name in tools:
        service.add_tool(Tool(lambda n=tool_name, s=name: f"{s}:{n}", name=tool_name))
    for prompt_name in prompts:
        service.add_prompt(Prompt(lambda s=name: s, name=prompt_name))
    for uri in resources:
        service.add_resource(Resource(lambda s=name: s, uri))
    for uri_template in templates:
        service.add_template(ResourceTemplate(lambda s=name, **variables: s, uri_template))
    return service


class Recorder:
    def __init__(self) -> None:
        self.events: list[frozenset[str]] = []

    def __call__(self, kinds: frozenset[str]) -> None:
        self.events.append(kinds)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


# -- building -----------------------------------------------------------------------------------------

def test_a_catalog_lists_the_entries_of_its_services_in_order() -> None:
    catalog = Catalog([service_with("a", tools=("t1", "t2"), prompts=("p1",)), service_with("b", tools=("t3",), resources=("mem://r",))])
    snapshot = catalog.snapshot
    assert [t.name for t in snapshot.tools] == ["t1", "t2", "t3"]
    assert [p.name for p in snapshot.prompts] == ["p1"]
    assert [r.uri for r in snapshot.resources] == ["mem://r"]
    assert set(snapshot.tool_index) == {"t1", "t2", "t3"}
    assert [s.name for s in catalog.services] == ["a", "b"]


def test_an_empty_catalog() -> None:
    snapshot = Catalog().snapshot
    assert (snapshot.tools, snapshot.prompts, snapshot.resources, snapshot.templates) == ((), (), (), ())
    assert snapshot.instructions is None


def test_instructions_of_the_services_are_joined() -> None:
    catalog = Catalog([service_with("a", instructions="Use a."), service_with("b"), service_with("c", instructions="Use c.")])
    assert catalog.snapshot.instructions == "Use a.\n\nUse c."


# -- change events ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("contents, kinds", [
    ({"tools": ("t",)}, {"tools"}),
    ({"prompts": ("p",)}, {"prompts"}),
    ({"resources": ("mem://r",)}, {"resources"}),
    ({"templates": ("mem://t/{x}",)}, {"resources"}),
    ({"tools": ("t",), "prompts": ("p",), "resources": ("mem://r",)}, {"tools", "prompts", "resources"}),
])
def test_add_service_tells_the_listeners_which_lists_changed(recorder: Recorder, contents: dict, kinds: set[str]) -> None:
    catalog = Catalog()
    catalog.add_listener(recorder)
    catalog.add_service(service_with("s", **contents))
    assert recorder.events == [frozenset(kinds)]


def test_adding_an_empty_service_changes_no_list(recorder: Recorder) -> None:
    catalog = Catalog()
    catalog.add_listener(recorder)
    catalog.add_service(Service("empty"))
    assert recorder.events == []
    assert [s.name for s in catalog.services] == ["empty"]


@pytest.mark.parametrize("by_name", [False, True])
def test_remove_service_tells_the_listeners_and_returns_the_service(recorder: Recorder, by_name: bool) -> None:
    service = service_with("s", tools=("t",), templates=("mem://t/{x}",))
    catalog = Catalog([service, service_with("other", prompts=("p",))])
    catalog.add_listener(recorder)
    assert catalog.remove_service("s" if by_name else service) is service
    assert recorder.events == [frozenset({"tools", "resources"})]
    assert catalog.snapshot.tools == ()
    assert [p.name for p in catalog.snapshot.prompts] == ["p"]


def test_removing_an_unknown_service_raises(recorder: Recorder) -> None:
    catalog = Catalog([service_with("s", tools=("t",))])
    catalog.add_listener(recorder)
    with pytest.raises(KeyError):
        catalog.remove_service("nope")
    with pytest.raises(KeyError):
        catalog.remove_service(Service("s2"))
    assert recorder.events == []


def test_a_service_cannot_be_added_twice() -> None:
    service = service_with("s", tools=("t",))
    catalog = Catalog([service])
    with pytest.raises(ValueError):
        catalog.add_service(service)


@pytest.mark.parametrize("change, kinds", [
    (lambda s: s.add_tool(tool("new")), {"tools"}),
    (lambda s: s.remove_tool("t"), {"tools"}),
    (lambda s: s.add_prompt(Prompt(lambda: "x", name="new")), {"prompts"}),
    (lambda s: s.remove_prompt("p"), {"prompts"}),
    (lambda s: s.add_resource(Resource(lambda: "x", "mem://new")), {"resources"}),
    (lambda s: s.remove_resource("mem://r"), {"resources"}),
    (lambda s: s.add_template(ResourceTemplate(lambda x: x, "mem://new/{x}")), {"resources"}),
    (lambda s: s.remove_resource("mem://t/{x}"), {"resources"}),
])
def test_a_service_changing_its_entries_at_runtime_tells_the_listeners(recorder: Recorder, change: Any, kinds: set[str]) -> None:
    service = service_with("s", tools=("t",), prompts=("p",), resources=("mem://r",), templates=("mem://t/{x}",))
    catalog = Catalog([service])
    catalog.add_listener(recorder)
    change(service)
    assert recorder.events == [frozenset(kinds)]


def test_a_runtime_tool_is_served_and_visible_to_the_listener_when_it_is_told() -> None:
    service = service_with("s", tools=("t",))
    catalog = Catalog([service])
    seen_by_listener: list[list[str]] = []
    catalog.add_listener(lambda kinds: seen_by_listener.append([t.name for t in catalog.snapshot.tools]))
    service.add_tool(tool("late"))
    assert seen_by_listener == [["t", "late"]], "the snapshot is swapped before the listeners hear of it"
    assert "late" in catalog.snapshot.tool_index


def test_a_removed_service_no_longer_reaches_the_listeners(recorder: Recorder) -> None:
    service = service_with("s", tools=("t",))
    catalog = Catalog([service])
    catalog.remove_service(service)
    catalog.add_listener(recorder)
    service.add_tool(tool("ghost"))
    assert recorder.events == []
    assert "ghost" not in catalog.snapshot.tool_index


def test_a_service_added_later_reaches_the_listeners_when_it_changes(recorder: Recorder) -> None:
    catalog = Catalog()
    service = Service("later")
    catalog.add_service(service)
    catalog.add_listener(recorder)
    service.add_tool(tool("t"))
    assert recorder.events == [frozenset({"tools"})]


def test_every_listener_is_told_and_a_removed_one_is_not() -> None:
    first, second = Recorder(), Recorder()
    service = Service("s")
    catalog = Catalog([service])
    catalog.add_listener(first)
    catalog.add_listener(second)
    service.add_tool(tool("a"))
    catalog.remove_listener(second)
    catalog.remove_listener(second)  # removing twice is harmless
    service.add_tool(tool("b"))
    assert first.events == [frozenset({"tools"})] * 2
    assert second.events == [frozenset({"tools"})]


def test_refresh_announces_the_given_kinds(recorder: Recorder) -> None:
    catalog = Catalog([service_with("s", tools=("t",))])
    catalog.add_listener(recorder)
    catalog.refresh({"tools"})
    catalog.refresh()
    catalog.refresh(set())
    assert recorder.events == [frozenset({"tools"}), KINDS]


def test_refresh_rejects_unknown_kinds() -> None:
    with pytest.raises(ValueError):
        Catalog().refresh({"tools", "widgets"})


def test_resource_updated_reaches_the_update_listeners() -> None:
    catalog = Catalog()
    updates: list[str] = []
    catalog.add_update_listener(updates.append)
    catalog.resource_updated("mem://a")
    assert updates == ["mem://a"]
    with pytest.raises(TypeError):
        catalog.resource_updated(5)  # type: ignore[arg-type]


# -- name clashes ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, first, second, lookup", [
    ("tool", {"tools": ("same",)}, {"tools": ("same",)}, lambda snap: snap.tool_index["same"].fn()),
    ("prompt", {"prompts": ("same",)}, {"prompts": ("same",)}, lambda snap: snap.prompt_index["same"].fn()),
    ("resource", {"resources": ("mem://same",)}, {"resources": ("mem://same",)}, lambda snap: snap.resource_index["mem://same"].fn()),
    ("resource template", {"templates": ("mem://t/{x}",)}, {"templates": ("mem://t/{x}",)}, lambda snap: snap.templates[0].fn(x="1")),
])
def test_a_name_clash_keeps_the_first_services_entry_and_warns(caplog: pytest.LogCaptureFixture, kind: str, first: dict, second: dict, lookup: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="mcpsync"):
        catalog = Catalog([service_with("first", **first), service_with("second", **second)])
    assert lookup(catalog.snapshot).startswith("first")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert kind in message and "first" in message and "second" in message


def test_a_clash_counts_each_entry_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mcpsync"):
        catalog = Catalog([service_with("a", tools=("x", "y")), service_with("b", tools=("y", "z"))])
    assert [t.name for t in catalog.snapshot.tools] == ["x", "y", "z"]
    assert catalog.snapshot.tool_index["y"].fn() == "a:y"


def test_a_clash_added_later_also_keeps_the_first(caplog: pytest.LogCaptureFixture) -> None:
    catalog = Catalog([service_with("first", tools=("same",))])
    with caplog.at_level(logging.WARNING, logger="mcpsync"):
        catalog.add_service(service_with("second", tools=("same",)))
    assert catalog.snapshot.tool_index["same"].fn() == "first:same"
    assert any("second" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_removing_the_winner_of_a_clash_serves_the_other_entry() -> None:
    catalog = Catalog([service_with("first", tools=("same",)), service_with("second", tools=("same",))])
    catalog.remove_service("first")
    assert catalog.snapshot.tool_index["same"].fn() == "second:same"


# -- snapshots are immutable ------------------------------------------------------------------------------------

def test_a_snapshot_taken_before_a_change_is_unaffected() -> None:
    service = service_with("s", tools=("t",), resources=("mem://r",))
    catalog = Catalog([service])
    before = catalog.snapshot
    listing = before.tools
    service.add_tool(tool("new"))
    service.remove_resource("mem://r")
    catalog.add_service(service_with("other", tools=("o",)))
    assert [t.name for t in before.tools] == ["t"]
    assert listing is before.tools
    assert set(before.tool_index) == {"t"}
    assert before.find_resource("mem://r") is not None
    after = catalog.snapshot
    assert after is not before
    assert [t.name for t in after.tools] == ["t", "new", "o"]
    assert after.find_resource("mem://r") is None


def test_snapshot_fields_cannot_be_reassigned() -> None:
    snapshot = Catalog([service_with("s", tools=("t",))]).snapshot
    with pytest.raises(AttributeError):
        snapshot.tools = ()  # type: ignore[misc]
    assert isinstance(snapshot.tools, tuple)


def test_build_snapshot_is_a_pure_function_of_the_services() -> None:
    services = [service_with("a", tools=("t",)), service_with("b", prompts=("p",))]
    assert [t.name for t in build_snapshot(services).tools] == ["t"]
    assert [p.name for p in build_snapshot(services).prompts] == ["p"]


# -- resource lookup ----------------------------------------------------------------------------------------------

def test_find_resource_prefers_an_exact_uri_then_the_first_matching_template() -> None:
    catalog = Catalog([
        service_with("a", resources=("mem://items/special",), templates=("mem://items/{id}",)),
        service_with("b", templates=("mem://{anything}/{id}",)),
    ])
    snapshot = catalog.snapshot
    exact, variables = snapshot.find_resource("mem://items/special")
    assert isinstance(exact, Resource) and variables == {}
    template, variables = snapshot.find_resource("mem://items/7")
    assert template.uri_template == "mem://items/{id}" and variables == {"id": "7"}
    template, variables = snapshot.find_resource("mem://other/8")
    assert template.uri_template == "mem://{anything}/{id}" and variables == {"anything": "other", "id": "8"}
    assert snapshot.find_resource("mem://nothing") is None


def test_find_template_by_its_uri_template() -> None:
    snapshot = Catalog([service_with("a", templates=("mem://items/{id}",))]).snapshot
    assert snapshot.find_template("mem://items/{id}").uri_template == "mem://items/{id}"
    assert snapshot.find_template("mem://items/7") is None


# -- pagination --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("offset", [0, 1, 2, 99, 10**6])
def test_cursors_round_trip(offset: int) -> None:
    cursor = encode_cursor(offset)
    assert isinstance(cursor, str) and cursor.isascii()
    assert decode_cursor(cursor) == offset


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


@pytest.mark.parametrize("cursor", ["", "garbage!", "é", 5, None, ["x"], _b64("other:1"), _b64("mcpsync:"), _b64("mcpsync:-1"), _b64("mcpsync:1.5"), _b64("mcpsync: 1")])
def test_decode_cursor_rejects_what_it_did_not_hand_out(cursor: Any) -> None:
    with pytest.raises(McpError) as caught:
        decode_cursor(cursor)
    assert caught.value.code == ErrorCode.INVALID_PARAMS


ITEMS = ("a", "b", "c", "d", "e")


@pytest.mark.parametrize("cursor, page, has_next", [
    (None, ("a", "b"), True),
    (encode_cursor(2), ("c", "d"), True),
    (encode_cursor(4), ("e",), False),
    (encode_cursor(3), ("d", "e"), False),
    (encode_cursor(5), (), False),  # at the end: an empty last page
])
def test_paginate(cursor: str | None, page: tuple[str, ...], has_next: bool) -> None:
    params = {} if cursor is None else {"cursor": cursor}
    items, next_cursor = paginate(ITEMS, params, 2)
    assert tuple(items) == page
    assert (next_cursor is not None) is has_next
    if next_cursor is not None:
        assert decode_cursor(next_cursor) == decode_cursor(cursor or encode_cursor(0)) + 2


def test_paginate_past_the_end_is_invalid_params() -> None:
    with pytest.raises(McpError) as caught:
        paginate(ITEMS, {"cursor": encode_cursor(6)}, 2)
    assert caught.value.code == ErrorCode.INVALID_PARAMS


def test_a_page_size_larger_than_the_list_has_no_next_cursor() -> None:
    assert paginate(ITEMS, {}, 100) == (ITEMS, None)
    assert paginate(ITEMS, {}, 5) == (ITEMS, None)
