"""oauth_client.py: a script that logs in when the server asks (run: python oauth_client.py, with
authserver.py and the notes server of login.console running)."""
import logging

import mcpsync
from mcpsync.auth import OAuth

logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")  # to see the logins happen

with mcpsync.connect("http://127.0.0.1:8000/mcp", auth=OAuth()) as session:
    print(session.call_tool("whoami", {})["content"][0]["text"])
    print(session.call_tool("purge", {})["content"][0]["text"])  # needs notes:admin: a second login asks for it
    print(session.call_tool("whoami", {})["content"][0]["text"])
