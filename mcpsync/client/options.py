"""SessionOptions: a client session's settings as one value, for `connect()` and `ClientSession`.

Why: both take the same settings (the era mode, the deadline, the callbacks answering the server,
what the client says of itself); written once here, with their defaults, `connect()` passes the
value on instead of restating every keyword, and a program can build it once and connect many
times. The keywords of both still work: they build the value (an unknown one is a TypeError).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ._input_required import MAX_INPUT_ROUNDS
from ._server_requests import Handler

DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class SessionOptions:
    """A session's settings; each field is the `ClientSession` keyword of the same name."""

    mode: str = "auto"
    timeout: float = DEFAULT_TIMEOUT
    client_info: Mapping[str, Any] | None = None
    roots: Handler | None = None
    sampling: Handler | None = None
    elicitation: Handler | None = None
    on_log: Callable[[dict[str, Any]], None] | None = None
    on_change: Callable[[str, dict[str, Any]], None] | None = None
    on_lost: Callable[[Exception], None] | None = None
    log_level: str | None = None
    max_input_rounds: int = MAX_INPUT_ROUNDS
    elicitation_modes: Sequence[str] = ("form",)
    roots_list_changed: bool = False


def session_options(options: SessionOptions | None, **settings: Any) -> SessionOptions:
    """`options` (or the defaults) with the keywords given replacing its fields."""
    base = SessionOptions() if options is None else options
    return replace(base, **settings) if settings else base
