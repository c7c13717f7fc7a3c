"""The official Python SDK (mcp==2.3.0) serving MCP over stdio: the peer server that
integration/test_client_sdk.py drives mcpsync's client against, and that scripts/bench measures
mcpsync against.

    $(scripts/peers-venv) scripts/peers/sdk_stdio_server.py

Run it with the python of `.venv-peers` (never mcpsync's own venv). The SDK serves both eras on one
stdio connection: it answers `initialize` (2025-11-25) and `server/discover` (2026-07-28).

Tools:
  echo(text)   the text as one unstructured TextContent (what the benchmarks call)
  add_tool()   registers `dyn_N` (N = 1, 2, ...) and tells `subscriptions/listen` streams that the
               tool list changed; answers the new tool's name
"""

import itertools

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import TextContent

SERVER_NAME = "mcpsync-peer-sdk"

server = MCPServer(SERVER_NAME, version="1", log_level="WARNING")
added = itertools.count(1)


@server.tool(structured_output=False)
def echo(text: str) -> TextContent:
    """Answer the text it was given."""
    return TextContent(type="text", text=text)


@server.tool(structured_output=False)
async def add_tool(ctx: Context) -> TextContent:
    """Register one more tool and publish the tool list change."""
    name = f"dyn_{next(added)}"
    server.add_tool(lambda: name, name=name, description="added at run time", structured_output=False)
    await ctx.notify_tools_changed()
    return TextContent(type="text", text=name)


if __name__ == "__main__":
    server.run()
