"""The domain operations: one function per MCP method, each `(served, call) -> result`.

Strategy: operations see a classified `Call` (era and envelope already checked) and return the bare
result dict; the engine adds the era's dressing. They raise `McpError` for the client's mistakes.
Which methods exist in which era is `mcpsync.protocol.methods`'s tables, and nothing else decides
it; the engine's `OPERATIONS` maps each to its function (prompts, resources and completion are in
`entry_operations`, tasks in `task_operations`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ..auth.resource.principal import InsufficientScope
from ..catalog.catalog import Catalog, paginate
from ..catalog.content import ToolError
from ..catalog.context import AskCancelled, ClientRefused, Context, TaskStarted
from ..catalog.questions import InputRequired, NeedAnswers
from ..catalog.service import Tool, error_result
from ..catalog.validation import InvalidArguments
from ..protocol.jsonrpc import ErrorCode, McpError, invalid_params
from ..protocol.versions import (
    HANDSHAKE_ERA,
    LOG_LEVEL_RANK,
    LOG_LEVELS,
    MODERN_ERA,
    MODERN_VERSIONS,
    Era,
    is_log_level,
    negotiate_handshake,
    version_at_least,
)
from ..tasks.control import UNTOLD, TaskControl
from . import mrtr, task_operations
from .interceptors import Call, Interceptor, ToolCall
from .outcome import Later, Subscribed
from .seams import ForwardedTool
from .served import Served

log = logging.getLogger("mcpsync")

Operation = Callable[[Served, Call], Any]


# -- capabilities: what discover and initialize advertise ------------------------------------------

def server_capabilities(served: Served, call: Call) -> dict[str, Any]:
    """The one place capabilities are decided, for both eras and every transport.

    Change notifications are advertised only where the transport can deliver them: through
    `subscriptions/listen` in 2026-07-28, unsolicited after `initialize` in the handshake era.
    `subscriptions/listen` accepts exactly what this advertises (`accepted_filter`).
    """
    transport = call.transport
    delivers = transport.supports_subscriptions if call.era is MODERN_ERA else transport.handshake_push
    changes: dict[str, Any] = {"listChanged": True} if delivers else {}
    resources: dict[str, Any] = {"subscribe": True, "listChanged": True} if delivers else {}
    capabilities: dict[str, Any] = {
        "tools": dict(changes),
        "prompts": dict(changes),
        "resources": resources,
        "completions": {},
        "logging": {},
    }
    task_operations.advertised(call, capabilities)
    offered = {extension.id: dict(extension.settings) for extension in served.extensions.values() if call.era in extension.eras}
    if offered:
        capabilities["extensions"] = {**capabilities.get("extensions", {}), **offered}
    return capabilities


def extension_method(served: Served, call: Call) -> dict[str, Any]:
    """One of an extension's methods, answered by its function with the request's Context."""
    params = {key: value for key, value in call.params.items() if key != "_meta"}
    return served.extension_methods[call.method].methods[call.method](params, make_context(served, call))


_FLAG_CAPABILITY = {"toolsListChanged": "tools", "promptsListChanged": "prompts", "resourcesListChanged": "resources"}


def accepted_filter(requested: dict[str, Any], capabilities: dict[str, Any]) -> dict[str, Any]:
    """The subset of a listen filter the server will honour: true flags whose list-change capability
    is advertised, and a non-empty URI list when resource subscriptions are. Unknown keys are dropped."""
    accepted: dict[str, Any] = {}
    for flag, kind in _FLAG_CAPABILITY.items():
        if requested.get(flag) is True and capabilities.get(kind, {}).get("listChanged") is True:
            accepted[flag] = True
    uris = requested.get("resourceSubscriptions")
    if uris and capabilities.get("resources", {}).get("subscribe") is True:
        accepted["resourceSubscriptions"] = list(dict.fromkeys(uris))
    return accepted


def listen(served: Served, call: Call) -> Subscribed:
    if not call.transport.supports_subscriptions:
        raise McpError(ErrorCode.METHOD_NOT_FOUND, "subscriptions/listen is not available on this transport", {"method": call.method})
    requested = call.params.get("notifications")
    if not isinstance(requested, dict):
        raise invalid_params("subscriptions/listen: params.notifications must be an object")
    for flag in _FLAG_CAPABILITY:
        if flag in requested and not isinstance(requested[flag], bool):
            raise invalid_params(f"subscriptions/listen: notifications.{flag} must be a boolean")
    uris = requested.get("resourceSubscriptions")
    if uris is not None and (not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris)):
        raise invalid_params("subscriptions/listen: notifications.resourceSubscriptions must be a list of strings")
    _require_readable(served, call, uris or [])
    accepted = accepted_filter(requested, server_capabilities(served, call))
    task_ids = task_operations.listened_tasks(served, call, requested.get("taskIds"))
    if task_ids:
        accepted["taskIds"] = task_ids
    return Subscribed(call.request.id, accepted)


def subscribe_resource(served: Served, call: Call) -> dict[str, Any]:
    uri = _require_uri(call)
    _require_readable(served, call, [uri])
    call.session.subscribe_resource(uri)
    return {}


def _require_readable(served: Served, call: Call, uris: list[str]) -> None:
    """Watching a resource's updates needs the scopes reading it does (all of them, in one refusal).

    This only refuses early, with the scopes to step up to, a subscription to an entry's own URI.
    A subscription also covers what lies under its URI (`uri_covers`), and a URI with no entry of
    its own (`secret://`, `secret:`) is accepted like any other, since refusing it would tell
    what is under it: each update is checked instead, against the token of the stream it would
    travel on (`update_scopes`)."""
    if call.principal is None:
        return
    needed: set[str] = set()
    for uri in uris:
        found = served.catalog.find_resource(uri)
        if found is not None:
            needed |= found[0].scopes
    if not call.principal.scopes.issuperset(needed):
        raise InsufficientScope(needed, "watching " + ", ".join(repr(uri) for uri in uris))


def update_scopes(catalog: Catalog, uri: str) -> frozenset[str] | None:
    """The scopes a token needs to be told that the resource at `uri` changed: those reading it
    needs, from the entry the catalog finds for it (the resource at that URI, else the first
    template matching it, local entries before an upstream's); None when no entry answers for
    it, and then no token is told (what nobody may read, nobody hears of).

    Whatever URI the subscription named: the updated URI is looked up exactly as a read of it
    would be, so a prefix, a case variant or an encoding gains nothing. An upstream's entries
    need no scope of the gateway's own; they are found in the upstream's last lists, never by
    asking it (`Catalog.find_resource_known`: an update may arrive on its reader thread), so an
    update of an upstream resource the gateway has never listed is told to nobody."""
    found = catalog.find_resource_known(uri)
    return None if found is None else frozenset(found[0].scopes)


def unsubscribe_resource(served: Served, call: Call) -> dict[str, Any]:
    call.session.unsubscribe_resource(_require_uri(call))
    return {}


def _require_uri(call: Call) -> str:
    if not call.transport.handshake_push:
        raise McpError(ErrorCode.METHOD_NOT_FOUND, f"{call.method} is not available on this transport", {"method": call.method})
    uri = call.params.get("uri")
    if not isinstance(uri, str):
        raise invalid_params(f"{call.method}: params.uri must be a string")
    return uri


# -- lifecycle ------------------------------------------------------------------------------------

def initialize(served: Served, call: Call) -> dict[str, Any]:
    params = call.params
    requested = params.get("protocolVersion")
    if not isinstance(requested, str):
        raise invalid_params("initialize: params.protocolVersion must be a string")
    capabilities = params.get("capabilities", {})
    if not isinstance(capabilities, dict):
        raise invalid_params("initialize: params.capabilities must be an object")
    client_info = params.get("clientInfo")
    if client_info is not None and not isinstance(client_info, dict):
        raise invalid_params("initialize: params.clientInfo must be an object")
    version = negotiate_handshake(requested)
    session = call.session
    session.negotiated_version = version
    session.client_capabilities = capabilities
    session.client_info = client_info
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": server_capabilities(served, call),
        "serverInfo": server_info_for(served, version),
    }
    instructions = _instructions(served)
    if instructions:
        result["instructions"] = instructions
    return result


def discover(served: Served, call: Call) -> dict[str, Any]:
    result: dict[str, Any] = {
        "supportedVersions": list(MODERN_VERSIONS),
        "capabilities": server_capabilities(served, call),
    }
    instructions = _instructions(served)
    if instructions:
        result["instructions"] = instructions
    return result


def _instructions(served: Served) -> str | None:
    return served.instructions or served.catalog.snapshot.instructions


def ping(served: Served, call: Call) -> dict[str, Any]:
    return {}


def set_log_level(served: Served, call: Call) -> dict[str, Any]:
    level = call.params.get("level")
    if not is_log_level(level):
        raise invalid_params(f"logging/setLevel: level must be one of {', '.join(LOG_LEVELS)}")
    call.session.set_log_level(level)
    return {}


# -- the request context a function sees ----------------------------------------------------------

def make_context(
    served: Served, call: Call, retry: mrtr.Retry | None = None, *, single_use: bool = False, task: TaskControl | None = None,
    start_task: Callable[[Callable[[Context], Any]], TaskStarted | None] | None = None,
) -> Context:
    """The request's `Context`, with what the retry brought (`retry`, already prepared, or
    prepared here: a bad `requestState` raises -32602); `single_use`: the states it seals are
    a single-use tool's. `task`: the control of a task the function runs in, which replaces the
    request's exchange (its questions, notifications and cancellation are the task's, and it
    never answers `input_required`); `start_task`: what `ctx.run_task` starts a task with."""
    meta = call.params.get("_meta")
    progress_token = meta.get("progressToken") if isinstance(meta, dict) else None
    if call.era is MODERN_ERA:
        envelope = call.envelope
        assert envelope is not None
        threshold = envelope.log_level
        wants_log = (lambda level: LOG_LEVEL_RANK[level] >= LOG_LEVEL_RANK[threshold]) if threshold else (lambda level: False)
        capabilities, client_info = envelope.client_capabilities, envelope.client_info
    else:
        wants_log = call.session.wants_log
        capabilities, client_info = call.session.client_capabilities, call.session.client_info
    if retry is None:
        retry = mrtr.prepare(served.request_states, call)
    exchange = call.exchange if task is None else task
    if task is not None and progress_token is None:
        progress_token = UNTOLD  # a task's progress message is its statusMessage, asked for or not
    handshake = call.era is HANDSHAKE_ERA
    return Context(
        request_id=call.request.id,
        era=call.era,
        protocol_version=call.protocol_version,
        client_info=client_info,
        client_capabilities=capabilities,
        progress_token=progress_token,
        notify=exchange.notify,
        cancel_event=exchange.cancel_event,
        wants_log=wants_log,
        on_cancel=exchange.on_cancel,
        ask_client=exchange.ask if handshake else None,
        answers=retry.answers if task is None else None,  # a task's questions are its own (SEP-2663: keys apart)
        state=retry.state if task is None else None,
        ask_timeout=served.ask_timeout,
        seal=mrtr.sealer_for(served.request_states, call, unique=single_use) if task is None else None,
        principal=call.principal,
        release_stream=exchange.release_stream if handshake else None,
        ask_keyed=task.ask_keyed if task is not None and not handshake else None,
        start_task=start_task,
    )


# -- tools ----------------------------------------------------------------------------------------

def _visible_tools(served: Served, call: Call) -> tuple[Tool, ...]:
    tools = served.catalog.list_tools()
    if served.tool_filter is not None:
        tools = tuple(tool for tool in tools if served.tool_filter(tool))
    return permitted(call, tools)


# -- scopes: what an authenticated caller may see and use ------------------------------------------

class Scoped(Protocol):
    @property
    def scopes(self) -> frozenset[str]: ...


E = TypeVar("E", bound=Scoped)


def permitted(call: Call, entries: tuple[E, ...]) -> tuple[E, ...]:
    """The entries the caller's token has the scopes for (all of them without `Auth`)."""
    principal = call.principal
    if principal is None:
        return entries
    return tuple(entry for entry in entries if principal.scopes.issuperset(entry.scopes))


