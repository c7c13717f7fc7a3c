"""Extensions (SEP-2133): what a server offers beyond the core protocol, named by an id such as
`io.modelcontextprotocol/ui`, advertised in `capabilities.extensions` in both eras (the
`initialize` result, and `server/discover`), with methods of its own and the entries it brings.

An `Extension` is added to a `Server` (`Server(extensions=[...])` or `add_extension`), and the
engine then answers its methods as it answers the core ones, in the eras it is for (both unless
`eras` says otherwise), with the request's `Context` (whose `client_capabilities["extensions"]` say
what the client declared), its errors as the core's. mcpsync's own extensions are built this way:
`mcpsync.apps` (MCP Apps), and the 2026-07-28 form of tasks (`io.modelcontextprotocol/tasks`, an
extension there, advertised by the engine as one; its methods are the core ones that 2025-11-25,
where tasks are core, already answers).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..protocol.versions import Era
from .context import Context

if TYPE_CHECKING:
    from .service import Service

__all__ = ["Extension", "ExtensionMethod"]

ExtensionMethod = Callable[[dict[str, Any], Context], dict[str, Any]]
"""Answers one of an extension's methods: its params (without `_meta`) and the request's Context;
returns the result; raises `McpError` to answer an error."""

_ID = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+/[A-Za-z0-9][A-Za-z0-9._-]*")
"""A vendor prefix in reverse-DNS form, then a slash and the extension's name (SEP-2133)."""


@dataclass(frozen=True)
class Extension:
    """One extension a server offers: its `id` (`vendor.prefix/name`), the `settings` it
    advertises (`capabilities.extensions[id]`), the `methods` it answers (each name holding a
    `/`, none of the core protocol's), and the `services` whose entries it brings.

    Raises:
        ValueError: an id that is not `vendor.prefix/name`, or a method name without a `/`.
    """

    id: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    methods: Mapping[str, Callable[[dict[str, Any], Context], dict[str, Any]]] = field(default_factory=dict)  # ExtensionMethods
    services: Sequence[Service] = ()
    eras: frozenset[Era] = frozenset({Era.HANDSHAKE, Era.MODERN})
    """The eras it is advertised and its methods answered in (elsewhere a method is -32601)."""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not _ID.fullmatch(self.id):
            raise ValueError(f"an extension id is a reverse-DNS prefix, a slash and a name (io.modelcontextprotocol/ui), not {self.id!r}")
        if not self.eras or not all(isinstance(era, Era) for era in self.eras):
            raise ValueError(f"extension {self.id}: eras must name at least one Era")
        for method in self.methods:
            if not isinstance(method, str) or "/" not in method or method.startswith(("/", "notifications/")):
                raise ValueError(f"extension {self.id}: a method is named like 'prefix/verb', not {method!r}")
