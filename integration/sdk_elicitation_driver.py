"""Drive ``integration/fixtures/asking_app.py`` (served by mcpsync) with the *official* Python SDK
client, answering its elicitation, sampling and roots questions through the SDK's own callbacks,
and summarise what happened. Run it with the peers venv's python; it imports ``mcp``, never
mcpsync::

    .venv-peers/bin/python integration/sdk_elicitation_driver.py --mode legacy -- python -m mcpsync serve integration/fixtures/asking_app.py
    .venv-peers/bin/python integration/sdk_elicitation_driver.py --mode pinned --url http://127.0.0.1:8000/mcp

Modes as in ``sdk_client_driver.py``: ``legacy`` (``mode="legacy"``: initialize; the server asks
with JSON-RPC requests the SDK answers from its callbacks) and ``pinned`` (``mode="2026-07-28"``:
the server answers ``input_required`` and the SDK calls the same callbacks and retries by itself);
``modern`` (``mode="auto"``) works too.

The callbacks record what they were given (``requestId`` is the JSON-RPC id of the server's
request in the handshake era, the ``inputRequests`` key in 2026-07-28) and answer fixed values:

- elicitation, form mode: ``decline`` when the message starts with "Delete"; otherwise ``accept``
  with a value from ANSWERS for each property of the requested schema that has one;
- elicitation, URL mode: ``accept`` (no content);
- sampling: SAMPLE_TEXT from SAMPLE_MODEL, ``stopReason: "endTurn"``;
- roots: ROOTS.

Script: call ``ask_name``, ``confirm_delete``, ``ask_url``, ``ask_model`` {"topic": "the sea"},
``list_roots``, ``ask_all``, ``two_step`` {"nonce": ...}, ``patient`` {"nonce": ...}; get the prompt
``greeting``; read ``asking://roots``. Each step is recorded under ``steps[name]`` (a failure
there is recorded as ``{"error": ...}`` and the run goes on):

- ``result``: the final result as the server wrote it on the wire;
- ``callbacks``: the callbacks this step triggered, in order: ``{kind, requestId, params}``;
- ``rounds``: each request the client sent for this step and what came back:
  ``{id, inputResponses (keys, or None), inputResponseValues, requestState (sent or not),
  resultType, inputRequests ({key: method}), returnedState (bool)}``;
- ``serverRequests``: JSON-RPC requests the server sent during this step ``{id, method}``, and
  ``clientResponses``: the ids the client answered.

Output: ONE JSON object on stdout and exit 0 (``{mode, transport, protocolVersion, era, steps,
sent, unexpected}``; ``unexpected`` lists server-to-client frames that belong to no step). On a
failure to connect or a timeout: the partial summary, the errors and the wire trace on stderr,
exit 1. ``--trace`` prints the wire trace to stderr on success too.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import traceback
from typing import Any

import anyio
from mcp import Client, StdioServerParameters, types

# Same directory: the shared wire tap (this script is run by path, so its directory is on sys.path).
from sdk_client_driver import MODES, TracedTransport, Wire, describe, start_watchdog, write_wire_trace

ANSWERS: dict[str, Any] = {"name": "Ada Lovelace", "age": 36}
SAMPLE_TEXT = "waves fold into foam"
SAMPLE_MODEL = "sdk-test-model"
ROOTS = [{"uri": "file:///work/project", "name": "project"}, {"uri": "file:///tmp/scratch"}]
NONCE = f"{os.getpid()}"


class Recorder:
    """The SDK callbacks; each records what it got, then answers a fixed value."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def _record(self, kind: str, context: Any, params: Any) -> None:
        dumped = None if params is None else params.model_dump(by_alias=True, mode="json", exclude_none=True)
        self.calls.append({"kind": kind, "requestId": context.request_id, "params": dumped})

    async def elicitation(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self._record("elicitation", context, params)
        if isinstance(params, types.ElicitRequestURLParams):
            return types.ElicitResult(action="accept")
        if params.message.startswith("Delete"):
            return types.ElicitResult(action="decline")
        properties = (params.requested_schema or {}).get("properties", {})
        return types.ElicitResult(action="accept", content={k: ANSWERS[k] for k in properties if k in ANSWERS})

    async def sampling(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self._record("sampling", context, params)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=SAMPLE_TEXT),
            model=SAMPLE_MODEL,
            stop_reason="endTurn",
        )

    async def roots(self, context: Any) -> types.ListRootsResult:
        self._record("roots", context, None)
        return types.ListRootsResult(roots=[types.Root(**root) for root in ROOTS])


def step_record(wire: Wire, since: int, method: str) -> dict[str, Any]:
    """What crossed the wire for one step: the rounds of ``method`` and the server's own requests."""
    frames = wire.frames[since:]
    answers = {
        json.dumps(f["id"]): f for d, f in frames if d == "in" and "id" in f and "method" not in f
    }
    rounds = []
    for direction, frame in frames:
        if direction != "out" or frame.get("method") != method:
            continue
        params = frame.get("params") or {}
        responses = params.get("inputResponses")
        entry: dict[str, Any] = {
            "id": frame["id"],
            "inputResponses": None if responses is None else sorted(responses),
            "inputResponseValues": responses,
            "requestState": "requestState" in params,
            "sentState": params.get("requestState"),
        }
        answer = answers.get(json.dumps(frame["id"]))
        if answer is None:
            entry["resultType"] = None
        elif "error" in answer:
            entry["resultType"] = "error"
            entry["error"] = answer["error"]
        else:
            result = answer["result"]
            entry["resultType"] = result.get("resultType")
            entry["inputRequests"] = {k: v.get("method") for k, v in (result.get("inputRequests") or {}).items()}
            entry["returnedState"] = result.get("requestState")
        rounds.append(entry)
    return {
        "rounds": rounds,
        "serverRequests": [{"id": f["id"], "method": f["method"]} for d, f in frames if d == "in" and "method" in f and "id" in f],
        "clientResponses": [f["id"] for d, f in frames if d == "out" and "method" not in f and "id" in f],
    }


