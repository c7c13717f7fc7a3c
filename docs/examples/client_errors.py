"""client_errors.py: what goes wrong, and how it shows (run: python client_errors.py)."""
import sys

import mcpsync
from mcpsync import CallTimeout, ConnectionLost, McpError, McpsyncError, SessionClosed

with mcpsync.connect([sys.executable, "-m", "mcpsync", "serve"], timeout=10) as session:
    # A tool that fails returns a result, with isError: true.
    result = session.call_tool("fail", {"message": "disk full"})
    print(result["isError"], result["content"][0]["text"])

    # So do bad arguments: the model can read what to fix.
    result = session.call_tool("add", {"a": 1})
    print(result["isError"], result["content"][0]["text"])

    # An error answer from the server raises McpError, with its code, message and data.
    try:
        session.call_tool("subtract", {"a": 1, "b": 2})
    except McpError as exc:
        print(exc.code, exc.message, exc.data)

    # No answer in time: the request is cancelled on the server and CallTimeout raised.
    try:
        session.call_tool("countdown", {"steps": 50, "delay": 0.1}, timeout=0.5)
    except CallTimeout as exc:
        print(exc)
    print(session.call_tool("echo", {"text": "the session goes on"})["content"][0]["text"])

try:
    session.list_tools()  # after the with block
except SessionClosed as exc:
    print(exc)

try:
    mcpsync.connect([sys.executable, "-c", "pass"])  # a "server" that exits at once
except ConnectionLost as exc:
    print(type(exc).__name__)

try:
    mcpsync.connect(["no-such-mcp-server"])
except McpsyncError as exc:  # the root of every mcpsync exception
    print(type(exc).__name__, exc)
