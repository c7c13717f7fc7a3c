"""Drive a protected mcpsync endpoint with the *official* Python SDK client and a bearer token, and
summarise what it saw. Run it with the peers venv's python (it imports ``mcp``, never mcpsync)::

    MCP_TOKEN=... .venv-peers/bin/python integration/sdk_auth_driver.py --mode legacy http://127.0.0.1:8000/mcp

The token comes from the environment variable ``MCP_TOKEN`` (never the command line, where other
users of the machine could read it); the client sends it as ``Authorization: Bearer`` on every
request, through an ``httpx2`` client given to ``streamable_http_client`` as the SDK documents.
The endpoint serves ``integration/fixtures/protected_app.py``. Modes as in ``sdk_client_driver.py``
(``legacy``: initialize and a session; ``modern``: ``mode="auto"``, the run insists that
``server/discover`` answered).

Scenario: list tools, call ``whoami`` (the server's view of the caller), then call ``reset``,
which needs the ``admin`` scope: recorded as ``reset`` (its text) or ``resetError`` (what the SDK
raised), so the test sees a refusal as the SDK reports it.

Output: ONE JSON object on stdout and exit 0: mode, protocolVersion, era, tools, whoami, reset |
resetError, sent. On failure the errors and the wire trace go to stderr and the exit status is 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

# Same directory: the shared wire tap (this script is run by path, so its directory is on sys.path).
from sdk_client_driver import MODES, TracedTransport, Wire, describe, drive_url


async def run(args: argparse.Namespace, wire: Wire, summary: dict[str, Any], errors: list[str]) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {os.environ['MCP_TOKEN']}"})
    async with http:
        transport = TracedTransport(streamable_http_client(args.url, http_client=http), wire)
        client = Client(transport, mode=MODES[args.mode], read_timeout_seconds=args.request_timeout, cache=None)
        async with client:
            session = client.session
            summary["protocolVersion"] = client.protocol_version
            summary["era"] = "modern" if session.discover_result is not None else "handshake"
            summary["tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
            whoami = await client.call_tool("whoami", {})
            summary["whoami"] = whoami.structured_content
            try:
                result = await client.call_tool("reset", {})
                summary["reset"] = "".join(getattr(block, "text", "") for block in result.content)
            except Exception as exc:  # noqa: BLE001 -- the refusal is what the test looks at
                summary["resetError"] = describe(exc)


def main() -> int:
    return drive_url("sdk_auth_driver", __doc__.split("\n\n")[0], run)


if __name__ == "__main__":
    sys.exit(main())
