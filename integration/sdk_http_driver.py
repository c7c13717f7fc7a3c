"""Drive an mcpsync Streamable HTTP endpoint with the *official* Python SDK client and summarise
what it saw. Run it with the peers venv's python (it imports ``mcp``, never mcpsync)::

    .venv-peers/bin/python integration/sdk_http_driver.py --mode modern http://127.0.0.1:8000/mcp

The endpoint serves ``integration/fixtures/http_app.py``. Modes as in ``sdk_client_driver.py``:
``legacy`` (``mode="legacy"``: initialize, a session, the GET stream), ``modern`` (``mode="auto"``;
the run insists that ``server/discover`` answered) and ``pinned`` (``mode="2026-07-28"``).

Scenario: list tools; call ``echo``; call ``countdown`` with a progress callback (the progress
arrives on the request's SSE stream); call ``region_weather`` (the SDK mirrors its
``x-mcp-header`` argument into ``Mcp-Param-Region``, which the server checks); then wait for a
tools change made by another request: in 2026-07-28 inside ``client.listen(tools_list_changed=True)``
(read from the subscription), in the handshake era as the untagged notification on the session's
GET stream (seen by the message handler). Every wait is bounded.

Output: ONE JSON object on stdout and exit 0; on failure the partial summary, the errors and the
wire trace go to stderr and the exit status is 1. Keys: mode, protocolVersion, era, tools, echo,
progress, countdown, region, listen {subscriptionId, honored, event}, change {method, tagged},
added, sent.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

# Same directory: the shared wire tap (this script is run by path, so its directory is on sys.path).
from sdk_client_driver import MODES, TracedTransport, Wire, drive_url


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def run(args: argparse.Namespace, wire: Wire, summary: dict[str, Any], errors: list[str]) -> None:
    changed = anyio.Event()
    seen: list[dict[str, Any]] = []

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if method == "notifications/tools/list_changed":
            params = getattr(root, "params", None)
            meta = getattr(params, "meta", None) if params is not None else None
            seen.append({"method": method, "tagged": bool(meta and "io.modelcontextprotocol/subscriptionId" in (meta if isinstance(meta, dict) else meta.model_dump(by_alias=True)))})
            changed.set()

    transport = TracedTransport(streamable_http_client(args.url), wire)
    client = Client(transport, mode=MODES[args.mode], read_timeout_seconds=args.request_timeout, message_handler=on_message, cache=None)
    async with client:
        session = client.session
        summary["protocolVersion"] = client.protocol_version
        summary["era"] = "modern" if session.discover_result is not None else "handshake"
        if args.mode == "modern" and session.discover_result is None:
            errors.append("mode=auto fell back to initialize: server/discover failed over HTTP")
            return
        summary["tools"] = [tool.name for tool in (await client.list_tools()).tools]
        summary["echo"] = _text(await client.call_tool("echo", {"text": "hi"}))
        progress: list[float] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)

        summary["countdown"] = _text(await client.call_tool("countdown", {"steps": 3, "delay": 0.02}, progress_callback=on_progress))
        summary["progress"] = progress
        summary["region"] = _text(await client.call_tool("region_weather", {"region": "Nordland"}))
        if client.protocol_version == "2026-07-28":
            async with client.listen(tools_list_changed=True) as sub:
                summary["listen"] = {"subscriptionId": sub.subscription_id, "honored": sub.honored.model_dump(by_alias=True, exclude_none=True)}
                summary["added"] = _text(await client.call_tool("add_tool", {}))
                with anyio.fail_after(args.request_timeout):
                    event = await sub.__anext__()
                summary["listen"]["event"] = type(event).__name__ if not isinstance(event, dict) else event
        else:
            summary["added"] = _text(await client.call_tool("add_tool", {}))
            with anyio.fail_after(args.request_timeout):
                await changed.wait()
            summary["change"] = seen[0]


def main() -> int:
    return drive_url("sdk_http_driver", __doc__.split("\n\n")[0], run)


if __name__ == "__main__":
    sys.exit(main())
