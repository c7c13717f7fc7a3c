"""Drive an MCP stdio server with the *official* Python SDK client and summarise what it saw.

Run it with the peers venv's python (scripts/peers-venv prints the path); it imports ``mcp`` and
never mcpsync, so the server under test is judged by an independent implementation::

    .venv-peers/bin/python integration/sdk_client_driver.py --mode legacy -- python -m mcpsync serve

Modes (how the official ``mcp.Client`` is told to pick the protocol era):

``legacy``
    ``Client(params, mode="legacy")``: the handshake era. Sends ``initialize`` then
    ``notifications/initialized``; requests carry no ``_meta`` envelope.
``modern``
    ``Client(params, mode="auto")``: probes ``server/discover`` with the 2026-07-28 envelope and adopts
    the result. The client silently falls back to ``initialize`` when the probe fails or its result
    does not validate, so this mode insists on ``discover_result`` being set afterwards.
``pinned``
    ``Client(params, mode="2026-07-28")``: adopts 2026-07-28 without any probe (the client synthesises
    a DiscoverResult), so the first request on the wire is an enveloped ``tools/list``.

The demo script: list tools, call ``add`` {"a": 2, "b": 3} and ``echo`` {"text": "hi"}, list prompts
and get ``review_code`` {"code": "print(1)"}, list resources and templates, read ``demo://readme``
and ``demo://greeting/Ada``. Beyond that script, and recorded (success or error) without failing
the run: call ``fail`` {} and ``countdown`` {"steps": 3, "delay": 0.01} with a progress callback,
and in the 2026-07-28 modes open and close one ``subscriptions/listen``.

Output: on success ONE JSON object on stdout and exit 0. Each result is reported as the server
sent it on the wire (the SDK's models fill in defaults such as ``resultType``, which would hide what
the server really wrote); ``sent`` lists every frame the client wrote. On any failure: the partial
summary, the errors and the wire trace go to stderr, nothing to stdout, exit 1.

Summary keys: mode, clientMode, sdkVersion, protocolVersion, era ("handshake" | "modern"),
serverInfo, serverCapabilities, instructions, initializeResult | discoverResult (raw), tools /
prompts / resources / resourceTemplates (names or URIs), toolsList / promptsList / resourcesList /
templatesList (raw list results), calls.{add,echo}, prompt, reads.{readme,greeting} (raw results),
extras.{fail,countdown}, listen, shutdownSeconds (time the client needed to stop the server after
closing its stdin), sent ([{method, id, metaKeys}]), notifications (server notifications received).
``--trace`` also prints the whole wire trace to stderr on success.

Bounded: the whole run has ``--timeout`` seconds (default 30) and each request ``--request-timeout``
(default 10); a watchdog thread hard-exits if even the SDK's (bounded) shutdown overruns.
"""

from __future__ import annotations

import argparse
import builtins
import importlib.metadata
import json
import os
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

MODES = {"legacy": "legacy", "modern": "auto", "pinned": "2026-07-28"}


