"""http_client.py: the same session API over Streamable HTTP (run: python http_client.py, beside app.py)."""
import mcpsync
from app import server  # app.py's server, served here in the background for the example's sake

url = server.start_http("127.0.0.1", 0).url  # your server's URL, http://127.0.0.1:8000/mcp say

with mcpsync.connect(url, headers={"Authorization": "Bearer not-a-real-token"}) as session:
    print(session.era.value, [tool["name"] for tool in session.list_tools()])

server.shutdown()
