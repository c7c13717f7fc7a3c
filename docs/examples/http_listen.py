"""http_listen.py: a 2026-07-28 listen over HTTP, as the wire carries it (run: python http_listen.py, beside app.py)."""
import http.client
import json
import threading
from urllib.parse import urlsplit

from app import server

serving = server.start_http("127.0.0.1", 0, keepalive=0.5)  # a keep-alive comment after 0.5 s of silence
endpoint = urlsplit(serving.url)

envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
listen = {"jsonrpc": "2.0", "id": "L1", "method": "subscriptions/listen",
          "params": {"_meta": envelope, "notifications": {"toolsListChanged": True, "resourcesListChanged": True}}}
headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"}
print(f"→ POST {endpoint.path}  ", "  ".join(f"{name}: {value}" for name, value in headers.items()))
print("  ", json.dumps(listen, separators=(",", ":")))

connection = http.client.HTTPConnection(endpoint.hostname, endpoint.port)
connection.request("POST", endpoint.path, json.dumps(listen),
                   {**headers, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
response = connection.getresponse()
print("←", response.status, response.getheader("Content-Type"))
for raw in response:  # the event stream, line by line, as it arrives
    line = raw.decode().rstrip("\r\n")
    print("  ", line)
    if line == ": keepalive":  # the server had nothing to say for 0.5 s; now stop it
        print("   (server.shutdown())")
        threading.Thread(target=serving.shutdown).start()
connection.close()
