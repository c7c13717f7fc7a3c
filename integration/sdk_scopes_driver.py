"""Subscribe to a URI prefix on a protected mcpsync endpoint with the *official* Python SDK client
and a bearer token, and record which resource updates reach it. Run it with the peers venv's
python (it imports ``mcp``, never mcpsync)::

    MCP_TOKEN=... .venv-peers/bin/python integration/sdk_scopes_driver.py --mode legacy http://127.0.0.1:8000/mcp

The token comes from ``MCP_TOKEN`` (sent as ``Authorization: Bearer`` through an ``httpx2``
client given to ``streamable_http_client``, as in ``sdk_auth_driver.py``). The endpoint is the
vault of tests/auth/test_attack_scopes.py: its tool ``touch`` announces an update of
``secret://vault/master`` (read needs ``mcp:admin``) and then of ``secret://public/x``.

Scenario (the handshake era: ``--mode legacy``; the SDK's 2026-07-28 listen drops by itself any
update whose URI is not one it listed, so a prefix shows nothing there): ``resources/subscribe``
to ``secret://``, call ``touch``, then wait (bounded) until the public update has reached the
message handler; the SDK reads them from the session's GET stream.

Output: ONE JSON object on stdout and exit 0: mode, subscribed, updates (the URIs of every
``notifications/resources/updated`` the handler saw, in order), sent. On failure the errors and
the wire trace go to stderr and the exit status is 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

# Same directory: the shared wire tap (this script is run by path, so its directory is on sys.path).
from sdk_client_driver import MODES, TracedTransport, Wire, drive_url

PUBLIC = "secret://public/x"


async def run(args: argparse.Namespace, wire: Wire, summary: dict[str, Any], errors: list[str]) -> None:
    updates: list[str] = []
    public_seen = anyio.Event()
    summary["updates"] = updates

    async def message_handler(message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            updates.append(str(root.params.uri))
            if updates[-1] == PUBLIC:
                public_seen.set()

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {os.environ['MCP_TOKEN']}"})
    async with http:
        transport = TracedTransport(streamable_http_client(args.url, http_client=http), wire)
        client = Client(transport, mode=MODES[args.mode], read_timeout_seconds=args.request_timeout, cache=None, message_handler=message_handler)
        async with client:
            await client.subscribe_resource("secret://")
            summary["subscribed"] = True
            await client.call_tool("touch", {})
            with anyio.fail_after(args.request_timeout):
                await public_seen.wait()


def main() -> int:
    return drive_url("sdk_scopes_driver", __doc__.split("\n\n")[0], run)


if __name__ == "__main__":
    sys.exit(main())
