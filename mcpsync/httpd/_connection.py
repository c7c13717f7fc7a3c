"""One client connection of `WsgiServer`: held by the poller while it waits, by one worker while
something is to be done.

Why: a connection that waits (for the rest of a slow head, for its next request, for the next
event of its stream, for room to write) costs a file descriptor, never a thread, so thousands of
idle clients and open streams cannot take the server's workers (`--threads`) from the requests.

Ownership: at any moment a connection is ARMED (in the poller, which reports it once) or BUSY
(one worker runs `_step`), or CLOSED. Whoever moves it from ARMED to BUSY (`_claim`: the loop on
readiness or a deadline, a producer waking a parked stream) submits the step; the worker gives it
back with `_park`, which arms the poller again, unless a wake came in the meantime. So no two
threads ever touch a connection's parser, buffers or socket at once, and no event is lost.

A step reads what has arrived, serves every complete request (the application runs on the
worker, and ordinary responses are written there, waiting for room up to the write timeout), and
parks with the next deadline. The loop thread itself takes the step of a connection the poller
reported (`take_turn_here`) and serves the requests the application answers at once
(`answers_at_once`); at the first other one it hands the rest of the step to a worker, the
request still first in line. The deadlines: the head's total deadline, the body's (its rate floor, within a
fixed cap), the keep-alive timeout, or a stream's next keep-alive or request deadline. A
`Parkable` body (an event stream) is written without blocking: what the socket does not take
waits in the connection's buffer, and no more is taken from the body until it drains; a client
that takes nothing for `timeout` seconds is dropped. Closing a stream's body is how the
transport learns that its client went away. What the client sends behind an open stream is not
parsed until the stream ends (`PIPELINED_BYTES` of it kept), so no head behind a stream takes a
share of the body budget while the stream lasts, when no deadline of its body runs.

The head first: once a request's head is whole, and before any of its body is read or
`100 Continue` sent, it becomes the request's environ, and a request that announces a body goes
to the server's `head_check` (the application's authentication, say). An answer from it is sent
instead, with `Connection: close`, and the body is never read: the connection lingers, dropping
what the client still sends. So a caller the application refuses costs no body buffer.
"""

from __future__ import annotations

import io
import logging
import select
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol, cast

from ._budget import BodyBudget
from ._parse import ParsedRequest, Refusal, RequestHead, RequestReader
from ._poller import READ, WRITE, Poller
from ._response import BadResponse, Clock, Parkable, Response, _Gone, check_sendable, closing_response, plain_response
from .options import AnswersAtOnce, HeadCheck, WsgiApp, environ_key

log = logging.getLogger("mcpsync")

RESPOND_NOW = "mcpsync.respond_now"
"""The environ key of `Response.respond_now`: (status, headers, body) -> whether it was written."""
RECV_SIZE = 65536
NEXT_REQUEST_WAIT = 0.002
"""Seconds a worker that has just answered waits on its connection for the next request, when
another worker is free, before giving the connection back to the poller: a client in a
request-answer loop sends its next one within this, and is then served without the two thread
hand-offs (loop, worker) a parked connection costs. Never after a partial request, and never
where the loop serves requests itself (`answers_at_once`): there the next one is likely the
loop's, and workers waiting beside it would only contend with it for the interpreter."""
HIGH_WATER = 256 * 1024
"""Bytes of a stream waiting to be sent past which no more is taken from its body."""
PIPELINED_BYTES = 16 * 1024
"""Bytes a client may send behind an open stream (pipelined requests, which no MCP client sends)
that are kept, unparsed, until the stream ends; past it what it sends is dropped, and the
connection ends with the stream."""
_ARMED, _BUSY, _CLOSED = 0, 1, 2
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class Host(Protocol):
    """What a connection needs of the server that holds it (`WsgiServer` is one): its settings,
    its clock and poller, its workers and timers, and where a closing connection goes. A protocol,
    so the connection names no server class and the server imports the connection, not the other
    way round."""

    app: WsgiApp
    head_check: HeadCheck | None
    answers_at_once: AnswersAtOnce | None
    timeout: float
    idle_timeout: float
    min_body_rate: float
    body_timeout: float
    max_body_bytes: int
    body_budget: BodyBudget
    base_environ: dict[str, Any]
    clock: Clock
    poller: Poller

    @property
    def stopping(self) -> bool: ...

    @property
    def workers_to_spare(self) -> bool: ...

    def submit(self, job: Any) -> bool: ...

    def schedule(self, connection: Connection, due: float) -> None: ...

    def release(self, connection: Connection) -> None: ...

    def linger(self, sock: socket.socket) -> None: ...