class Wire:
    """Every JSON-RPC frame the client wrote or read, in order, as plain JSON-ready dicts."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, dict[str, Any]]] = []  # ("out" | "in", frame)

    def record(self, direction: str, item: Any) -> None:
        message = getattr(item, "message", None)
        if message is None:  # the transport hands up a parse failure as an Exception item
            self.frames.append((direction, {"unparseable": repr(item)}))
        else:
            self.frames.append((direction, message.model_dump(by_alias=True, mode="json", exclude_unset=True)))

    def mark(self) -> int:
        return len(self.frames)

    def answer(self, method: str, since: int) -> dict[str, Any]:
        """The raw result of the last ``method`` request sent after ``since``."""
        request_id = None
        for direction, frame in self.frames[since:]:
            if direction == "out" and frame.get("method") == method and "id" in frame:
                request_id = frame["id"]
        if request_id is None:
            raise LookupError(f"no {method} request on the wire")
        for direction, frame in self.frames[since:]:
            if direction == "in" and frame.get("id") == request_id and ("result" in frame or "error" in frame):
                return frame.get("result", {"error": frame.get("error")})
        raise LookupError(f"no answer to {method} id={request_id!r} on the wire")

    def sent(self) -> list[dict[str, Any]]:
        out = []
        for direction, frame in self.frames:
            if direction != "out":
                continue
            meta = (frame.get("params") or {}).get("_meta") or {}
            entry = {"method": frame.get("method"), "id": frame.get("id"), "metaKeys": sorted(meta)}
            if "method" not in frame:
                entry["method"] = "<response>"
            out.append(entry)
        return out

    def received_notifications(self) -> list[dict[str, Any]]:
        return [
            {"method": f["method"], "params": f.get("params")}
            for d, f in self.frames
            if d == "in" and "method" in f and "id" not in f
        ]


class _TracedRead:
    def __init__(self, inner: Any, wire: Wire) -> None:
        self._inner, self._wire = inner, wire

    async def receive(self) -> Any:
        item = await self._inner.receive()
        self._wire.record("in", item)
        return item

    def __aiter__(self) -> _TracedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _TracedRead:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class _TracedWrite:
    def __init__(self, inner: Any, wire: Wire) -> None:
        self._inner, self._wire = inner, wire

    async def send(self, item: Any) -> None:
        self._wire.record("out", item)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _TracedWrite:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class TracedTransport:
    """A ``mcp.client.Transport`` that wraps another and records the frames crossing it."""

    def __init__(self, inner: Any, wire: Wire) -> None:
        self._inner, self._wire = inner, wire

    async def __aenter__(self) -> tuple[_TracedRead, _TracedWrite]:
        read, write = await self._inner.__aenter__()
        return _TracedRead(read, self._wire), _TracedWrite(write, self._wire)

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)


def describe(exc: BaseException) -> str:
    """One line per leaf exception: anyio task groups wrap the interesting error in groups."""
    group_type = getattr(builtins, "BaseExceptionGroup", None)  # Python 3.11+
    if group_type is not None and isinstance(exc, group_type):
        return "; ".join(describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def _dump(model: Any) -> Any:
    return None if model is None else model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def run_demo(args: argparse.Namespace, wire: Wire, summary: dict[str, Any], errors: list[str]) -> None:
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=args.server[0],
        args=args.server[1:],
        # The SDK passes only HOME/PATH/... by default; forward ours so the server finds its venv,
        # PYTHONPATH, coverage hooks and the like exactly as the test process sees them.
        env=dict(os.environ),
        cwd=args.cwd,
    )
    transport = TracedTransport(stdio_client(params), wire)
    client = Client(transport, mode=MODES[args.mode], read_timeout_seconds=args.request_timeout)

    async def step(name: str, coro_fn: Any) -> None:
        try:
            await coro_fn()
        except Exception as exc:  # noqa: BLE001 -- each step's failure is reported, then the next runs
            errors.append(f"step {name!r} failed: {describe(exc)}")
            summary.setdefault("tracebacks", {})[name] = traceback.format_exc()

    async with client:
        session = client.session
        summary["protocolVersion"] = client.protocol_version
        summary["era"] = "modern" if session.discover_result is not None else "handshake"
        summary["serverInfo"] = _dump(client.server_info)
        summary["serverCapabilities"] = _dump(client.server_capabilities)
        summary["instructions"] = client.instructions
        if session.initialize_result is not None:
            summary["initializeResult"] = wire.answer("initialize", 0)
        if session.discover_result is not None and args.mode == "modern":
            summary["discoverResult"] = wire.answer("server/discover", 0)
        if args.mode == "modern" and session.discover_result is None:
            errors.append(
                "mode=auto fell back to the initialize handshake: server/discover failed or its result did not "
                "validate (see the wire trace)"
            )
            return

        async def list_tools() -> None:
            mark = wire.mark()
            result = await client.list_tools()
            summary["tools"] = [tool.name for tool in result.tools]
            summary["toolsList"] = wire.answer("tools/list", mark)

        async def call(name: str, arguments: dict[str, Any]) -> None:
            mark = wire.mark()
            await client.call_tool(name, arguments)
            summary.setdefault("calls", {})[name] = wire.answer("tools/call", mark)

        async def list_prompts() -> None:
            mark = wire.mark()
            result = await client.list_prompts()
            summary["prompts"] = [prompt.name for prompt in result.prompts]
            summary["promptsList"] = wire.answer("prompts/list", mark)

        async def get_prompt() -> None:
            mark = wire.mark()
            await client.get_prompt("review_code", {"code": "print(1)"})
            summary["prompt"] = wire.answer("prompts/get", mark)

        async def list_resources() -> None:
            mark = wire.mark()
            result = await client.list_resources()
            summary["resources"] = [str(resource.uri) for resource in result.resources]
            summary["resourcesList"] = wire.answer("resources/list", mark)

        async def list_templates() -> None:
            mark = wire.mark()
            result = await client.list_resource_templates()
            summary["resourceTemplates"] = [template.uri_template for template in result.resource_templates]
            summary["templatesList"] = wire.answer("resources/templates/list", mark)

        async def read(key: str, uri: str) -> None:
            mark = wire.mark()
            await client.read_resource(uri)
            summary.setdefault("reads", {})[key] = wire.answer("resources/read", mark)

        async def extra(name: str, coro_fn: Any) -> None:
            # Probes beyond the demo script: the outcome, success or error, is recorded under
            # summary["extras"][name] for the tests to judge, and never fails the whole run.
            try:
                summary.setdefault("extras", {})[name] = await coro_fn()
            except Exception as exc:  # noqa: BLE001
                summary.setdefault("extras", {})[name] = {"error": describe(exc)}

        async def call_fail() -> dict[str, Any]:
            mark = wire.mark()
            await client.call_tool("fail", {})
            return wire.answer("tools/call", mark)

        async def call_countdown() -> dict[str, Any]:
            progress: list[float] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append(value)

            mark = wire.mark()
            await client.call_tool("countdown", {"steps": 3, "delay": 0.01}, progress_callback=on_progress)
            frames = wire.frames[mark:]
            request_id = next(f["id"] for d, f in frames if d == "out" and f.get("method") == "tools/call")
            answered_at = next(i for i, (d, f) in enumerate(frames) if d == "in" and f.get("id") == request_id)
            late = [f for d, f in frames[answered_at:] if f.get("method") == "notifications/progress"]
            return {"result": wire.answer("tools/call", mark), "progress": progress, "progressAfterResponse": len(late)}

        async def listen() -> None:
            # Beyond the demo script, so a failure here is recorded for the tests to judge instead
            # of failing the whole run.
            try:
                async with client.listen(tools_list_changed=True, prompts_list_changed=True) as sub:
                    summary["listen"] = {"subscriptionId": sub.subscription_id, "honored": _dump(sub.honored)}
                # Leaving the block sends notifications/cancelled for the listen id (no response expected).
            except Exception as exc:  # noqa: BLE001
                summary["listen"] = {"error": describe(exc)}

        await step("tools/list", list_tools)
        await step("tools/call add", lambda: call("add", {"a": 2, "b": 3}))
        await step("tools/call echo", lambda: call("echo", {"text": "hi"}))
        await step("prompts/list", list_prompts)
        await step("prompts/get review_code", get_prompt)
        await step("resources/list", list_resources)
        await step("resources/templates/list", list_templates)
        await step("resources/read demo://readme", lambda: read("readme", "demo://readme"))
        await step("resources/read demo://greeting/Ada", lambda: read("greeting", "demo://greeting/Ada"))
        await extra("fail", call_fail)
        await extra("countdown", call_countdown)
        if client.protocol_version == "2026-07-28":
            await step("subscriptions/listen", listen)
        closing_started = anyio.current_time()

    # Leaving the client closes the server's stdin, waits up to 2 s for it to exit, then kills its
    # process group. A server that honours end-of-input shows a time well under that.
    summary["shutdownSeconds"] = round(anyio.current_time() - closing_started, 3)


async def main_async(args: argparse.Namespace, wire: Wire, summary: dict[str, Any], errors: list[str]) -> None:
    try:
        with anyio.fail_after(args.timeout):
            await run_demo(args, wire, summary, errors)
    except TimeoutError:
        errors.append(f"timed out after {args.timeout}s")
    except Exception as exc:  # noqa: BLE001 -- connect/teardown failures are reported like step failures
        errors.append(f"connect/teardown failed: {describe(exc)}")
        summary.setdefault("tracebacks", {})["connect"] = traceback.format_exc()


def start_watchdog(name: str, seconds: float) -> threading.Timer:
    """Last resort: the SDK's own shutdown is bounded, but never let a driver outlive its budget.
    Cancel the returned timer once the run is over."""

    def fire() -> None:
        sys.stderr.write(f"{name}: watchdog fired after {seconds}s; hard exit\n")
        sys.stderr.flush()
        os._exit(1)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


def write_wire_trace(wire: Wire, width: int = 1000) -> None:
    """Every frame of the run on stderr, each cut to `width` characters."""
    sys.stderr.write("--- wire trace (>> client to server, << server to client) ---\n")
    for direction, frame in wire.frames:
        sys.stderr.write(f"{'>>' if direction == 'out' else '<<'} {json.dumps(frame, default=str)[:width]}\n")


def drive_url(name: str, description: str, run: Callable[[argparse.Namespace, Wire, dict[str, Any], list[str]], Awaitable[None]]) -> int:
    """The main of an HTTP driver (`--mode`, `--timeout`, `--request-timeout`, the endpoint URL):
    `run(args, wire, summary, errors)` within the timeout and a watchdog; then ONE JSON summary
    on stdout and 0, or the traceback, the partial summary, the wire trace and the errors on
    stderr and 1."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--mode", choices=sorted(MODES), required=True)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--request-timeout", type=float, default=10.0)
    parser.add_argument("url")
    args = parser.parse_args()

    timer = start_watchdog(name, args.timeout + 15)
    wire = Wire()
    summary: dict[str, Any] = {"mode": args.mode}
    errors: list[str] = []

    async def bounded() -> None:
        try:
            with anyio.fail_after(args.timeout):
                await run(args, wire, summary, errors)
        except Exception as exc:  # noqa: BLE001 -- reported with the wire trace
            errors.append(f"run failed: {describe(exc)}")
            summary["traceback"] = traceback.format_exc()

    anyio.run(bounded)
    timer.cancel()
    summary["sent"] = wire.sent()
    if errors:
        sys.stderr.write(summary.pop("traceback", ""))
        sys.stderr.write("--- partial summary ---\n" + json.dumps(summary, default=str)[:4000] + "\n")
        write_wire_trace(wire, 600)
        sys.stderr.write(f"{name}: FAILED\n" + "".join(f"  - {e}\n" for e in errors))
        return 1
    sys.stdout.write(json.dumps(summary, default=str) + "\n")
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=sorted(MODES), required=True)
    parser.add_argument("--timeout", type=float, default=30.0, help="overall bound in seconds (default 30)")
    parser.add_argument("--request-timeout", type=float, default=10.0, help="per-request bound (default 10)")
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

    timer = start_watchdog("sdk_client_driver", args.timeout + 15)

    wire = Wire()
    summary: dict[str, Any] = {
        "mode": args.mode,
        "clientMode": MODES[args.mode],
        "sdkVersion": importlib.metadata.version("mcp"),
    }
    errors: list[str] = []
    anyio.run(main_async, args, wire, summary, errors)
    timer.cancel()

    summary["sent"] = wire.sent()
    summary["notifications"] = wire.received_notifications()
    tracebacks = summary.pop("tracebacks", {})
    if errors:
        for name, text in tracebacks.items():
            sys.stderr.write(f"--- traceback ({name}) ---\n{text}")
        sys.stderr.write("--- partial summary ---\n" + json.dumps(summary, default=str)[:4000] + "\n")
    if errors or args.trace:
        write_wire_trace(wire)
    if errors:
        # Last, so that a reader who sees only the tail of stderr still sees what failed.
        sys.stderr.write("sdk_client_driver: FAILED\n" + "".join(f"  - {e}\n" for e in errors))
        return 1
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
