"""StaticTokens: tokens held by digest, the token file's format, and errors that never quote a token."""

from __future__ import annotations

import gc
import hashlib
from pathlib import Path

import pytest

from mcpsync.auth.resource.principal import Principal
from mcpsync.auth.resource.static import StaticTokens

ALICE = "alice-token-0123456789abcdef"
BOB = "bob.token_with~all+the/chars=="


def default_subject(token: str) -> str:
    return "token-" + hashlib.sha256(token.encode()).hexdigest()[:12]


def test_tokens_given_with_scopes_get_a_subject_from_their_digest() -> None:
    tokens = StaticTokens({ALICE: ["read", "write"], BOB: "read admin"})
    alice = tokens.verify(ALICE)
    assert alice is not None and alice.subject == default_subject(ALICE) and alice.scopes == {"read", "write"}
    bob = tokens.verify(BOB)
    assert bob is not None and bob.scopes == {"read", "admin"}
    assert tokens.verify("not-one-of-these-tokens") is None
    assert tokens.verify(ALICE[:-1]) is None


def test_a_principal_given_is_answered_as_is() -> None:
    principal = Principal(subject="ops", client_id="cli", scopes=frozenset({"admin"}))
    assert StaticTokens({ALICE: principal}).verify(ALICE) is principal


def test_the_tokens_themselves_are_not_kept() -> None:
    tokens = StaticTokens({ALICE: ["read"]})
    assert ALICE not in repr(tokens) and len(tokens) == 1
    seen: set[int] = set()
    todo: list[object] = [tokens]
    while todo:  # everything reachable from the verifier: no string or bytes holds the token
        item = todo.pop()
        if id(item) in seen or isinstance(item, type):
            continue
        seen.add(id(item))
        assert not (isinstance(item, str) and ALICE in item) and not (isinstance(item, bytes) and ALICE.encode() in item)
        todo.extend(gc.get_referents(item))
    assert len(seen) > 3


@pytest.mark.parametrize(("token", "problem"), [
    ("short-token", "shorter than 16"),
    ("has spaces in the token!", "characters"),
    ("quote\"in-the-token-here", "characters"),
    ("=leading-padding-is-not-b64token", "characters"),
    ("ünïcode-tokens-are-not-b64", "characters"),
])
def test_unusable_tokens_in_the_mapping_are_refused_without_quoting_them(token: str, problem: str) -> None:
    with pytest.raises(ValueError) as caught:
        StaticTokens({ALICE: ["read"], token: ["read"]})
    assert problem in str(caught.value) and "static token 2" in str(caught.value)
    assert token not in str(caught.value)


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "tokens.txt"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_the_file_format(tmp_path: Path) -> None:
    path = write(tmp_path, f"""\ufeff# tokens for the staging server

{ALICE} sub=alice client_id=laptop read write
   {BOB}   tools:call   # bob's CI token; the rest of the line is a comment
""")
    tokens = StaticTokens.from_file(path)
    alice = tokens.verify(ALICE)
    assert alice == Principal(subject="alice", client_id="laptop", scopes=frozenset({"read", "write"}))
    bob = tokens.verify(BOB)
    assert bob is not None and bob.subject == default_subject(BOB) and bob.client_id is None and bob.scopes == {"tools:call"}
    assert len(tokens) == 2


@pytest.mark.parametrize(("text", "line", "problem"), [
    ("# one\nabc123\n", 2, "shorter than 16"),
    (f"{ALICE}\n\nbad!token!characters!here\n", 3, "characters"),
    (f"{ALICE} read\n{BOB}\n{ALICE} write\n", 3, "the same token as line 1"),
    (f"{ALICE} sub=a sub=b\n", 1, "sub= is given twice"),
    (f"{ALICE} client_id=\n", 1, "client_id= needs a value"),
])
def test_file_errors_name_path_and_line_never_the_token(tmp_path: Path, text: str, line: int, problem: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ValueError) as caught:
        StaticTokens.from_file(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: ") and problem in message
    for token in (ALICE, BOB, "abc123", "bad!token!characters!here"):
        assert token not in message


def test_a_file_that_is_not_utf8_or_has_no_tokens_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"tokens\.txt: not UTF-8"):
        StaticTokens.from_file(write(tmp_path, b"\xff\xfe" + ALICE.encode()))
    with pytest.raises(ValueError, match=r"tokens\.txt: no tokens"):
        StaticTokens.from_file(write(tmp_path, "# nothing here\n\n"))


def test_a_missing_file_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        StaticTokens.from_file(tmp_path / "absent.txt")
