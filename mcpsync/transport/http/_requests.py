"""One request to the engine, run and answered: as JSON, or as an event stream once it speaks.

Strategy: one POST, one engine call. The WSGI thread that received a request validates it at the
HTTP level (`Host`/`Origin`, method, `Content-Type`, `Accept`, body size), decodes the body once,
routes it to an era (`_rules.route`), hands the engine call to a bounded executor
(`mcpsync-http-worker-N`) and then waits on the request's channel (`_stream`) for the first
thing to send. A request that cannot send anything before its answer (`Engine.runs_inline`: a
listing, a forwarded call, a tool without a `Context`) runs on the WSGI thread itself, sparing
the hand-off; such a tool is not interrupted by the request timeout (nothing could interrupt it
on a worker either, but there the client would be answered -32603 on time). A shutdown that gives
up on it still answers it: mcpsync's own server lets another thread write the response
(`RESPOND_NOW`); under another WSGI server the answer waits until the tool returns. What comes first:
- the answer, within the keep-alive interval: a JSON response, with the era's status code;
- a progress or log notification, or the interval passing in silence: `200 text/event-stream`,
  the notifications as they come, keep-alive comments, then the answer, which ends the stream.
So a quick answer can still carry the spec's 400/404, nothing is buffered beyond the bounded
channel, a forwarded call (a `Deferred` outcome) is answered by whichever thread resolves it, and
a client that goes away is noticed by the next write: the server closes the body, and closing it
cancels the request. No thread waits longer than the keep-alive interval without writing.

A handshake-era session's event stream is resumable (`_resume`): its events are numbered, and a
client that loses it before the answer may take it back with a GET naming the last one it saw.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from ...auth.resource.principal import InsufficientScope
from ...bus.store import RETRY_AFTER, Creation
from ...engine.interceptors import TransportInfo
from ...engine.outcome import Deferred, Failure, NoResponse, Outcome, Subscribed, Success
from ...engine.single_use import RequestStateUnchecked
from ...httpd.server import RESPOND_NOW
from ...protocol import jsonrpc
from ...protocol.jsonrpc import ErrorCode, McpError, Request
from ...protocol.sse import sse_priming
from ...protocol.versions import HANDSHAKE_ERA, Era
from ...tasks.store import TaskStoreDown
from ..lifecycle.inflight import SHUTTING_DOWN, InFlight, answer_frame, shutting_down_frame
from ._directory import LocalDirectory, SessionStoreDown, SharedDirectory
from ._gate import token_end
from ._listens import Listens
from ._replies import _Refused, empty_reply, json_reply, status_line
from ._resume import DetachedStreams, StreamLog
from ._rules import error_status
from ._sessions import FULL_RETRY_AFTER, HttpSession
from ._state import EndpointState
from ._stream import CLOSED, RELEASE, SSE_HEADERS, TIMEOUT, Exchange, Final, SseBody

if TYPE_CHECKING:
    from ...auth.resource.guard import Auth
    from ...auth.resource.principal import Principal
    from ...engine.engine import Engine
    from ...engine.session import Session

log = logging.getLogger("mcpsync")

HTTP = TransportInfo("http", supports_subscriptions=True, handshake_push=True)

RETRY_MS = 1000
"""The `retry` of a resumable stream's priming event: how long a client waits before reconnecting."""

RespondNow = Callable[[str, list[tuple[str, str]], bytes], bool]


class _Caller(NamedTuple):
    """Who sent a request, as its answer may need to say: the principal its token stands for, and
    its environ (for the URL of a 403's challenge)."""

    environ: dict[str, Any]
    principal: Principal | None


def sessions_refused(outcome: Creation, request_id: Any) -> _Refused:
    """No session for this `initialize`: 429 when the caller's own sessions fill its bound, 503
    when the table is full; either way with `Retry-After`."""
    retry = [("Retry-After", str(FULL_RETRY_AFTER))]
    if outcome is Creation.CALLER_FULL:
        return _Refused(429, "Too Many Requests: this caller holds its most sessions, all in use; end one (DELETE) or reuse it", request_id, headers=retry)
    return _Refused(503, "Service Unavailable: too many sessions", request_id, headers=retry)


