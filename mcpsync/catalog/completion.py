"""Completions (`completion/complete`): the values a prompt's argument or a resource template's
variable offers for what the user has typed so far.

Why apart: prompts and resource templates complete the same way, and the engine answers for a
fixed resource, which has no variables, with the same (empty) result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

Completer = Iterable[str] | Callable[[str, Mapping[str, str]], Iterable[str]]
"""Completion values for one argument: a fixed list filtered by prefix, or a function of the
partial value and the other arguments already given."""

_MAX_COMPLETIONS = 100


def _filter_completions(source: Completer, value: str, arguments: Mapping[str, str]) -> list[str]:
    if callable(source):
        return [str(item) for item in source(value, arguments)]
    return [item for item in source if item.startswith(value)]


def completion_result(source: Completer | None, value: str, arguments: Mapping[str, str]) -> dict[str, Any]:
    values = _filter_completions(source, value, arguments) if source is not None else []
    completion: dict[str, Any] = {"values": values[:_MAX_COMPLETIONS], "total": len(values)}
    completion["hasMore"] = len(values) > _MAX_COMPLETIONS
    return {"completion": completion}
