"""The engine: one decoded request, a session and a transport context in, one typed outcome out.

Strategy: no threads, no I/O. `execute()` first decides the era of the request and checks it against
the connection's era lock in the order BEHAVIOR.md fixes (envelope shape → transport headers →
version → method → params → capabilities), then runs the interceptor chain around the domain
operation, then dresses a modern result (`resultType`, `_meta` serverInfo, cache hints). Every
failure leaves here as a `Failure` with a JSON-RPC error: `McpError` is the peer's fault and is
answered as is; any other exception is a bug, logged with a correlation id and answered -32603.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..auth.resource.principal import Principal
from ..catalog.cache_hint import CACHEABLE_METHODS, CacheHint
from ..catalog.catalog import Catalog
from ..catalog.extension import Extension
from ..catalog.questions import DEFAULT_ASK_TIMEOUT
from ..catalog.service import Tool
from ..protocol.jsonrpc import ErrorCode, McpError, Notification, Request, method_not_found
from ..protocol.methods import HANDSHAKE_METHODS, MODERN_METHODS, MODERN_ONLY_METHODS
from ..protocol.versions import (
    HANDSHAKE_ERA,
    LATEST_MODERN_VERSION,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    MODERN_ERA,
    Envelope,
    Era,
    check_modern_version,
    claims_modern,
    read_envelope,
    unsupported_version,
)
from ..tasks.runner import TaskRunner
from . import entry_operations, operations, task_operations
from .interceptors import Call, Interceptor, TransportInfo
from .observer import Observation, Observer, SessionObservation
from .outcome import Deferred, Failure, NoResponse, Outcome, Subscribed, Success
from .request_state import DEFAULT_TTL, RequestStateSealer
from .seams import Exchange, ForwardedTool
from .served import Served
from .session import Session
from .single_use import Claim, LocalClaims

log = logging.getLogger("mcpsync")

HeaderCheck = Callable[[Request, Envelope], None]
"""An HTTP transport's check of its headers against the body; raises -32020."""


OPERATIONS: dict[str, operations.Operation] = {
    "initialize": operations.initialize,
    "ping": operations.ping,
    "logging/setLevel": operations.set_log_level,
    "server/discover": operations.discover,
    "tools/list": operations.list_tools,
    "tools/call": operations.call_tool,
    "prompts/list": entry_operations.list_prompts,
    "prompts/get": entry_operations.get_prompt,
    "resources/list": entry_operations.list_resources,
    "resources/templates/list": entry_operations.list_resource_templates,
    "resources/read": entry_operations.read_resource,
    "completion/complete": entry_operations.complete,
    "subscriptions/listen": operations.listen,
    "resources/subscribe": operations.subscribe_resource,
    "resources/unsubscribe": operations.unsubscribe_resource,
    **task_operations.OPERATIONS,
}
"""The implementation of every method of either era (`mcpsync.protocol.methods` says which era has which)."""

