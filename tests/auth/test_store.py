"""The token stores: the file store's permissions, atomic replacement and refusal of bad files."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from mcpsync.auth.client.store import FileTokenStore, MemoryTokenStore, TokenStore, default_directory

from .._timeouts import LONG


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_file_store_round_trip_and_permissions(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path / "deep" / "tokens")
    assert store.load("https://mcp.example.com/mcp") is None
    store.save("https://mcp.example.com/mcp", {"tokens": {"access_token": "abc"}})
    assert store.load("https://mcp.example.com/mcp") == {"tokens": {"access_token": "abc"}}
    path = store.path_for("https://mcp.example.com/mcp")
    assert mode(store.directory) == 0o700 and mode(path) == 0o600
    assert "mcp.example.com" not in path.name
    assert store.delete("https://mcp.example.com/mcp") is True
    assert store.delete("https://mcp.example.com/mcp") is False and store.load("https://mcp.example.com/mcp") is None


def test_a_wider_directory_is_narrowed(tmp_path: Path) -> None:
    directory = tmp_path / "tokens"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)
    FileTokenStore(directory).save("k", {"a": 1})
    assert mode(directory) == 0o700


def test_keys_do_not_collide(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path)
    store.save("https://a.example/mcp", {"n": 1})
    store.save("https://b.example/mcp", {"n": 2})
    assert store.load("https://a.example/mcp") == {"n": 1} and store.load("https://b.example/mcp") == {"n": 2}


def test_replacement_is_atomic_under_concurrent_readers(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path)
    store.save("k", {"n": 0, "pad": "x" * 50_000})
    stop = threading.Event()
    seen: list[object] = []

    def read() -> None:
        while not stop.is_set():
            value = store.load("k")
            seen.append(value["n"] if value is not None else None)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(1, 60):
            store.save("k", {"n": n, "pad": "x" * 50_000})
    finally:
        stop.set()
        reader.join(LONG)
    assert seen and None not in seen  # never a missing or half-written file
    assert [p.name for p in tmp_path.iterdir()] == [store.path_for("k").name]  # no temporary left behind


def test_unreadable_files_load_as_none(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = FileTokenStore(tmp_path)
    store.save("k", {"secret": "do-not-log-me"})
    store.path_for("k").write_text("{not json do-not-log-me")
    assert store.load("k") is None
    store.path_for("k").write_text(json.dumps(["a list"]))
    assert store.load("k") is None
    assert "do-not-log-me" not in caplog.text


def test_default_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert default_directory() == tmp_path / "mcpsync" / "tokens"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert default_directory() == Path.home() / ".config" / "mcpsync" / "tokens"


def test_memory_store_keeps_copies() -> None:
    store = MemoryTokenStore()
    value = {"tokens": {"access_token": "a"}}
    store.save("k", value)
    value["tokens"]["access_token"] = "changed"
    loaded = store.load("k")
    assert loaded == {"tokens": {"access_token": "a"}}
    assert loaded is not None
    loaded["tokens"] = None
    assert store.load("k") == {"tokens": {"access_token": "a"}}
    assert store.delete("k") and not store.delete("k")


def test_both_are_token_stores(tmp_path: Path) -> None:
    assert isinstance(MemoryTokenStore(), TokenStore) and isinstance(FileTokenStore(tmp_path), TokenStore)
