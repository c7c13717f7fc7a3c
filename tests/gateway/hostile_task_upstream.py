"""A 2025-11-25 upstream over stdio that lies about its tasks, for tests/gateway/test_gateway_hostile_tasks.py.

`python hostile_task_upstream.py MODE` answers `initialize` offering tasks for `tools/call` and lists
one tool, `job`, with `execution.taskSupport: "optional"`. What it answers a task-augmented call
and the task methods depends on MODE:

- `not-a-task`: the call's `task` is no task (a number as its id, an unknown status);
- `forever`: a task that says `working` to every `tasks/get` and never ends; `tasks/cancel`
  marks it cancelled (and says so from then on);
- `huge-message`: a task still working whose status message is 1 MB;
- `too-deep`: a task that says it completed, whose `tasks/result` answers a value nested 2,000 deep
  (more than a JSON reader takes: the line is no message to the gateway's client).
"""

from __future__ import annotations

import json
import sys

MODE = sys.argv[1]
TASK = {"taskId": "t-1", "status": "working", "createdAt": "2026-12-02T00:00:00Z", "lastUpdatedAt": "2026-12-02T00:00:00Z",
        "ttl": 60000, "pollInterval": 20}


def nested(depth: int) -> object:
    value: object = "deep"
    for _ in range(depth):
        value = [value]
    return value


def answer(request: dict) -> object:
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": "2025-11-25", "serverInfo": {"name": "hostile", "version": "1"},
                "capabilities": {"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}}
    if method == "tools/list":
        return {"tools": [{"name": "job", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}}]}
    if method == "tools/call":
        if MODE == "not-a-task":
            return {"task": {"taskId": 12345, "status": "exploded"}}
        return {"task": TASK}
    if method == "tasks/get":
        if MODE == "huge-message":
            return {**TASK, "statusMessage": "x" * 1_000_000}
        if MODE == "too-deep":
            return {**TASK, "status": "completed"}
        return dict(TASK)
    if method == "tasks/cancel":
        TASK["status"] = "cancelled"
        return dict(TASK)
    if method == "tasks/result":
        return nested(2000) if MODE == "too-deep" else {"content": []}
    return {}


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    try:
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}
        text = json.dumps(reply)
    except RecursionError:  # a value too deep for this encoder: send it by hand
        text = '{"jsonrpc":"2.0","id":%s,"result":%s}' % (json.dumps(message["id"]), "[" * 2000 + '"deep"' + "]" * 2000)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
