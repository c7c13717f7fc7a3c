"""Server(bus=...): what a replica does with its changes and with the others', over real pipes,
two servers in one process joined by in-process buses (`MemoryBus` peers: the same interface as
Redis's, which integration/test_bus_replicas.py runs across processes)."""

from __future__ import annotations

import pytest

from mcpsync import Server, Service, Tool
from mcpsync.bus import MemoryBus
from mcpsync.errors import McpsyncError

from .._timeouts import LONG
from .pipes import PipeClient

pytestmark = pytest.mark.timeout(60)


def server_with(bus: MemoryBus, name: str) -> tuple[Server, Service]:
    service = Service(name)
    service.add_tool(Tool(lambda: name, name=f"{name}_tool"))
    return Server(name, services=[service], bus=bus), service


def test_a_change_on_one_replica_reaches_the_clients_of_the_other_once() -> None:
    bus_a = MemoryBus()
    bus_b = bus_a.peer()
    a, service_a = server_with(bus_a, "a")
    b, _ = server_with(bus_b, "b")
    with PipeClient(a) as near, PipeClient(b) as far:
        near.initialize()
        far.initialize()
        service_a.add_tool(Tool(lambda: "new", name="added"))
        a.notify_resource_updated("notes://welcome")  # nobody subscribed on either: nothing sent for it
        _, before = far.request("ping", {}, id=2)
        assert before == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]
        _, before = near.request("ping", {}, id=2)
        assert before == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]  # once: no echo
    a.close(LONG)
    b.close(LONG)


def test_a_server_closes_the_bus_it_owns() -> None:
    closed: list[float] = []

    class Recording(MemoryBus):
        def close(self, timeout: float = 5.0) -> None:
            closed.append(timeout)
            super().close(timeout)

    server = Server("owner", bus=Recording())
    server.close(LONG)
    assert len(closed) == 1


def test_a_bus_url_that_names_nothing_is_refused() -> None:
    with pytest.raises(ValueError):
        Server("bad", bus="kafka://somewhere")


class SharedCatalog(Service):
    """A service whose tools are whatever a shared table says (a database, a Redis hash): the
    pattern that keeps every replica's list the same."""

    def __init__(self, table: dict[str, str]) -> None:
        super().__init__("shared")
        self._table = table

    @property
    def tools(self) -> tuple[Tool, ...]:
        return tuple(Tool(lambda reply=reply: reply, name=name) for name, reply in sorted(self._table.items()))


def test_a_list_computed_from_shared_state_is_the_same_on_every_replica_after_a_change() -> None:
    table = {"first": "1"}
    bus_a = MemoryBus()
    a = Server("a", services=[SharedCatalog(table)], bus=bus_a)
    b = Server("b", services=[SharedCatalog(table)], bus=bus_a.peer())
    with PipeClient(a) as near, PipeClient(b) as far:
        near.initialize()
        far.initialize()
        table["second"] = "2"  # the shared state changes, then the replica that changed it says so
        a.refresh_tools()
        response, before = far.request("tools/list", {}, id=2)
        assert before == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]
        assert [tool["name"] for tool in response["result"]["tools"]] == ["first", "second"]  # b read it again
    a.close(LONG)
    b.close(LONG)


def test_wsgi_app_takes_the_bus_a_server_has_not_got_yet() -> None:
    bus = MemoryBus()
    server = Server("late")
    app = server.wsgi_app(bus=bus)
    other = Server("other", bus=bus.peer())
    with PipeClient(other) as far:
        far.initialize()
        server.refresh_tools()  # a change on the server that took its bus with its WSGI app
        _, before = far.request("ping", {}, id=2)
        assert before == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]
    with pytest.raises(McpsyncError, match="already has a bus"):
        server.wsgi_app(bus=bus.peer())  # one bus per server, whichever way it came
    app.shutdown()
    server.close(LONG)
    other.close(LONG)
