"""Finding the user's `Server` or `Service` from a command-line target.

Strategy: a target is `path/to/file.py`, `package.module`, either followed by `:attr`. The attribute
may be a `Server`, a `Service`, or a no-argument factory returning one. Without `:attr`, the module
must hold exactly one `Server` (or, failing that, exactly one `Service`) at top level. Every failure
is a `TargetError` that says what was looked for and where; when the user's own code raised (importing
the module, calling the factory), it also shows where: the user's frames, file:line and source line,
without the loader's and importlib's own (`_where`).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

from ..catalog.service import Service
from ..errors import McpsyncError
from ..server import Server

Servable = Server | Service
T = TypeVar("T")

MAX_FRAMES = 12
"""The user's frames shown for a failed import, the innermost ones (a deep recursion has hundreds)."""
_IMPORTLIB = os.path.dirname(importlib.__file__) + os.sep


class TargetError(McpsyncError):
    """The command-line target could not be loaded or is not a Server or Service."""


def load_target(target: str) -> Servable:
    module_part, _, attr = target.partition(":") if not _is_windows_drive(target) else (target, "", "")
    module = _load_module(module_part)
    if attr:
        return _resolve_attr(module, module_part, attr, target)
    return _find_single(module, target)


def _is_windows_drive(target: str) -> bool:
    return len(target) > 2 and target[1] == ":" and target[2] in "\\/"


def _load_module(spec: str) -> ModuleType:
    if spec.endswith(".py") or os.sep in spec or "/" in spec:
        path = os.path.abspath(spec)
        if not os.path.isfile(path):
            raise TargetError(f"no such file: {spec}")
        name = "_mcpsync_target_" + os.path.splitext(os.path.basename(path))[0]
        file_spec = importlib.util.spec_from_file_location(name, path)
        if file_spec is None or file_spec.loader is None:
            raise TargetError(f"cannot import {spec}")
        module = importlib.util.module_from_spec(file_spec)
        sys.modules[name] = module
        directory = os.path.dirname(path)
        if directory not in sys.path:
            sys.path.insert(0, directory)  # so the file can import its neighbours
        loader = file_spec.loader
        _execute(lambda: loader.exec_module(module), spec)
        return module
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    return _execute(lambda: importlib.import_module(spec), spec)


def _execute(load: Callable[[], T], spec: str) -> T:
    try:
        return load()
    except ModuleNotFoundError as exc:
        raise TargetError(f"cannot import {spec}: {exc}{_where(exc)}") from exc
    except Exception as exc:
        raise TargetError(f"importing {spec} failed: {type(exc).__name__}: {exc}{_where(exc)}") from exc


def _where(exc: BaseException) -> str:
    """Where the user's code raised `exc`, as lines to append to the message: the frames of its
    traceback but the loader's and importlib's (the innermost MAX_FRAMES), as a Python traceback shows
    them, and for a SyntaxError the offending line with its caret. Empty when no frame is the
    user's (a module that is simply not there)."""
    import traceback  # only on failure: a served target never pays for it

    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if _is_users(frame.filename)]
    lines = []
    if len(frames) > MAX_FRAMES:
        lines.append(f"  ... {len(frames) - MAX_FRAMES} outer frames left out\n")
        frames = frames[-MAX_FRAMES:]
    for frame in frames:  # as a traceback shows them, without its carets
        lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}\n')
        if frame.line:
            lines.append(f"    {frame.line}\n")
    if isinstance(exc, SyntaxError) and exc.filename is not None:
        lines += traceback.format_exception_only(exc)[:-1]  # its file, line and caret; the message is said already
    return ("\n" + "".join(lines).rstrip("\n")) if lines else ""


def _is_users(filename: str) -> bool:
    """Whether a frame is the user's code (or code it called): not this loader's, and not importlib's
    (its frozen bootstrap's frames stand between a module and each module it imports)."""
    return not (filename.startswith("<frozen ") or filename == __file__ or filename.startswith(_IMPORTLIB))


def _resolve_attr(module: ModuleType, module_part: str, attr: str, target: str) -> Servable:
    """`attr` of the loaded module; messages name the module as the user wrote it (notes.py),
    not by the private name a file is imported under."""
    value: object = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise TargetError(f"{target}: {module_part} has no attribute {attr!r}")
        value = getattr(value, part)
    if isinstance(value, (Server, Service)):
        return value
    if callable(value):
        try:
            produced = value()
        except Exception as exc:
            raise TargetError(f"{target}: calling {attr}() failed: {type(exc).__name__}: {exc}{_where(exc)}") from exc
        if isinstance(produced, (Server, Service)):
            return produced
        raise TargetError(f"{target}: {attr}() returned {type(produced).__name__}, not a Server or Service")
    raise TargetError(f"{target}: {attr} is a {type(value).__name__}, not a Server or Service")


def _find_single(module: ModuleType, target: str) -> Servable:
    for kind in (Server, Service):
        found = {id(v): (k, v) for k, v in vars(module).items() if isinstance(v, kind)}
        if len(found) == 1:
            return next(iter(found.values()))[1]
        if len(found) > 1:
            names = ", ".join(sorted(k for k, _ in found.values()))
            raise TargetError(f"{target} defines several {kind.__name__} objects ({names}); name one as {target}:NAME")
    raise TargetError(f"{target} defines no Server or Service at top level; name one as {target}:NAME")
