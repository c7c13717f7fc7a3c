"""mcpsync's HTTP/1.1 server for one WSGI application: what `mcpsync serve --http` runs.

Why our own loop: an MCP POST is one small JSON body in and one out, so the server's own work
decides the request rate (cheroot spent about 200 µs of CPU on each; the official SDK's uvicorn
parses in C), and a server on a network must not give a thread to every client that connects:
slow, idle and listening clients would hold them all. Parsing is httptools' (`_parse`); the
connection's life is `_connection`'s; this module owns the sockets, the workers and time.

Strategy: one loop thread (the caller of `serve()`) waits on a `Poller` (epoll) for the listening
socket, every connection that waits, and the nearest deadline. It accepts connections itself, and
reads and parses a connection that became ready. A whole request that the application promises to
answer at once (`answers_at_once`: for MCP, a call of a tool without a Context, a listing) it runs
and answers itself, as a one-thread event loop would: no thread switch at all. Any other request,
and any connection that became due, goes to the bounded pool of workers (`mcpsync-http-N`, at most
`threads`), which runs the application and writes, then gives the connection back to the poller.
So a worker is held only while a request is run or written; a connection costs a file descriptor
while it waits. A turn that holds the loop longer than `HAND_OVER_AFTER` (the promise broken: slow
user code, a client that stops reading) is noticed by a watch (`mcpsync._loop_turns`), and a worker takes the
loop over while the held thread finishes its turn; the caller of `serve()` takes it back once
free. At `max_connections` (capped below the file descriptor
limit) one more is answered 503 and closed at once. A closing connection lingers in the loop
(`LINGER`: its writes shut, what the client still sends read and dropped), so the client reads
the answer instead of a reset (RFC 9112 §9.6), without a thread.

Deadlines, not per-read timeouts: a request head must arrive within `timeout` seconds in all
(408 past it), a body at `min_body_rate` bytes a second after that allowance and within
`body_timeout` seconds in all however fast it comes (408), a new connection's first byte within
`timeout`, the next request on a kept-alive one within `idle_timeout` (closed silently past
either); a write that makes no progress for `timeout` seconds drops the connection.

Nothing is spent on a body before its head is accepted: `head_check(environ)` (the application's
own, e.g. `WsgiTransport.check_head`, which authenticates) is called once the head of a request
with a body has arrived, before any of the body is read or `100 Continue` sent, and an answer it
returns is sent instead, ending the connection. The bodies read at once, across connections, are
bounded by `max_buffered_bytes` (`_budget`: past it a request is refused 503 at its head).

Answering from another thread: `environ["mcpsync.respond_now"]` (`RESPOND_NOW`) writes a whole
response from the calling thread, for an application whose own thread is stuck (a shutdown
answering a request while user code holds the worker). It succeeds only before the worker has
sent any byte of the response; the connection then closes, and whatever the worker sends for the
request later is dropped. So a response is written by one thread only.

Stopping: `stop()` closes the listener and every connection that waits for a request; the busy
ones and open streams get until the deadline to finish (a transport that shut down first has
ended its streams), then are cut, and every worker is joined.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import resource
import socket
import sys
import threading
import time
from typing import Any

from .._loop_turns import LoopBaton, LoopWatch
from .._pool import WorkerPool
from ._budget import BodyBudget
from ._connection import RESPOND_NOW, Connection
from ._parse import MAX_HEAD_BYTES, MAX_HEADERS
from ._poller import READ, new_poller
from ._response import Clock, plain_response
from .options import DEFAULT_MAX_BUFFERED_BYTES, DEFAULT_MAX_CONNECTIONS, DEFAULT_THREADS, AnswersAtOnce, HeadCheck, WsgiApp

__all__ = ["MAX_HEADERS", "MAX_HEAD_BYTES", "RESPOND_NOW", "WsgiServer"]

log = logging.getLogger("mcpsync")

DEFAULT_TIMEOUT = 10.0
DEFAULT_IDLE_TIMEOUT = 30.0
DEFAULT_MIN_BODY_RATE = 16 * 1024
DEFAULT_BODY_TIMEOUT = 30.0
"""Seconds a request's body may take in all, however steadily it comes (a body of the largest
size, 16 MiB by default, must then come at 560 KB/s; an MCP request is a few KB)."""
LINGER = 2.0
"""Seconds a closing connection keeps reading (and dropping) what the client still sends."""
MAX_LINGERING = 1024
"""Closing connections lingering at once; past it they close at once."""
FD_RESERVE = 64
"""File descriptors kept free of connections: the listener, the poller, logs, upstreams."""
LATE_JOIN = 1.0
"""Seconds `stop()` still waits for the connections it had to cut."""
IDLE_WAKE = 60.0
"""The longest the loop waits with nothing due (every wait has a deadline)."""
_ACCEPT_BURST = 64


class WsgiServer:
    """Serves one WSGI application on `host:port` (port 0: any free one; see `.port`).

    Binds at construction, so a busy port fails in the caller. `serve()` runs the loop on the
    calling thread until `stop()`; the workers are the server's own. `head_check` (see the
    module's docstring) gets the environ of a head whose body is not read yet (`wsgi.input` is
    empty, `CONTENT_LENGTH` as declared) and returns None, or the (status, headers, body) to
    answer instead. `answers_at_once(environ, body)` (see `AnswersAtOnce`) says which whole
    requests the loop runs itself; without it every request goes to a worker. `max_buffered_bytes`
    (None: 64 MiB, or `max_body_bytes` if more) bounds the bodies held at once.
    """

    def __init__(
        self,
        app: WsgiApp,
        host: str,
        port: int,
        *,
        threads: int = DEFAULT_THREADS,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        timeout: float = DEFAULT_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        min_body_rate: float = DEFAULT_MIN_BODY_RATE,
        max_body_bytes: int = 4 * 1024 * 1024,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        max_buffered_bytes: int | None = None,
        head_check: HeadCheck | None = None,
        answers_at_once: AnswersAtOnce | None = None,
    ) -> None:
        if max_buffered_bytes is None:
            max_buffered_bytes = max(DEFAULT_MAX_BUFFERED_BYTES, max_body_bytes)
        for name, value in (("threads", threads), ("max_connections", max_connections), ("timeout", timeout),
                            ("idle_timeout", idle_timeout), ("min_body_rate", min_body_rate), ("max_body_bytes", max_body_bytes),
                            ("body_timeout", body_timeout), ("max_buffered_bytes", max_buffered_bytes)):
            if value <= 0:
                raise ValueError(f"{name} must be positive")
        if max_buffered_bytes < max_body_bytes:
            raise ValueError("max_buffered_bytes must hold at least one body of max_body_bytes")
        self.app = app
        self.head_check = head_check
        self.answers_at_once = answers_at_once
        self.timeout = timeout
        self.idle_timeout = idle_timeout
        self.min_body_rate = min_body_rate
        self.body_timeout = body_timeout
        self.max_body_bytes = max_body_bytes
        # a sixteenth kept for small bodies, as long as one of the largest still fits without it
        self.body_budget = BodyBudget(max_buffered_bytes, reserve=min(max_buffered_bytes // 16, max_buffered_bytes - max_body_bytes))
        self.max_connections = _within_fd_limit(max_connections)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        if host not in ("", "0.0.0.0", "::") and ":" not in host:
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        self._listener = socket.create_server((host, port), family=family, backlog=1024)
        self._listener.setblocking(False)
        bound = self._listener.getsockname()
        self.host, self.port = bound[0], bound[1]
        self.base_environ: dict[str, Any] = {
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
            "wsgi.input_terminated": True,
            "SCRIPT_NAME": "",
            "SERVER_NAME": self.host,
            "SERVER_PORT": str(self.port),
            "SERVER_SOFTWARE": "mcpsync",
        }
        self.clock = Clock()
        self.poller = new_poller()
        self.poller.watch(self._listener.fileno())
        self.poller.arm(self._listener.fileno(), READ)
        self._pool = WorkerPool("mcpsync-http", workers=threads, backlog=self.max_connections + MAX_LINGERING)
        self._lock = threading.Condition()
        self._connections: dict[int, Connection] = {}
        self._lingering: dict[int, tuple[socket.socket, float]] = {}  # the loop's own
        self._pending_lingers: list[socket.socket] = []  # handed over by workers (under the timer lock)
        self._timers: list[tuple[float, int, Connection]] = []
        self._timer_lock = threading.Lock()
        self._sequence = itertools.count()
        self._sleep_until = 0.0
        self._stopping = False
        self._closed = False
        self._baton = LoopBaton(self.poller.wake)  # which thread runs the loop (see `serve`, `_hand_over`)
        self._watch = LoopWatch(self._hand_over, "mcpsync-http-watch")

    @property
    def stopping(self) -> bool:
        return self._stopping

    # -- what connections call --------------------------------------------------------------------
    def submit(self, job: Any) -> bool:
        return self._pool.submit(job)

    @property
    def workers_to_spare(self) -> bool:
        """Another worker is free, or may start: one may wait briefly on its connection (`NEXT_REQUEST_WAIT`)."""
        return not self._stopping and self._pool.has_room

    def schedule(self, connection: Connection, due: float) -> None:
        """Make the loop look at `connection` at `due` (one live timer per connection: a later
        deadline is found when the earlier timer fires)."""
        scheduled = connection.scheduled_at
        if scheduled is not None and scheduled <= due:
            # Its live timer fires first (a look without the lock: were it fired meanwhile, the
            # loop reads the connection's `deadline`, set before this call, and schedules again).
            return
        with self._timer_lock:
            if connection.scheduled_at is not None and connection.scheduled_at <= due:
                return
            connection.scheduled_at = due
            heapq.heappush(self._timers, (due, next(self._sequence), connection))
            wake = due < self._sleep_until
        if wake:
            self.poller.wake()

    def release(self, connection: Connection) -> None:
        with self._lock:
            if self._connections.get(connection.fd) is connection:
                del self._connections[connection.fd]
                self._lock.notify_all()

    def linger(self, sock: socket.socket) -> None:
        """Close `sock` after the client has read what was sent: from any thread."""
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            sock.close()
            return
        with self._timer_lock:
            self._pending_lingers.append(sock)
        self.poller.wake()

    # -- the loop ---------------------------------------------------------------------------------
    def serve(self) -> None:
        """Run the loop until `stop()`: on this thread, but while a worker holds it after a hand-over."""
        self._watch.start()
        try:
            epoch: int | None = 0
            while epoch is not None and not self._loop(epoch):
                epoch = self._baton.take_back()
        finally:
            self._watch.stop()
            self.poller.forget(self._listener.fileno())
            self._listener.close()
            with self._timer_lock:
                pending, self._pending_lingers = self._pending_lingers, []
            for sock in pending:
                sock.close()
            for sock, _ in self._lingering.values():
                sock.close()
            self._lingering.clear()

    def _loop(self, epoch: int, *, borrowed: bool = False) -> bool:
        """Run the loop while it is `epoch`'s: True when stopping, False once another thread has
        it (a hand-over) or, `borrowed`, once its owner waits to take it back."""
        listener = self._listener.fileno()
        watch, baton = self._watch, self._baton
        while baton.epoch == epoch:
            if self._stopping:
                return True
            if borrowed and baton.home_waiting:
                return False
            for fd, _events in self.poller.wait(self._next_wait()):
                if baton.epoch != epoch:
                    self._pass_on(fd)  # held past the limit while serving: the rest is the new loop's
                    continue
                if fd == listener:
                    self._accept()
                    self.poller.arm(listener, READ)
                    continue
                connection = self._connections.get(fd)
                if connection is not None:
                    turn = watch.begin()
                    try:
                        connection.take_turn_here()
                    finally:
                        watch.end(turn)
                elif fd in self._lingering:
                    self._drop_lingering_input(fd)
            if baton.epoch == epoch:
                self._start_lingers()
                self._fire_timers()
        return False

    def _pass_on(self, fd: int) -> None:
        """A reported descriptor this thread may no longer handle, the loop having moved on: the
        listener and a lingering socket are armed again for the new loop, a connection's turn goes
        to a worker."""
        connection = self._connections.get(fd)
        if connection is not None:
            connection.take_turn()
        else:
            self.poller.arm(fd, READ)

    def _hand_over(self) -> None:
        """The watch's call: a turn holds the loop, so a worker takes the loop over (if one is
        free: with every worker busy, a new loop would wait for one too)."""
        epoch = self._baton.lend(lambda: not self._stopping and self._pool.has_room)
        if epoch is None:
            return
        log.debug("HTTP: a request held the loop thread for %g s; a worker runs the loop meanwhile", self._watch.limit)
        if not self._pool.submit(lambda: self._run_borrowed(epoch)):
            self._baton.give_back(epoch)  # the pool is closed: stopping

    def _run_borrowed(self, epoch: int) -> None:
        """A worker runs the loop until the caller of `serve()` waits to take it back, or stopping."""
        self._baton.borrow(epoch, lambda: self._loop(epoch, borrowed=True))

    def _next_wait(self) -> float:
        now = time.monotonic()
        with self._timer_lock:
            until = self._timers[0][0] if self._timers else now + IDLE_WAKE
            if self._lingering:  # in the order they began, each for LINGER: the first ends first
                first = next(iter(self._lingering.values()))[1]
                if first < until:
                    until = first
            self._sleep_until = until
        wait = until - now
        return IDLE_WAKE if wait > IDLE_WAKE else wait if wait > 0.0 else 0.0

    def _fire_timers(self) -> None:
        now = time.monotonic()
        timers = self._timers
        # A look without the lock first, as every turn of the loop comes here: a timer pushed
        # after it is found on the next turn, which its `schedule` wakes the loop for if it is
        # due before the loop would wake anyway.
        if timers and timers[0][0] <= now:
            due: list[Connection] = []
            with self._timer_lock:
                while timers and timers[0][0] <= now:
                    at, _, connection = heapq.heappop(timers)
                    if connection.scheduled_at == at:
                        connection.scheduled_at = None
                        due.append(connection)
            for connection in due:
                deadline = connection.deadline
                if deadline is not None and deadline > now:
                    self.schedule(connection, deadline)  # pushed back since this timer was set
                else:
                    connection.take_turn()
        if self._lingering:
            for fd, (_, until) in list(self._lingering.items()):
                if until > now:
                    break  # the rest began later
                self._end_lingering(fd)

    def _accept(self) -> None:
        for _ in range(_ACCEPT_BURST):
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:  # e.g. out of file descriptors: say so; the loop goes on
                log.warning("HTTP accept failed: %s", exc)
                return
            sock.setblocking(False)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass  # not TCP
            now = time.monotonic()
            with self._lock:
                full = len(self._connections) >= self.max_connections
                if not full and not self._stopping:
                    connection = Connection(self, sock, address, now)
                    self._connections[connection.fd] = connection
            if full or self._stopping:
                self._refuse_at_once(sock, address, full)
                continue
            self.poller.watch(connection.fd)
            connection.deadline = now + self.timeout
            self.schedule(connection, connection.deadline)
            self.poller.arm(connection.fd, READ)

    def _refuse_at_once(self, sock: socket.socket, address: Any, full: bool) -> None:
        if full:
            log.warning("HTTP: %d connections are open, the limit; refused one from %s", self.max_connections, address[0])
        why = "too many connections" if full else "the server is stopping"
        try:
            sock.send(plain_response(503, why, self.clock.header()))
        except OSError:
            pass
        self.linger(sock)

    # -- lingering closes (the loop's own) --------------------------------------------------------
    def _start_lingers(self) -> None:
        if not self._pending_lingers:  # a look without the lock: `linger` wakes the loop after it adds one
            return
        with self._timer_lock:
            pending, self._pending_lingers = self._pending_lingers, []
        until = time.monotonic() + LINGER
        for sock in pending:
            if len(self._lingering) >= MAX_LINGERING:
                sock.close()
                continue
            fd = sock.fileno()
            self._lingering[fd] = (sock, until)
            self.poller.watch(fd)
            self.poller.arm(fd, READ)

    def _drop_lingering_input(self, fd: int) -> None:
        sock, _ = self._lingering[fd]
        try:
            if sock.recv(65536):
                self.poller.arm(fd, READ)
                return
        except BlockingIOError:
            self.poller.arm(fd, READ)
            return
        except OSError:
            pass
        self._end_lingering(fd)

    def _end_lingering(self, fd: int) -> None:
        sock, _ = self._lingering.pop(fd)
        self.poller.forget(fd)
        sock.close()

    # -- stopping ---------------------------------------------------------------------------------
    def stop(self, timeout: float = 2.0) -> bool:
        """Stop accepting, close the connections waiting for a request, give busy ones and open
        streams until `timeout` to finish, then cut them; join the workers. True if all ended
        in time."""
        with self._lock:
            self._stopping = True
        self.poller.wake()
        deadline = time.monotonic() + timeout
        clean = self._wait_connections(deadline, streams=False)
        if not clean:
            for connection in self._open_connections():
                connection.close_if_waiting(streams=True)
                connection.cut()
            clean = self._wait_connections(time.monotonic() + LATE_JOIN, streams=True)
        stuck = self._pool.close(LATE_JOIN)
        self._baton.reclaim()  # a hand-over whose job the closed pool dropped
        if stuck or not clean:
            log.warning("HTTP: %d connection(s) and %d worker(s) did not end in time", len(self._open_connections()), len(stuck))
        return clean and not stuck

    def _open_connections(self) -> list[Connection]:
        with self._lock:
            return list(self._connections.values())

    def _wait_connections(self, deadline: float, *, streams: bool) -> bool:
        """Close what waits, as it comes to wait, until none is left or `deadline`."""
        while True:
            for connection in self._open_connections():
                connection.close_if_waiting(streams=streams)
            with self._lock:
                # one answered from another thread has nothing left to finish: its worker is stuck
                if all(connection.answered_elsewhere for connection in self._connections.values()):
                    return not self._connections
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(min(remaining, 0.05))

    def close(self) -> None:
        """Release the listener and the poller (after `serve()` has returned); once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._listener.close()
        self.poller.close()


def _within_fd_limit(wanted: int) -> int:
    """`wanted` connections, or fewer if the process may not open that many descriptors."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or wanted <= soft - FD_RESERVE:
        return wanted
    allowed = max(1, soft - FD_RESERVE)
    say = log.info if wanted == DEFAULT_MAX_CONNECTIONS else log.warning
    say("HTTP: max_connections %d is over the file descriptor limit (%d); serving at most %d", wanted, soft, allowed)
    return allowed
