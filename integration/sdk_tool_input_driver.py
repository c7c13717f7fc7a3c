"""Call a stdio server's ``add`` tool with bad arguments through the *official* Python SDK client,
and report whether each call returned a result or raised.

Run it with the peers venv's python (it imports ``mcp``, never mcpsync)::

    .venv-peers/bin/python integration/sdk_tool_input_driver.py --mode legacy -- python -m mcpsync serve

``--mode`` is one of sdk_client_driver.py's modes (``legacy``, ``modern``, ``pinned``). The calls:
``wrongType`` ``add {"a": "two", "b": 1}``, ``missing`` ``add {"a": 1}``, then ``unknown`` (a tool
that does not exist, which must still raise). Output: one JSON object on stdout, each call as
``{"isError": bool, "text": str}`` when the client handed back a result, or ``{"raised": str,
"code": int | None}`` when it raised; exit 0. A failure to connect goes to stderr, exit 1.
Bounded by ``--timeout`` (and sdk_client_driver's watchdog).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from sdk_client_driver import MODES, describe, start_watchdog

CALLS = {
    "wrongType": ("add", {"a": "two", "b": 1}),
    "missing": ("add", {"a": 1}),
    "unknown": ("no_such_tool", {}),
}


async def outcome(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """What a program using the SDK gets from one call: a result it can show the model, or an
    exception it has to handle."""
    try:
        result = await client.call_tool(name, arguments)
    except Exception as exc:  # noqa: BLE001 -- raising is the outcome being reported
        return {"raised": describe(exc), "code": getattr(exc, "code", None)}
    text = " ".join(block.text for block in result.content if getattr(block, "type", None) == "text")
    return {"isError": result.is_error, "text": text}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    params = StdioServerParameters(command=args.server[0], args=args.server[1:], env=dict(os.environ), cwd=args.cwd)
    report: dict[str, Any] = {"mode": args.mode}
    with anyio.fail_after(args.timeout):
        async with Client(stdio_client(params), mode=MODES[args.mode], read_timeout_seconds=10.0) as client:
            report["protocolVersion"] = client.protocol_version
            for key, (name, arguments) in CALLS.items():
                report[key] = await outcome(client, name, arguments)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=sorted(MODES), required=True)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--cwd", default=None)
    parser.add_argument("server", nargs=argparse.REMAINDER, help="-- SERVER_CMD [ARGS...]")
    args = parser.parse_args()
    args.server = args.server[1:] if args.server[:1] == ["--"] else args.server
    if not args.server:
        parser.error("missing server command after --")
    timer = start_watchdog("sdk_tool_input_driver", args.timeout + 15)
    try:
        report = anyio.run(run, args)
    except Exception as exc:  # noqa: BLE001 -- connecting failed: say so, no summary
        sys.stderr.write(f"sdk_tool_input_driver: FAILED: {describe(exc)}\n")
        return 1
    finally:
        timer.cancel()
    sys.stdout.write(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
