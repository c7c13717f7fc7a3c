"""http_questions.py: a tool's questions to a handshake-era client over HTTP (run: python http_questions.py, beside trips.py)."""
import http.client
import json
from urllib.parse import urlsplit

from trips import service

from mcpsync import Server

serving = Server("trips", services=[service]).start_http("127.0.0.1", 0)
endpoint = urlsplit(serving.url)
ACCEPT = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def post(message, session_id=None, *, indent=""):
    """POST one message on a connection of its own; print it, and return the response."""
    connection = http.client.HTTPConnection(endpoint.hostname, endpoint.port)
    headers = {**ACCEPT, **({"Mcp-Session-Id": session_id} if session_id else {})}
    shown = "   Mcp-Session-Id: <id>" if session_id else ""
    print(f"{indent}→ POST {endpoint.path}{shown}   {json.dumps(message, separators=(',', ':'))}")
    connection.request("POST", endpoint.path, json.dumps(message), headers)
    return connection.getresponse()


initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}, "sampling": {}},
                         "clientInfo": {"name": "x", "version": "1"}}}
response = post(initialize)
session_id = response.getheader("Mcp-Session-Id")
print("←", response.status, response.getheader("Content-Type"), "  Mcp-Session-Id: <id>")
response.read()
initialized = post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session_id)
print("←", initialized.status)
initialized.read()

answers = {  # what the user and the model say
    "elicitation/create": {"action": "accept", "content": {"city": "Lisbon"}},
    "sampling/createMessage": {"role": "assistant", "content": {"type": "text", "text": "Belem"}, "model": "my-model"},
}
call = post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "plan_trip"}}, session_id)
print("←", call.status, call.getheader("Content-Type"))
for raw in call:  # the call's event stream: the server's questions, then the result
    line = raw.decode().rstrip("\r\n")
    if line:
        print("  ", line)
    if line.startswith("data: ") and line != "data: ":  # the first event, with no data, primes a resume
        message = json.loads(line[len("data: "):])
        if "method" in message:  # a question: answer it with a POST of its own
            answer = post({"jsonrpc": "2.0", "id": message["id"], "result": answers[message["method"]]}, session_id,
                          indent="       ")
            print("       ←", answer.status)
            answer.read()
serving.shutdown()
