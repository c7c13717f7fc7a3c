"""gateway.py: local tools plus two upstream MCP servers behind one server (run: python gateway.py)."""
import sys

from mcpsync import Server, Service

local = Service("local")


@local.tool
def echo(text: str) -> str:
    """The gateway's own echo (a local tool wins over an upstream tool of the same name)."""
    return f"gateway: {text}"


server = Server("gateway", services=[local])
# The demo service (`mcpsync serve`): only two of its tools, and its prompts, all named demo_*.
server.add_remote("demo", [sys.executable, "-m", "mcpsync", "serve"], prefix="demo_", allow=["add", "countdown"])
# clock.py, beside this file: everything, unprefixed (its resource URIs are never renamed).
server.add_remote("clock", [sys.executable, "-m", "mcpsync", "serve", "clock.py"], timeout=20)

if __name__ == "__main__":
    with server:  # on exit, server.close() also stops the upstreams
        server.serve_stdio()