class _Stream:
    __slots__ = ("response", "body", "ended")

    def __init__(self, response: Response, body: Parkable) -> None:
        self.response = response
        self.body = body
        self.ended = False


class Connection:
    """One client connection (see the module's docstring for who holds it when)."""

    def __init__(self, server: Host, sock: socket.socket, address: Any, now: float) -> None:
        self._server = server
        self._sock = sock
        self.fd = sock.fileno()
        self._lock = threading.Lock()
        self._state = _ARMED
        self._wake_pending = False
        self._reader = RequestReader(server.max_body_bytes, self._on_head, server.body_budget)
        # The peer's address, not an environ of its own: a copy per connection would cost 450
        # bytes each of ten thousand parked streams; two stores per request cost nothing.
        self._remote = (str(address[0]), str(address[1]) if len(address) > 1 else "")
        self._served = 0
        self._idle_since = now
        self._request_began: float | None = None
        self._body_began: float | None = None
        self._eof = False
        self._stream: _Stream | None = None
        self._out = bytearray()  # a stream's bytes the socket has not taken yet
        self._pipelined: bytearray | None = bytearray()  # sent behind the open stream; None: dropped
        self._last_progress = now
        self.deadline: float | None = None  # when a parked connection is due (the server's timers)
        self.scheduled_at: float | None = None  # its earliest live timer (guarded by the server's timer lock)
        self._response: Response | None = None
        self._waiter: select.poll | None = None  # for the next request, right after an answer

    # -- taking it: the loop, a waking producer, stop() -------------------------------------------
    def _claim(self) -> bool:
        with self._lock:
            if self._state != _ARMED:
                return False
            self._state = _BUSY
            return True

    def take_turn(self) -> None:
        """Its deadline passed (loop thread), or the loop passes it on: a worker steps it."""
        if self._claim():
            self._submit()

    def take_turn_here(self) -> None:
        """The poller reported it (loop thread): step it here, serving what the application
        answers at once, and handing the rest of the step to a worker at the first other request."""
        if self._claim():
            self._step(on_loop=True)

    def wake(self) -> None:
        """A parked stream's body has something (any thread)."""
        with self._lock:
            if self._state == _BUSY:
                self._wake_pending = True
                return
            if self._state != _ARMED:
                return
            self._state = _BUSY
        self._submit()

    def _submit(self) -> None:
        if not self._server.submit(self._step):
            self._close()  # the pool is closed: the server is stopping

    def close_if_waiting(self, *, streams: bool) -> None:
        """stop(): close it now unless a worker holds it, or (unless `streams`) it is a stream's,
        which may still have its last events to send."""
        if (streams or self._stream is None) and self._claim():
            self._close()

    def cut(self) -> None:
        """stop(), past its deadline: make the worker's next read or write fail."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    @property
    def answered_elsewhere(self) -> bool:
        response = self._response
        return response is not None and response.answered_elsewhere

    # -- what a Response writes through (the Writer protocol) -----------------------------------
    @property
    def stopping(self) -> bool:
        return self._server.stopping

    def date_header(self) -> bytes:
        return self._server.clock.header()

    def send_all(self, data: bytes) -> None:
        """Send it all, waiting for room; no progress for `timeout` seconds is `_Gone`."""
        view = memoryview(data)
        timeout = self._server.timeout
        poller: select.poll | None = None
        while view:
            try:
                sent = self._sock.send(view)
            except BlockingIOError:
                if poller is None:
                    poller = select.poll()
                    poller.register(self.fd, select.POLLOUT)
                if not poller.poll(timeout * 1000):
                    raise _Gone(f"the client took nothing for {timeout:g} s") from None
                continue
            except OSError as exc:
                raise _Gone(str(exc)) from exc
            view = view[sent:]

    def shutdown_write(self) -> None:
        self._sock.shutdown(socket.SHUT_WR)

    # -- a worker's turn --------------------------------------------------------------------------
    def _step(self, on_loop: bool = False) -> None:
        try:
            again = True
            while again:
                again = self._step_stream() if self._stream is not None else self._step_requests(on_loop)
        except Refusal as refusal:
            self._refuse(refusal.status, str(refusal), refusal.headers, refusal.response)
        except (_Gone, OSError):
            self._close()
        except Exception:
            log.exception("HTTP connection failed")
            self._close()

    def _step_requests(self, on_loop: bool) -> bool:
        """Read, serve what is complete, park; True to step again at once (a wake came). On the
        loop thread (`on_loop`), a request the application does not answer at once goes, with the
        rest of the step, to a worker (False: the connection is the worker's now)."""
        reader = self._reader
        if not reader.ready and not self._read_available():
            return False
        while reader.ready:
            if on_loop and not self._answers_at_once(reader.ready[0]):
                self._submit()
                return False
            self._request_began = self._body_began = None
            if not self._serve(reader.ready.pop(0)):
                return self._stream is not None  # a stream began: its first step
            if not on_loop and not reader.ready and not reader.in_request and self._next_request_soon():
                return True
        if reader.refusal is not None:
            raise reader.refusal
        if self._eof or reader.stopped or (self._server.stopping and not reader.in_request):
            self._close_gracefully()
            return False
        if reader.wants_continue:
            reader.wants_continue = False
            self.send_all(_CONTINUE)
        now = time.monotonic()
        if reader.in_request:
            if self._request_began is None:
                self._request_began = now
            if reader.in_body:
                if self._body_began is None:
                    self._body_began = now
                allowance = self._server.timeout + reader.body_size / self._server.min_body_rate
                deadline = self._body_began + min(allowance, self._server.body_timeout)
            else:
                deadline = self._request_began + self._server.timeout
            if now >= deadline:
                raise Refusal(408, "the request did not arrive in time")
        else:
            deadline = self._idle_since + (self._server.idle_timeout if self._served else self._server.timeout)
            if now >= deadline:
                self._close()  # nothing was asked: nothing to answer
                return False
        return self._park(READ, deadline)

    def _answers_at_once(self, request: ParsedRequest) -> bool:
        check = self._server.answers_at_once
        if check is None:
            return False
        try:
            return check(request.environ, request.body)
        except Exception:
            log.exception("the application's answers_at_once failed on %s %s", request.head.method, request.head.path)
            return False

    def _next_request_soon(self) -> bool:
        """Wait up to `NEXT_REQUEST_WAIT` for the client's next bytes, if a worker is to spare
        and the loop does not serve requests itself."""
        if self._server.answers_at_once is not None or not self._server.workers_to_spare:
            return False
        if self._waiter is None:
            self._waiter = select.poll()
            self._waiter.register(self.fd, select.POLLIN)
        return bool(self._waiter.poll(NEXT_REQUEST_WAIT * 1000))

    def _read_available(self) -> bool:
        """Feed what has arrived to the parser; False if the connection closed."""
        for _ in range(16):  # at most 1 MiB a turn: the other connections get theirs
            try:
                data = self._sock.recv(RECV_SIZE)
            except BlockingIOError:
                return True
            except OSError:
                self._close()
                return False
            if not data:
                if self._reader.ready:  # a client that half-closes after its request is still answered
                    self._eof = True
                    return True
                self._close()
                return False
            self._reader.feed(data)
            if self._reader.ready or len(data) < RECV_SIZE:
                return True
        return True

    def _serve(self, request: ParsedRequest) -> bool:
        """Run the application for one request and write its answer; True if the connection
        stays with this worker for the next request. Its body's budget is given back after."""
        try:
            return self._run(request)
        finally:
            self._reader.settle(request)

    def _run(self, request: ParsedRequest) -> bool:
        environ = request.environ
        if request.head.chunked:
            environ["CONTENT_LENGTH"] = str(len(request.body))  # the whole body is here: say its size
        environ["wsgi.input"] = io.BytesIO(request.body)
        keep_alive = request.keep_alive and not self._eof
        response = self._response = Response(self, environ, keep_alive)
        environ[RESPOND_NOW] = response.respond_now
        self._served += 1
        try:
            result = self._server.app(environ, response.start_response)
        except _Gone:
            self._close()
            return False
        except Exception:
            log.exception("the WSGI application failed on %s %s", request.head.method, request.head.path)
            self._fail(response)
            return False
        if type(result) is not list and hasattr(result, "park") and not response.started:  # a Parkable
            response.claim()
            if self._reader.ready or self._reader.in_request:
                # pipelined behind it in the same read, and parsed (its budget taken) already: it
                # would hold that for the stream's life, so it is dropped and its budget given back
                self._reader.close()
                self._pipelined = None
                response.keep_alive = False  # the stream's head says so: the connection ends with it
            self._stream = _Stream(response, cast(Parkable, result))
            self._last_progress = time.monotonic()
            return False
        try:
            response.write_all(result)
        except _Gone:
            self._close()
            return False
        except BadResponse as exc:
            log.error("the WSGI application's response to %s %s cannot be sent: %s", request.head.method, request.head.path, exc)
            self._fail(response)
            return False
        except Exception:
            log.exception("the WSGI application failed while answering %s %s", request.head.method, request.head.path)
            self._fail(response)
            return False
        finally:
            _close_body(result)
        if not response.keep_alive:
            self._close_gracefully()
            return False
        self._idle_since = time.monotonic()
        return True

    def _fail(self, response: Response) -> None:
        """The application failed: a 500 if nothing was sent yet, and the connection ends."""
        if not response.started and not response.answered_elsewhere:
            self._refuse(500, "internal server error")
        else:
            self._close()

    def _on_head(self, head: RequestHead) -> dict[str, Any]:
        """The reader has a whole head: its environ, once the server's `head_check` (for a request
        with a body) has let it through; its answer otherwise, as a `Refusal` that ends the
        connection before the body is read."""
        environ = self._environ_for(head)
        check = self._server.head_check
        if check is None or not head.has_body:
            return environ
        try:
            answer = check(environ)
            if answer is None:
                return environ
            status, headers, body = answer
            check_sendable(status, headers)
            code = int(status[:3])
        except Exception:
            log.exception("the head check failed on %s %s", head.method, head.path)
            raise Refusal(500, "internal server error") from None
        response = closing_response(status, headers, body, self._server.clock.header(), head_only=head.method == "HEAD")
        raise Refusal(code, "refused at its head", response=response)

    def _environ_for(self, head: RequestHead) -> dict[str, Any]:
        """The WSGI environ of a request's head; its body (`wsgi.input`) is set once it is read."""
        environ = dict(self._server.base_environ)
        environ["REMOTE_ADDR"], environ["REMOTE_PORT"] = self._remote
        environ["REQUEST_METHOD"] = head.method
        environ["SERVER_PROTOCOL"] = head.version
        environ["PATH_INFO"] = head.path
        environ["QUERY_STRING"] = head.query
        for name, value in head.headers:
            if "_" in name:
                continue  # an underscore would pose as a dash in the environ: dropped, as gunicorn does
            key = environ_key(name)
            previous = environ.setdefault(key, value)
            if previous is not value:  # a field sent twice: one value, as RFC 9110 joins them
                environ[key] = f"{previous}, {value}"
        environ["wsgi.input"] = io.BytesIO()  # the head check sees no body
        return environ

    # -- a stream ---------------------------------------------------------------------------------
    def _step_stream(self) -> bool:
        """Write what the stream has, then park until it has more, the socket has room, or a
        keep-alive is due; True to step again at once."""
        stream = self._stream
        assert stream is not None
        now = time.monotonic()
        self._flush(now)
        if self._peer_closed():
            self._close()  # which closes the stream's body too
            return False
        while not stream.ended and len(self._out) < HIGH_WATER:
            self._wake_pending = False
            try:
                piece = stream.body.take(now)
            except StopIteration:
                stream.ended = True
                self._out += stream.response.ending()
                break
            if piece is None:
                break
            if not self._out:
                self._last_progress = now  # the stall clock runs from the first byte that waits
            self._out += stream.response.frame(piece)
        self._flush(now)
        if stream.ended and not self._out:
            keep_alive = stream.response.keep_alive and self._pipelined is not None
            self._end_stream()
            if not keep_alive:
                self._close_gracefully()
                return False
            self._idle_since = now
            pipelined, self._pipelined = self._pipelined, bytearray()
            if pipelined:  # parsed only now, so a body behind the stream is budgeted, and timed, from now
                self._reader.feed(bytes(pipelined))
            return True  # on to the next request
        if self._out and now - self._last_progress >= self._server.timeout:
            log.info("HTTP: dropped a stream whose client took nothing for %g s", self._server.timeout)
            raise _Gone("the client stopped reading")
        due = None if stream.ended else stream.body.park(self.wake)
        if self._out:
            stall = self._last_progress + self._server.timeout
            due = stall if due is None else min(due, stall)
        if due is not None and due <= now:
            return True
        return self._park(READ | (WRITE if self._out else 0), due)

    def _flush(self, now: float) -> None:
        while self._out:
            try:
                sent = self._sock.send(self._out)
            except BlockingIOError:
                return
            except OSError as exc:
                raise _Gone(str(exc)) from exc
            del self._out[:sent]
            self._last_progress = now

    def _peer_closed(self) -> bool:
        """While a stream is open, its end of file means the client went away; what it sends
        before that (pipelined requests) is kept unparsed, up to `PIPELINED_BYTES`, for when the
        stream ends. Why not parsed now: a head parsed takes its body's share of the server's
        budget, and the body's deadlines run only between streams, so a request pipelined behind
        a stream (and its body never sent) would hold that share for the stream's life."""
        try:
            data = self._sock.recv(RECV_SIZE)
        except BlockingIOError:
            return False
        except OSError:
            return True
        if not data:
            return True
        pipelined = self._pipelined
        if pipelined is not None:
            if len(pipelined) + len(data) <= PIPELINED_BYTES:
                pipelined += data
            else:
                log.info("HTTP: a client sent more than %d bytes behind an open stream; dropped, and closing when the stream ends", PIPELINED_BYTES)
                self._pipelined = None
        return False

    def _end_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            _close_body(stream.body)

    # -- handing it back, or ending it ------------------------------------------------------------
    def _park(self, events: int, due: float | None) -> bool:
        """Give the connection back to the poller until `events` or `due`; False when parked,
        True when a wake came meanwhile (the caller steps again)."""
        with self._lock:
            if self._wake_pending:
                self._wake_pending = False
                return True
            if self._server.stopping and self._stream is None and not self._reader.in_request:
                self._state = _CLOSED
                closing = True
            else:
                self._state = _ARMED
                self.deadline = due
                closing = False
        if closing:
            self._release()
            return False
        if due is not None:
            self._server.schedule(self, due)
        self._server.poller.arm(self.fd, events)
        return False

    def _refuse(self, status: int, why: str, headers: Iterable[tuple[str, str]] = (), response: bytes | None = None) -> None:
        """Answer an HTTP-level refusal (or the whole `response` given) and close, without a
        reset that would lose the answer."""
        self._end_stream()
        if response is None:
            response = plain_response(status, why, self._server.clock.header(), headers)
        try:
            self.send_all(response)
        except (_Gone, OSError):
            self._close()
            return
        self._close_gracefully()

    def _close_gracefully(self) -> None:
        with self._lock:
            self._state = _CLOSED
        self._reader.close()
        self._server.poller.forget(self.fd)
        self._server.release(self)  # first: the loop then takes the descriptor as a lingering one
        self._server.linger(self._sock)

    def _close(self) -> None:
        with self._lock:
            self._state = _CLOSED
        self._end_stream()
        self._release()

    def _release(self) -> None:
        self._reader.close()
        self._server.poller.forget(self.fd)
        try:
            self._sock.close()
        except OSError:
            pass
        self._server.release(self)


def _close_body(result: Iterable[bytes] | Parkable) -> None:
    if type(result) is list:  # most answers: nothing to close
        return
    close: Callable[[], None] | None = getattr(result, "close", None)
    if close is not None:
        try:
            close()
        except Exception:
            log.exception("closing a WSGI response failed")
