"""A scripted MCP server for the client tests: raw JSON lines over stdin/stdout, standard library only.

Run as ``[sys.executable, fake_server.py, FLAG...]`` (see `command()`); the client under test spawns
it with its own `StdioConnection`. It plays the servers the real mcpsync server cannot: one that
only speaks the handshake era, one that rejects protocol versions, one that never answers, one that
dies mid-call, one that stops reading, one that asks the client questions, odd paginators.

Strategy: one thread, one loop: read a line, record it, answer it (or not). Everything the client
sent is kept, and the test reads it back with the `fake/received` request; because the loop handles
lines in order, a `fake/received` sent after X always sees X. Nothing here sleeps: the fake reacts
only to what it reads, and blocks forever (`signal.pause`) only when a scenario says so.

Flags (any combination):
  handshake       server/discover -> -32601 (a handshake-era-only server)
  unsupported     server/discover -> -32022 supported ["2030-01-01"] (no version the client speaks)
  silent-discover server/discover is never answered
  bogus-version   initialize answers protocolVersion "1999-01-01"
  paginate        every list method returns pages of two with cursors c1, c2, ...
  repeat-cursor   tools/list always answers nextCursor "same"
  no-ack          subscriptions/listen is never acknowledged
  listen-error    subscriptions/listen -> -32601
  linger          stdin EOF does not end the fake (it waits for a signal)
  ignore-term     SIGTERM is ignored (only SIGKILL ends the fake)

Without a flag, server/discover accepts 2026-07-28 and answers -32022 with supported
["2026-07-28"] to any other version.

resources/subscribe fails (-32602) for a URI containing "bad".

Tools (tools/call NAME): echo(text), progress (three progress notifications, then the result),
hang (progress 0 if asked, then no answer until fake/release), die (exit 7 at once), rpc_error
(a JSON-RPC error with data), tool_error (isError), not_object (a result that is a list), twice
(answered twice), deafen (answered, then the fake stops reading), log (a notifications/message).

Scripted answers (2026-07-28 input_required rounds): `fake/script {results: [...]}` queues results;
each `tools/call` of the tool "scripted", `prompts/get` of the prompt "scripted" and `resources/read`
of "fake://scripted" takes the next one ("hang" means: leave that request unanswered, like the
hang tool). With the queue empty they answer a complete result echoing their params.

Control requests: fake/received, fake/env, fake/ask {method, params} (a server->client request;
answered with the client's whole response), fake/ask_many {method, params, count} (that many at
once; answered {responses} once every one is answered), fake/notify {notifications: [{method, params,
tagged}]}, fake/script {results}, fake/release (answers every hung call "late"), fake/end_listens
(completes every open listen), fake/exit {code}.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

MODERN = "2026-07-28"
HANDSHAKE = "2025-11-25"
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO = {"name": "fake", "version": "1"}
CAPABILITIES = {
    "tools": {"listChanged": True},
    "prompts": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
    "completions": {},
}

ITEMS = {
    "tools/list": ("tools", [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(1, 6)]),
    "prompts/list": ("prompts", [{"name": f"p{i}"} for i in range(1, 4)]),
    "resources/list": ("resources", [{"uri": f"fake://r{i}", "name": f"r{i}"} for i in range(1, 4)]),
    "resources/templates/list": ("resourceTemplates", [{"uriTemplate": f"fake://t{i}/{{x}}", "name": f"t{i}"} for i in range(1, 4)]),
}
PAGE = 2


def command(*flags: str) -> list[str]:
    """The argv that starts this fake with `flags`."""
    return [sys.executable, str(Path(__file__).resolve()), *flags]


class Fake:
    def __init__(self, flags: set[str]) -> None:
        self.flags = flags
        self.received: list[Any] = []
        self.asks: dict[str, Any] = {}  # our request id -> the fake/ask request id waiting for it
        self.hung: list[Any] = []
        self.listens: list[Any] = []
        self.next_ask = 0
        self.many: dict[str, Any] | None = None  # the fake/ask_many waiting for its responses
        self.script: list[Any] = []
        self.out = sys.stdout.buffer

    # -- writing ----------------------------------------------------------------------------------
    def write(self, message: dict[str, Any]) -> None:
        self.out.write(json.dumps(message).encode() + b"\n")
        self.out.flush()

    def result(self, request_id: Any, result: Any) -> None:
        self.write({"jsonrpc": "2.0", "id": request_id, "result": result})

    def error(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.write({"jsonrpc": "2.0", "id": request_id, "error": error})

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.write(message)

    # -- the loop ---------------------------------------------------------------------------------
    def run(self) -> None:
        stdin = sys.stdin.buffer
        while True:
            line = stdin.readline()
            if not line:
                break
            if not line.strip():
                continue
            message = json.loads(line)
            self.received.append(message)
            if "method" in message and "id" in message:
                self.on_request(message["id"], message["method"], message.get("params") or {})
            elif "method" in message:
                self.on_notification(message["method"], message.get("params") or {})
            else:
                self.on_response(message)
        if "linger" in self.flags:
            while True:
                signal.pause()

    def on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/cancelled":
            if params.get("requestId") in self.listens:
                self.listens.remove(params.get("requestId"))

    def on_response(self, message: dict[str, Any]) -> None:
        asker = self.asks.pop(message.get("id"), None)
        if asker is not None:
            self.result(asker, {"response": message})
        many = self.many
        if many is not None and str(message.get("id")).startswith("m-"):
            many["responses"].append(message)
            if len(many["responses"]) == many["count"]:
                self.many = None
                self.result(many["rid"], {"responses": many["responses"]})

    def on_request(self, rid: Any, method: str, params: dict[str, Any]) -> None:
        handler = getattr(self, "do_" + method.replace("/", "_"), None)
        if method in ITEMS:
            self.do_list(rid, method, params)
        elif handler is not None:
            handler(rid, params)
        else:
            self.error(rid, -32601, f"Method not found: {method}", {"method": method})

    # -- the protocol -----------------------------------------------------------------------------
    def do_ping(self, rid: Any, params: dict[str, Any]) -> None:
        self.result(rid, {})

    def do_initialize(self, rid: Any, params: dict[str, Any]) -> None:
        version = "1999-01-01" if "bogus-version" in self.flags else HANDSHAKE
        self.result(rid, {"protocolVersion": version, "capabilities": CAPABILITIES, "serverInfo": SERVER_INFO, "instructions": "fake (handshake)"})

    def do_server_discover(self, rid: Any, params: dict[str, Any]) -> None:
        if "handshake" in self.flags:
            self.error(rid, -32601, "Method not found: server/discover")
            return
        if "silent-discover" in self.flags:
            return
        version = (params.get("_meta") or {}).get(META_PROTOCOL_VERSION)
        supported = ["2030-01-01"] if "unsupported" in self.flags else [MODERN]
        if version not in supported:
            self.error(rid, -32022, f"Unsupported protocol version: {version}", {"supported": supported, "requested": version})
            return
        self.result(rid, {"supportedVersions": supported, "capabilities": CAPABILITIES, "instructions": "fake (modern)", "_meta": {META_SERVER_INFO: SERVER_INFO}})

    def do_list(self, rid: Any, method: str, params: dict[str, Any]) -> None:
        key, items = ITEMS[method]
        if "repeat-cursor" in self.flags and method == "tools/list":
            self.result(rid, {key: items[:1], "nextCursor": "same"})
            return
        if "paginate" not in self.flags:
            self.result(rid, {key: items})
            return
        cursor = params.get("cursor")
        start = int(cursor[1:]) * PAGE if cursor else 0
        page: dict[str, Any] = {key: items[start : start + PAGE]}
        if start + PAGE < len(items):
            page["nextCursor"] = f"c{start // PAGE + 1}"
        self.result(rid, page)

    def do_prompts_get(self, rid: Any, params: dict[str, Any]) -> None:
        if params.get("name") == "scripted":
            return self.scripted(rid, params, {"messages": [{"role": "user", "content": {"type": "text", "text": "done"}}]})
        self.result(rid, {"messages": [], "echo": params})

    def do_resources_read(self, rid: Any, params: dict[str, Any]) -> None:
        if params.get("uri") == "fake://scripted":
            return self.scripted(rid, params, {"contents": [{"uri": "fake://scripted", "text": "done"}]})
        self.result(rid, {"contents": [{"uri": params.get("uri"), "text": "hello"}], "echo": params})

    def scripted(self, rid: Any, params: dict[str, Any], final: dict[str, Any]) -> None:
        step = self.script.pop(0) if self.script else {"resultType": "complete", **final, "echo": params}
        if step == "hang":
            self.hung.append(rid)
        else:
            self.result(rid, step)

    def do_completion_complete(self, rid: Any, params: dict[str, Any]) -> None:
        self.result(rid, {"completion": {"values": ["a", "b"], "echo": params}})

    def do_resources_subscribe(self, rid: Any, params: dict[str, Any]) -> None:
        if "bad" in str(params.get("uri")):
            self.error(rid, -32602, "Cannot subscribe", {"uri": params.get("uri")})
            return
        self.result(rid, {})

    def do_resources_unsubscribe(self, rid: Any, params: dict[str, Any]) -> None:
        self.result(rid, {})

    def do_subscriptions_listen(self, rid: Any, params: dict[str, Any]) -> None:
        if "listen-error" in self.flags:
            self.error(rid, -32601, "Method not found: subscriptions/listen")
            return
        self.listens.append(rid)
        if "no-ack" in self.flags:
            return
        accepted = params.get("notifications") or {}
        self.notify("notifications/subscriptions/acknowledged", {"_meta": {META_SUBSCRIPTION_ID: rid}, "notifications": accepted})

    def do_tools_call(self, rid: Any, params: dict[str, Any]) -> None:
        name = params.get("name")
        arguments = params.get("arguments") or {}
        token = (params.get("_meta") or {}).get("progressToken")
        if name == "scripted":
            self.scripted(rid, params, {"content": [{"type": "text", "text": "done"}], "isError": False})
        elif name == "echo":
            self.result(rid, {"content": [{"type": "text", "text": str(arguments.get("text", ""))}], "isError": False})
        elif name == "progress":
            for step in (1, 2, 3):
                if token is not None:
                    self.notify("notifications/progress", {"progressToken": token, "progress": step, "total": 3, "message": f"step {step}"})
            self.result(rid, {"content": [{"type": "text", "text": "done"}], "isError": False})
        elif name == "hang":
            if token is not None:
                self.notify("notifications/progress", {"progressToken": token, "progress": 0, "message": "hanging"})
            self.hung.append(rid)
        elif name == "die":
            os._exit(7)
        elif name == "rpc_error":
            self.error(rid, -32099, "custom failure", {"why": "because", "n": 3})
        elif name == "tool_error":
            self.result(rid, {"content": [{"type": "text", "text": "it broke"}], "isError": True})
        elif name == "not_object":
            self.result(rid, [1, 2])
        elif name == "twice":
            self.result(rid, {"content": [{"type": "text", "text": "first"}], "isError": False})
            self.result(rid, {"content": [{"type": "text", "text": "second"}], "isError": False})
        elif name == "deafen":
            self.result(rid, {"content": [{"type": "text", "text": "deaf now"}], "isError": False})
            while True:
                signal.pause()
        elif name == "log":
            self.notify("notifications/message", {"level": "info", "logger": "fake", "data": "a log line"})
            self.result(rid, {"content": [], "isError": False})
        else:
            self.error(rid, -32602, f"Unknown tool: {name}")

    # -- control ----------------------------------------------------------------------------------
    def do_fake_received(self, rid: Any, params: dict[str, Any]) -> None:
        self.result(rid, {"messages": self.received[:-1]})  # everything before this request

    def do_fake_env(self, rid: Any, params: dict[str, Any]) -> None:
        env = {key: value for key, value in os.environ.items() if key.startswith("FAKE_")}
        self.result(rid, {"cwd": os.getcwd(), "env": env, "pid": os.getpid()})

    def do_fake_ask(self, rid: Any, params: dict[str, Any]) -> None:
        self.next_ask += 1
        ask_id = f"s-{self.next_ask}"
        self.asks[ask_id] = rid
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": ask_id, "method": params["method"]}
        if params.get("params") is not None:
            request["params"] = params["params"]
        self.write(request)

    def do_fake_ask_many(self, rid: Any, params: dict[str, Any]) -> None:
        """Send `count` server->client requests at once (ids m-1...); answered with every response."""
        self.many = {"rid": rid, "count": params["count"], "responses": []}
        for n in range(1, params["count"] + 1):
            self.write({"jsonrpc": "2.0", "id": f"m-{n}", "method": params["method"], "params": params.get("params") or {}})

    def do_fake_notify(self, rid: Any, params: dict[str, Any]) -> None:
        for spec in params.get("notifications") or []:
            body = dict(spec.get("params") or {})
            tag = spec.get("subscription", self.listens[-1] if spec.get("tagged") and self.listens else None)
            if tag is not None:
                body["_meta"] = {**(body.get("_meta") or {}), META_SUBSCRIPTION_ID: tag}
            self.notify(spec["method"], body)
        self.result(rid, {})

    def do_fake_script(self, rid: Any, params: dict[str, Any]) -> None:
        self.script = list(params.get("results") or [])
        self.result(rid, {})

    def do_fake_release(self, rid: Any, params: dict[str, Any]) -> None:
        for hung in self.hung:
            self.result(hung, {"content": [{"type": "text", "text": "late"}], "isError": False})
        self.hung.clear()
        self.result(rid, {})

    def do_fake_end_listens(self, rid: Any, params: dict[str, Any]) -> None:
        for listen in self.listens:
            self.result(listen, {"resultType": "complete", "_meta": {META_SUBSCRIPTION_ID: listen}})
        self.listens.clear()
        self.result(rid, {})

    def do_fake_exit(self, rid: Any, params: dict[str, Any]) -> None:
        self.result(rid, {})
        sys.stdout.flush()
        os._exit(int(params.get("code", 0)))


def main() -> None:
    flags = set(sys.argv[1:])
    if "ignore-term" in flags:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    Fake(flags).run()


if __name__ == "__main__":
    main()


# -- for the tests (they import this module; the fake itself never runs these) ----------------------


def received(session: Any, method: str | None = None) -> list[dict[str, Any]]:
    """What the fake has read so far (everything the client sent before this request)."""
    messages = session.request("fake/received")["messages"]
    return [m for m in messages if method is None or m.get("method") == method]


def methods(session: Any) -> list[str]:
    """The methods of the requests and notifications the fake has read so far, in order."""
    return [m["method"] for m in received(session) if "method" in m]


def fake_pid(session: Any) -> int:
    return int(session.request("fake/env")["pid"])


def ask(session: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Make the fake send `method` to the client; returns the client's whole response."""
    return session.request("fake/ask", {"method": method, "params": params})["response"]


def script(session: Any, *results: Any) -> None:
    """Queue the answers of the next "scripted" calls (results, or "hang" for no answer)."""
    session.request("fake/script", {"results": list(results)})


def push(session: Any, *notifications: dict[str, Any]) -> None:
    """Make the fake send notifications; they reach the client before this returns."""
    session.request("fake/notify", {"notifications": list(notifications)})


def process_gone(pid: int) -> bool:
    """True once `pid` has exited and been reaped (no /proc entry, not even a zombie)."""
    return not os.path.exists(f"/proc/{pid}")
