"""Serving a `Server` under gunicorn: the hooks a deployment's gunicorn.conf.py imports (and that
`mcpsync serve --http ADDR --processes N` installs itself).

gunicorn forks worker processes and stops them with signals; a `Server` has threads and open
streams that must follow that life, and gunicorn alone gets three things wrong for it:

- Where it is built. A thread does not survive `fork()`: a bus made in the master (`RedisBus` runs
  one thread) would be dead in every worker. gunicorn loads the application in each worker, after
  the fork, unless `preload_app` is set: keep it off, and build the Server in the app module
  gunicorn loads (`post_worker_init` warns about a Server handed over before the fork).
- How long a graceful stop takes. On SIGTERM a gthread worker stops accepting and waits up to
  `graceful_timeout` for its open connections to end, but an open `subscriptions/listen` or GET
  stream never ends by itself: every stop would take the whole timeout and then cut the streams
  without their `complete` result. `post_worker_init` chains the worker's SIGTERM handler so the
  server's `shutdown()` starts the moment the stop does (on a thread of its own: a signal handler
  must return to the worker's loop): each listen gets its `complete` result, streams end, running
  requests are answered, and the worker exits as soon as its connections have closed.
- What is left running at exit. `worker_exit` closes the server: its upstreams stop and the bus's
  thread is joined. A quick stop (SIGINT, SIGQUIT: `worker_int`) still ends the streams properly,
  with a short budget for running requests, before gunicorn exits the worker.

The hooks act on the servers handed over with `manage(server)` in the worker process; a worker
whose app was not handed over still gets its WSGI app (`worker.wsgi`, a `WsgiTransport`) shut
down, so its listens are completed, but nothing closes that server's bus (a daemon thread, which
does not hold the process at exit). Usage, in the module gunicorn loads::

    server = manage(Server("notes", services=[service], bus=os.environ["MCPSYNC_BUS"]))
    app = server.wsgi_app(max_streams=STREAMS)  # gunicorn threads = STREAMS + the request threads

and in gunicorn.conf.py (docs/examples/gunicorn.conf.py)::

    from mcpsync.gunicorn import post_worker_init, worker_exit, worker_int

This module imports nothing of gunicorn (the hooks are handed gunicorn's objects), so reading a
config file that imports it costs nothing in the master.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .server import Server

__all__ = ["QUICK_SHUTDOWN", "manage", "post_worker_init", "worker_exit", "worker_int"]

log = logging.getLogger("mcpsync")

QUICK_SHUTDOWN = 1.0
"""Seconds `worker_int` gives running requests: gunicorn exits the worker right after the hook."""
EXIT_JOIN = 30.0
"""How long `worker_exit` waits for a shutdown the SIGTERM started (gunicorn's graceful_timeout
default: by then the master kills the worker anyway)."""

_lock = threading.RLock()  # re-entrant: the hooks run in signal handlers, which may interrupt a holder
_managed: list[tuple[Server, int]] = []  # each server handed over, with the pid that handed it
_stopper: threading.Thread | None = None
_done = threading.Event()  # the servers' shutdown has finished (on the thread, or in worker_exit)


def manage(server: Server) -> Server:
    """Hand `server` to this module's hooks in this worker process, and return it: a stop of the
    worker (SIGTERM, SIGINT, SIGQUIT) shuts it down and its exit closes it (upstreams, bus)."""
    with _lock:
        if all(known is not server for known, _ in _managed):
            _managed.append((server, os.getpid()))
    return server


def post_worker_init(worker: Any) -> None:
    """gunicorn's `post_worker_init` hook: the worker has loaded the app (so the servers are
    handed over) and installed its signal handlers; chain its SIGTERM handler so a graceful stop
    starts the servers' shutdown at once instead of waiting `graceful_timeout` for open streams."""
    with _lock:
        early = [server for server, pid in _managed if pid != os.getpid()]
    for server in early:  # on gunicorn's own log: a deployment configures that one, not mcpsync's
        getattr(worker, "log", log).warning(
            "the mcpsync server %r was built before the fork (preload_app?): threads do not survive a fork, so its bus does not run in this worker",
            server.name,
        )
    previous = signal.getsignal(signal.SIGTERM)
    if not callable(previous):  # not gunicorn's handler: leave the signal's meaning alone
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        previous(signum, frame)  # gunicorn's own first: the worker stops accepting
        _begin_shutdown(worker, None)

    signal.signal(signal.SIGTERM, on_sigterm)
    signal.siginterrupt(signal.SIGTERM, False)  # as gunicorn set it: a stop must not interrupt a request's system calls


