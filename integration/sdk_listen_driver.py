"""Drive ``mcpsync serve integration/dynamic_app.py`` with the *official* Python SDK client and
record how tool-list changes reach it, in both protocol eras.

Run it with the peers venv's python (it imports ``mcp``, never mcpsync)::

    .venv-peers/bin/python integration/sdk_listen_driver.py --mode modern -- \\
        python -m mcpsync serve integration/dynamic_app.py

Modes, as in ``sdk_client_driver.py``: ``legacy`` (``mode="legacy"``, initialize handshake),
``modern`` (``mode="auto"``; the run insists that ``server/discover`` was used) and ``pinned``
(``mode="2026-07-28"``, no probe).

Scenario, 2026-07-28 modes:

1. ``list_tools`` (the tools before any change; the raw result gives the server's ``ttlMs``), and
   again at once (``unchangedRelist``): with ``ttlMs`` 0 the SDK's cache must not answer it.
2. ``async with client.listen(tools_list_changed=True) as sub``: the acknowledgement is awaited by
   the SDK; the wire tap records the ack frame.
3. ``call_tool("add_tool")``: the wire tap locates every ``notifications/tools/list_changed``
   received between the request and its result, tagged (``_meta`` subscriptionId) or not.
4. The event is read from the listen iterator (bounded wait; it should already be pending).
5. ``list_tools`` again: the wire must show a fresh ``tools/list`` request (no cache hit), and the
   list must name the new tool.
6. ``call_tool(<new tool>)`` must answer with the tool's name.
7. Leave the listen block. The driver waits (bounded, on the wire tap, no sleep) until the SDK has
   written ``notifications/cancelled`` for the listen id, then calls ``add_tool`` again and records
   every frame still tagged with the old id, and any response to the listen id.

Scenario, legacy: steps 1, 3, 5, 6 (no listen): the change notification is untagged.

Output: ONE JSON summary on stdout whenever the run finishes (even with errors, so each test can
judge its own part), and exit status 1 if any step failed; errors and the wire trace go to stderr.
Summary keys: mode, clientMode, sdkVersion, protocolVersion, era, discoverSent,
serverCapabilities, toolsBefore, ttlMs, unchangedRelist {requestsSent, tools, ttlMs},
listen {subscriptionId, honored, ackFrames}, add {name, result, text, requestId, requestIndex,
resultIndex, changed: [{index, beforeResult, subscriptionId}]}, iteratorEvent,
handlerNotifications, relist {requestsSent, tools, ttlMs}, dynamicCall {name, text, isError},
afterLeave {cancelFrames, cancelIndex, cancelBeforeNextRequest, add {...}, taggedWithOldId,
listenResponses},
errors, wire (compact trace: [direction, method | "response", id, subscriptionId]).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

# Same directory: the shared wire tap (this script is run by path, so its directory is on sys.path).
from sdk_client_driver import MODES, TracedTransport, Wire, describe, start_watchdog, write_wire_trace

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
LIST_CHANGED = "notifications/tools/list_changed"
MODERN = "2026-07-28"

Frame = dict[str, Any]
Predicate = Callable[[str, Frame], bool]


class TapWire(Wire):
    """The shared wire tap, plus waiting for a frame to cross it (an event, not a sleep)."""

    def __init__(self) -> None:
        super().__init__()
        self._waiters: list[tuple[Predicate, anyio.Event]] = []

    def record(self, direction: str, item: Any) -> None:
        super().record(direction, item)
        _, frame = self.frames[-1]
        for predicate, event in self._waiters:
            if predicate(direction, frame):
                event.set()

    async def wait_for(self, predicate: Predicate, timeout: float, since: int = 0) -> int:
        """Index of the first frame from ``since`` on that matches, waiting up to ``timeout`` s."""
        event = anyio.Event()
        self._waiters.append((predicate, event))
        try:
            for index in range(since, len(self.frames)):
                if predicate(*self.frames[index]):
                    return index
            with anyio.fail_after(timeout):
                await event.wait()
            return next(i for i in range(since, len(self.frames)) if predicate(*self.frames[i]))
        finally:
            self._waiters.remove((predicate, event))


def subscription_id_of(frame: Frame) -> Any:
    meta = (frame.get("params") or {}).get("_meta") or {}
    return meta.get(SUBSCRIPTION_ID)


def compact(wire: Wire) -> list[list[Any]]:
    return [
        [d, f.get("method", "response" if ("result" in f or "error" in f) else "?"), f.get("id"), subscription_id_of(f)]
        for d, f in wire.frames
    ]


def texts(result: Frame) -> list[str]:
    return [block.get("text") for block in result.get("content", []) if block.get("type") == "text"]


async def call_and_locate(client: Client, wire: TapWire, name: str) -> dict[str, Any]:
    """Call tool ``name``; report its raw result and every tools/list_changed seen before/after it."""
    mark = wire.mark()
    await client.call_tool(name, {})
    request_index, request_id = next(
        (i, f["id"])
        for i in range(mark, len(wire.frames))
        for d, f in [wire.frames[i]]
        if d == "out" and f.get("method") == "tools/call"
    )
    result_index = next(
        i
        for i in range(request_index, len(wire.frames))
        for d, f in [wire.frames[i]]
        if d == "in" and f.get("id") == request_id and ("result" in f or "error" in f)
    )
    frame = wire.frames[result_index][1]
    result = frame.get("result", {"error": frame.get("error")})
    changed = [
        {"index": i, "beforeResult": i < result_index, "subscriptionId": subscription_id_of(f)}
        for i in range(request_index, len(wire.frames))
        for d, f in [wire.frames[i]]
        if d == "in" and f.get("method") == LIST_CHANGED
    ]
    return {
        "name": name,
        "result": result,
        "text": texts(result),
        "requestId": request_id,
        "requestIndex": request_index,
        "resultIndex": result_index,
        "changed": changed,
    }


async def relist(client: Client, wire: TapWire) -> dict[str, Any]:
    mark = wire.mark()
    result = await client.list_tools()
    sent = [f for d, f in wire.frames[mark:] if d == "out" and f.get("method") == "tools/list"]
    out: dict[str, Any] = {"requestsSent": len(sent), "tools": [tool.name for tool in result.tools]}
    if sent:
        out["ttlMs"] = wire.answer("tools/list", mark).get("ttlMs")
    return out


async def run(args: argparse.Namespace, wire: TapWire, summary: dict[str, Any], errors: list[str]) -> None:
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=args.server[0], args=args.server[1:], env=dict(os.environ), cwd=args.cwd)
    handled: list[str] = []

    async def message_handler(message: Any) -> None:
        root = getattr(message, "root", message)
        handled.append(getattr(root, "method", None) or type(root).__name__)

    client = Client(
        TracedTransport(stdio_client(params), wire),
        mode=MODES[args.mode],
        read_timeout_seconds=args.request_timeout,
        message_handler=message_handler,
    )
    summary["handlerNotifications"] = handled

    async def step(name: str, coro_fn: Callable[[], Any]) -> bool:
        try:
            await coro_fn()
            return True
        except Exception as exc:  # noqa: BLE001 -- reported; later steps that do not depend on it still run
            errors.append(f"step {name!r} failed: {describe(exc)}")
            summary.setdefault("tracebacks", {})[name] = traceback.format_exc()
            return False

    async with client:
        session = client.session
        summary["protocolVersion"] = client.protocol_version
        summary["era"] = "modern" if session.discover_result is not None else "handshake"
        summary["discoverSent"] = any(d == "out" and f.get("method") == "server/discover" for d, f in wire.frames)
        caps = client.server_capabilities
        summary["serverCapabilities"] = None if caps is None else caps.model_dump(by_alias=True, mode="json", exclude_none=True)
        if args.mode == "modern" and not summary["discoverSent"]:
            errors.append("mode=auto did not send server/discover")
        if args.mode != "legacy" and client.protocol_version != MODERN:
            errors.append(f"expected 2026-07-28, negotiated {client.protocol_version!r} (see the wire trace)")
            return

        async def list_before() -> None:
            mark = wire.mark()
            result = await client.list_tools()
            summary["toolsBefore"] = [tool.name for tool in result.tools]
            summary["ttlMs"] = wire.answer("tools/list", mark).get("ttlMs")
            # Nothing changed yet: a second list may only come from the SDK's response cache if the
            # server allowed it (ttlMs > 0). With ttlMs 0 it must go to the wire again.
            summary["unchangedRelist"] = await relist(client, wire)

        async def add_then_use(key: str) -> None:
            summary[key] = await call_and_locate(client, wire, "add_tool")

        async def relist_step() -> None:
            summary["relist"] = await relist(client, wire)

        async def call_new_tool() -> None:
            (name,) = summary["add"]["text"]
            out = await call_and_locate(client, wire, name)
            summary["dynamicCall"] = {"name": name, "text": out["text"], "isError": out["result"].get("isError", False)}

        if not await step("tools/list (before)", list_before):
            return

        if args.mode == "legacy":
            if await step("tools/call add_tool", lambda: add_then_use("add")):
                await step("tools/list (after add)", relist_step)
                await step("tools/call <new tool>", call_new_tool)
            return

        # 2026-07-28: the same, inside a listen stream, then once more after leaving it.
        listen_id: Any = None

        async def inside_listen() -> None:
            nonlocal listen_id
            mark = wire.mark()
            async with client.listen(tools_list_changed=True) as sub:
                listen_id = sub.subscription_id
                summary["listen"] = {
                    "subscriptionId": sub.subscription_id,
                    "honored": sub.honored.model_dump(by_alias=True, mode="json", exclude_none=True),
                    "ackFrames": [
                        f.get("params")
                        for d, f in wire.frames[mark:]
                        if d == "in"
                        and f.get("method") == "notifications/subscriptions/acknowledged"
                        and subscription_id_of(f) == sub.subscription_id
                    ],
                }
                if not await step("tools/call add_tool (listening)", lambda: add_then_use("add")):
                    return

                async def next_event() -> None:
                    with anyio.fail_after(args.request_timeout):
                        event = await sub.__anext__()
                    summary["iteratorEvent"] = type(event).__name__

                await step("listen iterator: next event", next_event)
                if await step("tools/list (after add)", relist_step):
                    await step("tools/call <new tool>", call_new_tool)

        if not await step("subscriptions/listen", inside_listen) or listen_id is None:
            return

        async def after_leave() -> None:
            left_at = wire.mark()
            after: dict[str, Any] = {}
            summary["afterLeave"] = after

            def is_cancel(direction: str, frame: Frame) -> bool:
                return (
                    direction == "out"
                    and frame.get("method") == "notifications/cancelled"
                    and (frame.get("params") or {}).get("requestId") == listen_id
                )

            # The SDK cancels the listen request from its own task; wait for that frame to be written
            # so the next request is ordered after it on the wire.
            cancel_index = await wire.wait_for(is_cancel, args.request_timeout, since=0)
            after["cancelFrames"] = [f.get("params") for d, f in wire.frames if is_cancel(d, f)]
            after["cancelIndex"] = cancel_index
            after["leftAtIndex"] = left_at
            add2 = await call_and_locate(client, wire, "add_tool")
            after["add"] = add2
            after["cancelBeforeNextRequest"] = cancel_index < add2["requestIndex"]
            after["taggedWithOldId"] = [
                {"index": i, "method": f.get("method"), "beforeNextResult": i < add2["resultIndex"]}
                for i in range(cancel_index, len(wire.frames))
                for d, f in [wire.frames[i]]
                if d == "in" and subscription_id_of(f) == listen_id
            ]
            after["listenResponses"] = [
                {"index": i, "afterCancel": i > cancel_index, "frame": f}
                for i, (d, f) in enumerate(wire.frames)
                if d == "in" and f.get("id") == listen_id and "method" not in f
            ]

        await step("after leaving listen: add_tool again", after_leave)


async def main_async(args: argparse.Namespace, wire: TapWire, summary: dict[str, Any], errors: list[str]) -> None:
    try:
        with anyio.fail_after(args.timeout):
            await run(args, wire, summary, errors)
    except TimeoutError:
        errors.append(f"timed out after {args.timeout}s")
    except Exception as exc:  # noqa: BLE001
        errors.append(f"connect/teardown failed: {describe(exc)}")
        summary.setdefault("tracebacks", {})["connect"] = traceback.format_exc()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=sorted(MODES), required=True)
    parser.add_argument("--timeout", type=float, default=30.0, help="overall bound in seconds (default 30)")
    parser.add_argument("--request-timeout", type=float, default=10.0, help="per-request/wait bound (default 10)")
    parser.add_argument("--cwd", default=None, help="working directory for the server process")
    parser.add_argument("--trace", action="store_true", help="also print the wire trace to stderr on success")
    parser.add_argument("server", nargs=argparse.REMAINDER, help="-- SERVER_CMD [ARGS...]")
    args = parser.parse_args(argv)
    if args.server[:1] == ["--"]:
        args.server = args.server[1:]
    if not args.server:
        parser.error("missing server command after --")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)

    timer = start_watchdog("sdk_listen_driver", args.timeout + 15)

    wire = TapWire()
    summary: dict[str, Any] = {"mode": args.mode, "clientMode": MODES[args.mode], "sdkVersion": importlib.metadata.version("mcp")}
    errors: list[str] = []
    anyio.run(main_async, args, wire, summary, errors)
    timer.cancel()

    tracebacks = summary.pop("tracebacks", {})
    summary["errors"] = errors
    summary["wire"] = compact(wire)
    for name, text in tracebacks.items():
        sys.stderr.write(f"--- traceback ({name}) ---\n{text}")
    if errors or args.trace:
        write_wire_trace(wire)
    if errors:
        sys.stderr.write("sdk_listen_driver: FAILED\n" + "".join(f"  - {e}\n" for e in errors))
    sys.stdout.write(json.dumps(summary, default=str) + "\n")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
