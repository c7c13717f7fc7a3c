"""app.py: a small MCP server (run: mcpsync serve app.py, or over HTTP: mcpsync serve app.py --http 127.0.0.1:8000)."""
from mcpsync import Context, Server, Service

service = Service("hello")


@service.tool
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


@service.tool
def countdown(ctx: Context, steps: int = 3) -> str:
    """Count down, reporting progress at each step."""
    for step in range(1, steps + 1):
        if ctx.wait_cancelled(0.1):
            return "cancelled"
        ctx.progress(step, steps, f"step {step} of {steps}")
    return f"counted down {steps} steps"


server = Server("hello", services=[service])
