"""The stdio transport: a reader thread, an executor, one output lock.

Strategy (ARCHITECTURE.md's threading contract):
1. Only the reader reads the wire. It decodes each frame once, answers broken frames, handles
   `notifications/cancelled` and responses (to the server's own requests) inline, runs itself a
   request the engine answers at once (`Engine.answers_at_once`: a tool without a Context, a
   listing; no thread switch) while a worker is free to take its place, and submits every other
   request to the executor. A request it runs that holds it past `HAND_OVER_AFTER` (user code that
   broke the promise) makes a worker the reader meanwhile (`mcpsync._loop_turns`), so the
   cancellations and requests behind it are still read.
2. While the era is unlocked, the reader waits for `initialize` and other era-distinctive requests to
   finish before it reads the next frame, so no pipelined frame can race the era lock.
3. Every write happens under the output lock, after serializing outside it. A request's completion
   (leaving the in-flight table, committing the era) happens in the same critical section as its
   response, and list-change notifications take the lock once for all their copies.
4. End of input lets in-flight requests finish (bounded by `drain_timeout`) and returns. `shutdown()`
   (any thread, or SIGTERM/SIGINT through `request_shutdown`) tells running tools they are cancelled,
   waits at most `shutdown_timeout` for them, and returns. Either way every request with an id gets
   exactly one answer: those still in flight at the deadline, and those read but held back, are
   answered -32603 "the server is shutting down" under the output lock, and whatever a request still
   running returns later is dropped. Every thread started here is stopped or reported.
5. The output (`_output.Output`) never holds a thread on the client for long: a frame the pipe
   cannot take waits in a queue bounded in bytes for the writer thread; a client that reads nothing
   for `write_timeout` is gone (the connection ends as at a shutdown); and at the end the writer
   gets `shutdown_timeout` to deliver the last answers, read or not. So a client that stops reading
   cannot keep the server from exiting.

The reader blocks in `poll()` on the wire and a wake-up pipe, never in an uninterruptible read, so
`shutdown()` can always reach it. It runs on its own thread (`mcpsync-stdio-reader`, a daemon: a
tool may hold it forever); the thread that called `serve()` (or `start()`'s) waits for reading to
end and then closes, so a held reader never holds up the shutdown.

Server-to-client requests (handshake era only), and the request-scoped notifications, go through
each request's exchange (`_exchange`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import logging
import os
import select
import threading
from collections.abc import Callable
from typing import Any

import ujson

from ..._loop_turns import IDLE_LOOK, LoopBaton, LoopWatch
from ...engine.engine import Engine
from ...engine.interceptors import TransportInfo
from ...engine.outcome import Failure, NoResponse, Outcome, Subscribed, Success
from ...engine.session import Session
from ...protocol import jsonrpc
from ...protocol.framing import DEFAULT_MAX_FRAME_BYTES, TOO_LARGE, Frame, FrameSplitter
from ...protocol.jsonrpc import ErrorCode, Invalid, McpError, Message, Notification, Request, Response
from ...protocol.versions import HANDSHAKE_ERA, META_SUBSCRIPTION_ID, MODERN_ERA
from ..lifecycle.inflight import SHUTTING_DOWN, InFlight, answer_frame, shutting_down_frame
from ..lifecycle.load import Load
from ..lifecycle.subscriptions import (
    DEFAULT_SUBSCRIPTION_CAP,
    TASK_STATUS,
    Subscription,
    SubscriptionRegistry,
    complete_frame,
    tagged_frame,
    uri_covers,
)
from ._exchange import Asks, Exchange
from ._output import DEFAULT_WRITE_TIMEOUT as DEFAULT_WRITE_TIMEOUT  # re-exported: the default of Server and serve
from ._output import Output, drain_pipe

log = logging.getLogger("mcpsync")

STDIO = TransportInfo("stdio", supports_subscriptions=True, handshake_push=True)
READ_CHUNK = 1 << 16
# Decoded frames held back while a request that must finish first runs; past this, stop reading.
_MAX_PENDING = 1024


class StdioServer:
    """Serves one engine over a pair of file descriptors (newline-delimited JSON-RPC)."""

    # Slots: more than 30 attributes would make the instance's dict a plain one, and every
    # attribute read on the reader's path a dict look-up.
    __slots__ = (
        "_engine", "_read_fd", "_session", "_output", "_splitter", "_drain_timeout", "_shutdown_timeout",
        "_inflight", "_subscriptions", "_asks", "_closing", "_pending", "_blocking", "_on_stopped",
        "_on_notification", "_stop_requested", "_stop_future", "_stopped", "_clean", "_started", "_thread",
        "_reader", "_state_lock", "_wake_closed", "_reading", "_baton", "_watch", "_reading_ended", "_graceful",
        "_wake_r", "_wake_w", "_done_r", "_done_w",
    )

    def __init__(
        self,
        engine: Engine,
        read_fd: int,
        write_fd: int,
        *,
        workers: int = 16,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        drain_timeout: float = 30.0,
        shutdown_timeout: float = 5.0,
        write_timeout: float = DEFAULT_WRITE_TIMEOUT,
        on_stopped: Callable[[], None] | None = None,
        subscription_cap: int = DEFAULT_SUBSCRIPTION_CAP,
        on_notification: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._engine = engine
        self._read_fd = read_fd
        self._session = Session()
        self._output = Output(write_fd, self.request_shutdown, write_timeout=write_timeout, on_room=lambda: self._wake_reader(None))
        self._splitter = FrameSplitter(max_frame_bytes)
        self._drain_timeout = drain_timeout
        self._shutdown_timeout = shutdown_timeout
        self._inflight: InFlight[Exchange] = InFlight(workers, "mcpsync-worker")  # keyed by request id
        self._subscriptions = SubscriptionRegistry(subscription_cap)  # guarded by the output lock
        self._asks = Asks(self._output, self._session)  # the server's own requests, awaiting answers
        self._closing = False  # set under the output lock when shutdown begins
        self._wake_r, self._wake_w = os.pipe()  # shutdown requests (and signals) wake the reader
        self._done_r, self._done_w = os.pipe()  # so does a request it must wait for
        for fd in (self._wake_r, self._wake_w, self._done_r, self._done_w):
            os.set_blocking(fd, False)
        self._pending: collections.deque[Message] = collections.deque()
        self._blocking: concurrent.futures.Future[None] | None = None
        self._on_stopped = on_stopped
        self._on_notification = on_notification  # told the client's other notifications, on the reader thread
        self._stop_requested = threading.Event()
        self._stop_future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._stopped = threading.Event()
        self._clean = True
        self._started = False
        self._thread: threading.Thread | None = None  # start()'s: it waits for reading to end, then closes
        self._reader: threading.Thread | None = None
        self._state_lock = threading.RLock()
        self._wake_closed = False
        # The reader's: end of input not yet seen; which thread reads (`_read_at_home`, `_hand_over`).
        self._reading = True
        self._baton = LoopBaton(lambda: self._wake_reader(None))
        self._watch = LoopWatch(self._hand_over, "mcpsync-stdio-watch")
        self._reading_ended = threading.Event()
        self._graceful = False  # how reading ended: a shutdown (True) or end of input

    @property
    def session(self) -> Session:
        return self._session

    def load(self) -> Load:
        """The requests in flight and the listens open now; the connection's one session once
        initialized (the handshake era); the request workers taken."""
        inflight = self._inflight
        sessions = 1 if self._session.era is HANDSHAKE_ERA else 0
        return Load(len(inflight), len(self._subscriptions), sessions, busy=inflight.busy, workers=inflight.workers)

    def ask_client(self, method: str, params: dict[str, Any]) -> concurrent.futures.Future[dict[str, Any]]:
        """Send the client a request of this server's own, on behalf of no request (a gateway
        asking for the client's `roots/list` when an upstream asks outside any call). The future
        and the refusals are those of a tool's ask (`Exchange.ask`), save the request's own."""
        return self._asks.ask(None, method, params)

    def signal_wakeup(self) -> tuple[int, int]:
        """For `signal.set_wakeup_fd`: duplicates of the wake-up pipe's write end (its writes wake
        the reader, whichever thread the signal lands on) and of its read end (which keeps the pipe
        open). The caller owns both and closes them once it has put the previous wake-up fd back, so a
        signal that arrives after serving ended writes into a pipe still there, never a closed fd."""
        with self._state_lock:
            if self._wake_closed:
                raise RuntimeError("this StdioServer has stopped")
            return os.dup(self._wake_w), os.dup(self._wake_r)

    # -- running ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Serve on background threads (`mcpsync-stdio`, which starts the reader) and return at once."""
        self._claim_start()
        self._thread = threading.Thread(target=self._serve, name="mcpsync-stdio")
        self._thread.start()

    def serve(self) -> bool:
        """Serve on the calling thread until end of input or shutdown.

        Returns True when every request finished in time; False when some were still running at the
        deadline (their threads are left to finish: Python cannot stop a thread).
        """
        self._claim_start()
        self._serve()
        return self._clean

    def request_shutdown(self) -> None:
        """Ask for a graceful shutdown without waiting; safe from signal handlers and any thread."""
        self._stop_requested.set()
        self._output.stop_waiting()  # a caller waiting for room in a full queue must not hold the shutdown up
        try:
            self._stop_future.set_result(None)  # wakes a drain after end of input: stop waiting for it
        except concurrent.futures.InvalidStateError:
            pass
        with self._state_lock:  # re-entrant: a signal handler may interrupt this very thread
            if not self._wake_closed:
                try:
                    os.write(self._wake_w, b"x")
                except OSError:
                    pass  # the pipe is full: the reader has been woken already

    def shutdown(self, timeout: float | None = None) -> bool:
        """Graceful shutdown from any thread. True once everything has stopped and every request
        finished in time; False if serving is still ending or requests outlived the deadline."""
        self.request_shutdown()
        if not self._started or threading.current_thread() in (self._thread, self._reader):
            return self._stopped.is_set()
        budget = (timeout if timeout is not None else self._shutdown_timeout) + 1.0
        stopped = self._stopped.wait(budget)
        if self._thread is not None:
            self._thread.join(max(0.0, budget))
        return stopped and self._clean

    def wait(self, timeout: float) -> bool:
        """Wait until serving has ended; True if it has."""
        return self._stopped.wait(timeout)

    def _claim_start(self) -> None:
        with self._state_lock:
            if self._started:
                raise RuntimeError("this StdioServer has already been started")
            self._started = True

    # -- the reader ------------------------------------------------------------------------------
    def _serve(self) -> None:
        """Start the reader, wait until reading has ended (on whichever thread read last), close.
        This thread runs no request, so it closes on time even while a tool holds the reader."""
        observed = self._engine.session_began(STDIO)
        self._watch.start()
        try:
            self._reader = threading.Thread(target=self._read_at_home, name="mcpsync-stdio-reader", daemon=True)
            self._reader.start()
            while not self._reading_ended.wait(IDLE_LOOK):
                pass
        finally:
            if not self._reading_ended.is_set():  # this thread failed: never close under a running reader
                self.request_shutdown()
                self._reading_ended.wait(self._shutdown_timeout + 1.0)
            self._watch.stop()
            self._close(self._graceful)
            if observed is not None:
                observed.end(self._session, None)

    def _read_at_home(self) -> None:
        """The reader thread: read, and while a worker reads in its place (a request held this
        thread past the watch's limit), wait to take the reading back."""
        epoch: int | None = 0
        while epoch is not None and not self._read_while(epoch):
            epoch = self._baton.take_back()

    def _hand_over(self) -> None:
        """The watch's call: a request holds the reader, so a worker reads meanwhile. There is
        always a free one: the reader runs a request itself only while one is (`_runs_here`), and
        nothing else submits work. The answers held back for one write (`Output.cork`) go now."""
        self._output.uncork()
        epoch = self._baton.lend(lambda: self._inflight.has_room)
        if epoch is None:
            return
        log.debug("stdio: a request held the reader for %g s; a worker reads meanwhile", self._watch.limit)
        try:
            self._inflight.submit(self._read_borrowed, epoch)
        except RuntimeError:  # the executor has stopped: reading has ended
            self._baton.give_back(epoch)

    def _read_borrowed(self, epoch: int) -> None:
        """A worker reads until the reader thread waits to take the reading back, or reading ends."""
        self._baton.borrow(epoch, lambda: self._read_while(epoch, borrowed=True))

    def _read_while(self, epoch: int, *, borrowed: bool = False) -> bool:
        """Read while the reading is `epoch`'s; True once reading has ended for good."""
        try:
            graceful = self._read_loop(epoch, borrowed)
        except Exception:
            log.exception("stdio reader failed; shutting down")
            self.request_shutdown()
            if self._baton.epoch != epoch:  # another thread reads: it sees the shutdown
                return False
            graceful = True
        if graceful is None:
            return self._baton.ended
        self._graceful = graceful
        self._baton.end()
        self._reading_ended.set()
        return True

    def _read_loop(self, epoch: int, borrowed: bool) -> bool | None:
        """Read until end of input (returns False) or a shutdown request (returns True); None
        once another thread reads (a hand-over) or, `borrowed`, once the reader thread waits to
        take the reading back.

        Decoded messages wait in `_pending` while a request that must finish first is running;
        the reader keeps polling meanwhile, so a shutdown and a `notifications/cancelled` are
        still seen at once (the cancel is handled on arrival, the rest waits its turn).
        """
        baton = self._baton
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        poller.register(self._done_r, select.POLLIN)
        listening = False
        while baton.epoch == epoch and not baton.ended:
            if len(self._pending) > 1 and self._blocking is None:
                self._output.cork()  # what this read brought is answered in one write
            try:
                while self._pending and self._blocking is None:
                    self._dispatch(self._pending.popleft())
                    if baton.epoch != epoch:
                        return None  # a request held this thread: the rest is the new reader's
            finally:
                self._output.uncork()
            if borrowed and baton.home_waiting:
                return None
            if self._stop_requested.is_set():
                return True
            if not self._reading and self._blocking is None and not self._pending:
                return False
            # A full backlog of frames, or of output the client has not read, stops reading until it drains.
            want_input = self._reading and len(self._pending) < _MAX_PENDING and not self._output.backlogged
            if want_input != listening:
                if want_input:
                    poller.register(self._read_fd, select.POLLIN | select.POLLHUP | select.POLLERR)
                else:
                    poller.unregister(self._read_fd)
                listening = want_input
            ready = {fd for fd, _ in poller.poll(IDLE_LOOK * 1000)}
            if baton.epoch != epoch:
                return None  # the watch lent the reading on just as a held request ended
            if self._stop_requested.is_set():
                return True
            if self._wake_r in ready:  # a signal (its handler has run by now) or a late wake-up
                drain_pipe(self._wake_r)
                if self._stop_requested.is_set():
                    return True
            if self._done_r in ready:
                drain_pipe(self._done_r)
            if self._blocking is not None and self._blocking.done():
                self._blocking = None
            if self._read_fd in ready:
                self._reading = self._read_some()
        return None

    def _read_some(self) -> bool:
        """Read what is there and decode it; False at end of input."""
        try:
            data = os.read(self._read_fd, READ_CHUNK)
        except BlockingIOError:
            return True
        except OSError as exc:
            log.info("input closed (%s)", exc.strerror or exc)
            data = b""
        frames = self._splitter.feed(data) if data else self._splitter.finish()
        for frame in frames:
            self._take(frame)
        return bool(data)

    def _take(self, frame: Frame) -> None:
        """Decode one frame; cancellations and responses act now, everything else queues in arrival order."""
        if frame is TOO_LARGE:
            self._pending.append(Invalid(McpError(ErrorCode.INVALID_REQUEST, "Invalid Request: frame too large")))
            return
        message = jsonrpc.decode(frame)
        if isinstance(message, Notification):
            self._engine.notified(message, self._session, STDIO)
            if message.method == "notifications/cancelled":
                self._cancel(message.params.get("requestId"))
                return
        elif isinstance(message, Response):  # a tool may be waiting for it: never queue it
            self._asks.route(message)
            return
        self._pending.append(message)

    def _dispatch(self, message: Message) -> None:
        if isinstance(message, Request):
            self._accept_request(message)
        elif isinstance(message, Invalid):
            if message.answer:
                self._send(jsonrpc.error_frame(message.answer_id, message.error))
        elif isinstance(message, Notification) and self._on_notification is not None:
            try:  # initialized, roots/list_changed, ...: a gateway tells its upstreams (never waiting)
                self._on_notification(message.method, message.params)
            except Exception:
                log.exception("the on_notification callback failed on %s", message.method)

    def _accept_request(self, request: Request) -> None:
        exchange = Exchange(request, self._output, self._asks)
        if request.id in self._subscriptions or not self._inflight.add(request.id, exchange):
            error = McpError(ErrorCode.INVALID_REQUEST, "Invalid Request: a request with this id is already in flight")
            self._send(jsonrpc.error_frame(request.id, error))
            return
        finish_first = self._must_finish_first(request)
        if self._runs_here(request, finish_first):
            turn = self._watch.begin()
            try:
                self._execute(request, exchange)
            finally:
                self._watch.end(turn)
        elif self._engine.forwards_at_once(request):
            self._execute(request, exchange)  # here: it only sends the call upstream
        else:
            try:
                exchange.future = self._inflight.submit(self._execute, request, exchange)
            except RuntimeError:  # the executor is shutting down
                self._inflight.settle(request.id, exchange)
                return
        if finish_first:
            self._blocking = exchange.answered
            exchange.answered.add_done_callback(self._wake_reader)

    def _runs_here(self, request: Request, finish_first: bool) -> bool:
        """Whether the reader runs `request` itself: the engine answers it at once, nothing must
        wait for it (it is not an era's first), and a worker is free to read in its place should
        it hold the reader after all. (So a quick request may be answered before a slower one read
        earlier, as it could when both went to workers; JSON-RPC matches answers by id. Waiting
        for the workers to be idle instead kept every request on them for as long as a pipelined
        client kept one there: half the throughput at concurrency 16.)"""
        return not finish_first and self._engine.answers_at_once(request) and self._inflight.has_room

    def _must_finish_first(self, request: Request) -> bool:
        method = request.method
        return (
            method == "initialize"
            or method == "subscriptions/listen"
            or (self._session.era is None and self._engine.is_era_distinctive(request))
        )

    def _wake_reader(self, _future: object) -> None:
        with self._state_lock:
            if not self._wake_closed:
                try:
                    os.write(self._done_w, b"x")
                except OSError:
                    pass  # the pipe is full: the reader will look anyway

    def _cancel(self, request_id: Any) -> None:
        if not jsonrpc.is_request_id(request_id):
            return
        with self._output.lock:
            if self._subscriptions.remove(request_id):
                return
        exchange = self._inflight.get(request_id)
        if exchange is None:
            self._drop_pending(request_id)
            return
        if exchange.method == "initialize":
            return
        with self._output.lock:
            exchange.cancelled_by_client = True
        exchange.cancel()
        if exchange.future is not None and exchange.future.cancel():
            with self._output.lock:
                self._inflight.settle(request_id, exchange)
            exchange.finish()

    def _drop_pending(self, request_id: Any) -> None:
        """A request cancelled before it started is never run and never answered."""
        for message in self._pending:
            if isinstance(message, Request) and message.id == request_id and type(message.id) is type(request_id):
                if message.method != "initialize":
                    self._pending.remove(message)
                return

    # -- workers ---------------------------------------------------------------------------------
    def _execute(self, request: Request, exchange: Exchange) -> None:
        self._engine.execute_to(request, self._session, exchange, STDIO, functools.partial(self._complete, request, exchange))

    def _complete(self, request: Request, exchange: Exchange, outcome: Outcome) -> None:
        if isinstance(outcome, Subscribed):
            self._activate(request, exchange, outcome)
            return
        frame = self._encode_outcome(request, outcome)
        if frame is not None:
            self._output.wait_for_room(len(frame))  # outside the lock; an answer goes in either way
        with self._output.lock:
            if self._end_locked(request.id, exchange) and frame is not None and not exchange.cancelled_by_client:  # noqa: SIM102 - the inner test writes
                if self._output.write_locked(frame) and isinstance(outcome, Success) and outcome.claims is not None:
                    self._session.commit_era(outcome.claims)
        exchange.finish()

    def _end_locked(self, request_id: Any, exchange: Exchange) -> bool:
        """Under the output lock: the request leaves the in-flight table and nothing more of it
        (no notification) may be written. False when it had ended already: the shutdown answered
        it past its deadline, so what it returns now is dropped."""
        first = self._inflight.settle(request_id, exchange)
        exchange.done = True
        return first

    def _activate(self, request: Request, exchange: Exchange, outcome: Subscribed) -> None:
        """Register an accepted listen and write its acknowledgement in one critical section."""
        ack = jsonrpc.encode(
            jsonrpc.notification_frame(
                "notifications/subscriptions/acknowledged",
                {"_meta": {META_SUBSCRIPTION_ID: request.id}, "notifications": outcome.accepted},
            )
        )
        with self._output.lock:
            if self._end_locked(request.id, exchange):
                self._register_listen(Subscription(request.id, outcome.accepted, stamp=outcome.stamp), ack, exchange.cancelled_by_client)
        exchange.finish()

    def _register_listen(self, subscription: Subscription, ack: bytes, cancelled: bool) -> None:
        """Under the output lock: register and acknowledge, or answer at once if that is impossible."""
        if cancelled:
            return
        if self._closing:  # never leave a listen registered during shutdown
            self._output.write_locked(self._listen_complete_frame(subscription.id))
            return
        try:
            self._subscriptions.add(subscription)
        except McpError as exc:
            self._output.write_locked(jsonrpc.encode(jsonrpc.error_frame(subscription.id, exc)))
            return
        if self._output.write_locked(ack):
            self._session.commit_era(MODERN_ERA)

    def _listen_complete_frame(self, subscription_id: Any) -> bytes:
        return complete_frame(subscription_id, self._engine.server_info)

    def _encode_outcome(self, request: Request, outcome: Outcome) -> bytes | None:
        if isinstance(outcome, NoResponse):
            return None
        assert isinstance(outcome, (Success, Failure))
        return answer_frame(request, outcome)[0]

    def _send(self, message: dict[str, Any]) -> None:
        self._output.write(jsonrpc.encode(message))

    # -- list changes ----------------------------------------------------------------------------
    def publish_list_changed(self, kinds: frozenset[str], origin: str = "local") -> None:
        """Tell this connection's client that lists changed, in the form its era expects: untagged
        after `initialize`, then one tagged copy per subscription that asked for the kind. Wherever
        the change was made (`origin`): this client has no other replica to hear it from."""
        methods = [(kind, f"notifications/{kind}/list_changed") for kind in sorted(kinds)]
        untagged = [jsonrpc.encode(jsonrpc.notification_frame(method)) for _, method in methods]
        if not self._output.wait_for_room(sum(map(len, untagged)) * (1 + len(self._subscriptions))):
            return  # shutting down with the client not reading: a notification is dropped
        with self._output.lock:
            for (kind, method), plain in zip(methods, untagged, strict=True):
                if self._session.initialized:
                    self._output.write_locked(plain)
                for subscription in self._subscriptions.for_kind(kind):
                    self._output.write_locked(tagged_frame(method, subscription, {}))

    def publish_resource_updated(self, uri: str, origin: str = "local") -> None:
        """Tell this connection's client that a resource it subscribed to (or one under it) changed."""
        method, params = "notifications/resources/updated", {"uri": uri}
        plain = jsonrpc.encode(jsonrpc.notification_frame(method, params))
        handshake_wants = any(uri_covers(subscribed, uri) for subscribed in self._session.resource_subscriptions())
        if not self._output.wait_for_room(len(plain) * (1 + len(self._subscriptions))):
            return  # shutting down with the client not reading: a notification is dropped
        with self._output.lock:
            if self._session.initialized and handshake_wants:
                self._output.write_locked(plain)
            for subscription in self._subscriptions.for_uri(uri):
                self._output.write_locked(tagged_frame(method, subscription, params))

    def publish_task_status(self, task_id: str, params: dict[str, Any], origin: str = "local") -> None:
        """Tell this connection's listens that asked for the task (`notifications/tasks`)."""
        if not self._output.wait_for_room(len(ujson.dumps(params)) * max(1, len(self._subscriptions))):
            return  # shutting down with the client not reading: a notification is dropped
        with self._output.lock:
            for subscription in self._subscriptions.for_task(task_id):
                self._output.write_locked(tagged_frame(TASK_STATUS, subscription, params))

    # -- stopping --------------------------------------------------------------------------------
    def _refuse_held_back(self) -> None:
        """The frames read but held back behind a request that had to finish first will never be
        dispatched: answer each request among them -32603 (a malformed frame its own error, as
        dispatching it would have), so none goes unanswered. Empty after end of input, which
        dispatches everything first."""
        while self._pending:
            message = self._pending.popleft()
            if isinstance(message, Request):
                self._output.write(shutting_down_frame(message.id))
            else:
                self._dispatch(message)

    def _answer_unfinished(self) -> None:
        """Past the deadline: answer -32603 every request still in flight (running, queued for a
        worker, or waiting for an upstream) that the client did not cancel. Each answer is written
        under the output lock only if the request had not ended meanwhile (`_end_locked`), so it is
        the request's one answer, and what the request returns later is dropped."""
        left = self._inflight.unsettled()
        frames = [shutting_down_frame(request_id) for request_id, _ in left]
        with self._output.lock:
            for (request_id, exchange), frame in zip(left, frames, strict=True):
                if self._end_locked(request_id, exchange) and not exchange.cancelled_by_client:
                    self._output.write_locked(frame)
        for _, exchange in left:
            exchange.finish()

    def _close(self, graceful: bool) -> None:
        self._output.stop_waiting()  # the last answers go in whatever the client reads
        with self._output.lock:
            self._closing = True
            for subscription in self._subscriptions.drain():
                if graceful:  # end of input drops them silently
                    self._output.write_locked(self._listen_complete_frame(subscription.id))
        self._asks.close(SHUTTING_DOWN if graceful else "the connection closed")
        self._refuse_held_back()
        # Let running requests end: all the drain time after end of input, or, once shutdown is
        # asked for (now or during the drain), cancelled and given the shutdown time.
        if graceful:
            still_running = self._inflight.drain(self._shutdown_timeout)
        else:
            still_running = self._inflight.drain(self._drain_timeout, stop=self._stop_future, grace=self._shutdown_timeout)
        self._inflight.stop_workers(clean=not still_running)
        if still_running:
            self._clean = False
            log.warning("%d request(s) still running after the shutdown deadline; their threads are left to finish", still_running)
            self._answer_unfinished()
        self._output.finish(self._shutdown_timeout)  # the last answers, read by the client or not
        with self._state_lock:
            self._wake_closed = True
            for fd in (self._wake_r, self._wake_w, self._done_r, self._done_w):
                os.close(fd)
        if self._on_stopped is not None:
            try:
                self._on_stopped()
            except Exception:
                log.exception("stdio on_stopped callback failed")
        self._stopped.set()
