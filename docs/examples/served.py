"""served.py: what `mcpsync serve app.py --upstream "mcpsync serve clock.py" --threads 32 --http HOST:PORT`
does, in Python (run: python served.py 127.0.0.1:8000)."""
import sys

from app import server  # TARGET: the Server (or Service) app.py makes
from mcpsync.hosting import log_to_stderr, raise_fd_limit, run_http
from mcpsync.transport.http.options import HttpOptions

log_to_stderr("warning")  # --log-level: the log on stderr, which never holds a thread up
server.add_remote("clock", ["mcpsync", "serve", "clock.py"], prefix="clock_")  # --upstream, [upstreams.clock]
options = HttpOptions(path="/mcp", threads=32)  # --path, --threads and the other HTTP options
host, _, port = sys.argv[1].rpartition(":")  # --http HOST:PORT


def announce(url: str) -> None:
    print(f"mcpsync: serving MCP over HTTP at {url}", file=sys.stderr)


raise_fd_limit()  # a connection, and an open stream, cost a file descriptor each
run_http(server, host, int(port), options=options, on_ready=announce)  # until SIGTERM or Ctrl-C, then closed
