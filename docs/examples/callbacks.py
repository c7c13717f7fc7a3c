"""callbacks.py: answer the server's own requests (run: python callbacks.py)."""
import sys

import mcpsync
from mcpsync import McpError


def roots(params):
    return {"roots": [{"uri": "file:///home/me/project", "name": "project"}]}


def sampling(params):  # sampling/createMessage: ask your model, answer with its message
    return {"role": "assistant", "content": {"type": "text", "text": "42"}, "model": "my-model", "stopReason": "endTurn"}


def elicitation(params):  # elicitation/create: ask the user
    raise McpError(-32603, "nobody is here to answer")  # an error answer, as any callback may give


def on_log(params):  # notifications/message
    print(f"[{params['level']}] {params['data']}", file=sys.stderr)


with mcpsync.connect(
    [sys.executable, "-m", "mcpsync", "serve"],
    mode=sys.argv[1] if len(sys.argv) > 1 else "legacy",
    roots=roots,
    sampling=sampling,
    elicitation=elicitation,
    on_log=on_log,
    client_info={"name": "my-agent", "version": "1.0"},
) as session:
    print(session.era.value, session.protocol_version)
    print(session.call_tool("countdown", {"steps": 2, "delay": 0.01})["content"][0]["text"])