def require_scopes(call: Call, entry: Scoped, what: str) -> None:
    """Refuse (403 `insufficient_scope` over HTTP) an entry whose scopes the token lacks: it is not
    listed to this caller, and calling it names the scopes, so the client can step up."""
    principal = call.principal
    if principal is not None and not principal.scopes.issuperset(entry.scopes):
        raise InsufficientScope(entry.scopes, what)


ENTRY_FIELDS_SINCE = {"icons": "2025-11-25", "title": "2025-06-18"}
"""The fields of a definition (a prompt's, a resource's, a template's) a version before the one
named has not."""
TOOL_FIELDS_SINCE = {**ENTRY_FIELDS_SINCE, "outputSchema": "2025-06-18", "annotations": "2025-03-26", "execution": "2025-11-25"}
"""A tool's, besides: `execution` (tasks) came with 2025-11-25."""
SERVER_INFO_FIELDS_SINCE = {**ENTRY_FIELDS_SINCE, "description": "2025-11-25", "websiteUrl": "2025-11-25"}
"""`serverInfo`'s (an `Implementation`)."""


def for_version(definition: dict[str, Any], version: str | None, since: Mapping[str, str] = ENTRY_FIELDS_SINCE) -> dict[str, Any]:
    """`definition` without the fields the negotiated version does not have (`since`: each
    field's first version): a copy when any goes, else `definition` itself."""
    old = [key for key, first in since.items() if key in definition and not version_at_least(version, first)]
    return {key: value for key, value in definition.items() if key not in old} if old else definition


