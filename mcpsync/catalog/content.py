"""Turning what user functions return into MCP content.

Strategy: user code returns plain Python (str, bytes, dicts, dataclasses, numbers) or, when it wants
full control, the small value types below. These functions map them to the wire shapes of
`CallToolResult`, `GetPromptResult` messages and `ReadResourceResult` contents, and nothing else does.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import ujson

from ..errors import McpsyncError

CONTENT_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})

_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


@dataclass(frozen=True, slots=True)
class Image:
    """Image content: raw bytes, sent base64-encoded."""

    data: bytes
    mime_type: str = "image/png"

    def to_block(self) -> dict[str, Any]:
        return {"type": "image", "data": base64.b64encode(self.data).decode("ascii"), "mimeType": self.mime_type}


@dataclass(frozen=True, slots=True)
class Audio:
    """Audio content: raw bytes, sent base64-encoded."""

    data: bytes
    mime_type: str = "audio/wav"

    def to_block(self) -> dict[str, Any]:
        return {"type": "audio", "data": base64.b64encode(self.data).decode("ascii"), "mimeType": self.mime_type}


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool result spelled out: content blocks (or values mapped like a return value),
    optional structured content, and whether it reports an error."""

    content: list[Any] = field(default_factory=list)
    structured: Any = None
    is_error: bool = False


class ToolError(McpsyncError):
    """Raise from a tool to report a failure the model should see: becomes `isError: true` with
    this message, and no traceback is logged."""


class ResourceNotFound(McpsyncError, LookupError):
    """Raise from a resource function when the URI names nothing: the client gets its era's
    resource-not-found error (-32002 in the handshake era, -32602 with data.uri in 2026-07-28).
    A `FileNotFoundError` is answered the same way."""


def dumps_text(value: Any) -> str:
    return ujson.dumps(value, ensure_ascii=False, escape_forward_slashes=False, allow_nan=False)


def sniff_image(data: bytes) -> str | None:
    for magic, mime in _IMAGE_MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def is_content_block(value: Any) -> bool:
    return isinstance(value, (Image, Audio)) or (type(value) is dict and value.get("type") in CONTENT_TYPES)


def to_block(value: Any) -> dict[str, Any]:
    """One content block from a block-like value (str → text, bytes → image or blob)."""
    if isinstance(value, (Image, Audio)):
        return value.to_block()
    if type(value) is dict and value.get("type") in CONTENT_TYPES:
        return value
    if isinstance(value, str):
        return {"type": "text", "text": value}
    if isinstance(value, (bytes, bytearray)):
        data = bytes(value)
        mime = sniff_image(data)
        if mime is not None:
            return Image(data, mime).to_block()
        return {
            "type": "resource",
            "resource": {
                "uri": "data:application/octet-stream",
                "mimeType": "application/octet-stream",
                "blob": base64.b64encode(data).decode("ascii"),
            },
        }
    return {"type": "text", "text": dumps_text(value)}


def is_block_list(value: Any) -> bool:
    """A list meant as content: blocks, possibly mixed with strings (captions), at least one block."""
    if not isinstance(value, list) or not value:
        return False
    blocks = [is_content_block(item) for item in value]
    return any(blocks) and all(block or isinstance(item, str) for item, block in zip(value, blocks, strict=True))


def text_contents(uri: str, value: Any, mime_type: str | None) -> list[dict[str, Any]]:
    """`ReadResourceResult.contents` for what a resource function returned."""
    if isinstance(value, (bytes, bytearray)):
        entry = {"uri": uri, "blob": base64.b64encode(bytes(value)).decode("ascii")}
        entry["mimeType"] = mime_type or "application/octet-stream"
        return [entry]
    if isinstance(value, str):
        entry = {"uri": uri, "text": value}
        if mime_type:
            entry["mimeType"] = mime_type
        return [entry]
    return [{"uri": uri, "mimeType": mime_type or "application/json", "text": dumps_text(value)}]


def prompt_messages(value: Any) -> list[dict[str, Any]]:
    """`GetPromptResult.messages` for what a prompt function returned: a string (one user message),
    a dict with role and content, or a list of those."""
    items = value if isinstance(value, list) else [value]
    messages = []
    for item in items:
        if isinstance(item, dict) and "role" in item:
            role = item["role"]
            if role not in ("user", "assistant"):
                raise ValueError(f"prompt message role must be 'user' or 'assistant', not {role!r}")
            messages.append({"role": role, "content": to_block(item.get("content", ""))})
        else:
            messages.append({"role": "user", "content": to_block(item)})
    return messages
