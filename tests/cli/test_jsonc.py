"""The JSONC splice `mcpsync install` writes with: on texts with comments where a naive reader would
stumble (`//` and `/*` inside strings, escaped quotes and backslashes, a BOM, trailing commas, one
line, nested objects), the result reads back, by `json5` (an implementation nobody here wrote), as
the original plus the one member, and the original's text is all still there."""

from __future__ import annotations

from typing import Any

import json5
import pytest

from mcpsync.cli._jsonc import JsoncError, loads, set_member

ENTRY = {"command": "/usr/bin/python3", "args": ["-m", "mcpsync", "serve", "/a b/ü.py"], "env": {"K": "v\n\"q\""}}

TEXTS = [
    "",
    "{}",
    "\ufeff{}",
    '{"mcpServers": {}}',
    '{"mcpServers": {"a": {"url": "https://x.example/*not a comment*/"}}, "b": "// nor this"}',
    '{\n  "mcpServers": {\n    "a": {"command": "x\\\\", "args": ["\\"quoted\\""]},\n  },\n  // tail\n}\n',
    '{\n\t"mcpServers": {\n\t\t"a": {}\n\t}\n}\n',
    '/* head */ {"x": [1, 2.5e3, -0, true, false, null, {"y": {}}]} // end',
    '{"mcpServers": {"dup": {"v": 1}, "dup": {"v": 2}}}',
]


@pytest.mark.parametrize("text", TEXTS)
def test_the_member_is_added_and_nothing_else_changes(text: str) -> None:
    edited, existed = set_member(text, "mcpServers", "new", ENTRY, replace=False)
    assert not existed
    before: dict[str, Any] = json5.loads(text.lstrip("\ufeff")) if text.strip() else {}
    after = json5.loads(edited.lstrip("\ufeff"))
    assert after == {**before, "mcpServers": {**before.get("mcpServers", {}), "new": ENTRY}}
    assert loads(edited) == after
    stripped = text.strip()
    if stripped.endswith("}") and '"mcpServers"' in text:  # the old text is there, around the splice
        head = text[: text.index('"mcpServers"')]
        assert edited.startswith(head)


def test_replace_changes_the_one_value_and_a_repeated_key_counts_last() -> None:
    text = '{"mcpServers": {"dup": {"v": 1}, "dup": {"v": 2}, "z": 0}}'
    with pytest.raises(JsoncError, match="already there"):
        set_member(text, "mcpServers", "dup", {"v": 3}, replace=False)
    edited, existed = set_member(text, "mcpServers", "dup", {"v": 3}, replace=True)
    assert existed and edited.startswith('{"mcpServers": {"dup": {"v": 1}, "dup": ') and json5.loads(edited)["mcpServers"] == {"dup": {"v": 3}, "z": 0}


@pytest.mark.parametrize(("text", "why"), [
    ('{"a": 1 "b": 2}', "',' or '}'"),
    ('{"a": tru}', "begins no value"),
    ('{"a": "\\x"}', "not JSON"),
    ("{} {}", "text after the value"),
    ('{"a": 1', "',' or '}'"),
])
def test_what_is_not_json_is_refused_saying_where(text: str, why: str) -> None:
    with pytest.raises(JsoncError, match=why):
        set_member(text, "mcpServers", "x", {}, replace=False)


def test_a_tab_indented_file_gets_its_new_member_indented_with_tabs() -> None:
    edited, _ = set_member('{\n\t"mcpServers": {\n\t\t"a": {}\n\t}\n}\n', "mcpServers", "new", {"command": "x"}, replace=False)
    assert '\n\t\t"new": {\n\t\t\t"command": "x"\n\t\t}' in edited and "  " not in edited
