"""One forwarded call, as the relay (relay.py) keeps it: what the downstream request waits on
(`ForwardedCall`), the call itself from its request upstream to its final answer (`UpstreamCall`),
and the questions and rounds a call collects while the upstream asks.

These hold state and take no lock of their own: the relay's one lock guards them, and the relay
decides every transition (see its module docstring).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .._futures import OneShot
from ..catalog.context import Context
from ..catalog.questions import KINDS, Question
from ..errors import CallTimeout, McpsyncError
from ..protocol.jsonrpc import McpError

log = logging.getLogger("mcpsync")

_PROTOCOL_META_PREFIX = "io.modelcontextprotocol/"
_ERA_KEYS = ("resultType", "ttlMs", "cacheScope")

Failure = Callable[[BaseException], McpError]
def strip_era_fields(result: dict[str, Any]) -> dict[str, Any]:
    """The upstream's result without its own era's dressing (mcpsync dresses it for the
    downstream), in place: the dict is the gateway's own, fresh from the upstream's frame."""
    for key in _ERA_KEYS:
        result.pop(key, None)
    meta = result.get("_meta")
    if isinstance(meta, dict):
        for key in [k for k in meta if k.startswith(_PROTOCOL_META_PREFIX)]:
            del meta[key]
        if not meta:
            del result["_meta"]
    return result


class ForwardedCall(OneShot):
    """What one downstream request waits on: the upstream's result without the upstream era's
    dressing, an `McpError` naming the upstream, or (2026-07-28) an `input_required` result with
    the upstream's questions. The engine defers on it (`on_done`); a worker may wait (`result`).

    The upstream request goes out when the first party hooks on (`on_done` or `result`), not when
    it is made: on one CPU the upstream may answer before the sending thread has returned from
    the write, and the answer then finds everything waiting for it in place instead of racing the
    sender's bookkeeping (for the GIL, too) on the gateway's hot path."""

    __slots__ = ("_failure", "_on_timeout", "_launch")

    def __init__(self, failure: Failure, on_timeout: Callable[[str], None] = lambda reason: None) -> None:
        super().__init__()
        self._failure = failure
        self._on_timeout = on_timeout
        self._launch: Callable[[], None] | None = None

    def launch_when_awaited(self, launch: Callable[[], None]) -> None:
        """Run `launch` (which sends the upstream request) when the first party hooks on."""
        self._launch = launch

    def on_done(self, callback: Callable[[Any, BaseException | None], None]) -> None:
        super().on_done(callback)
        self._start()

    def result(self, timeout: float) -> dict[str, Any]:
        """Wait for the result (raises the McpError); past `timeout` the upstream call is cancelled."""
        self._start()
        if not self.wait(timeout) and self.settle(error=CallTimeout(f"no answer within {timeout:g} s")):  # unless the answer won the race
            self._on_timeout(f"timed out after {timeout:g} s")
        result: dict[str, Any] = self.value()
        return result

    def settle(self, result: Any = None, error: BaseException | None = None) -> bool:
        """End it (once: False if it had ended, a cancel or a timeout having won)."""
        if error is not None:
            return super().settle(error=error if isinstance(error, McpError) else self._failure(error))
        return super().settle(result if result is not None else {})

    def _start(self) -> None:
        with self._lock:
            launch, self._launch = self._launch, None
            ended = self._outcome is not None
        if launch is None or ended:  # abandoned (the source closed) before anyone hooked on: nothing to send
            return
        try:
            launch()
        except McpsyncError:
            pass  # the send failed: the upstream call has ended with that error, and so has this
        except Exception as exc:  # a bug: still end the downstream request
            log.exception("sending a forwarded call failed")
            self.settle(error=exc)


@dataclass(eq=False)
class PendingQuestion:
    """An upstream question waiting for the downstream's answer (2026-07-28)."""

    question: Question  # keyed
    answer: concurrent.futures.Future[dict[str, Any]]
    asked: bool = False  # sent to the downstream in an input_required round


class UpstreamCall:
    """One forwarded call, from before its request goes upstream until the upstream's final answer
    (and, if that came while the call was parked, until a retry collects it or it expires)."""

    __slots__ = (
        "number", "token", "session", "method", "params", "era", "wants_progress", "deadline", "pending", "round", "rounds",
        "cancelled", "ctx", "outlet", "questions", "final", "ended", "batching", "_keys",
    )

    def __init__(self, number: int, session: Any, method: str, params: dict[str, Any], ctx: Context, deadline: float, outlet: ForwardedCall) -> None:
        self.number = number  # its key among the calls in flight
        self.token: str | None = None  # its key once parked: random, as it travels in the sealed state
        self.session = session
        self.method = method
        self.params = params
        self.era = ctx.era
        self.wants_progress = ctx.wants_progress
        self.deadline = deadline
        self.pending: Any = None  # the client's PendingCall, once sent (the latest, after a 2026-07-28 upstream's rounds)
        self.round: UpstreamRound | None = None  # a 2026-07-28 upstream's input_required being answered
        self.rounds = 0
        self.cancelled: str | None = None
        self.ctx: Context | None = ctx  # the downstream request attached now; None while parked
        self.outlet: ForwardedCall | None = outlet
        self.questions: list[PendingQuestion] = []
        self.final: tuple[Any, BaseException | None] | None = None
        self.ended: threading.Event | None = None  # made (under the relay's lock) for a thread that waits for the end
        self.batching = False  # a question's thread is collecting its siblings for one round
        self._keys: Iterator[int] | None = None  # made at the upstream's first question

    def next_key(self, method: str) -> str:
        if self._keys is None:
            self._keys = itertools.count(1)
        return f"{KINDS[method]}-{next(self._keys)}"

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Relayed to the downstream request attached now (the current round's)."""
        ctx = self.ctx
        if ctx is not None:
            ctx.progress(progress, total, message)

    def cancel(self, reason: str) -> None:
        self.cancelled = reason  # between a 2026-07-28 upstream's rounds: no retry is sent
        pending = self.pending
        if pending is not None:
            pending.cancel(reason)


@dataclass(eq=False)
class UpstreamRound:
    """A 2026-07-28 upstream's `input_required`: its questions (under our keys) and its state."""

    questions: list[PendingQuestion]
    upstream_keys: dict[str, str]  # our key -> the upstream's
    state: str | None
    delivered: bool = False  # a state-only round was passed to the downstream
