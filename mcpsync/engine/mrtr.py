"""Multi round-trip requests: one synchronous function body, both eras.

Strategy: a function asks through its `Context`. On a handshake-era connection the Context sends
real requests and waits, so the body simply runs to its end. In 2026-07-28 the first question
without an answer unwinds the body (`NeedAnswers`) and `answering` turns that into the
`input_required` result: every question asked so far under its key, and a `requestState` sealed
(`request_state`) with the answers taken so far and the function's own state. On the retry
`prepare` opens that state, adds the retry's `inputResponses`, and the body runs again from the
start; each question finds its answer under the same key, so it goes one step further each
round. The client sends only the current round's answers; the earlier ones come back sealed.

A tool marked single-use (or every tool, by the engine's setting) also claims its retry's state in
the store of used states just before it runs (`single_use`): a state runs its tool once, whichever
replica the retries reach.

A function may also return `InputRequired(questions, state)` itself. In 2026-07-28 that is the
same result; on a handshake-era connection the questions are asked at once (or, with none, a
short pause passes) and the body runs again with `ctx.state` set, up to `MAX_HANDSHAKE_ROUNDS`
times.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from ..catalog.context import AskCancelled
from ..catalog.questions import NeedAnswers
from ..protocol.jsonrpc import ErrorCode, McpError
from ..protocol.versions import MODERN_ERA
from . import single_use
from .request_state import MRTR_METHODS, RequestStateSealer, SealedState

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


@dataclass(frozen=True, slots=True)
class Retry:
    """What a request brings from earlier rounds (nothing, for a first round or the handshake era)."""

    answers: Mapping[str, Any]
    """The sealed answers of earlier rounds, with this round's `inputResponses` over them (read
    only: a `Context` copies them)."""
    state: Any = None
    """The function's own state (`ctx.state`)."""
    token: str | None = None
    """The `requestState` that opened, as the client sent it (None: the request carried none)."""
    sealed: SealedState | None = None
    """What it opened to (its expiry, for a single-use mark's lifetime)."""


FIRST_ROUND = Retry(MappingProxyType({}))
"""What a first round brings: nothing (one for every request, as it is read only)."""


def prepare(sealer: RequestStateSealer, call: Call) -> Retry:
    """The answers and the function's state a 2026-07-28 retry brings: -32602 for a
    `requestState` that fails to open (with `data.reason`) or `inputResponses` that is no object."""
    params = call.params
    if call.era is not MODERN_ERA or call.method not in MRTR_METHODS or ("requestState" not in params and "inputResponses" not in params):
        return FIRST_ROUND
    answers: dict[str, Any] = {}
    state, token, sealed = None, None, None
    if "requestState" in params:
        token = params["requestState"]
        sealed = sealer.open(token, call.method, params, principal=_principal_key(call))
        answers.update(sealed.answers)
        state = sealed.app_state
    if "inputResponses" in params:
        responses = params["inputResponses"]
        if not isinstance(responses, dict):
            raise McpError(ErrorCode.INVALID_PARAMS, f"{call.method}: params.inputResponses must be an object", {"reason": "invalid_input_responses"})
        answers.update(responses)
    return Retry(answers, state, token, sealed)


def consumer(sealer: RequestStateSealer, claim: single_use.Claim, retry: Retry) -> Callable[[], None] | None:
    """What marks the retry's state used (call it just before the single-use tool runs: it raises
    "replayed" or "unchecked" instead, see `single_use.consume`); None for a request without one."""
    token, sealed = retry.token, retry.sealed
    if token is None or sealed is None:
        return None
    claimed = False

    def consume() -> None:  # once per request: an interceptor may call the tool twice
        nonlocal claimed
        if not claimed:
            single_use.consume(claim, sealer, token, sealed)
            claimed = True

    return consume


def answering(call: Call, ctx: Context, body: Callable[[], T], *, asked: NeedAnswers | None = None) -> T | dict[str, Any]:
    """Run `body` (which calls the function): its value, or the `input_required` result dict.
    `asked`: what the function's first run, made already, unwound with."""
    rounds = 0
    while True:
        try:
            if asked is not None:
                first, asked = asked, None
                raise first
            return body()
        except NeedAnswers as need:
            if call.era is MODERN_ERA:
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


def sealer_for(sealer: RequestStateSealer, call: Call, *, unique: bool = False) -> Callable[[dict[str, Any], Any], str] | None:
    """What seals this request's next `requestState` (None where input_required is not allowed);
    `unique` for a single-use tool's (a nonce: no two of its tokens, so marks, are alike)."""
    if call.era is not MODERN_ERA or call.method not in MRTR_METHODS:
        return None
    principal = _principal_key(call)
    return lambda answers, state: sealer.seal(call.method, call.params, answers, state, principal=principal, unique=unique)


def _principal_key(call: Call) -> str | None:
    """Who a `requestState` is sealed for: it opens only for the same caller (`Principal.key`)."""
    return call.principal.key if call.principal is not None else None