INLINE_METHODS = frozenset(
    {"initialize", "ping", "server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list",
     "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
"""Methods that never run user code that could speak before the answer (see `runs_inline`)."""



class Engine:
    """Executes MCP requests against a catalog. Shared by every transport and connection.

    `single_use_state`: every tool's 2026-07-28 `requestState` runs it once (without it, only the
    tools marked `Tool(single_use_state=True)`); `claim`: the store's `claim(key, ttl)` those
    states are marked used in, shared by the replicas (default: this process's, `LocalClaims`;
    see `use_claims` and `mcpsync.engine.single_use`); `tasks`: the runner of the calls that
    become tasks (default: one of this process's, on a `MemoryTaskStore`).
    """

    def __init__(
        self,
        catalog: Catalog,
        server_info: dict[str, Any],
        *,
        instructions: str | None = None,
        interceptors: Iterable[Interceptor] = (),
        tool_filter: Callable[[Tool], bool] | None = None,
        page_size: int = 100,
        ttl_ms: int = 0,
        cache_scope: str = "private",
        cache_hints: Mapping[str, CacheHint] | None = None,
        request_state_secret: bytes | str | None = None,
        request_state_ttl: float = DEFAULT_TTL,
        ask_timeout: float = DEFAULT_ASK_TIMEOUT,
        single_use_state: bool = False,
        claim: Claim | None = None,
        tasks: TaskRunner | None = None,
        observer: Observer | None = None,
    ) -> None:
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        CacheHint(ttl_ms, cache_scope)  # checks them
        hints = dict(cache_hints or {})
        unknown = set(hints) - CACHEABLE_METHODS
        if unknown:
            raise ValueError(f"cache_hints for methods whose results are not cached: {sorted(unknown)} (only {', '.join(sorted(CACHEABLE_METHODS))})")
        if not all(isinstance(hint, CacheHint) for hint in hints.values()):
            raise TypeError("cache_hints maps a method to a CacheHint")
        if not ask_timeout > 0:
            raise ValueError("ask_timeout must be positive")
        self.served = Served(
            catalog=catalog,
            server_info=dict(server_info),
            instructions=instructions,
            interceptors=tuple(interceptors),
            tool_filter=tool_filter,
            page_size=page_size,
            request_states=RequestStateSealer(request_state_secret, ttl=request_state_ttl),
            ask_timeout=ask_timeout,
            single_use_state=_checked_flag(single_use_state),
            claim=_checked_claim(claim) if claim is not None else LocalClaims().claim,
            tasks=tasks if tasks is not None else TaskRunner(),
        )
        """What the operations read: the one copy of the settings they share with the engine."""
        self.ttl_ms = ttl_ms
        self.cache_scope = cache_scope
        self.cache_hints: dict[str, CacheHint] = hints
        """Each method's own cache hint, where it has one (`Server(cache_hints=...)`)."""
        self.observer = observer
        """Sees every request begin and end (`mcpsync.telemetry`); None: nothing is watched."""
        self.add_extension(task_operations.TASKS)  # tasks, as 2026-07-28 offers them

    # The settings live in `served`; these are the ones callers read (and the CLI sets).
    @property
    def catalog(self) -> Catalog:
        return self.served.catalog

    @property
    def tasks(self) -> TaskRunner:
        """Runs the calls that become tasks; `close()` it when the server stops."""
        return self.served.tasks

    @property
    def interceptors(self) -> tuple[Interceptor, ...]:
        return self.served.interceptors

    @property
    def server_info(self) -> dict[str, Any]:
        return self.served.server_info

    @property
    def tool_filter(self) -> Callable[[Tool], bool] | None:
        return self.served.tool_filter

    @property
    def page_size(self) -> int:
        return self.served.page_size

    @page_size.setter
    def page_size(self, value: int) -> None:
        self.served.page_size = value

    @property
    def request_states(self) -> RequestStateSealer:
        """Seals the `requestState` of 2026-07-28 `input_required` results (see `mrtr`)."""
        return self.served.request_states

    @request_states.setter
    def request_states(self, sealer: RequestStateSealer) -> None:
        self.served.request_states = sealer

    @property
    def single_use_state(self) -> bool:
        """Whether every tool's `requestState` runs it once (not only those marked so)."""
        return self.served.single_use_state

    @single_use_state.setter
    def single_use_state(self, value: bool) -> None:
        self.served.single_use_state = _checked_flag(value)

    @property
    def claim(self) -> Claim:
        """Marks single-use states used: `claim(key, ttl)` is True for the first use."""
        return self.served.claim

    def use_claims(self, claim: Claim) -> None:
        """Mark single-use states used in `claim` from now on: the `claim` method of the store
        every replica shares (`MemoryStore().claim` in one process, `RedisStore(...).claim`), so a
        state used on one replica is refused on every other. Marks made before stay where they
        were (call this before serving)."""
        self.served.claim = _checked_claim(claim)

    def runs_inline(self, request: Request) -> bool:
        """Whether `request` answers (or defers to an upstream) without sending anything first and
        without waiting on the client: a listing, discovery, a forwarded tool call, or a local tool
        that takes no `Context` (it cannot report progress, log or see a cancellation). A
        transport may run such a request on the thread that received it, sparing the hand-off to
        a worker. Interceptors may do anything with the exchange, so with any of them: never."""
        if self.served.interceptors:
            return False
        if request.method == "tools/call":
            name = request.params.get("name")
            tool = self.catalog.find_tool(name) if isinstance(name, str) else None
            return tool is None or not ((isinstance(tool, Tool) and tool.takes_context) or self._claims_state(request, tool))
        return request.method in INLINE_METHODS

    def answers_at_once(self, request: Request) -> bool:
        """Whether `request` is answered on the calling thread waiting on nothing but the CPU: a
        listing, discovery, or a call of a local tool that takes no `Context` and runs as no task.
        Stricter than `runs_inline`: never a forwarded call (its answer comes from an upstream),
        a task (its record may live in a store) or a claim of a single-use state. What the tool's
        own function does is the user's: a transport running such a request where nothing may
        wait (mcpsync's HTTP server, on its loop thread) watches it and moves on without it."""
        if self.served.interceptors:
            return False
        if request.method == "tools/call":
            name = request.params.get("name")
            tool = self.catalog.find_tool_known(name) if isinstance(name, str) else None
            return isinstance(tool, Tool) and not tool.takes_context and tool.task == "forbidden" and not self._claims_state(request, tool)
        return request.method in INLINE_METHODS

    def _claims_state(self, request: Request, tool: Tool | ForwardedTool) -> bool:
        """Whether running the call first claims its `requestState` in the store (a round trip
        to Redis, perhaps a socket timeout): never on the thread that reads the requests."""
        return "requestState" in request.params and self.served.single_use(tool)

    def forwards_at_once(self, request: Request) -> bool:
        """Whether `request` is a tool call forwarded to an upstream server without an interceptor
        around it: executing it only sends the call upstream (the answer comes later, on the
        thread that reads the upstream's), so a transport's reader may execute it itself,
        sparing the hand-off to a worker on the gateway's hot path."""
        if self.served.interceptors or request.method != "tools/call":
            return False
        name = request.params.get("name")
        tool = self.catalog.find_tool_known(name) if isinstance(name, str) else None  # never asks an upstream
        return tool is not None and not isinstance(tool, Tool) and not self._claims_state(request, tool)

    def execute_to(
        self,
        request: Request,
        session: Session,
        exchange: Exchange,
        transport: TransportInfo,
        deliver: Callable[[Outcome], None],
        header_check: HeaderCheck | None = None,
        principal: Principal | None = None,
    ) -> None:
        """`execute`, with the final outcome handed to `deliver`: here and now, or later on the
        thread that resolves a `Deferred` one. Never raises (see `execute_safely`)."""
        outcome = self.execute_safely(request, session, exchange, transport, header_check, principal)
        if isinstance(outcome, Deferred):
            outcome.then(deliver)
        else:
            deliver(outcome)

    def execute_safely(
        self,
        request: Request,
        session: Session,
        exchange: Exchange,
        transport: TransportInfo,
        header_check: HeaderCheck | None = None,
        principal: Principal | None = None,
    ) -> Outcome:
        """`execute`, never raising: reaching the guard is an engine bug, logged and answered
        -32603 (every transport runs requests this way). The `observer`, if any, sees it begin
        here and end with its final outcome (a forwarded call's when the upstream answers)."""
        observer = self.observer
        if observer is None:  # the guard written out here: a frame less on every request's way
            try:
                return self.execute(request, session, exchange, transport, header_check, principal)
            except Exception:
                return _engine_bug(request)
        observation = observer.begin(request, session, transport, exchange.trace_headers)
        try:
            outcome = self.execute(request, session, observation.exchange(exchange), transport, header_check, principal)
        except Exception:
            outcome = _engine_bug(request)
        finally:
            observation.leave()
        if isinstance(outcome, Deferred):
            return _observed_later(outcome, observation)
        observation.end(outcome)
        if isinstance(outcome, Subscribed):  # what the listen is told later stays in its trace
            return replace(outcome, stamp=observation.stamp)
        return outcome

    def notified(
        self, notification: Notification, session: Session, transport: TransportInfo, trace_headers: Mapping[str, str] | None = None
    ) -> None:
        """A notification the client sent, for the observer (its span); the transport acts on it.
        `trace_headers`: the trace context that came beside it (HTTP headers)."""
        if self.observer is not None:
            self.observer.notified(notification, session, transport, trace_headers)

    def session_began(self, transport: TransportInfo) -> SessionObservation | None:
        """A connection's session begins, for the observer (its duration); None when unobserved."""
        return self.observer.session_began(transport) if self.observer is not None else None

    def is_era_distinctive(self, request: Request) -> bool:
        """Requests the reader must finish before reading on while the era is unlocked."""
        return request.method == "initialize" or claims_modern(request.params)

    def add_extension(self, extension: Extension) -> None:
        """Offer `extension`: advertised from now on, its methods answered.

        Raises:
            ValueError: an extension of that id is offered already, or one of its methods is the
                core protocol's or another extension's.
        """
        served = self.served
        if extension.id in served.extensions:
            raise ValueError(f"extension {extension.id} is offered already")
        for method in extension.methods:
            if method in OPERATIONS or method in HANDSHAKE_METHODS or method in MODERN_METHODS or method in served.extension_methods:
                raise ValueError(f"extension {extension.id}: the method {method!r} is already answered")
        served.extensions[extension.id] = extension
        served.extension_methods.update(dict.fromkeys(extension.methods, extension))

    def _extension_answers(self, method: str, era: Era) -> bool:
        extension = self.served.extension_methods.get(method)
        return extension is not None and era in extension.eras

    def execute(
        self,
        request: Request,
        session: Session,
        exchange: Exchange,
        transport: TransportInfo,
        header_check: HeaderCheck | None = None,
        principal: Principal | None = None,
    ) -> Outcome:
        """The outcome of one request. `principal`: who made it, when the transport authenticated
        it (the HTTP endpoint with `Auth`); entries that need scopes it lacks are hidden from it."""
        try:
            call = self._classify(request, session, exchange, transport, header_check)
        except McpError as exc:
            return Failure(exc)
        call.principal = principal
        return self._run(call)

    # -- era and envelope ------------------------------------------------------------------------
    def _classify(
        self,
        request: Request,
        session: Session,
        exchange: Exchange,
        transport: TransportInfo,
        header_check: HeaderCheck | None,
    ) -> Call:
        method, params = request.method, request.params
        modern = claims_modern(params)
        if method == "initialize":
            if modern:
                raise McpError(ErrorCode.METHOD_NOT_FOUND, "Method not found: initialize does not exist in 2026-07-28", {"method": method})
            if session.era is MODERN_ERA:
                raise unsupported_version(params.get("protocolVersion"))
            return Call(request, session, HANDSHAKE_ERA, None, transport, exchange)
        if modern or session.era is MODERN_ERA:
            if session.era is HANDSHAKE_ERA:
                if method in MODERN_ONLY_METHODS:
                    raise _modern_only(method, session.era)
                raise McpError(
                    ErrorCode.INVALID_REQUEST,
                    "Invalid Request: this connection serves the handshake protocol era; "
                    "requests carrying the 2026-07-28 envelope are not accepted on it",
                )
            envelope = read_envelope(params)
            if header_check is not None:
                header_check(request, envelope)
            check_modern_version(envelope.protocol_version)
            if method not in MODERN_METHODS and not self._extension_answers(method, MODERN_ERA):
                raise method_not_found(method)
            return Call(request, session, MODERN_ERA, envelope, transport, exchange)
        if "_meta" in params and type(params["_meta"]) is not dict:
            raise McpError(ErrorCode.INVALID_PARAMS, "params._meta must be an object")
        if method in MODERN_ONLY_METHODS:
            raise _modern_only(method, session.era)
        if method not in HANDSHAKE_METHODS and not self._extension_answers(method, HANDSHAKE_ERA):
            raise method_not_found(method)
        return Call(request, session, HANDSHAKE_ERA, None, transport, exchange)

    # -- interceptors and dispatch ---------------------------------------------------------------
    def _run(self, call: Call) -> Outcome:
        claimed = call.method == "initialize" and call.session.claim_initialize()
        if call.method == "initialize" and not claimed:
            outcome: Outcome = Failure(McpError(ErrorCode.INVALID_REQUEST, "Invalid Request: already initialized"))
        else:
            outcome = self._dispatch(call)
        if isinstance(outcome, Deferred):
            return outcome  # _conclude runs when it resolves
        return self._conclude(call, outcome, claimed)

    def _conclude(self, call: Call, outcome: Outcome, claimed: bool = False) -> Outcome:
        """The after-execution hooks, then the era's dressing."""
        for interceptor in self.served.interceptors:
            outcome = self._guard(interceptor.after_execute, call, outcome)
        if isinstance(outcome, Success):
            outcome = self._finish(call, outcome)
        if claimed and not isinstance(outcome, Success):
            call.session.release_initialize()
        return outcome

    def _dispatch(self, call: Call) -> Outcome:
        """The bare outcome: interceptors' `before_execute`, then the operation (results undressed)."""
        try:
            for interceptor in self.served.interceptors:
                replacement = interceptor.before_execute(call)
                if replacement is not None:
                    return Success(replacement)
            operation: operations.Operation = OPERATIONS.get(call.method, operations.extension_method)
            result = operation(self.served, call)
        except McpError as exc:
            return Failure(exc)
        except Exception:
            return Failure(self._internal_error(call))
        if isinstance(result, (Subscribed, NoResponse)):
            return result
        if isinstance(result, operations.Forwarded):
            return self._defer(call, result)
        return Success(result)

    def _defer(self, call: Call, forwarded: operations.Forwarded) -> Deferred:
        """Chain the rest of the request onto a call that ends later, on the thread that ends it."""

        def then(deliver: Callable[[Outcome], None]) -> None:
            def done(result: Any, error: BaseException | None) -> None:
                try:
                    if error is None:
                        outcome: Outcome = Success(forwarded.finish(result))
                    elif isinstance(error, McpError):
                        outcome = Failure(error)
                    else:
                        outcome = Failure(forwarded.fail(error))
                    final = self._conclude(call, outcome)
                except Exception:  # a bug: never leave the request unanswered
                    final = Failure(self._internal_error(call))
                try:
                    deliver(final)
                except Exception:  # the transport's bug; the thread that ended the call goes on
                    log.exception("delivering the answer to %s (id %r) failed", call.method, call.request.id)

            forwarded.call.on_done(done)

        return Deferred(then)

    def _guard(self, hook: Callable[[Call, Outcome], Outcome], call: Call, outcome: Outcome) -> Outcome:
        """`hook(call, outcome)`, whose exception becomes the failure the client is answered."""
        try:
            return hook(call, outcome)
        except McpError as exc:
            return Failure(exc)
        except Exception:
            return Failure(self._internal_error(call))

    def _internal_error(self, call: Call) -> McpError:
        correlation = os.urandom(6).hex()
        log.exception("internal error %s while serving %s (id %r)", correlation, call.method, call.request.id)
        return McpError(ErrorCode.INTERNAL_ERROR, "Internal error", {"correlationId": correlation})

    def _finish(self, call: Call, outcome: Success) -> Success:
        """The era's dressing, and the era a success claims (its transport commits it once the
        answer is written); a handshake-era answer but `initialize`'s is the outcome as it came."""
        if call.era is MODERN_ERA:
            retry = "inputResponses" in call.params or "requestState" in call.params
            return Success(self.dress_modern(call.method, outcome.result, cacheable=not retry, private=call.principal is not None), MODERN_ERA)
        if call.method == "initialize":
            return Success(outcome.result, HANDSHAKE_ERA)
        return outcome if outcome.claims is None else Success(outcome.result)

    def dress_modern(self, method: str, result: dict[str, Any], *, cacheable: bool = True, private: bool = False) -> dict[str, Any]:
        """A copy of `result` with what every 2026-07-28 result carries: resultType, serverInfo,
        cache hints (not for `input_required`, nor for the result of a multi round-trip retry;
        `cacheScope` "private" whatever the setting when `private`: an authenticated caller's
        lists are its own). (A copy, so a result an interceptor caches never leaks into another
        era.)"""
        result = {**result}
        result.setdefault("resultType", "complete")
        meta = result.get("_meta")
        result["_meta"] = {**meta, META_SERVER_INFO: self.server_info} if meta else {META_SERVER_INFO: self.server_info}
        if method in CACHEABLE_METHODS:
            if cacheable and result["resultType"] == "complete":
                hint = self.cache_hints.get(method)
                result.setdefault("ttlMs", hint.ttl_ms if hint is not None else self.ttl_ms)  # a resource's own, put there by its read, stays
                result.setdefault("cacheScope", hint.scope if hint is not None else self.cache_scope)
                if private:
                    result["cacheScope"] = "private"
            else:  # input_required, or a retry's answer: never kept, whatever hint a resource gave its reads
                result.pop("ttlMs", None)
                result.pop("cacheScope", None)
        return result


def _engine_bug(request: Request) -> Failure:
    """What a request the engine itself failed on is answered (the failure logged): -32603."""
    log.exception("engine failed on %s", request.method)
    return Failure(McpError(ErrorCode.INTERNAL_ERROR, "Internal error"))


def _observed_later(later: Deferred, observation: Observation) -> Deferred:
    """A forwarded call's outcome, seen by the observer as it is delivered."""

    def then(deliver: Callable[[Outcome], None]) -> None:
        def ended(final: Outcome) -> None:
            observation.end(final)
            deliver(final)

        later.then(ended)

    return Deferred(then)


def _checked_flag(value: bool) -> bool:
    if not isinstance(value, bool):
        raise TypeError("single_use_state must be a bool")
    return value


def _checked_claim(claim: Claim) -> Claim:
    if not callable(claim):
        raise TypeError("claim must be a callable (key, ttl) -> bool, such as a Store's claim method")
    return claim


NO_ENVELOPE = (
    f"this request has no 2026-07-28 envelope: params._meta must carry {META_PROTOCOL_VERSION} "
    f'("{LATEST_MODERN_VERSION}") and {META_CLIENT_CAPABILITIES} (an object)'
)
"""What a 2026-07-28 method sent without the envelope lacks (the engine's -32601 and the HTTP
endpoint's refusal of such a request outside a session both say it)."""


def _modern_only(method: str, era: Era | None) -> McpError:
    """-32601 for a 2026-07-28 method sent without that era's envelope, saying what it lacks: the
    code is the era rule's (the handshake era has no such method, BEHAVIOR.md), the message names
    the fix, since a bare `server/discover` is the commonest first mistake of a hand-written client."""
    why = "this connection serves the handshake protocol era (it was initialized)" if era is HANDSHAKE_ERA else NO_ENVELOPE
    return McpError(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method} is a 2026-07-28 method, and {why}", {"method": method})
