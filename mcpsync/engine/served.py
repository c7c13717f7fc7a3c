"""What the domain operations read of the server: the narrow context they run against.

Strategy: an operation needs the catalog and a few settings (how tools are filtered, how long a
page is, how `requestState` is sealed...), never the engine that dispatches it. Passing only these
keeps an operation testable without an engine and keeps the engine's own concerns (era checks,
interceptor hooks, result dressing, cache hints) out of its reach. One instance per engine; the
engine's settings are its fields, so a change (the CLI's page size, a new sealer) reaches every
operation at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..catalog.catalog import Catalog
from ..catalog.extension import Extension
from ..catalog.service import Tool
from ..tasks.runner import TaskRunner
from .interceptors import Interceptor
from .request_state import RequestStateSealer
from .seams import ForwardedTool
from .single_use import Claim, LocalClaims


@dataclass(slots=True)
class Served:
    catalog: Catalog
    server_info: dict[str, Any]
    """Named in the `initialize` result (and, by the engine, in every 2026-07-28 result)."""
    instructions: str | None
    """The server's own instructions; without them, the catalog's."""
    interceptors: tuple[Interceptor, ...]
    """`around_tool_call` wraps local tools; with one, a forwarded call runs synchronously."""
    tool_filter: Callable[[Tool], bool] | None
    """Hides tools from listing and calling (None: every tool is served)."""
    page_size: int
    request_states: RequestStateSealer
    """Seals the `requestState` of 2026-07-28 `input_required` results (see `mrtr`)."""
    ask_timeout: float
    """How long a function's question to a handshake-era client may wait for its answer."""
    single_use_state: bool = False
    """Every tool's `requestState` runs it once (as `Tool(single_use_state=True)` does for one)."""
    claim: Claim = field(default_factory=lambda: LocalClaims().claim)
    """Marks a single-use state used (`Store.claim`): this process's marks unless the engine is
    handed a store the replicas share (`Engine.use_claims`)."""

    extensions: dict[str, Extension] = field(default_factory=dict)
    """The extensions offered, by id (`Engine.add_extension`): advertised, and their methods answered."""
    extension_methods: dict[str, Extension] = field(default_factory=dict)
    """Each extension method's extension, by the method's name."""

    tasks: TaskRunner = field(default_factory=TaskRunner)
    """Runs the calls that become tasks and answers `tasks/*` (see `mcpsync.tasks`)."""

    def visible(self, tool: Tool) -> bool:
        """Whether `tool` is served (listed and callable) under the filter."""
        return self.tool_filter is None or self.tool_filter(tool)

    def single_use(self, tool: Tool | ForwardedTool) -> bool:
        """Whether a retry's `requestState` may run `tool` only once (its own mark, or the
        engine's setting; an upstream's tool has no mark of its own)."""
        return self.single_use_state or (isinstance(tool, Tool) and tool.single_use_state)
