"""Tests for mcpsync.gateway.remote: an upstream's entries in the catalog, driven by a fake session.

A `FakeConnector` hands the `RemoteSource` scripted `FakeSession`s instead of real client sessions,
and keeps the change and loss callbacks the source wired, so a test plays the upstream's reader
thread: `session.announce(...)` is a list_changed arriving, `session.lose()` is the child dying.
The fake counts every list request it is asked, which is what the refresh rules are about.

Waits: every wait is an Event, a Condition or a queue with a bounded timeout (tests._timeouts).
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import types
from typing import Any, Callable

import pytest

from mcpsync.gateway import relay as relay_module
from mcpsync.gateway import remote as remote_module
from mcpsync.catalog.catalog import KINDS, Catalog
from mcpsync.catalog.context import Context
from mcpsync.gateway.remote import RemoteOptions, RemoteSource, RemoteTool
from mcpsync.catalog.service import Prompt, Resource, Service, Tool
from mcpsync.errors import CallCancelled, CallTimeout, ConnectionLost, McpsyncError
from mcpsync.protocol.jsonrpc import ErrorCode, McpError
from mcpsync.protocol.versions import Era

from .._timeouts import LONG, SHORT

pytestmark = pytest.mark.timeout(90)

ALL = frozenset(KINDS)


# -- the fake upstream ----------------------------------------------------------------------------

class FakePending:
    """A request sent upstream: answered by the session's script, or cancelled."""

    def __init__(self, session: "FakeSession", method: str, params: dict[str, Any], progress: Any) -> None:
        self.session = session
        self.method = method
        self.params = params
        self.progress = progress
        self.cancelled_with: str | None = None
        self.on_wire = False
        self._done = threading.Event()
        self._callbacks: list[Callable[[Any, BaseException | None], None]] = []

    def send(self) -> None:
        """The request goes out (the gateway sends once its downstream request waits for it); a
        scripted answer comes back at once, never before."""
        if self.cancelled_with is not None:
            return  # like PendingCall: a call withdrawn before it was sent is never sent
        self.on_wire = True
        self.session.sent.append(self)
        if self.session.answer is not None:
            callbacks, self._callbacks = self._callbacks, []
            for callback in callbacks:
                self._answer(callback)

    def cancel(self, reason: str = "cancelled") -> None:
        self.cancelled_with = reason
        self._done.set()
        for callback in self._callbacks:
            callback(None, CallCancelled(f"{self.method} was cancelled: {reason}"))

    def on_done(self, callback: Callable[[Any, BaseException | None], None]) -> None:
        """Like the client's PendingCall: once sent, at once when the script answers, else at the
        cancel."""
        if self.cancelled_with is None and (self.session.answer is None or not self.on_wire):
            self._callbacks.append(callback)
            return
        self._answer(callback)

    def _answer(self, callback: Callable[[Any, BaseException | None], None]) -> None:
        try:
            result = self.result(0)
        except McpsyncError as exc:  # the scripted failure is how the call ends (an error, a lost upstream)
            callback(None, exc)
            return
        callback(result, None)

    def result(self, timeout: float | None = None) -> dict[str, Any]:
        answer = self.session.answer
        if answer is None:  # a call that runs until cancelled
            assert self._done.wait(LONG), "the test never cancelled the call"
        if self.cancelled_with is not None:
            raise CallCancelled(f"{self.method} was cancelled: {self.cancelled_with}")
        assert answer is not None
        return answer(self)


