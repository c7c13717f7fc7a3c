"""Tools that run as tasks, for the client's and the CLI's task tests: in this process (`make_server`)
or in a `mcpsync serve` child (tests/cli/tasks_app.py serves the same tools).

A test never guesses how long a task takes: `stepper` reports a step, then waits at a gate until
the test opens it (`advance`, a tool too, so a test may open it from another session or process),
and `hold` runs until it is cancelled or released.
"""

from __future__ import annotations

import threading

from mcpsync import Context, ErrorCode, McpError, Server, Service, ToolError
from mcpsync.tasks import TaskLimits, TaskRunner

from .._timeouts import LONG

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
POLL_MS = 20
"""The polling pace the server suggests: short, so the tests are."""

service = Service("task-tools")
_gates: dict[str, threading.Event] = {}
_gates_lock = threading.Lock()


def gate(name: str) -> threading.Event:
    """The gate `name` (made on first use): a tool waits for it, or opens it to say what it did."""
    with _gates_lock:
        return _gates.setdefault(name, threading.Event())


@service.tool(task="optional")
def stepper(ctx: Context, name: str, steps: int = 2) -> str:
    """Report each step as progress, waiting after each for `advance(name, step)`."""
    for step in range(1, steps + 1):
        ctx.progress(step, steps, f"step {step} of {steps}")
        opened = gate(f"{name}/{step}")
        while not opened.wait(0.01):
            if ctx.cancelled:
                return "cancelled"
    return f"{steps} steps done"


@service.tool
def advance(name: str, step: int) -> str:
    """Let `stepper(name)` go past `step`."""
    gate(f"{name}/{step}").set()
    return f"advanced {name} past {step}"


@service.tool(task="optional")
def hold(ctx: Context, name: str) -> str:
    """Run until cancelled, or released with `advance(name, 0)`, LONG at most; opens the gates
    `NAME/running` as it starts and `NAME/cancelled` when it sees its task cancelled."""
    gate(f"{name}/running").set()
    released = gate(f"{name}/0")
    for _ in range(int(LONG / 0.01)):
        if released.wait(0.01):
            return f"released {name}"
        if ctx.cancelled:
            gate(f"{name}/cancelled").set()
            return "cancelled"
    return "gave up"


@service.tool(task="required")
def ask_name(ctx: Context) -> str:
    """Ask the user's name, then greet them."""
    answer = ctx.elicit("What is your name?", NAME_FORM)
    if answer.get("action") != "accept":
        return f"no name ({answer.get('action')})"
    return f"Hello, {answer['content']['name']}!"


@service.tool(task="optional")
def broken() -> str:
    """Fail as a request does, with a JSON-RPC error."""
    raise McpError(ErrorCode.INVALID_PARAMS, "no such record", {"record": 42})


@service.tool(task="optional")
def full_disk() -> str:
    """Report a tool error (isError)."""
    raise ToolError("the disk is full")


@service.tool
def plain() -> str:
    """An ordinary tool: never a task."""
    return "plain answer"


def make_server() -> Server:
    """A server of these tools whose tasks suggest polling every POLL_MS."""
    return Server("task-tools", services=[service], tasks=TaskRunner(limits=TaskLimits(poll_interval_ms=POLL_MS)), shutdown_timeout=LONG)
