"""Forwarded calls, and the questions an upstream asks while one runs (elicitation, sampling,
roots), relayed to the downstream client in the form its era expects.

Strategy: every call the gateway forwards (a tool call, a prompt, a resource read) is an
`UpstreamCall` in its source's `Relay`, from just before its request goes upstream until the
upstream's final answer. A downstream request waits on a `ForwardedCall`: it ends with the
upstream's result (without the upstream era's dressing), with an error naming the upstream, or,
for a 2026-07-28 client, with an `input_required` result carrying the upstream's questions.

A handshake-era upstream asks (`elicitation/create`, `sampling/createMessage`, `roots/list`) with
a JSON-RPC request of its own. The gateway's client session hands it to `Relay.answer` on a
callback thread of the session (never its reader); the answer, or an `McpError`, is the response.
Neither stdio nor HTTP says which call such a request belongs to (the client's HTTP connection
does not tell which POST's stream carried it either), so:

1. Which call? The one in flight on that upstream, if there is exactly one. With none, or with
   several, the upstream gets -32603 saying the gateway cannot tell which call the question is
   for. It never guesses: a user could be asked on behalf of somebody else's call. `roots/list`
   is the exception, since roots belong to a client, not to a call, and servers such as
   server-filesystem ask right after `initialize`: the roots configured for the upstream answer
   it whenever it asks; without them, the one call's client is asked as below, and outside a call
   (or with several) the client the server can ask outside a request (`client_roots`), else an
   empty list. Never an error: an upstream that gets none works with none.
2. A handshake-era downstream: the question goes to the downstream client as a real request on
   the call's own request (`Context.ask`), and this thread waits for the answer. The downstream's
   error, a missing capability (-32021), a cancel or the deadline go back to the upstream as the
   error response; the upstream decides what its call does then.
3. A 2026-07-28 downstream cannot be sent a request. The question is *parked*: it waits in the
   call under a key (`elicitation-1`, `sampling-2`, ...: the kind and a number unique within the
   call) and the downstream request completes now with `input_required` asking it, its sealed
   `requestState` naming the call (`{"upstreamCall": ID}`, a random id). The upstream call itself
   stays pending. The client's retry (same method and params, which the seal binds) finds the call
   by that id instead of starting a new one (`Relay.resume`): each answer in `inputResponses` is
   handed to the question's waiting thread, and so to the upstream, and the retry waits for the
   same upstream call's next event: its result, or another question (another round). A question
   the retry left unanswered is asked again at once; questions the upstream sends together
   (within `BATCH_WINDOW`) are asked in one round; one that arrives between rounds waits for the
   next. An answer of the wrong shape fails the retry with -32602 and leaves the call parked, so a
   corrected retry still works. Only one retry can continue a parked call.
4. Prompts and resources forward through the same calls, waited for on the request's worker
   (`ForwardedCall.wait`), so both eras work for them too: `RemotePrompt.get` returns the
   `input_required` result as its result and `RemoteResource.read` returns it instead of the
   contents (the engine passes a dict through as the request's result).
5. A 2026-07-28 upstream asks inside its call's own result (`input_required`), so there is no
   doubt which call it is. Its questions take the same two ways (parked for a 2026-07-28 client,
   asked of a handshake-era one on a thread of their own, `mcpsync-relay-ask`); once all are
   answered the upstream gets its retry on the same `UpstreamCall`: the original params,
   `inputResponses` under its own keys and its `requestState`. It has no way to hear that one
   question failed, so the call ends (`_unanswerable`): -32021 to a 2026-07-28 client lacking the
   capability, else as a local function's failed question does (a tool error result, or -32603
   for a prompt or resource). A state-only `input_required` (the upstream is busy) is passed on to a 2026-07-28
   client and retried after `STATE_ONLY_WAIT` for a handshake-era one; `MAX_UPSTREAM_ROUNDS`.

Nothing waits forever. An upstream call has a deadline (`call_timeout` from its first request,
covering every round and every person answering, as in the handshake era); the source's
supervisor expires overdue calls every second (the upstream call is cancelled) and `expire()`
forgets parked calls past their deadline, after which a retry naming one gets -32602
(`data.reason: "unknown_upstream_call"`). The sealed `requestState` has its own expiry (the
engine's TTL), checked before the retry reaches here. A question's thread waits at most until the
call's deadline; a cancel, the call's end and `close()` release it at once.

Locking: one lock per relay guards every call's state; nothing is called out while it is held
(completing a downstream request writes to a transport, answering a question wakes a thread).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from .._futures import settle
from .._pool import WorkerPool
from ..catalog.context import Context
from ..catalog.questions import ELICIT, KINDS, ROOTS, Question, checked_answer, key_of, missing_capability
from ..errors import CallCancelled, CallTimeout, McpsyncError
from ..protocol.jsonrpc import ErrorCode, McpError
from ..protocol.versions import Era
from ..tasks.record import RELATED_TASK
from .forwarded import Failure, ForwardedCall, PendingQuestion, UpstreamCall, UpstreamRound, strip_era_fields

log = logging.getLogger("mcpsync")

MAX_UPSTREAM_ROUNDS = 10
"""How many `input_required` rounds of a 2026-07-28 upstream one forwarded call follows."""
STATE_ONLY_WAIT = 0.1
"""Seconds before retrying a 2026-07-28 upstream that answered `input_required` with only a state
(it is busy), when the client is of the handshake era and so cannot be asked to come back."""
STATE_KEY = "upstreamCall"
"""The key of the `requestState` (app state) that names a parked upstream call."""
ROUND_WORKERS = 64
"""Handshake-era clients asked a 2026-07-28 upstream's round at once (a worker each, waiting for a
person to answer); past them a round waits in `ROUND_BACKLOG`, and past that it fails at once."""
ROUND_BACKLOG = 256
ROUND_JOIN = 1.0
"""Seconds `close()` waits for the rounds being asked (ending the calls releases their waits)."""
BATCH_WINDOW = 0.02
"""Seconds a 2026-07-28 round waits after an upstream's first question for the ones sent with it
(an upstream's `ctx.ask(a, b, c)` sends three requests back to back), so they are asked together."""
CANCELLED_BY_CLIENT = "cancelled by the client"
SHUTTING_DOWN = "the server is shutting down"
ClientRoots = Callable[[float], list[dict[str, Any]]]
"""The roots of the downstream client that can be asked outside any request, waiting at most the
given seconds; an empty list when there is no such client (or it did not answer)."""



class Relay:
    """One upstream's forwarded calls: which are in flight, which are parked, and the answers to
    its questions. Thread-safe."""

    def __init__(
        self,
        upstream: str,
        call_timeout: float,
        failure: Failure,
        batch_window: float = BATCH_WINDOW,
        *,
        roots: tuple[dict[str, Any], ...] | None = None,
        client_roots: ClientRoots | None = None,
    ) -> None:
        self.upstream = upstream
        self.call_timeout = call_timeout
        self.batch_window = batch_window
        self.roots = roots  # configured for this upstream: they answer its roots/list
        self.shutting_down = False  # set by the server while it shuts down: a cancel then says so
        self._client_roots = client_roots
        self._failure = failure
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)
        self._in_flight: dict[int, UpstreamCall] = {}  # the upstream has not answered yet
        self._parked: dict[str, UpstreamCall] = {}  # waiting for the downstream's retry
        self._rounds = WorkerPool("mcpsync-relay-ask", workers=ROUND_WORKERS, backlog=ROUND_BACKLOG)
        self._tasks: dict[str, Context] = {}  # the upstream's tasks a task of ours waits on, by their id: whose questions they are

    # -- forwarding ------------------------------------------------------------------------------
    def forward(self, session: Any, method: str, params: dict[str, Any], ctx: Context) -> ForwardedCall:
        """Send one request upstream on behalf of a downstream request; or, when that request is
        the retry of a parked call, continue it. Raises McpError (the session's own failure to
        send is handed to the source's failure mapping)."""
        call_id = parked_call_id(ctx)
        if call_id is not None:
            return self.resume(call_id, ctx)
        outlet = ForwardedCall(self._failure)
        call = UpstreamCall(next(self._numbers), session, method, params, ctx, time.monotonic() + self.call_timeout, outlet)
        outlet._on_timeout = call.cancel
        progress = call.progress if ctx.wants_progress else None
        call.pending = pending = session.prepare_request(method, params, progress=progress, timeout=self.call_timeout)
        with self._lock:  # before the request goes out: its first question may come at once
            self._in_flight[call.number] = call
        pending.on_done(lambda result, error: self._upstream_answered(call, result, error))
        ctx.on_cancel(lambda: self._cancelled_by(call, ctx))
        outlet.launch_when_awaited(pending.send)
        return outlet

    def resume(self, call_id: str, ctx: Context) -> ForwardedCall:
        """The retry of a parked call: hand its answers upstream and wait for the next event."""
        outlet = ForwardedCall(self._failure)
        with self._lock:
            call = self._parked.get(call_id)
            if call is None:
                raise McpError(
                    ErrorCode.INVALID_PARAMS,
                    f"this retry continues a call to upstream '{self.upstream}' that the gateway no longer has "
                    "(it expired, ended, or another retry continued it); start the call again without requestState",
                    {"reason": "unknown_upstream_call", "upstream": self.upstream},
                )
            answered = []
            for waiting in call.questions:
                answer = ctx.answer_for(key_of(waiting.question)) if waiting.asked and not waiting.answer.done() else None
                if answer is not None:
                    checked_answer(waiting.question, answer)  # -32602 naming the key; the call stays parked
                    answered.append((waiting, answer))
            del self._parked[call_id]
            call.ctx, call.outlet = ctx, outlet
            outlet._on_timeout = call.cancel
            final = call.final
        if final is not None:
            self._end(call, outlet, *final)
            return outlet
        ctx.on_cancel(lambda: self._cancelled_by(call, ctx))
        for waiting, answer in answered:
            settle(waiting.answer, result=answer)  # to the upstream (its thread, or its next retry)
        waiting_round = call.round
        if waiting_round is not None and not waiting_round.questions and waiting_round.delivered:
            self._retry_upstream(call, waiting_round)  # a state-only round: the client came back
        self._ask_downstream(call)  # what is still unanswered, at once
        return outlet

    def _cancelled_by(self, call: UpstreamCall, ctx: Context) -> None:
        """The downstream cancelled `ctx`: cancel the upstream call if that request still waits on
        it (not after it answered input_required: the call is parked for a retry then)."""
        if call.ctx is ctx:
            call.cancel(SHUTTING_DOWN if self.shutting_down else CANCELLED_BY_CLIENT)

    def _upstream_answered(self, call: UpstreamCall, result: Any, error: BaseException | None) -> None:
        """The upstream answered (or the call failed): a 2026-07-28 upstream's `input_required` is
        answered through the downstream and retried; anything else is the call's final answer."""
        if error is None and isinstance(result, dict) and result.get("resultType") == "input_required":
            try:
                self._upstream_asks(call, result)
                return
            except McpError as exc:
                result, error = None, exc
        self._finish(call, result, error)

    def _finish(self, call: UpstreamCall, result: Any, error: BaseException | None) -> None:
        """The call's final answer (the first one given): to the attached request, or kept for
        the retry of a parked call."""
        with self._lock:
            if call.final is not None:
                return
            self._in_flight.pop(call.number, None)
            call.final = (result, error)
            outlet, call.outlet, call.ctx = call.outlet, None, None  # none: parked (kept for the retry) or abandoned
            ended = call.ended
        if ended is not None:
            ended.set()
        for waiting in call.questions:
            settle(waiting.answer, error=McpError(ErrorCode.INTERNAL_ERROR, f"the call to upstream '{self.upstream}' ended before the client answered"))
        if outlet is not None:
            self._end(call, outlet, result, error)

    def _end(self, call: UpstreamCall, outlet: ForwardedCall, result: Any, error: BaseException | None) -> None:
        if isinstance(error, CallCancelled):  # withdrawn by the gateway (its client cancelled, or it shuts down), not failed upstream
            error = McpError(ErrorCode.INTERNAL_ERROR, str(error))
        if error is not None:
            outlet.settle(error=self._failure(error))
        elif not isinstance(result, dict):
            outlet.settle(error=self._failure(McpsyncError("the upstream's result is not an object")))
        else:
            outlet.settle(result=strip_era_fields(result))

    # -- a 2026-07-28 upstream's input_required ---------------------------------------------------
    def _upstream_asks(self, call: UpstreamCall, result: dict[str, Any]) -> None:
        """Its questions go to the downstream like a handshake-era upstream's (parked for a
        2026-07-28 client, asked on a thread of their own of a handshake-era one); once all are
        answered the upstream gets its retry: the same params, `inputResponses` under its own keys
        and its `requestState`, on the same call. Raises McpError for a malformed result or past
        `MAX_UPSTREAM_ROUNDS`."""
        asked, state = result.get("inputRequests") or {}, result.get("requestState")
        if not isinstance(asked, dict) or not all(isinstance(q, dict) and q.get("method") in KINDS for q in asked.values()):
            raise McpError(ErrorCode.INTERNAL_ERROR, f"upstream '{self.upstream}' answered a malformed input_required", {"upstream": self.upstream})
        if (state is not None and not isinstance(state, str)) or (not asked and state is None):
            raise McpError(ErrorCode.INTERNAL_ERROR, f"upstream '{self.upstream}' answered a malformed input_required", {"upstream": self.upstream})
        call.rounds += 1
        if call.rounds > MAX_UPSTREAM_ROUNDS:
            raise McpError(ErrorCode.INTERNAL_ERROR, f"upstream '{self.upstream}' still asked for input after {MAX_UPSTREAM_ROUNDS} rounds")
        waiting_round = UpstreamRound([], {}, state)
        for upstream_key, request in asked.items():
            params = request.get("params") if isinstance(request.get("params"), dict) else {}
            question = Question(request["method"], dict(params), call.next_key(request["method"]))
            waiting_round.upstream_keys[key_of(question)] = upstream_key
            waiting_round.questions.append(PendingQuestion(question, concurrent.futures.Future()))
        with self._lock:
            call.round = waiting_round
            call.questions.extend(waiting_round.questions)
        for waiting in waiting_round.questions:
            waiting.answer.add_done_callback(lambda _f: self._answered_one(call, waiting_round))
        if call.era is Era.MODERN:
            self._ask_downstream(call)
        elif not self._rounds.submit(lambda: self._ask_round(call, waiting_round)):
            held = ROUND_WORKERS + ROUND_BACKLOG
            busy = McpError(ErrorCode.INTERNAL_ERROR, f"upstream '{self.upstream}' asked while {held} rounds already wait for the client; try again")
            self._round_failed(call, waiting_round, busy)

    def _ask_round(self, call: UpstreamCall, waiting_round: UpstreamRound) -> None:
        """On a worker of the relay's pool: a handshake-era client is asked a 2026-07-28
        upstream's round (all together, bounded by the call's deadline); a state-only round waits
        a moment."""
        ctx = call.ctx
        remaining = call.deadline - time.monotonic()
        try:
            if ctx is None or remaining <= 0:
                raise McpError(ErrorCode.INTERNAL_ERROR, f"the call to upstream '{self.upstream}' has ended or is past its deadline")
            if not waiting_round.questions:
                ctx.wait_cancelled(min(STATE_ONLY_WAIT, remaining))
                self._retry_upstream(call, waiting_round)
                return
            ctx.ask(*(waiting.question for waiting in waiting_round.questions), timeout=remaining)
            for waiting in waiting_round.questions:
                settle(waiting.answer, result=ctx.used_answers[key_of(waiting.question)])
        except McpsyncError as exc:
            error = exc if isinstance(exc, McpError) else McpError(ErrorCode.INTERNAL_ERROR, f"no answer from the client: {exc}")
            self._round_failed(call, waiting_round, error)

    def _round_failed(self, call: UpstreamCall, waiting_round: UpstreamRound, error: McpError) -> None:
        """The round could not be asked: each question fails with `error` (the upstream is retried
        with the failure), or a state-only round ends the call with it."""
        for waiting in waiting_round.questions:
            settle(waiting.answer, error=error)
        if not waiting_round.questions:
            self._finish(call, None, error)

    def _unanswerable(self, call: UpstreamCall, question: Question, error: BaseException) -> tuple[Any, McpError | None]:
        """How a call ends when a 2026-07-28 upstream's question could not be answered (it has no
        way to hear that): -32021 as it is to a 2026-07-28 client (its `requiredCapabilities`
        name what to declare); otherwise, as for a local function whose question failed, a tool
        error result or -32603 naming the question, never the client's code as the call's own."""
        if isinstance(error, McpError) and error.code == ErrorCode.MISSING_CLIENT_CAPABILITY and call.era is Era.MODERN:
            return None, error
        text = f"upstream '{self.upstream}' asked the client {question.method}, which failed: {getattr(error, 'message', None) or error}"
        if call.method == "tools/call":
            return {"content": [{"type": "text", "text": text}], "isError": True}, None
        return None, McpError(ErrorCode.INTERNAL_ERROR, text, {"upstream": self.upstream})

    def _answered_one(self, call: UpstreamCall, waiting_round: UpstreamRound) -> None:
        if all(waiting.answer.done() for waiting in waiting_round.questions):
            self._retry_upstream(call, waiting_round)

    def _retry_upstream(self, call: UpstreamCall, waiting_round: UpstreamRound) -> None:
        """Every question of the round is settled: retry the upstream (once), or end the call with
        the first question's error."""
        with self._lock:
            if call.round is not waiting_round or call.final is not None:
                return
            call.round = None
        if call.cancelled is not None:
            self._finish(call, None, CallCancelled(f"{call.method} was cancelled: {call.cancelled}"))
            return
        for waiting in waiting_round.questions:
            failed = waiting.answer.exception()
            if failed is not None:
                self._finish(call, *self._unanswerable(call, waiting.question, failed))
                return
        params = dict(call.params)
        if waiting_round.questions:
            params["inputResponses"] = {waiting_round.upstream_keys[key_of(w.question)]: w.answer.result() for w in waiting_round.questions}
        if waiting_round.state is not None:
            params["requestState"] = waiting_round.state
        remaining = call.deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise CallTimeout(f"{call.method} did not complete within {self.call_timeout:g} s")
            progress = call.progress if call.wants_progress else None
            call.pending = call.session.start_request(call.method, params, progress=progress, timeout=remaining)
        except McpsyncError as exc:
            self._finish(call, None, exc)
            return
        if call.cancelled is not None:  # a cancel that came while the retry was being sent
            call.pending.cancel(call.cancelled)
        call.pending.on_done(lambda result, error: self._upstream_answered(call, result, error))

    # -- the upstream's questions (on the client session's callback threads) ---------------------
    def handlers(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        """The ClientSession callbacks (`roots`, `sampling`, `elicitation`) that relay questions."""
        return {
            "roots": lambda params: self.answer("roots/list", params),
            "sampling": lambda params: self.answer("sampling/createMessage", params),
            "elicitation": lambda params: self.answer("elicitation/create", params),
        }

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The downstream client's answer to an upstream's question, in the form the upstream
        expects (the result object); raises McpError for the upstream's error response."""
        if method == ROOTS and self.roots is not None:
            return {"roots": [dict(root) for root in self.roots]}
        related = ((params or {}).get("_meta") or {}).get(RELATED_TASK)
        with self._lock:
            in_flight = [call for call in self._in_flight.values() if call.final is None]
            task_id = related.get("taskId") if isinstance(related, dict) else None
            asker = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if asker is not None:
            return self._ask_for_task(asker, method, params)
        if len(in_flight) != 1 and method == ROOTS:
            return {"roots": self._client_roots(self.call_timeout) if self._client_roots is not None else []}
        if len(in_flight) != 1:
            log.warning("upstream %r asked %s while %d of its calls were in flight; refused (which call is it for?)", self.upstream, method, len(in_flight))
            raise McpError(
                ErrorCode.INTERNAL_ERROR,
                f"the gateway cannot tell which call this {method} is for: {len(in_flight)} calls to upstream "
                f"'{self.upstream}' are in flight and the request names none of them "
                "(ask during a call, while it is the only one)",
                {"upstream": self.upstream, "callsInFlight": len(in_flight)},
            )
        call = in_flight[0]
        params = {k: v for k, v in (params or {}).items() if k != "_meta"}
        question = Question(method, params, call.next_key(method))
        if call.era is Era.HANDSHAKE:
            return self._ask_now(call, question)
        return self._park(call, question)

    def asking_for(self, task_id: str, ctx: Context | None) -> None:
        """The upstream's task `task_id` has its questions asked through `ctx`, the context of the
        task of ours that waits on it (None: no longer). Its questions name it (related-task
        `_meta`, which mcpsync's client also gives a 2026-07-28 task's questions)."""
        with self._lock:
            if ctx is None:
                self._tasks.pop(task_id, None)
            else:
                self._tasks[task_id] = ctx

    def _ask_for_task(self, ctx: Context, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """An upstream task's question, asked of our task's client (its inputRequests, or a request
        on its tasks/result) on this callback thread, which waits for the answer."""
        question = Question(method, {k: v for k, v in params.items() if k != "_meta"})
        try:
            answer: dict[str, Any] = ctx.ask(question, timeout=self.call_timeout)[0]
            return answer
        except McpError:
            raise
        except McpsyncError as exc:
            raise McpError(ErrorCode.INTERNAL_ERROR, f"no answer from the client: {exc}", {"upstream": self.upstream}) from None

    def _ask_now(self, call: UpstreamCall, question: Question) -> dict[str, Any]:
        """Handshake-era downstream: a real request on the call's own downstream request."""
        ctx = call.ctx
        if ctx is None:
            raise McpError(ErrorCode.INTERNAL_ERROR, f"the call to upstream '{self.upstream}' has ended")
        remaining = call.deadline - time.monotonic()
        if remaining <= 0:
            raise McpError(ErrorCode.INTERNAL_ERROR, f"the call to upstream '{self.upstream}' is past its deadline")
        try:
            ctx.ask(question, timeout=remaining)
        except McpError:
            raise
        except McpsyncError as exc:  # no answer: a timeout, a cancel, the connection closed
            raise McpError(ErrorCode.INTERNAL_ERROR, f"no answer from the client to {question.method}: {exc}") from exc
        answer: dict[str, Any] = ctx.used_answers[key_of(question)]  # as the client sent it (roots: the whole ListRootsResult)
        return answer

    def _park(self, call: UpstreamCall, question: Question) -> dict[str, Any]:
        """2026-07-28 downstream: the question waits in the call until a retry answers it."""
        ctx = call.ctx
        if ctx is not None:  # attached: refuse at once what this client never declared
            refusal = missing_capability(question, ctx.client_capabilities, ctx.protocol_version)
            if refusal is not None:
                raise refusal
        if question.method == ELICIT:  # 2026-07-28 URL-mode elicitation has no id
            question = Question(question.method, {k: v for k, v in question.params.items() if k != "elicitationId"}, question.key)
        waiting = PendingQuestion(question, concurrent.futures.Future())
        with self._lock:
            if call.final is not None:
                raise McpError(ErrorCode.INTERNAL_ERROR, f"the call to upstream '{self.upstream}' has ended")
            call.questions.append(waiting)
            collect = not call.batching
            call.batching = True
            ended = call.ended
            if collect and ended is None:
                ended = call.ended = threading.Event()
        if collect and ended is not None:
            ended.wait(self.batch_window)  # its siblings, sent with it, join this round (the end cuts it short)
            with self._lock:
                call.batching = False
            self._ask_downstream(call)
        try:
            return waiting.answer.result(max(0.0, call.deadline - time.monotonic()) + 1.0)
        except concurrent.futures.TimeoutError:
            raise McpError(ErrorCode.INTERNAL_ERROR, f"the client did not answer {question.method} before the call's deadline") from None
        except concurrent.futures.CancelledError:
            raise McpError(ErrorCode.INTERNAL_ERROR, f"the gateway stopped waiting for the answer to {question.method}") from None

    def _ask_downstream(self, call: UpstreamCall) -> None:
        """If a downstream request is attached and questions are unanswered: complete it with
        input_required asking them all, and park the call. A question this request's client did
        not declare the capability for is refused (-32021, to the upstream) instead."""
        refused: list[tuple[PendingQuestion, McpError]] = []
        asking: list[PendingQuestion] = []
        token: str | None = None  # the parked call's key, once it is parked for the client's retry
        with self._lock:
            ctx, outlet = call.ctx, call.outlet
            if ctx is None or outlet is None or call.final is not None:
                return  # parked already (the retry asks) or over
            for waiting in call.questions:
                if waiting.answer.done():
                    continue
                refusal = missing_capability(waiting.question, ctx.client_capabilities, ctx.protocol_version)
                if refusal is not None:
                    refused.append((waiting, refusal))
                else:
                    asking.append(waiting)
            waiting_round = call.round
            state_only = waiting_round is not None and not waiting_round.questions and not waiting_round.delivered
            if waiting_round is not None and state_only:
                waiting_round.delivered = True  # the upstream is busy: so is the gateway, to the client
            upstream_round_refused = waiting_round is not None and any(w in waiting_round.questions for w, _ in refused)
            if (asking or state_only) and not upstream_round_refused:
                for waiting in asking:
                    waiting.asked = True
                call.ctx = call.outlet = None
                if call.token is None:
                    call.token = secrets.token_urlsafe(16)
                token = call.token
                self._parked[token] = call
        for waiting, refusal in refused:
            settle(waiting.answer, error=refusal)
        if upstream_round_refused:  # a 2026-07-28 upstream's round cannot be half answered
            self._finish(call, *self._unanswerable(call, refused[0][0].question, refused[0][1]))
            return
        if token is None:  # nothing to ask now
            return
        try:
            result = ctx.input_required(*(waiting.question for waiting in asking), state={STATE_KEY: token})
        except McpsyncError as exc:  # this request cannot answer input_required after all
            with self._lock:
                self._parked.pop(token, None)
                call.ctx, call.outlet = ctx, outlet
            error = exc if isinstance(exc, McpError) else McpError(ErrorCode.INTERNAL_ERROR, f"the client cannot be asked: {exc}")
            for waiting in asking:
                settle(waiting.answer, error=error)
            if state_only:
                self._finish(call, None, error)
            return
        outlet.settle(result=result)

    # -- housekeeping ----------------------------------------------------------------------------
    def expire(self, now: float | None = None) -> int:
        """Forget parked calls past their deadline (cancelling the upstream call if it still runs,
        which releases its questions' threads); returns how many."""
        now = time.monotonic() if now is None else now
        with self._lock:
            overdue = {token: call for token, call in self._parked.items() if call.deadline <= now}
            for token in overdue:
                del self._parked[token]
        for call in overdue.values():
            if call.final is None:
                call.cancel("the client did not retry in time")
            self._abandon(call, "the client did not retry in time")
        if overdue:
            log.info("upstream %r: forgot %d parked call(s) the client did not retry within its timeout", self.upstream, len(overdue))
        return len(overdue)

    def close(self, timeout: float = ROUND_JOIN) -> None:
        """The source is closing: every call ends (their upstream session is closing too), and
        the workers asking rounds are joined within `timeout` seconds."""
        with self._lock:
            calls = [*self._in_flight.values(), *self._parked.values()]
            self._in_flight.clear()
            self._parked.clear()
        for call in calls:
            self._abandon(call, f"upstream '{self.upstream}' was removed")
        running = self._rounds.close(timeout)
        if running:
            log.warning("upstream %r: %d round(s) still asking the client %g s after close", self.upstream, len(running), timeout)

    def _abandon(self, call: UpstreamCall, reason: str) -> None:
        self._finish(call, None, McpError(ErrorCode.INTERNAL_ERROR, f"the call to upstream '{self.upstream}' was abandoned: {reason}"))

    @property
    def parked(self) -> int:
        with self._lock:
            return len(self._parked)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._in_flight)


def parked_call_id(ctx: Context) -> str | None:
    """The parked call a retry continues (from its sealed state), else None."""
    state = ctx.state
    call_id = state.get(STATE_KEY) if isinstance(state, dict) else None
    return call_id if isinstance(call_id, str) else None
