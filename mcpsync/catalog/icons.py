"""Icons a client may show beside a server, a tool, a prompt, a resource or a template (MCP
2025-11-25 and 2026-07-28; older handshake versions are sent none): each an `Icon`, or the same
as a mapping of the wire's keys.

Why checked when the entry is made: an icon is the one thing a client fetches on the server's
word, so a `src` that is not `https:`, `http:` or `data:` (a `file:` or `javascript:` URI, say) is
refused with the server's author there to see why, not passed on for every client to judge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Icon", "checked_icons"]

SCHEMES = ("https:", "http:", "data:")
THEMES = ("light", "dark")


@dataclass(frozen=True)
class Icon:
    """One icon: `src` (an `https:` URL, or a `data:` URI), its `mime_type` (`image/png`,
    `image/svg+xml`...), the `sizes` it is drawn at (`"48x48"`, `"any"` for a vector) and the
    `theme` ("light" or "dark") it is made for, if one."""

    src: str
    mime_type: str | None = None
    sizes: tuple[str, ...] = ()
    theme: str | None = None

    def wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"src": self.src}
        if self.mime_type:
            wire["mimeType"] = self.mime_type
        if self.sizes:
            wire["sizes"] = list(self.sizes)
        if self.theme:
            wire["theme"] = self.theme
        return wire


def checked_icons(icons: Iterable[Icon | Mapping[str, Any]], what: str) -> tuple[dict[str, Any], ...]:
    """The icons' wire form, each checked.

    Raises:
        ValueError: naming `what` and the icon, for a `src` that is not an `https:`, `http:` or
            `data:` URI, a `sizes` that is not a list of strings, a theme other than "light" or
            "dark", or a key the wire does not have.
        TypeError: `icons` is a string or holds something that is neither an `Icon` nor a mapping.
    """
    if isinstance(icons, (str, bytes)):
        raise TypeError(f"{what}: icons must be a list of Icon (or mappings), not a string")
    checked = []
    for icon in icons:
        if isinstance(icon, Mapping):
            unknown = set(icon) - {"src", "mimeType", "sizes", "theme"}
            if unknown:
                raise ValueError(f"{what}: an icon has keys the wire does not: {sorted(unknown)}")
            sizes = icon.get("sizes", ())
            if isinstance(sizes, str) or not all(isinstance(size, str) for size in sizes):
                raise ValueError(f"{what}: an icon's sizes must be a list of strings such as '48x48' or 'any'")
            icon = Icon(icon.get("src", ""), icon.get("mimeType"), tuple(sizes), icon.get("theme"))
        elif not isinstance(icon, Icon):
            raise TypeError(f"{what}: an icon must be an Icon or a mapping, not {type(icon).__name__}")
        if not isinstance(icon.src, str) or not icon.src.lower().startswith(SCHEMES):
            raise ValueError(f"{what}: an icon's src must be an https:, http: or data: URI, not {str(icon.src)[:80]!r}")
        if icon.theme is not None and icon.theme not in THEMES:
            raise ValueError(f"{what}: an icon's theme must be 'light' or 'dark', not {icon.theme!r}")
        if icon.mime_type is not None and not isinstance(icon.mime_type, str):
            raise ValueError(f"{what}: an icon's mime_type must be a string")
        checked.append(icon.wire())
    return tuple(checked)
