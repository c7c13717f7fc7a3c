"""Where logins are kept between runs: a three-method protocol, a file store and a memory store.

Strategy: the flow keeps one JSON-able dict per resource (its tokens, its registrations per
issuer) and asks a `TokenStore` to `load`, `save` and `delete` it by key (the resource URL). Any
keyring or database fits the protocol; two come with mcpsync:

- `FileTokenStore`: a file per key under `$XDG_CONFIG_HOME/mcpsync/tokens` (else
  `~/.config/mcpsync/tokens`), named by the SHA-256 of the key, so no URL reaches the file system
  and no two keys collide. The directory is made 0700 and each file 0600 from its creation (the
  temporary file is opened with that mode, never widened later); a save writes the temporary file
  in the same directory, flushes and fsyncs it, then `os.replace`s it over the old one, so a
  reader (or a crash) sees the old dict or the new one, never half of one. A file that cannot be
  read or decoded loads as None (logged without its content): the user logs in again.
- `MemoryTokenStore`: a dict behind a lock, for tests, scripts that must not touch the disk, and
  the client credentials grant (whose tokens are cheap to get again).

Stored dicts hold secrets (tokens, client secrets): nothing here logs a value, only keys' digests.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

log = logging.getLogger("mcpsync")

__all__ = ["FileTokenStore", "MemoryTokenStore", "TokenStore", "default_directory"]


@runtime_checkable
class TokenStore(Protocol):
    """Keeps one JSON-able dict per key (a resource URL). Called from any thread."""

    def load(self, key: str) -> dict[str, Any] | None:
        """The dict saved under `key`, or None."""
        ...

    def save(self, key: str, value: dict[str, Any]) -> None:
        """Keep `value` under `key`, replacing what was there."""
        ...

    def delete(self, key: str) -> bool:
        """Forget `key`; True if something was there."""
        ...


class MemoryTokenStore:
    """A `TokenStore` in memory: gone when the process ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"MemoryTokenStore({len(self._values)} keys)"

    def load(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            value = self._values.get(key)
            return copy.deepcopy(value) if value is not None else None

    def save(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._values[key] = copy.deepcopy(value)

    def delete(self, key: str) -> bool:
        with self._lock:
            return self._values.pop(key, None) is not None


def default_directory() -> Path:
    """`$XDG_CONFIG_HOME/mcpsync/tokens`, else `~/.config/mcpsync/tokens`."""
    base = os.environ.get("XDG_CONFIG_HOME")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "mcpsync" / "tokens"


class FileTokenStore:
    """A `TokenStore` of files: one per key, directory 0700, files 0600, replaced atomically.

    Args:
        directory: where the files go (default `default_directory()`); made on first save.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_directory()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self.directory)!r})"

    def path_for(self, key: str) -> Path:
        """The file that holds `key`."""
        return self.directory / (hashlib.sha256(key.encode("utf-8")).hexdigest()[:32] + ".json")

    def load(self, key: str) -> dict[str, Any] | None:
        path = self.path_for(key)
        try:
            with open(path, encoding="utf-8") as file:
                value = json.load(file)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("token store: %s cannot be read (%s); it is ignored", path.name, type(exc).__name__)
            return None
        if not isinstance(value, dict):
            log.warning("token store: %s does not hold an object; it is ignored", path.name)
            return None
        return value

    def save(self, key: str, value: dict[str, Any]) -> None:
        data = json.dumps(value, separators=(",", ":")).encode("utf-8")
        with self._lock:
            self._ensure_directory()
            path = self.path_for(key)
            fd, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=self.directory)  # mode 0600
            try:
                with os.fdopen(fd, "wb") as file:
                    os.fchmod(file.fileno(), 0o600)
                    file.write(data)
                    file.flush()
                    os.fsync(file.fileno())
                os.replace(temporary, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise

    def delete(self, key: str) -> bool:
        with self._lock:
            try:
                os.unlink(self.path_for(key))
            except FileNotFoundError:
                return False
            return True

    def _ensure_directory(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if (self.directory.stat().st_mode & 0o777) != 0o700:
            os.chmod(self.directory, 0o700)
