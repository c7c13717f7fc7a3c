"""scaled.py: one server in several worker processes (gunicorn -c gunicorn.conf.py), made one
server by a shared bus: MCPSYNC_BUS=redis://127.0.0.1:6379/0 (the redis extra)."""
import os

from mcpsync import Server, Service
from mcpsync.gunicorn import manage

STREAMS = 24  # open listens per worker; each holds one of gunicorn's threads (gunicorn.conf.py)

service = Service("scaled")


@service.tool
def worker() -> str:
    """Name the worker process that answered."""
    return f"worker {os.getpid()}"


# Built in each worker, after the fork (gunicorn's default): the bus's thread starts there.
# manage() hands the server to mcpsync.gunicorn's hooks, which stop it with the worker.
server = manage(Server("scaled", services=[service], bus=os.environ.get("MCPSYNC_BUS", "memory://")))
app = server.wsgi_app(max_streams=STREAMS)
