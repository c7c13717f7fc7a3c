"""A `Server` in N worker processes run by gunicorn, through its API: `serve_processes`, what
`mcpsync serve --http ADDR --processes N` runs.

Strategy: gunicorn is the process engine (forking, supervising, restarting a worker that died,
graceful and quick stops, SIGHUP reloads); mcpsync adds no fork loop of its own. The application is
a `gunicorn.app.base.BaseApplication` whose settings come from the call, never from a
gunicorn.conf.py or GUNICORN_CMD_ARGS found around it, and whose `load()` runs in each worker after
the fork (preload_app stays off): each worker builds its own Server, so each has its own threads,
and a bus's thread starts after the fork, never before. The hooks are `mcpsync.gunicorn`'s, the
ones a deployment's own gunicorn.conf.py uses.

Threads: the gthread worker serves each connection's request on a thread, and a stream (a listen, a
GET stream) holds that thread while it is open; so each worker gets the `threads` the requests need
plus one per stream it may hold (`HttpOptions.for_threaded_worker`): open streams can never starve
the requests.

Importing this module imports gunicorn (the `gunicorn` extra): `mcpsync serve` imports it only for
--processes above 1, and turns the ImportError into a message naming the extra.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gunicorn.app.base import BaseApplication  # type: ignore[import-untyped]  # gunicorn ships no annotations
from gunicorn.errors import AppImportError, HaltServer  # type: ignore[import-untyped]

from . import gunicorn as hooks
from .errors import McpsyncError
from .transport.http.options import HttpOptions, WsgiApp

if TYPE_CHECKING:
    from .server import Server

__all__ = ["GRACEFUL_TIMEOUT", "KEEPALIVE", "LoadFailed", "ProcessesStopped", "serve_processes"]

KEEPALIVE = 10
"""Seconds an idle kept-alive connection stays open, as under mcpsync's own server: longer than a
load balancer's usual upstream keep-alive would be safer still, but a stopping worker caps it at
two seconds anyway."""
GRACEFUL_TIMEOUT = 30
"""Seconds gunicorn lets a stopping worker finish before killing it: a backstop only, since the
SIGTERM hook ends every stream at once and running requests have the server's shutdown_timeout."""


class LoadFailed(AppImportError, McpsyncError):  # type: ignore[misc]  # gunicorn is untyped
    """A worker could not build the server (a bad target, say): raised by `serve_processes`'
    `build`, gunicorn prints the message and stops every worker instead of restarting this one
    forever (an `AppImportError` to gunicorn, a `McpsyncError` like every error mcpsync raises)."""


class ProcessesStopped(McpsyncError):
    """The worker processes stopped on a failure (a worker that could not build its server, a
    port in use); gunicorn has logged why."""


def serve_processes(
    build: Callable[[], Server],
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    processes: int,
    options: HttpOptions | None = None,
    log_level: str = "warning",
    on_ready: Callable[[str], None] | None = None,
    on_worker_ready: Callable[[int], None] | None = None,
) -> None:
    """Serve HTTP on `host:port` (port 0: any free one) with `processes` gunicorn gthread workers,
    until SIGTERM or Ctrl-C; blocks.

    `build()` runs in each worker, after the fork, and returns that worker's `Server`, which is
    handed to `mcpsync.gunicorn`'s hooks (a stop shuts it down, the worker's exit closes it) and
    served with `options` (default `HttpOptions()`) as `HttpOptions.for_threaded_worker` makes
    them: each worker has `threads + max_streams` threads and `max_connections` connections (a
    ValueError, before anything starts, if `max_streams` is not below it). Without a shared bus
    each worker has its own sessions and listens. A `LoadFailed` raised by `build` stops every
    worker with its message. gunicorn logs at `log_level`, on stderr.

    `on_ready(url)` is called in this process once the port is bound, and `on_worker_ready(pid)`
    in each worker once it has built its server and is about to accept. Raises
    `ProcessesStopped` when the workers stopped on a failure; a worker leaves through here with
    gunicorn's `SystemExit`.
    """
    worker = (options or HttpOptions()).for_threaded_worker()
    shown = f"[{host}]" if ":" in host else host

    def load() -> WsgiApp:
        return hooks.manage(build()).wsgi_app(options=worker)

    settings = {
        "bind": [f"{shown}:{port}"],
        "workers": processes,
        "worker_class": "gthread",
        "threads": worker.threads + worker.wsgi_streams(),
        "worker_connections": worker.max_connections,
        "keepalive": KEEPALIVE,
        "graceful_timeout": GRACEFUL_TIMEOUT,
        "loglevel": log_level,
        "errorlog": "-",
        "accesslog": None,
        "proc_name": "mcpsync",
    }
    application = _Application(
        settings, load, lambda bound: f"http://{shown}:{bound}{worker.path}", on_ready or _ignore, on_worker_ready or _ignore
    )
    master = os.getpid()
    try:
        application.run()
    except SystemExit as exc:
        # A worker leaves through here too (it was forked inside run()): its status is gunicorn's
        # to read. The master's failure has been explained above it (a worker's reason, a busy port).
        if os.getpid() == master and exc.code not in (None, 0):
            raise ProcessesStopped(f"the worker processes stopped (gunicorn's exit status {exc.code})") from exc
        raise
    except HaltServer as exc:  # gunicorn 27 lets a second failed worker's halt escape its own handler
        raise ProcessesStopped(f"the worker processes stopped: {exc.reason}") from exc


def _ignore(value: object) -> None:
    """The callback not given."""


class _Application(BaseApplication):  # type: ignore[misc]  # gunicorn is untyped
    """gunicorn's application for `serve_processes`: `settings` are gunicorn settings (bind,
    workers, threads, ...); `load_app()`, called in each worker, returns the WSGI app, raising
    `LoadFailed` with a one-line reason if it cannot; `on_ready(url)` is called in the master once
    the port is bound (with port 0, the one it got), and `on_worker_ready(pid)` in each worker once
    it has built its server and is about to accept: the master learns nothing of that, and a
    client that connects earlier waits in the listen backlog for the workers still booting."""

    def __init__(
        self,
        settings: Mapping[str, Any],
        load_app: Callable[[], WsgiApp],
        url_of: Callable[[int], str],
        on_ready: Callable[[str], None],
        on_worker_ready: Callable[[int], None],
    ) -> None:
        self._settings = dict(settings)
        self._load_app = load_app
        self._url_of = url_of
        self._on_ready = on_ready
        self._on_worker_ready = on_worker_ready
        super().__init__(prog="mcpsync")  # reads the config: the attributes come first

    def load_config(self) -> None:
        known = self.cfg.settings
        for key, value in self._settings.items():
            self.cfg.set(key, value)
        for key, value in (
            ("post_worker_init", self._post_worker_init),
            ("worker_int", hooks.worker_int),
            ("worker_exit", hooks.worker_exit),
            ("when_ready", self._when_ready),
        ):
            self.cfg.set(key, value)
        if "control_socket_disable" in known:  # gunicorn 24+: no control socket left in the working directory
            self.cfg.set("control_socket_disable", True)

    def _post_worker_init(self, worker: Any) -> None:
        hooks.post_worker_init(worker)
        self._on_worker_ready(int(worker.pid))

    def _when_ready(self, arbiter: Any) -> None:
        port = int(arbiter.LISTENERS[0].getsockname()[1])
        self._on_ready(self._url_of(port))

    def load(self) -> WsgiApp:
        return self._load_app()
