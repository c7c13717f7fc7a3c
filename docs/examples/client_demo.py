"""client_demo.py: drive the demo server with the blocking client (run: python client_demo.py)."""
import sys

import mcpsync

# The same server as the command `mcpsync serve`: the demo service, as a child process.
with mcpsync.connect([sys.executable, "-m", "mcpsync", "serve"]) as session:
    print(session.era.value, session.protocol_version, session.server_info["name"])

    for tool in session.list_tools():
        print("tool:", tool["name"])

    result = session.call_tool("add", {"a": 2, "b": 3})
    print(result["structuredContent"], result["isError"])

    def on_progress(progress, total, message):
        print(f"  progress {progress}/{total} {message or ''}".rstrip())

    result = session.call_tool("countdown", {"steps": 3, "delay": 0.05}, progress=on_progress, timeout=10)
    print(result["content"][0]["text"])

    prompt = session.get_prompt("review_code", {"code": "print(1)", "language": "python"})
    print(prompt["messages"][0]["role"])

    print([t["uriTemplate"] for t in session.list_resource_templates()])
    print(session.read_resource("demo://greeting/Ada")["contents"][0]["text"])
    print(session.complete({"type": "ref/prompt", "name": "review_code"}, "language", "py"))
