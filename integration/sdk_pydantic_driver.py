"""List and call the pydantic shop's tools (integration/fixtures/pydantic_app.py) through the
*official* Python SDK client, and report what it saw.

Run it with the peers venv's python (it imports ``mcp``, never mcpsync)::

    .venv-peers/bin/python integration/sdk_pydantic_driver.py --mode legacy -- python -m mcpsync serve pydantic_app.py

``--mode`` is one of sdk_client_driver.py's modes (``legacy``, ``modern``, ``pinned``). The SDK's
``call_tool`` itself checks a result's ``structuredContent`` against the tool's ``outputSchema``
from the listing (and raises when they disagree), so a call reported as a result passed that check.
Besides, every listed schema is checked with the SDK venv's jsonschema (``check_schema``), and the
arguments sent must fit the ``inputSchema``.

Output: one JSON object on stdout: ``tools`` (the listing, raw), and per call ``{"isError", "text",
"structured"}`` when the client handed back a result, or ``{"raised": str}``; exit 0. A failure to
connect goes to stderr, exit 1. Bounded by ``--timeout`` (and sdk_client_driver's watchdog).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
import jsonschema
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from sdk_client_driver import MODES, describe, start_watchdog

ORDER = {"customerId": 7, "lines": [{"sku": "ABC-1", "quantity": 2}, {"sku": "XYZ-42", "quantity": 3}],
         "payment": {"kind": "card", "last4": "4242"}}
CALLS = {
    "place": ("place_order", {"order": ORDER}),
    "describe": ("describe_order", {"order": ORDER}),
    "receipts": ("receipts", {"orders": [ORDER, {**ORDER, "customerId": 8, "payment": {"kind": "voucher", "code": "FREE"}}]}),
    "ship": ("ship", {"parcel": {"weight_kg": 2.5, "fragile": True}}),
    "invalid": ("place_order", {"order": {**ORDER, "lines": [{"sku": "abc", "quantity": 0}]}}),
}
VALID = ("place", "describe", "receipts", "ship")


async def outcome(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    try:
        result = await client.call_tool(name, arguments)
    except Exception as exc:  # noqa: BLE001 -- raising is the outcome being reported
        return {"raised": describe(exc)}
    text = " ".join(block.text for block in result.content if getattr(block, "type", None) == "text")
    return {"isError": result.is_error, "text": text, "structured": result.structured_content}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    params = StdioServerParameters(command=args.server[0], args=args.server[1:], env=dict(os.environ), cwd=args.cwd)
    report: dict[str, Any] = {"mode": args.mode}
    with anyio.fail_after(args.timeout):
        async with Client(stdio_client(params), mode=MODES[args.mode], read_timeout_seconds=10.0) as client:
            report["protocolVersion"] = client.protocol_version
            listed = await client.list_tools()
            tools = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in listed.tools]
            report["tools"] = tools
            schemas = {tool["name"]: tool for tool in tools}
            for tool in tools:
                jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])
                if "outputSchema" in tool:
                    jsonschema.Draft202012Validator.check_schema(tool["outputSchema"])
            for key in VALID:
                name, arguments = CALLS[key]
                jsonschema.validate(arguments, schemas[name]["inputSchema"])
            report["calls"] = {key: await outcome(client, name, arguments) for key, (name, arguments) in CALLS.items()}
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
    timer = start_watchdog("sdk_pydantic_driver", args.timeout + 15)
    try:
        report = anyio.run(run, args)
    except Exception as exc:  # noqa: BLE001 -- connecting or a schema check failed: say so, no summary
        sys.stderr.write(f"sdk_pydantic_driver: FAILED: {describe(exc)}\n")
        return 1
    finally:
        timer.cancel()
    sys.stdout.write(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
