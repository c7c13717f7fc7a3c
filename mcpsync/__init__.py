"""mcpsync: a synchronous, thread-based Model Context Protocol server, gateway and client.

No asyncio anywhere: build a `Server`, put `Service` objects with plain-function tools, prompts and
resources on it, and serve it over stdio (both protocol eras on one connection).
"""

from __future__ import annotations

import logging

__version__ = "0.1.0"

from .catalog.content import Audio as Audio  # noqa: E402
from .errors import CallTimeout as CallTimeout  # noqa: E402
from .errors import ConnectionLost as ConnectionLost  # noqa: E402
from .errors import InputRoundsExceeded as InputRoundsExceeded  # noqa: E402
from .errors import McpsyncError as McpsyncError  # noqa: E402
from .errors import MissingCallback as MissingCallback  # noqa: E402
from .errors import ProtocolViolation as ProtocolViolation  # noqa: E402
from .errors import SessionClosed as SessionClosed  # noqa: E402
from .catalog.content import Image as Image  # noqa: E402
from .catalog.content import ResourceNotFound as ResourceNotFound  # noqa: E402
from .catalog.content import ToolError as ToolError  # noqa: E402
from .catalog.content import ToolResult as ToolResult  # noqa: E402
from .catalog.context import AskCancelled as AskCancelled  # noqa: E402
from .catalog.context import AskTimeout as AskTimeout  # noqa: E402
from .catalog.context import ClientRefused as ClientRefused  # noqa: E402
from .catalog.context import Context as Context  # noqa: E402
from .catalog.questions import InputRequired as InputRequired  # noqa: E402
from .catalog.questions import Question as Question  # noqa: E402
from .catalog.service import Prompt as Prompt  # noqa: E402
from .catalog.service import Resource as Resource  # noqa: E402
from .catalog.service import ResourceTemplate as ResourceTemplate  # noqa: E402
from .catalog.service import Service as Service  # noqa: E402
from .catalog.service import Tool as Tool  # noqa: E402
from .engine.interceptors import Call as Call  # noqa: E402
from .engine.interceptors import Interceptor as Interceptor  # noqa: E402
from .engine.interceptors import ToolCall as ToolCall  # noqa: E402
from .protocol.jsonrpc import ErrorCode as ErrorCode  # noqa: E402
from .protocol.versions import Era as Era  # noqa: E402
from .protocol.jsonrpc import McpError as McpError  # noqa: E402
from .server import Server as Server  # noqa: E402

logging.getLogger("mcpsync").addHandler(logging.NullHandler())

_CLIENT_NAMES = frozenset({"ClientSession", "ListChanged", "ResourceUpdated", "connect"})


def __getattr__(name: str) -> object:
    # The client (subprocess, queues) is imported on first use, so `mcpsync serve` starts faster.
    if name in _CLIENT_NAMES:
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module 'mcpsync' has no attribute {name!r}")

__all__ = [
    "Audio",
    "Call",
    "CallTimeout",
    "ClientSession",
    "ConnectionLost",
    "ListChanged",
    "McpsyncError",
    "MissingCallback",
    "InputRoundsExceeded",
    "ProtocolViolation",
    "ResourceUpdated",
    "SessionClosed",
    "connect",
    "AskCancelled",
    "AskTimeout",
    "ClientRefused",
    "Context",
    "Era",
    "ErrorCode",
    "Image",
    "InputRequired",
    "Interceptor",
    "McpError",
    "Prompt",
    "Question",
    "Resource",
    "ResourceNotFound",
    "ResourceTemplate",
    "Server",
    "Service",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "__version__",
]
