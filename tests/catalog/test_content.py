"""Tests for mcpsync.catalog.content: plain Python values → MCP content shapes."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from mcpsync.catalog.content import (
    Audio,
    Image,
    ToolError,
    ToolResult,
    dumps_text,
    is_block_list,
    is_content_block,
    prompt_messages,
    sniff_image,
    text_contents,
    to_block,
)

pytestmark = pytest.mark.timeout(30)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 8
GIF87 = b"GIF87a" + b"\x00" * 8
GIF89 = b"GIF89a" + b"\x00" * 8
WEBP = b"RIFF\x00\x00\x00\x00WEBPVP8 "


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.mark.parametrize("data, mime", [
    (PNG, "image/png"),
    (JPEG, "image/jpeg"),
    (GIF87, "image/gif"),
    (GIF89, "image/gif"),
    (WEBP, "image/webp"),
    (b"RIFF\x00\x00\x00\x00WAVEfmt ", None),
    (b"plain text", None),
    (b"", None),
    (b"\x89PN", None),
])
def test_sniff_image(data: bytes, mime: str | None) -> None:
    assert sniff_image(data) == mime


def test_image_and_audio_blocks_are_base64() -> None:
    assert Image(PNG).to_block() == {"type": "image", "data": b64(PNG), "mimeType": "image/png"}
    assert Image(JPEG, "image/jpeg").to_block()["mimeType"] == "image/jpeg"
    assert Audio(b"RIFFwav").to_block() == {"type": "audio", "data": b64(b"RIFFwav"), "mimeType": "audio/wav"}
    assert Audio(b"ID3", "audio/mpeg").to_block()["mimeType"] == "audio/mpeg"


def test_content_values_are_immutable() -> None:
    with pytest.raises(AttributeError):
        Image(PNG).data = b""  # type: ignore[misc]


TO_BLOCK = [
    pytest.param("text", {"type": "text", "text": "text"}, id="str"),
    pytest.param("", {"type": "text", "text": ""}, id="empty-str"),
    pytest.param(Image(PNG), {"type": "image", "data": b64(PNG), "mimeType": "image/png"}, id="image"),
    pytest.param(PNG, {"type": "image", "data": b64(PNG), "mimeType": "image/png"}, id="png-bytes"),
    pytest.param(bytearray(JPEG), {"type": "image", "data": b64(JPEG), "mimeType": "image/jpeg"}, id="jpeg-bytearray"),
    pytest.param(b"\x00\x01", {"type": "resource", "resource": {"uri": "data:application/octet-stream", "mimeType": "application/octet-stream", "blob": b64(b"\x00\x01")}}, id="other-bytes"),
    pytest.param({"type": "text", "text": "as is"}, {"type": "text", "text": "as is"}, id="text-block"),
    pytest.param({"type": "resource_link", "uri": "mem://a", "name": "a"}, {"type": "resource_link", "uri": "mem://a", "name": "a"}, id="link-block"),
    pytest.param({"type": "unknown", "x": 1}, {"type": "text", "text": '{"type":"unknown","x":1}'}, id="unknown-type-dict"),
    pytest.param({"a": "é/ü"}, {"type": "text", "text": '{"a":"é/ü"}'}, id="dict-as-json"),
    pytest.param(42, {"type": "text", "text": "42"}, id="int"),
    pytest.param([1, "a"], {"type": "text", "text": '[1,"a"]'}, id="list-as-json"),
    pytest.param(None, {"type": "text", "text": "null"}, id="none"),
]


@pytest.mark.parametrize("value, block", TO_BLOCK)
def test_to_block(value: Any, block: dict) -> None:
    assert to_block(value) == block


@pytest.mark.parametrize("value, expected", [
    (Image(PNG), True),
    (Audio(b"x"), True),
    ({"type": "text", "text": "a"}, True),
    ({"type": "image", "data": "", "mimeType": "image/png"}, True),
    ({"type": "audio"}, True),
    ({"type": "resource"}, True),
    ({"type": "resource_link"}, True),
    ({"type": "video"}, False),
    ({"text": "a"}, False),
    ("text", False),
    (PNG, False),
    (ToolResult(), False),
])
def test_is_content_block(value: Any, expected: bool) -> None:
    assert is_content_block(value) is expected


@pytest.mark.parametrize("value, expected", [
    ([Image(PNG)], True),
    ([{"type": "text", "text": "a"}, Audio(b"x")], True),
    ([], False),
    (["a", "b"], False),
    ([{"type": "text", "text": "a"}, 5], False),
    ((Image(PNG),), False),
])
def test_is_block_list(value: Any, expected: bool) -> None:
    assert is_block_list(value) is expected


@pytest.mark.parametrize("value, mime, contents", [
    ("hello", None, [{"uri": "u", "text": "hello"}]),
    ("hello", "text/plain", [{"uri": "u", "mimeType": "text/plain", "text": "hello"}]),
    (b"\x00\xff", None, [{"uri": "u", "mimeType": "application/octet-stream", "blob": b64(b"\x00\xff")}]),
    (bytearray(b"\x01"), "image/x-custom", [{"uri": "u", "mimeType": "image/x-custom", "blob": b64(b"\x01")}]),
    ({"a": 1}, None, [{"uri": "u", "mimeType": "application/json", "text": '{"a":1}'}]),
    ([1, 2], "application/vnd.x+json", [{"uri": "u", "mimeType": "application/vnd.x+json", "text": "[1,2]"}]),
])
def test_text_contents(value: Any, mime: str | None, contents: list) -> None:
    assert text_contents("u", value, mime) == contents


@pytest.mark.parametrize("value, messages", [
    ("hi", [{"role": "user", "content": {"type": "text", "text": "hi"}}]),
    ({"role": "assistant", "content": "ok"}, [{"role": "assistant", "content": {"type": "text", "text": "ok"}}]),
    ({"role": "user"}, [{"role": "user", "content": {"type": "text", "text": ""}}]),
    (["a", "b"], [{"role": "user", "content": {"type": "text", "text": "a"}}, {"role": "user", "content": {"type": "text", "text": "b"}}]),
    ([{"role": "user", "content": Image(PNG)}], [{"role": "user", "content": {"type": "image", "data": b64(PNG), "mimeType": "image/png"}}]),
    ({"no": "role"}, [{"role": "user", "content": {"type": "text", "text": '{"no":"role"}'}}]),
])
def test_prompt_messages(value: Any, messages: list) -> None:
    assert prompt_messages(value) == messages


@pytest.mark.parametrize("role", ["system", "tool", None])
def test_prompt_messages_reject_other_roles(role: Any) -> None:
    with pytest.raises(ValueError):
        prompt_messages({"role": role, "content": "x"})


def test_dumps_text_is_compact_utf8_json() -> None:
    assert dumps_text({"a": [1, 2.5, None, True], "s": "é/☃"}) == '{"a":[1,2.5,null,true],"s":"é/☃"}'


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [float("-inf")]])
def test_dumps_text_refuses_nan_and_infinities(value: Any) -> None:
    with pytest.raises((ValueError, OverflowError)):
        dumps_text(value)


def test_tool_result_defaults() -> None:
    result = ToolResult()
    assert (result.content, result.structured, result.is_error) == ([], None, False)
    assert ToolResult().content is not ToolResult().content


def test_tool_error_carries_its_message() -> None:
    assert str(ToolError("disk full")) == "disk full"
    assert issubclass(ToolError, Exception)
