"""gateway_client.py: talk to gateway.py as any MCP client would (run: python gateway_client.py)."""
import sys

import mcpsync

with mcpsync.connect([sys.executable, "gateway.py"]) as session:
    print([tool["name"] for tool in session.list_tools()])
    print([prompt["name"] for prompt in session.list_prompts()])
    print([resource["uri"] for resource in session.list_resources()])
    print(session.call_tool("echo", {"text": "hi"})["content"][0]["text"])

    def on_progress(progress, total, message):
        print("  progress:", progress, total, message)

    result = session.call_tool("demo_countdown", {"steps": 2, "delay": 0.05}, progress=on_progress)
    print(result["content"][0]["text"])

    with session.listen(tools=True) as events:
        session.call_tool("add_alarm", {"at": "07:30"})  # forwarded to clock.py, which adds a tool
        print(events.next_event(0))  # already here: relayed before the call's result
        print([tool["name"] for tool in session.list_tools()])
