"""Which tool arguments travel as `Mcp-Param-<Token>` headers in 2026-07-28 (SEP-2243): the
rules a client follows to send them and a server follows to check them.

Strategy: pure functions of a tool's `inputSchema`. A property annotated `x-mcp-header: TOKEN`,
reachable from the root through `properties` alone, of type string, integer or boolean, is sent as
the header `Mcp-Param-TOKEN` (its value rendered as the client writes it) whenever the argument is
present. A schema whose annotations are invalid has no such headers at all: conforming clients
drop such a tool (`split_invalid_tools`), and a server does not check it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

X_MCP_HEADER = "x-mcp-header"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_TYPES = frozenset({"string", "integer", "boolean"})
# JSON Schema applicators whose values are schemas: crossing one leaves the pure `properties` chain.
_ONE_SCHEMA = frozenset(
    {"items", "contains", "unevaluatedItems", "additionalProperties", "propertyNames",
     "unevaluatedProperties", "not", "if", "then", "else", "contentSchema"}
)
_SCHEMA_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_MAP = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})

ParamHeader = tuple[tuple[str, ...], str, dict[str, Any]]
"""(argument path, header token, property schema) of one `x-mcp-header` property."""


def param_headers(schema: Any) -> tuple[ParamHeader, ...]:
    """What a tool's `inputSchema` asks of its calls' headers: one entry per annotated property;
    none when its annotations are invalid (conforming clients drop such a tool and send none).
    A pure function of the schema, so a transport computes it once per tool."""
    if schema is None or invalid_annotation(schema) is not None:
        return ()
    return tuple(annotated_properties(schema))


def render_value(value: Any) -> str | None:
    """How a client writes an argument into its header (None: it cannot be, so it sends none)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, (str, int, float)):
        return None
    try:
        return str(value)
    except ValueError:  # an int past the interpreter's digit limit
        return None


def value_at(arguments: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The argument at `path` (None where the path leads nowhere)."""
    node: Any = arguments
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _schema_positions(root: Any) -> Iterator[tuple[tuple[str, ...] | None, dict[str, Any]]]:
    """Every schema position in `root` with its chain of `properties` keys (None once another
    applicator was crossed). Iterative, and `$ref` is never followed, so it ends on any input."""
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield path, node
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, dict):
                stack.extend(((*path, name) if path is not None else None, sub) for name, sub in value.items())
            elif keyword in _ONE_SCHEMA:
                stack.append((None, value))
            elif keyword in _SCHEMA_LIST and isinstance(value, list):
                stack.extend((None, sub) for sub in value)
            elif keyword in _SCHEMA_MAP and isinstance(value, dict):
                stack.extend((None, sub) for sub in value.values())


def annotated_properties(schema: Any) -> Iterator[tuple[tuple[str, ...], str, dict[str, Any]]]:
    """(path, token, property schema) for each property reachable through `properties` alone that
    carries an `x-mcp-header` string."""
    for path, node in _schema_positions(schema):
        token = node.get(X_MCP_HEADER)
        if path and isinstance(token, str):
            yield path, token, node


def invalid_annotation(schema: Any) -> str | None:
    """Why the schema's `x-mcp-header` annotations are invalid, or None if they are all valid."""
    seen: dict[str, str] = {}
    for path, node in _schema_positions(schema):
        if X_MCP_HEADER not in node:
            continue
        if not path:
            return f"{X_MCP_HEADER} outside a chain of properties"
        where = ".".join(path)
        token = node[X_MCP_HEADER]
        if not isinstance(token, str):
            return f"property {where!r}: {X_MCP_HEADER} must be a string"
        if not token:
            return f"property {where!r}: {X_MCP_HEADER} is empty"
        if not _TOKEN.fullmatch(token):
            return f"property {where!r}: {X_MCP_HEADER} {token!r} is not an HTTP field name (ASCII letters, digits and !#$%&'*+-.^_`|~ only)"
        if node.get("type") not in _HEADER_TYPES:
            return f"property {where!r}: {X_MCP_HEADER} is allowed on string, integer and boolean properties only"
        if token.lower() in seen:
            return f"property {where!r}: {X_MCP_HEADER} {token!r} repeats that of {seen[token.lower()]!r}"
        seen[token.lower()] = where
    return None


def split_invalid_tools(tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """(the listed tools whose annotations are valid, in order; name -> why for the others): a
    2026-07-28 client over HTTP MUST leave the others out of its tool list."""
    kept: list[dict[str, Any]] = []
    invalid: dict[str, str] = {}
    for tool in tools:
        reason = invalid_annotation(tool.get("inputSchema")) if isinstance(tool, dict) else None
        if reason is None:
            kept.append(tool)
        else:
            invalid[str(tool.get("name"))] = reason
    return kept, invalid