def server_info_for(served: Served, version: str | None) -> dict[str, Any]:
    """`serverInfo` as the negotiated version has it."""
    return for_version(served.server_info, version, SERVER_INFO_FIELDS_SINCE)


def _tool_definition(tool: Tool, version: str | None) -> dict[str, Any]:
    return for_version(tool.definition(), version, TOOL_FIELDS_SINCE)


def page(served: Served, call: Call, entries: tuple[Any, ...], key: str, describe: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """One page of a list method's result, with the cursor of the next page if there is one."""
    page, next_cursor = paginate(entries, call.params, served.page_size)
    result: dict[str, Any] = {key: [describe(entry) for entry in page]}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


def list_tools(served: Served, call: Call) -> dict[str, Any]:
    version = call.protocol_version
    return page(served, call, _visible_tools(served, call), "tools", lambda tool: _tool_definition(tool, version))


def call_tool(served: Served, call: Call) -> dict[str, Any] | Forwarded:
    name = call.params.get("name")
    if not isinstance(name, str):
        raise invalid_params("tools/call: params.name must be a string")
    arguments = call.params.get("arguments")
    if arguments is None:
        arguments = {}
    elif not isinstance(arguments, dict):
        raise invalid_params("tools/call: params.arguments must be an object")
    tool = served.catalog.find_tool(name)
    if tool is None or not served.visible(tool):
        raise invalid_params(f"Unknown tool: {name}", {"name": name})
    require_scopes(call, tool, f"tool '{name}'")
    refused = _refused_arguments(tool, arguments)
    if refused is not None:
        return refused
    if tool.requires:
        missing = missing_capabilities(tool.requires, _client_capabilities(call))
        if missing:
            if call.era is MODERN_ERA:
                raise McpError(
                    ErrorCode.MISSING_CLIENT_CAPABILITY,
                    f"Tool '{name}' requires client capabilities this request did not declare",
                    {"requiredCapabilities": missing},
                )
            return error_result(f"Tool '{name}' requires client capabilities the client did not declare: {', '.join(missing)}")
    gate = version_at_least(call.protocol_version, "2025-06-18")
    single_use = served.single_use(tool)
    retry = mrtr.prepare(served.request_states, call)
    form = task_operations.task_form(call, tool)
    consume = mrtr.consumer(served.request_states, served.claim, retry) if single_use else None

    def in_task(control: TaskControl) -> Context:
        return make_context(served, call, retry, task=control)

    if form is not None and not isinstance(tool, Tool):  # an upstream's task, behind one of ours
        upstream: ForwardedTool = tool
        return task_operations.start(served, call, name, form, in_task, lambda ctx: _gated(upstream.run_task(arguments, ctx), gate))
    if not isinstance(tool, Tool) and not (served.interceptors and _wraps_tool_calls(served)):
        forwarded: ForwardedTool = tool
        if consume is not None:
            consume()
        context = make_context(served, call, retry, single_use=single_use)
        return Forwarded(forwarded.start(arguments, context), finish=lambda result: _gated(result, gate))
    if form is None and not tool.takes_context and not served.interceptors:
        return _call_without_context(served, call, tool, arguments, retry, consume, gate)
    run = _chain(served, tool, consume)
    if form is not None:
        return task_operations.start(served, call, name, form, in_task, lambda ctx: _gated(run(ToolCall(name, arguments, ctx, call)), gate))
    start_task = task_operations.starter(served, call, tool, in_task, lambda value: _gated(tool.to_result(value), gate)) if isinstance(tool, Tool) else None
    context = make_context(served, call, retry, single_use=single_use, start_task=start_task)
    return mrtr.answering(call, context, lambda: _gated(run(ToolCall(name, arguments, context, call)), gate))


def _call_without_context(
    served: Served, call: Call, tool: Tool, arguments: dict[str, Any], retry: mrtr.Retry, consume: Callable[[], None] | None, gate: bool
) -> dict[str, Any]:
    """A local tool that takes no `Context`, with no interceptor around it: nothing of the request
    reaches the function, so its Context (the request's most costly object on the hot path) is
    made only if the function returns `InputRequired`, whose questions are asked through one."""
    context: Context | None = None

    def context_now() -> Context:
        nonlocal context
        if context is None:
            context = make_context(served, call, retry)
        return context

    def body() -> dict[str, Any]:
        if consume is not None:
            consume()  # raises "replayed" or "unchecked": the tool does not run
        return _gated(_run_tool(tool, arguments, context, call.era, context_now), gate)

    try:
        return body()
    except NeedAnswers as need:
        return mrtr.answering(call, context_now(), body, asked=need)


def _refused_arguments(tool: Tool, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The `isError` result for arguments that fail the tool's input schema, or None when they pass.

    A result, not -32602: input validation errors are tool execution errors (2025-11-25 tools.mdx,
    SEP-1303), so the model reads which field broke which rule and can call again.
    """
    try:
        tool.validate(arguments)
    except InvalidArguments as exc:
        return error_result(str(exc))
    return None


def _gated(result: dict[str, Any], structured_allowed: bool) -> dict[str, Any]:
    if not structured_allowed:
        result.pop("structuredContent", None)
    return result


def _wraps_tool_calls(served: Served) -> bool:
    """Whether an interceptor overrides around_tool_call (then a forwarded call runs synchronously,
    so the interceptor sees and may replace its result)."""
    return any(type(i).around_tool_call is not Interceptor.around_tool_call for i in served.interceptors)


@dataclass(slots=True)
class Forwarded:
    """A call handed to another server: the engine finishes the request when it ends.

    `finish` turns the upstream's result into ours; `fail` turns a local failure (timeout, lost
    upstream) into the JSON-RPC error the client sees.
    """

    call: Later
    finish: Callable[[dict[str, Any]], dict[str, Any]]
    fail: Callable[[BaseException], McpError] = lambda error: McpError(ErrorCode.INTERNAL_ERROR, f"upstream call failed: {error}")


def _client_capabilities(call: Call) -> dict[str, Any]:
    return call.envelope.client_capabilities if call.envelope is not None else call.session.client_capabilities


def missing_capabilities(required: dict[str, Any], declared: dict[str, Any]) -> dict[str, Any]:
    """The part of `required` that `declared` lacks (nested objects name sub-capabilities)."""
    missing: dict[str, Any] = {}
    for key, needed in required.items():
        have = declared.get(key)
        if not isinstance(have, dict):
            missing[key] = needed
        elif isinstance(needed, dict) and needed:
            deeper = missing_capabilities(needed, have)
            if deeper:
                missing[key] = deeper
    return missing


def _chain(served: Served, tool: Tool, consume: Callable[[], None] | None = None) -> Callable[[ToolCall], dict[str, Any]]:
    """The tool behind its interceptors' `around_tool_call`. `consume` marks a single-use state
    used: last, once nothing else can refuse the call, so a refused retry keeps its state."""

    def innermost(tool_call: ToolCall) -> dict[str, Any]:
        if served.interceptors:  # an interceptor may have changed them: check again
            refused = _refused_arguments(tool, tool_call.arguments)
            if refused is not None:
                return refused
        if consume is not None:
            consume()  # raises "replayed" or "unchecked": the tool does not run
        return _run_tool(tool, tool_call.arguments, tool_call.context, tool_call.call.era)

    proceed: Callable[[ToolCall], dict[str, Any]] = innermost
    for interceptor in reversed(served.interceptors):
        proceed = _wrap(interceptor, proceed)
    return proceed


def _wrap(interceptor: Any, proceed: Callable[[ToolCall], dict[str, Any]]) -> Callable[[ToolCall], dict[str, Any]]:
    return lambda tool_call: interceptor.around_tool_call(tool_call, proceed)


def _run_tool(
    tool: Tool, arguments: dict[str, Any], context: Context | None, era: Era, context_now: Callable[[], Context] | None = None
) -> dict[str, Any]:
    """The tool's result. `context` is None for a function that takes none; `context_now` then
    makes one if it returns `InputRequired`, whose questions are asked through it."""
    try:
        value = tool.invoke(arguments, context)
        if isinstance(value, TaskStarted):
            return value.result
        if isinstance(value, InputRequired):
            asked_by = context if context_now is None else context_now()
            assert asked_by is not None, "a call without a Context comes with context_now"
            raise mrtr.returned(asked_by, value)
        return tool.to_result(value)
    except ClientRefused as exc:
        return error_result(f"Tool '{tool.name}': the client refused {exc.method}: {exc.message}")
    except McpError as exc:
        if exc.code == ErrorCode.MISSING_CLIENT_CAPABILITY and era is HANDSHAKE_ERA:
            return error_result(exc.message)  # as for Tool(requires=...): -32021 is a 2026-07-28 code
        raise
    except AskCancelled as exc:  # the request is over: nothing will be sent, nothing to log
        return error_result(str(exc))
    except ToolError as exc:
        return error_result(str(exc) or f"Tool '{tool.name}' failed")
    except Exception as exc:
        log.exception("tool %r raised", tool.name)
        return error_result(f"Error executing tool '{tool.name}': {type(exc).__name__}: {exc}")
