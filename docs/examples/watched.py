"""watched.py: a server whose tools change what it serves (run: mcpsync serve watched.py)."""
from mcpsync import Server, Service

service = Service("watched")
server = Server("watched", services=[service])


@service.tool
def touch(uri: str) -> str:
    """Announce that the resource at a URI changed."""
    server.notify_resource_updated(uri)
    return f"touched {uri}"


@service.tool
def add_tool(name: str) -> str:
    """Add a tool that answers its own name."""
    service.tool(lambda: name, name=name, description=f"The tool {name}.")
    return f"added {name}"
