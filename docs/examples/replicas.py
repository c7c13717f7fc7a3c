"""replicas.py: two replicas of one server, as two machines on one Redis are (run: python replicas.py).

Here, in one process, two MemoryBus peers and one MemoryStore stand in for Redis: the same interfaces."""
import mcpsync
from mcpsync import Server, Service, Tool
from mcpsync.bus import MemoryBus, MemoryStore

NOTES = {"welcome": "Hello"}  # the shared state: a table every replica reads (a database, a Redis hash)


def note_tool(name: str, text: str) -> Tool:
    def read() -> str:
        return text

    return Tool(read, name=f"note_{name}", description=f"The note {name!r}.")


class Notes(Service):
    """Its tools are what the table says, so every replica lists the same ones."""

    @property
    def tools(self) -> tuple[Tool, ...]:
        return tuple(note_tool(name, text) for name, text in sorted(NOTES.items()))


bus, store = MemoryBus(), MemoryStore()
a = Server("notes", services=[Notes("notes")], bus=bus, store=store)
b = Server("notes", services=[Notes("notes")], bus=bus.peer(), store=store)
serving_a, serving_b = a.start_http("127.0.0.1", 0), b.start_http("127.0.0.1", 0)

with mcpsync.connect(serving_b.url, mode="legacy") as client:  # a client of replica B
    print("B lists:", [tool["name"] for tool in client.list_tools()])
    with client.listen(tools=True) as events:
        NOTES["todo"] = "Buy milk"  # replica A changes the shared state...
        a.refresh_tools()  # ...and says so: B hears it through the bus, and reads the table again
        event = next(iter(events))
        print(event.kind, "changed; B lists:", [tool["name"] for tool in client.list_tools()])
        print("B calls note_todo:", client.call_tool("note_todo", {})["content"][0]["text"])
a.close()
b.close()
