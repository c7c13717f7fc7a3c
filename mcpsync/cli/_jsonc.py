"""Set one member of an object in a JSON or JSONC file's text (comments and trailing commas, as VS
Code's `mcp.json` has them), changing nothing else: every other byte of the file, its comments, its
key order, its indentation, stays as it was. What `mcpsync install` writes a server entry with.

How: a small parser that reads the text (strings, numbers, literals, `//` and `/* */` comments,
trailing commas) and notes where each object member's key and value begin and end; the edit is one
splice at those offsets, the new value indented like its neighbours. Then the result is read again
and checked to hold what was asked, so a file is never written wrong.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import McpsyncError

__all__ = ["JsoncError", "loads", "set_member"]

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}


class JsoncError(McpsyncError, ValueError):
    """The text is not JSON or JSONC, or not of the shape the edit needs; says where."""


@dataclass
class _Member:
    key: str
    value_start: int
    value_end: int
    value: Any  # an _Object, or the Python value


@dataclass
class _Object:
    start: int  # its `{`
    end: int  # after its `}`
    members: list[_Member] = field(default_factory=list)

    def find(self, key: str) -> _Member | None:
        found = [member for member in self.members if member.key == key]
        return found[-1] if found else None  # a repeated key: the last one counts, as JSON.parse has it


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def fail(self, why: str) -> JsoncError:
        line = self.text.count("\n", 0, self.at) + 1
        column = self.at - (self.text.rfind("\n", 0, self.at) + 1) + 1
        return JsoncError(f"line {line}, column {column}: {why}")

    def skip(self) -> None:
        """Past whitespace and comments."""
        text = self.text
        while self.at < len(text):
            char = text[self.at]
            if char in " \t\r\n\ufeff":
                self.at += 1
            elif text.startswith("//", self.at):
                end = text.find("\n", self.at)
                self.at = len(text) if end == -1 else end + 1
            elif text.startswith("/*", self.at):
                end = text.find("*/", self.at + 2)
                if end == -1:
                    raise self.fail("a /* comment is never closed")
                self.at = end + 2
            else:
                return

    def value(self) -> Any:
        self.skip()
        if self.at >= len(self.text):
            raise self.fail("a value was expected, and the text ended")
        char = self.text[self.at]
        if char == "{":
            return self.object()
        if char == "[":
            return self.array()
        if char == '"':
            return self.string()
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.at):
                self.at += len(word)
                return literal
        number = _NUMBER.match(self.text, self.at)
        if number is None:
            raise self.fail(f"{char!r} begins no value")
        self.at = number.end()
        return json.loads(number.group())

    def string(self) -> str:
        start = self.at
        at = start + 1
        while True:
            end = self.text.find('"', at)
            if end == -1:
                raise self.fail("a string is never closed")
            backslashes = len(self.text[at:end]) - len(self.text[at:end].rstrip("\\"))
            if backslashes % 2 == 0:
                break
            at = end + 1
        self.at = end + 1
        try:
            decoded: str = json.loads(self.text[start : end + 1])
        except ValueError as exc:
            raise self.fail(f"a string that is not JSON: {exc}") from None
        return decoded

    def object(self) -> _Object:
        made = _Object(self.at, self.at)
        self.at += 1
        while True:
            self.skip()
            if self.text.startswith("}", self.at):
                self.at += 1
                made.end = self.at
                return made
            if not self.text.startswith('"', self.at):
                raise self.fail("a member's name (a string) or '}' was expected")
            key = self.string()
            self.skip()
            if not self.text.startswith(":", self.at):
                raise self.fail("':' was expected after a member's name")
            self.at += 1
            self.skip()
            start = self.at
            value = self.value()
            made.members.append(_Member(key, start, self.at, value))
            self.skip()
            if self.text.startswith(",", self.at):
                self.at += 1
            elif not self.text.startswith("}", self.at):
                raise self.fail("',' or '}' was expected after a member")

    def array(self) -> list[Any]:
        items: list[Any] = []
        self.at += 1
        while True:
            self.skip()
            if self.text.startswith("]", self.at):
                self.at += 1
                return items
            items.append(self.value())
            self.skip()
            if self.text.startswith(",", self.at):
                self.at += 1
            elif not self.text.startswith("]", self.at):
                raise self.fail("',' or ']' was expected after an item")


def _parse(text: str) -> Any:
    reader = _Reader(text)
    found = reader.value()
    reader.skip()
    if reader.at != len(text):
        raise reader.fail("text after the value")
    return found


def _plain(value: Any) -> Any:
    if isinstance(value, _Object):
        return {member.key: _plain(member.value) for member in value.members}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def loads(text: str) -> Any:
    """The value of a JSON or JSONC text, as `json.loads` gives it."""
    return _plain(_parse(text))


def set_member(text: str, container: str, name: str, value: Any, *, replace: bool) -> tuple[str, bool]:
    """The text with `value` as member `name` of the top-level object's member `container` (made
    if absent; an empty or blank text is an empty object), and whether a member of that name was
    there (replaced only when `replace`).

    Raises:
        JsoncError: the text is not JSON/JSONC, its top level or `container` is not an object, or
            `name` is there and `replace` is false (`JsoncError.args[0]` says which).
    """
    if not text.strip():
        text = "{}\n"
    top = _parse(text)
    if not isinstance(top, _Object):
        raise JsoncError("the file's top level is not an object")
    holder = top.find(container)
    if holder is None:
        edited = _insert(text, top, container, {name: value})
        existed = False
    else:
        if not isinstance(holder.value, _Object):
            raise JsoncError(f"{container!r} in the file is not an object")
        current = holder.value.find(name)
        existed = current is not None
        if current is None:
            edited = _insert(text, holder.value, name, value)
        elif not replace:
            raise JsoncError(f"{container}.{name} is already there")
        else:
            indent = _line_indent(text, current.value_start)
            edited = text[: current.value_start] + _dumps(value, indent, _unit(text)) + text[current.value_end :]
    if _plain(_parse(edited)).get(container, {}).get(name) != json.loads(json.dumps(value)):  # the edit did what was asked
        raise JsoncError("the edited file did not read back as written")  # pragma: no cover - a bug here, never the file's
    return edited, existed


def _unit(text: str) -> str:
    """The file's indentation step: its first indented line's, else two spaces."""
    found = re.search(r"\n([ \t]+)\S", text)
    return found.group(1) if found else "  "


def _line_indent(text: str, at: int) -> str:
    line_start = text.rfind("\n", 0, at) + 1
    line = text[line_start:at]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _dumps(value: Any, indent: str, unit: str) -> str:
    """`value` as JSON indented by the file's own step (spaces or tabs), its lines after the
    first shifted to sit at `indent`."""
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def _member(name: str, value: Any, indent: str, unit: str) -> str:
    return f"{json.dumps(name, ensure_ascii=False)}: {_dumps(value, indent, unit)}"


def _insert(text: str, into: _Object, name: str, value: Any) -> str:
    unit = _unit(text)
    if into.members:
        last = into.members[-1]
        indent = _line_indent(text, text.rfind('"', 0, last.value_start))  # the last member's key's line
        if not indent and "\n" not in text[into.start : last.value_start]:  # all on one line: stay on it
            piece = f", {_member(name, value, '', unit)}"
        else:
            piece = f",\n{indent}{_member(name, value, indent, unit)}"
        return text[: last.value_end] + piece + text[last.value_end :]
    outer = _line_indent(text, into.start)
    indent = outer + unit
    piece = f"\n{indent}{_member(name, value, indent, unit)}"
    closing = into.end - 1
    before_close = text[into.start + 1 : closing]
    if before_close.strip() == "":  # `{}` or `{ }`: the closing brace goes on a line of its own
        return text[: into.start + 1] + piece + "\n" + outer + text[closing:]
    return text[: into.start + 1] + piece + text[into.start + 1 :]  # keep the comments inside, after it
