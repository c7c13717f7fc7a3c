"""A service whose tools change at runtime: `add_tool` registers a new tool and returns its name.

Used by the listen tests, the official-SDK listen proof and the listen fan-out benchmark
(`mcpsync serve integration/dynamic_app.py`).
"""

import itertools

from mcpsync import Server, Service

service = Service("dynamic")
_sequence = itertools.count(1)


@service.tool
def echo(text: str) -> str:
    """Return the given text."""
    return text


@service.tool
def add_tool() -> str:
    """Register a new tool `dyn_N` (its clients are told before this call returns) and name it."""
    name = f"dyn_{next(_sequence)}"

    def dynamic() -> str:
        return name

    dynamic.__doc__ = f"A tool added at runtime ({name})."
    service.tool(dynamic, name=name)
    return name


@service.tool
def remove_tool(name: str) -> str:
    """Remove a tool added by `add_tool`."""
    service.remove_tool(name)
    return name


@service.tool
def touch(uri: str) -> str:
    """Announce that the resource at `uri` changed."""
    server.notify_resource_updated(uri)
    return uri


server = Server("dynamic", services=[service])
