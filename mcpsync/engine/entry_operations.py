"""The operations on prompts, resources and completion: each `(served, call) -> result`, as in
`operations`, whose scopes, paging and `Context` they share.

Strategy: a prompt or a resource runs the user's function like a tool does, but a question of
theirs that fails is an error of the request (there is no `isError` result to carry it), and a
resource that is not there is the era's own "not found".
"""

from __future__ import annotations

import logging
from typing import Any

from ..catalog.content import ResourceNotFound
from ..catalog.context import AskCancelled, ClientRefused
from ..catalog.service import completion_result, resource_not_found
from ..protocol.jsonrpc import ErrorCode, McpError, invalid_params
from ..protocol.versions import Era
from . import mrtr
from .interceptors import Call
from .operations import for_version, make_context, page, permitted, require_scopes
from .served import Served

log = logging.getLogger("mcpsync")


def _asking_failed(what: str, exc: Exception) -> McpError:
    """A prompt or resource whose question to the client failed: an error of its own (not the
    client's code passed off as the request's), and nothing logged (nobody did anything wrong)."""
    if isinstance(exc, ClientRefused):
        return McpError(ErrorCode.INTERNAL_ERROR, f"{what}: the client refused {exc.method}: {exc.message}")
    return McpError(ErrorCode.INTERNAL_ERROR, f"{what}: {exc}")


# -- prompts --------------------------------------------------------------------------------------

def list_prompts(served: Served, call: Call) -> dict[str, Any]:
    version = call.protocol_version
    return page(served, call, permitted(call, served.catalog.list_prompts()), "prompts", lambda prompt: for_version(prompt.definition(), version))


def get_prompt(served: Served, call: Call) -> dict[str, Any]:
    name = call.params.get("name")
    if not isinstance(name, str):
        raise invalid_params("prompts/get: params.name must be a string")
    arguments = call.params.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise invalid_params("prompts/get: params.arguments must be an object")
    prompt = served.catalog.find_prompt(name)
    if prompt is None:
        raise invalid_params(f"Unknown prompt: {name}", {"name": name})
    require_scopes(call, prompt, f"prompt '{name}'")
    ctx = make_context(served, call)
    try:
        return mrtr.answering(call, ctx, lambda: prompt.get(arguments, ctx))
    except (ClientRefused, AskCancelled) as exc:
        raise _asking_failed(f"Prompt '{name}'", exc) from None
    except McpError:
        raise
    except Exception as exc:
        log.exception("prompt %r raised", name)
        raise McpError(ErrorCode.INTERNAL_ERROR, f"Prompt '{name}' failed: {type(exc).__name__}") from exc


# -- resources ------------------------------------------------------------------------------------

def list_resources(served: Served, call: Call) -> dict[str, Any]:
    version = call.protocol_version
    return page(served, call, permitted(call, served.catalog.list_resources()), "resources", lambda resource: for_version(resource.definition(), version))


def list_resource_templates(served: Served, call: Call) -> dict[str, Any]:
    version = call.protocol_version
    entries = permitted(call, served.catalog.list_templates())
    return page(served, call, entries, "resourceTemplates", lambda template: for_version(template.definition(), version))


def read_resource(served: Served, call: Call) -> dict[str, Any]:
    uri = call.params.get("uri")
    if not isinstance(uri, str):
        raise invalid_params("resources/read: params.uri must be a string")
    found = served.catalog.find_resource(uri)
    if found is None:
        raise resource_not_found(uri, modern=call.era is Era.MODERN)
    entry, variables = found
    require_scopes(call, entry, f"resource {uri!r}")
    ctx = make_context(served, call)
    try:
        contents = mrtr.answering(call, ctx, lambda: entry.read(uri, variables, ctx))
        if isinstance(contents, dict):  # input_required
            return contents
    except (ClientRefused, AskCancelled) as exc:
        raise _asking_failed(f"Reading resource {uri!r}", exc) from None
    except McpError:
        raise
    except (ResourceNotFound, FileNotFoundError):
        raise resource_not_found(uri, modern=call.era is Era.MODERN) from None
    except Exception as exc:
        log.exception("resource %r raised", uri)
        raise McpError(ErrorCode.INTERNAL_ERROR, f"Reading resource failed: {type(exc).__name__}", {"uri": uri}) from exc
    hint = getattr(entry, "cache", None)  # a resource's own (an upstream's resource has none here)
    if hint is not None and call.era is Era.MODERN:  # the engine's dressing drops it from a retry's answer
        return {"contents": contents, **hint.wire()}
    return {"contents": contents}


# -- completion -----------------------------------------------------------------------------------

def complete(served: Served, call: Call) -> dict[str, Any]:
    params = call.params
    ref, argument = params.get("ref"), params.get("argument")
    if not isinstance(ref, dict) or not isinstance(argument, dict):
        raise invalid_params("completion/complete: params.ref and params.argument must be objects")
    arg_name, value = argument.get("name"), argument.get("value", "")
    if not isinstance(arg_name, str) or not isinstance(value, str):
        raise invalid_params("completion/complete: argument.name and argument.value must be strings")
    context = params.get("context") or {}
    given = (context.get("arguments") or {}) if isinstance(context, dict) else {}
    if not isinstance(given, dict):
        raise invalid_params("completion/complete: context.arguments must be an object")
    catalog = served.catalog
    entry: Any  # a local prompt or template, or an upstream's: each has complete()
    # ref.name and ref.uri are checked to be strings before any message quotes them: a hostile
    # value (a list nested 1,000 deep) must get -32602, as tools/call's params.name does, not a
    # RecursionError from its str() answered -32603.
    if ref.get("type") == "ref/prompt":
        name = ref.get("name")
        if not isinstance(name, str):
            raise invalid_params("completion/complete: ref.name must be a string")
        entry = catalog.find_prompt(name)
        if entry is None:
            raise invalid_params(f"Unknown prompt: {name}")
        require_scopes(call, entry, f"prompt '{name}'")
    elif ref.get("type") == "ref/resource":
        uri = ref.get("uri")
        if not isinstance(uri, str):
            raise invalid_params("completion/complete: ref.uri must be a string")
        entry = catalog.find_template(uri)
        if entry is None:
            if catalog.find_resource(uri) is not None:
                return completion_result(None, value, given)
            raise invalid_params(f"Unknown resource template: {uri}")
        require_scopes(call, entry, f"resource template {uri!r}")
    else:
        raise invalid_params("completion/complete: ref.type must be 'ref/prompt' or 'ref/resource'")
    completion: dict[str, Any] = entry.complete(arg_name, value, given)
    return completion
