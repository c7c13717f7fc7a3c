"""The official Python SDK (mcp==2.3.0) serving the `echo` and `add_tool` tools over Streamable HTTP:
the HTTP peer of `scripts/peers/sdk_stdio_server.py`, for `scripts/bench-http` and
`scripts/bench-fanout`.

    $(scripts/peers-venv) scripts/peers/sdk_http_server.py --port 8001 [--host 127.0.0.1] [--stateless]
        [--max-subscriptions N]

Run it with the python of `.venv-peers` (never mcpsync's own venv). It serves
http://HOST:PORT/mcp with uvicorn, as the SDK's own `MCPServer.run("streamable-http")` does, with
`json_response=True` (one JSON body per POST, no SSE), and prints
`sdk_http_server: serving MCP over HTTP at URL` on stderr once uvicorn has bound the port.

Eras. The SDK's session manager routes by the `MCP-Protocol-Version` header: a 2026-07-28 POST is
served by its single-exchange (stateless) entry whatever the mode; a handshake-era request goes to
the session table. The default is therefore stateful (`stateless_http=False`), so an `initialize`
answers with an `Mcp-Session-Id` and both eras can be measured against one server. `--stateless`
gives the SDK's fully stateless mode instead (no session id, the handshake era is then served
stateless too).

Tools, as in the stdio peer:
  echo(text)   the text as a single TextContent (unstructured)
  add_tool()   registers `dyn_N` (N = 1, 2, ...), publishes the tool list change to every open
               2026-07-28 `subscriptions/listen` stream (`ctx.notify_tools_changed()`), answers the
               new tool's name

Listens. `MCPServer` serves `subscriptions/listen` with the SDK's `ListenHandler`, which refuses a
listen past `max_subscriptions` (default 1024) with INTERNAL_ERROR "Subscription limit reached".
`--max-subscriptions N` replaces that handler with one of cap N on the same bus (what a deployment
expecting N listeners would configure); without it the SDK's default stands.
"""
import argparse
import asyncio
import itertools
import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.subscriptions import ListenHandler
from mcp.types import SubscriptionsListenRequestParams, TextContent

server = MCPServer("bench-mcp-sdk-http", version="1", log_level="WARNING")
added = itertools.count(1)


@server.tool(structured_output=False)
def echo(text: str) -> TextContent:
    """Return the given text."""
    return TextContent(type="text", text=text)


@server.tool(structured_output=False)
async def add_tool(ctx: Context) -> TextContent:
    """Register one more tool and publish the tool list change."""
    name = f"dyn_{next(added)}"
    server.add_tool(lambda: name, name=name, description="added at run time", structured_output=False)
    await ctx.notify_tools_changed()
    return TextContent(type="text", text=name)


class _Server(uvicorn.Server):
    async def startup(self, sockets=None):
        await super().startup(sockets=sockets)
        if self.started:
            host, port = self.config.host, self.config.port
            if port == 0 and self.servers:  # port 0: report the port actually bound
                port = self.servers[0].sockets[0].getsockname()[1]
            print(f"sdk_http_server: serving MCP over HTTP at http://{host}:{port}/mcp", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--stateless", action="store_true", help="the SDK's stateless_http mode (no sessions)")
    parser.add_argument("--max-subscriptions", type=int, metavar="N",
                        help="listens open at once (default: the SDK's ListenHandler default, 1024)")
    args = parser.parse_args()
    if args.max_subscriptions is not None:
        # MCPServer builds its ListenHandler with the defaults and has no option for the cap; a
        # handler on the same bus (the one ctx.notify_tools_changed() publishes to) replaces it.
        handler = ListenHandler(server._subscriptions, max_subscriptions=args.max_subscriptions)
        server._lowlevel_server.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, handler)
    app = server.streamable_http_app(json_response=True, stateless_http=args.stateless, host=args.host)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    asyncio.run(_Server(config).serve())


if __name__ == "__main__":
    main()