def worker_int(worker: Any) -> None:
    """gunicorn's `worker_int` hook (SIGINT or SIGQUIT: a quick stop; the worker exits right
    after): shut the servers down with a short budget, so open listens still get `complete`.

    The shutdown runs on its own thread, which this handler waits for: a Ctrl-C at a terminal
    reaches the worker twice (SIGINT from the terminal, SIGQUIT from the master), and the second
    handler runs inside the first, then exits the worker. Work done in the handler itself would
    be cut short there; on the thread it goes on, and `worker_exit` waits for it."""
    _begin_shutdown(worker, QUICK_SHUTDOWN)
    _done.wait(QUICK_SHUTDOWN + 1.0)


def worker_exit(server: Any, worker: Any) -> None:
    """gunicorn's `worker_exit` hook (`server` is gunicorn's arbiter): once the worker's loop has
    ended, finish the shutdown a SIGTERM began and close every server (upstreams, the bus's thread).
    gunicorn also calls it in the master for a worker that was already gone: nothing to do there."""
    if getattr(worker, "pid", None) != os.getpid():
        return
    _begin_shutdown(worker, QUICK_SHUTDOWN)  # if no signal began it: max_requests, the master gone
    with _lock:
        stopper = _stopper
    if stopper is not None and not stopper.is_alive() and not _done.is_set():
        _shutdown(worker, QUICK_SHUTDOWN)  # a second signal exited the worker before the thread started
    _done.wait(EXIT_JOIN)
    for each in _servers():
        try:
            each.close(timeout=QUICK_SHUTDOWN)
        except Exception:
            log.exception("closing the server %r failed", each.name)
        if each.telemetry is not None:  # what the worker's exporters still hold goes out before it exits
            each.telemetry.close(timeout=QUICK_SHUTDOWN)


def _begin_shutdown(worker: Any, timeout: float | None) -> None:
    """Start the servers' shutdown on a thread, once per process: a signal handler must return
    to the worker's loop, or may be cut short by the next signal's handler, which runs inside it
    and may exit the worker (then `worker_exit` does the shutdown itself). `_done` is set once the
    shutdown has finished, however it ran."""
    global _stopper
    with _lock:
        if _stopper is not None:
            return
        _stopper = threading.Thread(target=_shutdown, args=(worker, timeout), name="mcpsync-gunicorn-stop")
    _stopper.start()  # a handler nested here finds _stopper set and waits on _done


def _servers() -> list[Server]:
    """Every server handed over, even before the fork (preload_app): it serves in this worker too."""
    with _lock:
        return [server for server, _ in _managed]


def _shutdown(worker: Any, timeout: float | None) -> None:
    """Shut down every server handed over here (None: each one's own shutdown_timeout), or else
    the worker's WSGI app if it is one of ours."""
    servers = _servers()
    try:
        if servers:
            for each in servers:
                each.shutdown(timeout)
            return
        from .transport.http.endpoint import WsgiTransport

        app = getattr(worker, "wsgi", None)
        if isinstance(app, WsgiTransport):
            app.shutdown(timeout)
    except Exception:
        log.exception("the shutdown of the worker's server failed")
    finally:
        _done.set()