class FakeSession:
    def __init__(self, *, tools: list[str] = (), prompts: list[str] = (), resources: list[str] = (), era: Era = Era.MODERN) -> None:
        self.tools = [{"name": name, "inputSchema": {"type": "object"}, "description": f"upstream {name}"} for name in tools]
        self.prompts = [{"name": name} for name in prompts]
        self.resources = [{"uri": uri, "name": uri} for uri in resources]
        self.templates: list[dict[str, Any]] = []
        self.era = era
        self.server_capabilities = {"tools": {}, "prompts": {}, "resources": {}}
        self.list_calls = {"tools": 0, "prompts": 0, "resources": 0, "templates": 0}
        self.list_timeouts: list[float | None] = []
        self.list_entered = threading.Event()
        self.list_gate: threading.Event | None = None  # when set: list_tools waits for it
        self.list_error: Exception | None = None
        self.answer: Callable[[FakePending], dict[str, Any]] | None = lambda pending: {"content": [], "isError": False}
        self.sent: list[FakePending] = []
        self.closed = threading.Event()
        self.opened = threading.Event()
        self.open_gate: threading.Event | None = None  # when set: open() waits for it
        self.roots_changes = 0
        self.roots_told = threading.Event()
        self._lock = threading.Lock()
        self.on_change: Callable[[str, dict[str, Any]], None] | None = None
        self.on_lost: Callable[[Exception], None] | None = None

    # what the upstream's reader thread would do
    def announce(self, method: str, params: dict[str, Any] | None = None) -> None:
        assert self.on_change is not None
        self.on_change(method, params or {})

    def lose(self) -> None:
        assert self.on_lost is not None
        self.on_lost(ConnectionLost("the upstream exited"))

    # the ClientSession surface RemoteSource uses
    def open(self) -> "FakeSession":
        self.opened.set()
        if self.open_gate is not None:
            assert self.open_gate.wait(LONG), "the test never let the session open"
        if self.closed.is_set():
            raise ConnectionLost("closed while opening")
        return self

    def notify_roots_changed(self) -> None:
        self.roots_changes += 1
        self.roots_told.set()

    def _listed(self, kind: str, items: list[dict[str, Any]], timeout: float | None) -> list[dict[str, Any]]:
        with self._lock:
            self.list_calls[kind] += 1
            self.list_timeouts.append(timeout)
        if kind == "tools":
            self.list_entered.set()
            if self.list_gate is not None:
                assert self.list_gate.wait(LONG), "the test never opened the list gate"
        if self.list_error is not None:
            raise self.list_error
        return [dict(item) for item in items]

    def list_tools(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return self._listed("tools", self.tools, timeout)

    def list_prompts(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return self._listed("prompts", self.prompts, timeout)

    def list_resources(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return self._listed("resources", self.resources, timeout)

    def list_resource_templates(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return self._listed("templates", self.templates, timeout)

    def prepare_request(self, method: str, params: dict[str, Any], *, progress: Any = None, timeout: float | None = None) -> FakePending:
        return FakePending(self, method, params, progress)

    def start_request(self, method: str, params: dict[str, Any], *, progress: Any = None, timeout: float | None = None) -> FakePending:
        pending = self.prepare_request(method, params, progress=progress, timeout=timeout)
        pending.send()
        return pending

    def close(self) -> None:
        self.closed.set()

    def expire_overdue(self) -> int:
        return 0  # the fake's calls end by their script or a cancel


class FakeConnector:
    """Hands out the given sessions (or raises the given exceptions) one connection attempt each;
    an attempt beyond the script waits for `release()` and then fails."""

    def __init__(self, *script: "FakeSession | Exception") -> None:
        self._script = list(script)
        self.attempts = 0
        self.gates: dict[int, threading.Event] = {}  # attempt number -> wait for it before answering
        self._attempted = threading.Condition()

    def hold(self, attempt: int) -> threading.Event:
        """Make connection attempt `attempt` (1-based) wait until the returned event is set."""
        gate = self.gates[attempt] = threading.Event()
        return gate

    def wait_attempts(self, count: int) -> None:
        with self._attempted:
            assert self._attempted.wait_for(lambda: self.attempts >= count, LONG), f"only {self.attempts} connection attempts"

    def __call__(self, on_change: Callable[[str, dict[str, Any]], None], on_lost: Callable[[Exception], None]) -> FakeSession:
        with self._attempted:
            self.attempts += 1
            attempt = self.attempts
            self._attempted.notify_all()
        gate = self.gates.get(attempt)
        if gate is not None:
            gate.wait(LONG)
        if attempt > len(self._script):
            raise ConnectionLost("no more scripted sessions")
        item = self._script[attempt - 1]
        if isinstance(item, Exception):
            raise item
        item.on_change, item.on_lost = on_change, on_lost
        return item


class Changes:
    """A catalog listener: the kinds of every change, in order, waited for with a bound."""

    def __init__(self) -> None:
        self.queue: queue.Queue[frozenset[str]] = queue.Queue()

    def __call__(self, kinds: frozenset[str]) -> None:
        self.queue.put(kinds)

    def next(self) -> frozenset[str]:
        try:
            return self.queue.get(timeout=LONG)
        except queue.Empty:
            raise AssertionError(f"no change was published within {LONG} s") from None

    def none_pending(self) -> bool:
        return self.queue.empty()


# -- helpers --------------------------------------------------------------------------------------

def local_service() -> Service:
    service = Service("local")
    service.add_tool(Tool(lambda text: f"local: {text}", name="echo"))
    service.add_prompt(Prompt(lambda: "local prompt", name="greet"))
    service.add_resource(Resource(lambda: "local resource", "mem://shared"))
    return service


OPTIONS = RemoteOptions(backoff_initial=0.01, backoff_max=0.05, start_timeout=LONG, call_timeout=LONG)


def options(**changes: Any) -> RemoteOptions:
    return RemoteOptions(**{**OPTIONS.__dict__, **changes})


class Gateway:
    """A catalog with remotes, closed at the end of each test (their supervisor threads too)."""

    def __init__(self, services: list[Service] | None = None) -> None:
        self.catalog = Catalog(services or [])
        self.changes = Changes()
        self.catalog.add_listener(self.changes)

    def add(self, name: str, connector: Callable[..., Any], **option_changes: Any) -> RemoteSource:
        source = RemoteSource(name, connector, options(**option_changes))
        self.catalog.add_remote(source)
        return source

    def connect(self, name: str, session: FakeSession, **option_changes: Any) -> RemoteSource:
        """Add an upstream that connects at once; returns after its connection was announced."""
        source = self.add(name, FakeConnector(session), **option_changes)
        assert self.changes.next() == ALL
        return source

    def tool_names(self) -> list[str]:
        return [tool.name for tool in self.catalog.list_tools()]

    def close(self) -> None:
        self.catalog.close_remotes()


@pytest.fixture
def gateway():
    made: list[Gateway] = []

    def make(services: list[Service] | None = None) -> Gateway:
        made.append(Gateway(services))
        return made[-1]

    yield make
    for built in made:
        built.close()


def make_context(*, progress_token: Any = None) -> tuple[Context, list[tuple[str, dict[str, Any]]], list[Callable[[], None]], threading.Event]:
    """A tool context as the stdio transport builds one: its notifications, cancel callbacks and
    an event set when the first cancel callback is registered."""
    sent: list[tuple[str, dict[str, Any]]] = []
    callbacks: list[Callable[[], None]] = []
    registered = threading.Event()

    def on_cancel(callback: Callable[[], None]) -> None:
        callbacks.append(callback)
        registered.set()

    ctx = Context(
        request_id="7",
        era=Era.HANDSHAKE,
        protocol_version="2025-11-25",
        client_info=None,
        client_capabilities={},
        progress_token=progress_token,
        notify=lambda method, params: sent.append((method, params)),
        cancel_event=threading.Event(),
        wants_log=lambda level: True,
        on_cancel=on_cancel,
    )
    return ctx, sent, callbacks, registered


# -- merging: local first, then the first upstream ------------------------------------------------

def test_local_entries_win_then_the_first_upstream_with_a_warning_naming_the_shadowed_entry(gateway, caplog) -> None:
    gw = gateway([local_service()])
    gw.connect("first", FakeSession(tools=["echo", "shared", "only_first"], prompts=["greet", "remote_prompt"], resources=["mem://shared", "up://one"]))
    gw.connect("second", FakeSession(tools=["shared", "only_second"], prompts=["remote_prompt"], resources=["up://one", "up://two"]))
    with caplog.at_level(logging.WARNING, logger="mcpsync"):
        assert gw.tool_names() == ["echo", "shared", "only_first", "only_second"]
        assert [p.name for p in gw.catalog.list_prompts()] == ["greet", "remote_prompt"]
        assert [r.uri for r in gw.catalog.list_resources()] == ["mem://shared", "up://one", "up://two"]
        gw.tool_names()  # listing again does not repeat the warnings
    echo = gw.catalog.find_tool("echo")
    assert isinstance(echo, Tool), "the local echo must win over the upstream's"
    shared = gw.catalog.find_tool("shared")
    assert isinstance(shared, RemoteTool) and shared.source.name == "first"
    assert gw.catalog.find_tool("only_second").source.name == "second"
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert "tool 'echo' of upstream 'first' is shadowed by local services (use a prefix to expose both)" in warnings
    assert "tool 'shared' of upstream 'second' is shadowed by upstream 'first' (use a prefix to expose both)" in warnings
    assert any("prompt 'greet' of upstream 'first'" in w and "local services" in w for w in warnings)
    assert any("resource 'up://one' of upstream 'second'" in w and "upstream 'first'" in w for w in warnings)
    assert len(warnings) == len(set(warnings)) == 6, warnings


def test_a_prefix_exposes_both_and_calls_reach_the_upstream_under_its_own_name(gateway) -> None:
    gw = gateway([local_service()])
    gw.connect("first", FakeSession(tools=["shared"], prompts=["remote_prompt"]))
    second = FakeSession(tools=["shared", "echo"], prompts=["remote_prompt"])
    gw.connect("second", second, prefix="second_")
    assert gw.tool_names() == ["echo", "shared", "second_shared", "second_echo"]
    assert [p.name for p in gw.catalog.list_prompts()] == ["greet", "remote_prompt", "second_remote_prompt"]
    listed = {tool.name: tool.definition() for tool in gw.catalog.list_tools()}
    assert listed["second_shared"]["description"] == "upstream shared"
    ctx, _, _, _ = make_context()
    gw.catalog.find_tool("second_echo").invoke({"text": "hi"}, ctx)
    assert [(p.method, p.params) for p in second.sent] == [("tools/call", {"name": "echo", "arguments": {"text": "hi"}})]


@pytest.mark.parametrize(
    "allow, deny, exposed",
    [
        (None, (), ["read", "write", "delete"]),
        (("read", "write"), (), ["read", "write"]),
        (None, ("delete",), ["read", "write"]),
        (("read", "delete"), ("delete",), ["read"]),
        ((), (), []),
    ],
)
def test_allow_and_deny_lists_filter_tools_by_their_upstream_names(gateway, allow, deny, exposed) -> None:
    gw = gateway()
    gw.connect("files", FakeSession(tools=["read", "write", "delete"]), prefix="fs_",
               allow=frozenset(allow) if allow is not None else None, deny=frozenset(deny))
    assert gw.tool_names() == [f"fs_{name}" for name in exposed]
    for name in ("read", "write", "delete"):
        found = gw.catalog.find_tool(f"fs_{name}")
        assert (found is not None) == (name in exposed), f"fs_{name} callable: {found is not None}"


def test_a_second_upstream_with_the_same_name_is_refused(gateway) -> None:
    gw = gateway()
    gw.connect("files", FakeSession(tools=["read"]))
    with pytest.raises(ValueError, match="files"):
        gw.add("files", FakeConnector(FakeSession(tools=["read"])))


def test_removing_an_upstream_withdraws_its_entries_and_announces_it(gateway) -> None:
    gw = gateway([local_service()])
    session = FakeSession(tools=["read"])
    gw.connect("files", session)
    assert gw.tool_names() == ["echo", "read"]
    gw.catalog.remove_remote("files")
    assert gw.changes.next() == ALL
    assert gw.tool_names() == ["echo"]
    assert session.closed.is_set(), "the upstream's session must be closed"


# -- refreshing -----------------------------------------------------------------------------------

def test_an_upstream_change_is_invalidated_before_it_is_relayed(gateway) -> None:
    """A client that re-lists as soon as it hears of the change sees the new tool."""
    gw = gateway()
    session = FakeSession(tools=["a"])
    gw.connect("up", session)
    assert gw.tool_names() == ["a"]
    seen_by_listener: list[list[str]] = []
    gw.catalog.add_listener(lambda kinds: seen_by_listener.append(gw.tool_names()))
    session.tools.append({"name": "b", "inputSchema": {"type": "object"}})
    session.announce("notifications/tools/list_changed")  # on the upstream's reader thread
    assert gw.changes.next() == frozenset({"tools"})
    assert seen_by_listener == [["a", "b"]]


@pytest.mark.parametrize(
    "method, kind",
    [
        ("notifications/tools/list_changed", "tools"),
        ("notifications/prompts/list_changed", "prompts"),
        ("notifications/resources/list_changed", "resources"),
    ],
)
def test_each_kind_of_upstream_change_is_relayed_as_that_kind_only(gateway, method, kind) -> None:
    gw = gateway()
    session = FakeSession(tools=["a"], prompts=["p"], resources=["up://r"])
    gw.connect("up", session)
    gw.tool_names(), gw.catalog.list_prompts(), gw.catalog.list_resources(), gw.catalog.list_templates()
    before = dict(session.list_calls)
    session.announce(method)
    assert gw.changes.next() == frozenset({kind})
    gw.tool_names(), gw.catalog.list_prompts(), gw.catalog.list_resources(), gw.catalog.list_templates()
    refetched = {k for k, count in session.list_calls.items() if count != before[k]}
    assert refetched == ({"resources", "templates"} if kind == "resources" else {kind})


def test_the_next_listings_after_a_change_refresh_once(gateway) -> None:
    gw = gateway()
    session = FakeSession(tools=["a"])
    gw.connect("up", session)
    for _ in range(3):
        assert gw.tool_names() == ["a"]
    assert session.list_calls["tools"] == 1
    session.tools.append({"name": "b"})
    session.announce("notifications/tools/list_changed")
    assert gw.changes.next() == frozenset({"tools"})
    for _ in range(3):
        assert gw.tool_names() == ["a", "b"]
    assert gw.catalog.find_tool("b") is not None
    assert session.list_calls["tools"] == 2
    assert session.list_timeouts and all(timeout == LONG for timeout in session.list_timeouts), "every list has a deadline"


def test_eight_concurrent_listers_share_one_fetch(gateway) -> None:
    gw = gateway()
    session = FakeSession(tools=["a", "b"])
    gw.connect("up", session)
    start = threading.Barrier(8)
    results: list[list[str]] = []

    def lister() -> None:
        start.wait(LONG)
        results.append(gw.tool_names())

    threads = [threading.Thread(target=lister, name=f"test-lister-{i}") for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LONG)
    assert not any(thread.is_alive() for thread in threads)
    assert session.list_calls["tools"] == 1
    assert len(results) == 8


class _ArrivalLock:
    """The cache lock, reporting each thread that reaches it."""

    def __init__(self, arrived: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._arrived = arrived

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        self._arrived()
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()


def test_listers_arriving_during_a_refresh_wait_for_it_and_see_its_result(gateway) -> None:
    gw = gateway()
    session = FakeSession(tools=["a", "b"])
    source = gw.connect("up", session)
    arrivals: set[str] = set()
    arrived = threading.Condition()

    def mark() -> None:
        with arrived:
            arrivals.add(threading.current_thread().name)  # names are unique, idents get reused
            arrived.notify_all()

    # Each thread reports when it reaches the cache lock (or returns without it), so the gate opens
    # only once all eight are either waiting for the refresh or already answered.
    source._caches["tools"].lock = _ArrivalLock(mark)
    session.list_gate = threading.Event()
    listed: dict[str, list[str]] = {}
    found: dict[str, bool] = {}

    def lister(key: str) -> None:
        try:
            listed[key] = gw.tool_names()
        finally:
            mark()

    def caller(key: str) -> None:
        try:
            found[key] = gw.catalog.find_tool("b") is not None
        finally:
            mark()

    first = threading.Thread(target=lister, args=("first",), name="test-lister-first")
    first.start()
    assert session.list_entered.wait(LONG)
    others = [threading.Thread(target=lister, args=(f"l{i}",), name=f"test-lister-{i}") for i in range(4)]
    others += [threading.Thread(target=caller, args=(f"c{i}",), name=f"test-caller-{i}") for i in range(3)]
    try:
        for thread in others:
            thread.start()
        with arrived:
            arrived.wait_for(lambda: len(arrivals) >= 8, LONG)  # a fix without this lock: proceed after LONG
    finally:
        session.list_gate.set()
    for thread in [first, *others]:
        thread.join(LONG)
    assert session.list_calls["tools"] == 1
    assert listed == {key: ["a", "b"] for key in ["first", "l0", "l1", "l2", "l3"]}
    assert found == {"c0": True, "c1": True, "c2": True}


def test_a_change_during_a_refresh_makes_the_next_listing_fetch_again(gateway) -> None:
    gw = gateway()
    session = FakeSession(tools=["a"])
    gw.connect("up", session)
    session.list_gate = threading.Event()
    first: list[list[str]] = []
    lister = threading.Thread(target=lambda: first.append(gw.tool_names()), name="test-lister")
    lister.start()
    assert session.list_entered.wait(LONG)
    session.tools.append({"name": "b"})
    session.announce("notifications/tools/list_changed")  # while the fetch is on the wire
    assert gw.changes.next() == frozenset({"tools"})
    session.list_gate.set()
    lister.join(LONG)
    assert not lister.is_alive()
    assert gw.tool_names() == ["a", "b"]
    assert session.list_calls["tools"] == 2


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_a_failed_refresh_is_an_error_repeated_without_asking_again_until_the_cooldown_passed(gateway, monkeypatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(remote_module, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    gw = gateway([local_service()])
    session = FakeSession(tools=["a"])
    session.list_error = CallTimeout("tools/list got no answer within 60 s")
    gw.connect("slow", session, refresh_cooldown=5.0)
    with pytest.raises(McpError) as failed:
        gw.catalog.list_tools()
    assert failed.value.code == ErrorCode.INTERNAL_ERROR
    assert "upstream 'slow' could not list its tools" in failed.value.message
    assert "no answer" in failed.value.message
    assert session.list_calls["tools"] == 1
    clock.now += 4.0
    with pytest.raises(McpError, match="upstream 'slow' could not list its tools"):
        gw.catalog.list_tools()
    assert session.list_calls["tools"] == 1, "within the cooldown the upstream must not be asked again"
    assert isinstance(gw.catalog.find_tool("echo"), Tool), "a local tool stays callable meanwhile"
    session.list_error = None
    clock.now += 2.0
    assert gw.tool_names() == ["echo", "a"]
    assert session.list_calls["tools"] == 2


# -- losing the upstream and reconnecting ---------------------------------------------------------

def test_a_lost_upstream_is_withdrawn_announced_unavailable_and_reconnected(gateway) -> None:
    gw = gateway([local_service()])
    first, second = FakeSession(tools=["a"]), FakeSession(tools=["a", "b"])
    connector = FakeConnector(first, second)
    held = connector.hold(2)
    source = gw.add("up", connector)
    assert gw.changes.next() == ALL
    tool = gw.catalog.find_tool("a")
    assert tool is not None and source.connected
    first.lose()
    assert gw.changes.next() == ALL
    assert gw.tool_names() == ["echo"]  # withdrawn from the list
    assert first.closed.is_set()
    # ...but a call by its name is not "Unknown tool": the upstream is coming back.
    assert gw.catalog.find_tool("a") is tool
    assert gw.catalog.find_tool("never_had") is None
    ctx, _, _, _ = make_context()
    with pytest.raises(McpError) as unavailable:
        tool.invoke({}, ctx)
    assert unavailable.value.code == ErrorCode.INTERNAL_ERROR
    assert unavailable.value.message == "upstream 'up' is unavailable: it is restarting (the upstream exited)"
    assert unavailable.value.data == {"upstream": "up"}
    connector.wait_attempts(2)
    held.set()
    assert gw.changes.next() == ALL
    assert gw.tool_names() == ["echo", "a", "b"]
    assert source.connected


def test_an_upstream_that_cannot_start_is_retried_with_backoff_without_blocking_the_gateway(gateway, caplog) -> None:
    session = FakeSession(tools=["late"])
    connector = FakeConnector(ConnectionLost("cannot start 'nope': No such file or directory"), OSError("refused"), session)
    third = connector.hold(3)
    with caplog.at_level(logging.WARNING, logger="mcpsync"):
        gw = gateway([local_service()])
        source = gw.add("up", connector)  # returns after the first failed attempt
        assert gw.tool_names() == ["echo"]
        assert not source.connected
        connector.wait_attempts(3)
        third.set()
        assert gw.changes.next() == ALL  # the third attempt connects
    assert gw.tool_names() == ["echo", "late"]
    assert connector.attempts == 3
    messages = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert any("upstream 'up': cannot connect (cannot start 'nope'" in m for m in messages), messages
    assert any("upstream 'up': cannot connect (refused)" in m for m in messages), messages


def test_closing_stops_a_source_that_keeps_failing_to_connect(gateway) -> None:
    connector = FakeConnector()  # every attempt fails
    gw = gateway()
    source = gw.add("down", connector, backoff_initial=0.01, backoff_max=0.01)
    connector.wait_attempts(3)
    assert gw.tool_names() == []
    source.close()  # the conftest guard fails the test if its supervisor thread outlives this
    assert not source.connected


def test_closing_while_a_session_is_being_opened_closes_it_and_stops_the_supervisor(gateway) -> None:
    session = FakeSession(tools=["a"])
    session.open_gate = threading.Event()  # the upstream is slow to answer its handshake
    connector = FakeConnector(session)
    gw = gateway()
    source = RemoteSource("slow", connector, options(start_timeout=0.0))
    gw.catalog.add_remote(source)
    try:
        assert session.opened.wait(LONG), "the supervisor never opened the session"
        closer = threading.Thread(target=source.close, name="test-closer")
        closer.start()
        assert session.closed.wait(LONG), "close() left the session being opened running"
        session.open_gate.set()  # the handshake "completes" after the close: nothing is published
        closer.join(LONG)
        assert not closer.is_alive()
        assert not source.connected
        assert gw.changes.none_pending()
    finally:
        session.open_gate.set()


def test_the_clients_roots_changing_is_told_to_the_upstream_by_the_supervisor(gateway) -> None:
    session = FakeSession(tools=["a"])
    source = gateway().connect("up", session)
    source.client_roots_changed()
    assert session.roots_told.wait(LONG), "the upstream was not told"
    assert session.roots_changes == 1


def test_configured_roots_are_not_changed_by_the_client(gateway) -> None:
    session = FakeSession(tools=["a"])
    source = gateway().connect("up", session, roots=({"uri": "file:///srv"},))
    source.client_roots_changed()
    source.client_roots_changed()
    assert not session.roots_told.wait(SHORT)


# -- the upstream's roots/list ----------------------------------------------------------------------

def roots_answer(source: RemoteSource) -> dict[str, Any]:
    """What the upstream's roots/list gets (the callback its client session answers with)."""
    return source.question_handlers()["roots"]({})


def test_roots_asked_outside_a_call_are_the_configured_ones(gateway) -> None:
    configured = ({"uri": "file:///srv/data", "name": "data"},)
    source = gateway().connect("up", FakeSession(), roots=configured)
    assert roots_answer(source) == {"roots": [{"uri": "file:///srv/data", "name": "data"}]}


def test_roots_asked_outside_a_call_without_configured_ones_are_the_clients_or_none(gateway) -> None:
    asked: list[float] = []

    def client_roots(timeout: float) -> list[dict[str, Any]]:
        asked.append(timeout)
        return [{"uri": "file:///home/me/project"}]

    gw = gateway()
    with_client = RemoteSource("with", FakeConnector(FakeSession()), options(), client_roots=client_roots)
    gw.catalog.add_remote(with_client)
    without = RemoteSource("without", FakeConnector(FakeSession()), options())
    gw.catalog.add_remote(without)
    assert roots_answer(with_client) == {"roots": [{"uri": "file:///home/me/project"}]}
    assert asked == [LONG], "the client is asked with the upstream's call timeout"
    assert roots_answer(without) == {"roots": []}


# -- forwarding -----------------------------------------------------------------------------------

def test_a_call_is_forwarded_and_its_result_loses_the_upstream_era_dressing(gateway) -> None:
    gw = gateway()
    session = FakeSession(tools=["a"])
    session.answer = lambda pending: {
        "content": [{"type": "text", "text": "ok"}],
        "isError": False,
        "resultType": "complete",
        "ttlMs": 5,
        "cacheScope": "public",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "up"}, "vendor/key": 1},
    }
    gw.connect("up", session)
    ctx, sent, _, _ = make_context()
    result = gw.catalog.find_tool("a").invoke({"x": 1}, ctx)
    assert result == {"content": [{"type": "text", "text": "ok"}], "isError": False, "_meta": {"vendor/key": 1}}
    assert session.sent[0].progress is None, "no progress is asked of the upstream when the client asked none"
    assert sent == []


def test_progress_is_relayed_under_the_clients_token(gateway) -> None:
    gw = gateway()
    session = FakeSession(tools=["slow"])

    def answer(pending: FakePending) -> dict[str, Any]:
        for step in (1, 2, 3):
            pending.progress(step, 3, f"step {step}")
        return {"content": [], "isError": False}

    session.answer = answer
    gw.connect("up", session)
    ctx, sent, _, _ = make_context(progress_token=7)
    gw.catalog.find_tool("slow").invoke({}, ctx)
    assert sent == [
        ("notifications/progress", {"progressToken": 7, "progress": step, "total": 3, "message": f"step {step}"}) for step in (1, 2, 3)
    ]


@pytest.mark.parametrize("shutting_down, reason", [(False, "cancelled by the client"), (True, "the server is shutting down")])
def test_a_cancel_is_forwarded_upstream_saying_why(gateway, shutting_down, reason) -> None:
    gw = gateway()
    session = FakeSession(tools=["forever"])
    session.answer = None  # runs until cancelled
    source = gw.connect("up", session)
    source.server_shutting_down(shutting_down)
    ctx, _, callbacks, registered = make_context()
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            gw.catalog.find_tool("forever").invoke({}, ctx)
        except McpError as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call, name="test-caller")
    caller.start()
    assert registered.wait(LONG), "the forwarded call registered no cancel callback"
    for callback in callbacks:  # what the transport does on notifications/cancelled
        callback()
    caller.join(LONG)
    assert not caller.is_alive()
    assert session.sent[0].cancelled_with == reason
    assert len(outcome) == 1 and outcome[0].message == f"tools/call was cancelled: {reason}"


@pytest.mark.parametrize(
    "failure, code, text",
    [
        (McpError(-32602, "Unknown tool: a"), -32602, "Unknown tool: a"),
        (ConnectionLost("the server exited"), ErrorCode.INTERNAL_ERROR, "upstream 'up' failed: the server exited"),
        (CallTimeout("tools/call got no answer within 60 s"), ErrorCode.INTERNAL_ERROR, "upstream 'up' failed: tools/call got no answer"),
    ],
)
def test_an_upstream_failure_is_a_clear_error(gateway, failure, code, text) -> None:
    gw = gateway()
    session = FakeSession(tools=["a"])

    def answer(pending: FakePending) -> dict[str, Any]:
        raise failure

    session.answer = answer
    gw.connect("up", session)
    ctx, _, _, _ = make_context()
    with pytest.raises(McpError) as raised:
        gw.catalog.find_tool("a").invoke({}, ctx)
    assert raised.value.code == code
    assert text in raised.value.message


# -- a 2026-07-28 upstream's round, asked of a handshake-era client ------------------------------

def asking_upstream(gw: Gateway) -> None:
    """An upstream whose tool `ask` answers every call with a 2026-07-28 round of one question."""
    session = FakeSession(tools=["ask"])
    form = {"type": "object", "properties": {"name": {"type": "string"}}}
    session.answer = lambda pending: {"resultType": "input_required", "inputRequests": {"n": {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": form}}}}
    gw.connect("up", session)


def asking_context(asked: list[concurrent.futures.Future[dict[str, Any]]], was_asked: threading.Event) -> Context:
    """A handshake-era request whose client can be asked: each question a future the test holds."""

    def ask_client(method: str, params: dict[str, Any]) -> concurrent.futures.Future[dict[str, Any]]:
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        asked.append(future)
        was_asked.set()
        return future

    return Context(
        request_id="7",
        era=Era.HANDSHAKE,
        protocol_version="2025-11-25",
        client_info=None,
        client_capabilities={"elicitation": {"form": {}}},
        progress_token=None,
        notify=lambda method, params: None,
        cancel_event=threading.Event(),
        wants_log=lambda level: True,
        ask_client=ask_client,
    )


def test_a_round_asked_of_a_handshake_client_runs_on_the_relays_own_workers_joined_at_close(gateway) -> None:
    """The round waits on a worker the relay owns; closing the upstream ends the call (which, as
    a transport does when a request ends, withdraws the question) and joins that worker, so no
    thread of the relay outlives `close()`."""
    gw = gateway()
    asking_upstream(gw)
    asked: list[concurrent.futures.Future[dict[str, Any]]] = []
    was_asked = threading.Event()
    call = gw.catalog.find_tool("ask").start({}, asking_context(asked, was_asked))
    ended = threading.Event()

    def on_end(result: Any, error: BaseException | None) -> None:
        for future in asked:  # the transport withdraws a request's questions once it is answered
            future.cancel()
        ended.set()

    call.on_done(on_end)
    assert was_asked.wait(LONG), "the client was never asked the upstream's question"
    askers = [thread for thread in threading.enumerate() if thread.name.startswith("mcpsync-relay-ask")]
    assert askers, "no relay worker asks the round"
    gw.close()
    assert ended.is_set(), "closing the upstream did not end its call"
    assert [thread.name for thread in askers if thread.is_alive()] == [], "a relay worker outlived close()"


def test_rounds_past_the_relays_workers_and_backlog_fail_at_once_with_a_clear_error(gateway, monkeypatch) -> None:
    """However many handshake-era calls an upstream asks at once, the relay's threads are
    bounded: a round past its workers and backlog is not asked, and the call ends with a tool
    error saying so, while the round already asked still waits for its client."""
    monkeypatch.setattr(relay_module, "ROUND_WORKERS", 1)
    monkeypatch.setattr(relay_module, "ROUND_BACKLOG", 0)
    gw = gateway()
    asking_upstream(gw)
    first_asked: list[concurrent.futures.Future[dict[str, Any]]] = []
    first_was_asked = threading.Event()
    tool = gw.catalog.find_tool("ask")
    withdraw = lambda result, error: [future.cancel() for future in first_asked]  # as a transport does at a request's end
    tool.start({}, asking_context(first_asked, first_was_asked)).on_done(withdraw)
    assert first_was_asked.wait(LONG), "the first round was never asked"
    second_asked: list[concurrent.futures.Future[dict[str, Any]]] = []
    second = tool.start({}, asking_context(second_asked, threading.Event()))
    result = second.result(LONG)
    assert result["isError"] is True
    assert "rounds already wait for the client" in result["content"][0]["text"]
    assert second_asked == [], "a round past the bound was asked all the same"
    assert not first_asked[0].done(), "the first round's question was withdrawn"
