"""`ClientSession.listen()`: typed events from a scripted fake server, in both eras.

The fake sends notifications on request (`fake/notify`) before answering it, and the client's
reader hands notifications over before it completes the response that follows them, so once `push`
returns every event it caused is already queued: `next_event(0)` checks "nothing else came"
without waiting.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest

from mcpsync import CallTimeout, ConnectionLost, ListChanged, McpError, ResourceUpdated
from mcpsync.client import ClientSession, Listener

from .._timeouts import LONG
from .fake_server import push, received

pytestmark = pytest.mark.timeout(60)

SUB_KEY = "io.modelcontextprotocol/subscriptionId"


def note(method: str, params: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    """One notification for `push`: tagged=True tags it with the latest listen, subscription=ID with ID."""
    return {"method": method, "params": params or {}, **spec}


def drain(listener: Listener) -> list[Any]:
    """Every event already queued (no waiting)."""
    events = []
    while (event := listener.next_event(0)) is not None:
        events.append(event)
    return events


TOOLS = "notifications/tools/list_changed"
PROMPTS = "notifications/prompts/list_changed"
RESOURCES = "notifications/resources/list_changed"
UPDATED = "notifications/resources/updated"


# -- 2026-07-28: subscriptions/listen -------------------------------------------------------------


def test_modern_listen_sends_its_filter_and_waits_for_the_acknowledgement(open_fake) -> None:
    session = open_fake()
    listener = session.listen(tools=True, prompts=False, resources=True, resource_uris=["fake://r1"])
    (listen,) = received(session, "subscriptions/listen")
    wanted = {"toolsListChanged": True, "resourcesListChanged": True, "resourceSubscriptions": ["fake://r1"]}
    assert listen["params"]["notifications"] == wanted
    assert listen["id"] == listener.subscription_id
    assert listener.accepted == wanted
    assert not listener.closed


def test_modern_events_are_the_tagged_notifications_in_order(open_fake) -> None:
    session = open_fake()
    listener = session.listen(resource_uris=["fake://dir"])
    push(
        session,
        note(TOOLS),  # untagged: not for this listen
        note(PROMPTS, subscription="someone-else"),
        note(TOOLS, tagged=True),
        note(UPDATED, {"uri": "fake://dir/a"}, tagged=True),
        note(PROMPTS, tagged=True),
        note(RESOURCES, tagged=True),
    )
    assert drain(listener) == [ListChanged("tools"), ResourceUpdated("fake://dir/a"), ListChanged("prompts"), ListChanged("resources")]


def test_iterating_yields_the_events(open_fake) -> None:
    session = open_fake()
    listener = session.listen()
    push(session, note(TOOLS, tagged=True), note(PROMPTS, tagged=True))
    seen = []
    for event in listener:
        seen.append(event)
        if len(seen) == 2:
            break
    assert seen == [ListChanged("tools"), ListChanged("prompts")]


def test_two_modern_listeners_each_get_their_own_events(open_fake) -> None:
    session = open_fake()
    first = session.listen()
    second = session.listen()
    assert first.subscription_id != second.subscription_id
    push(session, note(TOOLS, subscription=first.subscription_id), note(PROMPTS, subscription=second.subscription_id))
    assert drain(first) == [ListChanged("tools")]
    assert drain(second) == [ListChanged("prompts")]


def test_closing_a_modern_listener_cancels_the_listen_once(open_fake) -> None:
    session = open_fake()
    listener = session.listen()
    listener.close()
    listener.close()
    assert listener.closed
    cancels = received(session, "notifications/cancelled")
    assert [c["params"]["requestId"] for c in cancels] == [listener.subscription_id]
    push(session, note(TOOLS, subscription=listener.subscription_id))
    assert listener.next_event(0) is None
    assert session.call_tool("echo", {"text": "ok"})["content"][0]["text"] == "ok"


def test_a_listener_is_a_context_manager(open_fake) -> None:
    session = open_fake()
    with session.listen() as listener:
        pass
    assert listener.closed
    assert len(received(session, "notifications/cancelled")) == 1


def test_a_refused_listen_raises_the_servers_error(open_fake) -> None:
    session = open_fake("listen-error")
    with pytest.raises(McpError) as raised:
        session.listen()
    assert raised.value.code == -32601


def test_an_unacknowledged_listen_times_out_and_is_cancelled(open_fake) -> None:
    session = open_fake("no-ack")
    start = time.monotonic()
    with pytest.raises(CallTimeout):
        session.listen(timeout=0.3)
    assert time.monotonic() - start < LONG
    (listen,) = received(session, "subscriptions/listen")
    (cancel,) = received(session, "notifications/cancelled")
    assert cancel["params"]["requestId"] == listen["id"]


def test_a_listen_the_server_completes_ends_without_error(open_fake) -> None:
    session = open_fake()
    listener = session.listen()
    push(session, note(TOOLS, tagged=True))
    session.request("fake/end_listens")
    assert listener.closed
    assert listener.error is None
    assert drain(listener) == [ListChanged("tools")]  # what came before the end is still there


# -- the handshake era: the same iterator over unsolicited notifications --------------------------


def test_handshake_listen_filters_by_kind_and_uri(open_fake) -> None:
    session = open_fake(mode="legacy")
    listener = session.listen(tools=True, prompts=False, resources=False, resource_uris=["fake://dir"])
    assert [m["params"]["uri"] for m in received(session, "resources/subscribe")] == ["fake://dir"]
    push(
        session,
        note(PROMPTS),
        note(RESOURCES),
        note(TOOLS),
        note(UPDATED, {"uri": "fake://other"}),
        note(UPDATED, {"uri": "fake://dirt"}),  # a longer name, not a child
        note(UPDATED, {"uri": "fake://dir"}),
        note(UPDATED, {"uri": "fake://dir/a/b"}),
    )
    assert drain(listener) == [ListChanged("tools"), ResourceUpdated("fake://dir"), ResourceUpdated("fake://dir/a/b")]


def test_handshake_listeners_all_hear_the_same_change(open_fake) -> None:
    session = open_fake(mode="legacy")
    first, second = session.listen(), session.listen()
    push(session, note(TOOLS))
    assert drain(first) == [ListChanged("tools")]
    assert drain(second) == [ListChanged("tools")]


def test_closing_a_handshake_listener_unsubscribes(open_fake) -> None:
    session = open_fake(mode="legacy")
    listener = session.listen(resource_uris=["fake://a", "fake://b"])
    listener.close()
    listener.close()
    assert listener.closed
    assert sorted(m["params"]["uri"] for m in received(session, "resources/unsubscribe")) == ["fake://a", "fake://b"]
    push(session, note(TOOLS))
    assert listener.next_event(0) is None


def test_closing_one_handshake_listener_keeps_a_uri_another_still_watches(open_fake) -> None:
    session = open_fake(mode="legacy")
    first = session.listen(resource_uris=["fake://shared"])
    second = session.listen(resource_uris=["fake://shared"])
    first.close()
    assert received(session, "resources/unsubscribe") == [], "unsubscribed while another listener still watches"
    second.close()
    assert [m["params"]["uri"] for m in received(session, "resources/unsubscribe")] == ["fake://shared"]


def test_a_failed_handshake_listen_undoes_what_it_subscribed(open_fake) -> None:
    session = open_fake(mode="legacy")
    with pytest.raises(McpError) as raised:
        session.listen(resource_uris=["fake://ok", "fake://bad"])
    assert raised.value.code == -32602
    assert [m["params"]["uri"] for m in received(session, "resources/unsubscribe")] == ["fake://ok"]


# -- how a listener ends --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_closing_the_session_ends_its_listeners(open_fake, mode: str) -> None:
    session = open_fake(mode=mode)
    listener = session.listen()
    session.close()
    assert listener.closed
    assert listener.error is None
    assert listener.next_event(0) is None
    listener.close()  # after the session: still fine


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_a_lost_connection_ends_listeners_with_the_error(open_fake, mode: str) -> None:
    session = open_fake(mode=mode)
    listener = session.listen(resource_uris=["fake://a"])
    with pytest.raises(ConnectionLost):
        session.call_tool("die")
    assert listener.closed
    assert isinstance(listener.error, ConnectionLost)
    listener.close()  # unsubscribing from a dead server must not raise


def _end_by_closing(session: ClientSession, listener: Listener) -> None:
    listener.close()


def _end_by_server(session: ClientSession, listener: Listener) -> None:
    session.request("fake/end_listens")


def _end_by_death(session: ClientSession, listener: Listener) -> None:
    with pytest.raises(ConnectionLost):
        session.call_tool("die")


def _end_by_session_close(session: ClientSession, listener: Listener) -> None:
    session.close()


ENDINGS: dict[str, Callable[[ClientSession, Listener], None]] = {
    "closed-by-caller": _end_by_closing,
    "completed-by-server": _end_by_server,
    "connection-lost": _end_by_death,
    "session-closed": _end_by_session_close,
}


def test_iteration_stops_however_the_listener_ends(open_fake) -> None:
    """Each ending on its own session, all waited for with one deadline."""
    runs = []
    for ending, mode in [*((name, "modern") for name in ENDINGS), ("closed-by-caller", "legacy"), ("connection-lost", "legacy")]:
        session = open_fake(mode=mode)
        listener = session.listen()
        push(session, note(TOOLS, tagged=mode == "modern"))
        run = {"name": f"{ending} ({mode})", "session": session, "listener": listener, "ending": ENDINGS[ending]}
        run["seen"], run["finished"], run["rescue"] = [], threading.Event(), threading.Event()

        def iterate(run: dict[str, Any] = run) -> None:
            for event in run["listener"]:
                if run["rescue"].is_set():
                    break
                run["seen"].append(event)
            run["finished"].set()

        run["thread"] = threading.Thread(target=iterate, name=f"test-iterate-{ending}-{mode}")
        run["thread"].start()
        runs.append(run)
    try:
        for run in runs:
            run["ending"](run["session"], run["listener"])
        deadline = time.monotonic() + LONG
        stuck = [run["name"] for run in runs if not run["finished"].wait(max(0.0, deadline - time.monotonic()))]
        assert not stuck, f"a for loop over the listener did not stop after it ended: {stuck}"
        assert all(run["seen"] == [ListChanged("tools")] for run in runs)
    finally:
        for run in runs:
            if not run["finished"].is_set():  # free a spinning loop: one more event, then the rescue flag
                run["rescue"].set()
                run["listener"]._events.put(ListChanged("rescue"))
            run["thread"].join(LONG)
