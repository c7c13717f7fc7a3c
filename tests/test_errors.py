"""The exception hierarchy: `except McpsyncError` catches whatever mcpsync raises on purpose, and
the builtin bases a user may already catch by stay.

Every module of the package is imported and searched, so an exception class added later outside
the hierarchy fails here without anyone having to list it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import mcpsync
from mcpsync import CallTimeout, McpError, McpsyncError, ResourceNotFound, SessionClosed, ToolError
from mcpsync.catalog.context import AskTimeout
from mcpsync.catalog.questions import NeedAnswers
from mcpsync.catalog.validation import InvalidArguments
from mcpsync.cli.config import ConfigError
from mcpsync.cli.loader import TargetError
from mcpsync.protocol.jsonrpc import EncodeError

# Not errors: control flow that must get past a tool's own `except Exception` (a BaseException).
NOT_ERRORS = {NeedAnswers}


def _package_exceptions() -> set[type[BaseException]]:
    """Every public exception class defined in a module of mcpsync (`__main__` runs the CLI)."""
    found = set()
    for module_info in pkgutil.walk_packages(mcpsync.__path__, "mcpsync."):
        if module_info.name.endswith("__main__"):
            continue
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__ and not name.startswith("_"):
                found.add(value)
    return found


def test_every_public_exception_of_the_package_is_a_mcpsync_error() -> None:
    exceptions = _package_exceptions()
    assert {ConfigError, TargetError, EncodeError, InvalidArguments} <= exceptions  # the search works
    assert sorted(e.__qualname__ for e in exceptions - NOT_ERRORS if not issubclass(e, McpsyncError)) == []


def test_every_exception_the_root_exports_is_a_mcpsync_error() -> None:
    exported = [getattr(mcpsync, name) for name in mcpsync.__all__]
    errors = [value for value in exported if inspect.isclass(value) and issubclass(value, BaseException)]
    assert len(errors) > 10
    assert [e.__name__ for e in errors if not issubclass(e, McpsyncError)] == []


@pytest.mark.parametrize(
    "error, builtin",
    [
        (ResourceNotFound, LookupError),
        (ConfigError, ValueError),
        (EncodeError, ValueError),
        (CallTimeout, TimeoutError),
        (AskTimeout, TimeoutError),
        (SessionClosed, RuntimeError),
    ],
)
def test_an_error_keeps_the_builtin_base_an_except_may_name(error: type[BaseException], builtin: type[BaseException]) -> None:
    assert issubclass(error, builtin) and issubclass(error, McpsyncError)


def test_a_tool_error_and_a_local_cancel_are_not_errors_the_peer_sent() -> None:
    assert not issubclass(ToolError, McpError)
    assert not issubclass(mcpsync.CallCancelled, McpError)
