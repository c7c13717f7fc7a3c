#!/usr/bin/env python3
"""mcpsync's HTTP server with no MCP behind it: `WsgiServer` serving a WSGI application that answers
as the floor does, for scripts/bench-instructions --layers and scripts/bench-http's `httpd`.

    python scripts/peers/wsgi_http_server.py [--host 127.0.0.1] [--port 0]

Why it exists: a request to `mcpsync serve --http` costs the floor's work (scripts/peers/
floor_http_server.py: accept, read, find the head's end, write), plus mcpsync's HTTP server (llhttp's
parse and mcpsync's checks on it, the environ, the response's framing, the poller and the loop's
turns), plus the MCP endpoint and the engine. This peer runs the first two and not the third, so
counting it beside the floor and `mcpsync serve` splits a request's cost between the layers. Its
application is the floor's answer behind WSGI: the floor's bodies, chosen by the same byte searches,
and every request answered on the loop thread (`answers_at_once`), as the endpoint's `tools/call`
is; no head check.

Prints `wsgi_http_server: serving MCP over HTTP at http://HOST:PORT/mcp` on stderr once bound; on
SIGTERM or SIGINT it stops as `mcpsync serve` does (the connections closed, the workers joined) and
exits 0.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from floor_http_server import CALL_RESULT, INIT_RESULT

from mcpsync.httpd.server import WsgiServer

JSON = ("Content-Type", "application/json")
STOP_CHECK_S = 0.5  # how often the main thread looks for a stop signal (a wait, not a poll of the server)


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    body = environ["wsgi.input"].read()
    if b'"id"' not in body:
        start_response("202 Accepted", [("Content-Length", "0")])
        return [b""]
    if b'"initialize"' in body:
        start_response("200 OK", [JSON, ("Content-Length", str(len(INIT_RESULT))), ("Mcp-Session-Id", "wsgi-session")])
        return [INIT_RESULT]
    start_response("200 OK", [JSON, ("Content-Length", str(len(CALL_RESULT)))])
    return [CALL_RESULT]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = WsgiServer(app, args.host, args.port, answers_at_once=lambda environ, body: True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    loop = threading.Thread(target=server.serve, name="wsgi-http-server")
    loop.start()
    print(f"wsgi_http_server: serving MCP over HTTP at http://{server.host}:{server.port}/mcp", file=sys.stderr, flush=True)
    try:
        while not stop.wait(STOP_CHECK_S):
            pass
    finally:
        clean = server.stop()
        loop.join(timeout=5.0)
        server.close()
    return 0 if clean and not loop.is_alive() else 1


if __name__ == "__main__":
    sys.exit(main())
