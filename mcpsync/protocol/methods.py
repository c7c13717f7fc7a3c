"""Which requests exist in which protocol era.

Strategy: vocabulary, not behaviour. The engine refuses a method its request's era does not have
(-32601) before anything runs, and tells a handshake-era connection that a 2026-07-28-only method is
simply not found there; these tables are the one place that decides it. (The engine's
`OPERATIONS` implements their union.)
"""

from __future__ import annotations

COMMON_METHODS = frozenset(
    {
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
        "tasks/get",
        "tasks/cancel",
    }
)
"""Requests both eras have (tasks from 2025-11-25 on in the handshake era, and in 2026-07-28 with
the `io.modelcontextprotocol/tasks` extension)."""

HANDSHAKE_ONLY_METHODS = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "tasks/result", "tasks/list"}
)
"""2024-11-05 .. 2025-11-25: the handshake, its keep-alive, per-connection state, and the 2025-11-25
task methods the extension dropped."""

MODERN_ONLY_METHODS = frozenset({"server/discover", "subscriptions/listen", "tasks/update"})
"""2026-07-28: discovery instead of a handshake, change streams instead of pushed notifications,
and the tasks extension's answers to a task's questions."""

HANDSHAKE_METHODS = COMMON_METHODS | HANDSHAKE_ONLY_METHODS
MODERN_METHODS = COMMON_METHODS | MODERN_ONLY_METHODS
