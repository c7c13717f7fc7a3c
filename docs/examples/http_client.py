"""http_client.py: the same session API over Streamable HTTP (run: python http_client.py, beside app.py)."""
from app import server  # app.py, beside this file

import mcpsync

url = server.start_http("127.0.0.1", 0).url  # served here for the example; yours: http://127.0.0.1:8000/mcp, say

with mcpsync.connect(url, headers={"Authorization": "Bearer not-a-real-token"}) as session:
    print(session.era.value, [tool["name"] for tool in session.list_tools()])

server.shutdown()
