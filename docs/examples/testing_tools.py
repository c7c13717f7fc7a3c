"""testing_tools.py: test your own tools through a real client session, in this process (run: python testing_tools.py)."""
import mcpsync
from mcpsync import Context, Server, Service

greeter = Service("greeter")


@greeter.tool
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


@greeter.tool
def greet_asked(ctx: Context) -> str:
    """Ask the user's name first."""
    answer = ctx.elicit("What is your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    return f"Hello, {answer['content']['name']}!"


def test_greet(server: Server, mode: str) -> None:
    # connect(server): the Server object itself, served to this session alone; no port, no child process
    with mcpsync.connect(server, mode=mode, elicitation=lambda params: {"action": "accept", "content": {"name": "Ada"}}) as session:
        assert session.call_tool("greet", {"name": "Grace"})["content"][0]["text"] == "Hello, Grace!"
        assert session.call_tool("greet_asked", {})["content"][0]["text"] == "Hello, Ada!"
        refused = session.call_tool("greet", {"name": 42})  # the schema is checked as for any client
        assert refused["isError"]
        print(session.era.value, "ok")


with Server("greeter", services=[greeter]) as server:
    for mode in ("legacy", "modern"):  # both protocol eras
        test_greet(server, mode)
