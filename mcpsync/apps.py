"""MCP Apps (the `io.modelcontextprotocol/ui` extension, SEP-1865): a tool that a host shows with an
interactive page of the server's, rendered in a sandboxed frame beside the conversation (Claude,
ChatGPT, VS Code, Cursor and M365 Copilot render them).

Two entries make an app: an HTML page served as a `ui://` resource of MIME type
`text/html;profile=mcp-app` (`add_page`), whose `_meta.ui` tells the host what the page may load
(its Content Security Policy's domains) and use (camera, microphone, geolocation, clipboard); and a
tool whose `_meta.ui.resourceUri` names the page (`tool_meta`). The page receives the tool's result
(its `structuredContent` above all) from the host. A host that did not negotiate the extension
sees an ordinary tool and its text: so a tool's text result should stand on its own.
`UI_EXTENSION` advertises the extension (`Server(extensions=[apps.UI_EXTENSION])`), and
`client_renders_apps(ctx)` says whether this request's client declared it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .catalog.context import Context
from .catalog.extension import Extension
from .catalog.service import Resource, Service

__all__ = ["APP_MIME_TYPE", "UI", "UI_EXTENSION", "add_page", "client_renders_apps", "tool_meta"]

UI = "io.modelcontextprotocol/ui"
"""The extension's id."""
APP_MIME_TYPE = "text/html;profile=mcp-app"
"""The MIME type of an app's page."""
UI_EXTENSION = Extension(UI, {"mimeTypes": [APP_MIME_TYPE]})
"""The extension, as a server offers it."""
CSP_KEYS = {"connect_domains": "connectDomains", "resource_domains": "resourceDomains", "frame_domains": "frameDomains", "base_uri_domains": "baseUriDomains"}
PERMISSIONS = ("camera", "microphone", "geolocation", "clipboardWrite")
ORIGIN_SCHEMES = ("https://", "http://", "wss://", "ws://")


def tool_meta(resource_uri: str, *, visibility: Sequence[str] | None = None) -> dict[str, Any]:
    """A tool's `_meta` linking it to its page (`@service.tool(meta=apps.tool_meta("ui://..."))`);
    `visibility` ("model", "app") says who may call it: the model, the page, or both (the default).

    Raises:
        ValueError: a URI that is not `ui://`, or another visibility.
    """
    if not resource_uri.startswith("ui://"):
        raise ValueError(f"an app's page is a ui:// resource, not {resource_uri!r}")
    ui: dict[str, Any] = {"resourceUri": resource_uri}
    if visibility is not None:
        unknown = set(visibility) - {"model", "app"}
        if unknown or not visibility:
            raise ValueError(f"visibility is 'model', 'app' or both, not {list(visibility)!r}")
        ui["visibility"] = list(visibility)
    return {"ui": ui}


def add_page(
    service: Service,
    uri: str,
    page: str | Callable[[], str],
    *,
    name: str,
    description: str | None = None,
    csp: Mapping[str, Sequence[str]] | None = None,
    permissions: Sequence[str] = (),
    prefers_border: bool | None = None,
    domain: str | None = None,
) -> None:
    """Serve an app's page at `uri` (a `ui://` URI): `page` is its HTML, or a function making it.
    `csp` names the origins it may reach, by kind (`connect_domains`, `resource_domains`,
    `frame_domains`, `base_uri_domains`: none given, it reaches nothing outside itself);
    `permissions` what it may use (`camera`, `microphone`, `geolocation`, `clipboardWrite`);
    `prefers_border` and `domain` are hints to the host.

    Raises:
        ValueError: a URI that is not `ui://`, an unknown CSP kind or permission, or a domain
            that is not an origin (`https://...`).
    """
    if not uri.startswith("ui://"):
        raise ValueError(f"an app's page is a ui:// resource, not {uri!r}")
    ui: dict[str, Any] = {}
    if csp:
        unknown = set(csp) - set(CSP_KEYS)
        if unknown:
            raise ValueError(f"the CSP kinds are {', '.join(CSP_KEYS)}, not {sorted(unknown)}")
        for kind, origins in csp.items():
            if isinstance(origins, str) or not all(isinstance(origin, str) and origin.startswith(ORIGIN_SCHEMES) for origin in origins):
                raise ValueError(f"{kind}: a list of origins such as 'https://api.example.com'")
        ui["csp"] = {CSP_KEYS[kind]: list(origins) for kind, origins in csp.items()}
    if permissions:
        unknown = set(permissions) - set(PERMISSIONS)
        if unknown:
            raise ValueError(f"the permissions are {', '.join(PERMISSIONS)}, not {sorted(unknown)}")
        ui["permissions"] = {permission: {} for permission in permissions}
    if prefers_border is not None:
        ui["prefersBorder"] = prefers_border
    if domain is not None:
        ui["domain"] = domain
    read = page if callable(page) else (lambda: page)
    service.add_resource(_Page(read, uri, name=name, description=description, mime_type=APP_MIME_TYPE, meta={"ui": ui} if ui else None))


class _Page(Resource):
    """An app's page: its `_meta.ui` is on the resource as listed and on what a read gives (where
    a host reads the page's CSP and permissions when it renders it)."""

    def read(self, uri: str, variables: dict[str, str | list[str]], ctx: Context) -> list[dict[str, Any]]:
        contents = super().read(uri, variables, ctx)
        return [{**item, "_meta": self.meta} for item in contents] if self.meta else contents


def client_renders_apps(ctx: Context) -> bool:
    """Whether this request's client declared the extension with the page's MIME type (a tool
    may then say less in text, the page saying the rest)."""
    extensions = (ctx.client_capabilities or {}).get("extensions")
    declared = extensions.get(UI) if isinstance(extensions, dict) else None
    return isinstance(declared, dict) and APP_MIME_TYPE in (declared.get("mimeTypes") or ())
