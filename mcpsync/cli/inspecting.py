"""`mcpsync inspect`: what a server offers, on one page a person reads (or as JSON for a program):
who it is and which protocol it speaks, its capabilities and extensions, its instructions, and
every tool (as a signature read from its input schema), prompt, resource and resource template.

Only what the server declares is listed (a server without prompts is not asked for them), and
each list is followed to its last page. The page is built from the listings by `render`, a pure
function, so what a person sees is tested without a server.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import click

from ._client_common import _client_options, _ClientFailure, _interruptible, _open, _print_json

__all__ = ["inspect", "render"]

LISTED = (
    ("tools", "tools", "list_tools"),
    ("prompts", "prompts", "list_prompts"),
    ("resources", "resources", "list_resources"),
    ("resources", "resourceTemplates", "list_resource_templates"),
)
"""(the capability that declares them, the page's key, the session's method listing them)"""


@click.command(short_help="Print what an MCP server offers (URL or COMMAND).")
@_client_options
@click.option("--json", "as_json", is_flag=True, help="Print it all as one JSON object (the full definitions).")
@_interruptible
def inspect(server: tuple[str, ...], mode: str, timeout: float, token_env: str | None, as_json: bool) -> None:
    """Print what the MCP server at URL (Streamable HTTP) or started by COMMAND offers: its name and
    protocol version, capabilities and extensions, instructions, tools (with their parameters),
    prompts, resources and resource templates.

    \b
    Examples:
      mcpsync inspect -- mcpsync serve
      mcpsync inspect http://127.0.0.1:8000/mcp --json
      mcpsync inspect -- npx -y @modelcontextprotocol/server-everything
    """
    from ..errors import McpsyncError

    with _open(server, mode, timeout, token_env) as session:
        page: dict[str, Any] = {
            "serverInfo": session.server_info,
            "protocolVersion": session.protocol_version,
            "capabilities": session.server_capabilities,
            "instructions": session.instructions,
        }
        try:
            for capability, key, method in LISTED:
                page[key] = getattr(session, method)() if capability in session.server_capabilities else []
        except McpsyncError as exc:
            raise _ClientFailure(str(exc)) from exc
    if as_json:
        _print_json(page)
        return
    for line in render(page):
        click.echo(line)


def render(page: dict[str, Any]) -> list[str]:
    """The page's lines: a heading for the server, then a section per kind of entry."""
    info = page.get("serverInfo") or {}
    lines = [f"{info.get('name', '?')} {info.get('version', '')}".rstrip() + f"  (MCP {page.get('protocolVersion')})"]
    for key in ("title", "description", "websiteUrl"):
        if info.get(key):
            lines.append(f"  {info[key]}")
    capabilities = dict(page.get("capabilities") or {})
    extensions = capabilities.pop("extensions", None) or {}
    lines.append("capabilities: " + (", ".join(_capability(name, value) for name, value in capabilities.items()) or "none"))
    if extensions:
        lines.append("extensions: " + ", ".join(extensions))
    if page.get("instructions"):
        lines.append("instructions:")
        lines.extend(f"  {line}" for line in str(page["instructions"]).strip().splitlines())
    lines.extend(_section("tools", [(_signature(tool), _summary(tool)) for tool in page.get("tools", ())]))
    lines.extend(_section("prompts", [(_prompt_signature(prompt), _summary(prompt)) for prompt in page.get("prompts", ())]))
    lines.extend(_section("resources", [(_resource(resource, "uri"), _summary(resource)) for resource in page.get("resources", ())]))
    templates = page.get("resourceTemplates", ())
    lines.extend(_section("resource templates", [(_resource(template, "uriTemplate"), _summary(template)) for template in templates]))
    return lines


def _capability(name: str, value: Any) -> str:
    flags = [flag for flag, on in value.items() if on is True] if isinstance(value, dict) else []
    return f"{name} ({', '.join(flags)})" if flags else name


def _section(title: str, rows: Iterable[tuple[str, str]]) -> list[str]:
    rows = list(rows)
    lines = ["", f"{title} ({len(rows)}):"]
    if not rows:
        return [*lines, "  none"]
    width = min(max(len(left) for left, _ in rows), 60)
    for left, right in rows:
        lines.append(f"  {left:<{width}}  {right}".rstrip() if len(left) <= width else f"  {left}\n  {'':<{width}}  {right}".rstrip())
    return lines


def _summary(entry: dict[str, Any]) -> str:
    text = (entry.get("title") or entry.get("description") or "").strip().splitlines()
    return text[0] if text else ""


def _signature(tool: dict[str, Any]) -> str:
    """`name(a: string, b?: integer = 3) -> {...}`, read from the tool's schemas."""
    schema = tool.get("inputSchema") or {}
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    parameters = []
    for name, spec in properties.items():
        shown = f"{name}{'' if name in required else '?'}: {_type(spec)}"
        if isinstance(spec, dict) and "default" in spec:
            shown += f" = {json.dumps(spec['default'], ensure_ascii=False)}"
        parameters.append(shown)
    returns = f" -> {_type(tool['outputSchema'])}" if isinstance(tool.get("outputSchema"), dict) else ""
    return f"{tool.get('name', '?')}({', '.join(parameters)}){returns}"


def _type(spec: Any, depth: int = 0) -> str:
    """A JSON Schema as a short type: `string`, `integer[]`, `"a"|"b"`, `Point`, `{sum: integer}`."""
    if not isinstance(spec, dict):
        return "any"
    if "enum" in spec and isinstance(spec["enum"], list):
        return "|".join(json.dumps(value, ensure_ascii=False) for value in spec["enum"][:6]) + ("|..." if len(spec["enum"]) > 6 else "")
    if "const" in spec:
        return json.dumps(spec["const"], ensure_ascii=False)
    if isinstance(spec.get("$ref"), str):
        return str(spec["$ref"]).rsplit("/", 1)[-1]
    for combinator in ("anyOf", "oneOf"):
        if isinstance(spec.get(combinator), list):
            return "|".join(_type(option, depth) for option in spec[combinator])
    kind = spec.get("type")
    if isinstance(kind, list):
        return "|".join(str(each) for each in kind)
    if kind == "array":
        return f"{_type(spec.get('items'), depth)}[]"
    if kind == "object" and isinstance(spec.get("title"), str):
        return str(spec["title"])
    properties = spec.get("properties")
    if kind == "object" and isinstance(properties, dict) and properties and depth < 2:
        shown = [f"{name}: {_type(value, depth + 1)}" for name, value in list(properties.items())[:4]]
        return "{" + ", ".join(shown) + (", ..." if len(properties) > 4 else "") + "}"
    return str(kind) if kind else "any"


def _prompt_signature(prompt: dict[str, Any]) -> str:
    arguments = [f"{argument.get('name', '?')}{'' if argument.get('required') else '?'}" for argument in prompt.get("arguments") or ()]
    return f"{prompt.get('name', '?')}({', '.join(arguments)})"


def _resource(entry: dict[str, Any], key: str) -> str:
    mime = f"  [{entry['mimeType']}]" if entry.get("mimeType") else ""
    return f"{entry.get(key, '?')}{mime}"