async def run(args: argparse.Namespace, wire: Wire, summary: dict[str, Any], errors: list[str]) -> None:
    recorder = Recorder()
    if args.url:
        from mcp.client.streamable_http import streamable_http_client

        inner: Any = streamable_http_client(args.url)
    else:
        from mcp.client.stdio import stdio_client

        inner = stdio_client(StdioServerParameters(command=args.server[0], args=args.server[1:], env=dict(os.environ), cwd=args.cwd))
    client = Client(
        TracedTransport(inner, wire),
        mode=MODES[args.mode],
        read_timeout_seconds=args.request_timeout,
        elicitation_callback=recorder.elicitation,
        sampling_callback=recorder.sampling,
        list_roots_callback=recorder.roots,
        cache=None,
    )
    steps: dict[str, Any] = {}
    summary["steps"] = steps
    claimed = 0  # frames that belong to some step (or to the connection's setup)

    async with client:
        session = client.session
        summary["protocolVersion"] = client.protocol_version
        summary["era"] = "modern" if session.discover_result is not None else "handshake"
        claimed = wire.mark()

        async def step(name: str, method: str, coro_fn: Any) -> None:
            nonlocal claimed
            mark, called = wire.mark(), len(recorder.calls)
            record: dict[str, Any] = {}
            try:
                await coro_fn()
                record["result"] = wire.answer(method, mark)
            except Exception as exc:  # noqa: BLE001 -- recorded for the tests to judge; the next step runs
                record["error"] = describe(exc)
                record["traceback"] = traceback.format_exc()
            record.update(step_record(wire, mark, method))
            record["callbacks"] = recorder.calls[called:]
            steps[name] = record
            claimed = wire.mark()

        await step("ask_name", "tools/call", lambda: client.call_tool("ask_name", {}))
        await step("confirm_delete", "tools/call", lambda: client.call_tool("confirm_delete", {}))
        await step("ask_url", "tools/call", lambda: client.call_tool("ask_url", {}))
        await step("ask_model", "tools/call", lambda: client.call_tool("ask_model", {"topic": "the sea"}))
        await step("list_roots", "tools/call", lambda: client.call_tool("list_roots", {}))
        await step("ask_all", "tools/call", lambda: client.call_tool("ask_all", {}))
        await step("two_step", "tools/call", lambda: client.call_tool("two_step", {"nonce": f"two-{NONCE}"}))
        await step("patient", "tools/call", lambda: client.call_tool("patient", {"nonce": f"patient-{NONCE}"}))
        await step("greeting", "prompts/get", lambda: client.get_prompt("greeting", {}))
        await step("roots_resource", "resources/read", lambda: client.read_resource("asking://roots"))
        summary["unexpected"] = [f for d, f in wire.frames[claimed:] if d == "in"]


async def main_async(args: argparse.Namespace, wire: Wire, summary: dict[str, Any], errors: list[str]) -> None:
    try:
        with anyio.fail_after(args.timeout):
            await run(args, wire, summary, errors)
    except TimeoutError:
        errors.append(f"timed out after {args.timeout}s")
    except Exception as exc:  # noqa: BLE001 -- reported with the wire trace
        errors.append(f"connect/teardown failed: {describe(exc)}")
        summary["traceback"] = traceback.format_exc()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=sorted(MODES), required=True)
    parser.add_argument("--url", default=None, help="the server's Streamable HTTP endpoint (else: -- SERVER_CMD for stdio)")
    parser.add_argument("--timeout", type=float, default=40.0, help="overall bound in seconds (default 40)")
    parser.add_argument("--request-timeout", type=float, default=10.0, help="per-request bound (default 10)")
    parser.add_argument("--cwd", default=None, help="working directory for the server process (stdio)")
    parser.add_argument("--trace", action="store_true", help="also print the wire trace to stderr on success")
    parser.add_argument("server", nargs=argparse.REMAINDER, help="-- SERVER_CMD [ARGS...] (stdio)")
    args = parser.parse_args(argv)
    if args.server[:1] == ["--"]:
        args.server = args.server[1:]
    if bool(args.server) == bool(args.url):
        parser.error("give exactly one of --url URL or -- SERVER_CMD")
    return args


def main() -> int:
    args = parse_args(sys.argv[1:])

    timer = start_watchdog("sdk_elicitation_driver", args.timeout + 15)
    wire = Wire()
    summary: dict[str, Any] = {
        "mode": args.mode,
        "transport": "http" if args.url else "stdio",
        "sdkVersion": importlib.metadata.version("mcp"),
    }
    errors: list[str] = []
    anyio.run(main_async, args, wire, summary, errors)
    timer.cancel()
    summary["sent"] = wire.sent()
    if errors or args.trace:
        write_wire_trace(wire)
    if errors:
        sys.stderr.write(summary.pop("traceback", ""))
        sys.stderr.write("--- partial summary ---\n" + json.dumps(summary, default=str)[:6000] + "\n")
        sys.stderr.write("sdk_elicitation_driver: FAILED\n" + "".join(f"  - {e}\n" for e in errors))
        return 1
    sys.stdout.write(json.dumps(summary, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
