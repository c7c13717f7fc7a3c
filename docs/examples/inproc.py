"""inproc.py: serve HTTP in the background of a program and talk to it (run: python inproc.py)."""
import mcpsync
from mcpsync import Server, Service

service = Service("hello")


@service.tool
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


server = Server("hello", services=[service])
serving = server.start_http("127.0.0.1", 0)  # on a background thread; port 0: any free port
print(serving.url)

with mcpsync.connect(serving.url) as session:
    print(session.era.value, session.call_tool("greet", {"name": "Ada"})["content"][0]["text"])
with mcpsync.connect(serving.url, mode="legacy") as session:
    print(session.era.value, session.protocol_version, [tool["name"] for tool in session.list_tools()])

server.shutdown()  # listens get their complete result, sessions end, the port is closed
