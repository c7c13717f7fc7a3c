"""mcpsync: a synchronous, thread-based Model Context Protocol server, gateway and client.

No asyncio anywhere: build a `Server`, put `Service` objects with plain-function tools, prompts and
resources on it, and serve it over stdio (both protocol eras on one connection).
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

from ._version import __version__ as __version__
from .catalog.cache_hint import CacheHint as CacheHint
from .catalog.content import Audio as Audio
from .catalog.content import Image as Image
from .catalog.content import ResourceNotFound as ResourceNotFound
from .catalog.content import ToolError as ToolError
from .catalog.content import ToolResult as ToolResult
from .catalog.context import AskCancelled as AskCancelled
from .catalog.context import AskTimeout as AskTimeout
from .catalog.context import ClientRefused as ClientRefused
from .catalog.context import Context as Context
from .catalog.extension import Extension as Extension
from .catalog.icons import Icon as Icon
from .catalog.questions import InputRequired as InputRequired
from .catalog.questions import Question as Question
from .catalog.service import Prompt as Prompt
from .catalog.service import Resource as Resource
from .catalog.service import ResourceTemplate as ResourceTemplate
from .catalog.service import Service as Service
from .catalog.service import Tool as Tool
from .engine.interceptors import Call as Call
from .engine.interceptors import Interceptor as Interceptor
from .engine.interceptors import ToolCall as ToolCall
from .errors import CallCancelled as CallCancelled
from .errors import CallTimeout as CallTimeout
from .errors import ConnectionLost as ConnectionLost
from .errors import InputRoundsExceeded as InputRoundsExceeded
from .errors import InvalidTool as InvalidTool
from .errors import InvalidUrl as InvalidUrl
from .errors import McpsyncError as McpsyncError
from .errors import MissingCallback as MissingCallback
from .errors import ProtocolViolation as ProtocolViolation
from .errors import SessionClosed as SessionClosed
from .protocol.jsonrpc import ErrorCode as ErrorCode
from .protocol.jsonrpc import McpError as McpError
from .protocol.uri_template import UriTemplate as UriTemplate
from .protocol.versions import Era as Era
from .server import Server as Server

if TYPE_CHECKING:  # the names below are imported on first use (see __getattr__); checkers see them here
    from .client import ClientSession as ClientSession
    from .client import ListChanged as ListChanged
    from .client import ResourceUpdated as ResourceUpdated
    from .client import connect as connect
    from .transport.http.endpoint import WsgiTransport as WsgiTransport
    from .transport.http.serving import HttpServing as HttpServing

logging.getLogger("mcpsync").addHandler(logging.NullHandler())

# The client (subprocess, queues) and the HTTP transport (sockets) load when a program first names
# them, so `mcpsync serve` on stdio starts without them.
_LAZY_MODULES = {
    "ClientSession": "client",
    "ListChanged": "client",
    "ResourceUpdated": "client",
    "connect": "client",
    "HttpServing": "transport.http.serving",
    "WsgiTransport": "transport.http.endpoint",
}

if not TYPE_CHECKING:  # hidden from checkers, so a misspelt `mcpsync.name` is an error there, not `object`

    def __getattr__(name: str) -> object:
        module = _LAZY_MODULES.get(name)
        if module is None:
            raise AttributeError(f"module 'mcpsync' has no attribute {name!r}")
        return getattr(importlib.import_module(f".{module}", __name__), name)


__all__ = [
    "AskCancelled",
    "AskTimeout",
    "Audio",
    "CacheHint",
    "Call",
    "CallCancelled",
    "CallTimeout",
    "ClientRefused",
    "ClientSession",
    "ConnectionLost",
    "Context",
    "Era",
    "ErrorCode",
    "Extension",
    "HttpServing",
    "Icon",
    "Image",
    "InputRequired",
    "InputRoundsExceeded",
    "Interceptor",
    "InvalidTool",
    "InvalidUrl",
    "ListChanged",
    "McpError",
    "McpsyncError",
    "MissingCallback",
    "Prompt",
    "ProtocolViolation",
    "Question",
    "Resource",
    "ResourceNotFound",
    "ResourceTemplate",
    "ResourceUpdated",
    "Server",
    "Service",
    "SessionClosed",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "UriTemplate",
    "WsgiTransport",
    "__version__",
    "connect",
]
