"""What one process's tasks may take: `TaskLimits`, one frozen value the runner is given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TaskLimits:
    """What one process's tasks may take. The counts of kept tasks are the store's, so they hold
    across the replicas sharing it."""

    max_running: int = 32
    """Tasks whose functions run at once in this process; more wait for a worker."""
    max_running_per_owner: int | None = None
    """Of those, one caller's (one principal, one session of an open endpoint): its other tasks wait
    for one of its own to end, so a caller filling the pool does not hold up anyone else's. None: half
    of `max_running` (at least one)."""
    max_waiting: int = 1024
    """Tasks created but waiting for a worker; past it a call that would make one is refused."""
    max_kept: int = 10_000
    """Tasks kept (running or finished, until their TTL ends), across the store."""
    max_kept_per_owner: int = 1_000
    """Of those, held by one caller (one principal; every caller of an open endpoint is one)."""
    default_ttl_ms: int = 3_600_000
    """How long a finished task's result is kept when the client asks for no TTL (1 hour)."""
    max_ttl_ms: int = 86_400_000
    """The longest TTL granted (1 day): a client asking for more gets this."""
    poll_interval_ms: int = 500
    """The polling pace suggested to clients."""
    max_result_bytes: int = 4 * 1024 * 1024
    """The largest result a task may keep (as JSON); a bigger one fails the task saying so. With the
    caps it bounds what one caller holds: `max_kept_per_owner` results of this size at most."""
    lease: float = 30.0
    """Seconds a running task's process vouches for it; a task unfinished past it has lost its process."""

    def __post_init__(self) -> None:
        if self.max_running_per_owner is not None and self.max_running_per_owner < 1:
            raise ValueError("TaskLimits.max_running_per_owner must be at least 1")
        for name in ("max_running", "max_kept", "max_kept_per_owner", "default_ttl_ms", "max_ttl_ms", "poll_interval_ms",
                     "max_result_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"TaskLimits.{name} must be at least 1")
        if self.default_ttl_ms > self.max_ttl_ms:
            raise ValueError("TaskLimits.default_ttl_ms must not exceed max_ttl_ms")
        if self.max_waiting < 0:
            raise ValueError("TaskLimits.max_waiting must be at least 0")
        if not self.lease > 0:
            raise ValueError("TaskLimits.lease must be positive")

    @property
    def running_share(self) -> int:
        """How many of one caller's tasks run at once (`max_running_per_owner`, or its default)."""
        return self.max_running_per_owner if self.max_running_per_owner is not None else max(1, self.max_running // 2)

    def granted_ttl(self, requested: Any) -> int:
        """The TTL a client's request gets: its own, within bounds, else the default."""
        if isinstance(requested, int) and not isinstance(requested, bool) and requested > 0:
            return min(requested, self.max_ttl_ms)
        return self.default_ttl_ms
