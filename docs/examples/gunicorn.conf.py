"""gunicorn.conf.py: scaled.py's server in four worker processes; run: gunicorn -c gunicorn.conf.py"""
# gunicorn calls these by name: a graceful stop (SIGTERM) ends every open listen with its
# `complete` result at once instead of waiting graceful_timeout, and a worker's exit stops the bus.
from mcpsync.gunicorn import post_worker_init, worker_exit, worker_int  # noqa: F401

wsgi_app = "scaled:app"
bind = "127.0.0.1:8000"
workers = 4
worker_class = "gthread"  # a thread per request being served, and per open stream
threads = 32 + 24  # the requests', plus scaled.STREAMS: open streams never starve the requests
preload_app = False  # gunicorn's default, and needed: threads (the bus's) do not survive a fork
