"""Multi round-trip requests: one synchronous function body, both eras.

Strategy: a function asks through its `Context`. On a handshake-era connection the Context sends
real requests and waits, so the body simply runs to its end. In 2026-07-28 the first question
without an answer unwinds the body (`NeedAnswers`) and `answering` turns that into the
`input_required` result: every question asked so far under its key, and a `requestState` sealed
(`request_state`) with the answers taken so far and the function's own state. On the retry
`prepare` opens that state, adds the retry's `inputResponses`, and the body runs again from the
start; each question finds its answer under the same key, so it goes one step further each
round. The client sends only the current round's answers; the earlier ones come back sealed.

A function may also return `InputRequired(questions, state)` itself. In 2026-07-28 that is the
same result; on a handshake-era connection the questions are asked at once (or, with none, a
short pause passes) and the body runs again with `ctx.state` set, up to `MAX_HANDSHAKE_ROUNDS`
times.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..catalog.context import AskCancelled
from ..catalog.questions import NeedAnswers
from ..protocol.jsonrpc import ErrorCode, McpError
from ..protocol.versions import Era
from .request_state import MRTR_METHODS, RequestStateSealer

if TYPE_CHECKING:
    from ..catalog.context import Context
    from ..catalog.questions import InputRequired
    from .interceptors import Call

T = TypeVar("T")

MAX_HANDSHAKE_ROUNDS = 8
"""How often a function returning `InputRequired` runs again on one handshake-era request."""

HANDSHAKE_PAUSE, HANDSHAKE_MAX_PAUSE = 0.05, 1.0
"""Before a handshake-era rerun of a function that returned `InputRequired` without questions
(it wants time: load shedding, long work), doubling from the first to the second."""


def prepare(sealer: RequestStateSealer, call: Call) -> tuple[dict[str, Any], Any]:
    """The answers and the function's state a 2026-07-28 retry brings: -32602 for a
    `requestState` that fails to open (with `data.reason`) or `inputResponses` that is no object."""
    if call.era is not Era.MODERN or call.method not in MRTR_METHODS:
        return {}, None
    params = call.params
    answers: dict[str, Any] = {}
    state = None
    if "requestState" in params:
        sealed = sealer.open(params["requestState"], call.method, params, principal=_principal_key(call))
        answers.update(sealed.answers)
        state = sealed.app_state
    if "inputResponses" in params:
        responses = params["inputResponses"]
        if not isinstance(responses, dict):
            raise McpError(ErrorCode.INVALID_PARAMS, f"{call.method}: params.inputResponses must be an object", {"reason": "invalid_input_responses"})
        answers.update(responses)
    return answers, state


def answering(call: Call, ctx: Context, body: Callable[[], T]) -> T | dict[str, Any]:
    """Run `body` (which calls the function): its value, or the `input_required` result dict."""
    rounds = 0
    while True:
        try:
            return body()
        except NeedAnswers as need:
            if call.era is Era.MODERN:
                return ctx.input_required(*need.questions, state=need.state)
            rounds += 1
            if rounds >= MAX_HANDSHAKE_ROUNDS:
                raise McpError(ErrorCode.INTERNAL_ERROR, f"{call.method} still asked for input after {rounds} rounds") from None
            if need.questions:
                ctx.ask(*need.questions)
            else:  # only a state: the function asked to be called again a little later
                ctx.wait_cancelled(min(HANDSHAKE_PAUSE * 2 ** (rounds - 1), HANDSHAKE_MAX_PAUSE))
                if ctx.cancelled:
                    raise AskCancelled("the request was cancelled while its function waited to run again") from None
            ctx.next_round(need.state)


def returned(ctx: Context, value: InputRequired) -> NeedAnswers:
    """What a tool's `InputRequired` return value unwinds with (its questions keyed in order)."""
    return NeedAnswers([ctx.keyed(question) for question in value.questions], value.state)


def sealer_for(sealer: RequestStateSealer, call: Call) -> Callable[[dict[str, Any], Any], str] | None:
    """What seals this request's next `requestState` (None where input_required is not allowed)."""
    if call.era is not Era.MODERN or call.method not in MRTR_METHODS:
        return None
    principal = _principal_key(call)
    return lambda answers, state: sealer.seal(call.method, call.params, answers, state, principal=principal)


def _principal_key(call: Call) -> str | None:
    """Who a `requestState` is sealed for: it opens only for the same caller (`Principal.key`)."""
    return call.principal.key if call.principal is not None else None