class Requests:
    """The requests running on one endpoint: on `workers` threads, or inline; each answered by
    `request_timeout`, streamed with a comment every `keepalive` seconds of silence. `auth` and
    `path` make a 403's challenge; `directory` commits the session an `initialize` created."""

    def __init__(
        self,
        state: EndpointState,
        engine: Engine,
        *,
        auth: Auth | None,
        path: str,
        directory: LocalDirectory | SharedDirectory,
        listens: Listens,
        workers: int,
        keepalive: float,
        request_timeout: float,
    ) -> None:
        self._state = state
        self._engine = engine
        self._auth = auth
        self._path = path
        self._directory = directory
        self._listens = listens
        self._keepalive = keepalive
        self._request_timeout = request_timeout
        self._detached = DetachedStreams()
        self._inflight: InFlight[Exchange] = InFlight(workers, "mcpsync-http-worker")  # keyed by the exchange itself
        # Requests running inline, while their WSGI thread is inside the engine: the server's way
        # of answering from another thread (`RESPOND_NOW`), or None if it has none.
        self._inline: dict[Exchange, RespondNow | None] = {}

    @property
    def in_flight(self) -> int:
        """The requests running or waiting now."""
        return len(self._inflight)

    @property
    def workers(self) -> InFlight[Exchange]:
        """What runs the requests (its `busy` and `workers`, for the gauges)."""
        return self._inflight

    def run(
        self,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
        exchange: Exchange,
        session: Session,
        era: Era,
        header_check: Callable[[Request, Any], None] | None,
        principal: Principal | None,
        *,
        created: HttpSession | None = None,
    ) -> Iterable[bytes]:
        request = exchange.request
        caller = _Caller(environ, principal)
        if self._engine.runs_inline(request):
            return self._run_inline(environ.get(RESPOND_NOW), start_response, exchange, session, era, header_check, caller, created)
        with self._state.lock:
            work = None
            if not self._state.closing:
                try:
                    if self._engine.observer is None:
                        work = self._inflight.submit(self._execute, exchange, session, era, header_check, caller)
                    else:  # traced: the worker runs it in this thread's context (an HTTP server span around the app)
                        work = self._inflight.submit(contextvars.copy_context().run, self._execute, exchange, session, era, header_check, caller)
                except RuntimeError:  # the executor stopped: the server is shutting down
                    pass
            if work is None:
                exchange.answer(Final(None))
                raise _Refused(503, SHUTTING_DOWN, request.id)
            self._inflight.add(exchange, exchange)
        exchange.when_answered(lambda: self._forget(exchange))
        if request.method == "subscriptions/listen":  # no run time limit: it lasts as long as its token
            return self._respond(start_response, exchange, token_end(principal), lambda: self._listens.end(exchange), created)
        if request.method == "tasks/result":  # it waits for its task, however long (2025-11-25), as long as its token
            return self._respond(start_response, exchange, token_end(principal), lambda: self._expire(exchange), created)
        return self._respond(start_response, exchange, time.monotonic() + self._request_timeout, lambda: self._expire(exchange), created)

    def _run_inline(
        self,
        respond_now: RespondNow | None,
        start_response: Callable[..., Any],
        exchange: Exchange,
        session: Session,
        era: Era,
        header_check: Callable[[Request, Any], None] | None,
        caller: _Caller,
        created: HttpSession | None,
    ) -> Iterable[bytes]:
        """It cannot speak before its answer, so nothing could stream before it returns: run it on
        this WSGI thread, sparing the two thread switches of the hand-off to a worker. (A forwarded
        call returns at once; its answer and progress still come through the channel.) While it
        runs, it is in `_inline`, so a shutdown that answers it knows this thread cannot."""
        with self._state.lock:
            if self._state.closing:
                exchange.answer(Final(None))
                raise _Refused(503, SHUTTING_DOWN, exchange.request.id)
            self._inflight.add(exchange, exchange)
            self._inline[exchange] = respond_now
        exchange.when_answered(lambda: self._forget(exchange))
        try:
            outcome = self._engine.execute_safely(exchange.request, session, exchange, HTTP, header_check, caller.principal)
        finally:
            with self._state.lock:
                del self._inline[exchange]
        if isinstance(outcome, Deferred):  # a forwarded call: answered by the thread that ends it
            outcome.then(lambda final: self._complete(exchange, era, final, caller))
        else:
            exchange.forget_callbacks()
            final = self._final(exchange, era, outcome, caller)
            if final is not None and exchange.answer_here():  # in hand: no trip through the channel
                return self._answer_json(start_response, final, created, exchange.request.id)
            # else answered already (a shutdown): its answer is in the channel
        return self._respond(start_response, exchange, time.monotonic() + self._request_timeout, lambda: self._expire(exchange), created)

    def _forget(self, exchange: Exchange) -> None:
        self._inflight.settle(exchange, exchange)

    def _execute(self, exchange: Exchange, session: Session, era: Era, header_check: Any, caller: _Caller) -> None:
        """On a worker: run the engine; the answer goes into the exchange's channel."""
        deliver = lambda final: self._complete(exchange, era, final, caller)  # noqa: E731 - a one-line closure
        self._engine.execute_to(exchange.request, session, exchange, HTTP, deliver, header_check, caller.principal)

    def _complete(self, exchange: Exchange, era: Era, outcome: Outcome, caller: _Caller) -> None:
        """The engine's outcome: the work is over (the request may have been answered already,
        past its deadline), so a cancel can no longer reach it."""
        exchange.forget_callbacks()
        final = self._final(exchange, era, outcome, caller)
        if final is not None:
            exchange.answer(final)

    def _final(self, exchange: Exchange, era: Era, outcome: Outcome, caller: _Caller) -> Final | None:
        """The answer an outcome gets over HTTP: its frame, status and headers; None for an
        accepted listen, which is activated instead (its stream stays open)."""
        if isinstance(outcome, Subscribed):
            self._listens.activate(exchange, outcome, caller.principal)
            return None
        if isinstance(outcome, NoResponse):
            return Final(None)
        assert isinstance(outcome, (Success, Failure))
        frame, error = answer_frame(exchange.request, outcome)
        if error is None and isinstance(outcome, Success):
            return Final(frame, 200, outcome.claims)
        if isinstance(error, (RequestStateUnchecked, SessionStoreDown, TaskStoreDown)):  # a store is away: the same request works later
            return Final(frame, 503, headers=(("Retry-After", str(RETRY_AFTER)),))
        if isinstance(error, InsufficientScope) and self._auth is not None:  # the client may step up
            refusal = self._auth.insufficient(caller.environ, self._path, error.scopes, error.description)
            return Final(frame, 403, headers=tuple(refusal.headers()))
        assert error is not None
        return Final(frame, error_status(error.code, era))

    # -- the response ----------------------------------------------------------------------------
    def _respond(
        self,
        start_response: Callable[..., Any],
        exchange: Exchange,
        deadline: float | None,
        on_deadline: Callable[[], None],
        created: HttpSession | None,
    ) -> Iterable[bytes]:
        """Wait for the first thing to send and answer in JSON or start the event stream. At
        `deadline`, `on_deadline()` answers into the channel (a request's -32603, a listen's end)."""
        undecided_until = time.monotonic() + self._keepalive
        while True:
            limit = undecided_until if exchange.streams else (deadline or undecided_until)
            if deadline is not None:
                limit = min(limit, deadline)
            item = exchange.channel.get(limit - time.monotonic())
            if isinstance(item, Final):
                return self._answer_json(start_response, item, created, exchange.request.id)
            if item is CLOSED:
                return empty_reply(start_response, 204)
            if item is RELEASE:  # released before anything was sent: a stream that ends at once
                exchange.channel.put(RELEASE, force=True)
                return self._stream(start_response, exchange, None, deadline, on_deadline)
            if item is TIMEOUT:
                if deadline is not None and time.monotonic() >= deadline:
                    on_deadline()  # its answer is in the channel now (or was already)
                    deadline = None
                    continue
                if not exchange.streams:
                    continue
                item = None
            return self._stream(start_response, exchange, item, deadline, on_deadline)

    def _answer_json(self, start_response: Callable[..., Any], final: Final, created: HttpSession | None, request_id: Any) -> Iterable[bytes]:
        if final.frame is None:
            return empty_reply(start_response, 204)
        extra = []
        if created is not None and final.claims is HANDSHAKE_ERA:
            created.session.commit_era(HANDSHAKE_ERA)
            outcome = self._directory.commit(created)
            if not outcome:
                raise sessions_refused(outcome, request_id)
            extra.append(("Mcp-Session-Id", created.id))
        extra.extend(final.headers)
        return json_reply(start_response, final.status, final.frame, extra)

    def _stream(
        self, start_response: Callable[..., Any], exchange: Exchange, first: bytes | None, deadline: float | None, on_deadline: Callable[[], None]
    ) -> SseBody:
        """The response becomes an event stream; a handshake-era session's is resumable
        (`_resume`): numbered events after a priming event that names it."""
        start_response(status_line(200), list(SSE_HEADERS))
        if exchange.session_id is None:
            return SseBody(
                exchange.channel,
                keepalive=self._keepalive,
                first=first,
                deadline=deadline,
                on_deadline=on_deadline,
                on_close=lambda completed: self._stream_closed(exchange, completed),
            )
        exchange.deadline = deadline
        stream = StreamLog()
        return self._resumable(exchange, stream, sse_priming(stream.position, RETRY_MS), first, on_deadline)

    def resume(self, start_response: Callable[..., Any], owner: HttpSession, last_event_id: str) -> SseBody | None:
        """A GET naming an event of a POST stream this process holds detached: the rest of it."""
        taken = self._detached.take(owner.id, last_event_id)
        if taken is None:
            return None
        exchange, stream, number = taken
        start_response(status_line(200), list(SSE_HEADERS))
        prime = sse_priming(last_event_id, RETRY_MS) + stream.after(number)
        return self._resumable(exchange, stream, prime, None, lambda: self._expire(exchange))

    def _resumable(self, exchange: Exchange, stream: StreamLog, prime: bytes, first: bytes | None, on_deadline: Callable[[], None]) -> SseBody:
        """The body of a handshake-era session's POST stream, first sent or resumed: its events
        numbered by `stream`, and registered, so that a resume may take it over (lost again, it
        may be taken over again)."""
        assert exchange.session_id is not None
        self._detached.attach(exchange, stream, exchange.session_id)
        return SseBody(
            exchange.channel,
            keepalive=self._keepalive,
            first=first,
            prime=prime,
            number=stream.event,
            deadline=exchange.deadline,
            on_deadline=on_deadline,
            on_close=lambda completed: self._stream_closed(exchange, completed, stream),
        )

    def _expire(self, exchange: Exchange) -> None:
        """The request ran out of time: cancel it and answer -32603 (unless it just answered)."""
        request = exchange.request
        error = McpError(ErrorCode.INTERNAL_ERROR, f"Request timed out after {self._request_timeout:g} s")
        if exchange.answer(Final(jsonrpc.encode(jsonrpc.error_frame(request.id, error)))):
            log.warning("%s (id %r) timed out after %g s; cancelled", request.method, request.id, self._request_timeout)
            exchange.cancel()

    def _stream_closed(self, exchange: Exchange, completed: bool, stream: StreamLog | None = None) -> None:
        """The server closed a response stream: if it did not reach its end, the client went away
        (or the server stopped), which cancels the request, unless it may resume (a handshake-era
        session's, detached for its client to come back); a listen is unsubscribed."""
        owner_id = exchange.session_id
        if not completed and stream is not None and owner_id is not None and not self._state.closing and self._detached.detach(exchange, stream, owner_id):
            return
        if stream is not None:
            self._detached.finished(stream)
        exchange.channel.close()
        if not completed:
            exchange.cancel("the client closed the stream")
        self._listens.closed(exchange)

    # -- stopping --------------------------------------------------------------------------------
    def stop(self, deadline: float) -> int:
        """Shutdown's part (the endpoint is closing): the detached requests are cancelled, the
        running ones waited for until `deadline` (`time.monotonic()`) and then answered -32603,
        and the workers stopped. How many are still running."""
        self._detached.close()
        self._inflight.drain(max(0.0, deadline - time.monotonic()))
        for _, exchange in self._inflight.unsettled():  # past the deadline: the exchange's answer() decides once
            final = Final(shutting_down_frame(exchange.request.id))
            if exchange.answer(final):
                self._deliver_past_inline(exchange, final)
        running = self._inflight.wait_workers(deadline)
        with self._state.lock:
            running += len(self._inline)
        self._inflight.stop_workers(clean=not running)
        return running

    def _deliver_past_inline(self, exchange: Exchange, final: Final) -> None:
        """`final` is in the exchange's channel, but if the request runs inline its WSGI thread is
        still inside the tool and cannot send it: our own server writes it from here instead.
        Exactly one of the two threads gets to write (`respond_now` refuses once the other has
        begun); under another WSGI server the answer waits in the channel for the tool to return."""
        with self._state.lock:
            respond_now = self._inline.get(exchange)
        if respond_now is not None and final.frame is not None:
            respond_now(status_line(final.status), [("Content-Type", "application/json")], final.frame)
