"""readme_client.py: call app.py's tools from a script (run: python readme_client.py, beside app.py)."""
import sys

import mcpsync

with mcpsync.connect([sys.executable, "-m", "mcpsync", "serve", "app.py"]) as session:
    print(session.era.value, [tool["name"] for tool in session.list_tools()])
    print(session.call_tool("greet", {"name": "Ada"})["content"][0]["text"])
    result = session.call_tool("countdown", {"steps": 2}, progress=lambda done, total, message: print(" ", message))
    print(result["content"][0]["text"])
