"""protected_client.py: protected.py as its clients see it (run: python protected_client.py, beside protected.py)."""
import logging

import mcpsync
from mcpsync.auth import BearerToken
from protected import server

logging.basicConfig(format="%(name)s: %(message)s")
logging.getLogger("notes.audit").setLevel(logging.INFO)  # the Audit interceptor's lines
url = server.start_http("127.0.0.1", 0).url

with mcpsync.connect(url, auth=BearerToken("reader-4f2b9c1d8e7a6b5c0d")) as session:
    print("ada sees", [tool["name"] for tool in session.list_tools()])
    print(session.call_tool("whoami", {})["content"][0]["text"])
    try:
        session.call_tool("purge", {})
    except mcpsync.McpError as refused:
        print(refused, refused.data)

with mcpsync.connect(url, mode="legacy", auth=BearerToken("admin-9a8b7c6d5e4f3a2b1c0d")) as session:
    print("grace sees", [tool["name"] for tool in session.list_tools()])
    print(session.call_tool("whoami", {})["content"][0]["text"])
    print(session.call_tool("purge", {})["content"][0]["text"])

for auth in (None, BearerToken("not-one-of-the-tokens-0123"), BearerToken("metrics-7e6d5c4b3a291807")):
    try:
        mcpsync.connect(url, auth=auth).close()
    except mcpsync.McpError as refused:
        print(refused)

server.close()
